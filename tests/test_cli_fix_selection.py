"""ruff's habits for choosing what is reported and fixed: `--ignore-noqa` (report what `# noqa` comments
suppress), and `fixable` / `extend-fixable` / `unfixable` (on the command line and in the config) deciding
which rules' fixes `--fix` may apply, with the same precedence as `select` / `ignore`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from torchlint.cli import main

TWO = "import torch\ns = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    pass\n"
AFTER_TL303 = 'import torch\ns = torch.cuda.amp.GradScaler()\nwith torch.amp.autocast("cuda"):\n    pass\n'
AFTER_TL304 = 'import torch\ns = torch.amp.GradScaler("cuda")\nwith torch.cuda.amp.autocast():\n    pass\n'


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(TWO)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def codes(*args: str) -> list[str]:
    return [d["code"] for d in json.loads(run("--output-format", "json", *args).output)]


def test_ignore_noqa_reports_what_the_comments_suppress_and_no_unused_noqa(repo):
    (repo / "train.py").write_text(TWO.replace("GradScaler()", "GradScaler()  # noqa: TL304, TL101"))
    assert codes("--no-cache") == ["TL003", "TL303"]  # TL101 suppresses nothing
    assert codes("--no-cache", "--ignore-noqa") == ["TL304", "TL303"]


def test_ignore_noqa_is_part_of_what_the_cache_answers(repo):
    (repo / "train.py").write_text(TWO.replace("GradScaler()", "GradScaler()  # noqa: TL304"))
    assert codes() == ["TL303"]
    assert codes("--ignore-noqa") == ["TL304", "TL303"]  # not the cached answer of the run before
    assert codes() == ["TL303"]


def test_unfixable_keeps_a_rules_fix_out_of_fix(repo):
    result = run("--no-cache", "--fix", "--unfixable", "TL304", ".")
    assert (repo / "train.py").read_text() == AFTER_TL303
    assert result.exit_code == 1  # TL304 remains


def test_fixable_limits_fix_to_those_rules_and_the_summary_counts_them_only(repo):
    result = run("--no-cache", "--fixable", "TL304", ".")
    assert "[*] 1 fixable with the `--fix` option." in result.output
    run("--no-cache", "--fix", "--fixable", "TL304", ".")
    assert (repo / "train.py").read_text() == AFTER_TL304


def test_the_most_specific_selector_wins_and_on_a_tie_unfixable(repo):
    run("--no-cache", "--fix", "--unfixable", "TL3", "--extend-fixable", "TL303", ".")
    assert (repo / "train.py").read_text() == AFTER_TL303
    (repo / "train.py").write_text(TWO)
    run("--no-cache", "--fix", "--fixable", "TL303", "--unfixable", "TL303", ".")
    assert (repo / "train.py").read_text() == TWO


def test_fixable_and_unfixable_in_the_config(repo):
    (repo / "torchlint.toml").write_text('unfixable = ["TL303"]\n')
    run("--no-cache", "--fix", ".")
    assert (repo / "train.py").read_text() == AFTER_TL304


def test_an_unknown_code_in_fixable_is_an_error_naming_the_option(repo):
    result = run("--no-cache", "--unfixable", "TL999", ".")
    assert result.exit_code == 2
    assert "--unfixable: unknown rule code 'TL999'" in result.output
