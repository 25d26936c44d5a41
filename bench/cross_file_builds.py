"""Which cross-file questions build other files' facts when files are checked one at a time.

Run: .venv/bin/python bench/cross_file_builds.py [--files 12] [--seed 1] [--top 15] TREE ...
     (TREE: an extracted tree, e.g. bench/.work/ecosystem/trees/ultralytics+yolov5)

A one-file check (a pre-commit hook, the editor) builds another file's facts (a LibCST parse and the
analyses its questions raise) only where the question's answer needs that file's code; the exports and the
files' bytes answer the rest (`torchlint/facts/torch/exports.py`, `reach.py`). This picks `--files` random
`.py` files of each tree, checks each alone in this process with a fresh linter (exports asked, as a
one-file run does; no cache), and prints the total time, how many files' facts were built and how long
their parses took, then per question (the analysis function that asked, found on the stack) how many
builds it caused. The question to make cheaper next is at the top. Files' exports are kept by content for
the process, so later checks of a tree read earlier ones' exports: compare runs of two builds on the same
sample (`PYTHONPATH=` an older checkout), not against a cold command line. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

# Frames that pass a question on rather than ask it: the index, name resolution, the export graph, memos,
# the list of importers (its asker is who wanted them), comprehensions.
PASSING_ON = {"project.py", "module.py", "alone.py", "reach.py", "functools.py", "memo.py"}
LISTING = {"built", "importers", "_importers_naming", "<listcomp>", "<genexpr>", "<setcomp>", "<dictcomp>"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--files", type=int, default=12, help="files per tree (default 12)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()

    gc.disable()  # as the command line runs a check
    from torchlint.index.project import Project
    from torchlint.linter import Linter
    from torchlint.workspace.settings import Settings

    builds: Counter[str] = Counter()
    parse_seconds: Counter[str] = Counter()
    build = Project._build

    def recording_build(project: Project, path: Path):
        asker = _asking_question(traceback.extract_stack()[:-1])
        start = time.perf_counter()
        try:
            return build(project, path)
        finally:
            builds[asker] += 1
            parse_seconds[asker] += time.perf_counter() - start

    Project._build = recording_build  # type: ignore[method-assign]
    rng = random.Random(args.seed)
    files: list[Path] = []
    for tree in args.trees:
        found = sorted(tree.rglob("*.py"))
        rng.shuffle(found)
        files += found[: args.files]
    total = 0.0
    for file in files:
        linter = Linter()
        linter.ask_exports(True)
        start = time.perf_counter()
        linter.check_text(str(file), file.read_text(errors="replace"), Settings())
        total += time.perf_counter() - start
    print(f"{len(files)} files checked one at a time: {total:.2f} s")
    built, seconds = sum(builds.values()), sum(parse_seconds.values())
    print(f"other files' facts built: {built} ({seconds:.2f} s parsing and collecting them)")
    for asker, count in builds.most_common(args.top):
        print(f"  {count:5d}  {parse_seconds[asker]:6.2f} s  {asker}")


def _asking_question(stack: traceback.StackSummary) -> str:
    for frame in reversed(stack):
        path = Path(frame.filename)
        if "torchlint" in frame.filename and path.name not in PASSING_ON and frame.name not in LISTING:
            return f"{path.parent.name}/{path.name}:{frame.name}"
    return "?"


if __name__ == "__main__":
    sys.exit(main())
