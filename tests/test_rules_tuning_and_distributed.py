"""TL508 (anomaly detection left on) and TL602 (`nn.DataParallel` in training) in the shapes real training
code takes: a module-level script, `main()` with argparse, a trainer class, the loop in another file, the
multi-GPU `if`, evaluation-only scripts and debug flags that must stay silent."""

from __future__ import annotations

import textwrap

from support import codes_and_lines, fix, said, settings

from torchlint.linter import Linter

LOOP = """
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, targets in loader:
        loss = criterion(model(inputs.cuda()), targets.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def _found(source: str, select: str) -> list[tuple[str, int]]:
    return codes_and_lines(textwrap.dedent(source), select=(select,))


# -- TL508 ----------------------------------------------------------------------------------------------------


def test_a_module_level_script_that_switches_anomaly_detection_on_is_flagged():
    source = (
        "import torch\n\ntorch.autograd.set_detect_anomaly(True)\nmodel = Net().cuda()\n"
        + textwrap.dedent(LOOP)
    )
    assert _found(source, "TL508") == [("TL508", 3)]


def test_a_module_that_never_switches_anomaly_detection_on_never_asks_whether_it_trains(monkeypatch):
    """Whether a module trains is a cross-file question (the modules its calls reach): TL508 asks it only
    of a module with a `detect_anomaly` call (each of timm's model files asked it, building what they call)."""
    from functools import cached_property

    from torchlint.facts.torch.models import ModelAnalysis

    asked: list[str] = []
    original = ModelAnalysis.trains.func

    def trains(self) -> bool:
        asked.append(self.source.path)
        return original(self)

    from support import facts_of

    from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis

    recording = cached_property(trains)
    recording.__set_name__(ModelAnalysis, "trains")
    monkeypatch.setattr(ModelAnalysis, "trains", recording)
    plain = facts_of("import torch\n\nmodel = Net().cuda()\n" + textwrap.dedent(LOOP))
    assert plain.source.analysis(DebuggingAnalysis).anomaly_modes == []
    assert asked == []
    source = "import torch\n\ntorch.autograd.set_detect_anomaly(True)\nmodel = Net().cuda()\n"
    switched = facts_of(source + textwrap.dedent(LOOP))
    assert len(switched.source.analysis(DebuggingAnalysis).anomaly_modes) == 1
    assert asked == [switched.source.path]


def test_main_with_argparse_under_the_main_guard_is_flagged_and_the_message_names_the_call():
    source = """\
    import argparse

    import torch
    from torch import autograd


    def main():
        args = argparse.ArgumentParser().parse_args()
        model = Net().cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        for inputs, targets in loader:
            with autograd.detect_anomaly():
                loss = criterion(model(inputs.cuda()), targets.cuda())
                loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        torch.autograd.set_detect_anomaly(mode=True, check_nan=True)
        main()
    """
    found = Linter().check_text("train.py", textwrap.dedent(source), settings(select=("TL508",)))
    assert [(d.location.line, said(d).split(" keeps")[0]) for d in found] == [
        (12, "`with autograd.detect_anomaly()`"),
        (19, "`torch.autograd.set_detect_anomaly(mode=True, check_nan=True)`"),
    ]


def test_a_switch_the_user_controls_is_silent():
    source = """\
    import torch


    def main(args):
        torch.autograd.set_detect_anomaly(args.detect_anomaly)
        if args.debug:
            torch.autograd.set_detect_anomaly(True)
        torch.autograd.set_detect_anomaly(False)
        model = Net().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for inputs, targets in loader:
            loss = criterion(model(inputs.cuda()), targets.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        torch.autograd.set_detect_anomaly(True)  # the same, unconditional: found
    """
    assert _found(source, "TL508") == [("TL508", 16)]


def test_a_module_that_does_not_train_is_silent():
    source = """\
    import torch

    torch.autograd.set_detect_anomaly(True)
    model = Net().cuda().eval()
    with torch.no_grad():
        print(model(batch))
    """
    assert _found(source, "TL508") == []


def test_a_trainer_class_that_enters_anomaly_mode_in_its_step_is_flagged():
    source = """\
    import torch


    class Trainer:
        def __init__(self, model, loader):
            self.model = model.cuda()
            self.loader = loader
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        @torch.autograd.detect_anomaly()
        def step(self, inputs, targets):
            loss = criterion(self.model(inputs), targets)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

        def fit(self):
            for inputs, targets in self.loader:
                self.step(inputs.cuda(), targets.cuda())
    """
    assert _found(source, "TL508") == [("TL508", 10)]


# -- TL602 ----------------------------------------------------------------------------------------------------


def test_the_multi_gpu_if_wraps_the_trained_model_in_data_parallel():
    source = textwrap.dedent(
        """\
        import torch
        import torch.nn as nn

        model = Net().cuda()
        if torch.cuda.device_count() > 1:
            model = nn.DataParallel(model)
        """
    ) + textwrap.dedent(LOOP)
    assert _found(source, "TL602") == [("TL602", 6)]


def test_data_parallel_chained_with_a_placement_in_main_is_flagged():
    source = """\
    import argparse

    import torch
    from torch.nn.parallel import DataParallel


    def main():
        args = argparse.ArgumentParser().parse_args()
        model = DataParallel(build_model(args.arch)).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(args.epochs):
            for inputs, targets in loader:
                loss = criterion(model(inputs.cuda()), targets.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """
    found = Linter().check_text("train.py", textwrap.dedent(source), settings(select=("TL602",)))
    assert [(d.location.line, d.location.column) for d in found] == [(9, 13)]
    assert found[0].message.startswith("`DataParallel` runs `model` in one process with a thread per GPU")
    assert found[0].note == (
        "no automatic fix: DistributedDataParallel needs a process per GPU (`torchrun`), a process group and a "
        "`DistributedSampler`"
    )


def test_the_training_loop_in_another_file_still_makes_the_model_trained(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "engine.py").write_text(
        textwrap.dedent(
            """\
            def train_one_epoch(model, loader, optimizer):
                for inputs, targets in loader:
                    loss = criterion(model(inputs.cuda()), targets.cuda())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """
        )
    )
    main = tmp_path / "main.py"
    main.write_text(
        textwrap.dedent(
            """\
            import torch

            from engine import train_one_epoch

            model = torch.nn.DataParallel(Net()).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(10):
                train_one_epoch(model, loader, optimizer)
            """
        )
    )
    found = Linter().check_text(str(main), main.read_text(), settings(select=("TL602",)))
    assert [(d.code, d.location.line) for d in found] == [("TL602", 5)]


def test_evaluation_only_and_cpu_only_data_parallel_are_silent():
    evaluation = """\
    import torch

    model = torch.nn.DataParallel(create_model(args.model).cuda())
    model.eval()
    with torch.no_grad():
        for inputs, _ in loader:
            predictions.append(model(inputs.cuda()).argmax(-1))
    """
    assert _found(evaluation, "TL602") == []
    cpu_only = """\
    import torch

    model = torch.nn.DataParallel(Net()).to("cpu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, targets in loader:
        loss = criterion(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert _found(cpu_only, "TL602") == []


def test_test_files_get_no_data_parallel_advice():
    source = textwrap.dedent(
        """\
        import torch

        def test_data_parallel_matches_single_gpu():
            model = torch.nn.DataParallel(Net().cuda())
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for inputs, targets in loader:
                loss = criterion(model(inputs.cuda()), targets.cuda())
                loss.backward()
                optimizer.step()
        """
    )
    found = Linter().check_text("tests/test_parallel.py", source, settings(select=("TL602",)))
    assert found == []


# -- TL501 ----------------------------------------------------------------------------------------------------


def test_a_script_reading_the_loss_every_step_is_flagged_but_not_every_n_steps():
    source = """\
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    running = 0.0
    for step, (inputs, targets) in enumerate(loader):
        loss = criterion(model(inputs.to(device)), targets.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        progress.set_description(f"loss {loss:.3f}")
        if step % 100 == 0:
            print(loss.item())
    print(loss.item())
    """
    found = Linter().check_text("train.py", textwrap.dedent(source), settings(select=("TL501",)))
    assert [(d.location.line, d.location.column, d.message) for d in found] == [
        (
            12,
            16,
            "`loss.item()` reads `loss` from the GPU every training step: the CPU waits for the step's GPU work "
            "to finish before it can queue the next one",
        ),
        (
            13,
            30,
            '`f"loss {loss:.3f}"` reads `loss` from the GPU every training step: the CPU waits for the step\'s '
            "GPU work to finish before it can queue the next one",
        ),
    ]
    # the running total is fixable (never read again); the f-string, read every step, is not
    assert (found[0].fix is not None, found[0].note) == (True, None)
    assert found[1].note == (
        "no automatic fix: keep a running total on the device (`total += loss.detach()`) and read it once per "
        "log interval (`if step % log_every == 0:`)"
    )


def test_main_with_meters_reads_what_is_computed_from_the_loss_but_not_a_value_already_read():
    source = """\
    import argparse
    import math
    import sys

    import torch


    def main():
        args = argparse.ArgumentParser().parse_args()
        model = Net().cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        scaler = torch.amp.GradScaler("cuda")
        for epoch in range(args.epochs):
            for inputs, targets in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(inputs.cuda()), targets.cuda())
                loss_value = loss.item()
                if not math.isfinite(loss_value):
                    sys.exit(1)
                loss = loss / args.accumulation
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                reduced = reduce_mean(loss.detach())
                losses.update(reduced.item(), inputs.size(0))
                total = float(loss_value)
                meter.update(loss.detach().cpu().numpy())
    """
    assert _found(source, "TL501") == [("TL501", 17), ("TL501", 25), ("TL501", 27)]


def test_a_trainer_class_and_a_framework_backward_are_read_too():
    source = """\
    import torch
    from accelerate import Accelerator


    class Trainer:
        def __init__(self, model, loader):
            self.accelerator = Accelerator()
            self.model = model.cuda()
            self.loader = loader
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def fit(self):
            for inputs, targets in self.loader:
                self.loss = criterion(self.model(inputs), targets)
                self.accelerator.backward(self.loss)
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.history.append(self.loss.item())
    """
    assert _found(source, "TL501") == [("TL501", 18)]


def test_the_loop_in_a_helper_file_trains_on_the_device_of_the_file_that_builds_its_loader(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    engine = tmp_path / "engine.py"
    engine.write_text(
        textwrap.dedent(
            """\
            def train_one_epoch(model, loader, optimizer, device):
                for inputs, targets in loader:
                    loss = criterion(model(inputs.to(device)), targets.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    print("loss", loss.item())
            """
        )
    )
    (tmp_path / "main.py").write_text(
        textwrap.dedent(
            """\
            import torch
            from torch.utils.data import DataLoader

            from engine import train_one_epoch

            device = torch.device("cuda")
            model = Net().to(device)
            loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(10):
                train_one_epoch(model, loader, optimizer, device)
            """
        )
    )
    found = Linter().check_text(str(engine), engine.read_text(), settings(select=("TL501",)))
    assert [(d.code, d.location.line) for d in found] == [("TL501", 7)]


def test_cpu_and_xla_training_and_evaluation_loops_are_silent():
    cpu = """\
    import torch

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, targets in loader:
        loss = criterion(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
    """
    assert _found(cpu, "TL501") == []
    xla = """\
    import torch
    import torch_xla.core.xla_model as xm

    device = xm.xla_device()
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, targets in loader:
        loss = criterion(model(inputs.to(device)), targets.to(device))
        optimizer.zero_grad()
        loss.backward()
        xm.optimizer_step(optimizer)
        print(loss.item())
    """
    assert _found(xla, "TL501") == []
    evaluation = """\
    import torch

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, targets in loader:
        loss = criterion(model(inputs.cuda()), targets.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        for inputs, targets in val_loader:
            val_loss = criterion(model(inputs.cuda()), targets.cuda())
            total += val_loss.item()
    """
    assert _found(evaluation, "TL501") == []


def test_which_branches_run_every_step_and_which_names_hold_numbers():
    source = """\
    import math

    import torch


    def train(model_engine, loader, accelerator, args):
        model_engine.cuda()
        average = None
        for step, batch in enumerate(loader):
            loss = model_engine(batch)
            model_engine.backward(loss)
            model_engine.step()
            norm = model_engine.get_global_grad_norm()
            print(norm.item())
            lossf = loss.detach()
            lossf = lossf.item()
            print(f"step {step} loss {lossf:.4f}")
            average = loss.item() if average is None else 0.9 * average + 0.1 * loss.item()
            if not math.isfinite(lossf):
                print(f"loss is {loss.item()}")
            if accelerator.is_main_process:
                progress.set_postfix(loss=loss.item())
            if args.log_every and step % args.log_every == 0:
                print(loss.item())
    """
    found = _found(source, "TL501")
    assert found == [("TL501", 16), ("TL501", 22)]


def test_a_loop_that_also_validates_reads_every_training_step_only():
    source = """\
    import torch


    def run_epoch(model, loader, optimizer, phase, writer):
        model.cuda()
        for step, (inputs, targets) in enumerate(loader):
            loss = criterion(model(inputs.cuda()), targets.cuda())
            if phase == "train":
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            else:
                validation.append(loss.item())
            if phase == "train":
                writer.add_scalar("train_loss", loss.item(), step)
            elif phase == "val":
                writer.add_scalar("val_loss", loss.item(), step)
    """
    assert _found(source, "TL501") == [("TL501", 15)]


def test_data_parallel_in_a_trainer_init_counts_and_in_an_evaluation_function_does_not():
    trainer = """\
    import torch


    class Trainer:
        def __init__(self, model, loader):
            self.model = model
            if torch.cuda.is_available():
                self.model = torch.nn.DataParallel(self.model).cuda()
            self.loader = loader

        def train(self):
            model, optimizer = self.model, torch.optim.SGD(self.model.parameters(), lr=0.1)
            for inputs, targets in self.loader:
                loss = criterion(model(inputs.cuda()), targets.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """
    assert _found(trainer, "TL602") == [("TL602", 8)]
    evaluation = """\
    import torch


    def evaluate(model, loader):
        if torch.cuda.device_count() > 1:
            model = torch.nn.DataParallel(model)
        with torch.no_grad():
            return [model(inputs.cuda()) for inputs in loader]


    def train(model, loader):
        model.cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for inputs, targets in loader:
            loss = criterion(model(inputs.cuda()), targets.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return evaluate(model, loader)
    """
    assert _found(evaluation, "TL602") == []


# -- TL507 ----------------------------------------------------------------------------------------------------


def test_tensors_built_on_the_host_every_step_are_created_on_the_device_instead():
    source = textwrap.dedent(
        """\
        import torch


        class GanTrainer:
            def __init__(self, generator, discriminator, loader, device):
                self.device = device
                self.generator = generator.to(device)
                self.discriminator = discriminator.to(device)
                self.loader = loader
                self.optimizer = torch.optim.Adam(self.discriminator.parameters())

            def fit(self):
                for images, labels in self.loader:
                    batch = images.size(0)
                    real = torch.ones(batch, 1).to(self.device)
                    noise = torch.randn(batch, 100).to(self.device, non_blocking=True)
                    targets = torch.tensor(labels).cuda()
                    half = torch.zeros(3).to(torch.float16)
                    made = torch.zeros(batch, device=self.device)
                    loss = criterion(self.discriminator(images.to(self.device)), real)
                    loss = loss + criterion(self.discriminator(self.generator(noise)), made)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()


        trainer = GanTrainer(Generator(), Discriminator(), loader, torch.device("cuda"))
        trainer.fit()
        """
    )
    found = Linter().check_text("train.py", source, settings(select=("TL507",)))
    assert [(d.location.line, d.fix.applicability.value if d.fix else None) for d in found] == [
        (15, "safe"),
        (16, "unsafe"),
        (17, "safe"),
    ]
    fixed = fix(source, select=("TL507",), unsafe=True)
    assert "real = torch.ones(batch, 1, device=self.device)\n" in fixed
    assert "noise = torch.randn(batch, 100, device=self.device)\n" in fixed
    assert 'targets = torch.tensor(labels, device="cuda")\n' in fixed
    assert "half = torch.zeros(3).to(torch.float16)\n" in fixed
    assert fix(fixed, select=("TL507",), unsafe=True) == fixed


def test_a_host_tensor_moved_in_a_cpu_loop_or_before_the_loop_is_silent():
    cpu = """\
    import torch

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, labels in loader:
        real = torch.ones(inputs.size(0)).to(device)
        loss = criterion(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert _found(cpu, "TL507") == []
    before = """\
    import torch

    model = Net().cuda()
    weights = torch.tensor(class_weights).to("cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, labels in loader:
        loss = criterion(model(inputs.cuda()), labels.cuda()) * weights.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert _found(before, "TL507") == []


# -- TL601 ----------------------------------------------------------------------------------------------------

ACCUMULATING = """\
import argparse

import torch
from torch.nn.parallel import DistributedDataParallel


def train(args, model, loader, optimizer, scaler):
    for step, (inputs, targets) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(inputs.cuda()), targets.cuda()) / args.accumulation
        if args.fp16:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if (step + 1) % args.accumulation == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            scheduler.step()


def main():
    args = argparse.ArgumentParser().parse_args()
    model = Net().cuda(args.local_rank)
    if args.local_rank != -1:
        model = DistributedDataParallel(model, device_ids=[args.local_rank])
    optimizer = torch.optim.AdamW(model.parameters())
    for epoch in range(args.epochs):
        train(args, model, loader, optimizer, torch.amp.GradScaler("cuda"))
"""


def test_accumulation_under_ddp_without_no_sync_is_flagged_at_the_first_backward():
    found = Linter().check_text("train.py", ACCUMULATING, settings(select=("TL601",)))
    assert [(d.location.line, d.location.column) for d in found] == [(12, 13)]
    assert found[0].message == (
        "`scaler.scale(loss).backward()` runs on every micro-batch of a `DistributedDataParallel` model while "
        "the optimizer steps only under `if (step + 1) % args.accumulation == 0:`: each backward all-reduces "
        "the gradients across the processes; skip that on the micro-batches that do not step, with "
        "`model.no_sync()`"
    )


def test_a_model_wrapped_only_when_distributed_gets_no_fix():
    [found] = Linter().check_text("train.py", ACCUMULATING, settings(select=("TL601",)))
    assert found.fix is None and "depends on the loop's shape" in (found.note or "")


TRAINER = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, rank, accumulation):
        self.model = DDP(model.cuda(rank), device_ids=[rank])
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.accumulation = accumulation

    def train(self, loader):
        for step, (inputs, targets) in enumerate(loader):
            outputs = self.model(inputs.cuda())
            loss = criterion(outputs, targets.cuda())
            loss.backward()
            if step % self.accumulation == self.accumulation - 1:
                self.optimizer.step()
                self.optimizer.zero_grad()
"""


def test_a_trainer_class_gets_the_no_sync_fix_around_its_forward_and_backward():
    fixed = fix(TRAINER, select=("TL601",))
    assert fixed == "import contextlib\n\n" + TRAINER.replace(
        """            outputs = self.model(inputs.cuda())
            loss = criterion(outputs, targets.cuda())
            loss.backward()
""",
        """            with self.model.no_sync() if step % self.accumulation != self.accumulation - 1 else contextlib.nullcontext():
                outputs = self.model(inputs.cuda())
                loss = criterion(outputs, targets.cuda())
                loss.backward()
""",
    )
    assert _found(fixed, "TL601") == []


def test_a_step_condition_the_body_computes_or_calls_gets_no_fix():
    counted = TRAINER.replace(
        "            loss.backward()\n", "            loss.backward()\n            micro = step + 1\n"
    ).replace("if step % self.accumulation == self.accumulation - 1:", "if micro % self.accumulation == 0:")
    called = TRAINER.replace(
        "if step % self.accumulation == self.accumulation - 1:", "if should_step(step, self.accumulation):"
    )
    for source in (counted, called):
        [found] = Linter().check_text("train.py", source, settings(select=("TL601",)))
        assert found.fix is None


def test_micro_batches_in_an_inner_loop_and_a_wrapper_built_by_a_helper_in_another_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "dist.py").write_text(
        textwrap.dedent(
            """\
            from torch.nn.parallel import DistributedDataParallel as DDP


            def smart_ddp(model, rank):
                return DDP(model, device_ids=[rank])
            """
        )
    )
    train = tmp_path / "train.py"
    train.write_text(
        textwrap.dedent(
            """\
            import torch

            from dist import smart_ddp

            model = smart_ddp(Net().cuda(), 0)
            optimizer = torch.optim.AdamW(model.parameters())
            for step in range(1000):
                for micro_step in range(8):
                    inputs, targets = next(batches)
                    loss = criterion(model(inputs), targets) / 8
                    loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """
        )
    )
    found = Linter().check_text(str(train), train.read_text(), settings(select=("TL601",)))
    assert [(d.code, d.location.line, d.message.split(": each")[0][-33:]) for d in found] == [
        ("TL601", 11, "after the loop over micro-batches")
    ]


def test_no_sync_a_framework_or_a_step_every_iteration_is_silent():
    with_no_sync = ACCUMULATING.replace(
        "        if args.fp16:\n", "        context = model.no_sync()\n        if args.fp16:\n"
    )
    assert _found(with_no_sync, "TL601") == []
    every_step = ACCUMULATING.replace("if (step + 1) % args.accumulation == 0:", "if args.fp16 or True:")
    assert _found(every_step, "TL601") == []
    no_ddp = ACCUMULATING.replace(
        "model = DistributedDataParallel(model, device_ids=[args.local_rank])", "pass"
    )
    assert _found(no_ddp, "TL601") == []


# -- TL506 ----------------------------------------------------------------------------------------------------


def test_a_grad_scaler_stepped_but_never_or_rarely_updated():
    source = """\
    import torch


    class Trainer:
        def __init__(self, model):
            self.model = model.cuda()
            self.optimizer = torch.optim.AdamW(self.model.parameters())
            self.grad_scaler = torch.amp.GradScaler("cuda")

        def fit(self, loader):
            for step, (inputs, targets) in enumerate(loader):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(self.model(inputs.cuda()), targets.cuda())
                self.optimizer.zero_grad()
                self.grad_scaler.scale(loss).backward()
                self.grad_scaler.step(self.optimizer)
                if step % 100 == 0:
                    self.grad_scaler.update()
    """
    found = Linter().check_text("train.py", textwrap.dedent(source), settings(select=("TL506",)))
    assert [(d.location.line, d.message) for d in found] == [
        (
            16,
            "`self.grad_scaler.step(...)` runs every iteration but `self.grad_scaler.update()` runs only on "
            "some iterations (line 18): the loss scale never adapts, so every overflow skips its step again "
            "at the same scale",
        )
    ]


def test_a_scaler_updated_every_step_under_the_steps_condition_or_by_a_helper_is_silent():
    accumulation = """\
    import torch

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for step, (inputs, targets) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(inputs.cuda()), targets.cuda()) / 4
        scaler.scale(loss).backward()
        if (step + 1) % 4 == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    """
    assert _found(accumulation, "TL506") == []
    helper = """\
    import torch

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for inputs, targets in loader:
        loss = criterion(model(inputs.cuda()), targets.cuda())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        finish_step(scaler, optimizer)
    """
    assert _found(helper, "TL506") == []


# -- TL502 ----------------------------------------------------------------------------------------------------

EVALUATING = """\
import torch


def validate(model, loader):
    model.eval()
    total = 0.0
    for inputs, targets in loader:
        total += criterion(model(inputs.cuda()), targets.cuda()).item()
    model.train()
    return total


def main():
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        for inputs, targets in loader:
            loss = criterion(model(inputs.cuda()), targets.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(validate(model, val_loader))
"""


def test_a_validation_loop_with_gradients_on_is_flagged_and_runs_under_no_grad_once_fixed():
    assert _found(EVALUATING, "TL502") == [("TL502", 8)]
    fixed = fix(EVALUATING, select=("TL502",), unsafe=True)
    assert fixed == EVALUATING.replace(
        "    for inputs, targets in loader:\n        total += ",
        "    with torch.no_grad():\n        for inputs, targets in loader:\n            total += ",
    )
    assert _found(fixed, "TL502") == []


def test_gradients_off_by_decorator_caller_or_a_star_imported_no_grad_are_silent(tmp_path):
    decorated = EVALUATING.replace("def validate(", "@torch.inference_mode()\ndef validate(")
    assert _found(decorated, "TL502") == []
    called_without = EVALUATING.replace(
        "        print(validate(model, val_loader))",
        "        with torch.no_grad():\n            print(validate(model, val_loader))",
    )
    assert _found(called_without, "TL502") == []
    star = EVALUATING.replace("import torch\n", "from utils import *\n").replace(
        "    for inputs, targets in loader:\n        total += ",
        "    with torch.no_grad():\n        for inputs, targets in loader:\n            total += ",
    )
    assert _found(star, "TL502") == []
    differentiating = EVALUATING.replace("model.train()", "torch.autograd.grad(total, inputs)")
    assert _found(differentiating, "TL502") == []


def test_an_evaluation_in_another_file_called_under_no_grad_is_silent(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    engine = tmp_path / "engine.py"
    engine.write_text(
        textwrap.dedent(
            """\
            def evaluate(model, loader):
                model.eval()
                return sum(model(inputs).sum().item() for inputs in loader) + [model(x) for x in loader][0].sum()


            def evaluate_loop(model, loader):
                model.eval()
                for inputs in loader:
                    print(model(inputs))
            """
        )
    )
    (tmp_path / "main.py").write_text(
        textwrap.dedent(
            """\
            import torch

            from engine import evaluate_loop

            model = Net().cuda()
            with torch.no_grad():
                evaluate_loop(model, loader)
            """
        )
    )
    found = Linter().check_text(str(engine), engine.read_text(), settings(select=("TL502",)))
    assert found == []


# -- TL503 ----------------------------------------------------------------------------------------------------

CHECKPOINTING = """\
import argparse

import torch


def main():
    args = argparse.ArgumentParser().parse_args()
    model = torch.compile(Net().cuda())
    if args.resume:
        checkpoint = torch.load(args.resume)
        model.load_state_dict(checkpoint["model"])
    optimizer = torch.optim.AdamW(model.parameters())
    for step, (inputs, targets) in enumerate(loader):
        loss = criterion(model(inputs.cuda()), targets.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save(state, "checkpoint.pt")
    best = model.state_dict()
    model.load_state_dict(best)
"""


def test_a_compiled_wrappers_checkpoint_saved_or_loaded_by_name_is_flagged():
    found = Linter().check_text("train.py", CHECKPOINTING, settings(select=("TL503",)))
    assert [(d.location.line, d.message.split(" uses")[0]) for d in found] == [
        (11, "`model.load_state_dict(...)`"),
        (18, "`model.state_dict(...)`"),
    ]
    assert found[0].note == (
        "no automatic fix: compile in place (`model.compile()` keeps the keys), or save and load "
        "`model._orig_mod`'s state dict"
    )


def test_a_module_that_handles_the_prefix_or_compiles_in_place_is_silent():
    unwrapped = CHECKPOINTING.replace(
        '"model": model.state_dict()', '"model": getattr(model, "_orig_mod", model).state_dict()'
    )
    assert _found(unwrapped, "TL503") == []
    in_place = CHECKPOINTING.replace(
        "    model = torch.compile(Net().cuda())\n", "    model = Net().cuda()\n    model.compile()\n"
    )
    assert _found(in_place, "TL503") == []


# -- TL501's fix: running totals on the device ---------------------------------------------------------------

RUNNING = """\
import torch


def train(model, loader, optimizer, criterion):
    device = torch.device("cuda")
    running_loss = 0.0
    epoch_loss = 0
    for i, (inputs, labels) in enumerate(loader):
        loss = criterion(model(inputs.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
        epoch_loss += loss.item() * inputs.size(0)
        if i % 2000 == 1999:
            print(f"[{i + 1:5d}] loss: {running_loss / 2000:.3f}")
            running_loss = 0.0
    return epoch_loss / len(loader.dataset)
"""


def test_a_running_total_moves_to_the_device_and_is_read_as_a_float_where_it_was_read():
    fixed = fix(RUNNING, select=("TL501",))
    assert fixed == (
        RUNNING.replace("running_loss += loss.item()", "running_loss += loss.detach().float()")
        .replace("loss.item() * inputs.size(0)", "loss.detach().float() * inputs.size(0)")
        .replace("{running_loss / 2000:.3f}", "{float(running_loss) / 2000:.3f}")
        .replace("return epoch_loss /", "return float(epoch_loss) /")
    )
    assert _found(fixed, "TL501") == []
    assert fix(fixed, select=("TL501",)) == fixed


def test_a_total_read_every_step_used_as_a_tensor_or_bound_to_a_value_gets_no_fix():
    every_step = RUNNING.replace(
        "        if i % 2000 == 1999:\n",
        "        progress.set_postfix(loss=running_loss / (i + 1))\n        if i % 2000 == 1999:\n",
    )
    as_object = RUNNING.replace(
        "running_loss = 0.0\n    return", "running_loss = 0.0\n    print(epoch_loss.real)\n    return"
    )
    from_value = RUNNING.replace("    epoch_loss = 0\n", "    epoch_loss = start\n")
    nested = RUNNING.replace(
        "    return epoch_loss", "    report = lambda: epoch_loss\n    return epoch_loss"
    )
    # line 13 sums `running_loss`, line 14 `epoch_loss`: the total read wrongly keeps its finding, unfixed
    for source, fixable in ((every_step, 14), (as_object, 13), (from_value, 13), (nested, 13)):
        found = Linter().check_text("train.py", source, settings(select=("TL501",)))
        assert [(d.location.line, d.fix is not None) for d in found] == [
            (13, fixable == 13),
            (14, fixable == 14),
        ], source


def test_the_no_sync_and_autocast_fixes_wrap_the_same_lines_one_pass_after_the_other():
    """Both fixes re-indent the forward pass: each claims every line it re-indents, so the fixer applies
    one, checks again and applies the other, instead of merging two edits into code that does not parse."""
    source = """\
import torch
from torch.nn.parallel import DistributedDataParallel

model = DistributedDataParallel(Net().cuda(rank), device_ids=[rank])
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
for step, (inputs, targets) in enumerate(loader):
    loss = criterion(model(inputs.cuda(rank)), targets.cuda(rank)) / accumulation
    loss.backward()
    if (step + 1) % accumulation == 0:
        optimizer.step()
"""
    assert fix(source, select=("TL301", "TL601")) == (
        "import contextlib\n\n"
        + source.replace(
            "    loss = criterion(model(inputs.cuda(rank)), targets.cuda(rank)) / accumulation\n"
            "    loss.backward()\n",
            "    with model.no_sync() if (step + 1) % accumulation != 0 else contextlib.nullcontext():\n"
            '        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):\n'
            "            loss = criterion(model(inputs.cuda(rank)), targets.cuda(rank)) / accumulation\n"
            "        loss.backward()\n",
        )
    )


def test_a_test_on_the_loss_every_step_is_a_read_but_not_one_on_what_the_tensor_is():
    source = """\
    import math

    import torch


    def train(model, loader, optimizer, criterion, best):
        device = torch.device("cuda")
        for step, (inputs, labels) in enumerate(loader):
            loss = criterion(model(inputs.to(device)), labels.to(device))
            if torch.isnan(loss).any():
                continue
            if loss is None or loss.requires_grad is False or isinstance(loss, float):
                continue
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            while loss > 10:
                loss = loss / 2
            value = loss.item()
            if not math.isfinite(value):
                break
            if step % 100 == 0:
                if loss < best:
                    best = loss
            elif loss > 10:
                print("large")
    """
    found = Linter().check_text("train.py", textwrap.dedent(source), settings(select=("TL501",)))
    assert [(d.location.line, said(d).split(" reads")[0]) for d in found] == [
        (10, "`if torch.isnan(loss).any():`"),
        (17, "`while loss > 10:`"),
        (19, "`loss.item()`"),
    ]


RUNNER = """\
import torch
import torch.nn as nn


class Runner:
    def __init__(self, device):
        self.device = device

    def train(self, loader):
        model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU(), nn.Conv2d(64, 3, 3)).to(self.device)
        optimizer = torch.optim.Adam(model.parameters(), fused=True)
        for x, _ in loader:
            loss = (model(x.to(self.device)) - 1).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def sample(self, ckpt):
        model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU(), nn.Conv2d(64, 3, 3)).to(self.device)
        model = torch.nn.DataParallel(model)
        model.load_state_dict(torch.load(ckpt))
        model.eval()
        with torch.no_grad():
            return model(torch.randn(64, 3, 32, 32, device=self.device))
"""


def test_data_parallel_local_to_a_sampling_method_of_a_trainer_class_is_silent():
    """ermongroup/ddim: `Diffusion.sample()` wraps a fresh model it loads and runs under `no_grad`; the
    class's `train()` trains another. A method that keeps the wrapped model on the object, or returns it
    (the vendored Hugging Face Trainer's `_wrap_model`), still wraps what training uses."""
    assert _found(RUNNER, "TL602") == []
    kept = RUNNER.replace(
        "        model = torch.nn.DataParallel(model)\n",
        "        self.model = torch.nn.DataParallel(model)\n",
    )
    assert _found(kept, "TL602") == [("TL602", 20)]
    returned = RUNNER.replace(
        "        model.load_state_dict(torch.load(ckpt))\n        model.eval()\n        with torch.no_grad():\n"
        "            return model(torch.randn(64, 3, 32, 32, device=self.device))\n",
        "        return model\n",
    )
    assert _found(returned, "TL602") == [("TL602", 20)]
