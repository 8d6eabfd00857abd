"""Keeping secrets out of everything that leaves the sidecar (P17, H1).

What is removed
    Every secret registered from the settings (``register_secrets``,
    ``register_passwords``) or handed to ``scrubber`` by a provider — keys,
    tokens and passwords alike, each where it can be (below) — before a text is
    stored, logged or cut:

    * any run of 8 or more of its characters (``PIECE``), wherever it stands in
      the text;
    * a secret shorter than 8 characters: the whole value (one shorter than
      ``MIN_SECRET`` is not worth the ordinary words it would remove).

    In every shape a server or a client puts them in: as they are; in any case;
    JSON-escaped (``\\/``, ``\\u002b``, ``\\u043f``, escaped twice);
    percent-encoded in either case, once or twice, UTF-8 included (``%2F``,
    ``%2f``, ``%252F``, ``%D0%BF``); as HTML character references, numeric or
    named (``&#43;``, ``&#x2B;``, ``&plus;``, ``&amp;``); split by separators of
    up to ``MAX_GAP`` characters (``-``, a space, a line break, a quoted line's
    ``\\n> ``, ``", "``); and in base64, standard or URL-safe, padded or not,
    at any alignment inside a longer base64 text, line-wrapped or not
    (``Basic base64(user:password)``, a JSON document carrying a base64
    configuration that holds the key), the escapes above inside the decoded
    bytes included; and in hex (its bytes as pairs of hex digits, either case,
    at either alignment inside a longer run of them).

How
    The text is read several ways, each reading remembering which characters
    of the text each of its characters came from:

    * the text itself;
    * decoded a level a round (every escape of the kinds above becomes its
      character), while escapes remain, up to ``_ROUNDS`` rounds: only the
      parts around the escapes are read again (``_AROUND``), the rest was
      read already. Where escapes of different kinds meet (a stray ``%``
      before a JSON-escaped key), that part is also decoded one kind a pass,
      in every order (``_orders``): decoding them together may read a
      character that one of the orders does not;
    * each of those read as base64 (``_base64``): its runs of base64
      characters, line breaks seen through, decoded from each of the 4
      offsets at once (one of them is the run's alignment, whatever text
      stands before it); the bytes read one character a byte while every
      secret's letters are ASCII, else as UTF-8; and where they are text
      with an escape in it, that decoded once more;
    * each of those read as hex (``_hex``): its runs of hex digits decoded
      from both offsets, read as base64's bytes are.

    Each reading is searched twice, by one Aho-Corasick automaton each:

    * in its *skeleton*: its letters and digits, lower-cased, all else dropped
      (a run of more than ``MAX_GAP`` other characters stays a break). A
      secret's letters and digits, 8 at a time, are looked for there: found,
      a secret survives no separator, case or encoding.
    * in the reading itself, lower-cased: the 8-character windows of a secret
      that hold other characters too (``+/=_-.``, spaces), and the whole
      short secrets.

    What matches is merged and the characters it came from are replaced by
    ``[redacted]`` (a whole escape for an escaped character, the separators
    inside a split secret too, every base64 character that holds a bit of
    it). One pass costs the same whatever the number of secrets: about 0.1 s
    a megabyte of transcript or JSON on one core, about 0.2 s for a text made
    of escapes, 0.5 s for base64 (measured in ``tests/unit/test_redaction.py``).

    While every secret's letters are ASCII, letters of other scripts count as
    separators in the skeleton (a smaller skeleton is searched); a secret
    with other letters (a Cyrillic password) makes every letter of the Basic
    Multilingual Plane count.

False positives, and their bounds
    A piece of 8 characters of a random key (62 letters and digits) is one of
    2·10¹⁴; ordinary text meets one by chance about never, nor do random
    bytes that some text decodes to as base64. A password made of words is
    different: every 8-character run of ``Summer2024Password!`` goes,
    ``password`` among them, so that word is removed from every text — the
    price of removing every run of a password, one more reason to choose it
    random. Runs of a secret shorter than 8 characters are left: 7
    characters of a 40-character key do not give it away. A whole short
    secret (4 to 7 characters) is one of about 2·10⁹ byte strings: base64
    text of a few megabytes may decode to one by chance.

Keys and passwords
    Keys, tokens and access keys (``register_secrets``) are sent to providers and stores, so they
    can come back in anything those answer: they are removed from every text. Passwords
    (``register_passwords``: the superuser's, the service account's) are sent to nobody but
    PocketBase: they are removed from messages and logs (``redact``) and never looked for in
    what people said or wrote (``redact_said``, ``redact_transcript``, ``redact_result``): a
    transcript cut where it says words of the owner's password would be a way to guess it,
    outside every limit on signing in, and would cut ordinary words from people's speech.

Provider results (``redact_result``, ``redact_transcript``) get the secrets
removed and nothing else: the shapes of ``_PATTERNS`` (``Basic …``,
``password=…``) are for messages and logs, not for what was said. In a JSON
result only the insides of strings are touched, so the result stays JSON.
``short`` bounds a provider's message for a halt reason, after redaction.
"""

from __future__ import annotations

import bisect
import functools
import html
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from html.entities import html5
from typing import Any, Protocol

import ahocorasick
import numpy as np
import numpy.typing as npt

from sidecar.transcript.model import Segment, Transcript, Word

__all__ = [
    "MARKER",
    "MAX_GAP",
    "MIN_SECRET",
    "PIECE",
    "Scrub",
    "redact",
    "redact_result",
    "redact_said",
    "redact_transcript",
    "register_passwords",
    "register_secrets",
    "scrubber",
    "short",
]

Scrub = Callable[[str], str]

MARKER = "[redacted]"
# A run of this many characters of a secret is taken for the secret; a shorter secret is removed whole.
PIECE = 8
# Shorter values are not worth the ordinary words they would remove.
MIN_SECRET = 4
# Separators of up to this many characters are seen through inside a split secret.
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

_lock = threading.Lock()
_known: frozenset[str] = frozenset()  # keys and tokens: removed from every text
_passwords: frozenset[str] = frozenset()  # removed from messages and logs only


def register_secrets(values: Iterable[str | None]) -> None:
    """Remembers keys and tokens so that no run of 8 of their characters leaves in clear, anywhere."""
    global _known
    with _lock:
        _known = _known | {v for v in values if v and len(v) >= MIN_SECRET}


def register_passwords(values: Iterable[str | None]) -> None:
    """Remembers passwords: removed from messages and logs (``redact``), never from what people said."""
    global _passwords
    with _lock:
        _passwords = _passwords | {v for v in values if v and len(v) >= MIN_SECRET}


def redact(text: str) -> str:
    """A message or a log line without the registered secrets, passwords included, nor the shapes
    secrets take in URLs and headers. Not for what people said or wrote: ``redact_said``."""
    return _shapes(_Finder.of(_known | _passwords).clean(text))


def redact_said(text: str) -> str:
    """What people said or wrote (a transcript's text, a brief of it) without the registered keys;
    passwords are not looked for (an oracle for them), nor the shapes of ``redact``."""
    return _Finder.of(_known).clean(text)


def scrubber(secrets: Iterable[str | None]) -> Scrub:
    """A provider's messages without the registered keys and this provider's own, whether or not they
    were registered globally. Its messages may quote what was said: passwords are not looked for."""
    own = frozenset(s for s in secrets if s and len(s) >= MIN_SECRET)

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
    secret spread over several words or segments is found; each word or segment
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

# What counts as a letter or a digit in a skeleton, by code point (the last entry: every
# code point past the table). ASCII only while every secret's letters are ASCII; else
# every letter and digit of the Basic Multilingual Plane.
_ASCII_ALNUM = np.zeros(129, dtype=bool)
for _c in "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
    _ASCII_ALNUM[ord(_c)] = True


@functools.cache
def _any_alnum() -> npt.NDArray[np.bool_]:
    table = np.array([chr(i).isalnum() for i in range(0x10000)] + [False], dtype=bool)
    return table


def _is_alnum(c: str, table: npt.NDArray[np.bool_]) -> bool:
    return bool(table[min(ord(c), len(table) - 1)])


class _Finder:
    """The secrets, ready to be found in any text."""

    def __init__(self, secrets: frozenset[str]) -> None:
        wide = any(not c.isascii() and c.isalnum() for s in secrets for c in _fold(s))
        self._alnum = _any_alnum() if wide else _ASCII_ALNUM
        skeleton: set[str] = set()  # looked for in the skeleton
        plain: set[str] = set()  # looked for in the (lower-cased) text
        for value in secrets:
            folded = _fold(value)
            if len(folded) < PIECE:
                plain.add(folded)
                continue
            bones = "".join(c for c in folded if _is_alnum(c, self._alnum))
            skeleton.update(bones[i : i + PIECE] for i in range(len(bones) - PIECE + 1))
            for i in range(len(folded) - PIECE + 1):
                window = folded[i : i + PIECE]
                if not all(_is_alnum(c, self._alnum) for c in window):
                    plain.add(window)
        self._skeleton = _automaton(skeleton)
        self._plain = _automaton(plain)
        # Bytes read from base64, one character a byte (while every secret's letters are ASCII):
        # the windows' UTF-8 bytes (a '€' of a key is 3 of them).
        self.wide = wide
        self._plain_bytes = (
            None if wide else _automaton({w.encode("utf-8", "surrogatepass").decode("latin-1") for w in plain})
        )
        self.empty = self._skeleton is None and self._plain is None
        # The fewest base64 characters that can hold the shortest thing looked for.
        fewest = min((len(w.encode("utf-8", "surrogatepass")) for w in skeleton | plain), default=PIECE)
        self._base64_run = -(-4 * fewest // 3)
        self._hex_run = 2 * fewest

    @staticmethod
    def of(secrets: frozenset[str]) -> _Finder:
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
        for reading, layers, octets in _readings(text, self._base64_run, self._hex_run, self.wide):
            for lo, hi in self._find(reading) if octets is None else self._find_bytes(reading, octets):
                for layer in reversed(layers):
                    lo, hi = layer.source(lo, hi)
                found.append((lo, hi))
        return _merge(found)

    def _find(self, text: str) -> list[tuple[int, int]]:
        """Matches in one reading of the text, as ranges of that reading."""
        found: list[tuple[int, int]] = []
        folded = _fold(text)
        if self._plain is not None:
            found += _merge([(end - n + 1, end + 1) for end, n in self._plain.iter(folded)])
        if self._skeleton is not None:
            bones, where = _skeleton(_codes(folded), self._alnum)
            if bones:
                for a, b in _merge([(end - n + 1, end + 1) for end, n in self._skeleton.iter(bones)]):
                    found.append((int(where[a]), int(where[b - 1]) + 1))
        return found

    def _find_bytes(self, data: str, octets: npt.NDArray[np.uint8]) -> list[tuple[int, int]]:
        """Matches in bytes read one character a byte (``data``: their ASCII letters lower-cased
        already), as ranges of them. A skeleton's gaps are counted in characters of the UTF-8
        text the bytes may be (a continuation byte adds none), as in a text."""
        found: list[tuple[int, int]] = []
        if self._plain_bytes is not None:
            found += _merge([(end - n + 1, end + 1) for end, n in self._plain_bytes.iter(data)])
        if self._skeleton is not None:
            units = np.cumsum((octets & 0xC0) != 0x80)
            bones, where = _skeleton(octets, _ASCII_ALNUM, units)
            if bones:
                for a, b in _merge([(end - n + 1, end + 1) for end, n in self._skeleton.iter(bones)]):
                    found.append((int(where[a]), int(where[b - 1]) + 1))
        return found


@functools.lru_cache(maxsize=32)
def _finder(secrets: frozenset[str]) -> _Finder:
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


def _codes(text: str) -> npt.NDArray[np.uint32]:
    return np.frombuffer(text.encode("utf-32-le", errors="surrogatepass"), dtype=np.uint32)


def _skeleton(
    codes: npt.NDArray[np.uint32] | npt.NDArray[np.uint8],
    alnum: npt.NDArray[np.bool_],
    units: npt.NDArray[np.int64] | None = None,
) -> tuple[str, npt.NDArray[np.int64]]:
    """The letters and digits of a lower-cased text (its code points), and where each stands in it.

    A run of more than ``MAX_GAP`` other characters becomes a NUL, which no
    secret holds: a secret is never assembled from letters far apart. The gaps
    are counted in ``units`` (each position's character, when positions are bytes).
    """
    where = np.flatnonzero(alnum[np.minimum(codes, len(alnum) - 1)]).astype(np.int64)
    if where.size == 0:
        return "", where
    chars: npt.NDArray[Any] = codes[where]
    breaks = np.flatnonzero(np.diff(where if units is None else units[where]) > MAX_GAP + 1) + 1
    if breaks.size:
        chars = np.insert(chars, breaks, 0)
        where = np.insert(where, breaks, -1)
    if len(alnum) <= 129:  # ASCII letters and digits only: one byte each
        return chars.astype(np.uint8).tobytes().decode("ascii"), where
    return chars.astype("<u4").tobytes().decode("utf-32-le"), where


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


# --- readings -----------------------------------------------------------------------


class _Layer(Protocol):
    def source(self, lo: int, hi: int) -> tuple[int, int]:
        """The range of the text this reading was made from that its characters ``[lo, hi)`` came from."""
        ...


@dataclass(frozen=True)
class _Shift:
    """A part of a text, from ``start``."""

    start: int

    def source(self, lo: int, hi: int) -> tuple[int, int]:
        return lo + self.start, hi + self.start


def _back(layers: Sequence[_Layer], lo: int, hi: int) -> tuple[int, int]:
    for layer in reversed(layers):
        lo, hi = layer.source(lo, hi)
    return lo, hi


# Escapes inside escapes (\u0025 + 2F) take another round; more is not a server's doing.
_ROUNDS = 3
# A decoded text differs from the text it was decoded from only where its escapes were: this
# much around them is read again (a match of 8 letters with separators between them, each
# character escaped, fits), the rest was read already.
_AROUND = 640


def _readings(
    text: str, base64_run: int, hex_run: int, wide: bool
) -> Iterator[tuple[str, list[_Layer], npt.NDArray[np.uint8] | None]]:
    """Every reading of ``text`` (or of a part of it), each with the layers that lead back to it
    (outermost first) and, for bytes read from base64 or hex one character a byte, the bytes."""
    for reading, layers in _decodings(text, _ROUNDS):
        yield reading, layers, None
        for decoded, hex_layer, octets in _hex(reading, hex_run, wide):
            yield decoded, [*layers, hex_layer], octets
        for decoded, layer, codes, octets in _base64(reading, base64_run, wide):
            yield decoded, [*layers, layer], octets
            # What a base64 text carries may be escaped in turn (a JSON configuration): one
            # level, read where it decodes to text (random bytes decode to no long text).
            for lo, hi in _texts(codes, ascii_only=not wide):
                part = decoded[lo:hi]
                to_part: list[_Layer] = [_Shift(lo)]
                if octets is not None:  # one character a byte: the text is read as UTF-8 again
                    part, _, first_byte, byte_len = _utf8(octets[lo:hi])
                    to_part.append(_Bytes(first_byte, byte_len))
                for inner, inner_layers in _decodings(part, 1):
                    if inner_layers:
                        yield inner, [*layers, layer, *to_part, *inner_layers], None


def _decodings(text: str, rounds: int) -> Iterator[tuple[str, list[_Layer]]]:
    """The text as it is, then decoded a level a round while escapes remain (the parts of it that
    changed); and where escapes of different kinds meet, those parts decoded in every order, one
    kind a pass.

    A level a round, every kind together, reads a text escaped in layers back whatever the
    layers' order, so long as escapes of one kind stand apart from those of another. Where they
    meet (a stray ``%`` before a JSON-escaped key that begins with hex digits: ``%2024\u0437``),
    decoding them together may read a character that one of the orders does not (``%20``):
    there, every order is read too.
    """
    yield text, []
    meetings = [(lo, hi) for lo, hi in _meetings(text)]
    parts: list[tuple[str, list[_Layer]]] = [(text, [])]
    for _ in range(rounds):
        changed: list[tuple[str, list[_Layer]]] = []
        for part, layers in parts:
            decoded = _decode(part, _ANY_ESCAPE) if _may_escape(part) else None
            if decoded is None:
                continue
            reading, escapes = decoded
            for lo, hi in _around(escapes.starts, escapes.ends, len(reading)):
                piece_layers: list[_Layer] = [*layers, escapes, _Shift(lo)]
                piece = reading[lo:hi]
                changed.append((piece, piece_layers))
                meetings += [_back(piece_layers, m_lo, m_hi) for m_lo, m_hi in _meetings(piece)]
                yield piece, piece_layers
        parts = changed
    if meetings:
        starts = np.array(sorted(m[0] for m in meetings), dtype=np.int64)
        for lo, hi in _around(starts, starts + 1, len(text)):
            for part, part_layers in _orders(text[lo:hi], rounds):
                yield part, [_Shift(lo), *part_layers]


def _orders(text: str, rounds: int) -> Iterator[tuple[str, list[_Layer]]]:
    """``text`` decoded one kind of escape a pass, in every order, up to ``rounds`` passes (each
    distinct reading once; the text itself not)."""
    seen = {text}
    frontier: list[tuple[str, list[_Layer]]] = [(text, [])]
    for _ in range(rounds):
        found: list[tuple[str, list[_Layer]]] = []
        for reading, layers in frontier:
            for kind in _KINDS:
                decoded = _decode(reading, kind)
                if decoded is None or decoded[0] in seen:
                    continue
                seen.add(decoded[0])
                found.append((decoded[0], [*layers, decoded[1]]))
                yield found[-1]
        frontier = found


def _around(starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], length: int) -> list[tuple[int, int]]:
    """The ranges ``[start, end)`` (sorted), each widened by ``_AROUND`` and those that meet joined."""
    lo = np.maximum(starts - _AROUND, 0)
    hi = np.minimum(np.maximum.accumulate(ends) + _AROUND, length)
    new = np.flatnonzero(lo[1:] > hi[:-1]) + 1
    firsts = np.concatenate(([0], new))
    lasts = np.concatenate((new - 1, [lo.size - 1]))
    return list(zip(lo[firsts].tolist(), hi[lasts].tolist(), strict=True))


# --- escapes ------------------------------------------------------------------------

# One escape: one character (a named reference may stand for two, and a name that is
# none stays as it is), one level of escaping a pass. Percent-encoded UTF-8 is one escape
# per character, so that a match maps back to the escapes of its own characters. An
# escape whose end may itself be escaped (``&#43`` before ``\u003b``) waits for the next
# round, where it is read whole.
_CONT = r"%[89abAB][0-9a-fA-F]"
_NOT_ESCAPED = r"(?![\\%&])"
_LEGACY = "|".join(sorted((n for n in html5 if not n.endswith(";")), key=lambda n: (-len(n), n)))
_JSON = (
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a surrogate pair
    r"|\\u[0-9a-fA-F]{4}|\\[\"\\/bfnrt]"  # \u002b, \/, \n (escaped twice: \\u002b, a level a pass)
)
_PERCENT = (
    r"%(?:[0-7][0-9a-fA-F]"  # %2F, %2f (twice: %252F, a level a pass); UTF-8: %D0%BF
    r"|[cdCD][0-9a-fA-F]" + _CONT + r"|[eE][0-9a-fA-F](?:" + _CONT + r"){2}|[fF][0-7](?:" + _CONT + r"){3})"
)
_HTML = (
    r"&#[0-9]+(?:;|(?![0-9;])" + _NOT_ESCAPED + r")"  # &#43; &#x2B; &plus; and, as HTML reads them, &#43 &amp
    r"|&#[xX][0-9a-fA-F]+(?:;|(?![0-9a-fA-F;])" + _NOT_ESCAPED + r")"
    r"|&[A-Za-z][A-Za-z0-9]{0,31};"
    r"|&(?:" + _LEGACY + r")" + _NOT_ESCAPED
)
# Each pattern is one group: ``split`` keeps the escapes between the plain runs.
_ANY_ESCAPE = re.compile(f"({_JSON}|{_PERCENT}|{_HTML})")
_KINDS = tuple(re.compile(f"({kind})") for kind in (_JSON, _PERCENT, _HTML))


def _may_escape(text: str) -> bool:
    """Whether ``text`` holds a character an escape begins with (``str.find`` is faster than a regex)."""
    return "\\" in text or "%" in text or "&" in text


_CONTROL = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# Escapes of different kinds this close may read differently in another order (a match of
# 8 characters with separators between them spans this much).
_MEETING = 64


def _meetings(text: str) -> list[tuple[int, int]]:
    """Where escapes of different kinds meet in ``text``: each first character of such a pair."""
    if not _may_escape(text):
        return []
    codes = _codes(text)
    present = [p for p in (np.flatnonzero(codes == ord(c)) for c in "\\%&") if p.size]
    out: list[tuple[int, int]] = []
    for i, mine in enumerate(present):
        for theirs in present[i + 1 :]:
            after = np.searchsorted(theirs, mine)
            near = np.zeros(mine.size, dtype=bool)
            ok = after < theirs.size
            near[ok] |= theirs[after[ok]] - mine[ok] <= _MEETING
            ok = after > 0
            near[ok] |= mine[ok] - theirs[after[ok] - 1] <= _MEETING
            out += [(p, p + 1) for p in mine[near].tolist()]
    return out


def _unescaped(token: str) -> str:
    """What one escape stands for."""
    if token[0] == "\\":
        if len(token) == 12:  # a surrogate pair
            high, low = int(token[2:6], 16), int(token[8:12], 16)
            return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        if token[1] == "u":
            return chr(int(token[2:], 16))
        return _CONTROL.get(token[1], token[1])
    if token[0] == "%":
        return bytes.fromhex(token.replace("%", "")).decode("utf-8", errors="replace")
    return html.unescape(token)


@dataclass(frozen=True)
class _Escapes:
    """Where the characters of a decoded text came from in the text it was decoded from.

    The i-th escape spanned ``froms[i]:tos[i]`` of the source and became
    ``starts[i]:ends[i]`` of the decoded text; every other character is one
    character of the source.
    """

    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    froms: npt.NDArray[np.int64]
    tos: npt.NDArray[np.int64]

    def source(self, lo: int, hi: int) -> tuple[int, int]:
        return self._at(lo, end=False), self._at(hi - 1, end=True)

    def _at(self, d: int, *, end: bool) -> int:
        """The source position of decoded character ``d``: its start, or (``end``) the end of it."""
        i = int(np.searchsorted(self.starts, d, side="right")) - 1
        if i >= 0 and d < self.ends[i]:
            return int(self.tos[i] if end else self.froms[i])
        s = d if i < 0 else int(self.tos[i]) + d - int(self.ends[i])
        return s + 1 if end else s


def _decode(text: str, escape: re.Pattern[str]) -> tuple[str, _Escapes] | None:
    """``text`` with each escape ``escape`` finds read, or None if it finds none."""
    parts = escape.split(text)  # plain, escape, plain, escape, ..., plain
    if len(parts) == 1:
        return None
    tokens = parts[1::2]
    meaning = {t: _unescaped(t) for t in set(tokens)}
    plain_lens = np.fromiter(map(len, parts[0::2]), dtype=np.int64, count=len(tokens) + 1)
    token_lens = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    parts[1::2] = [meaning[t] for t in tokens]
    new_lens = np.fromiter(map(len, parts[1::2]), dtype=np.int64, count=len(tokens))
    before = np.cumsum(plain_lens[:-1])  # plain characters up to each escape
    froms = before + np.concatenate(([0], np.cumsum(token_lens)[:-1]))
    starts = before + np.concatenate(([0], np.cumsum(new_lens)[:-1]))
    return "".join(parts), _Escapes(starts, starts + new_lens, froms, froms + token_lens)


# --- base64 -------------------------------------------------------------------------

# Each character's 6 bits, the standard and the URL-safe alphabet alike; padding is
# zero bits (its bytes are NULs, which no secret holds); -1: no base64 character.
_B64 = np.full(129, -1, dtype=np.int16)
for _i, _c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"):
    _B64[ord(_c)] = _i
_B64[ord("-")], _B64[ord("_")], _B64[ord("=")] = 62, 63, 0
_BREAK = 64  # in a stream of base64 values: between two runs


@functools.cache
def _base64_runs(fewest: int) -> re.Pattern[str]:
    """Runs of base64 characters, the first line of them at least ``fewest`` long (a wrapped text
    goes on across its line breaks)."""
    char = "[A-Za-z0-9+/=_-]"
    return re.compile(f"(?<!{char}){char}{{{fewest},}}(?:[\r\n]+{char}+)*")


@dataclass(frozen=True)
class _Bytes:
    """Where the characters of a text read from bytes came from: each one's first byte and length."""

    first_byte: npt.NDArray[np.int64]
    byte_len: npt.NDArray[np.int64]

    def source(self, lo: int, hi: int) -> tuple[int, int]:
        return int(self.first_byte[lo]), int(self.first_byte[hi - 1] + self.byte_len[hi - 1])


@dataclass(frozen=True)
class _Base64:
    """Where the characters of a text read as base64 (from ``offset`` of the stream) came from.

    ``stream``: the position in the text of each base64 character taken;
    ``first_byte``, ``byte_len``: each decoded character's bytes (None: a byte each).
    """

    stream: npt.NDArray[np.int64]
    offset: int
    first_byte: npt.NDArray[np.int64] | None  # None: one byte a character
    byte_len: npt.NDArray[np.int64] | None

    def source(self, lo: int, hi: int) -> tuple[int, int]:
        first, last = _bytes_of(self.first_byte, self.byte_len, lo, hi)
        # Byte j of a group of 3 takes bits of base64 characters j and j + 1 of its group of 4.
        start = self.offset + 4 * (first // 3) + first % 3
        end = min(self.offset + 4 * (last // 3) + last % 3 + 2, len(self.stream))
        return int(self.stream[start]), int(self.stream[end - 1]) + 1


def _base64(
    text: str, fewest: int, wide: bool
) -> Iterator[tuple[str, _Base64, npt.NDArray[np.uint32] | npt.NDArray[np.uint8], npt.NDArray[np.uint8] | None]]:
    """``text`` read as base64 from each of the 4 offsets: its runs of at least ``fewest`` base64
    characters (line breaks inside a run seen through) decoded. With each reading, the way back,
    its characters' code points and, read one character a byte, the bytes.

    The bytes are read as UTF-8 when a secret has letters beyond ASCII (``wide``); else, faster,
    one character a byte (``latin-1``), their ASCII letters lower-cased (``_Finder._find_bytes``).
    """
    # The runs: found by a regex, which skips ordinary text faster than anything done to each character.
    found = np.array([m.span() for m in _base64_runs(fewest).finditer(text)], dtype=np.int64).reshape(-1, 2)
    if not found.size:
        return
    sizes = found[:, 1] - found[:, 0]
    codes = _codes("".join(text[lo:hi] for lo, hi in found.tolist()))
    position = np.arange(codes.size) + np.repeat(found[:, 0] - (np.cumsum(sizes) - sizes), sizes)
    values = _B64[np.minimum(codes, 128)]
    taken = values >= 0  # the line breaks are not
    where, values = position[taken], values[taken]
    ends = np.cumsum(np.bincount(np.repeat(np.arange(sizes.size), sizes)[taken], minlength=sizes.size))
    # The stream: each run, then 3 characters of padding (a run's last group may be short of
    # characters: unpadded base64) and a break, each of them placed at the run's last character.
    extra = np.repeat(ends, 4)
    stream_values = np.insert(values, extra, np.tile(np.array([0, 0, 0, _BREAK], dtype=np.int16), ends.size))
    stream = np.insert(where, extra, np.repeat(where[ends - 1], 4))
    total = stream.size
    for offset in range(4):
        groups = stream_values[offset : offset + (total - offset) // 4 * 4].reshape(-1, 4).astype(np.uint32)
        whole = (groups < _BREAK).all(axis=1)
        if not whole.any():
            continue
        a, b, c, d = groups[:, 0], groups[:, 1], groups[:, 2], groups[:, 3]
        data = np.stack(((a << 2 | b >> 4) & 255, (b << 4 | c >> 2) & 255, (c << 6 | d) & 255), axis=1)
        data[~whole] = 0
        octets = data.astype(np.uint8).reshape(-1)
        if wide:
            decoded, chars, first_byte, byte_len = _utf8(octets)
            yield decoded, _Base64(stream, offset, first_byte, byte_len), chars, None
        else:
            raw = octets.tobytes().lower()
            lowered = np.frombuffer(raw, dtype=np.uint8)
            yield raw.decode("latin-1"), _Base64(stream, offset, None, None), lowered, lowered


@functools.cache
def _hex_runs(fewest: int) -> re.Pattern[str]:
    """Runs of at least ``fewest`` hex digits, not inside a longer word of them."""
    return re.compile(f"(?<![0-9A-Fa-f])[0-9A-Fa-f]{{{fewest},}}")


@dataclass(frozen=True)
class _Hex:
    """Where the characters of a text read as hex from ``start`` of the text came from (two digits
    a byte; ``first_byte``, ``byte_len``: each decoded character's bytes, None: a byte each)."""

    start: int
    first_byte: npt.NDArray[np.int64] | None
    byte_len: npt.NDArray[np.int64] | None

    def source(self, lo: int, hi: int) -> tuple[int, int]:
        first, last = _bytes_of(self.first_byte, self.byte_len, lo, hi)
        return self.start + 2 * first, self.start + 2 * last + 2


def _bytes_of(
    first_byte: npt.NDArray[np.int64] | None, byte_len: npt.NDArray[np.int64] | None, lo: int, hi: int
) -> tuple[int, int]:
    """The first and last byte of decoded characters ``lo``..``hi`` (None: a byte each)."""
    if first_byte is None or byte_len is None:
        return lo, hi - 1
    return int(first_byte[lo]), int(first_byte[hi - 1] + byte_len[hi - 1]) - 1


def _hex(text: str, fewest: int, wide: bool) -> Iterator[tuple[str, _Hex, npt.NDArray[np.uint8] | None]]:
    """``text``'s runs of at least ``fewest`` hex digits, each decoded from both of its offsets
    (the run may begin with half a byte of something else): as UTF-8 when a secret has letters
    beyond ASCII, else one character a byte, ASCII letters lower-cased (as ``_base64``)."""
    for m in _hex_runs(fewest).finditer(text):
        for start in (m.start(), m.start() + 1):
            pairs = (m.end() - start) // 2
            if 2 * pairs < fewest:
                continue
            octets = np.frombuffer(bytes.fromhex(text[start : start + 2 * pairs]), dtype=np.uint8)
            if wide:
                decoded, _, first_byte, byte_len = _utf8(octets)
                yield decoded, _Hex(start, first_byte, byte_len), None
            else:
                raw = octets.tobytes().lower()
                yield raw.decode("latin-1"), _Hex(start, None, None), np.frombuffer(raw, dtype=np.uint8)


def _utf8(
    data: npt.NDArray[np.uint8],
) -> tuple[str, npt.NDArray[np.uint32], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Bytes read as UTF-8: the text, its code points, and each character's first byte and length.

    A byte that is no part of a character is U+FFFD by itself (``bytes.decode`` would give lone
    surrogates, which make every later step slow, or join several bytes into one U+FFFD).
    """
    n = data.size
    b = np.concatenate((data, np.zeros(3, dtype=np.uint8)))
    cont = (b & 0xC0) == 0x80
    b0, b1 = b[:n], b[1 : n + 1]
    c1, c2, c3 = cont[1 : n + 1], cont[2 : n + 2], cont[3 : n + 3]
    high = np.flatnonzero(b0 >= 0xC2)  # leads of characters of more than one byte (most bytes are ASCII)
    h0, h1 = b0[high], b1[high]
    two = high[(h0 <= 0xDF) & c1[high]]
    three = high[
        (h0 >= 0xE0)
        & (h0 <= 0xEF)
        & c1[high]
        & c2[high]
        & ~((h0 == 0xE0) & (h1 < 0xA0))
        & ~((h0 == 0xED) & (h1 >= 0xA0))
    ]
    four = high[
        (h0 >= 0xF0)
        & (h0 <= 0xF4)
        & c1[high]
        & c2[high]
        & c3[high]
        & ~((h0 == 0xF0) & (h1 < 0x90))
        & ~((h0 == 0xF4) & (h1 >= 0x90))
    ]
    length = np.ones(n, dtype=np.int64)
    inside = np.zeros(n + 3, dtype=bool)  # a continuation byte of a character that began before
    code = np.where(b0 < 0x80, b0.astype(np.uint32), np.uint32(0xFFFD))
    bits = b.astype(np.uint32) & 0x3F
    for size, at, lead_bits in ((2, two, 0x1F), (3, three, 0x0F), (4, four, 0x07)):
        length[at] = size
        value = b0[at].astype(np.uint32) & lead_bits
        for k in range(1, size):
            inside[at + k] = True
            value = value << 6 | bits[at + k]
        code[at] = value
    first = np.flatnonzero(~inside[:n]).astype(np.int64)
    chars = code[first].astype("<u4")
    return chars.tobytes().decode("utf-32-le"), chars, first, length[first]


# Where what a base64 text carries is text: runs of this many printable characters or more,
# with an escape in them.
_TEXT_RUN = 8


def _texts(chars: npt.NDArray[np.uint32] | npt.NDArray[np.uint8], *, ascii_only: bool) -> list[tuple[int, int]]:
    """The runs of printable characters of at least ``_TEXT_RUN`` that hold a character an escape
    begins with. ``ascii_only``: the characters are bytes, and a byte counts when it is printable
    ASCII or part of a well-formed UTF-8 character (random bytes would be text half the time if
    every byte past ASCII counted; they seldom are such a character)."""
    if ascii_only:
        b = chars
        printable = ((b >= 0x20) & (b != 0x7F) & (b < 0x80)) | (b == 9) | (b == 10) | (b == 13)
        padded = np.concatenate((b, np.zeros(3, dtype=b.dtype)))
        cont = (padded & 0xC0) == 0x80
        n = b.size
        for low, high, size in ((0xC2, 0xDF, 2), (0xE0, 0xEF, 3), (0xF0, 0xF4, 4)):
            ok = (b >= low) & (b <= high)
            for k in range(1, size):
                ok &= cont[k : n + k]
            at = np.flatnonzero(ok)
            for k in range(size):
                printable[np.minimum(at + k, n - 1)] = True
    else:
        printable = (chars >= 0x20) & (chars != 0x7F) & ((chars < 0x80) | (chars >= 0xA0)) & (chars != 0xFFFD)
        printable |= (chars == 9) | (chars == 10) | (chars == 13)
    edges = np.flatnonzero(np.diff(np.concatenate(([False], printable, [False])).astype(np.int8)))
    lo, hi = edges[0::2], edges[1::2]
    starts = np.concatenate(([0], np.cumsum((chars == 92) | (chars == 37) | (chars == 38))))  # \\ % &
    keep = (hi - lo >= _TEXT_RUN) & (starts[hi] > starts[lo])
    return list(zip(lo[keep].tolist(), hi[keep].tolist(), strict=True))


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
