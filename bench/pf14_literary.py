"""PF14: the literary text's rule-based edition (``sidecar.literary.edition``: what the literary step runs).

* **time per hour of audio**: the edition of a synthesized long transcript (meeting segments with
  words, three speakers, fillers and stutters as recognizers write them), six hours in a full run,
  one in a quick one, per language. Goal: under 2 s an hour. Reference: a bare pass over the same
  segments (their texts joined and split into words), what any reading of them costs.
* **word error rate against the reference text**, of the transcript and of the literary text: the
  committed meetings (``testkit.meetings``, both languages, the first ten minutes) are the reference; the
  "transcript" is that text as a recognizer writes it, with fillers, repeated words and repeated
  phrases put in (seeded). Goal: the literary text's WER never above the transcript's (the edition
  takes out what was not said to be read and adds nothing). The words a recognizer gets wrong are
  not simulated: those the rule-based edition leaves as they are. A repeat of a word people repeat on
  purpose ("так так", "that that") stays, and counts as an error here.
* **fidelity**: the share of the reference's numbers and dictionary names the literary text keeps.
  Goal: 100 %.

``python -m bench.pf14_literary`` prints the figures of a quick run.
"""

from __future__ import annotations

import random
import re
import time
from typing import Any

from bench.common import Figure
from testkit.meetings import Meeting, hour, ten_minutes
from testkit.wer import word_errors

GOAL_S_PER_HOUR = 2.0
FILLERS = {"ru": ["э", "эм", "ну-у", "м-м"], "en": ["uh", "um", "er", "hmm"]}
SPEAKERS = ("Speaker 1", "Speaker 2", "Speaker 3")


def _spoken(text: str, language: str, rng: random.Random) -> str:
    """``text`` as a recognizer writes a person saying it: a filler now and then, a word or a phrase
    said twice."""
    out: list[str] = []
    words = text.split()
    i = 0
    while i < len(words):
        roll = rng.random()
        if roll < 0.06:
            out.append(rng.choice(FILLERS[language]) + ("," if rng.random() < 0.5 else ""))
        elif roll < 0.10 and words[i].isalpha():
            out.append(words[i])  # "я я"
        elif roll < 0.12 and i + 1 < len(words) and words[i].isalpha() and words[i + 1].isalpha():
            out += words[i : i + 2]  # "let us let us"
        out.append(words[i])
        i += 1
    return " ".join(out)


def _transcript(
    language: str, hours: float, seed: int = 14, meeting: Meeting | None = None
) -> tuple[list[dict[str, Any]], str]:
    """Segments (with timed words and speakers) of ``hours`` of the meetings (or of ``meeting`` once)
    said with disfluencies, and the reference text they were made from."""
    rng = random.Random(seed)
    once = meeting is not None
    meeting = meeting or hour(language)
    segments: list[dict[str, Any]] = []
    reference: list[str] = []
    offset = 0.0
    length = float(meeting.segments[-1]["end"]) + 2.0
    while True:
        for n, seg in enumerate(meeting.segments):
            text = _spoken(str(seg["text"]), language, rng)
            start, end = float(seg["start"]) + offset, float(seg["end"]) + offset
            tokens = text.split()
            step = (end - start) / max(len(tokens), 1)
            words = [
                {"start": round(start + k * step, 2), "end": round(start + (k + 0.9) * step, 2), "word": w}
                for k, w in enumerate(tokens)
            ]
            segments.append({"start": start, "end": end, "text": text, "speaker": SPEAKERS[n // 7 % 3], "words": words})
            reference.append(str(seg["text"]))
        offset += length
        if once or offset >= hours * 3600:
            break
    return segments, " ".join(reference)


def _timed(language: str, hours: float) -> tuple[float, float, int]:
    from sidecar.literary.edition import edit

    segments, _ = _transcript(language, hours)
    t0 = time.perf_counter()
    words = sum(len(s["text"].split()) for s in segments)
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    paragraphs = edit(segments, language)
    took = time.perf_counter() - t0
    assert paragraphs and words
    return took / hours, bare / hours, len(paragraphs)


def _kept(reference: str, text: str, names: list[str]) -> tuple[int, int]:
    """(kept, wanted): the reference's numbers, and its dictionary names, found in ``text`` as often."""
    wanted = kept = 0
    for number in set(re.findall(r"\d+(?:[.,]\d+)?", reference)):
        n = reference.count(number)
        wanted += n
        kept += min(n, text.count(number))
    for name in names:
        n = reference.count(name)
        wanted += n
        kept += min(n, text.count(name))
    return kept, wanted


def run(quick: bool) -> list[Figure]:
    from sidecar.literary.edition import edit

    hours = 1.0 if quick else 6.0
    figures: list[Figure] = []
    for language in ("ru", "en"):
        per_hour, bare, count = _timed(language, hours)
        figures.append(
            Figure(
                f"PF14.time.{language}",
                f"rule-based edition of {hours:g} h of a {language} meeting transcript, seconds per hour of audio",
                per_hour,
                "s/h",
                f"< {GOAL_S_PER_HOUR} s/h",
                per_hour < GOAL_S_PER_HOUR,
                reference=bare,
                ref_label="a bare pass over the words",
                note=f"{count} paragraphs",
                digits=3,
            )
        )
        # Ten minutes: the word error count is quadratic in the words.
        segments, reference = _transcript(language, 0, meeting=ten_minutes(language))
        transcript = " ".join(s["text"] for s in segments)
        # A curly apostrophe is the same letter of the same word ("let’s"): counted as the straight one.
        literary = " ".join(p.text for p in edit(segments, language)).replace("’", "'")
        t_errors, n = word_errors(reference, transcript)
        l_errors, _ = word_errors(reference, literary)
        figures.append(
            Figure(
                f"PF14.wer.{language}",
                f"WER of the literary text against the reference, ten minutes of a {language} meeting said "
                "with fillers and repeats",
                100 * l_errors / n,
                "%",
                "≤ the transcript's",
                l_errors <= t_errors,
                reference=100 * t_errors / n,
                ref_label="the transcript's",
                digits=2,
            )
        )
        kept, wanted = _kept(reference, literary, ten_minutes(language).dictionary)
        figures.append(
            Figure(
                f"PF14.fidelity.{language}",
                f"numbers and dictionary names of the reference kept in the literary text ({language}, ten minutes)",
                100 * kept / max(wanted, 1),
                "%",
                "100 %",
                kept == wanted,
                note=f"{kept} of {wanted}",
            )
        )
    return figures


if __name__ == "__main__":
    for figure in run(quick=True):
        print(" | ".join(figure.cells()))
