"""Time per file of LibCST parse + facts against a bare `libcst.parse_module`, on torch's own sources.

Run: .venv/bin/python bench/facts_speed.py [--repeat 3]
Prints files, lines, both timings (best of N) and the ratio; the target is within 2x. Not a test.
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

import libcst as cst

from torchlint.facts import ModuleFacts, SourceModule
from torchlint.rules.data_loading.datasets import DatasetAnalysis


def sources() -> list[tuple[str, str]]:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None, "torch must be installed for the benchmark"
    root = Path(spec.origin).parent
    found = []
    for sub in ("nn", "optim", "utils"):
        for path in sorted((root / sub).rglob("*.py")):
            found.append((path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")))
    return found


def analyse(path: str, text: str) -> None:
    facts = ModuleFacts(SourceModule(path, text, cst.parse_module(text)))
    for loader in facts.loaders:  # every question the data-loading rules ask
        facts.training.loader_uses(loader)
        facts.analysis(DatasetAnalysis).kind(loader)
        facts.analysis(DatasetAnalysis).unpicklable(loader)
    for loop in facts.training.training_loops:
        facts.batch_moves(loop)
    _ = facts.device, facts.has_main_guard, facts.hf_training_arguments, facts.frameworks


def best_of(repeat: int, work) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files = sources()
    lines = sum(text.count("\n") for _, text in files)

    def parse_all() -> None:
        for _, text in files:  # nothing kept alive: both variants pay the same garbage collection
            cst.parse_module(text)

    def analyse_all() -> None:
        for path, text in files:
            analyse(path, text)

    parse = best_of(args.repeat, parse_all)
    full = best_of(args.repeat, analyse_all)
    print(f"files: {len(files)}, lines: {lines}")
    print(f"libcst.parse_module:        {parse:7.2f} s  ({parse / len(files) * 1000:6.1f} ms/file)")
    print(f"parse + facts (all queries): {full:7.2f} s  ({full / len(files) * 1000:6.1f} ms/file)")
    print(f"ratio: {full / parse:.2f}x (target: within 2x)")


if __name__ == "__main__":
    main()
