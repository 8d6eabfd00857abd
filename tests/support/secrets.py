"""What is left of a secret in a text, read back every way a person or a program could (H1).

Written apart from ``sidecar.redaction``, and another way: the redaction searches each
reading of a text with automata and maps what it finds back; this decodes the whole text
with the standard library's decoders (``urllib.parse.unquote``, ``html.unescape``,
``base64``) and a plain JSON unescape, in every order, and looks for every 8-character run
of the secret in every result with ``in``. Slow, and meant to be checked by reading it.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from collections.abc import Callable, Iterable
from urllib.parse import unquote

# A run of this many characters of a secret gives it away; a shorter secret is looked for whole.
PIECE = 8
# What redaction writes in place of a secret: its letters are not the secret's, and it breaks a run.
MARKER = "[redacted]"
# The longest separator inside a split secret that a reader is expected to see through.
GAP = 6
# Escapes inside escapes are read to this depth (an escape of an escape of an escape) ...
DEPTH = 3
# ... and inside what a base64 text carries, to this one.
DEPTH_IN_BASE64 = 1

_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([/\"\\bfnrt]))")
_CONTROL = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def json_unescape(text: str) -> str:
    """The escapes of a JSON string read, one level: ``\\u002b``, ``\\/``, ``\\n``, ``\\\\``."""

    def one(m: re.Match[str]) -> str:
        if m[1]:
            return chr(int(m[1], 16))
        return _CONTROL.get(m[2], m[2])

    return _JSON_ESCAPE.sub(one, text)


UNESCAPES: tuple[Callable[[str], str], ...] = (unquote, json_unescape, html.unescape)


def unescaped(text: str, depth: int) -> set[str]:
    """The text, and every text the unescapes make of it, applied in any order up to ``depth`` times."""
    seen = {text}
    frontier = {text}
    for _ in range(depth):
        frontier = {undo(t) for t in frontier for undo in UNESCAPES} - seen
        seen |= frontier
    return seen


_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]+")


def base64_decoded(text: str) -> set[str]:
    """What every run of base64 characters decodes to, from each of its first 4 characters, as UTF-8.

    Line breaks are taken out first (base64 is often wrapped); padding ends a run. Standard and
    URL-safe alphabets alike; a run whose length leaves a lone character loses that character.
    """
    out: set[str] = set()
    for run in _BASE64_RUN.findall(re.sub(r"[\r\n]+", "", text)):
        standard = run.replace("-", "+").replace("_", "/")
        for offset in range(4):
            chunk = standard[offset:]
            chunk = chunk[: len(chunk) - (len(chunk) % 4 == 1)]
            if not chunk:
                continue
            try:
                data = base64.b64decode(chunk + "=" * (-len(chunk) % 4))
            except binascii.Error:
                continue
            out.add(data.decode("utf-8", errors="replace"))
    return out


_HEX_RUN = re.compile(r"[0-9A-Fa-f]+")


def hex_decoded(text: str) -> set[str]:
    """What every run of hex digits decodes to, from each of its first 2 digits, as UTF-8."""
    out: set[str] = set()
    for run in _HEX_RUN.findall(text):
        for offset in range(2):
            chunk = run[offset:]
            out.add(bytes.fromhex(chunk[: len(chunk) // 2 * 2]).decode("utf-8", errors="replace"))
    return out


def readings(text: str) -> set[str]:
    """Every decoding of ``text``: its escapes read, then base64 read in each, then the escapes in
    that; and hex read in each of its unescaped forms."""
    outer = unescaped(text, DEPTH)
    inner = {r for t in outer for b in base64_decoded(t) for r in unescaped(b, DEPTH_IN_BASE64)}
    return outer | inner | {h for t in outer for h in hex_decoded(t)}


def without_separators(text: str) -> str:
    """Letters and digits only: a run of up to ``GAP`` other characters is taken out, a longer one
    stays a break (a NUL)."""
    out: list[str] = []
    gap = 0
    for c in text:
        if c.isalnum():
            if gap > GAP and out:
                out.append("\x00")
            out.append(c)
            gap = 0
        else:
            gap += 1
    return "".join(out)


def runs_of(secret: str) -> tuple[set[str], set[str]]:
    """The runs a reader would recognize: every 8 characters of the secret in a row (the whole of a
    shorter one), lower-cased; and every 8 of its letters and digits in a row (seen through separators)."""
    low = secret.lower()
    if len(low) < PIECE:
        return {low}, set()
    letters = "".join(c for c in low if c.isalnum())
    return (
        {low[i : i + PIECE] for i in range(len(low) - PIECE + 1)},
        {letters[i : i + PIECE] for i in range(len(letters) - PIECE + 1)},
    )


def survivors(text: str, secret: str) -> set[str]:
    """Every run of ``secret`` still in ``text`` in any reading of it (case ignored)."""
    runs, letter_runs = runs_of(secret)
    # Split at the marker first: "…[redacted]0000000" is not "d0000000" of a secret.
    text = text.replace(MARKER, "\x00" * (GAP + 1))
    found: set[str] = set()
    for reading in readings(text):
        low = reading.lower()
        found |= {r for r in runs if r in low}
        bare = without_separators(low)
        found |= {r for r in letter_runs if r in bare}
    return found


def any_survivor(text: str, secrets: Iterable[str]) -> dict[str, set[str]]:
    """The runs of each secret left in ``text``: empty when none is."""
    return {s: left for s in secrets if (left := survivors(text, s))}
