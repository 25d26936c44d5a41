"""TL101-TL105 in the styles real training code is written in, beyond the single cases of rules/TL1xx.md.

Each case is a shape seen in public projects: a `main()` with argparse, a trainer class holding `self.model`,
a factory returning `(model, optimizer)`, the loop in another file, DDP on one line, an EMA copy, a compile
behind a flag, a parameter server that only steps an optimizer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import FIXTURES, codes_and_lines, fix, lint, said, settings

from torchlint.api import RunOptions, run
from torchlint.linter import Linter
from torchlint.workspace.settings import CliOverrides

COMPILE = ("TL1",)


def check_project(tmp_path, files: dict[str, str], checked: str) -> list[tuple[str, int, str]]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    path = tmp_path / checked
    found = Linter().check_text(str(path), path.read_text(), settings(select=COMPILE))
    return [(d.code, d.location.line, said(d)) for d in found]


# -- TL101: which model is trained ------------------------------------------------------------------------


def test_main_with_argparse_gets_the_in_place_compile_after_placement():
    source = """\
    import argparse

    import torch


    def main():
        parser = argparse.ArgumentParser()
        args = parser.parse_args()
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net()
        model.to(device)  # placed
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            for x, y in loader:
                loss = criterion(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
    """
    found = lint(source, select=COMPILE)
    assert [(d.code, d.location.line, d.location.column) for d in found] == [("TL101", 10, 13)]
    assert said(found[0]) == (
        "`model` is trained (by `torch.optim.SGD(...)`) but never compiled: `torch.compile` usually makes "
        "each training step faster on the GPU"
    )
    assert fix(source, select=COMPILE) == textwrap.dedent(source).replace(
        "model.to(device)  # placed\n", "model.to(device)  # placed\n    model.compile()\n"
    )


def test_the_fix_goes_before_the_ddp_wrap_and_a_second_run_changes_nothing():
    source = """\
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = Net().cuda(rank)
    model = DDP(model, device_ids=[rank])
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        model(x.cuda(rank)).sum().backward()
        optimizer.step()
    """
    fixed = fix(source, select=COMPILE)
    assert "model = Net().cuda(rank)\nmodel.compile()\nmodel = DDP(model, device_ids=[rank])\n" in fixed
    assert codes_and_lines(fixed, select=COMPILE) == []
    assert fix(fixed, select=COMPILE) == fixed


def test_ddp_on_one_line_is_found_without_a_fix():
    source = """\
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(Net().cuda(rank), device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        model(x.cuda(rank)).sum().backward()
        optimizer.step()
    """
    [finding] = lint(source, select=COMPILE)
    assert finding.fix is None
    assert "built and wrapped in one statement; compile the inner module before wrapping it" in said(finding)


def test_a_trainer_class_holding_self_model():
    source = """\
    import torch


    class Trainer:
        def __init__(self, model, loader):
            self.model = model.cuda()
            self.loader = loader
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-4)

        def fit(self):
            for x, y in self.loader:
                loss = self.model(x.cuda(), y.cuda())
                loss.backward()
                self.optimizer.step()
    """
    assert codes_and_lines(source, select=COMPILE) == [("TL101", 6)]
    assert "        self.model = model.cuda()\n        self.model.compile()\n" in fix(source, select=COMPILE)


def test_a_factory_returning_model_and_optimizer():
    source = """\
    import torch


    def build(cfg):
        model = GPT(cfg).cuda()
        optimizer = model.configure_optimizers(cfg.weight_decay, cfg.lr)
        return model, optimizer


    def train(model, optimizer, loader):
        for x, y in loader:
            model(x, y).backward()
            optimizer.step()
    """
    assert codes_and_lines(source, select=COMPILE) == [("TL101", 5)]


def test_the_loop_and_the_optimizer_in_engine_py_the_model_built_in_main_py(tmp_path):
    files = {
        "engine.py": """\
            import torch

            def train(model, loader, device):
                optimizer = torch.optim.AdamW(model.parameters())
                for x, y in loader:
                    model(x.to(device)).sum().backward()
                    optimizer.step()
        """,
        "main.py": """\
            import torch
            from engine import train

            device = torch.device("cuda")
            net = ResNet().to(device)
            train(net, loader, device)
        """,
    }
    assert check_project(tmp_path, files, "main.py") == [
        (
            "TL101",
            5,
            "`net` is trained (by `train(...)` in engine.py) but never compiled: `torch.compile` usually "
            "makes each training step faster on the GPU",
        )
    ]
    assert check_project(tmp_path, files, "engine.py") == []  # its model is a parameter: built by callers


def test_a_compile_in_the_module_that_trains_the_model_is_the_authors_decision(tmp_path):
    files = {
        "engine.py": """\
            import torch

            def train(model, loader, device, compile_model=False):
                if compile_model:
                    model = torch.compile(model)
                optimizer = torch.optim.AdamW(model.parameters())
                for x, y in loader:
                    model(x.to(device)).sum().backward()
                    optimizer.step()
        """,
        "main.py": """\
            import torch
            from engine import train

            device = torch.device("cuda")
            net = ResNet().to(device)
            train(net, loader, device)
        """,
    }
    assert check_project(tmp_path, files, "main.py") == []


def test_no_fix_for_an_ema_copy_or_an_old_torch():
    ema = """\
    import torch
    from timm.utils import ModelEmaV3

    model = create_model("resnet50").cuda()
    model_ema = ModelEmaV3(model, decay=0.999)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        model(x.cuda()).sum().backward()
        optimizer.step()
    """
    [finding] = lint(ema, select=COMPILE)
    assert finding.fix is None and "`ModelEmaV3(model, decay=0.999)`" in said(finding)
    plain = textwrap.dedent(ema).replace("model_ema = ModelEmaV3(model, decay=0.999)\n", "")
    [old] = lint(plain, select=COMPILE, torch_version=(2, 1))
    assert old.fix is None and "`Module.compile()` needs torch 2.2" in said(old)
    [older] = lint(plain, select=COMPILE, torch_version=(1, 13))  # still slower than it could be
    assert older.fix is None and "`torch.compile` needs torch 2.0" in said(older)


def test_silent_where_the_model_is_not_trained_here():
    parameter_server = """\
    import torch
    import torchvision


    class ParameterServer:
        def __init__(self):
            self.model = torchvision.models.resnet50().cuda()
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def update(self, grads):
            for p, g in zip(self.model.parameters(), grads):
                p.grad = g
            self.optimizer.step()
            for x in range(3):
                self.model.zero_grad()
                loss.backward()
                self.optimizer.step()
    """
    assert codes_and_lines(parameter_server, select=COMPILE) == []
    lightning_self = """\
    import torch
    import lightning as L


    class Module(L.LightningModule):
        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters())
    """
    assert codes_and_lines(lightning_self, select=COMPILE) == []


def test_an_unknown_device_is_judged_by_the_device_setting():
    source = """\
    import torch
    model = Net()
    optimizer = torch.optim.SGD(model.parameters())
    for x, y in loader:
        model(x).sum().backward()
        optimizer.step()
    """
    assert codes_and_lines(source, select=COMPILE) == []
    assert codes_and_lines(source, select=COMPILE, device="cuda") == [("TL101", 2)]


def test_getattr_optimizers_and_parameter_groups_are_followed():
    source = """\
    import torch

    model = Net().cuda()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    groups = [{"params": decay, "weight_decay": 0.1}]
    optimizer = getattr(torch.optim, args.optimizer)(groups, lr=args.lr)
    for x, y in loader:
        model(x.cuda()).sum().backward()
        optimizer.step()
    """
    assert codes_and_lines(source, select=COMPILE) == [("TL101", 3)]


# -- TL102 / TL103 / TL105 ----------------------------------------------------------------------------------


def test_compile_in_a_function_called_every_step():
    source = """\
    import torch


    def forward(model, x):
        return torch.compile(model)(x)


    model = Net().cuda()
    model.compile()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        forward(model, x.cuda()).sum().backward()
        optimizer.step()
    """
    assert codes_and_lines(source, select=COMPILE) == [("TL102", 5)]


def test_a_dropped_compile_is_not_reported_twice_inside_the_loop():
    source = """\
    import torch

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        torch.compile(model)
        model(x.cuda()).sum().backward()
        optimizer.step()
    """
    assert codes_and_lines(source, select=COMPILE) == [("TL102", 6)]


def test_sequential_through_self_and_a_subclass():
    source = """\
    import torch
    from torch import nn


    class Blocks(nn.Sequential):
        pass


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = Blocks(nn.Linear(8, 8))
            self.head.compile()
    """
    assert codes_and_lines(source, select=COMPILE) == [("TL105", 13)]
    assert "        self.head = torch.compile(self.head)\n" in fix(source, select=COMPILE)


def test_re_compile_is_not_a_compile_site():
    source = """\
    import re
    import torch

    pattern = re.compile("x")
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        model(x.cuda()).sum().backward()
        optimizer.step()
    """
    assert codes_and_lines(source, select=COMPILE) == [("TL101", 5)]


# -- the fix on a real run ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_fixed_fixture_trains_compiled_on_the_cpu(tmp_path):
    """fixtures/compile_cpu/train.py: TL101's in-place compile makes Dynamo compile a graph (its counters
    say so) and the losses stay those of the uncompiled run."""
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    shutil.copy(FIXTURES / "compile_cpu" / "train.py", script)
    before = _last_line(script)
    only = CliOverrides(select=("TL101",))
    outcome = run(RunOptions(paths=[script], fix=True, unsafe_fixes=True, overrides=only, cache=False))
    assert outcome.errors == [] and outcome.fixed == 1
    assert "    model = Regressor().to(device)  # expect: TL101\n    model.compile()\n" in script.read_text()
    after = _last_line(script)
    assert before.startswith("graphs=0 ") and not after.startswith("graphs=0 ")
    assert before.split(" ", 1)[1] == after.split(" ", 1)[1]  # the same losses


def _last_line(script: Path) -> str:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env, cwd=script.parent
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_wrap_in_another_method_is_not_known_to_come_first():
    """timm's task classes wrap in `ddp()` and compile in `compile()`; callers decide the order."""
    source = """\
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP


    class Task:
        def ddp(self):
            self.module = DDP(self.module)

        def compile(self):
            self.module = torch.compile(self.module)


    model = Net().cuda()
    model = DDP(model)
    model = torch.compile(model)
    """
    assert codes_and_lines(source, select=("TL104",)) == [("TL104", 15)]


def test_an_optimizer_handed_to_a_training_function_it_cannot_see():
    """pytorch/examples' FSDP T5 script: `train(...)` comes from a star import; it is given the optimizer."""
    source = """\
    import torch
    import torch.optim as optim
    from utils import *

    torch.cuda.set_device(local_rank)
    model, tokenizer = setup_model(name)
    optimizer = optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(3):
        train(args, model, train_loader, optimizer, epoch)
    """
    assert codes_and_lines(source, select=COMPILE) == [("TL101", 6)]
    pretraining = source.replace("train(args", "load_pretrained(args")
    assert codes_and_lines(pretraining, select=COMPILE) == []
