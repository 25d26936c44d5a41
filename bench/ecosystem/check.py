"""The ecosystem check: torchlint over real training repositories, diffed against a judged snapshot.

As ruff's ecosystem CI and mypy_primer do, this runs the linter over many public projects that nobody tuned
the analysis to, and shows what a change moved. Precision and recall on code like this is what users feel;
the tests hold small reproductions of each class of error it finds.

Run (from the repository root, with the test environment in .venv):

    .venv/bin/python bench/ecosystem/check.py findings [--repo NAME ...] [--update]
    .venv/bin/python bench/ecosystem/check.py fixes    [--repo NAME ...]
    .venv/bin/python bench/ecosystem/check.py runs     [--run ID ...] [--steps N]

Repositories (repos.toml, pinned by commit) are materialised under bench/.work/ecosystem/ from a folder of
git snapshots (--mirror, default $TORCHLINT_ECOSYSTEM_MIRROR or /work/.mirror, laid out as
`owner+name/repo`), or cloned from GitHub when no snapshot is there. Nothing of theirs enters this
repository.

- `findings`: every repository checked cold (`--isolated --no-cache --output-format json`, all rules), each
  finding matched against findings.tsv (repo, path, line, code, verdict, reason): new findings (not judged
  yet), vanished ones (judged, no longer reported) and moved ones (same file and code, another line; a
  notebook's findings are on `path:cell N`, their line inside the cell), per rule; then per rule the judged
  precision (TP / (TP + FP); `unsure` counts neither) and per family the estimated recall (TP / (TP + MISS),
  MISS rows being judged misses). `--update` makes findings.tsv the current output: new findings appended with
  verdict `?` for someone to judge, moved rows moved, vanished rows dropped (the commit message says why each
  went). Exit 1 when anything is new, vanished or unjudged.
- `fixes`: `--fix --unsafe-fixes` on a fresh copy of each repository; every file the fixer changed must
  still compile (and every file that compiled before; a notebook's code cells, joined). Exit 1 on any that
  does not.
- `runs`: the entry points of runs.toml, made runnable on a CPU with tiny synthetic data by the edits listed
  there (each one documented), run by `torchlint verify --unsafe-fixes --device cpu`: the patched script must
  run the same steps with agreeing losses. Exit 1 on any that does not.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORK = HERE.parent / ".work" / "ecosystem"
TORCHLINT = REPO / ".venv" / "bin" / "torchlint"
FINDINGS = HERE / "findings.tsv"
COLUMNS = ("repo", "path", "line", "code", "verdict", "reason")
VERDICTS = ("TP", "FP", "unsure", "MISS", "?")
CHECK = ("check", "--isolated", "--no-cache", "--select", "ALL", "--exit-zero", "--output-format", "json")
MOVE_WINDOW = 15  # lines: a finding this close to a vanished one of the same file and code has moved
FAMILIES = {
    "1": "compile",
    "2": "data loading",
    "3": "mixed precision",
    "4": "checkpointing",
    "5": "tuning guide",
    "6": "distributed",
    "0": "errors",
}


@dataclass(frozen=True)
class Repo:
    name: str
    commit: str
    style: str
    entries: tuple[str, ...]

    @property
    def slug(self) -> str:
        return self.name.replace("/", "+")


@dataclass
class Row:
    repo: str
    path: str
    line: int
    code: str
    verdict: str
    reason: str

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.repo, self.path, self.line, self.code)


def load_repos() -> list[Repo]:
    data = tomllib.loads((HERE / "repos.toml").read_text())
    return [Repo(r["name"], r["commit"], r["style"], tuple(r.get("entries", ()))) for r in data["repo"]]


def load_rows() -> list[Row]:
    if not FINDINGS.exists():
        return []
    with FINDINGS.open(newline="") as handle:
        reader = csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t")
        rows = [
            Row(r["repo"], r["path"], int(r["line"]), r["code"], r["verdict"], r["reason"]) for r in reader
        ]
    for row in rows:
        if row.verdict not in VERDICTS:
            sys.exit(f"findings.tsv: {row.key}: verdict {row.verdict!r} is not one of {', '.join(VERDICTS)}")
    return rows


def write_rows(rows: list[Row]) -> None:
    header = FINDINGS.read_text().splitlines()[0] if FINDINGS.exists() else ""
    comment = [header] if header.startswith("#") else []
    rows = sorted(rows, key=lambda r: (r.repo.lower(), r.path, r.line, r.code))
    with FINDINGS.open("w", newline="") as handle:
        for line in comment:
            handle.write(line + "\n")
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow((r.repo, r.path, r.line, r.code, r.verdict, r.reason))


def mirror_root(given: str | None) -> Path:
    return Path(given or os.environ.get("TORCHLINT_ECOSYSTEM_MIRROR") or "/work/.mirror")


def materialise(repo: Repo, mirror: Path) -> Path:
    """The repository's tree at its pinned commit, as its own project root (an empty .git marks it)."""
    tree = WORK / "trees" / repo.slug
    stamp = tree / ".git" / "torchlint-ecosystem-commit"
    if stamp.exists() and stamp.read_text() == repo.commit:
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    _extract(_git_dir(repo, mirror), repo.commit, tree)
    (tree / ".git").mkdir(exist_ok=True)
    stamp.write_text(repo.commit)
    return tree


def _extract(git_dir: Path, commit: str, tree: Path) -> None:
    """Every file of the commit whose content the snapshot holds (snapshots lack files of 4 MiB and more)."""
    git = ["git", "--git-dir", str(git_dir)]
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", commit], check=True, capture_output=True).stdout
    entries = []
    for record in listing.split(b"\0"):
        if record:
            meta, path = record.split(b"\t", 1)
            mode, kind, sha = meta.split()
            if kind == b"blob" and mode != b"120000":
                entries.append((sha.decode(), path.decode()))
    with subprocess.Popen(
        [*git, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as batch:
        for sha, path in entries:
            batch.stdin.write(sha.encode() + b"\n")
            batch.stdin.flush()
            header = batch.stdout.readline().split()
            if header[-1] == b"missing":
                continue
            content = batch.stdout.read(int(header[2]))
            batch.stdout.read(1)
            target = tree / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        batch.stdin.close()


def _git_dir(repo: Repo, mirror: Path) -> Path:
    snapshot = mirror / repo.slug / "repo"
    for candidate in (snapshot / ".git", snapshot):
        if (candidate / "HEAD").exists():
            return candidate
    clone = WORK / "clones" / repo.slug
    if not (clone / "HEAD").exists():
        url = f"https://github.com/{repo.name}.git"
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", url, str(clone)], check=True)
    return clone


def run_torchlint(tree: Path) -> list[dict]:
    done = subprocess.run([str(TORCHLINT), *CHECK, "."], cwd=tree, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"torchlint failed on {tree} (exit {done.returncode}):\n{done.stderr}")
    findings = json.loads(done.stdout or "[]")
    for f in findings:
        f["filename"] = str((tree / f["filename"]).resolve().relative_to(tree.resolve()))
        if f.get("cell") is not None:  # a notebook's: rows count inside the cell
            f["filename"] += f":cell {f['cell']}"
    return findings


# ---------------------------------------------------------------------------------------------- findings


def cmd_findings(args: argparse.Namespace) -> int:
    repos = _selected(load_repos(), args.repo)
    rows = load_rows()
    judged = {r.key: r for r in rows if r.verdict != "MISS"}
    names = {r.name for r in repos}
    current: dict[tuple[str, str, int, str], dict] = {}
    for repo in repos:
        tree = materialise(repo, mirror_root(args.mirror))
        found = run_torchlint(tree)
        print(f"{repo.name}: {len(found)} findings", file=sys.stderr)
        for f in found:
            current[(repo.name, f["filename"], f["location"]["row"], f["code"])] = f
    scope = {k: r for k, r in judged.items() if k[0] in names}
    new = [k for k in current if k not in scope]
    vanished = [k for k in scope if k not in current]
    moved = _pair_moves(new, vanished)
    for old, now in moved:
        new.remove(now)
        vanished.remove(old)
    _print_changes(new, vanished, moved, current, scope)
    matched = [scope[k] for k in current if k in scope] + [scope[old] for old, _ in moved]
    unjudged = [r for r in matched if r.verdict == "?"]
    misses = [r for r in rows if r.verdict == "MISS" and r.repo in names]
    _print_table(matched, new, misses)
    if args.update and (new or moved or vanished):
        by_key = {r.key: r for r in rows}
        for old, now in moved:
            row = by_key.pop(old)
            by_key[now] = Row(*now, row.verdict, row.reason)
        for key in vanished:
            del by_key[key]
        for key in new:
            by_key[key] = Row(*key, "?", "")
        write_rows(list(by_key.values()))
        counts = f"{len(new)} new rows to judge (verdict ?), {len(moved)} moved"
        print(f"findings.tsv: {counts}, {len(vanished)} vanished rows dropped", file=sys.stderr)
    return 1 if new or vanished or unjudged else 0


def _pair_moves(new: list, vanished: list) -> list[tuple[tuple, tuple]]:
    pairs = []
    free = list(new)
    for old in sorted(vanished):
        near = [
            k for k in free if k[0::3] == old[0::3] and k[1] == old[1] and abs(k[2] - old[2]) <= MOVE_WINDOW
        ]
        if near:
            best = min(near, key=lambda k: abs(k[2] - old[2]))
            free.remove(best)
            pairs.append((old, best))
    return pairs


def _print_changes(new, vanished, moved, current, judged) -> None:
    by_rule: dict[str, list[str]] = defaultdict(list)
    for key in sorted(new):
        f = current[key]
        by_rule[key[3]].append(f"  + {key[0]} {key[1]}:{key[2]}  {f['message'][:110]}")
    for key in sorted(vanished):
        row = judged[key]
        by_rule[key[3]].append(f"  - {key[0]} {key[1]}:{key[2]}  (was {row.verdict}: {row.reason})")
    for old, now in sorted(moved):
        by_rule[old[3]].append(f"  ~ {old[0]} {old[1]}:{old[2]} -> line {now[2]}")
    if not by_rule:
        print("No finding is new, vanished or moved.")
        return
    for code in sorted(by_rule):
        print(f"{code}:")
        print("\n".join(by_rule[code]))


def _print_table(matched: list[Row], new: list, misses: list[Row]) -> None:
    verdicts: dict[str, Counter] = defaultdict(Counter)
    for row in matched:
        verdicts[row.code][row.verdict] += 1
    for key in new:
        verdicts[key[3]]["?"] += 1
    print()
    print(f"{'rule':<7}{'found':>6}{'TP':>5}{'FP':>5}{'unsure':>7}{'unjudged':>9}{'precision':>10}")
    for code in sorted(verdicts):
        c = verdicts[code]
        judged = c["TP"] + c["FP"]
        precision = f"{c['TP'] / judged:.2f}" if judged else "-"
        total = sum(c.values())
        print(f"{code:<7}{total:>6}{c['TP']:>5}{c['FP']:>5}{c['unsure']:>7}{c['?']:>9}{precision:>10}")
    tp = sum(c["TP"] for c in verdicts.values())
    fp = sum(c["FP"] for c in verdicts.values())
    print(f"{'all':<7}{sum(sum(c.values()) for c in verdicts.values()):>6}{tp:>5}{fp:>5}", end="")
    print(
        f"{sum(c['unsure'] for c in verdicts.values()):>7}{sum(c['?'] for c in verdicts.values()):>9}", end=""
    )
    print(f"{(tp / (tp + fp)) if tp + fp else 0:>10.2f}")
    print()
    print(f"{'family':<17}{'TP':>5}{'FP':>5}{'MISS':>6}{'precision':>10}{'recall':>8}")
    for digit, family in FAMILIES.items():
        tp = sum(c["TP"] for code, c in verdicts.items() if code[2] == digit)
        fp = sum(c["FP"] for code, c in verdicts.items() if code[2] == digit)
        miss = sum(1 for r in misses if r.code[2] == digit)
        if not tp + fp + miss:
            continue
        precision = f"{tp / (tp + fp):.2f}" if tp + fp else "-"
        recall = f"{tp / (tp + miss):.2f}" if tp + miss else "-"
        print(f"{family:<17}{tp:>5}{fp:>5}{miss:>6}{precision:>10}{recall:>8}")


# ------------------------------------------------------------------------------------------------ fixes


def cmd_fixes(args: argparse.Namespace) -> int:
    failures = 0
    for repo in _selected(load_repos(), args.repo):
        tree = materialise(repo, mirror_root(args.mirror))
        copy = WORK / "fixed" / repo.slug
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(tree, copy, symlinks=True)
        files = [*copy.rglob("*.py"), *copy.rglob("*.ipynb")]
        before = {p: p.read_bytes() for p in files if p.is_file()}
        done = subprocess.run(
            [
                str(TORCHLINT),
                "check",
                "--isolated",
                "--no-cache",
                "--fix",
                "--unsafe-fixes",
                "--extend-select",
                "TL401",  # a trade-off's fix applies only to a rule selected by code: check it too
                "-q",
                "--exit-zero",
                ".",
            ],
            cwd=copy,
            capture_output=True,
            text=True,
        )
        changed = [p for p, text in before.items() if p.read_bytes() != text]
        broken = [p for p in changed if _compiles(p, before[p]) and not _compiles(p, p.read_bytes())]
        status = "ok" if done.returncode == 0 and not broken else "FAILED"
        summary = f"{len(changed)} files fixed, {len(broken)} no longer compile, exit {done.returncode}"
        print(f"{repo.name}: {summary}: {status}")
        if done.returncode != 0:
            print(done.stderr.strip())
        for path in broken:
            print(f"  does not compile: {path.relative_to(copy)}")
        failures += status != "ok"
    return 1 if failures else 0


def _compiles(path: Path, source: bytes) -> bool:
    """Whether the file is Python that compiles: a notebook, valid JSON whose code cells, joined as torchlint
    reads them (magics masked), compile."""
    try:
        if path.suffix == ".ipynb":
            from torchlint.workspace.notebook import Notebook, NotebookError  # the test venv's torchlint

            try:
                source = Notebook.parse(source.decode("utf-8")).python().encode()
            except (NotebookError, UnicodeDecodeError):
                return False
        compile(source, "<fixed>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


# ------------------------------------------------------------------------------------------------- runs


def cmd_runs(args: argparse.Namespace) -> int:
    repos = {r.name: r for r in load_repos()}
    runs = tomllib.loads((HERE / "runs.toml").read_text())["run"]
    if args.run:
        runs = [r for r in runs if r["id"] in args.run]
    failures = 0
    for run in runs:
        repo = repos[run["repo"]]
        tree = materialise(repo, mirror_root(args.mirror))
        copy = WORK / "runs" / run["id"]
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(tree, copy, symlinks=True)
        for edit in run.get("edits", ()):
            _apply_edit(copy, edit, run["id"])
        report = copy / ".torchlint-verify.json"
        command = [
            str(TORCHLINT), "verify", run["script"], "--unsafe-fixes", "--device", "cpu",
            "--steps", str(args.steps or run.get("steps", 6)), "--warmup", str(run.get("warmup", 2)),
            "--timeout", str(run.get("timeout", 240)), "--json", str(report), "--", *run.get("args", ()),
        ]  # fmt: skip
        done = subprocess.run(command, cwd=copy / run.get("cwd", "."), capture_output=True, text=True)
        verdict = _run_verdict(report, done)
        failures += not verdict.startswith("ok")
        print(f"{run['id']} ({run['repo']} {run['script']}): {verdict}")
    return 1 if failures else 0


def _apply_edit(copy: Path, edit: dict, run_id: str) -> None:
    path = copy / edit["file"]
    text = path.read_text()
    if text.count(edit["old"]) != 1:
        raise SystemExit(
            f"runs.toml {run_id}: {edit['file']}: the text to replace occurs {text.count(edit['old'])} times"
        )
    path.write_text(text.replace(edit["old"], edit["new"]))


def _run_verdict(report: Path, done: subprocess.CompletedProcess) -> str:
    if not report.exists():
        return f"FAILED: no report (exit {done.returncode}): {done.stderr.strip()[-600:]}"
    data = json.loads(report.read_text())
    original, *patched = data["variants"]
    if original.get("failure"):
        return f"FAILED: the original run failed: {original['failure']}"
    problems = []
    fixes = 0
    for variant in patched:
        fixes += len(variant["fixes"])
        if variant.get("failure"):
            problems.append(f"{variant['name']}: {variant['failure']}")
        losses = variant.get("losses") or {}
        if losses.get("verdict") not in ("agree", "equal", None):
            problems.append(f"{variant['name']}: losses {losses.get('verdict')} ({losses.get('detail')})")
    if not patched:
        return "ok: nothing to fix"
    if problems:
        return "FAILED: " + "; ".join(problems)
    return f"ok: {fixes} fixes, same steps, losses agree (verify exit {data['exit_code']})"


def _selected(repos: list[Repo], names: list[str] | None) -> list[Repo]:
    if not names:
        return repos
    unknown = set(names) - {r.name for r in repos}
    if unknown:
        sys.exit(f"not in repos.toml: {', '.join(sorted(unknown))}")
    return [r for r in repos if r.name in names]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", help="folder of git snapshots, owner+name/repo")
    parser.add_argument("--torchlint", help="the torchlint executable (default: this checkout's .venv)")
    sub = parser.add_subparsers(dest="command", required=True)
    findings = sub.add_parser("findings", help="diff the findings against findings.tsv")
    findings.add_argument("--repo", action="append", help="only this repository (owner/name); repeatable")
    findings.add_argument(
        "--update",
        action="store_true",
        help="make findings.tsv the current output: new findings as rows to judge (?), moved rows moved, "
        "vanished rows dropped (say why in the commit message)",
    )
    fixes = sub.add_parser("fixes", help="--fix --unsafe-fixes on copies; every changed file compiles")
    fixes.add_argument("--repo", action="append")
    runs = sub.add_parser("runs", help="run runs.toml's entry points under torchlint verify")
    runs.add_argument("--run", action="append", help="only this run id; repeatable")
    runs.add_argument("--steps", type=int)
    args = parser.parse_args()
    if args.torchlint:
        global TORCHLINT
        TORCHLINT = Path(args.torchlint)
    return {"findings": cmd_findings, "fixes": cmd_fixes, "runs": cmd_runs}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
