"""Every output the README shows is torchlint's real output, checked here so that it cannot go stale (issue 33).

Transcripts. A README block whose first line starts with `$ ` is a shell session: each `$ ` line is a
command, the lines after it are what it printed (stdout and stderr together, as a terminal shows them). The
session is replayed in an empty folder: a `$ cat FILE` first recreates FILE from the lines it shows, then
the commands run in order in one bash, and the session must print exactly what the block shows. The one
machine-dependent thing normalised is that folder's path, shown as `/tmp/proj`. An output added to the
README as such a transcript is checked with nothing to register; a session that shows only commands (the
Standard input and Fixing blocks) has nothing to compare.

Quotes. Outputs quoted in the prose (an error, a summary line, an annotation) are each checked by a test
below that makes the input its sentence describes, runs the command and finds the quote in what it printed.
Each first finds its quote in the README, so a changed example fails here until its test changes too.

Checked elsewhere: the rule table against `torchlint rules` (tests/test_rule_docs.py), the install and
configuration blocks (tests/test_readme_install.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from readme_blocks import README, Block, blocks
from support import FIXTURES

import torchlint

SHOWN_FOLDER = "/tmp/proj"
NEXT_COMMAND = "\x1e next command \x1e"
DEPRECATED_AUTOCAST = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"


def transcripts() -> list[Block]:
    return [
        b
        for b in blocks()
        if b.text.startswith("$ ") and any(not line.startswith("$ ") for line in b.text.splitlines())
    ]


def session(text: str) -> list[tuple[str, str]]:
    """(command, what it printed) for each `$ ` line of a transcript."""
    steps: list[tuple[str, str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("$ "):
            steps.append((line[2:].rstrip("\n"), ""))
        else:
            command, printed = steps[-1]
            steps[-1] = (command, printed + line)
    return steps


def replay(steps: list[tuple[str, str]], folder: Path) -> str:
    """Run the commands in one bash (so `echo $?` sees the command before), each one's output kept apart."""
    for command, printed in steps:
        if command.startswith("cat "):
            (folder / command.removeprefix("cat ")).write_text(printed)
    script = "exec 2>&1\nstatus=0\n" + "".join(
        f"printf '%s\\n' '{NEXT_COMMAND}'\n(exit $status)\n{command}\nstatus=$?\n" for command, _ in steps
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TORCHLINT_NO_CACHE": "1",
    }
    result = subprocess.run(
        ["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    printed = result.stdout.split(f"{NEXT_COMMAND}\n")[1:]
    return "".join(f"$ {command}\n{output}" for (command, _), output in zip(steps, printed, strict=True))


@pytest.mark.parametrize("block", transcripts(), ids=lambda b: f"README.md:{b.line}")
def test_each_transcript_prints_what_the_readme_shows(block, tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    assert replay(session(block.text), folder).replace(str(folder), SHOWN_FOLDER) == block.text


def test_the_readme_has_a_transcript_to_check():
    assert transcripts()


# -- quotes in the prose --------------------------------------------------------------------------------


def quoted(snippet: str) -> str:
    """The snippet, once it is found in the README (prose wraps: any run of spaces may be a line break)."""
    pattern = r"\s+".join(re.escape(word) for word in snippet.split(" "))
    assert re.search(pattern, README.read_text(encoding="utf-8")), f"README.md no longer quotes {snippet!r}"
    return snippet


def torchlint_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchlint", *args],
        cwd=folder,
        env={**os.environ, "TORCHLINT_NO_CACHE": "1"},  # an option before a subcommand would make it a path
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def folder(project) -> Path:
    """An empty project (conftest's), where each test writes the input its example describes."""
    return project


def test_a_mistyped_subcommand_is_an_error_with_a_tip(folder):
    result = torchlint_in(folder, "rlues")
    assert result.returncode == 2
    assert quoted("`error: unrecognized subcommand 'rlues'`")[1:-1] in result.stderr.splitlines()
    assert f"  {quoted('`tip: a similar subcommand exists: ')[1:]}'rules'" in result.stderr.splitlines()


def test_an_unknown_rule_code_is_an_error(folder):
    result = torchlint_in(folder, "--select", "TL999", ".")
    assert result.returncode == 2
    assert result.stderr == quoted("`error: --select: unknown rule code 'TL999'`")[1:-1] + "\n"


def test_the_version_subcommand_prints_the_version_the_usage_shows(folder):
    result = torchlint_in(folder, "version")
    assert result.stdout == quoted(f"(torchlint {torchlint.__version__};")[1:-1] + "\n"


def test_fix_only_says_how_many_findings_it_fixed(folder):
    (folder / "train.py").write_text(DEPRECATED_AUTOCAST + "scaler = torch.cuda.amp.GradScaler()\n")
    result = torchlint_in(folder, "--fix-only", "train.py")
    assert (result.returncode, result.stdout) == (0, quoted("`Fixed 2 findings.`")[1:-1] + "\n")


def test_show_fixes_lists_what_was_fixed_per_rule(folder):
    (folder / "train.py").write_text(DEPRECATED_AUTOCAST)
    result = torchlint_in(folder, "--fix", "--show-fixes", "train.py")
    assert f"    {quoted('`1 × TL303 (deprecated-amp-autocast)`')[1:-1]}\n" in result.stdout


def test_statistics_prints_a_count_per_rule_on_the_fixtures():
    result = torchlint_in(FIXTURES.parent, "--statistics", "fixtures/")
    counts = [line.lstrip(" ") for line in result.stdout.splitlines()]  # counts are right-aligned
    assert quoted("`4\tTL204\t[ ] dataloader-invalid-worker-options`")[1:-1] in counts


def test_the_github_format_annotates_the_line_of_the_finding(folder):
    (folder / "train.py").write_text(DEPRECATED_AUTOCAST.replace("\n\n", "\n"))
    result = torchlint_in(folder, "--output-format", "github", "train.py")
    shown = quoted(
        "`::warning file=train.py,line=2,col=6,endLine=2,endColumn=29,title=torchlint (TL303)::TL303 ...`"
    )
    assert result.stdout.startswith(shown[1:-4]) and result.stdout.count("\n") == 1


def test_the_azure_format_logs_an_issue_with_the_absolute_path(folder):
    (folder / "train.py").write_text(DEPRECATED_AUTOCAST)
    result = torchlint_in(folder, "--output-format", "azure", "train.py")
    shown = quoted(
        "`##vso[task.logissue type=warning;sourcepath=/abs/train.py;linenumber=3;columnnumber=6;code=TL303;]message`"
    )
    normalised = result.stdout.replace(str(folder), "/abs").partition("]")
    assert normalised[0] + normalised[1] + "message" == shown[1:-1]


def test_a_stale_noqa_is_reported_as_unused_and_unknown(folder):
    line_12 = "value = torch.ones(3)".ljust(29) + "# noqa: E501, TL201, TL999"
    (folder / "train.py").write_text("import torch\n" + "\n" * 10 + line_12 + "\n")
    result = torchlint_in(folder, "train.py")
    shown = quoted("`train.py:12:30: TL003 [*] Unused `noqa` directive (unused: `TL201`; unknown: `TL999`)`")
    assert result.stdout.startswith(shown[1:-1] + "\n")


def test_the_fix_of_an_unused_noqa_keeps_the_other_tools_codes(folder):
    before, after = quoted("`# noqa: E501, TL201` becomes `# noqa: E501`").split(" becomes ")
    (folder / "train.py").write_text(f"x = 1  {before[1:-1]}\n")
    torchlint_in(folder, "--fix", "train.py")
    assert (folder / "train.py").read_text() == f"x = 1  {after[1:-1]}\n"


def test_add_noqa_merges_the_code_into_the_lines_own_noqa(folder):
    before, after = quoted("`# noqa: E501` becomes `# noqa: E501, TL303`").split(" becomes ")
    (folder / "train.py").write_text(DEPRECATED_AUTOCAST.replace("():\n", f"():  {before[1:-1]}\n"))
    result = torchlint_in(folder, "--add-noqa", "train.py")
    assert result.returncode == 0
    assert (folder / "train.py").read_text() == DEPRECATED_AUTOCAST.replace("():\n", f"():  {after[1:-1]}\n")


def test_add_noqa_says_how_many_comments_it_wrote(folder):
    (folder / "train.py").write_text(DEPRECATED_AUTOCAST + "scaler = torch.cuda.amp.GradScaler()\n")
    result = torchlint_in(folder, "--add-noqa", "train.py")
    assert result.stderr == quoted("`Added N noqa directives.`")[1:-1].replace("N", "2") + "\n"


SOME_FIXED = """\
import torch
from torch.utils.data import DataLoader

scaler = torch.cuda.amp.GradScaler()


@torch.cuda.amp.custom_fwd
def step(model, batch):
    with torch.cuda.amp.autocast():
        return model(batch)


def loaders(train_set, test_set):
    return DataLoader(train_set, persistent_workers=True), DataLoader(test_set, prefetch_factor=4)
"""


def test_the_fix_summary_counts_the_fixed_and_the_remaining(folder):
    (folder / "train.py").write_text(SOME_FIXED)  # three safe fixes, two findings without a fix
    result = torchlint_in(folder, "--fix", "train.py")
    assert result.returncode == 1
    assert f"\n{quoted('(`Found 5 findings (3 fixed, 2 remaining).`')[2:-1]}\n" in result.stdout


def test_a_version_that_is_no_string_is_an_error_naming_the_file_and_the_key(folder):
    (folder / "pyproject.toml").write_text("[tool.torchlint]\ntorch-version = 2.1\n")
    result = torchlint_in(folder, ".")
    shown = quoted(
        '`error: /tmp/proj/pyproject.toml: tool.torchlint.torch-version: expected a version string like "2.1", got 2.1`'
    )
    assert result.returncode == 2
    assert result.stderr.replace(str(folder), SHOWN_FOLDER) == shown[1:-1] + "\n"
