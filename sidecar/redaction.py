"""Keeping secrets out of everything that leaves the sidecar (P17, H1).

What is removed
    Every secret registered from the settings (``register_secrets``) or handed
    to ``scrubber`` by a provider, before a text is stored, logged or cut:

    * a key or token (16 characters or more): any run of 8 or more of its
      characters (``PIECE``), wherever it stands in the text;
    * a password, and any secret shorter than 16 characters: the whole value.

    In every form a server echoes them in: as they are; in any case;
    JSON-escaped (``\\/``, ``\\u002b``, escaped twice); percent-encoded in
    either case, once or twice (``%2F``, ``%2f``, ``%252F``); as numeric HTML
    entities; and split by separators of up to ``MAX_GAP`` characters (``-``,
    a space, a line break, a quoted line's ``\\n> ``, ``", "``).

How
    The text is decoded (every escape becomes its character, remembering
    which characters of the text it came from), and the text and its decoded
    form are each searched twice, by one Aho-Corasick automaton each:

    * in the *skeleton*: the ASCII letters and digits, lower-cased, all else
      dropped (a run of more than ``MAX_GAP`` other characters stays a break).
      A key's letters and digits, 8 at a time, are looked for there: found, a
      key survives no separator, case or encoding.
    * in the text itself, lower-cased: the 8-character windows of a key that
      hold fewer than 8 letters and digits (``+/=_-.`` in them), and the
      whole short secrets.

    What matches is merged and the characters it came from are replaced by
    ``[redacted]`` (a whole escape for an escaped character, the separators
    inside a split key too). One pass costs the same whatever the number of
    secrets: about 0.1 s a megabyte on one core, less when the text holds no
    escapes (measured in ``tests/unit/test_redaction.py``).

False positives, and their bounds
    A piece of 8 characters of a random key (62 letters and digits) is one of
    2·10¹⁴; ordinary text meets one by chance about never. A password is
    different: an 8-letter piece of ``Summer2024Password!`` is the word
    "password", so passwords (``whole=True``) and short secrets are only
    removed whole. Runs of a key shorter than 8 characters are left: 7
    characters of a 40-character key do not give it away.

Provider results (``redact_result``, ``redact_transcript``) get the secrets
removed and nothing else: the shapes of ``_PATTERNS`` (``Basic …``,
``password=…``) are for messages and logs, not for what was said. In a JSON
result only the insides of strings are touched, so the result stays JSON.
``short`` bounds a provider's message for a halt reason, after redaction.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import ahocorasick
import numpy as np
import numpy.typing as npt

from sidecar.transcript.model import Segment, Transcript, Word

__all__ = [
    "MARKER",
    "MAX_GAP",
    "PIECE",
    "Scrub",
    "redact",
    "redact_result",
    "redact_transcript",
    "register_secrets",
    "scrubber",
    "short",
]

Scrub = Callable[[str], str]

MARKER = "[redacted]"
# A run of this many characters of a key is taken for the key.
PIECE = 8
# Secrets shorter than this are removed only whole (a password's pieces are words).
KEY_LENGTH = 16
# Shorter values are not worth the ordinary words they would remove.
MIN_SECRET = 4
# Separators of up to this many characters are seen through inside a split key.
MAX_GAP = 6
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

# A secret, and whether it is removed only whole.
_Secret = tuple[str, bool]

_lock = threading.Lock()
_registered: dict[str, bool] = {}
_known: frozenset[_Secret] = frozenset()


def register_secrets(values: Iterable[str | None], *, whole: bool = False) -> None:
    """Remembers secret values so they never leave in clear: keys and tokens, or passwords (``whole``)."""
    global _known
    with _lock:
        for v in values:
            if v and len(v) >= MIN_SECRET:
                only_whole = whole or len(v) < KEY_LENGTH
                _registered[v] = _registered.get(v, True) and only_whole
        _known = frozenset(_registered.items())


def redact(text: str) -> str:
    """``text`` without the registered secrets, nor the shapes secrets take in URLs and headers."""
    return _shapes(_Finder.of(_known).clean(text))


def scrubber(secrets: Iterable[str | None]) -> Scrub:
    """``redact`` plus this provider's own secret values, whether or not they were registered globally."""
    own = frozenset((s, len(s) < KEY_LENGTH) for s in secrets if s and len(s) >= MIN_SECRET)

    def scrub(text: str) -> str:
        return _shapes(_Finder.of(_known | own).clean(text))

    return scrub


def short(text: str, scrub: Scrub = redact) -> str:
    """A message bounded for a halt reason: redacted first, so that no cut can hide part of a secret."""
    text = scrub(" ".join(text.split()))
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


def redact_result(raw: bytes) -> bytes:
    """A provider's result as it is stored, without the registered secrets; JSON stays JSON."""
    finder = _Finder.of(_known)
    text = raw.decode("utf-8", errors="surrogateescape")
    spans = finder.spans(text)
    if not spans:
        return raw
    strings = _json_strings(text)
    if strings is not None:
        spans = _within(spans, strings)
    return _replace(text, spans).encode("utf-8", errors="surrogateescape")


def redact_transcript(t: Transcript) -> Transcript:
    """The transcript without the registered secrets: its text, its segments and their words.

    Segments and words are each searched as one text (joined by spaces), so a
    key spread over several words or segments is found; each word or segment
    holding part of it has that part replaced.
    """
    finder = _Finder.of(_known)
    if finder.empty:
        return t
    text = finder.clean(t.text)
    segment_texts = _pieces(finder, [s.text for s in t.segments])
    words = [w.word for s in t.segments for w in s.words or []]
    word_texts = _pieces(finder, words)
    if text == t.text and segment_texts == [s.text for s in t.segments] and word_texts == words:
        return t
    left = iter(word_texts)
    segments: list[Segment] = []
    for s, seg_text in zip(t.segments, segment_texts, strict=True):
        new_words: list[Word] | None = None
        if s.words is not None:
            new_words = [w.model_copy(update={"word": next(left)}) for w in s.words]
        segments.append(s.model_copy(update={"text": seg_text, "words": new_words}))
    return t.model_copy(update={"text": text, "segments": segments})


# --- finding ------------------------------------------------------------------------


class _Finder:
    """The registered secrets, ready to be found in any text."""

    def __init__(self, secrets: frozenset[_Secret]) -> None:
        skeleton: set[str] = set()  # looked for in the skeleton
        plain: set[str] = set()  # looked for in the (lower-cased) text
        for value, whole in secrets:
            folded = _fold(value)
            bones = _bones(value)
            if whole:
                plain.add(folded)
                if value.isascii() and len(bones) >= PIECE:
                    skeleton.add(bones)
                continue
            if value.isascii():
                skeleton.update(bones[i : i + PIECE] for i in range(len(bones) - PIECE + 1))
            for i in range(len(folded) - PIECE + 1):
                window = folded[i : i + PIECE]
                if not value.isascii() or len(_bones(window)) < PIECE:
                    plain.add(window)
        self._skeleton = _automaton(skeleton)
        self._plain = _automaton(plain)
        self.empty = self._skeleton is None and self._plain is None

    @staticmethod
    def of(secrets: frozenset[_Secret]) -> _Finder:
        return _finder(secrets)

    def clean(self, text: str) -> str:
        if self.empty:
            return text
        spans = self.spans(text)
        return _replace(text, spans) if spans else text

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets are in ``text``: sorted, disjoint ``[start, end)`` ranges of its characters."""
        if self.empty or not text:
            return []
        found: list[tuple[int, int]] = []
        for decoded, layers in _readings(text):
            for lo, hi in self._find(decoded):
                for layer in reversed(layers):
                    lo, hi = layer.source(lo, hi)
                found.append((lo, hi))
        return _merge(found)

    def _find(self, text: str) -> list[tuple[int, int]]:
        """Matches in one reading of the text, as ranges of that reading."""
        found: list[tuple[int, int]] = []
        if self._plain is not None:
            found += _merge([(end - n + 1, end + 1) for end, n in self._plain.iter(_fold(text))])
        if self._skeleton is not None:
            bones, where = _skeleton(text)
            if bones:
                for a, b in _merge([(end - n + 1, end + 1) for end, n in self._skeleton.iter(bones)]):
                    found.append((int(where[a]), int(where[b - 1]) + 1))
        return found


@functools.lru_cache(maxsize=32)
def _finder(secrets: frozenset[_Secret]) -> _Finder:
    return _Finder(secrets)


def _automaton(words: set[str]) -> Any:
    if not words:
        return None
    a = ahocorasick.Automaton()
    for w in words:
        a.add_word(w, len(w))
    a.make_automaton()
    return a


def _fold(s: str) -> str:
    """Lower case, one character for one (``str.lower`` turns only U+0130 into two)."""
    folded = s.lower()
    return folded if len(folded) == len(s) else s.replace("\u0130", "i").lower()


def _bones(s: str) -> str:
    """A secret's skeleton: its ASCII letters and digits, lower-cased."""
    return "".join(c for c in s.lower() if c.isascii() and c.isalnum())


_ALNUM = np.zeros(129, dtype=bool)
for _c in "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
    _ALNUM[ord(_c)] = True
_LOWER = np.arange(256, dtype=np.uint8)
_LOWER[ord("A") : ord("Z") + 1] += 32


def _skeleton(text: str) -> tuple[str, npt.NDArray[np.int64]]:
    """The text's ASCII letters and digits, lower-cased, and where each stands in the text.

    A run of more than ``MAX_GAP`` other characters becomes a NUL, which no
    secret holds: a key is never assembled from letters far apart.
    """
    codes = np.frombuffer(text.encode("utf-32-le", errors="surrogatepass"), dtype=np.uint32)
    where = np.flatnonzero(_ALNUM[np.minimum(codes, 128)]).astype(np.int64)
    if where.size == 0:
        return "", where
    chars = _LOWER[codes[where].astype(np.uint8)]
    breaks = np.flatnonzero(np.diff(where) > MAX_GAP + 1) + 1
    if breaks.size:
        chars = np.insert(chars, breaks, 0)
        where = np.insert(where, breaks, -1)
    return chars.tobytes().decode("ascii"), where


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping and touching ranges as one."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def _replace(text: str, spans: Sequence[tuple[int, int]]) -> str:
    out: list[str] = []
    last = 0
    for lo, hi in spans:
        out.append(text[last:lo])
        out.append(MARKER)
        last = hi
    out.append(text[last:])
    return "".join(out)


def _shapes(text: str) -> str:
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


# --- decoding -----------------------------------------------------------------------

# The escapes a server may put a key's characters in. Only those of ASCII
# characters are decoded: a key is ASCII, and the escapes of other characters
# (a Cyrillic transcript as \u0431…) then cost nothing.
_ESCAPE = re.compile(
    r"\\+(?:u00([0-7][0-9A-Fa-f])|([^u]))"  # JSON: \u002b, \/, \n (escaped twice too: \\u002b)
    r"|%(?:25)*([0-7][0-9A-Fa-f])"  # percent-encoding, once or more: %2F, %2f, %252F
    r"|&#(?:[xX]0*([0-7]?[0-9A-Fa-f])|0*(\d{1,3}));"  # numeric HTML entities: &#43; &#x2B;
)
_MAY_ESCAPE = re.compile(r"[\\%&]")
_CONTROL = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# Escapes inside escapes (\u0025 + 2F) take another round; more is not a server's doing.
_ROUNDS = 3


@dataclass(frozen=True)
class _Layer:
    """Where the characters of a decoded text came from in the text it was decoded from.

    ``at[i]`` is the position in the decoded text of the i-th escape, which
    spanned ``froms[i]:tos[i]`` of the source; every other character is one
    character of the source.
    """

    at: list[int]
    froms: list[int]
    tos: list[int]

    def source(self, lo: int, hi: int) -> tuple[int, int]:
        """The source range the decoded characters ``[lo, hi)`` came from."""
        return self._start(lo), self._end(hi - 1)

    def _start(self, d: int) -> int:
        i = bisect.bisect_right(self.at, d) - 1
        if i < 0:
            return d
        if self.at[i] == d:
            return self.froms[i]
        return self.tos[i] + d - self.at[i] - 1

    def _end(self, d: int) -> int:
        i = bisect.bisect_right(self.at, d) - 1
        if i >= 0 and self.at[i] == d:
            return self.tos[i]
        return self._start(d) + 1


def _readings(text: str) -> list[tuple[str, list[_Layer]]]:
    """The text as it is, and decoded once and again while escapes remain, each with its way back."""
    readings: list[tuple[str, list[_Layer]]] = [(text, [])]
    layers: list[_Layer] = []
    for _ in range(_ROUNDS):
        if not _MAY_ESCAPE.search(text):
            break
        decoded = _decode(text)
        if decoded is None:
            break
        text, layer = decoded
        layers = [*layers, layer]
        readings.append((text, layers))
    return readings


def _decode(text: str) -> tuple[str, _Layer] | None:
    pieces: list[str] = []
    at: list[int] = []
    froms: list[int] = []
    tos: list[int] = []
    last = length = 0
    for m in _ESCAPE.finditer(text):
        plain = text[last : m.start()]
        pieces.append(plain)
        length += len(plain)
        at.append(length)
        froms.append(m.start())
        tos.append(m.end())
        pieces.append(_character(m))
        length += 1
        last = m.end()
    if not at:
        return None
    pieces.append(text[last:])
    return "".join(pieces), _Layer(at, froms, tos)


def _character(m: re.Match[str]) -> str:
    json_hex, json_char, percent, entity_hex, entity = m.groups()
    if json_char is not None:
        return _CONTROL.get(json_char, json_char)
    if entity is not None:
        return chr(int(entity))
    return chr(int(json_hex or percent or entity_hex, 16))


# --- results ------------------------------------------------------------------------

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _json_strings(text: str) -> list[tuple[int, int]] | None:
    """The insides of the string literals of a JSON text (or of JSON lines); None if it is neither."""
    try:
        json.loads(text)
    except ValueError:
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            for line in lines:
                json.loads(line)
        except ValueError:
            return None
        if not lines:
            return None
    return [(m.start() + 1, m.end() - 1) for m in _STRING.finditer(text)]


def _within(spans: list[tuple[int, int]], strings: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``spans`` inside strings: a number or the structure around strings is never replaced."""
    starts = [s for s, _ in strings]
    kept: list[tuple[int, int]] = []
    for lo, hi in spans:
        i = max(bisect.bisect_right(starts, lo) - 1, 0)
        while i < len(strings) and strings[i][0] < hi:
            s, e = strings[i]
            if max(lo, s) < min(hi, e):
                kept.append((max(lo, s), min(hi, e)))
            i += 1
    return kept


def _pieces(finder: _Finder, pieces: list[str]) -> list[str]:
    """Each piece with what the secrets found across all of them (joined by spaces) cover replaced."""
    joined = " ".join(pieces)
    spans = finder.spans(joined)
    if not spans:
        return pieces
    out: list[str] = []
    start = 0
    for piece in pieces:
        end = start + len(piece)
        inside = [(max(lo, start) - start, min(hi, end) - start) for lo, hi in spans if lo < end and hi > start]
        out.append(_replace(piece, inside) if inside else piece)
        start = end + 1
    return out
