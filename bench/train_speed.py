"""What each fix changes in a training run, measured by `torchlint verify --each` on the fixtures.

Run: .venv/bin/python bench/train_speed.py [--repeat K (default 2)] [--steps N] [--warmup W]
                                           [--device auto|cpu|cuda] [--threads T] [--only NAME ...]

Each fixture below runs only when its folder exists (the list grows as the rule families land), with the
fixes of its family and `--unsafe-fixes`, one patched run per fix plus one with all of them, the
variants interleaved (A B A B) over --repeat rounds and the same thread settings in every run. Per
fixture it prints the exact command, the machine's load, and per variant the median step time, the
speed-up with its 95% interval, the peak-memory and step-memory changes and whether the losses agree;
then the targets:

- loader_bound (data loading, TL2): the data-loading fixes give at least 1.3x on a 2-core CPU;
- checkpoint_transformer (checkpointing, TL4): the checkpointing fix lowers the step memory (the profiler's
  allocations over the profiled steps: on a CPU the process's peak RSS is mostly torch itself) by at least
  10%, with the same losses.

This is a benchmark, not a test: it prints figures and asserts only that the runs happened. The figures
depend on the machine's load (printed): measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TORCHLINT = [sys.executable, "-m", "torchlint"]


@dataclass(frozen=True)
class Case:
    name: str
    script: str  # relative to the repository
    select: str
    args: tuple[str, ...]  # the script's own arguments
    target: str  # what the bench checks: "speed" (>= min_speedup) or "memory" (a drop)
    min_speedup: float = 1.0


CASES = [
    Case(
        "loader_bound",
        "fixtures/loader_bound/train.py",
        "TL2",
        ("--train-size", "1024", "--epochs", "2"),
        "speed",
        1.3,
    ),
    Case("checkpoint_transformer", "fixtures/checkpoint_transformer/train.py", "TL4", ("30",), "memory"),
]


def run_case(case: Case, options: argparse.Namespace) -> dict | None:
    script = REPO / case.script
    if not script.is_file():
        print(f"{case.name}: {case.script} is not there (yet): skipped\n")
        return None
    with tempfile.TemporaryDirectory() as scratch:
        report_path = Path(scratch) / "report.json"
        command = [
            *TORCHLINT,
            "verify",
            case.script,
            "--each",
            "--unsafe-fixes",
            "--select",
            case.select,
            "--repeat",
            str(options.repeat),
            "--steps",
            str(options.steps),
            "--warmup",
            str(options.warmup),
            "--device",
            options.device,
            "--json",
            str(report_path),
        ]
        if options.threads:
            command += ["--threads", str(options.threads)]
        if case.args:
            command += ["--", *case.args]
        shown = " ".join(["torchlint", *command[len(TORCHLINT) :]]).replace(str(report_path), "REPORT.json")
        print(f"== {case.name}\n$ {shown}", flush=True)
        done = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
        print(done.stdout)
        if not report_path.is_file():
            print(f"{case.name}: no report (exit {done.returncode})\n")
            return None
        report = json.loads(report_path.read_text(encoding="utf-8"))
    report["command"] = shown
    return report


def summarise(case: Case, report: dict) -> str:
    variants = report["variants"]
    machine = report["machine"]
    load = "/".join(f"{x:.2f}" for x in machine["load_before"])
    lines = [
        f"{case.name}: device {report['device']}, {report['settings']['threads']} intra-op thread(s), "
        f"{machine['cpus']} CPUs, load {load} before",
    ]
    for variant in variants[1:]:
        speed = variant["speed"] or {}
        interval = speed.get("interval95") or speed.get("repeats_range")
        memory = variant["memory_change"]
        working = (variant["working_memory"] or {}).get("change")
        lines.append(
            f"  {variant['name']:<45} speed-up "
            + (f"{speed['speedup']:.2f}x" if speed.get("speedup") else "-")
            + (f" [{interval[0]:.2f}-{interval[1]:.2f}]" if interval else "")
            + (f", peak memory x{memory:.2f}" if memory else "")
            + (f", step memory x{working:.2f}" if working else "")
            + f", losses {(variant['losses'] or {}).get('verdict', '-')}, verdict {variant['verdict']}"
        )
    every = next((v for v in variants if v["kind"] == "all"), None)
    if every is None:
        lines.append("  target: n/a (nothing to fix)")
    elif case.target == "speed":
        speedup = (every["speed"] or {}).get("speedup") or 0.0
        status = "met" if speedup >= case.min_speedup else "NOT met"
        lines.append(f"  target: all fixes >= {case.min_speedup:.1f}x: {speedup:.2f}x ({status})")
    else:
        working = every["working_memory"] or {}
        change = working.get("change") or 1.0
        met = working.get("verdict") == "less" and (every["losses"] or {}).get("verdict") == "agree"
        lines.append(
            f"  target: step memory drops (at least 10%), same losses: x{change:.2f} "
            f"({'met' if met else 'NOT met'})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--threads", type=int)
    parser.add_argument("--only", nargs="*", help="fixture names to run (default: every one that exists)")
    options = parser.parse_args()
    summaries = []
    for case in CASES:
        if options.only and case.name not in options.only:
            continue
        report = run_case(case, options)
        if report is not None:
            summaries.append(summarise(case, report))
    print("== summary")
    print("\n".join(summaries) if summaries else "no fixture ran")
    print(f"(loadavg now: {' '.join(f'{x:.2f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
