"""DataLoader constructions and every option they get, with where its value comes from.

Options arrive as keywords, positionally, or through `**kwargs` dicts built from literals, `dict(...)`,
merges (`{**a, **b}`, `a | b`), `.update(...)` calls (also under an `if`, then the option is *conditional*:
the author set it for some runs) and `kwargs["key"] = value`. When a `**` dict cannot be followed (a
parameter, `vars(args)`), the loader's options are incomplete and a missing option is not evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.names import BindingKind, Scope
from torchlint.facts.syntax.values import Kind, Value, constant_number, literal_of

if TYPE_CHECKING:
    from torchlint.facts.module import ModuleFacts

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
POSITIONAL = (
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


@dataclass
class Option:
    name: str
    value: Value
    via: str | None = None  # "`**train_kwargs`" when it came from a dict
    conditional: bool = False  # set only on some paths (`if use_cuda: kwargs.update(...)`)
    node: cst.CSTNode | None = None  # the argument or dict entry that sets it

    def describe(self) -> str:
        parts = [self.value.describe()]
        if self.via:
            parts.append(f"via {self.via}")
        if self.conditional:
            parts.append("conditional")
        return ", ".join(parts)


@dataclass
class DictOptions:
    options: dict[str, Option] = field(default_factory=dict)
    complete: bool = True

    def merge(self, other: DictOptions, conditional: bool = False) -> None:
        for name, option in other.options.items():
            if conditional:
                option = Option(option.name, option.value, option.via, True, option.node)
            existing = self.options.get(name)
            if existing is not None and conditional and not existing.conditional:
                # Unconditional first, then overridden on some paths: the value varies.
                option = Option(
                    name,
                    Value(Kind.COMPUTED, origin="set differently on some paths"),
                    option.via,
                    True,
                    option.node,
                )
            self.options[name] = option
        self.complete = self.complete and other.complete


@dataclass(eq=False)
class Loader:
    """One `DataLoader(...)` call (or a subclass's)."""

    call: cst.Call
    scope: Scope
    cls: str
    options: dict[str, Option]
    complete: bool  # False when some `**kwargs` could not be followed
    kwargs_names: list[str]  # the dicts passed with ** (for messages)

    def option(self, name: str) -> Option | None:
        return self.options.get(name)

    @property
    def dataset(self) -> cst.BaseExpression | None:
        option = self.options.get("dataset")
        return option.node.value if option is not None and isinstance(option.node, cst.Arg) else None


def build_loader(facts: ModuleFacts, call: cst.Call, scope: Scope, cls: str) -> Loader:
    options, complete, kwargs_names = call_options(facts, call, scope, POSITIONAL)
    return Loader(call, scope, cls, options, complete, kwargs_names)


def call_options(
    facts: ModuleFacts, call: cst.Call, scope: Scope, positional_names: tuple[str, ...] = ()
) -> tuple[dict[str, Option], bool, list[str]]:
    """Every argument of a call as a named option: (options, complete, the `**` dicts' names)."""
    options: dict[str, Option] = {}
    complete = True
    kwargs_names: list[str] = []
    positional = 0
    evaluate = facts.evaluator.value
    for arg in call.args:
        if arg.star == "*":
            complete = False
            continue
        if arg.star == "**":
            from_dict = dict_options(facts, arg.value, scope)
            name = facts.code(arg.value)
            kwargs_names.append(name)
            complete = complete and from_dict.complete
            for key, option in from_dict.options.items():
                option.via = f"`**{name}`"
                options.setdefault(key, option)
            continue
        if arg.keyword is not None:
            key = arg.keyword.value
        elif positional < len(positional_names):
            key = positional_names[positional]
            positional += 1
        else:
            complete = False
            continue
        options[key] = Option(key, evaluate(arg.value, scope), node=arg)
    return options, complete, kwargs_names


def dict_options(facts: ModuleFacts, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> DictOptions:
    """The keys a dict expression holds at the `**` site, following names, merges and updates."""
    result = DictOptions()
    if depth > 6:
        return DictOptions(complete=False)
    evaluate = facts.evaluator.value
    if isinstance(expr, cst.Dict):
        for element in expr.elements:
            if isinstance(element, cst.StarredDictElement):
                result.merge(dict_options(facts, element.value, scope, depth + 1))
            elif isinstance(element.key, cst.SimpleString):
                key = str(element.key.evaluated_value)
                result.options[key] = Option(key, evaluate(element.value, scope), node=element)
            else:
                result.complete = False
        return result
    if (
        isinstance(expr, cst.Call)
        and facts.qualname(expr.func, scope) in ("dict", None)
        and _is_name(expr.func, "dict")
    ):
        for arg in expr.args:
            if arg.keyword is not None:
                key = arg.keyword.value
                result.options[key] = Option(key, evaluate(arg.value, scope), node=arg)
            elif arg.star == "**" or not arg.star:
                result.merge(dict_options(facts, arg.value, scope, depth + 1))
            else:
                result.complete = False
        return result
    if isinstance(expr, cst.IfExp):  # `{"num_workers": 1, "pin_memory": True} if args.cuda else {}`
        result.merge(dict_options(facts, expr.body, scope, depth + 1), conditional=True)
        result.merge(dict_options(facts, expr.orelse, scope, depth + 1), conditional=True)
        return result
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        result.merge(dict_options(facts, expr.left, scope, depth + 1))
        result.merge(dict_options(facts, expr.right, scope, depth + 1))
        return result
    if isinstance(expr, cst.Name):
        bindings = scope.lookup(expr.value)
        assigned = [
            b for b in bindings if b.kind is BindingKind.ASSIGN and b.value is not None and b.index is None
        ]
        if not bindings or len(assigned) != len(bindings):
            return DictOptions(complete=False)  # a parameter, a loop variable, ...
        for binding in assigned:
            result.merge(dict_options(facts, binding.value, binding.scope, depth + 1))  # type: ignore[arg-type]
        home = assigned[0].scope
        for update in facts.method_calls_on(expr.value, home, "update"):
            for arg in update.node.args:
                if arg.keyword is not None:
                    key = arg.keyword.value
                    option = Option(key, evaluate(arg.value, update.scope), node=arg)
                    result.merge(DictOptions({key: option}), conditional=update.conditional)
                else:
                    result.merge(dict_options(facts, arg.value, update.scope, depth + 1), update.conditional)
        for key, value, conditional in facts.item_assignments(home, expr.value):
            result.merge(DictOptions({key: Option(key, evaluate(value, home))}), conditional)
        return result
    return DictOptions(complete=False)


def _is_name(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name


# An epoch this long is never finished in practice: minGPT's `RandomSampler(ds, replacement=True,
# num_samples=int(1e10))` is an endless stream whose iterator is never exhausted, hence never re-created.
ENDLESS_EPOCH = 10**9
RANDOM_SAMPLERS = frozenset({"torch.utils.data.RandomSampler", "torch.utils.data.sampler.RandomSampler"})


def has_endless_epochs(facts: ModuleFacts, loader: Loader) -> bool:
    """The loader's sampler draws with replacement at least ENDLESS_EPOCH samples per epoch."""
    option = loader.option("sampler")
    if option is None or option.conditional:
        return False
    sampler = option.value.node
    if not isinstance(sampler, cst.Call) or facts.qualname(sampler.func, loader.scope) not in RANDOM_SAMPLERS:
        return False
    positional = [arg.value for arg in sampler.args if arg.keyword is None and not arg.star]
    keywords = {arg.keyword.value: arg.value for arg in sampler.args if arg.keyword is not None}
    replacement = keywords.get("replacement", positional[1] if len(positional) > 1 else None)
    samples = keywords.get("num_samples", positional[2] if len(positional) > 2 else None)
    if replacement is None or samples is None or literal_of(replacement) != (True, True):
        return False
    count = constant_number(samples)
    return count is not None and count >= ENDLESS_EPOCH
