"""`torchlint debug facts FILE` prints the semantic model with lines and provenance."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from support import FIXTURES, REPO

from torchlint.cli import main


@pytest.mark.parametrize("fixture", sorted(p.relative_to(REPO).as_posix() for p in FIXTURES.rglob("*.py")))
def test_debug_facts_runs_on_every_fixture(fixture, monkeypatch):
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(main, ["debug", "facts", fixture], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.output.startswith(f"{fixture}\ndevice: ")


def test_debug_facts_shows_loops_loaders_options_and_uses(monkeypatch):
    monkeypatch.chdir(REPO)
    output = CliRunner().invoke(main, ["debug", "facts", "fixtures/image_classifier/train.py"]).output
    lines = output.splitlines()
    assert lines[1].startswith("device: cuda when available (line ")
    assert "training loops:" in lines and "  line 52 in train" in lines
    assert "    pin_memory = True, via `**train_kwargs`, conditional" in lines
    assert (
        "    feeds training via a training loop in fixtures/image_classifier/train.py, iterated every epoch"
        in lines
    )
    assert "    feeds no training loop" in lines


def test_debug_facts_on_a_missing_file_exits_two():
    assert CliRunner().invoke(main, ["debug", "facts", "nope.py"]).exit_code == 2


def test_debug_facts_shows_trained_models_and_compile_sites(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    output = CliRunner().invoke(main, ["debug", "facts", "fixtures/compile_cpu/train.py"]).output
    assert (
        "trained models:\n"
        "  `model` trained by `torch.optim.SGD(...)` (line 28)\n"
        "    line 27: place `Regressor().to(device)`\n"
        "    line 27: build `Regressor()`\n"
        "    compiled: no; device: cuda when available\n"
        "compile sites:\n"
        "  (none)\n"
        "precision:\n" in output
    )  # each family's section, in the order of the codes, after what they share
    script = tmp_path / "loop.py"
    script.write_text(
        "import torch\nmodel = Net().cuda()\nopt = torch.optim.SGD(model.parameters())\n"
        "for x in data:\n    step = torch.compile(model)\n    step(x).sum().backward()\n    opt.step()\n"
    )
    output = CliRunner().invoke(main, ["debug", "facts", str(script)]).output
    assert "compile sites:\n  line 5: `torch.compile(...)` of `model`, every training step\n" in output
    assert (
        "    line 5: compile `torch.compile(model)`, in a loop\n    compiled: yes; device: cuda\n" in output
    )
