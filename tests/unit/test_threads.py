"""Threads from the CPUs this process may use: its affinity and its cgroup's CPU quota, not the host's count."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.runtime.threads import cgroup_cpu_limit, openmp_replicas, streams_and_threads, threads_for, usable_cpus


def _cgroup(tmp_path: Path, files: dict[str, str], own: str = "0::/") -> dict[str, Path]:
    """A fake cgroup tree (``files`` relative to its root) and a fake /proc/self/cgroup."""
    root = tmp_path / "cgroup"
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(own + "\n")
    return {"cgroup_root": root, "proc_cgroup": proc}


@pytest.mark.parametrize(
    ("cpu_max", "cpus"),
    [
        ("max 100000", None),
        ("200000 100000", 2),
        ("150000 100000", 2),  # a CPU and a half: rounded up
        ("50000 100000", 1),  # half a CPU: at least one
        ("100000 50000", 2),
        ("not a quota", None),
        ("", None),
    ],
)
def test_cgroup_v2_cpu_max(tmp_path: Path, cpu_max: str, cpus: int | None) -> None:
    assert cgroup_cpu_limit(**_cgroup(tmp_path, {"cpu.max": cpu_max})) == cpus


@pytest.mark.parametrize(
    ("quota", "period", "cpus"), [("-1", "100000", None), ("300000", "100000", 3), ("25000", "100000", 1)]
)
def test_cgroup_v1_cfs_quota(tmp_path: Path, quota: str, period: str, cpus: int | None) -> None:
    files = {"cpu/cpu.cfs_quota_us": quota, "cpu/cpu.cfs_period_us": period}
    assert cgroup_cpu_limit(**_cgroup(tmp_path, files, own="4:cpu:/\n0::/")) == cpus


def test_cgroup_v1_controllers_mounted_together(tmp_path: Path) -> None:
    files = {"cpu,cpuacct/cpu.cfs_quota_us": "200000", "cpu,cpuacct/cpu.cfs_period_us": "100000"}
    assert cgroup_cpu_limit(**_cgroup(tmp_path, files, own="3:cpu,cpuacct:/")) == 2


def test_a_parents_quota_binds_its_children_and_the_smallest_wins(tmp_path: Path) -> None:
    files = {
        "system.slice/cpu.max": "100000 100000",
        "system.slice/transcriber.service/cpu.max": "max 100000",
        "cpu/cpu.cfs_quota_us": "300000",
        "cpu/cpu.cfs_period_us": "100000",
    }
    paths = _cgroup(tmp_path, files, own="0::/system.slice/transcriber.service")
    assert cgroup_cpu_limit(**paths) == 1


def test_a_namespaced_container_reads_the_mounts_root(tmp_path: Path) -> None:
    """Without a cgroup namespace /proc says the host's path, but the mount is the container's own cgroup."""
    paths = _cgroup(tmp_path, {"cpu.max": "300000 100000"}, own="0::/docker/4f2a9c")
    assert cgroup_cpu_limit(**paths) == 3


def test_no_cgroup_files_means_no_limit(tmp_path: Path) -> None:
    assert cgroup_cpu_limit(cgroup_root=tmp_path / "none", proc_cgroup=tmp_path / "none") is None


def test_the_quota_caps_the_affinity_never_raises_it(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert usable_cpus(**_cgroup(tmp_path, {"cpu.max": "max 100000"})) == affinity
    assert usable_cpus(**_cgroup(tmp_path / "a", {"cpu.max": "100000 100000"})) == 1
    assert usable_cpus(**_cgroup(tmp_path / "b", {"cpu.max": f"{(affinity + 8) * 100000} 100000"})) == affinity


@pytest.mark.parametrize(("threads", "cores", "expected"), [(0, 2, 2), (0, 8, 8), (0, 1, 1), (3, 2, 3), (1, 8, 1)])
def test_each_decoder_replica_takes_every_usable_cpu_unless_set(threads: int, cores: int, expected: int) -> None:
    assert threads_for(threads, cores) == expected


@pytest.mark.parametrize(
    ("threads", "cores", "expected"),
    [
        (0, 2, (1, 2)),  # unset: one batch at a time on every core
        (0, 8, (1, 8)),
        (0, 1, (1, 1)),
        (1, 2, (2, 1)),  # set below the cores: as many batches at once as they hold
        (2, 8, (4, 2)),
        (3, 8, (2, 3)),
        (3, 2, (1, 3)),  # set above them: one batch on as many
    ],
)
def test_batched_decoding_runs_in_streams_when_threads_are_set_below_the_cores(
    threads: int, cores: int, expected: tuple[int, int]
) -> None:
    assert streams_and_threads(threads, cores) == expected


_CHILD = """
import json
from sidecar.runtime.threads import usable_cpus
from sidecar.providers.offline.provider import OfflineProvider
from sidecar.settings import OfflineSettings
provider = OfflineProvider(OfflineSettings(diarize=False), workers=2)
engine = provider.engine
print(json.dumps({"usable": usable_cpus(), "decoder_threads": engine.threads * engine.streams}))
"""


def _child(prefix: list[str]) -> dict[str, int]:
    done = subprocess.run(
        [*prefix, sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_a_process_pinned_to_one_cpu_decodes_with_one_thread() -> None:
    """For real: a child limited to one CPU by its affinity decodes on one thread, however many the host has;
    unlimited, on every usable CPU (its threads in all its streams)."""
    one = min(os.sched_getaffinity(0))
    assert _child(["taskset", "--cpu-list", str(one)]) == {"usable": 1, "decoder_threads": 1}
    free = _child([])
    assert free["usable"] == usable_cpus() == free["decoder_threads"]


@pytest.mark.parametrize(
    ("wanted", "least", "threads", "cpus", "besides", "expected"),
    [
        (2, 1, 2, 2, 0, 1),  # two workers on both of 2 cores: one replica, shared
        (2, 1, 1, 2, 0, 2),  # a thread each (speakers beside them): a replica each
        (2, 1, 1, 2, 2, 2),  # ... and the copy on both cores for a note's first windows
        (2, 1, 2, 4, 0, 2),  # two threads each on 4 cores
        (2, 1, 4, 4, 0, 1),
        (2, 2, 1, 2, 0, 2),  # streams: always as many as the streams
        (1, 0, 2, 2, 2, 0),  # a copy on both cores beside a model on both: it does not fit
        (1, 1, 1, 1, 0, 1),
    ],
)
def test_replicas_share_when_their_openmp_threads_would_outnumber_the_cpus(
    wanted: int, least: int, threads: int, cpus: int, besides: int, expected: int
) -> None:
    assert openmp_replicas(wanted, least, threads, cpus, besides) == expected
