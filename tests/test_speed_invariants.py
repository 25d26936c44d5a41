"""Speed must not change answers: any --jobs, prefilter on or off, cold or warm cache give the same output."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner
from support import FIXTURES, REPO, RULE_DOCS, doc_sections, python_blocks

from torchlint.api import RunOptions, run
from torchlint.cli import main


def findings(outcome) -> list[tuple]:
    return [(d.path, d.location.line, d.location.column, d.code, d.message) for d in outcome.diagnostics]


@pytest.fixture
def fixtures_copy(tmp_path, monkeypatch):
    """The fixtures in a project of their own (so the cache goes there)."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURES, root / "copy", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "pyproject.toml").write_text("[project]\nname = 'copy'\n")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def two_copies(tmp_path, monkeypatch):
    """Enough files for the parallel path (it starts at 16)."""
    root = tmp_path / "project"
    for copy in range(2):
        shutil.copytree(FIXTURES, root / f"copy{copy}", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "pyproject.toml").write_text("[project]\nname = 'copies'\n")
    monkeypatch.chdir(root)
    return root


def test_jobs_do_not_change_the_output(two_copies):
    one = run(RunOptions(paths=[two_copies], jobs=1, cache=False))
    two = run(RunOptions(paths=[two_copies], jobs=2, cache=False))
    assert findings(one) == findings(two) and len(findings(one)) > 30
    assert (one.files_checked, one.parsed) == (two.files_checked, two.parsed)


def test_prefilter_never_hides_a_finding_in_fixtures_or_docs(tmp_path):
    on = run(RunOptions(paths=[FIXTURES], cache=False))
    off = run(RunOptions(paths=[FIXTURES], cache=False, prefilter=False))
    assert findings(on) == findings(off)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pyproject.toml").write_text("[project]\nname = 'docs'\n")
    for doc in sorted(RULE_DOCS.glob("*.md")):
        for section in ("Example", "Use instead", "Not flagged"):
            for index, block in enumerate(python_blocks(doc_sections(doc.stem).get(section, ""))):
                (docs / f"{doc.stem}_{section.replace(' ', '_')}_{index + 1}.py").write_text(block)
    on = run(RunOptions(paths=[docs], cache=False))
    off = run(RunOptions(paths=[docs], cache=False, prefilter=False))
    assert findings(on) == findings(off) and findings(on)


def test_prefilter_skips_files_that_cannot_trigger(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "math_utils.py").write_text(
        "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))  # example\n"
    )
    (tmp_path / "train.py").write_text("import torch\nwith torch.cuda.amp.autocast():\n    pass\n")
    outcome = run(RunOptions(paths=[tmp_path], cache=False))
    assert (outcome.files_checked, outcome.parsed) == (2, 1)


def test_warm_cache_gives_the_cold_output(fixtures_copy):
    cold = run(RunOptions(paths=[fixtures_copy], jobs=1))
    assert (fixtures_copy / ".torchlint_cache" / "CACHEDIR.TAG").is_file()
    warm = run(RunOptions(paths=[fixtures_copy], jobs=1))
    assert findings(warm) == findings(cold)
    assert warm.from_cache == warm.files_checked and warm.parsed == 0


def test_editing_the_engine_rechecks_the_training_script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "engine.py").write_text(
        "def train_one_epoch(model, loader, opt):\n    for x in loader:\n        model(x).backward()\n        opt.step()\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\nfrom engine import train_one_epoch\n"
        "model.cuda()\nloader = DataLoader(ds, num_workers=2)\nfor epoch in range(3):\n"
        "    train_one_epoch(model, loader, opt)\n"
    )
    first = run(RunOptions(paths=[tmp_path / "train.py"]))
    assert [d.code for d in first.diagnostics] == ["TL202", "TL203"]
    (tmp_path / "engine.py").write_text("def train_one_epoch(model, loader, opt):\n    pass\n")
    second = run(RunOptions(paths=[tmp_path / "train.py"]))
    assert second.from_cache == 0 and second.diagnostics == []


def test_a_corrupted_cache_entry_is_ignored_and_rebuilt(fixtures_copy):
    cold = run(RunOptions(paths=[fixtures_copy], jobs=1))
    for entry in fixtures_copy.rglob(".torchlint_cache/results/*.json"):  # also a nested project's
        entry.write_text("{not json")
    again = run(RunOptions(paths=[fixtures_copy], jobs=1))
    assert findings(again) == findings(cold) and again.from_cache == 0
    warm = run(RunOptions(paths=[fixtures_copy], jobs=1))
    assert warm.from_cache == warm.files_checked


def test_statistics_counts_per_rule(monkeypatch):
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(main, ["fixtures/", "--statistics", "--no-cache"])
    lines = result.output.splitlines()
    assert result.exit_code == 1
    assert "4\tTL204\t[ ] dataloader-invalid-worker-options" in [
        line.strip() for line in lines
    ]  # counts align
    assert any(line.endswith("\tTL303\t[*] deprecated-amp-autocast") for line in lines)


def test_github_annotations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("import torch\nwith torch.cuda.amp.autocast():\n    pass\n")
    result = CliRunner().invoke(main, ["--output-format", "github", "train.py"])
    assert result.output == (
        "::warning file=train.py,line=2,col=6,endLine=2,endColumn=29,title=torchlint (TL303)::"
        'TL303 `torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`\n'
    )
    assert result.exit_code == 1


def test_json_output_is_identical_with_and_without_cache(fixtures_copy):
    args = ["--output-format", "json", "."]
    cold = CliRunner().invoke(main, [*args, "--no-cache"]).output
    CliRunner().invoke(main, args)
    warm = CliRunner().invoke(main, args).output
    assert json.loads(cold) == json.loads(warm)


def test_a_new_importer_of_a_factory_rechecks_the_factory(tmp_path, monkeypatch):
    """The factory's findings depend on who imports it: a new file is a change even if no content changed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "data.py").write_text(
        "from torch.utils.data import DataLoader\n\n\ndef build_loader(ds):\n"
        "    return DataLoader(ds, batch_size=32, num_workers=2)\n"
    )
    assert run(RunOptions(paths=[tmp_path / "data.py"])).diagnostics == []
    (tmp_path / "train.py").write_text(
        "import torch\nfrom data import build_loader\n\nmodel = Net().cuda()\nloader = build_loader(ds)\n"
        "for epoch in range(3):\n    for x in loader:\n        model(x).backward()\n        opt.step()\n"
    )
    again = run(RunOptions(paths=[tmp_path / "data.py"]))
    assert [(d.path, d.code) for d in again.diagnostics] == [("data.py", "TL202"), ("data.py", "TL203")]
    assert again.from_cache == 0
    warm = run(RunOptions(paths=[tmp_path / "data.py"]))
    assert warm.from_cache == 1 and len(warm.diagnostics) == 2


@pytest.mark.parametrize("cache", [["--no-cache"], []])
def test_a_file_no_rule_can_fire_on_is_checked_without_importing_libcst(tmp_path, cache):
    """The prefilter's point: the rules, the fix builders and the run import LibCST only to parse. A module
    level LibCST name (a base class, a constant) in any of them would put its ~0.25 s on every run; so would
    the project index of a cached run, which every checked file's cache entry asks for its dependencies."""
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "plain.py").write_text("x = 1\n")
    code = (
        f"import sys; from torchlint.cli import main; sys.argv = ['torchlint', *{cache!r}, 'plain.py']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('libcst._nodes.expression' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout + done.stderr


def test_a_check_runs_without_the_cyclic_collector_and_gives_it_back():
    """Full passes of the cyclic collector over the facts a run keeps cost a fifth of a whole-tree run: it is
    off while a file is checked (also through a fix's re-checks), on again after, and left off when the
    caller had turned it off."""
    import gc

    from torchlint.linter import Linter
    from torchlint.rules.base import Rule
    from torchlint.workspace.settings import Settings

    seen: list[bool] = []

    class Probe(Rule):
        code = "TL999"
        name = "probe"

        def check(self, facts):
            seen.append(gc.isenabled())
            return iter(())

    linter = Linter(rule_classes={"TL999": Probe})
    settings = Settings(select=("TL999",))
    assert gc.isenabled()
    linter.check_text("probe.py", "import torch\n", settings, in_project=False)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        linter.fix_text("probe.py", "import torch\n", settings, unsafe=True, in_project=False)
        assert seen == [False, False] and not gc.isenabled()
    finally:
        gc.enable()


GOLDEN = REPO / "tests" / "data" / "fixtures-select-all.json"


def test_the_fixtures_output_is_byte_for_byte_the_recorded_one(fixtures_copy, monkeypatch):
    """Speed work must not move a finding, a message or a fix: every finding of every rule on the fixtures,
    fixes included, as recorded in tests/data. A change that means to alter them re-records the file with
    TORCHLINT_RECORD_GOLDEN=1 (and the diff of that file is then part of the change to review)."""
    result = CliRunner().invoke(main, ["--select", "ALL", "--output-format", "json", "--no-cache", "copy"])
    assert result.exit_code == 1, result.output
    if os.environ.get("TORCHLINT_RECORD_GOLDEN"):
        GOLDEN.write_text(result.output, encoding="utf-8")
    assert result.output == GOLDEN.read_text(encoding="utf-8")


def test_the_console_script_runs_its_command_without_the_collector_and_a_fix_with_it(monkeypatch):
    """A command of the console script keeps what it builds until the process ends: the collector stays off
    for all of it (no pass between files, none at exit over frozen objects). A run that fixes, whose passes
    leave cycles behind, turns it back on; the Language Server, which drops each check's facts, leaves it
    off and runs the passes itself when the editor pauses (`torchlint.lsp.worker`)."""
    import gc

    import torchlint.cli as cli
    import torchlint.lsp as lsp

    states: list[bool] = []
    command = cli.main
    monkeypatch.setattr(cli, "main", lambda: states.append(gc.isenabled()))
    monkeypatch.setattr(lsp, "serve", lambda: states.append(gc.isenabled()))
    try:
        cli.entry()
        assert states == [False] and gc.get_freeze_count() > 0
        gc.unfreeze()
        CliRunner().invoke(cli.lsp, [])  # as `torchlint lsp` runs, with the collector off from `entry`
        assert states == [False, False]
        gc.disable()  # as `entry` leaves it: a run that fixes turns it back on
        result = CliRunner().invoke(
            command, ["--fix", "--no-cache", "--select", "TL304", "-"], input="x = 1\n"
        )
        assert result.exit_code == 0 and gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()
