"""Round-4 mixed precision (TL301) classes from the ecosystem check (bench/ecosystem/findings.tsv): a loop
whose only trained model is one `nn.Linear` with a side of at most 16 features (pytorch/examples'
ddp-tutorial-series placeholder `torch.nn.Linear(20, 1)`) is memory-bound in float32, so autocast only adds
casts; a real model, a wide layer or a model the code does not show stays flagged."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner
from support import codes_and_lines, facts_of, settings

from torchlint.cli import main
from torchlint.linter import Linter
from torchlint.rules.mixed_precision.precision import PrecisionAnalysis
from torchlint.rules.mixed_precision.sizes import MAX_SIDE, SizeAnalysis
from torchlint.rules.mixed_precision.steps import StepAnalysis


def tl301(source: str, path: str = "train.py") -> list[tuple[str, int]]:
    return codes_and_lines(source, select=("TL301",), path=path)


def check_project(tmp_path, files: dict[str, str], checked: str) -> list[tuple[str, int]]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    path = tmp_path / checked
    found = Linter().check_text(str(path), path.read_text(), settings(select=("TL301",)))
    return [(d.code, d.location.line) for d in found]


# pytorch/examples distributed/ddp-tutorial-series/multigpu.py, as written (shortened): the placeholder model is
# built in `load_train_objs()`, unpacked in `main`, handed to `Trainer(...)`, placed and wrapped in DDP there.
DDP_TUTORIAL = """\
import torch
import torch.nn.functional as F
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, train_data, optimizer, gpu_id, save_every):
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
        self.train_data = train_data
        self.optimizer = optimizer
        self.model = {wrap}

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            for source, targets in self.train_data:
                self._run_batch(source.to(self.gpu_id), targets.to(self.gpu_id))


def load_train_objs():
    train_set = MyTrainDataset(2048)
    model = {model}
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def main(rank, world_size, total_epochs, batch_size):
    torch.cuda.set_device(rank)
    dataset, model, optimizer = load_train_objs()
    train_data = DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset))
    trainer = Trainer(model, train_data, optimizer, rank, 10)
    trainer.train(total_epochs)


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(main, args=(world_size, 10, 32), nprocs=world_size)
"""
FORWARD_LINE = 19
TUTORIAL = DDP_TUTORIAL.format(wrap="DDP(model, device_ids=[gpu_id])", model="torch.nn.Linear(20, 1)")


@pytest.mark.parametrize(
    "wrap", ["DDP(model, device_ids=[gpu_id])", "DDP(self.model, device_ids=[gpu_id])", "self.model"]
)
def test_ddp_tutorial_placeholder_linear_is_not_flagged(wrap: str) -> None:
    """pytorch/examples ddp-tutorial-series (multigpu.py:42, multigpu_torchrun.py:48, multinode.py:49,
    single_gpu.py:24): `torch.nn.Linear(20, 1)` trained on random data, one matrix-vector product per batch."""
    source = DDP_TUTORIAL.format(wrap=wrap, model="torch.nn.Linear(20, 1)")
    assert tl301(source) == []


@pytest.mark.parametrize(
    "model",
    [
        "torch.nn.Linear(4096, 4096)",  # a wide layer: compute-bound, tensor cores help
        "torch.nn.Linear(64, 64)",  # both sides above the bound
        "torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))",
        "Net()",  # a project model this file does not show
        "torch.nn.Conv2d(3, 1, 3)",  # only `nn.Linear` is judged by its sizes
        "torch.nn.Linear(20, args.out)",  # no literal side at most 16
        "torch.nn.Linear(20, 1) if args.tiny else Net()",  # a branch the analysis does not follow
    ],
)
def test_ddp_tutorial_shape_with_a_real_model_is_flagged(model: str) -> None:
    source = DDP_TUTORIAL.format(wrap="DDP(model, device_ids=[gpu_id])", model=model)
    assert tl301(source) == [("TL301", FORWARD_LINE)]


def test_single_linear_with_a_side_at_the_bound_is_silent_and_above_it_flagged() -> None:
    head = "import torch\nimport torch.nn as nn\n\n"
    loop = (
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in loader:\n"
        "    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())\n"
        "    optimizer.zero_grad()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    at_bound = f"model = nn.Linear(args.features, {MAX_SIDE}).cuda()\n"
    above = f"model = nn.Linear(args.features, {MAX_SIDE + 1}).cuda()\n"
    assert tl301(head + at_bound + loop) == []
    assert tl301(head + above + loop) == [("TL301", 7)]


def test_logistic_regression_on_many_features_is_silent() -> None:
    """`nn.Linear(n, 1)`: a matrix-vector product, memory-bound whatever `n` is."""
    source = """\
    import torch
    import torch.nn as nn

    model = nn.Linear(args.features, out_features=1, bias=True)
    model = model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.binary_cross_entropy_with_logits(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert tl301(source) == []


def test_tiny_layer_beside_another_trained_model_is_flagged() -> None:
    """A tiny discriminator trained in the same module as a project generator: not every trained model is
    tiny, so the loop may still run real matrix math."""
    source = """\
    import torch
    import torch.nn as nn

    netD = nn.Linear(784, 1).cuda()
    netG = Generator().cuda()
    optD = torch.optim.Adam(netD.parameters())
    optG = torch.optim.Adam(netG.parameters())
    for x, _ in loader:
        loss = nn.functional.softplus(-netD(x.cuda())).mean()
        optD.zero_grad()
        loss.backward()
        optD.step()
        fake = netG(torch.randn(64, 100, device="cuda"))
        loss_g = nn.functional.softplus(-netD(fake)).mean()
        optG.zero_grad()
        loss_g.backward()
        optG.step()
    """
    assert tl301(source) == [("TL301", 9)]


def test_function_also_handed_over_as_a_callback_is_flagged() -> None:
    """`fit` is called with a tiny layer here, but also handed to `mp.spawn` with a model this reading cannot
    follow: its callers are not all known."""
    source = """\
    import torch
    import torch.multiprocessing as mp
    import torch.nn as nn


    def fit(model, loader):
        model = model.cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    fit(nn.Linear(20, 1), loader)
    mp.spawn(fit, args=(Net(), loader))
    """
    assert tl301(source) == [("TL301", 10)]


def test_function_of_the_tiny_layer_called_with_a_real_model_elsewhere_is_flagged(tmp_path) -> None:
    """The trainer class of a tutorial imported by another project file that hands it a real network."""
    files = {
        "trainer.py": TUTORIAL,
        "big.py": """\
            import torch
            from trainer import Trainer

            model = ResNet()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            Trainer(model, loader, optimizer, 0, 10).train(90)
            """,
    }
    assert check_project(tmp_path, files, "trainer.py") == [("TL301", FORWARD_LINE)]
    files["big.py"] = "from trainer import load_train_objs\n\nprint(load_train_objs())\n"
    assert check_project(tmp_path, files, "trainer.py") == []
    files["big.py"] = """\
        from trainer import Trainer


        class BigTrainer(Trainer):
            def __init__(self, loader, optimizer):
                super().__init__(ResNet(), loader, optimizer, 0, 10)
        """
    assert check_project(tmp_path, files, "trainer.py") == [("TL301", FORWARD_LINE)]


def test_subclassed_trainer_is_flagged() -> None:
    """A subclass may hand `__init__` another model through `super().__init__(...)`, which no call names."""
    source = TUTORIAL + "\n\nclass BigTrainer(Trainer):\n    pass\n"
    assert tl301(source) == [("TL301", FORWARD_LINE)]


def test_size_facts_name_the_layer_in_debug_facts(tmp_path) -> None:
    facts = facts_of(TUTORIAL)
    [loop] = facts.training.training_loops
    step = facts.analysis(StepAnalysis).of(loop)
    layer = facts.analysis(SizeAnalysis).too_small(step)
    assert layer is not None and facts.code(layer) == "torch.nn.Linear(20, 1)"
    script = tmp_path / "train.py"
    script.write_text(TUTORIAL)
    shown = CliRunner().invoke(main, ["debug", "facts", str(script)]).output
    assert "    its model is one narrow layer, `torch.nn.Linear(20, 1)`: memory-bound in float32\n" in shown


# BlinkDL/RWKV-LM RWKV-v7/train_temp/rwkv7_train_simplified.py:292: a custom CUDA kernel built for float32 only,
# wrapped in an autograd.Function that asserts its inputs are float32 ("this simplified demo is in fp32").
FP32_KERNEL = """\
import torch
import torch.nn.functional as F
from torch.utils.cpp_extension import load

load(name="wind", sources=["cuda/wkv7_cuda_fp32.cu"], is_python_module=False)


class WindBackstepping(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, q, k):
        {check}
        y = torch.empty_like(q)
        torch.ops.wind.forward(w, q, k, y)
        return y

    @staticmethod
    def backward(ctx, dy):
        return torch.ops.wind.backward(dy)


model = RWKV().cuda()
opt = torch.optim.Adam(model.parameters())
for step in range(1000):
    x, y = batch()
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(
    "check",
    [
        "assert all(i.dtype==torch.float32 for i in [w,q,k]) # !!! this simplified demo is in fp32 !!!",
        "assert w.dtype == torch.float32 and q.dtype == torch.float32",
        "assert torch.float == k.dtype",
        "assert q.dtype is torch.bfloat16",
    ],
)
def test_autograd_function_that_asserts_its_input_dtype_decides_precision(check: str) -> None:
    assert tl301(FP32_KERNEL.format(check=check)) == []


@pytest.mark.parametrize(
    "check",
    [
        "assert w.is_contiguous()",
        "assert w.dtype != torch.float64",  # rules out one dtype, requires none
        "assert w.shape == q.shape",
    ],
)
def test_autograd_function_without_a_dtype_requirement_is_still_flagged(check: str) -> None:
    assert tl301(FP32_KERNEL.format(check=check)) == [("TL301", 25)]


def test_dtype_assert_outside_an_autograd_function_does_not_decide_precision() -> None:
    """A dataset's sanity check on its samples says nothing about the precision the model runs in."""
    source = """\
    import torch
    import torch.nn.functional as F

    model = Net().cuda()
    opt = torch.optim.Adam(model.parameters())
    for x, y in loader:
        assert x.dtype == torch.float32
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
    assert tl301(source) == [("TL301", 8)]


def test_required_dtype_is_shown_as_a_precision_decision() -> None:
    facts = facts_of(FP32_KERNEL.format(check="assert w.dtype == torch.float32"))
    [switch] = facts.analysis(PrecisionAnalysis).switches
    assert switch.what == "`WindBackstepping` (a custom autograd.Function) requires float32 tensors"
    assert switch.dtype == "float32" and facts.line_of(switch.node) == 11
