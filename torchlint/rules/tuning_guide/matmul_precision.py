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
`Attention`), and do more of that than convolution (a torchvision backbone built inside, `resnet18(...)`,
counts as many: a CNN's time is in its convolutions, already TF32, as cuDNN's recurrent layers are); a
Hugging Face model; torch's or torchvision's transformers. `nn.Linear` alone does not count: the MLPs of
tutorials and tabular models are too narrow for tensor cores to change their step time. A model whose
classes this module cannot see is not counted: silence, not a guess. Sparse matmuls (graph networks) have
no TF32 path, and a module that trains through accelerate, Fabric or DeepSpeed gets its precision from
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
MAX_DEPTH = 3


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
            for event in model.builds:
                scope = event.scope or model.scope
                for node in subexpressions(unplaced(event.node)):  # `Wrapper(Net(layers=Decoder(...)))`
                    if not isinstance(node, cst.Call):
                        continue
                    if (self.source.qualname(node.func, scope) or "").startswith(MATMUL_LIBRARIES):
                        return True
                    built = self.source.resolve_class(node.func, scope)
                    if built is not None:
                        _class_texts(*built, texts, 0)
            for home, cls in models.classes_of(model):
                _class_texts(home, cls, texts, 0)
            text = "\n".join(texts.values())
            layers, products = len(ATTENTION_LAYERS.findall(text)), len(PRODUCTS.findall(text))
            attends = layers > 0 or (products >= 2 and ATTENTION_NAMES.search(text) is not None)
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


def _class_texts(home: SourceModule, cls: ClassRecord, texts: dict[int, str], depth: int) -> None:
    """The code of `cls`, of its project base classes, and of the project classes it builds into its
    attributes (`self.block = Block(...)`, `nn.ModuleList([Block(...) ...])`), by class."""
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
