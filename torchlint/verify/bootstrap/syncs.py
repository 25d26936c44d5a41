"""Host-device synchronisations, by the source line that makes them.

A GPU runs ahead of the host until the host needs a value the GPU computes: `loss.item()`, `if tensor:`,
`float(tensor)`, `tensor.tolist()`, `.cpu()`, `torch.nonzero`, a boolean-mask index. The host then waits
for everything queued before it, and the GPU idles while the host catches up. Two ways to find them,
chosen for being exact (the line itself) and cheap where each applies:

- On CUDA, `torch.cuda.set_sync_debug_mode("warn")`: PyTorch itself warns at every synchronising operation,
  implicit ones included, from the Python line that made it; the warnings are taken (never printed) and
  counted at the innermost frame outside torch.
- On a CPU nothing synchronises, but the same reads are there, and each would be a sync on a GPU: the
  Tensor methods a value is read through on the host (`item`, `tolist`, `__bool__`, `__float__`,
  `__int__`, `__index__`) are wrapped, and each call counted at its caller's line. Only the reads the
  script's own code makes are counted, outside data loading (a dataset's `int(label)` reads a host tensor
  on a GPU machine too): those inside torch's functions (an optimizer's step counter, a CPU
  tensor on a GPU as well) are the library's, not the script's to change; torch's Tensor methods written
  in Python (`__format__` in an f-string) count for the line that called them.

Both count over a window of their own, the last warm-up steps before the profiled ones (`WINDOW_STEPS`,
never the first step, which compiles and fills caches): warm-up steps are not timed, so counting costs the
measurement nothing, and the profiled steps' operators stay the script's own.

Why not the profiler's Python stacks (`with_stack=True`): its tracer keeps raw pointers to the code objects
it saw, and a code object freed while it runs (Dynamo compiling, a module imported for the first time)
makes the whole profile unreadable (pytorch/pytorch#64345) or aborts the process ("double free or
corruption", 1 run in 6 of a compiled script here). And the wrappers stand aside while Dynamo compiles
(its compile callbacks): Dynamo would trace through a patched method and break its graph there, and the
measurement would change what it measures; called from compiled code, they run with Dynamo disabled
(`torch._dynamo.disable`), or Dynamo would compile their frames.

Only the standard library is imported at the top; torch inside the functions that need it.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

from torchlint.verify.bootstrap.dynamo import original_function

READS = {  # the Tensor methods through which a script reads a value on the host, and how it is said
    "item": "item()",
    "tolist": "tolist()",
    "__bool__": "bool()",
    "__float__": "float()",
    "__int__": "int()",
    "__index__": "index",
}
CUDA_SYNC_WARNING = "synchronizing CUDA operation"
DATA_LOADING = os.path.join("torch", "utils", "data", "")  # the DataLoader's and datasets' own code
GENERATED = "torchinductor_"  # Inductor's generated modules live in its cache folder, /tmp/torchinductor_USER
_ABSENT = object()
TOP_SITES = 10
WINDOW_STEPS = 2


def make_classifier(torch_dir: str, verifier_dir: str) -> Callable[[str | None], str]:
    """Whose a file is: `verifier` (these hooks), `pass-through` (torch's Tensor methods written in Python,
    `torch/_tensor.py`, and the wrapper of `torch._dynamo.disable`: a read there is its caller's),
    `library` (torch, Python's standard library, code torch generated: FX's `<eval_with_key>`, Inductor's),
    or `user` (the script, its project, other packages)."""
    pass_through = {
        os.path.join(torch_dir, "_tensor.py"),
        os.path.join(torch_dir, "_dynamo", "eval_frame.py"),
    }
    stdlib = sysconfig.get_paths().get("stdlib") or os.path.dirname(os.__file__)
    library = tuple(os.path.join(d, "") for d in (torch_dir, stdlib))
    verifier = os.path.join(verifier_dir, "")

    def classify(path: str | None) -> str:
        if not path or not os.path.isabs(path):
            return "library"
        if path.startswith(verifier):
            return "verifier"
        if path in pass_through:
            return "pass-through"
        return "library" if path.startswith(library) or GENERATED in path else "user"

    return classify


def site_key(frame: Any, what: str) -> tuple[str, int, str, str]:
    """(file, line, function, how): the function as the user wrote it, not Dynamo's resume frame."""
    code = frame.f_code
    return (code.co_filename, frame.f_lineno, original_function(code.co_name), what)


def summarise_sites(sites: Counter, steps: int, source: str) -> dict[str, Any] | None:
    """`{source, steps, per_step, sites: [{filename, row, function, what, count, per_step}]}`, the busiest
    sites first; None without a step counted."""
    if steps <= 0:
        return None
    ranked = sorted(sites.items(), key=lambda item: (-item[1], item[0][0], item[0][1]))
    return {
        "source": source,
        "steps": steps,
        "per_step": sum(sites.values()) / steps,
        "sites": [
            {
                "filename": filename,
                "row": row,
                "function": function,
                "what": what,
                "count": count,
                "per_step": count / steps,
            }
            for (filename, row, function, what), count in ranked[:TOP_SITES]
        ],
    }


# -- on a CPU: the script's reads through Tensor's methods -------------------------------------------------


class TensorReadWatch:
    """Wraps the read methods on `torch.Tensor` (they live on the C base class: the wrappers are set on
    `torch.Tensor` and deleted again, which gives the C methods back), unwrapped while Dynamo compiles."""

    def __init__(self, classify: Callable[[str | None], str]) -> None:
        self.classify = classify
        self.sites: Counter = Counter()
        self.wrapped = False
        self.saved: dict[str, Any] = {}  # what `torch.Tensor` itself held under each name (a script's patch)
        self.open = False
        self.callbacks: Any = None  # Dynamo's callback handler, once followed

    def start(self) -> None:
        self.open = True
        self.follow_dynamo()
        self._wrap()

    def stop(self) -> None:
        self.open = False
        self._unwrap()
        handler, self.callbacks = self.callbacks, None
        if handler is not None:
            for remove, callback in (
                (handler.remove_start_callback, self._compiling),
                (handler.remove_end_callback, self._compiled),
            ):
                try:
                    remove(callback)
                except ValueError:
                    pass

    def follow_dynamo(self) -> None:
        """Stand aside while Dynamo compiles; called again when the script first compiles inside the
        window (Dynamo is only imported then)."""
        module = sys.modules.get("torch._dynamo.callback")
        if module is None or self.callbacks is not None or not self.open:
            return
        self.callbacks = module.callback_handler
        self.callbacks.register_start_callback(self._compiling)
        self.callbacks.register_end_callback(self._compiled)
        if self.wrapped:  # wrapped before Dynamo was there: again, out of its reach
            self._unwrap()
            self._wrap()
        if getattr(self.callbacks, "_CompilationCallbackHandler__pending_callbacks_counter", 0):
            self._compiling(None)  # followed from inside a compile (`torch.compile` called while tracing)

    def _compiling(self, args: Any) -> None:
        self._unwrap()

    def _compiled(self, args: Any) -> None:
        if self.open:
            self._wrap()

    def _wrap(self) -> None:
        if self.wrapped:
            return
        import torch

        for name, what in READS.items():
            self.saved[name] = torch.Tensor.__dict__.get(name, _ABSENT)
            setattr(torch.Tensor, name, self._counted(getattr(torch.Tensor, name), what))
        self.wrapped = True

    def _unwrap(self) -> None:
        if not self.wrapped:
            return
        import torch

        for name, saved in self.saved.items():
            if saved is not _ABSENT:
                setattr(torch.Tensor, name, saved)
            elif name in torch.Tensor.__dict__:
                delattr(torch.Tensor, name)  # the C base class's method again
        self.saved = {}
        self.wrapped = False

    def _counted(self, original: Any, what: str) -> Any:
        @functools.wraps(original)
        def read(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            self._note(sys._getframe(1), what)
            return original(tensor, *args, **kwargs)

        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is not None:  # a wrapper called from compiled code is never a frame for Dynamo to compile
            return dynamo.disable(read, recursive=True)
        return read

    def _note(self, frame: Any, what: str) -> None:
        if _loading(frame):
            return  # a dataset's or collate function's read: host data on a GPU machine too, no sync
        while frame is not None:
            whose = self.classify(frame.f_code.co_filename)
            if whose == "user":
                self.sites[site_key(frame, what)] += 1
                return
            if whose != "pass-through":
                return
            frame = frame.f_back


def _loading(frame: Any) -> bool:
    """Whether the read happens while a DataLoader fetches a batch (`torch/utils/data` on the stack): the
    samples a dataset builds are host tensors wherever the model trains."""
    while frame is not None:
        if DATA_LOADING in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


# -- on CUDA: PyTorch's own sync warnings ------------------------------------------------------------------


class CudaSyncWatch:
    """`torch.cuda.set_sync_debug_mode("warn")` between `start` and `stop`, its warnings counted by the
    innermost frame outside torch (`classify`) instead of printed; other warnings go on as before."""

    def __init__(self, classify: Callable[[str | None], str]) -> None:
        self.classify = classify
        self.sites: Counter = Counter()
        self.previous_mode: int | None = None
        self.previous_show: Any = None
        self.filter: tuple[Any, ...] | None = None

    def start(self) -> None:
        import torch

        self.previous_mode = torch.cuda.get_sync_debug_mode()
        self.previous_show = warnings.showwarning
        warnings.filterwarnings("always", message=f".*{CUDA_SYNC_WARNING}")
        self.filter = warnings.filters[0]
        warnings.showwarning = self._show
        torch.cuda.set_sync_debug_mode("warn")

    def stop(self) -> None:
        if self.previous_mode is None:
            return
        import torch

        torch.cuda.set_sync_debug_mode(self.previous_mode)
        self.previous_mode = None
        if warnings.showwarning is self._show:
            warnings.showwarning = self.previous_show
        if self.filter in warnings.filters:
            warnings.filters.remove(self.filter)
            mutated = getattr(warnings, "_filters_mutated", None)  # what filterwarnings itself calls
            if mutated is not None:
                mutated()

    def _show(
        self, message: Any, category: Any, filename: str, lineno: int, *args: Any, **kwargs: Any
    ) -> None:
        if CUDA_SYNC_WARNING not in str(message):
            self.previous_show(message, category, filename, lineno, *args, **kwargs)
            return
        frame = sys._getframe(1)
        while frame is not None:
            whose = self.classify(frame.f_code.co_filename)
            if whose == "verifier":  # the step hook's own synchronize: not the script's
                return
            if whose == "user":
                self.sites[site_key(frame, "sync")] += 1
                return
            frame = frame.f_back


# -- the window --------------------------------------------------------------------------------------------


class SyncWindow:
    """Counts from now until `stop` (on CUDA by the sync warnings, elsewhere by the read wrappers); `stop`
    gives the window's summary (`summarise_sites`), or None when it could not count."""

    def __init__(self, cuda: bool, classify: Callable[[str | None], str], steps_before: int) -> None:
        self.steps_before = steps_before
        self.source = "cuda-sync-debug" if cuda else "tensor-reads"
        self.watch: CudaSyncWatch | TensorReadWatch | None = (
            CudaSyncWatch(classify) if cuda else TensorReadWatch(classify)
        )
        try:
            self.watch.start()
        except Exception:  # noqa: BLE001 - counting syncs must never fail the run
            self._abandon()

    def follow_dynamo(self) -> None:
        if isinstance(self.watch, TensorReadWatch):
            self.watch.follow_dynamo()

    def stop(self, steps_done: int) -> dict[str, Any] | None:
        watch = self.watch
        if watch is None:
            return None
        try:
            watch.stop()
        except Exception:  # noqa: BLE001
            self._abandon()
            return None
        self.watch = None
        return summarise_sites(watch.sites, steps_done - self.steps_before, self.source)

    def _abandon(self) -> None:
        watch, self.watch = self.watch, None
        try:
            if watch is not None:
                watch.stop()
        except Exception:  # noqa: BLE001
            pass
