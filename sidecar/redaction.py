"""Keeping secrets out of everything that leaves the sidecar (P17).

``redact`` is applied to every log line and to every text that leaves for
storage (halt reasons, journal rows): the secret values registered from the
settings, and the shapes secrets take in URLs and headers. A provider adds
its own keys with ``scrubber``; ``short`` bounds a provider's message for a
halt reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = ["Scrub", "redact", "register_secrets", "scrubber", "short"]

Scrub = Callable[[str], str]

# How much of a provider's message is kept in a halt reason.
_MESSAGE_CHARS = 500

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


def scrubber(secrets: Iterable[str | None]) -> Scrub:
    """``redact`` plus this provider's own secret values, whether or not they were registered globally."""
    known = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def scrub(text: str) -> str:
        for secret in known:
            text = text.replace(secret, "[redacted]")
        return redact(text)

    return scrub


def short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"
