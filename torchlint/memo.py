"""Results kept for the process by the content they were computed from, within a budget.

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
