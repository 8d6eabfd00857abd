"""Speaker turns laid over a transcript, and the labels people read (SP1)."""

from __future__ import annotations

from sidecar.transcript.join import PieceResult, join
from sidecar.transcript.model import Segment, Transcript, Word
from sidecar.transcript.speakers import Turn, VoiceLinker, assign, numbered


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


def test_pieces_with_voices_match_the_same_voice_across_pieces() -> None:
    alice, bob, carol = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]

    def piece(start: float, turns: list[tuple[str, float]], voices: dict[str, list[float]]) -> PieceResult:
        segs, t = [], 0.0
        for label, seconds in turns:
            segs.append(Segment(start=t, end=t + seconds, text=label, speaker=label))
            t += seconds
        return PieceResult(start, start + t, Transcript(text="", segments=segs, voices=voices))

    first = piece(0.0, [("S0", 30.0), ("S1", 25.0)], {"S0": alice, "S1": bob})
    # the next piece's own labels, in another order, a little off the same voices, and a newcomer
    second = piece(
        60.0,
        [("S0", 40.0), ("S1", 30.0), ("S2", 21.0)],
        {"S0": [0.1, 0.99, 0.0], "S1": [0.98, 0.0, 0.1], "S2": carol},
    )
    joined = numbered(join([first, second]))
    assert [s.speaker for s in joined.segments] == ["Speaker 1", "Speaker 2", "Speaker 2", "Speaker 1", "Speaker 3"]


def test_two_loud_speakers_of_one_piece_never_become_one() -> None:
    linker = VoiceLinker()
    assert linker.link({"a": 60.0}, {"a": [1.0, 0.0]}) == {"a": "S0"}
    # both close to S0, both with plenty of speech: the larger takes it, the other is someone else
    assert linker.link({"x": 50.0, "y": 40.0}, {"x": [0.99, 0.1], "y": [0.97, 0.2]}) == {"x": "S0", "y": "S1"}
    # a fragment (little speech) may join a voice already named in its run
    assert linker.link({"p": 50.0, "q": 5.0}, {"p": [1.0, 0.0], "q": [0.999, -0.05]}) == {"p": "S0", "q": "S0"}
