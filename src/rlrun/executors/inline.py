"""The `inline` executor: every item in this process, one after another.

This is what rlrun exists for: each item (a bench cell) is a hermetic call, so running them here gives
the same results as fresh processes, without paying an interpreter and its imports per item.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rlrun.executors.base import Executor, Finished, OnProgress, describe_exception, reporting_to


class InlineExecutor(Executor):
    """Runs `function(item)` for each item in turn in the calling thread.

    An `Exception` from `function` fails its item alone (`Finished.error`, one line); `KeyboardInterrupt`
    and `SystemExit` propagate at once: here they are the caller's own Ctrl-C or exit, and nothing else is
    running when they do.
    """

    name = "inline"
    exclusive = False

    def __init__(self) -> None:
        self._closed = False

    def _run(
        self,
        function: Callable[[Any], Any],
        items: Sequence[Any],
        on_start: Callable[[int], None] | None,
        on_progress: OnProgress | None,
    ) -> Iterator[Finished]:
        for index, item in enumerate(items):
            if on_start is not None:
                on_start(index)
            sink = functools.partial(on_progress, index) if on_progress is not None else None
            try:
                with reporting_to(sink):
                    finished = Finished(index, value=function(item))
            except Exception as error:
                finished = Finished(index, error=describe_exception(error))
            yield finished

    def close(self) -> None:
        self._closed = True


__all__ = ["InlineExecutor"]
