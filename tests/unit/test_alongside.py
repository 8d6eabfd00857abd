"""diarizer.Alongside: the speakers' thread, started now or later, never left running and never started late."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

from sidecar.providers.offline.diarizer import Alongside, Diarization, OfflineDiarizer


class Counting:
    """Stands in for the diarizer (its one method Alongside calls): counts its runs, held until let go."""

    def __init__(self) -> None:
        self.runs = 0
        self.running = threading.Event()
        self.go = threading.Event()

    def diarize(self, wav: Path, progress: Any = None, *, stop: threading.Event | None = None) -> Diarization:
        self.runs += 1
        self.running.set()
        self.go.wait(10)
        return Diarization(turns=[], voices={})


def _alongside(diarizer: Counting, *, later: bool) -> Alongside:
    return Alongside(cast(OfflineDiarizer, diarizer), Path("note.wav"), later=later)


def test_started_now_it_runs_at_once() -> None:
    diarizer = Counting()
    speakers = _alongside(diarizer, later=False)
    assert diarizer.running.wait(10)
    diarizer.go.set()
    assert speakers.result() is not None and diarizer.runs == 1


def test_started_later_nothing_runs_before_start_and_start_twice_runs_once() -> None:
    diarizer = Counting()
    speakers = _alongside(diarizer, later=True)
    assert not diarizer.running.wait(0.2) and diarizer.runs == 0
    speakers.start()
    speakers.start()
    assert diarizer.running.wait(10)
    diarizer.go.set()
    assert speakers.wait(10) and diarizer.runs == 1


def test_waiting_on_speakers_never_started_starts_them() -> None:
    diarizer = Counting()
    diarizer.go.set()
    speakers = _alongside(diarizer, later=True)
    assert speakers.result() is not None and diarizer.runs == 1


def test_stopped_before_it_started_it_never_starts() -> None:
    """The words failed before their first windows were encoded: no speakers are left behind, then or later."""
    diarizer = Counting()
    diarizer.go.set()
    speakers = _alongside(diarizer, later=True)
    speakers.stop()
    speakers.start()
    assert speakers.wait(0) and speakers.result() is None
    assert diarizer.runs == 0 and not [t for t in threading.enumerate() if t.name == "speakers"]
