"""The fixing options a ruff user reaches for: --no-unsafe-fixes, --fix-only, --show-fixes,
--exit-non-zero-on-fix and --add-noqa, with their exact output and exit codes (ruff 0.17's behaviour, side by
side in tests/test_ruff_parity.py)."""

from __future__ import annotations

from click.testing import CliRunner

from torchlint.cli import main

# TL303 has a safe fix (line 4), TL105 an unsafe one (line 7).
TRAIN = """\
import torch
from torch import nn

with torch.cuda.amp.autocast():
    pass
model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2)).cuda()
model.compile()
"""
SAFE_FIXED = TRAIN.replace("torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda")')
TL303 = 'train.py:4:6: TL303 `torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`'
TL105 = (
    "train.py:7:1: TL105 `model` is an `nn.Sequential`, whose `.compile()` compiles nothing (Dynamo skips "
    "`Sequential`'s call); use `torch.compile`"
)
HIDDEN = "(1 hidden fix can be enabled with the `--unsafe-fixes` option)"


def invoke(*args: str):
    return CliRunner().invoke(main, ["--no-cache", *args], catch_exceptions=False)


def test_no_unsafe_fixes_turns_off_the_configs_unsafe_fixes(project):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nunsafe-fixes = true\n")
    (project / "train.py").write_text(TRAIN)
    on = invoke("--output-format", "concise")
    assert on.stdout.splitlines()[-1] == "[*] 2 fixable with the `--fix` option."
    off = invoke("--output-format", "concise", "--no-unsafe-fixes")
    assert off.stdout.splitlines()[-1] == f"[*] 1 fixable with the `--fix` option {HIDDEN}."
    assert invoke("--fix", "--no-unsafe-fixes").exit_code == 1
    assert (project / "train.py").read_text() == SAFE_FIXED
    assert (
        invoke("--unsafe-fixes", "--no-unsafe-fixes", "--fix").exit_code == 1
    )  # the last one wins, as in ruff


def test_fix_only_fixes_reports_no_finding_and_exits_zero(project):
    (project / "train.py").write_text(TRAIN)
    result = invoke("--fix-only")
    assert (result.exit_code, result.stdout, result.stderr) == (
        0,
        "Fixed 1 finding (1 additional fix available with `--unsafe-fixes`).\n",
        "",
    )
    assert (project / "train.py").read_text() == SAFE_FIXED
    again = invoke("--fix-only")
    assert (again.exit_code, again.stdout) == (0, "")


def test_fix_only_with_unsafe_fixes_and_quiet(project):
    (project / "train.py").write_text(TRAIN)
    result = invoke("--fix-only", "--unsafe-fixes", "-q")
    assert (result.exit_code, result.stdout) == (0, "")
    assert "model = torch.compile(model)" in (project / "train.py").read_text()


def test_fix_only_with_diff_prints_the_diff_and_writes_nothing(project):
    (project / "train.py").write_text(TRAIN)
    result = invoke("--fix-only", "--diff")
    assert result.exit_code == 1
    assert '+with torch.amp.autocast("cuda"):' in result.stdout
    assert (project / "train.py").read_text() == TRAIN


def test_show_fixes_lists_what_was_fixed_per_file_and_rule(project):
    (project / "train.py").write_text(TRAIN)
    result = invoke("--fix", "--show-fixes", "--output-format", "concise")
    assert result.exit_code == 1
    assert result.stdout == (
        f"{TL105}\n"
        "\n"
        "Fixed 1 finding:\n"
        "- train.py:\n"
        "    1 × TL303 (deprecated-amp-autocast)\n"
        "\n"
        "Found 2 findings (1 fixed, 1 remaining).\n"
        f"No fixes available {HIDDEN}.\n"
    )


def test_show_fixes_with_fix_only(project):
    (project / "train.py").write_text(TRAIN)
    result = invoke("--fix-only", "--show-fixes", "--unsafe-fixes")
    assert result.stdout == (
        "\n"
        "Fixed 2 findings:\n"
        "- train.py:\n"
        "    1 × TL105 (sequential-compile-noop)\n"
        "    1 × TL303 (deprecated-amp-autocast)\n"
        "\n"
        "Fixed 2 findings.\n"
    )


def test_show_fixes_without_fix_changes_nothing(project):
    (project / "train.py").write_text(TRAIN)
    assert invoke("--show-fixes", "-q").stdout == invoke("-q").stdout


def test_exit_non_zero_on_fix(project):
    (project / "train.py").write_text(TRAIN)
    assert invoke("--fix-only", "--exit-non-zero-on-fix").exit_code == 1  # it fixed TL303
    assert invoke("--fix-only", "--exit-non-zero-on-fix").exit_code == 0  # nothing left to fix
    (project / "train.py").write_text(TRAIN)
    assert invoke("--fix", "--unsafe-fixes", "--exit-non-zero-on-fix").exit_code == 1  # all fixed, still 1
    assert invoke("--fix", "--exit-non-zero-on-fix").exit_code == 0
    (project / "train.py").write_text(TRAIN)
    assert invoke("--fix", "--exit-non-zero-on-fix", "--exit-zero").exit_code == 0  # as in ruff


def test_add_noqa_writes_a_directive_per_line_and_says_how_many(project):
    (project / "train.py").write_text(TRAIN.replace("model.compile()", "model.compile()  # noqa: E501"))
    result = invoke("--add-noqa")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "Added 2 noqa directives.\n")
    assert (project / "train.py").read_text() == (
        TRAIN.replace("autocast():", "autocast():  # noqa: TL303").replace(
            "model.compile()", "model.compile()  # noqa: E501, TL105"
        )
    )
    assert invoke().stdout == "All checks passed!\n"
    again = invoke("--add-noqa")
    assert (again.exit_code, again.stdout, again.stderr) == (0, "", "")


def test_add_noqa_leaves_syntax_errors_alone_and_refuses_fix(project):
    (project / "broken.py").write_text("def f(:\n")
    result = invoke("--add-noqa")
    assert (result.exit_code, result.stderr) == (0, "")
    assert (project / "broken.py").read_text() == "def f(:\n"
    refused = invoke("--add-noqa", "--fix")
    assert refused.exit_code == 2
    assert refused.stderr == (
        "error: --add-noqa cannot be combined with --fix, --fix-only, --diff or standard input\n"
    )
