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
    project = Project(root, summaries=cache)
    return {
        file.relative_to(root).as_posix(): sorted(p.name for p in project.importers_of(file))
        for file in project.python_files()
    }


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
    Project(tree, summaries=ImportsCache(cache_dir, tree)).importers_of(tree / "data.py")
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
