"""A real S3-compatible server for tests: moto's server on 127.0.0.1 and a free port.

Its state lives in this process and is shared by every server started here,
so each user takes a bucket of its own (``new_bucket``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from moto.server import ThreadedMotoServer
from pydantic import SecretStr

from sidecar.settings import ObjectStorageSettings
from testkit.pocketbase import free_port

ACCESS_KEY_ID = "AKIDTESTTRANSCRIBER"
SECRET_ACCESS_KEY = "s3-secret-Zq9vN2mK7pW4"
REGION = "ru-central1"


@dataclass
class S3Server:
    endpoint_url: str
    client: Any  # a boto3 S3 client for the tests' own checks

    def new_bucket(self) -> str:
        name = f"transcriber-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION})
        return name

    def settings(self, bucket: str, **changes: Any) -> ObjectStorageSettings:
        values: dict[str, Any] = {
            "endpoint_url": self.endpoint_url,
            "region": REGION,
            "bucket": bucket,
            "access_key_id": ACCESS_KEY_ID,
            "secret_access_key": SecretStr(SECRET_ACCESS_KEY),
        }
        return ObjectStorageSettings(**(values | changes))

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        page = self.client.list_objects_v2(Bucket=bucket, Prefix=prefix)
        return sorted(str(o["Key"]) for o in page.get("Contents", []))

    def read(self, bucket: str, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())


def connect(endpoint: str) -> S3Server:
    """A client of the S3 server at ``endpoint``."""
    client = boto3.session.Session(
        aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY, region_name=REGION
    ).client("s3", endpoint_url=endpoint, config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    return S3Server(endpoint, client)


@contextmanager
def running_s3(*, own_process: bool = False) -> Iterator[S3Server]:
    """moto's S3 server; in a process of its own when this one's memory is being measured."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc: subprocess.Popen[bytes] | None = None
    server: ThreadedMotoServer | None = None
    if own_process:
        moto = Path(sys.executable).with_name("moto_server")
        proc = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_listening(port, proc)
    else:
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
    s3 = connect(endpoint)
    try:
        yield s3
    finally:
        s3.client.close()
        if server is not None:
            server.stop()
        if proc is not None:
            proc.terminate()
            proc.wait(10)


def wait_listening(port: int, proc: subprocess.Popen[bytes], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on {port} within {within:g} s")
