"""Patterns of real training code the data-loading family must understand (each with its negative).

Found by reading public training projects: loaders consumed through generators, worker counts computed at run
time, options set only on the CUDA path, batches unpacked before they are moved, checkpoints loaded to the CPU.
"""

from __future__ import annotations

from support import codes_and_lines, fix, said

HEAD = """\
import os
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
"""

STEP = """
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
"""


CHECKPOINTED = """\
import torch
from torch.utils.data import DataLoader

model = Net().to(args.device)
state = torch.load("ckpt.pt", map_location="cpu")
loader = DataLoader(ds, batch_size=32)
for epoch in range(3):
    for x in loader:
        model(x).sum().backward()
        opt.step()
"""


def test_a_checkpoint_loaded_to_the_cpu_does_not_make_the_script_cpu():
    # `map_location` says where a checkpoint's tensors are loaded, not where training runs: with the device
    # unknown from the code, the `device` setting decides.
    assert codes_and_lines(CHECKPOINTED, select=("TL201", "TL202"), device="cuda") == [
        ("TL201", 6),
        ("TL202", 6),
    ]


def test_a_script_whose_device_is_unknown_stays_silent_by_default():
    assert codes_and_lines(CHECKPOINTED, select=("TL201", "TL202")) == []


def test_worker_counts_computed_at_run_time_need_persistent_workers():
    source = (
        HEAD
        + """
workers = min(8, os.cpu_count())
loader = DataLoader(ds, batch_size=32, num_workers=workers)
half = DataLoader(ds, batch_size=32, num_workers=int(os.cpu_count() / 2))
for epoch in range(3):
    for x in loader:
"""
        + STEP
        + """    for x in half:
"""
        + STEP
    )
    assert codes_and_lines(source, select=("TL203",)) == [("TL203", 9), ("TL203", 10)]
    fixed = fix(source, select=("TL203",))
    assert "num_workers=workers, persistent_workers=True)" in fixed  # min(8, os.cpu_count()) is at least 1
    assert "num_workers=int(os.cpu_count() / 2), persistent_workers=int(os.cpu_count() / 2) > 0)" in fixed


def test_a_conditional_worker_count_is_parenthesised_in_the_fix():
    source = (
        HEAD
        + """
loader = DataLoader(ds, batch_size=32, num_workers=0 if debug else 4)
for epoch in range(3):
    for x in loader:
"""
        + STEP
    )
    fixed = fix(source, select=("TL203",))
    assert "num_workers=0 if debug else 4, persistent_workers=(0 if debug else 4) > 0)" in fixed


def test_batches_unpacked_from_a_dict_are_moved_without_blocking():
    source = (
        HEAD
        + """
loader = DataLoader(ds, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True)
for epoch in range(3):
    for batch in loader:
        images, masks = batch["image"], batch["mask"]
        images = images.to(device)
        masks = masks.to(device, non_blocking=True)
        x = images
"""
        + STEP
    )
    assert codes_and_lines(source, select=("TL205",)) == [("TL205", 12)]


def test_batches_moved_in_a_comprehension_are_found():
    source = (
        HEAD
        + """
loader = DataLoader(ds, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True)
for epoch in range(3):
    for batch in loader:
        x, y = (t.to(device) for t in batch)
        batch = {k: v.to(device) for k, v in batch.items()}
"""
        + STEP
    )
    assert codes_and_lines(source, select=("TL205",)) == [("TL205", 11), ("TL205", 12)]


GENERATOR = """
def forever(loader):
    while True:
        for batch in loader:
            yield batch


def forever_from(loader):
    while True:
        yield from loader
"""


def test_a_loader_re_iterated_forever_by_a_generator_feeds_training_every_pass():
    source = (
        HEAD
        + GENERATOR
        + """
loader = DataLoader(ds, batch_size=32, num_workers=4)
other = DataLoader(ds, batch_size=32, num_workers=4)
batches, more = forever(loader), forever_from(other)
for step in range(1000):
    x = next(batches)
    y = next(more)
"""
        + STEP.replace("        ", "    ")
    )
    assert codes_and_lines(source, select=("TL201", "TL203")) == [("TL203", 18), ("TL203", 19)]


def test_a_generator_that_passes_once_is_not_an_epoch_loop():
    source = (
        HEAD
        + """
def once(loader):
    for batch in loader:
        yield batch


loader = DataLoader(ds, batch_size=32, num_workers=4)
for x in once(loader):
"""
        + STEP.replace("        ", "    ")
    )
    assert codes_and_lines(source, select=("TL201", "TL202", "TL203")) == [("TL202", 13)]


def test_itertools_cycle_iterates_its_loader_once():
    source = (
        HEAD
        + """
import itertools

loader = DataLoader(ds, batch_size=32, num_workers=4)
batches = itertools.cycle(loader)
for step in range(1000):
    x = next(batches)
"""
        + STEP.replace("        ", "    ")
    )
    # cycle() keeps a copy of the first pass and never iterates the loader again: no TL203, but it feeds
    # training, so the missing pin_memory is reported.
    assert codes_and_lines(source, select=("TL202", "TL203")) == [("TL202", 10)]


def test_a_project_loader_that_defines_its_own_iteration_is_not_judged_per_epoch():
    source = (
        HEAD
        + """
class InfiniteDataLoader(DataLoader):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.iterator = super().__iter__()

    def __iter__(self):
        for _ in range(len(self)):
            yield next(self.iterator)


loader = InfiniteDataLoader(ds, batch_size=32, num_workers=min(8, os.cpu_count()), pin_memory=True)
for epoch in range(3):
    for x in loader:
"""
        + STEP
    )
    assert codes_and_lines(source, select=("TL2",)) == []


TRAINER_CLASS = """\
import torch
from torch.utils.data import DataLoader


class Trainer:
    def __init__(self, model, train_data, val_data, optimizer, gpu_id):
        self.model = model.to(gpu_id)
        self.train_data = train_data
        self.val_data = val_data
        self.optimizer = optimizer
        self.gpu_id = gpu_id

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self):
        for source, targets in self.train_data:
            source = source.to(self.gpu_id)
            targets = targets.to(self.gpu_id)
            self._run_batch(source, targets)

    def evaluate(self):
        with torch.no_grad():
            for source, targets in self.val_data:
                self.model(source.to(self.gpu_id))

    def train(self, epochs):
        for epoch in range(epochs):
            self._run_epoch()


def build_loader(dataset):
    return DataLoader(dataset, batch_size=32, pin_memory=True, shuffle=True)


def main(rank, epochs):
    torch.cuda.set_device(rank)
    train_data = build_loader(train_set)
    val_data = DataLoader(val_set, batch_size=32)
    trainer = Trainer(model, train_data, val_data, optimizer, rank)
    trainer.train(epochs)


if __name__ == "__main__":
    main(0, 10)
"""


def test_a_loader_handed_to_a_trainer_class_feeds_the_loop_of_its_methods():
    # `Trainer(model, train_data, ...)` runs `__init__`, which keeps the loader in `self.train_data`; the
    # evaluation loader kept beside it feeds no training loop. `.to(self.gpu_id)` is a move to the GPU.
    assert codes_and_lines(TRAINER_CLASS, select=("TL2",)) == [
        ("TL205", 21),
        ("TL205", 22),
        ("TL201", 36),
    ]


SWAPPED_FOR_TESTS = """\
import os
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader


def get_dataloaders(accelerator, batch_size):
    train = DataLoader(train_set, shuffle=True, batch_size=batch_size)
    evaluation = DataLoader(eval_set, shuffle=False, batch_size=batch_size)
    return train, evaluation


if os.environ.get("TESTING_MOCKED_DATALOADERS") == "1":
    from accelerate.test_utils.training import mocked_dataloaders

    get_dataloaders = mocked_dataloaders


def training_function():
    accelerator = Accelerator()
    train_loader, eval_loader = get_dataloaders(accelerator, 16)
    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)
    for epoch in range(3):
        for batch in train_loader:
            accelerator.backward(model(**batch).loss)
            optimizer.step()


if __name__ == "__main__":
    training_function()
"""


def test_a_loader_factory_swapped_for_a_mock_in_tests_still_feeds_training():
    # The factory's name is rebound to another function on some runs only: the def is what runs otherwise.
    assert codes_and_lines(SWAPPED_FOR_TESTS, select=("TL201", "TL202")) == [("TL201", 8), ("TL202", 8)]
    rebound_in_function = SWAPPED_FOR_TESTS.replace(
        "    train_loader, eval_loader = get_dataloaders(",
        "    get_dataloaders = pick()\n    train_loader, eval_loader = get_dataloaders(",
    )
    assert codes_and_lines(rebound_in_function, select=("TL201", "TL202")) == []


def project_findings(root, files: dict[str, str], checked: str, select=("TL2",)) -> list[tuple[str, int]]:
    """The findings of one file of a small project written under `root`."""
    import textwrap

    from support import settings

    from torchlint.linter import Linter

    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    path = root / checked
    found = Linter().check_text(str(path), path.read_text(), settings(select=select))
    return [(d.code, d.location.line) for d in found]


WRAPPED = """\
import torch
from torch.utils.data import DataLoader


def on_device(loader, device):
    for batch in loader:
        yield [t.to(device) for t in batch]


def wrap_loader(loader):
    return LoggingLoader(loader)


def main():
    device = torch.device("cuda")
    train_loader = DataLoader(train_set, batch_size=64, num_workers=4, persistent_workers=True)
    val_loader = DataLoader(val_set, batch_size=64)
    train_batches = wrap_loader(train_loader)
    val_batches = wrap_loader(val_loader)
    for epoch in range(10):
        for x, y in on_device(train_batches, device):
            loss = model(x, y)
            loss.backward()
            optimizer.step()
        for x, y in on_device(val_batches, device):
            model(x, y)


if __name__ == "__main__":
    main()
"""


def test_a_loader_passed_through_project_functions_that_return_it_reaches_its_loop():
    # `wrap_loader` and `on_device` hand back (a wrapper of) what this very call gives them: the training
    # loader feeds training, the evaluation loader that goes through the same functions does not.
    assert codes_and_lines(WRAPPED, select=("TL201", "TL202")) == [("TL202", 16)]


def test_a_call_of_an_unknown_library_hands_back_its_keyword_argument():
    source = """\
import torch
from torch.utils.data import DataLoader
from backend import distribute

device = torch.device("cuda")
loader = DataLoader(train_set, batch_size=64, num_workers=4, persistent_workers=True)
held_out = DataLoader(val_set, batch_size=64)
batches = distribute(training_data=loader)
for epoch in range(10):
    for x, y in batches:
        model(x.to(device), y.to(device)).backward()
        optimizer.step()
"""
    assert codes_and_lines(source, select=("TL201", "TL202")) == [("TL202", 6)]


def test_a_wrapper_in_another_file_hands_back_the_loader_it_is_given(tmp_path):
    files = {
        "helpers.py": """\
            def prepare(loader, accelerator):
                return accelerator.prepare(loader)
        """,
        "train.py": """\
            import torch
            from torch.utils.data import DataLoader
            from helpers import prepare

            def main(accelerator):
                device = torch.device("cuda")
                loader = prepare(DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True), accelerator)
                held_out = prepare(DataLoader(val_set, batch_size=64), accelerator)
                for epoch in range(10):
                    for x in loader:
                        model(x.to(device, non_blocking=True)).backward()
                        optimizer.step()

            if __name__ == "__main__":
                main(None)
        """,
    }
    assert project_findings(tmp_path, files, "train.py") == [("TL203", 7)]


PACKAGE = {
    "data/__init__.py": """\
        from .build import build_loader
    """,
    "data/build.py": """\
        from .images import image_loader
        from .text import text_loader

        def build_loader(cfg, train=True):
            return image_loader(cfg, train) if cfg.kind == "image" else text_loader(cfg, train)
    """,
    "data/images.py": """\
        from torch.utils.data import DataLoader

        def image_loader(cfg, train):
            return DataLoader(cfg.images, batch_size=64, shuffle=train, num_workers=8)
    """,
    "data/text.py": """\
        from torch.utils.data import DataLoader

        def text_loader(cfg, train):
            return DataLoader(cfg.text, batch_size=64, shuffle=train)
    """,
    "unused.py": """\
        from torch.utils.data import DataLoader

        def never_trained(cfg):
            return DataLoader(cfg.text, batch_size=64)
    """,
    "train.py": """\
        import torch
        from data import build_loader

        def main(cfg):
            device = torch.device("cuda")
            loader = build_loader(cfg)
            for epoch in range(10):
                for x in loader:
                    model(x.to(device)).backward()
                    optimizer.step()

        if __name__ == "__main__":
            main(None)
    """,
}


def test_a_factory_re_exported_by_a_package_and_dispatching_feeds_training(tmp_path):
    # `from data import build_loader` reaches data/build.py through data/__init__.py; build_loader returns
    # one of two other factories' loaders, each of which feeds training.
    assert project_findings(tmp_path, PACKAGE, "data/images.py") == [("TL202", 4), ("TL203", 4)]
    assert project_findings(tmp_path, PACKAGE, "data/text.py") == [("TL201", 4), ("TL202", 4)]
    assert project_findings(tmp_path, PACKAGE, "unused.py") == []


FLAGGED_FACTORY = {
    "loaders.py": """\
        from torch.utils.data import DataLoader

        def create_loader(dataset, batch_size=32, is_training=False, num_workers=4):
            if is_training:
                loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
            else:
                loader = DataLoader(dataset, batch_size=batch_size, num_workers=2)
            return loader

        def split_loader(dataset, split="train"):
            if split == "train":
                return DataLoader(dataset, batch_size=32, shuffle=True, num_workers=4, pin_memory=True)
            return DataLoader(dataset, batch_size=32, num_workers=3, pin_memory=True)
    """,
    "train.py": """\
        import torch
        from loaders import create_loader, split_loader

        def main(args):
            device = torch.device("cuda")
            train_kwargs = dict(is_training=True)
            train_loader = create_loader(train_set, **train_kwargs)
            eval_loader = create_loader(eval_set, num_workers=2)
            extra = split_loader(extra_set)
            for epoch in range(10):
                for x in train_loader:
                    model(x.to(device)).backward()
                    optimizer.step()
                for x in extra:
                    model(x.to(device, non_blocking=True)).backward()
                    optimizer.step()
                for x in eval_loader:
                    model(x.to(device))

        if __name__ == "__main__":
            main(None)
    """,
}


def test_a_factory_called_with_a_training_flag_feeds_training_with_that_branch_only(tmp_path):
    # `is_training=True` (through a dict) picks the first loader; the call with the default picks the second,
    # which only evaluates. `split` defaults to "train": the second `return` is not reached by that call.
    assert project_findings(tmp_path, FLAGGED_FACTORY, "loaders.py") == [
        ("TL202", 5),
        ("TL203", 5),
        ("TL203", 12),
    ]


CUDA_PATH_ONLY = """\
import torch
from torch.utils.data import DataLoader

use_cuda = torch.cuda.is_available()
device = torch.device("cuda" if use_cuda else "cpu")
kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}
train_kwargs = {"batch_size": 64}
cuda_kwargs = {"num_workers": 2, "shuffle": True}
if use_cuda:
    train_kwargs.update(cuda_kwargs)
    train_kwargs.update(pin_memory=True)
first = DataLoader(train_set, shuffle=True, **kwargs)
second = DataLoader(train_set, **train_kwargs)
for epoch in range(10):
    for x in first:
        model(x.to(device, non_blocking=True)).backward()
        optimizer.step()
    for x in second:
        model(x.to(device, non_blocking=True)).backward()
        optimizer.step()
"""


def test_workers_set_on_the_accelerator_path_only_need_persistent_workers_there():
    # The author chose workers for CUDA training; the CPU path keeps 0 workers, where
    # `persistent_workers=True` would raise, so the fix goes into the dict that sets them.
    assert codes_and_lines(CUDA_PATH_ONLY, select=("TL2",)) == [("TL203", 12), ("TL203", 13)]
    fixed = fix(CUDA_PATH_ONLY, select=("TL203",))
    assert (
        'kwargs = {"num_workers": 1, "persistent_workers": True, "pin_memory": True} if use_cuda else {}'
        in fixed
    )
    assert 'cuda_kwargs = {"num_workers": 2, "persistent_workers": True, "shuffle": True}' in fixed
    assert codes_and_lines(fixed, select=("TL2",)) == []


def test_a_worker_count_the_user_sets_on_one_path_only_stays_theirs():
    source = CUDA_PATH_ONLY.replace('"num_workers": 1', '"num_workers": args.workers').replace(
        '"num_workers": 2', '"num_workers": 2, "persistent_workers": False'
    )
    assert codes_and_lines(source, select=("TL203",)) == []


LIGHTNING = """\
import lightning as L
from torch.utils.data import DataLoader


class Images(L.LightningDataModule):
    def __init__(self, root):
        super().__init__()
        self.root = root
        self.train_dataloader = self._train_dataloader

    def _train_dataloader(self):
        return DataLoader(self.train_set, batch_size=64, shuffle=True, num_workers=4)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=64)


class Text(L.LightningDataModule):
    def _loader(self, dataset, train):
        if train:
            return DataLoader(dataset, batch_size=64, shuffle=True)
        return DataLoader(dataset, batch_size=64)

    def train_dataloader(self):
        return self._loader(self.train_set, train=True)

    def test_dataloader(self):
        return self._loader(self.test_set, train=False)


trainer = L.Trainer(max_epochs=10)
"""


def test_lightning_hooks_bound_as_attributes_and_loaders_built_in_other_methods():
    # Lightning calls `train_dataloader` whatever function the attribute holds; a DataModule's hook that
    # builds its loader in a helper feeds training with the helper's training branch only.
    assert codes_and_lines(LIGHTNING, select=("TL2",)) == [
        ("TL202", 12),
        ("TL203", 12),
        ("TL201", 21),
        ("TL202", 21),
    ]


OWN_OUTPUT = """\
import torch
from torch.utils.data import DataLoader


def main():
    device = torch.device("cuda")
    loader = DataLoader(train_set, batch_size=64, shuffle=True, pin_memory=True)
    for epoch in range(10):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            model(x, y).backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_the_data_loading_rules_read_their_own_fix():
    # TL201's count is one short portable expression; it is at least 1, so TL203 then asks for
    # `persistent_workers=True`, and TL205 still applies to the pinned batches.
    fixed = fix(OWN_OUTPUT, select=("TL201",))
    assert "num_workers=min(8, os.cpu_count() or 1)" in fixed
    assert codes_and_lines(fixed, select=("TL2",)) == [("TL203", 9), ("TL205", 12), ("TL205", 12)]
    again = fix(fixed, select=("TL2",))
    assert "num_workers=min(8, os.cpu_count() or 1), persistent_workers=True)" in again
    assert "x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)" in again
    assert codes_and_lines(again, select=("TL2",)) == []


def test_a_lambda_in_the_dataset_transform_leaves_the_workers_to_the_author():
    source = OWN_OUTPUT.replace(
        "def main():\n",
        "def main():\n"
        "    scale = transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda x: x.mul(255))])\n"
        '    train_set = datasets.MNIST("data", train=True, transform=scale)\n',
    )
    from support import lint

    [finding] = lint(source, select=("TL201",))
    assert finding.fix is None
    assert "`dataset` is built with a lambda in its `transform`" in said(finding)
    named = source.replace(
        "[transforms.ToTensor(), transforms.Lambda(lambda x: x.mul(255))]", "[to_tensor()]"
    )
    assert lint(named, select=("TL201",))[0].fix is not None


ENGINE = {
    "engine.py": """\
        def train_one_epoch(model, loader, optimizer, device):
            for images, targets in loader:
                images = images.to(device)
                targets = targets.to(device, non_blocking=True)
                model(images, targets).backward()
                optimizer.step()
    """,
    "train.py": """\
        import torch
        from torch.utils.data import DataLoader
        from engine import train_one_epoch

        def main():
            device = torch.device("cuda")
            loader = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True)
            for epoch in range(10):
                train_one_epoch(model, loader, optimizer, device)

        if __name__ == "__main__":
            main()
    """,
}


def test_a_loop_in_a_helper_module_moves_the_pinned_batches_its_callers_pass(tmp_path):
    assert project_findings(tmp_path, ENGINE, "engine.py") == [("TL205", 3)]
    unpinned = dict(ENGINE, **{"train.py": ENGINE["train.py"].replace("pin_memory=True", "pin_memory=False")})
    assert project_findings(tmp_path, unpinned, "engine.py") == []


def test_the_no_fix_reason_names_the_option_once():
    from support import lint

    source = OWN_OUTPUT.replace(
        "    loader = DataLoader(train_set, batch_size=64, shuffle=True, pin_memory=True)",
        "    def collate_fn(items):\n        return items\n\n"
        "    loader = DataLoader(train_set, batch_size=64, shuffle=True, pin_memory=True, collate_fn=collate_fn)",
    )
    [finding] = lint(source, select=("TL201",))
    assert "(no automatic fix: `collate_fn` is a function defined inside a function, which worker" in said(
        finding
    )


def test_lightning_fabric_picks_the_gpu_unless_told_cpu():
    source = """\
import lightning as L
from torch.utils.data import DataLoader


def main():
    fabric = L.Fabric()
    loader = fabric.setup_dataloaders(DataLoader(train_set, batch_size=32, shuffle=True))
    for epoch in range(3):
        for x, y in loader:
            fabric.backward(model(x, y))
            optimizer.step()


if __name__ == "__main__":
    main()
"""
    assert codes_and_lines(source, select=("TL201", "TL202")) == [("TL201", 7), ("TL202", 7)]
    on_cpu = source.replace("L.Fabric()", 'L.Fabric(accelerator="cpu")')
    assert codes_and_lines(on_cpu, select=("TL201", "TL202")) == []
