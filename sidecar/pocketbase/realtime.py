"""PocketBase realtime events as storage's change stream (best effort; the pool also polls).

SSE on ``GET /api/realtime``: the first message (``PB_CONNECT``) carries a
client id, which is then subscribed to ``audio_records`` changes. Any event
but the heartbeat means "there may be work". The server sends a heartbeat
(``PB_PING``) every minute (pb_hooks/realtime.pb.js), so a stream silent for
longer than ``READ_TIMEOUT`` is dead (O11): it is dropped and, like a broken
one, reconnected after a pause on the client's clock.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import httpx
from httpx_sse import aconnect_sse

from sidecar.runtime.clock import Clock

log = logging.getLogger("transcriber.realtime")

# Two and a half heartbeats: a stream silent this long is dead.
READ_TIMEOUT = 150.0
HEARTBEAT = "PB_PING"

# Sends the subscription of a connected client id (through the signed-in client).
Subscribe = Callable[[str], Awaitable[None]]


async def listen(
    base_url: str,
    subscribe: Subscribe,
    clock: Clock,
    on_event: Callable[[], None],
    *,
    reconnect_after: float = 2.0,
    read_timeout: float = READ_TIMEOUT,
) -> None:
    while True:
        try:
            await _session(base_url, subscribe, on_event, read_timeout)
        except (httpx.HTTPError, OSError, KeyError, ValueError) as exc:
            log.debug("realtime stream ended: %s", type(exc).__name__)
        except Exception as exc:  # the storage client's own errors (PocketBase restarting)
            log.debug("realtime stream ended: %s", type(exc).__name__)
        await clock.sleep(reconnect_after)


async def _session(base_url: str, subscribe: Subscribe, on_event: Callable[[], None], read_timeout: float) -> None:
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=read_timeout)) as http,
        aconnect_sse(http, "GET", f"{base_url.rstrip('/')}/api/realtime") as source,
    ):
        async for sse in source.aiter_sse():
            if sse.event == "PB_CONNECT":
                await subscribe(sse.json()["clientId"])
                on_event()  # a (re)connect may have missed events
            elif sse.event != HEARTBEAT:
                on_event()
