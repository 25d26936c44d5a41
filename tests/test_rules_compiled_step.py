"""TL107: a compiled optimizer step whose float learning rate a scheduler changes, reported for a project on
a torch older than 2.6 (where Dynamo specialised floats and recompiled at every change), in the shapes the
recipe and real code take: a decorated step function, `torch.compile(optimizer.step)`, a trainer class, and
the cases that stay silent (a tensor learning rate, no scheduler, the current torch)."""

from __future__ import annotations

import textwrap

from support import codes_and_lines, lint

OLD_TORCH = {"torch_version": (2, 5)}

DECORATED = """\
import torch

model = torch.nn.Linear(1024, 1024).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=5)


@torch.compile(fullgraph=False)
def opt_step():
    optimizer.step()


for epoch in range(5):
    model(torch.randn(4, 1024).cuda()).sum().backward()
    opt_step()
    optimizer.zero_grad()
    scheduler.step()
"""


def _found(source: str, **changes) -> list[tuple[str, int]]:
    return codes_and_lines(textwrap.dedent(source), select=("TL107",), **changes)


def test_a_decorated_step_function_with_a_scheduled_float_lr_is_flagged_on_an_old_torch():
    found = lint(DECORATED, select=("TL107",), **OLD_TORCH)
    assert [(d.code, d.location.line, d.location.column) for d in found] == [("TL107", 8, 2)]
    assert found[0].message == (
        "`optimizer.step` is compiled while `torch.optim.lr_scheduler.LinearLR` changes its learning rate, a "
        "Python float: before torch 2.6 Dynamo guards on its value and recompiles the step at every change, "
        "until the recompile limit, and then runs it uncompiled"
    )
    assert "`lr=torch.tensor(0.01)`" in found[0].note


def test_silent_on_torch_2_6_and_later_and_when_no_version_is_declared():
    assert _found(DECORATED, torch_version=(2, 6)) == []
    assert _found(DECORATED) == []


def test_a_tensor_learning_rate_or_no_scheduler_is_silent():
    tensor = DECORATED.replace("lr=0.01", "lr=torch.tensor(0.01)")
    assert _found(tensor, **OLD_TORCH) == []
    named = DECORATED.replace("optimizer = torch", "lr = torch.tensor(0.01)\noptimizer = torch").replace(
        "lr=0.01", "lr=lr"
    )
    assert _found(named, **OLD_TORCH) == []
    unscheduled = DECORATED.replace(
        "scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=5)\n", ""
    )
    assert _found(unscheduled.replace("    scheduler.step()\n", ""), **OLD_TORCH) == []


def test_a_compiled_bound_step_and_the_default_learning_rate_are_flagged():
    source = """\
    import torch
    from transformers import get_cosine_schedule_with_warmup


    def main(args, loader):
        model = build(args).cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        scheduler = get_cosine_schedule_with_warmup(optimizer, 100, 1000)
        step = torch.compile(optimizer.step)
        for batch in loader:
            model(batch).loss.backward()
            step()
            scheduler.step()
    """
    assert _found(source, **OLD_TORCH) == [("TL107", 9)]


def test_a_trainer_class_compiling_its_optimizers_step_is_flagged():
    source = """\
    import torch


    class Trainer:
        def __init__(self, model, lr):
            self.model = model
            self.optimizer = torch.optim.SGD(model.parameters(), lr, momentum=0.9)
            self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=30)

        @torch.compile
        def step(self):
            self.optimizer.step()
            self.optimizer.zero_grad()

        def fit(self, loader):
            for batch in loader:
                self.model(batch).mean().backward()
                self.step()
            self.scheduler.step()
    """
    assert _found(source, **OLD_TORCH) == [("TL107", 10)]
    assert _found(source.replace("@torch.compile\n", ""), **OLD_TORCH) == []
