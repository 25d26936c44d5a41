"""`debug facts`, the compile family's section: the trained models with what is done to each and whether
they are compiled, every compile site, and this module's functions that run compiled with the likely graph
breaks in them (TL106), and compiled optimizer steps whose float learning rate a scheduler changes (TL107)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.rules.compile.graph_breaks import GraphBreakAnalysis
from torchlint.rules.compile.questions import CompileQuestions
from torchlint.rules.compile.recompiles import RecompileAnalysis

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    out: list[str] = []
    line = facts.line_of
    models = facts.models
    questions = facts.analysis(CompileQuestions)
    out.append("trained models:")
    for model in models.trained:
        out.append(f"  `{model.text}` trained by {model.how} (line {line(model.trained_at)})")
        for event in sorted(model.events, key=lambda event: event.rank):
            text = facts.code(event.node).splitlines()[0]
            flags = "".join(
                (", conditional" if event.conditional else "", ", in a loop" if event.in_loop else "")
            )
            out.append(f"    line {line(event.node)}: {event.kind} `{text}`{flags}")
        compiled = "yes" if questions.compiled_somewhere(model) else "no"
        kind = ", an nn.Sequential" if questions.is_sequential(model.expr, model.scope) else ""
        if questions.surely_not_a_module(model):
            kind += ", not a Module (a project class holding one)"
        out.append(f"    compiled: {compiled}; device: {models.device(model).label}{kind}")
        bypassed = questions.not_trained_through_forward(model)
        if bypassed:
            out.append(f"    not trained through its forward (no in-place compile): {bypassed}")
        if questions.trained_over_rpc(model):
            out.append("    trained over RPC (`DistributedOptimizer`): not flagged")
    if not models.trained:
        out.append("  (none)")
    if questions.torch_before_compile:
        out.append(f"  (needs a torch without torch.compile: imports `{questions.torch_before_compile}`)")
    out.append("compile sites:")
    for site in models.compile_sites:
        every = ", every training step" if questions.runs_every_step(site) else ""
        what = f" of `{facts.code(site.compiled)}`" if site.compiled is not None else ""
        out.append(f"  line {line(site.node)}: {site.how}{what}{every}")
    if not models.compile_sites:
        out.append("  (none)")
    for step in facts.analysis(RecompileAnalysis).recompiling_steps:
        out.append(
            f"  line {line(step.site)}: compiles `{step.optimizer}.step`, whose float lr `{step.scheduler}` "
            "changes (TL107, before torch 2.6)"
        )
    out.extend(_compiled_code(facts))
    return out


def _compiled_code(facts: ModuleFacts) -> list[str]:
    """The functions here that run compiled (how they are reached), and the likely graph breaks in them;
    nothing when none does (only functions holding a call a break may be made of are looked for)."""
    analysis = facts.analysis(GraphBreakAnalysis)
    if not analysis.compiled_bodies:
        return []
    out = ["compiled code here (likely graph breaks, TL106):"]
    breaks = analysis.likely_breaks
    for body in analysis.compiled_bodies:
        out.append(f"  line {facts.line_of(body.function.node.name)}: {body.where}")
        for found in breaks:
            if found.where == body.where:
                out.append(f"    line {facts.line_of(found.node)}: {found.kind} {found.construct}")
    return out
