"""One HTTP/1.1 request over a bare socket, its answer read while the body is still being sent.

A server that refuses a request early (a 20 MB field it will not read) answers
and closes; httpx sends the whole body before it reads, and meets the closed
connection instead of the answer. Browsers and curl read the early answer;
so does this.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Answer", "multipart", "post"]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def multipart(boundary: str, parts: list[tuple[str, str | None, bytes]]) -> bytes:
    """A multipart/form-data body of (name, filename or None, content) parts."""
    out = bytearray()
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out)


def post(url: str, path: str, body: bytes, headers: dict[str, str], *, timeout: float = 60.0) -> Answer:
    """POSTs ``body`` to ``url + path``; the answer as soon as it arrives, whatever was sent of the body."""
    where = urlsplit(url)
    sock = socket.create_connection((where.hostname or "127.0.0.1", where.port or 80), timeout=timeout)
    head = f"POST {path} HTTP/1.1\r\nHost: {where.netloc}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"

    def send() -> None:
        try:
            sock.sendall(head.encode() + body)
        except OSError:
            pass  # the server answered and closed before taking the rest

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    data = bytearray()
    try:
        while not _complete(data):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
        sender.join(timeout)
    return _parse(bytes(data))


def _complete(data: bytearray) -> bool:
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return False
    length = _parse(bytes(data[: end + 4])).headers.get("content-length")
    return length is not None and len(data) >= end + 4 + int(length)


def _parse(data: bytes) -> Answer:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0] else 0
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return Answer(status, headers, body)
