"""The realtime stream's read timeout (O11): a stream that goes silent is dropped and reconnected."""

from __future__ import annotations

import anyio
import pytest
from anyio.abc import SocketStream

from sidecar.pocketbase import realtime
from sidecar.runtime.clock import SystemClock

pytestmark = pytest.mark.anyio

CONNECT = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\r\n"
    b'id:1\nevent:PB_CONNECT\ndata:{"clientId":"c1"}\n\n'
)


async def test_a_silent_stream_is_dropped_and_reconnected() -> None:
    connects = 0
    third = anyio.Event()
    subscribed: list[str] = []
    events = 0
    landed = anyio.Event()  # the third connect subscribed and told

    async def serve(stream: SocketStream) -> None:
        nonlocal connects
        async with stream:
            await stream.receive()  # the request
            connects += 1
            if connects == 3:
                third.set()
            await stream.send(CONNECT)
            if connects == 1:
                await stream.send(b"event:PB_PING\ndata:{}\n\n")  # a heartbeat is not news
            await anyio.sleep(30)  # then silence, never closing: a dead stream from the client's side

    def on_event() -> None:
        nonlocal events
        events += 1
        if events >= 3 and len(subscribed) >= 3:
            landed.set()

    async def subscribe(client_id: str) -> None:
        subscribed.append(client_id)
        if events >= 3 and len(subscribed) >= 3:
            landed.set()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        tg.start_soon(
            lambda: realtime.listen(
                f"http://127.0.0.1:{port}", subscribe, SystemClock(), on_event, reconnect_after=0.05, read_timeout=0.5
            )
        )
        with anyio.fail_after(10):
            await third.wait()
            await landed.wait()
        tg.cancel_scope.cancel()
    assert subscribed[:3] == ["c1", "c1", "c1"]
    assert events >= 3  # one per (re)connect, none for the heartbeat
    assert events == len(subscribed)
