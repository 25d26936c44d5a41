"""`torchlint verify --keep`: which fixes are kept and why, how the kept ones are combined and written, and
two real runs (one that keeps a fix and rewrites the file with it, one where nothing pays)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import FIXTURES

from torchlint.fix.write import WriteRefused
from torchlint.linter import Linter
from torchlint.verify import compare, keep, patches
from torchlint.verify.verifier import ArmResult
from torchlint.workspace.settings import Settings
from torchlint.workspace.source import SourceFile

TIGHT = "tight: every step"
LOOSE = "loose: mean loss"


def _fix(code: str, path: str = "/p/train.py", line: int = 40) -> patches.AppliedFix:
    return patches.AppliedFix(code, "name", "title", "unsafe", path, line, 5)


def _arm(
    fix: patches.AppliedFix,
    verdict: str,
    speedup: float | None = 1.0,
    losses: str = "agree",
    detail: str = "",
    memory: float | None = None,
    failure: str | None = None,
) -> ArmResult:
    arm = ArmResult(patches.Variant(fix.label(Path("/p")), "each", [fix]), verdict=verdict, failure=failure)
    arm.speed = compare.Speed(speedup, None, None, verdict)
    arm.losses = compare.Losses(losses, LOOSE, 10 if losses != "not compared" else 0, detail=detail)
    arm.memory = compare.Memory(memory, "less" if memory else "unknown")
    return arm


def _chosen(
    *arms: ArmResult, unmeasured: list[patches.AppliedFix] | None = None, device: str = "cuda"
) -> list[tuple[str, bool, str]]:
    choices = keep.choose(list(arms), unmeasured or [], Path("/p"), device)
    return [(choice.fix.code, choice.kept, choice.reason) for choice in choices]


# -- which fixes are kept --------------------------------------------------------------------------------------


def test_a_faster_fix_with_agreeing_losses_is_kept_with_its_figure():
    assert _chosen(_arm(_fix("TL201"), "faster", 1.923)) == [("TL201", True, "1.92x faster, losses agree")]


def test_no_change_slower_changed_losses_and_broken_fixes_are_dropped_with_their_reason():
    chosen = _chosen(
        _arm(_fix("TL202"), "no change", 1.012),
        _arm(_fix("TL301"), "slower", 0.712),
        _arm(_fix("TL101"), "changed losses", 1.3, "differ", "mean loss 0.693 -> 0.931"),
        _arm(
            _fix("TL203"),
            "broke the script",
            None,
            failure="run 'TL203': the script crashed after 2 steps:\nT",
        ),
    )
    assert chosen == [
        ("TL202", False, "no change (1.01x)"),
        ("TL301", False, "slower (0.71x)"),
        ("TL101", False, "changed the losses (mean loss 0.693 -> 0.931)"),
        ("TL203", False, "broke the script (run 'TL203': the script crashed after 2 steps)"),
    ]


def test_a_faster_fix_whose_losses_were_not_compared_is_dropped():
    arm = _arm(_fix("TL201"), "faster", 1.5, "not compared", "no loss passed to backward was recorded")
    assert _chosen(arm) == [
        (
            "TL201",
            False,
            "faster (1.50x), but its losses were not compared: no loss passed to backward was recorded",
        )
    ]


def test_checkpointing_that_saves_step_memory_is_kept_for_its_memory_whatever_its_time():
    arm = _arm(_fix("TL401"), "less memory", 0.68, memory=0.28)
    assert _chosen(arm) == [("TL401", True, "0.28x the step memory at 0.68x the speed, losses agree")]


def test_an_inconclusive_fix_is_dropped_and_says_why():
    busy = _arm(_fix("TL201"), "inconclusive", 0.8)
    unmeasured_memory = _arm(_fix("TL401"), "inconclusive", 0.7)
    assert _chosen(busy, unmeasured_memory) == [
        ("TL201", False, "inconclusive (0.80x in one run on a busy machine: rerun with --repeat)"),
        ("TL401", False, "inconclusive: its step memory was not measured"),
    ]


def test_on_a_cpu_a_fix_that_acts_only_with_a_gpu_is_dropped_whatever_it_measured():
    pinned = _arm(_fix("TL202"), "faster", 1.41)  # a busy 2-core machine's noise
    assert _chosen(pinned, device="cpu") == [
        ("TL202", False, "not measurable on a CPU: pinned memory speeds up copies to a GPU only")
    ]
    assert _chosen(pinned, device="cuda") == [("TL202", True, "1.41x faster, losses agree")]


def test_a_fix_outside_the_project_is_never_kept():
    outside = _arm(_fix("TL201", path="/elsewhere/lib.py"), "faster", 2.0)
    assert _chosen(outside) == [("TL201", False, "outside the project (/p): never written")]


def test_a_fix_that_applies_only_on_top_of_another_is_dropped_as_not_measured_alone(tmp_path):
    script = _loader_bound(tmp_path)
    planned = patches.plan(script, ("TL2",), (), True, True, every_single=True)
    variants, unmeasured = keep.alone_only(planned.variants)
    assert [v.kind for v in variants] == ["original", "each", "each"]  # `all` is not run
    assert [fix.code for fix in unmeasured] == ["TL203"]  # persistent_workers, once TL201 added workers
    assert _chosen(unmeasured=unmeasured)[0][1:] == (False, keep.NOT_ALONE)


def test_with_a_single_fix_it_is_still_measured_alone():
    planned = patches.plan(FIXTURES / "verify_tiny" / "train.py", ("TL304",), each=True, every_single=True)
    assert [v.kind for v in planned.variants] == ["original", "each", "all"]
    assert keep.alone_only(planned.variants)[1] == []


def _together(speedup: float, verdict: str = "faster") -> ArmResult:
    arm = _arm(_fix("TL201"), verdict, speedup)
    arm.variant = patches.Variant("kept", "kept")
    return arm


def _outcome_of(*arms: ArmResult) -> keep.Outcome:
    return keep.Outcome(choices=keep.choose(list(arms), [], Path("/p"), "cpu"))


def test_fixes_that_paid_alone_but_not_together_fall_back_to_the_best_one_alone():
    workers, compiled = (
        _arm(_fix("TL201", line=78), "faster", 1.58),
        _arm(_fix("TL101", line=79), "faster", 1.3),
    )
    outcome = _outcome_of(workers, compiled)
    assert keep.fall_back(outcome, _together(1.28), [workers, compiled]) == workers.variant.fixes[0]
    assert [(c.fix.code, c.kept, c.reason) for c in outcome.choices] == [
        ("TL201", True, "1.58x faster, losses agree"),
        (
            "TL101",
            False,
            "paid alone (1.30x faster), but the 2 that paid measured 1.28x together (TL201: 1.58x alone)",
        ),
    ]


def test_fixes_that_pay_together_clearly_more_than_the_best_alone_are_kept_together():
    workers, compiled = _arm(_fix("TL201"), "faster", 1.58), _arm(_fix("TL101"), "faster", 1.3)
    outcome = _outcome_of(workers, compiled)
    assert keep.fall_back(outcome, _together(1.72), [workers, compiled]) is None
    assert [c.kept for c in outcome.choices] == [True, True]


def test_a_fix_that_adds_nothing_measurable_to_the_best_one_is_dropped():
    workers, compiled = _arm(_fix("TL201"), "faster", 2.05), _arm(_fix("TL101"), "faster", 1.05)
    outcome = _outcome_of(workers, compiled)
    assert keep.fall_back(outcome, _together(2.0), [workers, compiled]) == workers.variant.fixes[0]
    assert outcome.choices[1].reason == (
        "paid alone (1.05x faster), but the 2 that paid measured 2.00x together (TL201: 2.05x alone)"
    )


def test_a_single_kept_fix_that_does_not_pay_again_has_nothing_to_fall_back_to():
    workers = _arm(_fix("TL201"), "faster", 1.58)
    assert keep.fall_back(_outcome_of(workers), _together(1.0, "no change"), [workers]) is None


def test_a_set_with_checkpointing_that_saved_memory_together_does_not_fall_back_on_speed():
    workers = _arm(_fix("TL201"), "faster", 1.58)
    checkpointed = _arm(_fix("TL401", line=12), "less memory", 0.7, memory=0.3)
    outcome = _outcome_of(workers, checkpointed)
    assert keep.fall_back(outcome, _together(1.1, "less memory"), [workers, checkpointed]) is None
    assert (
        keep.fall_back(outcome, _together(1.1, "slower"), [workers, checkpointed]) == workers.variant.fixes[0]
    )


# -- combining and writing the kept fixes ------------------------------------------------------------------------


def _loader_bound(folder: Path) -> Path:
    (folder / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    shutil.copy(FIXTURES / "loader_bound" / "train.py", folder / "train.py")
    return (folder / "train.py").resolve()


def _measured(script: Path) -> list[ArmResult]:
    planned = patches.plan(script, ("TL2",), (), True, True, every_single=True)
    return [ArmResult(v) for v in keep.alone_only(planned.variants)[0]]


def test_kept_fixes_whose_edits_overlap_are_combined_in_passes_as_the_fixer_does(tmp_path):
    script = _loader_bound(tmp_path)
    arms = _measured(script)
    kept = [arm.variant.fixes[0] for arm in arms[1:]]
    assert [fix.code for fix in kept] == ["TL201", "TL202"]  # both insert at the end of one call
    combined = keep.combine(kept, arms, ("TL2",), (), True, None)
    text = script.read_text(encoding="utf-8")
    expected = Linter().fix_text("train.py", text, Settings(root=tmp_path, select=("TL201", "TL202")), True)
    assert combined.variant.patched == {str(script): expected.text} and combined.left_out == []
    assert combined.variant.fixes == kept and combined.variant.originals == {str(script): text}


def test_a_file_changed_since_its_fix_was_measured_is_not_combined(tmp_path):
    script = _loader_bound(tmp_path)
    arms = _measured(script)
    script.write_text(
        script.read_text(encoding="utf-8").replace("batch_size=args.batch_size", "batch_size=8")
    )
    with pytest.raises(keep.KeepError, match="train.py changed since TL201's fix was measured"):
        keep.combine([arms[1].variant.fixes[0]], arms, ("TL2",), (), True, None)


def test_the_kept_set_is_written_whole_or_not_at_all(tmp_path):
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text("a = 1\n", encoding="utf-8")
    second.write_text("b = 1\n", encoding="utf-8")
    sources = {str(path): SourceFile.read(path) for path in (first, second)}
    variant = patches.Variant("kept", "kept", patched={str(first): "a = 2\n", str(second): "b = 2\n"})
    second.chmod(stat.S_IRUSR)
    try:
        with pytest.raises(WriteRefused, match="b.py: not written: the file is read-only"):
            keep.write(variant, sources)
    finally:
        second.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert (first.read_text(), second.read_text()) == ("a = 1\n", "b = 1\n")  # a.py was put back
    assert keep.write(variant, sources) == [str(first), str(second)]
    assert (first.read_text(), second.read_text()) == ("a = 2\n", "b = 2\n")


def test_a_file_edited_while_the_kept_set_ran_is_not_written_and_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "train.py"
    script.write_text("a = 1\n", encoding="utf-8")
    outcome = keep.Outcome(variant=patches.Variant("kept", "kept", patched={str(script): "a = 2\n"}))
    outcome.sources = {str(script): SourceFile.read(script)}
    script.write_text("a = 3\n", encoding="utf-8")  # the user saved meanwhile
    error = keep.finish(outcome, _together(1.9))
    assert (
        error == "--keep: train.py: not written: the file changed on disk since it was read; no file written"
    )
    assert (
        outcome.message
        == "the kept fix again: 1.90x faster, losses agree: no file written (see the error above)"
    )
    assert script.read_text(encoding="utf-8") == "a = 3\n" and outcome.written == []


@pytest.mark.parametrize(
    ("line", "moved"),
    [(1, 2), (2, 3), (3, 4)],  # an import added above, the loader line rewritten in place
)
def test_a_line_is_followed_through_a_pass_that_added_lines_above_it(line, moved):
    before = "import time\nloader = DataLoader(d)\nrun()\n"
    after = "import os\nimport time\nloader = DataLoader(d, num_workers=2)\nrun()\n"
    assert keep.moved_line(before, after, line) == moved


# -- real runs -------------------------------------------------------------------------------------------------

SLOW_READS = textwrap.dedent(
    """\
    import time

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset


    class SlowReads(Dataset):
        \"\"\"Each sample waits on a slow read (a network file system): workers overlap the waits.\"\"\"

        def __len__(self):
            return 256

        def __getitem__(self, index):
            time.sleep(0.01)
            x = torch.full((4,), float(index % 7))
            return x, x.sum(0, keepdim=True)


    def main():
        torch.manual_seed(0)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        loader = DataLoader(SlowReads(), batch_size=8, shuffle=True)
        model = nn.Linear(4, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        main()
    """
)


def _verify_keep(folder: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    (folder / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    (folder / "train.py").write_text(SLOW_READS, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "torchlint", "verify", "--keep", "--json", "out.json", "--steps", "6"]
        + ["--warmup", "2", "--device", "cpu", *args, "train.py"],
        cwd=folder,
        env={**os.environ, "TORCHLINT_NO_CACHE": "1"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    return done, json.loads((folder / "out.json").read_text(encoding="utf-8"))


def test_keep_writes_exactly_the_fixes_that_paid(tmp_path):
    pytest.importorskip("torch")
    # Two repeats: with one run each, a speed-up on a machine already busy (the suite's own processes) is
    # `inconclusive`, and nothing would be kept.
    done, report = _verify_keep(tmp_path, "--unsafe-fixes", "--select", "TL201,TL202", "--repeat", "2")
    shown = done.stdout + done.stderr
    assert [fix["code"] for fix in report["kept"]] == ["TL201"], shown  # the waits overlap in workers
    assert report["dropped"] == [
        {
            "code": "TL202",
            "filename": "train.py",
            "location": {"row": 23, "column": 14},
            "reason": "not measurable on a CPU: pinned memory speeds up copies to a GPU only",
        }
    ]
    assert [v["kind"] for v in report["variants"]] == ["original", "each", "each", "kept"]
    kept = report["variants"][-1]
    assert kept["verdict"] == "faster" and kept["losses"]["verdict"] == "agree", shown
    assert report["written"] == ["train.py"] and done.returncode == report["exit_code"] == 0, shown
    figure = f"{report['variants'][1]['speed']['speedup']:.2f}x faster, losses agree"
    again = f"{kept['speed']['speedup']:.2f}x faster, losses agree"
    assert done.stdout.endswith(
        f"kept TL201 train.py:23 ({figure})\n"
        "dropped TL202 train.py:23: not measurable on a CPU: pinned memory speeds up copies to a GPU only\n"
        f"the kept fix again: {again}: wrote train.py\n"
        "\nverified: no fix made training worse or changed its losses\n"
    )
    workers = "DataLoader(SlowReads(), batch_size=8, shuffle=True, num_workers=min(8, os.cpu_count() or 1))"
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == "import os\n" + SLOW_READS.replace(
        "DataLoader(SlowReads(), batch_size=8, shuffle=True)", workers
    )


def test_when_nothing_pays_nothing_is_written(tmp_path):
    pytest.importorskip("torch")
    done, report = _verify_keep(tmp_path, "--select", "TL202")  # pin_memory: nothing to pin on a CPU
    assert report["kept"] == [] and report["written"] == [], done.stdout + done.stderr
    assert [d["code"] for d in report["dropped"]] == ["TL202"]
    assert [v["kind"] for v in report["variants"]] == ["original", "each"]  # nothing to run together
    assert done.stdout.endswith(
        "nothing paid: no fix kept, no file written\n"
        "\nverified: no fix made training worse or changed its losses\n"
    )
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == SLOW_READS
    assert done.returncode == report["exit_code"] == 0
