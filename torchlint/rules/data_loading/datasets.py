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
from torchlint.facts.syntax.calls import Signature, argument_for, passed_for, read_call
from torchlint.facts.syntax.collect import CallRecord, ClassRecord, FunctionRecord
from torchlint.facts.syntax.module import is_docstring
from torchlint.facts.syntax.names import BindingKind, Scope, ScopeKind
from torchlint.facts.syntax.values import literal_of
from torchlint.facts.torch.callers import CallerAnalysis
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
# A cache of the dataset: `torch.load(f)` gives back what `torch.save(obj, f)` wrote to the same file.
_LOAD, _SAVE = "torch.load", "torch.save"
_LOAD_SIGNATURE = Signature(("f", "map_location", "pickle_module"))
_SAVE_SIGNATURE = Signature(("obj", "f", "pickle_module", "pickle_protocol"))
# Library functions that return a `(features, TensorDataset)` pair for a literal argument: Hugging Face
# `transformers`' `squad_convert_examples_to_features(..., return_dataset="pt")` (documented: "if 'pt':
# returns a torch.data.TensorDataset"), as `features, dataset = ...`.
_TENSOR_PAIRS = {"squad_convert_examples_to_features": ("transformers.", "return_dataset", "pt", 1)}
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
        # The `torch.load` calls being followed, with the key read of what they give back: a cache saves what
        # it loaded (`dataset` is the cache's or a new one; `torch.save({"dataset": dataset}, f)`).
        self._reloading: set[tuple[int, str | None]] = set()

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
            if self._reloading and values:  # saving what the cache gave back adds nothing to the cache
                values = [a for a in values if not self._reads_back(a.value, a.scope, a.index)] or None
                if values is None:
                    return DatasetKind.UNKNOWN
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
            key = _string_key(expr)
            if key is not None:  # `torch.load(cached)["dataset"]`, `{"dataset": TensorDataset(...)}[...]`
                kept = self._entry_kind(expr.value, key, scope, depth + 1)
                if kept is not DatasetKind.UNKNOWN:
                    return kept
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
        if callee == _LOAD:  # `dataset = torch.load(cached)`: what this function saved there
            return self._reloaded_kind(expr, scope, None, depth)
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
        if depth > MAX_HOPS:
            return DatasetKind.UNKNOWN
        if isinstance(value, (cst.Tuple, cst.List)):  # `features, dataset = (feats, TensorDataset(...))`
            element = self._unpacked_element(value, index)
            return self.kind_of(element, scope, depth + 1) if element is not None else DatasetKind.UNKNOWN
        if not isinstance(value, cst.Call):
            return DatasetKind.UNKNOWN
        callee = self.source.qualname(value.func, scope) or ""
        if callee in _SPLITS and value.args:
            return self.kind_of(value.args[0].value, scope, depth + 1)
        library, keyword, literal, position = _TENSOR_PAIRS.get(callee.rpartition(".")[2], ("", "", "", -1))
        if library and callee.startswith(library):
            if index == position and read_call(self.source, value, scope).is_constant(keyword, literal):
                return DatasetKind.TENSOR
            return DatasetKind.UNKNOWN
        return self._returned_kind(value, scope, depth, index)

    def _unpacked_element(self, value: cst.Tuple | cst.List, index: int) -> cst.BaseExpression | None:
        """The element of a literal tuple that `a, b, c = (x, y, z)` binds to the name at `index`: only for
        a flat target of names as long as the tuple (no starred or nested parts)."""
        statement = self.source.assignment_of(value)
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
            return None
        target = statement.targets[0].target
        elements = value.elements
        if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(elements):
            return None
        if not all(isinstance(e.value, cst.Name) for e in target.elements):
            return None
        if any(isinstance(e, cst.StarredElement) for e in (*elements, *target.elements)):
            return None
        return elements[index].value if index < len(elements) else None

    def _element(self, value: cst.BaseExpression, index: int) -> cst.BaseExpression | None:
        """What `a, b = (x, y)` binds at `index` (None: not a literal tuple of that shape)."""
        return self._unpacked_element(value, index) if isinstance(value, (cst.Tuple, cst.List)) else None

    def _entry_kind(self, expr: cst.BaseExpression, key: str, scope: Scope, depth: int) -> DatasetKind:
        """The kind of `expr[key]` where `expr` is a dict literal, or what `torch.load` gives back of a cache
        this function saved a dict literal into (also through names bound to either, when all agree)."""
        if depth > MAX_HOPS:
            return DatasetKind.UNKNOWN
        if isinstance(expr, cst.Name):
            if self.source.assignments(expr, scope) is None:  # a parameter, a loop variable: unknown
                return DatasetKind.UNKNOWN
            values = self.source.reaching_values(expr, scope)
            if self._reloading:
                values = [a for a in values if not self._reads_back(a.value, a.scope, a.index)]
            kinds = {
                self._entry_kind(a.value, key, a.scope, depth + 1) if a.index is None else DatasetKind.UNKNOWN
                for a in values
            }
            return kinds.pop() if len(kinds) == 1 else DatasetKind.UNKNOWN
        if isinstance(expr, cst.Dict):
            if any(not isinstance(e, cst.DictElement) for e in expr.elements):
                return DatasetKind.UNKNOWN  # a `**spread` may hold the key too
            found = [
                e.value
                for e in expr.elements
                if isinstance(e, cst.DictElement)
                and isinstance(e.key, cst.SimpleString)
                and e.key.evaluated_value == key
            ]
            return self.kind_of(found[-1], scope, depth + 1) if found else DatasetKind.UNKNOWN
        if isinstance(expr, cst.Call) and self.source.qualname(expr.func, scope) == _LOAD:
            return self._reloaded_kind(expr, scope, key, depth)
        return DatasetKind.UNKNOWN

    def _reloaded_kind(self, load: cst.Call, scope: Scope, key: str | None, depth: int) -> DatasetKind:
        """What `torch.load(f)` (or its `[key]`) gives back, where the same function `torch.save`s to the
        same file (a name bound once, or a string literal): the kind of every object it saves there (of its
        `key` in a saved dict literal), when they agree. A cache read back is what the code wrote."""
        if depth > MAX_HOPS or (id(load), key) in self._reloading:
            return DatasetKind.UNKNOWN
        loaded = read_call(self.source, load, scope, _LOAD_SIGNATURE).get("f")
        file = loaded.expression if loaded is not None else None
        if not _same_file_each_time(file, scope):
            return DatasetKind.UNKNOWN
        saved = []
        for call in self.source.calls:
            if call.scope is not scope or self.source.qualname(call.node.func, call.scope) != _SAVE:
                continue
            arguments = read_call(self.source, call.node, call.scope, _SAVE_SIGNATURE)
            target, obj = arguments.get("f"), arguments.get("obj")
            if target is None or target.expression is None or not _same_expression(target.expression, file):
                continue
            if obj is None or obj.expression is None:
                return DatasetKind.UNKNOWN
            saved.append(obj.expression)
        if not saved:
            return DatasetKind.UNKNOWN
        self._reloading.add((id(load), key))
        try:
            kinds = {
                self.kind_of(obj, scope, depth + 1)
                if key is None
                else self._entry_kind(obj, key, scope, depth + 1)
                for obj in saved
            }
        finally:
            self._reloading.discard((id(load), key))
        return kinds.pop() if len(kinds) == 1 else DatasetKind.UNKNOWN

    def _reads_back(
        self, value: cst.BaseExpression, scope: Scope, index: int | None = None, depth: int = 0
    ) -> bool:
        """`value` is, unchanged, what a `torch.load` being followed gives back (of the key being followed):
        the load itself, its `[key]`, a name bound only to that, or the element of a literal tuple that holds
        it (`features, dataset = (loaded["features"], loaded["dataset"])`)."""
        if depth > MAX_HOPS:
            return False
        if index is not None:
            element = self._element(value, index)
            return element is not None and self._reads_back(element, scope, None, depth + 1)
        key = _string_key(value) if isinstance(value, cst.Subscript) else None
        if key is not None:
            value = value.value  # type: ignore[attr-defined]
        if isinstance(value, cst.Name):
            values = self.source.reaching_values(value, scope)
            return bool(values) and all(
                a.index is None and self._reads_loaded(a.value, a.scope, key) for a in values
            )
        return self._reads_loaded(value, scope, key)

    def _reads_loaded(self, value: cst.BaseExpression, scope: Scope, key: str | None) -> bool:
        return (
            isinstance(value, cst.Call)
            and (id(value), key) in self._reloading
            and self.source.qualname(value.func, scope) == _LOAD
        )

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
        if dataset is None:
            return None
        if self._holds_device_tensors(dataset, loader.scope):
            return False
        return self._class_on_cpu(dataset, loader.scope)

    def batches_unpinnable(self, loader: Loader) -> bool:
        """The loader's `collate_fn` (passed, or set by the project's loader class in its `super().__init__`)
        returns, on every path, an object of a project class with no `pin_memory` method: the DataLoader's
        pinning leaves such a batch as it is (Real-Time-Voice-Cloning's `SpeakerBatch` of numpy arrays)."""
        found = self._collate_function(loader)
        if found is None:
            return False
        home, function = found
        if not function.returns:
            return False
        for returned in function.returns:
            if not isinstance(returned, cst.Call):
                return False
            built = home.resolve_class(returned.func, function.scope)
            if built is None or built[0].defines(built[1], "pin_memory") is not False:
                return False
        return True

    def holds_token_ids(self, loader: Loader) -> bool:
        """The dataset is a project class that tokenizes text when it is built (`tokenizer.encode(txt)` in
        `__init__`) or is handed token ids (a parameter named for them): its samples are a few KB of
        integer ids, as a Hugging Face table prepared by `.map(tokenize)` is."""
        dataset = _dataset(loader)
        values = [(dataset, loader.scope)] if dataset is not None else []
        if isinstance(dataset, cst.Name):
            assigned = self.source.assigned_values(dataset, loader.scope)
            values = [(a.value, a.scope) for a in assigned if not _is_none(a.value)]  # `ds = None` first
        if not values:
            return False
        for value, scope in values:
            found = self.source.resolve_class(value.func, scope) if isinstance(value, cst.Call) else None
            init = found[1].methods.get("__init__") if found is not None else None
            if init is None or not _tokenizes(init):
                return False
        return True

    def zero_from_every_caller(self, loader: Loader, expr: cst.BaseExpression | None) -> bool:
        """`expr` is a parameter of the function building the loader (`def create_loader(..., num_workers=0)`)
        for which every call of that function, here and in the project modules importing this one, passes
        the constant 0 or nothing over a default of 0 (rasbt's `create_dataloader_v1`)."""
        source = self.source
        function = source.function_of_scope(loader.scope)
        if not isinstance(expr, cst.Name) or function is None or expr.value not in function.params:
            return False
        param = next((p for p in function.node.params.params if p.name.value == expr.value), None)
        if param is None:
            return False
        default = param.default
        passed = [argument for argument, _ in passed_for(source, function, expr.value)]
        for _, call in source.analysis(CallerAnalysis).calls_elsewhere([function]):
            passed.append(argument_for(call.node, function, expr.value))
        if not passed:
            return False
        return all(_is_zero(argument if argument is not None else default) for argument in passed)

    def _collate_function(self, loader: Loader):
        collate = loader.option("collate_fn")
        if collate is not None:
            expr = collate.expression
            if collate.conditional or not isinstance(expr, (cst.Name, cst.Attribute)):
                return None
            return self.source.callee_of_call(cst.Call(func=expr), loader.scope)
        found = self.source.resolve_class(loader.callee, loader.scope)
        init = found[1].methods.get("__init__") if found is not None else None
        if init is None:
            return None
        home, cls = found
        for call in init.calls:  # `super().__init__(..., collate_fn=self.collate, ...)`
            func = call.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "__init__"):
                continue
            for arg in call.node.args:
                value = arg.value
                if arg.keyword is not None and arg.keyword.value == "collate_fn":
                    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
                        if value.value.value == "self" and value.attr.value in cls.methods:
                            return home, cls.methods[value.attr.value]
                    return None
        return None

    def _holds_device_tensors(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        """The dataset (on every path, also a `random_split`/`Subset` part of one) is a project class built
        from tensors that are on a device that may be CUDA (`Pairs(x, y)` where every item appended to `x`
        was made with `torch.tensor(..., device=device)` or moved with `.to(device)`): its samples are
        already on the GPU when the loader reads them."""
        if depth > MAX_HOPS:
            return False
        if isinstance(expr, cst.Name):
            values = self.source.reaching_values(expr, scope)
            if not values or self.source.assignments(expr, scope) is None:
                return False
            return all(self._holds_device_tensors_unpacked(a.value, a.scope, a.index, depth) for a in values)
        if not isinstance(expr, cst.Call) or not expr.args:
            return False
        if self.source.qualname(expr.func, scope) in _SUBSETS:
            return self._holds_device_tensors(expr.args[0].value, scope, depth + 1)
        if self.source.resolve_class(expr.func, scope) is None:
            return False
        return any(arg.star == "" and self._on_device(arg.value, scope, depth + 1) for arg in expr.args)

    def _holds_device_tensors_unpacked(
        self, value: cst.BaseExpression, scope: Scope, index: int | None, depth: int
    ) -> bool:
        if index is None:
            return self._holds_device_tensors(value, scope, depth + 1)
        if isinstance(value, cst.Call) and value.args and self.source.qualname(value.func, scope) in _SPLITS:
            return self._holds_device_tensors(value.args[0].value, scope, depth + 1)  # a part of it
        return False

    def _on_device(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        """Tensors on a device that may be CUDA, on every path: `torch.tensor(data, device=device)`,
        `t.to(device)`, `t.cuda()`, a list or tuple of them, a name bound only to such, or a list it starts
        empty and only `.append`s such items to."""
        if depth > MAX_HOPS:
            return False
        if isinstance(expr, (cst.List, cst.Tuple)):
            return bool(expr.elements) and all(
                not isinstance(e, cst.StarredElement) and self._on_device(e.value, scope, depth + 1)
                for e in expr.elements
            )
        if isinstance(expr, cst.Name):
            if self.source.assignments(expr, scope) is None:
                return False
            values = [
                (a.value if a.index is None else self._element(a.value, a.index), a.scope)
                for a in self.source.reaching_values(expr, scope)
            ]
            if not values or any(value is None for value, _ in values):
                return False
            if len(values) == 1 and isinstance(values[0][0], cst.List) and not values[0][0].elements:
                return self._filled_on_device(expr.value, values[0][1], depth)
            return all(self._on_device(value, where, depth + 1) for value, where in values)  # type: ignore[arg-type]
        if not isinstance(expr, cst.Call):
            return False
        devices = self.source.analysis(DeviceAnalysis)
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
            return True
        if isinstance(func, cst.Attribute) and func.attr.value == "to" and expr.args:
            first = expr.args[0]
            return first.keyword is None and devices.device_of(first.value, scope).may_be_cuda
        if not (self.source.qualname(func, scope) or "").startswith("torch."):
            return False
        device = next(
            (a.value for a in expr.args if a.keyword is not None and a.keyword.value == "device"), None
        )
        return device is not None and devices.device_of(device, scope).may_be_cuda

    def _filled_on_device(self, name: str, home: Scope, depth: int) -> bool:
        """`x = []` (every binding of `x` is one) filled only by `x.append(item)` calls (at least one), every
        item on the device."""
        appends = self.source.method_calls_on(name, home, "append")
        if not appends or any(
            self.source.method_calls_on(name, home, other) for other in ("extend", "insert")
        ):
            return False
        # every binding an empty list (`x = []` in each branch, `x, y = [], []`): no `x += more`
        for binding in home.lookup(name):
            value = binding.value
            if value is not None and binding.index is not None:
                value = self._element(value, binding.index)
            if not isinstance(value, cst.List) or value.elements:
                return False
        return all(
            len(call.node.args) == 1 and self._on_device(call.node.args[0].value, call.scope, depth + 1)
            for call in appends
        )

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


def _string_key(expr: cst.Subscript) -> str | None:
    """`x["dataset"]`: the one string key it reads."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key = expr.slice[0].slice.value
    if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
        return key.evaluated_value
    return None


def _same_file_each_time(file: cst.BaseExpression | None, scope: Scope) -> bool:
    """A file named by a string literal, or by a name bound once in its scope (the same path wherever the
    function reads or writes it)."""
    if isinstance(file, cst.SimpleString):
        return True
    return isinstance(file, cst.Name) and len(scope.lookup(file.value)) == 1


def _same_expression(a: cst.BaseExpression, b: cst.BaseExpression | None) -> bool:
    if isinstance(a, cst.Name) and isinstance(b, cst.Name):
        return a.value == b.value
    return (
        isinstance(a, cst.SimpleString)
        and isinstance(b, cst.SimpleString)
        and a.evaluated_value == b.evaluated_value
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


def _is_zero(expr: cst.BaseExpression | None) -> bool:
    return expr is not None and literal_of(expr) == (True, 0)


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


_TOKEN_ID_PARAMS = ("token_ids", "input_ids")
_TOKENIZING = frozenset({"encode", "encode_ordinary", "encode_batch", "tokenize", "convert_tokens_to_ids"})


def _tokenizes(init: FunctionRecord) -> bool:
    """A dataset's `__init__` that tokenizes text (`tokenizer.encode(txt)`, `self.tokenizer(text)`) or takes
    token ids (`def __init__(self, token_ids, max_length)`)."""
    if any(param.endswith(_TOKEN_ID_PARAMS) or param == "tokens" for param in init.params[1:]):
        return True  # handed the ids; not `buffer_tokens` (a count) nor a `tokenizer_src` used per item
    for call in init.calls:
        func = call.node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else ""
        name = func.value if isinstance(func, cst.Name) else name
        if name in _TOKENIZING or name.endswith("tokenizer"):
            return True
    return False
