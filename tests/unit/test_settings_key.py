"""The settings key: made once beside the data directory and told once; the environment's wins; a key
of the wrong length is refused with a sentence."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sidecar.pocketbase.settings_key import ENV, LENGTH, SettingsKeyError, key_file, settings_key
from sidecar.settings import Settings


def _settings(tmp_path: Path) -> Settings:
    s = Settings()
    s.pocketbase.data_dir = tmp_path / "pb_data"
    return s


def test_the_key_is_made_once_outside_the_data_directory_and_told_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    settings = _settings(tmp_path)
    caplog.set_level(logging.WARNING)
    key = settings_key(settings)
    path = key_file(settings)
    assert path == tmp_path / "pb_data.key" and not path.is_relative_to(settings.pocketbase.data_dir)
    assert len(key) == LENGTH and path.read_text().strip() == key and (path.stat().st_mode & 0o777) == 0o600
    told = [r for r in caplog.records if str(path) in r.getMessage()]
    assert len(told) == 1 and told[0].levelno == logging.WARNING and "apart from the backups" in told[0].getMessage()
    assert settings_key(settings) == key  # the same key, and not told again
    assert len([r for r in caplog.records if str(path) in r.getMessage()]) == 1


def test_the_environment_wins_and_a_wrong_length_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(tmp_path)
    monkeypatch.setenv(ENV, "k" * LENGTH)
    assert settings_key(settings) == "k" * LENGTH and not key_file(settings).exists()
    monkeypatch.setenv(ENV, "short")
    with pytest.raises(SettingsKeyError, match=f"must be {LENGTH} characters"):
        settings_key(settings)
    monkeypatch.delenv(ENV)
    settings.pocketbase.settings_key_file = tmp_path / "elsewhere" / "settings.key"
    settings.pocketbase.settings_key_file.parent.mkdir()
    settings.pocketbase.settings_key_file.write_text("x" * 10)
    with pytest.raises(SettingsKeyError, match=r"elsewhere/settings\.key must be"):
        settings_key(settings)
