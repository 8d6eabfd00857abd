"""Configuration: the TOML file, the environment over it, durations and secrets."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from sidecar.pipeline.stages import StageTable
from sidecar.pocketbase.seeds import backup_fingerprints, superuser_fingerprint
from sidecar.serving.assembly import default_steps
from sidecar.settings import CONFIG_ENV, BackupSettings, PipelineSettings, SettingsError, load_settings


def test_the_file_is_read_and_the_environment_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "transcriber.toml"
    cfg.write_text(
        '[pipeline]\nworkers = 7\nown_work_limit = "90m"\n\n[pipeline.leases]\nuploaded = "20m"\n\n'
        '[openai]\napi_key = "sk-from-the-file"\nmodel = "whisper-large"\n'
    )
    monkeypatch.setenv(CONFIG_ENV, str(cfg))  # load_settings sets it too; this undoes it after the test
    monkeypatch.setenv("TRANSCRIBER_PIPELINE__WORKERS", "3")
    monkeypatch.setenv("TRANSCRIBER_OPENAI__MODEL", "whisper-small")
    s = load_settings(cfg)
    assert s.pipeline.workers == 3  # the environment over the file
    assert s.openai.model == "whisper-small"
    assert s.pipeline.own_work_limit == timedelta(minutes=90)  # the file over the default
    leases = StageTable(s.pipeline, default_steps()).leases()
    assert leases["uploaded"] == timedelta(minutes=20)
    assert leases["normalized"] == timedelta(minutes=2)  # untouched default
    assert s.openai.api_key is not None and s.openai.api_key.get_secret_value() == "sk-from-the-file"
    assert "sk-from-the-file" not in repr(s)  # a secret never prints


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_settings(tmp_path / "nope.toml")


def test_a_file_named_in_the_environment_must_exist_unless_marked_optional(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``TRANSCRIBER_CONFIG=-PATH`` (the shipped unit's way): read when there, no error when not."""
    monkeypatch.chdir(tmp_path)  # no ./transcriber.toml to fall back on
    missing = tmp_path / "etc" / "transcriber.toml"
    monkeypatch.setenv(CONFIG_ENV, str(missing))
    with pytest.raises(FileNotFoundError, match=f"config file not found: {missing} \\(TRANSCRIBER_CONFIG\\)"):
        load_settings()
    monkeypatch.setenv(CONFIG_ENV, f"-{missing}")
    assert load_settings().pipeline.workers == 2  # the defaults
    missing.parent.mkdir()
    missing.write_text("[pipeline]\nworkers = 5\n")
    assert load_settings().pipeline.workers == 5  # present: read like any other


def test_a_lease_for_a_stage_the_table_does_not_claim_is_refused() -> None:
    settings = PipelineSettings(leases={"uplaoded": timedelta(minutes=5), "done": timedelta(minutes=1)})
    with pytest.raises(ValueError, match=r"names no claimable stage: done, uplaoded"):
        StageTable(settings, default_steps())


@pytest.mark.parametrize(
    ("file", "env", "named"),
    [
        ("[pipeline]\nworker = 3\n", {}, "unknown setting [pipeline] worker"),
        ("", {"TRANSCRIBER_PIPELINE__WORKER": "3"}, "unknown setting [pipeline] worker"),
        ("", {"TRANSCRIBER_PIPELIN__WORKERS": "3"}, "unknown setting TRANSCRIBER_PIPELIN__WORKERS"),
        ("[pipline]\nworkers = 3\n", {}, "unknown setting [pipline]"),
        ('[offline]\nlanguge = "ru"\n', {}, "unknown setting [offline] languge"),
        (
            '[pocketbase]\nservice_email = "svc@example.com"\n',
            {},
            "[pocketbase] service_email is set but service_password is not",
        ),
        (
            "",
            {"TRANSCRIBER_OBJECT_STORAGE__SECRET_ACCESS_KEY": "s3cr3t-value"},
            "[object_storage] secret_access_key is set but access_key_id is not",
        ),
    ],
)
def test_a_misspelled_or_half_given_setting_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file: str, env: dict[str, str], named: str
) -> None:
    cfg = tmp_path / "transcriber.toml"
    cfg.write_text(file)
    monkeypatch.setenv(CONFIG_ENV, str(cfg))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as caught:
        load_settings(cfg)
    assert named in str(caught.value)
    assert "s3cr3t-value" not in str(caught.value)


def test_the_sender_commands_own_environment_is_not_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "transcriber.toml"
    cfg.write_text("")
    monkeypatch.setenv(CONFIG_ENV, str(cfg))
    for name in ("TRANSCRIBER_SERVER", "TRANSCRIBER_EMAIL", "TRANSCRIBER_PASSWORD"):
        monkeypatch.setenv(name, "x")
    assert load_settings(cfg).pipeline.workers == 2


def test_only_the_backup_keys_the_file_or_the_environment_name_seed_pocketbase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "transcriber.toml"
    cfg.write_text('[backups]\ncron = ""\n[pipeline]\nworkers = 1\n')
    monkeypatch.setenv(CONFIG_ENV, str(cfg))
    assert backup_fingerprints(load_settings(cfg).backups) == {"cron": '=""'}  # "" named is a value: no schedule
    monkeypatch.setenv("TRANSCRIBER_BACKUPS__S3_FORCE_PATH_STYLE", "true")
    # Each S3 key is its own: naming one changes only it (not the S3 the owner set up in the panel).
    assert set(backup_fingerprints(load_settings(cfg).backups)) == {"cron", "s3_force_path_style"}
    cfg.write_text("[pipeline]\nworkers = 1\n")
    monkeypatch.delenv("TRANSCRIBER_BACKUPS__S3_FORCE_PATH_STYLE")
    assert backup_fingerprints(load_settings(cfg).backups) == {}


def test_a_fingerprint_holds_no_secret_and_changes_with_it() -> None:
    def s3(secret: str) -> BackupSettings:
        return BackupSettings(s3_bucket="b", s3_endpoint="http://s3", s3_access_key="AK", s3_secret=SecretStr(secret))

    one, two = (backup_fingerprints(s3(secret))["s3_secret"] for secret in ("secret-one-1234", "secret-two-1234"))
    assert one != two and one.startswith("scrypt:") and "secret-one" not in one
    owner = superuser_fingerprint("Owner@Example.com", "pass-word-1234")
    assert list(owner) == ["superuser:owner@example.com"] and "pass-word" not in owner["superuser:owner@example.com"]
    assert owner == superuser_fingerprint("Owner@Example.com", "pass-word-1234")  # a restart compares equal
