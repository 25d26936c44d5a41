"""Names resolve to qualified names through every import form; a project's own lookalikes do not."""

from __future__ import annotations

import libcst as cst
import pytest
from support import facts_of


def loader_classes(source: str) -> list[str]:
    return [loader.cls for loader in facts_of(source).loaders]


@pytest.mark.parametrize(
    "imports, call",
    [
        ("import torch", "torch.utils.data.DataLoader(ds)"),
        ("import torch as T", "T.utils.data.DataLoader(ds)"),
        ("import torch.utils.data", "torch.utils.data.DataLoader(ds)"),
        ("from torch.utils.data import DataLoader as DL", "DL(ds)"),
        ("from torch.utils import data", "data.DataLoader(ds)"),
        ("from torch.utils.data.dataloader import DataLoader", "DataLoader(ds)"),
        ("from torchdata.stateful_dataloader import StatefulDataLoader", "StatefulDataLoader(ds)"),
    ],
)
def test_loader_is_recognised_however_imported(imports, call):
    assert len(loader_classes(f"{imports}\nloader = {call}\n")) == 1


def test_imports_inside_functions_and_under_try():
    source = """\
    try:
        from torch.utils.data import DataLoader
    except ImportError:
        DataLoader = None

    def build(ds):
        from torch.utils.data import DataLoader as Loader
        return Loader(ds), DataLoader(ds)
    """
    assert loader_classes(source) == ["torch.utils.data.DataLoader"] * 2


def test_a_projects_own_class_called_dataloader_is_not_torchs():
    source = """\
    class DataLoader:
        def __init__(self, items):
            self.items = items

    loader = DataLoader([1, 2, 3])
    """
    assert loader_classes(source) == []


def test_a_projects_subclass_of_torchs_loader_is_a_loader():
    source = """\
    from torch.utils import data

    class MultiEpochsDataLoader(data.DataLoader):
        pass

    class Fast(MultiEpochsDataLoader):
        pass

    a = MultiEpochsDataLoader(ds)
    b = Fast(ds)
    """
    assert loader_classes(source) == ["MultiEpochsDataLoader", "Fast"]


def test_qualname_of_from_import_of_a_submodule():
    facts = facts_of("from torch import nn, optim\nimport torch.nn as tnn\n")
    scope = facts.module_scope
    assert facts.qualname(cst.parse_expression("nn.Linear"), scope) == "torch.nn.Linear"
    assert facts.qualname(cst.parse_expression("optim.AdamW"), scope) == "torch.optim.AdamW"
    assert facts.qualname(cst.parse_expression("tnn.Conv2d"), scope) == "torch.nn.Conv2d"
    assert facts.qualname(cst.parse_expression("enumerate"), scope) == "enumerate"
    assert facts.qualname(cst.parse_expression("unknown.thing"), scope) is None
