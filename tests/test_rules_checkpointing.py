"""TL401 and TL402 in the shapes real model code is written in, beyond the single cases of rules/TL4xx.md.

Stacks built by comprehensions, `.append` loops, clone helpers and nested `ModuleDict`s; applied in `forward`,
in a method `forward` calls, through `zip` or a whole `Sequential`; trained in another file, through timm's
registry or a trainer class; and the negatives: inference-only packages, shallow or per-stage stacks, loops off
the forward path, checkpointing decided elsewhere.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import FIXTURES, fix, lint, said, settings

from torchlint.api import RunOptions, run
from torchlint.diagnostics import Severity
from torchlint.linter import Linter
from torchlint.workspace.settings import CliOverrides

CKPT = ("TL401", "TL402")  # by code: a trade-off's fix applies only to a rule selected by its code

TRAIN_HERE = """

model = {cls}()
optimizer = torch.optim.AdamW(model.parameters())
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
    optimizer.step()
"""


def tl401(source: str, cls: str = "Net", **changes) -> list:
    text = textwrap.dedent(source) + TRAIN_HERE.format(cls=cls)
    return [d for d in lint(text, select=CKPT, **changes) if d.code == "TL401"]


def write_project(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))


def check_file(root: Path, checked: str, **changes) -> list:
    path = root / checked
    return Linter().check_text(str(path), path.read_text(), settings(select=CKPT, **changes))


# -- TL401: the stack, its depth and how forward applies it -------------------------------------------------

LOOP = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, dim=64, depth=8):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])

    def forward(self, x, mask=None, pos=None):
        for blk in self.blocks:
            x = blk(x, mask, pos=pos)  # the stack
        return x
"""


def test_a_loop_over_a_modulelist_gets_a_guarded_checkpoint_keeping_every_argument():
    found = tl401(LOOP)
    assert [(d.location.line, d.location.column) for d in found] == [(8, 23)]
    assert found[0].severity is Severity.INFO
    assert said(found[0]).startswith(
        "`Net.blocks` holds `Block` blocks (parameter `depth`, default 8) that a loop in `forward` applies one "
        "after another (line 11), in a trained model with no activation checkpointing"
    )
    source = LOOP + TRAIN_HERE.format(cls="Net")
    fixed = fix(source, select=CKPT)
    assert fixed == source.replace(
        "from torch import nn\n", "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n"
    ).replace(
        "            x = blk(x, mask, pos=pos)  # the stack\n",
        "            if self.training and torch.is_grad_enabled():\n"
        "                x = checkpoint(blk, x, mask, pos=pos, use_reentrant=False)\n"
        "            else:\n"
        "                x = blk(x, mask, pos=pos)  # the stack\n",
    )
    assert fix(fixed, select=CKPT) == fixed  # checkpointed now: a second run changes nothing
    compile(fixed, "fixed.py", "exec")


def test_an_existing_alias_of_checkpoint_and_of_torch_is_reused():
    source = LOOP.replace("import torch\n", "import torch as T\nimport torch.utils.checkpoint as cp\n", 1)
    source = source.replace("x = blk(x, mask, pos=pos)  # the stack", "x = blk(x)")
    text = source + TRAIN_HERE.format(cls="Net").replace("torch.optim", "T.optim")
    # the module already mentions checkpointing (its import): that is no decision about this stack
    fixed = fix(text, select=CKPT)
    assert (
        "if self.training and T.is_grad_enabled():\n                x = cp.checkpoint(blk, x, use_reentrant=False)"
        in fixed
    )
    assert "from torch.utils.checkpoint import checkpoint" not in fixed


def test_a_sequential_called_whole_gets_checkpoint_sequential():
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, n_layer=6):
            super().__init__()
            self.layers = nn.Sequential(*(Residual(32) for _ in range(n_layer)))

        def forward(self, x):
            h = self.stem(x)
            h = self.layers(h)
            return self.head(h)
    """
    text = textwrap.dedent(source) + TRAIN_HERE.format(cls="Net")
    fixed = fix(text, select=CKPT)
    assert (
        "        if self.training and torch.is_grad_enabled():\n"
        "            h = checkpoint_sequential(self.layers, len(self.layers), h, use_reentrant=False)\n"
        "        else:\n"
        "            h = self.layers(h)\n"
    ) in fixed
    assert "from torch.utils.checkpoint import checkpoint_sequential\n" in fixed


def test_nanogpt_style_nested_moduledict_with_a_config_default():
    source = """\
    from dataclasses import dataclass

    import torch
    from torch import nn


    @dataclass
    class Config:
        n_layer: int = 12


    class Net(nn.Module):
        def __init__(self, config=Config()):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(10, 8),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ))

        def forward(self, idx):
            x = self.transformer.wte(idx)
            for block in self.transformer.h:
                x = block(x)
            return x

        def crop_block_size(self, size):
            for block in self.transformer.h:
                block.attn.bias = block.attn.bias[:, :, :size, :size]
    """
    found = tl401(source)
    assert [d.location.line for d in found] == [17]
    assert "`Net.transformer.h` holds `Block` blocks (`config.n_layer`, default 12)" in said(found[0])


def test_blocks_appended_in_a_loop_and_applied_in_a_method_forward_calls():
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, args):
            super().__init__()
            self.layers = nn.ModuleList()
            for layer_id in range(args.n_layers):
                self.layers.append(TransformerBlock(layer_id, args))

        def forward_features(self, h, freqs):
            for layer in self.layers:
                h = layer(h, freqs)
            return h

        def forward(self, tokens):
            return self.output(self.forward_features(self.embed(tokens), self.freqs))
    """
    found = tl401(source)
    assert [d.location.line for d in found] == [8]
    assert "a loop in `forward_features`, called by `forward` applies" in said(found[0])


def test_a_local_list_appended_then_wrapped_and_iterated_through_zip():
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, depth=6):
            super().__init__()
            layers = []
            for i in range(depth):
                layers.append(EncoderLayer(256, drop=0.1 * i))
            self.layers = nn.ModuleList(layers)

        def forward(self, x, pos_embeds):
            for layer, pos in zip(self.layers, pos_embeds):
                x = layer(x, pos)
            return x
    """
    found = tl401(source)
    assert [d.location.line for d in found] == [11]
    assert "x = checkpoint(layer, x, pos, use_reentrant=False)" in fix(
        textwrap.dedent(source) + TRAIN_HERE.format(cls="Net"), select=CKPT
    )


def test_a_clone_helper_is_a_stack_of_its_count_argument():
    source = """\
    import copy

    import torch
    from torch import nn


    def _get_clones(module, n):
        return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


    class Net(nn.Module):
        def __init__(self, layer, num_layers=6):
            super().__init__()
            self.layers = _get_clones(layer, num_layers)

        def forward(self, src, mask):
            output = src
            for mod in self.layers:
                output = mod(output, src_mask=mask)
            return output
    """
    found = tl401(source)
    assert [d.location.line for d in found] == [14]
    assert "cloned blocks (parameter `num_layers`, default 6)" in said(found[0])


def test_an_indexed_loop_over_range_len():
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(12)])

        def forward(self, x):
            for i in range(len(self.blocks)):
                x = self.blocks[i](x)
            return x
    """
    fixed = fix(textwrap.dedent(source) + TRAIN_HERE.format(cls="Net"), select=CKPT)
    assert "x = checkpoint(self.blocks[i], x, use_reentrant=False)" in fixed


def test_a_result_not_carried_back_is_reported_without_a_fix():
    source = LOOP.replace("x = blk(x, mask, pos=pos)  # the stack", "x, attn = blk(x)")
    found = tl401(source)
    assert len(found) == 1 and found[0].fix is None
    assert "(no automatic fix: the blocks' results are not assigned back to their input" in said(found[0])


def test_a_keyword_checkpoint_would_take_as_its_own_blocks_the_fix():
    source = LOOP.replace("x = blk(x, mask, pos=pos)  # the stack", "x = blk(x, debug=True)")
    found = tl401(source)
    assert len(found) == 1 and found[0].fix is None


def test_convnext_style_stages_each_a_sequential_get_checkpoint_sequential():
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, depths=(3, 3, 9, 3), dims=(96, 192, 384, 768)):
            super().__init__()
            self.stages = nn.ModuleList()
            for i in range(4):
                stage = nn.Sequential(*[Block(dims[i]) for j in range(depths[i])])
                self.stages.append(stage)

        def forward(self, x):
            for i in range(4):
                x = self.down[i](x)
                x = self.stages[i](x)
            return x
    """
    found = tl401(source)
    assert [d.location.line for d in found] == [8]
    assert "(parameter `depths`, up to 9 per stage)" in said(found[0])
    fixed = fix(textwrap.dedent(source) + TRAIN_HERE.format(cls="Net"), select=CKPT)
    assert "x = checkpoint_sequential(self.stages[i], len(self.stages[i]), x, use_reentrant=False)" in fixed
    shallow = source.replace("depths=(3, 3, 9, 3)", "depths=(2, 2, 2, 2)")
    assert tl401(shallow) == []


# -- TL401: what is not a stack, or not a forward path ----------------------------------------------------


@pytest.mark.parametrize(
    "construction",
    [
        "nn.Sequential(*[BasicBlock(16) for _ in range(2)])",  # ResNet's [2, 2, 2] on CIFAR
        "nn.ModuleList([Block() for _ in range(depth)])",  # a configurable depth whose default is small
        "nn.ModuleList([Stage(dims[i], depths[i]) for i in range(4)])",  # stages of different widths
        "nn.ModuleList([nn.Linear(64, 64) for _ in range(8)])",  # plain layers save only their input
        "nn.ModuleList([Block(), Block(), Block(), Block(), Block()])",  # named out, not repeated
    ],
)
def test_shallow_literal_per_stage_and_plain_layer_stacks_are_not_flagged(construction):
    source = f"""\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, dims=(64, 128, 256, 512), depths=(3, 3, 9, 3), depth=2):
            super().__init__()
            self.blocks = {construction}

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return x
    """
    assert tl401(source) == []


def test_min_depth_option_moves_the_threshold():
    source = LOOP  # depth 8 by default
    assert tl401(source, rule_options={"TL401": {"min-depth": 9}}) == []
    shallow = LOOP.replace("depth=8", "depth=2")
    assert len(tl401(shallow, rule_options={"TL401": {"min-depth": 2}})) == 1


def test_loops_off_the_forward_path_are_not_applications():
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, depth=12):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(depth)])
            for blk in self.blocks:
                blk.apply(self._init_weights)

        def setup_cache(self, size):
            for blk in self.blocks:
                blk.cache = blk.make_cache(size)

        def get_intermediate_layers(self, x):
            outputs = []
            for blk in self.blocks:
                x = blk(x)
                outputs.append(x)
            return outputs

        def forward(self, x):
            return self.head(x)
    """
    assert tl401(source) == []


def test_a_class_with_its_own_switch_or_checkpoint_call_is_not_flagged():
    switch = LOOP.replace(
        "super().__init__()\n", "super().__init__()\n        self.gradient_checkpointing = False\n"
    )
    assert tl401(switch) == []
    called = LOOP.replace(
        "x = blk(x, mask, pos=pos)  # the stack",
        "x = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)",
    ).replace("import torch\n", "import torch\nimport torch.utils.checkpoint\n", 1)
    assert tl401(called) == []
    timm_style = LOOP.replace("x = blk(x, mask, pos=pos)  # the stack", "x = checkpoint_seq(self.blocks, x)")
    assert tl401(timm_style) == []


def test_a_model_that_is_never_trained_is_not_flagged():
    text = LOOP + "\nmodel = Net().eval()\nwith torch.no_grad():\n    model(images)\n"
    assert [d for d in lint(text, select=CKPT) if d.code == "TL401"] == []


# -- TL401 across files ------------------------------------------------------------------------------------

MODEL_FILE = """\
from torch import nn


class Encoder(nn.Module):
    def __init__(self, depth=24):
        super().__init__()
        self.blocks = nn.ModuleList([Block(512) for _ in range(depth)])

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()

    def forward(self, x):
        return self.head(self.encoder(x))
"""

TRAIN_FILE = """\
import torch

from model import Net


def main():
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        model(x).sum().backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_a_model_defined_in_one_module_and_trained_in_another(tmp_path):
    write_project(tmp_path, {"model.py": MODEL_FILE, "train.py": TRAIN_FILE})
    found = check_file(tmp_path, "model.py")
    assert [(d.code, d.location.line) for d in found] == [("TL401", 7)]
    assert "(trained in train.py)" in said(found[0])
    assert check_file(tmp_path, "train.py") == []  # the finding sits where the model is defined


def test_what_a_trainer_trains_is_worked_out_once_for_every_module_whose_classes_it_may_train(
    tmp_path, monkeypatch
):
    """Each class module asks the scripts that import it which of its classes they train; a run over both
    model files (the editor, at each keystroke in one of them) works out the script's answer once."""
    import torchlint.rules.checkpointing.analysis as analysis_module

    heads = MODEL_FILE.replace("class Net(", "class Heads(")  # deep stacks too, none of them trained
    write_project(
        tmp_path,
        {
            "model.py": MODEL_FILE,
            "heads.py": heads,
            "train.py": TRAIN_FILE.replace("import Net", "import Net\nimport heads"),
        },
    )
    asked = []
    original = analysis_module._trained_in
    monkeypatch.setattr(
        analysis_module, "_trained_in", lambda module: asked.append(module.path) or original(module)
    )
    linter = Linter()
    found = {
        name: linter.check_text(str(tmp_path / name), (tmp_path / name).read_text(), settings(select=CKPT))
        for name in ("model.py", "heads.py")
    }
    assert [(d.code, d.location.line) for d in found["model.py"]] == [("TL401", 7)]
    assert found["heads.py"] == []
    assert sorted(Path(path).name for path in asked) == ["heads.py", "model.py", "train.py"]


def test_an_inference_only_package_is_not_flagged(tmp_path):
    demo = """\
    import torch

    from model import Net

    model = Net().eval()
    with torch.no_grad():
        print(model(torch.randn(1, 512)))
    """
    write_project(tmp_path, {"model.py": MODEL_FILE, "demo.py": demo})
    assert check_file(tmp_path, "model.py") == []


@pytest.mark.parametrize(
    "recipe",
    [
        "apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))",
        "model = checkpoint_wrapper(model)",
        "set_activation_checkpointing(model, auto_wrap_policy={Block})",
    ],
)
def test_checkpointing_applied_by_the_training_script_silences_the_model_file(tmp_path, recipe):
    train = TRAIN_FILE.replace("    model = Net()\n", f"    model = Net()\n    {recipe}\n")
    write_project(tmp_path, {"model.py": MODEL_FILE, "train.py": train})
    assert check_file(tmp_path, "model.py") == []


def test_a_model_trained_through_a_factory_and_a_trainer_class(tmp_path):
    factory = """\
    from model import Net


    def build_model(cfg):
        model = Net()
        return model
    """
    trainer = """\
    import torch


    class Trainer:
        def __init__(self, config, model, data):
            self.model = model
            self.data = data

        def run(self):
            model = self.model
            optimizer = torch.optim.AdamW(model.parameters())
            for x, y in self.data:
                model(x).sum().backward()
                optimizer.step()
    """
    script = """\
    from factory import build_model
    from trainer import Trainer

    model = build_model(None)
    Trainer(None, model, data).run()
    """
    write_project(
        tmp_path, {"model.py": MODEL_FILE, "factory.py": factory, "trainer.py": trainer, "run.py": script}
    )
    found = check_file(tmp_path, "model.py")
    assert [(d.code, d.location.line) for d in found] == [("TL401", 7)]


def test_a_model_trained_through_timms_registry(tmp_path):
    models = MODEL_FILE + textwrap.dedent(
        """

        @register_model
        def net_base(pretrained=False, **kwargs):
            model = Net(**kwargs)
            return model
        """
    )
    models = "from timm.models.registry import register_model\n" + models
    train = """\
    import torch
    from timm.models import create_model

    import models


    def main(args):
        model = create_model(args.model, pretrained=False)
        model_without_ddp = model
        print(count_parameters(model_without_ddp))
        optimizer = torch.optim.AdamW(model_without_ddp.parameters())
        for x, y in loader:
            model(x).sum().backward()
            optimizer.step()
    """
    write_project(tmp_path, {"models.py": models, "main.py": train})
    found = check_file(tmp_path, "models.py")
    assert [(d.code, d.location.line) for d in found] == [("TL401", 8)]
    train_other = train.replace("args.model", '"resnet50"')
    write_project(tmp_path, {"models.py": models, "main.py": train_other})
    assert check_file(tmp_path, "models.py") == []  # a literal name of another model


def test_detr_style_a_stack_passed_to_the_trained_class_by_a_chain_of_builders(tmp_path):
    transformer = """\
    import copy

    from torch import nn


    def _get_clones(module, n):
        return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


    class Encoder(nn.Module):
        def __init__(self, layer, num_layers):
            super().__init__()
            self.layers = _get_clones(layer, num_layers)

        def forward(self, src, pos=None):
            out = src
            for layer in self.layers:
                out = layer(out, pos=pos)
            return out


    class Transformer(nn.Module):
        def __init__(self, layers=6):
            super().__init__()
            self.encoder = Encoder(EncoderLayer(), layers)

        def forward(self, src):
            return self.encoder(src)


    def build_transformer(args):
        return Transformer(layers=args.enc_layers)
    """
    detector = """\
    from torch import nn

    from .transformer import build_transformer


    class Detector(nn.Module):
        def __init__(self, backbone, transformer):
            super().__init__()
            self.backbone = backbone
            self.transformer = transformer

        def forward(self, x):
            return self.transformer(self.backbone(x))


    def build(args):
        transformer = build_transformer(args)
        model = Detector(make_backbone(args), transformer)
        return model, make_criterion(args)
    """
    package = "from .detector import build\n\n\ndef build_model(args):\n    return build(args)\n"
    main = """\
    import torch

    from models import build_model


    def main(args):
        model, criterion = build_model(args)
        model_without_ddp = model
        groups = [{"params": [p for n, p in model_without_ddp.named_parameters() if "backbone" not in n]}]
        optimizer = torch.optim.AdamW(groups)
        train_one_epoch(model, criterion, loader, optimizer)
    """
    write_project(
        tmp_path,
        {
            "models/__init__.py": package,
            "models/detector.py": detector,
            "models/transformer.py": transformer,
            "main.py": main,
        },
    )
    found = check_file(tmp_path, "models/transformer.py")
    assert [(d.code, d.location.line) for d in found] == [("TL401", 13)]
    assert "(trained in ../main.py)" in said(found[0])


def test_mae_style_a_model_picked_by_name_from_a_project_module(tmp_path):
    models = MODEL_FILE + "\n\ndef net_large(**kwargs):\n    model = Net(**kwargs)\n    return model\n"
    pretrain = """\
    import torch

    import models_mae


    def main(args):
        model = models_mae.__dict__[args.model](norm_pix_loss=True)
        model_without_ddp = model
        param_groups = add_weight_decay(model_without_ddp, args.weight_decay)
        optimizer = torch.optim.AdamW(param_groups, lr=args.lr)
        for x in loader:
            model(x).backward()
            optimizer.step()
    """
    write_project(tmp_path, {"models_mae.py": models, "main_pretrain.py": pretrain})
    found = check_file(tmp_path, "models_mae.py")
    assert [(d.code, d.location.line) for d in found] == [("TL401", 7)]


def test_nanochat_style_the_model_builds_its_own_optimizer(tmp_path):
    train = TRAIN_FILE.replace(
        "optimizer = torch.optim.AdamW(model.parameters())", "optimizer = model.setup_optimizer(lr=0.02)"
    )
    write_project(tmp_path, {"model.py": MODEL_FILE, "train.py": train})
    assert [d.code for d in check_file(tmp_path, "model.py")] == ["TL401"]


def test_debug_facts_shows_the_stack_its_forward_application_and_who_trains_it(monkeypatch):
    from click.testing import CliRunner

    from torchlint.cli import main

    monkeypatch.chdir(FIXTURES.parent)
    output = CliRunner().invoke(main, ["debug", "facts", "fixtures/checkpoint_transformer/model.py"]).output
    assert (
        "stacks:\n"
        "  line 55: `TinyGPT.blocks` nn.ModuleList of `Block` x `config.n_layer`, default 6, built by a "
        "comprehension in `__init__`\n"
        "    line 66: applied by a loop in `forward` (`x = block(x, mask)`)\n"
        "    trained in train.py; checkpointed: no\n"
    ) in output


# -- TL402 -------------------------------------------------------------------------------------------------


def test_checkpoint_without_use_reentrant_under_aliases_and_its_fix():
    source = """\
    from torch.utils import checkpoint as ckpt
    from torch.utils.checkpoint import checkpoint_sequential as seq


    def run(block, layers, x, options):
        y = ckpt.checkpoint(block, x)
        z = seq(layers, 2, y)
        return ckpt.checkpoint(block, z, **options)
    """
    found = lint(source, select=CKPT)
    assert [(d.code, d.location.line, d.location.column) for d in found] == [("TL402", 6, 9), ("TL402", 7, 9)]
    assert fix(source, select=CKPT) == textwrap.dedent(source).replace(
        "ckpt.checkpoint(block, x)", "ckpt.checkpoint(block, x, use_reentrant=False)"
    ).replace("seq(layers, 2, y)", "seq(layers, 2, y, use_reentrant=False)")


def test_hf_checkpointing_without_kwargs_and_with_them():
    source = """\
    from transformers import TrainingArguments

    model.gradient_checkpointing_enable()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    a = TrainingArguments(output_dir="o", gradient_checkpointing=True)
    b = TrainingArguments(output_dir="o", gradient_checkpointing=False)
    c = TrainingArguments(output_dir="o", gradient_checkpointing=True, gradient_checkpointing_kwargs=kw)
    """
    found = lint(source, select=CKPT)
    assert [(d.code, d.location.line) for d in found] == [("TL402", 3), ("TL402", 5)]


# -- the fixture: the fixed transformer trains the same, saving less for backward ---------------------------

_RESULT = re.compile(r"losses=(?P<losses>\S+) saved_bytes=(?P<saved>\d+) step_ms=(?P<ms>\S+)")
# Both trainings in one process: torch is imported once (the import costs more than the steps).
_DRIVER = """
import runpy, sys
for folder in sys.argv[1:]:
    sys.modules.pop("model", None)
    sys.path.insert(0, folder)
    sys.argv = ["train.py", "3"]
    runpy.run_path(folder + "/train.py", run_name="__main__")
    sys.path.pop(0)
"""


def _train(*folders: Path) -> list[tuple[list[float], int, float]]:
    result = subprocess.run(
        [sys.executable, "-c", _DRIVER, *map(str, folders)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONWARNINGS": "ignore", "CUDA_VISIBLE_DEVICES": "", "PATH": ""},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    runs = [
        ([float(v) for v in m["losses"].split(",")], int(m["saved"]), float(m["ms"]))
        for m in _RESULT.finditer(result.stdout)
    ]
    assert len(runs) == len(folders), result.stdout
    return runs


@pytest.mark.slow
def test_the_fixed_transformer_fixture_trains_the_same_and_saves_less(tmp_path):
    pytest.importorskip("torch")
    original = FIXTURES / "checkpoint_transformer"
    copy = tmp_path / "checkpoint_transformer"
    shutil.copytree(original, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'fixture'\n")
    outcome = run(RunOptions(paths=[copy], fix=True, unsafe_fixes=True, overrides=CliOverrides(select=CKPT)))
    assert outcome.errors == []
    fixed_model = (copy / "model.py").read_text()
    assert "x = checkpoint(block, x, mask, use_reentrant=False)" in fixed_model
    (before_losses, before_saved, _), (after_losses, after_saved, _) = _train(original, copy)
    assert len(before_losses) == len(after_losses) == 3
    assert all(abs(a - b) <= 1e-6 for a, b in zip(before_losses, after_losses, strict=True))
    assert after_saved < before_saved / 4


def test_experts_or_heads_applied_side_by_side_are_not_a_stack():
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, n_expert=8):
            super().__init__()
            self.experts = nn.ModuleList([Expert() for _ in range(n_expert)])
            self.heads = nn.ModuleList([Head() for _ in range(n_expert)])

        def forward(self, x, masks):
            y = torch.zeros_like(x)
            for mask, expert in zip(masks, self.experts):
                y[mask] += expert(x[mask])
            outs = []
            for head in self.heads:
                outs.append(head(y))
            return outs
    """
    assert tl401(source) == []


def test_a_class_trained_through_a_star_import(tmp_path):
    train = TRAIN_FILE.replace("from model import Net", "from model import *")
    write_project(tmp_path, {"model.py": MODEL_FILE, "train.py": train})
    assert [d.code for d in check_file(tmp_path, "model.py")] == ["TL401"]


# A yolov5-shaped project: the network is built from a config by `eval`, so no code names the deep blocks.
YAML_BUILT = """\
from torch import nn

from model import Encoder, Net  # noqa: F401  (named by the config, built by `eval`)


class Model(nn.Module):
    def __init__(self, names):
        super().__init__()
        self.layers = nn.Sequential(*(eval(name)() for name in names))
"""


def test_a_stack_no_other_modules_code_names_is_decided_without_building_them(tmp_path, monkeypatch):
    """Another module's code makes an instance of a class here only by naming it (a call, a base, a function
    of this module that builds it): where none does, no importer can train the stack, and none is built."""
    from torchlint.index.project import Project

    train = TRAIN_FILE.replace("from model import Net", "from yolo import Model").replace(
        "Net()", "Model(cfg)"
    )
    write_project(tmp_path, {"model.py": MODEL_FILE, "yolo.py": YAML_BUILT, "train.py": train})
    built = []
    original = Project._build
    monkeypatch.setattr(Project, "_build", lambda self, path: built.append(path.name) or original(self, path))
    assert check_file(tmp_path, "model.py") == []
    assert built == []
    named = YAML_BUILT.replace("eval(name)()", "Net()")  # a call of the class: trained through Model
    write_project(tmp_path, {"yolo.py": named})
    assert [(d.code, d.location.line) for d in check_file(tmp_path, "model.py")] == [("TL401", 7)]


@pytest.mark.parametrize(
    "files",
    [
        {  # re-exported under another name
            "pkg/__init__.py": "from pkg.model import Net as Backbone\n",
            "train.py": TRAIN_FILE.replace("from model import Net", "from pkg import Backbone").replace(
                "Net()", "Backbone()"
            ),
        },
        {  # derived from in another module
            "pkg/big.py": "from pkg.model import Net\n\n\nclass Big(Net):\n    pass\n",
            "train.py": TRAIN_FILE.replace("from model import Net", "from pkg.big import Big").replace(
                "Net()", "Big()"
            ),
        },
        {  # built by a function of the module that the script calls
            "train.py": TRAIN_FILE.replace("from model import Net", "from pkg.model import build").replace(
                "Net()", "build()"
            ),
        },
        {  # a class of the module deriving from the one with the stack
            "train.py": TRAIN_FILE.replace("from model import Net", "from pkg.model import Big").replace(
                "Net()", "Big()"
            ),
        },
    ],
    ids=["alias", "subclass", "factory", "subclass-here"],
)
def test_a_stack_other_code_reaches_by_another_name_is_still_trained(tmp_path, files):
    more = "\n\ndef build():\n    return Net()\n" if "build" in files["train.py"] else ""
    more += "\n\nclass Big(Encoder):\n    pass\n" if "Big" in files["train.py"] else ""
    write_project(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL_FILE + more, **files})
    found = check_file(tmp_path, "pkg/model.py")
    assert [(d.code, d.location.line) for d in found] == [("TL401", 7)]


# -- TL401: library models point to their own switch --------------------------------------------------------

HF_LOOP = """\
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")
model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased")
optimizer = torch.optim.AdamW(params=model.parameters(), lr=2e-5)
for batch in loader:
    model(**batch).loss.backward()
    optimizer.step()
"""


def test_a_trained_hugging_face_model_gets_its_switch_turned_on():
    found = lint(HF_LOOP, select=("TL401",))
    assert [(d.location.line, d.location.column) for d in found] == [(5, 9)]
    fixed = fix(HF_LOOP, select=("TL401",))
    assert fixed == HF_LOOP.replace(
        '"bert-base-cased")\noptimizer',
        '"bert-base-cased")\nmodel.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": '
        "False})\noptimizer",
    )
    assert fix(fixed, select=("TL401",)) == fixed


@pytest.mark.parametrize(
    "change",
    [
        (
            "optimizer = torch.optim",
            "if args.gc:\n    model.gradient_checkpointing_enable()\noptimizer = torch.optim",
        ),
        (
            "optimizer = torch.optim",
            "model = prepare_model_for_kbit_training(model)\noptimizer = torch.optim",
        ),
    ],
)
def test_a_hugging_face_model_whose_switch_is_decided_is_not_flagged(change):
    assert lint(HF_LOOP.replace(*change), select=("TL401",)) == []


def test_library_models_can_be_left_out_and_inference_is_silent():
    assert lint(HF_LOOP, select=("TL401",), rule_options={"TL401": {"library-models": False}}) == []
    inference = HF_LOOP.split("optimizer =")[0] + "with torch.no_grad():\n    model(**batch)\n"
    assert lint(inference, select=("TL401",)) == []


def test_timm_transformer_families_by_literal_name_and_training_arguments():
    source = """\
    import timm
    import torch
    from transformers import TrainingArguments

    vit = timm.create_model("vit_base_patch16_224", pretrained=True)
    cnn = timm.create_model("resnet50", pretrained=True)
    optimizer = torch.optim.SGD([*vit.parameters(), *cnn.parameters()], lr=0.1)
    for x, y in loader:
        (vit(x).sum() + cnn(x).sum()).backward()
        optimizer.step()
    args = TrainingArguments(output_dir="out")
    """
    found = lint(source, select=("TL401",))
    assert [d.location.line for d in found] == [5, 11]
    assert "`vit.set_grad_checkpointing()`" in said(found[0])
