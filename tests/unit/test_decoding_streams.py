"""Batches decoded in streams (sidecar.providers.offline.batches.in_streams): at once, yet in order."""

from __future__ import annotations

import threading
import time

import pytest

from sidecar.providers.offline.batches import in_streams


def test_a_later_batch_may_finish_first_and_still_comes_out_in_its_turn() -> None:
    second_done = threading.Event()

    def run(batch: list[int]) -> list[int]:
        if batch == [0, 1]:
            # Only finishes once the next batch has: it cannot, unless the two run at once.
            assert second_done.wait(10), "the second batch never ran beside the first"
        else:
            second_done.set()
        return [i * 10 for i in batch]

    assert list(in_streams([[0, 1], [2, 3]], run, 2)) == [0, 10, 20, 30]


def test_no_more_batches_run_at_once_than_streams() -> None:
    lock = threading.Lock()
    running, most = 0, 0

    def run(batch: list[int]) -> list[int]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return batch

    assert list(in_streams([[i] for i in range(8)], run, 2)) == list(range(8))
    assert most == 2


def test_a_failed_batch_raises_in_its_turn() -> None:
    def run(batch: list[int]) -> list[int]:
        if batch == [1]:
            raise RuntimeError("the decoder failed on window 1")
        return batch

    got: list[int] = []
    with pytest.raises(RuntimeError, match="window 1"):
        for i in in_streams([[0], [1], [2]], run, 2):
            got.append(i)
    assert got == [0]


def test_stopping_early_leaves_nothing_running_and_starts_no_more() -> None:
    lock = threading.Lock()
    started: list[int] = []
    ended: list[int] = []

    def run(batch: list[int]) -> list[int]:
        with lock:
            started.append(batch[0])
        time.sleep(0.2)
        with lock:
            ended.append(batch[0])
        return batch

    out = in_streams([[i] for i in range(8)], run, 2)
    assert next(out) == 0
    out.close()  # the caller stops (a cancel, a failure of its own)
    with lock:
        assert sorted(ended) == sorted(started)  # every batch that started has ended: none left behind
        assert len(started) < 8  # the batches not yet started were dropped
