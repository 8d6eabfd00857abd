"""Storage failures, classified where they enter (the client maps HTTP answers to these)."""

from __future__ import annotations

from sidecar.outcome import RetryableError, TranscriberError

__all__ = ["AuthFailed", "FencedOut", "LoginRateLimited", "ReleaseMismatch", "StorageError", "StorageUnavailable"]


class StorageError(TranscriberError):
    """A request storage refused: a bug or a misconfiguration, not retried."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class StorageUnavailable(RetryableError):
    """Storage did not answer (down, restarting, timeout, 5xx): worth another try."""


class LoginRateLimited(StorageUnavailable):
    """PocketBase's login limiter refused the service login for now (429): wait ``retry_after``."""


class FencedOut(TranscriberError):
    """The claim is no longer ours: the write did not land, and must not."""


class AuthFailed(StorageError):
    """The service credentials were refused."""


class ReleaseMismatch(StorageError):
    """PocketBase runs another release of the project than this worker: their routes, rules and
    collections are the other release's, so nothing is claimed (a start-up mistake)."""
