"""The normalized transcript form (exports are tested through the route: tests/integration/test_exports.py)."""

from __future__ import annotations

from sidecar.transcript.model import Segment, Transcript, Word, to_json


def test_json_round_trips() -> None:
    t = Transcript(
        text="Hello there.",
        language="en",
        duration=1.5,
        segments=[Segment(start=0.0, end=1.52, text=" Hello there.", words=[Word(start=0.0, end=0.6, word=" Hello")])],
    )
    assert Transcript.model_validate_json(to_json(t)) == t
    assert Transcript.model_validate_json(to_json(Transcript(text="", segments=[]))) == Transcript(text="", segments=[])
