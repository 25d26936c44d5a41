"""Small helpers the tests share: lint or fix an inline source, read the rule docs' examples."""

from __future__ import annotations

import contextlib
import re
import signal
import textwrap
from dataclasses import dataclass
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


def said(diagnostic: Diagnostic) -> str:
    """A finding's message with its note in parentheses after it: all it says about itself, on one line."""
    return diagnostic.message + (f" ({diagnostic.note})" if diagnostic.note else "")


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


def python_blocks(section: str) -> list[str]:
    """Every fenced python block of a doc section, in order."""
    return _BLOCK.findall(section)


APPLICABILITIES = ("safe", "unsafe", "display-only", "none")


@dataclass(frozen=True)
class Marker:
    """What an `# error` marker expects on its line: the findings' start columns (empty: any), and the
    applicability every finding of the line carries (`none`: no fix; None: not checked)."""

    columns: tuple[int, ...] = ()
    fix: str | None = None


# `  # error`, `  # error: 12`, `  # error: 12, 30`, `  # error: fix: unsafe`, `  # error: 12, fix: safe`
_MARKER = re.compile(r"(?<=\S)  # error(?:: (?P<spec>.*))?$")
_SPEC = re.compile(
    r"(?P<columns>[1-9][0-9]*(?:, [1-9][0-9]*)*)(?:, fix: (?P<fix>[a-z-]+))?|fix: (?P<only_fix>[a-z-]+)"
)
_LOOKS_LIKE_A_MARKER = re.compile(r"#\s*errors?\b", re.IGNORECASE)


def error_markers(source: str) -> dict[int, Marker]:
    """Line -> Marker for every line of a doc block that ends in an `# error` marker.

    Strict: a comment that looks like a marker but does not follow the syntax raises ValueError."""
    markers = {}
    for number, line in enumerate(source.splitlines(), 1):
        match = _MARKER.search(line)
        if match is None:
            if _LOOKS_LIKE_A_MARKER.search(line):
                raise ValueError(f"line {number}: malformed marker (want `code  # error[: ...]`): {line!r}")
            continue
        if _LOOKS_LIKE_A_MARKER.search(line[: match.start()]):
            raise ValueError(f"line {number}: two markers on one line: {line!r}")
        spec = match.group("spec")
        if spec is None:
            markers[number] = Marker()
            continue
        parts = _SPEC.fullmatch(spec)
        if parts is None:
            raise ValueError(
                f"line {number}: malformed marker {spec!r} (want `12`, `12, 30`, `fix: safe`, ...)"
            )
        columns = tuple(int(c) for c in parts.group("columns").split(", ")) if parts.group("columns") else ()
        if list(columns) != sorted(set(columns)):
            raise ValueError(f"line {number}: malformed marker, columns must increase: {spec!r}")
        applicability = parts.group("fix") or parts.group("only_fix")
        if applicability is not None and applicability not in APPLICABILITIES:
            raise ValueError(
                f"line {number}: malformed marker, unknown fix applicability {applicability!r} in {spec!r}"
            )
        markers[number] = Marker(columns, applicability)
    return markers


def strip_error_markers(source: str) -> str:
    """The block without its markers: the whole `  # error...` suffix of each marked line goes."""
    error_markers(source)  # refuse to strip what does not parse
    return "\n".join(_MARKER.sub("", line) for line in source.split("\n"))


def error_lines(source: str) -> set[int]:
    return set(error_markers(source))


def applicability(diagnostic: Diagnostic) -> str:
    """`safe`, `unsafe`, `display-only`, or `none` when the finding has no fix."""
    return diagnostic.fix.applicability.value if diagnostic.fix is not None else "none"


def facts_of(source: str, path: str = "example.py"):
    """The facts of an inline module (no project: cross-file questions answer "unknown")."""
    import libcst as cst

    from torchlint.facts import ModuleFacts, SourceModule

    text = textwrap.dedent(source)
    return ModuleFacts(SourceModule(path, text, cst.parse_module(text)))


def record_calls(monkeypatch, owner, name: str, what=lambda *args, **kwargs: args) -> list:
    """The calls of `owner.name` from now on, each as `what(*its arguments)`; they still run."""
    found: list = []
    original = getattr(owner, name)

    def recording(*args, **kwargs):
        found.append(what(*args, **kwargs))
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, recording)
    return found


def project_facts(root: Path, files: dict[str, str], checked: str):
    """Write a small project (with a pyproject.toml) and return the facts of one of its files."""
    import libcst as cst

    from torchlint.facts import ModuleFacts, SourceModule
    from torchlint.index.project import Project

    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    project = Project(root)
    path = root / checked
    text = path.read_text()
    facts = ModuleFacts(SourceModule(checked, text, cst.parse_module(text), project=project, file=path))
    project.register(path, facts.source)
    return facts


def line_of(facts, node) -> int:
    return facts.lines.position(facts.span(node)[0]).line


def training_loaders(facts) -> dict[int, list[bool]]:
    """Loader line -> [per_epoch for each training use]; only loaders that feed training."""
    found = {}
    for loader in facts.loaders:
        uses = facts.training.loader_uses(loader)
        if uses:
            found[line_of(facts, loader.call)] = [u.per_epoch for u in uses]
    return found


AMP = "import torch\nwith torch.cuda.amp.autocast():\n    pass\n"  # one TL303 finding


def check_replayed(*args: str):
    """(exit code, stdout, replayed?) of `torchlint ARGS --show-phase2-count`."""
    from click.testing import CliRunner

    from torchlint.cli import main

    result = CliRunner().invoke(main, [*args, "--show-phase2-count"])
    return result.exit_code, result.stdout, "(replayed)" in result.stderr


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def default_signals() -> None:
    """A terminal's signal dispositions, for a child process whose test sends it signals: a suite started
    in the background (`nohup`, `cmd &` in a script) ignores SIGINT and SIGHUP, and children inherit that
    (Python then installs no KeyboardInterrupt handler)."""
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)


@contextlib.contextmanager
def terminal_signals():
    """`default_signals` for the test process itself, restored afterwards."""
    before = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    default_signals()
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
