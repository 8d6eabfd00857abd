"""What ``transcriber transcribe`` shows while it waits: the stage, and a bar once progress is known."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

from sidecar.sender import shown


def test_progress_unknown_is_no_fraction_and_known_is_clamped() -> None:
    assert shown("a.ogg", {"status": "uploaded", "progress": None}) == ("a.ogg: uploaded", None)
    assert shown("a.ogg", {"status": "submitted", "progress": 0.25}) == ("a.ogg: submitted", 0.25)
    assert shown("a.ogg", {"status": "done", "progress": 1}) == ("a.ogg: done", 1.0)
    assert shown("a.ogg", {"status": "submitted", "progress": 1.5})[1] == 1.0
    assert shown("a.ogg", {"status": "submitted", "progress": True})[1] is None
    assert shown("a.ogg", {"status": "submitted"})[1] is None  # an older server without the field


def test_the_bar_shows_the_percentage_of_a_poll_body() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=100)
    description, completed = shown("meeting.flac", {"status": "submitted", "progress": 0.4})
    assert completed is not None
    with Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), console=console) as bar:
        task = bar.add_task(description, total=1.0)
        bar.update(task, completed=completed)
    assert "meeting.flac: submitted" in out.getvalue() and "40%" in out.getvalue()
