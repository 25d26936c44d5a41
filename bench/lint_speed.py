"""Wall and CPU time of torchlint against TorchFix, on trees copied from the installed torch package.

Run: .venv/bin/python bench/lint_speed.py [--repeat N (default 3)] [--tree a|b|both]

Trees, rebuilt under bench/.work/ on every run (only the `.py` files, plus a bare pyproject.toml so that
each tree is its own project root): (a) torch's nn, optim, utils; (b) optim, utils/data, nn/modules.

TorchFix 0.7.0 pins `libcst < 1.6`, which clashes with ours, so it lives in its own venv,
bench/.venv-torchfix, created on first use. It runs once per tree with all its rules (it takes minutes);
torchlint runs cold (no cache), warm (cache from the cold run: an identical run, which torchlint replays
from `.torchlint_cache/runs/`), warm without that record (the per-file result cache alone), with the
prefilter off, with `--jobs 1`, and on a single file, each best of --repeat. Per variant it prints files,
lines, files parsed by phase 2, wall and CPU seconds (CPU summed over the child and its workers) and the
speed-up over TorchFix, then the targets for this 2-core machine: cold >= 20x faster than TorchFix,
warm >= 10x faster than cold, a single file under 0.3 s.

Flags that torchlint may not have yet (--jobs, --no-cache, --no-prefilter, --statistics and the hidden
--show-phase2-count) are probed first; a variant that needs a missing one is reported as n/a. This is a
benchmark, not a test: it prints figures and asserts only that both tools really ran.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / ".work"
TORCHFIX_VENV = BENCH / ".venv-torchfix"
TORCHFIX_VERSION = "0.7.0"
TORCHLINT = REPO / ".venv" / "bin" / "torchlint"
PROJECT_PYTHON = REPO / ".venv" / "bin" / "python"

TREES = {
    "a": ("nn", "optim", "utils"),
    "b": ("optim", "utils/data", "nn/modules"),
}
SINGLE_FILE = "optim/sgd.py"
BASE_ARGS = ("--output-format", "concise", "--exit-zero", "-q")

# Both tools print findings as `path:line:col: CODE message` (torchlint in its concise format).
FINDING = re.compile(r"^.+?:\d+:\d+: [A-Z]+\d+\b", re.MULTILINE)
# The hidden flag's wording is not fixed yet: take the number on a line mentioning phase 2.
PHASE2 = re.compile(r"phase[ _-]?2\D*?(\d+)", re.IGNORECASE)

TARGET_COLD_VS_TORCHFIX = 20.0
TARGET_WARM_VS_COLD = 10.0
TARGET_SINGLE_FILE_S = 0.3


@dataclass
class Timing:
    wall: float
    cpu: float
    stdout: str
    stderr: str

    @property
    def findings(self) -> int:
        return len(FINDING.findall(self.stdout))


@dataclass
class Row:
    name: str
    files: int
    lines: int
    timing: Timing | None  # None: the variant needs a flag this torchlint lacks
    phase2: str = "n/a"
    note: str = ""


def measure(command: list[str]) -> tuple[subprocess.CompletedProcess[str], Timing]:
    """Run `command`; wall clock, and CPU (user + sys) of the child and every descendant it reaped.

    RUSAGE_CHILDREN only grows when a child is waited for, so the delta around one subprocess.run is that
    run's cost, worker processes included (a tool reaps its pool before exiting).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done, Timing(wall, cpu, done.stdout, done.stderr)


def timed(command: list[str]) -> Timing:
    """`measure`, for torchlint: with --exit-zero any non-zero exit is an error, never findings."""
    done, timing = measure(command)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return timing


# -- the trees --------------------------------------------------------------------------------------------


def torch_root() -> Path:
    # A subprocess, so that this process never pays for (or is perturbed by) importing torch; torch may
    # print warnings on stderr, so only stdout's last line is the answer.
    out = subprocess.run(
        [str(PROJECT_PYTHON), "-c", "import torch, os; print(os.path.dirname(torch.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return Path(out.strip().splitlines()[-1])


def build_tree(name: str, torch_dir: Path) -> Path:
    """A fresh copy every run: a stale cache or a file left over from another torch would skew the figures."""
    tree = WORK / f"tree_{name}"
    shutil.rmtree(tree, ignore_errors=True)
    for sub in TREES[name]:
        for source in sorted((torch_dir / sub).rglob("*.py")):
            target = tree / source.relative_to(torch_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    # Its own project root, so torchlint neither walks up into this repository nor picks up its settings.
    (tree / "pyproject.toml").write_text('[project]\nname = "bench"\n', encoding="utf-8")
    # torchlint honours .gitignore files from the enclosing repository's root down, and bench/.work/ is
    # ignored there: it would skip every file and "finish" in half a second. An empty .git makes the tree
    # its own repository root, as a nested checkout would be, so nothing above it applies.
    (tree / ".git").mkdir()
    return tree


def size(paths: list[Path]) -> tuple[int, int]:
    return len(paths), sum(path.read_bytes().count(b"\n") for path in paths)


# -- TorchFix ---------------------------------------------------------------------------------------------


def torchfix_executable() -> Path:
    exe = TORCHFIX_VENV / "bin" / "torchfix"
    if not exe.exists():
        print(f"creating {TORCHFIX_VENV.relative_to(REPO)} with torchfix=={TORCHFIX_VERSION} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(TORCHFIX_VENV)], check=True)
        subprocess.run(
            [str(TORCHFIX_VENV / "bin" / "pip"), "install", "-q", f"torchfix=={TORCHFIX_VERSION}"], check=True
        )
    return exe


def run_torchfix(exe: Path, tree: Path) -> Timing:
    # --select ALL: its default leaves out TOR3/TOR4/TOR9, and the comparison should be with everything on.
    done, timing = measure([str(exe), "--select", "ALL", str(tree)])
    # TorchFix's exit status on findings is not part of its interface; a crash shows as a traceback.
    if "Traceback (most recent call last)" in done.stderr:
        sys.exit(f"torchfix crashed on {tree}:\n{done.stderr[-4000:]}")
    # Finding nothing on thousands of torch files would mean it did not really look (wrong path, no rules).
    assert timing.findings > 0, (
        f"torchfix found nothing in {tree} (exit {done.returncode}):\n{done.stderr[-2000:]}"
    )
    return timing


# -- torchlint --------------------------------------------------------------------------------------------


def probe_flags() -> dict[str, bool]:
    """Which of the in-progress flags this torchlint has, so the script runs before and after they land."""
    help_text = subprocess.run(
        [str(TORCHLINT), "check", "--help"], capture_output=True, text=True, check=True
    ).stdout
    flags = {flag: flag in help_text for flag in ("--jobs", "--no-cache", "--no-prefilter", "--statistics")}
    # Hidden options are not in --help. Click rejects an unknown option (exit 2) before it reaches the
    # eager --help that follows it, so exit 0 means the option exists.
    for flag in ("--show-phase2-count", "--no-prefilter"):
        hidden = subprocess.run([str(TORCHLINT), "check", flag, "--help"], capture_output=True, text=True)
        flags[flag] = flags.get(flag, False) or hidden.returncode == 0
    return flags


def clear_cache(tree: Path) -> None:
    shutil.rmtree(tree / ".torchlint_cache", ignore_errors=True)


def best_of(repeat: int, run) -> Timing:
    # Best by wall clock, keeping that run's CPU figure with it so the pair stays from one run.
    return min((run() for _ in range(repeat)), key=lambda timing: timing.wall)


def phase2_count(timing: Timing, flags: dict[str, bool]) -> str:
    if not flags["--show-phase2-count"]:
        return "n/a"
    found = PHASE2.findall(timing.stderr + "\n" + timing.stdout)
    return found[-1] if found else "?"


def torchlint_rows(tree: Path, files: int, lines: int, repeat: int, flags: dict[str, bool]) -> dict[str, Row]:
    extra = ["--show-phase2-count"] if flags["--show-phase2-count"] else []
    # --no-cache keeps a variant from writing (and reading) a cache; without that flag there is no cache
    # to avoid, and the cache is cleared before every non-warm run anyway.
    no_cache = ["--no-cache"] if flags["--no-cache"] else []

    def check(*args: str, target: Path = tree, keep_cache: bool = False) -> Timing:
        if not keep_cache:
            clear_cache(tree)
        return timed([str(TORCHLINT), "check", str(target), *BASE_ARGS, *extra, *args])

    rows: dict[str, Row] = {}

    def add(
        name: str, timing: Timing | None, n_files: int = files, n_lines: int = lines, note: str = ""
    ) -> None:
        phase2 = phase2_count(timing, flags) if timing else "n/a"
        rows[name] = Row(name, n_files, n_lines, timing, phase2, note)

    # Cold then warm back to back: the last cold run leaves exactly the cache the warm runs should read.
    add("cold", best_of(repeat, lambda: check()))
    cached = (tree / ".torchlint_cache").exists()
    warm = best_of(repeat, lambda: check(keep_cache=True))
    replayed = "(replayed)" in warm.stderr
    add(
        "warm",
        warm,
        note=("replayed" if replayed else "") if cached else "no .torchlint_cache written: no cache yet?",
    )
    runs = tree / ".torchlint_cache" / "runs"

    def per_file_only() -> Timing:
        shutil.rmtree(runs, ignore_errors=True)  # untimed: only the subprocess is
        return check(keep_cache=True)

    if runs.is_dir():  # a torchlint that replays identical runs: also time the per-file cache alone
        add("warm per-file", best_of(repeat, per_file_only), note="per-file result cache only")
    if flags["--no-prefilter"]:
        add("prefilter off", best_of(repeat, lambda: check("--no-prefilter", *no_cache)))
    else:
        add("prefilter off", None, note="no --no-prefilter")
    if flags["--jobs"]:
        add("--jobs 1", best_of(repeat, lambda: check("--jobs", "1", *no_cache)))
    else:
        add("--jobs 1", None, note="no --jobs")
    single = tree / SINGLE_FILE
    one_files, one_lines = size([single])
    add("single file", best_of(repeat, lambda: check(*no_cache, target=single)), one_files, one_lines)
    clear_cache(tree)
    return rows


def statistics(tree: Path, flags: dict[str, bool]) -> str:
    """--statistics of a cold run, untimed, so printing it cannot colour the cold figures."""
    if not flags["--statistics"]:
        return "n/a (no --statistics)"
    clear_cache(tree)
    # Without -q: the statistics may count as summary, which -q suppresses. Findings lines are dropped in
    # case the flag adds to the usual output rather than replacing it.
    out = timed(
        [str(TORCHLINT), "check", str(tree), "--output-format", "concise", "--exit-zero", "--statistics"]
    )
    clear_cache(tree)
    text = "\n".join(line for line in out.stdout.splitlines() if not FINDING.match(line))
    return text.strip() or "(no output)"


# -- report -----------------------------------------------------------------------------------------------


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:7.1f}x" if denominator > 0 else "    inf"


def target(name: str, value: str, goal: str, ok: bool) -> None:
    print(f"  {name:<16} = {value}  ({goal})  {'PASS' if ok else 'FAIL'}")


def report(
    name: str, tree: Path, torchfix: Timing, rows: dict[str, Row], stats: str, files: int, lines: int
) -> None:
    print(f"\n== tree ({name}): {', '.join(TREES[name])}  [{tree.relative_to(REPO)}] ==")
    header = (
        f"{'variant':<14}{'files':>7}{'lines':>9}{'phase-2':>9}{'findings':>10}"
        f"{'wall s':>9}{'CPU s':>9}{'TF/wall':>9}{'TF/CPU':>9}  note"
    )
    print(header)
    print("-" * len(header))
    print(
        f"{'TorchFix':<14}{files:>7}{lines:>9}{'-':>9}{torchfix.findings:>10}"
        f"{torchfix.wall:>9.2f}{torchfix.cpu:>9.2f}{'1.0x':>9}{'1.0x':>9}  --select ALL"
    )
    for row in rows.values():
        if row.timing is None:
            print(
                f"{row.name:<14}{row.files:>7}{row.lines:>9}{'n/a':>9}{'n/a':>10}{'n/a':>9}{'n/a':>9}"
                f"{'n/a':>9}{'n/a':>9}  {row.note}"
            )
            continue
        t = row.timing
        # TorchFix ran on the whole tree, so a speed-up over it means nothing for a run on fewer files.
        whole = row.files == files
        tf_wall = ratio(torchfix.wall, t.wall) if whole else "-"
        tf_cpu = ratio(torchfix.cpu, t.cpu) if whole else "-"
        print(
            f"{row.name:<14}{row.files:>7}{row.lines:>9}{row.phase2:>9}{t.findings:>10}{t.wall:>9.3f}{t.cpu:>9.3f}"
            f"{tf_wall:>9}{tf_cpu:>9}  {row.note}"
        )

    cold, warm, single = rows["cold"].timing, rows["warm"].timing, rows["single file"].timing
    assert cold is not None and warm is not None and single is not None
    vs_torchfix = torchfix.wall / cold.wall
    vs_cold = cold.wall / warm.wall
    print("targets (wall clock):")
    target(
        "TorchFix / cold",
        f"{vs_torchfix:7.1f}x",
        f">= {TARGET_COLD_VS_TORCHFIX:.0f}x",
        vs_torchfix >= TARGET_COLD_VS_TORCHFIX,
    )
    target(
        "cold / warm", f"{vs_cold:7.1f}x", f">= {TARGET_WARM_VS_COLD:.0f}x", vs_cold >= TARGET_WARM_VS_COLD
    )
    target(
        "single file",
        f"{single.wall:7.3f}s",
        f"< {TARGET_SINGLE_FILE_S}s",
        single.wall < TARGET_SINGLE_FILE_S,
    )
    print("--statistics (cold run):")
    for line in stats.splitlines():
        print(f"  {line}")
    # Wall clock on 2 cores is only as good as the machine is idle; CPU seconds suffer much less.
    print(f"load average (1 min) after this tree: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="torchlint runs per variant; the best is kept")
    parser.add_argument("--tree", choices=("a", "b", "both"), default="both")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    flags = probe_flags()
    print(f"cpu cores: {os.cpu_count()}")
    print("torchlint flags: " + ", ".join(f"{flag} {'yes' if ok else 'no'}" for flag, ok in flags.items()))
    torch_dir = torch_root()
    torchfix = torchfix_executable()
    for name in ("a", "b") if args.tree == "both" else (args.tree,):
        tree = build_tree(name, torch_dir)
        files, lines = size(sorted(tree.rglob("*.py")))
        print(
            f"\ntree ({name}): {files} files, {lines} lines; load average (1 min) {os.getloadavg()[0]:.2f};"
            " running TorchFix (minutes) ...",
            flush=True,
        )
        torchfix_timing = run_torchfix(torchfix, tree)
        print(f"tree ({name}): running torchlint ...", flush=True)
        rows = torchlint_rows(tree, files, lines, args.repeat, flags)
        report(name, tree, torchfix_timing, rows, statistics(tree, flags), files, lines)


if __name__ == "__main__":
    main()
