"""Compilation (TL1xx): the trained model that is never compiled, and `torch.compile` used so that it compiles
nothing or compiles again and again.

Which form a fix writes, and why (checked on torch 2.13, see rules/TL101.md):
- `model.compile()` (torch 2.2+) compiles the module in place: its `state_dict` keys stay the same, so
  checkpoints saved before still load and code that loads parameters by name keeps working;
  `model = torch.compile(model)` returns an `OptimizedModule` whose keys gain an `_orig_mod.` prefix.
- except for an `nn.Sequential` (or a subclass without its own `forward`): its `.compile()` compiles nothing
  (Dynamo never sees a frame; `torch._dynamo.utils.counters` stays empty), so it gets
  `seq = torch.compile(seq)`.
Compilation is lazy (the first forward call compiles), so the new statement goes right after the model is
built or placed, before it is wrapped for distributed training (DDP, FSDP, `accelerator.prepare`): PyTorch's
"Where to apply torch.compile?" recommends `.compile()` on the inner module passed to DDP or FSDP (TL104).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic
from torchlint.fix import build
from torchlint.fix.model import Applicability, Fix
from torchlint.rules.base import FixAvailability, Rule, no_fix

if TYPE_CHECKING:
    from torchlint.facts import CompileSite, Model, ModuleFacts, Scope
    from torchlint.rules.compile.graph_breaks import GraphBreakAnalysis
    from torchlint.rules.compile.questions import CompileQuestions
    from torchlint.rules.compile.recompiles import RecompileAnalysis


def _questions(facts: ModuleFacts) -> CompileQuestions:
    from torchlint.rules.compile.questions import CompileQuestions

    return facts.analysis(CompileQuestions)


def _graph_breaks(facts: ModuleFacts) -> GraphBreakAnalysis:
    from torchlint.rules.compile.graph_breaks import GraphBreakAnalysis

    return facts.analysis(GraphBreakAnalysis)


class ModelNotCompiled(Rule):
    code = "TL101"
    name = "model-not-compiled"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    # An optimizer (torch.optim, a factory named *optimizer*, a class by name), a framework's trainer
    # (TrainingArguments, trl's configs, `trainer.fit(`), or the call that hands a model to another file's
    # training function (`train(net)`, `train_one_epoch(...)`, `Trainer(model)`). Not "model" or
    # "training": every module of a model library has them (`self.training`), and parsing them all would
    # triple the cost of a run.
    needs_text = (
        "optim", "Optim", "Adam", "SGD", "Lion", "LAMB", "Lamb", "LBFGS", "RMSprop", "Rprop", "Adagrad",
        "Adadelta", "Adafactor", "Muon", "Adan", "Prodigy", "Sophia", "Shampoo", "Ranger", "NovoGrad", "LARS",
        "Lars", "TrainingArguments", "trl", "train(", "train_", "Trainer", "fit(",
    )  # fmt: skip
    messages = {
        "never-compiled": (
            "`{model}` is trained (by {how}) but never compiled: `torch.compile` usually makes each training "
            "step faster on the GPU"
        ),
        "trainer-uncompiled": (
            "`{arguments}(...)` trains without `torch_compile=True`: the Trainer runs the model uncompiled"
        ),
    }
    fix_titles = {
        "torch-compile": "Compile `{model}` with `torch.compile` ({why})",
        "in-place": "Compile `{model}` in place",
        "torch-compile-argument": "Set `torch_compile=True`",
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if self.settings.device == "cpu" or facts.runs_on_xla:
            return  # XLA compiles through its own lazy tensors, not torch.compile's Inductor
        questions = _questions(facts)
        if questions.torch_before_compile:
            return  # the script needs a torch older than 2.0 (`torchtext.legacy`), which has no torch.compile
        for model in facts.models.trained:
            if questions.compiled_somewhere(model) or not self._may_be_cuda(facts.models.device(model)):
                continue
            if questions.surely_not_a_module(model):
                continue  # a holder of the model (a dataclass), not a Module: it has no `.compile()`
            if questions.trained_over_rpc(model):
                continue  # a module holding a `RemoteModule` makes Dynamo fail
            if questions.is_one_layer(model):
                continue  # one layer is one kernel: nothing for the compiler to fuse
            if questions.is_rnn_bound(model):
                continue  # Dynamo runs RNN modules eagerly: next to nothing would be compiled
            if facts.training.demo_length:
                continue  # a run of a few steps ends before compiling would pay for itself
            if facts.training.makes_sparse_tensors:
                continue  # Dynamo does not trace sparse tensors: the frame would run eagerly
            if questions.double_backward:
                continue  # `autograd.grad(..., create_graph=True)` (a gradient penalty): compile cannot
            builds = model.builds
            where = builds[-1].node if len(builds) == 1 else model.trained_at
            reason, fix = self._fix(facts, model)
            yield self.report(
                facts, where, "never-compiled", fix=fix, note=no_fix(reason), model=model.text, how=model.how
            )
        yield from self._training_arguments(facts)

    def _may_be_cuda(self, device) -> bool:
        if device.may_be_cuda:
            return True
        return self.settings.device == "cuda" and device.label == "unknown"

    def _fix(self, facts: ModuleFacts, model: Model) -> tuple[str, Fix | None]:
        """The statement that compiles the model, after it is built and placed, before it is wrapped."""
        if not self.torch_supports((2, 0), facts):
            return (
                "`torch.compile` needs torch 2.0, newer than the project's (the `torch-version` setting)",
                None,
            )
        bypassed = _questions(facts).not_trained_through_forward(model)
        if bypassed:  # `.compile()` wraps the module's call, which its training never runs
            return bypassed, None
        for kind, reason in (
            ("save-whole", "the script pickles the whole model (`torch.save(model)`), which a compiled "
             "module cannot be"),
            ("ema", "a copy of it is made for an EMA or kept aside (`{call}`), which would copy the "
             "compiled wrapper too"),
        ):  # fmt: skip
            events = model.of_kind(kind)
            if events:
                return reason.format(call=_head(facts.code(events[0].node))), None
        builds = model.builds
        if len(builds) != 1:
            return ("it is built in more than one place" if builds else "it is not built in this file"), None
        built = builds[0]
        if built.statement is None or built.conditional or built.in_loop:
            return "it is built conditionally or in a loop", None
        first_wrap = min((e.rank for e in model.of_kind("wrap")), default=None)
        if any(e.statement is built.statement for e in model.of_kind("wrap")):
            return (
                "it is built and wrapped in one statement; compile the inner module before wrapping it"
            ), None
        builtin = _questions(facts).builtin_module(model.expr, model.scope)
        wrapped = model.framework == "lightning" or builtin is not None
        anchor = built
        for event in model.of_kind("place"):
            if event.rank <= anchor.rank or (first_wrap is not None and event.rank > first_wrap):
                continue
            if wrapped and event.scope is not None and facts.rebinding_clash(model.expr, event.scope):
                continue  # `model = ...` in a function that does not bind `model` would make it local there
            if event.statement is not None and not event.conditional and not event.in_loop:
                anchor = event
        against = _questions(facts).wrap_against_in_place_compile(model)
        if against:
            return against, None
        if wrapped:  # Lightning documents `model = torch.compile(model)`; a built-in module needs it
            if model.framework != "lightning":
                prefixed = (
                    f"it is a built-in `nn.{builtin}`, whose `.compile()` compiles nothing, and "
                    "`torch.compile` would prefix"
                )
                if model.of_kind("load", "state"):
                    return (
                        f"{prefixed} the `state_dict` keys this script saves or loads with `_orig_mod.`",
                        None,
                    )
                elsewhere = _questions(facts).state_dict_elsewhere(model)
                if elsewhere:
                    return f"{prefixed} its `state_dict` keys with `_orig_mod.`: {elsewhere}", None
            clash = facts.rebinding_clash(model.expr, anchor.scope) if anchor.scope is not None else ""
            if clash:
                return clash, None
            torch = build.name_module(facts.source, "torch", model.scope)
            if torch is None:
                return "the name `torch` means something else here", None
            name, imports = torch
            code = f"{model.text} = {name}.compile({model.text})"
            why = "before `trainer.fit`, as Lightning documents" if model.framework else f"an `nn.{builtin}`"
            title, fields = "torch-compile", {"model": model.text, "why": why}
        else:
            if not self.torch_supports((2, 2), facts):
                return (
                    "`Module.compile()` needs torch 2.2 (see the `torch-version` setting), and "
                    "`torch.compile(model)` would rename the `state_dict` keys"
                ), None
            code, imports = f"{model.text}.compile()", ()
            title, fields = "in-place", {"model": model.text}
        edit = build.statement_after(facts.source, anchor.statement, code)
        if edit is None:
            return "it is built on a line shared with other code", None
        return "", self.fix(title, Applicability.UNSAFE, (edit,), imports, **fields)

    def _training_arguments(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        """Hugging Face: the `Trainer` compiles the model when `TrainingArguments(torch_compile=True)`."""
        for arguments in facts.hf_training_arguments:
            trl_config = arguments.cls.startswith("trl.") and arguments.cls.endswith("Config")
            if not (arguments.cls.endswith("TrainingArguments") or trl_config):
                continue
            if not arguments.lacks("torch_compile") or facts.models.compile_sites:
                continue
            edit = build.add_keyword(facts.source, arguments.call, "torch_compile", "True")
            fix = self.fix("torch-compile-argument", Applicability.UNSAFE, (edit,))
            yield self.report(
                facts, arguments.callee, "trainer-uncompiled", fix=fix, arguments=arguments.callee_text
            )


class CompileInLoop(Rule):
    code = "TL102"
    name = "compile-in-loop"
    needs_text = ("compile",)
    messages = {
        "every-step": (
            "{compile} runs on every training step or epoch: each call builds a new compiled wrapper and can "
            "recompile; compile once, before the loop"
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for site in facts.models.compile_sites:
            if site.call is None or site.call.conditional or not _questions(facts).runs_every_step(site):
                continue
            yield self.report(facts, site.node, "every-step", compile=site.how)


class CompiledModelNotUsed(Rule):
    code = "TL103"
    name = "compiled-model-not-used"
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("compile",)
    messages = {
        "dropped": (
            "the result of `{call}` is dropped: `torch.compile` returns a compiled module and leaves "
            "`{model}` as it was, so nothing is compiled"
        ),
        "unused": (
            "`{target}` holds the compiled `{model}` but is never used, while `{model}` itself is called: "
            "training runs uncompiled"
        ),
    }
    fix_titles = {
        "sequential": "Use `{model} = {callee}({model})` (its `state_dict` keys gain `_orig_mod.`)",
        "in-place": "Compile `{model}` in place",
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for site in facts.models.compile_sites:
            if site.compiled is None or site.call is None or site.in_place:
                continue
            if _questions(facts).runs_every_step(site):
                continue  # TL102's finding: compiling once, before the loop, is the fix
            model = facts.code(site.compiled)
            scope = site.call.scope
            if site.standalone:
                kind, fields = "dropped", {"call": _head(facts.code(site.node)), "model": model}
                statement = _questions(facts).standalone_statement(site.node)
            elif _questions(facts).unused_result(site):
                kind, fields = "unused", {"target": site.target_text, "model": model}
                statement = site.target
            else:
                continue
            reason, fix = self._in_place(facts, site, statement, scope)
            yield self.report(facts, site.node, kind, fix=fix, note=no_fix(reason), **fields)

    def _in_place(
        self, facts: ModuleFacts, site: CompileSite, statement, scope: Scope
    ) -> tuple[str, Fix | None]:
        """The statement becomes an in-place compile of the model (its `state_dict` keys stay), or for an
        `nn.Sequential` `seq = torch.compile(seq)`. A name the statement bound (`compiled = ...`) that other
        code may still read is kept, as the same module: `compiled = model`."""
        if statement is None or not facts.is_variable(site.compiled, scope):
            return "", None
        model = facts.code(site.compiled)
        options = facts.code_of_arguments(site.node, skip=1)
        if _questions(facts).is_sequential(site.compiled, scope):
            clash = facts.rebinding_clash(site.compiled, scope)
            if clash:
                return clash, None
            code = f"{model} = {site.callee}({', '.join([model, *options])})"
            title = "sequential"
        elif self.torch_supports((2, 2), facts):
            code = f"{model}.compile({', '.join(options)})"
            title = "in-place"
        else:
            return "", None
        try:
            edits = [build.replace_statement(facts.source, statement, code)]
        except build.EditError:
            return "", None
        removed = site.target_text if statement is site.target else ""
        observers = (
            facts.removal_observers(removed, scope.deciding_scope(removed) or scope) if removed else ""
        )
        if observers:  # `compiled` stays, naming the module that is now compiled
            kept = build.statement_after(facts.source, statement, f"{removed} = {model}")
            if kept is None:
                return f"{observers}, and `{removed} = {model}` would not stand on a line of its own", None
            edits.append(kept)
        return "", self.fix(title, Applicability.UNSAFE, edits, model=model, callee=site.callee)


class CompileAfterDistributedWrap(Rule):
    code = "TL104"
    name = "compile-after-distributed-wrap"
    needs_text = ("compile",)
    messages = {
        "wrapper": (
            "{compile} compiles the `{wrapper}` wrapper: torch.compile does not handle distributed wrappers "
            'well; compile the inner module before wrapping it (PyTorch\'s "Where to apply torch.compile?")'
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for site in facts.models.compile_sites:
            wrapper = _questions(facts).wrapper_compiled(site)
            if wrapper is None:
                continue
            yield self.report(facts, site.node, "wrapper", compile=site.how, wrapper=wrapper)


class SequentialCompileNoop(Rule):
    code = "TL105"
    name = "sequential-compile-noop"
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("compile",)
    messages = {
        "sequential": (
            "`{model}` is an `nn.Sequential`, whose `.compile()` compiles nothing (Dynamo skips "
            "`Sequential`'s call); use `torch.compile`"
        ),
    }
    fix_titles = {
        "torch-compile": "Use `{model} = torch.compile({model})` (its `state_dict` keys gain `_orig_mod.`)"
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for site in facts.models.compile_sites:
            if site.compiled is None or site.call is None or not site.in_place:
                continue
            scope = site.call.scope
            if not _questions(facts).is_sequential(site.compiled, scope):
                continue
            reason, fix = self._fix(facts, site, scope)
            yield self.report(
                facts, site.node, "sequential", fix=fix, note=no_fix(reason), model=facts.code(site.compiled)
            )

    def _fix(self, facts: ModuleFacts, site: CompileSite, scope: Scope) -> tuple[str, Fix | None]:
        statement = _questions(facts).standalone_statement(site.node)
        if statement is None or not facts.is_variable(site.compiled, scope):
            return "", None
        clash = facts.rebinding_clash(site.compiled, scope)
        if clash:
            return clash, None
        torch = build.name_module(facts.source, "torch", scope)
        if torch is None:
            return "", None
        name, imports = torch
        model = facts.code(site.compiled)
        options = facts.code_of_arguments(site.node, skip=0)
        code = f"{model} = {name}.compile({', '.join([model, *options])})"
        try:
            edit = build.replace_statement(facts.source, statement, code)
        except build.EditError:
            return "", None
        return "", self.fix("torch-compile", Applicability.UNSAFE, (edit,), imports, model=model)


GRAPH_BREAKS_URL = "https://docs.pytorch.org/docs/stable/compile/programming_model.graph_breaks_index.html"


class LikelyGraphBreak(Rule):
    """Code inside a compiled model's forward (or a compiled function) that Dynamo cannot put in the graph:
    it stops the graph there, runs the construct in Python, and starts a new graph after it. Each break
    costs a return to Python and splits what Inductor can fuse; a break on a tensor's value also makes the
    host wait for the device. Reported as likely: the line must run while compiled (`torch.compiler.
    is_compiling()` guards, disabled functions, error paths and debugging switches are left out), and
    `torchlint verify` confirms each break it sees at the same line."""

    code = "TL106"
    name = "likely-graph-break"
    speed_advice = True
    # The calls a likely break is made of (`print`, `.item()`, `logger.info`, `warnings.warn`, a tensor
    # reduction or test a branch reads, always written as an attribute: `x.sum()`, `torch.isnan(x)`); the
    # compile site may be in another file. Not a bare `max(`: the builtins are no tensor.
    needs_text = (
        "print", "item(", "tolist(", "warn", "graph_break", "debug(", "info(", "error(", "exception(",
        "critical(", "fatal(", "log(", ".any(", ".all(", ".sum(", ".mean(", ".max(", ".min(", ".amax(",
        ".amin(", ".norm(", ".prod(", ".std(", ".var(", ".count_nonzero(", ".isnan(", ".isinf(", ".isfinite(",
        ".equal(", ".allclose(", ".is_nonzero(",
    )  # fmt: skip

    # Why Dynamo stops the graph at each kind of construct.
    reasons = {
        "print": "`print` cannot go in a graph",
        "logging": "a logging call cannot go in a graph",
        "warning": "`warnings.warn` cannot go in a graph",
        "item": "`.item()` reads a tensor's value into Python",
        "tolist": "`.tolist()` reads a tensor's values into Python",
        "scalar": "it reads a tensor's value into a Python number",
        "branch": "which branch runs depends on a tensor's value",
        "graph_break": "it asks for a graph break",
    }
    # What to do instead (the note: no fix is offered, each remedy changes what the code does).
    remedies = {
        "print": "remove it, move it out of the compiled code, or run it only in eager mode (`if not "
        "torch.compiler.is_compiling():`)",
        "item": "keep the value a tensor, or let Dynamo capture it with "
        "`torch._dynamo.config.capture_scalar_outputs = True`",
        "tolist": "keep the values in a tensor",
        "branch": "compute both sides and choose with `torch.where`, or use `torch.cond`",
        "graph_break": "remove it once the compiled code should run as one graph",
    }
    remedies["logging"] = remedies["warning"] = remedies["print"]
    remedies["scalar"] = remedies["item"]
    messages = {
        "break": (
            "{construct} in {where}, which is compiled {compiled_at}: {reason}, so Dynamo likely breaks the "
            "graph here and the compiled {what} runs as several graphs with Python in between"
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _graph_breaks(facts).likely_breaks:
            note = no_fix(f"{self.remedies[found.kind]}; see {GRAPH_BREAKS_URL}")
            yield self.report(
                facts,
                found.node,
                "break",
                note=note,
                construct=found.construct,
                where=found.where,
                compiled_at=found.compiled_at,
                reason=self.reasons[found.kind],
                what=found.what,
            )


RECOMPILE_RECIPE = "https://docs.pytorch.org/tutorials/recipes/compiling_optimizer_lr_scheduler.html"


class CompiledStepFloatLr(Rule):
    """Before torch 2.6, Dynamo specialised the Python floats a compiled function reads: the learning rate a
    scheduler changes makes the compiled optimizer step recompile at every change, until the recompile
    limit, and then run uncompiled. Reported only for a project on such a torch (`torch-version`, or the
    torch its dependency files pin): since 2.6 the float becomes a symbol after one recompile."""

    code = "TL107"
    name = "compiled-step-float-lr"
    speed_advice = True
    needs_text = ("compile",)
    messages = {
        "recompiles": (
            "`{optimizer}.step` is compiled while `{scheduler}` changes its learning rate, a Python float: "
            "before torch 2.6 Dynamo guards on its value and recompiles the step at every change, until the "
            "recompile limit, and then runs it uncompiled"
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if self.torch_supports((2, 6), facts):
            return  # floats are traced as symbols: one recompile, then none
        for found in _recompiles(facts).recompiling_steps:
            remedy = "pass the learning rate as a tensor (`lr=torch.tensor(0.01)`)"
            note = no_fix(f"{remedy}; see {RECOMPILE_RECIPE}")
            yield self.report(
                facts,
                found.site,
                "recompiles",
                note=note,
                optimizer=found.optimizer,
                scheduler=found.scheduler,
            )


def _recompiles(facts: ModuleFacts) -> RecompileAnalysis:
    from torchlint.rules.compile.recompiles import RecompileAnalysis

    return facts.analysis(RecompileAnalysis)


def _head(code: str) -> str:
    """A call's code for a message: one line, long argument lists elided."""
    first = code.splitlines()[0]
    if len(first) > 60 or first != code:
        head, _, _ = first.partition("(")
        return f"{head}(...)"
    return first
