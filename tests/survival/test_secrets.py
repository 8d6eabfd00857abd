"""P17: a secret planted in settings and in provider errors never reaches a halt reason,
a journal row, a poll body or a log line."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import anyio
import pytest
from pydantic import SecretStr

from sidecar.outcome import HaltCode, PermanentError, RetryableError
from sidecar.providers.base import OnProgress, Started, StartRequest
from sidecar.providers.openai.provider import transcript_from
from sidecar.serving.assembly import default_steps, pipeline
from sidecar.transcript.model import Transcript
from testkit.audio import speech_wav_bytes
from testkit.pocketbase import Caller, PocketBaseServer
from tests.support.exports import exported
from tests.support.fakes import StubProvider
from tests.support.secrets import survivors
from tests.support.sidecar import pool_running
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio

API_KEY = "sk-PLANTED-4f9a8b7c6d5e"
S3_SECRET = "s3secretPLANTED0987654321"
SIGNATURE = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
IAM = "t1.PLANTEDiamTokenValue.abc"


class LeakyProvider(StubProvider):
    """Fails the way careless upstreams do: echoing credentials and signed URLs."""

    name = "leaky"
    model = "leaky-1"
    calls = 0

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        LeakyProvider.calls += 1
        if LeakyProvider.calls == 1:
            raise RetryableError(
                f"GET https://storage.example/b/k?X-Amz-Credential=AKIAPLANTED%2F20261129&X-Amz-Signature={SIGNATURE} "
                f"failed; headers were Authorization: Bearer {IAM}"
            )
        raise PermanentError(
            HaltCode.PROVIDER_REJECTED, f'upstream 401: {{"api_key": "{API_KEY}", "secret": "{S3_SECRET}"}}'
        )


PLANTED = [API_KEY, S3_SECRET, SIGNATURE, IAM]


async def test_planted_secrets_never_leave(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, caplog: pytest.LogCaptureFixture, figures: dict[str, str]
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = pb.settings.model_copy(deep=True)
    settings.openai.api_key = SecretStr(API_KEY)
    settings.object_storage.secret_access_key = SecretStr(S3_SECRET)
    settings.speechkit.iam_token = SecretStr(IAM)
    settings.pipeline.retry_delay = timedelta(0)
    settings.pipeline.workers = 1
    rid = sender.upload(speech_wav_bytes(0.5))

    async with pipeline(settings, steps=default_steps(), provider=LeakyProvider()) as pool:
        async with pool_running(pool):
            await eventually(
                lambda: superuser.record(rid)["halted_at"],
                within=60,
            )

    rec = superuser.record(rid)
    assert rec["halt_code"] == "provider_rejected"
    events = superuser.http.get("/api/collections/record_events/records", params={"filter": f'record="{rid}"'}).json()
    texts = [e["outcome_text"] for e in events["items"]]
    assert any("failed" == e["kind"] for e in events["items"])  # the leaky retry did happen
    poll = sender.http.get(f"/api/transcriber/records/{rid}").text
    logs = "\n".join(r.getMessage() for r in caplog.records) + pb.log()
    account = await anyio.Path(pb.settings.pocketbase.data_dir / "service-account.json").read_text()
    places = {"halt_reason": rec["halt_reason"], "events": "\n".join(texts), "poll": poll, "logs": logs}
    for where, text in places.items():
        for secret in PLANTED:
            assert secret not in text, (where, secret)
        assert json.loads(account)["password"] not in text, where
    assert "[redacted]" in rec["halt_reason"]
    figures["secrets"] = (
        f"{len(PLANTED)} planted secrets (API key, S3 secret, IAM token, URL signature) + the service password: "
        f"absent from halt reasons, {len(texts)} journal rows, the poll body and {len(caplog.records)} log lines"
    )


# A key as OpenAI makes them; a provider that puts it in what it recognized (H1).
ECHOED_KEY = "sk-proj-" + "Vb4Nm8Qx2Wz6Lk1Pj9Rt3Hs7Gd5Fc0Ya2Ue8Io4"


class EchoingProvider(StubProvider):
    """Answers like an OpenAI-compatible server whose transcript holds our key: whole, cut, spread over words."""

    name = "echoing"
    model = "echo-1"

    async def start(self, request: StartRequest, on_progress: OnProgress) -> Started:
        k = ECHOED_KEY
        body = {
            "text": f"The quick brown fox. Your key is {k}. Read it again: {k[8:20]} {k[20:32]} {k[32:]}.",
            "segments": [
                {"id": 0, "start": 0.0, "end": 0.2, "text": f" The quick brown fox. Your key is {k}."},
                {"id": 1, "start": 0.2, "end": 0.4, "text": f" Read it again: {k[8:20]}"},
                {"id": 2, "start": 0.4, "end": 0.5, "text": f" {k[20:32]} {k[32:]}."},
            ],
            "words": [
                {"word": w, "start": i * 0.02, "end": i * 0.02 + 0.01}
                for i, w in enumerate(["The", "quick", "brown", "fox.", "Your", "key", "is", f"{k}.", "Read", "it"])
            ]
            + [
                {"word": w, "start": 0.3 + i * 0.04, "end": 0.32 + i * 0.04}
                for i, w in enumerate(["again:", k[8:20], k[20:32], k[32:] + "."])
            ],
        }
        return Started(operation_id="op-echo", raw=json.dumps(body).encode())

    def parse(self, raw: bytes) -> Transcript:
        return transcript_from(json.loads(raw))


async def test_a_key_in_a_transcript_is_neither_stored_nor_exported(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    settings = pb.settings.model_copy(deep=True)
    settings.openai.api_key = SecretStr(ECHOED_KEY)
    settings.pipeline.workers = 1
    rid = sender.upload(speech_wav_bytes(0.5))
    async with pipeline(settings, steps=default_steps(), provider=EchoingProvider()) as pool:
        async with pool_running(pool):
            await eventually(lambda: sender.poll(rid)["status"] == "done")

    poll = sender.poll(rid)
    assert poll["text"].startswith("The quick brown fox. Your key is [redacted].")
    places = {"poll": poll["text"]}
    for fmt in ("txt", "srt", "vtt", "json"):
        places[fmt] = exported(sender, rid, fmt)
    texts = superuser.http.get("/api/collections/texts/records", params={"filter": f'record="{rid}"'}).json()
    places["texts"] = json.dumps(texts["items"])
    # Everything PocketBase keeps: the databases (texts, attempts, journal) and the stored files (the raw response).
    for path in (pb.settings.pocketbase.data_dir).rglob("*"):
        if path.is_file():
            places[str(path)] = path.read_bytes().decode("latin-1")
    for where, text in places.items():
        assert not survivors(text, ECHOED_KEY), where
    words = [w["word"] for s in json.loads(places["json"])["segments"] for w in s.get("words", [])]
    assert words[:7] == ["The", "quick", "brown", "fox.", "Your", "key", "is"] and "[redacted]" in words


async def test_the_service_accounts_downloads_leave_no_token_in_pocketbases_request_log(
    pb: PocketBaseServer, sender: Caller, superuser: Caller
) -> None:
    """PocketBase's file route takes a file token in the URL, and PocketBase's request log keeps
    every URL: the log kept the service account's tokens. The workers now download under their
    Authorization header, which no log keeps."""
    from sidecar.providers.instant import InstantProvider

    rid = sender.upload(speech_wav_bytes(0.5))
    settings = pb.settings.model_copy(deep=True)
    async with pipeline(settings, steps=default_steps(), provider=InstantProvider()) as pool:
        async with pool_running(pool):
            await eventually(lambda: sender.poll(rid)["status"] == "done")

    def logged_urls() -> list[str]:
        items = superuser.http.get("/api/logs", params={"perPage": 500}).json()["items"]
        return [str(i["data"].get("url", "")) for i in items]

    def downloads() -> list[str]:
        urls = [u for u in logged_urls() if u.startswith(("/api/files/", "/api/pipeline/files/"))]
        return urls if urls else []

    # PocketBase writes its log in batches: wait for the download of the original (the raw response
    # the worker stored itself is read from its local copy, not fetched back)
    found = await eventually(downloads, within=30)
    assert all(u.startswith("/api/pipeline/files/") for u in found), found
    assert not [u for u in logged_urls() if "token" in u.lower()]


# The owner's password, made of words (the price of such a password was a way to guess it).
OWNERS_PASSWORD = "maplesyrup-tractor-1987"
SAID = "We poured maple syrup on the pancakes. The tractor was bought in 1987. Maplesyrup tractor, again."


async def test_a_transcript_saying_words_of_the_owners_password_comes_back_whole(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    """A transcript cut where it says words of the owner's password told a sender which words are in
    it, outside every limit on signing in: passwords are kept out of messages and logs, never looked
    for in what was said."""
    from sidecar.providers.instant import InstantProvider

    caplog.set_level(logging.DEBUG)
    settings = pb.settings.model_copy(deep=True)
    settings.pocketbase.superuser_password = SecretStr(OWNERS_PASSWORD)
    settings.pipeline.workers = 1
    rid = sender.upload(speech_wav_bytes(0.5), title="Maple syrup and the tractor of 1987")
    async with pipeline(settings, steps=default_steps(), provider=InstantProvider(SAID)) as pool:
        async with pool_running(pool):
            await eventually(lambda: sender.poll(rid)["status"] == "done")
            logging.getLogger("transcriber").warning("a message naming %s", OWNERS_PASSWORD)

    poll = sender.poll(rid)
    assert poll["text"] == SAID and poll["title"] == "Maple syrup and the tractor of 1987"
    assert "[redacted]" not in exported(sender, rid, "txt") and "maple syrup" in exported(sender, rid, "txt")
    words = [w["word"] for s in json.loads(exported(sender, rid, "json"))["segments"] for w in s.get("words", [])]
    assert " ".join(w.strip() for w in words) == SAID
    # A log line naming the password still loses it.
    from sidecar.runtime.logs import RedactingFormatter

    logged = [RedactingFormatter().format(r) for r in caplog.records if "a message naming" in r.getMessage()]
    assert logged == ["a message naming [redacted]"]
