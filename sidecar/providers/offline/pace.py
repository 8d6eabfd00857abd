"""How far batched decoding has come, window by window, while a batch is decoded as one.

A batch of eight 30-second windows is one call to the decoder: on 2 cores
it takes 10–25 seconds, and nothing comes out of it until every window is
done. Counting progress by the segments that came out moved the sender's bar
a batch at a time (a ten-minute recording: nothing for 31 s, then 13 % →
62 % → done). Here each window counts as one unit of work in three parts,
told as they happen:

- **read** (``ENCODE``): the encoder reads one window at a time, each told;
- **decoded** (``GENERATE``): the decoder's call for the whole batch, told
  by the clock — the call is expected to take ``PER_ENCODE[beam]`` times
  what encoding its windows took (measured on 2 cores: greedy decoding about
  3×, a beam of five about 7×; the ratio, not a time, so it holds on any
  machine), learned again from every batch and kept for the process's next
  recordings (its first batch was the one that jumped: a guess of 7× where the
  call took 2×, on a busy machine with speakers found beside the words), told
  in proportion up to ``CAP`` of its share and creeping on towards
  ``LIMIT`` past it, so a slow batch keeps moving, just short of
  its end, instead of jumping back;
- **aligned** (``ALIGN``): the words' times, one window at a time, each told.

``done`` is in windows (fractions of them); the engine turns it into seconds
of the recording. A ticker thread tells the clock's part every ``TICK``
seconds while a decoder call runs. Batches decoded in streams (``batches``)
run their calls at once, each from a thread of its own: each thread's
encoding and call are its own, and ``done`` counts them all, never told
lower than before.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["CAP", "LIMIT", "Pace"]

# Each window's work: its share read, decoded and aligned (measured on 2 cores, beam 5: about
# 0.35 s to encode, 2.5 s to decode, 0.3 s to align a window).
ENCODE, GENERATE, ALIGN = 0.12, 0.78, 0.10
# How long decoding a batch takes against encoding its windows, by beam (measured on 2 cores).
PER_ENCODE = {1: 3.0, 2: 4.5, 3: 5.5, 4: 6.5, 5: 7.0}
# A decoder call's clock is told in proportion up to this share of it, then creeps on towards LIMIT (halfway in
# CREEP more expected lengths) until the call returns.
CAP = 0.9
LIMIT = 0.98
CREEP = 0.7
# A call of at least this many windows teaches the process's later recordings (a voice note's lone window is
# decoded at a worse ratio than a batch's eight).
TEACHES = 4
# What earlier recordings of this process taught, by beam: the next recording's first guess.
_LEARNED: dict[int, float] = {}
# How often the clock's part is told while a decoder call runs.
TICK = 1.0


class Pace:
    """Windows done so far (fractions included), told to ``tell`` as they move; from any thread."""

    def __init__(
        self,
        tell: Callable[[float], None],
        beam_size: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        learned: dict[int, float] | None = None,
    ):
        self._tell = tell
        self._clock = clock
        self._beam = beam_size
        self._learned = _LEARNED if learned is None else learned
        self._ratio = self._learned.get(beam_size) or PER_ENCODE.get(beam_size, PER_ENCODE[5] + beam_size - 5)
        self._done = 0.0  # windows, counted from completed parts
        # By decoding thread: what encoding its current batch's windows took, when its window's encoding began.
        self._encode_seconds: dict[int, float] = {}
        self._encode_started: dict[int, float] = {}
        # The running calls by thread: (started, windows, expected seconds, what encoding its windows took).
        self._calls: dict[int, tuple[float, int, float, float]] = {}
        self._told = 0.0
        self._lock = threading.Lock()
        self._telling = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    @property
    def done(self) -> float:
        """Windows done, the running decoder call's clock included."""
        with self._lock:
            return self._done + self._running_share()

    def encoding(self) -> None:
        """A window's encoding starts (in this thread)."""
        with self._lock:
            self._encode_started[threading.get_ident()] = self._clock()

    def encoded(self) -> None:
        """A window is read by the encoder (in this thread)."""
        me = threading.get_ident()
        with self._lock:
            started = self._encode_started.pop(me, None)
            if started is not None:
                self._encode_seconds[me] = self._encode_seconds.get(me, 0.0) + self._clock() - started
        self._add(ENCODE)

    def generating(self, windows: int) -> None:
        """The decoder's call for a batch of ``windows`` starts in this thread; its clock runs until ``generated``."""
        me = threading.get_ident()
        with self._lock:
            encoded = self._encode_seconds.pop(me, 0.0)
            # Windows the language vote encoded earlier cost nothing now: at least a guess per window.
            expected = max(encoded * self._ratio, 0.05 * windows)
            self._calls[me] = (self._clock(), windows, expected, encoded)
        self._start_ticker()
        self._say()

    def generated(self) -> None:
        """This thread's decoder call returned: its windows' share in full, and the ratio learned from it."""
        with self._lock:
            call = self._calls.pop(threading.get_ident(), None)
            if call is None:
                return
            started, windows, _expected, encoded = call
            took = self._clock() - started
            if encoded > 0 and took > 0:
                # What the call took against what encoding its windows took: the next call's guess, and (a batch's)
                # the next recording's first.
                self._ratio = took / encoded
                if windows >= TEACHES:
                    self._learned[self._beam] = self._ratio
            self._done += GENERATE * windows
        self._say()

    def aligned(self) -> None:
        """A window's words are aligned."""
        self._add(ALIGN)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2 * TICK)

    def _add(self, share: float) -> None:
        with self._lock:
            self._done += share
        self._say()

    def _say(self) -> None:
        """``done`` told, unless another thread has told more meanwhile."""
        with self._telling:
            done = self.done
            if done >= self._told:
                self._told = done
                self._tell(done)

    def _running_share(self) -> float:
        now = self._clock()
        return sum(
            GENERATE * windows * _told((now - started) / expected)
            for started, windows, expected, _encoded in self._calls.values()
        )

    def _start_ticker(self) -> None:
        if self._ticker is not None:
            return

        def tick() -> None:
            while not self._stop.wait(TICK):
                if self._calls:
                    self._say()

        self._ticker = threading.Thread(target=tick, name="decoding-pace", daemon=True)
        self._ticker.start()


def _told(x: float) -> float:
    """The share of a decoder call told at ``x`` times its expected length: in proportion up to ``CAP``, then on
    towards ``LIMIT`` (halfway there in ``CREEP`` more), never past it before the call returns."""
    if x <= CAP:
        return max(x, 0.0)
    return CAP + (LIMIT - CAP) * (1.0 - math.exp(-(x - CAP) * math.log(2) / CREEP))
