"""Storage failures, classified where they enter (the client maps HTTP answers to these)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sidecar.outcome import RetryableError, TranscriberError

if TYPE_CHECKING:
    from sidecar.storage.model import Claim

__all__ = [
    "AuthFailed",
    "FencedOut",
    "LoginRateLimited",
    "ReleaseMismatch",
    "StorageError",
    "StorageUnavailable",
    "UnreadableClaim",
]


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


class UnreadableClaim(StorageError):
    """A claim landed on a row this sidecar cannot read (a field of another kind than it expects,
    which PocketBase's own check let through). The claim is held: ``claim`` sets the row aside."""

    def __init__(self, claim: Claim, reason: str, set_aside: tuple[str, ...] = ()) -> None:
        super().__init__(f"claimed {claim.queue} row {claim.id} cannot be read: {reason}")
        self.claim = claim
        self.reason = reason
        self.set_aside = set_aside  # rows the claim set aside on its way, as ``Claimed.set_aside``
