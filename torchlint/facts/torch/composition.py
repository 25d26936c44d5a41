"""What a model's forward pass is made of: the built-in `torch.nn` layers it calls, and whether it does work
of its own around them. Asked to tell models that `torch.compile` cannot speed up from those it can:

- one built-in layer behind a thin wrapper (`x.view(n, -1)` then one `nn.Linear`) is one kernel, nothing to
  fuse, as a bare `nn.Linear` is;
- a model whose compute is an `nn.LSTM` / `GRU` / `RNN`, with only light layers around it (embeddings,
  linears, dropout, norms, activations, reshapes): Dynamo runs RNN modules eagerly
  (`torch._dynamo.config.allow_rnn` is False), and measured on torch 2.13 `torch.compile` captures no graph of
  such a model (a graph of the two `torch.zeros` of its initial states at most).

The forward pass is read, not guessed: the `self.x(...)` layers it calls (each assignment of `self.x`, through
`nn.Sequential` and project submodules), the methods of `self` it calls, and tensor operations from a short
vocabulary of reshapes and pointwise work. Anything else (a module handed in from outside, a call of a
function it cannot see, `torch.bmm`, `@`) makes the composition unknown, and unknown exempts nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.names import dotted
from torchlint.facts.syntax.walk import child_nodes

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import ClassRecord, FunctionRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope

MAX_DEPTH = 4

# Built-in layers that run as one kernel (or a fixed few): a model that is only one of them gives the compiler
# nothing to fuse.
ONE_KERNEL_LAYERS = {
    "Linear", "Bilinear", "Embedding", "EmbeddingBag", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
    "ConvTranspose2d", "ConvTranspose3d", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
}  # fmt: skip
# Layers that only reshape (or pass through): no kernel of their own worth a count.
RESHAPE_LAYERS = {"Identity", "Flatten", "Unflatten"}
# RNN modules Dynamo does not trace unless `torch._dynamo.config.allow_rnn` is set (cells it traces).
RNN_LAYERS = {"RNN", "LSTM", "GRU"}
# What feeds an RNN or reads its output without being work of its own worth compiling.
RNN_COMPANIONS = {
    "Embedding", "EmbeddingBag", "Linear", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
    "LayerNorm", "BatchNorm1d", "ReLU", "GELU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "LeakyReLU",
    "ELU", "SiLU", *RESHAPE_LAYERS,
}  # fmt: skip

# Tensor operations (as `torch.*` / `F.*` functions or tensor methods) that only shape, create or move.
_SHAPE = {
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose",
    "permute", "contiguous", "size", "dim", "numel", "expand", "expand_as", "narrow", "chunk", "split",
    "unbind", "cat", "concat", "concatenate", "stack", "zeros", "ones", "empty", "full", "zeros_like",
    "ones_like", "empty_like", "full_like", "arange", "to", "cuda", "cpu", "detach", "clone", "type_as",
    "new_zeros", "new_ones", "new_empty", "new_full", "pack_padded_sequence", "pad_packed_sequence",
    "pack_sequence", "pad_sequence",
}  # fmt: skip
# Those whose arguments are sizes: arithmetic in them (`x.size(0) * x.size(1)`) is shape math, not work.
_SIZED = {
    "view", "reshape", "expand", "narrow", "unflatten", "zeros", "ones", "empty", "full", "arange",
    "new_zeros", "new_ones", "new_empty", "new_full", "size",
}  # fmt: skip
# Pointwise work (and small reductions, an L2 normalisation written out: `e / (torch.norm(e, dim=1) + eps)`):
# fusable, but no work of consequence next to an RNN.
_POINTWISE = {
    "relu", "relu_", "gelu", "tanh", "sigmoid", "softmax", "log_softmax", "dropout", "silu", "elu",
    "leaky_relu", "float", "half", "bfloat16", "double", "long", "abs", "exp", "log", "clamp", "sum", "mean",
    "max", "min", "norm", "vector_norm", "normalize", "sqrt", "rsqrt", "pow", "square",
}  # fmt: skip
_TORCH_NAMESPACES = {"torch", "torch.nn.functional", "torch.nn.utils.rnn", "torch.Tensor", "torch.linalg"}
_BUILTINS = {
    "len", "int", "float", "bool", "isinstance", "hasattr", "range", "tuple", "list", "zip", "enumerate",
}  # fmt: skip
# Methods of an RNN layer its owner calls around it.
_LAYER_METHODS = {"flatten_parameters"}
_PLACEMENTS = {"to", "cuda", "cpu"}
_MODULE = "torch.nn.Module"
_SEQUENTIAL = "torch.nn.Sequential"


@dataclass(frozen=True)
class Composition:
    """A forward pass: the built-in layers it calls (once per call site, nested modules included), and
    whether it does pointwise work of its own or loops in Python."""

    layers: tuple[str, ...] = ()
    pointwise: bool = False
    loops: bool = False

    def __add__(self, other: Composition) -> Composition:
        return Composition(
            self.layers + other.layers, self.pointwise or other.pointwise, self.loops or other.loops
        )

    @property
    def is_one_layer(self) -> bool:
        """One built-in layer that runs as one kernel, and reshapes around it."""
        work = [layer for layer in self.layers if layer not in RESHAPE_LAYERS]
        return len(work) == 1 and work[0] in ONE_KERNEL_LAYERS and not self.pointwise and not self.loops

    @property
    def is_rnn_bound(self) -> bool:
        """An RNN module and light layers only: what Dynamo would compile of it is next to nothing."""
        return any(layer in RNN_LAYERS for layer in self.layers) and all(
            layer in RNN_LAYERS or layer in RNN_COMPANIONS for layer in self.layers
        )


def _total(parts: Iterable[Composition | None]) -> Composition | None:
    total = Composition()
    for part in parts:
        if part is None:
            return None
        total = total + part
    return total


class _Unknown(Exception):
    """The forward pass does something this reading cannot tell apart from real work."""


class CompositionAnalysis:
    """The compositions of this module's classes (asked of the module that defines each class)."""

    def __init__(self, source: SourceModule) -> None:
        self.source = source
        self._classes: dict[int, Composition | None] = {}

    def of_built(self, call: cst.Call, scope: Scope, depth: int = 0) -> Composition | None:
        """What the module that `call` builds computes: a built-in `torch.nn` layer (`nn.Sequential` of
        them) or a project class; None when unknown."""
        if depth > MAX_DEPTH:
            return None
        source = self.source
        qualname = source.qualname(call.func, scope) or ""
        if qualname == _SEQUENTIAL:
            if any(arg.keyword is not None or arg.star for arg in call.args):
                return None
            return _total(self._of_layer(arg.value, scope, depth + 1) for arg in call.args)
        if qualname.startswith("torch.nn.") and qualname.count(".") == 2:
            name = qualname.rsplit(".", 1)[1]
            if not name[:1].isupper() or name in ("Module", "ModuleList", "ModuleDict", "Parameter"):
                return None
            return Composition((name,))
        found = source.resolve_class(call.func, scope)
        if found is None:
            return None
        home, cls = found
        return home.analysis(CompositionAnalysis).of_class(cls, depth + 1)

    def _of_layer(self, value: cst.BaseExpression, scope: Scope, depth: int) -> Composition | None:
        # `nn.LSTM(...).to(device)`: a layer placed where it is built is that layer
        while (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _PLACEMENTS
        ):
            value = value.func.value
        return self.of_built(value, scope, depth) if isinstance(value, cst.Call) else None

    def of_class(self, cls: ClassRecord, depth: int = 0) -> Composition | None:
        key = id(cls.node)
        if key not in self._classes:
            self._classes[key] = None  # a class that contains itself (through a cycle) is unknown
            self._classes[key] = self._compose_class(cls, depth)
        return self._classes[key]

    def _compose_class(self, cls: ClassRecord, depth: int) -> Composition | None:
        if depth > MAX_DEPTH:
            return None
        lineage = self._lineage(cls)
        if lineage is None:
            return None
        defined = next(((h, c.methods["forward"]) for h, c in lineage if "forward" in c.methods), None)
        if defined is None:
            return None  # an `nn.Sequential` subclass, or a forward this reading does not see
        try:
            return _ForwardReader(lineage, depth).read(*defined)
        except _Unknown:
            return None

    def _lineage(self, cls: ClassRecord) -> list[tuple[SourceModule, ClassRecord]] | None:
        """The class and its project bases, nearest first; None when a base is neither `nn.Module` nor a
        project class (a library's module: its forward is not read here)."""
        found: list[tuple[SourceModule, ClassRecord]] = []
        pending: list[tuple[SourceModule, ClassRecord]] = [(self.source, cls)]
        while pending:
            home, current = pending.pop(0)
            if len(found) > MAX_DEPTH:
                return None
            found.append((home, current))
            for base in current.node.bases:
                if base.keyword is not None:
                    continue  # `metaclass=...`
                if home.qualname(base.value, current.scope) == _MODULE:
                    continue
                resolved = home.resolve_class(base.value, current.scope)
                if resolved is None:
                    return None
                pending.append(resolved)
        return found


class _ForwardReader:
    """Reads one forward pass (and the methods of `self` it calls); raises `_Unknown` at anything else."""

    def __init__(self, lineage: list[tuple[SourceModule, ClassRecord]], depth: int) -> None:
        self.lineage = lineage
        self.depth = depth
        self.layers: list[str] = []
        self.pointwise = False
        self.loops = False
        self._reading: list[int] = []  # the methods being read, outermost first

    def read(self, home: SourceModule, method: FunctionRecord) -> Composition:
        self._method(home, method)
        return Composition(tuple(self.layers), self.pointwise, self.loops)

    def _method(self, home: SourceModule, method: FunctionRecord) -> None:
        if id(method.node) in self._reading or len(self._reading) > MAX_DEPTH:
            raise _Unknown  # recursion, or a chain of methods too long to follow
        self._reading.append(id(method.node))
        self_name = method.params[0] if method.params else ""
        for statement in method.node.body.body:
            self._node(home, method.scope, self_name, statement, sized=False)
        self._reading.pop()

    def _node(self, home: SourceModule, scope: Scope, self_name: str, node: cst.CSTNode, sized: bool) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            raise _Unknown
        if isinstance(node, (cst.For, cst.While)):
            self.loops = True
        elif isinstance(node, cst.Call):
            sizes = self._call(home, scope, self_name, node)
            self._node(home, scope, self_name, node.func, sized)
            for arg in node.args:
                self._node(home, scope, self_name, arg.value, sizes)
            return
        elif isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.MatrixMultiply):
                raise _Unknown
            if not sized:
                self.pointwise = True
        elif isinstance(node, cst.AugAssign):
            if isinstance(node.operator, cst.MatrixMultiplyAssign):
                raise _Unknown
            self.pointwise = True
        elif isinstance(node, cst.UnaryOperation) and not sized and not isinstance(node.operator, cst.Not):
            if not isinstance(node.expression, (cst.Integer, cst.Float)):
                self.pointwise = True  # `-x`; `-1` is a constant
        for child in child_nodes(node):
            self._node(home, scope, self_name, child, sized)

    def _call(self, home: SourceModule, scope: Scope, self_name: str, call: cst.Call) -> bool:
        """Accounts for one call; whether its arguments are sizes."""
        func = call.func
        if isinstance(func, cst.Attribute) and dotted(func.value) == self_name:
            self._call_on_self(func.attr.value)
            return False
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Attribute)
            and isinstance(func.value.value, cst.Name)
            and func.value.value.value == self_name
        ):
            if func.attr.value not in _LAYER_METHODS:
                raise _Unknown  # `self.encoder.encode(x)`: a method of a submodule, not read here
            return False
        qualname = home.qualname(func, scope)
        if qualname is not None:
            namespace, _, name = qualname.rpartition(".")
            if not namespace and name in _BUILTINS:
                return False
            if namespace not in _TORCH_NAMESPACES:
                raise _Unknown
        elif isinstance(func, cst.Attribute):
            name = func.attr.value  # a tensor method: `out.reshape(...)`, `x.size(0)`
        else:
            raise _Unknown
        if name in _POINTWISE:
            self.pointwise = True
            return False
        if name in _SHAPE:
            return name in _SIZED
        raise _Unknown

    def _call_on_self(self, attribute: str) -> None:
        """`self.lstm(x)`: a layer, or `self.init_hidden(x)`: a method read in turn."""
        for home, cls in self.lineage:
            if attribute in cls.methods:
                self._method(home, cls.methods[attribute])
                return
            values = cls.attributes.get(attribute)
            if values:
                analysis = home.analysis(CompositionAnalysis)
                for value, scope in values:
                    part = analysis._of_layer(value, scope, self.depth + 1)
                    if part is None:
                        raise _Unknown
                    self.layers.extend(part.layers)
                    self.pointwise = self.pointwise or part.pointwise
                    self.loops = self.loops or part.loops
                return
        raise _Unknown
