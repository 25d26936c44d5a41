"""DataLoader constructions: which calls build a loader, and every argument they get (read by
`facts/syntax/calls.py`, through the DataLoader's signature).

A loader is torch's `DataLoader`, a known subclass (torchdata's `StatefulDataLoader`, PyG's), or a project's
class deriving from one (followed into other files only for classes named like loaders: resolving every call
of a file across the project would cost more than the rest of the analysis).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import (
    Argument,
    CallArguments,
    Signature,
    positional_and_keywords,
    read_call,
)
from torchlint.facts.syntax.collect import CallRecord
from torchlint.facts.syntax.names import Scope
from torchlint.facts.syntax.values import constant_number, literal_of

if TYPE_CHECKING:
    from torchlint.facts.syntax.module import SourceModule

LOADER_CLASSES = frozenset(
    {
        "torch.utils.data.DataLoader",
        "torch.utils.data.dataloader.DataLoader",
        "torchdata.stateful_dataloader.StatefulDataLoader",
        "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader",
        "torch_geometric.loader.DataLoader",
        "torch_geometric.loader.dataloader.DataLoader",
    }
)
# torch.utils.data.DataLoader's positional parameters, in order (the rest are keyword-only).
DATALOADER = Signature(
    (
        "dataset",
        "batch_size",
        "shuffle",
        "sampler",
        "batch_sampler",
        "num_workers",
        "collate_fn",
        "pin_memory",
        "drop_last",
        "timeout",
        "worker_init_fn",
        "multiprocessing_context",
        "generator",
    )
)
MAX_SUBCLASS_DEPTH = 4


@dataclass(eq=False)
class Loader:
    """One `DataLoader(...)` call (or a subclass's), or a framework's loader configuration (Hugging Face
    `TrainingArguments`, whose `dataloader_*` arguments configure the loader its Trainer builds)."""

    call: cst.Call
    scope: Scope
    cls: str
    arguments: CallArguments
    callee_text: str  # the callee as written, for messages: `DataLoader`, `torch.utils.data.DataLoader`
    # The `if` tests around the call in its function, with the branch it is in (see `CallRecord.guards`).
    guards: tuple[tuple[cst.BaseExpression, bool], ...] = ()
    record: CallRecord | None = None  # where the call is: its loop and function (None: a framework's)
    # A guard around the call proves `num_workers` is at most 0 here (`else:` of `if n > 0:`).
    no_workers_here: bool = False
    # The same loader built in the other branch of an `if` around this one (same dataset): what the author
    # chose per path (`if n > 0: DataLoader(ds, pin_memory=True, ...) else: DataLoader(ds, ...)`).
    alternatives: tuple[Loader, ...] = ()

    @property
    def options(self) -> dict[str, Argument]:
        return self.arguments.by_name

    @property
    def complete(self) -> bool:
        return self.arguments.complete

    @property
    def callee(self) -> cst.BaseExpression:
        """Where a finding about the loader goes: the callee, on the call's first line."""
        return self.call.func

    def option(self, name: str) -> Argument | None:
        return self.arguments.get(name)

    def lacks(self, name: str) -> bool:
        """`name` is not passed, for sure (every `**kwargs` could be followed)."""
        return self.arguments.lacks(name)

    def constant(self, name: str) -> tuple[bool, object]:
        """(True, value) when `name` is passed unconditionally as a constant."""
        return self.arguments.constant(name)

    def is_constant(self, name: str, value: object) -> bool:
        return self.arguments.is_constant(name, value)

    def without_workers(self) -> bool:
        """`num_workers` missing for sure, or the constant 0."""
        return self.lacks("num_workers") or self.is_constant("num_workers", 0)

    def pins(self) -> bool:
        """`pin_memory` passed, and not the constant False (pinned, on some paths, or as the user says)."""
        return self.option("pin_memory") is not None and not self.is_constant("pin_memory", False)

    def starts_workers(self) -> bool:
        """`num_workers` passed, and not the constant 0 (also a count the user controls)."""
        return self.option("num_workers") is not None and not self.without_workers()


class LoaderAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def _loaders(self) -> dict[int, Loader]:
        source = self.source
        found: dict[int, Loader] = {}
        for call in source.calls:
            if _never_runs(call.guards):
                continue  # `if 1: ... else: DataLoader(...)`: a loader that is never built
            cls = self.loader_class(call.node.func, call.scope)
            if cls is not None:
                arguments = read_call(source, call.node, call.scope, DATALOADER)
                loader = Loader(
                    call.node, call.scope, cls, arguments, source.code(call.node.func), call.guards, call
                )
                loader.no_workers_here = self._guarded_to_no_workers(loader)
                found[id(call.node)] = loader
        guarded = [loader for loader in found.values() if loader.guards]
        for loader in guarded:
            loader.alternatives = tuple(
                other for other in guarded if other is not loader and self._alternative(loader, other)
            )
        return found

    def _guarded_to_no_workers(self, loader: Loader) -> bool:
        """An `if` around the call proves its `num_workers` expression is at most 0 on this path: the
        `else:` of `if n > 0:` / `if n:`, the body of `if n == 0:` / `if not n:` (the count as written)."""
        workers = loader.option("num_workers")
        expression = workers.expression if workers is not None else None
        if expression is None or not loader.guards:
            return False
        written = _compact(self.source.code(expression))

        def same(expr: cst.BaseExpression) -> bool:
            return _compact(self.source.code(expr)) == written

        return any(_proves_at_most_zero(test, branch, same) for test, branch in loader.guards)

    def _alternative(self, loader: Loader, other: Loader) -> bool:
        """`other` is built in the other branch of an `if` around `loader`, in the same scope, from the same
        dataset expression: two ways of building one loader."""
        if other.scope is not loader.scope:
            return False
        for (test, branch), (other_test, other_branch) in zip(loader.guards, other.guards, strict=False):
            if test is not other_test:
                return False
            if branch != other_branch:
                dataset, other_dataset = loader.option("dataset"), other.option("dataset")
                if dataset is None or other_dataset is None:
                    return False
                first, second = dataset.expression, other_dataset.expression
                return (
                    first is not None
                    and second is not None
                    and _compact(self.source.code(first)) == _compact(self.source.code(second))
                )
        return False

    @property
    def loaders(self) -> list[Loader]:
        return list(self._loaders.values())

    def loader_at(self, call: cst.Call) -> Loader | None:
        return self._loaders.get(id(call))

    def loader_class(self, func: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
        """The loader class a callee names: torch's DataLoader, a known subclass, or the project's."""
        source = self.source
        qualname = source.qualname(func, scope)
        if qualname in LOADER_CLASSES:
            return qualname
        if depth >= MAX_SUBCLASS_DEPTH:
            return None
        local = source.local_class(func, scope)
        if local is None and (qualname is None or "loader" not in qualname.rpartition(".")[2].lower()):
            return None
        found = (source, local) if local is not None else source.resolve_class(func, scope)
        if found is None:
            return None
        home, cls = found
        for base in cls.node.bases:
            if home.analysis(LoaderAnalysis).loader_class(base.value, cls.scope, depth + 1) is not None:
                return qualname or cls.name
        return None

    def iterates_its_own_way(self, loader: Loader, depth: int = 0) -> bool:
        """The loader's class is the project's and defines `__iter__` (yolov5's `InfiniteDataLoader` keeps
        one iterator over a repeating sampler): how often its workers start is its own business."""
        if loader.cls in LOADER_CLASSES:
            return False  # torch's own (and the known subclasses): iterated the usual way
        found = self.source.resolve_class(loader.callee, loader.scope)
        return found is not None and found[0].defines(found[1], "__iter__") is True

    def has_endless_epochs(self, loader: Loader) -> bool:
        """The loader's sampler draws with replacement at least ENDLESS_EPOCH samples per epoch."""
        option = loader.option("sampler")
        if option is None or option.conditional:
            return False
        sampler = option.value.node
        if not isinstance(sampler, cst.Call):
            return False
        if self.source.qualname(sampler.func, loader.scope) not in RANDOM_SAMPLERS:
            return False
        positional, keywords = positional_and_keywords(sampler)
        replacement = keywords.get("replacement", positional[1] if len(positional) > 1 else None)
        samples = keywords.get("num_samples", positional[2] if len(positional) > 2 else None)
        if replacement is None or samples is None or literal_of(replacement) != (True, True):
            return False
        count = constant_number(samples)
        return count is not None and count >= ENDLESS_EPOCH


# An epoch this long is never finished in practice: minGPT's `RandomSampler(ds, replacement=True,
# num_samples=int(1e10))` is an endless stream whose iterator is never exhausted, hence never re-created.
ENDLESS_EPOCH = 10**9
RANDOM_SAMPLERS = frozenset({"torch.utils.data.RandomSampler", "torch.utils.data.sampler.RandomSampler"})


def _compact(code: str) -> str:
    return "".join(code.split())


# A comparison `n <op> c` that holds, turned around (`0 < n` is `n > 0`) and negated (the `else:` branch).
_TURNED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _operator(node: cst.BaseCompOp) -> str | None:
    return {
        cst.LessThan: "<",
        cst.LessThanEqual: "<=",
        cst.GreaterThan: ">",
        cst.GreaterThanEqual: ">=",
        cst.Equal: "==",
        cst.NotEqual: "!=",
    }.get(type(node))


def _proves_at_most_zero(test: cst.BaseExpression, branch: bool, same) -> bool:
    """On the `branch` side of `if test:`, the count `same` recognises is at most 0 (no worker starts; a
    negative count raises)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _proves_at_most_zero(test.expression, not branch, same)
    if isinstance(test, cst.BooleanOperation):
        # the body of `a and b`, the `else:` of `a or b`: both hold
        both = (isinstance(test.operator, cst.And) and branch) or (
            isinstance(test.operator, cst.Or) and not branch
        )
        return both and (
            _proves_at_most_zero(test.left, branch, same) or _proves_at_most_zero(test.right, branch, same)
        )
    if same(test):  # `if n:` ... `else:` (n is 0)
        return not branch
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comparison = test.comparisons[0]
    op = _operator(comparison.operator)
    if op is None:
        return False
    if same(test.left):
        ok, bound = literal_of(comparison.comparator)
    elif same(comparison.comparator):
        ok, bound = literal_of(test.left)
        op = _TURNED[op]
    else:
        return False
    if not ok or not isinstance(bound, int) or isinstance(bound, bool):
        return False
    if not branch:
        op = _NEGATED[op]
    return (op == "==" and bound <= 0) or (op == "<=" and bound <= 0) or (op == "<" and bound <= 1)


def _never_runs(guards: tuple[tuple[cst.BaseExpression, bool], ...]) -> bool:
    """A branch whose test is a constant that sends the code the other way (`if 1:` ... `else:`, `if
    False:`)."""
    for test, branch in guards:
        ok, value = literal_of(test)
        if ok and bool(value) != branch:
            return True
    return False
