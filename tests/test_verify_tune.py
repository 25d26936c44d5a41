"""`torchlint verify --tune workers`: which loader is tuned, which counts are tried, how the halving and the
choice go, where the winner is written or left to the user, and two real runs (one whose workers break the
script, one whose slow reads workers overlap)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchlint.verify import compare, tune
from torchlint.verify.patches import Variant
from torchlint.verify.verifier import ArmResult

LOADER = tune.Loader("/p/train.py", 12, 0, None)


def _stats(*steps_ms: float) -> compare.RunStats:
    times = [ms / 1000 for ms in steps_ms]
    return compare.RunStats(
        times, len(times), 0.1, 0.0, 0.5, None, "peak_rss", [1.0] * len(times), 8, 0, "cpu"
    )


def _arm(
    options: dict[str, int] | None, *runs_ms: float, verdict: str = "", speedup: float = 1.0
) -> ArmResult:
    variant = tune.variant(LOADER, options) if options else Variant("original", "original")
    arm = ArmResult(variant, verdict=verdict or ("baseline" if options is None else "no change"))
    arm.stats = [_stats(ms, ms, ms) for ms in runs_ms]
    arm.speed = compare.Speed(speedup, None, None, arm.verdict) if options else None
    return arm


# -- what is tuned ---------------------------------------------------------------------------------------------


def test_the_counts_tried_are_none_powers_of_two_the_cpu_count_and_the_scripts_own():
    assert tune.worker_counts(0, 2) == [0, 1, 2]
    assert tune.worker_counts(3, 12) == [0, 1, 2, 3, 4, 8, 12]
    assert tune.worker_counts(0, 1) == [0, 1]


def test_the_loader_tuned_is_the_one_the_timed_steps_waited_on_most(tmp_path):
    raw = {
        "loaders": [
            {"filename": str(tmp_path / "train.py"), "line": 30, "num_workers": 0, "prefetch_factor": None},
            {"filename": str(tmp_path / "train.py"), "line": 31, "num_workers": 2, "prefetch_factor": 4},
        ],
        "loader_wait": {"0": 0.2, "1": 1.5},
    }
    assert tune.target(raw, tmp_path) == tune.Loader(str(tmp_path / "train.py"), 31, 2, 4)
    assert [v.name for v in tune.candidates(tune.target(raw, tmp_path), 4)] == [
        "num_workers=0",
        "num_workers=1",
        "num_workers=4",
    ]


def test_no_loader_or_one_outside_the_project_is_not_tuned(tmp_path):
    assert tune.target({"loaders": [], "loader_wait": {}}, tmp_path) == (
        "no DataLoader fed the timed steps of the original run: nothing to tune"
    )
    raw = {"loaders": [{"filename": "/usr/lib/lib.py", "line": 3, "num_workers": 0}], "loader_wait": {"0": 1}}
    assert tune.target(raw, tmp_path) == (
        "the DataLoader the steps waited on was built outside the project (/usr/lib/lib.py): not tuned"
    )


def test_a_candidate_sets_the_loader_at_its_line_at_run_time():
    assert tune.variant(LOADER, {"num_workers": 4}).loader_override == {
        "filename": "/p/train.py",
        "line": 12,
        "options": {"num_workers": 4},
    }


# -- halving and choosing ----------------------------------------------------------------------------------------


def test_halving_keeps_the_faster_half_and_drops_what_broke():
    original, one, two, four = (
        _arm(None, 80),
        _arm({"num_workers": 1}, 60),
        _arm({"num_workers": 2}, 50),
        None,
    )
    four = _arm({"num_workers": 4}, 40)
    four.failure = "run 'num_workers=4 #1': the script crashed after 0 steps:"
    assert tune.halve([original, one, two, four]) == [two, one]


def test_the_winner_is_recommended_only_when_it_is_faster_than_the_script():
    outcome = tune.Outcome(LOADER)
    original = _arm(None, 80)
    best = _arm({"num_workers": 2}, 50, verdict="faster", speedup=1.6)
    assert tune.choose(outcome, [original, best, _arm({"num_workers": 1}, 60)], original) is best
    assert outcome.best == {"num_workers": 2, "prefetch_factor": 2}
    assert outcome.message == "best: num_workers=2, 1.60x faster than the script's num_workers=0"

    within = tune.Outcome(LOADER)
    assert tune.choose(within, [original, _arm({"num_workers": 2}, 78, speedup=1.03)], original) is None
    assert within.message == (
        "the best candidate, num_workers=2 (1.03x), is within noise of the script's num_workers=0"
    )
    own = tune.Outcome(LOADER)
    assert tune.choose(own, [original, _arm({"num_workers": 1}, 90, verdict="slower")], original) is None
    assert own.message == "the script's own num_workers=0 measured best: nothing to change"


def test_a_candidate_that_changed_the_losses_is_never_chosen():
    outcome = tune.Outcome(LOADER)
    original = _arm(None, 80)
    changed = _arm({"num_workers": 2}, 40, verdict="changed losses")
    assert tune.choose(outcome, [original, changed], original) is None


def test_more_prefetching_is_tried_on_a_winner_with_workers_only():
    assert tune.more_prefetching(LOADER, _arm(None, 80)) is None
    challenger = tune.more_prefetching(LOADER, _arm({"num_workers": 2}, 50))
    assert challenger is not None and challenger.name == "num_workers=2, prefetch_factor=4"


# -- writing the winner ------------------------------------------------------------------------------------------

SCRIPT = textwrap.dedent(
    """\
    import argparse

    from torch.utils.data import DataLoader


    def main(dataset, args):
        loader = DataLoader(dataset, batch_size=8{options})  # the training loader
        return loader
    """
)


def _write(tmp_path: Path, options: str, best: dict[str, int], own: int = 0) -> tuple[tune.Outcome, str, str]:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT.format(options=options), encoding="utf-8")
    outcome = tune.Outcome(tune.Loader(str(path), 7, own, None), best=best)
    error = tune.write(outcome, tmp_path)
    assert error is None
    return outcome, path.read_text(encoding="utf-8"), SCRIPT.format(options=options)


def test_the_winner_is_added_where_the_loader_lacks_it(tmp_path):
    outcome, text, before = _write(tmp_path, "", {"num_workers": 4, "prefetch_factor": 2})
    assert text == before.replace("batch_size=8)", "batch_size=8, num_workers=4)")  # default prefetching
    assert outcome.written == [str(tmp_path / "train.py")]


def test_a_literal_is_replaced_and_more_prefetching_added(tmp_path):
    _, text, before = _write(tmp_path, ", num_workers=1", {"num_workers": 4, "prefetch_factor": 4}, own=1)
    assert text == before.replace("num_workers=1)", "num_workers=4, prefetch_factor=4)")


def test_a_count_the_user_controls_is_named_not_overwritten(tmp_path):
    outcome, text, before = _write(
        tmp_path, ", num_workers=args.workers", {"num_workers": 4, "prefetch_factor": 2}
    )
    assert text == before and outcome.written == []
    assert outcome.advice == "set num_workers=4 where the script takes it (`args.workers`); nothing written"


def test_options_passed_through_a_dict_that_cannot_be_followed_are_left_to_the_user(tmp_path):
    outcome, text, before = _write(tmp_path, ", **args.loader", {"num_workers": 2, "prefetch_factor": 2})
    assert text == before
    assert outcome.advice == "set num_workers=2 where the script takes it (`**args.loader`); nothing written"


def test_no_loader_call_at_the_line_writes_nothing(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT.format(options=""), encoding="utf-8")
    outcome = tune.Outcome(tune.Loader(str(path), 3, 0, None), best={"num_workers": 2, "prefetch_factor": 2})
    assert tune.write(outcome, tmp_path) is None
    assert outcome.advice == "no DataLoader call found at " + f"{path}:3: set num_workers=2 there yourself"


# -- the run-time override ---------------------------------------------------------------------------------------


def test_the_override_reaches_a_count_passed_positionally_and_drops_what_needs_workers():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from torchlint.verify.bootstrap.hooks import with_options

    data = torch.arange(8)
    args, kwargs = with_options(
        DataLoader.__init__,
        object(),
        (data, 2, False, None, None, 3),
        {"persistent_workers": True},
        {"num_workers": 0},
    )
    assert DataLoader(*args, **kwargs).num_workers == 0
    args, kwargs = with_options(
        DataLoader.__init__, object(), (data,), {}, {"num_workers": 2, "prefetch_factor": 4}
    )
    loader = DataLoader(*args, **kwargs)
    assert (loader.num_workers, loader.prefetch_factor) == (2, 4)


# -- real runs ------------------------------------------------------------------------------------------------

TRAIN = textwrap.dedent(
    """\
    import time

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset, get_worker_info


    class Reads(Dataset):
        def __len__(self):
            return 256

        def __getitem__(self, index):
            {read}
            x = torch.full((4,), float(index % 7))
            return x, x.sum(0, keepdim=True)


    def main():
        torch.manual_seed(0)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        loader = DataLoader(Reads(), batch_size=8, shuffle=True)
        model = nn.Linear(4, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        losses = []
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(model(inputs.to(device)), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())


    if __name__ == "__main__":
        main()
    """
)


def _tune(folder: Path, read: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    (folder / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    (folder / "train.py").write_text(TRAIN.format(read=read), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "torchlint", "verify", "--tune", "workers", "--json", "out.json"]
        + ["--steps", "6", "--warmup", "2", "--device", "cpu", *args, "train.py"],
        cwd=folder,
        env={**os.environ, "TORCHLINT_NO_CACHE": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    return done, json.loads((folder / "out.json").read_text(encoding="utf-8"))


def test_candidates_whose_workers_break_the_script_are_points_of_the_curve_not_errors(tmp_path):
    pytest.importorskip("torch")
    broken = 'assert get_worker_info() is None, "this dataset reads in the main process only"'
    done, report = _tune(tmp_path, broken, "--keep", "--html", "out.html")
    shown = done.stdout + done.stderr
    assert done.returncode == report["exit_code"] == 0 and report["errors"] == [], shown
    assert report["tune"]["loader"] == {"filename": "train.py", "row": 21, "options": {"num_workers": 0}}
    # The loss read every step is counted at run time, and linked to the static finding there.
    [sync] = [f for f in report["variants"][0]["runtime_findings"] if f["kind"] == "sync"]
    assert (sync["location"]["row"], sync["static_findings_there"]) == (30, ["TL501"])
    curve = report["tune"]["curve"]
    assert curve[0]["options"] == {"num_workers": 0} and curve[0]["verdict"] == "baseline"
    assert {point["verdict"] for point in curve[1:]} == {"broke the script"}
    assert {point["options"]["num_workers"] for point in curve} >= {0, 1}
    assert any("'num_workers=1 #1': the script crashed" in note for note in report["notes"]), shown
    assert report["tune"]["best"] is None and report["tune"]["written"] == []
    assert "the script's own num_workers=0 measured best: nothing to change\n" in done.stdout
    assert done.stdout.endswith("\nverified: tuned (see above)\n")
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == TRAIN.format(read=broken)
    page = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert "<h2>Tuned DataLoader built at <code>train.py:21</code></h2>" in page
    assert "<li>the script&#x27;s own num_workers=0 measured best: nothing to change</li>" in page


def test_workers_that_overlap_slow_reads_win_and_are_written_with_keep(tmp_path):
    pytest.importorskip("torch")
    done, report = _tune(tmp_path, "time.sleep(0.01)", "--keep")
    shown = done.stdout + done.stderr
    best = report["tune"]["best"]
    assert best is not None and best["num_workers"] >= 1, shown
    chosen = [point for point in report["tune"]["curve"] if point["chosen"]]
    assert len(chosen) == 1 and chosen[0]["verdict"] == "faster" and chosen[0]["runs"] >= 2, shown
    assert report["tune"]["written"] == ["train.py"] and done.returncode == 0, shown
    options = f"num_workers={best['num_workers']}"
    if best["prefetch_factor"] != 2:
        options += f", prefetch_factor={best['prefetch_factor']}"
    written = TRAIN.format(read="time.sleep(0.01)").replace("shuffle=True)", f"shuffle=True, {options})")
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == written


def test_tune_with_each_is_a_usage_error(tmp_path):
    from torchlint.verify.verifier import UsageError, VerifyOptions, verify

    script = tmp_path / "train.py"
    script.write_text("print('hi')\n", encoding="utf-8")
    with pytest.raises(UsageError, match="--tune measures the script as it is"):
        verify(VerifyOptions(script, tune="workers", each=True))
