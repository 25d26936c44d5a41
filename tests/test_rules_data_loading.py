"""TL201-TL205 beyond what a rule doc can show: the device setting, messages, projects, Hugging Face options.

The single-rule cases (where a rule fires, where it stays silent, the fixed text) are blocks of rules/TL2xx.md,
checked by test_rule_docs.py.
"""

from __future__ import annotations

import textwrap

from support import codes_and_lines, fix, lint, project_facts, said

from torchlint.linter import Linter

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


# -- TL201 ----------------------------------------------------------------------------------------------


def test_an_unknown_device_is_judged_by_the_device_setting():
    unknown = "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n" + train_loop()
    assert codes_and_lines(unknown, select=("TL201",)) == []
    assert codes_and_lines(unknown, select=("TL201",), device="cuda") == [("TL201", 2)]


def test_workers_restarted_each_epoch_on_a_torch_before_persistent_workers():
    per_epoch = HEAD + "loader = DataLoader(ds, num_workers=4, pin_memory=True)\n" + train_loop()
    [found] = lint(per_epoch, select=("TL203",))
    assert found.fix is not None
    [old] = lint(per_epoch, select=("TL203",), torch_version=(1, 6))  # 1.7 brought the option
    assert old.fix is None and "`persistent_workers=` needs torch 1.7" in said(old)


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
        in said(lam[0])
    )
    local = lint(
        HEAD
        + "def main():\n    def _collate_fn(b):\n        return b\n\n"
        + "    loader = DataLoader(ds, collate_fn=_collate_fn)\n"
        + textwrap.indent(train_loop(), "    ")
        + 'if __name__ == "__main__":\n    main()\n',
        select=("TL201",),
    )
    assert "`collate_fn` is `_collate_fn`, a function defined inside a function, which" in said(local[0])
    guardless = lint(HEAD + "loader = DataLoader(ds)\n" + train_loop(), select=("TL201",))
    assert guardless[0].fix is None and "no `if __name__" in said(guardless[0])


# -- TL203 ----------------------------------------------------------------------------------------------


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
