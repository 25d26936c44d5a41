"""The one thread that runs the checks, so that the event loop stays free to answer requests.

A check of a big buffer takes seconds; run on the loop, it held every hover and light bulb of every file
until it ended. Why one thread: the checker's caches (parsed statements, other files' trees, the settings
read) are shared by every check and are not thread-safe, and one thread serialises them without locks.
Why a thread, not a process: those caches are what make the check after a keystroke cheap, and they live
here. Jobs run in the order submitted, so a `forget` queued before a check happens before it; a job
cancelled before it starts (its document changed again) never runs; one already running finishes, and
the server drops its result. The thread is a daemon: `exit` does not wait for a huge buffer's check.
"""

from __future__ import annotations

import asyncio
import gc
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

# The cyclic collector's passes, where the server turned automatic collection off (`torchlint lsp`): a pass
# over everything the server keeps (other files' trees and facts, the project's answers) took 160-260 ms on
# yolov5 and came every few keystrokes, inside a check; the young generations' passes cost 5-10 ms of every
# check. Each check leaves its facts in reference cycles, freed by the next pass: one runs once the editor
# has paused this long after a job, or before a job once this many ran without a pause.
IDLE_S = 1.0
JOBS_PER_PASS = 32


class Worker:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future, Callable[..., Any], tuple]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[..., T], *args: Any) -> Future[T]:
        """Queue `job(*args)`; its future can be cancelled until the job starts."""
        future: Future[T] = Future()
        self._jobs.put((future, job, args))
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="torchlint-checks", daemon=True)
            self._thread.start()
        return future

    async def run(self, job: Callable[..., T], *args: Any) -> T:
        """`job(*args)` on the worker, awaited on the running loop. `asyncio.wrap_future` hands the result
        over with the loop's thread-safe call, and cancelling the await cancels a job not yet started."""
        return await asyncio.wrap_future(self.submit(job, *args))

    def _serve(self) -> None:
        done = 0  # jobs run since the collector's last pass
        while True:
            try:
                future, job, args = self._jobs.get(timeout=IDLE_S if done else None)
            except queue.Empty:
                _collect()
                done = 0
                continue
            done += 1
            if done > JOBS_PER_PASS:
                _collect()
                done = 1
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = job(*args)
            except BaseException as error:  # noqa: BLE001 - the submitter gets it; the worker must live on
                future.set_exception(error)
            else:
                future.set_result(result)


def _collect() -> None:
    """A full pass of the cyclic collector, where automatic collection is off (else it runs on its own)."""
    if not gc.isenabled():
        gc.collect()
