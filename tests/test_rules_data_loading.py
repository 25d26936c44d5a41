"""TL201-TL205 in the styles of real training code: what is flagged, what is not, and the fixed source."""

from __future__ import annotations

import textwrap

from support import codes_and_lines, fix, lint, project_facts

from torchlint.linter import Linter
from torchlint.rules.data_loading import WORKERS

HEAD = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""


def train_loop(loader: str = "loader") -> str:
    return f"""
for epoch in range(10):
    for x, y in {loader}:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
"""


def findings(body: str, select=("TL2",)) -> list[tuple[str, int]]:
    return codes_and_lines(HEAD + textwrap.dedent(body), select=select)


# -- TL201 ----------------------------------------------------------------------------------------------


def test_training_loader_without_workers_on_gpu():
    assert findings(
        "loader = DataLoader(ds, batch_size=8, pin_memory=True, persistent_workers=False)\n" + train_loop(),
        select=("TL201",),
    ) == [("TL201", 5)]
    assert findings(
        "loader = DataLoader(ds, 8, True, None, None, 0)\n" + train_loop(), select=("TL201",)
    ) == [("TL201", 5)]


def test_workers_missing_from_a_kwargs_dict():
    body = (
        'kwargs = {"batch_size": 8}\nkwargs.update(shuffle=True)\nloader = DataLoader(ds, **kwargs)\n'
        + train_loop()
    )
    assert findings(body, select=("TL201",)) == [("TL201", 7)]


def test_user_controlled_or_conditional_workers_are_not_flagged():
    for body in (
        "loader = DataLoader(ds, num_workers=args.workers)\n",
        "def build(workers):\n    return DataLoader(ds, num_workers=workers)\nloader = build(2)\n",
        'kw = {}\nif use_cuda:\n    kw.update({"num_workers": 1})\nloader = DataLoader(ds, **kw)\n',
        "loader = DataLoader(ds, **loader_kwargs)\n",
        "loader = DataLoader(ds, num_workers=os.cpu_count())\n",
    ):
        assert findings(body + train_loop(), select=("TL201",)) == [], body


def test_evaluation_loaders_are_not_flagged():
    body = (
        "loader = DataLoader(ds, num_workers=2)\nval_loader = DataLoader(val)\n"
        + train_loop()
        + "for x in val_loader:\n    model(x)\n"
    )
    assert findings(body, select=("TL201",)) == []


def test_cpu_only_training_is_not_flagged():
    source = (
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\nmodel.to('cpu')\n"
        + train_loop().replace("x.to(device), y.to(device)", "x, y")
    )
    assert codes_and_lines(source, select=("TL201",)) == []
    unknown = "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n" + train_loop()
    assert codes_and_lines(unknown, select=("TL201",)) == []
    assert codes_and_lines(unknown, select=("TL201",), device="cuda") == [("TL201", 2)]


def test_unsharded_iterable_and_tensor_datasets_are_not_flagged():
    body = (
        """\
    from torch.utils.data import IterableDataset, TensorDataset

    class Stream(IterableDataset):
        def __iter__(self):
            yield from range(10)

    loader = DataLoader(Stream())
    tensors = DataLoader(TensorDataset(torch.randn(8, 2)))
    """
        + train_loop()
        + train_loop("tensors")
    )
    assert findings(body, select=("TL201",)) == []


def test_fix_sets_a_worker_count_and_imports_os():
    source = (
        HEAD
        + "loader = DataLoader(ds, batch_size=8)\n"
        + train_loop()
        + 'if __name__ == "__main__":\n    pass\n'
    )
    fixed = fix(source, select=("TL201",))
    assert f"loader = DataLoader(ds, batch_size=8, num_workers={WORKERS.format(os='os')})\n" in fixed
    assert fixed.startswith("import torch\nfrom torch.utils.data import DataLoader\nimport os\n")


def test_fix_edits_the_dict_entry_that_says_zero():
    source = (
        HEAD
        + 'kw = {"batch_size": 8, "num_workers": 0}\nloader = DataLoader(ds, **kw)\n'
        + train_loop()
        + 'if __name__ == "__main__":\n    pass\n'
    )
    assert f'kw = {{"batch_size": 8, "num_workers": {WORKERS.format(os="os")}}}\n' in fix(
        source, select=("TL201",)
    )


def test_no_fix_for_unpicklable_collate_or_missing_main_guard():
    lam = lint(
        HEAD
        + "loader = DataLoader(ds, collate_fn=lambda b: b)\n"
        + train_loop()
        + 'if __name__ == "__main__":\n    pass\n',
        select=("TL201",),
    )
    assert [d.fix for d in lam] == [None]
    assert (
        "`collate_fn` is a lambda, which worker processes started by spawn or forkserver cannot pickle"
        in lam[0].message
    )
    guardless = lint(HEAD + "loader = DataLoader(ds)\n" + train_loop(), select=("TL201",))
    assert guardless[0].fix is None and "no `if __name__" in guardless[0].message


# -- TL202 ----------------------------------------------------------------------------------------------


def test_pin_memory_on_cuda_when_available_uses_is_available():
    source = HEAD + "loader = DataLoader(ds, num_workers=2)\n" + train_loop()
    [d] = lint(source, select=("TL202",))
    assert d.fix.applicability.value == "unsafe"  # the dataset's class is unknown
    assert "loader = DataLoader(ds, num_workers=2, pin_memory=torch.cuda.is_available())\n" in fix(
        source, select=("TL202",)
    )


def test_pin_memory_fix_is_safe_for_a_known_cpu_dataset_on_cuda():
    source = """\
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Images(Dataset):
        def __getitem__(self, i):
            return torch.randn(3, 8, 8)

    loader = DataLoader(Images(), num_workers=2, pin_memory=False)
    model.cuda()
    """
    source = textwrap.dedent(source) + train_loop()
    [d] = lint(source, select=("TL202",))
    assert d.fix.applicability.value == "safe"
    assert "loader = DataLoader(Images(), num_workers=2, pin_memory=True)\n" in fix(source, select=("TL202",))


def test_a_dataset_that_moves_samples_to_the_gpu_is_not_flagged():
    source = """\
    import torch
    from torch.utils.data import DataLoader, Dataset

    class OnGpu(Dataset):
        def __getitem__(self, i):
            return self.data[i].cuda()

    loader = DataLoader(OnGpu())
    model.cuda()
    """
    source = textwrap.dedent(source) + train_loop()
    assert codes_and_lines(source.replace(".cuda()\n\n", "\n\n", 1), select=("TL202",)) == [("TL202", 8)]
    assert codes_and_lines(source, select=("TL202",)) == []


# -- TL203 ----------------------------------------------------------------------------------------------


def test_per_epoch_loader_with_workers_and_its_fix():
    source = (
        HEAD
        + "loader = DataLoader(ds, num_workers=4)\nother = DataLoader(ds, num_workers=args.workers)\n"
        + train_loop()
        + train_loop("other")
    )
    assert codes_and_lines(source, select=("TL203",)) == [("TL203", 5), ("TL203", 6)]
    fixed = fix(source, select=("TL203",))
    assert "DataLoader(ds, num_workers=4, persistent_workers=True)" in fixed
    assert "DataLoader(ds, num_workers=args.workers, persistent_workers=args.workers > 0)" in fixed


def test_single_pass_and_zero_workers_are_not_flagged():
    single = (
        HEAD
        + "loader = DataLoader(ds, num_workers=4)\nfor x in loader:\n    model(x).backward()\n    opt.step()\n"
    )
    zero = HEAD + "loader = DataLoader(ds, num_workers=0)\n" + train_loop()
    assert codes_and_lines(single, select=("TL203",)) == []
    assert codes_and_lines(zero, select=("TL203",)) == []


def test_an_endless_sampler_has_no_next_epoch():
    """minGPT: `iter(loader)` is re-created after StopIteration, which 10^10 samples with replacement never
    raise; a sampler whose epoch can end is still flagged."""
    restart = (
        "it = iter(loader)\nwhile True:\n    try:\n        x = next(it)\n    except StopIteration:\n"
        "        it = iter(loader)\n        x = next(it)\n    model(x).backward()\n    opt.step()\n"
    )

    def loader_with(sampler: str) -> str:
        return HEAD + f"loader = DataLoader(ds, sampler={sampler}, num_workers=4)\n" + restart

    endless = "torch.utils.data.RandomSampler(ds, replacement=True, num_samples=int(1e10))"
    assert codes_and_lines(loader_with(endless), select=("TL203",)) == []
    assert (
        codes_and_lines(loader_with("torch.utils.data.RandomSampler(ds, True, 10 ** 12)"), select=("TL203",))
        == []
    )
    for ending in (
        "torch.utils.data.RandomSampler(ds, replacement=True, num_samples=1000)",
        "torch.utils.data.RandomSampler(ds, num_samples=int(1e10))",
        "torch.utils.data.RandomSampler(ds)",
    ):
        assert codes_and_lines(loader_with(ending), select=("TL203",)) == [("TL203", 5)], ending


# -- TL204 ----------------------------------------------------------------------------------------------


def test_options_that_raise_at_construction_on_any_loader():
    source = (
        HEAD
        + """\
a = DataLoader(ds, persistent_workers=True)
b = DataLoader(ds, num_workers=0, prefetch_factor=2)
c = DataLoader(ds, num_workers=-2)
d = DataLoader(ds, num_workers=2, prefetch_factor=2, persistent_workers=True)
e = DataLoader(ds, prefetch_factor=None)
f = DataLoader(ds, **kw, persistent_workers=True)
"""
    )
    assert codes_and_lines(source, select=("TL204",)) == [("TL204", 5), ("TL204", 6), ("TL204", 7)]


# -- TL205 ----------------------------------------------------------------------------------------------


def test_blocking_copies_from_a_pinned_loader_and_the_fix():
    source = HEAD + "loader = DataLoader(ds, num_workers=2, pin_memory=True)\n" + train_loop()
    assert codes_and_lines(source, select=("TL205",)) == [("TL205", 9), ("TL205", 9)]
    assert "x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n" in fix(
        source, select=("TL205",)
    )


def test_unpinned_loaders_and_non_blocking_copies_are_not_flagged():
    unpinned = HEAD + "loader = DataLoader(ds, num_workers=2)\n" + train_loop()
    done = (
        HEAD
        + "loader = DataLoader(ds, pin_memory=True)\n"
        + train_loop()
        .replace("x.to(device)", "x.to(device, non_blocking=True)")
        .replace("y.to(device)", "y.to(device, non_blocking=True)")
    )
    assert codes_and_lines(unpinned, select=("TL205",)) == []
    assert codes_and_lines(done, select=("TL205",)) == []


# -- across files -----------------------------------------------------------------------------------------


def test_loader_in_train_py_with_the_loop_in_engine_py(tmp_path):
    files = {
        "engine.py": """\
            def train_one_epoch(model, loader, optimizer, device):
                for x, y in loader:
                    loss = model(x.to(device)).sum()
                    loss.backward()
                    optimizer.step()
        """,
        "train.py": """\
            import torch
            from torch.utils.data import DataLoader
            from engine import train_one_epoch

            def main():
                device = torch.device("cuda")
                loader = DataLoader(ds, batch_size=8, num_workers=4)
                eval_loader = DataLoader(ds, batch_size=8)
                for epoch in range(3):
                    train_one_epoch(model, loader, optimizer, device)

            if __name__ == "__main__":
                main()
        """,
    }
    project_facts(tmp_path, files, "train.py")
    diagnostics = Linter().check_text(
        str(tmp_path / "train.py"),
        (tmp_path / "train.py").read_text(),
        __import__("support").settings(select=("TL2",)),
    )
    assert [(d.code, d.location.line) for d in diagnostics] == [("TL202", 7), ("TL203", 7)]


# -- Hugging Face TrainingArguments ------------------------------------------------------------------------


def test_training_arguments_speak_in_dataloader_options():
    source = """\
    from transformers import TrainingArguments
    a = TrainingArguments(output_dir="out", dataloader_num_workers=4)
    b = TrainingArguments(output_dir="out", dataloader_num_workers=args.workers, dataloader_persistent_workers=True)
    c = TrainingArguments(output_dir="out", dataloader_persistent_workers=True)
    d = TrainingArguments(output_dir="out", dataloader_pin_memory=False, dataloader_num_workers=0)
    e = TrainingArguments(output_dir="out")
    """
    assert codes_and_lines(source, select=("TL2",)) == [("TL203", 2), ("TL204", 4), ("TL202", 5)]
    fixed = fix(source, select=("TL2",))
    assert (
        'a = TrainingArguments(output_dir="out", dataloader_num_workers=4, dataloader_persistent_workers=True)'
        in fixed
    )
    assert (
        'd = TrainingArguments(output_dir="out", dataloader_pin_memory=True, dataloader_num_workers=0)'
        in fixed
    )
