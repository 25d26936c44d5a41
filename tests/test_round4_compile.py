"""Round-4 compile-family (TL101) classes from the ecosystem check (bench/ecosystem/findings.tsv): an object of a
project class that is surely not a torch Module (a dataclass holding the model) is not a model to compile."""

from __future__ import annotations

import textwrap

from support import codes_and_lines, settings

from torchlint.linter import Linter

HEAD = """\
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

"""

TRAIN = """\
def train(model, loader, optimizer, device):
    for epoch in range(20):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


"""


def check_project(tmp_path, files: dict[str, str], checked: str) -> list[tuple[str, int]]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    path = tmp_path / checked
    found = Linter().check_text(str(path), path.read_text(), settings(select=("TL101",)))
    return [(d.code, d.location.line) for d in found]


# -- an object that is surely not a Module ----------------------------------------------------------------

HOLDER = """\
@dataclass
class WrappedModel:
    model: nn.Module
    config: dict | None = None


"""


def test_a_dataclass_holding_the_model_is_not_a_model_to_compile() -> None:
    """KellerJordan/modded-nanogpt distributed_shampoo/examples/cifar10_example.py:91: the optimizer is given
    `wrapped_model.model.parameters()` where `wrapped_model` is a dataclass: its `.compile()` would raise
    AttributeError."""
    source = (
        HEAD
        + HOLDER
        + TRAIN
        + """\
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
wrapped_model = WrappedModel(model=DDP(Net().to(device)))
optimizer = torch.optim.AdamW(wrapped_model.model.parameters(), lr=1e-3)
train(wrapped_model.model, loader, optimizer, device)
"""
    )
    assert codes_and_lines(source, select=("TL101",)) == []


def test_a_holder_returned_by_a_factory_without_an_annotation_is_not_flagged() -> None:
    """`def wrap(model): holder = WrappedModel(model=DDP(model)); return holder`: the factory's returns say it."""
    source = (
        HEAD
        + HOLDER
        + TRAIN
        + """\
def wrap(model):
    holder = WrappedModel(model=DDP(model))
    holder = configure(holder)
    return holder


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
wrapped_model = wrap(Net().to(device))
optimizer = torch.optim.AdamW(wrapped_model.model.parameters(), lr=1e-3)
train(wrapped_model.model, loader, optimizer, device)
"""
    )
    assert codes_and_lines(source, select=("TL101",)) == []


def test_a_factory_that_returns_a_module_it_was_handed_stays_flagged() -> None:
    """`def wrap(model): return model`: what it returns is not known to be a holder."""
    source = (
        HEAD
        + TRAIN
        + """\
def wrap(model):
    return model


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = wrap(Net().to(device))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
train(model, loader, optimizer, device)
"""
    )
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 21)]


def test_a_holder_returned_by_an_annotated_method_of_a_strategy_from_another_file(tmp_path) -> None:
    """The ecosystem's shape: `parallelism = instantiate_parallelism_strategy(cfg)` (annotated `->
    ParallelismStrategy`), `wrapped_model = parallelism.wrap_model(model, ...)` (annotated `-> WrappedModel`,
    a dataclass), all in other project files."""
    files = {
        "parallelism.py": """\
            from abc import ABC, abstractmethod
            from dataclasses import dataclass

            from torch import nn
            from torch.nn.parallel import DistributedDataParallel as DDP


            @dataclass
            class WrappedModel:
                model: nn.Module
                distributed_config: object | None = None


            class ParallelismStrategy(ABC):
                @abstractmethod
                def wrap_model(self, model: nn.Module, local_rank: int) -> WrappedModel:
                    pass


            @dataclass
            class DDPStrategy(ParallelismStrategy):
                def wrap_model(self, model: nn.Module, local_rank: int) -> WrappedModel:
                    return WrappedModel(model=DDP(model, device_ids=[local_rank]))
            """,
        "utils.py": """\
            import hydra

            from parallelism import ParallelismStrategy


            def instantiate_parallelism_strategy(cfg) -> ParallelismStrategy:
                return hydra.utils.instantiate(cfg.parallelism)
            """,
        "main.py": """\
            import torch
            import torch.nn as nn

            from model import get_model
            from utils import instantiate_parallelism_strategy


            def main(cfg):
                device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                parallelism = instantiate_parallelism_strategy(cfg)
                model = get_model(device)
                wrapped_model = parallelism.wrap_model(model, 0)
                optimizer = torch.optim.SGD(wrapped_model.model.parameters(), lr=0.1)
                load_checkpoint(cfg.checkpoint_dir, wrapped_model.model, optimizer)
                for epoch in range(cfg.epochs):
                    for x, y in loader:
                        loss = nn.functional.cross_entropy(wrapped_model.model(x.to(device)), y.to(device))
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
    }
    assert check_project(tmp_path, files, "main.py") == []


def test_a_project_class_whose_base_is_a_library_class_stays_flagged() -> None:
    """A base torchlint cannot read (imported from a library) may be a Module: unknown keeps the finding."""
    source = (
        "from mylib import Base\n"
        + HEAD
        + TRAIN
        + """\
class Net(Base):
    pass


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
train(model, loader, optimizer, device)
"""
    )
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 22)]


def test_a_project_module_through_project_bases_stays_flagged() -> None:
    source = (
        HEAD
        + TRAIN
        + """\
class Base(nn.Module):
    pass


class Net(Base):
    def forward(self, x):
        return x


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
train(model, loader, optimizer, device)
"""
    )
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 26)]


def test_a_plain_class_that_forwards_attributes_to_its_module_stays_flagged() -> None:
    """`__getattr__` hands `.compile()` on to the module it holds: it acts as the module."""
    source = (
        HEAD
        + TRAIN
        + """\
class Holder:
    def __init__(self, net):
        self.net = net

    def __getattr__(self, name):
        return getattr(self.net, name)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Holder(Net().to(device))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
train(model, loader, optimizer, device)
"""
    )
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 25)]


# -- a script that runs only on a torch without torch.compile ----------------------------------------------

SNLI = """\
import torch
import torch.optim as O
import torch.nn as nn

{imports}

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = SNLIClassifier(config).to(device)
opt = O.Adam(model.parameters(), lr=1e-3)
for epoch in range(10):
    for batch in train_iter:
        loss = nn.functional.cross_entropy(model(batch), batch.label)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_script_that_imports_torchtext_legacy_is_not_flagged() -> None:
    """pytorch/examples legacy/snli/train.py:61: `torchtext.legacy` was removed in torchtext 0.12 (torch 1.11):
    the script runs only on torch 1.10 or older, which has no `torch.compile`."""
    source = SNLI.format(imports="from torchtext.legacy import data\nfrom torchtext.legacy import datasets")
    assert codes_and_lines(source, select=("TL101",)) == []


def test_a_script_that_imports_torch_six_is_not_flagged() -> None:
    """`torch._six` was removed in torch 2.0."""
    source = SNLI.format(imports="from torch._six import inf")
    assert codes_and_lines(source, select=("TL101",)) == []


def test_a_legacy_import_behind_a_fallback_stays_flagged() -> None:
    """`try: from torchtext.legacy import data` with a fallback runs on a new torch too."""
    imports = (
        "try:\n    from torchtext.legacy import data\nexcept ImportError:\n    from torchtext import data"
    )
    assert codes_and_lines(SNLI.format(imports=imports), select=("TL101",)) == [("TL101", 11)]
