"""O5 end to end on the twin: our own credentials failing, whatever the cause, postpone the record.

The real runner, steps and providers; the provider APIs mocked with respx in
the shapes PROVIDERS.md documents (A.2, A.7, D.3: REST error bodies
``{"code", "message", "details"}``, 401 UNAUTHENTICATED, 403
PERMISSION_DENIED), the bucket a real S3-compatible server. Whether the
recognition is under way (polling, fetching its results) or being started
(submit), a missing key, a refused or expired key or token, a key file that
is no key: the record is postponed, not failed and not halted; no attempt is
spent; the attempt keeps its operation id and status; the journal and the log
say credentials; no secret reaches either.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import respx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr

from sidecar.outcome import Verdict
from sidecar.pipeline.pool import WorkerPool
from sidecar.providers.base import Provider
from sidecar.providers.openai.provider import OpenAIProvider
from sidecar.providers.speechkit.object_storage import ObjectStore
from sidecar.providers.speechkit.provider import SpeechKitProvider
from sidecar.runtime.clock import FakeClock
from sidecar.serving.assembly import default_steps
from sidecar.settings import OpenAISettings, SpeechKitSettings
from sidecar.storage.memory import InMemoryStorage
from sidecar.storage.model import AttemptChange, AttemptStatus, Claimed
from sidecar.storage.transitions import Advanced
from testkit.s3 import SECRET_ACCESS_KEY, S3Server
from tests.support.fakes import StubProvider
from tests.support.sidecar import twin_sidecar
from tests.unit.test_speechkit import ndjson, operation, two_utterances

pytestmark = pytest.mark.anyio

STT = "https://stt.api.cloud.yandex.net"
OPS = "https://operation.api.cloud.yandex.net"
IAM = "https://iam.api.cloud.yandex.net/iam/v1/tokens"
OPENAI = "https://api.openai.com/v1/audio/transcriptions"
OP_ID = "f8ddr61b30fk12345678"
API_KEY = "AQVN-8Kq2Lw9Rt7Mz4Pc1Yv6-5Tz8"
IAM_TOKEN = "t1.9euelZ-q8Xw2Lr5Tn3Vb7Mk4-Wq4"
OPENAI_KEY = "sk-proj-R7mK2xQ9wL4tZ8vN3c2b1a"
SECRETS = (API_KEY, IAM_TOKEN, OPENAI_KEY, SECRET_ACCESS_KEY)
KEY_ID = "ajekeyid0000000000"
SA_ID = "ajeserviceaccount00"
WAIT = timedelta(minutes=5)


def refusal(code: int, message: str) -> dict[str, Any]:
    """A REST error body as Yandex Cloud writes it (PROVIDERS.md A.7)."""
    return {
        "code": code,
        "message": message,
        "details": [{"@type": "type.googleapis.com/google.rpc.RequestInfo", "requestId": "8f1c2b"}],
    }


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as router:
        yield router


@pytest.fixture
def audio(tmp_path: Path) -> Path:
    path = tmp_path / "normalized.ogg"
    path.write_bytes(b"OggS" + b"\x01" * 3000)
    return path


def speechkit(s3: S3Server, bucket: str, **settings: Any) -> SpeechKitProvider:
    storage = s3.settings(bucket)
    return SpeechKitProvider(SpeechKitSettings(**settings), storage, store=ObjectStore(storage, max_attempts=1))


async def claim(storage: InMemoryStorage, stage: str) -> Claimed:
    got = await storage.claim({stage: timedelta(minutes=5)})
    assert isinstance(got, Claimed)
    return got


async def normalized(storage: InMemoryStorage, audio: Path) -> str:
    """A record in ``normalized`` with its normalized audio: submit starts its recognition next."""
    rid = storage.add_record()
    got = await claim(storage, "uploaded")
    await storage.attach_file(got.claim, audio, role="normalized", format="ogg_opus", duration_ms=5600)
    await storage.settle(got.claim, Advanced("normalized"))
    return rid


async def submitted(storage: InMemoryStorage, audio: Path, provider: str) -> str:
    """A record whose paid recognition runs at ``provider`` (operation OP_ID), waiting in ``submitted``."""
    rid = await normalized(storage, audio)
    got = await claim(storage, "normalized")
    aid = await storage.create_attempt(got.claim, provider=provider, model="general")
    uri = "https://storage.yandexcloud.net/bucket/transcriber/a/1.ogg"
    await storage.update_attempt(got.claim, aid, AttemptChange(OP_ID, audio_uri=uri, status=AttemptStatus.RUNNING))
    await storage.settle(got.claim, Advanced("submitted"))
    return rid


async def run_next(pool: WorkerPool, storage: InMemoryStorage) -> Verdict:
    got = await storage.claim(pool.runner.table.leases())
    assert isinstance(got, Claimed)
    return await pool.runner.run(got)


def refused_count(pool: WorkerPool, stage: str) -> float:
    value: float = pool.runner.metrics.credentials_refused.labels(stage=stage)._value.get()
    return value


async def assert_waits_for_the_owner(
    storage: InMemoryStorage,
    rid: str,
    caplog: pytest.LogCaptureFixture,
    *,
    stage: str,
    says: str,
    status: AttemptStatus,
    operation_id: str,
) -> None:
    """Postponed (not failed, not halted), no attempt spent, the attempt as it was; journal and log say why."""
    row = storage.row(rid)
    assert (row.state, row.halted_at, row.halt_code, row.attempts) == (stage, "", "", 0)
    assert row.available_at >= storage.clock.now_ms() + int(WAIT.total_seconds() * 1000)
    last = storage.journal_of(rid)[-1]
    assert last.kind == "postponed", (last.kind, last.text)
    assert "credentials" in last.text, last.text
    assert says in last.text, last.text
    [attempt] = await storage.attempts_of(rid)
    assert (attempt.status, attempt.operation_id) == (status, operation_id)
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("transcriber"))
    assert f"record {rid} waits" in logged and "credentials" in logged
    everything = logged + "\n".join(e.text for e in storage.journal_of(rid)) + row.halt_reason
    for secret in SECRETS:
        assert secret not in everything


# --- while the recognition runs: polling and fetching its results ------------------------------------


async def test_credentials_removed_from_the_settings_keep_the_running_recognition(
    api: respx.MockRouter, storage: InMemoryStorage, audio: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The owner switched providers and dropped SpeechKit's key while one of its recognitions ran.

    The attempt names SpeechKit, which is now made from settings without any
    credential. Before, that halted the record and marked the paid operation lost.
    """
    caplog.set_level(logging.WARNING, logger="transcriber")
    rid = await submitted(storage, audio, provider="speechkit")
    async with twin_sidecar(storage, default_steps(), provider=StubProvider()) as pool:
        assert await run_next(pool, storage) is Verdict.POSTPONED
        assert refused_count(pool, "submitted") == 1
    await assert_waits_for_the_owner(
        storage, rid, caplog, stage="submitted", says="not configured", status=AttemptStatus.RUNNING, operation_id=OP_ID
    )
    assert not api.calls  # nothing was asked of SpeechKit without a key


async def test_an_unauthenticated_status_inside_the_results_keeps_the_recognition(
    api: respx.MockRouter,
    storage: InMemoryStorage,
    clock: FakeClock,
    s3: S3Server,
    bucket: str,
    audio: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The operation finished well; the fetch of its results was refused mid-stream (code 16, A.7).

    Before, the stream's error failed the paid operation (provider_failed).
    """
    caplog.set_level(logging.WARNING, logger="transcriber")
    api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(True))
    results = api.get(f"{STT}/stt/v3/getRecognition", params={"operationId": OP_ID})
    refused = [
        *two_utterances()[:2],
        {"error": refusal(16, f"The token has expired: Bearer {IAM_TOKEN}")},
    ]
    results.respond(200, content=ndjson(refused))
    rid = await submitted(storage, audio, provider="speechkit")
    provider = speechkit(s3, bucket, iam_token=SecretStr(IAM_TOKEN))
    async with twin_sidecar(storage, default_steps(), provider=provider) as pool:
        assert await run_next(pool, storage) is Verdict.POSTPONED
        await assert_waits_for_the_owner(
            storage,
            rid,
            caplog,
            stage="submitted",
            says="UNAUTHENTICATED (16)",
            status=AttemptStatus.RUNNING,
            operation_id=OP_ID,
        )
        # A new token, and the same operation's results are fetched: nothing started twice.
        results.respond(200, content=ndjson(two_utterances()))
        clock.advance(WAIT.total_seconds() + 1)
        assert await run_next(pool, storage) is Verdict.ADVANCED
    [attempt] = await storage.attempts_of(rid)
    assert (attempt.status, attempt.operation_id) == (AttemptStatus.READY, OP_ID)


async def test_a_key_file_that_is_no_longer_a_key_keeps_the_recognition(
    api: respx.MockRouter,
    storage: InMemoryStorage,
    s3: S3Server,
    bucket: str,
    audio: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The authorized key's file was overwritten with other JSON. Before, the step crashed and spent attempts."""
    caplog.set_level(logging.WARNING, logger="transcriber")
    key_file = tmp_path / "authorized_key.json"
    key_file.write_text(json.dumps([{"id": KEY_ID}]))
    rid = await submitted(storage, audio, provider="speechkit")
    provider = speechkit(s3, bucket, service_account_key=str(key_file))
    async with twin_sidecar(storage, default_steps(), provider=provider) as pool:
        assert await run_next(pool, storage) is Verdict.POSTPONED
    await assert_waits_for_the_owner(
        storage,
        rid,
        caplog,
        stage="submitted",
        says="is not an authorized key",
        status=AttemptStatus.RUNNING,
        operation_id=OP_ID,
    )
    assert not api.calls


def _key_file(path: Path, key: rsa.RSAPrivateKey) -> Path:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path.write_text(json.dumps({"id": KEY_ID, "service_account_id": SA_ID, "private_key": pem}))
    return path


class Iam:
    """The token endpoint: exchanges a JWT signed by the service account's current key; refuses others."""

    def __init__(self, key: rsa.RSAPrivateKey) -> None:
        self.public_key = key.public_key()
        self.issued = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        signed = json.loads(request.content)["jwt"]
        try:
            jwt.decode(signed, self.public_key, algorithms=["PS256"], audience=IAM, issuer=SA_ID)
        except jwt.PyJWTError:
            return httpx.Response(401, json=refusal(16, "The JWT is invalid or its key was deleted"))
        self.issued += 1
        return httpx.Response(200, json={"iamToken": f"t1.fresh-{self.issued}", "expiresAt": "2099-01-01T00:00:00Z"})


@pytest.fixture(scope="module")
def keys() -> tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey]:
    return (
        rsa.generate_private_key(public_exponent=65537, key_size=2048),
        rsa.generate_private_key(public_exponent=65537, key_size=2048),
    )


async def test_a_replaced_key_file_is_read_again_after_a_refusal(
    api: respx.MockRouter,
    storage: InMemoryStorage,
    clock: FakeClock,
    s3: S3Server,
    bucket: str,
    audio: Path,
    tmp_path: Path,
    keys: tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The old key was deleted: the exchange is refused, the record waits; the owner puts the new key in
    the same file and the recognition is asked about again without a restart. Before, the refused key stayed
    in memory and the record waited until the process restarted."""
    caplog.set_level(logging.WARNING, logger="transcriber")
    old, new = keys
    key_file = _key_file(tmp_path / "authorized_key.json", old)
    api.post(IAM).mock(side_effect=Iam(new))
    poll = api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(False))
    rid = await submitted(storage, audio, provider="speechkit")
    provider = speechkit(s3, bucket, service_account_key=str(key_file))
    async with twin_sidecar(storage, default_steps(), provider=provider) as pool:
        assert await run_next(pool, storage) is Verdict.POSTPONED
        await assert_waits_for_the_owner(
            storage,
            rid,
            caplog,
            stage="submitted",
            says=f"refused the service account key (401): check the key {KEY_ID}",
            status=AttemptStatus.RUNNING,
            operation_id=OP_ID,
        )
        assert not poll.calls

        _key_file(key_file, new)
        clock.advance(WAIT.total_seconds() + 1)
        assert await run_next(pool, storage) is Verdict.POSTPONED
    assert storage.journal_of(rid)[-1].text.endswith("waiting on the provider")
    assert poll.calls.last.request.headers["Authorization"] == "Bearer t1.fresh-1"


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("expired static token while polling", "UNAUTHENTICATED (16): The token has expired"),
        ("results refused to the service account", "PERMISSION_DENIED (7)"),
        ("the IAM service refusing the key", "refused the service account key (400)"),
    ],
)
async def test_refusals_while_the_recognition_runs_keep_it(
    api: respx.MockRouter,
    storage: InMemoryStorage,
    s3: S3Server,
    bucket: str,
    audio: Path,
    tmp_path: Path,
    keys: tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey],
    caplog: pytest.LogCaptureFixture,
    how: str,
    says: str,
) -> None:
    """The documented refusals at each request of a running recognition (these already waited: kept so)."""
    caplog.set_level(logging.WARNING, logger="transcriber")
    settings: dict[str, Any] = {"iam_token": SecretStr(IAM_TOKEN)}
    if how == "expired static token while polling":
        api.get(f"{OPS}/operations/{OP_ID}").respond(401, json=refusal(16, f"The token has expired: {IAM_TOKEN}"))
    elif how == "results refused to the service account":
        api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(True))
        api.get(f"{STT}/stt/v3/getRecognition").respond(403, json=refusal(7, "Permission denied"))
    else:
        settings = {"service_account_key": str(_key_file(tmp_path / "key.json", keys[0]))}
        api.post(IAM).respond(400, json=refusal(3, "Invalid JWT: key not found"))
    rid = await submitted(storage, audio, provider="speechkit")
    async with twin_sidecar(storage, default_steps(), provider=speechkit(s3, bucket, **settings)) as pool:
        assert await run_next(pool, storage) is Verdict.POSTPONED
    await assert_waits_for_the_owner(
        storage, rid, caplog, stage="submitted", says=says, status=AttemptStatus.RUNNING, operation_id=OP_ID
    )


# --- while the recognition is being started ---------------------------------------------------------


async def test_an_expired_token_at_the_start_waits_and_the_upload_is_used_once_it_works(
    api: respx.MockRouter,
    storage: InMemoryStorage,
    clock: FakeClock,
    s3: S3Server,
    bucket: str,
    audio: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """recognizeFileAsync refuses the static IAM token (401, 12 hours up). Before, the record halted
    provider_rejected and the upload was removed; now it waits, and the next try starts the recognition
    from the same upload."""
    caplog.set_level(logging.WARNING, logger="transcriber")
    recognize = api.post(f"{STT}/stt/v3/recognizeFileAsync")
    recognize.respond(401, json=refusal(16, f"The token has expired: Bearer {IAM_TOKEN}"))
    rid = await normalized(storage, audio)
    provider = speechkit(s3, bucket, iam_token=SecretStr(IAM_TOKEN))
    async with twin_sidecar(storage, default_steps(), provider=provider) as pool:
        assert await run_next(pool, storage) is Verdict.POSTPONED
        await assert_waits_for_the_owner(
            storage,
            rid,
            caplog,
            stage="normalized",
            says="nothing was started",
            status=AttemptStatus.STARTED,
            operation_id="",
        )
        assert refused_count(pool, "normalized") == 1
        [waiting] = await storage.attempts_of(rid)
        assert waiting.audio_uri and len(s3.keys(bucket)) == 1  # the upload is kept for the next try

        recognize.respond(200, json=operation(False))
        clock.advance(WAIT.total_seconds() + 1)
        assert await run_next(pool, storage) is Verdict.ADVANCED
    [attempt] = await storage.attempts_of(rid)
    assert (attempt.status, attempt.operation_id, attempt.audio_uri) == (
        AttemptStatus.RUNNING,
        OP_ID,
        waiting.audio_uri,
    )
    assert recognize.call_count == 2 and len(s3.keys(bucket)) == 1


async def test_no_speechkit_credentials_at_the_start_wait_before_anything_is_uploaded(
    api: respx.MockRouter,
    storage: InMemoryStorage,
    s3: S3Server,
    bucket: str,
    audio: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="transcriber")
    rid = await normalized(storage, audio)
    async with twin_sidecar(storage, default_steps(), provider=speechkit(s3, bucket)) as pool:
        assert await run_next(pool, storage) is Verdict.POSTPONED
    await assert_waits_for_the_owner(
        storage, rid, caplog, stage="normalized", says="not configured", status=AttemptStatus.STARTED, operation_id=""
    )
    assert s3.keys(bucket) == [] and not api.calls


@pytest.mark.parametrize(
    ("status", "body", "api_key"),
    [
        # D.3: 401 invalid authentication / incorrect key; here a key that is missing at run time.
        (401, {"error": {"message": "Missing bearer authentication in header", "code": "invalid_api_key"}}, None),
        (
            401,
            {"error": {"message": f"Incorrect API key provided: {OPENAI_KEY}.", "code": "invalid_api_key"}},
            OPENAI_KEY,
        ),
        # D.3: 403 unsupported country/region: the account's matter, not the recording's.
        (
            403,
            {"error": {"message": "Country, region, or territory not supported", "code": "unsupported_country"}},
            OPENAI_KEY,
        ),
    ],
)
async def test_openai_refusing_our_key_waits_and_recognizes_once_it_works(
    api: respx.MockRouter,
    storage: InMemoryStorage,
    clock: FakeClock,
    audio: Path,
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: dict[str, Any],
    api_key: str | None,
) -> None:
    """The synchronous call is the paid operation. Before, a 401/403 halted the record provider_rejected."""
    caplog.set_level(logging.WARNING, logger="transcriber")
    call = api.post(OPENAI).respond(status, json=body)
    rid = await normalized(storage, audio)
    key = SecretStr(api_key) if api_key else None
    provider: Provider = OpenAIProvider(OpenAISettings(api_key=key))
    async with twin_sidecar(storage, default_steps(), provider=provider) as pool:
        assert await run_next(pool, storage) is Verdict.POSTPONED
        await assert_waits_for_the_owner(
            storage, rid, caplog, stage="normalized", says=f"({status}", status=AttemptStatus.STARTED, operation_id=""
        )
        call.respond(200, json={"text": "The quick brown fox.", "language": "english", "duration": 2.0})
        clock.advance(WAIT.total_seconds() + 1)
        assert await run_next(pool, storage) is Verdict.ADVANCED
    [attempt] = await storage.attempts_of(rid)
    assert attempt.status == AttemptStatus.READY and call.call_count == 2
