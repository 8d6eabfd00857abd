"""Blocking work in a worker thread that stops when its caller is cancelled."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

__all__ = ["run_in_thread"]

T = TypeVar("T")


async def run_in_thread(fn: Callable[[threading.Event], T], *, grace: float = 30.0) -> T:
    """Run blocking ``fn(cancel)`` in a worker thread; stop it when the caller is cancelled.

    anyio cannot interrupt a thread, and by default it waits for the thread
    to finish before delivering the cancellation, however long that takes.
    Here cancellation sets the event ``fn`` watches, then waits (shielded, at
    most ``grace`` seconds) for ``fn`` to notice, so no work is left running
    behind a step that has already given up.
    """
    cancel = threading.Event()
    finished = threading.Event()

    def work() -> T:
        try:
            return fn(cancel)
        finally:
            finished.set()

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except BaseException:
        cancel.set()
        if not finished.is_set():
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(finished.wait, grace)
        raise
