"""Configuration: a TOML file (default ``transcriber.toml``) and the environment.

Every key can be overridden from the environment with the prefix
``TRANSCRIBER_`` and sections nested with ``__``, e.g.
``TRANSCRIBER_PIPELINE__WORKERS=0``. No file is needed for a first run.

A file named by ``--config`` or ``TRANSCRIBER_CONFIG`` must exist, except that
``TRANSCRIBER_CONFIG=-PATH`` names one to read only if present (the leading
``-`` as in systemd's ``EnvironmentFile=-``): the shipped unit names
``/etc/transcriber/transcriber.toml`` so, and starts on a host without it.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from sidecar.transcript.languages import AUTO, code_of

DEFAULT_CONFIG = "transcriber.toml"
CONFIG_ENV = "TRANSCRIBER_CONFIG"
# Before a path in CONFIG_ENV: read that file if it is there, start without it if not.
OPTIONAL_MARK = "-"
_PREFIX = "TRANSCRIBER_"

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def _duration(value: Any) -> Any:
    """Durations as seconds (``90``, ``"1.5"``) or with a unit (``"30s"``, ``"15m"``, ``"8h"``, ``"2d"``)."""
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|d)?\s*", value)
        if m:
            return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2) or "s"])
    return value


Duration = Annotated[timedelta, BeforeValidator(_duration)]


def _absent_if_empty(value: Any) -> Any:
    """An empty value is no value: compose files pass an unset variable as "" (``${SUPERUSER_PASSWORD:-}``)."""
    if isinstance(value, str) and value.strip() == "":
        return None
    return value


class Secret(enum.Enum):
    """How a setting's value is kept out of what leaves the service (``sidecar.redaction``)."""

    # Sent to a provider or a store, so it can come back in what they answer: removed from
    # everything stored, logged or shown, what was said included.
    KEY = "key"
    # Never sent to a provider: removed from messages and logs, never looked for in what people
    # said or wrote (a transcript redacted where it says words of a password would tell them).
    PASSWORD = "password"  # noqa: S105 - a kind of secret, not one


# Optional credentials: "" counts as not given, so that half a pair is caught (O7).
OptionalText = Annotated[str | None, BeforeValidator(_absent_if_empty)]
OptionalSecret = Annotated[SecretStr | None, BeforeValidator(_absent_if_empty), Secret.KEY]
OptionalPassword = Annotated[SecretStr | None, BeforeValidator(_absent_if_empty), Secret.PASSWORD]
# An access key's id: not secret alone, but half of a credential that is kept out of texts all the same.
OptionalKeyId = Annotated[str | None, BeforeValidator(_absent_if_empty), Secret.KEY]


class Section(BaseModel):
    """A settings section: a key it does not know is an error, not a silent default (O7)."""

    model_config = ConfigDict(extra="forbid")


def _pair(section: str, a: str, a_value: object, b: str, b_value: object) -> None:
    if (a_value is None) != (b_value is None):
        given, missing = (a, b) if b_value is None else (b, a)
        raise ValueError(f"[{section}] {given} is set but {missing} is not: give both or neither")


class PipelineSettings(Section):
    workers: int = Field(default=2, ge=0)
    own_work_limit: Duration = timedelta(hours=1)
    # Generous: a false halt costs more than a late one, and a provider may
    # legitimately take up to a day (SpeechKit's deferred mode).
    foreign_work_limit: Duration = timedelta(hours=48)
    max_attempts: int = Field(default=5, ge=1)
    # Per-stage lease overrides, e.g. {"uploaded": "2h"}; the defaults are in the
    # stage table (pipeline/stages.py), which also refuses a stage it does not know.
    leases: dict[str, Duration] = Field(default_factory=dict)
    poll_delay: Duration = timedelta(seconds=10)
    retry_delay: Duration = timedelta(seconds=30)
    # Fallback poll while no realtime event arrives.
    idle_poll: Duration = timedelta(seconds=5)
    shutdown_grace: Duration = timedelta(seconds=10)
    step_timeout: Duration = timedelta(hours=8)
    # How often provider-side copies nobody will read again are looked for and removed (O6),
    # and how long a halted record's copies are kept for a resume (SpeechKit keeps results 3 days).
    sweep_every: Duration = timedelta(minutes=10)
    keep_halted_copies: Duration = timedelta(days=3)
    # How long a finished recording keeps its normalized audio (the provider's input, for a
    # redo from stage normalized); the same sweep removes it then. The original and the
    # transcript are never removed.
    keep_normalized: Duration = timedelta(days=7)
    # What this process keeps of the files it stored or fetched, for its own next step (MB on disk,
    # in the system's temporary directory: TMPDIR); 0 keeps none, every step fetches from PocketBase.
    local_copies_mb: int = Field(default=4096, ge=0)


class PocketBaseSettings(Section):
    url: str = "http://127.0.0.1:8090"
    http: str = "127.0.0.1:8090"
    data_dir: Path = Path("pb_data")
    service_email: OptionalText = None
    service_password: OptionalPassword = None
    superuser_email: OptionalText = None
    superuser_password: OptionalPassword = None
    timeout: Duration = timedelta(seconds=30)
    upload_timeout: Duration = timedelta(minutes=30)
    # How long the body of any request but an upload may take to arrive (PocketBase's own
    # default): a stranger's slow body holds a connection no longer. Uploads: [intake] read_timeout.
    read_timeout: Duration = Field(default=timedelta(minutes=5), gt=timedelta(0))
    migrations_dir: Path | None = None
    hooks_dir: Path | None = None
    public_dir: Path | None = None  # the sender's page (pb_public/ beside the hooks by default)
    # The key PocketBase encrypts its settings with, outside the data directory (made on the first
    # start when absent); unset: beside it, <data_dir>.key. PB_ENCRYPTION_KEY in the environment wins.
    settings_key_file: Path | None = None

    @model_validator(mode="after")
    def _credentials_in_pairs(self) -> PocketBaseSettings:
        _pair("pocketbase", "service_email", self.service_email, "service_password", self.service_password)
        _pair("pocketbase", "superuser_email", self.superuser_email, "superuser_password", self.superuser_password)
        return self


class IntakeSettings(Section):
    max_upload_mb: int = Field(default=1024, ge=1)
    # The longest recording accepted (the seeds' ceiling): longer halts too_long at normalize,
    # found from the container's header before any decoding where it says.
    max_duration: Duration = timedelta(hours=6)
    # The longest an upload may take (the upload route's read timeout; every other
    # route has [pocketbase] read_timeout): 1 GB in three hours is a line of 0.8 Mbit/s.
    read_timeout: Duration = Field(default=timedelta(hours=3), gt=timedelta(0))


class QuotaSettings(Section):
    """H4: what one sender may ask of the service; 0 turns a quota off. Checked at intake."""

    uploads_per_hour: int = Field(default=60, ge=0)
    # Recordings not yet done (halted ones excluded): bounds the work one sender can queue.
    waiting: int = Field(default=20, ge=0)
    # Hours of audio in any 24 hours: reserved at intake from the declared length, measured at normalize.
    audio_hours_per_day: float = Field(default=24.0, ge=0)


class MetricsSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535, description="0 disables the metrics endpoint")


class BackupSettings(Section):
    """PocketBase's own scheduled backups of the data directory (records, files, settings).

    These seed PocketBase's backup settings, which the owner also changes in the panel: only the
    keys given here are applied, each when it changed since it was last applied (``pocketbase.seeds``).
    The defaults are PocketBase's own.
    """

    # A cron expression (UTC), e.g. "30 3 * * *" for 03:30 every day; "" turns the schedule off.
    cron: str = ""
    keep: int = Field(default=3, ge=1)  # scheduled backups kept; older ones are removed
    # Off-box storage (any S3-compatible service); unset: <data_dir>/backups.
    s3_bucket: OptionalText = None
    s3_endpoint: str = ""
    s3_region: str = ""
    s3_access_key: OptionalKeyId = None
    s3_secret: OptionalSecret = None
    s3_force_path_style: bool = False

    @model_validator(mode="after")
    def _keys_in_pairs(self) -> BackupSettings:
        _pair("backups", "s3_access_key", self.s3_access_key, "s3_secret", self.s3_secret)
        if self.s3_bucket and not (self.s3_endpoint and self.s3_access_key):
            raise ValueError("[backups] s3_bucket needs s3_endpoint, s3_access_key and s3_secret")
        return self


class LogSettings(Section):
    # text: one line a message, for a terminal; json: one object a line, for a log shipper.
    format: Literal["text", "json"] = "text"
    level: Literal["debug", "info", "warning", "error"] = "info"


class ProviderSettings(Section):
    name: Literal["offline", "speechkit", "openai", "instant"] = "offline"


def _language(value: Any) -> Any:
    """A language setting: ``auto`` (or empty) or a language, as a code, a tag (``ru-RU``) or an English name."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", AUTO)):
        return AUTO
    if isinstance(value, str):
        code = code_of(value)
        if code is None:
            raise ValueError(f"unknown language {value!r}: use 'auto' or a code such as 'ru' or 'en'")
        return code
    return value


Language = Annotated[str, BeforeValidator(_language)]


class OfflineSettings(Section):
    model: str = "base"  # a bundled model (base, tiny.en), a local model directory, or a model name
    language: Language = AUTO  # auto: found by voting over the recording's speech
    compute_type: str = "int8"
    # Threads of each decoding call; 0: the CPUs this process may use, less the speakers' half.
    # Set below them (batch_size > 1), a recording's batches are decoded in streams, as many at once
    # as those CPUs hold, sharing its batch_size windows: on 2 cores as fast as one batch on both,
    # for up to 140 MB more; the setting to try on more cores (one batch gains little from each thread).
    threads: int = Field(default=0, ge=0)
    # Hypotheses searched per window. 1 (greedy) is faster but makes more word errors where the
    # speech is hard (a telephone line, a fast or unfamiliar voice, Russian): measured (PF15).
    beam_size: int = Field(default=5, ge=1)
    # 30-second windows decoded at once; 1 decodes them one after another. Each window of a batch
    # holds about 60 MB while it is decoded. On 2 cores with AMX batches of 2, 4 and 8 took the same
    # time; without AMX 8 decoded about 15 % faster than 4, the same words (PF9).
    batch_size: int = Field(default=4, ge=1, le=64)
    cache_dir: str = ""  # where base's two parts are joined once; default $XDG_CACHE_HOME/transcriber
    # SP1: speaker labels from the optional extra (transcriber[diarize]); unset: on when it is installed.
    diarize: bool | None = None


class SpeechKitSettings(Section):
    # One of: an API key; a service account's authorized key (a JSON file from
    # `yc iam key create`), exchanged for IAM tokens and renewed; a static IAM token (12 h).
    api_key: OptionalSecret = None
    service_account_key: OptionalText = None
    iam_token: OptionalSecret = None
    iam_url: str = "https://iam.api.cloud.yandex.net"

    @model_validator(mode="after")
    def _key_file_exists(self) -> SpeechKitSettings:
        if self.service_account_key and not Path(self.service_account_key).expanduser().is_file():
            raise ValueError(f"[speechkit] service_account_key names no file: {self.service_account_key}")
        return self

    folder_id: str | None = None
    model: str = "general"
    # Tags SpeechKit should expect (comma-separated, e.g. "ru-RU"); "auto": SpeechKit finds it.
    # A sender's language hint takes precedence.
    language: str = "auto"
    text_normalization: bool = True
    # SP1: ask SpeechKit to tell speakers apart (speakerLabeling; mono audio, which is what
    # it is sent). Its results then say the speaker in channelTag. Off if a model refuses it.
    speaker_labeling: bool = True
    stt_url: str = "https://stt.api.cloud.yandex.net"
    operation_url: str = "https://operation.api.cloud.yandex.net"
    timeout: Duration = timedelta(seconds=60)


class ObjectStorageSettings(Section):
    endpoint_url: str = "https://storage.yandexcloud.net"
    region: str = "ru-central1"
    bucket: OptionalText = None
    prefix: str = "transcriber/"
    access_key_id: OptionalKeyId = None
    secret_access_key: OptionalSecret = None
    timeout: Duration = timedelta(minutes=10)

    @model_validator(mode="after")
    def _keys_in_pairs(self) -> ObjectStorageSettings:
        _pair("object_storage", "access_key_id", self.access_key_id, "secret_access_key", self.secret_access_key)
        return self


class OpenAISettings(Section):
    base_url: str = "https://api.openai.com"
    api_key: OptionalSecret = None
    model: str = "whisper-1"
    language: str | None = None  # None: the server finds it; a sender's language hint takes precedence
    timeout: Duration = timedelta(minutes=10)


class InsightsSettings(Section):
    """The optional insights step: a grounded brief and up to five topics of each finished recording.

    Off unless ``provider`` is set. ``offline``: llama.cpp in a process of our own (the insights
    extra) running ``model``, a GGUF file the owner supplies. ``openai``: any OpenAI-compatible
    chat-completions server at ``base_url`` (a local Ollama or llama.cpp server keeps it private).
    The same model proofreads the literary text unless ``proofread`` is false.
    """

    provider: Literal["", "offline", "openai"] = ""
    model: str = ""  # offline: the path of a .gguf file; openai: the server's model name
    base_url: str = "http://127.0.0.1:11434"  # openai: e.g. Ollama's; "/v1" at the end is fine
    api_key: OptionalSecret = (
        None  # openai: from the environment (TRANSCRIBER_INSIGHTS__API_KEY); none for local servers
    )
    timeout: Duration = timedelta(minutes=10)  # openai: one request
    # The model's context in tokens: each request (instructions, data, answer) stays within it.
    context_tokens: int = Field(default=8192, ge=2048, le=1_048_576)
    # offline: threads of the engine; 0 = every CPU this process may use (recognition stops it meanwhile).
    threads: int = Field(default=0, ge=0)
    sentences: int = Field(default=5, ge=1, le=10)  # the brief's sentences at most
    # openai: requests sent at once (the parts of a long meeting), for a server that answers several at once.
    parallel: int = Field(default=1, ge=1, le=16)
    # The literary text proofread by the same model (misheard words mended, each paragraph checked in code);
    # false: the literary text stays rule-based, and its step needs no model.
    proofread: bool = True

    @model_validator(mode="after")
    def _model_given(self) -> InsightsSettings:
        if self.provider and not self.model:
            raise ValueError(f"[insights] provider = {self.provider!r} needs [insights] model")
        if self.provider == "offline" and not Path(self.model).expanduser().is_file():
            raise ValueError(f"[insights] model names no file: {self.model} (a .gguf model file)")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.provider)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TRANSCRIBER_",
        env_nested_delimiter="__",
        extra="forbid",
    )

    pipeline: PipelineSettings = PipelineSettings()
    pocketbase: PocketBaseSettings = PocketBaseSettings()
    intake: IntakeSettings = IntakeSettings()
    quotas: QuotaSettings = QuotaSettings()
    metrics: MetricsSettings = MetricsSettings()
    logs: LogSettings = LogSettings()
    backups: BackupSettings = BackupSettings()
    provider: ProviderSettings = ProviderSettings()
    offline: OfflineSettings = OfflineSettings()
    speechkit: SpeechKitSettings = SpeechKitSettings()
    object_storage: ObjectStorageSettings = ObjectStorageSettings()
    openai: OpenAISettings = OpenAISettings()
    insights: InsightsSettings = InsightsSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path, _ = config_file()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if path.is_file():
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


def secret_fields(model: type[BaseModel] | None = None, prefix: str = "") -> Iterator[tuple[str, Secret]]:
    """Every secret setting, as ``section.key``, and its kind: the fields marked ``Secret``, and any
    other ``SecretStr`` field as a key (a secret nobody classified is removed everywhere)."""
    for name, field in (model or Settings).model_fields.items():
        kind = next((m for m in field.metadata if isinstance(m, Secret)), None)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from secret_fields(annotation, f"{prefix}{name}.")
        elif kind is not None or "SecretStr" in repr(annotation):
            yield f"{prefix}{name}", kind or Secret.KEY


def secret_values(settings: Settings) -> Iterator[tuple[Secret, str]]:
    """The values of the secret settings that are set, with their kind."""
    for path, kind in secret_fields():
        value: Any = settings
        for part in path.split("."):
            value = getattr(value, part)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if value:
            yield kind, str(value)


# Environment names that belong to the CLI's sender commands, not to the settings.
_NOT_SETTINGS = {"config", "server", "email", "password", "devices"}


class SettingsError(ValueError):
    """The settings cannot be used; the message names every key at fault."""


def _unknown_environment() -> list[str]:
    """TRANSCRIBER_* names that no settings section would read (pydantic ignores them silently)."""
    sections = set(Settings.model_fields)
    unknown = []
    for name in os.environ:
        if not name.upper().startswith(_PREFIX):
            continue
        rest = name[len(_PREFIX) :].lower()
        if rest in _NOT_SETTINGS:
            continue
        section, _, key = rest.partition("__")
        if section not in sections or not key:
            unknown.append(name)
    return sorted(unknown)


def config_file() -> tuple[Path, bool]:
    """The settings file to read and whether it must exist: ``$TRANSCRIBER_CONFIG`` (optional when
    marked ``-PATH``), else ./transcriber.toml, which may be missing."""
    named = os.environ.get(CONFIG_ENV, "")
    if not named:
        return Path(DEFAULT_CONFIG), False
    if named.startswith(OPTIONAL_MARK):
        return Path(named.removeprefix(OPTIONAL_MARK)), False
    return Path(named), True


def load_settings(config: Path | None = None) -> Settings:
    """Settings from ``config`` (or ``$TRANSCRIBER_CONFIG``, or ./transcriber.toml) and the environment.

    Refuses, naming them, keys no section knows (in the file or the environment)
    and credentials given by halves (O7).
    """
    if config is not None:
        if not config.is_file():
            raise FileNotFoundError(f"config file not found: {config} (--config)")
        os.environ[CONFIG_ENV] = str(config)
    else:
        path, required = config_file()
        if required and not path.is_file():
            # Named on purpose, so its absence is a mistake (only the default file, or one
            # marked optional, may be missing).
            raise FileNotFoundError(f"config file not found: {path} ({CONFIG_ENV})")
    problems = [f"unknown setting {name} (no such section or key)" for name in _unknown_environment()]
    try:
        settings = Settings()
    except ValidationError as e:
        for error in e.errors():
            loc = [str(p) for p in error["loc"]]
            where = f"[{loc[0]}] {'.'.join(loc[1:])}".strip() if loc else "settings"
            if error["type"] == "extra_forbidden":
                problems.append(f"unknown setting {where}")
            else:
                message = str(error["msg"]).removeprefix("Value error, ")
                problems.append(message if message.startswith(where) else f"{where}: {message}")
    else:
        if not problems:
            return settings
    raise SettingsError("; ".join(problems))
