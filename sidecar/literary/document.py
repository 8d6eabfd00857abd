"""The literary text and the transcript as Word documents (DOCX), made by python-docx at step time.

The recording's title as the heading, then each paragraph; at each turn of speakers the
speaker's name in bold before the words, as the texts' plain forms have it. Stored beside
each text (``texts.document``) so that the download routes serve a file and make nothing.
The literary step makes both, each time it runs: a corrected transcript queues it again.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

from docx import Document
from docx.document import Document as DocumentObject

from sidecar.literary.edition import Paragraph
from sidecar.transcript.plain import Turn

__all__ = ["docx_bytes", "transcript_docx_bytes"]

# Characters XML 1.0 cannot hold (python-docx refuses them): control characters but tab and newlines.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _started(title: str, language: str) -> DocumentObject:
    doc = Document()
    doc.core_properties.title = _NOT_XML.sub("", title)
    if language:
        doc.core_properties.language = language
    if title:
        doc.add_heading(_NOT_XML.sub("", title), level=1)
    return doc


def _paragraph(doc: DocumentObject, speaker: str | None, text: str, turned: bool) -> None:
    para = doc.add_paragraph()
    if speaker is not None and turned:
        para.add_run(f"{_NOT_XML.sub('', speaker)}: ").bold = True
    para.add_run(_NOT_XML.sub("", text))


def _saved(doc: DocumentObject) -> bytes:
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def docx_bytes(paragraphs: Sequence[Paragraph], title: str, language: str) -> bytes:
    """The literary text: the speaker named where the speakers turn."""
    doc = _started(title, language)
    speaker: str | None = None
    for p in paragraphs:
        _paragraph(doc, p.speaker, p.text, p.speaker != speaker)
        speaker = p.speaker
    return _saved(doc)


def transcript_docx_bytes(turns: Sequence[Turn], title: str, language: str) -> bytes:
    """The transcript, a paragraph per paragraph of its txt export (``sidecar.transcript.plain.turns``)."""
    doc = _started(title, language)
    for t in turns:
        _paragraph(doc, t.speaker, t.text, True)
    return _saved(doc)
