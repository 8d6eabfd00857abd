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

The offline recognizer is the opposite case: a window's encoding and decoding
allocate buffers of tens of megabytes (the encoder's attention over 1,500
frames is 72 MB a layer), too large for a decoding thread's own arena (heaps
of 64 MB) and above glibc's mapping threshold, so each was a fresh mapping,
filled page by page and unmapped again: over ten minutes of Russian 1,900
mappings of 72-128 MB, 4 million page faults and 10 s of kernel time.
``reuse_large_buffers`` serves them from the one heap instead and keeps what
is freed for the next window.

Elsewhere than glibc (musl, macOS) there is nothing to call, and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["KEEP_FREED", "map_large_buffers", "one_arena", "reuse_large_buffers", "trim"]


def _libc(name: str) -> Callable[..., int] | None:
    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(ctypes.util.find_library("c")), name)
    except (OSError, AttributeError, TypeError):
        return None
    return function


_TRIM = _libc("malloc_trim")
_MALLOPT = _libc("mallopt")
# glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_DEFAULT_MMAP_MAX = 65536
# Freed memory at the heap's top kept for reuse before it is handed back: a few of a window's
# largest buffers (72 MB each). 64 MB kept left 1.4 million page faults of the 4 million.
KEEP_FREED = 256 << 20


def trim() -> None:
    """Returns the heap's free pages to the system (a no-op where the C library cannot)."""
    if _TRIM is not None:
        _TRIM(0)


def one_arena() -> None:
    """Threads started from now on share the main heap instead of each taking an arena of its own.

    The offline engine decodes in threads of the model's own and finds speakers in another, all
    allocating and freeing large buffers; in arenas of their own, what one freed could not serve
    the other, and a decoding thread's arena (heaps of 64 MB) could not hold a window's buffers.
    Measured on 20 minutes of dialogues with speakers: a peak of 1,886-2,000 MB in one arena
    against 2,116-2,189 MB in many, in the same time (a note's recognition no slower).
    """
    if _MALLOPT is not None:
        _MALLOPT(_M_ARENA_MAX, 1)


def reuse_large_buffers() -> None:
    """From now on, large buffers come from the heap, and up to ``KEEP_FREED`` of what is freed stays for reuse.

    Called once the offline model is loaded (the load's own buffers handed back first: kept in the
    heap they raised the worker's peak by 80 MB). Measured on ten minutes of Russian, the engine
    alone, three runs each: 26.5 s → 23.5 s, page faults 4.0 → 0.5 million, the peak 824 → 809 MB,
    the same words. Without one arena (``one_arena``) each decoding thread's arena is made of 64 MB
    heaps, which no such buffer fits, and nothing is gained.
    """
    trim()
    if _MALLOPT is not None:
        _MALLOPT(_M_MMAP_MAX, 0)
        _MALLOPT(_M_TRIM_THRESHOLD, KEEP_FREED)


def map_large_buffers() -> None:
    """Large buffers as fresh mappings again, as glibc has them by default (``reuse_large_buffers`` undone).

    For loading a second model once the first has turned reuse on: its load's buffers, served from
    the heap, stayed there behind the weights it keeps (a second copy of Whisper base raised the
    resident size by 253 MB; as mappings, by the weights alone).
    """
    if _MALLOPT is not None:
        _MALLOPT(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
