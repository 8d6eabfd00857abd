"""PF8: six-hour recordings through each provider vs one minute of the same speech.

The recordings are digital silence with the ten Russian clips placed in it:
one minute (the clips close together) and six hours (one clip every 36
minutes), FLAC. Each run is a fresh Python process hosting the workers (one
worker) and, for the cloud providers, the fakes of tests/integration
(testkit.fake_cloud: SpeechKit refusing > 4 h, OpenAI-compatible refusing
> 25 MB, an in-process S3); PocketBase is its own process. The figure is that
process's peak RSS (VmHWM), six hours against one minute; the offline engine
is real, and its word error rate on the six hours is set against the minute's.

A quick run (``bench/run --quick``) measures the offline engine only.

``python -m bench.pf8_long PROVIDER SECONDS OUT.json`` is one run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from bench.common import CACHE, Figure, in_fresh_process, own_peak_mb, upload

PROVIDERS = ("offline", "speechkit", "openai")
SIX_HOURS = 6 * 3600
ONE_MINUTE = 60


def recording(seconds: int) -> tuple[Path, list[Any]]:
    from testkit.audio import RU_SPEECH_DIR, long_recording

    clips = sorted(RU_SPEECH_DIR.glob("*.ogg"))
    step = max((seconds - 10) / len(clips), 5.3)  # the longest clip is 5.2 s
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"pf8-{seconds}s.flac"
    placed = long_recording(path, seconds, [(5 + step * i, clip) for i, clip in enumerate(clips)])
    return path, placed


def one(provider_name: str, seconds: int, work: Path) -> dict[str, Any]:
    """One run of PF8: the synthetic recording of ``seconds``, its words checked."""
    from testkit.wer import word_errors

    audio, placed = recording(seconds)
    result = through_pipeline(provider_name, audio, work)
    errors, words = word_errors(" ".join(p.text for p in placed), result.pop("text"))
    return result | {"wer": errors / words}


def through_pipeline(provider_name: str, audio: Path, work: Path, *, speakers: bool = False) -> dict[str, Any]:
    """``audio`` uploaded and run to done: PocketBase, S3 and the fake cloud as processes of their own,
    one worker in this one. Its peak RSS, the time from upload to done, the pieces, the text.
    The offline engine tells speakers apart only when asked (PF10), so the other figures measure recognition."""
    from pydantic import SecretStr

    from sidecar.providers.offline.provider import OfflineProvider
    from sidecar.providers.openai.provider import OpenAIProvider
    from sidecar.providers.speechkit.provider import SpeechKitProvider
    from sidecar.settings import OfflineSettings, OpenAISettings, SpeechKitSettings
    from testkit.audio import RU_SPEECH_DIR
    from testkit.pocketbase import free_port, running_pocketbase
    from testkit.s3 import running_s3, wait_listening

    with running_pocketbase(work) as pb, running_s3(own_process=True) as s3:
        bucket = s3.new_bucket()
        port = free_port()
        clips = [str(p) for p in sorted(RU_SPEECH_DIR.glob("*.ogg"))]
        fakes = subprocess.Popen(
            [sys.executable, "-m", "testkit.fake_cloud", str(port), s3.endpoint_url, bucket, *clips]
        )
        try:
            wait_listening(port, fakes)
            base = f"http://127.0.0.1:{port}"
            provider: Any
            if provider_name == "speechkit":
                key = SecretStr("AQVN-bench")
                provider = SpeechKitProvider(
                    SpeechKitSettings(api_key=key, stt_url=base, operation_url=base), s3.settings(bucket)
                )
            elif provider_name == "openai":
                provider = OpenAIProvider(OpenAISettings(base_url=f"{base}/v1"))
            else:
                provider = OfflineProvider(OfflineSettings(diarize=speakers))
            sender = pb.new_sender()
            body, took, rid = anyio.run(_until_settled, pb, provider, sender, audio)
            params = {"filter": f'record="{rid}" && role="normalized"'}
            pieces = pb.superuser().http.get("/api/collections/files/records", params=params).json()["totalItems"]
        finally:
            fakes.terminate()
            fakes.wait(10)
    if body.get("halted"):
        raise RuntimeError(f"{provider_name} on {audio.name} halted: {body['halt_code']}")
    return {
        "hwm_mb": own_peak_mb(),
        "seconds": took,
        "pieces": pieces,
        "text": body["text"] or "",
    }


async def _until_settled(pb: Any, provider: Any, sender: Any, audio: Path) -> tuple[dict[str, Any], float, str]:
    """With one worker running here (its model loaded, as ``serve`` does at start): ``audio``
    uploaded, and its poll body once done or halted, the seconds from upload to then, its id."""
    from sidecar.serving.assembly import default_steps, pipeline

    settings = pb.settings.model_copy(deep=True)
    settings.pipeline.workers = 1
    stop = anyio.Event()
    async with pipeline(settings, steps=default_steps(), provider=provider) as pool:
        async with anyio.create_task_group() as tg:
            await tg.start(pool.run, stop)
            t0 = time.perf_counter()

            # Streamed from the file, as a sender's client does: the recording's bytes are never all in this
            # process, whose peak is the worker's figure.
            with audio.open("rb") as data:
                rid = await anyio.to_thread.run_sync(upload, sender, audio.name, data)
            while True:
                body: dict[str, Any] = await anyio.to_thread.run_sync(
                    lambda: sender.http.get(f"/api/transcriber/records/{rid}").json()
                )
                if body["status"] == "done" or body["halted"]:
                    break
                await anyio.sleep(0.2)
            took = time.perf_counter() - t0
            stop.set()
    return body, took, rid


def run(quick: bool) -> list[Figure]:
    figures = []
    # A quick run measures the engine a default install runs; each cloud provider's six hours take
    # four minutes more (their fakes, S3, the encoding of the pieces), so only the full run has them.
    for provider in PROVIDERS[:1] if quick else PROVIDERS:
        short = in_fresh_process("bench.pf8_long", provider, str(ONE_MINUTE), timeout=3600)
        long = in_fresh_process("bench.pf8_long", provider, str(SIX_HOURS), timeout=3600)
        ratio = long["hwm_mb"] / short["hwm_mb"]
        note = (
            f"{long['pieces']} pieces vs {short['pieces']}; upload → done {long['seconds']:.0f} s vs "
            f"{short['seconds']:.0f} s"
        )
        if provider == "offline":
            gap = long["wer"] - short["wer"]
            note += f"; WER {long['wer']:.3f} vs {short['wer']:.3f} (gap {gap:+.3f}, goal ≤ 0.01)"
        else:
            note += "; the fake service and S3 run as processes of their own"
        figures.append(
            Figure(
                f"PF8.{provider}",
                f"peak RSS (VmHWM) of the worker process, 6 h recording, {provider}",
                long["hwm_mb"],
                "MB",
                "≤ 1.3×",
                ratio <= 1.3 and (provider != "offline" or long["wer"] - short["wer"] <= 0.01),
                reference=short["hwm_mb"],
                ref_label="1 min of the same speech",
                ratio=ratio,
                note=note,
            )
        )
    return figures


if __name__ == "__main__":
    name, length, target = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    result = one(name, length, target.parent / "data")
    target.write_text(json.dumps(result))
