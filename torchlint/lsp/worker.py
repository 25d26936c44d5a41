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
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


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
        while True:
            future, job, args = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = job(*args)
            except BaseException as error:  # noqa: BLE001 - the submitter gets it; the worker must live on
                future.set_exception(error)
            else:
                future.set_result(result)
