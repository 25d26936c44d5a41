"""Module structure: which attributes of an `nn.Module` subclass hold a stack of repeated blocks, how deep,
and how `forward` applies them.

A *stack* is an attribute (`self.blocks`, or `self.transformer.h` inside an `nn.ModuleDict`) holding an
`nn.ModuleList` or `nn.Sequential` of blocks of one class built repeatedly:

- a comprehension or generator, `nn.ModuleList([Block(cfg) for _ in range(n)])`, `nn.Sequential(*(...))`;
- an empty `nn.ModuleList()` (or a local list) filled by `.append(Block(...))` (or `copy.deepcopy` of a block)
  in a `for _ in range(n)` loop;
- a clone helper of the project, `_get_clones(layer, n)` (a function that returns such a container);
- nested in a container, `nn.ModuleDict(dict(h=nn.ModuleList(...)))` or `nn.ModuleDict({"h": ...})`;
- handed to the constructor by a function of the module and stored (`self.layers = layers`):
  `Encoder(d_model, nn.ModuleList(blocks))` after `blocks.append(EncoderBlock(...))` in a `for _ in range(N)`
  loop of that function (the stack is that construction, counted by that function's loop).

Blocks built from a per-index entry of a constructor parameter (`Stage(dims[i]) for i in range(4)`) are
stages of different widths, not repeated blocks. Five named attributes (`self.res1 = ...`) are no stack, nor
are built-in layers or project classes that wrap one (they save only their input, as checkpointing does).

Its *depth* is the count of the `range(...)`: a literal, or configurable — a constructor parameter (with its
default), a config field (`config.n_layer`, with a default found in a config class of the module or an
argparse option), `self.depth`, a module-level constant (`n_layers = 6`, kept as `Depth.constant`), or a count
computed from these (`int(math.log(upscale, 2))`, `depth // 2`), evaluated from their defaults as Python does.
Unknown depths stay unknown (a rule decides what that means).

An *application* is where the forward pass runs the blocks one after another: `for blk in self.blocks:
x = blk(x, mask)` (also through `enumerate`, `zip`, `self.blocks[i]` in a `range(len(self.blocks))` loop, and
with the body on the `for` line), or
an `nn.Sequential` called whole (`x = self.blocks(x)`), in `forward` or in a method that `forward` calls
(`forward_features`, `forward_encoder`). Loops in `__init__`, weight initialisation, KV-cache set-up, `crop`
helpers, `get_intermediate_layers` or `generate` are not reached from `forward` and are not applications.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.names import Scope, dotted
from torchlint.facts.syntax.values import literal_of
from torchlint.facts.syntax.walk import statements

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord, ClassRecord, FunctionRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule

MAX_DEPTH = 3
# What a computed count may be made of (`int(math.log(upscale, 2))`, `depth // 2`): evaluated as Python does.
_OPERATIONS = {
    "Add": operator.add,
    "Subtract": operator.sub,
    "Multiply": operator.mul,
    "FloorDivide": operator.floordiv,
    "Divide": operator.truediv,
}
_FUNCTIONS = {
    "int": int,
    "round": round,
    "math.log": math.log,
    "math.log2": math.log2,
    "math.ceil": math.ceil,
    "math.floor": math.floor,
}
# Builtins a thin wrapper around one layer may call (no module built, no work hidden).
_PLAIN_BUILTINS = {
    "super", "int", "float", "bool", "len", "range", "hasattr", "getattr", "isinstance", "tuple", "list",
    "min", "max", "abs",
}  # fmt: skip
# Reads of the environment that take a default (`os.environ.get("LAYERS", "12")`).
_ENVIRONMENT = {"os.environ.get", "os.getenv"}
_MODULE_LIST = "torch.nn.ModuleList"
_SEQUENTIAL = "torch.nn.Sequential"
_MODULE_DICT = "torch.nn.ModuleDict"
_CONTAINERS = {_MODULE_LIST: "nn.ModuleList", _SEQUENTIAL: "nn.Sequential"}


@dataclass(frozen=True)
class Depth:
    """How many blocks a stack holds: `value` when known (a literal, or the default of what configures it),
    `how` as a message says it, `configurable` when a parameter, a config field or an option sets it."""

    value: int | None
    how: str
    configurable: bool = False
    # The constructor parameter that sets it (`num_layers` of `__init__`, or `config.n_layer` of its
    # `config`), where the callers that build the class say how deep each model is.
    parameter: str | None = None
    # The module-level constant it is read from (`n_layers = 6` among a script's hyperparameters).
    constant: str | None = None


@dataclass(eq=False)
class Application:
    """Where a method reached from `forward` runs the stack's blocks one after another."""

    method: FunctionRecord
    node: cst.CSTNode  # the loop (`for blk in self.blocks:`) or the call of a Sequential (`self.blocks(x)`)
    how: str  # "a loop in `forward`", "`self.blocks(x)` in `forward_features`, called by `forward`"
    call: cst.Call | None = None  # the call of one block (`blk(x, mask)`) or of the whole Sequential
    statement: cst.SimpleStatementLine | None = None  # `x = blk(x, mask)` alone on its line
    block: str = ""  # how the loop names one block (`blk`, `self.blocks[i]`)
    whole: bool = False  # the Sequential is called whole
    stages: bool = False  # each block is itself an `nn.Sequential` (a stage): checkpoint_sequential it
    inline: bool = False  # the loop's body sits on its `for` line (`for f in self.layers: x = f(x)`)

    @property
    def owner(self) -> str:
        """How the method names its module (`self`)."""
        return _self(self.method)

    @property
    def carried(self) -> str:
        """The value the blocks carry (`x` of `x = blk(x, mask)`); "" without a fixable statement."""
        if self.statement is None:
            return ""
        small = self.statement.body[0]
        return small.targets[0].target.value if isinstance(small, cst.Assign) else ""  # type: ignore[union-attr]

    @property
    def scope(self) -> Scope:
        return self.method.scope

    @property
    def keywords(self) -> tuple[str, ...]:
        """The keyword arguments the block call passes (`**` as `**`)."""
        if self.call is None:
            return ()
        return tuple(
            a.keyword.value if a.keyword is not None else "**"
            for a in self.call.args
            if a.keyword or a.star == "**"
        )


@dataclass(eq=False)
class Stack:
    cls: ClassRecord
    attribute: str  # "blocks", "transformer.h"
    node: cst.CSTNode  # the container's construction (where a finding sits)
    container: str  # "nn.ModuleList", "nn.Sequential"
    block: str  # the block class as written ("Block"), or "" for clones of a parameter
    depth: Depth
    how: str  # "a comprehension", "`.append` in a loop", "`_get_clones(...)`"
    method: FunctionRecord  # the method that builds it (`__init__`)
    applications: list[Application] = field(default_factory=list)
    stages: bool = False  # each element is itself an `nn.Sequential` of repeated blocks (ConvNeXt's stages)


class StructureAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def stacks(self) -> list[Stack]:
        """Every stack of this module's classes, with its applications (possibly none)."""
        source = self.source
        if (
            "ModuleList" not in source.text
            and "Sequential" not in source.text
            and "clones" not in source.text
        ):
            return []
        found: list[Stack] = []
        for cls in source.classes:
            for attribute, values in cls.attributes.items():
                for value, scope in values:
                    method = source.function_of_scope(scope)
                    if method is None or method.owner is not cls:
                        continue
                    for path, node in _nested(value, attribute, source, scope):
                        stack = self._stack(cls, method, path, node, scope)
                        if stack is not None:
                            found.append(stack)
                        elif (
                            isinstance(node, cst.Name)
                            and method.name == "__init__"
                            and node.value in method.params
                        ):
                            found.extend(self._passed(cls, method, path, node.value))
        for stack in found:
            stack.applications = self._applications(stack)
        return found

    def stacks_of(self, cls: ClassRecord) -> list[Stack]:
        return [stack for stack in self.stacks if stack.cls is cls]

    # -- what a stack is ----------------------------------------------------------------------------------

    def _stack(
        self, cls: ClassRecord, method: FunctionRecord, path: str, node: cst.CSTNode, scope: Scope
    ) -> Stack | None:
        source = self.source
        if not isinstance(node, cst.Call):
            return None
        qualname = source.qualname(node.func, scope)
        container = _CONTAINERS.get(qualname or "")
        if container is None:
            return self._clones(cls, method, path, node, scope)
        args = [arg for arg in node.args if arg.keyword is None]
        if not args:  # `nn.ModuleList()` filled by `.append(...)` in a loop
            return self._appended(cls, method, path, node, container, f"{_self(method)}.{path}", scope)
        if len(args) != 1:
            return None  # `nn.Sequential(a, b, c)`: named, different layers
        value = args[0].value
        if isinstance(value, cst.List) and len(value.elements) == 1:
            element = value.elements[0]
            if isinstance(element, cst.StarredElement):
                value = element.value  # `nn.Sequential(*[...])` written as a list with one star
        built = self._repeated(value, scope, method)
        if built is not None:
            block, depth = built
            return Stack(cls, path, node, container, block, depth, "a comprehension", method)
        if isinstance(value, cst.Name):  # `layers = []` then `layers.append(Block())` in a loop
            return self._appended(cls, method, path, node, container, value.value, scope)
        return None

    def _passed(self, cls: ClassRecord, init: FunctionRecord, path: str, param: str) -> list[Stack]:
        """`self.layers = layers` of a constructor parameter, where a function of this module builds the
        class with a container of repeated blocks (`Encoder(d_model, nn.ModuleList(blocks))` after
        `blocks.append(EncoderBlock(...))` in a `for _ in range(N)` loop): the stack is that container,
        its depth what the building function's loop counts."""
        from torchlint.facts.syntax.calls import argument_for

        found = []
        for call in self._constructions.get(id(cls.node), ()):
            builder = self.source.function_of_scope(call.scope)
            argument = argument_for(call.node, init, param)
            if builder is None or argument is None:
                continue
            if isinstance(argument, cst.Name):  # `layers = nn.ModuleList(blocks)` then `Encoder(d, layers)`
                values = self.source.assigned_values(argument, call.scope)
                argument = values[0].value if len(values) == 1 else argument
            stack = self._stack(cls, builder, path, argument, call.scope)
            if stack is not None:
                # The builder's parameter, not the class's: what callers of the class pass says nothing of it
                found.append(replace(stack, depth=replace(stack.depth, parameter=None)))
        return found

    @cached_property
    def _constructions(self) -> dict[int, list[CallRecord]]:
        """id of a class of this module -> the calls of this module that build it."""
        names = {cls.name for cls in self.source.classes}
        found: dict[int, list[CallRecord]] = {}
        for call in self.source.calls:
            if not (isinstance(call.node.func, cst.Name) and call.node.func.value in names):
                continue
            cls = self.source.local_class(call.node.func, call.scope)
            if cls is not None:
                found.setdefault(id(cls.node), []).append(call)
        return found

    def _repeated(
        self, value: cst.BaseExpression, scope: Scope, method: FunctionRecord
    ) -> tuple[str, Depth] | None:
        """`[Block(...) for _ in range(n)]` or `(Block(...) for i in range(n))`: the block and the depth."""
        if not isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            return None
        for_in = value.for_in
        if for_in.inner_for_in is not None or for_in.ifs:
            return None
        element = value.elt
        block = self._block(element, scope, for_in.target, method)
        if block is None:
            return None
        depth = self._range_depth(for_in.iter, scope, method)
        return (block, depth) if depth is not None else None

    def _block(
        self, element: cst.BaseExpression, scope: Scope, target: cst.BaseExpression, method: FunctionRecord
    ) -> str | None:
        """The class of one repeated block, as written; None unless every block is built by one class
        with the same arguments apart from per-index values computed here (a drop-path rate)."""
        if not isinstance(element, cst.Call):
            return None
        name = dotted(element.func)
        if name is None:
            return None
        last = name.rsplit(".", 1)[-1]
        if not (
            last[:1].isupper() or last in method.params or "block" in last.lower() or "layer" in last.lower()
        ):
            return None
        if (self.source.qualname(element.func, scope) or "").startswith("torch.nn."):
            return (
                None  # `nn.Linear` / `nn.Conv2d`: a layer saves only its input, which checkpointing saves too
            )
        if self._one_layer(element, scope):
            return None  # a project class that wraps one such layer saves no more
        index = target.value if isinstance(target, cst.Name) else None
        params = set(method.params)
        for arg in element.args:
            for node in _subscripts(arg.value):
                base = dotted(node.value)
                uses_index = index is not None and any(
                    isinstance(s.slice, cst.Index) and dotted(s.slice.value) == index for s in node.slice
                )
                if uses_index and base is not None and base.split(".")[0] in params:
                    return None  # `Stage(dims[i]) for i in range(4)`: stages of different widths
        return name

    def _one_layer(self, element: cst.Call, scope: Scope) -> bool:
        """A project class whose forward applies one built-in layer that runs as one kernel (a 1x1
        convolution, reshapes around it): like a bare `nn.Conv1d`, it saves only its input."""
        from torchlint.facts.torch.composition import CompositionAnalysis

        composition = self.source.analysis(CompositionAnalysis).of_built(element, scope)
        if composition is not None and composition.is_one_layer:
            return True
        found = self.source.resolve_class(element.func, scope)
        return found is not None and _owns_one_layer(*found)

    def _range_depth(self, expr: cst.BaseExpression, scope: Scope, method: FunctionRecord) -> Depth | None:
        """The count of `range(n)` / `range(1, n)`."""
        if not (isinstance(expr, cst.Call) and self.source.qualname(expr.func, scope) == "range"):
            return None
        args = [arg.value for arg in expr.args if arg.keyword is None]
        if len(args) == 1:
            return self.depth_of(args[0], scope, method)
        if len(args) == 2 and isinstance(args[0], cst.Integer):
            depth = self.depth_of(args[1], scope, method)
            start = int(args[0].value)
            if depth.value is not None:
                return Depth(depth.value - start, depth.how, depth.configurable, depth.parameter)
            return depth
        return None

    def depth_of(
        self, expr: cst.BaseExpression, scope: Scope, method: FunctionRecord, hops: int = 0
    ) -> Depth:
        """What a count is: a literal, a parameter (with its default), a config field, `self.depth`."""
        source = self.source
        code = source.code(expr)
        if isinstance(expr, cst.Integer):
            return Depth(int(expr.value, 0), code)
        if isinstance(expr, cst.Name):
            param = _param(method, expr.value)
            if param is not None:
                default = _int(param.default)
                shown = f", default {default}" if default is not None else ""
                parameter = expr.value if method.name == "__init__" else None
                return Depth(default, f"parameter `{expr.value}`{shown}", True, parameter)
            values = source.assigned_values(expr, scope)
            module_level = bool(values) and all(value.scope is source.module_scope for value in values)
            default = None
            if len(values) == 1:
                default = environment_default(source, values[0].value, values[0].scope)
            if default is not None:  # `LAYERS = int(os.environ.get("LAYERS", "12"))`: 12 unless overridden
                shown = f"`{expr.value}` (environment, default {default})"
                return Depth(default, shown, True, constant=expr.value if module_level else None)
            if len(values) == 1 and hops < MAX_DEPTH:
                depth = self.depth_of(values[0].value, values[0].scope, method, hops + 1)
                if module_level and depth.value is not None and not depth.configurable:
                    return replace(depth, constant=expr.value)
                return depth
            value = source.value(expr, scope)  # every binding the same literal
            if value.is_literal and type(value.literal) is int:
                return Depth(value.literal, code, constant=expr.value if module_level else None)
            return Depth(None, f"`{code}`", True)
        if isinstance(expr, cst.BinaryOperation) or (
            isinstance(expr, cst.Call) and dotted(expr.func) != "getattr"
        ):
            return self._computed_depth(expr, scope, method, hops)
        if isinstance(expr, cst.Attribute):
            if source.is_self_attribute(expr, scope) and hops < MAX_DEPTH:
                values = source.assigned_values(expr, scope)
                if len(values) == 1:
                    return self.depth_of(values[0].value, values[0].scope, method, hops + 1)
            default = self._config_default(expr.attr.value)
            shown = f", default {default}" if default is not None else ""
            # `config.n_layer` of the constructor's `config`: "config.n_layer", read where the class is built
            holder = expr.value
            parameter = None
            if method.name == "__init__" and isinstance(holder, cst.Name) and _param(method, holder.value):
                parameter = f"{holder.value}.{expr.attr.value}"
            return Depth(default, f"`{code}`{shown}", True, parameter)
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name):  # `depths[i]`: per stage
            param = _param(method, expr.value.value)
            default = param.default if param is not None else None
            if isinstance(default, (cst.Tuple, cst.List)):
                counts = [_int(element.value) for element in default.elements]
                if counts and all(count is not None for count in counts):
                    largest = max(counts)  # type: ignore[type-var]
                    return Depth(largest, f"parameter `{expr.value.value}`, up to {largest} per stage", True)
            return Depth(None, f"`{code}`", True)
        if isinstance(expr, cst.Call) and dotted(expr.func) == "getattr" and len(expr.args) == 3:
            default = _int(expr.args[2].value)
            shown = f", default {default}" if default is not None else ""
            return Depth(default, f"`{code}`{shown}", True)
        return Depth(None, f"`{code}`", True)

    def _computed_depth(
        self, expr: cst.BaseExpression, scope: Scope, method: FunctionRecord, hops: int
    ) -> Depth:
        """A count computed from literals and parameters (`int(math.log(upscale, 2))`, `depth // 2`),
        evaluated from their defaults: configurable when a parameter or a config field enters it."""
        code = self.source.code(expr)
        value, configurable = self._number(expr, scope, method, hops)
        if type(value) is not int:  # unknown (or not a count `range` takes)
            return Depth(None, f"`{code}`", True)
        shown = f", default {value}" if configurable else ""
        return Depth(value, f"`{code}`{shown}", configurable)

    def _number(
        self, expr: cst.BaseExpression, scope: Scope, method: FunctionRecord, hops: int
    ) -> tuple[int | float | None, bool]:
        """The value of an arithmetic expression of counts, and whether it is configurable."""
        if hops > MAX_DEPTH:
            return None, True
        if isinstance(expr, cst.Float):
            return float(expr.value.replace("_", "")), False
        if isinstance(expr, cst.BinaryOperation):
            operation = _OPERATIONS.get(type(expr.operator).__name__)
            left, left_configurable = self._number(expr.left, scope, method, hops + 1)
            right, right_configurable = self._number(expr.right, scope, method, hops + 1)
            configurable = left_configurable or right_configurable
            if operation is None or left is None or right is None:
                return None, configurable
            try:
                return operation(left, right), configurable
            except (ArithmeticError, ValueError):
                return None, configurable
        if isinstance(expr, cst.Call):
            function = _FUNCTIONS.get(self.source.qualname(expr.func, scope) or "")
            args = [arg.value for arg in expr.args]
            if function is None or not args or any(arg.keyword or arg.star for arg in expr.args):
                return None, True
            numbers = [self._number(arg, scope, method, hops + 1) for arg in args]
            configurable = any(c for _, c in numbers)
            if any(n is None for n, _ in numbers):
                return None, configurable
            try:
                return function(*(n for n, _ in numbers)), configurable
            except (ArithmeticError, ValueError, TypeError):
                return None, configurable
        depth = self.depth_of(expr, scope, method, hops + 1)
        return depth.value, depth.configurable

    def _config_default(self, name: str) -> int | None:
        """A config field's default: `n_layer: int = 12` in a class of this module, or an argparse option."""
        for cls in self.source.classes:
            for statement in cls.node.body.body if isinstance(cls.node.body, cst.IndentedBlock) else ():
                if not isinstance(statement, cst.SimpleStatementLine):
                    continue
                for small in statement.body:
                    if isinstance(small, cst.AnnAssign) and dotted(small.target) == name:
                        return _int(small.value)
                    if isinstance(small, cst.Assign) and any(dotted(t.target) == name for t in small.targets):
                        return _int(small.value)
        default = self.source.argparse_default(name)
        return _int(default) if default is not None else None

    def _appended(
        self,
        cls: ClassRecord,
        method: FunctionRecord,
        path: str,
        node: cst.Call,
        container: str,
        receiver: str,
        scope: Scope,
    ) -> Stack | None:
        """`self.layers = nn.ModuleList()` (or a local `layers = []`) filled by `.append(Block(...))` in a
        `for _ in range(n)` loop of the same method."""
        for loop in method.loops:
            if not isinstance(loop.node, cst.For):
                continue
            appends = [
                call
                for call in loop.calls
                if isinstance(call.node.func, cst.Attribute)
                and call.node.func.attr.value == "append"
                and dotted(call.node.func.value) == receiver
                and len(call.node.args) == 1
            ]
            if len(appends) != 1 or loop.parent is not None and _is_range(loop.parent.node, self.source):
                continue
            if receiver != f"{_self(method)}.{path}" and not self._empty_list(receiver, scope):
                continue
            appended = appends[0].node.args[0].value
            if isinstance(appended, cst.Call) and self.source.qualname(appended.func, loop.scope) == (
                "copy.deepcopy"
            ):  # `self.layers.append(copy.deepcopy(layer))`: a copy of one block per pass, as a new one is
                appended = appended.args[0].value if len(appended.args) == 1 else appended
            if isinstance(appended, cst.Name):  # `block = Block(...)` then `blocks.append(block)`
                values = self.source.assigned_values(appended, loop.scope)
                if len(values) == 1 and isinstance(values[0].value, cst.Call):
                    appended = values[0].value
            stage = self._stage(appended, loop.scope, method)
            if stage is not None:
                block, depth = stage
                how = "`nn.Sequential` stages appended in a loop"
                return Stack(cls, path, node, container, block, depth, how, method, stages=True)
            block = self._block(appended, scope, loop.node.target, method)
            depth = self._range_depth(loop.node.iter, loop.scope, method)
            if block is None or depth is None:
                continue
            return Stack(cls, path, node, container, block, depth, "`.append(...)` in a loop", method)
        return None

    def _stage(
        self, value: cst.BaseExpression, scope: Scope, method: FunctionRecord
    ) -> tuple[str, Depth] | None:
        """`stage = nn.Sequential(*[Block(...) for j in range(depths[i])])` appended: a stage of repeated
        blocks, with the largest per-stage depth."""
        if isinstance(value, cst.Name):
            values = self.source.assigned_values(value, scope)
            if len(values) != 1:
                return None
            value = values[0].value
        if not (isinstance(value, cst.Call) and self.source.qualname(value.func, scope) == _SEQUENTIAL):
            return None
        args = [arg for arg in value.args if arg.keyword is None]
        if len(args) != 1:
            return None
        inner = args[0].value
        if (
            isinstance(inner, cst.List)
            and len(inner.elements) == 1
            and isinstance(inner.elements[0], cst.StarredElement)
        ):
            inner = inner.elements[0].value
        return self._repeated(inner, scope, method)

    def _empty_list(self, name: str, scope: Scope) -> bool:
        values = self.source.assigned_values(cst.Name(name), scope)
        return len(values) == 1 and isinstance(values[0].value, cst.List) and not values[0].value.elements

    def _clones(
        self, cls: ClassRecord, method: FunctionRecord, path: str, node: cst.Call, scope: Scope
    ) -> Stack | None:
        """`_get_clones(layer, n)`: a function of the project that returns a container of copies."""
        target = self.source.callee_of_call(node, scope)
        if target is None:
            return None
        home, function = target
        for returned in function.returns:
            if not isinstance(returned, cst.Call):
                continue
            container = _CONTAINERS.get(home.qualname(returned.func, function.scope) or "")
            args = [arg.value for arg in returned.args if arg.keyword is None]
            if (
                container is None
                or len(args) != 1
                or not isinstance(args[0], (cst.ListComp, cst.GeneratorExp))
            ):
                continue
            comprehension = args[0]
            iterated = comprehension.for_in.iter
            if not (isinstance(iterated, cst.Call) and dotted(iterated.func) == "range" and iterated.args):
                continue
            count = iterated.args[-1].value
            if not isinstance(count, cst.Name) or count.value not in function.params:
                continue
            from torchlint.facts.syntax.calls import argument_for

            argument = argument_for(node, function, count.value)
            if argument is None:
                continue
            depth = self.depth_of(argument, scope, method)
            how = f"`{self.source.code(node.func)}(...)`"
            return Stack(cls, path, node, container, "", depth, how, method)
        return None

    # -- how forward applies it ---------------------------------------------------------------------------

    def forward_path(self, cls: ClassRecord) -> list[tuple[FunctionRecord, str]]:
        """`forward` and the methods it calls on `self` (transitively, a few calls deep), with how each is
        reached."""
        forward = cls.methods.get("forward")
        if forward is None:
            return []
        found = [(forward, "`forward`")]
        seen = {id(forward)}
        frontier = [forward]
        for _ in range(MAX_DEPTH):
            following = []
            for method in frontier:
                name = _self(method)
                for call in method.calls:
                    func = call.node.func
                    if isinstance(func, cst.Attribute) and dotted(func.value) == name:
                        callee = cls.methods.get(func.attr.value)
                        if callee is not None and id(callee) not in seen:
                            seen.add(id(callee))
                            found.append((callee, f"`{callee.name}`, called by `{method.name}`"))
                            following.append(callee)
            frontier = following
        return found

    def _applications(self, stack: Stack) -> list[Application]:
        found: list[Application] = []
        for method, reached in self.forward_path(stack.cls):
            name = f"{_self(method)}.{stack.attribute}"
            for loop in method.loops:
                application = self._loop_application(loop, name, reached)
                if application is not None:
                    application.stages = stack.stages
                    found.append(application)
            if stack.container == "nn.Sequential":
                for call in method.calls:
                    if dotted(call.node.func) == name:
                        statement = self._carried_statement(method, call.node)
                        how = f"`{self.source.code(call.node.func)}(...)` in {reached}"
                        found.append(
                            Application(method, call.node, how, call.node, statement, name, whole=True)
                        )
        return found

    def _loop_application(self, loop: LoopRecord, name: str, reached: str) -> Application | None:
        node = loop.node
        if not isinstance(node, cst.For):
            return None
        block = _iterated_block(node, name, self.source, loop.scope)
        if block is None:
            return None
        calls = [call.node for call in loop.all_calls() if self.source.code(call.node.func) == block]
        if not calls:
            return None
        call = calls[0]
        if not self._carries(node.body, call):
            return (
                None  # `y += expert(x)`, `outs.append(head(x))`: blocks side by side, not one after another
            )
        statement = self._carried_statement_in(node.body, call) if len(calls) == 1 else None
        inline = isinstance(node.body, cst.SimpleStatementSuite)
        return Application(loop.function, node, f"a loop in {reached}", call, statement, block, inline=inline)  # type: ignore[arg-type]

    def _carries(self, body: cst.CSTNode, call: cst.Call) -> bool:
        """The block's result becomes its next input: an assignment in the loop binds the name that the
        call's first argument reads (`x = blk(x)`, `x, attn = blk(x)`, `x = x + blk(norm(x))`), also in a
        body written on the loop's own line (`for f in self.layers: x = f(x)`)."""
        from torchlint.facts.syntax.walk import contains

        first = next((a.value for a in call.args if a.keyword is None and not a.star), None)
        if first is None:
            return False
        read = {n.value for n in _names_in(first)}
        for statement in statements(body):
            if not isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                continue
            for small in statement.body:
                if isinstance(small, cst.Assign) and contains(small.value, call):
                    bound = {n.value for target in small.targets for n in _names_in(target.target)}
                    if bound & read:
                        return True
        return False

    def _carried_statement(self, method: FunctionRecord, call: cst.Call) -> cst.SimpleStatementLine | None:
        return self._carried_statement_in(method.node.body, call)

    def _carried_statement_in(self, body: cst.CSTNode, call: cst.Call) -> cst.SimpleStatementLine | None:
        """`x = blk(x, ...)`: the statement, alone on its line, that runs one block on the carried value."""
        for statement in statements(body):
            if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
                continue
            small = statement.body[0]
            if isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1:
                target = small.targets[0].target
                first = next((a.value for a in call.args if a.keyword is None and not a.star), None)
                if (
                    isinstance(target, cst.Name)
                    and isinstance(first, cst.Name)
                    and first.value == target.value
                ):
                    return statement
        return None


def _owns_one_layer(home: SourceModule, cls: ClassRecord) -> bool:
    """A direct `nn.Module` subclass whose methods build one module, a built-in layer that runs as one kernel
    (`self.conv = nn.Conv1d(c, c, 1)`), and whose constructor calls nothing else that could build one (only
    tensor functions and methods: `torch.qr(...)`, `W.view(...)`): all it learns is that layer, and the rest
    of its forward is math on the layer's weight or light work on its input (an invertible 1x1 convolution
    and the log-determinant of its weight)."""
    from torchlint.facts.torch.composition import ONE_KERNEL_LAYERS

    if not cls.node.bases or any(
        base.keyword is not None or home.qualname(base.value, cls.scope) != "torch.nn.Module"
        for base in cls.node.bases
    ):
        return False
    built = []
    for method in cls.methods.values():
        for call in method.calls:
            qualname = home.qualname(call.node.func, call.scope)
            if qualname is None:
                if isinstance(call.node.func, cst.Attribute):
                    continue  # a method of a value (`W.view(...)`, `self.conv(z)`)
                return False
            if qualname.startswith("torch.nn.") and qualname.rsplit(".", 1)[1][:1].isupper():
                built.append(qualname.rsplit(".", 1)[1])
            elif home.resolve_class(call.node.func, call.scope) is not None:
                return False  # a project module
            elif not (qualname.startswith("torch.") or qualname in _PLAIN_BUILTINS):
                return False  # a call that might build a module or do work unseen (a factory, a library)
    return len(built) == 1 and built[0] in ONE_KERNEL_LAYERS


def _iterated_block(node: cst.For, name: str, source: SourceModule, scope: Scope) -> str | None:
    """How the body names one block of `name` (`self.blocks`): `for blk in self.blocks`, `for i, blk in
    enumerate(...)`, `for blk, pos in zip(self.blocks, ...)`, `for i in range(...)` with `self.blocks[i]`."""
    iterated, target = node.iter, node.target
    if dotted(iterated) == name:
        return target.value if isinstance(target, cst.Name) else None
    if not isinstance(iterated, cst.Call):
        return None
    func = source.qualname(iterated.func, scope)
    args = [arg.value for arg in iterated.args if arg.keyword is None]
    if func == "enumerate" and args and dotted(args[0]) == name:
        if isinstance(target, cst.Tuple) and len(target.elements) == 2:
            second = target.elements[1].value
            return second.value if isinstance(second, cst.Name) else None
    if func == "zip" and isinstance(target, cst.Tuple) and len(target.elements) == len(args):
        for position, arg in enumerate(args):
            if dotted(arg) == name:
                element = target.elements[position].value
                return element.value if isinstance(element, cst.Name) else None
    if func == "range" and args and isinstance(target, cst.Name):
        return f"{name}[{target.value}]"  # `for i in range(self.depth): x = self.blocks[i](x)`
    return None


def _nested(
    value: cst.BaseExpression, path: str, source: SourceModule, scope: Scope
) -> list[tuple[str, cst.BaseExpression]]:
    """The attribute itself, and containers nested in an `nn.ModuleDict(dict(h=...))` / `({"h": ...})`."""
    found = [(path, value)]
    if isinstance(value, cst.Call) and source.qualname(value.func, scope) == _MODULE_DICT and value.args:
        inner = value.args[0].value
        if isinstance(inner, cst.Call) and dotted(inner.func) == "dict":
            for arg in inner.args:
                if arg.keyword is not None:
                    found.extend(_nested(arg.value, f"{path}.{arg.keyword.value}", source, scope))
        elif isinstance(inner, cst.Dict):
            for element in inner.elements:
                if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                    key = element.key.evaluated_value
                    if isinstance(key, str) and key.isidentifier():
                        found.extend(_nested(element.value, f"{path}.{key}", source, scope))
    return found


def _names_in(expr: cst.BaseExpression) -> list[cst.Name]:
    """The plain names an expression reads or a target binds (through tuples, operators, calls, indexing)."""
    found = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.append(node)
        elif isinstance(node, (cst.Tuple, cst.List)):
            stack.extend(element.value for element in node.elements)
        elif isinstance(node, cst.BinaryOperation):
            stack.extend((node.left, node.right))
        elif isinstance(node, cst.Call):
            stack.extend(arg.value for arg in node.args)
        elif isinstance(node, cst.Subscript):
            stack.append(node.value)
        elif isinstance(node, cst.StarredElement):
            stack.append(node.value)
    return found


def _subscripts(expr: cst.BaseExpression):
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Subscript):
            yield node
            stack.append(node.value)
        elif isinstance(node, cst.BinaryOperation):
            stack.extend((node.left, node.right))
        elif isinstance(node, cst.Call):
            stack.extend(arg.value for arg in node.args)
        elif isinstance(node, cst.Attribute):
            stack.append(node.value)


def _is_range(node: cst.CSTNode, source: SourceModule) -> bool:
    return isinstance(node, cst.For) and isinstance(node.iter, cst.Call) and dotted(node.iter.func) == "range"


def _self(method: FunctionRecord) -> str:
    return method.params[0] if method.params else "self"


def _param(method: FunctionRecord, name: str) -> cst.Param | None:
    params = method.node.params
    for param in (*params.params, *params.kwonly_params, *params.posonly_params):
        if param.name.value == name:
            return param
    return None


def environment_default(source: SourceModule, expr: cst.BaseExpression, scope: Scope) -> int | None:
    """The literal default of a count read from the environment: `int(os.environ.get("LAYERS", "12"))`,
    `int(os.getenv("LAYERS", 12))` -> 12; None for anything else (no default, a computed one)."""
    if isinstance(expr, cst.Call) and (source.qualname(expr.func, scope) or dotted(expr.func)) == "int":
        if len(expr.args) != 1 or expr.args[0].keyword is not None or expr.args[0].star:
            return None
        expr = expr.args[0].value
    if not isinstance(expr, cst.Call) or source.qualname(expr.func, scope) not in _ENVIRONMENT:
        return None
    default = None
    for position, arg in enumerate(expr.args):
        if arg.star:
            return None
        keyword = arg.keyword.value if arg.keyword is not None else None
        if (keyword is None and position == 1) or keyword == "default":
            default = arg.value
    ok, literal = literal_of(default) if default is not None else (False, None)
    if ok and isinstance(literal, str) and literal.strip().isdigit():
        return int(literal)
    return literal if ok and type(literal) is int else None


def _int(expr: cst.BaseExpression | None) -> int | None:
    if isinstance(expr, cst.Integer):
        try:
            return int(expr.value, 0)
        except ValueError:
            return None
    return None
