"""How many page faults a window-sized buffer costs when a thread allocates, fills and frees it again.

The heap's levers change a whole process, so each probe is a child process of its own: ``setup``
(Python run first, e.g. loading the model), then a thread that allocates a 72 MB buffer from C
(the encoder's attention over 1,500 frames, one layer), writes every page and frees it, ``rounds``
times. The answer is the minor page faults of every round but the first: a buffer served again
from the heap faults nothing, a fresh mapping every page (18,432 of them).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["PAGES", "SIZE", "faults_after_first_round"]

SIZE = 72 * 1024 * 1024
PAGES = SIZE // 4096

_ROUNDS = """
import ctypes, ctypes.util, resource, threading
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
faults = []
def work():
    for _ in range({rounds}):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        p = libc.malloc({size})
        ctypes.memset(p, 1, {size})
        libc.free(p)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
t = threading.Thread(target=work)
t.start()
t.join()
print(sum(faults[1:]))
"""


def faults_after_first_round(setup: str, rounds: int, *, cwd: Path | None = None, timeout: float = 120) -> int:
    """The page faults of rounds 2..``rounds`` in a child process that ran ``setup`` first."""
    code = setup + "\n" + _ROUNDS.format(rounds=rounds, size=SIZE)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)
