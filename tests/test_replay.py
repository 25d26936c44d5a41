"""A repeated check run answers from its record only while nothing it read has changed (torchlint.cache.replay)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner
from support import AMP, FIXTURES, check_replayed

from torchlint.cli import main

TRAIN = (
    "import torch\nfrom torch.utils.data import DataLoader\nfrom engine import train_one_epoch\n"
    "model.cuda()\nloader = DataLoader(ds, num_workers=2)\nfor epoch in range(3):\n"
    "    train_one_epoch(model, loader, opt)\n"
)
# bfloat16 autocast around the forward: train.py moves the model to the GPU, which TL301 judges this loop by
ENGINE = (
    "import torch\n\ndef train_one_epoch(model, loader, opt):\n    for x in loader:\n"
    '        with torch.autocast("cuda", dtype=torch.bfloat16):\n            loss = model(x)\n'
    "        loss.backward()\n        opt.step()\n"
)
check = check_replayed


@pytest.fixture
def project(project):
    """The shared empty project, with a training script whose loop lives in engine.py."""
    (project / "engine.py").write_text(ENGINE)
    (project / "train.py").write_text(TRAIN)
    return project


def test_a_repeated_run_replays_exactly_what_it_printed(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES, tmp_path / "fixtures", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'copy'\n")
    monkeypatch.chdir(tmp_path)
    replays = []
    for output_format in ("full", "json", "concise"):
        fresh = CliRunner().invoke(main, ["--output-format", output_format, "--no-cache", "fixtures"])
        first = check("--output-format", output_format, "fixtures")
        again = check("--output-format", output_format, "fixtures")
        assert first[:2] == again[:2] == (fresh.exit_code, fresh.stdout) == (1, fresh.stdout)
        replays.append((first[2], again[2]))
    assert replays == [(False, True), (True, True), (True, True)]
    records = list((tmp_path / ".torchlint_cache" / "runs").glob("*.json"))
    assert len(records) == 1  # the output format is not part of the record's key


def test_editing_a_checked_file_is_seen(project):
    assert check(".")[0] == 1
    (project / "train.py").write_text("x = 1\n")
    assert check(".") == (0, "All checks passed!\n", False)
    assert check(".")[2]


def test_an_edit_that_keeps_size_and_mtime_is_seen(project):
    """The ctime still moves: an editor or `rsync -t` restoring the mtime cannot hide an edit."""
    check(".")
    before = os.stat(project / "train.py")
    (project / "train.py").write_text(TRAIN.replace("num_workers=2", "num_workers=0"))
    os.utime(project / "train.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    code, out, replayed = check("--output-format", "json", ".")
    assert not replayed and [d["code"] for d in json.loads(out)] == ["TL201", "TL202"]


def test_touching_a_file_still_replays(project):
    check(".")
    os.utime(project / "train.py")
    assert check(".")[2]


def test_a_new_file_in_a_checked_folder_is_seen(project):
    check(".")
    (project / "amp.py").write_text(AMP)
    code, out, replayed = check("--output-format", "concise", ".")
    assert not replayed and "amp.py:2:6: TL303" in out


def test_editing_a_file_the_analysis_consulted_is_seen(project):
    """Only train.py is checked, but its training loop lives in engine.py."""
    assert check("--output-format", "concise", "train.py")[1].count("TL20") == 2
    (project / "engine.py").write_text("def train_one_epoch(model, loader, opt):\n    pass\n")
    assert check("train.py") == (0, "All checks passed!\n", False)


def test_a_new_config_is_seen(project):
    check(".")
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n[tool.torchlint]\nignore = ['TL2']\n")
    assert check(".") == (0, "All checks passed!\n", False)


def test_a_gitignore_edit_is_seen(project):
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("")
    assert check(".")[0] == 1
    (project / ".gitignore").write_text("train.py\n")
    assert check(".") == (0, "All checks passed!\n", False)


def test_other_options_are_other_records(project):
    check(".")
    assert check("--select", "TL3", ".") == (0, "All checks passed!\n", False)
    assert check(".")[2]


def test_a_corrupted_record_is_ignored_and_rewritten(project):
    first = check(".")
    for record in (project / ".torchlint_cache" / "runs").glob("*.json"):
        record.write_text('{"format": 1, "observed": [')
    assert check(".") == (*first[:2], False)
    assert check(".") == (*first[:2], True)


def test_a_cache_the_user_s_runs_did_not_write_is_never_believed(project):
    """Reliability S4: a repository can commit `.torchlint_cache/`. A record or a result entry forged to
    say "no findings" (valid JSON, the right shape, the file's real content hash) is a cache miss."""
    from torchlint.cache.digest import content_hash

    first = check(".")
    assert first[0] == 1
    cache = project / ".torchlint_cache"
    outcome = {
        "diagnostics": [],
        "texts": {},
        "warnings": [],
        "files_checked": 2,
        "fixable": 0,
        "hidden_fixes": 0,
    }
    for record in (cache / "runs").glob("*.json"):
        forged = {**json.loads(record.read_text()), "observed": {}, "outcome": outcome}
        forged.pop("seal")
        record.write_text(json.dumps(forged))
    for entry in (cache / "results").glob("*.json"):
        consulted = {
            str(project / name): content_hash((project / name).read_bytes()) for name in ("train.py",)
        }
        entry.write_text(json.dumps({"consulted": consulted, "file_list": None, "diagnostics": []}))
    assert check(".") == (*first[:2], False)


def test_fix_diff_and_no_cache_never_replay_nor_record(project):
    (project / "amp.py").write_text(AMP)
    check("--no-cache", ".")
    assert not (project / ".torchlint_cache").exists()
    check(".")
    code, out, replayed = check("--diff", ".")
    assert not replayed and "torch.amp.autocast" in out
    code, out, replayed = check("--fix", ".")
    assert not replayed and "torch.amp.autocast" in (project / "amp.py").read_text()


def test_runs_with_unreadable_files_are_not_recorded(project):
    (project / "bad.py").write_bytes(b"x = 1\0\n")
    assert check(".")[0] == 1
    assert not check(".")[2]


def test_what_worker_processes_read_is_part_of_the_record(project):
    """With --jobs 2 the checks run in worker processes; engine.py is read only there."""
    (project / "many").mkdir()
    for index in range(16):
        (project / "many" / f"f{index}.py").write_text(AMP)
    first = check("--jobs", "2", "--output-format", "concise", "many", "train.py")
    assert first[1].count("TL303") == 16 and first[1].count("TL20") == 2
    assert check("--jobs", "2", "--output-format", "concise", "many", "train.py")[2]
    (project / "engine.py").write_text("def train_one_epoch(model, loader, opt):\n    pass\n")
    code, out, replayed = check("--jobs", "2", "--output-format", "concise", "many", "train.py")
    assert not replayed and out.count("TL303") == 16 and "TL20" not in out


def test_only_the_most_recent_records_are_kept(project, monkeypatch):
    monkeypatch.setattr("torchlint.cache.replay.MAX_RECORDS", 3)
    for code in ("TL201", "TL202", "TL203", "TL205", "TL3"):
        check("--select", code, ".")
    assert len(list((project / ".torchlint_cache" / "runs").glob("*.json"))) == 3
    assert check("--select", "TL3", ".")[2] and not check("--select", "TL201", ".")[2]


def test_a_symlinked_cache_is_never_written_pruned_or_read(tmp_path, monkeypatch):
    """Reliability repros D2 and D3: a repository can commit `.torchlint_cache` (or its `runs`) as a symlink
    to anywhere; the run then goes without a cache and leaves the target alone."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (project / "train.py").write_text(AMP)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / ".gitignore").write_text("secrets/\n")
    for index in range(70):
        (victim / f"keep{index}.json").write_text("{}")
    monkeypatch.chdir(project)
    for link in (project / ".torchlint_cache",):
        link.symlink_to(victim)
        for _ in range(2):
            result = CliRunner().invoke(main, ["check", "."])
            assert result.exit_code == 1 and "TL303" in result.output
        assert sorted(p.name for p in victim.iterdir()) == sorted(
            [".gitignore", *(f"keep{index}.json" for index in range(70))]
        )
        assert (victim / ".gitignore").read_text() == "secrets/\n"
        link.unlink()
    (project / ".torchlint_cache").mkdir()
    (project / ".torchlint_cache" / "runs").symlink_to(victim)
    for _ in range(2):
        assert CliRunner().invoke(main, ["check", "."]).exit_code == 1
    assert len(list(victim.glob("*.json"))) == 70
