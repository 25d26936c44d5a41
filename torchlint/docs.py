"""The rule reference: `rules/<code>.md`, shipped inside the wheel as `torchlint/_docs/`.

An editable install has no `_docs` folder; it reads the source tree's `rules/` instead.

A finding's `url` (JSON, SARIF's `helpUri`, the editor's link) must lead somewhere real: by default the
installed doc itself (a `file:` URL), which every install has; where a team publishes the docs, the
`TORCHLINT_DOCS_URL` template (`https://git.example.com/torchlint/blob/main/rules/{code}.md`) names them.
`torchlint rule CODE` prints the same doc.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

DOCS_URL_VARIABLE = "TORCHLINT_DOCS_URL"


def docs_folder() -> Path:
    package = Path(__file__).resolve().parent
    shipped = package / "_docs"
    return shipped if shipped.is_dir() else package.parent / "rules"


def rule_doc(code: str) -> str | None:
    """The rule's doc as a reader sees it (`torchlint rule`, the editor's hover, SARIF): its examples
    without the `# error` markers that make them tests (tests/test_rule_docs.py reads the files as
    written)."""
    path = docs_folder() / f"{code}.md"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    return _without_markers(text)


# `  # error`, `  # error: 12, 30`, `  # error: 5, fix: unsafe` at the end of an example's line.
_MARKER = re.compile(r"[ \t]+# error(?::[^\n]*)?$", re.MULTILINE)
_CODE_BLOCK = re.compile(r"^```python\n.*?^```$", re.MULTILINE | re.DOTALL)


def _without_markers(text: str) -> str:
    return _CODE_BLOCK.sub(lambda block: _MARKER.sub("", block.group(0)), text)


def rule_url(code: str) -> str:
    """Where the rule's doc is: `TORCHLINT_DOCS_URL` with `{code}` filled in, else the installed doc."""
    template = os.environ.get(DOCS_URL_VARIABLE)
    if template:
        return template.replace("{code}", code)
    return (docs_folder() / f"{code}.md").as_uri()


@dataclass(frozen=True)
class RuleSummary:
    """What a report that describes its rules (SARIF) says of one: from the doc's *What it does*."""

    short: str  # its first sentence
    full: str  # the whole section, as one paragraph per paragraph
    markdown: str  # the whole doc


_SECTION = re.compile(r"^## What it does\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def rule_summary(code: str) -> RuleSummary | None:
    text = rule_doc(code)
    if text is None:
        return None
    match = _SECTION.search(text)
    section = match.group(1) if match else ""
    paragraphs = [" ".join(p.split()) for p in section.strip().split("\n\n") if p.strip()]
    full = "\n\n".join(paragraphs)
    first = paragraphs[0] if paragraphs else ""
    short = _SENTENCE_END.split(first, maxsplit=1)[0]
    return RuleSummary(short, full, text)
