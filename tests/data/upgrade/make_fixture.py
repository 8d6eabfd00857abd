"""Makes the upgrade fixture: a data directory written by a release's own code, with records in
every stage, a halted one, one in flight (claimed, its worker gone), pieces, speakers and an
owner's correction. The upgrade test starts the current code on a copy of it.

Run it with the OLD release's code first on the path (its migrations and hooks are found beside
its package), from this checkout's virtualenv:

    git worktree add /tmp/transcriber-0.1.0 v0.1.0
    PYTHONPATH=/tmp/transcriber-0.1.0 .venv/bin/python tests/data/upgrade/make_fixture.py \
        tests/data/upgrade/v0.1.0.tar.gz

It uses only what that release's sidecar offered (settings, process, service.pipeline, the
runner, the instant and offline providers), so it runs against it unchanged.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
from pydantic import SecretStr
from sidecar.audio import AudioSpec  # type: ignore[import-untyped]  # v0.1.0 had it here (this runs on that release)

from sidecar.pocketbase import process
from sidecar.providers.instant import InstantProvider
from sidecar.serving.assembly import default_steps, make_provider, pipeline
from sidecar.settings import Settings

HERE = Path(__file__).resolve().parent
DATA = HERE.parent
OWNER, PASSWORD = "owner@example.com", "correct-horse-battery"
SENDER = "ann@example.com"
LEASE = timedelta(minutes=2)
# A valid Ogg page header, then garbage: intake accepts it, normalize halts it.
UNDECODABLE = b"OggS\x00\x02" + bytes(range(256)) * 40


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _speech(rounds: int) -> bytes:
    """The six committed English clips, ``rounds`` times over, with short pauses, as Ogg/Opus (small)."""
    from sidecar.audio import normalize

    from testkit.audio import compose_wav

    clips = sorted((DATA / "speech").glob("*.ogg"))
    with tempfile.TemporaryDirectory() as tmp:
        wav = compose_wav([p for _ in range(rounds) for c in clips for p in (c, 0.6)], Path(tmp) / "speech.wav")
        normalize(wav, Path(tmp) / "speech.ogg", AudioSpec(format="ogg_opus", bitrate=24000))
        return Path(tmp, "speech.ogg").read_bytes()


def _clip(seconds: int) -> bytes:
    """A few seconds of the committed English speech (first clip, cut), as WAV."""
    import av

    out = tempfile.NamedTemporaryFile(suffix=".wav", delete=False)
    out.close()
    src = sorted((DATA / "speech").glob("*.ogg"))[0]
    with av.open(str(src)) as inp, av.open(out.name, "w", format="wav") as dst:
        stream = dst.add_stream("pcm_s16le", rate=16000)
        stream.layout = "mono"
        resampler = av.AudioResampler(format="s16", layout="mono", rate=16000)
        samples = 0
        for frame in inp.decode(audio=0):
            for f in resampler.resample(frame):
                if samples >= seconds * 16000:
                    break
                f.pts = samples
                samples += f.samples
                for packet in stream.encode(f):
                    dst.mux(packet)
        for packet in stream.encode(None):
            dst.mux(packet)
    data = Path(out.name).read_bytes()
    Path(out.name).unlink()
    return data


async def _steps(settings: Settings, provider: Any, plan: list[tuple[str, int]]) -> None:
    """Claims and runs, stage by stage, as many records as ``plan`` says (oldest first)."""
    async with pipeline(settings, steps=default_steps(), provider=provider) as pool:
        runner = pool.runner
        for stage, count in plan:
            for _ in range(count):
                got = await runner.storage.claim({stage: LEASE})
                assert not hasattr(got, "next_at_ms"), f"nothing to claim in {stage}"
                await runner.run(got)


async def _claim_only(settings: Settings, stage: str) -> None:
    """A record claimed and its worker gone (killed): in flight, its lease running out."""
    async with pipeline(settings, steps=default_steps(), provider=InstantProvider()) as pool:
        got = await pool.runner.storage.claim({stage: LEASE})
        assert not hasattr(got, "next_at_ms")


def main(out: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="transcriber-fixture-"))
    data = root / "pb_data"
    port = _free_port()
    settings = Settings()
    settings.pocketbase.data_dir = data
    settings.pocketbase.http = f"127.0.0.1:{port}"
    settings.pocketbase.url = f"http://127.0.0.1:{port}"
    settings.pocketbase.superuser_email = OWNER
    settings.pocketbase.superuser_password = SecretStr(PASSWORD)
    settings.pipeline.workers = 1
    settings.quotas.uploads_per_hour = settings.quotas.waiting = 0
    settings.quotas.audio_hours_per_day = 0
    process.prepare(settings)
    proc = process.start(settings, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait_healthy(settings.pocketbase.url, proc)
        url = settings.pocketbase.url
        su = httpx.Client(base_url=url, timeout=60)
        su.headers["Authorization"] = su.post(
            "/api/collections/_superusers/auth-with-password", json={"identity": OWNER, "password": PASSWORD}
        ).json()["token"]
        su.post(
            "/api/collections/users/records",
            json={"email": SENDER, "password": PASSWORD, "passwordConfirm": PASSWORD, "verified": True},
        ).raise_for_status()
        sender = httpx.Client(base_url=url, timeout=60)
        sender.headers["Authorization"] = sender.post(
            "/api/collections/users/auth-with-password", json={"identity": SENDER, "password": PASSWORD}
        ).json()["token"]

        def upload(title: str, body: bytes, name: str = "a.wav") -> str:
            resp = sender.post("/api/transcriber/records", files={"file": (name, body)}, data={"title": title})
            resp.raise_for_status()
            return str(resp.json()["id"])

        ids: dict[str, str] = {}
        # Speakers: the offline engine with the diarize extra, a committed two-voice dialogue, to done.
        dialogue = (DATA / "dialogues" / "en_2speakers.ogg").read_bytes()
        ids["speakers"] = upload("two voices", dialogue, "dialogue.ogg")
        offline = make_provider(settings, "offline")
        anyio.run(_steps, settings, offline, [("uploaded", 1), ("normalized", 1), ("submitted", 1), ("transcribed", 1)])
        # Pieces: a provider that takes at most 30 s at a time, a minute and a half of speech, to done.
        ids["pieces"] = upload("in pieces", _speech(rounds=4), "speech.ogg")
        spec = AudioSpec(format="ogg_opus", bitrate=24000, max_piece=timedelta(seconds=30))
        small = InstantProvider(audio_spec=spec)
        anyio.run(_steps, settings, small, [("uploaded", 1), ("normalized", 1), ("submitted", 1), ("transcribed", 1)])
        # The rest, in creation order: whoever goes further is older than whoever stays behind.
        clip = _clip(2)
        for name in ("done", "corrected", "transcribed", "submitted", "in_flight", "normalized"):
            ids[name] = upload(name, clip)
        ids["halted"] = upload("halted", UNDECODABLE, "broken.ogg")
        ids["uploaded"] = upload("uploaded", clip)
        instant = InstantProvider()
        anyio.run(_steps, settings, instant, [("uploaded", 7), ("normalized", 4), ("submitted", 3), ("transcribed", 2)])
        anyio.run(_claim_only, settings, "normalized")
        # The owner corrects a finished transcript in the panel.
        text = su.get("/api/collections/texts/records", params={"filter": f'record = "{ids["corrected"]}"'}).json()
        row = text["items"][0]
        su.patch(f"/api/collections/texts/records/{row['id']}", json={"content": "A corrected transcript."})
        states = {k: su.get(f"/api/collections/audio_records/records/{v}").json()["state"] for k, v in ids.items()}
        print(json.dumps(states, indent=1))
    finally:
        proc.terminate()
        proc.wait(30)
    (data / "ids.json").write_text(json.dumps(ids, indent=1))
    for transient in ("auxiliary.db", "types.d.ts", "backups", "transcriber.lock"):
        path = data / transient
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    with tarfile.open(out, "w:gz") as tar:
        tar.add(data, arcname="pb_data")
    shutil.rmtree(root)
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
