"""What a loader loads, and whether worker processes could load it.

- The dataset's kind: map-style, an `IterableDataset` (sharded by `get_worker_info()` or not: an unsharded
  one yields every sample once per worker), or an in-memory `TensorDataset` (workers only add overhead).
- Whether the dataset, `collate_fn` and `worker_init_fn` pickle: a lambda or a function/class defined inside
  another function does not, and worker processes started by spawn or forkserver (macOS, Windows, and the
  Linux default from Python 3.14) need to pickle them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.collect import ClassRecord
from torchlint.facts.syntax.names import BindingKind, Scope, ScopeKind
from torchlint.facts.torch.devices import DeviceAnalysis
from torchlint.facts.torch.vocabulary import DatasetKind

if TYPE_CHECKING:
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.torch.loaders import Loader

_ITERABLE = {"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"}
_MAP = {"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"}
_TENSOR = {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
_MAP_LIBRARIES = ("torchvision.datasets.", "datasets.")


@dataclass(frozen=True)
class Unpicklable:
    what: str  # "collate_fn", "dataset"
    why: str  # "a lambda", "`collate` is defined inside `main`"


class DatasetAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    def kind(self, loader: Loader) -> DatasetKind:
        dataset = _dataset(loader)
        return self.kind_of(dataset, loader.scope) if dataset is not None else DatasetKind.UNKNOWN

    def kind_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> DatasetKind:
        if depth > 6:
            return DatasetKind.UNKNOWN
        if isinstance(expr, (cst.Name, cst.Attribute)):  # a variable, `self.train_set`
            kinds = {
                self.kind_of(a.value, a.scope, depth + 1)
                for a in self.source.assigned_values(expr, scope)
                if a.index is None
            }
            return kinds.pop() if len(kinds) == 1 else DatasetKind.UNKNOWN
        if not isinstance(expr, cst.Call):
            return DatasetKind.UNKNOWN
        return self.class_kind(expr.func, scope, depth)

    def class_kind(self, func: cst.BaseExpression, scope: Scope, depth: int = 0) -> DatasetKind:
        qualname = self.source.qualname(func, scope) or ""
        if qualname in _TENSOR:
            return DatasetKind.TENSOR
        if qualname in _ITERABLE:
            return DatasetKind.ITERABLE
        if qualname in _MAP or qualname.startswith(_MAP_LIBRARIES):
            return DatasetKind.MAP
        found = self.source.resolve_class(func, scope)
        if found is None or depth > 6:
            return DatasetKind.UNKNOWN
        home, cls = found
        analysis = home.analysis(DatasetAnalysis)
        for base in cls.node.bases:
            kind = analysis.class_kind(base.value, cls.scope, depth + 1)
            if kind is DatasetKind.ITERABLE:
                return DatasetKind.ITERABLE_SHARDED if analysis._shards(cls) else kind
            if kind is not DatasetKind.UNKNOWN:
                return kind
        if "__getitem__" in cls.methods:
            return DatasetKind.MAP
        return DatasetKind.UNKNOWN

    def _shards(self, cls: ClassRecord) -> bool:
        """Does the class consult `get_worker_info()` (in `__iter__` or anything it calls)?"""
        for method in cls.methods.values():
            for call in method.calls:
                name = self.source.qualname(call.node.func, call.scope) or self.source.code(call.node.func)
                if name.endswith("get_worker_info"):
                    return True
        return False

    def samples_on_cpu(self, loader: Loader) -> bool | None:
        """True when the dataset's class is known and never moves samples to a device (pinning is safe);
        False when it does (`.cuda()`/`.to(device)` in its methods: pinning would raise); None: unknown."""
        dataset = _dataset(loader)
        return self._class_on_cpu(dataset, loader.scope) if dataset is not None else None

    def _class_on_cpu(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool | None:
        if depth > 4:
            return None
        if isinstance(expr, cst.Name):
            values = self.source.assigned_values(expr, scope)
            if len(values) == 1 and values[0].index is None:
                return self._class_on_cpu(values[0].value, values[0].scope, depth + 1)
            return None
        if not isinstance(expr, cst.Call):
            return None
        found = self.source.resolve_class(expr.func, scope)
        if found is None:
            return None
        home, cls = found
        devices = home.analysis(DeviceAnalysis)
        for method in cls.methods.values():
            for call in method.calls:
                func = call.node.func
                if not isinstance(func, cst.Attribute):
                    continue
                if func.attr.value == "cuda":
                    return False
                if func.attr.value == "to" and call.node.args:
                    target = call.node.args[0].value
                    if devices.device_of(target, call.scope).may_be_cuda:
                        return False
                    if "device" in home.code(target).lower():
                        return False
        return True

    # -- pickling ----------------------------------------------------------------------------------------

    def unpicklable(self, loader: Loader) -> list[Unpicklable]:
        found = []
        for name in ("dataset", "collate_fn", "worker_init_fn", "sampler", "batch_sampler"):
            option = loader.option(name)
            passed = option.expression if option is not None else None
            if passed is None:
                continue
            why = self._why_unpicklable(passed, loader.scope)
            if why:
                found.append(Unpicklable(name, why))
        return found

    def _why_unpicklable(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
        if isinstance(expr, cst.Lambda):
            return "a lambda"
        if depth > 4:
            return None
        if isinstance(expr, cst.Call):
            callee = self.source.qualname(expr.func, scope) or ""
            if callee == "functools.partial" and expr.args:
                return self._why_unpicklable(expr.args[0].value, scope, depth + 1)
            local = self.source.local_class(expr.func, scope)
            if local is not None and local.scope.kind is ScopeKind.FUNCTION:
                return f"an instance of `{local.name}`, a class defined inside a function"
            for arg in expr.args:  # `MNIST(root, transform=transforms.Lambda(lambda x: x.mul(255)))`
                if arg.keyword is not None and "transform" in arg.keyword.value.lower():
                    inner = self._in_transform(arg.value, scope, depth + 1)
                    if inner:
                        return f"built with {inner} in its `{arg.keyword.value}`"
            return None
        if isinstance(expr, cst.Name):
            return self._through_name(expr, scope, depth, self._why_unpicklable)
        return None

    def _through_name(self, name: cst.Name, scope: Scope, depth: int, follow) -> str | None:
        """A name that is a function defined inside a function, or that was assigned something `follow`
        finds unpicklable."""
        for binding in scope.lookup(name.value):
            if binding.kind is BindingKind.DEF and binding.scope.kind is ScopeKind.FUNCTION:
                return f"`{name.value}`, a function defined inside a function"
            if binding.kind is BindingKind.ASSIGN and binding.value is not None and binding.index is None:
                found = follow(binding.value, binding.scope, depth + 1)
                if found:
                    return found
        return None

    def _in_transform(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> str | None:
        """A lambda or a function defined inside a function, somewhere in a transform pipeline
        (`Compose([ToTensor(), Lambda(lambda x: x.mul(255))])`, also through the name it is bound to)."""
        if depth > 6:
            return None
        if isinstance(expr, cst.Lambda):
            return "a lambda"
        parts: list[cst.BaseExpression] = []
        if isinstance(expr, (cst.List, cst.Tuple)):
            parts = [element.value for element in expr.elements]
        elif isinstance(expr, cst.Call):
            named = self.source.qualname(expr.func, scope) or self.source.code(expr.func)
            callee = named.rpartition(".")[2].lower()
            if any(word in callee for word in ("compose", "lambda", "transform", "sequential")):
                parts = [arg.value for arg in expr.args]
        if isinstance(expr, (cst.List, cst.Tuple, cst.Call)):
            return next(filter(None, (self._in_transform(part, scope, depth + 1) for part in parts)), None)
        if isinstance(expr, cst.Name):
            return self._through_name(expr, scope, depth, self._in_transform)
        return None


def _dataset(loader: Loader) -> cst.BaseExpression | None:
    """The dataset expression passed in the loader call itself (not through a `**` dict)."""
    option = loader.option("dataset")
    return option.expression if option is not None else None
