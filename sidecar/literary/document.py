"""The literary text as a Word document (DOCX), made by python-docx at step time.

The recording's title as the heading, then each paragraph; at each turn of speakers the
speaker's name in bold before the words, as the text's plain form has it. Stored beside the
text (``texts.document``) so that the download route serves a file and makes nothing.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from docx import Document

from sidecar.literary.edition import Paragraph

__all__ = ["docx_bytes"]


def docx_bytes(paragraphs: Sequence[Paragraph], title: str, language: str) -> bytes:
    doc = Document()
    doc.core_properties.title = title
    if language:
        doc.core_properties.language = language
    if title:
        doc.add_heading(title, level=1)
    speaker: str | None = None
    for p in paragraphs:
        para = doc.add_paragraph()
        if p.speaker is not None and p.speaker != speaker:
            para.add_run(f"{p.speaker}: ").bold = True
        speaker = p.speaker
        para.add_run(p.text)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()
