"""Issue 28's named classes for training loops and loaders behind indirection: a loader handed over in a list,
a tuple, a dataclass or a helper object, a training step run by a timer helper, a base class or a project
optimizer wrapper, and a device handed back by a project helper.

Each test is a small reproduction shaped like the real code; what must stay silent is tested beside it.
"""

from __future__ import annotations

from textwrap import indent

from support import codes_and_lines, facts_of, line_of, project_facts, training_loaders

from torchlint.facts.torch.vocabulary import Device

HEAD = """\
import torch
from dataclasses import dataclass
from typing import NamedTuple

from torch import nn
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""
# HEAD's lines, so that a test's own lines read as they are written
TOP = HEAD.count("\n")

STEP = """\
        loss = (model(x.to(device)) - y.to(device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

TRAIN = "DataLoader(train_set, batch_size=32, shuffle=True, num_workers=4)"
VAL = "DataLoader(val_set, batch_size=32, num_workers=4)"


def loader_lines(source: str) -> dict[int, list[str]]:
    """Line (counted after HEAD) -> the data-loading codes found there."""
    found: dict[int, list[str]] = {}
    for code, line in codes_and_lines(HEAD + source, select=("TL201", "TL202", "TL203")):
        found.setdefault(line - TOP, []).append(code)
    return found


def fed_lines(source: str) -> dict[int, list[bool]]:
    """Loader line (counted after HEAD) -> per epoch, for each training use."""
    return {line - TOP: uses for line, uses in training_loaders(facts_of(HEAD + source)).items()}


def loop_lines(source: str) -> list[int]:
    facts = facts_of(HEAD + source)
    return [line_of(facts, loop.node) - TOP for loop in facts.training.training_loops]


# -- 1. loaders handed over in a list, a tuple, a dataclass, a helper object -------------------------------


def test_a_loader_passed_in_a_list_feeds_the_loop_that_indexes_it_and_the_other_element_does_not():
    source = f"""\
def train(model, loaders):
    for x, y in loaders[0]:
{STEP}

train_loader = {TRAIN}
val_loader = {VAL}
for epoch in range(10):
    train(model, [train_loader, val_loader])
"""
    assert fed_lines(source) == {9: [True]}
    assert loader_lines(source) == {9: ["TL202", "TL203"]}


def test_a_list_of_loaders_bound_to_a_name_is_indexed_element_by_element():
    source = f"""\
loaders = [{TRAIN}, {VAL}]
for epoch in range(10):
    for x, y in loaders[0]:
{STEP}"""
    assert fed_lines(source) == {1: [True]}


def test_a_loader_indexed_out_of_a_returned_tuple_feeds_training_and_its_neighbour_does_not():
    for use in ("loaders = build()\n", "loaders = build()[0], None\n"):
        source = f"""\
def build():
    return {TRAIN}, {VAL}


{use}for epoch in range(10):
    for x, y in loaders[0]:
{STEP}"""
        assert fed_lines(source) == {2: [True]}, use


def test_an_index_that_is_not_a_literal_says_nothing():
    source = f"""\
loaders = [{TRAIN}, {VAL}]
for epoch in range(10):
    for x, y in loaders[phase]:
{STEP}"""
    assert fed_lines(source) == {}


def test_a_loader_held_by_a_dataclass_feeds_training_through_its_field():
    for build in (
        f"Loaders(train={TRAIN}, val={VAL})",
        f"Loaders({TRAIN}, {VAL})",
    ):
        source = f"""\
@dataclass
class Loaders:
    train: DataLoader
    val: DataLoader


def build():
    return {build}


data = build()
for epoch in range(10):
    for x, y in data.train:
{STEP}"""
        fed = fed_lines(source)
        assert list(fed.values()) == [[True]], build
        assert sum("TL203" in codes for codes in loader_lines(source).values()) == 1, build


def test_a_loader_held_by_a_named_tuple_and_read_by_a_training_function_through_its_parameter():
    source = f"""\
class Loaders(NamedTuple):
    train: DataLoader
    val: DataLoader


def fit(model, data):
    for epoch in range(10):
        for x, y in data.train:
{indent(STEP, "    ")}

fit(model, Loaders(val={VAL}, train={TRAIN}))
"""
    assert fed_lines(source) == {15: [True]}


def test_a_dataclass_built_with_a_starred_argument_is_not_read_by_position():
    source = f"""\
@dataclass
class Loaders:
    train: DataLoader
    val: DataLoader


data = Loaders(*pair)
for epoch in range(10):
    for x, y in data.train:
{STEP}"""
    assert fed_lines(source) == {}


def test_a_loader_kept_by_a_helper_object_feeds_training_through_its_attribute_for_this_object_only():
    source = f"""\
class Data:
    def __init__(self, loader, shuffle):
        self.loader = loader
        self.shuffle = shuffle


train_data = Data({TRAIN}, True)
val_data = Data({VAL}, False)
for epoch in range(10):
    for x, y in train_data.loader:
{STEP}"""
    assert fed_lines(source) == {7: [True]}


def test_a_loader_re_yielded_by_a_generator_of_a_helper_class_feeds_training():
    source = f"""\
class Data:
    def __init__(self, loader):
        self.loader = loader

    def batches(self):
        yield from self.loader


data = Data({TRAIN})
for epoch in range(10):
    for x, y in data.batches():
{STEP}"""
    assert fed_lines(source) == {9: [True]}
    assert loader_lines(source) == {9: ["TL202", "TL203"]}


def test_a_loader_in_a_dataclass_returned_by_another_module_feeds_its_training(tmp_path):
    files = {
        "data.py": f"""\
from dataclasses import dataclass

from torch.utils.data import DataLoader


@dataclass
class Loaders:
    train: DataLoader
    val: DataLoader


def build(train_set, val_set):
    return Loaders({TRAIN}, {VAL})
""",
        "train.py": f"""\
from data import build

{HEAD}
loaders = build(a, b)
for epoch in range(10):
    for x, y in loaders.train:
{STEP}""",
    }
    project_facts(tmp_path, files, "train.py")
    facts = project_facts(tmp_path, files, "data.py")
    assert training_loaders(facts) == {13: [True]}


# -- 2. training steps behind a timer helper, a base class, a project optimizer wrapper -------------------


def test_a_step_closure_run_by_a_timer_helper_in_a_loop_makes_it_a_training_loop():
    for run in ("timer.run(step)", "timeit(step, number=1)", "benchmark(fn=step)"):
        source = f"""\
loader = {TRAIN}
for epoch in range(10):
    for x, y in loader:
        def step():
            loss = (model(x.to(device)) - y.to(device)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        {run}
"""
        assert loop_lines(source) == [3], run
        assert fed_lines(source) == {1: [True]}, run


def test_a_closure_handed_to_the_optimizer_step_lbfgs_style_is_a_training_step():
    source = f"""\
loader = {TRAIN}
for epoch in range(10):
    for x, y in loader:
        def closure():
            optimizer.zero_grad()
            loss = (model(x.to(device)) - y.to(device)).pow(2).mean()
            loss.backward()
            return loss

        optimizer.step(closure)
"""
    assert loop_lines(source) == [3]


def test_a_whole_training_run_handed_to_a_process_does_not_make_the_spawning_loop_a_training_loop():
    source = f"""\
def train(rank, loader):
    for epoch in range(10):
        for x, y in loader:
{indent(STEP, "    ")}

for rank in range(4):
    p = torch.multiprocessing.Process(target=train, args=(rank, {TRAIN}))
    p.start()
"""
    assert loop_lines(source) == [3]


def test_a_function_handed_over_that_runs_no_step_adds_nothing():
    source = f"""\
def log(loss):
    print(loss.item())

for x, y in {TRAIN}:
    loss = (model(x.to(device)) - y.to(device)).pow(2).mean()
    hooks.register(log)
    optimizer.step()
"""
    assert loop_lines(source) == []


BASE_TRAINER = f"""\
class BaseTrainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader

    def train(self):
        for epoch in range(10):
            for x, y in self.loader:
                self.forward_backward(x, y)
{{abstract}}

class Trainer(BaseTrainer):
    def forward_backward(self, x, y):
        loss = (self.model(x.to(device)) - y.to(device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


Trainer(model, {TRAIN}).train()
"""


def test_a_base_class_loop_calling_a_step_its_subclass_defines_is_a_training_loop():
    abstract = """
    def forward_backward(self, x, y):
        raise NotImplementedError
"""
    for body in (abstract, ""):
        source = BASE_TRAINER.format(abstract=body)
        assert loop_lines(source) == [8], body
        assert list(fed_lines(source).values()) == [[True]], body


def test_a_base_class_whose_own_step_is_concrete_is_judged_by_its_own_step():
    concrete = """
    def forward_backward(self, x, y):
        self.model(x)
"""
    assert loop_lines(BASE_TRAINER.format(abstract=concrete)) == []


SCHEDULED_OPTIM = """\
class ScheduledOptim:
    def __init__(self, optimizer, d_model, n_warmup_steps):
        self._optimizer = optimizer
        self.n_steps = 0

    def step_and_update_lr(self):
        self._update_learning_rate()
        self._optimizer.step()

    def zero_grad(self):
        self._optimizer.zero_grad()

    def _update_learning_rate(self):
        self.n_steps += 1

"""


def test_a_project_optimizer_wrapper_handed_to_the_training_function_steps_the_optimizer():
    source = (
        SCHEDULED_OPTIM
        + f"""
def train_epoch(model, training_data, optimizer):
    for x, y in training_data:
        optimizer.zero_grad()
        loss = (model(x.to(device)) - y.to(device)).pow(2).mean()
        loss.backward()
        optimizer.step_and_update_lr()


def main():
    optimizer = ScheduledOptim(torch.optim.Adam(model.parameters()), 512, 4000)
    loader = {TRAIN}
    for epoch in range(10):
        train_epoch(model, loader, optimizer)
"""
    )
    assert loop_lines(source) == [18]
    assert fed_lines(source) == {27: [True]}


def test_a_project_optimizer_wrapper_kept_on_self_steps_the_optimizer():
    source = (
        SCHEDULED_OPTIM
        + f"""
class Trainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.optim = ScheduledOptim(torch.optim.Adam(model.parameters()), 512, 4000)

    def fit(self):
        for epoch in range(10):
            for x, y in self.loader:
                loss = (self.model(x.to(device)) - y.to(device)).pow(2).mean()
                loss.backward()
                self.optim.step_and_update_lr()


Trainer(model, {TRAIN}).fit()
"""
    )
    assert loop_lines(source) == [25]
    assert fed_lines(source) == {31: [True]}


def test_a_wrapper_method_that_does_not_step_is_no_optimizer_step():
    source = (
        SCHEDULED_OPTIM
        + f"""
def train_epoch(model, training_data, optimizer):
    for x, y in training_data:
        loss = (model(x.to(device)) - y.to(device)).pow(2).mean()
        loss.backward()
        optimizer.zero_grad()


train_epoch(model, {TRAIN}, ScheduledOptim(torch.optim.Adam(model.parameters()), 512, 4000))
"""
    )
    assert loop_lines(source) == []


def test_a_wrapper_reached_through_a_parameter_some_caller_passes_something_else_for_is_not_followed():
    source = (
        SCHEDULED_OPTIM
        + f"""
def train_epoch(model, training_data, optimizer):
    for x, y in training_data:
        loss = (model(x.to(device)) - y.to(device)).pow(2).mean()
        loss.backward()
        optimizer.step_and_update_lr()


train_epoch(model, {TRAIN}, ScheduledOptim(torch.optim.Adam(model.parameters()), 512, 4000))
train_epoch(model, {TRAIN}, other_optimizer)
"""
    )
    assert loop_lines(source) == []


# -- 3. devices -------------------------------------------------------------------------------------------


def test_a_gpu_named_by_concatenation_when_cuda_is_available_is_cuda_when_available():
    for name in ('"cuda:" + str(args.gpu)', '"cuda:%d" % args.gpu', 'f"cuda:{args.gpu}"'):
        facts = facts_of(f"""\
import torch
device = torch.device({name} if torch.cuda.is_available() else "cpu")
model.to(device)
""")
        assert facts.device.device is Device.CUDA_WHEN_AVAILABLE, name


DIST_UTIL = {
    "cuda when available": """\
import torch as th


def dev():
    if th.cuda.is_available():
        return th.device("cuda")
    return th.device("cpu")
""",
    "cuda when available, one expression": """\
import torch


def get_device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
""",
    "cpu": """\
import torch


def dev():
    return torch.device("cpu")
""",
    "unknown": """\
def dev():
    return pick_device()
""",
}


def test_a_device_returned_by_a_project_helper_in_another_module_is_read_there(tmp_path):
    expected = {
        "cuda when available": Device.CUDA_WHEN_AVAILABLE,
        "cuda when available, one expression": Device.CUDA_WHEN_AVAILABLE,
        "cpu": Device.CPU,
        "unknown": Device.UNKNOWN,
    }
    for (kind, helper), use in zip(
        DIST_UTIL.items(),
        ("dist_util.dev()", "dist_util.get_device()", "dev()", "dist_util.dev()"),
        strict=True,
    ):
        root = tmp_path / kind.replace(" ", "_").replace(",", "")
        root.mkdir()
        files = {
            "cm/__init__.py": "",
            "cm/dist_util.py": helper,
            "train.py": f"""\
from cm import dist_util
from cm.dist_util import dev

model = Net().to({use})
""",
        }
        assert project_facts(root, files, "train.py").device.device is expected[kind], kind


TRAIN_LOOP = """\
import torch

from dist_util import dev


class TrainLoop:
    def __init__(self, *, model, data, optimizer):
        self.model = model
        self.data = data
        self.mp_trainer = MixedPrecisionTrainer(model)
        self.opt = optimizer

    def run_loop(self):
        while True:
            batch = next(self.data)
            self.run_step(batch)

    def run_step(self, batch):
        self.forward_backward(batch)
        self.mp_trainer.optimize(self.opt)

    def forward_backward(self, batch):
        loss = self.model(batch.to(dev())).mean()
        self.mp_trainer.backward(loss)


class MixedPrecisionTrainer:
    def __init__(self, model):
        self.model = model

    def backward(self, loss):
        loss.backward()

    def optimize(self, opt):
        opt.step()
        return True
"""


def diffusion_project(generator: str) -> dict[str, str]:
    return {
        "dist_util.py": """\
import torch


def dev():
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")
""",
        "image_datasets.py": f"""\
from torch.utils.data import DataLoader


def load_data(*, data_dir, batch_size, deterministic=False):
    dataset = ImageDataset(data_dir)
{generator}""",
        "train_util.py": TRAIN_LOOP,
        "train.py": """\
import torch

from image_datasets import load_data
from train_util import TrainLoop


def main():
    data = load_data(data_dir="data", batch_size=64)
    model = create_model().to(torch.device("cuda"))
    TrainLoop(model=model, data=data, optimizer=torch.optim.AdamW(model.parameters())).run_loop()


if __name__ == "__main__":
    main()
""",
    }


def test_a_loader_re_yielded_forever_by_a_generator_handed_to_a_trainer_constructor_is_iterated_per_epoch(
    tmp_path,
):
    generator = """\
    if deterministic:
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=1)
    else:
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=1)
    while True:
        yield from loader
"""
    files = diffusion_project(generator)
    loop = project_facts(tmp_path, files, "train_util.py")
    assert [line_of(loop, record.node) for record in loop.training.training_loops] == [14]
    assert loop.device.device is Device.CUDA_WHEN_AVAILABLE
    facts = project_facts(tmp_path, files, "image_datasets.py")
    # the `deterministic=True` branch's loader is not what `load_data(...)` with its default builds
    assert training_loaders(facts) == {9: [True]}
    [use] = [use for loader in facts.loaders for use in facts.training.loader_uses(loader)]
    assert (
        use.how == f"`TrainLoop(...)` in {tmp_path / 'train_util.py'}, re-yielded forever by `load_data(...)`"
    )


def test_a_loader_built_anew_on_each_pass_of_a_forever_generator_is_not_iterated_per_epoch(tmp_path):
    generator = """\
    while True:
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=1)
        yield from loader
"""
    files = diffusion_project(generator)
    project_facts(tmp_path, files, "train_util.py")
    facts = project_facts(tmp_path, files, "image_datasets.py")
    assert training_loaders(facts) == {7: [False]}


def test_a_subclass_loop_calling_a_step_its_base_class_defines_is_a_training_loop():
    source = f"""\
class BaseTrainer:
    def train_step(self, x, y):
        loss = (self.model(x.to(device)) - y.to(device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


class Trainer(BaseTrainer):
    def __init__(self, model):
        self.model = model

    def fit(self, loader):
        for epoch in range(10):
            for x, y in loader:
                self.train_step(x, y)


trainer = Trainer(model)
trainer.fit({TRAIN})
"""
    assert loop_lines(source) == [15]
    assert fed_lines(source) == {20: [True]}
