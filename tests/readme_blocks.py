"""The README's fenced code blocks, found by the section that holds them, for the tests that run them
(tests/test_readme_install.py, tests/test_readme_examples.py): a test takes its block from the README's text,
so that the README cannot change without the test running the new text."""

from __future__ import annotations

import re
from dataclasses import dataclass

from support import REPO

README = REPO / "README.md"
_HEADING = re.compile(r"^#{1,6} (.+)$")
_FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    section: str  # the nearest heading above the block, without its `#`s
    language: str  # the fence's info string, "" when it has none
    text: str  # the lines between the fences, each ending in a newline
    line: int  # the 1-based line of the opening fence


def blocks() -> list[Block]:
    found: list[Block] = []
    section, opened, language, lines = "", 0, "", []
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), start=1):
        fence = _FENCE.match(line)
        if opened:
            if line == "```":
                found.append(Block(section, language, "".join(f"{text}\n" for text in lines), opened))
                opened, lines = 0, []
            else:
                lines.append(line)
        elif fence:
            opened, language = number, fence.group(1)
        elif heading := _HEADING.match(line):
            section = heading.group(1)
    return found


def blocks_in(section: str, language: str | None = None) -> list[Block]:
    """The blocks of one section (its heading's exact text), in order; an empty result fails loudly, since a
    renamed section must not turn a test into one that checks nothing."""
    chosen = [b for b in blocks() if b.section == section and language in (None, b.language)]
    assert chosen, f"README.md has no {language or ''} block under the heading {section!r}"
    return chosen
