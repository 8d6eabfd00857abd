"""PocketBase reads its settings under the sidecar's own names (pb_hooks/lib/settings.js), and still the
names an earlier release gave it when the new ones are absent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sidecar.pocketbase import process
from sidecar.settings import QuotaSettings, Settings
from testkit.media import wav_bytes
from testkit.pocketbase import running_pocketbase

# 36 seconds of audio a day: a 60-second recording is refused at upload for what it is.
DAY = QuotaSettings(uploads_per_hour=0, waiting=0, audio_hours_per_day=0.01)


def _refused_for_its_length(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path, quotas=DAY) as pb:
        sender = pb.new_sender()
        resp = sender.try_upload(wav_bytes(60.0), mime="audio/wav")
        assert resp.status_code == 429 and resp.json()["code"] == "too_much_audio", resp.text
        assert "the limit is 36 seconds" in resp.json()["message"], resp.text
        short = sender.try_upload(wav_bytes(5.0), name="b.wav", mime="audio/wav")
        assert short.status_code == 201, short.text


def _environment_as(rewrite: Callable[[dict[str, str]], None]) -> Callable[[Settings], dict[str, str]]:
    original = process.environment

    def environment(settings: Settings) -> dict[str, str]:
        env = original(settings)
        rewrite(env)
        return env

    return environment


def test_the_sidecars_own_name_and_spelling(tmp_path: Path) -> None:
    assert process.environment(Settings(quotas=DAY))["TRANSCRIBER_QUOTAS__AUDIO_HOURS_PER_DAY"] == "0.01"
    _refused_for_its_length(tmp_path)


def test_the_earlier_name_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def old(env: dict[str, str]) -> None:
        del env["TRANSCRIBER_QUOTAS__AUDIO_HOURS_PER_DAY"]
        env["TRANSCRIBER_QUOTAS__AUDIO_SECONDS_PER_DAY"] = "36"

    monkeypatch.setattr(process, "environment", _environment_as(old))
    _refused_for_its_length(tmp_path)
