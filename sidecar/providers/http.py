"""HTTP plumbing shared by the cloud providers: timeouts, bounded retries, error mapping.

Every provider request goes through ``send``. Transient failures (5xx, 408,
dropped connections, timeouts) are retried a few times inside the call with
jittered exponential backoff (``stamina``), bounded in attempts and in time;
what still fails leaves as ``RetryableError`` and the pipeline retries the
step later. Any other answer is returned for the provider to classify, with
the helpers below (``retry_after``, ``json_body``, ``rejected``,
``credentials_refused``).

Requests that start paid work (``repeatable=False``) are retried only after
failures that prove the request never reached the service (connection
refused, connect timeout) or that the service refused it (5xx). A read
timeout there may mean the work did start, so it is not repeated blindly.
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import stamina

from sidecar.outcome import CredentialsRefused, HaltCode, PermanentError, RetryableError
from sidecar.redaction import Scrub, redact, short

__all__ = [
    "CREDENTIALS_WAIT",
    "DEFAULT_RETRY",
    "REFUSED_CREDENTIALS",
    "RetryPolicy",
    "credentials_refused",
    "json_body",
    "rejected",
    "retry_after",
    "send",
    "timeout",
]

# Connecting should never take long; the full timeout is for reading answers.
_MAX_CONNECT = 10.0
# 401 (unauthenticated: a missing, revoked or expired key or token) and 403 (the
# account may not do this: a role, a scope, a region) are about our credentials.
REFUSED_CREDENTIALS = frozenset({401, 403})
# How long a record waits before asking again after our credentials were refused.
CREDENTIALS_WAIT = timedelta(minutes=5)


@dataclass(frozen=True)
class RetryPolicy:
    """Retries inside one call. Few and short: the pipeline retries the whole step later."""

    attempts: int = 3
    within: timedelta = timedelta(minutes=2)  # no new try starts after this
    wait_initial: float = 0.5
    wait_max: float = 8.0
    wait_jitter: float = 1.0


DEFAULT_RETRY = RetryPolicy()


def timeout(total: timedelta) -> httpx.Timeout:
    """The configured timeout for reads, writes and the pool; connecting gets at most 10 s."""
    seconds = max(total.total_seconds(), 0.001)
    return httpx.Timeout(seconds, connect=min(seconds, _MAX_CONNECT))


class _Transient(Exception):
    """A 5xx or 408 answer: worth another try inside the call."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


# Failures that prove the request never reached the service.
_NOT_SENT: tuple[type[Exception], ...] = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


async def send(
    call: Callable[[], Awaitable[httpx.Response]],
    *,
    who: str,
    policy: RetryPolicy = DEFAULT_RETRY,
    repeatable: bool = True,
    scrub: Scrub = redact,
    describe: Callable[[httpx.Response], str] | None = None,
) -> httpx.Response:
    """``call()`` with transient failures retried; any answer below 500 (but 408) is returned.

    ``call`` builds the request afresh each time (a consumed upload body
    cannot be sent twice). ``describe`` extracts the provider's message from
    an error answer for the final ``RetryableError`` (whole: it is redacted
    with ``scrub`` before it is bounded).
    """
    retry_on: tuple[type[Exception], ...] = (
        (_Transient, httpx.TransportError) if repeatable else (_Transient, *_NOT_SENT)
    )
    tries = 0
    try:
        async for attempt in stamina.retry_context(
            on=retry_on,
            attempts=policy.attempts,
            timeout=policy.within,
            wait_initial=policy.wait_initial,
            wait_max=policy.wait_max,
            wait_jitter=policy.wait_jitter,
        ):
            with attempt:
                tries += 1
                resp = await call()
                if resp.status_code >= 500 or resp.status_code == 408:
                    raise _Transient(resp)
                return resp
    except _Transient as e:
        # The provider's body is bounded only after the secrets are out of it (H1).
        detail = short(describe(e.response), scrub) if describe else ""
        raise RetryableError(
            scrub(
                f"{who} answered {e.response.status_code}"
                + (f" ({detail})" if detail else "")
                + f"; gave up after {_tries(tries)}"
            ),
            retry_after=retry_after(e.response),
        ) from e
    except httpx.TimeoutException as e:
        if not repeatable and not isinstance(e, _NOT_SENT):
            raise RetryableError(
                f"{who} did not answer within the timeout ({type(e).__name__}); the request may have been "
                "accepted, so a retry could start the work a second time"
            ) from e
        raise RetryableError(f"{who} did not answer within the timeout ({type(e).__name__}, {_tries(tries)})") from e
    except httpx.TransportError as e:
        raise RetryableError(scrub(f"{who} could not be reached ({type(e).__name__}: {e}; {_tries(tries)})")) from e
    raise AssertionError("unreachable")  # pragma: no cover


def _tries(n: int) -> str:
    return "1 try" if n == 1 else f"{n} tries"


def retry_after(resp: httpx.Response, *, now: datetime | None = None) -> timedelta | None:
    """The wait a response asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an HTTP date."""
    ms = resp.headers.get("retry-after-ms")
    if ms:
        try:
            return timedelta(milliseconds=max(float(ms), 0.0))
        except ValueError:
            pass
    value = resp.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return timedelta(seconds=max(float(value), 0.0))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(when - (now or datetime.now(UTC)), timedelta(0))


def json_body(resp: httpx.Response, *, who: str, what: str) -> Any:
    """The JSON of a successful answer; anything else may be a truncated response → retry."""
    try:
        return json.loads(resp.content)
    except (ValueError, UnicodeDecodeError) as e:
        raise RetryableError(
            f"{who} sent a malformed {what} ({resp.status_code}, {len(resp.content)} bytes, not JSON); "
            "it may have been truncated"
        ) from e


def rejected(who: str, resp: httpx.Response, message: str, scrub: Scrub) -> PermanentError:
    """A 4xx answer: the same request cannot succeed later."""
    text = f"{who} rejected the request ({resp.status_code})"
    if message:
        text += f": {short(message, scrub)}"
    return PermanentError(HaltCode.PROVIDER_REJECTED, scrub(text))


def credentials_refused(who: str, status: int | str, message: str, scrub: Scrub, *, kept: str) -> CredentialsRefused:
    """Our own credentials refused (O5): not the recording's fault, and nothing another attempt could fix.

    The record waits ``CREDENTIALS_WAIT`` and asks again, spending no attempt;
    an operation already started is kept (never marked lost) and one not yet
    started is started once the owner has fixed the credentials. ``kept`` says
    which, for the journal.
    """
    text = f"{who} refused our credentials ({status}"
    if message:
        text += f": {short(message, scrub)}"
    return CredentialsRefused(scrub(f"{text}); {kept}"), delay=CREDENTIALS_WAIT)
