"""Offline speaker labels with the real diarizer (the `diarize` extra) on the committed
dialogues: synthetic turn-taking with known turns (SP3), and through the whole service."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.activity import Activity
from sidecar.media.audio import normalize
from sidecar.providers.offline.diarizer import OfflineDiarizer
from sidecar.providers.offline.engine import RECOGNITION_SHARE
from sidecar.providers.offline.provider import OfflineProvider
from sidecar.serving.assembly import default_steps
from sidecar.settings import OfflineSettings
from sidecar.transcript.join import PieceResult, join
from sidecar.transcript.speakers import numbered
from testkit.audio import compose_wav
from testkit.media import wav_bytes
from testkit.pocketbase import running_pocketbase
from testkit.speakers import Dialogue, der, dialogues, meeting, segment_agreement
from tests.support.exports import exported, parse_srt
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow

DIALOGUES = dialogues()
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.ogg"


@pytest.fixture(scope="module")
def provider() -> Iterator[OfflineProvider]:
    p = OfflineProvider(OfflineSettings(diarize=True))
    p.engine.load()
    yield p
    anyio.run(p.aclose)


def _wav(src: Path, tmp: Path, provider: OfflineProvider) -> Path:
    return normalize(src, tmp / "audio.wav", provider.audio_spec).path


@pytest.mark.parametrize("dialogue", DIALOGUES, ids=lambda d: d.audio.stem)
def test_the_diarizer_finds_who_speaks_when(
    dialogue: Dialogue, provider: OfflineProvider, tmp_path: Path, figures: dict[str, str]
) -> None:
    assert provider.engine.diarizer is not None
    turns = provider.engine.diarizer.diarize(_wav(dialogue.audio, tmp_path, provider)).turns
    error = der(dialogue.turns, turns)
    assert len({t.speaker for t in turns}) == dialogue.speakers
    assert error <= 0.10
    figures[f"DER {dialogue.audio.stem}"] = f"{error:.3f} ({dialogue.speakers} speakers found)"


@pytest.mark.parametrize("dialogue", DIALOGUES[:1] + DIALOGUES[-1:], ids=lambda d: d.audio.stem)
def test_every_segment_gets_the_speaker_who_said_it(
    dialogue: Dialogue, provider: OfflineProvider, tmp_path: Path
) -> None:
    raw = provider.engine.recognize(_wav(dialogue.audio, tmp_path, provider), threading.Event())
    transcript = numbered(provider.parse(raw))
    labels = {s.speaker for s in transcript.segments}
    assert labels == {f"Speaker {i + 1}" for i in range(dialogue.speakers)}
    assert segment_agreement(dialogue.turns, transcript.segments) >= 0.9
    for segment in transcript.segments:  # words carry their segment's speaker
        assert {w.speaker for w in segment.words or []} <= {segment.speaker}


def test_one_speaker_looks_exactly_as_without_diarization(provider: OfflineProvider, tmp_path: Path) -> None:
    plain = OfflineProvider(OfflineSettings(diarize=False))
    wav = _wav(SAMPLE, tmp_path, provider)
    with_speakers = numbered(provider.parse(provider.engine.recognize(wav, threading.Event())))
    without = plain.parse(plain.engine.recognize(wav, threading.Event()))
    assert with_speakers.model_dump(exclude_none=True) == without.model_dump(exclude_none=True)


def test_a_dialogue_through_the_service_has_speakers_in_its_exports(tmp_path: Path, provider: OfflineProvider) -> None:
    dialogue = next(d for d in DIALOGUES if d.audio.stem == "en_2speakers")
    with running_pocketbase(tmp_path) as pb:
        sender = pb.new_sender()
        rid = sender.upload(dialogue.audio, name="meeting.ogg")
        plain = sender.upload(wav_bytes(1.0), name="note.wav")

        async def run() -> None:
            async with running_sidecar(pb, default_steps(), provider=provider) as pool:
                async with pool_running(pool):
                    await eventually(
                        lambda: all(sender.poll(r)["status"] == "done" for r in (rid, plain)),
                        within=240,
                    )

        anyio.run(run)
        vtt = exported(sender, rid, "vtt")
        voices = re.findall(r"^<v (Speaker \d)>", vtt, flags=re.MULTILINE)
        assert set(voices) == {"Speaker 1", "Speaker 2"}
        assert voices[0] == "Speaker 1" and len(voices) >= len(dialogue.turns) // 2
        srt = parse_srt(exported(sender, rid, "srt"))
        assert all(re.match(r"^Speaker [12]: \S", c[3]) for c in srt)
        txt = exported(sender, rid, "txt")
        assert txt.startswith("Speaker 1: ") and "\n\nSpeaker 2: " in txt
        segments = json.loads(exported(sender, rid, "json"))["segments"]
        assert {s["speaker"] for s in segments} == {"Speaker 1", "Speaker 2"}
        # a tone has no speech and no speakers: nothing of either shows
        assert "Speaker" not in exported(sender, plain, "vtt") + exported(sender, plain, "srt")


def test_the_engine_finds_speakers_beside_the_words_and_keeps_moving_to_the_end(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dialogue = next(d for d in DIALOGUES if d.audio.stem == "en_2speakers")
    wav = _wav(dialogue.audio, tmp_path, provider)
    said: list[tuple[str, Any]] = []
    diarizer = provider.engine.diarizer
    assert diarizer is not None
    own = diarizer.diarize

    def diarize(*args: Any, **kwargs: Any) -> Any:
        said.append(("speakers from", threading.current_thread().name))
        return own(*args, **kwargs)

    monkeypatch.setattr(diarizer, "diarize", diarize)
    raw = provider.engine.recognize(
        wav,
        threading.Event(),
        report=lambda seconds: said.append(("done", seconds)),
        found_language=lambda code: said.append(("language", code)),
        doing=lambda activity: said.append(("doing", activity)),
    )
    result = provider.parse(raw)
    duration = float(result.duration or 0)
    assert said[0] == ("doing", Activity.RECOGNIZING)
    # Started before a word is decoded, in a thread of its own: found while the words are.
    started = said.index(("speakers from", "speakers"))
    assert started < min(i for i, (k, _v) in enumerate(said) if k == "done")
    assert ("language", "en") in said
    done = [float(v) for k, v in said if k == "done"]
    assert len(done) >= 3 and done == sorted(done)
    assert done[-1] == pytest.approx(duration, abs=0.01)  # the words' share and the speakers' together
    if ("doing", Activity.FINDING_SPEAKERS) in said:  # the words done first: their share in full, then waiting
        before = [float(v) for k, v in said[: said.index(("doing", Activity.FINDING_SPEAKERS))] if k == "done"]
        assert before[-1] >= duration * RECOGNITION_SHARE - 0.01
    assert len({s.speaker for s in result.segments if s.speaker}) == 2  # and laid over the words


def test_a_failed_recognition_leaves_no_speakers_running(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.providers.offline import engine as engine_module

    wav = _wav(next(d for d in DIALOGUES if d.audio.stem == "en_2speakers").audio, tmp_path, provider)

    def broken(*_args: Any, **_kwargs: Any) -> Iterator[dict[str, Any]]:
        raise RuntimeError("the decoder broke")
        yield {}

    monkeypatch.setattr(engine_module.OfflineEngine, "_segments", broken)
    with pytest.raises(RuntimeError, match="the decoder broke"):
        provider.engine.recognize(wav, threading.Event())
    assert not [t for t in threading.enumerate() if t.name == "speakers"]


def test_voice_embeddings_in_small_batches_are_the_whole_batchs(provider: OfflineProvider) -> None:
    import torch

    from sidecar.providers.offline.diarizer import EMBEDDING_BATCH, InSmallBatches

    assert provider.engine.diarizer is not None
    wrapped = provider.engine.diarizer.load().embeddings_model
    assert isinstance(wrapped, InSmallBatches)
    model = wrapped._model
    rows: list[int] = []

    def counted(batch: torch.Tensor) -> torch.Tensor:
        rows.append(int(batch.shape[0]))
        embeddings: torch.Tensor = model(batch)
        return embeddings

    # 21 pieces of speech of 1.5 s (150 frames of 80 filterbanks), as senko pads one of its batches.
    batch = torch.randn(21, 150, 80, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        whole = model(batch)
        split = InSmallBatches(counted, EMBEDDING_BATCH)(batch)
    assert rows == [8, 8, 5]
    assert split.shape == whole.shape == (21, 192)
    assert torch.allclose(split, whole, atol=1e-4)


def test_the_extra_is_needed_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from sidecar.providers.offline import diarizer

    monkeypatch.setattr(diarizer, "installed", lambda: False)
    assert OfflineProvider(OfflineSettings()).engine.diarizer is None  # the default: off without the extra
    with pytest.raises(diarizer.DiarizerUnavailable, match=r"install-torch-cpu .*\[diarize\]"):
        OfflineProvider(OfflineSettings(diarize=True))
    assert isinstance(OfflineProvider(OfflineSettings(diarize=None)).engine.diarizer, type(None))
    monkeypatch.undo()
    assert isinstance(OfflineProvider(OfflineSettings()).engine.diarizer, OfflineDiarizer)


def test_a_long_meeting_keeps_each_voice_one_speaker(provider: OfflineProvider, tmp_path: Path) -> None:
    # 21 minutes of the dialogues (six voices, each heard again and again): past the
    # 20 minutes where senko alone switches clustering and over-splits, so this
    # needs the windows and the matching of voices across them.
    wav, reference = meeting(tmp_path / "meeting.wav", 21)
    assert provider.engine.diarizer is not None
    done: list[float] = []
    turns = provider.engine.diarizer.diarize(wav, done.append).turns
    assert len(done) == 3 and done == sorted(done) and done[-1] == 1.0  # progress after each of its windows
    assert len({t.speaker for t in turns}) == len({t.speaker for t in reference}) == 6
    assert der(reference, turns) <= 0.10


def test_a_voice_heard_in_two_pieces_keeps_one_label(provider: OfflineProvider, tmp_path: Path) -> None:
    # Two recognitions as two pieces of one recording: slt and rms speak in both
    # (en_2speakers: slt, rms; en_4speakers: slt, rms, awb, kal16), so four people in all.
    first, second = (d for d in DIALOGUES if d.audio.stem in ("en_2speakers", "en_4speakers"))
    results = []
    offset = 0.0
    for dialogue in (first, second):
        wav = normalize(dialogue.audio, tmp_path / f"{dialogue.audio.stem}.wav", provider.audio_spec).path
        transcript = provider.parse(provider.engine.recognize(wav, threading.Event()))
        length = float(transcript.duration or 0.0)
        results.append((PieceResult(offset, offset + length, transcript), dialogue))
        offset += length
    joined = numbered(join([r for r, _ in results]))
    assert {s.speaker for s in joined.segments} == {f"Speaker {i}" for i in range(1, 5)}
    # the speaker at each reference turn's middle, per voice role
    heard: dict[tuple[str, str], set[str | None]] = {}
    for piece, dialogue in results:
        for turn in dialogue.turns:
            middle = piece.start + (turn.start + turn.end) / 2
            segment = min(joined.segments, key=lambda s: abs((s.start + s.end) / 2 - middle))
            heard.setdefault((dialogue.audio.stem, turn.speaker), set()).add(segment.speaker)
    # roles A and B are slt and rms in both dialogues
    assert heard[("en_2speakers", "A")] == heard[("en_4speakers", "A")]
    assert heard[("en_2speakers", "B")] == heard[("en_4speakers", "B")]
    assert all(len(labels) == 1 for labels in heard.values())


def test_a_failing_diarizer_costs_the_speakers_never_the_words(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(wav: Path, report: object = None, *, stop: object = None) -> None:
        raise RuntimeError("out of its depth")

    assert provider.engine.diarizer is not None
    monkeypatch.setattr(provider.engine.diarizer, "diarize", broken)
    dialogue = next(d for d in DIALOGUES if d.audio.stem == "en_2speakers")
    transcript = provider.parse(provider.engine.recognize(_wav(dialogue.audio, tmp_path, provider), threading.Event()))
    assert "mobile release" in transcript.text
    assert all(s.speaker is None for s in transcript.segments)
    assert "speaker diarization failed (RuntimeError)" in caplog.text


_TORCH_THREADS = """
import json
import torch
from sidecar.providers.offline.provider import OfflineProvider
from sidecar.settings import OfflineSettings
provider = OfflineProvider(OfflineSettings(diarize=True), workers=1)
assert provider.engine.diarizer is not None
loaded = provider.engine.diarizer.load()
print(json.dumps({"torch": torch.get_num_threads(), "senko": loaded.logical_cores}))
"""


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_the_diarizers_torch_threads_come_from_the_cpus_this_process_may_use() -> None:
    """senko sets torch's threads from the host's count as it loads; pinned to one CPU, one thread it is."""
    one = min(os.sched_getaffinity(0))
    done = subprocess.run(
        ["taskset", "--cpu-list", str(one), sys.executable, "-c", _TORCH_THREADS],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"torch": 1, "senko": 1}


def test_the_speakers_load_beside_the_start_not_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``warm`` (awaited before PocketBase starts) returns once the words' model is loaded; the
    speakers' models load meanwhile, and the first recording that needs them waits for that load."""
    release, loading = threading.Event(), threading.Event()
    loads: list[str] = []

    def slow_load(self: OfflineDiarizer) -> Any:
        loads.append(threading.current_thread().name)
        loading.set()
        release.wait(30)
        return None

    monkeypatch.setattr(OfflineDiarizer, "load", slow_load)
    fresh = OfflineProvider(OfflineSettings(diarize=True))
    anyio.run(fresh.warm)  # returns while the speakers' load is still held
    assert loading.wait(10) and not release.is_set()
    assert loads == ["speakers-load"]
    release.set()


def test_alone_the_first_windows_are_read_on_every_cpu_before_the_speakers_start(
    provider: OfflineProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recording decoded alone has its first windows (the vote's) encoded by the copy of the model
    on every CPU, then its speakers start, beside the decoding; its words are those the model's own
    encoder gives. Beside another recognition, the speakers start at once and the copy is left alone.
    Two recognitions really overlap here: the first is held at its first window until the second is done."""
    from sidecar.providers.offline import batches
    from sidecar.providers.offline import engine as engine_module

    monkeypatch.setattr(engine_module, "usable_cpus", lambda: 2)
    fresh = OfflineProvider(OfflineSettings(diarize=True))
    assert (fresh.engine.threads, fresh.engine.ahead_threads) == (1, 2)
    fresh.engine.diarizer = provider.engine.diarizer  # loaded already
    wav = _wav(next(d for d in DIALOGUES if d.audio.stem == "en_2speakers").audio, tmp_path, provider)
    other = tmp_path / "other.wav"
    shutil.copyfile(wav, other)
    _model, ahead = fresh.engine._load()
    assert ahead is not None

    events: list[tuple[str, str, bool]] = []  # (what, whose, on the copy)
    held, release = threading.Event(), threading.Event()
    encode, decode_group = batches._WindowByWindow._one, batches._decode_group

    def encoded(self: Any, features: Any, model: Any = None) -> Any:
        whose = threading.current_thread().name
        if whose == "first" and not release.is_set():
            held.set()
            release.wait(120)
        events.append(("encoded", whose, model is ahead))
        return encode(self, features, model)

    def decoding(*args: Any, **kwargs: Any) -> Iterator[Any]:
        events.append(("decoding", threading.current_thread().name, False))
        yield from decode_group(*args, **kwargs)

    diarizer = provider.engine.diarizer
    assert diarizer is not None
    own = diarizer.diarize

    def diarize(path: Path, *args: Any, **kwargs: Any) -> Any:
        events.append(("speakers", "first" if path == wav else "second", False))
        return own(path, *args, **kwargs)

    monkeypatch.setattr(batches._WindowByWindow, "_one", encoded)
    monkeypatch.setattr(batches, "_decode_group", decoding)
    monkeypatch.setattr(diarizer, "diarize", diarize)

    def whose(name: str) -> list[tuple[str, bool]]:
        return [(what, copy) for what, who, copy in events if who == name]

    def recognized(*names: str, language: str | None = None) -> dict[str, Any]:
        """Each recognition in a thread of its name, started in this order, each once the last is under way."""
        results: dict[str, bytes] = {}
        threads = []
        for name in names:
            path = wav if name == "first" else other
            threads.append(
                threading.Thread(
                    target=lambda n=name, p=path: results.update(
                        {n: fresh.engine.recognize(p, threading.Event(), language=language)}
                    ),
                    name=name,
                )
            )
            threads[-1].start()
            if not release.is_set():
                assert held.wait(60)  # the first is at its first window, holding the copy
        for t in reversed(threads):
            t.join(300)
            release.set()
        assert set(results) == set(names)
        return {name: fresh.parse(raw) for name, raw in results.items()}

    # Alone: the copy reads the vote's windows, then the speakers start, then the decoding.
    release.set()
    alone = recognized("first")["first"]
    order = whose("first")
    started = order.index(("speakers", False))
    assert started >= 1 and order[:started] == [("encoded", True)] * started
    assert order[started + 1][0] == "decoding"

    # The language given: no vote, the first batch's windows are read by the copy, the same way.
    events.clear()
    given = recognized("first", language="en")["first"]
    order = whose("first")
    started = order.index(("speakers", False))
    assert started >= 1 and order[:started] == [("encoded", True)] * started
    assert given.text == alone.text

    # The same words as the model's own encoder gives (no copy: speakers at once).
    events.clear()
    monkeypatch.setattr(fresh.engine, "ahead_threads", 0)
    own_encoder = recognized("first")["first"]
    assert whose("first")[0] == ("speakers", False) and not any(copy for _what, copy in whose("first"))
    assert [s.text for s in alone.segments] == [s.text for s in own_encoder.segments]
    assert len({s.speaker for s in alone.segments if s.speaker}) == 2
    monkeypatch.setattr(fresh.engine, "ahead_threads", 2)

    # Longer than its first batch (three times the dialogue: more windows than a batch holds): its
    # speakers, the longer part, start at once, and the copy is not used.
    events.clear()
    shutil.copyfile(wav, tmp_path / "once.wav")
    compose_wav([tmp_path / "once.wav"] * 3, wav)
    recognized("first")
    assert whose("first")[0] == ("speakers", False) and not any(copy for _what, copy in whose("first"))
    shutil.copyfile(tmp_path / "once.wav", wav)

    # Two at once: the first holds the copy; the second, started meanwhile, is not alone.
    events.clear()
    release.clear()
    both = recognized("first", "second")
    seconds = whose("second")
    assert seconds[0] == ("speakers", False) and ("encoded", False) in seconds
    assert not any(copy for _what, copy in seconds)
    assert whose("first")[0] == ("encoded", True)
    assert both["first"].text == both["second"].text == alone.text
