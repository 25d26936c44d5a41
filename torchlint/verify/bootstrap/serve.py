"""Patched sources served from memory: nothing on disk changes.

The spec names each patched file (absolute path) with its text. Three doors lead into those files, and each
one is covered:

- the main script, run by the entry: `run_path` compiles the patched text under the file's own path, so
  tracebacks, `__file__` and relative paths are those of the real file;
- project modules imported by the script: a meta-path finder asks the regular path finder where a module
  lives and, when that file is patched, loads the patched text instead (no bytecode cache is read or
  written for it);
- DataLoader workers (and any `multiprocessing` child) started with spawn: they re-run the main file with
  `runpy.run_path(main, run_name="__mp_main__")`, which `install` wraps, and import project modules through
  the same finder, since the `sitecustomize` installs both in every process of the run.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import runpy
import sys
import types
from collections.abc import Mapping
from typing import Any

_patched: dict[str, str] = {}
_original_run_path = runpy.run_path


def _key(path: str) -> str:
    return os.path.realpath(path)


def patched_text(path: str) -> str | None:
    return _patched.get(_key(path))


def compile_file(path: str) -> types.CodeType:
    """The code of `path`: its patched text when there is one, else the file's own bytes."""
    text = patched_text(path)
    if text is None:
        with open(path, "rb") as handle:
            return compile(handle.read(), path, "exec", dont_inherit=True)
    return compile(text, path, "exec", dont_inherit=True)


class _PatchedLoader(importlib.machinery.SourceFileLoader):
    """A source loader whose code comes from the patched text (never from a stale `.pyc`)."""

    def get_code(self, fullname: str) -> types.CodeType:
        return compile(patched_text(self.path) or "", self.path, "exec", dont_inherit=True)

    def get_source(self, fullname: str) -> str | None:
        return patched_text(self.path)


class _PatchedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None):  # noqa: ANN201
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or patched_text(spec.origin) is None:
            return None
        loader = _PatchedLoader(fullname, spec.origin)
        patched = importlib.machinery.ModuleSpec(
            fullname, loader, origin=spec.origin, is_package=spec.submodule_search_locations is not None
        )
        if spec.submodule_search_locations is not None:
            patched.submodule_search_locations = list(spec.submodule_search_locations)
        patched.has_location = True
        return patched


def run_path(path_name: str, init_globals: dict | None = None, run_name: str | None = None) -> dict:
    """`runpy.run_path`, serving the patched text of a patched file."""
    if patched_text(path_name) is None:
        return _original_run_path(path_name, init_globals, run_name)
    module = types.ModuleType(run_name or "<run_path>")
    namespace = module.__dict__
    if init_globals:
        namespace.update(init_globals)
    namespace.update(__name__=run_name or "<run_path>", __file__=path_name, __cached__=None, __loader__=None)
    namespace.update(__package__="", __spec__=None, __builtins__=__builtins__)
    saved = sys.modules.get(module.__name__)
    sys.modules[module.__name__] = module
    try:
        exec(compile_file(path_name), namespace)
    finally:
        if saved is not None:
            sys.modules[module.__name__] = saved
        else:
            sys.modules.pop(module.__name__, None)
    return dict(namespace)


def install(patched: Mapping[str, str]) -> None:
    """Serve `patched` ({absolute path: text}) to imports and `runpy.run_path` in this process."""
    if not patched:
        return
    _patched.update({_key(path): text for path, text in patched.items()})
    if not any(isinstance(finder, _PatchedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchedFinder())
    runpy.run_path = run_path
