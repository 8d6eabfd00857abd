"""What ``transcriber transcribe`` shows while it uploads and waits, and what it prints."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from sidecar.activity import WORDS, Activity
from sidecar.sender.client import (
    Bars,
    Lines,
    SenderError,
    _Counted,
    check_options,
    display_for,
    shown,
    write_transcript,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def test_progress_unknown_is_no_fraction_and_known_is_clamped() -> None:
    assert shown("a.ogg", {"status": "uploaded", "progress": None}) == ("a.ogg: uploaded", None)
    assert shown("a.ogg", {"status": "submitted", "progress": 0.25}) == ("a.ogg: submitted", 0.25)
    assert shown("a.ogg", {"status": "done", "progress": 1}) == ("a.ogg: done", 1.0)
    assert shown("a.ogg", {"status": "submitted", "progress": 1.5})[1] == 1.0
    assert shown("a.ogg", {"status": "submitted", "progress": True})[1] is None
    assert shown("a.ogg", {"status": "submitted"})[1] is None  # an older server without the field


def test_the_activity_is_said_in_the_readmes_words_with_the_language_once_found() -> None:
    body = {"status": "normalized", "activity": "finding_speakers", "language": "ru", "progress": 0.7}
    assert shown("m.ogg", body) == ("m.ogg: finding speakers (ru)", 0.7)
    body = {"status": "submitted", "activity": "waiting_for_provider", "language": None, "progress": 0.5}
    assert shown("m.ogg", body) == ("m.ogg: waiting for the provider", 0.5)
    # A word this client does not know (a newer server) is shown as the stage.
    assert shown("m.ogg", {"status": "normalized", "activity": "thinking"})[0] == "m.ogg: normalized"


def test_the_readme_and_the_command_use_the_same_words() -> None:
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+?) \| [^|]+ \|$", README.read_text(), flags=re.MULTILINE)
    table = {name: words for name, words in rows if name in {a.value for a in Activity}}
    assert table == {a.value: WORDS[a] for a in Activity}


def test_without_a_terminal_each_change_is_one_plain_line() -> None:
    out = io.StringIO()
    lines = Lines(out)
    for sent in (0, 30_000, 65_536, 100_000, 131_072, 200_000):
        lines.uploading("a.ogg", sent, 200_000)
    lines.note("record: abc")
    for body in (
        {"status": "uploaded", "activity": "queued", "progress": None},
        {"status": "uploaded", "activity": "queued", "progress": None},  # nothing new: no line
        {"status": "normalized", "activity": "recognizing", "language": "en", "progress": 0.2},
        {"status": "normalized", "activity": "recognizing", "language": "en", "progress": 0.2041},  # same percent
        {"status": "normalized", "activity": "finding_speakers", "language": "en", "progress": 0.65},
        {"status": "done", "activity": "done", "language": "en", "progress": 1},
    ):
        lines.waiting("a.ogg", body)
    assert out.getvalue().splitlines() == [
        "a.ogg: uploading 0% (0 B of 200.0 KB)",
        "a.ogg: uploading 10% (30.0 KB of 200.0 KB)",
        "a.ogg: uploading 30% (65.5 KB of 200.0 KB)",
        "a.ogg: uploading 50% (100.0 KB of 200.0 KB)",
        "a.ogg: uploading 60% (131.1 KB of 200.0 KB)",
        "a.ogg: uploading 100% (200.0 KB of 200.0 KB)",
        "record: abc",
        "a.ogg: queued",
        "a.ogg: recognizing (en) 20%",
        "a.ogg: finding speakers (en) 65%",
        "a.ogg: done (en) 100%",
    ]


def test_a_terminal_gets_bars_and_anything_else_lines() -> None:
    assert isinstance(display_for(Console(file=io.StringIO(), force_terminal=True)), Bars)
    assert isinstance(display_for(Console(file=io.StringIO(), force_terminal=False)), Lines)
    out = io.StringIO()
    bars = Bars(Console(file=out, force_terminal=True, width=120))
    bars.uploading("meeting.flac", 512_000, 1_024_000)
    bars.note("record: abc")
    bars.waiting("meeting.flac", {"status": "submitted", "activity": "waiting_for_provider", "progress": 0.4})
    bars.close()
    shown_text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "meeting.flac: uploading" in shown_text and "/1.0 MB" in shown_text  # bytes sent of the size
    assert "record: abc" in shown_text
    assert "meeting.flac: waiting for the provider" in shown_text and "40%" in shown_text


def test_an_upload_is_read_in_chunks_and_counted(tmp_path: Path) -> None:
    """httpx streams a file object a chunk at a time: memory stays flat whatever the size."""
    import httpx

    path = tmp_path / "big.bin"
    path.write_bytes(bytes(range(256)) * 4096 * 3)  # 3 MiB
    counted: list[int] = []
    with path.open("rb") as fh:
        stream = httpx.Request(
            "POST",
            "http://x/",
            files={"file": ("big.bin", _Counted(fh, counted.append))},  # type: ignore[dict-item]
        ).stream
        assert isinstance(stream, httpx.SyncByteStream)
        sizes = [len(chunk) for chunk in stream]
    assert counted[-1] == path.stat().st_size and counted == sorted(counted) and len(counted) > 40
    assert max(sizes) <= 64 * 1024


def test_the_transcript_is_written_as_the_server_gave_it() -> None:
    out = io.BytesIO()
    write_transcript("Speaker 1: Привет.\n\nSpeaker 2: Hi.\n", out, terminal=False)
    assert out.getvalue() == "Speaker 1: Привет.\n\nSpeaker 2: Hi.\n".encode()
    out = io.BytesIO()
    write_transcript("no newline at the end", out, terminal=False)
    assert out.getvalue() == b"no newline at the end"
    out = io.BytesIO()
    write_transcript("no newline at the end", out, terminal=True)  # a shell prompt must not glue on
    assert out.getvalue() == b"no newline at the end\n"


@pytest.mark.parametrize(("fmt", "language"), [("docx", None), ("TXT", None), ("txt", "english"), ("txt", "")])
def test_a_wrong_format_or_language_is_a_usage_error(fmt: str, language: str | None) -> None:
    with pytest.raises(SenderError) as refused:
        check_options(fmt, language)
    assert refused.value.exit_code == 2


def test_the_formats_and_languages_the_server_takes_pass() -> None:
    for fmt in ("txt", "srt", "vtt", "json"):
        check_options(fmt, None)
    check_options("txt", "ru")
    check_options("srt", "yue")


def test_an_outage_is_noted_once_and_a_busy_server_is_asked_again_when_it_says() -> None:
    import httpx

    from sidecar.sender.client import Session, Unavailable, _retry_after

    out = io.StringIO()
    with Session("http://127.0.0.1:9", "a@example.com", "pw", Lines(out)) as session:
        assert session._outage_hook(Unavailable("server unreachable")) is True
        assert session._outage_hook(Unavailable("server answered 503")) is True
        assert session._outage_hook(Unavailable("server answered 429", retry_after=7.0)) == 7.0
        assert session._outage_hook(ValueError("a bug is not an outage")) is False
    assert out.getvalue() == "server unreachable, retrying…\n"  # once for the whole outage
    assert _retry_after(httpx.Response(429, headers={"Retry-After": "7"})) == 7.0
    assert _retry_after(httpx.Response(429, headers={"Retry-After": "86400"})) == 60.0  # never sleeps for a day
    assert _retry_after(httpx.Response(503)) is None
