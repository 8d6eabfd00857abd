"""What is left of a key in a text, read the ways a person could read it back (H1).

Written apart from ``sidecar.redaction`` on purpose: the tests judge the
redaction by this, not by its own decoding.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

PIECE = 8
# What redaction writes in place of a secret: its letters are not the key's, and it breaks a run.
MARKER = "[redacted]"
# The longest separator inside a split key that a reader is expected to see through.
GAP = 6

_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([/\"\\bfnrt]))")
_CONTROL = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def json_unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m[1]:
            return chr(int(m[1], 16))
        return _CONTROL.get(m[2], m[2])

    return _JSON_ESCAPE.sub(one, text)


def views(text: str) -> set[str]:
    """The text as it is, JSON-unescaped, percent-decoded once and twice."""
    return {text, json_unescape(text), unquote(text), unquote(unquote(text))}


def letters_and_digits(text: str) -> str:
    """ASCII letters and digits, lower-cased; a run of more than ``GAP`` other characters stays a break."""
    text = re.sub(rf"[^0-9A-Za-z]{{{GAP + 1},}}", "\x00", text)
    return re.sub(r"[^0-9a-z\x00]", "", text.lower())


def survivors(text: str, key: str) -> set[str]:
    """Every 8-character window of ``key`` still in ``text``, in any view: as is (case-folded), or as
    8 of its letters and digits in a row with short separators dropped."""
    folded = key.lower()
    windows = {folded[i : i + PIECE] for i in range(len(folded) - PIECE + 1)}
    bones = letters_and_digits(key)
    bone_windows = {bones[i : i + PIECE] for i in range(len(bones) - PIECE + 1)}
    found: set[str] = set()
    # Split at the marker first: "…[redacted]0000000" is not "d0000000" of a key.
    text = text.replace(MARKER, "\x00" * (GAP + 1))
    for view in views(text):
        lowered = view.lower()
        found |= {w for w in windows if w in lowered}
        skeleton = letters_and_digits(view)
        found |= {w for w in bone_windows if w in skeleton}
    return found
