"""Small helpers the tests share: lint or fix an inline source, read the rule docs' examples."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from torchlint.diagnostics import Diagnostic
from torchlint.linter import Linter
from torchlint.workspace.settings import Settings

REPO = Path(__file__).resolve().parent.parent
RULE_DOCS = REPO / "rules"
FIXTURES = REPO / "fixtures"
_linter = Linter()


def settings(**changes) -> Settings:
    return Settings(root=REPO, **changes)


def lint(
    source: str, select: tuple[str, ...] = ("ALL",), path: str = "example.py", **changes
) -> list[Diagnostic]:
    return _linter.check_text(path, textwrap.dedent(source), settings(select=select, **changes))


def codes_and_lines(source: str, **kwargs) -> list[tuple[str, int]]:
    return [(d.code, d.location.line) for d in lint(source, **kwargs)]


def fix(source: str, select: tuple[str, ...] = ("ALL",), unsafe: bool = True, **changes) -> str:
    text, _, _ = _linter.fix_text(
        "example.py", textwrap.dedent(source), settings(select=select, **changes), unsafe
    )
    return text


_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def doc_sections(code: str) -> dict[str, str]:
    text = (RULE_DOCS / f"{code}.md").read_text(encoding="utf-8")
    parts = _SECTION.split(text)
    sections = {"title": parts[0].strip()}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sections[name.strip()] = body
    return sections


def python_block(section: str) -> str | None:
    match = _BLOCK.search(section)
    return match.group(1) if match else None


def strip_error_markers(source: str) -> str:
    return re.sub(r"  # error$", "", source, flags=re.MULTILINE)


def error_lines(source: str) -> set[int]:
    return {n for n, line in enumerate(source.splitlines(), 1) if line.endswith("# error")}


def facts_of(source: str, path: str = "example.py"):
    """The facts of an inline module (no project: cross-file questions answer "unknown")."""
    import libcst as cst

    from torchlint.facts import ModuleFacts

    text = textwrap.dedent(source)
    return ModuleFacts(path, text, cst.parse_module(text))


def project_facts(root: Path, files: dict[str, str], checked: str):
    """Write a small project (with a pyproject.toml) and return the facts of one of its files."""
    import libcst as cst

    from torchlint.facts import ModuleFacts
    from torchlint.index.project import Project

    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    project = Project(root)
    path = root / checked
    text = path.read_text()
    facts = ModuleFacts(checked, text, cst.parse_module(text), project=project, file=path)
    project.register(path, facts.source)
    return facts


def line_of(facts, node) -> int:
    return facts.lines.position(facts.span(node)[0]).line


def training_loaders(facts) -> dict[int, list[bool]]:
    """Loader line -> [per_epoch for each training use]; only loaders that feed training."""
    found = {}
    for loader in facts.loaders:
        uses = facts.loader_uses(loader)
        if uses:
            found[line_of(facts, loader.call)] = [u.per_epoch for u in uses]
    return found
