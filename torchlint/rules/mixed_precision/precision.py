"""Mixed precision: autocast contexts, precision supplied another way, and GradScalers with their uses.

Why a model of its own: the precision rules (TL3xx) must never claim AMP is missing when something provides
it, and real code hides it well — `with ctx:` where `ctx = nullcontext() if cpu else torch.amp.autocast(...)`
(nanoGPT), `amp_autocast = partial(torch.autocast, ...)` handed down as a parameter (timm), a framework
switch (`Trainer(precision="bf16-mixed")`, `Accelerator(mixed_precision=...)`, `TrainingArguments(bf16=)`),
a model cast to half precision, a scaler wrapped in a project class (timm's `NativeScaler`), or a flag such
as `args.amp` that turns any of these on. So this module answers two kinds of question:

- *records* for the rules that judge how AMP is used: `AutocastSite` (every reference to an autocast entry
  point, with its device, dtype, `enabled=` and how it is used), `Scaler` (a GradScaler or a wrapper class,
  with the calls made on it: scale, unscale_, step, update), `Switch` (precision supplied another way);
- `evidence`: anything at all that says the author decided about precision — the records above and the
  words of a precision flag (`amp`, `autocast`, `fp16`, `bf16`, `mixed_precision`, `scaler`, ...) in names,
  attributes and parameters. TL301 stays silent on any of it: a false claim that AMP is missing costs more
  than a miss.

Device defaults follow the AMP docs: `torch.autocast("cuda")` runs float16, `torch.autocast("cpu")` bfloat16.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Argument, Signature, read_call
from torchlint.facts.syntax.names import BindingKind, dotted
from torchlint.facts.syntax.values import literal_of
from torchlint.facts.syntax.walk import calls_in, child_nodes, contains, descendants, statements
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.frameworks import off_unless_asked
from torchlint.rules.mixed_precision.steps import grad_free_calls

if TYPE_CHECKING:
    from collections.abc import Callable

    from torchlint.facts.syntax.collect import CallRecord, FunctionRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Reference, Scope

AUTOCAST = frozenset(
    f"torch.{path}"
    for path in (
        "autocast",
        "amp.autocast",
        "amp.autocast_mode.autocast",
        "autocast_mode.autocast",
        "cuda.amp.autocast",
        "cuda.amp.autocast_mode.autocast",
        "cpu.amp.autocast",
        "cpu.amp.autocast_mode.autocast",
    )
)
SCALERS = frozenset(
    {
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.cpu.amp.GradScaler",
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
    }
)
# Precision decided elsewhere: FSDP's mixed-precision policies, apex, DeepSpeed (its config sets fp16/bf16).
_OTHER_MECHANISMS = {
    "torch.distributed.fsdp.MixedPrecision": "FSDP `MixedPrecision`",
    "torch.distributed.fsdp.MixedPrecisionPolicy": "FSDP2 `MixedPrecisionPolicy`",
    "torch.distributed._composable.fsdp.MixedPrecisionPolicy": "FSDP2 `MixedPrecisionPolicy`",
    "apex.amp.initialize": "apex `amp.initialize`",
    "apex.amp": "apex amp",
    "deepspeed.initialize": "DeepSpeed (its config decides fp16/bf16)",
}
_SCALING_MECHANISMS = frozenset({"apex.amp.initialize", "apex.amp", "deepspeed.initialize"})
_CLIPS = {
    "torch.nn.utils.clip_grad_norm_",
    "torch.nn.utils.clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_value_",
}
_SCALER_METHODS = frozenset({"scale", "unscale_", "step", "update"})
# What a later clip of a step says when the step's first clip carries the one `unscale_` (TL306).
_COVERED = (
    "no fix of its own: the fix of the first clip of this step unscales for this one too, since `unscale_` "
    "may run only once per step"
)
_NEW_SIGNATURE = Signature(("device_type", "dtype", "enabled", "cache_enabled"))
_OLD_SIGNATURE = Signature(("enabled", "dtype", "cache_enabled"))
_HALF_CASTS = {"half": "float16", "bfloat16": "bfloat16"}
_DTYPES = {
    "torch.float16": "float16",
    "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
    "torch.float32": "float32",
    "torch.float": "float32",
}
# The words of a precision switch, as parts of identifiers (`args.amp`, `use_amp`, `amp_autocast`,
# `loss_scaler`, `mixed_precision`, `--fp16`): any of them means the author decided about precision.
_FLAG_WORD = re.compile(
    r"(^|_)(amp|autocast|fp16|bf16|float16|bfloat16|scaler|apex)(_|$)|deepspeed|megatron",
    re.IGNORECASE,
)
# `mixed` names mixed data as often (mixup's `mixed_x`, attention's `mixed_query_layer`): it counts in
# `mixed_precision` (any identifier with `precision`) and in a switch-shaped one (`mixed`, `use_mixed`).
_MIXED = re.compile(r"(^|_)mixed(_|$)", re.IGNORECASE)
# Words that name a precision switch only in some identifiers: `precision` is also a detection metric
# (`precision.mean()`, `precision_curve`, `compute_ap(recall, precision)`), `half` also half of a size
# (`args.half_res`). They count in a switch-shaped identifier (these words and `_SWITCH_PARTS` only:
# `precision`, `half_precision`, `use_half`, `precision_mode`) that is an option or a setting: an attribute
# (`args.precision`, `cfg.half`), a parameter or a name given a setting's value (`precision="bf16"`).
_AMBIGUOUS_WORDS = frozenset({"precision", "half"})
_SWITCH_PARTS = frozenset(
    {"use", "is", "enable", "enabled", "disable", "no", "mode", "type", "dtype", "policy", "level", "backend"}
    | {"full", "low", "model", "compute", "param", "default", "fp", "set", "get", "float32", "fp32", "tf32"}
    | {"matmul", "weight", "weights", "cast"}  # `torch.set_float32_matmul_precision("high")` decides TF32
)
# What a precision setting's value looks like as a string: "bf16", "16-mixed", "32-true", "half", "64",
# "high" (`set_float32_matmul_precision`).
_SETTING_STRING = re.compile(
    r"^(fp|bf)?(16|32|64)(-(mixed|true))?$|^(bf16|fp16|half|float|double|single|mixed|amp|high|medium)",
    re.IGNORECASE,
)
# Those of the words that also mean loss scaling is taken care of (`loss_scaler`, `use_apex`, `deepspeed`).
_SCALING_WORD = re.compile(r"(^|_)(scaler|apex)(_|$|`)|deepspeed", re.IGNORECASE)
FRAMEWORK_SWITCHES = {
    "lightning": ("precision",),
    "accelerate": ("mixed_precision",),
    "transformers": ("bf16", "fp16", "bf16_full_eval", "fp16_full_eval", "half_precision_backend"),
}


@dataclass(frozen=True)
class AutocastSite:
    """One reference to an autocast entry point and what it asks for."""

    node: cst.CSTNode  # the reference (`torch.autocast`)
    call: cst.Call | None  # the call that opens the context, when there is one
    how: str  # "`with`", "decorator", "variable `ctx`", "`functools.partial`", "call", "reference"
    device: str  # "cuda", "cpu", or "unknown"
    dtype: str  # "float16", "bfloat16", "float16 or bfloat16", "unknown"
    dtype_explicit: bool
    enabled: str  # "yes", "no", or the expression that decides (`args.amp`)


@dataclass(eq=False)
class Scaler:
    """A GradScaler (or a project class wrapping one) and the calls the code makes on it."""

    node: cst.Call  # where it is made
    name: str  # what holds it, as written: "scaler", "self.scaler" ("" when not assigned)
    how: str  # "`torch.amp.GradScaler`", "`NativeScaler` (wraps a GradScaler)"
    enabled: str  # "yes", "no", or the expression that decides
    uses: dict[str, list[CallRecord]] = field(default_factory=dict)  # scale/unscale_/step/update/__call__
    is_grad_scaler: bool = False  # made by torch's GradScaler itself (not a wrapper class, not inferred)


@dataclass(frozen=True)
class Switch:
    """Precision supplied another way: a framework argument, a cast of the model, another mechanism."""

    node: cst.CSTNode
    what: str  # for people: "`Trainer(precision=...)`", "model cast with `.half()`"
    dtype: str = "unknown"
    scales_loss: bool = False  # apex and DeepSpeed scale the loss themselves


class EvidenceKind(enum.Enum):
    AUTOCAST = "autocast"
    SCALER = "scaler"
    SWITCH = "switch"  # a framework argument, a cast of the model, FSDP policies, apex, DeepSpeed
    FLAG = "flag"  # a name that reads like a precision switch (`args.amp`, `use_amp`)


@dataclass(frozen=True)
class Evidence:
    """One sign that the module decided about precision; `scales_loss` when it also takes care of loss
    scaling (a GradScaler, apex, DeepSpeed, a `loss_scaler` passed in), which TL302 asks."""

    node: cst.CSTNode
    kind: EvidenceKind
    what: str
    scales_loss: bool = False


@dataclass(frozen=True)
class ScalerPlan:
    """What a GradScaler rewrite of one training loop touches (TL302's fix)."""

    loss: cst.BaseExpression  # the receiver of `.backward()`: becomes `scaler.scale(loss)`
    step: cst.Expr  # `optimizer.step()`: becomes `scaler.step(optimizer)` followed by `scaler.update()`
    optimizer: cst.BaseExpression
    # Clipping before the step: the one `scaler.unscale_(optimizer)` of the step goes before this statement
    # (None: no clip, or no place for it, and then `why_not` says why and the rewrite is not offered)
    unscale_before: cst.CSTNode | None
    outer_loop: cst.CSTNode  # the scaler is made right before it
    scope: Scope
    why_not: str = ""


@dataclass(frozen=True)
class ClipWithoutUnscale:
    """Gradients clipped while still scaled (TL306), and where the one `unscale_` of the clip's step goes:
    `before` is the statement it goes before, set on the step's first clip only; `note` says why a clip
    has no fix of its own (empty when it has one)."""

    clip: cst.Call
    scaler: str  # as written
    optimizer: str  # as `scaler.step(...)` names it
    before: cst.CSTNode | None
    note: str


@dataclass(frozen=True)
class BackwardInAutocast:
    """A backward call inside an autocast `with` block; `block` and `start` say how to move it out (the
    `with` statement's enclosing block, and the index in the `with` body of the first statement to move),
    `block` None when that is not a pure dedent."""

    call: cst.Call
    site: AutocastSite
    region: cst.With | None
    block: cst.BaseSuite | None
    start: int


class PrecisionAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    # -- autocast -----------------------------------------------------------------------------------------

    @cached_property
    def autocast_sites(self) -> list[AutocastSite]:
        return [self._site(ref) for ref in self.source.references_to(AUTOCAST)]

    def _site(self, ref: Reference) -> AutocastSite:
        source = self.source
        qualname = ref.qualname or ""
        legacy = qualname.startswith(("torch.cuda.", "torch.cpu."))
        device = qualname.split(".")[1] if legacy else "unknown"
        call = ref.call
        how = "reference"
        if ref.decorator is not None:
            how = "decorator"
        elif call is not None:
            how = self._use_of(call)
        elif (partial := self._partial_of(ref)) is not None:
            call = partial
            how = "`functools.partial`"
        dtype, explicit, enabled = "unknown", False, "yes"
        if call is not None:
            if how == "`functools.partial`":  # partial(torch.autocast, device_type=...): keywords only
                arguments = read_call(source, call, ref.scope)
            else:
                arguments = read_call(source, call, ref.scope, _OLD_SIGNATURE if legacy else _NEW_SIGNATURE)
            if not legacy:
                given = arguments.get("device_type")
                if given is not None and given.expression is not None:
                    device = self._device(given.expression, ref.scope)
            given = arguments.get("dtype")
            if given is not None and given.expression is not None:
                dtype, explicit = self.dtype_of(given.expression, ref.scope), True
            given = arguments.get("enabled")
            if given is not None and given.expression is not None:
                known, value = given.constant()
                enabled = ("yes" if value else "no") if known else source.code(given.expression)
        if not explicit:
            dtype = {"cuda": "float16", "cpu": "bfloat16"}.get(device, "unknown")
        return AutocastSite(ref.expr, call, how, device, dtype, explicit, enabled)

    def _use_of(self, call: cst.Call) -> str:
        if id(call) in self._with_items:
            return "`with`"
        target = self._assigned_name(call)
        return f"variable `{target}`" if target else "call"

    def _partial_of(self, ref: Reference) -> cst.Call | None:
        return self._partials.get(id(ref.expr))

    @cached_property
    def _partials(self) -> dict[int, cst.Call]:
        """`functools.partial(torch.autocast, ...)`: the partial call, by the id of its first argument."""
        found = {}
        for call in self.source.calls:
            if self.source.qualname(call.node.func, call.scope) == "functools.partial" and call.node.args:
                found[id(call.node.args[0].value)] = call.node
        return found

    @cached_property
    def _with_items(self) -> dict[int, tuple[cst.WithItem, cst.With]]:
        return {id(item.item): (item, node) for node in _withs(self.source.module) for item in node.items}

    @cached_property
    def regions(self) -> list[tuple[AutocastSite, cst.With]]:
        """`with` statements that open an enabled autocast context: directly (`with torch.autocast(...)`),
        through a variable holding one (`with ctx:`), or through a parameter the callers pass one for."""
        sites = [s for s in self.autocast_sites if s.enabled != "no"]
        by_call = {id(s.call): s for s in sites if s.call is not None and s.how == "`with`"}
        by_name = {s.how[len("variable `") : -1]: s for s in sites if s.how.startswith("variable `")}
        found = []
        for item, node in self._with_items.values():
            site = by_call.get(id(item.item))
            if site is None:
                site = by_name.get(dotted(item.item) or "")
            if site is None:
                site = self._passed_contexts.get(id(item.item))
            if site is not None and site.enabled != "no":
                found.append((site, node))
        return found

    @cached_property
    def _passed_contexts(self) -> dict[int, AutocastSite]:
        """`with ctx:` / `with amp_autocast():` where `ctx` is a parameter for which a caller, in this file or
        another, passes an autocast context (timm's `amp_autocast = partial(torch.autocast, ...)` handed
        down; a context made in main.py): a site at the `with` item, by its id, with the device, dtype and
        `enabled=` of what is passed. The modules that pass it are kept for TL302 (a scaler made there)."""
        source = self.source
        found: dict[int, AutocastSite] = {}
        for item, node in self._with_items.values():
            expr = item.item
            name = expr.func if isinstance(expr, cst.Call) and not expr.args else expr
            if not isinstance(name, cst.Name) or not self._region_may_matter(node):
                continue
            function = self._function_around(node, name.value)
            if function is None:
                continue
            for module, passed in self.passed_for(function, name.value):
                where = "by its callers" if module is source else f"in {module.path}"
                how = f"parameter `{name.value}`, an autocast context passed {where}"
                site = AutocastSite(
                    expr, None, how, passed.device, passed.dtype, passed.dtype_explicit, passed.enabled
                )
                found[id(expr)] = site
                self._passing_modules.setdefault(id(site), []).append(module)
                break
        return found

    def _region_may_matter(self, node: cst.With) -> bool:
        """Whether a region opened by `node` could change an answer: it sits in a loop (TL302 looks in
        training loops) or holds a backward call (TL305). Asking the callers of other files what they pass
        scans the project's imports and builds its importers' facts; in a library (torch's own sources,
        where `with ctx:` is a lock or a tracing mode) that was most of a run's time."""
        if any(contains(loop.node, node) for loop in self.source.loops):
            return True
        return any(
            isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"
            for call in calls_in(node.body)
        )

    @cached_property
    def _passing_modules(self) -> dict[int, list[SourceModule]]:
        return {}

    def passed_for(
        self, function: FunctionRecord, param: str, depth: int = 0
    ) -> list[tuple[SourceModule, AutocastSite]]:
        """The autocast contexts callers pass for `param` of `function`, with the module of each."""
        from torchlint.facts.syntax.calls import argument_for

        found = []
        callers = [(self.source, call) for call in self.source.callers_of(function)]
        elsewhere = self.source.analysis(CallerAnalysis).calls_elsewhere([function])
        for module, call in callers + elsewhere:
            argument = argument_for(call.node, function, param)
            if argument is None:
                continue
            site = module.analysis(PrecisionAnalysis).site_for(argument, call.scope, depth + 1)
            if site is not None:
                found.append((module, site))
        return found

    def site_for(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> AutocastSite | None:
        """The autocast context `expr` evaluates to: a call opening one, a variable or parameter holding one
        (`ctx = nullcontext() if cpu else torch.autocast(...)`: the autocast branch), a partial, or what a
        project function called here returns."""
        if depth > 4:
            return None
        if isinstance(expr, cst.Call):
            found = next((s for s in self.autocast_sites if s.call is expr), None)
            target = self.source.callee_of_call(expr, scope) if found is None else None
            if target is not None:  # a project helper returning one (open_clip's `get_autocast(precision)`)
                home, function = target
                analysis = home.analysis(PrecisionAnalysis)
                for returned in function.returns:
                    found = found or analysis.site_for(returned, function.scope, depth + 1)
            return found
        if isinstance(expr, cst.IfExp):
            return self.site_for(expr.body, scope, depth + 1) or self.site_for(expr.orelse, scope, depth + 1)
        if isinstance(expr, cst.Name):
            for assignment in self.source.assigned_values(expr, scope):
                found = self.site_for(assignment.value, assignment.scope, depth + 1)
                if found is not None:
                    return found
            function = self.source.function_of_scope(scope)
            if function is not None and expr.value in function.params:
                passed = self.passed_for(function, expr.value, depth + 1)
                return passed[0][1] if passed else None
        return None

    def _function_around(self, node: cst.CSTNode, param: str) -> FunctionRecord | None:
        """The innermost function of this module with a parameter `param` that holds `node`."""
        around = [f for f in self.source.functions if param in f.params and contains(f.node, node)]
        return around[-1] if around else None  # functions are collected outer first

    def backward_in_autocast(self) -> list[BackwardInAutocast]:
        """Backward calls written inside an autocast region (TL305), with how to move them out."""
        found = []
        for site, node in self.regions:
            for call in calls_in(node.body):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value == "backward":
                    found.append(BackwardInAutocast(call, site, *self._dedent(node, call)))
        return found

    def _dedent(self, node: cst.With, call: cst.Call) -> tuple[cst.With | None, cst.BaseSuite | None, int]:
        """Moving the backward out is a pure dedent when its statement is one of the `with` block's own
        statements, not the first (something stays under autocast), and the `with` sits in an indented
        block: then it and the statements after it leave the block."""
        inner = node.body
        if not isinstance(inner, cst.IndentedBlock):
            return None, None, 0
        index = next((i for i, s in enumerate(inner.body) if contains(s, call)), None)
        if not index or not isinstance(inner.body[index], cst.SimpleStatementLine):
            return None, None, 0
        parent = next((b for b in _blocks(self.source.module) if any(s is node for s in b.body)), None)
        return (node, parent, index) if parent is not None else (None, None, 0)

    def clips_without_unscale(self) -> list[ClipWithoutUnscale]:
        """`clip_grad_norm_` / `clip_grad_value_` between the backward and `scaler.step(opt)` of one step —
        the loop's iteration, or the step function holding them (minGPT-ddp's `_run_batch`) — with no
        `scaler.unscale_(...)` before it — TL306. A clip belongs to the step that follows it (not to a later
        step of another optimizer, dcgan's two), and a clip before the step's own `scaler.scale(...)` to the
        unscaled branch (`else: loss.backward(); clip`). `unscale_` may run once per optimizer between
        `update()`s, so each step gets one place for it, carried by its first clip (`_unscale_point`)."""
        source = self.source
        found = []
        for scaler in self.scalers:
            steps = scaler.uses.get("step", [])
            for step in steps:
                if not step.node.args:
                    continue
                within = step.loop.all_calls() if step.loop is not None else source.calls
                calls = [c for c in within if c.function is step.function]
                start = _starts_in(source, step.function)
                step_at = start(step.node)
                # Since the previous step of this scaler in the same iteration (another optimizer's)
                since = max((at for c in steps if c in calls if (at := start(c.node)) < step_at), default=-1)
                segment = [c for c in calls if since < start(c.node) < step_at]
                unscales = [start(c.node) for c in scaler.uses.get("unscale_", []) if c in segment]
                scales = [start(c.node) for c in scaler.uses.get("scale", []) if c in segment]
                clips = []
                for call in segment:
                    if (source.qualname(call.node.func, call.scope) or "") not in _CLIPS:
                        continue
                    at = start(call.node)
                    if any(u < at for u in unscales) or (scales and not any(s < at for s in scales)):
                        continue
                    clips.append(call)
                if not clips:
                    continue
                optimizer = source.code(step.node.args[0].value)
                before, why_not = self._unscale_point(step, calls, segment, clips, scaler)
                for index, clip in enumerate(clips):
                    if index == 0:
                        note = f"no automatic fix: {why_not}" if before is None else ""
                        found.append(ClipWithoutUnscale(clip.node, scaler.name, optimizer, before, note))
                    else:
                        note = _COVERED if before is not None else f"no automatic fix: {why_not}"
                        found.append(ClipWithoutUnscale(clip.node, scaler.name, optimizer, None, note))
        return found

    def _unscale_point(
        self,
        step: CallRecord,
        calls: list[CallRecord],
        segment: list[CallRecord],
        clips: list[CallRecord],
        scaler: Scaler,
    ) -> tuple[cst.CSTNode | None, str]:
        """The statement before which one `scaler.unscale_(optimizer)` serves every clip of the step, or why
        there is none (`segment`: the calls since the scaler's previous step): not where the step already
        unscales, else `_one_unscale_place`."""
        if any(c in segment for c in scaler.uses.get("unscale_", [])):
            return None, (
                f"`{scaler.name}.unscale_` already runs later in this step, and may run only once per step: "
                "move it before the first clip"
            )
        scaler_calls = [use for uses in scaler.uses.values() for use in uses]
        return self._one_unscale_place(step, calls, clips, scaler_calls, f"`{scaler.name}.step(...)`")

    def _one_unscale_place(
        self,
        step: CallRecord,
        calls: list[CallRecord],
        clips: list[CallRecord],
        scaler_calls: list[CallRecord],
        step_text: str,
    ) -> tuple[cst.CSTNode | None, str]:
        """The statement before which one `unscale_` serves every clip of the step `step` (TL306's fix, and
        TL302's, which adds the scaler), or why there is none. `unscale_` may run once per optimizer between
        `update()`s, so it must run once per step (never inside a loop nested in the step: a loop over
        `param_groups` gets it before the loop, one that also runs the backward pass gets none), only where
        the step follows (in the step's block or a branch inside it, with no `continue`/`break`/`return` on
        the way), and after the backward pass (`scaler_calls`: the scaler's own calls, its `scale` too)."""
        source = self.source
        from torchlint.facts.torch.training import BACKWARD, TrainingAnalysis

        root: cst.CSTNode = source.module if step.function is None else step.function.node
        if step.loop is not None:
            root = step.loop.node
        step_path = _block_path(root, step.node)
        paths = [_block_path(root, clip.node) for clip in clips]
        place = _shared_place(step_path, paths)
        if place is None:
            return None, f"the clip runs where {step_text} may not, and `unscale_` may run only once per step"
        block, index, depth = place
        anchor = block.body[index]
        training = source.analysis(TrainingAnalysis)
        if any(
            contains(anchor, call.node) and (call in scaler_calls or BACKWARD in training.call_events(call))
            for call in calls
        ):
            if isinstance(anchor, (cst.For, cst.While)):
                return None, (
                    "the clip runs in a loop that also runs the backward pass, more than once per step, and "
                    "`unscale_` may run only once per step: clip once, after that loop"
                )
            return None, "no one place runs after the backward pass and before every clip of the step"
        if any(_may_leave(statement) for statement in _on_the_way(step_path, paths[0], depth, index)):
            return None, (
                f"a `continue`, `break` or `return` before {step_text} could skip the step "
                "after `unscale_`, which may run only once per step"
            )
        return anchor, ""

    def fp16_without_scaler(self) -> list[tuple[AutocastSite, LoopRecord]]:
        """float16 autocast regions (explicit, the CUDA default, or chosen at run time) inside training
        loops of a module with no loss scaling of any kind (TL302), with the loop."""
        if any(evidence.scales_loss for evidence in self.evidence):
            return []
        from torchlint.facts.torch.training import TrainingAnalysis

        loops = self.source.analysis(TrainingAnalysis).training_loops
        found: list[tuple[AutocastSite, LoopRecord]] = []
        for site, node in self.regions:
            if site.dtype not in ("float16", "float16 or bfloat16") or site.device == "cpu":
                continue
            passing = self._passing_modules.get(id(site), [])
            if any(e.scales_loss for m in passing for e in m.analysis(PrecisionAnalysis).evidence):
                continue  # the context comes from a file that scales the loss
            loop = next((loop for loop in loops if contains(loop.node, node)), None)
            if loop is not None and all(site is not seen for seen, _ in found):
                found.append((site, loop))
        return found

    def scaler_plan(self, loop: LoopRecord) -> ScalerPlan | None:
        """Where a GradScaler goes into `loop`: one backward and one optimizer step written in the loop (as
        statements of their own), the one place for `unscale_` when the step clips (`_one_unscale_place`:
        once per step, before its first clip, as TL306's fix), and the outermost loop of the same function
        (the scaler is made once, before it). None when the loop's shape is not that simple."""
        from torchlint.facts.torch.training import BACKWARD, MAX_DEPTH, STEP, TrainingAnalysis

        source = self.source
        training = source.analysis(TrainingAnalysis)
        calls = [c for c in loop.all_calls() if c.function is loop.function]
        # What each call does itself (at the depth limit the training analysis does not descend into
        # callees): a backward pass, an optimizer step (a scheduler's `step()` is not one)
        events = [(call, training.call_events(call, MAX_DEPTH)) for call in calls]
        backwards = [c for c, done in events if BACKWARD in done]
        steps = [c for c, done in events if STEP in done and not c.node.args]
        if (
            len(backwards) != 1
            or len(steps) != 1
            or backwards[0].node.args
            or backwards[0].node.func.attr.value != "backward"  # type: ignore[attr-defined]
        ):
            return None
        step = steps[0]
        step_statement = self._statement_of(step.node)
        if step_statement is None:
            return None
        start = _starts_in(source, loop.function)
        step_at = start(step.node)
        clips = [
            call
            for call in calls
            if (source.qualname(call.node.func, call.scope) or "") in _CLIPS and start(call.node) < step_at
        ]
        optimizer = step.node.func.value  # type: ignore[union-attr]
        before, why_not = None, ""
        if any(start(clip.node) < start(backwards[0].node) for clip in clips):
            why_not = "a clip runs before the backward pass, where `unscale_` would find no gradients"
        elif clips:
            step_text = f"`{source.code(optimizer)}.step()`"
            before, why_not = self._one_unscale_place(step, calls, clips, [], step_text)
        outer = loop
        while outer.parent is not None and outer.parent.function is loop.function:
            outer = outer.parent
        receiver = backwards[0].node.func.value  # type: ignore[union-attr]
        return ScalerPlan(receiver, step_statement, optimizer, before, outer.node, loop.scope, why_not)

    def _statement_of(self, call: cst.Call) -> cst.Expr | None:
        """The expression statement that is `call` alone on its line (the models analysis knows them)."""
        from torchlint.facts.torch.models import ModelAnalysis

        statement = self.source.analysis(ModelAnalysis).statement_of(call)
        return statement if isinstance(statement, cst.Expr) else None

    def scalers_with_bfloat16(self) -> list[Scaler]:
        """Scalers always enabled in a module whose every autocast asks for bfloat16 explicitly (TL307)."""
        sites = [s for s in self.autocast_sites if s.enabled != "no"]
        if not sites or any(s.dtype != "bfloat16" or not s.dtype_explicit for s in sites):
            return []
        return [s for s in self.scalers if s.enabled == "yes" and s.is_grad_scaler]

    def _assigned_name(self, value: cst.BaseExpression) -> str:
        """What `target = value` binds (one Name or attribute target), also for a branch of a conditional
        value (`ctx = nullcontext() if cpu else torch.autocast(...)`); "" when nothing is."""
        statement = self.source.assignment_of(value, through_branches=True)
        target = None
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            target = statement.targets[0].target
        elif isinstance(statement, cst.AnnAssign):
            target = statement.target
        return self.source.code(target).strip() if isinstance(target, (cst.Name, cst.Attribute)) else ""

    def _device(self, expr: cst.BaseExpression, scope: Scope) -> str:
        from torchlint.facts.torch.devices import DeviceAnalysis

        found = self.source.analysis(DeviceAnalysis).device_of(expr, scope)
        if found.label == "cuda":
            return "cuda"
        if found.label == "cpu":
            return "cpu"
        return "unknown"

    def dtype_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str:
        """float16, bfloat16, "float16 or bfloat16" (decided at run time), float32 or unknown."""
        if depth > 4:
            return "unknown"
        source = self.source
        ok, literal = literal_of(expr)
        if ok and isinstance(literal, str):
            return {"float16": "float16", "half": "float16", "bfloat16": "bfloat16"}.get(literal, "unknown")
        qualname = source.qualname(expr, scope)
        if qualname in _DTYPES:
            return _DTYPES[qualname]
        if isinstance(expr, cst.IfExp):
            branches = {self.dtype_of(e, scope, depth + 1) for e in (expr.body, expr.orelse)}
            if branches == {"float16", "bfloat16"}:
                return "float16 or bfloat16"
            return branches.pop() if len(branches) == 1 else "unknown"
        if isinstance(expr, cst.Name):
            values = {self.dtype_of(a.value, a.scope, depth + 1) for a in source.assigned_values(expr, scope)}
            if values == {"float16", "bfloat16"}:
                return "float16 or bfloat16"
            return values.pop() if len(values) == 1 else "unknown"
        return "unknown"

    # -- scalers ------------------------------------------------------------------------------------------

    @cached_property
    def scalers(self) -> list[Scaler]:
        source = self.source
        found: list[Scaler] = []
        for ref in source.references_to(SCALERS):
            if ref.call is not None:
                scaler = self._scaler(ref.call, ref.scope, f"`{source.code(ref.call.func)}`")
                scaler.is_grad_scaler = True
                found.append(scaler)
        for call in source.calls:
            if any(s.node is call.node for s in found):
                continue
            wrapper = self._wrapper_class(call)
            if wrapper:
                found.append(self._scaler(call.node, call.scope, wrapper))
        return found + self._scalers_by_use({s.name for s in found})

    def _scalers_by_use(self, known: set[str]) -> list[Scaler]:
        """A scaler handed in (a parameter, `self.scaler` set elsewhere): a name with both `.scale(...)`
        and `.step(...)` called on it (`scaler.scale(loss).backward()` ... `scaler.step(optimizer)`)."""
        found = []
        for name, uses in self._scaler_calls.items():
            if name not in known and "scale" in uses and "step" in uses:
                uses = {method: calls for method, calls in uses.items() if method != "__call__"}
                found.append(Scaler(uses["scale"][0].node, name, "(used as one)", "unknown", uses))
        return found

    @cached_property
    def _scaler_calls(self) -> dict[str, dict[str, list[CallRecord]]]:
        """The calls a scaler would take, by the name they are made on, read once for every scaler:
        `name.scale(...)`, `unscale_`, `step`, `update`, and `name(...)` itself (a wrapper's `__call__`)."""
        found: dict[str, dict[str, list[CallRecord]]] = {}
        for record in self.source.calls:
            func = record.node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _SCALER_METHODS:
                name, method = dotted(func.value), func.attr.value
            else:
                name, method = dotted(func), "__call__"
            if name:
                found.setdefault(name, {}).setdefault(method, []).append(record)
        return found

    def _wrapper_class(self, call: CallRecord) -> str:
        """`NativeScaler()` (timm), `NativeScalerWithGradNormCount()` (MAE, deit): a project class whose
        methods make a GradScaler, or, when the class cannot be read, one named like a scaler."""
        source = self.source
        func = call.node.func
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return ""
        qualname = source.qualname(func, call.scope) or ""
        if qualname in SCALERS or qualname.startswith(("torch.", "sklearn.")):
            return ""  # scikit-learn's `MinMaxScaler`, `StandardScaler`: data normalisation
        name = func.value if isinstance(func, cst.Name) else func.attr.value
        is_named_like_one = name.endswith("Scaler") and name[:1].isupper()
        if not is_named_like_one and not self._may_make_scaler(func, call.scope):
            return ""
        found = source.resolve_class(func, call.scope)
        if found is not None:
            home, cls = found
            analysis = home.analysis(PrecisionAnalysis)
            if any(analysis._makes_scaler(method.calls) for method in cls.methods.values()):
                return f"`{name}` (wraps a GradScaler)"
            return ""
        return f"`{name}` (a scaler class)" if is_named_like_one else ""

    def _may_make_scaler(self, func: cst.BaseExpression, scope: Scope) -> bool:
        """Whether the class `func` names may be a project class whose methods make a GradScaler, judged
        without building other files' facts: only where a file that may define it names one (each of
        SCALERS ends with `GradScaler`, and an import that renames it writes that name too)."""
        project = self.source.project
        return self.source.class_may_be_from(
            func,
            scope,
            lambda home: project is not None and project.may_name(home, ("GradScaler",), self.source.file),
        )

    def _makes_scaler(self, calls: list[CallRecord]) -> bool:
        return any((self.source.qualname(c.node.func, c.scope) or "") in SCALERS for c in calls)

    def _scaler(self, call: cst.Call, scope: Scope, how: str) -> Scaler:
        name = self._assigned_name(call)
        arguments = read_call(self.source, call, scope, Signature(("device",)))
        enabled = "yes"
        given = arguments.get("enabled")
        if given is not None and given.expression is not None:
            known, value = given.constant()
            enabled = ("yes" if value else "no") if known else self.source.code(given.expression)
        uses = self._scaler_calls.get(name, {}) if name else {}
        return Scaler(call, name, how, enabled, {method: list(calls) for method, calls in uses.items()})

    # -- precision supplied another way ---------------------------------------------------------------------

    @cached_property
    def switches(self) -> list[Switch]:
        source = self.source
        found: list[Switch] = []
        for call in source.calls:
            func = call.node.func
            qualname = source.qualname(func, call.scope) or ""
            framework = _framework_of(qualname)
            if framework:
                arguments = read_call(source, call.node, call.scope)
                for keyword in FRAMEWORK_SWITCHES[framework]:
                    if arguments.get(keyword) is not None:
                        found.append(Switch(call.node, f"`{source.code(func)}({keyword}=...)`"))
                        break
                else:
                    if not arguments.complete:  # `Trainer(**cfg)`: it may set precision
                        found.append(Switch(call.node, f"`{source.code(func)}(**...)`, may set precision"))
            elif qualname in _OTHER_MECHANISMS:
                scales = qualname in _SCALING_MECHANISMS
                found.append(Switch(call.node, _OTHER_MECHANISMS[qualname], scales_loss=scales))
            elif isinstance(func, cst.Attribute) and func.attr.value in _HALF_CASTS and not call.node.args:
                cast = _HALF_CASTS[func.attr.value]
                found.append(Switch(call.node, f"cast with `.{func.attr.value}()`", cast))
            elif isinstance(func, cst.Attribute) and func.attr.value == "to":
                for arg in call.node.args:
                    dtype = self.dtype_of(arg.value, call.scope)
                    if dtype in ("float16", "bfloat16", "float16 or bfloat16"):
                        found.append(Switch(call.node, f"cast with `.to({source.code(arg.value)})`", dtype))
        for ref in source.references_to(_OTHER_MECHANISMS):
            if ref.call is None:
                qualname = ref.qualname or ""
                scales = qualname in _SCALING_MECHANISMS
                found.append(Switch(ref.expr, _OTHER_MECHANISMS[qualname], scales_loss=scales))
        found += self._required_dtypes
        return found

    @cached_property
    def _required_dtypes(self) -> list[Switch]:
        """A custom `autograd.Function` that asserts the dtype its tensors must have (RWKV's float32-only
        CUDA kernel: `assert all(i.dtype == torch.float32 for i in [w, q, k])`): the author fixed the
        precision that op runs in, and autocast would hand it bfloat16 activations that fail the assertion.
        An assertion elsewhere (a dataset checking its samples) says nothing about the model's precision."""
        source = self.source
        found: list[Switch] = []
        for cls in source.classes:
            if not any(
                source.qualname(base.value, cls.scope) == "torch.autograd.Function" for base in cls.node.bases
            ):
                continue
            for method in cls.methods.values():
                for node in descendants(method.node.body):
                    if not isinstance(node, cst.Assert):
                        continue
                    required = (self._required_dtype(c, method.scope) for c in descendants(node.test))
                    dtype = next((d for d in required if d), "")
                    if dtype:
                        what = f"`{cls.name}` (a custom autograd.Function) requires {dtype} tensors"
                        found.append(Switch(node, what, dtype))
        return found

    def _required_dtype(self, node: cst.CSTNode, scope: Scope) -> str:
        """`x.dtype == torch.float32` (or `is`, either way round): the dtype required, else ""."""
        if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1:
            return ""
        target = node.comparisons[0]
        if not isinstance(target.operator, (cst.Equal, cst.Is)):
            return ""
        for side, other in ((node.left, target.comparator), (target.comparator, node.left)):
            if isinstance(side, cst.Attribute) and side.attr.value == "dtype":
                return _DTYPES.get(self.source.qualname(other, scope) or "", "")
        return ""

    @cached_property
    def flags(self) -> list[tuple[cst.CSTNode, str]]:
        """Names, attributes and parameters that read like a precision switch (`args.amp`, `use_amp`,
        `args.precision`); a name or parameter `precision` or `half` only when it holds a setting."""
        found: list[tuple[cst.CSTNode, str]] = []
        for ref in self.source.references:
            parts = (ref.name, *ref.attrs)
            if (
                any(_flag_word(part) and not self._other_library(ref, i) for i, part in enumerate(parts))
                or any(_switch_shaped(attr) for attr in ref.attrs)
                or (_switch_shaped(ref.name) and self._holds_a_setting(ref))
            ):
                found.append((ref.expr, f"`{self.source.code(ref.expr)}`"))
        for function in self.source.functions:
            params = function.node.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                name = param.name.value
                if _flag_word(name) or (
                    _switch_shaped(name) and param.default is not None and self._setting(param.default)
                ):
                    found.append((function.node.name, f"parameter `{name}` of `{function.name}`"))
        return found

    def _other_library(self, ref: Reference, index: int) -> bool:
        """The name made of the first `index + 1` parts of `ref` holds only objects of a library that
        shares the words: a scikit-learn scaler (`scaler = MinMaxScaler()`, `self.scaler =
        StandardScaler()`) normalises data, it neither scales a loss nor decides precision."""
        node: cst.BaseExpression = ref.expr
        for _ in range(len(ref.attrs) - index):
            if not isinstance(node, cst.Attribute):
                return False
            node = node.value
        values = self.source.assigned_values(node, ref.scope)
        return bool(values) and all(
            isinstance(v.value, cst.Call)
            and (self.source.qualname(v.value.func, v.scope) or "").startswith("sklearn.")
            for v in values
        )

    def _holds_a_setting(self, ref: Reference) -> bool:
        """A name such as `precision` bound to a setting (a parameter defaulting to one, `precision =
        "bf16"`), not to a computed value (`precision = tp / (tp + fp)`, a metric)."""
        for binding in ref.bindings:
            if binding.kind is BindingKind.PARAM and isinstance(binding.node, cst.Param):
                if binding.node.default is not None and self._setting(binding.node.default):
                    return True
            elif binding.kind is BindingKind.ASSIGN and binding.value is not None:
                if self._setting(binding.value):
                    return True
        return False

    def _setting(self, value: cst.BaseExpression) -> bool:
        """A value a precision switch takes: True/False/None, a precision string ("bf16", "16-mixed"), a
        dtype, or a read of an option or a config entry named like a switch (`args.precision`,
        `cfg["precision"]`)."""
        ok, literal = literal_of(value)
        if ok:
            return (
                literal is None
                or isinstance(literal, bool)
                or (isinstance(literal, (str, int)) and _SETTING_STRING.search(str(literal)) is not None)
            )
        if self.source.qualname(value, self.source.module_scope) in _DTYPES:
            return True
        for node in descendants(value):
            if isinstance(node, cst.Attribute) and (
                _flag_word(node.attr.value) or _switch_shaped(node.attr.value)
            ):
                return True
            if isinstance(node, cst.SimpleString):
                ok, text = literal_of(node)
                if ok and isinstance(text, str) and (_flag_word(text) or _switch_shaped(text)):
                    return True
        return False

    @cached_property
    def evidence(self) -> list[Evidence]:
        """Everything that says this module decided about precision, with what it is (for debug facts)."""
        kind = EvidenceKind
        found = [Evidence(s.node, kind.AUTOCAST, f"autocast ({s.how})") for s in self.autocast_sites]
        found += [Evidence(s.node, kind.SCALER, f"scaler {s.how}", scales_loss=True) for s in self.scalers]
        found += [Evidence(s.node, kind.SWITCH, s.what, s.scales_loss) for s in self.switches]
        for node, what in self.flags:
            scales = _SCALING_WORD.search(what) is not None
            found.append(Evidence(node, kind.FLAG, what, scales_loss=scales))
        return found

    @cached_property
    def decides_for_callers(self) -> bool:
        """The evidence that decides precision for the loops that call into this module: not its autocast
        regions that are switched off (`@autocast("cuda", enabled=False)` around a rotary embedding keeps
        that part float32 when a caller enables autocast: the library expects its callers to)."""
        disabled = {id(site.node) for site in self.autocast_sites if site.enabled == "no"}
        return any(id(found.node) not in disabled for found in self.evidence)

    @cached_property
    def framework_gaps(self) -> list[tuple[cst.Call, cst.BaseExpression, str, str, str]]:
        """Framework objects that train on the GPU when there is one, with no precision switch surely
        passed, in a module that shows no other precision decision: (call, callee, framework, switch,
        value)."""
        if self.evidence:
            return []
        source = self.source
        methods = {c.node.func.attr.value for c in source.calls if isinstance(c.node.func, cst.Attribute)}
        found = []
        for call in source.calls:
            func = call.node.func
            qualname = source.qualname(func, call.scope) or ""
            framework = _framework_of(qualname)
            if not framework or qualname.endswith(("Fabric", "LightningCLI")):
                continue
            arguments = read_call(source, call.node, call.scope)
            if not arguments.complete:
                continue
            if framework == "lightning":
                accelerator = arguments.get("accelerator")
                on_gpu = accelerator is None or accelerator.constant() in (
                    (True, "gpu"),
                    (True, "cuda"),
                    (True, "auto"),
                )
                if "fit" not in methods or not on_gpu or not self._fits(call.node):
                    continue
                found.append((call.node, func, framework, "precision", '"bf16-mixed"'))
            elif framework == "accelerate":
                if self._may_ask_for_cpu(arguments.get("cpu"), call.scope) or "backward" not in methods:
                    continue
                found.append((call.node, func, framework, "mixed_precision", '"bf16"'))
            elif qualname.endswith("TrainingArguments") or qualname.startswith("trl."):
                if any(self._may_ask_for_cpu(arguments.get(k), call.scope) for k in ("use_cpu", "no_cuda")):
                    continue
                found.append((call.node, func, framework, "bf16", "True"))
        return found

    def _may_ask_for_cpu(self, switch: Argument | None, scope: Scope) -> bool:
        """A framework's CPU switch (`Accelerator(cpu=)`, `TrainingArguments(use_cpu=, no_cuda=)`) that may be
        on as the script runs by default; one off unless asked (`cpu=False`, a parameter defaulting to
        False run by fire, a store_true option) leaves the GPU in use, as device placement reads it."""
        return switch is not None and not off_unless_asked(self.source, switch, scope)

    def _fits(self, trainer: cst.Call) -> bool:
        """A Lightning `Trainer(...)` that trains: `.fit(...)` is called on it (also chained), or on the
        name holding it before that name holds another Trainer (a tutorial's last `trainer =
        pl.Trainer(...)` may only `validate`). A Trainer the module hands on is given the benefit."""
        source = self.source
        name = self._assigned_name(trainer)
        fits = [
            c.node
            for c in source.calls
            if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "fit"
        ]
        if any(fit.func.value is trainer for fit in fits):  # type: ignore[attr-defined]
            return True
        if not name:
            return True
        held = [
            c.node
            for c in source.calls
            if self._assigned_name(c.node) == name
            and _framework_of(source.qualname(c.node.func, c.scope) or "")
        ]
        start = source.span(trainer)[0]
        end = min(
            (source.span(other)[0] for other in held if source.span(other)[0] > start),
            default=len(source.text),
        )
        return any(
            dotted(fit.func.value) == name and start < source.span(fit)[0] < end  # type: ignore[attr-defined]
            for fit in fits
        )

    # -- what TL301 asks of one training loop ---------------------------------------------------------------

    def decided_for(self, loop: LoopRecord) -> bool:
        """This module, a module the loop calls into, or a module that calls into this one decides about
        precision (any evidence at all)."""
        if self.evidence:
            return True
        source = self.source
        for call in loop.all_calls():
            target = source.callee(call)
            other = target[0] if target is not None else source
            if other is not source and other.analysis(PrecisionAnalysis).decides_for_callers:
                return True
        importers = self.source.analysis(CallerAnalysis).importers()
        return any(other.analysis(PrecisionAnalysis).evidence for other in importers)

    def framework_owns(self, loop: LoopRecord) -> bool:
        """A framework decides the loop's precision: the module makes a Lightning `Trainer`/`Fabric` or an
        accelerate `Accelerator` (whose switch TL301 names), or the loop's backward pass is a framework
        object's (`accelerator.backward(loss)`, `fabric.backward(loss)`, the object made elsewhere). Only
        importing a framework (`pl.seed_everything(42)`) hands it no loop."""
        if self._makes_framework_object:
            return True
        for call in loop.all_calls():
            func = call.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "backward" and call.node.args:
                if isinstance(func.value, cst.Name) and func.value.value in ("accelerator", "fabric"):
                    return True
                if _framework_of(self._type_of(func.value, call.scope)):
                    return True
        return False

    @cached_property
    def _makes_framework_object(self) -> bool:
        source = self.source
        return any(_framework_of(source.qualname(c.node.func, c.scope) or "") for c in source.calls)

    def _type_of(self, expr: cst.BaseExpression, scope: Scope) -> str:
        """The annotated class of a parameter (`accelerator: Accelerator`), as a qualified name."""
        if not isinstance(expr, cst.Name):
            return ""
        function = self.source.function_of_scope(scope)
        if function is None:
            return ""
        for param in function.node.params.params:
            if param.name.value == expr.value and param.annotation is not None:
                return self.source.qualname(param.annotation.annotation, function.scope) or ""
        return ""

    def runs_over_rpc(self, loop: LoopRecord) -> bool:
        """The loop's backward pass is distributed autograd's (`dist_autograd.backward(context_id, [loss])`):
        the model runs on RPC workers, which this thread's autocast state (thread-local) does not reach."""
        source = self.source
        return any(
            source.qualname(call.node.func, call.scope) == "torch.distributed.autograd.backward"
            for call in loop.all_calls()
        )

    @cached_property
    def unsafe_under_autocast(self) -> str:
        """An op that raises under CUDA autocast, used in this module: the reason a fix is not offered."""
        source = self.source
        for qualname, replacement in (
            ("torch.nn.BCELoss", "`nn.BCEWithLogitsLoss`"),
            ("torch.nn.modules.loss.BCELoss", "`nn.BCEWithLogitsLoss`"),
            ("torch.nn.functional.binary_cross_entropy", "`F.binary_cross_entropy_with_logits`"),
        ):
            if source.references_to({qualname}):
                name = qualname.rsplit(".", 1)[1]
                return (
                    f"`{name}` raises under CUDA autocast; use {replacement} on the logits instead, "
                    "then autocast"
                )
        log = self._log_of_a_probability
        if log:
            return (
                f"a hand-written log of a probability (`{log}`) loses every confident prediction under "
                "autocast: bfloat16 rounds a sigmoid near 1 to 1, and log(1 - 1) is -inf; compute it from "
                "the logits (`F.binary_cross_entropy_with_logits`, `F.logsigmoid`), then autocast"
            )
        norm = self._batch_norm_with_computed_weights
        if norm:
            return (
                f"`F.batch_norm(...)` is given computed weights (`{norm}`) with running statistics: under "
                "autocast the weights come in bfloat16 and the float32 statistics make it raise"
            )
        for cls in source.classes:
            bases = {source.qualname(base.value, cls.scope) for base in cls.node.bases}
            if "torch.autograd.Function" not in bases:
                continue
            forward = cls.methods.get("forward")
            decorated = forward is not None and any(
                (
                    dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or ""
                ).endswith("custom_fwd")
                for d in forward.node.decorators
            )
            if not decorated:
                return (
                    f"the custom `autograd.Function` `{cls.name}` has no `@torch.amp.custom_fwd`; decorate "
                    'its forward with `@torch.amp.custom_fwd(device_type="cuda")` (and its backward with '
                    "`custom_bwd`), then autocast"
                )
        return ""

    @cached_property
    def _log_of_a_probability(self) -> str:
        """A log the code writes by hand of a sigmoid or of one minus a probability (`torch.log(1 -
        torch.sigmoid(x))`, `torch.log(p)` with `p = torch.sigmoid(x)`, `(1 - p).log()`, `torch.log1p(-p)`,
        a project `log` helper around `torch.log`), as written; "" when there is none. Under autocast the
        sigmoid (or the model's last `nn.Sigmoid`) runs in bfloat16, whose spacing below 1 is 2^-8: every
        probability above about 0.998 becomes 1 (autocast refuses `binary_cross_entropy` for this reason).
        A log under `torch.no_grad()` (GAIL's reward from its discriminator) trains nothing: not counted."""
        source = self.source
        grad_free = grad_free_calls(source.module)  # a reward computed under `no_grad` is no loss
        for call in source.calls:
            operand = None if id(call.node) in grad_free else self._log_operand(call)
            if operand is None:
                continue
            if _probability_complement(operand, negated=_last_name(call.node.func) == "log1p"):
                return source.code(call.node)
            if self._holds_a_sigmoid(operand, call.scope, depth=2):
                return source.code(call.node)
        return ""

    def _log_operand(self, call: CallRecord) -> cst.BaseExpression | None:
        """What a tensor log takes: the argument of `torch.log(x)` (or of a project function wrapping
        `torch.log`), the receiver of `x.log()`; None for other calls (`math.log`, `np.log`, Lightning's
        `self.log("loss", loss)` takes a name first)."""
        source = self.source
        func = call.node.func
        last = _last_name(func)
        if last not in _LOGS:
            return None
        qualname = source.qualname(func, call.scope) or ""
        positional = [arg.value for arg in call.node.args if arg.keyword is None and not arg.star]
        if qualname.startswith("torch."):
            return positional[0] if positional else None
        if qualname.split(".")[0] in ("math", "numpy", "np", "cmath", "scipy", "jax"):
            return None
        target = source.callee(call)
        if target is not None:  # a helper: `log(t, eps)` returning `torch.log(t.clamp(min=eps))`
            home, function = target
            wraps = any((home.qualname(c.node.func, c.scope) or "") in _TORCH_LOGS for c in function.calls)
            return positional[0] if wraps and positional else None
        if isinstance(func, cst.Attribute) and not call.node.args:
            return func.value  # `(1 - p).log()`
        return None

    def _holds_a_sigmoid(self, node: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        """`node` computes a sigmoid: `torch.sigmoid(x)`, `x.sigmoid()`, `self.sigmoid(x)`, or a name that
        is assigned one (`depth` assignments deep)."""
        for inner in descendants(node):
            if isinstance(inner, cst.Call) and _last_name(inner.func) in _SIGMOIDS:
                return True
            if depth and isinstance(inner, cst.Name):
                for value in self.source.assigned_values(inner, scope):
                    if value.value is not node and self._holds_a_sigmoid(value.value, value.scope, depth - 1):
                        return True
        return False

    @cached_property
    def _batch_norm_with_computed_weights(self) -> str:
        """A `F.batch_norm(...)` / `F.instance_norm(...)` given running statistics and a weight or bias
        that is no parameter (MUNIT's AdaIN: `self.weight = None`, assigned from an MLP's output;
        conditional batch norm: `weight=gamma`), as written; "" when there is none. Under autocast such
        weights come from a bfloat16 matmul, and `batch_norm` refuses them beside float32 statistics."""
        source = self.source
        for call in source.calls:
            qualname = source.qualname(call.node.func, call.scope) or ""
            if qualname not in _BATCH_NORMS:
                continue
            arguments = read_call(source, call.node, call.scope, _BATCH_NORM_SIGNATURE)
            statistics = arguments.get("running_mean")
            if statistics is None or statistics.expression is None or _is_none(statistics.expression):
                continue
            for name in ("weight", "bias"):
                given = arguments.get(name)
                if given is None or given.expression is None:
                    continue
                if not self._parameter_or_none(given.expression, call.scope):
                    return source.code(given.expression)
        return ""

    def _parameter_or_none(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`expr` is `None` or a module's parameter: a name or `self.x` assigned `nn.Parameter(...)` (or
        None besides), or `self.weight` that the class never assigns (inherited from `nn.BatchNorm2d`)."""
        if _is_none(expr):
            return True
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return False
        values = self.source.assignments(expr, scope)
        if values is None:
            return False  # a parameter of the function (`gamma`), a loop variable: computed, as far as known
        if not values:
            return isinstance(expr, cst.Attribute) and self._inherits_a_layer(scope)
        kinds = [self._parameter_kind(value.value, value.scope) for value in values]
        return "computed" not in kinds and "parameter" in kinds

    def _inherits_a_layer(self, scope: Scope) -> bool:
        """The method's class extends a layer (`nn.BatchNorm2d`, a project norm class), not `nn.Module`
        itself: the `self.weight` it never assigns is the base's parameter."""
        owner = self.source.class_of_method_scope(scope)
        if owner is None:
            return False
        bases = [self.source.qualname(base.value, owner[0].scope) for base in owner[0].node.bases]
        return bool(bases) and all(base not in _PLAIN_MODULES for base in bases)

    def _parameter_kind(self, value: cst.BaseExpression, scope: Scope) -> str:
        if _is_none(value):
            return "none"
        if isinstance(value, cst.IfExp):
            kinds = {self._parameter_kind(value.body, scope), self._parameter_kind(value.orelse, scope)}
            return "computed" if "computed" in kinds else ("parameter" if "parameter" in kinds else "none")
        if isinstance(value, cst.Call) and (self.source.qualname(value.func, scope) or "") in _PARAMETERS:
            return "parameter"
        return "computed"


_LOGS = frozenset({"log", "log2", "log10", "log1p", "log_", "log1p_"})
_TORCH_LOGS = frozenset(f"torch.{name}" for name in ("log", "log2", "log10", "log1p", "special.log1p"))
_SIGMOIDS = frozenset({"sigmoid", "sigmoid_", "expit"})
_BATCH_NORMS = frozenset(
    {"torch.nn.functional.batch_norm", "torch.batch_norm", "torch.nn.functional.instance_norm"}
)
_BATCH_NORM_SIGNATURE = Signature(("input", "running_mean", "running_var", "weight", "bias"))
_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_PLAIN_MODULES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", None})


def _last_name(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _probability_complement(node: cst.BaseExpression, negated: bool) -> bool:
    """`1 - p` (or `1.0 - p`) inside `node`, or for `log1p` a negated operand (`torch.log1p(-p)`)."""
    if negated and isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return True
    return any(
        isinstance(inner, cst.BinaryOperation)
        and isinstance(inner.operator, cst.Subtract)
        and isinstance(inner.left, (cst.Integer, cst.Float))
        and float(inner.left.value) == 1.0
        for inner in descendants(node)
    )


def _flag_word(identifier: str) -> bool:
    """`identifier` holds a word of a precision switch (`args.amp`, `loss_scaler`, `mixed_precision`)."""
    if _FLAG_WORD.search(identifier):
        return True
    if not _MIXED.search(identifier):
        return False
    parts = [part for part in identifier.lower().split("_") if part]
    return "precision" in parts or all(
        part == "mixed" or part in _AMBIGUOUS_WORDS or part in _SWITCH_PARTS for part in parts
    )


def _switch_shaped(identifier: str) -> bool:
    """`precision`, `half`, `use_half`, `precision_mode`: made of an ambiguous precision word and the parts
    of a switch's name only (not `precision_curve`, `half_res`)."""
    parts = [part for part in identifier.lower().split("_") if part]
    return any(part in _AMBIGUOUS_WORDS for part in parts) and all(
        part in _AMBIGUOUS_WORDS or part in _SWITCH_PARTS for part in parts
    )


def _framework_of(qualname: str) -> str:
    root = qualname.split(".")[0]
    lightning = qualname.endswith(("Trainer", "Fabric", "LightningCLI"))
    if root in ("lightning", "pytorch_lightning") and lightning:
        return "lightning"
    if root == "accelerate" and qualname.endswith("Accelerator"):
        return "accelerate"
    if root in ("transformers", "trl") and qualname.endswith(("TrainingArguments", "Config")):
        return "transformers"
    return ""


# A way down from a step's root to a statement: each block on the way, with the index of the statement in it.
_BlockPath = list[tuple["cst.Module | cst.IndentedBlock", int]]


def _block_path(root: cst.CSTNode, target: cst.CSTNode) -> _BlockPath:
    """The blocks from `root`'s body down to the innermost one whose statement holds `target`, each with
    the index of the statement on the way (an `elif` is no block of its own; a one-line suite is not
    entered). Empty when `target` is not under `root`."""
    if isinstance(root, (cst.Module, cst.IndentedBlock)):
        for index, statement in enumerate(root.body):
            if contains(statement, target):
                inner = (
                    [] if isinstance(statement, cst.SimpleStatementLine) else _block_path(statement, target)
                )
                return [(root, index), *inner]
        return []
    parts = (cst.BaseSuite, cst.BaseStatement, cst.Else, cst.ExceptHandler, cst.Finally)  # not the header
    for child in child_nodes(root):
        if isinstance(child, parts) and contains(child, target):
            return _block_path(child, target)
    return []


def _shared_place(
    step_path: _BlockPath, paths: list[_BlockPath]
) -> tuple[cst.Module | cst.IndentedBlock, int, int] | None:
    """Where one statement before every clip runs once per step and only where the step follows: the
    block, the index of the statement to go before, and the block's depth; None when a clip is not in
    the step's own block (or a branch inside it) before the step, or the step is not a line of its own.
    The deepest block that holds every clip, unless a loop lies on the way to it: then before that loop."""
    level = len(step_path) - 1  # the depth of the step's own block
    if not step_path or not isinstance(_statement_at(step_path[-1]), cst.SimpleStatementLine):
        return None
    block, at_step = step_path[level]
    if any(len(path) <= level or path[level][0] is not block or path[level][1] >= at_step for path in paths):
        return None
    depth = level
    while all(len(path) > depth + 1 and path[depth + 1][0] is paths[0][depth + 1][0] for path in paths):
        depth += 1
    for at in range(level, depth):
        if isinstance(_statement_at(paths[0][at]), (cst.For, cst.While)):
            depth = at
            break
    return paths[0][depth][0], min(path[depth][1] for path in paths), depth


def _on_the_way(step_path: _BlockPath, path: _BlockPath, depth: int, index: int) -> list[cst.CSTNode]:
    """The statements that run between the statement `index` of `path`'s block at `depth` (it included)
    and the step, and the handlers of a `try` around it."""
    level = len(step_path) - 1
    block = path[depth][0]
    following: list[cst.CSTNode] = [*block.body[index : step_path[level][1] if depth == level else None]]
    for at in range(depth - 1, level - 1, -1):
        outer, where = path[at]
        following.extend(outer.body[where + 1 : step_path[level][1] if at == level else None])
        around = outer.body[where]
        if isinstance(around, (cst.Try, cst.TryStar)):  # an `except: continue` around the clip
            following.extend(n for n in (*around.handlers, around.orelse, around.finalbody) if n is not None)
    return following


def _statement_at(place: tuple[cst.Module | cst.IndentedBlock, int]) -> cst.BaseStatement:
    """The statement at a place of a path."""
    block, index = place
    return block.body[index]


def _may_leave(node: cst.CSTNode, in_loop: bool = False) -> bool:
    """A `return` in `node`, or a `continue`/`break` of the loop around it (not of a loop inside it)."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return False
    if isinstance(node, cst.Return) or (isinstance(node, (cst.Continue, cst.Break)) and not in_loop):
        return True
    if isinstance(node, cst.BaseExpression):
        return False
    inner = in_loop or isinstance(node, (cst.For, cst.While))
    return any(_may_leave(child, inner) for child in child_nodes(node))


def _withs(node: cst.CSTNode):
    return (found for found in statements(node) if isinstance(found, cst.With))


def _blocks(node: cst.CSTNode):
    return (found for found in statements(node) if isinstance(found, cst.IndentedBlock))


__all__ = [
    "AutocastSite",
    "BackwardInAutocast",
    "ClipWithoutUnscale",
    "Evidence",
    "EvidenceKind",
    "PrecisionAnalysis",
    "Scaler",
    "ScalerPlan",
    "Switch",
]


def _starts_in(source: SourceModule, function: FunctionRecord | None) -> Callable[[cst.CSTNode], float]:
    """Where the calls of `function` (of the module, for None) start, in the order of the text: offsets would
    render the whole function to compare a few calls."""
    return source.text_order(function.node if function is not None else None).start
