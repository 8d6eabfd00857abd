"""The probe's key shapes through the real providers' error paths into the halt reason, the journal
and the log (H1): a 4xx halts with the provider's message, a 500 or a 429 retries with it; none of
them may carry 8 characters of the key in a row. The HTTP APIs are mocked with respx in the shapes
PROVIDERS.md gives (OpenAI-compatible errors, google.rpc.Status bodies of SpeechKit)."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import respx
from pydantic import SecretStr

from sidecar.outcome import Verdict
from sidecar.providers.base import Provider
from sidecar.providers.openai.provider import OpenAIProvider
from sidecar.providers.speechkit.provider import SpeechKitProvider
from sidecar.serving.assembly import default_steps
from sidecar.settings import ObjectStorageSettings, OpenAISettings, SpeechKitSettings
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import AttemptChange, AttemptStatus, Claimed
from sidecar.storage.transitions import Advanced
from tests.support.secrets import survivors
from tests.support.sidecar import twin_sidecar
from tests.unit.test_redaction import MIDDLE, PROBE_KEY, PROBE_SHAPES, SLASHED

pytestmark = pytest.mark.anyio

OPENAI = "https://api.openai.com/v1/audio/transcriptions"
OPS = "https://operation.api.cloud.yandex.net"
STT = "https://stt.api.cloud.yandex.net"

Body = dict[str, Any] | str
# Sets a provider's API up to answer with an error: the provider, and the record its step meets it on.
Answering = Callable[[respx.MockRouter, InMemoryStorage, int, str, Body], Awaitable[tuple[Provider, str]]]

# The body as a server sends it: the probe's shapes as they are, and inside the JSON errors each
# kind of server writes (OpenAI error.message, whisper.cpp error, FastAPI detail).
OPENAI_BODIES: list[tuple[str, str, Body]] = [
    *[(shape, key, text) for shape, key, text in PROBE_SHAPES],
    ("whisper.cpp error", PROBE_KEY, {"error": f"string error {MIDDLE}"}),
    ("OpenAI error.message", SLASHED, {"error": {"message": f"Incorrect API key {SLASHED[2:30]}", "type": "x"}}),
    ("FastAPI detail", PROBE_KEY, {"detail": [{"msg": f"bad key {PROBE_KEY[12:40]}"}]}),
    ("a long message, the key at its end", PROBE_KEY, {"error": {"message": "x" * 480 + f" key {PROBE_KEY}"}}),
]


def _respond(route: respx.Route, status: int, body: Body) -> None:
    if isinstance(body, str):
        route.respond(status, text=body)
    else:
        route.respond(status, json=body)


async def _normalized(storage: InMemoryStorage) -> str:
    """A record with its normalized audio, waiting for submit."""
    rid = storage.add_record()
    got = await storage.claim({"uploaded": timedelta(minutes=5)})
    assert isinstance(got, Claimed)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "audio.ogg").write_bytes(b"OggS" + b"\x02" * 2000)
        await storage.attach_file(
            got.claim, Path(tmp) / "audio.ogg", role="normalized", format="ogg_opus", duration_ms=1000
        )
    await storage.settle(got.claim, Advanced("normalized"))
    return rid


async def _submitted(storage: InMemoryStorage) -> str:
    """A record whose SpeechKit recognition runs as operation op-1, waiting for poll."""
    rid = await _normalized(storage)
    got = await storage.claim({"normalized": timedelta(minutes=5)})
    assert isinstance(got, Claimed)
    aid = await storage.create_attempt(got.claim, provider="speechkit", model="general")
    await storage.update_attempt(got.claim, aid, AttemptChange("op-1", status=AttemptStatus.RUNNING))
    await storage.settle(got.claim, Advanced("submitted"))
    return rid


def _places(storage: InMemoryStorage, rid: str, caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    return {
        "halt reason": storage.row(rid).halt_reason,
        "journal": "\n".join(e.text for e in storage.journal_of(rid)),
        "log": "\n".join(r.getMessage() for r in caplog.records),
    }


def _expect(verdict: Verdict, status: int, places: dict[str, str], key: str) -> None:
    if status == 429 or status >= 500:
        assert verdict is Verdict.FAILED, places  # a retry, with the provider's message in the note
        assert "[redacted]" in places["journal"]
    else:
        assert verdict is Verdict.HALTED, places
        assert "[redacted]" in places["halt reason"]
    for where, text in places.items():
        assert not survivors(text, key), (where, text)


# SpeechKit's REST errors: google.rpc.Status (A.7), and bodies that are not one (a proxy's page).
SPEECHKIT_BODIES: list[tuple[str, str, Body]] = [
    ("status message, a middle run", PROBE_KEY, {"code": 3, "message": f"string error {MIDDLE}", "details": []}),
    (
        "status message, split by -",
        PROBE_KEY,
        {"code": 8, "message": f"quota for key {PROBE_KEY[8:20]}-{PROBE_KEY[20:34]}"},
    ),
    *[(shape, key, text) for shape, key, text in PROBE_SHAPES if not text.startswith("{")],
]


async def _openai_answering(
    api: respx.MockRouter, storage: InMemoryStorage, status: int, key: str, body: Body
) -> tuple[Provider, str]:
    """The transcription call answered with ``status`` and ``body``: the provider, a record for submit."""
    _respond(api.post(OPENAI), status, body)
    return OpenAIProvider(OpenAISettings(api_key=SecretStr(key))), await _normalized(storage)


async def _speechkit_answering(
    api: respx.MockRouter, storage: InMemoryStorage, status: int, key: str, body: Body
) -> tuple[Provider, str]:
    """The poll of a running recognition answered with ``status`` and ``body``: the provider, a record for poll."""
    _respond(api.get(f"{OPS}/operations/op-1"), status, body)
    if status == 400:  # the recognition is lost for good: its copies are removed at once
        api.delete(f"{STT}/stt/v3/deleteRecognition").respond(200, json={})
    provider = SpeechKitProvider(
        SpeechKitSettings(api_key=SecretStr(key)),
        ObjectStorageSettings(bucket="b", access_key_id="YCAJEexample", secret_access_key=SecretStr("Tq3Wz8Kx2Lm7")),
    )
    return provider, await _submitted(storage)


ERRORS = [
    *[pytest.param(_openai_answering, key, body, id=f"OpenAI, {shape}") for shape, key, body in OPENAI_BODIES],
    *[pytest.param(_speechkit_answering, key, body, id=f"SpeechKit, {shape}") for shape, key, body in SPEECHKIT_BODIES],
]


@pytest.mark.parametrize("status", [400, 429, 500])
@pytest.mark.parametrize(("answering", "key", "body"), ERRORS)
async def test_provider_errors_keep_no_piece_of_the_key(
    api: respx.MockRouter,
    storage: InMemoryStorage,
    caplog: pytest.LogCaptureFixture,
    status: int,
    answering: Answering,
    key: str,
    body: Body,
) -> None:
    caplog.set_level(logging.DEBUG)
    provider, rid = await answering(api, storage, status, key, body)
    async with twin_sidecar(storage, default_steps(), provider=provider) as pool:
        got = await pool.runner.storage.claim(pool.runner.table.leases())
        assert isinstance(got, Claimed) and got.record.id == rid
        verdict = await pool.runner.run(got)
    _expect(verdict, status, _places(storage, rid, caplog), key)


async def test_a_servers_id_carrying_a_secret_is_stored_without_it(
    api: respx.MockRouter, storage: InMemoryStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OpenAI-compatible server's response `id` went into the attempt row (and every export of
    it) as it came. A registered secret the provider does not hold itself (the owner's password, say) and the
    provider's own key, plain and in hex: none of them is in the stored operation id."""
    from sidecar import redaction

    owner_password = "Tq3Wz8Kx2Lm7-maple-ridge"
    monkeypatch.setattr(redaction, "_known", frozenset({owner_password}))
    ident = f"resp_{owner_password}_{PROBE_KEY.encode().hex()}"
    api.post(OPENAI).respond(200, json={"text": "hello there", "id": ident})
    rid = await _normalized(storage)
    provider = OpenAIProvider(OpenAISettings(api_key=SecretStr(PROBE_KEY)))
    async with twin_sidecar(storage, default_steps(), provider=provider) as pool:
        got = await pool.runner.storage.claim(pool.runner.table.leases())
        assert isinstance(got, Claimed) and got.record.id == rid
        await pool.runner.run(got)
    (attempt,) = (await storage.rows_of(rid)).attempts
    assert attempt.operation_id.startswith("resp_[redacted]")
    assert owner_password[:8] not in attempt.operation_id and "maple-ri" not in attempt.operation_id
    assert PROBE_KEY.encode().hex()[10:30] not in attempt.operation_id
