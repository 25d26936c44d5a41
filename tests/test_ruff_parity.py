"""torchlint next to ruff, behaviour by behaviour: the same invocation on the same tree gives the same shape
of result (exit code, which files and lines are reported, which files are rewritten, whether anything is
printed), except where docs/next-to-ruff.md documents a deliberate difference.

The tree has, on the same lines, a finding of each tool with the same kind of fix: ruff's F401 and
torchlint's TL304 (safe fixes) on line 2 of four files (one a .pyi stub, one git-ignored); and in u.py ruff's
F841 (line 6) and torchlint's TL105 (line 7), both with an unsafe fix, compared as one line ("u.py", 0). The ruff that runs is the one the test extras install (its version is in the README).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
# About 2 minutes on 2 cores (90 runs of the two CLIs): end-to-end, so `slow`.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(RUFF is None, reason="ruff is not installed")]

SAFE_LINE = "import torch\nimport os; s = torch.cuda.amp.GradScaler()\n"
TREE = {
    "pyproject.toml": '[project]\nname = "demo"\n\n[tool.ruff.lint]\nselect = ["F401", "F841"]\n',
    ".gitignore": "ignored/\n",
    "a.py": SAFE_LINE,
    "stub.pyi": "import torch\nimport os; s: torch.cuda.amp.GradScaler\n",
    "tests/test_c.py": SAFE_LINE,
    "ignored/b.py": SAFE_LINE,
    "u.py": (
        "import torch\n\n\ndef f():\n"
        "    model = torch.nn.Sequential(torch.nn.Linear(2, 2)).cuda()\n"
        "    x = 1\n"
        "    model.compile()\n"
    ),
    "ruff-ci.toml": '[lint]\nselect = ["F401", "F841"]\nignore = ["F401"]\n',
    "torchlint-ci.toml": 'ignore = ["TL304"]\n',
}
IGNORING = (
    '[tool.ruff.lint]\nselect = ["F401", "F841"]\nignore = ["F401"]\n\n[tool.torchlint]\nignore = ["TL304"]\n'
)
# Each tool's code for the same kind of finding, and ruff's settings keys as torchlint spells them.
CODES = {"ruff": {"SAFE": "F401", "UNSAFE": "F841"}, "torchlint": {"SAFE": "TL304", "UNSAFE": "TL105"}}
KEYS = {"ruff": "lint.ignore", "torchlint": "ignore"}

EVERYWHERE = {("a.py", 2), ("stub.pyi", 2), ("tests/test_c.py", 2), ("u.py", 0)}
SAFE_FILES = {"a.py", "stub.pyi", "tests/test_c.py"}


def make_tree(root: Path, pyproject: str | None = None) -> None:
    for name, text in TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / ".git").mkdir()
    if pyproject is not None:
        (root / "pyproject.toml").write_text(pyproject)


def command(tool: str, args: list[str]) -> list[str]:
    spelled = [
        a.replace("{SAFE}", CODES[tool]["SAFE"])
        .replace("{UNSAFE}", CODES[tool]["UNSAFE"])
        .replace("{KEY}", KEYS[tool])
        for a in args
    ]
    spelled = [a.replace("{CI}", f"{tool}-ci.toml") for a in spelled]
    if spelled and spelled[0] in ("rule", "linter", "version", "clean", "chek"):
        return [RUFF, *spelled] if tool == "ruff" else [sys.executable, "-m", "torchlint", *spelled]
    if "--output-format" not in spelled:
        spelled = ["--output-format", "concise", *spelled]
    if tool == "ruff":
        return [RUFF, "check", "--no-cache", *spelled]
    return [sys.executable, "-m", "torchlint", "check", "--no-cache", *spelled]


_LOCATED = [
    re.compile(r"^(?P<file>[^\s:]+\.pyi?):(?P<line>\d+):(?:\d+:)? "),  # concise, pylint
    re.compile(r"sourcepath=(?P<file>[^;]+);linenumber=(?P<line>\d+);"),  # azure
    re.compile(r"file=(?P<file>[^,]+),line=(?P<line>\d+),"),  # github
]


def located(stdout: str, fmt: str, root: Path) -> set[tuple[str, int]]:
    """(file, line) of each finding the output reports, whatever the format."""

    def relative(name: str) -> str:
        path = Path(name)
        return path.relative_to(root.resolve()).as_posix() if path.is_absolute() else name

    stdout = re.sub(r"\x1b\[[0-9;]*m", "", stdout)
    return {(name, 0 if name == "u.py" else line) for name, line in _located(stdout, fmt, relative)}


def _located(stdout: str, fmt: str, relative) -> set[tuple[str, int]]:
    if fmt in ("json", "json-lines"):
        items = json.loads(stdout) if fmt == "json" else [json.loads(line) for line in stdout.splitlines()]
        return {(relative(d["filename"]), d["location"]["row"]) for d in items}
    found = set()
    current = None
    for line in stdout.splitlines():
        if fmt == "grouped":
            if line and not line.startswith(" ") and line.endswith(":"):
                current = line[:-1]
            elif current and (match := re.match(r"^\s+(\d+):\d+\s", line)):
                found.add((current, int(match.group(1))))
            continue
        for pattern in _LOCATED:
            match = pattern.search(line)
            if match:
                found.add((relative(match.group("file")), int(match.group("line"))))
                break
    return found


def statistics(stdout: str, tool: str) -> dict[str, int]:
    kinds = {code: kind for kind, code in CODES[tool].items()}
    rows = re.findall(r"^\s*(\d+)\t(\S+)\t", stdout, re.MULTILINE)
    return {kinds.get(code, code): int(count) for count, code in rows}


def shape(tool: str, root: Path, args: list[str], fmt: str, stdin: str | None) -> dict:
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts}
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    result = subprocess.run(
        command(tool, args), cwd=root, input=stdin, capture_output=True, text=True, env=env, timeout=120
    )
    changed = {
        p.relative_to(root).as_posix()
        for p, data in before.items()
        if not p.exists() or p.read_bytes() != data
    }
    out = result.stdout
    found: object
    if "--statistics" in args:
        found = (
            {kind_of(tool, d["code"]): d["count"] for d in json.loads(out)}
            if fmt == "json"
            else statistics(out, tool)
        )
    elif args and args[0] in ("rule", "linter", "version", "clean", "chek"):
        found = None
    else:
        found = located(out, fmt, root)
    return {
        "exit": result.returncode,
        "found": found,
        "rewritten": changed - {"out.txt"},
        "stdout": "empty" if not out else ("coloured" if "\x1b[" in out else "plain"),
    }


def kind_of(tool: str, code: str) -> str:
    return {c: k for k, c in CODES[tool].items()}.get(code, code)


def row(name, args, exit, found=frozenset(), rewritten=frozenset(), stdout="plain", fmt="concise", **extra):
    return pytest.param(
        args,
        fmt,
        {"exit": exit, "found": found, "rewritten": set(rewritten), "stdout": stdout},
        extra,
        id=name,
    )


# name, arguments (codes as {SAFE}/{UNSAFE}), the shape both tools give; `differs` is what torchlint gives
# instead where the README documents the difference.
TABLE = [
    row("check", [], 1, EVERYWHERE),
    row("select", ["--select", "{SAFE}"], 1, EVERYWHERE - {("u.py", 0)}),
    row("ignore", ["--ignore", "{SAFE}"], 1, {("u.py", 0)}),
    row("extend-ignore", ["--extend-ignore", "{UNSAFE}"], 1, EVERYWHERE - {("u.py", 0)}),
    row(
        "per-file-ignores", ["--per-file-ignores", "tests/*:{SAFE}"], 1, EVERYWHERE - {("tests/test_c.py", 2)}
    ),
    row(
        "extend-per-file-ignores", ["--extend-per-file-ignores", "a.py:{SAFE}"], 1, EVERYWHERE - {("a.py", 2)}
    ),
    row("exclude", ["--exclude", "tests"], 1, EVERYWHERE - {("tests/test_c.py", 2)}),
    row(
        "extend-exclude",
        ["--extend-exclude", "tests,u.py"],
        1,
        EVERYWHERE - {("tests/test_c.py", 2), ("u.py", 0)},
    ),
    row("no-respect-gitignore", ["--no-respect-gitignore"], 1, EVERYWHERE | {("ignored/b.py", 2)}),
    row("respect-gitignore", ["--respect-gitignore"], 1, EVERYWHERE),
    row("config file", ["--config", "{CI}"], 1, {("u.py", 0)}),
    row("config KEY=VALUE", ["--config", "{KEY} = ['{SAFE}']"], 1, {("u.py", 0)}),
    row("config from pyproject", [], 1, {("u.py", 0)}, pyproject=IGNORING),
    row("isolated", ["--isolated", "--select", "{SAFE},{UNSAFE}"], 1, EVERYWHERE, pyproject=IGNORING),
    row(
        "force-exclude",
        ["--force-exclude", "--extend-exclude", "a.py", "a.py"],
        0,
        differs={"stdout": "empty"},  # no "All checks passed!" when no file was read
    ),
    row("named file, excluded", ["--extend-exclude", "a.py", "a.py"], 1, {("a.py", 2)}),
    row("exit-zero", ["--exit-zero"], 0, EVERYWHERE),
    row("-e", ["-e"], 0, EVERYWHERE),
    row("quiet", ["-q"], 1, EVERYWHERE),
    row("silent", ["--silent"], 1, set(), stdout="empty"),
    row("output-file", ["-o", "out.txt"], 1, set(), stdout="empty"),
    row("color always", ["--color", "always"], 1, EVERYWHERE, stdout="coloured"),
    row("color never", ["--color", "never"], 1, EVERYWHERE),
    *[
        row(f"format {fmt}", ["--output-format", fmt], 1, EVERYWHERE, fmt=fmt)
        for fmt in ("concise", "grouped", "json", "json-lines", "pylint", "azure", "github")
    ],
    row("statistics", ["--statistics"], 1, {"SAFE": 3, "UNSAFE": 1}),
    row(
        "statistics json",
        ["--statistics", "--output-format", "json"],
        1,
        {"SAFE": 3, "UNSAFE": 1},
        fmt="json",
    ),
    row("fix", ["--fix"], 1, {("u.py", 0)}, SAFE_FILES),
    row("fix unsafe-fixes", ["--fix", "--unsafe-fixes"], 0, set(), SAFE_FILES | {"u.py"}),
    row(
        "no-unsafe-fixes wins", ["--fix", "--unsafe-fixes", "--no-unsafe-fixes"], 1, {("u.py", 0)}, SAFE_FILES
    ),
    row("fix-only", ["--fix-only"], 0, set(), SAFE_FILES),
    row("fix-only exit-non-zero-on-fix", ["--fix-only", "--exit-non-zero-on-fix"], 1, set(), SAFE_FILES),
    row(
        "fix exit-non-zero-on-fix",
        ["--fix", "--unsafe-fixes", "--exit-non-zero-on-fix"],
        1,
        set(),
        SAFE_FILES | {"u.py"},
    ),
    row("diff", ["--diff"], 1, set()),
    row("add-noqa", ["--add-noqa"], 0, set(), SAFE_FILES | {"u.py"}, stdout="empty", then=([], 0)),
    row("stdin", ["--stdin-filename", "a.py", "-"], 1, {("a.py", 2)}, stdin=SAFE_LINE),
    # ruff reports a missing path as its E902, which this tree's selection leaves out; torchlint's TL002 is
    # always on, so the same finding shows.
    row("missing path", ["nosuch.py"], 0, differs={"exit": 1, "found": {("nosuch.py", 1)}}),
    row("mistyped subcommand", ["chek"], 2, None, stdout="empty"),
    row("version", ["version"], 0, None),
    row("linter", ["linter"], 0, None),
    row("rule --all", ["rule", "--all"], 0, None),
    row("clean", ["clean"], 0, None, stdout="empty"),
]


@pytest.mark.parametrize("args, fmt, expected, extra", TABLE)
def test_same_shape_as_ruff(tmp_path, args, fmt, expected, extra):
    outcomes = {}
    for tool in ("ruff", "torchlint"):
        root = tmp_path / tool
        root.mkdir()
        make_tree(root, extra.get("pyproject"))
        outcomes[tool] = shape(tool, root, args, fmt, extra.get("stdin"))
        if "then" in extra:
            again, code = extra["then"]
            assert shape(tool, root, again, "concise", None)["exit"] == code, tool
    assert outcomes["ruff"] == expected, "ruff itself no longer behaves as this table says"
    assert outcomes["torchlint"] == {**expected, **extra.get("differs", {})}
