"""What a loader loads, and whether worker processes could load it.

- The dataset's kind: map-style, an `IterableDataset` (sharded by `get_worker_info()` or not: an unsharded
  one yields every sample once per worker), or an in-memory `TensorDataset` (workers only add overhead).
- Whether the dataset, `collate_fn` and `worker_init_fn` pickle: a lambda or a function/class defined inside
  another function does not, and worker processes started by spawn or forkserver (macOS, Windows, and the
  Linux default from Python 3.14) need to pickle them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import passed_for
from torchlint.facts.syntax.collect import CallRecord, ClassRecord, FunctionRecord
from torchlint.facts.syntax.module import is_docstring
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
# Hugging Face `datasets`: the loaders of tables, what keeps a table a table, what makes rows work.
_HF_LOADERS = {"datasets.load_dataset", "datasets.load_from_disk"}
_HF_CLASSES = ("datasets.Dataset", "datasets.DatasetDict", "datasets.arrow_dataset.Dataset")
_HF_TABLES = (DatasetKind.HF_ROWS, DatasetKind.HF_TABLE)
# Parts of a dataset, of its kind.
_SPLITS = {"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"}
_SUBSETS = {"torch.utils.data.Subset", "torch.utils.data.dataset.Subset"}
MAX_HOPS = 12  # names, subscripts and table methods followed from a loader to what built its dataset
_TABLE_METHODS = {
    "map", "filter", "shuffle", "select", "remove_columns", "rename_column", "rename_columns", "with_format",
    "train_test_split", "shard", "flatten", "sort", "select_columns", "cast_column",
}  # fmt: skip
_ROW_TRANSFORMS = {"set_transform", "with_transform"}
# Calls that build a sequence of integers: a loader over one only batches indices.
_INDICES = {
    "range",
    "torch.arange",
    "torch.randperm",
    "numpy.arange",
    "numpy.random.permutation",
}


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
        if depth > MAX_HOPS:
            return DatasetKind.UNKNOWN
        if isinstance(expr, (cst.Name, cst.Attribute)):  # a variable, `self.train_set`
            values = (
                self.source.reaching_values(expr, scope)
                if isinstance(expr, cst.Name)
                else self.source.assigned_values(expr, scope)
            )
            # `ds = ds.map(f)` rebinds the same table: decided by the other bindings when there are some
            values = [a for a in values if not _table_rebind(expr, a.value)] or values
            kinds = {
                self.kind_of(a.value, a.scope, depth + 1)
                if a.index is None
                else self._unpacked_kind(a.value, a.scope, a.index, depth)
                for a in values
            }
            if not kinds and isinstance(expr, cst.Name):
                kinds = self._passed_kinds(expr.value, scope, depth)
            return kinds.pop() if len(kinds) == 1 else DatasetKind.UNKNOWN
        if _integer_list(expr):
            return DatasetKind.INDICES
        if isinstance(expr, cst.Subscript):  # `tokenized["train"]`
            inner = self.kind_of(expr.value, scope, depth + 1)
            return inner if inner in _HF_TABLES else DatasetKind.UNKNOWN
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method in _TABLE_METHODS:  # `raw.map(tokenize, batched=True)`, `tokenized.shuffle()`
                inner = self.kind_of(expr.func.value, scope, depth + 1)
                if inner in _HF_TABLES:
                    return DatasetKind.HF_TABLE if method == "map" else inner
        if not isinstance(expr, cst.Call):
            return DatasetKind.UNKNOWN
        callee = self.source.qualname(expr.func, scope)
        if callee in _INDICES:
            return DatasetKind.INDICES
        if callee in _HF_LOADERS or (callee or "").startswith(_HF_CLASSES):
            # As loaded, a table's rows may be decoded as they are read (an `Image` column); `.map(...)`
            # prepares them up front, unless a transform decodes rows as they are read anyway.
            return DatasetKind.MAP if self._transforms_per_row else DatasetKind.HF_ROWS
        if callee in _SUBSETS and expr.args:  # `Subset(dataset, indices)`: a part of `dataset`
            return self.kind_of(expr.args[0].value, scope, depth + 1)
        if callee in ("list", "tuple") and len(expr.args) == 1:  # `list(range(n))`
            inner = self.kind_of(expr.args[0].value, scope, depth + 1)
            return inner if inner is DatasetKind.INDICES else DatasetKind.UNKNOWN
        kind = self.class_kind(expr.func, scope, depth)
        if kind is DatasetKind.UNKNOWN:
            kind = self._returned_kind(expr, scope, depth)
        return kind

    @cached_property
    def _transforms_per_row(self) -> bool:
        """`ds.set_transform(fn)` / `ds.with_transform(fn)` here: rows are decoded or augmented as they are
        read (images), which is work for loader workers."""
        return any(
            isinstance(call.node.func, cst.Attribute) and call.node.func.attr.value in _ROW_TRANSFORMS
            for call in self.source.calls
        )

    def _passed_kinds(self, name: str, scope: Scope, depth: int) -> set[DatasetKind]:
        """A parameter (`def train(args, train_dataset, ...)`): what this module's callers pass for it."""
        bindings = scope.lookup(name)
        if len(bindings) != 1 or bindings[0].kind is not BindingKind.PARAM:
            return set()
        function = self.source.function_of_scope(bindings[0].scope)
        if function is None:
            return set()
        passed = passed_for(self.source, function, name)
        if any(argument is None for argument, _ in passed):
            return set()
        return {self.kind_of(argument, caller, depth + 1) for argument, caller in passed}  # type: ignore[arg-type]

    def _unpacked_kind(self, value: cst.BaseExpression, scope: Scope, index: int, depth: int) -> DatasetKind:
        """`dataset, model, optimizer = load_train_objs()`: element `index` of what the call returns;
        `train, test = random_split(full, [n, m])`: a part of `full`, of its kind."""
        if not isinstance(value, cst.Call) or depth > MAX_HOPS:
            return DatasetKind.UNKNOWN
        if self.source.qualname(value.func, scope) in _SPLITS and value.args:
            return self.kind_of(value.args[0].value, scope, depth + 1)
        return self._returned_kind(value, scope, depth, index)

    def _returned_kind(
        self, call: cst.Call, scope: Scope, depth: int, index: int | None = None
    ) -> DatasetKind:
        """What a project function that builds the dataset returns (`load_and_cache_examples(...)` ending
        in `return TensorDataset(...)`; element `index` of a returned tuple), when all its returns agree."""
        found = self.source.callee_of_call(call, scope)
        if found is None:
            return DatasetKind.UNKNOWN
        home, function = found
        if function.owner is not None or not function.returns:
            return DatasetKind.UNKNOWN
        values = function.returns
        if index is None:  # used whole: the branches that return a tuple are not the ones taken here
            values = [v for v in values if not isinstance(v, cst.Tuple)] or values
        else:
            if not all(isinstance(v, (cst.Tuple, cst.List)) and index < len(v.elements) for v in values):
                return DatasetKind.UNKNOWN
            values = [v.elements[index].value for v in values]  # type: ignore[union-attr]
        analysis = home.analysis(DatasetAnalysis)
        kinds = {analysis.kind_of(value, function.scope, depth + 1) for value in values}
        return kinds.pop() if len(kinds) == 1 else DatasetKind.UNKNOWN

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
        kind = DatasetKind.UNKNOWN
        for base in cls.node.bases:
            kind = analysis.class_kind(base.value, cls.scope, depth + 1)
            if kind is DatasetKind.ITERABLE:
                return DatasetKind.ITERABLE_SHARDED if analysis._shards(cls) else kind
            if kind is DatasetKind.MAP:
                break  # its own `__getitem__` decides what it does per sample
            if kind is not DatasetKind.UNKNOWN:
                return kind
        getitem = cls.methods.get("__getitem__")
        if getitem is not None:
            return DatasetKind.IN_MEMORY if _only_indexes_itself(getitem) else DatasetKind.MAP
        return DatasetKind.MAP if kind is DatasetKind.MAP else DatasetKind.UNKNOWN

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
        False when it or the `collate_fn` does (`.cuda()`/`.to(device)`: pinning would raise, and worker
        processes cannot use CUDA); None: unknown."""
        collate = loader.option("collate_fn")
        if collate is not None and collate.expression is not None:
            if self._collate_moves(collate.expression, loader.scope):
                return False
        dataset = _dataset(loader)
        return self._class_on_cpu(dataset, loader.scope) if dataset is not None else None

    def _collate_moves(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        """A collate function of the project that moves the batch to a device (also through
        `functools.partial(collate, device="cuda:0")`, or a name bound to that)."""
        if isinstance(expr, cst.Name) and depth < 3:
            values = self.source.assigned_values(expr, scope)
            if values:
                return any(self._collate_moves(v.value, v.scope, depth + 1) for v in values)
        if isinstance(expr, cst.Call):
            if (self.source.qualname(expr.func, scope) or "") != "functools.partial" or not expr.args:
                return False
            expr = expr.args[0].value
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return False
        found = self.source.callee_of_call(cst.Call(func=expr), scope)
        if found is None:
            return False
        home, function = found
        return _moves_to_device(home, function.calls)

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
        return not any(_moves_to_device(home, method.calls) for method in cls.methods.values())

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


def _moves_to_device(home: SourceModule, calls: list[CallRecord]) -> bool:
    """`.cuda()`, or `.to(x)` where `x` may be a CUDA device or is named like a device."""
    devices = home.analysis(DeviceAnalysis)
    for call in calls:
        func = call.node.func
        if not isinstance(func, cst.Attribute):
            continue
        if func.attr.value == "cuda":
            return True
        if func.attr.value == "to" and call.node.args:
            target = call.node.args[0].value
            if devices.device_of(target, call.scope).may_be_cuda or "device" in home.code(target).lower():
                return True
    return False


def _table_rebind(name: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """`ds = ds.rename_column("label", "labels")`: the same table again, decided by its other bindings."""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _TABLE_METHODS
        and isinstance(name, cst.Name)
        and isinstance(value.func.value, cst.Name)
        and value.func.value.value == name.value
    )


def _integer_list(expr: cst.BaseExpression) -> bool:
    """`[0, 1, 2]`: a literal list or tuple of integers."""
    if not isinstance(expr, (cst.List, cst.Tuple)) or not expr.elements:
        return False
    return all(isinstance(element.value, cst.Integer) for element in expr.elements)


def _only_indexes_itself(getitem: FunctionRecord) -> bool:
    """Every value `__getitem__` returns is an item or a slice of what the dataset holds (`return self.x[i],
    self.y[i]`; `self.data[start:start + n].long()` at an offset drawn with `torch.randint`, computed from the
    index or the held data's length), or a dict of such, also filled key by key (`d = {}`, `d["x"] =
    self.x[i]`, `return d`): nothing is read, decoded or transformed per sample. Any other statement (a
    transform, a file read, an encoding comprehension) is not this shape."""
    if len(getitem.params) < 2 or not getitem.returns:
        return False
    offsets = {getitem.params[1]}  # integers: the index, and positions computed from it
    assembled: set[str] = set()  # local dicts filled only with held items
    held: set[str] = set()  # local names bound to a held item
    for statement in getitem.node.body.body:
        if is_docstring(statement):
            continue
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return False
        small = statement.body[0]
        if isinstance(small, cst.Return):
            continue
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            return False
        target = small.targets[0].target
        if isinstance(target, cst.Name) and isinstance(small.value, cst.Dict) and not small.value.elements:
            assembled.add(target.value)
        elif isinstance(target, cst.Name) and _held_item(small.value, offsets, held):
            held.add(target.value)
        elif isinstance(target, cst.Name) and _position(small.value, offsets):
            offsets.add(target.value)
        elif (  # `traj_idx, i = self.get_idx[i]`: positions looked up in a held index table
            isinstance(target, (cst.Tuple, cst.List))
            and all(isinstance(e.value, cst.Name) for e in target.elements)
            and _held_item(small.value, offsets)
        ):
            offsets |= {e.value.value for e in target.elements}  # type: ignore[attr-defined]
        elif not (
            isinstance(target, cst.Subscript)
            and isinstance(target.value, cst.Name)
            and target.value.value in assembled
            and _held_item(small.value, offsets, held)
        ):
            return False
    return all(_held_item(value, offsets, assembled | held) for value in getitem.returns)


# Methods that copy or cast what was indexed, without per-sample work worth a worker.
_CHEAP_METHODS = {"clone", "long", "float", "int", "double", "half", "bool", "contiguous", "copy"}
# Calls that give a position: a random draw, a length, a bound.
_POSITION_CALLS = {"randint", "randrange", "len", "min", "max", "int", "item", "size"}
MAX_POSITION_DEPTH = 12


def _held_item(expr: cst.BaseExpression, offsets: set[str], held: set[str] | None = None) -> bool:
    """`self.x[i]`, `self.data[s:s + n]` (positions from `offsets`), copied or cast (`.clone().long()`), a
    local name in `held` bound to one, or a tuple, list or dict of such."""
    if isinstance(expr, cst.Name):
        return held is not None and expr.value in held
    if isinstance(expr, (cst.Tuple, cst.List)):
        return bool(expr.elements) and all(_held_item(e.value, offsets, held) for e in expr.elements)
    if isinstance(expr, cst.Dict):
        return bool(expr.elements) and all(
            isinstance(e, cst.DictElement) and _held_item(e.value, offsets, held) for e in expr.elements
        )
    while (
        isinstance(expr, cst.Call)
        and not expr.args
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _CHEAP_METHODS
    ):
        expr = expr.func.value
    if not isinstance(expr, cst.Subscript) or not expr.slice:
        return False
    # `self.trajectories["states"][traj_idx][i]`: a held table indexed level by level
    while isinstance(expr.value, cst.Subscript) and _by_positions(expr, offsets):
        expr = expr.value
    if not _self_attribute(expr.value):
        return False
    return _by_positions(expr, offsets)


def _by_positions(expr: cst.Subscript, offsets: set[str]) -> bool:
    """Every index of `expr` is a position, a slice of positions, or a string key (`["states"]`)."""
    for element in expr.slice:
        part = element.slice
        if isinstance(part, cst.Index):
            if not (_position(part.value, offsets) or isinstance(part.value, cst.SimpleString)):
                return False
        elif isinstance(part, cst.Slice):
            bounds = (part.lower, part.upper, part.step)
            if not all(bound is None or _position(bound, offsets) for bound in bounds):
                return False
        else:
            return False
    return True


def _self_attribute(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _position(expr: cst.BaseExpression, offsets: set[str], depth: int = 0) -> bool:
    """An integer computed from the index, positions already computed, numbers, the dataset's attributes and
    their lengths and shapes, and random draws (`torch.randint(0, len(self.data) - n, (1,))`)."""
    if depth > MAX_POSITION_DEPTH:
        return False
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in offsets
    if _self_attribute(expr):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return _position(expr.left, offsets, depth + 1) and _position(expr.right, offsets, depth + 1)
    if isinstance(expr, cst.UnaryOperation):
        return _position(expr.expression, offsets, depth + 1)
    if isinstance(expr, cst.Tuple):  # the `(1,)` size of `torch.randint(low, high, (1,))`
        return all(_position(e.value, offsets, depth + 1) for e in expr.elements)
    if isinstance(expr, cst.Subscript):  # `self.data.shape[0]`
        value = expr.value
        return (
            isinstance(value, cst.Attribute)
            and value.attr.value == "shape"
            and _self_attribute(value.value)
            and all(
                isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Integer) for e in expr.slice
            )
        )
    if isinstance(expr, cst.Call):
        func = expr.func
        name = (
            func.attr.value
            if isinstance(func, cst.Attribute)
            else func.value
            if isinstance(func, cst.Name)
            else ""
        )
        if name not in _POSITION_CALLS:
            return False
        if (
            isinstance(func, cst.Attribute)
            and name in ("item", "size")
            and not _position(func.value, offsets, depth + 1)
        ):
            return False
        return all(arg.keyword is None and _position(arg.value, offsets, depth + 1) for arg in expr.args)
    return False


def _dataset(loader: Loader) -> cst.BaseExpression | None:
    """The dataset expression passed in the loader call itself (not through a `**` dict)."""
    option = loader.option("dataset")
    return option.expression if option is not None else None
