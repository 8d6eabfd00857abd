"""PocketBase answers mapped to the project's errors at the HTTP boundary."""

from __future__ import annotations

from sidecar.outcome import RetryableError, TranscriberError


class PocketBaseError(TranscriberError):
    """A request PocketBase refused; a bug or a misconfiguration, not retried."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class PocketBaseUnavailable(RetryableError):
    """PocketBase did not answer (down, restarting, timeout, 5xx)."""


class FencedOut(TranscriberError):
    """The claim is no longer ours: the write did not land, and must not."""


class AuthFailed(PocketBaseError):
    """The service credentials were refused."""
