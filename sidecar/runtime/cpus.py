"""The CPUs of one worker process, shared between recognition and the offline insights engine.

Recognition comes first, always: while any own-work step of a recording runs
in this process (normalize, recognition, finalize), the offline engine is
stopped where it stands (SIGSTOP: it keeps its memory and its place, and
spins on nothing) and continued once the last such step ends. The pool also
takes insights work only while no such step runs and no insights step runs
already (one engine per process: two would share the same cores).

Measured (PROVIDERS.md §F): llama.cpp's threads busy-wait; beside other work
on two cores its generation fell from 9–11 to under 1.5 tokens a second. The
engine also runs with passive waiting (``OMP_WAIT_POLICY=PASSIVE``, set in
its own process only, so recognition's threads are not touched).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Protocol

__all__ = ["CpuGate", "Cpus", "Pausable"]


class Cpus(Enum):
    """What a step needs of this process's CPUs (the stage table declares it per stage)."""

    NONE = "none"  # waits on someone else (a provider's poll): holds nothing
    RECOGNITION = "recognition"  # a recording's own work: an offline insights engine stops meanwhile
    INSIGHTS = "insights"  # runs the offline insights engine: only while nothing else holds the CPUs


class Pausable(Protocol):
    def pause(self) -> None: ...

    def resume(self) -> None: ...


class CpuGate:
    def __init__(self) -> None:
        self._recording_steps = 0
        self._insights_steps = 0
        self._engines: list[Pausable] = []

    @property
    def recognizing(self) -> bool:
        """Whether an own-work step of a recording runs in this process now."""
        return self._recording_steps > 0

    @property
    def takes_insights(self) -> bool:
        """Whether this process may take insights work now."""
        return self._recording_steps == 0 and self._insights_steps == 0

    def free_for(self, cpus: Cpus) -> bool:
        """Whether a step needing ``cpus`` may be taken now (insights work only when nothing holds the CPUs)."""
        return cpus is not Cpus.INSIGHTS or self.takes_insights

    @contextmanager
    def hold(self, cpus: Cpus) -> Iterator[None]:
        """Around a step that needs ``cpus``."""
        if cpus is Cpus.RECOGNITION:
            with self.recording_step():
                yield
        elif cpus is Cpus.INSIGHTS:
            with self.insights_step():
                yield
        else:
            yield

    @contextmanager
    def recording_step(self) -> Iterator[None]:
        """Around an own-work step of a recording: the engine is stopped meanwhile."""
        self._recording_steps += 1
        if self._recording_steps == 1:
            for engine in list(self._engines):
                engine.pause()
        try:
            yield
        finally:
            self._recording_steps -= 1
            if self._recording_steps == 0:
                for engine in list(self._engines):
                    engine.resume()

    @contextmanager
    def insights_step(self) -> Iterator[None]:
        self._insights_steps += 1
        try:
            yield
        finally:
            self._insights_steps -= 1

    @contextmanager
    def engine(self, engine: Pausable) -> Iterator[None]:
        """While an offline engine runs: stopped at once if a recording's step runs now."""
        self._engines.append(engine)
        if self.recognizing:
            engine.pause()
        try:
            yield
        finally:
            self._engines.remove(engine)
