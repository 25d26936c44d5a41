"""What the command line does with inputs it cannot use as they are (reliability report, turn 3): a config
file that is not UTF-8 (2.27) or is a folder (2.26) is a clear error naming it, exit 2, never a traceback;
an unreadable file named on the command line is a TL002 finding and the others are still checked (1.53);
and the azure format escapes the message, which quotes user code, as Azure's agent unescapes it (N15)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint.cli import main
from torchlint.diagnostics import Diagnostic, LineIndex, Severity
from torchlint.report.azure import write_azure

DEPRECATED = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
SCALER = (
    "ok.py:2:10: TL304 `torch.cuda.amp.GradScaler` is deprecated since torch 2.4: "
    'use `torch.amp.GradScaler("cuda", ...)`'
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "ok.py").write_text(DEPRECATED)
    return tmp_path


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--no-cache", *args], catch_exceptions=False)
    return result.exit_code, result.output


def invoke_verify(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", *args], catch_exceptions=False)
    return result.exit_code, result.output


# -- --config FILE: not UTF-8 (2.27), a folder (2.26) --------------------------------------------------------


def test_a_config_file_that_is_not_utf8_is_an_error_naming_it(project):
    """2.27: `--config bad.toml` holding a 0xff byte said UnicodeDecodeError in a traceback (exit 1)."""
    (project / "bad.toml").write_bytes(b'select = ["TL3"]\n\xff\n')
    assert invoke("--config", "bad.toml", "ok.py") == (
        2,
        "error: bad.toml: not UTF-8 text, which TOML requires (invalid start byte at byte 17)\n",
    )


def test_verify_refuses_a_config_file_that_is_not_utf8_before_running_anything(project):
    """2.27, through `verify --config` (the same settings reader): a usage error, exit 2."""
    (project / "bad.toml").write_bytes(b"\xff")
    assert invoke_verify("--config", "bad.toml", "ok.py") == (
        2,
        "error: bad.toml: not UTF-8 text, which TOML requires (invalid start byte at byte 0)\n",
    )


def test_a_config_that_is_a_folder_says_so_not_that_it_is_missing(project):
    """2.26: `--config somefolder` said `config file does not exist`."""
    (project / "somefolder").mkdir()
    expected = "error: somefolder: a folder, not a config file\n"
    assert invoke("--config", "somefolder", "ok.py") == (2, expected)
    assert invoke_verify("--config", "somefolder", "ok.py") == (2, expected)


def test_a_config_that_is_neither_file_nor_folder_is_named_for_what_it_is(project):
    """2.26's sibling: a FIFO (or a device) is no config file either; it is not read (a FIFO would block)."""
    os.mkfifo(project / "pipe.toml")
    assert invoke("--config", "pipe.toml", "ok.py") == (2, "error: pipe.toml: not a regular file\n")


def test_a_missing_config_file_is_still_said_to_be_missing(project):
    assert invoke("--config", "nope.toml", "ok.py") == (2, "error: nope.toml: config file does not exist\n")


def test_an_unreadable_config_file_names_it_with_the_reason(project, monkeypatch):
    """`verify --config` no longer lets click refuse an unreadable file: the settings reader says why, as
    for `check`."""
    from torchlint.workspace.fs import FileSystem

    (project / "locked.toml").write_text('select = ["TL3"]\n')
    read_bytes = FileSystem.read_bytes

    def denied(self, path):
        if str(path).endswith("locked.toml"):
            raise PermissionError(13, "Permission denied")
        return read_bytes(self, path)

    monkeypatch.setattr(FileSystem, "read_bytes", denied)
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: not str(path).endswith("locked.toml"))
    expected = "error: locked.toml: cannot read: Permission denied\n"
    assert invoke("--config", "locked.toml", "ok.py") == (2, expected)
    assert invoke_verify("--config", "locked.toml", "ok.py") == (2, expected)


# -- an unreadable file named on the command line (1.53) ---------------------------------------------------


def test_an_unreadable_file_named_on_the_command_line_is_a_finding_and_the_others_are_checked(
    project, monkeypatch
):
    """1.53: click refused `secret.py` (`Path 'secret.py' is not readable`, exit 2) and `ok.py` was never
    checked. As root, chmod 000 stops nothing: click's check (os.access) and the read are made to fail."""
    from torchlint.workspace.fs import FileSystem

    (project / "secret.py").write_text("x = 1\n")
    read_bytes = FileSystem.read_bytes

    def denied(self, path):
        if str(path).endswith("secret.py"):
            raise PermissionError(13, "Permission denied")
        return read_bytes(self, path)

    monkeypatch.setattr(FileSystem, "read_bytes", denied)
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: not str(path).endswith("secret.py"))
    code, output = invoke("--output-format", "concise", "secret.py", "ok.py")
    assert code == 1
    assert output.splitlines()[:2] == [
        SCALER,
        "secret.py:1:1: TL002 secret.py: cannot read: Permission denied",
    ]


@pytest.mark.parametrize(
    "option",
    ["--stdin-filename", "--output-file"],
)
def test_path_options_are_not_refused_for_a_file_torchlint_never_reads(project, monkeypatch, option):
    """1.53's siblings: `--stdin-filename` only names the text read from stdin, and `--output-file` is
    written, never read: an existing file torchlint may not read is no reason to refuse them."""
    (project / "named.py").write_text("")
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: not str(path).endswith("named.py"))
    args = [option, "named.py"] + (["-"] if option == "--stdin-filename" else ["ok.py"])
    result = CliRunner().invoke(main, ["--no-cache", *args], input=DEPRECATED, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "not readable" not in result.output


@pytest.fixture
def shared_folder():
    """A folder another user can enter (pytest's own temporary folders are private to their owner)."""
    folder = Path(tempfile.mkdtemp(prefix="torchlint-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to run as another user"
)
def test_as_an_unprivileged_user_an_unreadable_file_is_tl002_and_the_others_are_checked(shared_folder):
    """1.53 for real: a chmod 000 file, as uid 65534 (nobody), in a separate process."""
    (shared_folder / "ok.py").write_text(DEPRECATED)
    (shared_folder / "secret.py").write_text("x = 1\n")
    (shared_folder / "ok.py").chmod(0o644)
    (shared_folder / "secret.py").chmod(0)
    command = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    command += [sys.executable, "-m", "torchlint", "--no-cache", "--output-format", "concise"]
    done = subprocess.run(
        [*command, "secret.py", "ok.py"], cwd=shared_folder, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert "secret.py:1:1: TL002 secret.py: cannot read: Permission denied" in done.stdout.splitlines()
    assert SCALER in done.stdout.splitlines()


# -- azure escapes the message (N15) ------------------------------------------------------------------------


def azure(message: str, path: str = "/p/t.py") -> str:
    out = io.StringIO()
    diagnostic = LineIndex("x\n").locate(Diagnostic("TL103", "n", message, Severity.WARNING, path, 0, 1))
    write_azure([diagnostic], {}, out)
    return out.getvalue()


def test_azure_escapes_the_message_so_quoted_code_is_shown_as_written():
    """N15: a message quoting `mode="%0A%3Bx"` was written raw, and the agent turned `%0A` into a line break
    and `%3B` into `;`. Percent signs are escaped first (Azure's %AZP25), then line breaks."""
    assert azure('dropped `torch.compile(model, mode="%0A%3Bx]y;z")`\nsecond\rline') == (
        "##vso[task.logissue type=warning;sourcepath=/p/t.py;linenumber=1;columnnumber=1;code=TL103;]"
        'dropped `torch.compile(model, mode="%AZP250A%AZP253Bx]y;z")`%0Asecond%0Dline\n'
    )


def test_azure_message_still_shows_other_control_characters_as_escapes():
    """The message is still shown text: an ANSI escape or a NUL in quoted code is printed as `\\xNN`."""
    assert azure("a\x1b[2Jb\x00c").endswith("]a\\x1b[2Jb\\x00c\n")


def test_azure_end_to_end_escapes_a_tl103_message_quoting_percent_codes(project):
    """N15 as reported, through the command line."""
    (project / "n15.py").write_text(
        'import torch\nmodel = torch.nn.Linear(2, 2)\ntorch.compile(model, mode="%0A%3Bx")\n'
    )
    code, output = invoke("--output-format", "azure", "--select", "TL103", "n15.py")
    assert code == 1
    assert output == (
        f"##vso[task.logissue type=warning;sourcepath={project / 'n15.py'};linenumber=3;columnnumber=1;"
        'code=TL103;]the result of `torch.compile(model, mode="%AZP250A%AZP253Bx")` is dropped: '
        "`torch.compile` returns a compiled module and leaves `model` as it was, so nothing is compiled\n"
    )
