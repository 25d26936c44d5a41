"""Honest verdicts (issue 30, part 2): a fix that cannot act on the measured device is `not measurable
here`, never timed noise called "faster" or "slower", even on a machine loaded by other work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

pytestmark = [pytest.mark.slow]

BURN = "while True:\n    pass\n"


def test_pinned_memory_on_a_cpu_is_not_measurable_here_under_artificial_load(tmp_path):
    pytest.importorskip("torch")
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2)]  # both cores busy
    try:
        report_path = tmp_path / "report.json"
        args = ["fixtures/verify_tiny/train.py", "--select", "TL202", "--unsafe-fixes", "--device", "cpu"]
        args += ["--steps", "8", "--warmup", "2", "--json", str(report_path), "--", "--epochs", "3"]
        done = subprocess.run(
            [sys.executable, "-m", "torchlint", "verify", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        )
    finally:
        for burner in burners:
            burner.kill()
    report = json.loads(Path(report_path).read_text())
    assert [v["verdict"] for v in report["variants"]] == ["baseline", "not measurable here"], done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not measurable here" in done.stdout
