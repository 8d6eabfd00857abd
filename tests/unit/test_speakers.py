"""Speaker turns laid over a transcript, and the labels people read (SP1)."""

from __future__ import annotations

from sidecar.join import PieceResult, join
from sidecar.speakers import Turn, assign, numbered
from sidecar.transcript import Segment, Transcript, Word


def words(*spec: tuple[str, float, float]) -> list[Word]:
    return [Word(start=a, end=b, word=f" {w}") for w, a, b in spec]


def test_a_segment_whose_words_change_speaker_is_split_there() -> None:
    segment = Segment(
        start=0.0,
        end=4.0,
        text="Ready? Yes, quite ready.",
        words=words(("Ready?", 0.1, 0.6), ("Yes,", 1.6, 2.0), ("quite", 2.1, 2.5), ("ready.", 2.6, 3.2)),
    )
    turns = [Turn(0.0, 1.0, "a"), Turn(1.4, 3.5, "b")]
    out = assign(Transcript(text=segment.text, segments=[segment]), turns)
    assert [(s.start, s.end, s.text, s.speaker) for s in out.segments] == [
        (0.0, 0.6, "Ready?", "a"),
        (1.6, 4.0, "Yes, quite ready.", "b"),
    ]
    assert [w.speaker for s in out.segments for w in s.words or []] == ["a", "b", "b", "b"]


def test_a_word_takes_the_speaker_it_overlaps_most_or_else_the_nearest() -> None:
    segment = Segment(start=0.0, end=9.0, text="x", words=words(("one", 0.9, 1.5), ("two", 5.0, 5.2)))
    turns = [Turn(0.0, 1.0, "a"), Turn(1.0, 3.0, "b"), Turn(6.0, 8.0, "c")]
    out = assign(Transcript(text="x", segments=[segment]), turns)
    assert [s.speaker for s in out.segments] == ["b", "c"]  # 0.5 s with b beats 0.1 s with a; 5.1 nearest c


def test_segments_without_words_get_the_speaker_of_their_span() -> None:
    segments = [Segment(start=0.0, end=2.0, text="first"), Segment(start=2.0, end=5.0, text="second")]
    out = assign(Transcript(text="first second", segments=segments), [Turn(0, 2.2, "a"), Turn(2.2, 5, "b")])
    assert [s.speaker for s in out.segments] == ["a", "b"]


def test_labels_are_numbered_by_first_appearance_and_dropped_for_a_single_speaker() -> None:
    def transcript(*labels: str) -> Transcript:
        return Transcript(
            text="",
            segments=[Segment(start=i, end=i + 1, text=f"s{i}", speaker=label) for i, label in enumerate(labels)],
        )

    assert [s.speaker for s in numbered(transcript("SPEAKER_07", "SPEAKER_02", "SPEAKER_07")).segments] == [
        "Speaker 1",
        "Speaker 2",
        "Speaker 1",
    ]
    assert [s.speaker for s in numbered(transcript("A", "A")).segments] == [None, None]


def test_pieces_keep_their_speakers_apart() -> None:
    # "0" in one piece and "0" in the next were told apart by different runs: not the same person.
    def piece(start: float, *labels: str) -> PieceResult:
        segs = [Segment(start=i, end=i + 0.5, text=f"w{i}", speaker=label) for i, label in enumerate(labels)]
        return PieceResult(start, start + len(labels), Transcript(text="", segments=segs))

    joined = numbered(join([piece(0.0, "0", "1"), piece(10.0, "0")]))
    assert [(s.start, s.speaker) for s in joined.segments] == [
        (0.0, "Speaker 1"),
        (1.0, "Speaker 2"),
        (10.0, "Speaker 3"),
    ]
