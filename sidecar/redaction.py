"""Keeping secrets out of everything that leaves the sidecar (P17).

``redact`` is applied to every log line and to every text that leaves for
storage (halt reasons, journal rows): the secret values registered from the
settings, and the shapes secrets take in URLs and headers. A provider adds
its own keys with ``scrubber``; ``short`` bounds a provider's message for a
halt reason.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from urllib.parse import quote, quote_plus

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
        text = _without(text, secret)
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def scrubber(secrets: Iterable[str | None]) -> Scrub:
    """``redact`` plus this provider's own secret values, whether or not they were registered globally."""
    known = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def scrub(text: str) -> str:
        for secret in known:
            text = _without(text, secret)
        return redact(text)

    return scrub


def short(text: str) -> str:
    """A message bounded for a halt reason, secrets removed first (a cut must never split one past finding)."""
    text = " ".join(redact(text).split())
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


# A cut (a bounded message, a line break) can leave part of a key: this many of
# its characters, at its start or its end, are taken for it.
_PARTIAL = 8


def _without(text: str, secret: str) -> str:
    """``text`` with ``secret`` removed: whole, URL-encoded, broken by whitespace, or a cut-off start or end."""
    for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
        text = text.replace(form, "[redacted]")
    if len(secret) < 2 * _PARTIAL:
        return text
    text = _split_pattern(secret).sub("[redacted]", text)
    return _partials(text, secret)


@functools.lru_cache(maxsize=256)
def _split_pattern(secret: str) -> re.Pattern[str]:
    """The secret with whitespace (a line break, a wrapped column) anywhere inside it."""
    return re.compile(r"\s*".join(re.escape(c) for c in secret))


def _partials(text: str, secret: str) -> str:
    """Any run of at least ``_PARTIAL`` characters matching the secret's start, or its end."""
    head, tail = secret[:_PARTIAL], secret[-_PARTIAL:]
    start = text.find(head)
    while start != -1:
        n = _PARTIAL
        while start + n < len(text) and n < len(secret) and text[start + n] == secret[n]:
            n += 1
        text = text[:start] + "[redacted]" + text[start + n :]
        start = text.find(head, start + len("[redacted]"))
    # The end of a key whose start was cut off (the first characters of a window).
    start = text.find(tail)
    while start != -1:
        n = _PARTIAL
        while start - 1 >= 0 and n < len(secret) and text[start - 1] == secret[-n - 1]:
            start -= 1
            n += 1
        text = text[:start] + "[redacted]" + text[start + n :]
        start = text.find(tail, start + len("[redacted]"))
    return text
