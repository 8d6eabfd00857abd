"""A provider that answers at once with a fixed text.

For benchmarks and tests of everything around recognition: the pipeline,
the exports, the queue. The fixed sentences are spread evenly over the
audio's duration, one segment per sentence, with evenly timed words.
"""

from __future__ import annotations

import re

from sidecar.providers.base import AnswersAtStart, AudioSpec, OnProgress, Started, StartRequest, stored_transcript
from sidecar.transcript.model import Segment, Transcript, Word, to_json

__all__ = ["DEFAULT_TEXT", "InstantProvider"]

DEFAULT_TEXT = "This is a fixed transcript. It does not depend on the audio."

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class InstantProvider(AnswersAtStart):
    name = "instant"
    answers_as = "instant"

    def __init__(
        self,
        text: str = DEFAULT_TEXT,
        *,
        language: str | None = "en",
        audio_spec: AudioSpec | None = None,
    ) -> None:
        self.model = "fixed"
        self._text = " ".join(text.split())
        self._language = language
        # PCM is the cheapest thing to produce, which is what benchmarks want
        # to measure around.
        self._spec = audio_spec or AudioSpec(format="wav_pcm16", bitrate=None)

    @property
    def audio_spec(self) -> AudioSpec:
        return self._spec

    async def find_started(self, attempt_key: str, audio_uri: str) -> str | None:
        return None

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        transcript = self.transcript(request.duration_ms / 1000)
        return Started(operation_id=f"instant-{request.attempt_key}", raw=to_json(transcript).encode())

    def parse(self, raw: bytes) -> Transcript:
        return stored_transcript(raw, "instant")

    async def aclose(self) -> None:
        return None

    def transcript(self, duration: float) -> Transcript:
        """The fixed text laid over ``duration`` seconds."""
        sentences = [s for s in _SENTENCE_END.split(self._text) if s]
        words_total = sum(len(s.split()) for s in sentences)
        # Without a duration, pretend a steady speaking pace.
        span = duration if duration > 0 else 0.4 * words_total
        step = span / words_total if words_total else 0.0
        segments: list[Segment] = []
        t = 0.0
        for sentence in sentences:
            words: list[Word] = []
            for token in sentence.split():
                words.append(Word(start=round(t, 3), end=round(t + step, 3), word=" " + token))
                t += step
            segments.append(Segment(start=words[0].start, end=words[-1].end, text=sentence, words=words))
        return Transcript(text=self._text, segments=segments, language=self._language, duration=duration)
