"""torchlint on real training repositories, against ruff (and TorchFix) measured in the same run.

Run: .venv/bin/python bench/real_trees.py [--repeat N] [--torchlint EXE] PATH[:FILE] ...
     (or TORCHLINT_REAL_TREES=PATH:PATH...; there each tree's most imported module is checked alone)

Each PATH is an extracted tree (yolov5, pytorch/examples, timm, ...; this script downloads nothing, and
the copies it works on live under bench/.work/, which git ignores). Its `.py` files and its pyproject.toml
are copied afresh each run, with an empty `.git` so that the copy is its own project root. FILE is the
module checked alone (relative to PATH); by default the project file that the most files import, which is
what a pre-commit hook or an editor costs in the worst case.

Per tree, best wall clock of --repeat runs (CPU with it, summed over workers) and the peak memory of the
largest process: torchlint cold (no cache), warm (the cache of the cold run), `-j 1` cold, FILE alone cold,
FILE alone after a one-line edit (the cache warm from a whole run), the whole tree after that edit; ruff
`--select ALL` cold; TorchFix `--select ALL` once when bench/.venv-torchfix exists (bench/lint_speed.py
creates it). Ratios: torchlint / ruff, TorchFix / torchlint. --torchlint times another build (an older
checkout's .venv/bin/torchlint) on the same copies, for before/after figures. A benchmark, not a test: it
prints figures, and stops only when a tool fails or when warm and cold outputs differ.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / ".work" / "real"
BIN = REPO / ".venv" / "bin"
TORCHLINT = BIN / "torchlint"
RUFF = BIN / "ruff"
TORCHFIX = BENCH / ".venv-torchfix" / "bin" / "torchfix"
ARGS = ("--output-format", "concise", "--exit-zero", "-q")
EDIT = b"\n_bench_edit = 1  # a one-line edit made by bench/real_trees.py\n"
CONFIGS = ("pyproject.toml", "setup.cfg")


@dataclass
class Run:
    wall: float
    cpu: float
    peak_mb: float
    stdout: str


def measure(command: list[str], cwd: Path) -> Run:
    """One run of `command`: wall clock, CPU of it and the workers it reaped, and its peak resident memory
    (wait4's rusage: that process's own, or its largest reaped child's)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if process.returncode != 0 or "Traceback (most recent call last)" in stderr:
        sys.exit(f"{' '.join(command)} exited {process.returncode}:\n{stderr[-4000:]}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, stdout)


def best_of(repeat: int, run) -> Run:
    return min((run() for _ in range(repeat)), key=lambda r: r.wall)


def copy_tree(source: Path) -> Path:
    tree = WORK / source.name
    shutil.rmtree(tree, ignore_errors=True)
    for path in sorted(source.rglob("*.py")):
        if any(part.startswith(".") for part in path.relative_to(source).parts):
            continue
        target = tree / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    for name in CONFIGS:
        if (source / name).is_file():
            shutil.copyfile(source / name, tree / name)
    # Its own root: nothing above it (this repository's .gitignore ignores bench/.work/) applies.
    (tree / ".git").mkdir()
    return tree


def most_imported(tree: Path) -> Path:
    """The project file most files import (ties: the first by path)."""
    sys.path.insert(0, str(REPO))
    from torchlint.index.project import Project

    project = Project(tree)
    counts = {file: len(project.importers_of(file)) for file in project.python_files()}
    return max(sorted(counts), key=lambda file: counts[file])


def clear_cache(tree: Path) -> None:
    shutil.rmtree(tree / ".torchlint_cache", ignore_errors=True)


def bench_tree(source: Path, chosen: str | None, repeat: int, exe: Path) -> None:
    tree = copy_tree(source)
    files = sorted(p for p in tree.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    single = tree / chosen if chosen else most_imported(tree)
    one = single.relative_to(tree).as_posix()

    def torchlint(*args: str, keep: bool = False) -> Run:
        if not keep:
            clear_cache(tree)
        return measure([str(exe), "check", *ARGS, *args], tree)

    rows: list[tuple[str, Run]] = []
    cold = best_of(repeat, lambda: torchlint("."))
    rows.append(("cold", cold))
    warm = best_of(repeat, lambda: torchlint(".", keep=True))
    if warm.stdout != cold.stdout:
        sys.exit(f"{tree}: the warm output differs from the cold one")
    rows.append(("warm", warm))
    rows.append(("cold -j 1", best_of(repeat, lambda: torchlint(".", "-j", "1"))))
    rows.append((f"{one} cold", best_of(repeat, lambda: torchlint(one))))
    original = single.read_bytes()

    def edited(*args: str) -> Run:
        single.write_bytes(original)  # untimed: a warm cache of the unedited tree, then the edit
        torchlint(".")
        single.write_bytes(original + EDIT)
        try:
            return torchlint(*args, keep=True)
        finally:
            single.write_bytes(original)

    rows.append((f"{one} edited", best_of(repeat, lambda: edited(one))))
    rows.append(("tree, file edited", best_of(repeat, lambda: edited("."))))
    clear_cache(tree)
    ruff = best_of(
        repeat,
        lambda: measure(
            [str(RUFF), "check", "--select", "ALL", "--no-cache", "--exit-zero", "-q", "."], tree
        ),
    )
    torchfix = measure([str(TORCHFIX), "--select", "ALL", "."], tree) if TORCHFIX.exists() else None

    print(f"\n{source}  ({len(files)} files, {lines} lines; one file: {one}; {exe})")
    width = max(36, *(len(name) + 12 for name, _ in rows))

    def line(label: str, run: Run, vs_ruff: str, vs_torchfix: str) -> None:
        figures = f"{run.wall:>9.2f}{run.cpu:>9.2f}{run.peak_mb:>9.0f}"
        print(f"{label:<{width}}{figures}{vs_ruff:>9}{vs_torchfix:>12}")

    print(f"{'':<{width}}{'wall s':>9}{'cpu s':>9}{'peak MB':>9}{'/ ruff':>9}{'TorchFix /':>12}")
    for name, run in rows:
        # TorchFix has no cache and checks the whole tree: only whole cold runs compare with it.
        whole_cold = torchfix is not None and name in ("cold", "cold -j 1")
        vs_torchfix = f"{torchfix.wall / run.wall:.1f}x" if whole_cold else "-"  # type: ignore[union-attr]
        line(f"torchlint {name}", run, f"{run.wall / ruff.wall:.1f}x", vs_torchfix)
    line("ruff --select ALL", ruff, "1.0x", "-")
    if torchfix is not None:
        line("TorchFix --select ALL", torchfix, "-", "1.0x")
    else:
        print("TorchFix: not measured (no bench/.venv-torchfix; bench/lint_speed.py creates it)")


def trees_from(arguments: list[str]) -> list[tuple[Path, str | None]]:
    found = []
    for item in arguments:
        path, _, file = item.partition(":")
        found.append((Path(path).resolve(), file or None))
    env = os.environ.get("TORCHLINT_REAL_TREES", "")
    found += [(Path(p).resolve(), None) for p in env.split(os.pathsep) if p and not arguments]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", help="PATH[:FILE] of an extracted tree (or TORCHLINT_REAL_TREES)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--torchlint", type=Path, default=TORCHLINT, help="the torchlint executable to time")
    options = parser.parse_args()
    trees = trees_from(options.trees)
    if not trees:
        parser.error("give the paths of extracted trees (or set TORCHLINT_REAL_TREES)")
    for source, chosen in trees:
        if not source.is_dir():
            sys.exit(f"{source}: not a folder")
        bench_tree(source, chosen, options.repeat, options.torchlint.absolute())


if __name__ == "__main__":
    main()
