"""PF15: word errors on voices nobody tuned to, the defaults against greedy decoding and the server.

The recordings of ``bench.voices``: new sentences read by other voices, in
eight conditions (clean, noise and music at 10 and 0 dB, the telephone band,
0.9× and 1.1× the speed). Each is recognized, one after another in this
process, by the offline engine on its defaults, by the same engine decoding
greedily (``beam_size = 1``: what the speed would cost), and by the real
server when one is named (``bench/peer.py``), every one told the language.

One figure per set and language: the ``tuning`` voices were looked at while
the defaults were chosen, the ``held_out`` ones never were, and are reported
apart. Goal: the defaults make no more word errors than the server (+0.005)
over the set, and no more than greedy decoding on any recording. The note
gives each condition's word error rates and the seconds each way took.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from typing import Any

from bench import peer
from bench.common import Figure
from bench.voices import CONDITIONS, SPEAKERS, recording

QUICK_CONDITIONS = ("clean", "phone", "noise10")


def run(quick: bool) -> list[Figure]:
    from sidecar.providers.offline.engine import OfflineEngine
    from sidecar.settings import OfflineSettings
    from testkit.wer import word_errors

    ways: dict[str, Any] = {
        "default": OfflineEngine(OfflineSettings(diarize=False)),
        "greedy": OfflineEngine(OfflineSettings(diarize=False, beam_size=1)),
    }
    default_beam = OfflineSettings().beam_size
    conditions = QUICK_CONDITIONS if quick else CONDITIONS
    # (set, language) → way → [errors, words, seconds]; and each recording's rates, for the note.
    totals: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0.0]))
    rates: dict[tuple[str, str], list[str]] = defaultdict(list)
    worse: dict[tuple[str, str], list[str]] = defaultdict(list)
    missing = ""
    for speaker in SPEAKERS:
        key = ("held_out" if speaker.held_out else "tuning", speaker.language)
        for condition in conditions:
            audio, reference = recording(speaker, condition)
            got: dict[str, tuple[str, float]] = {}
            for way, engine in ways.items():
                started = time.perf_counter()
                document = json.loads(engine.recognize(audio, threading.Event(), language=speaker.language))
                got[way] = (document["text"], time.perf_counter() - started)
            if peer.configured() and not missing:
                try:
                    answer = peer.transcribe(audio, speaker.language)
                    got["server"] = (answer.text, answer.seconds)
                except peer.PeerMissing as e:
                    missing = str(e)
            rate: dict[str, float] = {}
            for way, (text, took) in got.items():
                errors, words = word_errors(reference, text)
                cell = totals[key][way]
                cell[0], cell[1], cell[2] = cell[0] + errors, cell[1] + words, cell[2] + took
                rate[way] = errors / max(words, 1)
            rates[key].append(f"{speaker.name} {condition} " + "/".join(f"{rate[w]:.3f}" for w in rate))
            if rate["default"] > rate["greedy"] + 0.005:
                worse[key].append(f"{speaker.name} {condition}")
    figures: list[Figure] = []
    for (which, language), by_way in sorted(totals.items()):
        wer = {w: e / max(n, 1) for w, (e, n, _s) in by_way.items()}
        spent = {w: s for w, (_e, _n, s) in by_way.items()}
        fid = f"PF15.{which}.{language}"
        what = f"WER on {which.replace('_', '-')} voices, {language}, {len(conditions)} conditions"
        absent = "" if "server" in wer else (missing or "no server named: BENCH_PEER_URL (bench/peer.py)") + "; "
        ways_said = "/".join(wer)
        figures.append(
            Figure(
                fid,
                f"{what}, defaults (beam {default_beam})",
                wer["default"],
                "",
                "≤ the server's + 0.005; never above greedy's + 0.005 on a recording",
                "server" in wer and wer["default"] <= wer["server"] + 0.005 and not worse[(which, language)],
                reference=wer.get("server", wer["greedy"]),
                ref_label="the server" if "server" in wer else "greedy",
                ratio=None,
                digits=3,
                note=absent
                + f"WER {ways_said}: "
                + ", ".join(f"{w} {v:.3f}" for w, v in wer.items())
                + "; seconds "
                + ", ".join(f"{w} {v:.1f}" for w, v in spent.items())
                + f"; by recording ({ways_said}): "
                + "; ".join(rates[(which, language)])
                + (f"; above greedy: {', '.join(worse[(which, language)])}" if worse[(which, language)] else ""),
            )
        )
    figures.append(_taught(ways["default"]))
    return figures


def _taught(engine: Any) -> Figure:
    """The names of tests/data/words heard as written, with and without the sender's list."""
    from bench.common import ROOT
    from testkit.wer import names_heard

    folder = ROOT / "tests" / "data" / "words"
    clips = json.loads((folder / "clips.json").read_text(encoding="utf-8"))
    heard = {"without": 0, "with": 0}
    texts = []
    for name, clip in clips.items():
        for way, words in (("without", []), ("with", clip["words"])):
            document = json.loads(
                engine.recognize(folder / name, threading.Event(), language=clip["language"], words=words)
            )
            heard[way] += names_heard(document["text"], clip["words"])
            texts.append(f"{way}: {document['text']}")
    total = sum(len(c["words"]) for c in clips.values())
    return Figure(
        "PF15.words",
        f"names and terms the sender taught, heard as written ({len(clips)} clips, {total} names, ru and en)",
        heard["with"] / total,
        "",
        "all with the list",
        heard["with"] == total,
        reference=heard["without"] / total,
        ref_label="without the list",
        digits=2,
        note="; ".join(texts),
    )
