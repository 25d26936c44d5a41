"""Who runs this module's code from the rest of the project, and what that says about its training loops.

A helper `train_one_epoch(model, loader, optimizer, device)` moves its batches to a parameter: its own file
says nothing of the device. The files that import it, call it (or construct the class whose method holds
the loop) and say where they train do. Several families ask (mixed precision for a loop's device and the
autocast contexts callers pass, the tuning guide for the device of a loop that reads its loss).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.torch.devices import DeviceAnalysis
from torchlint.facts.torch.vocabulary import Device

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

    from torchlint.facts.syntax.collect import CallRecord, FunctionRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule


class CallerAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source
        self._importers: dict[int, list[SourceModule]] = {}
        self._cuda_loops: list[LoopRecord] | None = None
        self._step_functions: list[FunctionRecord] | None = None

    @property
    def cuda_training_loops(self) -> list[LoopRecord]:
        """This module's training loops that may run on CUDA (by `loop_device`): the loops whose per-step
        costs the tuning guide's rules weigh."""
        if self._cuda_loops is None:
            from torchlint.facts.torch.training import TrainingAnalysis

            loops = self.source.analysis(TrainingAnalysis).training_loops
            self._cuda_loops = [loop for loop in loops if self.loop_device(loop).may_be_cuda]
        return self._cuda_loops

    @property
    def cuda_step_functions(self) -> list[FunctionRecord]:
        """This module's functions that run one training step per call — a backward call of their own
        (also in a loop of micro-batches) and the optimizer's step outside any loop of theirs
        (`agent.update_parameters(batch)`, `train_step(x, y)`, the `train(x, y)` closure a factory
        returns) — that a loop calls, here or in a file importing this one, and that may run on CUDA
        (this module's evidence, or the calling loop's). Their body runs every step as a loop's body
        does, wherever the loop is."""
        if self._step_functions is None:
            from torchlint.facts.torch.training import STEP, TrainingAnalysis, is_backward_call

            training = self.source.analysis(TrainingAnalysis)
            steps = [  # the backward call first: a syntax check, asked of every function
                function
                for function in self.source.functions
                if any(is_backward_call(call.node) for call in function.calls)
                and any(call.loop is None and STEP in training.call_events(call) for call in function.calls)
            ]
            own = self.source.analysis(DeviceAnalysis).evidence.device.may_be_cuda
            self._step_functions = [
                function
                for function in steps
                if any(own or device.may_be_cuda for device in self._calling_loop_devices(function))
            ]
        return self._step_functions

    def _calling_loop_devices(self, function: FunctionRecord) -> list[Device]:
        """The devices of the loops, here and in the importing files, that call `function`."""
        from torchlint.facts.torch.training import TrainingAnalysis

        found = []
        for module in (self.source, *self.importers()):
            training = module.analysis(TrainingAnalysis)
            for call in module.calls:
                if call.loop is not None and any(t[1] is function for t in training.targets(call)):
                    found.append(module.analysis(CallerAnalysis).loop_device(call.loop))
        return found

    def loop_device(self, loop: LoopRecord) -> Device:
        """The device `loop` trains on: this module's evidence, or, when it has none for the GPU (a helper
        moving batches to a parameter), the strongest evidence of the project files that call into it — as
        a loader's device comes from the files that train with it."""
        own = self.source.analysis(DeviceAnalysis).evidence.device
        if own.may_be_cuda:
            return own
        modules = {id(module): module for module, _ in self.callers_elsewhere(loop)}
        return max((own, *(m.analysis(DeviceAnalysis).evidence.device for m in modules.values())))

    def callers_elsewhere(self, loop: LoopRecord) -> list[tuple[SourceModule, CallRecord]]:
        """The calls in other project files that run `loop`: calls of the function holding it or of a
        function of this module leading to it (`train_one_epoch(...)` in main.py), and, for a method, the
        constructions of its class (`Trainer(model, loader, ...)`, then `trainer.train()`)."""
        source = self.source
        functions: list[FunctionRecord] = []
        frontier = [loop.function] if loop.function is not None else []
        while frontier:
            function = frontier.pop()
            if function is None or any(function is seen for seen in functions):
                continue
            functions.append(function)
            frontier += [call.function for call in source.callers_of(function)]
        return self.calls_elsewhere(functions)

    def calls_elsewhere(self, functions: list[FunctionRecord]) -> list[tuple[SourceModule, CallRecord]]:
        """Calls in the files importing this one that run one of `functions` (or construct its class)."""
        classes = {f.owner.name: f.owner for f in functions if f.owner is not None}
        found = []
        for other in self._importers_naming({f.name for f in functions} | set(classes)) if functions else ():
            for call in other.calls:
                target = other.callee(call)
                if target is not None and any(target[1] is f for f in functions):
                    found.append((other, call))
                    continue
                func = call.node.func
                name = func.value if isinstance(func, cst.Name) else ""
                name = func.attr.value if isinstance(func, cst.Attribute) else name
                if name in classes:
                    resolved = other.resolve_class(func, call.scope)
                    if resolved is not None and resolved[1] is classes[name]:
                        found.append((other, call))
        return found

    def _importers_naming(self, names: set[str]) -> list[SourceModule]:
        """`importers()`, less the files whose text cannot name any of `names` (`project.may_name`), whose
        facts are then not built: a call runs a function of this module, or a method of its class, only by
        writing its name, the class's (`Trainer(...)` ... `trainer.fit()`), or a name an import gives one."""
        project = self.source.project
        if 2 in self._importers or project is None:
            return self.importers()  # built already (or nothing to build)
        requester = self.source.file
        return list(
            self.built(path for path in self.importer_files() if project.may_name(path, names, requester))
        )

    def importers(self, depth: int = 2) -> list[SourceModule]:
        """The project modules that import this one, and those that import them (a package's
        `__init__.py` re-exports the training function that a script calls)."""
        if depth not in self._importers:
            self._importers[depth] = list(self.built(self.importer_files(depth)))
        return self._importers[depth]

    def importer_files(self, depth: int = 2) -> Iterator[Path]:
        """The files of `importers()`, nearest first, found from the files' imports without building any
        of them, and listed as they are consumed: a question that needs only some of them builds those,
        and one that stops at the first (the editor's first look stops at a build) reads no further."""
        source = self.source
        project, file = source.project, source.file
        if project is None or file is None:
            return
        seen = {file}
        frontier = [file]
        for _ in range(depth):
            following = []
            for path in frontier:
                for importer in project.importers_of(path):
                    if importer not in seen:
                        seen.add(importer)
                        following.append(importer)
                        yield importer
            frontier = following

    def built(self, files: Iterable[Path]) -> Iterator[SourceModule]:
        """The facts of `files` (some of `importer_files()`) that parse, built one by one as consumed."""
        source = self.source
        if source.project is None:
            return
        for path in files:
            other = source.project.facts_for(path, source.file)
            if other is not None and other is not source:
                yield other
