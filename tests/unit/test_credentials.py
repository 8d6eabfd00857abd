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
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
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


async def claim(storage: InMemoryStorage, stage: str) -> Claimed:
    got = await storage.claim({stage: timedelta(minutes=5)})
    assert isinstance(got, Claimed)
    return got


async def run_next(pool: WorkerPool, storage: InMemoryStorage) -> Verdict:
    got = await storage.claim(pool.runner.table.leases())
    assert isinstance(got, Claimed)
    return await pool.runner.run(got)


def refused_count(pool: WorkerPool, stage: str) -> float:
    value: float = pool.runner.metrics.credentials_refused.labels(stage=stage)._value.get()
    return value


# The attempt as a refusal must leave it, by the stage the record waits in: a running recognition keeps
# its operation; one being started has none yet.
KEPT_ATTEMPT = {"submitted": (AttemptStatus.RUNNING, OP_ID), "normalized": (AttemptStatus.STARTED, "")}


@dataclass
class Case:
    """What every test here works with: the twin's storage, the mocked APIs, a bucket, the audio and the log."""

    api: respx.MockRouter
    storage: InMemoryStorage
    s3: S3Server
    bucket: str
    audio: Path
    caplog: pytest.LogCaptureFixture

    def speechkit(self, **settings: Any) -> SpeechKitProvider:
        storage = self.s3.settings(self.bucket)
        return SpeechKitProvider(SpeechKitSettings(**settings), storage, store=ObjectStore(storage, max_attempts=1))

    async def normalized(self) -> str:
        """A record in ``normalized`` with its normalized audio: submit starts its recognition next."""
        rid = self.storage.add_record()
        got = await claim(self.storage, "uploaded")
        await self.storage.attach_file(got.claim, self.audio, role="normalized", format="ogg_opus", duration_ms=5600)
        await self.storage.settle(got.claim, Advanced("normalized"))
        return rid

    async def submitted(self, provider: str = "speechkit") -> str:
        """A record whose paid recognition runs at ``provider`` (operation OP_ID), waiting in ``submitted``."""
        rid = await self.normalized()
        got = await claim(self.storage, "normalized")
        aid = await self.storage.create_attempt(got.claim, provider=provider, model="general")
        uri = "https://storage.yandexcloud.net/bucket/transcriber/a/1.ogg"
        change = AttemptChange(OP_ID, audio_uri=uri, status=AttemptStatus.RUNNING)
        await self.storage.update_attempt(got.claim, aid, change)
        await self.storage.settle(got.claim, Advanced("submitted"))
        return rid

    @asynccontextmanager
    async def postponed(self, rid: str, provider: Provider, *, says: str) -> AsyncIterator[WorkerPool]:
        """Runs the record's next step with ``provider``: it must wait for the owner (see
        ``assert_waits_for_the_owner``); the pool is the test's for what comes next."""
        stage = self.storage.row(rid).state
        async with twin_sidecar(self.storage, default_steps(), provider=provider) as pool:
            assert await run_next(pool, self.storage) is Verdict.POSTPONED
            await self.assert_waits_for_the_owner(rid, stage=stage, says=says)
            yield pool

    async def assert_postponed(self, rid: str, provider: Provider, *, says: str) -> None:
        """``postponed``, with nothing more for the pool to do."""
        async with self.postponed(rid, provider, says=says):
            pass

    async def assert_waits_for_the_owner(self, rid: str, *, stage: str, says: str) -> None:
        """Postponed (not failed, not halted), no attempt spent, the attempt as it was; journal and log say why."""
        row = self.storage.row(rid)
        assert (row.state, row.halted_at, row.halt_code, row.attempts) == (stage, "", "", 0)
        assert row.available_at >= self.storage.clock.now_ms() + int(WAIT.total_seconds() * 1000)
        last = self.storage.journal_of(rid)[-1]
        assert last.kind == "postponed", (last.kind, last.text)
        assert "credentials" in last.text, last.text
        assert says in last.text, last.text
        [attempt] = await self.storage.attempts_of(rid)
        assert (attempt.status, attempt.operation_id) == KEPT_ATTEMPT[stage]
        logged = "\n".join(r.getMessage() for r in self.caplog.records if r.name.startswith("transcriber"))
        assert f"record {rid} waits" in logged and "credentials" in logged
        everything = logged + "\n".join(e.text for e in self.storage.journal_of(rid)) + row.halt_reason
        for secret in SECRETS:
            assert secret not in everything


@pytest.fixture
def case(
    api: respx.MockRouter,
    storage: InMemoryStorage,
    s3: S3Server,
    bucket: str,
    audio: Path,
    caplog: pytest.LogCaptureFixture,
) -> Case:
    caplog.set_level(logging.WARNING, logger="transcriber")
    return Case(api, storage, s3, bucket, audio, caplog)


# --- while the recognition runs: polling and fetching its results ------------------------------------


async def test_credentials_removed_from_the_settings_keep_the_running_recognition(case: Case) -> None:
    """The owner switched providers and dropped SpeechKit's key while one of its recognitions ran.

    The attempt names SpeechKit, which is now made from settings without any
    credential. Before, that halted the record and marked the paid operation lost.
    """
    rid = await case.submitted()
    async with case.postponed(rid, StubProvider(), says="not configured") as pool:
        assert refused_count(pool, "submitted") == 1
    assert not case.api.calls  # nothing was asked of SpeechKit without a key


async def test_an_unauthenticated_status_inside_the_results_keeps_the_recognition(case: Case, clock: FakeClock) -> None:
    """The operation finished well; the fetch of its results was refused mid-stream (code 16, A.7).

    Before, the stream's error failed the paid operation (provider_failed).
    """
    case.api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(True))
    results = case.api.get(f"{STT}/stt/v3/getRecognition", params={"operationId": OP_ID})
    refused = [
        *two_utterances()[:2],
        {"error": refusal(16, f"The token has expired: Bearer {IAM_TOKEN}")},
    ]
    results.respond(200, content=ndjson(refused))
    rid = await case.submitted()
    provider = case.speechkit(iam_token=SecretStr(IAM_TOKEN))
    async with case.postponed(rid, provider, says="UNAUTHENTICATED (16)") as pool:
        # A new token, and the same operation's results are fetched: nothing started twice.
        results.respond(200, content=ndjson(two_utterances()))
        clock.advance(WAIT.total_seconds() + 1)
        assert await run_next(pool, case.storage) is Verdict.ADVANCED
    [attempt] = await case.storage.attempts_of(rid)
    assert (attempt.status, attempt.operation_id) == (AttemptStatus.READY, OP_ID)


async def test_a_key_file_that_is_no_longer_a_key_keeps_the_recognition(case: Case, tmp_path: Path) -> None:
    """The authorized key's file was overwritten with other JSON. Before, the step crashed and spent attempts."""
    key_file = tmp_path / "authorized_key.json"
    key_file.write_text(json.dumps([{"id": KEY_ID}]))
    rid = await case.submitted()
    await case.assert_postponed(rid, case.speechkit(service_account_key=str(key_file)), says="is not an authorized key")
    assert not case.api.calls


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
    case: Case, clock: FakeClock, tmp_path: Path, keys: tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey]
) -> None:
    """The old key was deleted: the exchange is refused, the record waits; the owner puts the new key in
    the same file and the recognition is asked about again without a restart. Before, the refused key stayed
    in memory and the record waited until the process restarted."""
    old, new = keys
    key_file = _key_file(tmp_path / "authorized_key.json", old)
    case.api.post(IAM).mock(side_effect=Iam(new))
    poll = case.api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(False))
    rid = await case.submitted()
    provider = case.speechkit(service_account_key=str(key_file))
    says = f"refused the service account key (401): check the key {KEY_ID}"
    async with case.postponed(rid, provider, says=says) as pool:
        assert not poll.calls

        _key_file(key_file, new)
        clock.advance(WAIT.total_seconds() + 1)
        assert await run_next(pool, case.storage) is Verdict.POSTPONED
    assert case.storage.journal_of(rid)[-1].text.endswith("waiting on the provider")
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
    case: Case, tmp_path: Path, keys: tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey], how: str, says: str
) -> None:
    """The documented refusals at each request of a running recognition (these already waited: kept so)."""
    settings: dict[str, Any] = {"iam_token": SecretStr(IAM_TOKEN)}
    if how == "expired static token while polling":
        case.api.get(f"{OPS}/operations/{OP_ID}").respond(401, json=refusal(16, f"The token has expired: {IAM_TOKEN}"))
    elif how == "results refused to the service account":
        case.api.get(f"{OPS}/operations/{OP_ID}").respond(200, json=operation(True))
        case.api.get(f"{STT}/stt/v3/getRecognition").respond(403, json=refusal(7, "Permission denied"))
    else:
        settings = {"service_account_key": str(_key_file(tmp_path / "key.json", keys[0]))}
        case.api.post(IAM).respond(400, json=refusal(3, "Invalid JWT: key not found"))
    rid = await case.submitted()
    await case.assert_postponed(rid, case.speechkit(**settings), says=says)


# --- while the recognition is being started ---------------------------------------------------------


async def test_an_expired_token_at_the_start_waits_and_the_upload_is_used_once_it_works(
    case: Case, clock: FakeClock
) -> None:
    """recognizeFileAsync refuses the static IAM token (401, 12 hours up). Before, the record halted
    provider_rejected and the upload was removed; now it waits, and the next try starts the recognition
    from the same upload."""
    recognize = case.api.post(f"{STT}/stt/v3/recognizeFileAsync")
    recognize.respond(401, json=refusal(16, f"The token has expired: Bearer {IAM_TOKEN}"))
    rid = await case.normalized()
    provider = case.speechkit(iam_token=SecretStr(IAM_TOKEN))
    async with case.postponed(rid, provider, says="nothing was started") as pool:
        assert refused_count(pool, "normalized") == 1
        [waiting] = await case.storage.attempts_of(rid)
        assert waiting.audio_uri and len(case.s3.keys(case.bucket)) == 1  # the upload is kept for the next try

        recognize.respond(200, json=operation(False))
        clock.advance(WAIT.total_seconds() + 1)
        assert await run_next(pool, case.storage) is Verdict.ADVANCED
    [attempt] = await case.storage.attempts_of(rid)
    assert (attempt.status, attempt.operation_id, attempt.audio_uri) == (
        AttemptStatus.RUNNING,
        OP_ID,
        waiting.audio_uri,
    )
    assert recognize.call_count == 2 and len(case.s3.keys(case.bucket)) == 1


async def test_no_speechkit_credentials_at_the_start_wait_before_anything_is_uploaded(case: Case) -> None:
    rid = await case.normalized()
    await case.assert_postponed(rid, case.speechkit(), says="not configured")
    assert case.s3.keys(case.bucket) == [] and not case.api.calls


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
    case: Case, clock: FakeClock, status: int, body: dict[str, Any], api_key: str | None
) -> None:
    """The synchronous call is the paid operation. Before, a 401/403 halted the record provider_rejected."""
    call = case.api.post(OPENAI).respond(status, json=body)
    rid = await case.normalized()
    key = SecretStr(api_key) if api_key else None
    async with case.postponed(rid, OpenAIProvider(OpenAISettings(api_key=key)), says=f"({status}") as pool:
        call.respond(200, json={"text": "The quick brown fox.", "language": "english", "duration": 2.0})
        clock.advance(WAIT.total_seconds() + 1)
        assert await run_next(pool, case.storage) is Verdict.ADVANCED
    [attempt] = await case.storage.attempts_of(rid)
    assert attempt.status == AttemptStatus.READY and call.call_count == 2
