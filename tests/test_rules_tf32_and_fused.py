"""TL504 (float32 matmuls with TF32 off) and TL505 (optimizers not fused) in the shapes real training code
takes: a module-level script, `main()` with argparse, a trainer class, the model or the precision switch in
another file, and the cases that must stay silent (convolutional networks, a decided precision, frameworks
that set it at launch, an implementation chosen on purpose)."""

from __future__ import annotations

import textwrap

from support import codes_and_lines, fix, said, settings

from torchlint.linter import Linter

ATTENTION = """
import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.hidden = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.out((x @ x.transpose(-2, -1)).softmax(-1) @ self.hidden(x).relu())

"""

TRAIN = """
def main(args):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = SelfAttention(args.width).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(model(inputs.to(device)), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def _found(source: str, select: str, **changes) -> list[tuple[str, int]]:
    return codes_and_lines(textwrap.dedent(source), select=(select,), **changes)


# -- TL504 ----------------------------------------------------------------------------------------------------


def test_a_linear_model_trained_on_the_gpu_without_tf32_is_flagged_once_at_its_loop():
    found = Linter().check_text("train.py", ATTENTION + TRAIN, settings(select=("TL504",)))
    assert [(d.location.line, d.location.column) for d in found] == [(21, 32)]
    assert said(found[0]).startswith("this training loop may run on the GPU in float32 with TF32 off")


def test_the_fix_switches_tf32_on_before_the_outermost_loop_of_the_function():
    fixed = fix(ATTENTION + TRAIN, select=("TL504",))
    assert fixed == (ATTENTION + TRAIN).replace(
        "    for epoch in", '    torch.set_float32_matmul_precision("high")\n    for epoch in'
    )
    assert fix(fixed, select=("TL504",)) == fixed


def test_a_trainer_class_with_blocks_built_in_a_module_list_of_another_file_is_flagged(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "blocks.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass CausalAttention(nn.Module):\n    def __init__(self, d):\n"
        "        super().__init__()\n        self.qkv = nn.Linear(d, 3 * d)\n        self.proj = nn.Linear(d, d)\n\n"
        "    def forward(self, x):\n        q, k, v = self.qkv(x).chunk(3, -1)\n"
        "        return self.proj((q @ k.transpose(-2, -1)).softmax(-1) @ v)\n"
    )
    (tmp_path / "model.py").write_text(
        "from torch import nn\n\nfrom blocks import CausalAttention\n\n\nclass GPT(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.blocks = nn.ModuleList([CausalAttention(64) for _ in range(4)])\n"
    )
    train = tmp_path / "train.py"
    train.write_text(
        textwrap.dedent(
            """\
            import torch

            from model import GPT


            class Trainer:
                def __init__(self):
                    self.model = GPT().cuda()
                    self.optimizer = torch.optim.AdamW(self.model.parameters(), fused=True)

                def train(self, loader):
                    for batch in loader:
                        loss = self.model(batch.cuda()).mean()
                        loss.backward()
                        self.optimizer.step()
            """
        )
    )
    found = Linter().check_text(str(train), train.read_text(), settings(select=("TL504",)))
    assert [(d.code, d.location.line) for d in found] == [("TL504", 12)]


def _project(root, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def _found_in(root, name: str) -> list[tuple[str, int]]:
    path = root / name
    found = Linter().check_text(str(path), path.read_text(), settings(select=("TL504",)))
    return [(d.code, d.location.line) for d in found]


PACKAGE_LAYERS = """\
    import torch
    from torch import nn


    class Attention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, -1)
            return (q @ k.transpose(-2, -1)).softmax(-1) @ v


    class Decoder(nn.Module):
        def __init__(self, dim, depth):
            super().__init__()
            self.layers = nn.ModuleList([])
            for _ in range(depth):
                layer = Attention(dim)
                self.layers.append(layer)


    class Wrapper(nn.Module):
        def __init__(self, decoder):
            super().__init__()
            self.decoder = decoder
    """

LOOP = """
    optimizer = torch.optim.Adam(model.parameters(), fused=True)
    for batch in loader:
        loss = model(batch.cuda()).mean()
        loss.backward()
        optimizer.step()
    """


def test_a_model_of_a_package_that_re_exports_its_classes_and_appends_its_layers_is_flagged(tmp_path):
    """x-transformers: `from pkg import Wrapper, Decoder` names classes `pkg/__init__.py` imports from
    `pkg/layers.py`; the decoder builds its attention layers in `__init__` and appends them to a list; the
    model is handed to the wrapper by name."""
    script = """\
    import torch

    from pkg import Decoder, Wrapper

    decoder = Decoder(dim=512, depth=6)
    model = Wrapper(decoder).cuda()
    """
    _project(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.layers import Decoder, Wrapper\n",
            "pkg/layers.py": PACKAGE_LAYERS,
            "train.py": script + LOOP,
        },
    )
    assert _found_in(tmp_path, "train.py") == [("TL504", 9)]


def test_a_model_built_by_project_factories_is_flagged(tmp_path):
    """`get_model(config)` returns what `build_transformer(...)` in another file returns."""
    model = (
        textwrap.dedent(PACKAGE_LAYERS)
        + "\n\ndef build_transformer(dim):\n    net = Decoder(dim, 6)\n    return net\n"
    )
    script = """\
    import torch

    from model import build_transformer


    def get_model(config):
        model = build_transformer(config["d_model"])
        return model


    def train(config, loader):
        model = get_model(config).to("cuda")
        optimizer = torch.optim.Adam(model.parameters(), fused=True)
        for batch in loader:
            loss = model(batch.cuda()).mean()
            loss.backward()
            optimizer.step()
    """
    _project(tmp_path, {"model.py": model, "train.py": script})
    assert _found_in(tmp_path, "train.py") == [("TL504", 14)]


def test_a_narrow_model_or_products_with_a_fixed_mask_matrix_are_silent(tmp_path):
    """A toy of width 64 is launch-bound, TF32 changes nothing; TabNet's "attentive" layers multiply by a
    fixed group matrix with no softmax: no attention."""
    script = "import torch\n\nfrom pkg import Decoder, Wrapper\n\nWIDTH = 64\nmodel = Wrapper(Decoder(dim=WIDTH, depth=3)).cuda()\n"
    _project(
        tmp_path,
        {"pkg/__init__.py": "from pkg.layers import Decoder, Wrapper\n", "pkg/layers.py": PACKAGE_LAYERS},
    )
    (tmp_path / "train.py").write_text(script + textwrap.dedent(LOOP))
    assert _found_in(tmp_path, "train.py") == []
    attentive = ATTENTION.replace(
        "return self.out((x @ x.transpose(-2, -1)).softmax(-1) @ self.hidden(x).relu())",
        "attention_mask = torch.matmul(x, self.group_attention_matrix)\n"
        "        return self.out(torch.matmul(attention_mask, self.group_matrix) * self.hidden(x))",
    )
    assert _found(attentive + TRAIN, "TL504") == []


def test_a_precision_decided_where_the_loop_runs_is_silent(tmp_path):
    for decided in (
        'torch.set_float32_matmul_precision("high")',
        "torch.backends.cuda.matmul.allow_tf32 = False",
        "torch.backends.fp32_precision = 'tf32'",
        "scaler = torch.amp.GradScaler()",
        "USE_AMP = args.amp",
        "model = model.to(torch.bfloat16)",
        "accelerator = Accelerator()",
    ):
        source = ATTENTION + TRAIN.replace("    optimizer =", f"    {decided}\n    optimizer =")
        assert _found(source, "TL504") == [], decided
    # ... or in the script that imports the training function
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    engine = tmp_path / "engine.py"
    engine.write_text(textwrap.dedent(ATTENTION + TRAIN))
    (tmp_path / "main.py").write_text(
        'import torch\n\nfrom engine import main\n\ntorch.set_float32_matmul_precision("high")\nmain(None)\n'
    )
    assert Linter().check_text(str(engine), engine.read_text(), settings(select=("TL504",))) == []


def test_a_convolutional_network_or_a_model_it_cannot_see_is_silent():
    conv = ATTENTION.replace("nn.Linear(width, 4 * width)", "nn.Conv2d(width, 4 * width, 3)").replace(
        "nn.Linear(4 * width, width)", "nn.Conv2d(4 * width, width, 3)"
    )
    assert _found(conv + TRAIN, "TL504") == []
    unseen = "import torch\nfrom torch import nn\n\nfrom zoo import build_model\n" + TRAIN.replace(
        "SelfAttention(args.width)", "build_model(args)"
    )
    assert _found(unseen, "TL504") == []


def test_a_hugging_face_model_trained_in_a_loop_is_flagged_but_not_on_cpu():
    source = """\
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
    """
    assert _found(source, "TL504") == [("TL504", 6)]
    assert _found(source, "TL504", device="cpu") == []
    assert _found(source.replace(".cuda()", ""), "TL504") == []


def test_silent_for_a_torch_older_than_1_12_where_tf32_matmuls_were_on_by_default():
    assert _found(ATTENTION + TRAIN, "TL504", torch_version=(1, 11)) == []
    assert _found(ATTENTION + TRAIN, "TL504", torch_version=(1, 12)) == [("TL504", 21)]


# -- TL505 ----------------------------------------------------------------------------------------------------


def test_adam_adamw_and_sgd_for_a_loop_on_the_gpu_are_flagged_with_the_fused_fix():
    source = ATTENTION + TRAIN.replace(
        "    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)",
        "    from torch import optim\n\n    if args.sgd:\n"
        "        optimizer = optim.SGD(model.parameters(), args.lr, momentum=0.9)\n"
        "    else:\n        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)",
    )
    found = Linter().check_text("train.py", source, settings(select=("TL505",)))
    assert [(d.location.line, said(d).split(" updates")[0]) for d in found] == [
        (22, "`optim.SGD(...)`"),
        (24, "`torch.optim.AdamW(...)`"),
    ]
    fixed = fix(source, select=("TL505",))
    assert "optim.SGD(model.parameters(), args.lr, momentum=0.9, fused=True)" in fixed
    assert "torch.optim.AdamW(model.parameters(), lr=args.lr, fused=True)" in fixed


def test_an_optimizer_nothing_steps_is_silent_and_the_one_trained_after_it_is_not():
    # LLMs-from-scratch's notebooks: a learning-rate schedule plotted with an optimizer, a checkpoint's
    # optimizer loaded back; the name is then bound again to the optimizer the loop steps
    source = """\
    import torch

    model = GPT().to("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), weight_decay=0.1)
    for step in range(1000):
        optimizer.param_groups[0]["lr"] = schedule(step)
        track.append(optimizer.param_groups[0]["lr"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
    optimizer.zero_grad()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)  # <- stepped
    for x, y in loader:
        torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
        optimizer.step()
    """
    assert _found(source, "TL505") == [("TL505", 11)]
    for used in ("scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)", "return optimizer"):
        handed = "def build(model):\n    optimizer = torch.optim.AdamW(model.parameters())\n    " + used
        assert _found(textwrap.dedent(source) + handed, "TL505") == [("TL505", 11), ("TL505", 16)]


def test_an_implementation_chosen_a_cpu_loop_sparse_sgd_or_deepspeed_is_silent():
    for chosen in ("fused=False", "foreach=True", "differentiable=True", "**optimizer_options"):
        source = ATTENTION + TRAIN.replace("lr=args.lr)", f"lr=args.lr, {chosen})")
        assert _found(source, "TL505") == [], chosen
    cpu = ATTENTION + TRAIN.replace('"cuda" if torch.cuda.is_available() else "cpu"', '"cpu"')
    assert _found(cpu, "TL505") == []
    sparse = (ATTENTION + TRAIN).replace(
        "torch.optim.AdamW", "torch.optim.SGD"
    ) + "\nemb = nn.Embedding(10, 4, sparse=True)\n"
    assert _found(sparse, "TL505") == []
    assert _found(ATTENTION + "import deepspeed\n" + TRAIN, "TL505") == []


def test_no_fix_for_a_torch_older_than_2_4_and_silence_before_2_0():
    found = Linter().check_text(
        "train.py", ATTENTION + TRAIN, settings(select=("TL505",), torch_version=(2, 1))
    )
    assert [(d.fix, "need torch 2.4" in (d.note or "")) for d in found] == [(None, True)]
    assert _found(ATTENTION + TRAIN, "TL505", torch_version=(1, 13)) == []


def test_code_that_compiles_proves_a_torch_newer_than_a_stale_declaration():
    # RWKV-LM's README pins torch 1.13 for one of its versions; a later version's script compiles its model
    compiled = (ATTENTION + TRAIN).replace(
        "    optimizer = torch.optim.AdamW",
        "    model = torch.compile(model)\n    optimizer = torch.optim.AdamW",
    )
    found = Linter().check_text("train.py", compiled, settings(select=("TL505",), torch_version=(1, 13)))
    assert [(d.location.line, d.fix, "need torch 2.4" in (d.note or "")) for d in found] == [(20, None, True)]
    guarded = compiled.replace(
        "    model = torch.compile(model)", "    if args.compile:\n        model = torch.compile(model)"
    )
    assert _found(guarded, "TL505", torch_version=(1, 13)) == []  # only a call on every path proves it


def test_sgd_over_dtensors_and_optimizers_megatron_replaces_or_an_old_torch_is_pinned_are_silent():
    sharded = (ATTENTION + TRAIN).replace(
        "import torch\n", "import torch\nfrom torch.distributed.fsdp import fully_shard\n", 1
    )
    sharded = sharded.replace("    optimizer =", "    fully_shard(model)\n    optimizer =")
    assert _found(sharded, "TL505") == [("TL505", 21)]  # fused AdamW has a DTensor rule
    assert _found(sharded.replace("torch.optim.AdamW", "torch.optim.SGD"), "TL505") == []
    for pinned in (
        "from accelerate.utils import MegatronLMDummyScheduler\n",
        "from torchtext.legacy import data\n",
    ):
        assert _found(pinned + ATTENTION + TRAIN, "TL505") == [], pinned


def test_an_accelerate_loop_flags_its_optimizer_but_not_tf32_which_the_launch_configures():
    source = """\
    import torch
    from accelerate import Accelerator


    def training_function(args):
        accelerator = Accelerator(cpu=args.cpu)
        model = SelfAttention(args.width).to(accelerator.device)
        optimizer = torch.optim.AdamW(params=model.parameters(), lr=args.lr)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            loss = model(batch).mean()
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
    """
    assert _found(ATTENTION + textwrap.dedent(source), "TL505") == [("TL505", 22)]
    assert _found(ATTENTION + textwrap.dedent(source), "TL504") == []


def test_an_optimizer_built_by_a_helper_module_for_a_script_training_on_the_gpu(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    helper = tmp_path / "optim_utils.py"
    helper.write_text(
        "import torch\n\n\ndef smart_optimizer(model, lr):\n"
        "    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)\n"
    )
    train = tmp_path / "train.py"
    train.write_text(
        textwrap.dedent(
            """\
            import torch

            from optim_utils import smart_optimizer

            model = Net().cuda()
            optimizer = smart_optimizer(model, 0.01)
            for inputs, targets in loader:
                loss = criterion(model(inputs.cuda()), targets.cuda())
                loss.backward()
                optimizer.step()
            """
        )
    )
    found = Linter().check_text(str(helper), helper.read_text(), settings(select=("TL505",)))
    assert [(d.code, d.location.line) for d in found] == [("TL505", 5)]
    train.write_text("import deepspeed\n" + train.read_text())  # the engine replaces the optimizer
    assert Linter().check_text(str(helper), helper.read_text(), settings(select=("TL505",))) == []


LIGHTNING = """\
import lightning as L
import torch


class LitModel(L.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def training_step(self, batch):
        return self.net(batch).mean()

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.net.parameters(), lr=2e-4)
        return [optimizer], [torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: step / 10)]


if __name__ == "__main__":
    trainer = L.Trainer(devices=1, accelerator="cuda", precision="bf16-true")
    trainer.fit(LitModel(build()), data)
"""


def test_a_lightning_modules_optimizers_are_flagged_when_its_trainer_may_pick_the_gpu():
    """litgpt's tutorials: `configure_optimizers` has no loop of its own; the `Trainer` built beside it
    steps what it returns on the GPU (also with `accelerator` left to "auto")."""
    assert _found(LIGHTNING, "TL505") == [("TL505", 14)]
    assert _found(LIGHTNING.replace('accelerator="cuda", ', ""), "TL505") == [("TL505", 14)]
    assert _found(LIGHTNING.replace('accelerator="cuda"', 'accelerator="cpu"'), "TL505") == []
    without_trainer = LIGHTNING.split('if __name__ == "__main__":')[0]
    assert _found(without_trainer, "TL505") == []
