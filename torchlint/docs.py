"""The rule reference: `rules/<code>.md`, shipped inside the wheel as `torchlint/_docs/`.

An editable install has no `_docs` folder; it reads the source tree's `rules/` instead.
"""

from __future__ import annotations

from pathlib import Path

DOCS_URL = "https://github.com/torchlint/torchlint/blob/main/rules/{code}.md"


def docs_folder() -> Path:
    package = Path(__file__).resolve().parent
    shipped = package / "_docs"
    return shipped if shipped.is_dir() else package.parent / "rules"


def rule_doc(code: str) -> str | None:
    path = docs_folder() / f"{code}.md"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def rule_url(code: str) -> str:
    return DOCS_URL.format(code=code)
