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

The **model edition** (``sidecar.literary.model_edition``, what the step adds when a model is configured),
on the owner's GGUF as ``[insights] provider = "offline"`` runs it (the settings' defaults), each run a
fresh process with the engine a child of it, as in the worker: the ten-minute meetings, and in a full run
the hours, both languages. The transcript is the rule-based one's, with misheard words put in as well
(``MISHEARD``: sound-alikes a recognizer writes, each occurrence with a chance of one in two, seeded;
never a number or a name). Per language and length:

* **time**: the proofreading's wall time, engine start included, against the meeting's own length.
  Goal: no longer than the meeting on 2 cores. **Tokens** read and written, as llama.cpp reports them.
* **peak RSS** of the engine's process (VmHWM) and of the benchmark's (the worker's side). Goal
  ≤ 2,500 MB; the hour's ≤ 1.1× the ten minutes' (memory flat: paragraph by paragraph).
* **fidelity**: the reference's numbers and dictionary names kept in the model's text. Goal: 100 %.
* **word error rate** against the reference, the model's text beside the rule-based text's (and the
  transcript's in the note). Goal: lower than the rule-based text's, never higher.

``BENCH_PF14_MODEL`` = ``1.5b`` (default) or ``0.5b`` (``bench.llm_weights``); ``=off`` leaves the model
edition out. ``python -m bench.pf14_literary`` prints the figures of a quick run;
``python -m bench.pf14_literary model LANGUAGE LENGTH MODEL OUT.json`` is one run of the model edition
(LENGTH: 10m, 60m).
"""

from __future__ import annotations

import os
import random
import re
import resource
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import Figure, in_fresh_process, own_peak_mb
from testkit.meetings import Meeting, hour, ten_minutes
from testkit.wer import word_errors

GOAL_S_PER_HOUR = 2.0
FILLERS = {"ru": ["э", "эм", "ну-у", "м-м"], "en": ["uh", "um", "er", "hmm"]}
SPEAKERS = ("Speaker 1", "Speaker 2", "Speaker 3")
# Words a recognizer mishears as another that sounds alike (what the model edition is for), by language:
# the word said → the word written. None is a number, a name or a negation.
MISHEARD = {
    "en": {
        "route": "root",
        "write": "right",
        "which": "witch",
        "would": "wood",
        "whole": "hole",
        "where": "wear",
        "there": "their",
        "week": "weak",
        "weekend": "weak end",
        "freeze": "frees",
        "build": "billed",
        "queue": "cue",
        "scope": "scoop",
        "staged": "stayed",
        "review": "revue",
        "merged": "merge",
    },
    "ru": {
        "релиз": "релис",
        "релиза": "релиса",
        "релизу": "релису",
        "баллы": "балы",
        "баллами": "балами",
        "баннер": "банер",
        "стенде": "стене",
        "ветке": "ветки",
        "ветку": "ветки",
        "правила": "правило",
        "багам": "бакам",
        "бэкенду": "бэк энду",
        "бэкенда": "бэк энда",
        "выкладка": "выкладки",
        "заморозка": "заморозки",
    },
}
MISHEARD_CHANCE = 0.5
MODEL_TIME_GOAL = 1.0  # the meeting's own length: no longer than real time
MODEL_RSS_GOAL_MB = 2500.0


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


def _misheard(text: str, language: str, rng: random.Random) -> str:
    """``text`` with some words as a recognizer mishears them (``MISHEARD``), their punctuation kept."""
    table = MISHEARD[language]
    out = []
    for token in text.split():
        m = re.match(r"^(\w+)(.*)$", token)
        word = m.group(1) if m else ""
        if word.lower() in table and rng.random() < MISHEARD_CHANCE:
            heard = table[word.lower()]
            heard = heard[:1].upper() + heard[1:] if word[:1].isupper() else heard
            token = heard + (m.group(2) if m else "")
        out.append(token)
    return " ".join(out)


def _transcript(
    language: str, hours: float, seed: int = 14, meeting: Meeting | None = None, misheard: bool = False
) -> tuple[list[dict[str, Any]], str]:
    """Segments (with timed words and speakers) of ``hours`` of the meetings (or of ``meeting`` once)
    said with disfluencies (and, ``misheard``, some words misheard), and the reference text they were
    made from."""
    rng = random.Random(seed)
    once = meeting is not None
    meeting = meeting or hour(language)
    segments: list[dict[str, Any]] = []
    reference: list[str] = []
    offset = 0.0
    length = float(meeting.segments[-1]["end"]) + 2.0
    while True:
        for n, seg in enumerate(meeting.segments):
            said = _misheard(str(seg["text"]), language, rng) if misheard else str(seg["text"])
            text = _spoken(said, language, rng)
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
    key = os.environ.get("BENCH_PF14_MODEL", "1.5b")
    if key != "off":
        for language in ("ru", "en"):
            short = model_figures(language, "10m", key)
            figures += short
            if not quick:
                figures += model_figures(language, "60m", key, ten_minutes_rss=short[1].value)
    return figures


# -- the model edition, one run in a fresh process -----------------------------------------------------------


async def _model_run(language: str, length: str, model: Path) -> dict[str, Any]:
    import httpx

    from bench.pf11_insights import _ChildPeak
    from sidecar.insights.engines import make_engine
    from sidecar.insights.offline import OfflineChat
    from sidecar.literary.edition import edit
    from sidecar.literary.model_edition import Edition, proofread
    from sidecar.runtime.clock import SystemClock
    from sidecar.runtime.cpus import CpuGate
    from sidecar.settings import InsightsSettings

    meeting = ten_minutes(language) if length == "10m" else hour(language)
    segments, reference = _transcript(language, 0, meeting=meeting, misheard=True)
    transcript = " ".join(s["text"] for s in segments)
    paragraphs = edit(segments, language)
    settings = InsightsSettings(provider="offline", model=str(model))
    engine = make_engine(settings, CpuGate(), SystemClock())
    assert engine is not None
    timings: list[dict[str, Any]] = []

    async def on_response(resp: httpx.Response) -> None:
        if resp.request.url.path.endswith("/chat/completions") and resp.status_code == 200:
            await resp.aread()
            t = resp.json().get("timings")
            if isinstance(t, dict):
                timings.append({k: t.get(k, 0) for k in ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms")})

    out = Edition(provider=engine.name)
    load_before = os.getloadavg()[0]
    with _ChildPeak() as peak:
        t0 = time.perf_counter()
        async with engine.open() as chat:
            assert isinstance(chat, OfflineChat)
            load_s = time.perf_counter() - t0
            out.model = chat.model
            chat._http_client.event_hooks["response"].append(on_response)
            async for p in proofread(chat, paragraphs, language, meeting.dictionary):
                out.add(p)
        seconds = time.perf_counter() - t0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "minutes": meeting.minutes,
        "seconds": seconds,
        "load_s": load_s,
        "load": [load_before, os.getloadavg()[0]],
        "paragraphs": len(paragraphs),
        "changed": out.changed,
        "found_right": out.found_right,
        "summary": out.summary,
        "notes": out.notes[:20],
        "reference": reference,
        "transcript": transcript,
        "rules": " ".join(p.text for p in paragraphs),
        "model": " ".join(p.text for p in out.paragraphs),
        "dictionary": meeting.dictionary,
        "timings": timings,
        "engine_peak_mb": max(peak.peak_kb, children.ru_maxrss) / 1024,
        "engine_cpu_s": children.ru_utime + children.ru_stime,
        "self_peak_mb": own_peak_mb(),
    }


def model_run(language: str, length: str, key: str) -> dict[str, Any]:
    import anyio

    from bench.llm_weights import fetch

    return anyio.run(_model_run, language, length, fetch(key, log=False))


def _wer(reference: str, text: str) -> tuple[int, int]:
    # A curly apostrophe is the same letter of the same word ("let’s"): counted as the straight one.
    return word_errors(reference, text.replace("’", "'"))


def model_figures(
    language: str, length: str, key: str, run: dict[str, Any] | None = None, ten_minutes_rss: float | None = None
) -> list[Figure]:
    """The model edition's figures of one language and length (``run``: a run already made; ``ten_minutes_rss``:
    the engine's peak on the ten minutes, which the hour's may exceed by a tenth at most)."""
    r = run or in_fresh_process("bench.pf14_literary", "model", language, length, key, timeout=4 * 3600)
    name = f"{language}.{length}"
    what = f"{'ten minutes' if length == '10m' else 'an hour'} of a {language} meeting"
    meeting_s = r["minutes"] * 60
    read = sum(int(t["prompt_n"]) for t in r["timings"])
    written = sum(int(t["predicted_n"]) for t in r["timings"])
    read_ms = sum(float(t["prompt_ms"]) for t in r["timings"])
    written_ms = sum(float(t["predicted_ms"]) for t in r["timings"])
    t_errors, n = _wer(r["reference"], r["transcript"])
    rules_errors, _ = _wer(r["reference"], r["rules"])
    model_errors, _ = _wer(r["reference"], r["model"])
    kept_rules, wanted = _kept(r["reference"], r["rules"], r["dictionary"])
    kept_model, _ = _kept(r["reference"], r["model"], r["dictionary"])
    return [
        Figure(
            f"PF14.model.time.{name}",
            f"model edition wall time (owner's GGUF, {key}), {what}, engine start included",
            r["seconds"],
            "s",
            "≤ the meeting's length",
            r["seconds"] <= MODEL_TIME_GOAL * meeting_s,
            reference=meeting_s,
            ref_label="the meeting's length",
            ratio=r["seconds"] / meeting_s,
            note=f"{r['paragraphs']} paragraphs, {len(r['timings'])} requests; engine start {r['load_s']:.1f} s; "
            f"read {read:,} tokens ({read / max(read_ms, 1) * 1000:.0f}/s), written {written:,} "
            f"({written / max(written_ms, 1) * 1000:.1f}/s); the engine used {r['engine_cpu_s']:.0f} CPU-s; "
            f"load {r['load'][0]:.1f} → {r['load'][1]:.1f}",
        ),
        Figure(
            f"PF14.model.rss.{name}",
            f"model edition: engine process peak RSS (VmHWM), {what}",
            r["engine_peak_mb"],
            "MB",
            f"≤ {MODEL_RSS_GOAL_MB:,.0f} MB" + ("" if length == "10m" else ", ≤ 1.1× the ten minutes'"),
            r["engine_peak_mb"] <= MODEL_RSS_GOAL_MB
            and (ten_minutes_rss is None or r["engine_peak_mb"] <= 1.1 * ten_minutes_rss),
            reference=ten_minutes_rss,
            ref_label="the ten minutes'",
            ratio=r["engine_peak_mb"] / ten_minutes_rss if ten_minutes_rss else None,
            note=f"the benchmark's process (the worker's side) {r['self_peak_mb']:,.0f} MB",
            digits=0,
        ),
        Figure(
            f"PF14.model.fidelity.{name}",
            f"numbers and dictionary names of the reference kept in the model's text, {what}",
            100 * kept_model / max(wanted, 1),
            "%",
            "100 %",
            kept_model == wanted,
            reference=100 * kept_rules / max(wanted, 1),
            ref_label="the rule-based text's",
            note=f"{kept_model} of {wanted}",
        ),
        Figure(
            f"PF14.model.wer.{name}",
            f"WER of the model's text against the reference, {what} said with fillers, repeats and misheard words",
            100 * model_errors / n,
            "%",
            "< the rule-based text's, never above",
            model_errors < rules_errors,
            reference=100 * rules_errors / n,
            ref_label="the rule-based text's",
            note=f"the transcript's {100 * t_errors / n:.2f} %; {r['summary']}"
            + (f"; {' | '.join(r['notes'][:5])}" if r["notes"] else ""),
            digits=2,
        ),
    ]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "model":
        import json

        language, length, key, target = sys.argv[2:6]
        Path(target).write_text(json.dumps(model_run(language, length, key), ensure_ascii=False))
    else:
        for figure in run(quick=True):
            print(" | ".join(figure.cells()))
