"""TL306's fix inserts one `scaler.unscale_(optimizer)` per optimizer step, never one per clip.

`GradScaler.unscale_` may run only once per optimizer between two `update()`s: a second call raises
"unscale_() has already been called on this optimizer since the last update()". So the fix goes before the
first clip of a step, never inside a loop that runs more than once per step, never where the step may not
follow, and not at all where the step already unscales (report reliability-turn3, case N2).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from support import fix, lint, said

TL306 = ("TL306",)
COMMON = "or the threshold applies to gradients multiplied by the loss scale"
COVERED = (
    " (no fix of its own: the fix of the first clip of this step unscales for this one too, since "
    "`unscale_` may run only once per step)"
)


def found(source: str) -> list[tuple[int, str, bool]]:
    """(line, what the message adds after the common sentence, whether a fix comes with it) per finding."""
    return [
        (d.location.line, said(d).split(COMMON, 1)[1], d.fix is not None)
        for d in lint(textwrap.dedent(source), select=TL306)
    ]


def fixed(source: str) -> str:
    return fix(source, select=TL306)


TWO_CLIPS = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x.cuda()), y.cuda())
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
    scaler.step(optimizer)
    scaler.update()
"""


def test_two_clips_in_one_step_get_one_unscale_before_the_first():
    """N2: a norm clip and a value clip in one step: one `unscale_`, carried by the first finding; the
    second says that fix covers it (two `unscale_` lines raise at the first step)."""
    assert found(TWO_CLIPS) == [(9, "", True), (10, COVERED, False)]
    assert fixed(TWO_CLIPS) == TWO_CLIPS.replace(
        "    torch.nn.utils.clip_grad_norm_",
        "    scaler.unscale_(optimizer)\n    torch.nn.utils.clip_grad_norm_",
    )


def test_clips_in_two_branches_share_one_unscale_before_the_branching():
    """N2 sibling: a norm clip in one branch and a value clip in the other: the one `unscale_` goes before
    the `if`, where it runs once whichever branch clips."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        if by_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        else:
            torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
        scaler.step(optimizer)
        scaler.update()
    """
    assert found(source) == [(9, "", True), (11, COVERED, False)]
    assert fixed(source) == textwrap.dedent(source).replace(
        "    if by_norm:", "    scaler.unscale_(optimizer)\n    if by_norm:"
    )


PARAM_GROUPS = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda"):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    for group in optimizer.param_groups:
        torch.nn.utils.clip_grad_norm_(group["params"], group["max_norm"])
    scaler.step(optimizer)
    scaler.update()
"""


def test_clip_per_param_group_gets_unscale_before_the_group_loop():
    """N2: a clip inside `for group in optimizer.param_groups:` runs once per group; the `unscale_` goes
    before that loop (which runs no backward pass), not inside it."""
    assert found(PARAM_GROUPS) == [(9, "", True)]
    assert fixed(PARAM_GROUPS) == PARAM_GROUPS.replace(
        "    for group in", "    scaler.unscale_(optimizer)\n    for group in"
    )


def test_clip_inside_the_micro_batch_loop_gets_no_fix():
    """N2: a clip inside a micro-batch loop that also runs the backward pass runs several times per step;
    no place before it unscales once and after every backward, so no fix, and the message says why."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        for x, y in split(batch):
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    """
    assert found(source) == [
        (
            9,
            " (no automatic fix: the clip runs in a loop that also runs the backward pass, more than once per "
            "step, and `unscale_` may run only once per step: clip once, after that loop)",
            False,
        )
    ]
    assert fixed(source) == textwrap.dedent(source)


def test_an_unscale_later_in_the_step_means_no_second_one():
    """N2 sibling: `clip; scaler.unscale_(opt); clip`: the first clip is flagged, but adding an `unscale_`
    before it would make two in one step; the message says to move the existing one."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    """
    assert found(source) == [
        (
            8,
            " (no automatic fix: `scaler.unscale_` already runs later in this step, and may run only once "
            "per step: move it before the first clip)",
            False,
        )
    ]


def test_clip_that_runs_where_the_step_may_not_gets_no_fix():
    """N2 sibling: gradient accumulation with the clip outside the `if` that steps: the clip runs every
    micro-batch but `update()` only every few, so an `unscale_` before it would run twice."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if (i + 1) % accumulation == 0:
            scaler.step(optimizer)
            scaler.update()
    """
    assert found(source) == [
        (
            8,
            " (no automatic fix: the clip runs where `scaler.step(...)` may not, and `unscale_` may run only "
            "once per step)",
            False,
        )
    ]


def test_a_continue_between_clip_and_step_means_no_fix():
    """N2 sibling: `if not finite: continue` after the clip skips the step (and `update()`); an `unscale_`
    before the clip would then run again in the next iteration and raise."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if not torch.isfinite(norm):
            continue
        scaler.step(optimizer)
        scaler.update()
    """
    assert found(source) == [
        (
            8,
            " (no automatic fix: a `continue`, `break` or `return` before `scaler.step(...)` could skip the "
            "step after `unscale_`, which may run only once per step)",
            False,
        )
    ]


def test_clip_whose_norm_is_kept_gets_the_fix_too():
    """`norm = clip_grad_norm_(...)` (the common form, the norm is logged) gets the `unscale_` on the line
    before it, under its comment."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        # clip
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    """
    assert found(source) == [(9, "", True)]
    assert fixed(source) == textwrap.dedent(source).replace(
        "    norm =", "    scaler.unscale_(optimizer)\n    norm ="
    )


def test_two_optimizers_on_one_scaler_each_unscale_their_own_clip_once():
    """N2 sibling (dcgan style): a clip belongs to the step that follows it, not to every later step: the
    discriminator's clip is flagged once, for `opt_d`, and each clip gets its own optimizer's `unscale_`."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        with torch.autocast("cuda"):
            loss_d = criterion(net_d(x), real)
        scaler.scale(loss_d).backward()
        torch.nn.utils.clip_grad_norm_(net_d.parameters(), 1.0)
        scaler.step(opt_d)
        with torch.autocast("cuda"):
            loss_g = criterion(net_d(net_g(noise)), real)
        scaler.scale(loss_g).backward()
        torch.nn.utils.clip_grad_norm_(net_g.parameters(), 1.0)
        scaler.step(opt_g)
        scaler.update()
    """
    diagnostics = lint(textwrap.dedent(source), select=TL306)
    assert [(d.location.line, said(d).split("`")[3]) for d in diagnostics] == [
        (8, "scaler.unscale_(opt_d)"),
        (13, "scaler.unscale_(opt_g)"),
    ]
    assert fixed(source) == (
        textwrap.dedent(source)
        .replace(
            "    torch.nn.utils.clip_grad_norm_(net_d",
            "    scaler.unscale_(opt_d)\n    torch.nn.utils.clip_grad_norm_(net_d",
        )
        .replace(
            "    torch.nn.utils.clip_grad_norm_(net_g",
            "    scaler.unscale_(opt_g)\n    torch.nn.utils.clip_grad_norm_(net_g",
        )
    )


def test_two_clips_under_one_flag_share_an_unscale_inside_the_flag():
    """N2 sibling: both clips under `if clip:` inside the accumulation branch: one `unscale_`, inside the
    `if clip:` block, so that the flag keeps guarding it."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        if (i + 1) % accumulation == 0:
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
            scaler.step(optimizer)
            scaler.update()
    """
    assert found(source) == [(10, "", True), (11, COVERED, False)]
    assert fixed(source) == textwrap.dedent(source).replace(
        "        if clip:\n", "        if clip:\n            scaler.unscale_(optimizer)\n"
    )


def test_a_continue_inside_the_group_loop_does_not_stop_the_fix_before_it():
    """N2 sibling: a `continue` of the per-group loop skips a group, not the step: the `unscale_` still goes
    before that loop."""
    source = PARAM_GROUPS.replace(
        "    for group in optimizer.param_groups:\n",
        '    for group in optimizer.param_groups:\n        if not group["max_norm"]:\n            continue\n',
    )
    assert fixed(source) == source.replace(
        "    for group in", "    scaler.unscale_(optimizer)\n    for group in"
    )


def test_a_step_on_a_one_line_if_gets_no_fix():
    """N2 sibling: `if ready: scaler.step(opt)` on one line may not step, while an `unscale_` before the
    clip would run every iteration."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if ready: scaler.step(optimizer)
        scaler.update()
    """
    [(line, note, has_fix)] = found(source)
    assert (line, has_fix) == (8, False)
    assert note.startswith(" (no automatic fix: the clip runs where `scaler.step(...)` may not")


def test_a_clip_in_a_try_whose_handler_continues_gets_no_fix():
    """N2 sibling: `except RuntimeError: continue` around the clip skips the step after the `unscale_`."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        try:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        except RuntimeError:
            continue
        scaler.step(optimizer)
        scaler.update()
    """
    [(line, note, has_fix)] = found(source)
    assert (line, has_fix) == (9, False)
    assert note.startswith(" (no automatic fix: a `continue`, `break` or `return` before `scaler.step(...)`")


def test_a_clip_on_a_one_line_if_gets_the_unscale_before_that_if():
    """`if clip: clip_grad_norm_(...)` on one line has no line inside for the `unscale_`: it goes before the
    `if`, once per step whether or not the step clips (`scaler.step` then does not unscale again)."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        if clip: torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(optimizer)
        scaler.update()
    """
    assert fixed(source) == textwrap.dedent(source).replace(
        "    if clip:", "    scaler.unscale_(optimizer)\n    if clip:"
    )


def test_branches_that_each_run_backward_and_clip_get_no_shared_fix():
    """N2 sibling: each branch runs its own backward pass and clip; the one place before both clips is
    before the `if`, before the backward passes, where `unscale_` would act on no gradients yet."""
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            out = model(x)
        if task == "a":
            scaler.scale(loss_a(out, y)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        else:
            scaler.scale(loss_b(out, y)).backward()
            torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
        scaler.step(optimizer)
        scaler.update()
    """
    why = " (no automatic fix: no one place runs after the backward pass and before every clip of the step)"
    assert found(source) == [(9, why, False), (12, why, False)]


RUNNABLE = """\
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD([{"params": [model.weight]}, {"params": [model.bias]}], lr=0.1)
data = [(torch.randn(8, 4), torch.randn(8, 2)) for _ in range(3)]
scaler = torch.amp.GradScaler("cpu")
assert scaler.is_enabled()
for x, y in data:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
    scaler.step(optimizer)
    scaler.update()
for x, y in data:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    for group in optimizer.param_groups:
        torch.nn.utils.clip_grad_norm_(group["params"], 1.0)
    scaler.step(optimizer)
    scaler.update()
print("trained")
"""


def test_fixed_program_trains_with_an_enabled_cpu_scaler(tmp_path):
    """N2 end to end: the fixed two-clip step and per-group clip run three steps each with an enabled CPU
    GradScaler (a second `unscale_` per step would raise RuntimeError at the first step)."""
    result = fixed(RUNNABLE)
    assert result.count("scaler.unscale_(optimizer)") == 2
    script = tmp_path / "train.py"
    script.write_text(result)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout) == (0, "trained\n"), run.stderr
