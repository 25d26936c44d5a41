"""The command line behaves like ruff's: subcommand-less invocation, selection, formats, exit codes."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from torchlint import __version__
from torchlint.cli import main

DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_check_is_the_default_command_and_defaults_to_the_current_folder(project):
    (project / "train.py").write_text(DEPRECATED)
    for args in ([], ["."], ["check"], ["check", "."]):
        result = invoke(*args, "--output-format", "concise")
        assert result.exit_code == 1
        assert result.output.splitlines()[0] == (
            "train.py:3:6: TL303 `torch.cuda.amp.autocast` is deprecated since torch 2.4: "
            'use `torch.amp.autocast("cuda", ...)`'
        )


def test_full_format_shows_the_line_a_caret_and_the_fix(project):
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("train.py")
    assert result.exit_code == 1
    assert result.output == textwrap.dedent(
        """\
        train.py:3:6: TL303 [*] `torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`
          |
        3 | with torch.cuda.amp.autocast():
          |      ^^^^^^^^^^^^^^^^^^^^^^^ TL303
          |
          = help: Replace with `torch.amp.autocast`
          |
        2 |
          - with torch.cuda.amp.autocast():
        3 + with torch.amp.autocast("cuda"):
        4 |     pass
          |

        Found 1 finding.
        [*] 1 fixable with the `--fix` option.
        """
    )


def test_clean_code_exits_zero(project):
    (project / "train.py").write_text("import torch\nwith torch.amp.autocast('cuda'):\n    pass\n")
    result = invoke()
    assert (result.exit_code, result.output) == (0, "All checks passed!\n")


def test_fix_works_without_the_check_subcommand(project):
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("--fix", ".")
    assert result.exit_code == 0
    assert (
        project / "train.py"
    ).read_text() == 'import torch\n\nwith torch.amp.autocast("cuda"):\n    pass\n'
    assert invoke("check", "--fix", ".").exit_code == 0


def test_diff_writes_nothing_and_exits_one(project):
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("--diff", "train.py")
    assert result.exit_code == 1
    assert '+with torch.amp.autocast("cuda"):' in result.output
    assert (project / "train.py").read_text() == DEPRECATED


def test_a_folder_named_like_a_subcommand_is_checked(project):
    (project / "rules").mkdir()
    (project / "rules" / "train.py").write_text(DEPRECATED)
    result = invoke("check", "rules/", "--output-format", "concise", "-q")
    assert result.exit_code == 1
    assert result.output.startswith("rules/train.py:3:6: TL303")


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--select", "TL304"], ["TL304"]),
        (["--select", "TL3"], ["TL303", "TL304"]),
        (["--select", "TL30"], ["TL303", "TL304"]),
        (["--select", "ALL", "--ignore", "TL303"], ["TL304"]),
        (["--select", "TL303,TL304"], ["TL303", "TL304"]),
        (["--ignore", "TL3", "--extend-select", "TL304"], ["TL304"]),
        (["--ignore", "TL3"], []),
    ],
)
def test_selection_by_code_or_prefix(project, args, expected):
    (project / "train.py").write_text("import torch\ns = torch.cuda.amp.GradScaler()\n" + DEPRECATED[13:])
    result = invoke("--output-format", "json", *args)
    assert sorted({d["code"] for d in json.loads(result.output)}) == expected


def test_unknown_rule_code_on_the_command_line_exits_two(project):
    result = invoke("--select", "TL999")
    assert result.exit_code == 2
    assert "unknown rule code 'TL999'" in result.output


def test_exit_zero_keeps_findings_but_not_errors(project):
    (project / "train.py").write_text(DEPRECATED)
    assert invoke("--exit-zero").exit_code == 0
    assert invoke("--exit-zero", "--select", "TL999").exit_code == 2


def test_a_selection_that_enables_no_rule_is_an_error_not_a_pass(project):
    """`--select TL1 --ignore TL1`: the tie goes to `ignore`, so nothing would be checked."""
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("--select", "TL1", "--ignore", "TL1")
    assert result.exit_code == 2
    assert "error: no rule is enabled for any file" in result.stderr
    assert "All checks passed" not in result.output


def test_a_missing_path_is_a_finding_and_the_other_paths_are_still_checked(project):
    """As ruff's E902: one mistyped path does not hide the findings of the others."""
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("--output-format", "concise", "nowhere/train.py", "train.py")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:2] == [
        "nowhere/train.py:1:1: TL002 nowhere/train.py: cannot read: No such file or directory",
        'train.py:3:6: TL303 `torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`',
    ]
    assert "All checks passed" not in result.output


def test_notebooks_are_checked_when_named_and_in_walks_and_a_broken_one_is_a_finding(project):
    """Issue 32: a notebook is read like a module (a `{}` file is no notebook: TL002, never a pass)."""
    (project / "train.py").write_text("x = 1\n")
    (project / "explore.ipynb").write_text(
        '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    )
    (project / "notebooks").mkdir()
    (project / "notebooks" / "eda.ipynb").write_text("{}")
    named = invoke("--output-format", "concise", "explore.ipynb", "train.py")
    assert named.exit_code == 0
    assert "All checks passed!" in named.output
    walked = invoke("--output-format", "concise", ".")
    assert walked.exit_code == 1
    assert walked.stdout.splitlines()[0] == (
        "notebooks/eda.ipynb:1:1: TL002 notebooks/eda.ipynb: not a notebook: no `cells` (is it nbformat 4?)"
    )


def test_json_uses_ruffs_field_names(project):
    (project / "train.py").write_text(DEPRECATED)
    [finding] = json.loads(invoke("--output-format", "json").output)
    assert finding == {
        "code": "TL303",
        "name": "deprecated-amp-autocast",
        "message": '`torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`',
        "note": None,
        "severity": "warning",
        "filename": "train.py",
        "cell": None,
        "location": {"row": 3, "column": 6},
        "end_location": {"row": 3, "column": 29},
        "noqa_row": 3,
        "fix": {
            "applicability": "safe",
            "message": "Replace with `torch.amp.autocast`",
            "edits": [
                {
                    "content": 'amp.autocast("cuda"',
                    "location": {"row": 3, "column": 12},
                    "end_location": {"row": 3, "column": 30},
                },
            ],
        },
        "url": "https://docs.example/torchlint/rules/TL303.md",
    }


def test_syntax_errors_and_unreadable_files_are_findings_and_others_are_still_checked(project):
    (project / "a.py").write_text("def f(:\n    pass\n")
    (project / "b.py").write_bytes(b"import torch\nx = '\xe9'\n")
    (project / "c.py").write_text(DEPRECATED)
    (project / "d.py").mkdir()
    result = invoke("--output-format", "concise", "-q", "a.py", "b.py", "c.py", "d.py")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == "a.py:1:7: TL001 SyntaxError: invalid syntax"
    assert lines[1] == "b.py:2:1: TL002 b.py: cannot decode as utf-8 (line 2): invalid continuation byte"
    assert lines[2].startswith("c.py:3:6: TL303")
    assert lines[3] == "d.py:1:1: TL002 d.py: is a directory, not a file"


def test_binary_file_is_an_io_error(project):
    (project / "blob.py").write_bytes(b"\x00\x01\x02")
    result = invoke("--output-format", "concise", "-q", "blob.py")
    assert result.output == "blob.py:1:1: TL002 blob.py: contains NUL bytes: not a Python source file\n"


def test_version():
    result = invoke("--version")
    assert (result.exit_code, result.output) == (0, f"torchlint {__version__}\n")


def test_rules_table_lists_every_rule():
    lines = invoke("rules").output.splitlines()
    assert lines[0].split() == ["code", "name", "family", "fix"]
    assert ["TL303", "deprecated-amp-autocast", "mixed", "precision", "sometimes"] in [
        line.split() for line in lines
    ]


def test_rule_prints_its_doc_and_unknown_rule_exits_two():
    result = invoke("rule", "TL304")
    assert result.exit_code == 0 and result.output.startswith("# TL304 deprecated-grad-scaler\n")
    assert invoke("rule", "deprecated-grad-scaler").output == result.output
    assert invoke("rule", "TL999").exit_code == 2


def test_quiet_prints_findings_only(project):
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("-q", "--output-format", "concise")
    assert result.output.count("\n") == 1


def test_a_run_that_finds_no_python_file_warns_and_never_claims_all_checks_passed(project):
    (project / "notes.txt").write_text("not python\n")
    result = invoke(".")
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == "warning: No Python files found under the given path(s)\n"


def test_silent_prints_nothing_but_the_exit_code_tells(project):
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("--silent", "--no-cache")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", "")
    assert invoke("-s", "--no-cache", "--output-format", "json").stdout == ""
    missing = invoke("-s", "missing.py")  # a TL002 finding: silent, the exit code tells
    assert (missing.exit_code, missing.stdout, missing.stderr) == (1, "", "")
    wrong = invoke("-s", "--select", "TL999")  # errors still go to stderr
    assert (wrong.exit_code, wrong.stdout) == (2, "")
    assert wrong.stderr.startswith("error: ")


def test_e_is_exit_zero(project):
    (project / "train.py").write_text(DEPRECATED)
    assert invoke("-e").exit_code == 0
    assert invoke("-e", "missing.py").exit_code == 0  # a TL002 finding, which -e masks
    assert invoke("-e", "--select", "TL999").exit_code == 2  # an error, which it never masks


@pytest.mark.parametrize("typo, command", [("rlues", "rules"), ("chek", "check"), ("lintr", "linter")])
def test_a_mistyped_subcommand_says_did_you_mean(project, typo, command):
    result = invoke(typo)
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: unrecognized subcommand '{typo}'\n\n  tip: a similar subcommand exists: '{command}'\n\n"
        f"To check a path of that name that does not exist yet, use `torchlint check {typo}`.\n"
    )


def test_a_path_that_looks_like_a_subcommand_is_still_checked(project):
    (project / "rlues").mkdir()
    (project / "rlues" / "train.py").write_text(DEPRECATED)
    assert invoke("rlues", "-q", "--output-format", "concise").stdout.startswith("rlues/train.py:3:6: TL303")
    missing = invoke("rlues.py", "--output-format", "concise")  # a file name, not a word: a missing path
    assert (missing.exit_code, missing.stdout.splitlines()[0]) == (
        1,
        "rlues.py:1:1: TL002 rlues.py: cannot read: No such file or directory",
    )
    named = invoke("check", "chek", "--output-format", "concise")
    assert named.stdout.splitlines()[0] == "chek:1:1: TL002 chek: cannot read: No such file or directory"


def test_hidden_options_are_never_suggested(project):
    result = invoke("--no-prefilte")
    assert result.exit_code == 2
    assert "No such option '--no-prefilte'" in result.stderr
    assert "--no-prefilter" not in result.stderr
    assert "Did you mean one of: '--cache-dir', '--no-cache', '--watch'?" in invoke("--no-cach").stderr


def test_show_files_lists_what_a_run_would_check_and_checks_nothing(project):
    """ruff's --show-files: what discovery found, as absolute paths, with what it left out on stderr."""
    (project / "train.py").write_text(DEPRECATED)
    (project / "pkg").mkdir()
    (project / "pkg" / "model.py").write_text("x = 1\n")
    (project / "explore.ipynb").write_text("{}")
    result = invoke("--show-files")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        str(project / "explore.ipynb"),
        str(project / "pkg" / "model.py"),
        str(project / "train.py"),
    ]


def test_show_settings_prints_the_first_file_s_settings_and_enabled_rules(project):
    (project / "train.py").write_text(DEPRECATED)
    (project / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL3"]\nignore = ["TL304"]\n')
    result = invoke("--show-settings")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        f"Resolved settings for: {project / 'train.py'}",
        f"Settings path: {project / 'pyproject.toml'}",
    ]
    assert "select = ('TL3',)" in lines and "ignore = ('TL304',)" in lines
    assert lines[-1] == "enabled rules = TL301, TL302, TL303, TL305, TL306, TL307"
