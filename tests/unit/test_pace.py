"""Progress of batched decoding window by window (sidecar.providers.offline.pace), on an injected clock."""

from __future__ import annotations

import itertools

import pytest

from sidecar.providers.offline import pace as pace_module
from sidecar.providers.offline.pace import ALIGN, CAP, ENCODE, GENERATE, LIMIT, Pace


@pytest.fixture(autouse=True)
def _nothing_learned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from the measured guesses: what a recording teaches is kept for the process's next ones."""
    monkeypatch.setattr(pace_module, "_LEARNED", {})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _batch(pace: Pace, clock: Clock, windows: int, encode_s: float, decode_s: float, told: list[float]) -> None:
    for _ in range(windows):
        pace.encoding()
        clock.now += encode_s
        pace.encoded()
    pace.generating(windows)
    for _ in range(int(decode_s)):
        clock.now += 1.0
        told.append(pace.done)  # what the ticker tells every second
    clock.now += decode_s - int(decode_s)
    pace.generated()
    for _ in range(windows):
        pace.aligned()


def test_a_batch_moves_window_by_window_and_by_the_clock() -> None:
    clock, told = Clock(), list[float]()
    pace = Pace(told.append, beam_size=5, clock=clock)
    _batch(pace, clock, 8, encode_s=0.35, decode_s=20.0, told=told)
    assert told == sorted(told)  # never back
    assert told[-1] == pytest.approx(8 * (ENCODE + GENERATE + ALIGN))
    steps = [b - a for a, b in itertools.pairwise(told)]
    # No move bigger than a tenth of the batch: encoding, each second of the decoder's call, alignment.
    assert max(steps) <= 0.1 * 8
    # The decoder's call is told by the clock: a report every second of it, each a move.
    assert sum(1 for s in steps if s > 0) >= 8 + 15 + 8


def test_a_call_slower_than_expected_waits_short_of_its_end() -> None:
    clock, told = Clock(), list[float]()
    pace = Pace(told.append, beam_size=5, clock=clock)
    for _ in range(4):
        pace.encoding()
        clock.now += 0.1
        pace.encoded()
    pace.generating(4)
    expected = 0.4 * 7.0  # what encoding the four windows took, times the beam's measured ratio
    seen = []
    for _ in range(20):  # past what encoding suggested: still moving, ever more slowly, never to its end
        clock.now += expected / 2
        seen.append(pace.done - 4 * ENCODE)
    assert all(b > a for a, b in itertools.pairwise(seen))
    assert seen[1] == pytest.approx(CAP * 4 * GENERATE, rel=0.05)
    assert CAP * 4 * GENERATE < seen[-1] < LIMIT * 4 * GENERATE
    clock.now += 1000.0
    assert pace.done - 4 * ENCODE == pytest.approx(LIMIT * 4 * GENERATE)
    pace.generated()
    assert pace.done == pytest.approx(4 * (ENCODE + GENERATE))


def test_the_pace_of_one_batch_is_the_next_ones_guess() -> None:
    clock, told = Clock(), list[float]()
    pace = Pace(told.append, beam_size=1, clock=clock)  # guessed: decoding takes 3× encoding
    _batch(pace, clock, 2, encode_s=1.0, decode_s=12.0, told=told)  # it took 6×
    start = pace.done
    for _ in range(2):
        pace.encoding()
        clock.now += 1.0
        pace.encoded()
    pace.generating(2)
    clock.now += 6.0  # half of the 12 s learned from the last batch
    assert pace.done - start == pytest.approx(2 * ENCODE + 0.5 * 2 * GENERATE)


def test_windows_encoded_for_the_language_vote_still_count() -> None:
    clock, told = Clock(), list[float]()
    pace = Pace(told.append, beam_size=5, clock=clock)
    for _ in range(3):
        pace.encoded()  # kept from the vote: no encoding now
    pace.generating(3)
    clock.now += 0.01
    pace.generated()
    assert pace.done == pytest.approx(3 * (ENCODE + GENERATE))


def test_a_recordings_first_batch_is_guessed_from_what_the_last_recordings_batches_took() -> None:
    clock, told = Clock(), list[float]()
    # A busy machine, speakers found beside the words: decoding took 2× encoding, not the quiet machine's 7×.
    first = Pace(told.append, beam_size=5, clock=clock)
    _batch(first, clock, 8, encode_s=1.0, decode_s=16.0, told=told)
    first.close()
    note = Pace(told.append, beam_size=5, clock=clock)  # a voice note's lone window teaches nothing
    _batch(note, clock, 1, encode_s=1.0, decode_s=9.0, told=told)
    note.close()
    told.clear()
    second = Pace(told.append, beam_size=5, clock=clock)
    _batch(second, clock, 8, encode_s=1.0, decode_s=16.0, told=told)
    second.close()
    steps = [b - a for a, b in itertools.pairwise(told)]
    assert max(steps) <= 0.1 * 8  # no jump at the call's end: it was expected to take what it took


def test_batches_decoded_in_streams_each_keep_their_own_call() -> None:
    """Two streams' calls at once, each from its own thread: one ending leaves the other's clock running."""
    from concurrent.futures import ThreadPoolExecutor

    clock, told = Clock(), list[float]()
    pace = Pace(told.append, beam_size=5, clock=clock)  # guessed: decoding takes 7× encoding
    with ThreadPoolExecutor(1) as a, ThreadPoolExecutor(1) as b:

        def encode(windows: int, seconds: float) -> None:
            for _ in range(windows):
                pace.encoding()
                clock.now += seconds
                pace.encoded()

        a.submit(encode, 2, 1.0).result()  # stream A reads two windows in 2 s: its call is expected to take 14 s
        b.submit(encode, 1, 0.5).result()  # stream B reads one in 0.5 s: 3.5 s
        a.submit(pace.generating, 2).result()
        b.submit(pace.generating, 1).result()
        clock.now += 3.5
        both = pace.done
        assert both == pytest.approx(3 * ENCODE + GENERATE * (2 * 3.5 / 14 + CAP), abs=0.02 * GENERATE)
        b.submit(pace.generated).result()
        # B's windows in full; A's call still counted by its own clock, from its own encoding.
        assert pace.done == pytest.approx(3 * ENCODE + GENERATE * (1 + 2 * 3.5 / 14))
        clock.now += 7.0
        assert pace.done == pytest.approx(3 * ENCODE + GENERATE * (1 + 2 * 10.5 / 14))
        a.submit(pace.generated).result()
    assert pace.done == pytest.approx(3 * (ENCODE + GENERATE))
    assert told == sorted(told)
