"""The mixed-precision family (TL3xx) on the shapes unseen repositories showed: each test is a small
reproduction of one class of false positive, miss or wrong fix the ecosystem check found (the report's case
id or the repository in the docstring), with its siblings.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from support import codes_and_lines, fix, lint, said

TL301 = ("TL301",)
TL302 = ("TL302",)
NO_SHARED_PLACE = "(no automatic fix:"


def fixed(source: str, select: tuple[str, ...]) -> str:
    return fix(source, select=select)


# -- TL302's fix: one `unscale_` per optimizer step (brief item 1; TL306's rule, reliability N2) -------------

TWO_CLIPS = """\
import torch

for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x.cuda()), y.cuda())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
    optimizer.step()
"""


def test_tl302_fix_gives_two_clips_of_a_step_one_unscale_before_the_first():
    """Two clips in one step: the GradScaler rewrite adds one `scaler.unscale_(optimizer)`, before the first
    clip (a second one raises "unscale_() has already been called" at the first step)."""
    assert fixed(TWO_CLIPS, TL302) == (
        TWO_CLIPS.replace("import torch\n\n", 'import torch\n\nscaler = torch.amp.GradScaler("cuda")\n')
        .replace("    loss.backward()", "    scaler.scale(loss).backward()")
        .replace(
            "    torch.nn.utils.clip_grad_norm_",
            "    scaler.unscale_(optimizer)\n    torch.nn.utils.clip_grad_norm_",
        )
        .replace("    optimizer.step()", "    scaler.step(optimizer)\n    scaler.update()")
    )


def test_tl302_fix_puts_the_unscale_before_a_per_param_group_clip_loop():
    """A clip inside `for group in optimizer.param_groups:` runs once per group: the one `unscale_` goes
    before that loop, not inside it."""
    source = """\
    import torch

    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        loss.backward()
        for group in optimizer.param_groups:
            torch.nn.utils.clip_grad_norm_(group["params"], group["max_norm"])
        optimizer.step()
    """
    assert fixed(source, TL302) == textwrap.dedent("""\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        for group in optimizer.param_groups:
            torch.nn.utils.clip_grad_norm_(group["params"], group["max_norm"])
        scaler.step(optimizer)
        scaler.update()
    """)


def _tl302_note(source: str) -> tuple[str, bool]:
    [finding] = lint(source, select=TL302)
    note = said(finding).split("`dtype=torch.bfloat16`", 1)[1]
    return note, finding.fix is not None


def test_tl302_clip_inside_the_micro_batch_loop_gets_no_fix():
    """A clip in a micro-batch loop that also runs the backward pass runs several times per step: no place
    unscales once per step there, so the rewrite is not offered, and the message says why."""
    source = """\
    import torch

    for batch in loader:
        for x, y in split(batch):
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    """
    assert _tl302_note(source) == (
        " (no automatic fix: the clip runs in a loop that also runs the backward pass, more than once per "
        "step, and `unscale_` may run only once per step: clip once, after that loop)",
        False,
    )
    assert fixed(source, TL302) == textwrap.dedent(source)


def test_tl302_clip_that_runs_where_the_step_may_not_gets_no_fix():
    """Accumulation with the clip outside the `if` that steps: the clip runs every micro-batch and
    `update()` only every few, so an `unscale_` before the clip would run twice between updates."""
    source = """\
    import torch

    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if (i + 1) % accumulation == 0:
            optimizer.step()
    """
    assert _tl302_note(source) == (
        " (no automatic fix: the clip runs where `optimizer.step()` may not, and `unscale_` may run only "
        "once per step)",
        False,
    )


def test_tl302_continue_between_clip_and_step_gets_no_fix():
    """`if not finite: continue` after the clip skips the step and its `update()`: the `unscale_` would
    then run again in the next iteration and raise."""
    source = """\
    import torch

    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if not torch.isfinite(norm):
            continue
        optimizer.step()
    """
    assert _tl302_note(source) == (
        " (no automatic fix: a `continue`, `break` or `return` before `optimizer.step()` could skip the "
        "step after `unscale_`, which may run only once per step)",
        False,
    )


def test_tl302_clips_under_one_flag_share_an_unscale_inside_the_flag():
    """Both clips under `if clip:` in the stepping branch: one `unscale_`, inside `if clip:`."""
    source = """\
    import torch

    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        loss.backward()
        if (i + 1) % accumulation == 0:
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
            optimizer.step()
    """
    result = fixed(source, TL302)
    assert result.count("scaler.unscale_(optimizer)") == 1
    assert "        if clip:\n            scaler.unscale_(optimizer)\n" in result


RUNNABLE = """\
import torch

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Linear(4, 2).to(device)
optimizer = torch.optim.SGD([{"params": [model.weight]}, {"params": [model.bias]}], lr=0.1)
data = [(torch.randn(8, 4), torch.randn(8, 2)) for _ in range(3)]
for x, y in data:
    optimizer.zero_grad()
    with torch.autocast(device, dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    for group in optimizer.param_groups:
        torch.nn.utils.clip_grad_value_(group["params"], 0.5)
    optimizer.step()
print("trained")
"""


def test_tl302_fixed_program_trains_with_an_enabled_cpu_scaler(tmp_path):
    """End to end: the rewritten step (a norm clip, then a value clip per param group) runs three steps
    with an enabled CPU GradScaler; two `unscale_` calls per step would raise at the first one."""
    result = fixed(RUNNABLE, TL302)
    assert result.count("scaler.unscale_(optimizer)") == 1
    assert 'torch.amp.GradScaler("cuda")' in result
    # this machine has no GPU: an enabled CPU scaler runs the same calls (`unscale_` included)
    result = result.replace(
        'torch.amp.GradScaler("cuda")', 'torch.amp.GradScaler("cpu")\nassert scaler.is_enabled()'
    )
    script = tmp_path / "train.py"
    script.write_text(result)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout) == (0, "trained\n"), run.stderr


# -- TL301 on a framework object whose CPU switch is off unless asked (brief item 2) ---------------------------

ACCELERATE = """\
import torch
from accelerate import Accelerator


def train(num_batches=100, cpu=False):
    accelerator = Accelerator(cpu=cpu)
    device = accelerator.device
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    model, optimizer = accelerator.prepare(model, optimizer)
    for i in range(num_batches):
        x = torch.randn(4, 8, device=device)
        loss = model(x).sum()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
"""


def test_accelerator_whose_cpu_parameter_defaults_off_is_flagged_with_its_switch():
    """lucidrains/x-transformers train_enwik8.py:58 (and four siblings): `Accelerator(cpu=cpu)` with
    `def train(..., cpu=False)` run by fire trains on the GPU by default, in float32."""
    [finding] = lint(ACCELERATE, select=TL301)
    assert (finding.location.line, finding.location.column) == (6, 19)
    assert said(finding).startswith("`Accelerator(...)` trains in full precision: without `mixed_precision=`")
    assert fixed(ACCELERATE, TL301) == ACCELERATE.replace(
        "Accelerator(cpu=cpu)", 'Accelerator(cpu=cpu, mixed_precision="bf16")'
    )


def test_accelerator_with_an_annotated_cpu_parameter_defaulting_off_is_flagged():
    """x-transformers train_entropy_tokenizer.py:66: `cpu: bool = False`, the same switch annotated."""
    source = ACCELERATE.replace("def train(num_batches=100, cpu=False):", "def train(cpu: bool = False):")
    assert codes_and_lines(source, select=TL301) == [("TL301", 6)]


def test_accelerator_with_a_store_true_cpu_option_is_flagged():
    """`--cpu` with `action="store_true"`: off unless given on the command line."""
    source = """\
    import argparse

    import torch
    from accelerate import Accelerator

    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    accelerator = Accelerator(cpu=args.cpu)
    model, optimizer = accelerator.prepare(model, torch.optim.Adam(model.parameters()))
    for x in loader:
        loss = model(x).sum()
        accelerator.backward(loss)
        optimizer.step()
    """
    assert codes_and_lines(source, select=TL301) == [("TL301", 9)]


def test_accelerator_whose_cpu_switch_is_on_or_unknown_stays_silent():
    """`cpu=True` (written, or a parameter defaulting on, or an option defaulting on) trains on the CPU, and
    a switch read from elsewhere may: TL301 stays silent."""
    for switch in ("def train(num_batches=100, cpu=True):", "def train(cpu, num_batches=100):"):
        source = ACCELERATE.replace("def train(num_batches=100, cpu=False):", switch)
        assert codes_and_lines(source, select=TL301) == [], switch
    assert (
        codes_and_lines(ACCELERATE.replace("Accelerator(cpu=cpu)", "Accelerator(cpu=True)"), select=TL301)
        == []
    )
    assert (
        codes_and_lines(ACCELERATE.replace("Accelerator(cpu=cpu)", "Accelerator(cpu=cfg.cpu)"), select=TL301)
        == []
    )


def test_training_arguments_whose_cpu_switch_defaults_off_are_flagged():
    """The sibling for Hugging Face: `TrainingArguments(use_cpu=args.use_cpu)` with a store_true option
    trains on the GPU by default; `use_cpu=True` does not."""
    source = """\
    import argparse

    from transformers import Trainer, TrainingArguments

    parser = argparse.ArgumentParser()
    parser.add_argument("--use_cpu", action="store_true")
    args = parser.parse_args()
    training_args = TrainingArguments(output_dir="out", use_cpu=args.use_cpu)
    Trainer(model=model, args=training_args, train_dataset=dataset).train()
    """
    assert codes_and_lines(source, select=TL301) == [("TL301", 8)]
    assert codes_and_lines(source.replace("use_cpu=args.use_cpu", "use_cpu=True"), select=TL301) == []


# -- TL301: an evaluation metric named `precision` is no precision switch (brief item 3) -----------------------

YOLO = """\
import numpy as np
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Darknet().to(device)
optimizer = torch.optim.Adam(model.parameters())


def compute_ap(recall, precision):
    mpre = np.concatenate(([0.0], precision, [0.0]))
    return mpre.sum()


for epoch in range(10):
    for imgs, targets in loader:
        outputs = model(imgs.to(device))
        loss = compute_loss(outputs, targets.to(device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    precision, recall, AP, f1 = evaluate(model)
    precision_curve = tpc / (tpc + fpc)
    print("validation/precision", precision.mean(), compute_ap(recall, precision_curve))
"""


def test_metric_named_precision_does_not_silence_tl301():
    """eriklindernoren/PyTorch-YOLOv3 pytorchyolo/train.py:163: `precision.mean()`, `precision_curve` and
    `compute_ap(recall, precision)` are detection metrics, not a decision about floating-point precision."""
    assert codes_and_lines(YOLO, select=TL301) == [("TL301", 16)]


def test_half_as_part_of_another_word_does_not_silence_tl301():
    """yenchenlin/nerf-pytorch run_nerf.py:760 (the sibling): `args.half_res` halves the image resolution."""
    source = YOLO.replace(
        "    precision, recall, AP, f1 = evaluate(model)\n", "    H = H // 2 if args.half_res else H\n"
    )
    source = source.replace("def compute_ap(recall, precision):", "def compute_ap(recall, prec):")
    source = source.replace("([0.0], precision, [0.0])", "([0.0], prec, [0.0])")
    source = source.replace("precision.mean()", "recall.mean()")
    assert "precision" not in source.replace("precision_curve", "").replace("validation/precision", "")
    assert codes_and_lines(source, select=TL301) == [("TL301", 16)]


def test_real_precision_switches_still_silence_tl301():
    """What does decide precision keeps TL301 silent: an option `args.precision`, a config's `cfg.half`, a
    parameter `precision="bf16"` or `use_half=False`, a flag `use_amp`, `mixed_precision`, `fp16`."""
    switches = (
        "print(args.precision)",
        "print(cfg.half)",
        "print(self_cfg.train.precision_mode)",
        "precision = 'bf16'\nprint(precision)",
        "use_amp = False\nprint(use_amp)",
        "print(mixed_precision, fp16)",
    )
    for switch in switches:
        source = YOLO + switch + "\n"
        assert codes_and_lines(source, select=TL301) == [], switch
    for signature in ('def run(precision="bf16"):\n    pass\n', "def run(use_half=False):\n    pass\n"):
        assert codes_and_lines(YOLO + signature, select=TL301) == [], signature


# -- TL301: the forward is the call whose result reaches the backward pass (brief items 4 and 5) ---------------

METHODS = """\
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
model = get_model(config).to(device)
optimizer = torch.optim.Adam(model.parameters())
for batch in loader:
    encoder_input = batch["encoder_input"].to(device)
    decoder_input = batch["decoder_input"].to(device)
    encoder_output = model.encode(encoder_input)
    decoder_output = model.decode(encoder_output, decoder_input)
    proj_output = model.project(decoder_output)
    label = batch["label"].to(device)
    loss = loss_fn(proj_output.view(-1, vocab_size), label.view(-1))
    writer.add_scalar("train loss", loss.item())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
"""


def test_forward_through_methods_of_the_trained_model_is_flagged_and_wrapped():
    """hkproj/pytorch-transformer train.py:234, train_wb.py:224: the forward pass is `model.encode(...)`,
    `model.decode(...)`, `model.project(...)`, methods of the trained model whose results reach the loss; the
    finding sits on the first, and the fix wraps from it to the loss."""
    [finding] = lint(METHODS, select=TL301)
    assert (finding.location.line, finding.location.column) == (9, 22)
    assert said(finding).startswith("`model.encode(...)` runs the forward pass")
    assert fixed(METHODS, TL301) == METHODS.replace(
        "    encoder_output = model.encode(encoder_input)\n",
        "    with torch.autocast(device_type=device, dtype=torch.bfloat16):\n"  # the script's string device
        "        encoder_output = model.encode(encoder_input)\n",
    ).replace(
        "    decoder_output = model.decode(encoder_output, decoder_input)\n"
        "    proj_output = model.project(decoder_output)\n"
        '    label = batch["label"].to(device)\n'
        "    loss = loss_fn(proj_output.view(-1, vocab_size), label.view(-1))\n",
        "        decoder_output = model.decode(encoder_output, decoder_input)\n"
        "        proj_output = model.project(decoder_output)\n"
        '        label = batch["label"].to(device)\n'
        "        loss = loss_fn(proj_output.view(-1, vocab_size), label.view(-1))\n",
    )


def test_module_methods_of_the_trained_model_are_not_its_forward():
    """`model.train()`, `model.parameters()` and a method whose result never reaches the loss (a sample for
    the log) are no forward pass: with nothing else, TL301 stays silent."""
    source = """\
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = get_model(config).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        model.train()
        sample = model.generate(x.to(device))
        writer.add_text("sample", decode(sample))
        loss = sum(p.pow(2).sum() for p in model.parameters())
        loss.backward()
        optimizer.step()
    """
    assert codes_and_lines(source, select=TL301) == []


DOMAINBED = """\
import torch
import torch.nn.functional as F


class Algorithm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = Classifier().cuda()
        self.adv_classifier = Classifier().cuda()
        self.adv_opt = torch.optim.SGD(self.adv_classifier.parameters(), lr=0.1)

    def loss_gap(self, minibatches):
        losses = [F.cross_entropy(self.adv_classifier(x), y) for x, y in minibatches]
        return max(losses) - min(losses)

    def update(self, minibatches):
        for _ in range(self.d_steps):
            self.adv_opt.zero_grad()
            gap = -self.t_lambda * self.loss_gap(minibatches)
            gap.backward()
            self.adv_opt.step()
            self.adv_classifier = proj(self.delta, self.adv_classifier, self.classifier)
"""


def test_the_forward_is_the_helper_whose_result_reaches_backward_not_one_handed_the_model():
    """facebookresearch/DomainBed algorithms.py:2238: `proj(delta, self.adv_classifier, self.classifier)`
    is handed the model after the step, and its result never reaches the loss; the forward runs in
    `self.loss_gap(...)`, whose result is the differentiated `gap`: the finding sits there, and the fix
    wraps that statement."""
    [finding] = lint(DOMAINBED, select=TL301)
    assert (finding.location.line, finding.location.column) == (19, 36)
    assert said(finding).startswith("`self.loss_gap(...)` runs the forward pass")
    assert fixed(DOMAINBED, TL301) == DOMAINBED.replace(
        "            gap = -self.t_lambda * self.loss_gap(minibatches)\n",
        '            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):\n'
        "                gap = -self.t_lambda * self.loss_gap(minibatches)\n",
    )


def test_a_call_handed_the_model_whose_result_never_reaches_the_loss_is_not_the_forward():
    """With no other forward in the loop, a helper handed the model whose result does not reach the loss is
    not taken for one: TL301 stays silent rather than point at it."""
    source = DOMAINBED.replace("self.loss_gap(minibatches)", "self.gap_of(minibatches)").replace(
        "    def loss_gap(self, minibatches):\n", "    def loss_gap(self, minibatches):  # unused\n"
    )
    assert codes_and_lines(source, select=TL301) == []


def test_a_call_handed_the_model_whose_result_is_the_loss_stays_the_forward():
    """DiT's `loss_dict = diffusion.training_losses(model, x, t)`: its result reaches the loss, so it stays
    the forward call."""
    source = """\
    import torch

    model = DiT().cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        t = torch.randint(0, 1000, (x.shape[0],), device="cuda")
        loss_dict = diffusion.training_losses(model, x.cuda(), t)
        loss = loss_dict["loss"].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert codes_and_lines(source, select=TL301) == [("TL301", 7)]


def test_a_float32_matmul_precision_choice_still_silences_tl301():
    """BlinkDL/RWKV-LM RWKV-v8: `torch.set_float32_matmul_precision('high')` (TF32 matmuls) is a decision
    about precision, as `args.matmul_precision` is: narrowing the word `precision` keeps them."""
    for decision in ('torch.set_float32_matmul_precision("high")', "print(args.float32_matmul_precision)"):
        assert codes_and_lines(YOLO + decision + "\n", select=TL301) == [], decision


SKLEARN_SCALER = """\
import torch
from sklearn.preprocessing import MinMaxScaler

scaler = MinMaxScaler()
series = torch.tensor(scaler.fit_transform(raw), dtype=torch.float32)
model = LSTMForecaster().cuda()
optimizer = torch.optim.Adam(model.parameters())
for x, y in windows(series):
    with torch.autocast("cuda"):
        loss = criterion(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
"""


def test_a_scikit_learn_scaler_is_no_loss_scaling():
    """The sibling of item 3 for `scaler`: a scikit-learn `MinMaxScaler` normalises the data; it neither
    scales the loss (TL302 still fires on the float16 autocast) nor decides precision (TL301 still fires
    without the autocast)."""
    assert codes_and_lines(SKLEARN_SCALER, select=TL302) == [("TL302", 9)]
    no_autocast = SKLEARN_SCALER.replace('    with torch.autocast("cuda"):\n        loss', "    loss")
    assert codes_and_lines(no_autocast, select=TL301) == [("TL301", 9)]
    # held by an object: `self.scaler = StandardScaler()`, `self.scaler.transform(...)`
    in_a_class = """\
    import torch
    from sklearn.preprocessing import StandardScaler


    class Windows:
        def __init__(self, raw):
            self.scaler = StandardScaler()
            self.series = torch.tensor(self.scaler.fit_transform(raw))


    model = LSTMForecaster().cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in Windows(raw):
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    """
    assert codes_and_lines(in_a_class, select=TL301) == [("TL301", 14)]
