"""`torchlint debug facts FILE`, the shared part: what every family builds on (the device, the training
loops and what they move, the loaders and where they feed training). Each family adds its own section
(`torchlint/rules/<family>/describe.py`); `torchlint.rules.debug` puts them together."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    out: list[str] = [f"{facts.path}"]
    line = facts.line_of
    device = facts.device
    where = f" (line {line(device.node)}: {device.reason})" if device.node is not None else ""
    out.append(f"device: {device.device.label}{where}")
    out.append(f"__main__ guard: {'yes' if facts.has_main_guard else 'no'}")
    if facts.frameworks:
        out.append(f"frameworks: {', '.join(sorted(facts.frameworks))}")
    training = facts.training
    out.append("training loops:")
    for loop in training.training_loops:
        function = loop.function.name if loop.function else "<module>"
        epoch = ", inside an epoch loop" if loop.parent is not None else ""
        out.append(f"  line {line(loop.node)} in {function}{epoch}")
        for move in facts.batch_moves(loop):
            blocking = move.non_blocking.describe() if move.non_blocking else "not passed"
            out.append(
                f"    line {line(move.call)}: batch moved to {move.device.label}, non_blocking {blocking}"
            )
    if not training.training_loops:
        out.append("  (none)")
    out.append("loaders:")
    for loader in facts.loaders:
        out.append(
            f"  line {line(loader.call)}: {loader.cls}{'' if loader.complete else ' (options incomplete)'}"
        )
        for name, option in sorted(loader.options.items()):
            out.append(f"    {name} = {option.describe()}")
        uses = training.loader_uses(loader)
        for use in uses:
            per_epoch = "every epoch" if use.per_epoch else "once"
            out.append(f"    feeds training via {use.how} in {use.path}, iterated {per_epoch}")
        if not uses:
            out.append("    feeds no training loop")
    if not facts.loaders:
        out.append("  (none)")
    for arguments in facts.hf_training_arguments:
        out.append(f"TrainingArguments at line {line(arguments.call)}:")
        for name, option in sorted(arguments.options.items()):
            if name.startswith("dataloader_"):
                out.append(f"    {name} = {option.describe()}")
    return out
