"""Logging with secrets kept out (P17): every line passes through ``redaction.redact``.

Two formats (``[logs] format``): ``text`` for a terminal, one line a message;
``json`` for a log shipper, one object a line (python-json-logger) with the
time, the level, the message and, inside a step's run, the record, its stage,
the claim's short id and the provider (``log_context``); a run's last line
adds its outcome and duration.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from pythonjsonlogger.json import JsonFormatter

from sidecar.redaction import redact

LogFormat = Literal["text", "json"]

# What a line inside a step's run is about; set by the runner, read by every log call beneath it.
_context: ContextVar[dict[str, Any] | None] = ContextVar("transcriber_log_context", default=None)


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Every log line inside the block carries ``fields`` (as attributes; the JSON format shows them)."""
    token = _context.set({**(_context.get() or {}), **fields})
    try:
        yield
    finally:
        _context.reset(token)


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_context.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class RedactingJsonFormatter(JsonFormatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def configure(level: int = logging.INFO, fmt: LogFormat = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(
            RedactingJsonFormatter(
                "%(levelname)s %(name)s %(message)s",
                rename_fields={"levelname": "level", "name": "logger"},
                timestamp="time",  # ISO 8601, UTC
                json_ensure_ascii=False,
            )
        )
    else:
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(_ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Request lines of the HTTP client carry no secrets but drown everything else.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
