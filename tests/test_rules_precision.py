"""TL301 (and the precision facts behind it) in the styles real training code is written in, beyond the
single cases of rules/TL301.md.

Every case below is a shape met in public projects (pytorch/examples, nanoGPT, minGPT, timm, deit, yolov5,
accelerate's examples), written anew: each false positive and each miss found there is one test.
"""

from __future__ import annotations

import textwrap

from support import facts_of, fix, lint, said, settings

from torchlint.linter import Linter
from torchlint.rules.mixed_precision.precision import PrecisionAnalysis

PRECISION = ("TL3",)


def findings(source: str, path: str = "train.py", **changes) -> list[tuple[str, int]]:
    return [(d.code, d.location.line) for d in lint(source, select=PRECISION, path=path, **changes)]


def fixed(source: str) -> str:
    return fix(source, select=("TL301",))


def check_project(tmp_path, files: dict[str, str], checked: str) -> list[tuple[str, int]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    path = tmp_path / checked
    found = Linter().check_text(str(path), path.read_text(), settings(select=PRECISION))
    return [(d.code, d.location.line) for d in found]


# -- where TL301 fires, and its exact fix --------------------------------------------------------------------


def test_metrics_between_the_loss_and_backward_stay_outside_the_autocast_block():
    # imagenet style: accuracy and meters are computed after the loss, before the backward pass
    source = """\
    import torch

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for images, target in loader:
        images, target = images.cuda(), target.cuda()
        output = model(images)
        loss = criterion(output, target)
        acc1 = accuracy(output, target)
        losses.update(loss.item(), images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    [d] = lint(source, select=("TL301",))
    assert (d.location.line, d.location.column) == (7, 14)
    assert said(d) == (
        "`model(...)` runs the forward pass of a training loop on the GPU in float32: `torch.autocast` runs "
        "matrix math in half precision on tensor cores and roughly halves activation memory"
    )
    assert fixed(source) == textwrap.dedent("""\
    import torch

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for images, target in loader:
        images, target = images.cuda(), target.cuda()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            output = model(images)
            loss = criterion(output, target)
        acc1 = accuracy(output, target)
        losses.update(loss.item(), images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """)


def test_a_loss_returned_by_the_model_wraps_only_the_forward_statement():
    # minGPT style: `logits, self.loss = model(x, y)`, then `model.zero_grad()` before backward
    source = """\
    import torch

    class Trainer:
        def run(self, model, optimizer, loader):
            model = model.to("cuda")
            for x, y in loader:
                logits, self.loss = model(x, y)
                model.zero_grad(set_to_none=True)
                self.loss.backward()
                optimizer.step()
    """
    assert fixed(source) == textwrap.dedent("""\
    import torch

    class Trainer:
        def run(self, model, optimizer, loader):
            model = model.to("cuda")
            for x, y in loader:
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                    logits, self.loss = model(x, y)
                model.zero_grad(set_to_none=True)
                self.loss.backward()
                optimizer.step()
    """)


def test_the_step_function_called_once_per_epoch_is_where_the_forward_is():
    # gcn / gat style: `train_iter(epoch, model, optimizer, ...)` in an epoch loop
    source = """\
    import torch

    def train_iter(epoch, model, optimizer, criterion, inputs, target):
        optimizer.zero_grad()
        output = model(*inputs)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gcn = GCN().to(device)
    optimizer = torch.optim.Adam(gcn.parameters())
    for epoch in range(200):
        train_iter(epoch, gcn, optimizer, criterion, (features, adj), labels)
    """
    assert findings(source) == [("TL301", 5)]


def test_an_evaluation_helper_that_calls_the_model_is_not_the_forward():
    # nanoGPT style: `estimate_loss()` runs the model under no_grad inside the training loop
    source = """\
    import torch

    def estimate_loss():
        with torch.no_grad():
            return model(X, Y)

    model = GPT().to("cuda")
    optimizer = torch.optim.AdamW(model.parameters())
    while True:
        losses = estimate_loss()
        logits, loss = model(X, Y)
        loss.backward()
        optimizer.step()
    """
    assert findings(source) == [("TL301", 11)]


def test_a_loss_that_is_not_a_name_gets_the_finding_without_a_fix():
    source = """\
    import torch

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, batch in enumerate(loader):
        loss, _ = model(**batch)
        (loss / accumulation).backward()
        optimizer.step()
    """
    [d] = lint(source, select=("TL301",))
    assert d.fix is None
    assert said(d).endswith("(no automatic fix: the loss is not computed next to the forward call)")


def test_bce_loss_gets_no_fix_and_the_message_names_the_logits_form():
    source = """\
    import torch
    import torch.nn.functional as F

    model = VAE().cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for x in loader:
        recon = model(x.cuda())
        loss = F.binary_cross_entropy(recon, x.cuda())
        loss.backward()
        optimizer.step()
    """
    [d] = lint(source, select=("TL301",))
    assert d.fix is None
    assert said(d).endswith(
        "(no automatic fix: `binary_cross_entropy` raises under CUDA autocast; use "
        "`F.binary_cross_entropy_with_logits` on the logits instead, then autocast)"
    )


def test_a_custom_autograd_function_without_custom_fwd_gets_no_fix():
    source = """\
    import torch

    class Clamp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clamp(0, 1)

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        out = model(x)
        loss = criterion(Clamp.apply(out), y)
        loss.backward()
        optimizer.step()
    """
    [d] = lint(source, select=("TL301",))
    assert d.fix is None
    assert "`Clamp` has no `@torch.amp.custom_fwd`" in said(d)


def test_the_torch_alias_of_the_file_is_used():
    source = """\
    import torch as T

    model = Net().cuda()
    opt = T.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
    """
    assert 'with T.autocast(device_type="cuda", dtype=T.bfloat16):\n        loss = crit' in fixed(source)


# -- where TL301 stays silent ------------------------------------------------------------------------------


def test_a_test_file_that_trains_to_check_an_optimizer_is_not_flagged():
    # timm tests/test_optim.py: a convergence check, whose numerics autocast would change
    source = """\
    import torch

    model = Net().to("cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(20):
        optimizer.zero_grad()
        output = model(inputs)
        loss = output.sum()
        loss.backward()
        optimizer.step()
    """
    assert findings(source, path="tests/test_optim.py") == []
    assert findings(source, path="train.py") == [("TL301", 7)]


def test_a_test_script_that_checks_gradient_sync_with_accelerate_is_not_flagged():
    # accelerate's test_utils/scripts/test_sync.py: full precision on purpose, to compare gradients exactly
    source = """    from accelerate import Accelerator

    accelerator = Accelerator(split_batches=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        accelerator.backward(model(**batch).loss)
        optimizer.step()
    """
    assert findings(source, path="test_utils/scripts/test_sync.py") == []
    assert findings(source, path="scripts/sync.py") == [("TL301", 3)]


def test_accelerate_with_deepspeed_is_not_flagged():
    # accelerate's DeepSpeed / Megatron examples: the DeepSpeed config decides fp16/bf16
    source = """\
    from accelerate import Accelerator
    from accelerate.utils import DummyOptim

    accelerator = Accelerator(gradient_accumulation_steps=4)
    optimizer_cls = DummyOptim if accelerator.state.deepspeed_plugin is not None else AdamW
    model, optimizer, loader = accelerator.prepare(model, optimizer_cls(model.parameters()), loader)
    for batch in loader:
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
    """
    assert findings(source) == []


def test_nanogpt_context_variable_is_precision_decided():
    source = """\
    from contextlib import nullcontext
    import torch

    device_type = "cuda" if "cuda" in device else "cpu"
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    model = GPT().to("cuda")
    optimizer = torch.optim.AdamW(model.parameters())
    while True:
        with ctx:
            logits, loss = model(X, Y)
        loss.backward()
        optimizer.step()
    """
    assert findings(source) == []
    [site] = facts_of(source).analysis(PrecisionAnalysis).autocast_sites
    assert (site.how, site.device, site.dtype) == ("variable `ctx`", "unknown", "unknown")


def test_yolov5_amp_flag_with_positional_enabled_is_precision_decided():
    source = """\
    import torch
    from torch.cuda import amp

    model = Model().to("cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    amp_ok = check_amp(model)
    scaler = torch.cuda.amp.GradScaler(enabled=amp_ok)
    for imgs, targets in loader:
        with amp.autocast(amp_ok):
            pred = model(imgs)
            loss = compute_loss(pred, targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """
    assert [code for code, _ in findings(source)] == ["TL304", "TL303"]
    facts = facts_of(source)
    [site] = facts.analysis(PrecisionAnalysis).autocast_sites
    assert (site.how, site.device, site.dtype, site.enabled) == ("`with`", "cuda", "float16", "amp_ok")
    [scaler] = facts.analysis(PrecisionAnalysis).scalers
    assert (scaler.name, scaler.enabled) == ("scaler", "amp_ok")
    assert sorted(scaler.uses) == ["scale", "step", "update"]


def test_timm_partial_handed_down_as_a_parameter_is_precision_decided():
    source = """\
    from functools import partial
    import torch

    def train_one_epoch(model, loader, optimizer, amp_autocast, loss_scaler):
        for x, y in loader:
            with amp_autocast():
                loss = criterion(model(x.cuda()), y.cuda())
            loss_scaler(loss, optimizer)

    amp_dtype = torch.bfloat16 if args.amp_dtype == "bfloat16" else torch.float16
    amp_autocast = partial(torch.autocast, device_type="cuda", dtype=amp_dtype)
    loss_scaler = NativeScaler()
    model = create_model().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_one_epoch(model, loader, optimizer, amp_autocast, loss_scaler)
    """
    assert findings(source) == []
    facts = facts_of(source)
    [site] = facts.analysis(PrecisionAnalysis).autocast_sites
    assert (site.how, site.device, site.dtype) == ("`functools.partial`", "cuda", "float16 or bfloat16")
    [scaler] = facts.analysis(PrecisionAnalysis).scalers
    assert scaler.how == "`NativeScaler` (a scaler class)"


def test_a_model_cast_to_bfloat16_is_precision_decided():
    source = """\
    import torch

    model = Net().cuda().to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    """
    assert findings(source) == []
    assert [s.what for s in facts_of(source).analysis(PrecisionAnalysis).switches] == [
        "cast with `.to(torch.bfloat16)`"
    ]


def test_lightning_trainer_with_kwargs_or_on_the_cpu_is_not_flagged():
    source = """\
    import lightning as L

    trainer = L.Trainer(**trainer_config)
    trainer.fit(model, loader)
    cpu_trainer = L.Trainer(accelerator="cpu")
    cpu_trainer.fit(model, loader)
    """
    assert findings(source) == []


def test_a_fsdp_mixed_precision_policy_in_the_script_that_calls_a_package_training_function(tmp_path):
    # pytorch/examples FSDP: utils/train_utils.py trains; T5_training.py (importing it through
    # utils/__init__.py) wraps the model in FSDP with a mixed-precision policy
    files = {
        "utils/__init__.py": "from .train_utils import train\n",
        "utils/train_utils.py": """\
            import torch

            def train(model, loader, optimizer, rank):
                for batch in loader:
                    batch = batch.to(rank)
                    optimizer.zero_grad()
                    output = model(batch)
                    loss = output["loss"]
                    loss.backward()
                    optimizer.step()

            torch.device("cuda")
            """,
        "main.py": """\
            import torch
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision
            from utils import train

            policy = MixedPrecision(param_dtype=torch.bfloat16)
            model = FSDP(Net(), mixed_precision=policy)
            train(model, loader, torch.optim.AdamW(model.parameters()), 0)
            """,
    }
    assert check_project(tmp_path, files, "utils/train_utils.py") == []


def test_cpu_training_and_unknown_devices_are_not_flagged_unless_the_setting_says_cuda():
    source = """\
    import torch

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    """
    assert findings(source) == []
    assert findings(source, device="cuda") == [("TL301", 6)]
    assert findings(source.replace("Net()", 'Net().to("cuda")'), device="cpu") == []


def test_the_prefilter_is_sound_for_the_framework_findings():
    from torchlint.rules.mixed_precision.rules import TrainingWithoutAutocast

    source = 'from transformers import TrainingArguments\nargs = TrainingArguments(output_dir="o")\n'
    assert findings(source) == [("TL301", 2)]
    assert TrainingWithoutAutocast.could_fire(source)


# -- the facts: debug output --------------------------------------------------------------------------------


def test_debug_facts_shows_precision_sites_scalers_and_the_wrapped_region(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from torchlint.cli import main

    (tmp_path / "train.py").write_text(
        textwrap.dedent("""\
        import torch

        scaler = torch.amp.GradScaler("cuda")
        model = Net().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x)
                loss = criterion(out, y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """)
    )
    monkeypatch.chdir(tmp_path)
    output = CliRunner().invoke(main, ["debug", "facts", "train.py"]).output
    lines = output.splitlines()
    start = lines.index("precision:")
    assert lines[start + 1 : start + 3] == [
        "  line 7: autocast (`with`), device cuda, dtype bfloat16, enabled yes",
        "  line 3: scaler `torch.amp.GradScaler` as `scaler`, enabled yes; used: scale x1, step x1, update x1",
    ]
    assert (
        "  loop at line 6: forward `model` at line 8; forward and loss: the backward pass is not a later "
        "statement of the same block"
    ) in lines


# -- TL302, TL305, TL306, TL307 ------------------------------------------------------------------------------

SCALED_LOOP = """\
import torch

model = Net().cuda()
optimizer = torch.optim.AdamW(model.parameters())
scaler = torch.amp.GradScaler("cuda")
for step, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x.cuda()), y.cuda()) / accumulation
    scaler.scale(loss).backward()
    if (step + 1) % accumulation == 0:
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
"""


def test_clip_under_accumulation_and_a_flag_gets_unscale_inside_the_same_block():
    [d] = lint(SCALED_LOOP, select=("TL306",))
    assert (d.location.line, d.location.column) == (12, 13)
    assert said(d) == (
        "gradients are clipped while still scaled by `scaler`: call `scaler.unscale_(optimizer)` before "
        "clipping, or the threshold applies to gradients multiplied by the loss scale"
    )
    assert fix(SCALED_LOOP, select=("TL306",)) == SCALED_LOOP.replace(
        "        if clip:\n", "        if clip:\n            scaler.unscale_(optimizer)\n"
    )
    assert findings(SCALED_LOOP) == [("TL306", 12)]


def test_clip_after_unscale_is_not_flagged_nanogpt_order():
    source = SCALED_LOOP.replace(
        "        if clip:\n", "        if clip:\n            scaler.unscale_(optimizer)\n"
    )
    assert findings(source) == []


def test_clip_inside_a_scaler_class_is_not_judged_here():
    # timm/deit: `loss_scaler(loss, optimizer, clip_grad=...)` unscales inside NativeScaler
    source = """\
    import torch

    def train_one_epoch(model, loader, optimizer, loss_scaler, clip_grad):
        for x, y in loader:
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            loss_scaler(loss, optimizer, clip_grad=clip_grad, parameters=model.parameters())
    """
    assert findings(source) == []


def test_fp16_autocast_without_any_scaler_in_training_is_flagged():
    source = """\
    import torch

    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        with torch.autocast(device_type="cuda", dtype=dtype):
            loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    """
    [d] = lint(source, select=("TL302",))
    assert d.location.line == 7
    assert said(d).startswith("this autocast runs training in float16 on GPUs without bfloat16 with no")


def test_fp16_autocast_for_inference_only_is_not_tl302():
    source = """\
    import torch

    model = Net().cuda().eval()
    with torch.no_grad():
        for x in loader:
            with torch.autocast("cuda"):
                predictions = model(x)
    """
    assert findings(source) == []


def test_backward_inside_autocast_through_a_context_variable():
    source = """\
    from contextlib import nullcontext
    import torch

    ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast("cuda", dtype=torch.bfloat16)
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        with ctx:
            loss = criterion(model(x), y)
            loss.backward()
        optimizer.step()
    """
    [d] = lint(source, select=("TL305",))
    assert (d.location.line, said(d)) == (
        10,
        "`loss.backward()` runs inside an autocast block (variable `ctx`): backward passes under autocast "
        "are not recommended (PyTorch AMP docs); end the block after the loss",
    )


def test_scaler_enabled_only_for_float16_is_not_tl307():
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """
    assert findings(source) == []
    assert findings(source.replace(', enabled=(dtype == "float16")', "")) == [("TL307", 3)]


def test_model_moved_with_a_dtype_variable_is_a_cast():
    source = """\
    import torch

    ptdtype = torch.bfloat16
    model = Net().to("cuda", dtype=ptdtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    """
    assert [s.what for s in facts_of(source).analysis(PrecisionAnalysis).switches] == [
        "cast with `.to(ptdtype)`"
    ]


def test_backward_and_the_statements_after_it_leave_the_autocast_block():
    source = """\
    import torch

    def step(model, x, y, optimizer):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
            loss = criterion(out, y)
            # backprop
            loss.backward()
            optimizer.step()
        return loss
    """
    assert fix(source, select=("TL305",)) == textwrap.dedent("""\
    import torch

    def step(model, x, y, optimizer):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
            loss = criterion(out, y)
        # backprop
        loss.backward()
        optimizer.step()
        return loss
    """)


def test_grad_scaler_rewrite_in_a_train_function_keeps_accumulation_clipping_and_zero_grad():
    source = """\
    import torch

    def train(model, loader, optimizer, epochs):
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                with torch.autocast(device_type="cuda"):
                    loss = criterion(model(x.cuda()), y.cuda())
                (loss / 4).backward()
                if i % 4 == 3:
                    torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
                    optimizer.step()
                    optimizer.zero_grad()
    """
    assert fix(source, select=("TL302",)) == textwrap.dedent("""\
    import torch

    def train(model, loader, optimizer, epochs):
        scaler = torch.amp.GradScaler("cuda")
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                with torch.autocast(device_type="cuda"):
                    loss = criterion(model(x.cuda()), y.cuda())
                scaler.scale((loss / 4)).backward()
                if i % 4 == 3:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
    """)


def test_two_optimizer_steps_get_the_tl302_finding_without_a_fix():
    # dcgan style: two optimizers stepped in one loop
    source = """\
    import torch

    for x in loader:
        with torch.autocast("cuda"):
            loss_d = criterion(net_d(x.cuda()), real)
        loss_d.backward()
        opt_d.step()
        with torch.autocast("cuda"):
            loss_g = criterion(net_d(net_g(noise)), real)
        loss_g.backward()
        opt_g.step()
    """
    found = lint(source, select=("TL302",))
    assert [(d.location.line, d.fix) for d in found] == [(4, None), (8, None)]


def test_a_scaler_handed_in_as_a_parameter_is_known_by_its_use():
    # engine.py style: `train_one_epoch(model, loader, optimizer, scaler)`; the scaler is made in main.py
    source = """\
    import torch

    def train_one_epoch(model, loader, optimizer, scaler):
        for x, y in loader:
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
    """
    assert findings(source) == [("TL306", 8)]
    [scaler] = facts_of(source).analysis(PrecisionAnalysis).scalers
    assert (scaler.name, scaler.how, sorted(scaler.uses)) == (
        "scaler",
        "(used as one)",
        ["scale", "step", "update"],
    )


def test_an_autocast_helper_in_another_module_decides_precision(tmp_path):
    # a project helper returning the context, under a name that says nothing about precision
    files = {
        "helpers.py": """\
            import torch

            def context():
                return torch.autocast("cuda", dtype=torch.bfloat16)
            """,
        "train.py": """\
            import torch
            from helpers import context

            model = Net().cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                with context():
                    loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
    }
    assert check_project(tmp_path, files, "train.py") == []


def test_grad_scaler_imported_by_name_with_bfloat16_is_tl307():
    source = """\
    import torch
    from torch.amp import GradScaler

    scaler = GradScaler()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    scaler.scale(loss).backward()
    """
    assert findings(source) == [("TL307", 4)]


# -- a step function in another file: the device (and the precision decision) from its callers ---------------

DETR_ENGINE = """\
    import torch

    def train_one_epoch(model, criterion, data_loader, optimizer, device, max_norm=0):
        model.train()
        for samples, targets in data_loader:
            samples = samples.to(device)
            targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
            outputs = model(samples)
            loss_dict = criterion(outputs, targets)
            losses = sum(loss_dict.values())
            optimizer.zero_grad()
            losses.backward()
            if max_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
    """
DETR_MAIN = """\
    import argparse

    import torch
    from engine import train_one_epoch

    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    model = build_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    for epoch in range(10):
        train_one_epoch(model, criterion, loader, optimizer, device)
    """


def test_a_step_function_in_another_file_trains_on_the_device_its_caller_names(tmp_path):
    # detr style: engine.py moves batches to a `device` parameter; main.py says it is CUDA
    files = {"engine.py": DETR_ENGINE, "main.py": DETR_MAIN}
    assert check_project(tmp_path, files, "engine.py") == [("TL301", 8)]
    assert check_project(tmp_path, files, "main.py") == []  # the finding sits where the forward is


def test_a_step_function_in_another_file_gets_the_exact_fix(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "main.py").write_text(textwrap.dedent(DETR_MAIN))
    engine = tmp_path / "engine.py"
    engine.write_text(textwrap.dedent(DETR_ENGINE))
    result = Linter().fix_text(str(engine), engine.read_text(), settings(select=("TL301",)), unsafe=True)
    assert result.text == textwrap.dedent(DETR_ENGINE).replace(
        """        outputs = model(samples)
        loss_dict = criterion(outputs, targets)
        losses = sum(loss_dict.values())
""",
        """        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            outputs = model(samples)
            loss_dict = criterion(outputs, targets)
            losses = sum(loss_dict.values())
""",
    )


def test_a_step_function_whose_caller_trains_on_the_cpu_or_decides_precision_is_not_flagged(tmp_path):
    on_cpu = {"engine.py": DETR_ENGINE, "main.py": DETR_MAIN.replace('default="cuda"', 'default="cpu"')}
    assert check_project(tmp_path / "cpu", on_cpu, "engine.py") == []
    # deit / mae style: the scaler class lives in a third module and is made by the caller
    scaled = {
        "engine.py": DETR_ENGINE,
        "utils.py": """\
            import torch

            class NativeScalerWithGradNormCount:
                def __init__(self):
                    self._scaler = torch.amp.GradScaler("cuda")
            """,
        "main.py": DETR_MAIN.replace(
            "from engine import train_one_epoch",
            "from engine import train_one_epoch\n    from utils import NativeScalerWithGradNormCount as Grads",
        ).replace("device = torch", "grads = Grads()\n    device = torch"),
    }
    assert check_project(tmp_path / "scaled", scaled, "engine.py") == []


def test_a_trainer_class_in_another_file_trains_on_the_device_its_constructor_is_given(tmp_path):
    # ddp-tutorial style, split in two: trainer.py holds the class, main.py builds it with a CUDA device
    files = {
        "trainer.py": """\
            import torch
            import torch.nn.functional as F

            class Trainer:
                def __init__(self, model, loader, optimizer, device):
                    self.model = model.to(device)
                    self.loader = loader
                    self.optimizer = optimizer
                    self.device = device

                def _run_batch(self, source, targets):
                    self.optimizer.zero_grad()
                    output = self.model(source)
                    loss = F.cross_entropy(output, targets)
                    loss.backward()
                    self.optimizer.step()

                def train(self, epochs):
                    for epoch in range(epochs):
                        for source, targets in self.loader:
                            self._run_batch(source.to(self.device), targets.to(self.device))
            """,
        "main.py": """\
            import torch
            from trainer import Trainer

            model = Net()
            trainer = Trainer(model, loader, torch.optim.SGD(model.parameters(), lr=0.1), torch.device("cuda"))
            trainer.train(10)
            """,
    }
    assert check_project(tmp_path, files, "trainer.py") == [("TL301", 13)]


def test_a_loop_trained_through_distributed_autograd_is_not_flagged():
    # pytorch/examples rpc/parameter_server: the forward runs on RPC workers, autocast is thread-local
    source = """\
    import torch
    import torch.distributed.autograd as dist_autograd

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net = TrainerNet().to(device)
    for data, target in loader:
        with dist_autograd.context() as cid:
            model_output = net(data)
            loss = torch.nn.functional.nll_loss(model_output, target)
            dist_autograd.backward(cid, [loss])
            opt.step(cid)
    """
    assert findings(source) == []
    assert findings(source.replace("dist_autograd.backward(cid, [loss])", "loss.backward()")) == [
        ("TL301", 8)
    ]


def test_a_hand_written_loop_in_a_module_that_only_imports_lightning_is_judged():
    # Lightning tutorials: `pl.seed_everything(42)`, then a plain PyTorch loop — no Trainer owns it
    source = """\
    import pytorch_lightning as pl
    import torch

    pl.seed_everything(42)
    device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")

    def epoch_iteration(net, loss_module, optimizer, loader):
        for imgs, labels in loader:
            imgs, labels = imgs.to(device), labels.to(device)
            optimizer.zero_grad()
            preds = net(imgs)
            loss = loss_module(preds, labels)
            loss.backward()
            optimizer.step()
    """
    assert findings(source) == [("TL301", 11)]
    # a framework object made here, or one handed in and doing the backward pass, owns the loop
    owned = source.replace("pl.seed_everything(42)", "trainer = pl.Trainer(precision=16)")
    assert findings(owned) == []
    handed_in = """\
    import torch
    from accelerate import Accelerator

    def train(model, optimizer, loader, acc: Accelerator):
        for batch in loader:
            optimizer.zero_grad()
            outputs = model(**batch)
            acc.backward(outputs.loss)
            optimizer.step()

    torch.device("cuda")
    """
    assert findings(handed_in) == []


# -- an autocast context handed down as a parameter -----------------------------------------------------------

TIMM_STYLE = """\
import torch
from contextlib import suppress
from functools import partial

def train_one_epoch(model, loader, optimizer, amp_autocast=suppress, loss_scaler=None):
    for x, y in loader:
        with amp_autocast():
            output = model(x.cuda())
            loss = criterion(output, y.cuda())
            loss.backward()
        optimizer.step()

def main():
    amp_autocast = partial(torch.autocast, device_type="cuda", dtype=torch.bfloat16)
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_one_epoch(model, loader, optimizer, amp_autocast=amp_autocast)
"""


def test_a_partial_handed_down_as_a_parameter_opens_an_autocast_region():
    # timm train.py style: `with amp_autocast():` in train_one_epoch, the partial made in main()
    [d] = lint(TIMM_STYLE, select=("TL305",))
    assert (d.location.line, d.location.column) == (10, 13)
    assert said(d) == (
        "`loss.backward()` runs inside an autocast block (parameter `amp_autocast`, an autocast context passed "
        "by its callers): backward passes under autocast are not recommended (PyTorch AMP docs); end the "
        "block after the loss"
    )
    assert fix(TIMM_STYLE, select=("TL305",)) == TIMM_STYLE.replace(
        "            loss.backward()\n        optimizer.step()",
        "        loss.backward()\n        optimizer.step()",
    )
    # bfloat16 needs no scaler; float16 without one is TL302, at the `with` item of the helper
    assert findings(TIMM_STYLE) == [("TL305", 10)]
    float16 = TIMM_STYLE.replace("torch.bfloat16", "torch.float16")
    assert findings(float16) == [("TL305", 10)]  # a `loss_scaler` handed in scales the loss
    assert findings(float16.replace(", loss_scaler=None", "")) == [("TL302", 7), ("TL305", 10)]
    # a context that is not autocast (`suppress`, the default, passed explicitly) opens no region
    assert findings(TIMM_STYLE.replace("amp_autocast=amp_autocast", "amp_autocast=suppress")) == []


ENGINE_WITH_CONTEXT = """\
    import torch

    def train(model, loader, optimizer, ctx):
        for x, y in loader:
            with ctx:
                loss = model(x.cuda(), y.cuda())
                loss.backward()
            optimizer.step()
    """


def test_a_context_made_in_another_file_opens_an_autocast_region_in_the_helper(tmp_path):
    main = """\
        import torch
        from engine import train

        ctx = torch.autocast(device_type="cuda", dtype=torch.float16)
        model = Net().cuda()
        train(model, loader, torch.optim.AdamW(model.parameters()), ctx)
        """
    files = {"engine.py": ENGINE_WITH_CONTEXT, "main.py": main}
    assert check_project(tmp_path / "plain", files, "engine.py") == [("TL302", 5), ("TL305", 7)]
    # a scaler made where the context is made: the loss scaling is decided there (no TL302)
    scaled = {
        **files,
        "main.py": main.replace("ctx = torch", "scaler = torch.amp.GradScaler()\n        ctx = torch"),
    }
    assert check_project(tmp_path / "scaled", scaled, "engine.py") == [("TL305", 7)]


def test_debug_facts_shows_a_context_passed_in_and_the_device_from_the_callers(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from torchlint.cli import main

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    engine = ENGINE_WITH_CONTEXT.replace("x.cuda(), y.cuda()", "x, y")  # no device of its own
    (tmp_path / "engine.py").write_text(textwrap.dedent(engine))
    (tmp_path / "main.py").write_text(
        textwrap.dedent("""\
        import torch
        from engine import train

        ctx = torch.autocast(device_type="cuda", dtype=torch.float16)
        train(model, loader, optimizer, ctx)
        torch.device("cuda")
        """)
    )
    monkeypatch.chdir(tmp_path)
    lines = CliRunner().invoke(main, ["debug", "facts", "engine.py"]).output.splitlines()
    assert (
        "  line 5: autocast region (parameter `ctx`, an autocast context passed in main.py), device cuda, "
        "dtype float16, enabled yes"
    ) in lines
    assert "  loop at line 4: trains on cuda, as the files calling it say" in lines


def test_a_loss_function_handed_the_model_is_the_forward_dit_style():
    # DiT train.py: `diffusion.training_losses(model, x, t, ...)` runs the model; the VAE encode before it
    # (under no_grad) and the EMA update after the step are not the forward
    source = """\
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = torch.device("cuda", 0)
    model = DDP(DiT().to(device), device_ids=[0])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for x, y in loader:
        x = x.to(device)
        with torch.no_grad():
            x = vae.encode(x).latent_dist.sample().mul_(0.18215)
        t = torch.randint(0, 1000, (x.shape[0],), device=device)
        loss_dict = diffusion.training_losses(model, x, t, dict(y=y))
        loss = loss_dict["loss"].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        update_ema(ema, model.module)
    """
    [d] = lint(source, select=("TL301",))
    assert (d.location.line, d.location.column) == (12, 17)
    assert said(d).startswith("`diffusion.training_losses(...)` runs the forward pass of a training loop")
    assert fixed(source) == textwrap.dedent(source).replace(
        """    loss_dict = diffusion.training_losses(model, x, t, dict(y=y))
    loss = loss_dict["loss"].mean()
""",
        """    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        loss_dict = diffusion.training_losses(model, x, t, dict(y=y))
        loss = loss_dict["loss"].mean()
""",
    )
    # a call handed the model whose result is not kept, or a builtin, is not a forward
    assert (
        findings(source.replace("loss_dict = diffusion", "diffusion").replace('loss_dict["loss"]', "out"))
        == []
    )


def test_clip_without_unscale_in_a_step_method_with_an_unscaled_branch():
    # pytorch/examples minGPT-ddp trainer.py: `_run_batch` is called by the epoch loop; only the scaled
    # branch clips scaled gradients
    source = """\
    import torch

    class Trainer:
        def __init__(self, model, optimizer, config):
            self.model, self.optimizer, self.config = model.to("cuda"), optimizer, config
            self.scaler = torch.amp.GradScaler("cuda")

        def _run_batch(self, source, targets):
            with torch.amp.autocast(device_type="cuda", dtype=torch.float16, enabled=self.config.use_amp):
                _, loss = self.model(source, targets)
            self.optimizer.zero_grad(set_to_none=True)
            if self.config.use_amp:
                self.scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
                self.optimizer.step()

        def train(self, loader):
            for source, targets in loader:
                self._run_batch(source, targets)
    """
    [d] = lint(source, select=("TL306",))
    assert (d.location.line, d.location.column) == (14, 13)
    assert said(d).startswith("gradients are clipped while still scaled by `self.scaler`: call ")
    assert fix(source, select=("TL306",)) == textwrap.dedent(source).replace(
        "        self.scaler.scale(loss).backward()\n",
        "        self.scaler.scale(loss).backward()\n            self.scaler.unscale_(self.optimizer)\n",
    )
    # the unscaled branch first: its clip precedes the scaled branch's `scale`, and is not flagged
    reordered = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")

    def run_batch(model, optimizer, loss, use_amp):
        if not use_amp:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
    """
    assert findings(reordered) == []


def test_a_context_returned_by_a_helper_in_another_file_and_handed_down(tmp_path):
    # open_clip style: precision.py's `get_autocast(precision)` returns a partial of autocast (or
    # `suppress`); main.py hands it to the step function of train.py
    files = {
        "precision.py": """\
            from contextlib import suppress
            from functools import partial

            import torch

            def get_autocast(precision):
                if precision == "amp":
                    return partial(torch.amp.autocast, device_type="cuda", dtype=torch.float16)
                return suppress
            """,
        "train.py": """\
            def train_one_epoch(model, loader, optimizer, autocast):
                for images, texts in loader:
                    with autocast():
                        loss = model(images.cuda(), texts.cuda())
                        loss.backward()
                    optimizer.step()
            """,
        "main.py": """\
            from precision import get_autocast
            from train import train_one_epoch

            autocast = get_autocast(args.precision)
            train_one_epoch(model, loader, optimizer, autocast)
            """,
    }
    assert check_project(tmp_path, files, "train.py") == [("TL302", 3), ("TL305", 5)]


def test_a_lightning_trainer_that_only_validates_is_not_flagged():
    # Lightning tutorials: `trainer` is rebound; the last Trainer only runs `validate`
    source = """\
    import lightning as L

    trainer = L.Trainer(max_epochs=3, accelerator="auto", devices=1)
    trainer.fit(model, datamodule=dm)

    trainer = L.Trainer(max_epochs=3, accelerator="auto", devices=1)
    trainer.validate(model, dm)

    L.Trainer(max_epochs=1).fit(model, dm)
    """
    assert findings(source) == [("TL301", 3), ("TL301", 9)]


def test_a_layer_that_trains_itself_runs_its_own_forward():
    # pytorch/examples mnist_forward_forward: each layer owns an optimizer and a `train` loop
    source = """\
    import torch

    class Layer(torch.nn.Linear):
        def __init__(self, in_features, out_features):
            super().__init__(in_features, out_features)
            self.opt = torch.optim.Adam(self.parameters(), lr=0.03)

        def train_layer(self, x_pos, x_neg):
            for i in range(1000):
                g_pos = self.forward(x_pos).pow(2).mean(1)
                g_neg = self.forward(x_neg).pow(2).mean(1)
                loss = torch.log1p(torch.exp(torch.cat([-g_pos + 2.0, g_neg - 2.0]))).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

    layer = Layer(784, 500).to("cuda")
    """
    [d] = lint(source, select=("TL301",))
    assert (d.location.line, d.location.column) == (10, 21)
    assert fixed(source) == textwrap.dedent(source).replace(
        """            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log1p(torch.exp(torch.cat([-g_pos + 2.0, g_neg - 2.0]))).mean()
""",
        """            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                g_pos = self.forward(x_pos).pow(2).mean(1)
                g_neg = self.forward(x_neg).pow(2).mean(1)
                loss = torch.log1p(torch.exp(torch.cat([-g_pos + 2.0, g_neg - 2.0]))).mean()
""",
    )
