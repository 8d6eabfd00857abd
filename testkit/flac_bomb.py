"""Decompression bombs: small files that decode to hundreds of hours.

``write_flac_bomb`` is a raw FLAC file whose every frame is one CONSTANT
subframe (a single 16-bit zero standing for 65,535 samples), about 15 bytes
for eight seconds at 8 kHz. Its STREAMINFO leaves the total length unset,
so only decoding tells how long the audio is, or (``declared_seconds``)
states a length the frames do not keep to.

The lying-header shapes (``LYING``) each declare a short length and hold
far more:

* raw FLAC, STREAMINFO's total samples saying ``declared_seconds``;
* Matroska holding those FLAC frames, its Segment Info ``Duration`` saying it;
* Ogg holding those FLAC frames, the granule positions (from which a reader
  takes an Ogg stream's length) saying it;
* Ogg/Opus of 120 ms packets of silence (two bytes each), the granule
  positions saying it.

Written byte by byte from the format descriptions (FLAC, RFC 9639; Matroska's
EBML, RFC 8794; Ogg, RFC 3533; Ogg/Opus, RFC 7845), since no encoder makes
such a file on purpose.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = [
    "LYING",
    "write_flac_bomb",
    "write_matroska_flac_bomb",
    "write_ogg_flac_bomb",
    "write_ogg_opus_bomb",
]

BLOCK = 65535  # the largest FLAC block: the fewest bytes per second of audio
FLAC_RATE = 8000


def write_flac_bomb(path: Path, hours: float, *, rate: int = FLAC_RATE, declared_seconds: float | None = None) -> Path:
    """Raw FLAC of ``hours`` of silence; STREAMINFO's length unset, or ``declared_seconds``."""
    declared = round(declared_seconds * rate) if declared_seconds is not None else 0
    out = bytearray(b"fLaC" + _metadata_block(0, _streaminfo(rate, declared), last=True))
    for frame in _flac_frames(hours, rate):
        out += frame
    path.write_bytes(bytes(out))
    return path


def write_matroska_flac_bomb(path: Path, hours: float, *, rate: int = FLAC_RATE, declared_seconds: float = 1.0) -> Path:
    """Matroska holding ``hours`` of FLAC frames; its Duration says ``declared_seconds``."""
    # One timestamp tick is a second: a cluster's blocks may lie 32,767 ticks
    # from its start, so a few hundred clusters hold a hundred hours.
    tick_ns = 1_000_000_000
    doc = _uint(0x4286, 1) + _uint(0x42F7, 1) + _uint(0x42F2, 4) + _uint(0x42F3, 8)
    header = _ebml(0x1A45DFA3, doc + _ebml(0x4282, b"matroska") + _uint(0x4287, 4) + _uint(0x4285, 2))
    duration = _ebml(0x4489, struct.pack(">d", declared_seconds))
    info = _ebml(0x1549A966, _uint(0x2AD7B1, tick_ns) + duration + _ebml(0x4D80, b"bomb") + _ebml(0x5741, b"bomb"))
    private = b"fLaC" + _metadata_block(0, _streaminfo(rate, 0), last=True)
    audio = _ebml(0xE1, _ebml(0xB5, struct.pack(">d", float(rate))) + _uint(0x9F, 1) + _uint(0x6264, 16))
    kind = _uint(0xD7, 1) + _uint(0x73C5, 1) + _uint(0x83, 2) + _ebml(0x86, b"A_FLAC")
    track = _ebml(0xAE, kind + _ebml(0x63A2, private) + audio)
    out = bytearray(header)
    out += _id(0x18538067) + b"\x01\xff\xff\xff\xff\xff\xff\xff"  # Segment of unknown size
    out += info + _ebml(0x1654AE6B, track)
    cluster = bytearray()
    cluster_start = 0
    samples = 0
    for frame in _flac_frames(hours, rate):
        tick = samples // rate
        if tick - cluster_start > 30_000 or not cluster:
            if cluster:
                out += _ebml(0x1F43B675, bytes(cluster))
            cluster_start = tick
            cluster = bytearray(_uint(0xE7, cluster_start))
        # SimpleBlock: track 1, timestamp relative to the cluster, keyframe
        cluster += _ebml(0xA3, b"\x81" + struct.pack(">hB", tick - cluster_start, 0x80) + frame)
        samples += BLOCK
    out += _ebml(0x1F43B675, bytes(cluster))
    path.write_bytes(bytes(out))
    return path


def write_ogg_flac_bomb(path: Path, hours: float, *, rate: int = FLAC_RATE, declared_seconds: float = 1.0) -> Path:
    """Ogg holding ``hours`` of FLAC frames; its granule positions say ``declared_seconds``."""
    vendor = b"flac-bomb"
    comments = struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", 0)
    first = b"\x7fFLAC\x01\x00" + struct.pack(">H", 1) + b"fLaC" + _metadata_block(0, _streaminfo(rate, 0))
    headers = [first, _metadata_block(4, comments, last=True)]
    _write_ogg(path, headers, _flac_frames(hours, rate), round(declared_seconds * rate))
    return path


def write_ogg_opus_bomb(path: Path, hours: float, *, declared_seconds: float = 1.0) -> Path:
    """Ogg/Opus of ``hours`` of silence in 120 ms packets; its granule positions say ``declared_seconds``."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, 0, 48000, 0, 0)
    vendor = b"opus-bomb"
    tags = b"OpusTags" + struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", 0)
    # TOC: CELT-only fullband 20 ms frames (config 31), code 3; then 6 frames, constant size, no padding:
    # the packet's two bytes are all there is, so each frame is empty (decoded as silence).
    packet = bytes([31 << 3 | 3, 6])
    count = -(-int(hours * 3600 * 1000) // 120)
    _write_ogg(path, [head, tags], (packet for _ in range(count)), round(declared_seconds * 48000), same=True)
    return path


# The four shapes the issue names, each declaring one second: name → (suffix, writer(path, hours)).
LYING: dict[str, tuple[str, Callable[[Path, float], Path]]] = {
    "flac": (".flac", lambda p, h: write_flac_bomb(p, h, declared_seconds=1.0)),
    "matroska-flac": (".mka", lambda p, h: write_matroska_flac_bomb(p, h)),
    "ogg-flac": (".oga", lambda p, h: write_ogg_flac_bomb(p, h)),
    "ogg-opus": (".opus", lambda p, h: write_ogg_opus_bomb(p, h)),
}


# --- FLAC -----------------------------------------------------------------------


def _streaminfo(rate: int, total_samples: int) -> bytes:
    # block sizes, unknown frame sizes, rate / mono / 16 bits / total samples, no MD5
    info = struct.pack(">HH", BLOCK, BLOCK) + bytes(6)
    return info + ((rate << 44) | (0 << 41) | (15 << 36) | total_samples).to_bytes(8, "big") + bytes(16)


def _metadata_block(kind: int, body: bytes, *, last: bool = False) -> bytes:
    return bytes([kind | (0x80 if last else 0)]) + len(body).to_bytes(3, "big") + body


def _flac_frames(hours: float, rate: int) -> Iterator[bytes]:
    for number in range(-(-int(hours * 3600 * rate) // BLOCK)):
        # sync + fixed blocking; block size in 16 bits after the header; rate from STREAMINFO;
        # mono, 16 bits; the frame number UTF-8 coded
        header = bytes([0xFF, 0xF8, 0x70, 0x08]) + _utf8_number(number) + struct.pack(">H", BLOCK - 1)
        header += bytes([_crc8(header)])
        frame = header + b"\x00\x00\x00"  # CONSTANT subframe, value 0
        yield frame + struct.pack(">H", _crc16(frame))


def _utf8_number(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    for length, lead in ((2, 0xC0), (3, 0xE0), (4, 0xF0), (5, 0xF8), (6, 0xFC)):
        if n < 1 << (5 * length + 1):
            tail = [0x80 | (n >> (6 * i) & 0x3F) for i in range(length - 1)]
            return bytes([lead | n >> (6 * (length - 1)), *tail[::-1]])
    raise ValueError(f"frame number {n} does not fit")


def _table(poly: int, width: int) -> list[int]:
    top, mask = 1 << (width - 1), (1 << width) - 1
    table = []
    for byte in range(256):
        crc = byte << (width - 8)
        for _ in range(8):
            crc = (crc << 1 ^ poly) & mask if crc & top else crc << 1 & mask
        table.append(crc)
    return table


_CRC8 = _table(0x07, 8)
_CRC16 = _table(0x8005, 16)
_CRC32 = _table(0x04C11DB7, 32)


def _crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = _CRC8[crc ^ byte]
    return crc


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = (crc << 8 & 0xFFFF) ^ _CRC16[(crc >> 8) ^ byte]
    return crc


def _crc32(data: bytes, crc: int = 0) -> int:
    for byte in data:
        crc = (crc << 8 & 0xFFFFFFFF) ^ _CRC32[(crc >> 24) ^ byte]
    return crc


# --- Matroska (EBML) ----------------------------------------------------------------


def _id(element: int) -> bytes:
    return element.to_bytes((element.bit_length() + 7) // 8, "big")


def _size(n: int) -> bytes:
    for length in range(1, 9):
        if n < (1 << (7 * length)) - 1:
            return (n | 1 << (7 * length)).to_bytes(length, "big")
    raise ValueError(f"element of {n} bytes")


def _ebml(element: int, body: bytes) -> bytes:
    return _id(element) + _size(len(body)) + body


def _uint(element: int, value: int) -> bytes:
    return _ebml(element, value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big"))


# --- Ogg ------------------------------------------------------------------------


def _write_ogg(
    path: Path, headers: list[bytes], packets: Iterator[bytes], declared: int, *, same: bool = False
) -> None:
    """One logical stream: each header packet on a page of its own, then the packets, 255 to a page.

    Every audio page's granule position creeps towards ``declared``, the last
    one's reaching it: the stream reads as ``declared`` samples long. With
    ``same`` (every packet identical), a full page's CRC is computed from its
    27-byte header alone (the CRC is linear, the rest never changes).
    """
    serial = 0x0B0B
    with path.open("wb") as out:
        for seq, packet in enumerate(headers):
            out.write(_page(0x02 if seq == 0 else 0, 0, serial, seq, [packet]))
        seq = len(headers)
        batch: list[bytes] = []
        pages: list[list[bytes]] = []
        # Pages are written one behind, so the last can carry the end-of-stream flag.
        fast: tuple[bytes, int, int] | None = None
        for packet in packets:
            batch.append(packet)
            if len(batch) == 255:
                pages.append(batch)
                batch = []
            if len(pages) == 2:
                page = pages.pop(0)
                granule = min(declared - 1, seq)
                if same:
                    if fast is None:
                        fast = _fast_page(page, serial)
                    out.write(_fast(fast, granule, seq))
                else:
                    out.write(_page(0, granule, serial, seq, page))
                seq += 1
        if batch:
            pages.append(batch)
        for i, page in enumerate(pages):
            last = i == len(pages) - 1
            out.write(_page(0x04 if last else 0, declared if last else min(declared - 1, seq), serial, seq, page))
            seq += 1


def _page_header(flags: int, granule: int, serial: int, seq: int, lacing: bytes, crc: int = 0) -> bytes:
    return b"OggS" + struct.pack("<BBqIIIB", 0, flags, granule, serial, seq, crc, len(lacing)) + lacing


def _page(flags: int, granule: int, serial: int, seq: int, packets: list[bytes]) -> bytes:
    lacing = bytearray()
    for packet in packets:
        lacing += b"\xff" * (len(packet) // 255) + bytes([len(packet) % 255])
    body = b"".join(packets)
    crc = _crc32(body, _crc32(_page_header(flags, granule, serial, seq, bytes(lacing))))
    return _page_header(flags, granule, serial, seq, bytes(lacing), crc) + body


def _fast_page(packets: list[bytes], serial: int) -> tuple[bytes, int, int]:
    """A page of identical content: (its lacing and body, their CRC alone, their length)."""
    lacing = bytearray()
    for packet in packets:
        lacing += bytes([len(packet)])
    rest = bytes(lacing) + b"".join(packets)
    return rest, _crc32(rest), len(rest)


def _fast(page: tuple[bytes, int, int], granule: int, seq: int) -> bytes:
    rest, rest_crc, length = page
    head = b"OggS" + struct.pack("<BBqIIIB", 0, 0, granule, 0x0B0B, seq, 0, 255)
    crc = _shift(_crc32(head), length) ^ rest_crc
    return head[:22] + struct.pack("<I", crc) + head[26:] + rest


_SHIFTS: dict[int, list[list[int]]] = {}


def _shift(crc: int, zeros: int) -> int:
    """The CRC of a message followed by ``zeros`` zero bytes, from the message's CRC."""
    tables = _SHIFTS.get(zeros)
    if tables is None:
        tables = [[_crc32(bytes(zeros), b << (8 * i)) for b in range(256)] for i in range(4)]
        _SHIFTS[zeros] = tables
    return (
        tables[0][crc & 0xFF] ^ tables[1][crc >> 8 & 0xFF] ^ tables[2][crc >> 16 & 0xFF] ^ tables[3][crc >> 24 & 0xFF]
    )
