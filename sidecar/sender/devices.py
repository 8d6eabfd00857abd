"""The device tokens this computer was given at sign-in, one per server and account.

PocketBase's login guard (``pb_hooks/lib/logins.js``) gives every password sign-in a token that
marks this device as the account's: presented at the next sign-in, strangers' wrong passwords
never keep it waiting. Kept in ``$XDG_STATE_HOME/transcriber/devices.json`` (``~/.local/state``),
readable by this user only; ``TRANSCRIBER_DEVICES`` names another file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

__all__ = ["HEADER", "DeviceTokens"]

HEADER = "X-Device-Token"
_ENV = "TRANSCRIBER_DEVICES"


def _default_path() -> Path:
    named = os.environ.get(_ENV)
    if named:
        return Path(named).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "transcriber" / "devices.json"


class DeviceTokens:
    """A small JSON file of tokens by server and e-mail; a file that cannot be read is none."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or _default_path()

    @staticmethod
    def _key(server: str, email: str) -> str:
        return f"{server.rstrip('/')}|{email.strip().lower()}"

    def _all(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def get(self, server: str, email: str) -> str | None:
        return self._all().get(self._key(server, email))

    def put(self, server: str, email: str, token: str) -> None:
        """Keeps ``token``; a file that cannot be written costs only the trust (signing in still works)."""
        tokens = self._all()
        tokens[self._key(server, email)] = token
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".devices-")
            with os.fdopen(fd, "w") as fh:  # mkstemp's file is 0600
                json.dump(tokens, fh)
            os.replace(tmp, self.path)
        except OSError:
            return
