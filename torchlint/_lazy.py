"""LibCST, imported on first use.

`import libcst` costs about half a second (its node classes and native parser), more than a pre-commit run
on a few files should take in total. Most files never need it: the prefilter skips them, and `torchlint rules`
never parses anything. `importlib.util.LazyLoader` defers the import until an attribute is first read, after
which the module is the real one (no proxy cost in the hot path).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_import(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot find {name}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


cst = lazy_import("libcst")
