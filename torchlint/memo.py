"""Results kept by what they were computed from: for the process by content, within a budget
(`ByContent`), or for one module's facts by the identity of the nodes asked about (`ByIdentity`).

The Language Server's every check is a new run, which would otherwise read, scan and parse all the other
files its questions reach again: their content rarely changes between two keystrokes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

Content = TypeVar("Content", bytes, str)
Result = TypeVar("Result")


class ByContent(Generic[Content, Result]):
    """`function(content)`, kept by the content up to `limit` of its length in all (the least recently used
    out first; the latest result always stays)."""

    def __init__(self, function: Callable[[Content], Result], limit: int) -> None:
        self.function = function
        self.limit = limit
        self._results: dict[Content, Result] = {}  # in the order of use
        self._kept = 0

    def __call__(self, content: Content) -> Result:
        results = self._results
        if content in results:
            found = results.pop(content)
        else:
            found = self.function(content)
            self._kept += len(content)
            while self._kept > self.limit and results:
                oldest = next(iter(results))
                del results[oldest]
                self._kept -= len(oldest)
        results[content] = found
        return found


class ByIdentity(Generic[Result]):
    """Answers of a pure question about syntax nodes (and a scope), kept by the objects' identities and an
    optional hashable `extra` (a depth). The objects are kept with the answer: a question may ask about a
    node it made, whose id another object could take once it is freed."""

    def __init__(self) -> None:
        self._kept: dict[tuple, tuple[tuple[object, ...], Result]] = {}

    def answer(self, objects: tuple, compute: Callable[[], Result], extra: object = None) -> Result:
        key = (*map(id, objects), extra)
        kept = self._kept.get(key)
        if kept is None:
            kept = self._kept[key] = (objects, compute())
        return kept[1]
