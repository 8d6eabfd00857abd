"""Fake cloud recognizers for long synthetic recordings: they hear which committed clip is where.

The long recordings of the tests are digital silence with spoken clips at
known times (``testkit.audio.long_recording``). The fake cloud providers
decode the audio they are sent exactly as a real service would have to,
find the stretches of sound in it, and name each by the clip whose loudness
envelope it matches best, so what comes back depends on the audio actually
sent: a piece cut in the wrong place, shifted, or sent twice shows in the
transcript.
"""

from __future__ import annotations

import http.server
import io
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import httpx
import numpy as np
import numpy.typing as npt
import respx

from testkit.audio import clip_text
from testkit.s3 import S3Server

RATE = 16000
FRAME = 320  # 20 ms
LOUD = 0.01  # RMS of a frame with sound in it
GAP = 1.0  # seconds of quiet that end a stretch (clips pause less than this inside)
BINS = 64


@dataclass(frozen=True)
class Heard:
    start: float  # seconds from the start of the audio sent
    end: float
    text: str


def loudness(data: bytes) -> tuple[float, npt.NDArray[Any]]:
    """Any container PyAV reads: its length (seconds) and the RMS of each 20 ms frame at 16 kHz mono.

    Decoded as it streams, so six hours cost the loudness (8 MB), not the samples.
    """
    resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
    levels: list[npt.NDArray[Any]] = []
    carry = np.zeros(0, np.float32)
    samples = 0
    with av.open(io.BytesIO(data), mode="r") as inp:
        for frame in itertools.chain(inp.decode(audio=0), [None]):
            for f in resampler.resample(frame):
                chunk = np.concatenate([carry, f.to_ndarray().reshape(-1).astype(np.float32)])
                samples += f.samples
                whole = len(chunk) // FRAME * FRAME
                levels.append(_loudness(chunk[:whole]))
                carry = chunk[whole:]
    return samples / RATE, np.concatenate(levels) if levels else np.zeros(0)


def _loudness(samples: npt.NDArray[Any]) -> npt.NDArray[Any]:
    frames = samples[: len(samples) // FRAME * FRAME].reshape(-1, FRAME).astype(np.float64)
    loud: npt.NDArray[Any] = np.sqrt((frames**2).mean(axis=1))
    return loud


def _stretches(loud: npt.NDArray[Any]) -> list[tuple[int, int]]:
    """Frame ranges with sound, quiet gaps shorter than ``GAP`` bridged."""
    on = np.nonzero(loud > LOUD)[0]
    if not len(on):
        return []
    out: list[tuple[int, int]] = []
    start = prev = int(on[0])
    for i in on[1:]:
        if (i - prev) * FRAME / RATE > GAP:
            out.append((start, prev + 1))
            start = int(i)
        prev = int(i)
    out.append((start, prev + 1))
    return out


def _envelope(loud: npt.NDArray[Any]) -> npt.NDArray[Any]:
    e = np.interp(np.linspace(0, len(loud) - 1, BINS), np.arange(len(loud)), loud)
    e = e - e.mean()
    unit: npt.NDArray[Any] = e / (np.linalg.norm(e) or 1.0)
    return unit


class Listener:
    """Knows the clips by their envelopes; names the stretches of sound in audio it is given."""

    def __init__(self, clips: list[Path]) -> None:
        self._known: list[tuple[str, float, npt.NDArray[Any]]] = []
        for path in clips:
            _, loud = loudness(path.read_bytes())
            [(a, b)] = _stretches(loud)
            self._known.append((clip_text(path), (b - a) * FRAME / RATE, _envelope(loud[a:b])))

    def hear(self, data: bytes) -> tuple[float, list[Heard]]:
        """How long the audio is (seconds), and what is said in it when."""
        seconds, loud = loudness(data)
        heard = []
        for a, b in _stretches(loud):
            length, envelope = (b - a) * FRAME / RATE, _envelope(loud[a:b])
            text = max(self._known, key=lambda k: float(envelope @ k[2]) - abs(length - k[1]))[0]
            heard.append(Heard(a * FRAME / RATE, b * FRAME / RATE, text))
        return seconds, heard


STT = "https://stt.api.cloud.yandex.net"
OPS = "https://operation.api.cloud.yandex.net"
SPEECHKIT_MAX_SECONDS = 4 * 3600  # per operation
SPEECHKIT_MAX_BYTES = 1024**3
OPENAI_MAX_BYTES = 25 * 1024 * 1024  # per request body


class FakeSpeechKit:
    """recognizeFileAsync → operations → getRecognition → deleteRecognition, with SpeechKit's caps."""

    def __init__(
        self,
        api: respx.MockRouter,
        s3: S3Server,
        bucket: str,
        listener: Listener,
        *,
        stt: str = STT,
        ops: str = OPS,
    ) -> None:
        self.s3, self.bucket, self.listener = s3, bucket, listener
        self.results: dict[str, list[Heard]] = {}
        self.refused: list[str] = []
        self._ids = itertools.count(1)
        self.start = api.post(f"{stt}/stt/v3/recognizeFileAsync").mock(side_effect=self._start)
        api.get(url__regex=rf"^{re.escape(ops)}/operations/").mock(side_effect=self._operation)
        api.get(f"{stt}/stt/v3/getRecognition").mock(side_effect=self._results)
        api.delete(f"{stt}/stt/v3/deleteRecognition").respond(200, json={})

    def _start(self, request: httpx.Request) -> httpx.Response:
        uri = json.loads(request.content)["uri"]
        data = self.s3.read(self.bucket, uri.split(f"/{self.bucket}/", 1)[1])
        seconds, heard = self.listener.hear(data)
        if len(data) > SPEECHKIT_MAX_BYTES or seconds > SPEECHKIT_MAX_SECONDS:
            self.refused.append(uri)
            return httpx.Response(400, json={"code": 3, "message": "audio is longer than 4 hours or larger than 1 GB"})
        op = f"e03long{next(self._ids):013d}"
        self.results[op] = heard
        return httpx.Response(200, json={"id": op, "description": "STT v3 async recognition", "done": False})

    def _operation(self, request: httpx.Request) -> httpx.Response:
        op = request.url.path.rsplit("/", 1)[1]
        return httpx.Response(200, json={"id": op, "done": op in self.results})

    def _results(self, request: httpx.Request) -> httpx.Response:
        heard = self.results[request.url.params["operationId"]]
        return httpx.Response(200, content="\n".join(_utterance(i, h) for i, h in enumerate(heard)).encode())


def _utterance(index: int, h: Heard) -> str:
    start, end = str(round(h.start * 1000)), str(round(h.end * 1000))
    alternative = {"words": [], "text": h.text, "startTimeMs": start, "endTimeMs": end, "confidence": 0}
    cursors = {"receivedDataMs": end, "finalTimeMs": end, "finalIndex": str(index), "eouTimeMs": end}
    raw = alternative | {"text": h.text.lower().rstrip(".?")}
    refinement = {"finalIndex": str(index), "normalizedText": {"alternatives": [alternative]}}
    # As SpeechKit sends an utterance: the raw final, then its normalized text.
    return "\n".join(
        json.dumps({"result": {"audioCursors": cursors, key: value, "channelTag": "0"}})
        for key, value in (("final", {"alternatives": [raw]}), ("finalRefinement", refinement))
    )


class FakeOpenAI:
    """``POST {base}/audio/transcriptions`` answering ``verbose_json``; 413 for a body over 25 MB."""

    def __init__(self, api: respx.MockRouter, base_url: str, listener: Listener) -> None:
        self.listener = listener
        self.sizes: list[int] = []
        self.route = api.post(f"{base_url}/audio/transcriptions").mock(side_effect=self._transcribe)

    def _transcribe(self, request: httpx.Request) -> httpx.Response:
        self.sizes.append(len(request.content))
        if len(request.content) > OPENAI_MAX_BYTES:
            return httpx.Response(413, json={"error": {"message": "Request Entity Too Large"}})
        _, heard = self.listener.hear(_file_part(request))
        segments = [
            {"id": i, "seek": 0, "start": h.start, "end": h.end, "text": " " + h.text, "tokens": []}
            for i, h in enumerate(heard)
        ]
        text = " ".join(h.text for h in heard)
        body = {"task": "transcribe", "language": "english", "duration": 0, "text": text, "segments": segments}
        return httpx.Response(200, json=body)


def _file_part(request: httpx.Request) -> bytes:
    """The ``file`` part of a multipart body."""
    boundary = request.headers["content-type"].split("boundary=", 1)[1].encode()
    for part in request.content.split(b"--" + boundary):
        head, _, data = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return data.removesuffix(b"\r\n")
    raise AssertionError("no file part")


# --- the fakes as a service of their own (for measuring the worker alone) -------------


def serve(port: int, s3_endpoint: str, bucket: str, clips: list[Path]) -> None:
    """Both fakes behind one local HTTP server until killed: SpeechKit at ``/`` (its STT and
    operation URLs), the OpenAI-compatible API at ``/v1``."""
    from testkit.s3 import connect

    base = f"http://127.0.0.1:{port}"
    api = respx.MockRouter(assert_all_mocked=True, assert_all_called=False)
    listener = Listener(clips)
    FakeSpeechKit(api, connect(s3_endpoint), bucket, listener, stt=base, ops=base)
    FakeOpenAI(api, f"{base}/v1", listener)

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            request = httpx.Request(
                self.command, base + self.path, headers=dict(self.headers), content=self.rfile.read(size)
            )
            response = api.handler(request)
            body = response.read()
            self.send_response(response.status_code)
            for key, value in response.headers.items():
                if key.lower() not in ("content-length", "transfer-encoding"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            return None

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    import sys

    serve(int(sys.argv[1]), sys.argv[2], sys.argv[3], [Path(p) for p in sys.argv[4:]])
