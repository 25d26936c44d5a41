"""`torchlint check --stdin-filename PATH -` checks a piped text as the file PATH, as ruff does: PATH's
settings and project, findings named PATH, `--fix` writing the fixed text to stdout and the report to
stderr, ruff's exit codes."""

from __future__ import annotations

import json

from click.testing import CliRunner

from torchlint.cli import main

DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    s = torch.cuda.amp.GradScaler()\n"
FIXED = 'import torch\n\nwith torch.amp.autocast("cuda"):\n    s = torch.amp.GradScaler("cuda")\n'
TL303 = ':3:6: TL303 `torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`'
TL304 = ':4:9: TL304 `torch.cuda.amp.GradScaler` is deprecated since torch 2.4: use `torch.amp.GradScaler("cuda", ...)`'


def pipe(text: str | bytes, *args: str):
    return CliRunner().invoke(main, list(args), input=text, catch_exceptions=False)


def test_a_dash_reads_stdin_and_names_it_dash(project):
    result = pipe(DEPRECATED, "check", "--output-format", "concise", "-")
    assert result.exit_code == 1
    assert result.stdout == (
        f"-{TL303}\n-{TL304}\nFound 2 findings.\n[*] 2 fixable with the `--fix` option.\n"
    )
    assert result.stderr == ""


def test_stdin_filename_names_the_findings_and_reads_stdin_without_a_dash(project):
    for args in (["--stdin-filename", "src/train.py", "-"], ["--stdin-filename", "src/train.py"]):
        result = pipe(DEPRECATED, "--output-format", "concise", "-q", *args)
        assert (result.exit_code, result.stdout) == (1, f"src/train.py{TL303}\nsrc/train.py{TL304}\n")


def test_paths_next_to_stdin_filename_are_ignored_with_a_warning(project):
    (project / "other.py").write_text(DEPRECATED)
    result = pipe("x = 1\n", "--stdin-filename", "a.py", "other.py")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    assert result.stderr == "warning: ignoring other.py in favour of standard input\n"


def test_clean_stdin_passes(project):
    result = pipe("import torch\n", "-")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "All checks passed!\n", "")


def test_the_settings_of_the_stdin_path_apply(project):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nper-file-ignores = { 'gen/**' = ['TL304'] }\n")
    (project / "sub").mkdir()
    (project / "sub" / "pyproject.toml").write_text("[tool.torchlint]\nignore = ['TL303']\n")
    ignored_by_glob = pipe(DEPRECATED, "--output-format", "concise", "-q", "--stdin-filename", "gen/a.py")
    assert ignored_by_glob.stdout == f"gen/a.py{TL303}\n"
    nearest_config = pipe(DEPRECATED, "--output-format", "concise", "-q", "--stdin-filename", "sub/a.py")
    assert nearest_config.stdout == f"sub/a.py{TL304}\n"


def test_force_exclude_drops_an_excluded_stdin_path_and_never_claims_it_passed(project):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nextend-exclude = ['generated/']\n")
    result = pipe(DEPRECATED, "--force-exclude", "--stdin-filename", "generated/a.py", "-")
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == "warning: generated/a.py is excluded (--force-exclude): not checked\n"
    # Without --force-exclude a named stdin path is checked, like a file named on the command line.
    assert pipe(DEPRECATED, "--stdin-filename", "generated/a.py", "-").exit_code == 1
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("scratch.py\n")
    ignored = pipe(DEPRECATED, "--force-exclude", "--stdin-filename", "scratch.py")
    assert (ignored.exit_code, ignored.stdout) == (0, "")
    assert pipe(DEPRECATED, "--force-exclude", "--stdin-filename", "train.py").exit_code == 1


def test_fix_with_force_exclude_gives_an_excluded_text_back_unchanged(project):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nextend-exclude = ['generated/']\n")
    result = pipe(DEPRECATED, "--fix", "--force-exclude", "--stdin-filename", "generated/a.py")
    assert (result.exit_code, result.stdout) == (0, DEPRECATED)


def test_fix_writes_the_fixed_text_to_stdout_and_the_report_to_stderr(project):
    result = pipe(DEPRECATED, "--fix", "--stdin-filename", "train.py", "-")
    assert (result.exit_code, result.stdout) == (0, FIXED)
    assert result.stderr == "Found 2 findings (2 fixed, 0 remaining).\n"
    assert not (project / "train.py").exists()


def test_fix_keeps_remaining_findings_on_stderr_and_exits_one(project):
    text = DEPRECATED + "from torch.utils.data import DataLoader\nDataLoader(ds, persistent_workers=True)\n"
    result = pipe(text, "--fix", "--output-format", "concise", "--stdin-filename", "train.py")
    assert result.exit_code == 1
    assert (
        result.stdout
        == FIXED + "from torch.utils.data import DataLoader\nDataLoader(ds, persistent_workers=True)\n"
    )
    assert result.stderr == (
        "train.py:6:1: TL204 `DataLoader` with `persistent_workers=True` and no workers raises ValueError "
        '("persistent_workers option needs num_workers > 0")\n'
        "Found 3 findings (2 fixed, 1 remaining).\n"
    )


def test_fix_of_a_clean_text_echoes_it(project):
    result = pipe("x = 1\n", "--fix", "-")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "x = 1\n", "All checks passed!\n")


def test_fix_keeps_crlf_and_a_bom(project):
    raw = b"\xef\xbb\xbf" + DEPRECATED.replace("\n", "\r\n").encode()
    result = pipe(raw, "--fix", "-q", "-")
    assert result.stdout_bytes == b"\xef\xbb\xbf" + FIXED.replace("\n", "\r\n").encode()


def test_diff_on_stdin_prints_the_diff_and_exits_one(project):
    result = pipe(DEPRECATED, "--diff", "--stdin-filename", "train.py")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:2] == ["--- train.py", "+++ train.py"]
    assert '+with torch.amp.autocast("cuda"):' in result.stdout.splitlines()
    assert result.stderr == "Would fix 2 findings.\n"


def test_a_syntax_error_in_stdin_is_tl001_naming_the_stdin_path(project):
    result = pipe("def f(:\n    pass\n", "--output-format", "concise", "--stdin-filename", "bad.py")
    assert (result.exit_code, result.stdout) == (
        1,
        "bad.py:1:7: TL001 SyntaxError: invalid syntax\nFound 1 finding.\n",
    )
    fixing = pipe("def f(:\n", "--fix", "--stdin-filename", "bad.py")
    assert (fixing.exit_code, fixing.stdout) == (1, "def f(:\n")


def test_undecodable_stdin_is_tl002(project):
    result = pipe(b"x = '\xe9'\n", "--output-format", "concise", "-q", "-")
    assert (result.exit_code, result.stdout) == (
        1,
        "-:1:1: TL002 -: cannot decode as utf-8 (line 1): invalid continuation byte\n",
    )


def test_stdin_is_linked_to_the_project_of_its_path(project):
    """The loop lives in engine.py on disk; the piped train.py (not on disk) feeds it a loader."""
    (project / "engine.py").write_text(
        "def train_one_epoch(model, loader, opt):\n    for x in loader:\n"
        "        model(x).backward()\n        opt.step()\n"
    )
    text = (
        "import torch\nfrom torch.utils.data import DataLoader\nfrom engine import train_one_epoch\n"
        "model.cuda()\nloader = DataLoader(ds, num_workers=2)\nfor epoch in range(3):\n"
        "    train_one_epoch(model, loader, opt)\n"
    )
    result = pipe(text, "--output-format", "json", "--stdin-filename", "train.py")
    assert sorted((d["code"], d["filename"]) for d in json.loads(result.stdout)) == [
        ("TL202", "train.py"),
        ("TL203", "train.py"),
    ]
    alone = pipe(text, "--output-format", "json", "-")
    assert json.loads(alone.stdout) == []


def test_unknown_code_and_bad_config_exit_two_on_stdin(project):
    assert pipe("x = 1\n", "--select", "TL999", "-").exit_code == 2
    (project / "pyproject.toml").write_text("[tool.torchlint]\nignor = []\n")
    result = pipe("x = 1\n", "--stdin-filename", "a.py")
    assert result.exit_code == 2
    assert "tool.torchlint.ignor: unknown key" in result.stderr


def test_fix_with_an_output_file_sends_the_report_there_and_only_the_text_to_stdout(project):
    result = pipe(
        DEPRECATED, "--fix", "--output-format", "json", "-o", "out/report.json", "--stdin-filename", "a.py"
    )
    assert (result.exit_code, result.stdout, result.stderr) == (0, FIXED, "")
    assert json.loads((project / "out" / "report.json").read_text()) == []
