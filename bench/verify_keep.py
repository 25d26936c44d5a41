"""`torchlint verify --keep` on a loader-bound script: does it keep the workers fix, drop what does not pay on
a CPU, and does the kept set measure at least 1.5x?

Run: .venv/bin/python bench/verify_keep.py [--repeat K (default 2)] [--steps N] [--warmup W] [--threads T]

The script (SCRIPT below, written to a temporary project) trains a small keyword-spotting CNN on synthetic
recordings; each clip is fetched (3 ms of latency, as from network storage), "decoded" (harmonics
synthesised from its index), speed-perturbed, mixed with noise, turned into a log-mel spectrogram and
masked, in the training process (`num_workers=0`), so that most of each step waits for data. Workers
overlap both the fetches and, where cores are free, the decoding (on a 2-core machine shared with other
work, decoding alone leaves them little to gain). The bench runs

    torchlint verify train.py --keep --unsafe-fixes --device cpu --repeat K --json REPORT.json

there, prints verify's own output, then which fixes were kept and dropped (with verify's reasons), the
kept variant's speed-up with its interval and losses, the diff written, and the targets: TL201 (workers)
kept; TL202 (pinned memory, which needs a GPU) dropped, and every fix that did not pay alone on this CPU
dropped (compile, TL101, and bf16 autocast, TL301, are measured: on a quiet 2-core CPU compiling paid
1.13x alone and on top of the workers, autocast 1.01x); the kept variant at least 1.5x with agreeing
losses.

This is a benchmark, not a test: it prints figures and asserts only that the run happened. The figures
depend on the machine's load (printed): measure on a quiet machine, or raise --repeat.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TORCHLINT = [sys.executable, "-m", "torchlint"]
TARGET_SPEEDUP = 1.5
KEPT = {"TL201"}  # workers: what a loader-bound script needs
DROPPED_ON_A_CPU = {"TL202"}  # pinned memory: nothing to pin without a GPU
PAID = ("faster", "less memory")

SCRIPT = '''\
"""Keyword spotting on synthetic recordings: every clip is "decoded" and augmented on the fly, on the CPU."""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SyntheticClips(Dataset):
    """Stand-in for compressed audio on network storage: each clip is fetched (a read's latency), then
    synthesised from its index (the decode), speed-perturbed, mixed with noise, turned into a log-mel
    spectrogram and masked (SpecAugment)."""

    def __init__(self, length, classes=4, rate=16000, seconds=1.0, mels=40, train=True, seed=0, fetch=0.003):
        self.length, self.classes, self.rate, self.train, self.seed = length, classes, rate, train, seed
        self.fetch = fetch
        self.samples = int(rate * seconds)
        self.window = torch.hann_window(400)
        bins = torch.linspace(0, 1, 201)
        centers = torch.linspace(0, 1, mels + 2)
        width = centers[1] - centers[0]
        self.filters = (1 - (bins[None, :] - centers[1:-1, None]).abs() / width).clamp_min(0)

    def __len__(self):
        return self.length

    def _decode(self, idx):
        time.sleep(self.fetch)  # the latency of reading the file
        g = torch.Generator().manual_seed(self.seed * 100_003 + idx)
        label = idx % self.classes
        t = torch.arange(self.samples) / self.rate
        pitch = 180.0 * (label + 1) * (1 + 0.05 * torch.rand((), generator=g))
        wave = torch.zeros(self.samples)
        for harmonic in range(1, 17):
            phase = 2 * math.pi * torch.rand((), generator=g)
            wave += torch.sin(2 * math.pi * pitch * harmonic * t + phase) / harmonic
        envelope = torch.sigmoid(20 * (t - 0.2)) * torch.sigmoid(20 * (0.8 - t))
        return wave * envelope + 0.05 * torch.randn(self.samples, generator=g), label

    def __getitem__(self, idx):
        wave, label = self._decode(idx)
        if self.train:
            speed = 0.9 + 0.2 * torch.rand(())
            stretched = F.interpolate(wave[None, None], scale_factor=float(speed), mode="linear")[0, 0]
            wave = F.pad(stretched, (0, max(0, self.samples - stretched.numel())))[: self.samples]
            wave = wave * (0.5 + torch.rand(())) + 0.02 * torch.randn(self.samples)
        spec = torch.stft(wave, 400, hop_length=160, window=self.window, return_complex=True).abs().pow(2)
        mel = (self.filters @ spec).clamp_min(1e-6).log()
        if self.train:
            f0, t0 = torch.randint(0, mel.shape[0] - 8, ()), torch.randint(0, mel.shape[1] - 20, ())
            mel[f0 : f0 + 8] = 0
            mel[:, t0 : t0 + 20] = 0
        return (mel - mel.mean()) / (mel.std() + 1e-5), label


class KeywordNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 5, stride=2, padding=2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x[:, None]), 1), 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--clips", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_set = SyntheticClips(args.clips)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    model = KeywordNet(train_set.classes).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        model.train()
        for clips, labels in loader:
            clips, labels = clips.to(device), labels.to(device)
            loss = F.cross_entropy(model(clips), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
'''


def run(options: argparse.Namespace, folder: Path) -> tuple[str, dict | None]:
    (folder / "pyproject.toml").write_text("[project]\nname = 'keyword-spotting'\n", encoding="utf-8")
    (folder / "train.py").write_text(SCRIPT, encoding="utf-8")
    command = [
        *TORCHLINT,
        *("verify", "train.py", "--keep", "--unsafe-fixes", "--device", "cpu"),
        *("--repeat", str(options.repeat), "--steps", str(options.steps), "--warmup", str(options.warmup)),
        *(("--threads", str(options.threads)) if options.threads else ()),
        *("--json", "report.json"),
    ]
    print("$ " + " ".join(["torchlint", *command[len(TORCHLINT) :]]).replace("report.json", "REPORT.json"))
    done = subprocess.run(command, cwd=folder, stdout=subprocess.PIPE, text=True)
    print(done.stdout)
    report_path = folder / "report.json"
    if not report_path.is_file():
        print(f"no report (exit {done.returncode})")
        return "", None
    written = (folder / "train.py").read_text(encoding="utf-8")
    diff = difflib.unified_diff(
        SCRIPT.splitlines(keepends=True), written.splitlines(keepends=True), "a/train.py", "b/train.py"
    )
    return "".join(diff), json.loads(report_path.read_text(encoding="utf-8"))


def summarise(report: dict, diff: str) -> str:
    load = "/".join(f"{x:.2f}" for x in report["machine"]["load_before"])
    lines = [
        f"device {report['device']}, {report['settings']['threads']} intra-op thread(s), "
        f"{report['machine']['cpus']} CPUs, load {load} before, {report['settings']['repeat']} repeat(s)"
    ]
    lines += [f"  kept    {c['code']} line {c['location']['row']}: {c['reason']}" for c in report["kept"]]
    lines += [f"  dropped {c['code']} line {c['location']['row']}: {c['reason']}" for c in report["dropped"]]
    kept = next((v for v in report["variants"] if v["kind"] == "kept"), None)
    speed = (kept or {}).get("speed") or {}
    speedup = speed.get("speedup") or 0.0
    interval = speed.get("interval95") or speed.get("repeats_range")
    losses = ((kept or {}).get("losses") or {}).get("verdict", "-")
    lines.append(
        f"  kept variant: {speedup:.2f}x"
        + (f" [{interval[0]:.2f}-{interval[1]:.2f}]" if interval else "")
        + f", losses {losses}, verdict {(kept or {}).get('verdict', 'not run')}; written: {report['written']}"
    )
    lines.append("  diff written:\n" + "".join(f"    {line}" for line in diff.splitlines(keepends=True)))
    kept_codes = {c["code"] for c in report["kept"]}
    dropped_codes = {c["code"] for c in report["dropped"]}
    unpaid = {
        v["fixes"][0]["code"] for v in report["variants"] if v["kind"] == "each" and v["verdict"] not in PAID
    }
    targets = [
        (f"{', '.join(sorted(KEPT))} kept", KEPT <= kept_codes),
        (f"{', '.join(sorted(DROPPED_ON_A_CPU))} dropped", DROPPED_ON_A_CPU <= dropped_codes),
        (f"the fixes that did not pay alone dropped ({', '.join(sorted(unpaid))})", unpaid <= dropped_codes),
        (
            f"kept variant >= {TARGET_SPEEDUP}x with agreeing losses",
            speedup >= TARGET_SPEEDUP and losses == "agree",
        ),
    ]
    lines += [f"  target: {name}: {'met' if met else 'NOT met'}" for name, met in targets]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verify-keep-") as scratch:
        diff, report = run(options, Path(scratch))
    print("== summary")
    print(summarise(report, diff) if report else "the run gave no report")
    print(f"(loadavg now: {' '.join(f'{x:.2f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
