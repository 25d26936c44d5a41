"""Which device the code trains on, from what it says."""

from __future__ import annotations

import pytest
from support import facts_of


@pytest.mark.parametrize(
    "code, device",
    [
        ('model = model.to("cuda")', "cuda"),
        ("model.cuda()", "cuda"),
        ('device = torch.device("cuda:0")\nmodel.to(device)', "cuda"),
        ('model.to(f"cuda:{rank}")', "cuda"),
        ("device = torch.device('cuda:{}'.format(args.gpu))\nmodel.to(device)", "cuda"),
        ("torch.cuda.set_device(local_rank)", "cuda"),
        (
            "class Trainer:\n    def __init__(self, gpu_id):\n        self.gpu_id = gpu_id\n\n"
            "    def step(self, x):\n        return x.to(self.gpu_id)\n\n\nTrainer(0)",
            "cuda",
        ),
        ('model.to(f"{torch.accelerator.current_accelerator()}:{rank}")', "cuda when available"),
        (
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nmodel.to(device)',
            "cuda when available",
        ),
        (
            'use_cuda = not args.no_cuda and torch.cuda.is_available()\ndevice = torch.device("cuda" if use_cuda else "cpu")\nmodel.to(device)',
            "cuda when available",
        ),
        (
            'device = "cuda"\nif not torch.cuda.is_available():\n    device = "cpu"\nmodel.to(device)',
            "cuda when available",
        ),
        ("if args.cuda:\n    model.cuda()", "cuda when available"),
        ("model.to(accelerator.device)", "cuda when available"),
        ("model.to(torch.accelerator.current_accelerator())", "cuda when available"),
        (
            'parser.add_argument("--device", default="cuda")\nargs = parser.parse_args()\nmodel.to(args.device)',
            "cuda when available",  # the user may pass --device cpu
        ),
        ('model.to("cpu")', "cpu"),
        ("model.to(device)", "unknown"),
        ("x = x.to(torch.float16)", "unknown"),
        ('dist.init_process_group(backend="nccl")', "cuda"),
        ("from accelerate import Accelerator\naccelerator = Accelerator()", "cuda when available"),
        ("from accelerate import Accelerator\naccelerator = Accelerator(cpu=True)", "unknown"),
        (
            "from lightning.pytorch.cli import LightningCLI\ncli = LightningCLI(Model, Data)",
            "cuda when available",
        ),
        ("import lightning as L\nt = L.Trainer(accelerator='cpu')", "cpu"),
        (
            "class T:\n    def __init__(self):\n        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'\n    def run(self):\n        self.model.to(self.device)",
            "cuda when available",
        ),
    ],
)
def test_device_evidence(code, device):
    facts = facts_of("import torch\nimport torch.distributed as dist\n" + code + "\n")
    assert facts.device.device.label == device


def test_a_device_parameter_takes_what_callers_pass():
    source = """\
    import torch

    def train(model, device, loader):
        for x in loader:
            x = x.to(device)

    def main():
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        train(model, device, loader)
    """
    assert facts_of(source).device.device.label == "cuda when available"
