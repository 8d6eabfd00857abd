"""Logging with secrets kept out (P17).

``redact`` is applied to every log line and to every text that leaves the
sidecar for storage (halt reasons, journal rows): known secret values from
the settings, and the shapes secrets take in URLs and headers.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable

_PATTERNS = [
    # Signed URLs: the signature and the credential scope.
    (re.compile(r"(?i)(X-Amz-(?:Signature|Credential|Security-Token)=)[^&\s\"']+"), r"\1[redacted]"),
    (
        re.compile(r"(?i)((?:Signature|AWSAccessKeyId|token|key|api_key|apikey|access_token)=)[^&\s\"']+"),
        r"\1[redacted]",
    ),
    # Authorization headers in any spelling.
    (re.compile(r"(?i)\b(Api-Key|Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 [redacted]"),
    (
        re.compile(
            r"(?i)(\"?(?:authorization|password|secret[_a-z]*|api[_-]?key|iam[_-]?token)\"?\s*[:=]\s*\"?)[^\"',\s}]+"
        ),
        r"\1[redacted]",
    ),
]

_secrets: set[str] = set()


def register_secrets(values: Iterable[str | None]) -> None:
    """Remembers secret values (keys, passwords) so they never leave in clear."""
    for v in values:
        if v and len(v) >= 4:
            _secrets.add(v)


def redact(text: str) -> str:
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def configure(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Request lines of the HTTP client carry no secrets but drown everything else.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
