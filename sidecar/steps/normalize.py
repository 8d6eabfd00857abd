"""normalize (stage ``uploaded``): the original → the pieces the provider reads (LA1, LA2).

The original is decoded once to 16 kHz mono PCM (a temporary file: memory
stays flat whatever the length). Longer than ``[intake] max_duration`` is
too_long: at once when the container's header says so, else the moment the
decoded audio passes it (a header that says less is not trusted: past what
it declared, nothing more is written until decoding confirms the length).
The decoded length is then charged to the sender's daily audio in place of
what intake reserved; a recording that breaks the quota halts over_quota
before anything is cut or sent.
Voice activity detection finds the speech, once for the recording: the piece
plan cuts the recording where the provider's cap requires, in pauses; each
piece is encoded in the provider's format and stored as its own ``files`` row
(role ``normalized``, its place in the recording, how much speech it holds and
where: the offline engine decodes those regions without searching again).
The decoded length is stored on the record with the charge; every later step
reads it from there. A recording without
speech (silence, noise, a file of no samples) keeps no normalized copy: its
row says how long it is and that nothing in it is to be recognized (L5).
The original is never replaced. A retry finds the pieces already stored and
adds only the missing ones (the plan comes out the same on the same audio).

An original a browser cannot play (intake's verdict, ``browser_plays``: AMR,
AIFF, AU, Ogg/Speex, …; or unknown, stored before that was decided) gets a
playable copy here, once the quota has let the recording through: Ogg/Opus
made from the 16 kHz audio just decoded, stored as its own ``files`` row (role
``playable``) for the sender's page, and kept for good (the sweep of
normalized copies never takes it). A retry that finds it stored makes none.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from sidecar.media import audio, vad
from sidecar.media.audio import AudioSpec
from sidecar.media.pcm import PcmReader
from sidecar.media.pieces import Piece, PieceLimits, plan
from sidecar.outcome import Advance, HaltCode, PermanentError, StepResult
from sidecar.runtime.threads import run_in_thread, usable_cpus
from sidecar.steps.base import StepContext
from sidecar.storage.model import FileRole, FileRow, PiecePlace

_PCM = AudioSpec(format="wav_pcm16", sample_rate=16000, channels=1, bitrate=None)
# The copy a browser plays: Opus (tuned for speech) in Ogg, mono, from the 16 kHz audio decoded
# here anyway, so it costs only the encoding (README, "The sender's page": its time and size an hour).
PLAYABLE = AudioSpec(format="ogg_opus", sample_rate=16000, channels=1, bitrate=16000)


@dataclass(frozen=True)
class Cut:
    """One piece, ready to store (``path`` None: no speech in it, nothing to keep)."""

    path: Path | None
    format: str
    duration_ms: int
    place: PiecePlace
    source_channels: int = 0


async def run(ctx: StepContext) -> StepResult:
    stored = await ctx.session.files(FileRole.NORMALIZED)  # the rows are read once: the others below are free
    originals = await ctx.session.files(FileRole.ORIGINAL)
    copy_wanted = _copy_wanted(originals, await ctx.session.files(FileRole.PLAYABLE))
    complete = bool(stored) and _complete(stored)
    if complete and not copy_wanted:
        # A previous attempt stored every piece and died before advancing.
        return Advance(f"normalized audio already stored ({len(stored)} piece(s), {stored[0].format})")

    if not originals or not originals[0].blob:
        raise PermanentError(HaltCode.UNSUPPORTED_MEDIA, "the record has no original file")
    src = ctx.workdir / "original"
    await ctx.session.download(originals[0], src)

    spec, limit = ctx.provider.audio_spec, ctx.settings.intake.max_duration
    # In a thread, stopped promptly (and waited for) if the step is cancelled.
    full = await run_in_thread(lambda cancel: decode(src, ctx.workdir, limit, cancel))
    # H4: the true length replaces what intake reserved for the sender's day; a
    # recording that breaks the quota halts here, before any recognition.
    over = await ctx.session.charge_audio(full.duration_ms)
    if over is not None:
        raise PermanentError(HaltCode.OVER_QUOTA, over)
    made = ""
    if copy_wanted:
        copy = await run_in_thread(lambda cancel: playable_copy(full, ctx.workdir, cancel))
        await ctx.session.attach_file(
            copy.path, role=FileRole.PLAYABLE, format=copy.format, duration_ms=copy.duration_ms
        )
        made = f"; a copy a browser plays made ({copy.format}, {copy.size / 1000:.0f} kB)"
    if complete:
        return Advance(f"normalized audio already stored ({len(stored)} piece(s), {stored[0].format}){made}")
    cuts = await run_in_thread(lambda cancel: split(full, ctx.workdir, spec, cancel))
    have = {f.piece for f in stored}
    for c in cuts:
        if c.place.piece not in have:
            await ctx.session.attach_file(
                c.path, role=FileRole.NORMALIZED, format=c.format, duration_ms=c.duration_ms, place=c.place
            )
    total_ms = full.duration_ms
    speech_s = sum(c.place.speech_ms for c in cuts) / 1000
    channels = cuts[0].source_channels
    mixed = f" ({channels} channels mixed into one)" if channels > 2 else ""
    if cuts[0].path is None:
        held = "the audio track holds no samples" if total_ms == 0 else f"{total_ms / 1000:.1f} s"
        return Advance(f"no speech found in {held}{mixed}: nothing to recognize, no normalized copy kept{made}")
    return Advance(
        f"normalized to {cuts[0].format}: {total_ms / 1000:.1f} s in {len(cuts)} piece(s), "
        f"{speech_s:.1f} s of speech{mixed}{made}"
    )


def _copy_wanted(originals: list[FileRow], playable: list[FileRow]) -> bool:
    """Whether this recording needs a playable copy: its original is not known to play in a browser
    (intake said no, or it was stored before intake said), and no copy is stored yet."""
    return bool(originals) and originals[0].browser_plays != "yes" and not playable


def playable_copy(full: audio.Normalized, workdir: Path, cancel: threading.Event) -> audio.Normalized:
    """The decoded recording as the copy a browser plays (``PLAYABLE``'s form; blocking)."""
    with PcmReader(full.path) as pcm:
        return audio.encode_pcm(pcm, 0, pcm.frames, workdir / "playable.ogg", PLAYABLE, cancel=cancel)


def cut(src: Path, workdir: Path, spec: AudioSpec, limit: timedelta, cancel: threading.Event) -> list[Cut]:
    """The original as pieces in ``spec``'s form (blocking: run it in a thread)."""
    return split(decode(src, workdir, limit, cancel), workdir, spec, cancel)


def decode(src: Path, workdir: Path, limit: timedelta, cancel: threading.Event) -> audio.Normalized:
    """The original decoded once to 16 kHz mono PCM, refused past ``limit`` (blocking)."""
    return audio.normalize(
        src, workdir / "full.wav", AudioSpec(**{**_PCM.__dict__, "max_duration": limit}), cancel=cancel
    )


def split(full: audio.Normalized, workdir: Path, spec: AudioSpec, cancel: threading.Event) -> list[Cut]:
    """The decoded recording as pieces in ``spec``'s form, cut in pauses (blocking)."""
    with PcmReader(full.path) as pcm:
        regions, total = vad.find_speech_in_blocks(_watched(pcm.blocks(vad.BLOCK_SECONDS), cancel), usable_cpus())
        channels = full.source_channels
        if not regions:
            # Nothing to recognize, never sent anywhere: nothing of it is kept but its length.
            return [Cut(None, spec.format, full.duration_ms, PiecePlace(0, 1, 0, 0), channels)]
        seconds = spec.piece_seconds()
        pieces = plan(regions, total, PieceLimits(max_seconds=seconds or float(total)))
        cuts = []
        for p in pieces:
            place = PiecePlace(p.index, len(pieces), p.offset_ms, p.speech_ms(regions), _speech_in(p, regions))
            if len(pieces) == 1 and (spec.format, spec.sample_rate, spec.channels) == ("wav_pcm16", 16000, 1):
                # already what the provider reads
                cuts.append(Cut(full.path, spec.format, full.duration_ms, place, channels))
                continue
            dst = workdir / f"piece-{p.index}.{audio.FORMATS[spec.format].extension}"
            made = audio.encode_pcm(pcm, p.start, p.end, dst, spec, cancel=cancel)
            cuts.append(Cut(made.path, spec.format, made.duration_ms, place, channels))
        return cuts


def _watched(blocks: Iterator[npt.NDArray[np.float32]], cancel: threading.Event) -> Iterator[npt.NDArray[np.float32]]:
    for block in blocks:
        if cancel.is_set():
            raise audio.NormalizeCancelled("normalization was cancelled")
        yield block


def _complete(stored: list[FileRow]) -> bool:
    return {f.piece for f in stored} == set(range(stored[0].pieces))


def _speech_in(piece: Piece, regions: list[vad.Region]) -> tuple[tuple[int, int], ...]:
    """The regions inside ``piece``, cut to it, in ms from its start (start rounded down, end up)."""
    per_ms = vad.SAMPLE_RATE // 1000
    inside = []
    for r in regions:
        start, end = max(r.start, piece.start) - piece.start, min(r.end, piece.end) - piece.start
        if end > start:
            inside.append((start // per_ms, -(-end // per_ms)))
    return tuple(inside)
