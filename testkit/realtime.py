"""PocketBase's realtime (SSE) as a client holds it: subscribed, its events in a queue."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

__all__ = ["Stream", "realtime"]


class Stream:
    """A realtime (SSE) connection as a client holds it: its id and the events that arrive."""

    def __init__(self, client_id: str, received: queue.Queue[tuple[str, dict[str, Any]]]) -> None:
        self.client_id = client_id
        self.received = received

    def drain(self, within: float) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        deadline = time.monotonic() + within
        while (left := deadline - time.monotonic()) > 0:
            try:
                out.append(self.received.get(timeout=left))
            except queue.Empty:
                break
        return out

    def wait_for(self, test: Any, within: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while (left := deadline - time.monotonic()) > 0:
            try:
                _, data = self.received.get(timeout=left)
            except queue.Empty:
                break
            if test(data):
                return data
        raise AssertionError("no such event arrived")


@contextmanager
def realtime(url: str, token: str | None, subscriptions: list[str]) -> Iterator[Stream]:
    """A realtime connection to the PocketBase at ``url``, subscribed with ``token`` (None: anonymous)."""
    received: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
    connected: queue.Queue[str] = queue.Queue()
    stop = threading.Event()

    def read() -> None:
        with (
            httpx.Client(base_url=url, timeout=httpx.Timeout(10, read=None)) as http,
            http.stream("GET", "/api/realtime") as resp,
        ):
            name = ""
            for line in resp.iter_lines():
                if stop.is_set():
                    return
                if line.startswith("event:"):
                    name = line[6:]
                elif line.startswith("data:"):
                    data = json.loads(line[5:])
                    if name == "PB_CONNECT":
                        connected.put(data["clientId"])
                    elif name != "PB_PING":
                        received.put((name, data))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    client_id = connected.get(timeout=10)
    headers = {"Authorization": token} if token else {}
    resp = httpx.post(
        f"{url}/api/realtime",
        json={"clientId": client_id, "subscriptions": subscriptions},
        headers=headers,
        timeout=10,
    )
    if resp.status_code != 204:
        stop.set()
        raise RuntimeError(f"the realtime subscription was refused: {resp.status_code} {resp.text}")
    try:
        yield Stream(client_id, received)
    finally:
        stop.set()
