"""IAM tokens for a Yandex Cloud service account, from its authorized key, renewed before they expire (O5).

An authorized key is the JSON file ``yc iam key create`` writes: ``id`` (the
key's id), ``service_account_id`` and ``private_key`` (PEM; a first line
that is not PEM, which some versions of the file carry, is skipped). It
signs a short JWT (PS256, ``kid`` = the key's id, issued by the service
account, for the token endpoint), which the IAM API exchanges for a token:
``POST {iam_url}/iam/v1/tokens`` with ``{"jwt": …}`` → ``{"iamToken",
"expiresAt"}``. Tokens live up to 12 hours (PROVIDERS.md A.2); one is renewed
after an hour or when less than ten minutes of it remain, whichever comes
first, so a deferred recognition polled for a day never meets an expired one.
The signing is PyJWT's (with ``cryptography``); nothing here is hand-rolled.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import anyio
import httpx
import jwt

from sidecar.outcome import CredentialsRefused, RetryableError
from sidecar.providers.http import CREDENTIALS_WAIT
from sidecar.redaction import register_secrets

__all__ = ["IamTokens", "ServiceAccountKey"]

TOKEN_PATH = "/iam/v1/tokens"  # noqa: S105 - a path, not a secret
_JWT_LIFETIME = 3600  # seconds: the longest a JWT for the exchange may live
_RENEW_AFTER = 3600.0  # seconds since a token was issued
_RENEW_BEFORE_EXPIRY = 600.0


@dataclass(frozen=True)
class ServiceAccountKey:
    key_id: str
    service_account_id: str
    private_key: str

    @classmethod
    def load(cls, location: str) -> ServiceAccountKey:
        """The key in ``path``; a file that is not an authorized key is refused, naming what is missing.

        Our own credentials, so a failure waits for the owner (``CredentialsRefused``) rather than failing a record.
        """
        path = Path(location).expanduser()
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise _unusable(f"the service account key {path} cannot be read: {type(e).__name__}") from None
        if not isinstance(data, dict):
            raise _unusable(
                f"the service account key {path} is not an authorized key (a JSON {type(data).__name__}, not an "
                "object from `yc iam key create`)"
            )
        missing = [k for k in ("id", "service_account_id", "private_key") if not isinstance(data.get(k), str)]
        if missing:
            raise _unusable(
                f"the service account key {path} lacks {', '.join(missing)} (is it an authorized key from "
                "`yc iam key create`?)"
            )
        pem = data["private_key"]
        start = pem.find("-----BEGIN")
        key = cls(data["id"], data["service_account_id"], pem[start:] if start >= 0 else pem)
        # The key's base64 body: the armor lines ("BEGIN PRIVATE KEY") are no secret, and
        # their words would be taken for pieces of one.
        body = "".join(line.strip() for line in key.private_key.splitlines() if not line.startswith("-----"))
        register_secrets([body])
        return key


class IamTokens:
    """The current IAM token of a service account, exchanged and renewed as needed."""

    def __init__(
        self,
        key: ServiceAccountKey,
        iam_url: str,
        http: httpx.AsyncClient,
        *,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._key = key
        self._url = iam_url.rstrip("/") + TOKEN_PATH
        self._http = http
        self._now = now
        self._lock = anyio.Lock()
        self._token = ""
        self._issued = 0.0
        self._expires = 0.0

    async def token(self) -> str:
        async with self._lock:
            now = self._now()
            if not self._token or now - self._issued >= _RENEW_AFTER or self._expires - now <= _RENEW_BEFORE_EXPIRY:
                await self._exchange(now)
            return self._token

    def forget(self) -> None:
        """Drops the current token (it was refused): the next request gets a fresh one."""
        self._token = ""

    def _signed_jwt(self, now: float) -> str:
        claims = {
            "aud": self._url,
            "iss": self._key.service_account_id,
            "iat": int(now),
            "exp": int(now) + _JWT_LIFETIME,
        }
        return jwt.encode(claims, self._key.private_key, algorithm="PS256", headers={"kid": self._key.key_id})

    async def _exchange(self, now: float) -> None:
        try:
            signed = self._signed_jwt(now)
        except (ValueError, TypeError, jwt.PyJWTError) as e:
            raise _unusable(f"the service account key cannot sign ({type(e).__name__})") from None
        try:
            resp = await self._http.post(self._url, json={"jwt": signed})
        except httpx.HTTPError as e:
            raise RetryableError(f"the IAM service could not be reached for a token ({type(e).__name__})") from e
        if resp.status_code in (400, 401, 403):
            raise _unusable(
                f"the IAM service refused the service account key ({resp.status_code}): check the key "
                f"{self._key.key_id} and its service account"
            )
        if resp.status_code >= 300:
            raise RetryableError(f"the IAM service answered {resp.status_code} to the token request")
        try:
            body = resp.json()
            token = str(body["iamToken"])
            expires = datetime.fromisoformat(str(body["expiresAt"]).replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError, TypeError) as e:
            raise RetryableError("the IAM service sent a token answer that cannot be read") from e
        register_secrets([token])
        self._token, self._issued, self._expires = token, now, expires


def _unusable(why: str) -> CredentialsRefused:
    """Our credentials for SpeechKit cannot be used: the record waits for the owner (O5)."""
    return CredentialsRefused(f"SpeechKit's credentials cannot be used: {why}", delay=CREDENTIALS_WAIT)
