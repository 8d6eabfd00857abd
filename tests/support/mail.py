"""A real SMTP server on loopback (aiosmtpd) that keeps what PocketBase sends it, and the owner's mail
settings pointed at it: the password reset's mail, read as a sender reads it."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from testkit.pocketbase import PocketBaseServer, free_port
from tests.support.waiting import eventually_sync

__all__ = ["MailSink", "configure_mail", "link_in", "mail_sink"]


class MailSink:
    """aiosmtpd's handler: every message accepted and kept."""

    def __init__(self, port: int) -> None:
        self.host = "127.0.0.1"
        self.port = port
        self._messages: list[EmailMessage] = []
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        with self._lock:
            self._messages.append(message)
        return "250 Message accepted for delivery"

    def messages(self) -> list[EmailMessage]:
        with self._lock:
            return list(self._messages)

    def wait_for(self, to: str, subject: str, *, within: float = 20.0) -> EmailMessage:
        """The first message to ``to`` whose subject holds ``subject``."""

        def found() -> EmailMessage | None:
            for m in self.messages():
                if to in str(m["To"]) and subject in str(m["Subject"]):
                    return m
            return None

        message = eventually_sync(found, within=within, what=f"a mail to {to} about {subject!r}")
        assert message is not None
        return message


@contextmanager
def mail_sink() -> Iterator[MailSink]:
    from aiosmtpd.controller import Controller

    sink = MailSink(free_port())
    controller = Controller(sink, hostname=sink.host, port=sink.port)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()


def configure_mail(pb: PocketBaseServer, sink: MailSink) -> None:
    """What the owner sets in the panel (Settings → Application and Mail): the page's address, and SMTP."""
    su = pb.superuser()
    body = {
        "meta": {
            "appName": "transcriber",
            "appURL": pb.url,
            "senderName": "transcriber",
            "senderAddress": "pb@example.com",
        },
        "smtp": {"enabled": True, "host": sink.host, "port": sink.port, "tls": False, "username": "", "password": ""},
    }
    resp = su.http.patch("/api/settings", json=body)
    assert resp.status_code == 200, resp.text


def link_in(message: EmailMessage, starting: str) -> str:
    """The first link of the message's HTML body that starts with ``starting``."""
    part = message.get_body(preferencelist=("html",))
    assert part is not None, "a mail without an HTML body"
    content = part.get_content()
    for href in re.findall(r'href="([^"]+)"', content):
        link = html.unescape(href)
        if link.startswith(starting):
            return link
    raise AssertionError(f"no link starting {starting!r} in: {content}")
