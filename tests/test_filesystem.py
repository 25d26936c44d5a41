"""Every file-system question of a check run goes through the run's FileSystem (torchlint.workspace.fs).

That is what makes a replay sound (torchlint.cache.replay): the record a run leaves is its
RecordingFileSystem's, so a read that bypasses it is a change a replay would not see. Three guards:
nothing outside the allowed modules calls the OS's file functions (checked on the source, with `ast`);
while runs go, nothing outside them touches the project on disk (checked on the calls themselves); and
changes seen only through such questions do stop a replay.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import AMP, check_replayed

from torchlint.api import RunOptions, run

PACKAGE = Path(__file__).resolve().parent.parent / "torchlint"

# Modules (and functions in them) that may ask the OS directly, each with its reason. "*" is the whole module.
ALLOWED: dict[str, dict[str, str]] = {
    "workspace/fs.py": {"*": "the FileSystem itself: the one place a check run's reads reach the OS"},
    "cache/fs.py": {"*": "the recording FileSystem, and the replay's re-asking of its questions"},
    "lsp/documents.py": {
        "BufferFileSystem": "the Language Server's FileSystem: open buffers, else the real one (super())"
    },
    "fix/write.py": {"*": "writing fixed files back (after the check; a fix run is never replayed)"},
    "docs.py": {"*": "the rule docs shipped with the package, not the project checked"},
    "rules/base.py": {
        "_modules": "lists torchlint's own rules package to discover the rules, not the project",
        "family_folders": "lists torchlint's own family folders, not the project",
    },
    "cache/folder.py": {"*": "the cache's own folder, never part of an answer"},
    "cache/signing.py": {"_key": "the key that seals cache entries, in the user's cache folder"},
    "cache/digest.py": {"code_digest": "torchlint's own code, which keys every cached answer"},
    "cache/replay.py": {
        "replay": "reads the run record from the cache folder",
        "_prune": "lists and removes old run records in the cache folder",
    },
    "cache/results.py": {"ResultCache.load": "reads a result entry from the cache folder"},
    "cache/imports.py": {"ImportsCache._load": "reads the import scan's entry from the cache folder"},
    "workspace/budget.py": {
        "_address_space_left": "/proc/self/statm, this process's mapped memory (never part of an answer)"
    },
    "api.py": {"_load": "/proc/loadavg, how busy the CPUs are, to choose --jobs (never part of an answer)"},
    "cli.py": {
        "_report_stream": "writes the report to --output-file, after the run (never read by it)",
        "_refuse_a_mistyped_subcommand": "before any run: is the first word a path, or a mistyped command?",
        "_config_options": "before any run: is --config a file (then read through the run's FileSystem)?",
        "clean": "`torchlint clean` removes cache folders; no check runs",
    },
    # `torchlint verify`: the runs of the user's script (spec, logs, results, traces, /proc), never a check.
    "verify/runner.py": {"*": "the verifier's runs: their spec, log, progress and result files, and /proc"},
    "verify/bootstrap/entry.py": {
        "*": "inside the measured run: the script itself, the run's spec and result"
    },
    "verify/bootstrap/hooks.py": {"*": "inside the measured run: progress and result files, /proc/meminfo"},
    "verify/bootstrap/serve.py": {
        "*": "inside the measured run: the script's unpatched files, as Python reads them"
    },
    "verify/bootstrap/site/sitecustomize.py": {"*": "inside every process of a measured run: the run's spec"},
}

# Functions that ask the OS about a path (by their dotted name, after resolving imports).
FUNCTIONS = frozenset(
    {
        "open",
        "io.open",
        "os.open",
        "os.stat",
        "os.lstat",
        "os.scandir",
        "os.listdir",
        "os.walk",
        "os.access",
        "os.readlink",
        "os.path.exists",
        "os.path.lexists",
        "os.path.isfile",
        "os.path.isdir",
        "os.path.islink",
        "os.path.getsize",
        "os.path.getmtime",
        "os.path.getctime",
        "os.path.samefile",
        "glob.glob",
        "glob.iglob",
        "tokenize.open",
    }
)
# Methods of Path (and of os.DirEntry) that do the same. `.resolve()` and `.absolute()` are allowed.
METHODS = frozenset(
    {
        "stat",
        "lstat",
        "is_file",
        "is_dir",
        "exists",
        "read_bytes",
        "read_text",
        "iterdir",
        "glob",
        "rglob",
        "open",
        "is_symlink",
    }
)
FILESYSTEM_NAMES = frozenset({"fs"})  # how the readers name the run's FileSystem: `fs`, `self.fs`


class _Calls(ast.NodeVisitor):
    """File-system calls in one module: (line, qualified name of the enclosing function, what was called)."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> dotted name it was imported as
        self.scope: list[str] = []
        self.found: list[tuple[int, str, str]] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.partition(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and not node.level:
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def _scoped(self, node: ast.AST) -> None:
        self.scope.append(node.name)  # type: ignore[attr-defined]
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def _dotted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        return None

    def _note(self, node: ast.AST, what: str) -> None:
        self.found.append((node.lineno, ".".join(self.scope) or "<module>", what))  # type: ignore[attr-defined]

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if isinstance(function, ast.Attribute) and function.attr in METHODS:
            receiver = function.value
            name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", None)
            if name not in FILESYSTEM_NAMES:
                self._note(node, f"{ast.unparse(function)}()")
                self.generic_visit(node)
                return
        dotted = self._dotted(function)
        if dotted in FUNCTIONS:
            self._note(node, f"{dotted}()")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """`key=os.stat`, `map(Path.is_file, ...)`: a file function passed on is a call all the same."""
        dotted = self._dotted(node)
        if dotted in FUNCTIONS or (
            node.attr in METHODS and dotted in {f"Path.{node.attr}", f"pathlib.Path.{node.attr}"}
        ):
            self._note(node, dotted)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and node.id in self.aliases and self.aliases[node.id] in FUNCTIONS:
            self._note(node, self.aliases[node.id])  # `from os import stat`, then `stat` passed on


def file_system_calls(source: str) -> list[tuple[int, str, str]]:
    visitor = _Calls()
    visitor.visit(ast.parse(source))
    # A call is seen twice (as a call, and its callee as an attribute or name): keep one per line and name.
    return sorted({(line, scope, what.removesuffix("()")) for line, scope, what in visitor.found})


def _allowed(module: str, scope: str) -> bool:
    allowed = ALLOWED.get(module, {})
    return "*" in allowed or any(scope == name or scope.startswith(name + ".") for name in allowed)


def test_only_the_file_systems_ask_the_os():
    offending = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for line, scope, what in file_system_calls(path.read_text(encoding="utf-8")):
            if not _allowed(module, scope):
                offending.append(f"torchlint/{module}:{line} in {scope}: {what}")
    assert offending == [], "ask the run's FileSystem (torchlint.workspace.fs) instead:\n" + "\n".join(
        offending
    )


def test_the_allowlist_names_what_exists():
    """A stale entry would silently allow a module that later reads the project."""
    for module, names in ALLOWED.items():
        source = (PACKAGE / module).read_text(encoding="utf-8")
        defined = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                defined.update(f"{node.name}.{item.name}" for item in node.body if hasattr(item, "name"))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
        assert {name for name in names if name != "*"} <= defined, module


def test_the_checker_flags_file_calls_and_nothing_else():
    flagged = file_system_calls(
        textwrap.dedent(
            """
            import os, os.path as osp, glob
            from os import stat as st
            from pathlib import Path

            def reads(path, entry, fs):
                open(path)
                os.stat(path)
                osp.isfile(path)
                st(path)
                glob.glob("*.py")
                path.read_text()
                Path(path).is_file()
                entry.is_dir()
                entry.is_symlink()
                sorted(paths, key=os.path.getmtime)
                list(filter(Path.exists, paths))
            """
        )
    )
    assert [what for _, _, what in flagged] == [
        "open",
        "os.stat",
        "os.path.isfile",
        "os.stat",
        "glob.glob",
        "path.read_text",
        "Path(path).is_file",
        "entry.is_dir",
        "entry.is_symlink",
        "os.path.getmtime",
        "pathlib.Path.exists",
    ]
    assert not file_system_calls(
        textwrap.dedent(
            """
            import os, re
            from pathlib import Path

            def fine(path, fs, self):
                fs.is_file(path)
                self.fs.read_bytes(path)
                self.fs.entry_kind(entry) == "dir"
                path.resolve()
                path.absolute()
                os.path.abspath(path)
                os.path.realpath(path)
                re.compile("x").match("x")
                path.with_name("x").as_posix()
            """
        )
    )


# -- what runs really touch -----------------------------------------------------------------------------

TRAIN = (
    "import torch\nfrom torch.utils.data import DataLoader\nfrom engine import train_one_epoch\n"
    "model.cuda()\nloader = DataLoader(ds, num_workers=2)\nfor epoch in range(3):\n"
    "    train_one_epoch(model, loader, opt)\n"
)
ENGINE = "def train_one_epoch(model, loader, opt):\n    for x in loader:\n        model(x).backward()\n        opt.step()\n"
ENGINE_WITHOUT_LOOP = "def train_one_epoch(model, loader, opt):\n    pass\n"
FACTORY = (
    "from torch.utils.data import DataLoader\n\n\ndef build_loader(ds):\n"
    "    return DataLoader(ds, batch_size=32, num_workers=2)\n"
)
USES_FACTORY = (
    "import torch\nfrom data import build_loader\n\nmodel = Net().cuda()\nloader = build_loader(ds)\n"
    "for epoch in range(3):\n    for x in loader:\n        model(x).backward()\n        opt.step()\n"
)
check = check_replayed


@pytest.fixture
def busy_project(project):
    """A project that makes every reader ask something: configs, .git and .gitignore files (one nested),
    an ignored file, imports across files and packages, a factory and its importer, a symlinked file
    (checked once) and a symlink loop, a file that is not Python, a fixable finding."""
    (project / "pyproject.toml").write_text(
        "[project]\nname = 'demo'\n[tool.torchlint]\nrespect-gitignore = true\n"
    )
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("ignored.py\n")
    (project / "ignored.py").write_text(AMP)
    (project / "train.py").write_text(TRAIN)
    (project / "engine.py").write_text(ENGINE)
    (project / "data.py").write_text(FACTORY)
    (project / "main.py").write_text(USES_FACTORY)
    (project / "amp.py").write_text(AMP)
    (project / "notes.txt").write_text("not python\n")
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("from .inner import helper\n")
    (project / "pkg" / "inner.py").write_text("def helper():\n    return 1\n")
    (project / "pkg" / ".gitignore").write_text("generated_*.py\n")
    (project / "pkg" / "generated_x.py").write_text(AMP)
    (project / "pkg" / "loop").symlink_to("..", target_is_directory=True)
    (project / "alias.py").symlink_to("train.py")
    return project


class _Spy:
    """Wraps the OS's file functions; notes each project path touched from a torchlint module other
    than the file systems (and fix/write.py, which writes fixed files). Resolving a path is allowed."""

    ALLOWED = {"workspace/fs.py", "cache/fs.py", "fix/write.py"}

    def __init__(self, root: Path) -> None:
        self.root = str(root.resolve())
        self.cache = os.path.join(self.root, ".torchlint_cache")
        self.touched: set[str] = set()
        self.bypasses: list[str] = []

    def wrap(self, function):
        def spied(path, *args, **kwargs):
            self._saw(path, function.__name__)
            return function(path, *args, **kwargs)

        return spied

    def _saw(self, path, name: str) -> None:
        if isinstance(path, int):
            return  # a file descriptor: its opening was seen
        text = os.path.abspath(os.fsdecode(path))
        if not (text == self.root or text.startswith(self.root + os.sep)):
            return
        if text == self.cache or text.startswith(self.cache + os.sep):
            return
        self.touched.add(text)
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if frame.f_code.co_name == "resolve" and Path(filename).name == "pathlib.py":
                return  # Path.resolve() stats the result on Python 3.11: allowed, like realpath
            if filename.startswith(str(PACKAGE) + os.sep):
                module = Path(filename).relative_to(PACKAGE).as_posix()
                if module not in self.ALLOWED:
                    self.bypasses.append(f"{name}({text}) from torchlint/{module}:{frame.f_lineno}")
                return
            frame = frame.f_back


def _spy_on(monkeypatch, root: Path) -> _Spy:
    spy = _Spy(root)
    monkeypatch.setattr(os, "stat", spy.wrap(os.stat))
    monkeypatch.setattr(os, "scandir", spy.wrap(os.scandir))
    monkeypatch.setattr(os, "listdir", spy.wrap(os.listdir))
    monkeypatch.setattr(os, "open", spy.wrap(os.open))
    monkeypatch.setattr(builtins, "open", spy.wrap(builtins.open))
    monkeypatch.setattr(io, "open", spy.wrap(io.open))
    return spy


def test_runs_touch_the_project_only_through_their_file_system(busy_project, monkeypatch):
    """Cold, warm (result cache), --config, --diff and --fix runs: every stat, listing and open of a
    project path comes from a FileSystem; and a recorded run's record holds every path it touched."""
    from torchlint.cache import fs as recording

    created = []
    original_init = recording.RecordingFileSystem.__init__

    def counted(self):
        created.append(self)
        original_init(self)

    monkeypatch.setattr(recording.RecordingFileSystem, "__init__", counted)
    spy = _spy_on(monkeypatch, busy_project)
    cold = run(RunOptions(paths=[Path(".")], jobs=1))
    assert len(created) == 1 and not cold.errors and cold.files_checked == 7  # alias.py is train.py
    observed = created[0].record
    asked = {key.partition("\0")[2] for key in observed}
    assert spy.touched <= asked, "touched but not recorded: " + ", ".join(sorted(spy.touched - asked))
    for key in ("content\0engine.py", "content\0pkg/.gitignore", "identity\0alias.py", "kind\0.git"):
        question, _, name = key.partition("\0")
        assert f"{question}\0{busy_project / name}" in observed, key
    assert f"listing\0{busy_project / 'pkg' / 'loop'}" not in observed  # the loop is not walked into

    warm = run(RunOptions(paths=[Path(".")], jobs=1))
    assert warm.from_cache == warm.files_checked
    run(RunOptions(paths=[Path(".")], jobs=1, config_file=busy_project / "pyproject.toml"))
    assert run(RunOptions(paths=[Path(".")], jobs=1, diff=True)).diffs
    assert run(RunOptions(paths=[Path("amp.py")], jobs=1, fix=True)).fixed
    assert len(created) == 3  # the --diff and --fix runs are not recorded
    assert spy.bypasses == []


# -- changes only those questions see ---------------------------------------------------------------------


def test_editing_an_importer_consulted_only_through_the_index_is_seen(project):
    """data.py alone is checked; its findings come from main.py, which the index scanned and analysed."""
    (project / "data.py").write_text(FACTORY)
    (project / "main.py").write_text(USES_FACTORY)
    assert check("--output-format", "concise", "data.py")[1].count("data.py:") == 2
    assert check("data.py")[2]
    (project / "main.py").write_text("from data import build_loader\n")
    assert check("data.py") == (0, "All checks passed!\n", False)


def test_a_nested_gitignore_edit_is_seen(project):
    (project / ".git").mkdir()
    (project / "pkg").mkdir()
    (project / "pkg" / ".gitignore").write_text("")
    (project / "pkg" / "amp.py").write_text(AMP)
    assert check(".")[0] == 1
    assert check(".")[2]
    (project / "pkg" / ".gitignore").write_text("amp.py\n")
    assert check(".") == (0, "", False)  # no file left to check: no "All checks passed!"


def test_a_file_replaced_by_a_folder_of_the_same_name_is_seen(project):
    """The folder's names are the same; what the entry is has changed (a listing records both)."""
    (project / "scripts").write_text("not python\n")
    assert check(".") == (0, "", False)  # no Python file: nothing passed
    assert check(".")[2]
    (project / "scripts").unlink()
    (project / "scripts").mkdir()
    (project / "scripts" / "amp.py").write_text(AMP)
    code, out, replayed = check("--output-format", "concise", ".")
    assert not replayed and "scripts/amp.py:2:6: TL303" in out


def test_which_paths_are_the_same_file_is_part_of_the_record(project):
    """alias.py -> a.py is checked once, as a.py; retargeted to b.py (same content as a.py), it is b.py
    that is now checked twice, and once only: the output names alias.py instead."""
    (project / "a.py").write_text(AMP)
    (project / "b.py").write_text(AMP)
    (project / "alias.py").symlink_to("a.py")
    first = check("--output-format", "concise", "-q", ".")
    assert [line.split(":")[0] for line in first[1].splitlines()] == ["a.py", "b.py"]
    assert check("--output-format", "concise", "-q", ".")[2]
    (project / "new_alias.py").symlink_to("b.py")
    os.replace(project / "new_alias.py", project / "alias.py")
    code, out, replayed = check("--output-format", "concise", "-q", ".")
    assert not replayed and [line.split(":")[0] for line in out.splitlines()] == ["a.py", "alias.py"]


def test_an_atomic_save_without_changes_still_replays(project):
    """An editor that saves by writing a new file and renaming it gives the file a new inode: the same
    content and the same files, so the recorded run still holds."""
    (project / "amp.py").write_text(AMP)
    check(".")
    (project / "amp.py.tmp").write_text(AMP)
    os.replace(project / "amp.py.tmp", project / "amp.py")
    assert check(".")[2]


def test_a_replayed_run_stays_light(project):
    """No linter, LibCST, pathspec nor config parser for a replay: the process exits before it needs them."""
    (project / "engine.py").write_text(ENGINE)
    (project / "train.py").write_text(TRAIN)
    script = (
        "import sys\nfrom torchlint.cli import main\n"
        "try:\n    main(['--show-phase2-count', '.'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in sys.modules if m in ('torchlint.linter', 'pathspec', 'tomllib', 'tomli')"
        " or m.startswith(('libcst.', 'torchlint.workspace.discovery', 'torchlint.rules'))]\n"
        "print('heavy:', heavy, file=sys.stderr)\n"
    )
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=project)
    assert "(replayed)" not in first.stderr and "TL20" in first.stdout
    again = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=project)
    assert "(replayed)" in again.stderr and again.stdout == first.stdout
    assert "heavy: []" in again.stderr, again.stderr
    record = json.loads(next((project / ".torchlint_cache" / "runs").glob("*.json")).read_text())
    assert f"content\0{project / 'engine.py'}" in record["observed"]
