"""The redactor knows every secret the settings hold, found from the settings model itself: a
secret field added later is removed without anyone remembering to list it (H1)."""

from __future__ import annotations

import secrets
import typing
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, SecretStr

from sidecar import redaction
from sidecar.redaction import redact, redact_said
from sidecar.serving.assembly import register_settings_secrets
from sidecar.settings import Secret, Settings, secret_fields


@pytest.fixture(autouse=True)
def registry() -> Iterator[None]:
    saved = redaction._known, redaction._passwords
    yield
    redaction._known, redaction._passwords = saved


def _holds_secret(annotation: object) -> bool:
    if annotation is SecretStr:
        return True
    return any(_holds_secret(a) for a in typing.get_args(annotation))


def _every_field(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, object]]:
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from _every_field(field.annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", field.annotation


SECRET_FIELDS = [path for path, annotation in _every_field(Settings) if _holds_secret(annotation)]
# Not secret types, but half of a credential: kept out of texts all the same.
KEY_IDS = ["backups.s3_access_key", "object_storage.access_key_id"]


def test_every_secret_typed_setting_is_known_to_the_redactor() -> None:
    known = dict(secret_fields())
    assert len(SECRET_FIELDS) >= 8  # the walk found them (the model holds at least these)
    assert "backups.s3_secret" in SECRET_FIELDS
    for path in SECRET_FIELDS + KEY_IDS:
        assert path in known, path
    assert known["pocketbase.superuser_password"] is Secret.PASSWORD
    assert known["pocketbase.service_password"] is Secret.PASSWORD
    assert known["backups.s3_secret"] is Secret.KEY


def _settings_with_every_secret() -> tuple[Settings, dict[str, str]]:
    values = {path: "v" + secrets.token_urlsafe(18) for path in SECRET_FIELDS + KEY_IDS}
    tree: dict[str, dict[str, object]] = {}
    for path, value in values.items():
        section, key = path.split(".")
        tree.setdefault(section, {})[key] = value
    # What the secrets come in pairs with.
    tree["pocketbase"] |= {"service_email": "s@example.com", "superuser_email": "o@example.com"}
    return Settings.model_validate(tree), values


def test_every_secret_setting_is_removed_from_messages_and_keys_from_what_was_said() -> None:
    settings, values = _settings_with_every_secret()
    register_settings_secrets(settings)
    kinds = dict(secret_fields())
    for path, value in values.items():
        message = f"upstream said: {value} (again {value.upper()})"
        assert value[:8].lower() not in redact(message).lower(), path
        said = f"he said {value}"
        if kinds[path] is Secret.PASSWORD:
            assert redact_said(said) == said, path
        else:
            assert value not in redact_said(said), path
