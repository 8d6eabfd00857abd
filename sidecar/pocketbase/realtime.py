"""PocketBase realtime events as storage's change stream (best effort; the pool also polls).

SSE on ``GET /api/realtime``: the first message (``PB_CONNECT``) carries a
client id, which is then subscribed to ``audio_records`` changes. Any event
means "there may be work". Reconnects after a pause (on the client's clock)
when the stream breaks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx
from httpx_sse import aconnect_sse

if TYPE_CHECKING:
    from sidecar.pocketbase.client import PocketBaseClient

log = logging.getLogger("transcriber.realtime")


async def listen(client: PocketBaseClient, on_event: Callable[[], None], *, reconnect_after: float = 2.0) -> None:
    while True:
        try:
            await _session(client, on_event)
        except (httpx.HTTPError, OSError, KeyError, ValueError) as exc:
            log.debug("realtime stream ended: %s", type(exc).__name__)
        except Exception as exc:  # the storage client's own errors (PocketBase restarting)
            log.debug("realtime stream ended: %s", type(exc).__name__)
        await client.clock.sleep(reconnect_after)


async def _session(client: PocketBaseClient, on_event: Callable[[], None]) -> None:
    base = client.base_url.rstrip("/")
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None)) as http,
        aconnect_sse(http, "GET", f"{base}/api/realtime") as source,
    ):
        async for sse in source.aiter_sse():
            if sse.event == "PB_CONNECT":
                client_id = sse.json()["clientId"]
                await client.request(
                    "POST", "/api/realtime", json={"clientId": client_id, "subscriptions": ["audio_records/*"]}
                )
                on_event()  # a (re)connect may have missed events
                continue
            on_event()
