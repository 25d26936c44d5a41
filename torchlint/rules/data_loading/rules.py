"""Data loading (TL2xx): loaders that keep the accelerator waiting.

Only loaders that feed a training loop are judged (an evaluation loader runs a fraction of the steps, and
its batches are often cheap), and only on what the author fixed in the code: an option the user controls
(argparse, a config object, a parameter, the environment) or sets on some paths only is their decision.
Every finding sits on the `DataLoader(` call, in the file whose code the fix edits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic, Severity
from torchlint.facts import DatasetKind, Device
from torchlint.fix import build
from torchlint.fix.model import AddImport, Applicability, Fix
from torchlint.rules.base import FixAvailability, Rule, no_fix

if TYPE_CHECKING:
    from torchlint.facts import Argument, Loader, ModuleFacts
    from torchlint.rules.data_loading.datasets import DatasetAnalysis


def _datasets(facts: ModuleFacts) -> DatasetAnalysis:
    from torchlint.rules.data_loading.datasets import DatasetAnalysis

    return facts.analysis(DatasetAnalysis)


# One worker per CPU, at most 8 (beyond that, workers add memory and start-up time faster than throughput for
# typical pipelines), in a form a reviewer reads at a glance: `os.cpu_count()` exists on Linux, macOS and
# Windows, and returns None where it cannot tell (then 1 worker).
WORKERS = "min(8, {os}.cpu_count() or 1)"


_NOTHING_TO_OVERLAP = {
    DatasetKind.ITERABLE,
    DatasetKind.TENSOR,
    DatasetKind.IN_MEMORY,
    DatasetKind.INDICES,
    DatasetKind.HF_TABLE,
}


class _LoaderRule(Rule):
    # The finding sits on a loader call in this file: DataLoader, StatefulDataLoader, a project's *Loader.
    needs_text = ("oader",)

    def device(self, facts: ModuleFacts, loader: Loader) -> Device:
        setting = self.settings.device
        if setting == "cpu":
            return Device.CPU
        device = facts.training.training_device(loader)
        if setting == "cuda" and device is Device.UNKNOWN:
            return Device.CUDA
        return device

    def set_option(
        self,
        facts: ModuleFacts,
        loader: Loader,
        name: str,
        value: str,
        kind: str,
        safety: Applicability,
        imports: tuple[AddImport, ...] = (),
    ) -> Fix | None:
        """The fix that sets `name=value`, titled by the rule's fix title of this `kind` (which may say
        `{name}` and `{value}`): where the loader sets it now, else as a new keyword."""
        edit = build.set_keyword(facts.source, loader.arguments, name, value)
        return self.fix(kind, safety, (edit,), imports, name=name, value=value)


class DataLoaderWithoutWorkers(_LoaderRule):
    code = "TL201"
    name = "dataloader-without-workers"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    messages = {
        "no-workers": (
            "`{loader}` feeds training {how}: every batch is loaded in the training process while the GPU "
            "waits"
        ),
    }
    fix_titles = {"workers": "Use one worker per CPU (at most 8)"}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for loader in facts.loaders:
            if not facts.training.loader_uses(loader) or not loader.without_workers():
                continue
            if any(other.starts_workers() for other in loader.alternatives):
                continue  # the other branch of the `if` builds it with workers: chosen per path
            if not self.device(facts, loader).may_be_cuda:
                continue  # on the CPU, workers compete with the training process's own threads
            if _datasets(facts).samples_on_cpu(loader) is False:
                continue  # samples are moved to the GPU while loading: worker processes cannot use CUDA
            kind = _datasets(facts).kind(loader)
            if kind in _NOTHING_TO_OVERLAP:
                # unsharded: every worker would yield every sample; in memory, preprocessed up front or mere
                # indices: nothing to overlap
                continue
            how = (
                "without `num_workers` (default 0)"
                if loader.option("num_workers") is None
                else "with `num_workers=0`"
            )
            note, fix = self._fix(facts, loader)
            yield self.report(
                facts, loader.callee, "no-workers", fix=fix, note=note, loader=loader.callee_text, how=how
            )

    def _fix(self, facts: ModuleFacts, loader: Loader) -> tuple[str, Fix | None]:
        """The fix, or why there is none."""
        problems = _datasets(facts).unpicklable(loader)
        if problems:
            problem = problems[0]
            what = f"`{problem.what}`"
            # The facts give a noun phrase: "`collate_fn` is a lambda", "`collate_fn` is `collate`, a
            # function defined inside a function"; an option named like its function is named once
            # ("`collate_fn` is a function defined inside a function").
            if problem.why.startswith(f"{what}, "):
                why = f"{what} is {problem.why[len(what) + 2 :]}"
            else:
                why = f"{what} is {problem.why}"
            return no_fix(f"{why}, which worker processes started by spawn or forkserver cannot pickle"), None
        if not facts.training.runs_under_main_guard(loader):
            return no_fix(
                'the script has no `if __name__ == "__main__":` guard, which worker processes started by '
                "spawn or forkserver need"
            ), None
        os_module = build.name_module(facts.source, "os", loader.scope)
        if os_module is None:
            return "", None
        name, imports = os_module
        workers = WORKERS.format(os=name)
        return "", self.set_option(
            facts, loader, "num_workers", workers, "workers", Applicability.UNSAFE, imports
        )


class DataLoaderWithoutPinMemory(_LoaderRule):
    code = "TL202"
    name = "dataloader-without-pin-memory"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    messages = {
        "unpinned": (
            "`{loader}` feeds GPU training without `pin_memory=True`: every host-to-device copy of a batch "
            "is synchronous"
        ),
        "trainer-unpinned": (
            "`TrainingArguments` with `dataloader_pin_memory=False`: the Trainer's host-to-device copies of "
            "every batch are synchronous"
        ),
    }
    fix_titles = {"set": "Set `{name}={value}`"}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for loader in facts.loaders:
            if not facts.training.loader_uses(loader):
                continue
            if not (loader.lacks("pin_memory") or loader.is_constant("pin_memory", False)):
                continue
            if any(other.pins() for other in loader.alternatives):
                continue  # the other branch of the `if` builds it pinned: chosen per path
            device = self.device(facts, loader)
            if not device.may_be_cuda:
                continue
            if _datasets(facts).kind(loader) in (DatasetKind.INDICES, DatasetKind.HF_TABLE):
                continue  # a batch of integers, or a few KB of token ids: nothing worth pinning
            if _datasets(facts).holds_token_ids(loader):
                continue  # a project dataset of tokenized text: a few KB of ids per batch
            on_cpu = _datasets(facts).samples_on_cpu(loader)
            if on_cpu is False:
                continue  # the dataset moves samples to the GPU itself: pinning would raise
            if _datasets(facts).batches_unpinnable(loader):
                continue  # its batches are project objects without `pin_memory()`: pinning skips them
            fix = self._fix(facts, loader, device, on_cpu)
            yield self.report(facts, loader.callee, "unpinned", fix=fix, loader=loader.callee_text)
        for arguments in facts.hf_training_arguments:  # the Trainer pins by default; False turns it off
            if arguments.is_constant("dataloader_pin_memory", False):
                fix = self.set_option(
                    facts, arguments, "dataloader_pin_memory", "True", "set", Applicability.UNSAFE
                )
                yield self.report(facts, arguments.callee, "trainer-unpinned", fix=fix)

    def _fix(self, facts: ModuleFacts, loader: Loader, device: Device, on_cpu: bool | None) -> Fix | None:
        imports: tuple[AddImport, ...] = ()
        if device is Device.CUDA:
            value = "True"
        else:
            torch = build.name_module(facts.source, "torch", loader.scope)
            if torch is None:
                return None
            value, imports = f"{torch[0]}.cuda.is_available()", torch[1]
        applicability = Applicability.SAFE if on_cpu else Applicability.UNSAFE
        return self.set_option(facts, loader, "pin_memory", value, "set", applicability, imports)


class DataLoaderWorkersNotPersistent(_LoaderRule):
    code = "TL203"
    name = "dataloader-workers-not-persistent"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    messages = {
        "restarted": (
            "`{loader}` is iterated every epoch with worker processes but without `persistent_workers=True`: "
            "every epoch starts all of its workers again"
        ),
        "restarted-on-a-path": (
            "`{loader}` is iterated every epoch with worker processes (on the path that sets `num_workers`) "
            "but without `persistent_workers=True`: every epoch starts all of its workers again"
        ),
        "trainer-restarted": (
            "`TrainingArguments` with `dataloader_num_workers` but without "
            "`dataloader_persistent_workers=True`: every epoch starts the loader's workers again"
        ),
    }
    fix_titles = {
        "set": "Set `{name}={value}`",
        "beside-workers": "Set `persistent_workers=True` where `num_workers` is set",
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for finding in self._found(facts):
            if finding.fix is not None and not self.torch_supports((1, 7), facts):
                reason = (
                    "`persistent_workers=` needs torch 1.7, newer than the project's (the `torch-version` "
                    "setting)"
                )
                finding = replace(finding, fix=None, note=no_fix(reason))
            yield finding

    def _found(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for loader in facts.loaders:
            if not any(use.per_epoch for use in facts.training.loader_uses(loader)):
                continue
            if _datasets(facts).kind(loader) is DatasetKind.INDICES:
                continue  # workers that collate integers are the waste, not their restart
            if not loader.lacks("persistent_workers"):
                continue
            workers = loader.option("num_workers")
            if workers is None or loader.no_workers_here:
                continue  # no workers, or none on this path (the `else:` of `if num_workers > 0:`)
            if workers.conditional:
                # Workers chosen for the accelerator path only (`kwargs.update(num_workers=1, ...)` under
                # `if use_cuda:`): that path restarts them every epoch. Judged only for a positive constant,
                # and fixed beside it, so the other path keeps its 0 workers.
                if not _positive(workers.value.literal) or not workers.value.is_literal:
                    continue
                fix = self._fix_beside(facts, workers)
                yield self.report(
                    facts, loader.callee, "restarted-on-a-path", fix=fix, loader=loader.callee_text
                )
                continue
            if not _may_start_workers(workers):
                continue
            if _datasets(facts).zero_from_every_caller(loader, workers.expression):
                continue  # `num_workers` is a parameter every caller leaves at 0
            known, _ = workers.constant()
            fix = self._fix(facts, loader, workers, known)
            if fix is None and known:
                fix = self._fix_beside(facts, workers)
            yield self.report(facts, loader.callee, "restarted", fix=fix, loader=loader.callee_text)
        for arguments in facts.hf_training_arguments:  # the Trainer iterates its loader once per epoch
            workers = arguments.option("dataloader_num_workers")
            if workers is None or workers.conditional or not arguments.lacks("dataloader_persistent_workers"):
                continue
            known, _ = workers.constant()
            if _may_start_workers(workers):
                fix = self._fix(facts, arguments, workers, known, "dataloader_persistent_workers")
                yield self.report(facts, arguments.callee, "trainer-restarted", fix=fix)

    def _fix_beside(self, facts: ModuleFacts, workers: Argument) -> Fix | None:
        """`"persistent_workers": True` in the dict (or `dict(...)`, `.update(...)`) that sets the workers."""
        if workers.holder is None or workers.node is None:
            return None
        edit = build.set_beside(facts.source, workers.holder, workers.node, "persistent_workers", "True")
        return self.fix("beside-workers", Applicability.UNSAFE, (edit,))

    def _fix(
        self,
        facts: ModuleFacts,
        loader: Loader,
        workers: Argument,
        known: bool,
        name: str = "persistent_workers",
    ) -> Fix | None:
        if known or (not workers.conditional and facts.surely_positive(workers)):
            value = "True"  # a positive constant, or at least 1 (`min(8, os.cpu_count() or 1)`)
        elif workers.via is None and workers.expression is not None:
            # The count as written at the call: True with 0 workers raises ValueError.
            value = f"{facts.operand(workers.expression)} > 0"
        else:
            return None
        return self.set_option(facts, loader, name, value, "set", Applicability.UNSAFE)


class DataLoaderInvalidWorkerOptions(_LoaderRule):
    code = "TL204"
    name = "dataloader-invalid-worker-options"
    severity = Severity.ERROR
    messages = {
        "trainer-persistent": (
            "`TrainingArguments` with `dataloader_persistent_workers=True` and no `dataloader_num_workers`: "
            "the Trainer's DataLoader raises ValueError"
        ),
        "trainer-prefetch": (
            "`TrainingArguments` with `dataloader_prefetch_factor={prefetch}` and no "
            "`dataloader_num_workers` raises ValueError"
        ),
        "negative-workers": "`{loader}` with `num_workers={workers}` raises ValueError",
        "persistent": (
            "`{loader}` with `persistent_workers=True` and no workers raises ValueError "
            '("persistent_workers option needs num_workers > 0")'
        ),
        "prefetch": (
            "`{loader}` with `prefetch_factor={prefetch}` and no workers raises ValueError (prefetch_factor "
            "only applies to worker processes)"
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        yield from self._check_loaders(facts)
        for arguments in facts.hf_training_arguments:
            if not (
                arguments.lacks("dataloader_num_workers")
                or arguments.is_constant("dataloader_num_workers", 0)
            ):
                continue
            if arguments.is_constant("dataloader_persistent_workers", True):
                yield self.report(facts, arguments.callee, "trainer-persistent")
            prefetch_known, prefetch = arguments.constant("dataloader_prefetch_factor")
            if prefetch_known and prefetch is not None:
                yield self.report(facts, arguments.callee, "trainer-prefetch", prefetch=prefetch)

    def _check_loaders(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for loader in facts.loaders:
            callee = loader.callee_text
            known, workers = loader.constant("num_workers")
            if known and isinstance(workers, int) and workers < 0:
                yield self.report(facts, loader.callee, "negative-workers", loader=callee, workers=workers)
                continue
            if not loader.without_workers():
                continue
            _, persistent = loader.constant("persistent_workers")
            prefetch_known, prefetch = loader.constant("prefetch_factor")
            if persistent is True:
                yield self.report(facts, loader.callee, "persistent", loader=callee)
            elif prefetch_known and prefetch is not None:
                yield self.report(facts, loader.callee, "prefetch", loader=callee, prefetch=prefetch)


class BlockingHostToDeviceCopy(Rule):
    code = "TL205"
    name = "blocking-host-to-device-copy"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES

    # The loop iterates a loader named in this file (`DataLoader(...)`, `train_loader`, `dataloaders[phase]`).
    needs_text = ("oader",)
    messages = {
        "blocking": (
            "`.{method}(...)` of a batch from a pinned loader without `non_blocking=True`: the copy blocks "
            "the training loop instead of overlapping with compute"
        ),
    }
    fix_titles = {"non-blocking": "Add `non_blocking=True`"}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for loop in facts.training.training_loops:
            # Pinned on some paths (`if use_cuda: kwargs.update(pin_memory=True)`) is enough: a non-blocking
            # copy is as correct as a blocking one, and it is the one that pays off where pinning happens.
            feeding = facts.training.loaders_of_loop(loop)
            pinned = [loader for loader in feeding if _pinned(loader.option("pin_memory"))]
            if not pinned:
                continue
            for move in facts.batch_moves(loop):
                if not move.blocks:
                    continue  # non_blocking=True, or set by the user
                edit = build.add_keyword(facts.source, move.call, "non_blocking", "True")
                fix = self.fix("non-blocking", Applicability.SAFE, (edit,))
                yield self.report(facts, move.callee, "blocking", fix=fix, method=move.method)


def _may_start_workers(workers: Argument) -> bool:
    """A positive constant, or a count decided when the script runs (the user's, or computed such as
    `os.cpu_count()`): then workers may start, and restart every epoch."""
    known, value = workers.constant()
    if known:
        return _positive(value)
    return workers.value.is_run_time


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _pinned(option: Argument | None) -> bool:
    """Pinned as written, also on some paths only (a value the user controls does not count)."""
    return option is not None and option.value.is_literal and option.value.literal is True
