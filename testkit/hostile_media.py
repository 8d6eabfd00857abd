"""Hostile container headers for intake's parsers: valid seeds and what a stranger makes of them.

Every container whose header intake reads (``pb_hooks/lib/media.js``) gets a small valid seed made with
PyAV (or, where no encoder is at hand, built here), and the length fields of that header are found by a
walk of its structure (RIFF/AIFF chunks, MP4 boxes, EBML elements, Ogg pages, FLAC blocks, ID3 and .au
sizes), so that a mutation can set exactly those fields to the values a header must not be trusted with.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from testkit.audio import write_audio

# The values a length field is set to: none of them may make intake loop, read or wait for more
# than the file holds.
HUGE = (0, 1, 7, 2**31 - 1, 2**32 - 1, 2**56, 2**63 - 1, 2**64 - 1)


@dataclass(frozen=True)
class Field:
    """A length field of a header: ``width`` bytes at ``at``, in ``kind`` ("be", "le", "vint", "synchsafe")."""

    at: int
    width: int
    kind: str


def _ogg_page(serial: int, sequence: int, granule: int, packet: bytes, flags: int = 0) -> bytes:
    """One Ogg page holding ``packet`` (its CRC left zero: intake reads no CRC)."""
    lacing = [255] * (len(packet) // 255) + [len(packet) % 255]
    return (
        b"OggS"
        + bytes([0, flags])
        + struct.pack("<qII", granule, serial, sequence)
        + b"\0\0\0\0"
        + bytes([len(lacing), *lacing])
        + packet
    )


def _ogg_with(first_packet: bytes, rate: int, seconds: float) -> bytes:
    """An Ogg stream whose first packet is ``first_packet`` and whose last page ends at ``seconds``."""
    body = b"\0" * 400
    return (
        _ogg_page(7, 0, 0, first_packet, flags=2)
        + _ogg_page(7, 1, 0, body)
        + _ogg_page(7, 2, round(rate * seconds), body, flags=4)
    )


def vorbis_ogg() -> bytes:
    ident = b"\x01vorbis" + struct.pack("<IBIiii", 0, 1, 16000, 0, 32000, 0) + b"\xb8\x01"
    return _ogg_with(ident, 16000, 1.5)


def speex_ogg() -> bytes:
    fields = (1, 80, 16000, 1, 4, 1, -1, 320, 0, 0, 0, 0)  # version id, header size, rate, mode, …
    head = b"Speex   " + b"1.2".ljust(20, b"\0") + struct.pack("<12i", *fields)
    return _ogg_with(head, 16000, 1.5)


def amr_nb() -> bytes:
    """AMR narrow band: the magic, then 20 ms frames of mode 7 (32 bytes each, header byte 0x3c)."""
    return b"#!AMR\n" + (b"\x3c" + b"\x00" * 31) * 50


def hostile_matroska(scale_length: int = 10**8, info_sized: bool = True) -> bytes:
    """The 300-byte Matroska that once pinned a core: a TimecodeScale that declares ``scale_length`` bytes.

    An EBML header (webm), a Segment of unknown size, and an Info (of 15 bytes, or of unknown size)
    whose TimecodeScale's size is an 8-byte vint of ``scale_length``; padded with a Void to 300 bytes.
    An intake that trusts that size loops ``scale_length`` times (10^8: about 35 s of a core).
    """

    def el(ident: bytes, body: bytes) -> bytes:
        return ident + bytes([0x80 | len(body)]) + body

    ebml = el(
        b"\x1a\x45\xdf\xa3",
        el(b"\x42\x86", b"\x01")
        + el(b"\x42\xf7", b"\x01")
        + el(b"\x42\xf2", b"\x04")
        + el(b"\x42\xf3", b"\x08")
        + el(b"\x42\x82", b"webm")
        + el(b"\x42\x87", b"\x04")
        + el(b"\x42\x85", b"\x02"),
    )
    segment = b"\x18\x53\x80\x67" + b"\x01" + b"\xff" * 7
    scale = b"\x2a\xd7\xb1" + b"\x01" + scale_length.to_bytes(7, "big") + b"\x0f\x42\x40"
    info_size = bytes([0x80 | len(scale)]) if info_sized else b"\x01" + b"\xff" * 7
    info = b"\x15\x49\xa9\x66" + info_size + scale
    head = ebml + segment + info
    pad = 300 - len(head) - 2
    out = head + b"\xec" + bytes([0x80 | pad]) + b"\0" * pad
    assert len(out) == 300
    return out


def _tone(name: str, **how: object) -> Callable[[Path], bytes]:
    """Half a second of tone in ``name`` (its suffix picks the container), as written by PyAV."""
    return lambda d: write_audio(d / name, 0.5, channels=1, **how).read_bytes()  # type: ignore[arg-type]


# The seeds: a small valid file of each container whose header intake reads, by name.
SEEDS: dict[str, Callable[[Path], bytes]] = {
    "wav": _tone("a.wav", codec="pcm_s16le", rate=8000),
    "flac": _tone("a.flac", codec="flac", rate=8000),
    "ogg-opus": _tone("a.ogg", codec="libopus", rate=48000),
    "ogg-flac": _tone("a.oga", codec="flac", rate=8000, container="ogg"),
    "ogg-vorbis": lambda d: vorbis_ogg(),
    "ogg-speex": lambda d: speex_ogg(),
    "mp3": _tone("a.mp3", codec="libmp3lame", rate=16000, bit_rate=32000),
    "m4a": _tone("a.m4a", codec="aac", rate=16000),
    "mp4": _tone("a.mp4", codec="aac", rate=16000, video=True),
    "webm": _tone("a.webm", codec="libopus", rate=48000),
    "mkv": _tone("a.mkv", codec="flac", rate=8000),
    "aiff": _tone("a.aiff", codec="pcm_s16be", rate=8000),
    "au": _tone("a.au", codec="pcm_s16be", rate=8000, container="au"),
    "amr": lambda d: amr_nb(),
    "matroska-300": lambda d: hostile_matroska(8),
}


def make_seeds(where: Path) -> dict[str, bytes]:
    """Every seed, made under ``where``; an RF64 and a bare MPEG stream derived from the WAV and the MP3."""
    seeds = {name: make(where) for name, make in SEEDS.items()}
    wav = seeds["wav"]
    seeds["rf64"] = b"RF64" + b"\xff\xff\xff\xff" + wav[8:]
    mp3 = seeds["mp3"]
    assert mp3[:3] == b"ID3"
    tag = 10 + ((mp3[6] & 0x7F) << 21 | (mp3[7] & 0x7F) << 14 | (mp3[8] & 0x7F) << 7 | (mp3[9] & 0x7F))
    seeds["mpeg-audio"] = mp3[tag:]
    return seeds


# ---------------------------------------------------------------------------
# Where each header keeps its lengths.

HEAD = 64 * 1024


def _chunks(data: bytes, start: int, order: str) -> Iterator[Field]:
    at = start
    while at + 8 <= min(len(data), HEAD):
        yield Field(at + 4, 4, order)
        size = int.from_bytes(data[at + 4 : at + 8], "little" if order == "le" else "big")
        at += 8 + size + size % 2


_MP4_PARENTS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"udta", b"edts", b"dinf"}


def _boxes(data: bytes, start: int, end: int) -> Iterator[Field]:
    at = start
    while at + 8 <= min(end, len(data)):
        size = int.from_bytes(data[at : at + 4], "big")
        kind = data[at + 4 : at + 8]
        yield Field(at, 4, "be")
        head = 8
        if size == 1:
            yield Field(at + 8, 8, "be")
            size, head = int.from_bytes(data[at + 8 : at + 16], "big"), 16
        elif size == 0:
            size = len(data) - at
        if size < head:
            return
        if kind in _MP4_PARENTS:
            yield from _boxes(data, at + head, at + size)
        elif kind == b"stsd":
            yield from _boxes(data, at + head + 8, at + size)
        at += size


_EBML_MASTERS = {0x1A45DFA3, 0x18538067, 0x1549A966, 0x1654AE6B, 0xAE, 0x114D9B74, 0x4DBB, 0x1F43B675}


def _vint(data: bytes, at: int) -> tuple[int, int, bool]:
    """(value without its marker, width, all ones) of the vint at ``at``."""
    first = data[at]
    width = 1
    while width <= 8 and not first & (0x80 >> (width - 1)):
        width += 1
    if width > 8 or at + width > len(data):
        raise ValueError("no vint")
    value = first & (0xFF >> width)
    ones = value == 0xFF >> width
    for k in range(1, width):
        value = value * 256 + data[at + k]
        ones = ones and data[at + k] == 0xFF
    return value, width, ones


def _elements(data: bytes, start: int, end: int) -> Iterator[Field]:
    at = start
    while at < min(end, len(data), HEAD):
        try:
            _, id_width, _ = _vint(data, at)
            ident = int.from_bytes(data[at : at + id_width], "big")
            size, size_width, unknown = _vint(data, at + id_width)
        except (ValueError, IndexError):
            return
        yield Field(at + id_width, size_width, "vint")
        body = at + id_width + size_width
        if ident in _EBML_MASTERS:
            yield from _elements(data, body, len(data) if unknown else body + size)
            if unknown or ident == 0x18538067:
                return
        at = body + size


def _ogg_pages(data: bytes) -> Iterator[Field]:
    at = 0
    while at + 27 <= len(data) and data[at : at + 4] == b"OggS":
        yield Field(at + 6, 8, "le")  # the granule position: a length in samples
        yield Field(at + 26, 1, "le")  # the segment count
        segments = data[at + 26]
        yield from (Field(at + 27 + k, 1, "le") for k in range(min(segments, 4)))
        at += 27 + segments + sum(data[at + 27 : at + 27 + segments])


def length_fields(data: bytes) -> list[Field]:
    """The length fields of ``data``'s header (the first 64 KB), by its container."""
    magic = data[:4]
    if magic in (b"RIFF", b"RF64"):
        return [Field(4, 4, "le"), *_chunks(data, 12, "le")]
    if magic == b"FORM":
        return [Field(4, 4, "be"), *_chunks(data, 12, "be")]
    if data[4:8] == b"ftyp":
        return list(_boxes(data, 0, len(data)))
    if magic == b"\x1a\x45\xdf\xa3":
        return list(_elements(data, 0, len(data)))
    if magic == b"OggS":
        return list(_ogg_pages(data))
    if magic == b"fLaC":
        return [Field(5, 3, "be"), Field(8 + 13, 5, "be")]  # a block's length; STREAMINFO's total samples
    if magic == b".snd":
        return [Field(4, 4, "be"), Field(8, 4, "be")]
    if data[:3] == b"ID3":
        return [Field(6, 4, "synchsafe")]
    return []


def set_field(data: bytes, field: Field, value: int) -> bytes:
    """``data`` with ``field`` saying ``value``: truncated to the field's width, or, for an EBML size or
    a 4-byte MP4 box size too small for it, written in the wider form (a vint of 8 bytes; a largesize)."""
    head, tail = data[: field.at], data[field.at + field.width :]
    if field.kind == "vint":
        if value >= 2**56 - 1:
            return head + b"\x01" + b"\xff" * 7 + tail  # the largest an 8-byte size says: unknown
        return head + b"\x01" + value.to_bytes(7, "big") + tail
    if field.kind == "synchsafe":
        v = min(value, 2**28 - 1)
        return head + bytes([(v >> 21) & 0x7F, (v >> 14) & 0x7F, (v >> 7) & 0x7F, v & 0x7F]) + tail
    limit = (1 << (8 * field.width)) - 1
    if value > limit and field.kind == "be" and field.width == 4 and data[field.at + 4 : field.at + 8].isascii():
        # an MP4 box: size 1, then a 64-bit size after the type
        box_type = data[field.at + 4 : field.at + 8]
        return head + b"\0\0\0\x01" + box_type + min(value, 2**64 - 1).to_bytes(8, "big") + data[field.at + 8 :]
    order: Literal["little", "big"] = "little" if field.kind == "le" else "big"
    return head + min(value, limit).to_bytes(field.width, order) + tail
