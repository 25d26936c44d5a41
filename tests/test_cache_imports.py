"""The import scan's memory between runs: a file whose bytes did not change is not parsed again, and what the
cache gives back is what parsing gives."""

from __future__ import annotations

import json

import pytest

import torchlint.index.project as project_module
from torchlint.cache.imports import ImportsCache
from torchlint.index.project import Project

FILES = {
    "data.py": "from torch.utils.data import DataLoader\n\ndef build(ds):\n    return DataLoader(ds)\n",
    "train.py": "from data import build as make\nimport pkg.sub\n",
    "pkg/__init__.py": "from .sub import *\n",
    "pkg/sub.py": "def f():\n    import data\n",
    "broken.py": "import data\ndef (:\n",
}


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "project"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "pyproject.toml").write_text("")
    return root


@pytest.fixture
def parses(monkeypatch) -> list[int]:
    """One entry per file the scan parses with `ast`."""
    seen: list[int] = []
    original = project_module._exports_of

    def counting(data):
        seen.append(len(data))
        return original(data)

    monkeypatch.setattr(project_module, "_exports_of", counting)
    return seen


def _importers(root, cache):
    """Who imports each file, in one run (its end stores what the run found)."""
    project = Project(root, summaries=cache)
    found = {
        file.relative_to(root).as_posix(): sorted(p.name for p in project.importers_of(file))
        for file in project.python_files()
    }
    project.flush(final=True)
    return found


def test_an_unchanged_file_is_not_parsed_again_and_the_answers_are_the_same(tree, parses):
    cache_dir = tree / ".torchlint_cache"
    fresh = _importers(tree, None)
    parses.clear()
    assert _importers(tree, ImportsCache(cache_dir, tree)) == fresh
    # Every file whose text names another's module (the broken one too); data.py names none.
    assert len(parses) == len(FILES) - 1
    parses.clear()
    assert _importers(tree, ImportsCache(cache_dir, tree)) == fresh
    assert len(parses) == 1  # only broken.py, which CPython cannot parse and the cache does not keep
    assert fresh["data.py"] == ["sub.py", "train.py"]


def test_an_edited_file_is_parsed_again_and_the_entry_keeps_only_current_files(tree, parses):
    cache_dir = tree / ".torchlint_cache"
    _importers(tree, ImportsCache(cache_dir, tree))
    (tree / "train.py").write_text("import os\n")
    parses.clear()
    assert _importers(tree, ImportsCache(cache_dir, tree))["data.py"] == ["sub.py"]
    assert len(parses) == 1  # broken.py: train.py no longer names a project module
    (entry,) = (cache_dir / "index").glob("imports-*.json")
    assert len(json.loads(entry.read_text())["files"]) == 2  # sub.py and pkg/__init__.py, as they are now


def test_a_tampered_or_corrupted_entry_is_ignored(tree, parses):
    cache_dir = tree / ".torchlint_cache"
    _importers(tree, ImportsCache(cache_dir, tree))
    (entry,) = (cache_dir / "index").glob("imports-*.json")
    stored = json.loads(entry.read_text())
    stored["files"] = {key: [["os"], []] for key in stored["files"]}  # the seal no longer matches
    entry.write_text(json.dumps(stored))
    parses.clear()
    assert _importers(tree, ImportsCache(cache_dir, tree))["data.py"] == ["sub.py", "train.py"]
    assert len(parses) == len(FILES) - 1
    entry.write_text("{not json")
    parses.clear()
    assert _importers(tree, ImportsCache(cache_dir, tree))["data.py"] == ["sub.py", "train.py"]
    assert len(parses) == len(FILES) - 1


def test_aliases_come_back_from_the_cache(tree, parses):
    (tree / "other.py").write_text("from train import make as create\ncreate()\n")
    cache_dir = tree / ".torchlint_cache"
    first = Project(tree, summaries=ImportsCache(cache_dir, tree))
    first.importers_of(tree / "data.py")
    first.flush(final=True)
    parses.clear()
    project = Project(tree, summaries=ImportsCache(cache_dir, tree))
    assert project.may_name(tree / "other.py", {"build"})  # build -> make (train.py) -> create
    assert not project.may_name(tree / "pkg/sub.py", {"build"})
    assert len(parses) == 1  # broken.py only


def test_only_the_files_that_could_import_a_module_are_parsed_for_its_importers(tmp_path, parses):
    """Who imports `data.py`: only files whose bytes hold `data` can (a package's `__init__.py` also has the
    bare `from . import x` of its modules); the others are read, never parsed."""
    files = {
        "data.py": "def build():\n    pass\n",
        "train.py": "import data\n",
        "report.py": "import os\n" + "x = 1\n" * 50,
        "pkg/__init__.py": "",
        "pkg/mod.py": "from . import other\n",
        "pkg/other.py": "y = 2\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "pyproject.toml").write_text("")
    project = Project(tmp_path)
    assert [p.name for p in project.importers_of(tmp_path / "data.py")] == ["train.py"]
    assert parses == [len(files["train.py"])]
    assert [p.name for p in project.importers_of(tmp_path / "pkg" / "__init__.py")] == ["mod.py"]
    assert sorted(parses) == sorted([len(files["train.py"]), len(files["pkg/mod.py"])])


TRAINING = {
    "blocks.py": "import torch.nn as nn\n\nclass Block(nn.Module):\n    def forward(self, x):\n        return x\n",
    "model.py": (
        "import torch.nn as nn\nfrom blocks import Block as Layer\n\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.layers = nn.ModuleList([Layer() for _ in range(24)])\n\n"
        "    def forward(self, x):\n        for layer in self.layers:\n            x = layer(x)\n        return x\n"
    ),
    "engine.py": (
        "def fit(model, loader, optimizer):\n    for x, y in loader:\n        loss = model(x).sum()\n"
        "        loss.backward()\n        optimizer.step()\n"
    ),
    "train.py": (
        "import torch\nfrom torch.utils.data import DataLoader\nfrom model import Net\nfrom engine import fit\n\n"
        "model = Net().cuda()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "fit(model, DataLoader(range(8)), optimizer)\n"
    ),
}


def _training_project(root):
    for name, text in TRAINING.items():
        (root / name).write_text(text)
    for index in range(6):  # enough files for two worker processes to share
        (root / f"tool{index}.py").write_text(
            f"from model import Net\nfrom engine import fit\n\nTOOL = {index}\n"
        )


def _stored(root) -> dict:
    (entry,) = (root / ".torchlint_cache" / "index").glob("imports-*.json")
    return json.loads(entry.read_text())["files"]


def test_a_run_writes_the_store_once_however_many_questions_it_asks(project, monkeypatch):
    """Each write holds the whole project's exports: a one-file check after an edit of yolov5's
    `models/common.py` wrote it 20 times (200 ms), once per question that found something new."""
    from click.testing import CliRunner

    import torchlint.cache.imports as imports_module
    from torchlint.cli import main

    _training_project(project)
    writes = []
    original = imports_module.write_entry
    monkeypatch.setattr(imports_module, "write_entry", lambda *args: writes.append(args) or original(*args))
    result = CliRunner().invoke(main, ["-j", "1", "--exit-zero", "model.py", "train.py"])
    assert result.exit_code == 0, result.output
    assert len(writes) == 1
    assert len(_stored(project)) > 3


def test_the_store_of_a_run_in_two_processes_holds_what_each_found(project, tmp_path_factory):
    """The workers hand their exports to the parent, which writes them: each worker writing its own kept
    only the last writer's, and the next run parsed the others' files again."""
    # Two processes store at least what one stores (the files either one checked itself read no export of
    # theirs, and a file read by one worker and checked by another is stored, where one process has none).
    from click.testing import CliRunner

    from torchlint.cli import main

    _training_project(project)
    alone = tmp_path_factory.mktemp("alone")
    (alone / "pyproject.toml").write_text((project / "pyproject.toml").read_text())
    _training_project(alone)
    runner = CliRunner()
    two = runner.invoke(main, ["-j", "2", "--exit-zero", "--show-phase2-count", "."])
    assert two.stderr.endswith(", 2 processes\n")
    one = runner.invoke(main, ["-j", "1", "--exit-zero", "--show-phase2-count", str(alone)])
    assert one.stderr.endswith(", 1 process\n")
    assert two.stdout == one.stdout.replace(f"{alone}/", "")
    assert set(_stored(project)) >= set(_stored(alone))


def test_workers_hand_their_exports_to_the_parent_which_writes_them_together(tree):
    from torchlint.facts.torch.exports import export_of_bytes

    cache_dir = tree / ".torchlint_cache"
    contents = {name: (tree / name).read_bytes() for name in ("data.py", "train.py", "pkg/sub.py")}
    first, second = ImportsCache(cache_dir, tree), ImportsCache(cache_dir, tree)
    first.hands_over = second.hands_over = True
    first.put(contents["data.py"], export_of_bytes(contents["data.py"]))
    second.put(contents["train.py"], export_of_bytes(contents["train.py"]))
    first.save(contents.values())
    second.save(contents.values())
    assert not (cache_dir / "index").exists()  # a worker writes nothing
    parent = ImportsCache(cache_dir, tree)
    parent.receive(first.handover())
    parent.receive(second.handover())
    assert first.handover() == {}  # handed over once
    parent.save(contents.values())
    assert len(_stored(tree)) == 2
    fresh = ImportsCache(cache_dir, tree)
    assert fresh.get(contents["data.py"]) == export_of_bytes(contents["data.py"])
    assert fresh.get(contents["train.py"]) == export_of_bytes(contents["train.py"])
