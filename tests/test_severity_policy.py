"""Severity that means something (issue 33): a trade-off (`info`, TL401) is labelled as one, never sets
exit status 1 nor fails a pre-commit hook unless asked (`--exit-non-zero-on-info`, or
`exit-non-zero-on-info = true`), and its fix is applied only where its rule is selected by its full code,
never by a blanket `--fix --unsafe-fixes`."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from support import FIXTURES

from torchlint.cli import main

WARNING = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


@pytest.fixture
def transformer(tmp_path, monkeypatch):
    """A project whose one finding is TL401 (a trade-off) on model.py, with an unsafe fix."""
    shutil.copytree(
        FIXTURES / "checkpoint_transformer", tmp_path / "p", ignore=shutil.ignore_patterns("__py*")
    )
    (tmp_path / "p" / ".git").mkdir()
    monkeypatch.chdir(tmp_path / "p")
    return tmp_path / "p"


def run(*args: str):
    return CliRunner().invoke(main, ["--no-cache", *args], catch_exceptions=False)


def test_a_trade_off_alone_exits_zero_and_is_labelled(transformer):
    result = run("--select", "TL4", "--output-format", "concise", ".")
    assert result.exit_code == 0
    assert result.output.startswith("model.py:55:23: TL401 (info) `TinyGPT.blocks` holds `Block` blocks")
    shown = json.loads(run("--select", "TL4", "--output-format", "json", ".").output)
    assert [(d["code"], d["severity"]) for d in shown] == [("TL401", "info")]


def test_asking_makes_a_trade_off_fail_the_run(transformer):
    assert run("--select", "TL4", "--exit-non-zero-on-info", ".").exit_code == 1
    (transformer / "torchlint.toml").write_text("exit-non-zero-on-info = true\n")
    assert run("--select", "TL4", ".").exit_code == 1


def test_a_warning_beside_a_trade_off_still_fails_the_run(transformer):
    (transformer / "amp.py").write_text(WARNING)
    result = run("--select", "TL304,TL401", "--output-format", "concise", ".")
    assert result.exit_code == 1
    assert [line.split(" ")[1] for line in result.output.splitlines()[:2]] == ["TL304", "TL401"]


def test_a_blanket_unsafe_fix_leaves_the_trade_off_and_says_how_to_apply_it(transformer):
    before = (transformer / "model.py").read_text()
    result = run("--select", "ALL", "--fix", "--unsafe-fixes", ".")
    assert (transformer / "model.py").read_text() == before
    assert result.output.splitlines()[-1] == (
        "1 trade-off fix (TL401) is applied only with the rule selected by its code: `--select TL401`."
    )
    assert result.exit_code == 0  # only the trade-off remains


@pytest.mark.parametrize("selection", [("--select", "TL401"), ("--extend-select", "TL401")])
def test_selecting_the_rule_by_its_code_applies_its_unsafe_fix(transformer, selection):
    result = run(*selection, "--fix", "--unsafe-fixes", ".")
    fixed = (transformer / "model.py").read_text()
    assert "x = checkpoint(block, x, mask, use_reentrant=False)" in fixed
    assert "Found 1 finding (1 fixed, 0 remaining)." in result.output


def test_the_config_selecting_it_by_code_counts_too(transformer):
    (transformer / "torchlint.toml").write_text('extend-select = ["TL401"]\nunsafe-fixes = true\n')
    run("--fix", ".")
    assert "use_reentrant=False" in (transformer / "model.py").read_text()
