"""The measuring hooks, installed in the measured process before the script runs.

- Steps: a global optimizer step post-hook (`register_optimizer_step_post_hook`) ends a step, after
  `torch.cuda.synchronize()` when CUDA is in use. Only the first optimizer that steps counts (a GAN's two
  optimizers make one step). A `GradScaler.step` that skips the optimizer (inf/NaN gradients: all steps can
  be skipped at the start of fp16 training) skips the hook too, so the scaler's step is wrapped and counts
  such a step itself, marked `skipped`.
- Data wait: `_BaseDataLoaderIter.__next__` is timed (the subclasses only implement `_next_data`); each
  `DataLoader.__iter__` call is counted, so that the steps of the first epoch are known; the line where each
  DataLoader was built is recorded (the runtime findings point at it).
- Loss: the scalar passed to `Tensor.backward` (or `torch.autograd.backward`), detached; when it is the
  output of `GradScaler.scale`, the unscaled loss is recorded instead. Values are converted to floats only at
  the end, so no synchronisation is added; micro-batches between two steps are averaged.
- Memory: the CUDA allocator's peak when CUDA is in use, else the process's peak RSS; and, from the
  profiler's memory events over the profiled steps, the working memory of a step: the peak of what the
  allocator handed out during those steps above what it held when they began (on a CPU the process's RSS
  is mostly torch itself, so this is the figure that shows what checkpointing or autocast saved; it is
  blind to a script's own `saved_tensors_hooks`, which would hide saved tensors from a counting hook).
- Profile: `torch.profiler` runs over the first few steps after the warm-up (started and stopped by the
  step hook, so a script that ends early still has one); those steps are flagged, and left out of the
  timing statistics when at least three others remain (the profiler's overhead is not the script's).
- Stop: after W + N steps the hook raises `StopVerify`, a BaseException, so a script's `except Exception`
  cannot swallow it; a script that swallows it anyway gets it again at its next step.
- Compile: the first `torch.compile` call installs `dynamo.CompileWatch` (graphs, graph breaks,
  recompiles, compile seconds, from Dynamo's own records).
- Syncs: the last warm-up steps before the profiled ones (`syncs.WINDOW_STEPS`, never the first step)
  count the host-device syncs the script makes, by line (`syncs.SyncWindow`), in a window of their own.

Everything is disarmed in child processes: forked ones by the pid check and an at-fork handler, spawned
ones never arm (only the entry does).
"""

from __future__ import annotations

import functools
import os
import resource
import sys
import time
from typing import Any

import torch
import torch.optim.optimizer as optimizer_module
from torch.utils.data import dataloader as dataloader_module

from torchlint.verify.bootstrap import dynamo, syncs

BOOTSTRAP_DIR = os.path.dirname(os.path.abspath(__file__))
TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
COMM_WORDS = (
    "allreduce",
    "all_reduce",
    "all_gather",
    "allgather",
    "broadcast",
    "reduce_scatter",
    "nccl",
    "gloo",
)
COMM_WORDS += ("c10d::", "barrier", "alltoall", "all_to_all")
# The operators one gradient all-reduce records (the c10d dispatcher op; NCCL's kernel runs under it).
ALLREDUCE_OPS = ("c10d::allreduce_",)


class StopVerify(BaseException):  # noqa: N818 - a stop signal, not an error
    """W + N optimizer steps are done: the verifier stops the script here."""


# A script that updates its weights by hand never steps an optimizer: it is stopped once its DataLoaders
# have yielded this many batches per asked step (W + N), at least NO_STEP_MIN_BATCHES, with no optimizer
# step, instead of after a whole epoch (133 s in one real case). Generous for gradient accumulation.
NO_STEP_BATCHES_PER_STEP = 4
NO_STEP_MIN_BATCHES = 100


class Recorder:
    """What one measured process saw; `result()` is the run's JSON (see SCHEMA.md, `runs[].raw`)."""

    def __init__(self, spec: dict[str, Any], rank: int | None = None) -> None:
        self.spec = spec
        self.pid = os.getpid()
        self.armed = True
        self.warmup = int(spec["warmup"])
        self.total = self.warmup + int(spec["steps"])
        self.profile_steps = min(int(spec.get("profile_steps", 3)), int(spec["steps"]))
        self.trace_path = spec.get("trace_path")
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else rank
        self.started = time.perf_counter()
        self.last = self.started
        self.steps: list[dict[str, Any]] = []
        self.primary: int | None = None  # id of the optimizer whose steps count
        self.hook_fired = 0
        self.stopped = False
        self.data_wait = 0.0  # since the last step
        self.pending_losses: list[Any] = []
        self.epoch_marker = 0  # DataLoader.__iter__ calls so far
        self.batches = 0  # batches the DataLoaders yielded
        self.no_step_after: int | None = None  # batches yielded when the run was stopped for taking no step
        self.loaders: list[dict[str, Any]] = []
        self.loader_wait: dict[int, float] = {}  # loader index -> seconds waited during measured steps
        self.scaled: dict[int, tuple[Any, Any]] = {}  # id(scaled loss) -> (scaled, unscaled)
        self.in_backward = False
        self.profiler: Any = None
        self.profile: dict[str, Any] | None = None
        self.uses_cuda = False
        self.progress_fd: int | None = None
        progress = spec.get("progress_path")
        if progress and self.rank == 0:
            self.progress_fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.rss_start = _current_rss()  # torch imported, the script not started yet
        self.threads_asked = spec.get("threads")
        if self.threads_asked:
            torch.set_num_threads(int(self.threads_asked))
        self.threads_at_start = torch.get_num_threads()
        self.threads_at_first_step: int | None = None
        self.classify = syncs.make_classifier(TORCH_DIR, BOOTSTRAP_DIR)
        self.compile_watch = dynamo.CompileWatch(lambda path: self.classify(path) != "user", self._steps_done)
        self.sync_window: syncs.SyncWindow | None = None
        self.syncs: dict[str, Any] | None = None

    # -- state -------------------------------------------------------------------------------------------

    def active(self) -> bool:
        return self.armed and os.getpid() == self.pid

    def _steps_done(self) -> int:
        return len(self.steps)

    def disarm(self) -> None:
        self.armed = False
        window, self.sync_window = self.sync_window, None
        if window is not None:  # a worker forked while the syncs are counted gets torch's methods back
            window.stop(0)
        if self.progress_fd is not None:
            try:
                os.close(self.progress_fd)
            except OSError:
                pass
            self.progress_fd = None

    def _progress(self) -> None:
        if self.progress_fd is None:
            return
        line = f"{len(self.steps)} {self.total} {time.perf_counter() - self.started:.3f}\n".encode()
        try:
            os.pwrite(self.progress_fd, line.ljust(64), 0)
        except OSError:
            pass

    # -- hooks ------------------------------------------------------------------------------------------

    def on_optimizer_step(self, optimizer: Any, args: Any = None, kwargs: Any = None) -> None:
        if not self.active():
            return
        if self.primary is None:
            self.primary = id(optimizer)
        elif id(optimizer) != self.primary:
            return
        self.hook_fired += 1
        self._end_step(skipped=False)

    def _end_step(self, skipped: bool) -> None:
        if self.stopped:
            raise StopVerify
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self.uses_cuda = True
            torch.cuda.synchronize()
        now = time.perf_counter()
        if self.threads_at_first_step is None:
            self.threads_at_first_step = torch.get_num_threads()
        index = len(self.steps)
        self.steps.append(
            {
                "end": now - self.started,
                "time": now - self.last,
                "data_wait": self.data_wait,
                "losses": self.pending_losses,
                "epoch_marker": self.epoch_marker,
                "skipped": skipped,
                "profiled": self.profiler is not None,
                # Held at the step's end, for the HTML report's chart: ~15 us, which the next step pays.
                "memory": torch.cuda.memory_allocated() if self.uses_cuda else _current_rss(),
            }
        )
        self.last = now
        self.data_wait = 0.0
        self.pending_losses = []
        self._progress()
        done = index + 1
        start = max(self.warmup, 1)  # the profiled steps are the first ones after the warm-up
        window = min(syncs.WINDOW_STEPS, start - 1)  # the last warm-up steps, the first one left out
        if self.profile_steps and self.rank == 0 and window and done == start - window:
            self.sync_window = syncs.SyncWindow(self.uses_cuda, self.classify, done)
            self.last = time.perf_counter()
        if self.profile_steps and done == start and self.rank == 0:
            self._stop_sync_window()
            self._start_profiler()
            self.last = time.perf_counter()
        elif self.profiler is not None and done == start + self.profile_steps:
            self._stop_profiler()
            # Reading the profile back takes seconds on a busy trace: the next step must not pay for it.
            self.last = time.perf_counter()
        if done >= self.total:
            self._stop_sync_window()
            self._stop_profiler()
            self.stopped = True
            raise StopVerify

    def on_scaler_step(self, original: Any, scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        before = self.hook_fired
        result = original(scaler, optimizer, *args, **kwargs)
        if self.active() and self.hook_fired == before and scaler.is_enabled():
            if self.primary is None:
                self.primary = id(optimizer)
            if id(optimizer) == self.primary:
                self._end_step(skipped=True)
        return result

    def on_scale(self, scaled: Any, unscaled: Any) -> None:
        if self.active() and isinstance(scaled, torch.Tensor) and isinstance(unscaled, torch.Tensor):
            if len(self.scaled) > 64:
                self.scaled.clear()
            self.scaled[id(scaled)] = (scaled, unscaled.detach())

    def on_backward(self, tensor: Any) -> None:
        if not self.active() or not isinstance(tensor, torch.Tensor) or tensor.numel() != 1:
            return
        kept = self.scaled.pop(id(tensor), None)
        value = kept[1] if kept is not None and kept[0] is tensor else tensor.detach()
        self.pending_losses.append(value)

    def on_next(self, loader_index: int | None, seconds: float) -> None:
        self.data_wait += seconds
        self.batches += 1
        if not self.steps and not self.stopped and self.batches >= self._no_step_limit():
            self.no_step_after = self.batches
            self.stopped = True
            raise StopVerify
        if loader_index is not None and len(self.steps) >= self.warmup:
            self.loader_wait[loader_index] = self.loader_wait.get(loader_index, 0.0) + seconds

    def _no_step_limit(self) -> int:
        return max(NO_STEP_BATCHES_PER_STEP * self.total, NO_STEP_MIN_BATCHES)

    def on_loader(self, loader: Any, site: dict[str, Any]) -> int:
        self.loaders.append(
            {
                **site,
                "num_workers": getattr(loader, "num_workers", None),
                "prefetch_factor": getattr(loader, "prefetch_factor", None),
                "pin_memory": getattr(loader, "pin_memory", None),
                "persistent_workers": getattr(loader, "persistent_workers", None),
                "batch_size": getattr(loader, "batch_size", None),
            }
        )
        return len(self.loaders) - 1

    def overridden(self, site: dict[str, Any]) -> dict[str, Any] | None:
        """The DataLoader options `--tune` sets for the loader built at `site` (None: the script's own)."""
        override = self.spec.get("loader_override")
        if not override or (override["filename"], override["line"]) != (site["filename"], site["line"]):
            return None
        return override["options"]

    # -- profiler ---------------------------------------------------------------------------------------

    def _start_profiler(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if self.uses_cuda:
            activities.append(ProfilerActivity.CUDA)
        try:
            self.profiler = profile(activities=activities, profile_memory=True)
            self.profiler.start()
            self.profile_started = time.perf_counter()
        except Exception as error:  # noqa: BLE001 - a profiler failure must not fail the run
            self.profiler = None
            self.profile = {"error": repr(error)}

    def _stop_profiler(self) -> None:
        profiler, self.profiler = self.profiler, None
        if profiler is None:
            return
        try:
            profiler.stop()
            wall = time.perf_counter() - self.profile_started
            self.profile = summarise_profile(profiler, wall, self.uses_cuda)
            if self.trace_path:
                profiler.export_chrome_trace(self.trace_path)
                self.profile["trace"] = self.trace_path
        except Exception as error:  # noqa: BLE001
            self.profile = {"error": repr(error)}

    def _stop_sync_window(self) -> None:
        window, self.sync_window = self.sync_window, None
        if window is not None:
            self.syncs = window.stop(len(self.steps))

    # -- the end ----------------------------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        self._stop_sync_window()
        self._stop_profiler()
        steps = []
        for step in self.steps:
            losses = []
            for value in step["losses"]:
                try:
                    losses.append(float(value))
                except Exception:  # noqa: BLE001 - a loss that cannot be read is left out
                    pass
            steps.append(
                {**step, "loss": sum(losses) / len(losses) if losses else None, "losses": len(losses)}
            )
        memory: dict[str, Any] = {"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        memory["total_bytes"] = _mem_total()
        memory["rss_at_start_bytes"] = self.rss_start
        if self.uses_cuda:
            try:
                memory["cuda_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
                memory["cuda_peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
                memory["cuda_total_bytes"] = torch.cuda.get_device_properties(0).total_memory
            except Exception:  # noqa: BLE001
                pass
        device = {"type": "cuda" if self.uses_cuda else "cpu"}
        if self.uses_cuda:
            try:
                device["name"] = torch.cuda.get_device_name(0)
                device["capability"] = list(torch.cuda.get_device_capability(0))
            except Exception:  # noqa: BLE001
                pass
        return {
            "steps": steps,
            "no_step_after_batches": self.no_step_after,
            "elapsed": time.perf_counter() - self.started,
            "loaders": self.loaders,
            "loader_wait": {str(k): v for k, v in self.loader_wait.items()},
            "memory": memory,
            "device": device,
            "threads": {
                "asked": self.threads_asked,
                "at_start": self.threads_at_start,
                "at_first_step": self.threads_at_first_step,
                "interop": torch.get_num_interop_threads(),
            },
            "torch": torch.__version__,
            "profile": self.profile,
            "compile": self._compile_summary(),
            "syncs": self.syncs,
            "rank": self.rank,
        }

    def _compile_summary(self) -> dict[str, Any] | None:
        try:
            ends = [self.started + step["end"] for step in self.steps]
            return self.compile_watch.summary(ends, self.warmup)
        except Exception as error:  # noqa: BLE001 - what compile did must not cost the run's result
            return {"error": repr(error)}


def summarise_profile(profiler: Any, wall: float, cuda: bool) -> dict[str, Any]:
    """Top operators by self time, and the event totals the runtime findings need."""
    averages = profiler.key_averages()
    rows = []
    comm_us = 0.0
    allreduces = 0  # gradient all-reduce calls over the profiled steps (DDP's reducer: one per bucket)
    device_us = 0.0
    names: list[str] = []
    for event in averages:
        self_cpu = float(getattr(event, "self_cpu_time_total", 0.0))
        self_device = float(getattr(event, "self_device_time_total", 0.0) or 0.0)
        name = event.key
        lowered = name.lower()
        if any(word in lowered for word in COMM_WORDS):
            comm_us += self_cpu + self_device
        if lowered.startswith(ALLREDUCE_OPS):
            allreduces += int(event.count)
        device_us += self_device
        if self_device:
            names.append(name)
        rows.append((name, self_cpu, self_device, event.count))
    key = 2 if cuda else 1
    rows.sort(key=lambda row: row[key], reverse=True)
    return {
        "wall_seconds": wall,
        "top_ops": [
            {"name": n, "self_cpu_ms": c / 1000, "self_device_ms": d / 1000, "count": k}
            for n, c, d, k in rows[:10]
        ],
        "comm_ms": comm_us / 1000,
        "allreduce_calls": allreduces,
        "device_busy_ms": device_us / 1000,
        "tensor_core_kernels": sum(1 for n in names if _tensor_core_kernel(n)),
        "device_kernels": len(names),
        "working_memory": working_memory(profiler),
    }


def working_memory(profiler: Any) -> dict[str, int] | None:
    """The peak of the bytes allocated during the profiled steps, net of those freed, per device kind
    (`cpu`, `cuda`): what a step needs on top of what was already held (parameters, optimizer state).

    The events are the profiler's `[memory]` records (their sign says allocation or free); blocks allocated
    before the profiler started have no free event, so a step that frees and reallocates them (gradients
    set to None) counts them once, alike in every run."""
    try:
        events = [e for e in profiler.profiler.kineto_results.events() if e.name() == "[memory]"]
    except Exception:  # noqa: BLE001 - private to torch: without it, no working-memory figure
        return None
    events.sort(key=lambda e: e.start_ns())
    current: dict[str, int] = {}
    peak: dict[str, int] = {}
    for event in events:
        kind = str(event.device_type()).rsplit(".", 1)[-1].lower()
        kind = "cuda" if kind in ("cuda", "hip", "privateuse1", "xpu") else "cpu"
        current[kind] = current.get(kind, 0) + int(event.nbytes())
        peak[kind] = max(peak.get(kind, 0), current[kind])
    return {f"{kind}_peak_bytes": value for kind, value in peak.items()}


def _tensor_core_kernel(name: str) -> bool:
    """From the kernel's name, as cuBLAS, cuDNN and CUTLASS spell it (read off an H200 with torch 2.11 and
    CUDA 13). bfloat16 and float16 linears run cuBLASLt's `nvjet_sm90_tst_...` / `nvjet_sm90_hsh_...`,
    whose names say nothing of MMA; an `xmma` GEMM whose inner loop is `ffma` (float32 without TF32:
    `sm80_xmma_gemm_f32f32_..._ffma_...`) and CUTLASS's `simt` kernels use the ordinary float units."""
    lowered = name.lower()
    if "ffma" in lowered or "simt" in lowered:
        return False
    return any(
        word in lowered
        for word in ("h884", "h1688", "s1688", "hmma", "xmma", "tensorop", "wgmma", "16816", "nvjet", "tf32")
    )


def _current_rss() -> int | None:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _mem_total() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class MeasuredTarget:
    """A `torch.multiprocessing.spawn` target, measured: DDP scripts that start their ranks themselves
    (`mp.spawn(main_worker, nprocs=N)`) train in those processes, not in the entry's. Every rank is armed
    (all must stop at the same step, or the others would wait in a collective for ever); each writes its
    result next to the entry's (`.spawn<i>`), where the entry picks up rank 0's."""

    def __init__(self, fn: Any, spec: dict[str, Any]) -> None:
        self.fn = fn
        self.spec = spec

    def __call__(self, index: int, *args: Any) -> Any:
        import json

        recorder = Recorder(self.spec, rank=index)
        install(recorder)
        status = "finished"
        try:
            return self.fn(index, *args)
        except StopVerify:
            status = "stopped"
        finally:
            payload = {**recorder.result(), "status": "stopped" if recorder.stopped else status}
            path = f"{self.spec['result_path']}.spawn{index}"
            with open(f"{path}.tmp", "w", encoding="utf-8") as handle:
                json.dump(payload, handle)
            os.replace(f"{path}.tmp", path)
            if recorder.stopped:
                _leave()


def _leave() -> None:
    """A stopped rank ends here, its result written, without the interpreter's teardown: a spawned rank
    that exits with its gloo process group (and its threads) alive was killed by SIGABRT now and then while
    the C++ runtime destroyed them ("terminate called without an active exception", 2 runs in 10 of
    fixtures/verify_ddp/spawn.py), and the whole run was reported as crashed. The script itself would have
    left after its loop; the stop cut that short, so there is nothing of its own left to run."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def loader_site(frame: Any) -> dict[str, Any]:
    """Where the script built a DataLoader: the innermost frame outside torch and the verifier (a project's
    subclass calling `super().__init__` is its own site)."""
    while frame is not None and frame.f_code.co_filename.startswith((TORCH_DIR, BOOTSTRAP_DIR)):
        frame = frame.f_back
    if frame is None:
        return {"filename": None, "line": None}
    return {"filename": os.path.abspath(frame.f_code.co_filename), "line": frame.f_lineno}


def with_options(
    init: Any, loader: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments of a DataLoader's `__init__` with `options` set, however the script passed them
    (positionally too). Without workers, the options that need them go back to their defaults: torch
    refuses `prefetch_factor` and `persistent_workers=True` with `num_workers=0`."""
    import inspect

    bound = inspect.signature(init).bind(loader, *args, **kwargs)
    bound.arguments.update(options)
    if bound.arguments.get("num_workers") == 0:
        bound.arguments.pop("prefetch_factor", None)
        bound.arguments.pop("persistent_workers", None)
    return bound.args[1:], bound.kwargs


def install(recorder: Recorder) -> None:
    """Install the hooks in this process (the entry's, or a measured spawn target's)."""
    optimizer_module.register_optimizer_step_post_hook(recorder.on_optimizer_step)
    os.register_at_fork(after_in_child=recorder.disarm)
    _watch_compile(recorder)

    base_iter = dataloader_module._BaseDataLoaderIter
    original_next = base_iter.__next__

    def timed_next(iterator: Any) -> Any:
        if not recorder.active():
            return original_next(iterator)
        start = time.perf_counter()
        try:
            return original_next(iterator)
        finally:
            loader = getattr(iterator, "_torchlint_loader", None)
            recorder.on_next(loader, time.perf_counter() - start)

    base_iter.__next__ = timed_next

    loader_class = dataloader_module.DataLoader
    original_init = loader_class.__init__
    original_iter = loader_class.__iter__

    def recorded_init(loader: Any, *args: Any, **kwargs: Any) -> None:
        site = loader_site(sys._getframe(1))
        options = recorder.overridden(site) if not hasattr(loader, "_torchlint_index") else None
        if options:
            args, kwargs = with_options(original_init, loader, args, kwargs, options)
        original_init(loader, *args, **kwargs)
        if recorder.active() and not hasattr(loader, "_torchlint_index"):
            try:
                loader.__dict__["_torchlint_index"] = recorder.on_loader(loader, site)
            except Exception:  # noqa: BLE001 - never fail the user's DataLoader
                pass

    def counted_iter(loader: Any) -> Any:
        iterator = original_iter(loader)
        if recorder.active():
            recorder.epoch_marker += 1
            try:
                iterator._torchlint_loader = loader.__dict__.get("_torchlint_index")
            except Exception:  # noqa: BLE001
                pass
        return iterator

    loader_class.__init__ = recorded_init
    loader_class.__iter__ = counted_iter

    original_backward = torch.Tensor.backward

    def recorded_backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        if recorder.in_backward:
            return original_backward(tensor, *args, **kwargs)
        recorder.on_backward(tensor)
        recorder.in_backward = True
        try:
            return original_backward(tensor, *args, **kwargs)
        finally:
            recorder.in_backward = False

    torch.Tensor.backward = recorded_backward

    original_autograd_backward = torch.autograd.backward

    def recorded_autograd_backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if not recorder.in_backward:
            if isinstance(tensors, torch.Tensor):
                recorder.on_backward(tensors)
            elif isinstance(tensors, (list, tuple)) and len(tensors) == 1:
                recorder.on_backward(tensors[0])
        return original_autograd_backward(tensors, *args, **kwargs)

    torch.autograd.backward = recorded_autograd_backward

    spawn_module = sys.modules.get("torch.multiprocessing.spawn")
    if spawn_module is not None and hasattr(spawn_module, "start_processes"):
        original_start = spawn_module.start_processes

        def measured_start(fn: Any, args: Any = (), nprocs: int = 1, *rest: Any, **kwargs: Any) -> Any:
            if recorder.active():
                fn = MeasuredTarget(fn, recorder.spec)
            return original_start(fn, args, nprocs, *rest, **kwargs)

        spawn_module.start_processes = measured_start
        torch.multiprocessing.start_processes = measured_start

    scaler_class = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler_class is not None:
        original_step = scaler_class.step
        original_scale = scaler_class.scale

        def recorded_step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            return recorder.on_scaler_step(original_step, scaler, optimizer, *args, **kwargs)

        def recorded_scale(scaler: Any, outputs: Any) -> Any:
            scaled = original_scale(scaler, outputs)
            recorder.on_scale(scaled, outputs)
            return scaled

        scaler_class.step = recorded_step
        scaler_class.scale = recorded_scale


def _watch_compile(recorder: Recorder) -> None:
    """The first `torch.compile` (`Module.compile` calls it too) installs the compile watch: Dynamo is
    imported by then, and a run that never compiles never pays for importing it."""
    original_compile = torch.compile

    @functools.wraps(original_compile)
    def watched_compile(*args: Any, **kwargs: Any) -> Any:
        if recorder.active():
            try:
                recorder.compile_watch.install()
                if recorder.sync_window is not None:  # Dynamo is imported now: stand aside while it compiles
                    recorder.sync_window.follow_dynamo()
            except Exception:  # noqa: BLE001 - never fail the user's compile
                pass
        return original_compile(*args, **kwargs)

    torch.compile = watched_compile
