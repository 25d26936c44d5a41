"""The measured process's entry: `python entry.py SPEC` (or each rank's, under `torch.distributed.run`).

It seeds Python's, NumPy's and torch's RNGs the same way in every run (compiled code included: Inductor
falls back to eager's random ops), sets the thread count the spec asks
for, installs the measuring hooks (`hooks.py`), and runs the script as `__main__` with the user's arguments,
working directory and `sys.path[0]` (the script's folder), from its patched text when the run has one
(`serve.py`). Whatever happens (stopped after W + N steps, finished, exited, crashed, killed by the runner's
SIGTERM on a timeout) it writes what it measured to the spec's result file.

Run as a script (not `-m`), so that nothing of the verifier's own folder stays on `sys.path`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
import traceback
import types
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))  # the folder holding torchlint/


def _seed(seed: int) -> None:
    import importlib.util

    random.seed(seed)
    if importlib.util.find_spec("numpy") is not None:
        try:
            import numpy

            numpy.random.seed(seed)
        except Exception:  # noqa: BLE001 - a broken NumPy is the script's business
            pass
    import torch

    torch.manual_seed(seed)
    try:  # compiled code draws random numbers (dropout masks) from Inductor's own generator: the same seed
        # would give a compiled variant other masks than the original, and other losses from its first step.
        # Eager's random ops in compiled graphs keep the runs comparable step by step.
        import torch._inductor.config as inductor_config

        inductor_config.fallback_random = True
    except Exception:  # noqa: BLE001 - a torch without Inductor compiles nothing to compare
        pass


def _user_traceback(error: BaseException) -> str:
    """The traceback without the verifier's own frames."""
    frames = traceback.extract_tb(error.__traceback__)
    kept = [frame for frame in frames if not frame.filename.startswith(_HERE)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(kept)]
    lines += traceback.format_exception_only(type(error), error)
    return "".join(lines)


def _write(path: str, payload: dict[str, Any]) -> None:
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)
    os.replace(temporary, path)


def main() -> None:
    spec_path = sys.argv[1]
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    # torchlint's own folder, for the imports below only (an installed torchlint needs none of it).
    sys.path.insert(0, _PACKAGE_PARENT)
    try:
        from torchlint.verify.bootstrap import hooks, serve
    finally:
        sys.path.remove(_PACKAGE_PARENT)
    serve.install(spec.get("patched", {}))
    script = spec["script"]
    rank = os.environ.get("RANK", "0")
    result_path = f"{spec['result_path']}.rank{rank}"
    if spec.get("device") == "cuda":
        import torch

        if not torch.cuda.is_available():
            _write(result_path, {"status": "no-device", "steps": [], "exit_code": 2, "traceback": None})
            sys.stderr.write("torchlint verify: --device cuda, but CUDA is not available to this Python\n")
            os._exit(2)
    _seed(int(spec.get("seed", 0)))
    recorder = hooks.Recorder(spec)
    hooks.install(recorder)
    outcome: dict[str, Any] = {"status": "finished", "exit_code": 0, "traceback": None}

    def write_result() -> None:
        if os.getpid() != recorder.pid:
            return
        payload = {**recorder.result(), **outcome}
        if recorder.stopped:
            payload["status"] = "stopped"
        spawned = f"{spec['result_path']}.spawn0"  # rank 0 of `torch.multiprocessing.spawn`, if any
        if not recorder.steps and os.path.isfile(spawned):
            with open(spawned, encoding="utf-8") as handle:
                child = json.load(handle)
            failed = outcome["status"] not in ("finished",)
            payload = {**child, **{k: v for k, v in outcome.items() if failed or k != "status"}}
            payload["spawned_ranks"] = True
        _write(result_path, payload)

    def on_term(signum: int, frame: Any) -> None:
        outcome.update(status="timeout", exit_code=-signum)
        try:
            write_result()
        finally:
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)

    sys.argv = [script, *spec.get("args", [])]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(__file__=script, __builtins__=__builtins__, __cached__=None)
    main_module.__dict__.update(__loader__=None, __package__=None, __spec__=None)
    sys.modules["__main__"] = main_module
    started = time.perf_counter()
    try:
        code = serve.compile_file(script)
        exec(code, main_module.__dict__)
    except hooks.StopVerify:
        pass
    except SystemExit as error:
        code = error.code
        if code not in (None, 0):
            outcome.update(status="exited", exit_code=code if isinstance(code, int) else 1)
    except BaseException as error:  # noqa: BLE001 - the script crashed: report it
        text = _user_traceback(error)
        sys.stderr.write(text)
        outcome.update(status="crashed", exit_code=1, traceback=text)
    outcome["script_seconds"] = time.perf_counter() - started
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        write_result()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    status = outcome["status"]
    # A stopped run ends here: the script's own `finally` blocks have run; its remaining threads are not
    # waited for (the runner kills the process group afterwards).
    os._exit(0 if status in ("finished", "stopped") else 3)


if __name__ == "__main__":
    main()
