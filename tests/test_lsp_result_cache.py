"""The Language Server answers an opened file from the result cache (issue 29, the editor first).

A project checked before (by `torchlint check`, the pre-commit hook, or an earlier editor session) has its
findings in `.torchlint_cache`: opening one of its files shows them without analysing it again, as long as
the buffer is the file on disk and nothing its findings depend on changed (an unsaved buffer of another file
included). What the server checks itself goes into the same cache, in the command line's words.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from torchlint.cli import main
from torchlint.lsp.checker import Checker
from torchlint.lsp.documents import Buffer, BufferFileSystem

ENGINE = """\
import torch


def train_one_epoch(model, loader, optimizer):
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
TRAIN = """\
import torch
from torch.utils.data import DataLoader

from engine import train_one_epoch

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(dataset, batch_size=32, num_workers=4)
for epoch in range(10):
    train_one_epoch(model, loader, optimizer)
"""


@pytest.fixture
def checked_project(project, monkeypatch):
    """A project `torchlint check` has run on, so its result cache holds train.py's findings."""
    monkeypatch.delenv("TORCHLINT_NO_CACHE", raising=False)
    monkeypatch.delenv("TORCHLINT_CACHE_DIR", raising=False)
    (project / "engine.py").write_text(ENGINE)
    (project / "train.py").write_text(TRAIN)
    CliRunner().invoke(main, ["check", "."], catch_exceptions=False)
    return project


def opened(checker: Checker, path, text: str | None = None) -> Buffer:
    buffer = Buffer(path.as_uri(), 1, path.read_text() if text is None else text, path)
    checker.fs.open(buffer)
    return buffer


def findings(checked) -> list[tuple[str, int, int]]:
    return [(d.code, d.start, d.end) for d in checked.diagnostics]


def fresh_findings(project, path, text: str | None = None) -> list[tuple[str, int, int]]:
    """What a server with no cache finds (the truth the cached answer must equal)."""
    import os

    os.environ["TORCHLINT_NO_CACHE"] = "1"
    try:
        checker = Checker(BufferFileSystem(), project)
        return findings(checker.check(opened(checker, path, text)))
    finally:
        del os.environ["TORCHLINT_NO_CACHE"]


def test_opening_a_file_checked_before_answers_from_the_cache_with_the_same_findings(checked_project):
    checker = Checker(BufferFileSystem(), checked_project)
    buffer = opened(checker, checked_project / "train.py")
    checked = checker.check(buffer)
    assert checker.from_cache == 1
    assert findings(checked) == fresh_findings(checked_project, checked_project / "train.py")
    assert {d.code for d in checked.diagnostics} >= {"TL101", "TL202"}
    assert {d.path for d in checked.diagnostics} == {buffer.display}


def test_a_buffer_that_differs_from_its_file_is_analysed(checked_project):
    checker = Checker(BufferFileSystem(), checked_project)
    edited = TRAIN.replace("num_workers=4", "num_workers=4, pin_memory=True")
    checked = checker.check(opened(checker, checked_project / "train.py", edited))
    assert checker.from_cache == 0
    assert "TL202" not in {d.code for d in checked.diagnostics}


def test_an_unsaved_edit_of_a_file_the_findings_depend_on_is_seen(checked_project):
    """train.py's findings come from engine.py's loop: an unsaved engine.py buffer invalidates the entry."""
    checker = Checker(BufferFileSystem(), checked_project)
    opened(checker, checked_project / "engine.py", ENGINE.replace("optimizer.step()", "pass"))
    checked = checker.check(opened(checker, checked_project / "train.py"))
    assert checker.from_cache == 0
    assert findings(checked) != fresh_findings(checked_project, checked_project / "train.py")


def test_no_cache_in_the_environment_turns_it_off(checked_project, monkeypatch):
    monkeypatch.setenv("TORCHLINT_NO_CACHE", "1")
    checker = Checker(BufferFileSystem(), checked_project)
    checker.check(opened(checker, checked_project / "train.py"))
    assert checker.from_cache == 0


def test_what_the_server_checks_is_stored_for_the_next_session_and_the_command_line(project, monkeypatch):
    monkeypatch.delenv("TORCHLINT_NO_CACHE", raising=False)
    (project / "engine.py").write_text(ENGINE)
    (project / "train.py").write_text(TRAIN)
    first = Checker(BufferFileSystem(), project)
    first.check(opened(first, project / "train.py"))
    assert first.from_cache == 0
    second = Checker(BufferFileSystem(), project)
    second.check(opened(second, project / "train.py"))
    assert second.from_cache == 1
    cached = CliRunner().invoke(main, ["check", "--output-format", "concise", "train.py"])
    fresh = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", "train.py"])
    assert cached.output == fresh.output
    assert cached.output.startswith("train.py:")
