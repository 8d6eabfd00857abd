"""The JSON export's committed schema is the one generated from its typed shape."""

from __future__ import annotations

from pathlib import Path

from sidecar.transcript.export import TranscriptExport, schema_text

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "schema" / "transcript-export.schema.json"


def test_the_committed_schema_is_generated_from_the_shape() -> None:
    assert SCHEMA.read_text() == schema_text(), (
        "regenerate it: python -m sidecar.transcript.export > docs/schema/transcript-export.schema.json"
    )


def test_the_shape_is_closed() -> None:
    """An export with a field the shape does not know is refused (the schema says additionalProperties: false)."""
    import pytest
    from pydantic import ValidationError

    body: dict[str, object] = {"text": "", "language": None, "segments": [], "brief": None, "quotes": [], "topics": []}
    TranscriptExport.model_validate(body)
    with pytest.raises(ValidationError):
        TranscriptExport.model_validate(body | {"surprise": 1})
