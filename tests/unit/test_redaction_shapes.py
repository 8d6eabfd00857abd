"""Redaction (H1), judged from outside: random secrets in random shapes, and a reader that decodes
the redacted text every way it can (``tests/support/secrets.py``, which shares no code and no
method with ``sidecar.redaction``) finds no 8-character run of any of them."""

from __future__ import annotations

import base64
import html
import json
import re
import string
from collections.abc import Callable
from urllib.parse import quote

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from sidecar.redaction import redact_result, scrubber
from tests.support.secrets import any_survivor, base64_decoded, survivors

# Keys and tokens: random characters of one alphabet.
ALPHABETS = {
    "letters and digits": string.ascii_letters + string.digits,
    "hex": string.hexdigits[:16],
    "base64": string.ascii_letters + string.digits + "+/=",
    "base64url": string.ascii_letters + string.digits + "-_",
    "printable": string.ascii_letters + string.digits + string.punctuation + " ",
    "cyrillic": "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯ" + string.digits + "-_.!",
}
# Passwords: words.
WORDS = [
    "summer", "Winter", "password", "correct", "horse", "battery", "staple", "dragon", "monkey",
    "sunshine", "letmein", "admin", "зима", "Пароль", "дракон", "солнце", "весна",
]  # fmt: skip
SEPARATORS = ["-", " ", "\n", "\r\n", "\n> ", '", "', " - ", "_", ".", ":", "\t", "|", "  ", "\u00a0", "—", "…"]
CASES: dict[str, Callable[[str], str]] = {"as is": str, "upper": str.upper, "lower": str.lower, "swapped": str.swapcase}


@st.composite
def secrets(draw: st.DrawFn) -> str:
    """A key or token of 8 to 80 characters of some alphabet, or a password of words."""
    if draw(st.booleans()):
        alphabet = ALPHABETS[draw(st.sampled_from(sorted(ALPHABETS)))]
        return draw(st.text(alphabet=alphabet, min_size=8, max_size=80))
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
    joint = draw(st.sampled_from(["", "-", " ", "_", ".", "!", "2024"]))
    tail = draw(st.text(alphabet=string.digits + "!?#$%&*", max_size=4))
    password = joint.join(words) + tail
    password += "19" * max(0, (9 - len(password)) // 2)
    return password[:80]


def split(text: str, sep: str, sizes: list[int]) -> str:
    parts, i, n = [], 0, 0
    while i < len(text):
        parts.append(text[i : i + sizes[n % len(sizes)]])
        i += sizes[n % len(sizes)]
        n += 1
    return sep.join(parts)


def json_escaped(text: str, escape: list[bool]) -> str:
    """JSON string escapes as servers write them: some characters as \\u00XX (either case), / as \\/."""
    out = []
    for c, esc in zip(text, escape, strict=True):
        if c in '"\\':
            out.append("\\" + c)
        elif c in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[c])
        elif c == "/" and esc:
            out.append("\\/")
        elif esc or ord(c) < 0x20:
            out.append(f"\\u{ord(c):04x}" if ord(c) % 2 else f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def html_escaped(text: str, numeric: list[bool]) -> str:
    """As an HTML page has it: the five specials named, some characters as &#NN; or &#xNN;."""
    out = []
    for i, (c, num) in enumerate(zip(text, numeric, strict=True)):
        if num:
            out.append(f"&#{ord(c)};" if i % 2 else f"&#x{ord(c):X};")
        else:
            out.append(html.escape(c))
    return "".join(out)


def lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), text)


# Escapes applied over the shaped secret, and how deep each goes (percent-encoding twice: 2).
OUTER = ["json", "json all", "percent", "percent lower", "percent twice", "html"]
DEPTH = {"percent twice": 2}


def some(draw: st.DrawFn, text: str) -> list[bool]:
    """Which characters of ``text`` to escape: a random choice (one draw, however long the text)."""
    rng = draw(st.randoms(use_true_random=False))
    share = rng.choice([0.0, 0.1, 0.5, 1.0])
    return [rng.random() < share for _ in text]


def escaped(draw: st.DrawFn, how: str, text: str) -> str:
    if how == "json":
        return json_escaped(text, some(draw, text))
    if how == "json all":
        return json.dumps(text)[1:-1]
    if how == "html":
        return html_escaped(text, some(draw, text))
    encoded = quote(text, safe="")
    if how == "percent twice":
        encoded = quote(encoded, safe="")
    return lower_escapes(encoded) if how == "percent lower" else encoded


def base64_shaped(draw: st.DrawFn, piece: str) -> str:
    """The piece inside a base64 text: in a longer run of bytes at any alignment, a Basic header,
    or a JSON configuration carried as base64; standard or URL-safe, padded or not, wrapped or not."""
    how = draw(st.sampled_from(["bytes", "basic", "config"]))
    if how == "basic":
        data = ("user:" + piece).encode()
    elif how == "config":
        config = {"region": "ru-central1", "api_key": piece, "retries": 3}
        data = json.dumps(config, ensure_ascii=draw(st.booleans())).encode()
    else:
        data = draw(st.binary(max_size=7)) + piece.encode() + draw(st.binary(max_size=7))
    encoded = (base64.urlsafe_b64encode if draw(st.booleans()) else base64.b64encode)(data).decode()
    if draw(st.booleans()):
        encoded = encoded.rstrip("=")
    if draw(st.booleans()):
        width, nl = draw(st.sampled_from([64, 76])), draw(st.sampled_from(["\n", "\r\n"]))
        encoded = nl.join(encoded[i : i + width] for i in range(0, len(encoded), width))
    if how == "basic":
        return "Authorization: Basic " + encoded
    if how == "config":
        return '{"config": "' + encoded + '"}'
    return encoded


@st.composite
def echoed(draw: st.DrawFn) -> tuple[list[str], str]:
    """Secrets, and a text echoing 8 characters or more of one of them in some shape."""
    secret = draw(secrets())
    others = draw(st.lists(secrets(), max_size=2))
    start = draw(st.integers(0, len(secret) - 8))
    piece = secret[start : draw(st.integers(start + 8, len(secret)))]
    if draw(st.booleans()):
        sizes = draw(st.lists(st.integers(1, 12), min_size=1, max_size=8))
        piece = split(piece, draw(st.sampled_from(SEPARATORS)), sizes)
    piece = CASES[draw(st.sampled_from(sorted(CASES)))](piece)
    depth = 0
    encoding = draw(st.sampled_from(["none", "base64", "hex"]))
    if encoding == "base64":
        if draw(st.booleans()):  # escaped inside what base64 carries, one level
            piece = escaped(draw, draw(st.sampled_from(["json all", "percent", "html"])), piece)
        piece = base64_shaped(draw, piece)
    elif encoding == "hex":  # its bytes in hex, either case, inside a longer run of bytes
        data = draw(st.binary(max_size=5)) + piece.encode() + draw(st.binary(max_size=5))
        piece = data.hex().upper() if draw(st.booleans()) else data.hex()
    for how in draw(st.lists(st.sampled_from(OUTER), max_size=2)):
        depth += DEPTH.get(how, 1)
        if depth <= 3:
            piece = escaped(draw, how, piece)
    before = draw(st.text(max_size=20))
    after = draw(st.text(max_size=20))
    return [secret, *others], before + piece + after


PROBE_KEY = "sk-proj-Q7c" + "b2Xv9LmT4pWc8RyN3kJd6GsF1aQe5UoV" + "Hn4Wz8Rt"


@settings(max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(echoed())
@example(([PROBE_KEY], "Basic " + base64.b64encode(b"u:" + PROBE_KEY.encode()).decode()))
@example((["Summer2024Password!"], "Authorization: Basic " + base64.b64encode(b"owner:Summer2024Password!").decode()))
@example(
    (["Zr8/Qm3+Tx7vK2/pL9+wN4sB6/dF1hJ5+cG0yV3="], quote(quote("Zr8/Qm3+Tx7vK2/pL9+wN4sB6"[3:20], safe=""), safe=""))
)
@example((["0000000D0000000=00000001"], "000000010-0-0-0-0-0-0-="))  # "[redacted]0000000" is no "d0000000"
@example((["пароль-Зима2024"], "q=" + quote("ПАРОЛЬ-ЗИМА2024", safe="")))
@example((["Пароль19"], "%D0%9F%D0%B0%D1%80%D0%BE%D0%BB%D1%8\\u004319"))  # a percent escape's end JSON-escaped
@example((["summer2024зима"], "%2024\\u0437\\u0438\\u043c\\u0430"))  # a stray % before JSON-escaped digits
@example((["00000000"], base64.b64encode("&#x30;&#48;&#x30;&#48;\u00a0&#48;&#x30;&#48;&#x30;".encode()).decode()))
@example(
    (
        [PROBE_KEY],
        '{"blob": "'
        + base64.b64encode(b"\x01\x02" + json.dumps({"key": PROBE_KEY}).encode()).decode().replace("/", "\\/")
        + '"}',
    )
)
def test_no_run_of_8_characters_of_any_secret_survives_any_shape(case: tuple[list[str], str]) -> None:
    secrets_, text = case
    assume(any_survivor(text, secrets_))  # the reader sees the secret in the text as it was
    clean = scrubber(secrets_)(text)
    assert not any_survivor(clean, secrets_), (secrets_, text, clean)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(echoed())
def test_a_result_keeps_no_run_either(case: tuple[list[str], str]) -> None:
    """A provider's result gets the secrets removed and nothing else (no shapes of credentials)."""
    from sidecar import redaction

    secrets_, text = case
    assume(any_survivor(text, secrets_))
    text = "<" + text  # not JSON: replaced wherever found (JSON is replaced inside its strings only)
    saved = redaction._known
    redaction.register_secrets(secrets_)
    try:
        clean = redact_result(text.encode()).decode()
    finally:
        redaction._known = saved
    assert not any_survivor(clean, secrets_), (secrets_, text, clean)


# --- the reader itself ----------------------------------------------------------------


def test_the_reader_sees_each_shape_it_is_meant_to() -> None:
    """Each decoding of the reader, checked on a case it must see and a case it must not."""
    key = "Zr8/Qm3+Tx7vK2/pL9+wN4sB6/dF1hJ5+cG0yV3="
    seen = [
        key[5:20],
        key[5:20].swapcase(),
        quote(key, safe=""),
        quote(quote(key, safe=""), safe="").lower(),
        json.dumps(key).replace("/", "\\/"),
        "".join(f"&#{ord(c)};" for c in key[:9]),
        "-".join(key[i : i + 3] for i in range(0, 30, 3)),
        base64.b64encode(b"\x00" + key.encode()).decode(),
        "\n".join(base64.urlsafe_b64encode(b"xy" + key.encode()).decode()[i : i + 7] for i in range(0, 60, 7)),
        base64.b64encode(json.dumps({"k": key}).encode()).decode(),
    ]
    for text in seen:
        assert survivors(text, key), text
    unseen = [key[5:12], "-".join(key[i : i + 3] for i in range(0, 6, 3)), "[redacted]" + key[:7]]
    for text in unseen:
        assert not survivors(text, key), text
    assert any(d.startswith("\x00Zr8/Qm3") for d in base64_decoded(seen[7]))
