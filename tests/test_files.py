"""Discovery: recursive, excludes and .gitignore prune the walk, explicit files win unless forced."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from torchlint.cli import main

DEPRECATED = "import torch\nwith torch.cuda.amp.autocast():\n    pass\n"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    return tmp_path


def files_reported(*args: str) -> list[str]:
    result = CliRunner().invoke(main, ["--output-format", "json", *args], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return sorted({d["filename"] for d in json.loads(result.stdout)})


def put(root, relative: str, text: str = DEPRECATED) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_walks_recursively_and_only_python_files(repo):
    put(repo, "a.py")
    put(repo, "pkg/deep/b.py")
    put(repo, "notes.txt")
    put(repo, "script.pyw")
    assert files_reported() == ["a.py", "pkg/deep/b.py"]


@pytest.mark.parametrize(
    "folder", [".venv", "venv", "build", "dist", "node_modules", "__pycache__", ".torchlint_cache", ".git"]
)
def test_default_excludes(repo, folder):
    put(repo, f"{folder}/x.py")
    put(repo, "a.py")
    assert files_reported() == ["a.py"]


def test_gitignore_is_respected_including_nested_and_negations(repo):
    (repo / ".gitignore").write_text("generated/\n*_pb2.py\n")
    put(repo, "generated/a.py")
    put(repo, "model_pb2.py")
    put(repo, "sub/.gitignore", "*.py\n!keep.py\n")
    put(repo, "sub/drop.py")
    put(repo, "sub/keep.py")
    put(repo, "train.py")
    assert files_reported() == ["sub/keep.py", "train.py"]


def test_respect_gitignore_false(repo):
    (repo / ".gitignore").write_text("ignored.py\n")
    put(repo, "ignored.py")
    (repo / "pyproject.toml").write_text("[tool.torchlint]\nrespect-gitignore = false\n")
    assert files_reported() == ["ignored.py"]


def test_explicit_files_are_checked_even_if_excluded_unless_force_exclude(repo):
    (repo / ".gitignore").write_text("ignored.py\n")
    put(repo, "ignored.py")
    put(repo, "build/gen.py")
    assert files_reported("ignored.py", "build/gen.py") == ["build/gen.py", "ignored.py"]
    assert files_reported("--force-exclude", "ignored.py", "build/gen.py") == []


def test_symlink_loop_does_not_hang_and_files_are_reported_once(repo):
    put(repo, "pkg/a.py")
    os.symlink(repo / "pkg", repo / "pkg" / "loop")
    os.symlink(repo / "pkg" / "a.py", repo / "alias.py")
    assert files_reported() == ["alias.py"] or files_reported() == ["pkg/a.py"]


def test_a_walk_does_not_follow_symlinks_out_of_the_folder_checked(tmp_path, monkeypatch):
    """A link to a credentials file would be printed in a TL001 source line; one to another project's
    file would be rewritten by --fix. Both are skipped, and said so; a link inside is followed."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    put(elsewhere, "credentials", "token = 'secret'\n")
    put(elsewhere, "victim.py")
    put(project, "pkg/inner.py")
    (project / ".git").mkdir()
    (project / "leak.py").symlink_to(elsewhere / "credentials")
    (project / "tool.py").symlink_to(elsewhere / "victim.py")
    (project / "shared").symlink_to(elsewhere, target_is_directory=True)
    (project / "alias.py").symlink_to(project / "pkg" / "inner.py")
    monkeypatch.chdir(project)
    result = CliRunner().invoke(main, ["--no-cache", "--fix", "--output-format", "concise", "."])
    assert result.exit_code == 0, result.output
    assert (elsewhere / "victim.py").read_text() == DEPRECATED
    assert "torch.amp.autocast" in (project / "pkg" / "inner.py").read_text()
    assert [line.split(":")[1] for line in result.stderr.splitlines()] == [
        " leak.py",
        " shared",
        " tool.py",
    ]
    assert "outside the folder checked" in result.stderr
    assert "secret" not in result.output
    named = CliRunner().invoke(main, ["--no-cache", "--output-format", "concise", "tool.py"])
    assert (named.exit_code, named.stdout.count("TL303")) == (1, 1)  # named: followed


def test_an_unreadable_folder_is_an_error_not_a_silent_pass(repo, monkeypatch):
    """Reliability C3: as a user without the permission, a folder's files were skipped without a word."""
    from torchlint.workspace.fs import FileSystem

    put(repo, "a.py", "x = 1\n")
    put(repo, "locked/inner.py")
    scandir = FileSystem.scandir

    def denied(self, path):
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied")
        return scandir(self, path)

    monkeypatch.setattr(FileSystem, "scandir", denied)
    result = CliRunner().invoke(main, ["--no-cache", "."])
    assert result.exit_code == 2
    assert "error: locked: cannot read folder: Permission denied" in result.stderr
    assert "All checks passed" not in result.output


def test_same_file_named_twice_is_reported_once(repo):
    put(repo, "a.py")
    result = CliRunner().invoke(main, ["--output-format", "concise", "-q", "a.py", "./a.py", "."])
    assert result.output.count("TL303") == 1


@pytest.mark.parametrize("output_format", ["full", "concise", "json", "sarif", "gitlab", "junit", "github"])
def test_file_names_that_are_not_utf8_are_checked_and_reported(tmp_path, monkeypatch, output_format):
    """Reliability repro C1: a name that is not UTF-8 anywhere in the tree crashed the cached run."""
    import os

    root = os.fsencode(tmp_path)
    (tmp_path / "data").mkdir()
    open(os.path.join(root, b"data", b"legacy\xe9.txt"), "wb").close()
    with open(os.path.join(root, b"bad\xe9.py"), "wb") as handle:
        handle.write(b"import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--output-format", output_format, "."])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1


def test_names_and_lines_from_the_project_cannot_inject_ci_commands_or_terminal_escapes(
    tmp_path, monkeypatch
):
    """Reliability repro S1: a file named `::error ...::x.py` or a line with `\\r::error` or ANSI escapes."""
    (tmp_path / "::error title=X::y.py").write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    (tmp_path / "cr.py").write_text(
        "import torch\nscaler = torch.cuda.amp.GradScaler()  # \x1b[2K\x1b[1A\n", encoding="utf-8"
    )
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.chdir(tmp_path)
    for output_format in ("full", "concise", "pylint"):
        output = (
            CliRunner().invoke(main, ["check", "--no-cache", "--output-format", output_format, "."]).output
        )
        assert not [line for line in output.splitlines() if line.startswith("::")]
        assert "\x1b" not in output
    full = CliRunner().invoke(main, ["check", "--no-cache", "cr.py"]).output
    assert "2 | scaler = torch.cuda.amp.GradScaler()  # \\x1b[2K\\x1b[1A\n" in full
