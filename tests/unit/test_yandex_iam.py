"""SpeechKit with a service account's authorized key: JWT exchange, renewal, refusal (O5).

The IAM endpoint is faked with respx; it checks the JWT as Yandex's would:
PS256 over the key's public half, ``kid`` the key's id, issued by the
service account, for the token endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import respx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr

from sidecar.outcome import CredentialsRefused
from sidecar.providers.base import StartRequest
from sidecar.providers.speechkit.iam import IamTokens, ServiceAccountKey
from sidecar.providers.speechkit.object_storage import ObjectStore
from sidecar.providers.speechkit.provider import SpeechKitProvider
from sidecar.settings import SpeechKitSettings
from testkit.s3 import S3Server

pytestmark = pytest.mark.anyio

IAM = "https://iam.api.cloud.yandex.net/iam/v1/tokens"
STT = "https://stt.api.cloud.yandex.net"
OPS = "https://operation.api.cloud.yandex.net"
KEY_ID = "ajekeyid0000000000"
SA_ID = "ajeserviceaccount00"


@pytest.fixture(scope="module")
def private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def key_file(tmp_path: Path, private_key: rsa.RSAPrivateKey) -> Path:
    pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path = tmp_path / "authorized_key.json"
    path.write_text(
        json.dumps(
            {
                "id": KEY_ID,
                "service_account_id": SA_ID,
                "created_at": "2026-11-01T00:00:00Z",
                "key_algorithm": "RSA_2048",
                "public_key": "-----BEGIN PUBLIC KEY-----\n...",
                "private_key": f"PLEASE DO NOT REMOVE THIS LINE! Yandex.Cloud SA Key ID <{KEY_ID}>\n{pem}",
            }
        )
    )
    return path


class FakeIam:
    """The token endpoint: checks each JWT, hands out numbered tokens valid 12 hours."""

    def __init__(self, public_key: rsa.RSAPublicKey) -> None:
        self.public_key = public_key
        self.issued: list[str] = []
        self.refuse = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.refuse:
            return httpx.Response(401, json={"code": 16, "message": "Unauthenticated"})
        token = json.loads(request.content)["jwt"]
        header = jwt.get_unverified_header(token)
        # Times are the test's injected clock, not the real one: the signature, audience and issuer are checked.
        unchecked_times: Any = {"verify_iat": False, "verify_exp": False, "verify_nbf": False}
        claims = jwt.decode(
            token, self.public_key, algorithms=["PS256"], audience=IAM, issuer=SA_ID, options=unchecked_times
        )
        assert header["kid"] == KEY_ID and claims["exp"] - claims["iat"] <= 3600
        self.issued.append(f"t1.token-{len(self.issued) + 1}")
        expires = datetime.fromtimestamp(claims["iat"], UTC) + timedelta(hours=12)
        # RFC 3339 with nanoseconds, as the IAM API writes it.
        stamp = expires.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
        return httpx.Response(200, json={"iamToken": self.issued[-1], "expiresAt": stamp})


@pytest.fixture
def iam(private_key: rsa.RSAPrivateKey) -> Iterator[tuple[respx.MockRouter, FakeIam]]:
    fake = FakeIam(private_key.public_key())
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as router:
        router.post(IAM).mock(side_effect=fake)
        yield router, fake


async def test_a_token_is_exchanged_once_and_renewed_after_an_hour(
    iam: tuple[respx.MockRouter, FakeIam], key_file: Path
) -> None:
    _, fake = iam
    clock = [1_800_000_000.0]
    async with httpx.AsyncClient() as http:
        tokens = IamTokens(
            ServiceAccountKey.load(str(key_file)), "https://iam.api.cloud.yandex.net", http, now=lambda: clock[0]
        )
        assert await tokens.token() == await tokens.token() == "t1.token-1"
        clock[0] += 3599
        assert await tokens.token() == "t1.token-1"
        clock[0] += 2
        assert await tokens.token() == "t1.token-2"  # an hour old: renewed long before its 12 h end
        tokens.forget()
        assert await tokens.token() == "t1.token-3"
    assert fake.issued == ["t1.token-1", "t1.token-2", "t1.token-3"]


async def test_a_refused_key_waits_for_the_owner(iam: tuple[respx.MockRouter, FakeIam], key_file: Path) -> None:
    _, fake = iam
    fake.refuse = True
    async with httpx.AsyncClient() as http:
        tokens = IamTokens(ServiceAccountKey.load(str(key_file)), "https://iam.api.cloud.yandex.net", http)
        with pytest.raises(CredentialsRefused, match=KEY_ID):
            await tokens.token()


def test_a_file_that_is_not_an_authorized_key_is_refused_by_what_it_lacks(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text(json.dumps({"id": "x"}))
    with pytest.raises(CredentialsRefused, match="lacks service_account_id, private_key"):
        ServiceAccountKey.load(str(path))


async def test_speechkit_uses_and_refreshes_service_account_tokens(
    iam: tuple[respx.MockRouter, FakeIam], key_file: Path, s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    router, _ = iam
    start = router.post(f"{STT}/stt/v3/recognizeFileAsync").respond(200, json={"id": "op-1", "done": False})
    poll = router.get(f"{OPS}/operations/op-1")
    poll.side_effect = [
        httpx.Response(401, json={"code": 16, "message": "expired"}),
        httpx.Response(200, json={"id": "op-1", "done": False}),
    ]
    storage = s3.settings(bucket)
    provider = SpeechKitProvider(
        SpeechKitSettings(service_account_key=str(key_file)), storage, store=ObjectStore(storage, max_attempts=1)
    )
    audio = tmp_path / "a.ogg"
    audio.write_bytes(b"OggS" + b"\x01" * 300)

    async def remember(field: str, value: str) -> None:
        return None

    request = StartRequest(audio=audio, format="ogg_opus", duration_ms=1000, attempt_key="att1")
    await provider.start(request, remember)
    assert start.calls.last.request.headers["Authorization"] == "Bearer t1.token-1"
    assert "x-folder-id" not in start.calls.last.request.headers  # a service account's own folder
    with pytest.raises(CredentialsRefused) as refused:
        await provider.poll("op-1")
    assert "t1.token" not in str(refused.value)
    polled = await provider.poll("op-1")  # a fresh token after the refusal
    assert not polled.ready
    assert poll.calls.last.request.headers["Authorization"] == "Bearer t1.token-2"
    await provider.aclose()


def test_a_key_file_that_does_not_exist_is_refused_at_start(tmp_path: Path) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="service_account_key names no file"):
        SpeechKitSettings(service_account_key=str(tmp_path / "missing.json"), api_key=SecretStr("x"))
