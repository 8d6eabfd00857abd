"""The Object Storage stop-over against a real S3-compatible server (moto's, over HTTP)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from sidecar.outcome import CredentialsRefused, HaltCode, PermanentError, RetryableError
from sidecar.providers.speechkit.object_storage import ObjectStore, classify
from testkit.pocketbase import free_port
from testkit.s3 import ACCESS_KEY_ID, SECRET_ACCESS_KEY, S3Server

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(s3: S3Server, bucket: str) -> AsyncIterator[ObjectStore]:
    st = ObjectStore(s3.settings(bucket, prefix="audio/"), max_attempts=1)
    yield st
    await st.aclose()


@pytest.fixture
def audio(tmp_path: Path) -> Path:
    path = tmp_path / "normalized.ogg"
    path.write_bytes(b"OggS" + bytes(range(256)) * 40)
    return path


async def test_upload_stores_the_bytes_under_a_path_style_uri(
    s3: S3Server, bucket: str, store: ObjectStore, audio: Path
) -> None:
    key = store.new_key("att123", ".ogg")
    uri = await store.upload(audio, key, "audio/ogg")

    assert key.startswith("audio/att123/") and key.endswith(".ogg")
    assert uri == f"{s3.endpoint_url}/{bucket}/{key}"
    assert s3.keys(bucket) == [key]
    assert s3.read(bucket, key) == await anyio.Path(audio).read_bytes()
    head = s3.client.head_object(Bucket=bucket, Key=key)
    assert head["ContentType"] == "audio/ogg"
    assert store.key_of(uri) == key
    assert await store.exists(uri)


async def test_keys_never_collide_even_for_the_same_attempt(
    s3: S3Server, bucket: str, store: ObjectStore, audio: Path
) -> None:
    uris = [await store.upload(audio, store.new_key("same-attempt", ".ogg"), "audio/ogg") for _ in range(3)]
    assert len(set(uris)) == 3
    assert len(s3.keys(bucket, "audio/same-attempt/")) == 3
    # Attempt keys cannot escape their folder.
    assert store.new_key("../x/y", ".ogg").startswith("audio/.._x_y/")


async def test_find_returns_an_upload_of_the_attempt_and_nothing_for_others(
    s3: S3Server, bucket: str, store: ObjectStore, audio: Path
) -> None:
    assert await store.find("att1") is None
    uri = await store.upload(audio, store.new_key("att1", ".ogg"), "audio/ogg")
    assert await store.find("att1") == uri
    assert await store.find("att2") is None


async def test_delete_removes_the_object_and_a_second_delete_is_fine(
    s3: S3Server, bucket: str, store: ObjectStore, audio: Path
) -> None:
    uri = await store.upload(audio, store.new_key("att1", ".ogg"), "audio/ogg")
    await store.delete(uri)
    assert s3.keys(bucket) == []
    assert not await store.exists(uri)
    await store.delete(uri)


async def test_a_uri_outside_the_bucket_is_neither_found_nor_deleted(store: ObjectStore) -> None:
    assert store.key_of("https://elsewhere.example/bucket/key.ogg") is None
    assert not await store.exists("https://elsewhere.example/bucket/key.ogg")
    with pytest.raises(PermanentError):
        await store.delete("https://elsewhere.example/bucket/key.ogg")


async def test_virtual_host_style_uris_are_understood(s3: S3Server) -> None:
    store = ObjectStore(s3.settings("my-bucket", endpoint_url="https://storage.yandexcloud.net"))
    assert store.key_of("https://my-bucket.storage.yandexcloud.net/a/b%20c.ogg") == "a/b c.ogg"
    assert store.key_of("https://storage.yandexcloud.net/my-bucket/a/b.ogg?X-Amz-Signature=x") == "a/b.ogg"
    assert store.uri("a/b c.ogg") == "https://storage.yandexcloud.net/my-bucket/a/b%20c.ogg"


async def test_a_missing_bucket_is_a_permanent_rejection(s3: S3Server, audio: Path) -> None:
    store = ObjectStore(s3.settings("no-such-bucket-here"), max_attempts=1)
    with pytest.raises(PermanentError) as e:
        await store.upload(audio, "k.ogg", "audio/ogg")
    assert e.value.code == HaltCode.PROVIDER_REJECTED
    assert "NoSuchBucket" in str(e.value)
    await store.aclose()


async def test_unreachable_storage_is_retryable_and_bounded_by_the_timeout(s3: S3Server, audio: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    store = ObjectStore(s3.settings("b-1", endpoint_url=dead, timeout=timedelta(seconds=2)), max_attempts=1)
    with anyio.fail_after(10):
        with pytest.raises(RetryableError) as e:
            await store.upload(audio, "k.ogg", "audio/ogg")
    assert "could not upload" in str(e.value)
    await store.aclose()


async def test_missing_configuration_is_reported_without_calling_out(s3: S3Server, audio: Path) -> None:
    with pytest.raises(PermanentError, match="bucket is not configured"):
        await ObjectStore(s3.settings("")).upload(audio, "k", "audio/ogg")
    store = ObjectStore(s3.settings("b-1", access_key_id=None, secret_access_key=None))
    with pytest.raises(CredentialsRefused, match="access_key_id"):  # ours to fix, not the recording's: it waits
        await store.upload(audio, "k", "audio/ogg")


def _client_error(code: str, status: int, message: str = "") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject"
    )


@pytest.mark.parametrize(
    ("code", "status"),
    [("SlowDown", 503), ("ServiceUnavailable", 503), ("InternalError", 500), ("TooManyRequests", 429)],
)
def test_throttling_and_server_errors_are_retryable(code: str, status: int) -> None:
    error = classify(_client_error(code, status), "upload the audio", str)
    assert isinstance(error, RetryableError)
    assert code in str(error)


def _refusal_quoting_our_keys(code: str, status: int) -> Exception:
    """S3's refusal ``code`` with our access key and secret in its message, classified as an upload's."""
    store = ObjectStore(S3Server("http://x", None).settings("b"))
    message = f"key {ACCESS_KEY_ID} secret {SECRET_ACCESS_KEY} refused"
    return classify(_client_error(code, status, message), "upload the audio", store._scrub)


@pytest.mark.parametrize(
    ("code", "status"), [("NoSuchBucket", 404), ("RequestTimeTooSkewed", 403), ("EntityTooLarge", 400)]
)
def test_refusals_are_permanent_and_keep_the_keys_out(code: str, status: int) -> None:
    error = _refusal_quoting_our_keys(code, status)
    assert isinstance(error, PermanentError) and error.code == HaltCode.PROVIDER_REJECTED
    assert code in str(error)
    assert ACCESS_KEY_ID not in str(error) and SECRET_ACCESS_KEY not in str(error)


@pytest.mark.parametrize(
    ("code", "status"), [("AccessDenied", 403), ("SignatureDoesNotMatch", 403), ("InvalidAccessKeyId", 403)]
)
def test_our_keys_refused_wait_for_the_owner_and_keep_the_keys_out(code: str, status: int) -> None:
    """D.2's refusals of our static keys or their roles: not the recording's fault (O5)."""
    error = _refusal_quoting_our_keys(code, status)
    assert isinstance(error, CredentialsRefused) and error.delay == timedelta(minutes=5)
    assert code in str(error) and "access_key_id" in str(error)
    assert ACCESS_KEY_ID not in str(error) and SECRET_ACCESS_KEY not in str(error)


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="http://x"),
        ConnectTimeoutError(endpoint_url="http://x"),
        ReadTimeoutError(endpoint_url="http://x"),
    ],
)
def test_network_failures_are_retryable(error: Exception) -> None:
    assert isinstance(classify(error, "upload the audio", str), RetryableError)


async def test_every_call_has_connect_and_read_timeouts(s3: S3Server, bucket: str) -> None:
    store = ObjectStore(s3.settings(bucket, timeout=timedelta(seconds=45)))
    config = store._get_client().meta.config
    assert (config.connect_timeout, config.read_timeout) == (10.0, 45.0)
    assert config.signature_version == "s3v4" and config.region_name == "ru-central1"
    await store.aclose()
