"""`debug facts`, the checkpointing family's section: stacks of repeated blocks, where forward applies
them, who trains them and whether they are checkpointed; and what says the author decided."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.rules.checkpointing.analysis import CheckpointAnalysis
from torchlint.rules.checkpointing.structure import StructureAnalysis

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    out: list[str] = []
    line = facts.line_of
    checkpointing = facts.analysis(CheckpointAnalysis)
    stacks = facts.analysis(StructureAnalysis).stacks
    out.append("stacks:")
    for stack in stacks:
        block = f"`{stack.block}`" if stack.block else "clones"
        depth = stack.depth
        count = str(depth.value) if depth.value is not None and not depth.configurable else depth.how
        out.append(
            f"  line {line(stack.node)}: `{stack.cls.name}.{stack.attribute}` {stack.container} of {block} "
            f"x {count}, built by {stack.how} in `{stack.method.name}`"
        )
        for application in stack.applications:
            shape = (
                f"`{facts.code(application.statement).strip()}`" if application.statement else "not fixable"
            )
            out.append(f"    line {line(application.node)}: applied by {application.how} ({shape})")
        if not stack.applications:
            out.append("    not applied by forward")
        trainers, checkpointed = checkpointing.stack_status(stack)
        trained = f"trained in {', '.join(trainers)}" if trainers is not None else "not known to be trained"
        out.append(f"    {trained}; checkpointed: {checkpointed or 'no'}")
    if not stacks:
        out.append("  (none)")
    evidence = checkpointing.evidence
    if evidence:
        out.append("checkpointing:")
        for node, what in evidence:
            out.append(f"  line {line(node)}: {what}")
    return out
