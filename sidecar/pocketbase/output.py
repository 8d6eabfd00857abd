"""PocketBase's own lines (start-up, errors) passed on through this process's logging.

So every line on the stream has one shape: with ``[logs] format = "json"`` each is a
JSON object (logger ``pocketbase``) like the workers' lines, and a log shipper or
``jq`` reads the stream end to end. PocketBase's hint to create the first superuser
with ``go run . superuser upsert`` (or its own binary) does not apply to this service:
it is replaced by the command that does.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import IO

log = logging.getLogger("pocketbase")

OWNER_HINT = "transcriber owner add EMAIL"
# "(you can also create your first superuser by running: go run . superuser upsert EMAIL PASS)"
_SUPERUSER_HINT = re.compile(r"superuser upsert", re.IGNORECASE)
# Go's log prefix ("2026/12/06 02:02:38 "): the log line has its own time.
_GO_TIME = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(\.\d+)? ")
_ERROR = re.compile(r"^\s*(error|panic|fatal)\b", re.IGNORECASE)


def line_for(raw: str) -> str | None:
    """The line as it is passed on (None: dropped)."""
    line = _GO_TIME.sub("", raw.rstrip())
    if not line.strip():
        return None
    if _SUPERUSER_HINT.search(line):
        return f"(or create it from the command line: {OWNER_HINT})"
    return line


def relay(stream: IO[bytes]) -> None:
    """Passes each line of ``stream`` on to the log until it ends."""
    for raw in stream:
        line = line_for(raw.decode("utf-8", errors="replace"))
        if line is not None:
            log.log(logging.ERROR if _ERROR.match(line) else logging.INFO, "%s", line)


def relay_in_background(stream: IO[bytes] | None) -> threading.Thread | None:
    if stream is None:
        return None
    thread = threading.Thread(target=relay, args=(stream,), name="pocketbase-output", daemon=True)
    thread.start()
    return thread
