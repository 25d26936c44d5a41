"""Installed on PYTHONPATH for every process of a verified run (the script, its DataLoader workers, spawned
helpers, torchrun's ranks): serves the run's patched sources from memory (`serve.py`), then hands over to any
other `sitecustomize` the environment has. It measures nothing: only the entry arms the hooks.
"""

import importlib
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _serve() -> None:
    spec_path = os.environ.get("TORCHLINT_VERIFY_SPEC")
    if not spec_path:
        return
    try:
        with open(spec_path, encoding="utf-8") as handle:
            patched = json.load(handle).get("patched", {})
    except (OSError, ValueError):
        return
    if not patched:
        return
    parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))
    sys.path.insert(0, parent)
    try:
        from torchlint.verify.bootstrap import serve
    finally:
        sys.path.remove(parent)
    serve.install(patched)


def _chain() -> None:
    """Import the next `sitecustomize` on sys.path, as if this one were not there."""
    here = [entry for entry in sys.path if os.path.abspath(entry or ".") == _HERE]
    for entry in here:
        sys.path.remove(entry)
    this = sys.modules.pop("sitecustomize", None)
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        if this is not None:
            sys.modules["sitecustomize"] = this


_serve()
_chain()
