"""The audio's stop-over in Yandex Object Storage (any S3-compatible store), for SpeechKit.

SpeechKit reads long audio only from a bucket (``uri``), so the normalized
file is uploaded first and removed after finalize. boto3 signs every request
(Signature V4, ``s3v4``, the configured region); nothing is signed by hand.
Its calls block, so they run in worker threads.

Keys are ``{prefix}{attempt_key}/{random}.{ext}``: unique per upload, and
grouped per attempt so that a retried submit can find an upload that
finished before its address was stored (``find``). URIs are path style
(``{endpoint}/{bucket}/{key}``), the form SpeechKit's examples use and the
only HTTPS form for bucket names with dots.

Errors are classified here (PROVIDERS.md D.2): throttling and server errors
are retried by botocore a few times and then leave as ``RetryableError``;
our access keys refused (access denied, bad signature, unknown key id) or
not configured as ``CredentialsRefused`` (the record waits for the owner,
O5); other refusals (missing bucket, clock skew, too large) as
``PermanentError(PROVIDER_REJECTED)``.

Not confirmed against the real service: whether Object Storage accepts the
trailing checksums newer boto3 releases add to uploads by default. They are
switched to "when required" (the older behaviour every S3-compatible store
accepts); the integrity of an upload still rests on the signed request.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

import anyio
import anyio.to_thread
import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from sidecar.outcome import CredentialsRefused, HaltCode, PermanentError, RetryableError
from sidecar.providers.http import CREDENTIALS_WAIT
from sidecar.redaction import Scrub, scrubber, short
from sidecar.settings import ObjectStorageSettings

__all__ = ["ObjectStore", "classify"]

T = TypeVar("T")

_RETRYABLE_CODES = frozenset(
    {"TooManyRequests", "InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "Throttling"}
)
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# Our static access keys refused, or their service account lacking a role (D.2).
_CREDENTIAL_CODES = frozenset({"AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId"})
_FIX_KEYS = "the record waits: check [object_storage] access_key_id, secret_access_key and the account's roles"
_MAX_CONNECT = 10.0
_SAFE_KEY_PART = re.compile(r"[^A-Za-z0-9._-]")


def classify(error: Exception, action: str, scrub: Scrub) -> Exception:
    """A boto3/botocore error → ``RetryableError`` or ``PermanentError``; anything else unchanged."""
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        code = str(info.get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        message = short(str(info.get("Message", "")), scrub)
        what = f"Object Storage could not {action} ({status} {code}{': ' + message if message else ''})"
        if code in _RETRYABLE_CODES or status in _RETRYABLE_STATUS:
            return RetryableError(scrub(what))
        if code in _CREDENTIAL_CODES:
            detail = f"{status} {code}{': ' + message if message else ''}"
            text = f"Object Storage refused our credentials ({detail}) to {action}; {_FIX_KEYS}"
            return CredentialsRefused(scrub(text), delay=CREDENTIALS_WAIT)
        return PermanentError(HaltCode.PROVIDER_REJECTED, scrub(what.replace("could not", "refused to", 1)))
    if isinstance(error, (NoCredentialsError, PartialCredentialsError)):
        text = f"Object Storage has no credentials to {action}: no access keys; {_FIX_KEYS}"
        return CredentialsRefused(text, delay=CREDENTIALS_WAIT)
    if isinstance(error, BotoCoreError):
        # Connection refused, connect/read timeouts, dropped connections.
        return RetryableError(scrub(f"Object Storage could not {action}: {type(error).__name__}: {error}"))
    return error


class ObjectStore:
    def __init__(self, settings: ObjectStorageSettings, *, max_attempts: int = 3) -> None:
        self._settings = settings
        self._endpoint = settings.endpoint_url.rstrip("/")
        self._max_attempts = max_attempts
        secret = settings.secret_access_key.get_secret_value() if settings.secret_access_key else None
        self._scrub = scrubber([secret, settings.access_key_id])
        self._client: Any = None
        self._lock = threading.Lock()

    # --- addresses -------------------------------------------------------------

    @property
    def bucket(self) -> str:
        if not self._settings.bucket:
            raise PermanentError(HaltCode.PROVIDER_REJECTED, "object_storage.bucket is not configured")
        return self._settings.bucket

    def attempt_prefix(self, attempt_key: str) -> str:
        return f"{self._settings.prefix}{_SAFE_KEY_PART.sub('_', attempt_key)}/"

    def new_key(self, attempt_key: str, suffix: str) -> str:
        """A key no other upload can have: the attempt's folder and a random name."""
        return f"{self.attempt_prefix(attempt_key)}{uuid.uuid4().hex}{suffix}"

    def uri(self, key: str) -> str:
        return f"{self._endpoint}/{self.bucket}/{quote(key)}"

    def key_of(self, uri: str) -> str | None:
        """The key of a URI in this bucket (path or virtual-host style), or None if it is elsewhere."""
        if not self._settings.bucket:
            return None
        bucket = self._settings.bucket
        path_style = f"{self._endpoint}/{bucket}/"
        if uri.startswith(path_style):
            rest = uri[len(path_style) :].split("?", 1)[0].split("#", 1)[0]
            return unquote(rest) or None
        parts, endpoint = urlsplit(uri), urlsplit(self._endpoint)
        if parts.hostname == f"{bucket}.{endpoint.hostname}" and parts.path.strip("/"):
            return unquote(parts.path.lstrip("/"))
        return None

    # --- operations ------------------------------------------------------------

    async def upload(self, path: Path, key: str, content_type: str) -> str:
        """Uploads ``path`` under ``key`` in one PUT (≤ 5 GB, far above SpeechKit's 1 GB); returns its URI."""
        bucket = self.bucket

        def put(client: Any) -> None:
            with path.open("rb") as body:
                client.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)

        # Abandoned on cancellation: a finished stray upload is found by
        # ``find`` on the next try, an unfinished one never becomes visible.
        await self._run("upload the audio", put, abandon=True)
        return self.uri(key)

    async def exists(self, uri: str) -> bool:
        key = self.key_of(uri)
        if key is None:
            return False
        bucket = self.bucket

        def head(client: Any) -> bool:
            try:
                client.head_object(Bucket=bucket, Key=key)
            except ClientError as e:
                if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                    return False
                raise
            return True

        return await self._run("look up the uploaded audio", head)

    async def find(self, attempt_key: str) -> str | None:
        """The URI of an upload made for this attempt, if one finished."""
        bucket, prefix = self.bucket, self.attempt_prefix(attempt_key)

        def first(client: Any) -> str | None:
            page = client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=10)
            contents = sorted(page.get("Contents", []), key=lambda o: o["LastModified"])
            return str(contents[-1]["Key"]) if contents else None

        key = await self._run("list the uploaded audio", first)
        return self.uri(key) if key else None

    async def delete(self, uri: str) -> None:
        """Removes the object behind ``uri``; a missing object counts as removed."""
        key = self.key_of(uri)
        if key is None:
            raise PermanentError(
                HaltCode.PROVIDER_REJECTED, f"the audio at {self._scrub(uri)} is not in the configured bucket"
            )
        bucket = self.bucket
        await self._run("delete the uploaded audio", lambda c: c.delete_object(Bucket=bucket, Key=key))

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    # --- plumbing --------------------------------------------------------------

    async def _run(self, action: str, fn: Callable[[Any], T], *, abandon: bool = False) -> T:
        def call() -> T:
            try:
                return fn(self._get_client())
            except (ClientError, BotoCoreError) as e:
                raise classify(e, action, self._scrub) from e

        return await anyio.to_thread.run_sync(call, abandon_on_cancel=abandon)

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> Any:
        s = self._settings
        if not (s.access_key_id and s.secret_access_key):
            # No fallback to ambient AWS credentials: Object Storage needs the static keys configured here.
            raise CredentialsRefused(
                "Object Storage has no credentials: object_storage.access_key_id and "
                "object_storage.secret_access_key are not configured; the record waits until they are",
                delay=CREDENTIALS_WAIT,
            )
        seconds = max(s.timeout.total_seconds(), 0.001)
        config = Config(
            signature_version="s3v4",
            region_name=s.region,
            connect_timeout=min(seconds, _MAX_CONNECT),
            read_timeout=seconds,
            retries={"max_attempts": self._max_attempts, "mode": "standard"},
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        session = boto3.session.Session(
            aws_access_key_id=s.access_key_id,
            aws_secret_access_key=s.secret_access_key.get_secret_value(),
            region_name=s.region,
        )
        return session.client("s3", endpoint_url=self._endpoint, config=config)
