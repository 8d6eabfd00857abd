"""The heap's arena lever, in child processes (it changes a whole process): threads share one arena,
from the moment the sidecar is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.heap_probe import PAGES, faults_after_first_round

# Four threads each allocate a little from C, then glibc describes its heaps (malloc_info's XML).
_CHILD = """
import ctypes, ctypes.util, sys, threading
if sys.argv[1] == "one":
    from sidecar.media import heap
    heap.one_arena()
elif sys.argv[1] == "imported":
    import sidecar  # noqa: F401
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
held = []
def work():
    for _ in range(100):
        held.append(libc.malloc(1000))
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
out = libc.fopen(sys.argv[2].encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(out))
libc.fclose(ctypes.c_void_p(out))
"""


def _heaps(mode: str, tmp_path: Path) -> int:
    report = tmp_path / f"{mode}.xml"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(report)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return report.read_text().count("<heap nr=")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas")
def test_after_one_arena_new_threads_share_the_main_heap(tmp_path: Path) -> None:
    assert _heaps("many", tmp_path) > 1  # the default: threads take arenas of their own
    assert _heaps("one", tmp_path) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas")
def test_the_sidecar_sets_one_arena_as_it_is_imported(tmp_path: Path) -> None:
    """Before any thread of its own starts: a thread started earlier keeps an arena of its own, which a
    decoder's thread could then land on (3 million page faults over ten minutes of Russian, not 0.4)."""
    assert _heaps("imported", tmp_path) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_reused_large_buffers_are_not_mapped_afresh_each_time() -> None:
    reuse = "from sidecar.media import heap\nheap.one_arena()\nheap.reuse_large_buffers()"
    # the default: every round a fresh mapping, faulted in page by page
    assert faults_after_first_round("", 5) > 3 * PAGES
    # after the levers: served again from what the first round left in the heap
    assert faults_after_first_round(reuse, 5) < PAGES // 10
