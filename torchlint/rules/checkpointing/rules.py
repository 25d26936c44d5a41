"""Activation checkpointing (TL4xx): where a trained model could trade compute for activation memory, and
`torch.utils.checkpoint` called without choosing its variant.

Checked on torch 2.13 (see rules/TL401.md, rules/TL402.md):
- `checkpoint(blk, x, *rest, use_reentrant=False)` recomputes a block's activations during backward instead
  of keeping them: for a stack of N identical blocks, activation memory falls roughly from N blocks' worth
  to one block's plus the N inputs, for about one extra forward. Off the training path (`model.eval()`,
  `torch.no_grad()`) it would only cost, so the fix guards it with `self.training and
  torch.is_grad_enabled()`; an `nn.Sequential` called whole gets `checkpoint_sequential`.
- `checkpoint` and `checkpoint_sequential` without `use_reentrant` warn on every call ("the use_reentrant
  parameter should be passed explicitly"); PyTorch recommends `use_reentrant=False`.
TL401 is a trade-off (memory for compute), reported with the "info" severity and easy to turn off
(`ignore = ["TL401"]`, or the `min-depth` option).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic, Severity
from torchlint.fix import build
from torchlint.fix.model import Applicability, Fix
from torchlint.rules.base import FixAvailability, Rule, no_fix

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts
    from torchlint.rules.checkpointing.analysis import CheckpointAnalysis
    from torchlint.rules.checkpointing.structure import Application, Stack


def _checkpointing(facts: ModuleFacts) -> CheckpointAnalysis:
    from torchlint.rules.checkpointing.analysis import CheckpointAnalysis

    return facts.analysis(CheckpointAnalysis)


# `checkpoint`'s own keyword parameters: a block call passing one of them cannot be forwarded through it.
_CHECKPOINT_KEYWORDS = {
    "use_reentrant", "context_fn", "determinism_check", "debug", "early_stop", "preserve_rng_state",
}  # fmt: skip
_GUARD = "{owner}.training and {torch}.is_grad_enabled()"


class CheckpointingOpportunity(Rule):
    """A trained model class applies a deep stack of repeated blocks without activation checkpointing."""

    code = "TL401"
    name = "checkpointing-opportunity"
    speed_advice = True
    severity = Severity.INFO
    fix_availability = FixAvailability.SOMETIMES
    options = {"min-depth": (int, 4), "library-models": (bool, True)}
    # A stack is an `nn.ModuleList` / `nn.Sequential`, or built by a clone helper (`_get_clones`); a library
    # model is built by `from_pretrained` / `create_model`, or trained by a `TrainingArguments`' Trainer.
    needs_text = (
        "ModuleList",
        "Sequential",
        "clones",
        "from_pretrained",
        "create_model",
        "TrainingArguments",
        "SFTConfig",
    )
    messages = {
        "stack": (
            "`{cls}.{attribute}` holds {blocks} ({count}) that {applied_by} applies one after another (line "
            "{line}), in a trained model{trained_in} with no activation checkpointing: checkpointing each "
            "block keeps about one block's activations instead of all of them, for about one extra forward "
            "pass (a trade-off, not a defect)"
        ),
        "trainer": (
            "`{arguments}(...)` trains without `gradient_checkpointing=True`: the Trainer keeps every "
            "layer's activations; checkpointing trades about one extra forward pass for most of that memory "
            "(a trade-off, not a defect)"
        ),
        "library-model": (
            "`{model}` is a trained {library} model, a stack of repeated blocks, with no activation "
            "checkpointing: its own switch `{switch}` trades about one extra forward pass for most of the "
            "activation memory (a trade-off, not a defect)"
        ),
    }
    fix_titles = {
        "checkpoint-sequential": "Checkpoint `{attribute}` with `checkpoint_sequential` while training",
        "checkpoint-each": "Checkpoint each block of `{attribute}` while training",
        "trainer-switch": "Set `gradient_checkpointing=True`",
        "library-switch": "Turn on the model's gradient checkpointing",
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        min_depth = self.option_values["min-depth"]
        for stack, trainers in _checkpointing(facts).opportunities(min_depth):
            first = stack.applications[0]
            block = f"`{stack.block}` blocks" if stack.block else "cloned blocks"
            depth = stack.depth
            count = f"{depth.value}" if not depth.configurable and depth.value is not None else depth.how
            by = f" (trained in {trainers[0]})" if trainers else ""
            reason, fix = self._fix(facts, stack)
            yield self.report(
                facts,
                stack.node,
                "stack",
                fix=fix,
                note=no_fix(reason),
                cls=stack.cls.name,
                attribute=stack.attribute,
                blocks=block,
                count=count,
                applied_by=first.how,
                line=facts.line_of(first.node),
                trained_in=by,
            )
        if self.option_values["library-models"]:
            yield from self._library_models(facts)

    def _library_models(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        """Models from a library with its own switch: turn it on instead of editing library code."""
        kwargs = '{"use_reentrant": False}'
        for found in _checkpointing(facts).library_models:
            if found.library == "trainer":
                edit = build.add_keyword(facts.source, found.node, "gradient_checkpointing", "True")
                fix = self.fix("trainer-switch", Applicability.UNSAFE, (edit,))
                yield self.report(facts, found.callee, "trainer", fix=fix, arguments=facts.code(found.callee))
                continue
            if found.library == "transformers":
                switch = (
                    f"{found.model}.gradient_checkpointing_enable(gradient_checkpointing_kwargs={kwargs})"
                )
            else:
                switch = f"{found.model}.set_grad_checkpointing()"
            library = "Hugging Face" if found.library == "transformers" else "timm"
            edit = build.statement_after(facts.source, found.statement, switch) if found.statement else None
            fix = self.fix("library-switch", Applicability.UNSAFE, (edit,))
            yield self.report(
                facts, found.node, "library-model", fix=fix, model=found.model, library=library, switch=switch
            )

    def _fix(self, facts: ModuleFacts, stack: Stack) -> tuple[str, Fix | None]:
        edits = []
        imports = []
        for application in stack.applications:
            reason, edit, needed = self._application_edit(facts, application)
            if edit is None:
                return reason, None
            edits.append(edit)
            imports.extend(i for i in needed if i not in imports)
        title = "checkpoint-sequential" if stack.applications[0].whole else "checkpoint-each"
        return "", self.fix(title, Applicability.UNSAFE, edits, imports, attribute=stack.attribute)

    def _application_edit(self, facts: ModuleFacts, application: Application):
        if application.inline:
            return "the block call does not stand on a line of its own", None, ()
        if application.statement is None or application.call is None:
            return "the blocks' results are not assigned back to their input (`x = blk(x, ...)`)", None, ()
        keywords = application.keywords
        if "**" in keywords or _CHECKPOINT_KEYWORDS & set(keywords):
            return "the block call passes keywords that `checkpoint` would take as its own", None, ()
        scope = application.scope
        torch = build.name_module(facts.source, "torch", scope)
        function = "checkpoint_sequential" if application.whole or application.stages else "checkpoint"
        named = build.name_from_module(facts.source, "torch.utils.checkpoint", function, scope)
        if torch is None or named is None:
            meaning = f"torch.utils.checkpoint.{function}"
            clash = facts.name_clash(function, scope, meaning) if named is None else ""
            return clash or f"the name `torch` or `{function}` means something else here", None, ()
        torch_name, torch_imports = torch
        callee, callee_imports = named
        arguments = facts.code_of_arguments(application.call)
        carried = application.carried
        if application.whole:
            if len(arguments) != 1 or keywords:
                return "the `nn.Sequential` is called with more than one input", None, ()
            inner = f"{application.block}, len({application.block}), {arguments[0]}, use_reentrant=False"
        elif application.stages:
            if len(arguments) != 1 or keywords:
                return "a stage is called with more than one input", None, ()
            inner = f"{application.block}, len({application.block}), {arguments[0]}, use_reentrant=False"
        else:
            inner = ", ".join([application.block, *arguments, "use_reentrant=False"])
        code = f"{carried} = {callee}({inner})"
        condition = _GUARD.format(owner=application.owner, torch=torch_name)
        try:
            edit = build.guard_statement(facts.source, application.statement, condition, code)
        except build.EditError:
            edit = None
        if edit is None:
            return "the block call does not stand on a line of its own", None, ()
        return "", edit, (*torch_imports, *callee_imports)


class CheckpointWithoutUseReentrant(Rule):
    """`checkpoint(...)` / `checkpoint_sequential(...)` without an explicit `use_reentrant`, and Hugging
    Face's checkpointing switched on without `gradient_checkpointing_kwargs` (it defaults to reentrant)."""

    code = "TL402"
    name = "checkpoint-without-use-reentrant"
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("checkpoint",)
    messages = {
        "checkpoint": (
            '`{callee}(...)` without an explicit `use_reentrant`: torch warns on every call ("the '
            'use_reentrant parameter should be passed explicitly") and recommends `use_reentrant=False`'
        ),
        "hugging-face": (
            "{switch} without `gradient_checkpointing_kwargs`: Hugging Face then checkpoints with "
            '`use_reentrant=True`; pass `gradient_checkpointing_kwargs={{"use_reentrant": False}}`'
        ),
    }
    fix_titles = {
        "checkpoint": "Pass `use_reentrant=False`",
        "hugging-face": "Pass `use_reentrant=False` to Hugging Face",
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _checkpointing(facts).checkpoint_calls:
            if not found.lacks_use_reentrant or found.never_runs:
                continue  # chosen; or behind a switch that nothing turns on, where no variant ever runs
            edit = build.add_keyword(facts.source, found.call.node, "use_reentrant", "False")
            fix = self.fix("checkpoint", Applicability.UNSAFE, (edit,))
            yield self.report(facts, found.callee, "checkpoint", fix=fix, callee=facts.code(found.callee))
        for found in _checkpointing(facts).hf_checkpointing:
            what = (
                "`TrainingArguments(gradient_checkpointing=True)`"
                if found.training_arguments
                else (f"`{facts.code(found.callee)}()`")
            )
            edit = build.add_keyword(
                facts.source, found.call, "gradient_checkpointing_kwargs", '{"use_reentrant": False}'
            )
            fix = self.fix("hugging-face", Applicability.UNSAFE, (edit,))
            yield self.report(facts, found.callee, "hugging-face", fix=fix, switch=what)
