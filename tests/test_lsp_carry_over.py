"""The Language Server keeps the project of its last full check for the next one (`Checker._full_linter`,
`Project.carry_over`): the facts of other files, and the answers their analyses keep, stay where no file
they read has changed since; anything else starts afresh. Whatever is kept, each check's findings must be
those of a server that starts from nothing, after every kind of edit: inside a statement of the buffer,
of another open buffer whose findings depend on it, a new import, a closed buffer."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import record_calls
from test_lsp_result_cache import ENGINE

from torchlint.index.project import Project
from torchlint.lsp.checker import Checker
from torchlint.lsp.documents import Buffer, BufferFileSystem

MODEL = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)
"""
DATA = """\
from torch.utils.data import DataLoader


def build_loader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)
"""
TRAIN = """\
import argparse

import torch

from data import build_loader
from engine import train_one_epoch
from model import Net

parser = argparse.ArgumentParser()
parser.add_argument("--depth", type=int, default=24)
args = parser.parse_args()

model = Net(512, args.depth).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = build_loader(dataset, 64)
for epoch in range(10):
    train_one_epoch(model, loader, optimizer)
"""
FILES = {"model.py": MODEL, "data.py": DATA, "engine.py": ENGINE, "train.py": TRAIN}

# (the file edited, what is replaced, by what): each edit of another file changes the findings of the
# files that read it, and the last two change a file's statements (a new import, a new function).
CHECKPOINTED = "torch.utils.checkpoint.checkpoint(model, x, use_reentrant=False)"
EDITS = [
    ("train.py", "lr=1e-3", "lr=3e-4"),  # inside a statement: no other file reads train.py's optimizer
    # model.py asks train.py (kept) about the engine its model is handed to: TL401 goes, then comes back
    ("engine.py", "model(x)", CHECKPOINTED),
    ("engine.py", CHECKPOINTED, "model(x)"),
    ("train.py", "Net(512, args.depth)", "Net(512, 4)"),  # a small fixed depth: model.py's TL401 goes
    ("data.py", "shuffle=True", "shuffle=True, num_workers=4, pin_memory=True"),
    ("model.py", "for block in self.blocks:\n            x = block(x)", "x = self.blocks[0](x)"),
    ("model.py", "x = self.blocks[0](x)", "for block in self.blocks:\n            x = block(x)"),
    ("train.py", "Net(512, 4)", "Net(512, args.depth)"),  # TL401 back
    ("data.py", "from torch.utils", "import os\nfrom torch.utils"),
    ("model.py", "class Net(nn.Module):", "def depth_of(n):\n    return n\n\n\nclass Net(nn.Module):"),
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHLINT_NO_CACHE", "1")
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["ALL", "TL401"]\n')
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def _open(checker: Checker, path: Path, version: int, text: str) -> Buffer:
    buffer = Buffer(path.as_uri(), version, text, path)
    checker.fs.open(buffer)
    return buffer


def _findings(checker: Checker, buffer: Buffer) -> list[tuple[str, int, str]]:
    return [(d.code, d.start, d.message) for d in checker.check(buffer).diagnostics]


def _fresh(root: Path, texts: dict[str, str], name: str) -> list[tuple[str, int, str]]:
    """What a server that starts from nothing finds in `name`, the buffers holding `texts`."""
    checker = Checker(BufferFileSystem(), root)
    buffers = {other: _open(checker, root / other, 1, text) for other, text in texts.items()}
    return _findings(checker, buffers[name])


def test_every_check_finds_what_a_new_server_finds_after_each_kind_of_edit(project):
    checker = Checker(BufferFileSystem(), project)
    texts = dict(FILES)
    buffers = {name: _open(checker, project / name, 1, text) for name, text in texts.items()}
    seen = {name: _findings(checker, buffer) for name, buffer in buffers.items()}
    deep = [any(code == "TL401" for code, _, _ in seen["model.py"])]
    for version, (edited, old, new) in enumerate(EDITS, 2):
        assert old in texts[edited]
        texts[edited] = texts[edited].replace(old, new)
        buffers[edited] = _open(checker, project / edited, version, texts[edited])
        for name in (edited, *(other for other in texts if other != edited)):
            checker.drop(buffers[name].uri)
            found = _findings(checker, buffers[name])
            assert found == _fresh(project, texts, name), (edited, new, name)
            seen[name] = found
        deep.append(any(code == "TL401" for code, _, _ in seen["model.py"]))
    # model.py's blocks: trained and not checkpointed, then checkpointed by the engine, then sized by a
    # literal, then not applied by a loop, then deep again
    assert deep == [True, True, False, True, False, False, False, False, True, True, True]


def test_a_closed_buffer_is_read_from_disk_again(project):
    checker = Checker(BufferFileSystem(), project)
    _open(checker, project / "train.py", 1, TRAIN.replace("Net(512, args.depth)", "Net(512, 4)"))
    model = _open(checker, project / "model.py", 1, MODEL)
    assert not any(code == "TL401" for code, _, _ in _findings(checker, model))
    checker.fs.close(project / "train.py")
    checker.drop(model.uri)
    assert any(code == "TL401" for code, _, _ in _findings(checker, model))


def test_an_edit_inside_a_statement_builds_only_what_read_the_buffer(project, monkeypatch):
    """Editing train.py's learning rate: model.py and data.py read nothing of train.py while train.py's
    questions reach them, so their facts are not built again."""
    checker = Checker(BufferFileSystem(), project)
    _findings(checker, _open(checker, project / "train.py", 1, TRAIN))
    built = record_calls(monkeypatch, Project, "_build", lambda self, path: path.name)
    edited = _open(checker, project / "train.py", 2, TRAIN.replace("lr=1e-3", "lr=3e-4"))
    _findings(checker, edited)
    assert built == []


def test_a_new_import_starts_a_new_project(project, monkeypatch):
    checker = Checker(BufferFileSystem(), project)
    _findings(checker, _open(checker, project / "train.py", 1, TRAIN))
    made = record_calls(monkeypatch, Project, "__init__", lambda self, *args, **kwargs: self)
    edited = _open(checker, project / "train.py", 2, "import os\n" + TRAIN)
    _findings(checker, edited)
    assert len(made) == 1


# engine.py keeps a running mean of the loss in a class of meters.py, whose code its analysis reads from
# meters.py's export (what `meter.update(...)` may run: no backward pass, no step).
METERS = """\
class Meter:
    def __init__(self):
        self.total = 0.0

    def update(self, value):
        self.total += value * 1.0
"""
METERED = (
    ENGINE.replace("import torch\n", "import torch\n\nfrom meters import Meter\n", 1)
    .replace("    for x, y in loader:\n", "    meter = Meter()\n    for x, y in loader:\n")
    .replace("        optimizer.step()\n", "        optimizer.step()\n        meter.update(loss.detach())\n")
)
METERED_FILES = {**FILES, "engine.py": METERED, "meters.py": METERS}


def _after_meters_edit(project: Path, monkeypatch, meters: str) -> tuple[list[str], list, list]:
    """train.py checked, then meters.py edited and train.py checked again: (the other files built again,
    the findings, a new server's)."""
    checker = Checker(BufferFileSystem(), project)
    for name, text in METERED_FILES.items():
        (project / name).write_text(text)
    _findings(checker, _open(checker, project / "train.py", 1, TRAIN))
    built = record_calls(monkeypatch, Project, "_build", lambda self, path: path.name)
    _open(checker, project / "meters.py", 2, meters)
    found = _findings(checker, _open(checker, project / "train.py", 2, TRAIN + "\n"))
    texts = {**METERED_FILES, "meters.py": meters, "train.py": TRAIN + "\n"}
    return list(built), found, _fresh(project, texts, "train.py")


def test_what_read_only_the_edited_files_export_is_kept(project, monkeypatch):
    """An edit inside a statement of meters.py that leaves its export as it was (a constant): engine.py,
    which trains train.py's model and read only that export, keeps its facts, and so does model.py."""
    built, found, fresh = _after_meters_edit(project, monkeypatch, METERS.replace("* 1.0", "* 0.5"))
    assert built == []
    assert found == fresh
    assert any(code == "TL101" for code, _, _ in found)


def test_what_read_an_export_the_edit_changed_is_made_again(project, monkeypatch):
    """`update` now calls a function: what engine.py read of meters.py's export is not what it says now,
    so engine.py is made again."""
    built, found, fresh = _after_meters_edit(
        project, monkeypatch, METERS.replace("value * 1.0", "float(value)")
    )
    assert built == ["engine.py"]
    assert found == fresh


def test_what_was_drawn_from_an_export_the_edit_changed_is_drawn_again(project):
    """train.py's loop is handed to an engine that neither steps nor runs a backward pass yet (read from
    engine.py's export: nothing is trained); once the engine's loop gains both, train.py's model is
    trained, as a new server finds."""
    checker = Checker(BufferFileSystem(), project)
    idle = ENGINE.replace("        loss.backward()\n", "").replace("        optimizer.step()\n", "")
    _open(checker, project / "engine.py", 1, idle)
    for name in ("model.py", "data.py"):
        _open(checker, project / name, 1, FILES[name])
    before = _findings(checker, _open(checker, project / "train.py", 1, TRAIN))
    assert not any(code == "TL101" for code, _, _ in before)
    _open(checker, project / "engine.py", 2, ENGINE)
    found = _findings(checker, _open(checker, project / "train.py", 2, TRAIN + "\n"))
    assert any(code == "TL101" for code, _, _ in found)
    assert found == _fresh(project, {**FILES, "train.py": TRAIN + "\n"}, "train.py")


def test_a_keystroke_parses_the_buffer_with_cpython_once(project, monkeypatch):
    """The first look's syntax check parses the edited buffer with `ast`; the carry-over compares the
    buffer's statements and code export with those before from that same tree (each was one more parse of
    the buffer at every keystroke: 17 ms of yolov5's `models/common.py`)."""
    import ast

    checker = Checker(BufferFileSystem(), project)
    for name in ("model.py", "data.py", "engine.py"):
        _open(checker, project / name, 1, FILES[name])
    _findings(checker, _open(checker, project / "train.py", 1, TRAIN))
    parsed = record_calls(monkeypatch, ast, "parse", lambda source, *args, **kwargs: len(source))
    edited = _open(checker, project / "train.py", 2, TRAIN.replace("lr=1e-3", "lr=2e-4"))  # no test's text
    assert not checker.glance(edited).complete
    found = _findings(checker, edited)
    assert parsed == [len(edited.text)]
    assert found == _fresh(project, {**FILES, "train.py": edited.text}, "train.py")


def test_a_first_look_after_an_edit_inside_statements_leaves_the_rules_that_read_other_files(
    project, monkeypatch
):
    """Those rules would be stopped again after most of their work on the buffer, which the full check
    does anew: the first look shows their last findings (where the edit left them) and runs the others.
    A new import is a new question: every rule runs in the first look again."""
    import torchlint.linter as linter_module

    checker = Checker(BufferFileSystem(), project)
    for name in ("model.py", "data.py", "engine.py"):
        _open(checker, project / name, 1, FILES[name])
    first = _open(checker, project / "train.py", 1, TRAIN)
    assert not checker.glance(first).complete
    _findings(checker, first)
    ran = record_calls(
        monkeypatch, linter_module._ToyDemo, "skips", lambda toy, rule: rule.code
    )  # each rule run
    edited = _open(checker, project / "train.py", 2, TRAIN.replace("lr=1e-3", "lr=5e-4"))
    glance = checker.glance(edited)
    in_first_look = set(ran)
    assert "TL101" not in in_first_look and "TL304" in in_first_look
    assert ("TL101", 13) in {(d.code, d.location.line) for d in glance.diagnostics}  # the last full check's
    ran.clear()
    assert _findings(checker, edited) == _fresh(project, {**FILES, "train.py": edited.text}, "train.py")
    ran.clear()
    imported = _open(checker, project / "train.py", 3, "import os\n" + edited.text)
    checker.glance(imported)
    assert "TL101" in ran


def test_a_keystroke_inside_a_function_does_not_walk_the_buffers_whole_export(project, monkeypatch):
    """The carry-over learns whether the edit changed what other files read of the buffer from the
    statements it touched (`code_exports_agree`); the buffer's whole export is walked only where those
    differ. Its findings are a new server's all the same."""
    import torchlint.facts.torch.exports as exports_module

    checker = Checker(BufferFileSystem(), project)
    for name in ("model.py", "data.py", "engine.py"):
        _open(checker, project / name, 1, FILES[name])
    _findings(checker, _open(checker, project / "train.py", 1, TRAIN))
    walked = record_calls(monkeypatch, exports_module._Exporter, "export", lambda self, tree: 1)
    edited = _open(checker, project / "train.py", 2, TRAIN.replace("lr=1e-3", "lr=7e-4"))
    checker.glance(edited)
    found = _findings(checker, edited)
    assert walked == []
    assert found == _fresh(project, {**FILES, "train.py": edited.text}, "train.py")
    called = _open(checker, project / "train.py", 3, edited.text + "print(model)\n")
    checker.glance(called)
    found = _findings(checker, called)
    assert walked == [1, 1]  # a new call: the parts differ, and the whole exports (before, after) decide
    assert found == _fresh(project, {**FILES, "train.py": called.text}, "train.py")
