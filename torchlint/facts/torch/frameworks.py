"""Frameworks that own the training loop — Lightning, Hugging Face (transformers, trl), accelerate — in one
place: what each says about the loader, the loop and the device, in the terms the rest of the model uses.

- Lightning iterates a module's `train_dataloader()` and the loaders given to `trainer.fit(...)` every epoch,
  and trains the module given to it;
  its `Trainer` picks the GPU when there is one unless told `accelerator="cpu"` (`LightningCLI` and
  `Fabric` too).
- Hugging Face's `Trainer` builds its own DataLoader from `TrainingArguments(dataloader_*=...)`.
- accelerate's `Accelerator()` places the model on the GPU when there is one (unless `cpu=True`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Argument, Signature, read_call
from torchlint.facts.syntax.names import BindingKind, Scope
from torchlint.facts.syntax.values import is_false_constant
from torchlint.facts.torch.loaders import Loader
from torchlint.facts.torch.vocabulary import Device

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord, FunctionRecord
    from torchlint.facts.syntax.module import SourceModule

_ROOTS = {
    "pytorch_lightning": "lightning",
    "lightning": "lightning",
    "transformers": "transformers",
    "accelerate": "accelerate",
    "trl": "transformers",
}


def frameworks(source: SourceModule) -> frozenset[str]:
    """Frameworks imported at module level: lightning, transformers, accelerate."""
    roots = {
        (b.qualname or "").lstrip(".").split(".")[0]
        for bindings in source.module_scope.bindings.values()
        for b in bindings
        if b.kind is BindingKind.IMPORT
    }
    return frozenset(_ROOTS[r] for r in roots if r in _ROOTS)


def training_arguments(source: SourceModule) -> list[Loader]:
    """`TrainingArguments(...)` calls (Hugging Face, trl): their `dataloader_*` arguments configure the
    loader the Trainer builds, so they are represented like a loader whose options are those arguments."""
    found = []
    for call in source.calls:
        qualname = source.qualname(call.node.func, call.scope) or ""
        if qualname.startswith(("transformers.", "trl.")) and qualname.endswith(
            ("TrainingArguments", "Config")
        ):
            arguments = read_call(source, call.node, call.scope)
            found.append(Loader(call.node, call.scope, qualname, arguments, source.code(call.node.func)))
    return found


def lightning_train_dataloaders(source: SourceModule) -> Iterator[FunctionRecord]:
    """`train_dataloader()` methods: Lightning iterates what they return every epoch. Also a method bound
    to that name as an attribute (`self.train_dataloader = self._train_dataloader`)."""
    for function in source.functions:
        if function.owner is not None and function.name == "train_dataloader":
            yield function
    for cls in source.classes:
        for value, scope in cls.attributes.get("train_dataloader", []):
            if isinstance(value, cst.Attribute) and source.is_self_attribute(value, scope):
                method = cls.methods.get(value.attr.value)
                if method is not None and method.name != "train_dataloader":
                    yield method


FIT = Signature(("model", "train_dataloaders", "val_dataloaders", "datamodule", "ckpt_path"))


def fit_loaders(source: SourceModule) -> Iterator[tuple[CallRecord, cst.BaseExpression]]:
    """`trainer.fit(model, train_loader)` (also `train_dataloaders=`): the loaders it trains on."""
    for call in source.calls:
        func = call.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "fit" and len(call.node.args) >= 2):
            continue
        arguments = read_call(source, call.node, call.scope, FIT)
        for name in ("train_dataloaders", "train_dataloader"):
            argument = arguments.get(name)
            if argument is not None and argument.expression is not None:
                yield call, argument.expression


def lightning_fits(source: SourceModule) -> Iterator[tuple[CallRecord, cst.BaseExpression]]:
    """`trainer.fit(model, ...)` on a Lightning `Trainer`: the module it trains (first argument or
    `model=`)."""
    for call in source.calls:
        func = call.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "fit" and call.node.args):
            continue
        if not any(
            _is_lightning_trainer(source, a.value, a.scope)
            for a in source.assigned_values(func.value, call.scope)
        ):
            continue
        model = read_call(source, call.node, call.scope, FIT).get("model")
        if model is not None and model.expression is not None:
            yield call, model.expression


def _is_lightning_trainer(source: SourceModule, value: cst.BaseExpression, scope: Scope) -> bool:
    callee = source.qualname(value.func, scope) if isinstance(value, cst.Call) else None
    return (
        bool(callee)
        and callee.split(".")[0] in ("lightning", "pytorch_lightning")
        and callee.endswith("Trainer")
    )


def placement(source: SourceModule, call: cst.Call, callee: str, scope: Scope) -> tuple[Device, str] | None:
    """The device a framework object created by `call` trains on, with the reason (None: not one)."""
    if callee.startswith("accelerate.") and callee.endswith("Accelerator"):
        cpu = read_call(source, call, scope).get("cpu")
        return (
            Device.UNKNOWN
            if cpu is not None and not off_unless_asked(source, cpu, scope)
            else Device.CUDA_WHEN_AVAILABLE
        ), "`Accelerator()` (the GPU when there is one)"
    if callee.split(".")[0] in ("lightning", "pytorch_lightning", "lightning_fabric"):
        if callee.endswith("LightningCLI"):
            return Device.CUDA_WHEN_AVAILABLE, "`LightningCLI` (accelerator auto)"
        if callee.endswith("Trainer"):
            return _lightning_trainer(source, call, scope), "Lightning `Trainer(...)`"
        if callee.endswith(".Fabric"):  # the same `accelerator=` choice, "auto" by default
            return _lightning_trainer(source, call, scope), "Lightning `Fabric(...)`"
    return None


def off_unless_asked(source: SourceModule, switch: Argument, scope: Scope) -> bool:
    """A switch that is off as the script runs by default: `False` written out, or a parameter or argparse
    option whose default is off (`def train(cpu=False)` run by `fire`, `--cpu` with `action="store_true"`):
    options are judged by their defaults, as everywhere else."""
    expr = switch.value.node
    if switch.value.is_literal:
        return not switch.value.literal
    if isinstance(expr, cst.Name):
        bindings = scope.lookup(expr.value)
        return bool(bindings) and all(
            b.kind is BindingKind.PARAM
            and isinstance(b.node, cst.Param)
            and b.node.default is not None
            and is_false_constant(b.node.default)
            for b in bindings
        )
    if isinstance(expr, cst.Attribute) and source.argparse_option(expr.attr.value) is not None:
        default = source.argparse_default(expr.attr.value)
        return default is None or is_false_constant(default)  # store_true: off unless given
    return False


def is_accelerator_device(source: SourceModule, expr: cst.Attribute) -> bool:
    """`accelerator.device`: accelerate picks the GPU when there is one."""
    return expr.attr.value == "device" and "accelerator" in source.code(expr.value).lower()


def _lightning_trainer(source: SourceModule, call: cst.Call, scope: Scope) -> Device:
    """Lightning's Trainer picks the GPU when there is one, unless told `accelerator="cpu"`."""
    accelerator = read_call(source, call, scope).get("accelerator")
    if accelerator is None:
        return Device.CUDA_WHEN_AVAILABLE
    known, value = accelerator.constant()
    if not known:
        return Device.UNKNOWN
    if value in ("gpu", "cuda"):
        return Device.CUDA
    return Device.CUDA_WHEN_AVAILABLE if value == "auto" else Device.CPU
