"""Handing freed memory back to the system between the blocks of a long pass.

A long recording is worked through in blocks (the speech search reads 30
seconds at a time), each allocating and freeing buffers of a few megabytes.
glibc keeps what is freed for reuse, and a heap that has served thousands of
such blocks holds more and more of it in holes no one allocation fits: a
3-hour recording left the worker ~70 MB larger at its peak than a one-minute
one (bench PF4). Trimming after each block returns those pages at once and
keeps the peak flat. Fixing glibc's mmap threshold instead did as well for
the search but made every buffer of the offline recognizer a fresh mapping:
its ten minutes of Russian took 40 % longer (bench PF9).

Elsewhere than glibc (musl, macOS) there is nothing to call, and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["one_arena", "trim"]


def _libc(name: str) -> Callable[..., int] | None:
    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(ctypes.util.find_library("c")), name)
    except (OSError, AttributeError, TypeError):
        return None
    return function


_TRIM = _libc("malloc_trim")
_MALLOPT = _libc("mallopt")
_M_ARENA_MAX = -8  # glibc's malloc.h


def trim() -> None:
    """Returns the heap's free pages to the system (a no-op where the C library cannot)."""
    if _TRIM is not None:
        _TRIM(0)


def one_arena() -> None:
    """Threads started from now on share the main heap instead of each taking an arena of its own.

    The offline engine finds speakers in one thread while another decodes, both allocating and
    freeing large buffers; in arenas of their own, what one freed could not serve the other.
    Measured on 20 minutes of dialogues with speakers: a peak of 1,886-2,000 MB in one arena
    against 2,116-2,189 MB in many, in the same time (a note's recognition no slower).
    """
    if _MALLOPT is not None:
        _MALLOPT(_M_ARENA_MAX, 1)
