"""Round 3 of the training-loop and device facts on unseen repositories: a training step that is a method of
a project trainer object, and precision-flag words inside unrelated identifiers (the judged rows named in
each docstring)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from support import codes_and_lines, facts_of, line_of, project_facts, training_loaders

from torchlint.facts.torch.vocabulary import Device

TRAINER = """\
    import torch
    from torch import nn


    class Trainer(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net
            self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

        def forward(self, x, y):
            return nn.functional.cross_entropy(self.net(x), y)

        def train_step(self, x, y):
            self.optimizer.zero_grad()
            loss = self.forward(x, y)
            loss.backward()
            self.optimizer.step()
            return loss
"""

TRAIN = """\
    import torch

    from trainer import Trainer


    def train(dataset, net, epochs):
        loader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=8)
        trainer = Trainer(net).cuda()
        for epoch in range(epochs):
            for x, y in loader:
                trainer.train_step(x.cuda(), y.cuda())


    if __name__ == "__main__":
        train(None, None, 10)
"""


def _check(root: Path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "torchlint", "check", "--isolated", "--no-cache", "--select", "TL2"]
        + ["--output-format", "concise", "."],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    return [
        line.split(" ")[0] + " " + line.split(" ")[1] for line in result.stdout.splitlines() if ": TL" in line
    ]


def test_a_training_step_method_of_a_project_trainer_in_another_file_makes_the_epoch_loop_train(tmp_path):
    """chenyuntc+simple-faster-rcnn-pytorch train.py:53 (judged-g MISS TL202/TL203): `trainer =
    FasterRCNNTrainer(faster_rcnn).cuda()`, then `trainer.train_step(...)` in the loop over the loader, and the
    method runs the backward pass and `self.optimizer.step()`: the loop is a training loop, run every epoch."""
    facts = project_facts(tmp_path, {"trainer.py": TRAINER, "train.py": TRAIN}, "train.py")
    assert [line_of(facts, loop.node) for loop in facts.training.training_loops] == [10]
    assert training_loaders(facts) == {7: [True]}


def test_the_loader_feeding_a_trainer_method_gets_pinning_and_persistent_worker_advice(tmp_path):
    """chenyuntc+simple-faster-rcnn-pytorch train.py:53 end to end: TL202 and TL203 on the training loader."""
    project_facts(tmp_path, {"trainer.py": TRAINER, "train.py": TRAIN}, "train.py")
    assert _check(tmp_path) == ["train.py:7:14: TL202", "train.py:7:14: TL203"]


def test_a_trainer_class_of_the_same_file_placed_with_to_device_is_followed():
    """Sibling of the faster-rcnn case: the trainer class in the same file, placed with `.to(device)`."""
    source = textwrap.dedent(TRAINER) + textwrap.dedent("""\


    def main(loader, net, device):
        trainer = Trainer(net).to(device)
        for epoch in range(10):
            for x, y in loader:
                trainer.train_step(x, y)
    """)
    facts = facts_of(source)
    assert [line_of(facts, loop.node) for loop in facts.training.training_loops] == [25]


def test_a_method_call_on_a_name_bound_twice_or_to_a_library_object_is_not_followed():
    """Only a name bound once to a project class's construction is followed: `trainer` rebound to something
    else, or a library object's method, says nothing about training."""
    source = textwrap.dedent(TRAINER) + textwrap.dedent("""\


    def main(loader, net, other):
        trainer = Trainer(net)
        if other:
            trainer = other
        for epoch in range(10):
            for x, y in loader:
                trainer.train_step(x, y)


    def library(loader, net):
        trainer = torch.nn.Linear(3, 3)
        for epoch in range(10):
            for x, y in loader:
                trainer.train_step(x, y)
    """)
    facts = facts_of(source)
    assert facts.training.training_loops == []


def flags_of(source: str) -> list[str]:
    from torchlint.rules.mixed_precision.precision import PrecisionAnalysis

    return [what for _, what in facts_of(source).source.analysis(PrecisionAnalysis).flags]


# -- precision-flag words inside unrelated identifiers (item 2) ---------------------------------------------

PLAIN_TRAINING = """\
import torch

model = Net().cuda()
optimizer = torch.optim.AdamW(model.parameters())
for x, y in loader:
    {line}
    loss = criterion(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
"""


def test_mixed_as_part_of_an_unrelated_name_is_not_a_precision_flag():
    """jeonsworld+ViT-pytorch models/modeling.py (`mixed_query_layer = self.query(hidden_states)`), and
    mixup's `mixed_x = lam * x + (1 - lam) * x[index]`: `mixed` names mixed data there, not mixed precision,
    so the loop is still one that decided nothing about precision (TL301)."""
    for line in (
        "mixed_query_layer = query(x); x = mixed_query_layer",
        "mixed_x = lam * x + (1 - lam) * x[z]; x = mixed_x",
    ):
        source = PLAIN_TRAINING.format(line=line)
        assert flags_of(source) == []
        assert codes_and_lines(source, select=("TL301",)) == [("TL301", 7)]


def test_mixed_precision_switches_still_count_as_a_decision():
    """The switch-shaped names with `mixed` still mean the author decided: `args.mixed_precision`,
    `use_mixed_precision`, `cfg.mixed`, a parameter `mixed=False`."""
    for line in (
        "use = args.mixed_precision",
        "use_mixed_precision = True; print(use_mixed_precision)",
        "enabled = cfg.mixed",
        "use_mixed = flag; print(use_mixed)",
    ):
        source = PLAIN_TRAINING.format(line=line)
        assert flags_of(source) != [], line
        assert codes_and_lines(source, select=("TL301",)) == [], line


# -- in-place placement of a model named like the module it comes from (item 3) -----------------------------

MODULE_NAMED_MODEL = """\
import argparse

import torch

import model

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_false")
args = parser.parse_args()
model = model.RNNModel(args.ntokens)
if args.cuda:
    model.cuda()
optimizer = torch.optim.ASGD(model.parameters(), lr=args.lr)
for x, y in batches:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""


def test_in_place_cuda_of_a_model_named_like_its_imported_module_places_the_module_on_the_gpu():
    """salesforce+awd-lstm-lm finetune.py:145 (judged-f MISS TL301): `import model`, then `model =
    model.RNNModel(...)` and `if args.cuda: model.cuda()`: the name is the model by then, so its `.cuda()`
    is device evidence (cuda when available), and the float32 loop gets TL301."""
    facts = facts_of(MODULE_NAMED_MODEL)
    assert facts.device.device is Device.CUDA_WHEN_AVAILABLE
    assert codes_and_lines(MODULE_NAMED_MODEL, select=("TL301",)) == [("TL301", 15)]


def test_cuda_of_an_imported_module_itself_is_not_device_evidence():
    """The guard the fix keeps: a name that is only an import (`import apex; apex.cuda()`) is a library's
    function, not a tensor or a model moved to the GPU."""
    facts = facts_of("import apex\napex.cuda()\n")
    assert facts.device.device is Device.UNKNOWN


# -- an in-memory dataset indexed through an index table (exposed by item 1) --------------------------------

INDEX_TABLE_DATASET = """\
import torch
from torch.utils.data import DataLoader, Dataset


class ExpertDataset(Dataset):
    def __init__(self, path):
        self.trajectories = torch.load(path)
        self.get_idx = [(t, i) for t in range(4) for i in range(100)]

    def __len__(self):
        return len(self.get_idx)

    def __getitem__(self, i):
        traj_idx, i = self.get_idx[i]
        return self.trajectories["states"][traj_idx][i], self.trajectories["actions"][traj_idx][i]


model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters())
loader = DataLoader(ExpertDataset("trajs.pt"), batch_size=128, shuffle=True)
for epoch in range(10):
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_dataset_indexing_held_tensors_through_an_index_table_gets_no_workers():
    """ikostrikov+pytorch-a2c-ppo-acktr-gail main.py:86 (new once `discr.update(loader, ...)` was followed):
    GAIL's ExpertDataset looks up `traj_idx, i = self.get_idx[i]` and returns
    `self.trajectories["states"][traj_idx][i]`: nothing is read or transformed per sample, so worker
    processes have nothing to overlap (no TL201); pinning still pays for the copy (TL202)."""
    assert codes_and_lines(INDEX_TABLE_DATASET, select=("TL201", "TL202")) == [("TL202", 20)]
