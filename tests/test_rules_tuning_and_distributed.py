"""TL508 (anomaly detection left on) and TL602 (`nn.DataParallel` in training) in the shapes real training
code takes: a module-level script, `main()` with argparse, a trainer class, the loop in another file, the
multi-GPU `if`, evaluation-only scripts and debug flags that must stay silent."""

from __future__ import annotations

import textwrap

from support import codes_and_lines, said, settings

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
    assert said(found[0]).startswith("`DataParallel` trains `model` in one process with a thread per GPU")
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
