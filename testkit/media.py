"""Small media files for intake tests, made on the spot (no decoding needed at intake)."""

from __future__ import annotations

import io
import math
import struct
import wave


def wav_bytes(seconds: float = 1.0, rate: int = 16000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        n = int(seconds * rate)
        w.writeframes(b"".join(struct.pack("<h", int(6000 * math.sin(i / 8))) for i in range(n)))
    return buf.getvalue()


# First bytes of containers that intake must recognise (the body after them
# does not matter to intake: decoding problems are the pipeline's to halt on).
CONTAINER_HEADS = {
    "flac": b"fLaC\x00\x00\x00\x22" + b"\x00" * 64,
    "ogg": b"OggS\x00\x02" + b"\x00" * 64,
    "mp3-id3": b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\x00" * 64,
    "mp3-frame": b"\xff\xfb\x90\x64" + b"\x00" * 64,
    "m4a": b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00" + b"\x00" * 64,
    "webm": b"\x1a\x45\xdf\xa3" + b"\x00" * 64,
    "aac-adts": b"\xff\xf1\x50\x80" + b"\x00" * 64,
}
