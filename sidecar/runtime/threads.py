"""Threads: how many CPUs this process may use, and blocking work in a worker thread that stops when cancelled.

``usable_cpus`` is the one answer to "how many threads": the decoder's
threads (CTranslate2), the diarizer's (torch) and the benchmarks all come
from it. ``os.cpu_count()`` counts the host's CPUs, not ours: a container
limited to two CPUs on a 32-core host, or three replicas of the sidecar
sharing a limited machine, would each start 32 threads and spend their
time being descheduled.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = [
    "STOP_WAIT",
    "cgroup_cpu_limit",
    "left_running",
    "openmp_fits",
    "openmp_replicas",
    "run_in_thread",
    "streams_and_threads",
    "threads_for",
    "usable_cpus",
]

T = TypeVar("T")

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def usable_cpus(*, cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """The CPUs this process may use: its CPU affinity, capped by its cgroup's CPU quota; at least 1.

    The affinity (``taskset``, ``docker --cpuset-cpus``) says which CPUs the
    process may run on; the quota (``docker --cpus``, ``cpu.max``) how much
    CPU time it gets, rounded up to whole CPUs. The smaller wins.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_limit(cgroup_root=cgroup_root, proc_cgroup=proc_cgroup)
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, cpus)


def cgroup_cpu_limit(*, cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int | None:
    """Whole CPUs the cgroup CPU quota allows (rounded up, at least 1); None without a quota.

    cgroup v2: ``cpu.max`` ("max 100000": none; "200000 100000": 2 CPUs).
    cgroup v1: ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` (-1: none),
    where the ``cpu`` controller is mounted (``cpu`` or ``cpu,cpuacct``).
    The process's own cgroup (``/proc/self/cgroup``) and every cgroup above
    it are read, since a parent's quota binds its children; in a container
    whose cgroup is the mount's root, the root alone. The smallest wins.
    """
    fractions = [quota / period for quota, period in _quotas(cgroup_root, proc_cgroup)]
    if not fractions:
        return None
    return max(1, math.ceil(min(fractions)))


def _quotas(root: Path, proc_cgroup: Path) -> Iterator[tuple[int, int]]:
    unified, v1_controllers, v1_path = "/", "cpu", "/"
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        hierarchy, controllers, path = [*line.split(":", 2), "", ""][:3]
        if hierarchy == "0" and not controllers:
            unified = path
        elif "cpu" in controllers.split(","):
            v1_controllers, v1_path = controllers, path
    for directory in _up_from(root, unified):
        found = _read_v2(directory / "cpu.max")
        if found is not None:
            yield found
    mounts = {root / name for name in (v1_controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu")}
    for mount in sorted(m for m in mounts if m.is_dir()):
        for directory in _up_from(mount, v1_path):
            found = _read_v1(directory)
            if found is not None:
                yield found


def _up_from(mount: Path, path: str) -> Iterator[Path]:
    """The cgroup directory of ``path`` under ``mount`` and each one above it, up to ``mount``."""
    here = mount / path.strip("/") if path.strip("/") else mount
    if not here.is_dir():
        here = mount  # a namespaced container: the mount is our own cgroup
    while True:
        yield here
        if here == mount:
            return
        here = here.parent


def _read_v2(path: Path) -> tuple[int, int] | None:
    try:
        quota, period = path.read_text().split()[:2]
        return _limit(quota, period)
    except (OSError, ValueError):
        return None


def _read_v1(directory: Path) -> tuple[int, int] | None:
    try:
        quota = (directory / "cpu.cfs_quota_us").read_text().strip()
        period = (directory / "cpu.cfs_period_us").read_text().strip()
        return _limit(quota, period)
    except (OSError, ValueError):
        return None


def _limit(quota: str, period: str) -> tuple[int, int] | None:
    if quota == "max":
        return None
    q, p = int(quota), int(period)
    return (q, p) if q > 0 and p > 0 else None


def threads_for(threads: int, cores: int | None = None) -> int:
    """The decoder's threads in each of its replicas: as set, or (0) ``cores`` (every usable CPU).

    Not the CPUs shared among the workers: decoding a lone recording on one thread of two
    left the other idle (a 30-second note 5.0 s against 3.7 s). Workers whose replicas would
    then run more threads than there are CPUs share one replica (``openmp_replicas``).
    """
    if threads:
        return threads
    return max(1, cores if cores is not None else usable_cpus())


def openmp_replicas(wanted: int, least: int, threads: int, cpus: int, besides: int = 0) -> int:
    """Replicas of a model on ``threads`` threads each: ``wanted`` (one for each call that may run at
    once) when OpenMP's waits still spin with them, else ``least`` (a call beyond them waits its turn).

    CTranslate2 runs a replica's calls on OpenMP (libgomp, as its wheels ship it), whose threads
    wait for each other between the parts of every decoding step. libgomp spins in those waits only
    while the threads it has started — every replica's, and those of another model of the process
    (``besides`` threads) — are fewer than the CPUs; past that, each wait is a sleep and a wake-up,
    thousands a second. Measured on ten minutes of Russian, 2 cores, one recording: two replicas of
    two threads (a worker's each) 35 s, 335,000 context switches; one replica 23 s, 3,000; the same
    words. The second replica slowed the first whether or not it was working.
    """
    return wanted if openmp_fits(wanted, threads, cpus, besides) else least


def openmp_fits(replicas: int, threads: int, cpus: int, besides: int = 0) -> bool:
    """Whether ``replicas`` of a model on ``threads`` threads each, and another model on ``besides``,
    leave OpenMP spinning (``openmp_replicas`` says why)."""
    started = replicas * (threads - 1) + max(0, besides - 1)  # each team's calling thread is not started
    return started < cpus


def streams_and_threads(threads: int, cores: int) -> tuple[int, int]:
    """How batched decoding spreads over ``cores``: (batches decoded at once, threads each).

    Unset (0): one batch at a time on every core. Set below the cores: as many batches at once as
    the cores hold, each on ``threads`` of them. Measured on 2 cores without AMX, the same words
    either way: the engine alone in a script, two batches of two windows at once on a thread each
    took 29-34 s over ten minutes of Russian against 43-57 s for batches of four on both threads;
    through the pipeline, where one batch on both threads ran faster (33 s), the two were level
    (0.94-1.20×) and the streams held up to 140 MB more. With AMX, one batch on both threads was the
    faster (5.97 s against 6.81 s for the same eight windows). A decoding step is small: on more
    cores, one batch gains little from each thread added, which is what streams are for.
    """
    if threads:
        return max(1, cores // threads), threads
    return 1, max(1, cores)


# How long a cancelled caller waits for its work to notice before going on without it.
STOP_WAIT = 2.0

_left: set[threading.Thread] = set()  # work a cancelled caller went on without, still running


async def run_in_thread(fn: Callable[[threading.Event], T], *, grace: float = STOP_WAIT) -> T:
    """Run blocking ``fn(cancel)`` in a thread of its own; stop it when the caller is cancelled.

    anyio cannot interrupt a thread, and by default it waits for the thread
    to finish before delivering the cancellation, however long that takes.
    Here cancellation sets the event ``fn`` watches, then waits (shielded, at
    most ``grace`` seconds) for ``fn`` to notice. Work that notices only later
    (a decoder call of a whole batch, 10-25 s on 2 cores, cannot be stopped
    inside) is left to end on its own: the step hands its record back at
    once, so a stop stays within its grace. The thread is a daemon, so such
    work never holds the process open (``left_running`` counts it).
    """
    cancel = threading.Event()
    finished = threading.Event()
    done = anyio.Event()
    token = anyio.lowlevel.current_token()
    result: list[T] = []
    error: list[BaseException] = []

    def work() -> None:
        try:
            result.append(fn(cancel))
        except BaseException as e:  # handed to the caller, whatever it is
            error.append(e)
        finally:
            finished.set()
            _left.discard(threading.current_thread())
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except RuntimeError:  # the caller's event loop is gone: nobody waits
                pass

    thread = threading.Thread(target=work, name=f"work-{getattr(fn, '__name__', 'fn')}", daemon=True)
    thread.start()
    try:
        await done.wait()
    except BaseException:
        cancel.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(grace):
            await done.wait()
        if not finished.is_set():
            _left.add(thread)
        raise
    if error:
        raise error[0]
    return result[0]


def left_running() -> int:
    """Work that cancelled callers went on without and that has not ended yet."""
    return sum(1 for t in list(_left) if t.is_alive())
