"""What a loader loads, and whether worker processes could load it."""

from __future__ import annotations

from support import facts_of, line_of, project_facts

from torchlint.rules.data_loading.datasets import DatasetAnalysis

DATASETS = """\
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info


class Images(Dataset):
    def __getitem__(self, i):
        return torch.randn(3, 32, 32)


class Plain:
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return i


class Stream(IterableDataset):
    def __iter__(self):
        yield from range(100)


class ShardedStream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start = 0 if info is None else info.id
        yield from range(start, 100, 1 if info is None else info.num_workers)


class MoreStream(ShardedStream):
    pass
"""


def kinds(loaders: str) -> list[str]:
    facts = facts_of(DATASETS + loaders)
    return [facts.analysis(DatasetAnalysis).kind(loader).value for loader in facts.loaders]


def test_dataset_kinds():
    loaders = """
tensors = TensorDataset(torch.randn(64, 4), torch.randn(64))
a = DataLoader(Images())
b = DataLoader(Plain())
c = DataLoader(Stream())
d = DataLoader(ShardedStream())
e = DataLoader(MoreStream())
f = DataLoader(tensors)
g = DataLoader(unknown_dataset)
"""
    assert kinds(loaders) == [
        "map-style",
        "map-style",
        "iterable, not sharded across workers",
        "iterable, sharded by get_worker_info()",
        "iterable, sharded by get_worker_info()",
        "in-memory TensorDataset",
        "unknown",
    ]


def test_dataset_class_from_another_module(tmp_path):
    files = {
        "streams.py": "from torch.utils.data import IterableDataset\n\nclass Tokens(IterableDataset):\n    def __iter__(self):\n        yield 1\n",
        "train.py": "from torch.utils.data import DataLoader\nfrom streams import Tokens\nloader = DataLoader(Tokens())\n",
    }
    facts = project_facts(tmp_path, files, "train.py")
    assert (
        facts.analysis(DatasetAnalysis).kind(facts.loaders[0]).value == "iterable, not sharded across workers"
    )


def test_what_does_not_pickle():
    source = """\
    import functools
    from torch.utils.data import DataLoader

    def collate_top(batch):
        return batch

    def main():
        def collate_local(batch):
            return batch

        class LocalSet:
            def __getitem__(self, i):
                return i

        a = DataLoader(ds, collate_fn=lambda b: b)
        b = DataLoader(ds, collate_fn=collate_local)
        c = DataLoader(LocalSet())
        d = DataLoader(ds, collate_fn=functools.partial(collate_local, pad=0))
        e = DataLoader(ds, collate_fn=collate_top, worker_init_fn=functools.partial(collate_top))
    """
    facts = facts_of(source)
    found = [
        [(p.what, p.why) for p in facts.analysis(DatasetAnalysis).unpicklable(loader)]
        for loader in facts.loaders
    ]
    assert found == [
        [("collate_fn", "a lambda")],
        [("collate_fn", "`collate_local`, a function defined inside a function")],
        [("dataset", "an instance of `LocalSet`, a class defined inside a function")],
        [("collate_fn", "`collate_local`, a function defined inside a function")],
        [],
    ]


def test_main_guard():
    assert facts_of('def main():\n    pass\n\nif __name__ == "__main__":\n    main()\n').has_main_guard
    assert not facts_of("main()\n").has_main_guard


def test_batch_moves_in_the_training_loop_with_and_without_non_blocking():
    source = """\
    import torch
    device = torch.device("cuda")
    model = model.to(device)
    for epoch in range(3):
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device)
            batch = {k: v.to(device) for k, v in extra.items()}
            half = images.to(torch.float16)
            back = labels.to("cpu")
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
    """
    facts = facts_of(source)
    [loop] = facts.training.training_loops
    moves = [
        (line_of(facts, m.call), m.non_blocking.describe() if m.non_blocking else None)
        for m in facts.batch_moves(loop)
    ]
    assert moves == [(6, "True"), (7, None)]


def test_batch_dict_moves_through_items():
    source = """\
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        model(**batch).loss.backward()
        optimizer.step()
    """
    facts = facts_of(source)
    [loop] = facts.training.training_loops
    assert [line_of(facts, m.call) for m in facts.batch_moves(loop)] == [2]


def test_hf_training_arguments_dataloader_options():
    source = """\
    from transformers import Trainer, TrainingArguments
    args = TrainingArguments(output_dir="out", dataloader_num_workers=0, dataloader_pin_memory=True)
    """
    facts = facts_of(source)
    [arguments] = facts.hf_training_arguments
    assert {k: v.describe() for k, v in arguments.options.items() if k.startswith("dataloader_")} == {
        "dataloader_num_workers": "0",
        "dataloader_pin_memory": "True",
    }
    assert facts.frameworks == {"transformers"}
