"""Training on the GPU in full float32 with TF32 matmuls off: torch's default since 1.12.

On tensor-core GPUs (Ampere and later), `torch.set_float32_matmul_precision("high")` runs float32 matrix
multiplications (`nn.Linear`, attention, `bmm`) on TensorFloat-32 tensor cores: several times the
throughput for a 10-bit mantissa in the products, float32 accumulation and float32 outputs. Convolutions
already use TF32 by default (`torch.backends.cudnn.allow_tf32`); matmuls do not.

A module is reported once, at its first training loop that may run on CUDA, when nothing decides about
precision where that loop runs: no mention of autocast, half or bfloat16 types, GradScaler, mixed-precision
options or flags (`--amp`, `fp16`), and no TF32 switch (`allow_tf32`, `set_float32_matmul_precision`,
`fp32_precision`, `tf32=`) — in this module, in the project modules its loop calls into, or in those that
import it (a `main.py` that sets TF32 before calling `train()`). Reading any of those as a decision is
deliberately broad: a script that chose its precision, either way, has chosen.

Only attention models count, where the switch pays: a model of the project whose classes (and the project
classes they build, a few levels down) build torch's attention or transformer layers
(`nn.MultiheadAttention`, `scaled_dot_product_attention`, `nn.TransformerEncoderLayer`), or compute matrix
products (`matmul`, `einsum`, `bmm`, `@`) at least twice in code that names attention (`attn`,
`Attention`) and takes a softmax (TabNet's "attentive" layers multiply by fixed mask matrices), and do more
of that than convolution (a torchvision backbone built inside, `resnet18(...)`, counts as many: a CNN's
time is in its convolutions, already TF32, as cuDNN's recurrent layers are); a Hugging Face model; torch's
or torchvision's transformers. The model's classes are found through what builds it: the project
factories it comes from (`get_model(config)` returning `build_transformer(...)`), the models it is handed
(`Wrapper(decoder=decoder)`), classes a package's `__init__.py` re-exports. `nn.Linear` alone does not
count: the MLPs of tutorials and tabular models are too narrow for tensor cores to change their step
time, and so is a model whose width keywords (`dim=64`) are all at most 128. A model whose classes this
module cannot see is not counted: silence, not a guess. Sparse matmuls (graph networks) have no TF32
path, and a module that trains through accelerate, Fabric or DeepSpeed gets its precision from
their launch configuration: both are silent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.walk import subexpressions
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.models import ModelAnalysis, unplaced
from torchlint.facts.torch.training import TrainingAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import ClassRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope

# Words a module uses when it decides about precision: autocast and scalers, half types, mixed-precision
# options and flags, and the TF32 switches themselves.
PRECISION_WORDS = re.compile(
    r"autocast|GradScaler|float16|bfloat16|\.half\(|\bhalf\b|\bfp16\b|\bbf16\b|mixed_precision|\bamp\b"
    r"|\bprecision\s*=|tf32|float32_matmul_precision|fp32_precision"
    r"|\bAccelerator\(|\bFabric\(|deepspeed"  # precision set by the launcher's configuration
)
# What a model's classes build and call when their work is attention (torch's attention layers; or matrix
# products in code that names attention), and what they build when it is convolution. `nn.Linear` alone
# does not count: the MLPs of tutorials and tabular models are too narrow for tensor cores to change their
# step time, and a network's classifier head is a sliver of its work.
ATTENTION_LAYERS = re.compile(
    r"MultiheadAttention\(|scaled_dot_product_attention\(|\bTransformer(?:Encoder|Decoder)?(?:Layer)?\("
)
PRODUCTS = re.compile(r"\bmatmul\(|\beinsum\(|\bbmm\(|\s@\s")
ATTENTION_NAMES = re.compile(r"attn|attention", re.IGNORECASE)
# Attention weighs values by a softmax of the products (`scores.softmax(-1)`, `F.softmax`, `nn.Softmax(`);
# a product with a fixed mask matrix in a layer named "attentive" (TabNet's feature masks) does not.
SOFTMAX = re.compile(r"\bsoftmax\(", re.IGNORECASE)
CONV_WORDS = re.compile(r"\bConv(?:Transpose)?[123]d\(")
# A torchvision (or timm) convolutional backbone built inside a model class: many convolutions at once.
CONV_BACKBONES = re.compile(
    r"\b(?:resnet|resnext|wide_resnet|vgg|densenet|efficientnet|mobilenet|convnext|regnet|inception|googlenet"
    r"|alexnet|squeezenet|shufflenet|mnasnet)\w*\(",
    re.IGNORECASE,
)
BACKBONE_CONVS = 20
MATMUL_LIBRARIES = (
    "transformers.",
    "torchvision.models.vit_",
    "torchvision.models.swin_",
    "torch.nn.Transformer",
    "torch.nn.MultiheadAttention",
)
MAX_DEPTH = 4
# The keywords that give a model's width, and the width at or below which its matrix products are too
# small for TF32 to change the step time (x-transformers' parity toy: `dim = 64`).
WIDTH_KEYWORDS = frozenset({"dim", "d_model", "embed_dim", "hidden_size", "hidden_dim", "n_embd", "width"})
NARROW = 128


@dataclass(frozen=True)
class Float32Loop:
    """The first training loop of a module that may run on CUDA with nothing deciding about precision."""

    loop: LoopRecord
    head: cst.BaseExpression  # what the finding marks: the loop's iterable (or a `while`'s test)
    statement: cst.For | cst.While  # the outermost loop around it in its function: where a fix goes


class MatmulPrecisionAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def float32_loop(self) -> Float32Loop | None:
        """Cheap questions first: the module's text, the loop's device; the model's classes (rendered and
        read, also in other files) last."""
        source = self.source
        training = source.analysis(TrainingAnalysis)
        if not training.training_loops or _decides(source) or training.makes_sparse_tensors:
            return None
        loop = next(iter(source.analysis(CallerAnalysis).cuda_training_loops), None)
        if loop is None or any(_decides(other) for other in self._related(loop)):
            return None
        if not self._trains_matmul_model:
            return None
        outermost = loop
        while outermost.parent is not None and outermost.parent.function is loop.function:
            outermost = outermost.parent
        head = loop.node.iter if isinstance(loop.node, cst.For) else loop.node.test
        return Float32Loop(loop, head, outermost.node)

    @cached_property
    def _trains_matmul_model(self) -> bool:
        models = self.source.analysis(ModelAnalysis)
        for model in models.trained:
            texts: dict[int, str] = {}
            widths: list[object] = []
            for event in model.builds:
                built_from = _built_calls(self.source, unplaced(event.node), event.scope or model.scope)
                for home, node, scope in built_from:
                    if (home.qualname(node.func, scope) or "").startswith(MATMUL_LIBRARIES):
                        return True
                    widths += [home.value(a.value, scope).literal for a in node.args if _names_width(a)]
                    built = home.resolve_class(node.func, scope)
                    if built is not None:
                        _class_texts(*built, texts, 0)
            if widths and all(isinstance(w, int) and w <= NARROW for w in widths):
                continue  # `Decoder(dim=64, ...)` on every path: too narrow for tensor cores to matter
            for home, cls in models.classes_of(model):
                _class_texts(home, cls, texts, 0)
            text = "\n".join(texts.values())
            layers, products = len(ATTENTION_LAYERS.findall(text)), len(PRODUCTS.findall(text))
            weighs = ATTENTION_NAMES.search(text) is not None and SOFTMAX.search(text) is not None
            attends = layers > 0 or (products >= 2 and weighs)
            convs = len(CONV_WORDS.findall(text)) + BACKBONE_CONVS * len(CONV_BACKBONES.findall(text))
            if attends and 4 * layers + products > convs:
                return True
        return False

    def _related(self, loop: LoopRecord) -> list[SourceModule]:
        """The other project modules where this loop's precision may be decided: those its calls run code
        of, and those that import this one."""
        source = self.source
        found = {id(m): m for m in source.analysis(CallerAnalysis).importers()}
        for call in loop.all_calls():
            target = source.callee(call)
            if target is not None and target[0] is not source:
                found[id(target[0])] = target[0]
        return list(found.values())


def _decides(source: SourceModule) -> bool:
    return PRECISION_WORDS.search(source.text) is not None


def _names_width(arg: cst.Arg) -> bool:
    return arg.keyword is not None and arg.keyword.value in WIDTH_KEYWORDS


def _built_calls(home: SourceModule, expr: cst.BaseExpression, scope: Scope, hops: int = 0):
    """The calls a model is built of: those in its build and its arguments (`Wrapper(Net(layers=
    Decoder(...)))`), in what the names it is handed were bound to (`Wrapper(decoder=decoder)`), and in
    what the project functions it calls return (`get_model(config)` returning `build_transformer(...)`,
    which returns `Transformer(...)`), a few functions deep. Not the receivers of method calls
    (`tokenizer.get_vocab_size()`) nor attributes (`config.d_model`): what they hold is no part of it."""
    stack, seen = [(expr, scope)], set()
    while stack:
        node, scope = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, cst.Call):
            yield home, node, scope
            stack.extend((arg.value, scope) for arg in node.args)
            if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Call):
                stack.append((node.func.value, scope))  # `Net().cuda()`
            factory = home.callee_of_call(node, scope) if hops < MAX_DEPTH else None
            if factory is not None:
                other, function = factory
                for returned in function.returns:
                    yield from _built_calls(other, returned, function.scope, hops + 1)
        elif isinstance(node, cst.Name):
            stack.extend((a.value, a.scope) for a in home.assignments(node, scope) or [])
        elif isinstance(node, (cst.List, cst.Tuple, cst.Set, cst.Dict)):
            stack.extend((element.value, scope) for element in node.elements)
        elif isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            stack.append((node.elt, scope))


def _class_texts(home: SourceModule, cls: ClassRecord, texts: dict[int, str], depth: int) -> None:
    """The code of `cls`, of its project base classes, and of the project classes it builds into its
    attributes (`self.block = Block(...)`, `nn.ModuleList([Block(...) ...])`) or in its `__init__` (a
    layer built and appended to a list), by class."""
    if id(cls) in texts or depth > MAX_DEPTH:
        return
    texts[id(cls)] = home.code(cls.node)
    for base in cls.node.bases:  # `class Decoder(AttentionLayers)`: the layers are the base's
        inherited = home.resolve_class(base.value, cls.scope)
        if inherited is not None:
            _class_texts(*inherited, texts, depth + 1)
    for values in cls.attributes.values():
        for value, scope in values:
            for node in subexpressions(value):  # also `nn.ModuleList([Block(...) for _ in range(n)])`
                if isinstance(node, cst.Call):
                    built = home.resolve_class(node.func, scope)
                    if built is not None:
                        _class_texts(*built, texts, depth + 1)
    init = cls.methods.get("__init__")
    for call in init.calls if init is not None else ():  # `layer = Attention(...)`, appended to a list
        built = home.resolve_class(call.node.func, call.scope)
        if built is not None:
            _class_texts(*built, texts, depth + 1)
