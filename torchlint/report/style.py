"""Colour for the text formats on a terminal, as ruff's: the path bold, the code bold red, `[*]` cyan; in a
fix's diff, added lines green and removed lines red.

`--color auto` (the default) colours only a terminal, and never when `NO_COLOR` is set (https://no-color.org);
`FORCE_COLOR` colours a pipe too; `always` and `never` decide alone. Machine formats are never coloured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TextIO

COLOR_CHOICES = ("auto", "always", "never")


@dataclass(frozen=True)
class Style:
    color: bool = False

    def _sgr(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def path(self, text: str) -> str:
        return self._sgr(text, "1")

    def code(self, text: str) -> str:
        return self._sgr(text, "1;31")

    def fixable(self, text: str) -> str:
        return self._sgr(text, "36")

    def gutter(self, text: str) -> str:
        return self._sgr(text, "1;34")

    def caret(self, text: str) -> str:
        return self._sgr(text, "1;31")

    def help(self, text: str) -> str:
        return self._sgr(text, "1;36")

    def note(self, text: str) -> str:
        return self._sgr(text, "1;92")

    def insertion(self, text: str) -> str:
        return self._sgr(text, "32")

    def insertion_sign(self, text: str) -> str:
        return self._sgr(text, "1;32")

    def deletion(self, text: str) -> str:
        return self._sgr(text, "31")

    def deletion_sign(self, text: str) -> str:
        return self._sgr(text, "1;31")


PLAIN = Style()


def wants_color(choice: str, out: TextIO, environ: dict[str, str] | None = None) -> bool:
    """Whether to colour `out` for `--color CHOICE`."""
    env = os.environ if environ is None else environ
    if choice != "auto":
        return choice == "always"
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty()) and env.get("TERM") != "dumb"
