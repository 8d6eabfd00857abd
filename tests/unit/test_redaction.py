"""Redaction (H1): no run of 8 characters of a secret survives, in any form a server echoes it in.

The property over random secrets and shapes is in ``test_redaction_shapes.py``; here, the probe's
cases, what is left alone, results, transcripts and the speed."""

from __future__ import annotations

import base64
import json
import random
import string
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from sidecar import redaction
from sidecar.redaction import redact, redact_result, redact_transcript, register_secrets, scrubber, short
from sidecar.transcript.model import Segment, Transcript, Word
from tests.support.secrets import any_survivor, survivors

# The probe's key: 51 characters, of which a provider echoed the middle 32.
PROBE_KEY = "sk-proj-Q7c" + "b2Xv9LmT4pWc8RyN3kJd6GsF1aQe5UoV" + "Hn4Wz8Rt"
MIDDLE = "b2Xv9LmT4pWc8RyN3kJd6GsF1aQe5UoV"
# A key with the characters escaping changes (base64: / + =).
SLASHED = "Zr8/Qm3+Tx7vK2/pL9+wN4sB6/dF1hJ5+cG0yV3="


def test_the_probe_key_has_the_probes_shape() -> None:
    assert len(PROBE_KEY) == 51 and MIDDLE in PROBE_KEY


def _dashed(key: str, size: int) -> str:
    return "-".join(key[i : i + size] for i in range(0, len(key), size))


# The probe's shapes (issue "Hardening, second pass"), each left a piece of the key before.
PROBE_SHAPES = [
    ("a middle run", PROBE_KEY, f'400 {{"error": "string error {MIDDLE}"}}'),
    ("cut into parts joined by -", PROBE_KEY, f"bad key {_dashed(PROBE_KEY, 4)} refused"),
    ("parts of 6 joined by -", PROBE_KEY, f"bad key {_dashed(PROBE_KEY[9:], 6)}"),
    ("over quoted lines", PROBE_KEY, "> your key\n> " + "\n> ".join(PROBE_KEY[i : i + 7] for i in range(0, 51, 7))),
    ("JSON escapes in a body that is not JSON", SLASHED, '{"error": "' + SLASHED.replace("/", "\\/") + '" <html>'),
    (
        "\\u002b escapes in a body that is not JSON",
        SLASHED,
        "{'error': '" + SLASHED.replace("+", "\\u002b").replace("/", "\\u002F") + "'",
    ),
    ("lower-case %2f", SLASHED, "see https://x.example/?q=" + quote(SLASHED, safe="").lower()),
    ("double %252F", SLASHED, "see https://x.example/?q=" + quote(quote(SLASHED, safe=""), safe="")),
    ("double, lower-case %252f", SLASHED, "q=" + quote(quote(SLASHED, safe=""), safe="").lower()),
    ("upper-cased by the server", PROBE_KEY, f"INVALID KEY {PROBE_KEY.upper()[5:30]}"),
    ("a middle run across a line break", PROBE_KEY, f"error: {MIDDLE[:13]}\n{MIDDLE[13:]}"),
]


@pytest.mark.parametrize(("shape", "key", "text"), PROBE_SHAPES, ids=[s for s, _, _ in PROBE_SHAPES])
def test_no_piece_of_the_key_survives_the_probes_shapes(shape: str, key: str, text: str) -> None:
    assert survivors(text, key), "the case must hold a piece of the key to begin with"
    clean = scrubber([key])(text)
    assert not survivors(clean, key), (shape, clean)
    assert "[redacted]" in clean


# --- what is not a secret ----------------------------------------------------------


@pytest.fixture(autouse=True)
def registry() -> Iterator[None]:
    """Secrets registered by a test here are forgotten after it (a password of words would
    otherwise be removed from every later test's texts)."""
    saved = redaction._known, redaction._passwords
    yield
    redaction._known, redaction._passwords = saved


SPEECH = (
    "The quick brown fox jumps over the lazy dog. Password managers, API keys and tokens were discussed at "
    "10:45 on 2024-06-13; the budget is 1,250,000 rubles. Быстрая коричневая лиса прыгает через ленивую "
    "собаку, и совещание закончилось в 12:30. Basic training starts Monday. "
)


@pytest.fixture
def keys() -> Iterator[list[str]]:
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits
    made = ["sk-proj-" + "".join(rng.choice(alphabet) for _ in range(48)) for _ in range(4)]
    yield made


def test_ordinary_speech_is_left_alone(keys: list[str]) -> None:
    register_secrets(keys)
    register_secrets(["Tq7-Lw2x!Vb9mZ"])  # a password chosen random
    text = SPEECH * 50
    words = [Word(start=i, end=i + 1, word=w) for i, w in enumerate(text.split())]
    t = Transcript(text=text, segments=[Segment(start=0, end=len(words), text=text, words=words)])
    assert redact_transcript(t) is t
    raw = t.model_dump_json().encode()
    assert redact_result(raw) is raw
    # Messages and logs also lose the shapes of credentials ("Basic …" is one): the rest stays.
    plain = text.replace("Basic", "Early")
    assert scrubber(keys)(plain) == plain


def test_every_run_of_a_password_goes_an_ordinary_word_among_them() -> None:
    register_secrets(["Summer2024Password!"])
    assert redact("login with Summer2024Password! failed") == "login with [redacted] failed"
    assert redact("pw=" + quote("Summer2024Password!", safe="")) == "pw=[redacted]"
    assert redact("SUMMER 2024 PASSWORD!") == "[redacted]"  # "ASSWORD!": 8 of its characters, as they are
    assert redact("it was summer2024 then") == "it was [redacted] then"
    # The price: a password's 8-letter word is removed wherever it is said.
    assert redact("forgot my password again") == "forgot my [redacted] again"
    assert redact("a pass word") == "a [redacted]"


def test_a_short_secret_is_removed_whole_only() -> None:
    scrub = scrubber(["hunt3r"])
    assert scrub("the password hunt3r leaked") == "the password [redacted] leaked"
    assert scrub("HUNT3R, encoded: aHVudDNy") == "[redacted], encoded: [redacted]"
    assert scrub("hunt3 is not it") == "hunt3 is not it"
    assert scrubber(["abc"])("abc is too short to be a secret") == "abc is too short to be a secret"


def test_short_bounds_after_redacting_so_no_cut_hides_a_piece() -> None:
    text = "x" * 495 + " " + PROBE_KEY
    assert short(text, scrubber([PROBE_KEY])) == "x" * 495 + " [re…"  # the cut fell in "[redacted]", not the key


# --- provider results ----------------------------------------------------------------


def test_a_key_in_a_json_result_is_removed_and_the_result_stays_json() -> None:
    key = "AQVN" + "x7Kp2Lm9Qr4Tz8Wv3Nb6Hs1Jd5"
    register_secrets([key])
    body = {
        "text": f"my key is {key} thanks",
        "segments": [{"start": 0.0, "end": 1.0, "text": f"my key is {key[:14]}", "tokens": [50364, 440]}],
        "words": [{"word": w, "start": 0.1, "end": 0.2} for w in ("my", "key", key[:10], key[10:])],
        "parts": [key[:12], key[12:]],
        "escaped": key[:16].replace("7", "\\u0037"),
    }
    raw = json.dumps(body).encode()
    clean = redact_result(raw)
    parsed = json.loads(clean)  # still JSON
    assert not survivors(clean.decode(), key)
    assert parsed["text"] == "my key is [redacted] thanks"
    assert parsed["segments"][0]["tokens"] == [50364, 440]
    assert parsed["parts"] == ["[redacted]", "[redacted]"]
    assert redact_result(b'{"text": "nothing here"}') == b'{"text": "nothing here"}'


def test_json_lines_stay_json_lines_and_plain_text_is_redacted_too() -> None:
    key = "t1.9euelZq" + "Rz5Vn8Kc2Xm7Pw4Ty1Lb6"
    register_secrets([key])
    lines = b'{"result": {"text": "a"}}\n{"result": {"text": "' + key.encode() + b'"}}\n'
    clean = redact_result(lines)
    assert [json.loads(line) for line in clean.splitlines()][1] == {"result": {"text": "[redacted]"}}
    assert redact_result(f"plain {key} text".encode()) == b"plain [redacted] text"


def test_a_key_spread_over_words_and_segments_is_removed_from_each() -> None:
    key = "Gq7" + "Mz2Xc9Vb4Nl1Kj8Hf5Dg3Sa6"
    register_secrets([key])
    words = [Word(start=i, end=i + 1, word=w) for i, w in enumerate(["key", key[:5], key[5:11], key[11:], "ok"])]
    t = Transcript(
        text=f"key {key[:5]} {key[5:11]} {key[11:]} ok",
        segments=[
            Segment(start=0, end=2, text=f"key {key[:5]}", words=words[:2]),
            Segment(start=2, end=5, text=f"{key[5:11]} {key[11:]} ok", words=words[2:]),
        ],
    )
    clean = redact_transcript(t)
    everything = clean.model_dump_json()
    assert not survivors(everything, key), everything
    assert [w.word for s in clean.segments for w in s.words or []] == ["key", *["[redacted]"] * 3, "ok"]
    assert clean.segments[0].text == "key [redacted]" and clean.segments[1].text.endswith(" ok")
    assert [(s.start, s.end) for s in clean.segments] == [(0, 2), (2, 5)]


def test_the_armor_of_a_private_key_is_not_taken_for_a_piece_of_it(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from sidecar.providers.speechkit.iam import ServiceAccountKey

    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    path = tmp_path / "key.json"
    path.write_text(json.dumps({"id": "ajekey", "service_account_id": "ajesa", "private_key": pem}))
    ServiceAccountKey.load(str(path))
    assert redact("-----BEGIN PRIVATE KEY----- is the private key's armor") == (
        "-----BEGIN PRIVATE KEY----- is the private key's armor"
    )
    body = pem.splitlines()[5]
    # Separators are seen through, so "leaked: " + the piece is "leakedXYZ…" to the finder: where
    # the key itself holds "d" before the piece, that "d" is rightly taken as a part of it. The
    # piece starts where the key's character before it is not the message's last letter.
    start = next(i for i in range(10, 40) if body[i - 1].lower() != "d")
    assert redact(f"leaked: {body[start : start + 30]}") == "leaked: [redacted]"


# --- speed ---------------------------------------------------------------------------


def test_redaction_of_five_megabytes_is_fast(keys: list[str], figures: dict[str, str]) -> None:
    """A six-hour recording's result can be megabytes: one pass, whatever the number of secrets.

    Timed on the CPU this process gets (the machine is shared): each shape of text once.
    """
    rng = random.Random(3)
    pem_body = "".join(rng.choice(string.ascii_letters + string.digits + "+/") for _ in range(1600))
    register_secrets([*keys, pem_body, "Tq7-Lw2x!Vb9mZ"])
    text = (SPEECH * (5_000_000 // len(SPEECH) + 1))[:5_000_000]
    raw_text = text.encode()
    took: dict[str, float] = {}

    def timed(name: str, work: Callable[[], object]) -> object:
        started = time.process_time()
        out = work()
        took[name] = time.process_time() - started
        return out

    assert timed("speech", lambda: redact_result(raw_text)) is raw_text
    timed("message", lambda: redact(text))  # a message: the shapes of credentials too
    words = [{"word": w, "start": i / 10, "end": i / 10 + 0.1} for i, w in enumerate(SPEECH.split() * 2000)]
    body = {"text": SPEECH * 200 + f" {keys[0]} ", "words": words}
    raw = json.dumps(body, ensure_ascii=False).encode()
    clean = timed("json", lambda: redact_result(raw))
    assert isinstance(clean, bytes) and keys[0] not in clean.decode() and json.loads(clean)
    # Every non-ASCII character escaped (\u0431…): each escape read.
    escaped = json.dumps({"text": text[:3_000_000]}).encode()
    assert timed("escaped", lambda: redact_result(escaped)) is escaped
    # Base64 (an attachment echoed): read from each of its 4 offsets.
    blob = base64.b64encode(rng.randbytes(3_750_000))
    assert timed("base64", lambda: redact_result(blob)) is blob
    # A password made of words: its word is found every 300 characters.
    register_secrets(["Summer2024Password!"])
    assert timed("matches", lambda: redact_result(raw_text)) != raw_text

    mb = {"speech": 5, "message": 5, "json": len(raw) / 1e6, "escaped": len(escaped) / 1e6, "base64": 5, "matches": 5}
    figures["redaction"] = ", ".join(f"{name} {took[name] / mb[name]:.2f} s/MB" for name in took)
    # Generous bounds: the machine is shared; the figures above are what to read.
    assert took["speech"] < 5 and took["json"] < 10 and took["base64"] < 60


def test_the_finder_is_built_once_for_the_same_secrets() -> None:
    scrub = scrubber(["Lq8Wm3Zx7Rt2Vn5Kc9Pb4Hy6"])
    scrub("a")
    before = redaction._finder.cache_info().hits
    scrub("b")
    assert redaction._finder.cache_info().hits == before + 1


def test_a_hex_encoded_secret_is_removed_in_either_case_and_alignment() -> None:
    """A key written as hex (a debug dump, a signature's input) left the redactor untouched."""
    key = "sk-proj-Q7cb2Xv9LmT4pWc8RyN3kJd6GsF1aQe5UoV"
    password = "пароль-Зима2024"
    texts = [
        "key bytes: " + key.encode().hex(),
        "KEY=" + key.encode().hex().upper(),
        "dump 7" + (b"\x01\x02" + key[5:20].encode() + b"\xff").hex() + "a end",  # odd alignment in a longer run
        "cfg=" + json.dumps({"api_key": key}).encode().hex(),
        "p " + password.encode().hex(),
    ]
    scrub = scrubber([key, password])
    for text in texts:
        clean = scrub(text)
        assert "[redacted]" in clean, text
        assert not any_survivor(clean, [key, password]), (text, clean)
    plain = "build deadbeefcafebabe0123456789abcdef of 2026"
    assert scrub(plain) == plain
