"""A chat-completions client for any OpenAI-compatible server (``POST {base_url}/v1/chat/completions``).

Ollama, llama.cpp's server, vLLM, OpenAI and hosted ones speak it; the
offline engine is llama.cpp's own server in a child process (``offline.py``)
spoken to the same way.

Structured output where the server has it: ``response_format`` of type
``json_schema`` (OpenAI, llama.cpp, vLLM, Ollama). A server that refuses
that field (a 400 naming ``response_format`` or ``json_schema``) is asked
again with ``json_object``, then with none; the prompt always asks for JSON
alone, and the answer is validated by the caller either way.

Failures are classified where they enter:

* 5xx, 408, dropped connections, timeouts: retried briefly inside the call
  (``providers.http.send``), then ``RetryableError``;
* 429: the wait it asks for (``Retry-After``, ``retry-after-ms``) is honoured
  inside the call up to a minute, at most twice; past that the step is
  postponed for that long (``PostponeError``: not the recording's fault);
* 401, 403: ``CredentialsRefused`` (postponed, the owner told);
* a request longer than the model's context: ``ContextExceeded`` (the caller
  cuts the text smaller);
* other 4xx: ``PermanentError(provider_rejected)``.

The key goes in the ``Authorization`` header only, and every message is
scrubbed of it (``redaction.scrubber``).
"""

from __future__ import annotations

import functools
import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx

from sidecar.outcome import PostponeError, RetryableError
from sidecar.providers import http
from sidecar.redaction import scrubber, short
from sidecar.runtime.clock import Clock, SystemClock

__all__ = ["ChatServer", "ContextExceeded", "chat_endpoint"]

# The longest wait for a 429 honoured inside the call; longer ones postpone the step.
MAX_INLINE_WAIT = timedelta(seconds=60)
RATE_LIMIT_TRIES = 3
# Structured-output modes, most to least constrained.
_MODES = ("json_schema", "json_object", "none")


class ContextExceeded(Exception):
    """The request does not fit the model's context: send less."""


def chat_endpoint(base_url: str) -> str:
    """``{base_url}/v1/chat/completions``; a base URL already ending in ``/v1`` is the same."""
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return f"{base}/chat/completions"


def _message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:500]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("type") or "")[:2000]
        return str(err)[:2000]
    return ""


def _is_context_error(resp: httpx.Response, message: str) -> bool:
    text = message.lower()
    try:
        kind = str(resp.json().get("error", {}).get("type", ""))
    except (ValueError, AttributeError):
        kind = ""
    return (
        kind == "exceed_context_size_error"
        or "context length" in text
        or "context size" in text
        or "context_length" in text
        or "maximum context" in text
        or "too many tokens" in text
    )


class ChatServer:
    """One OpenAI-compatible chat server: ``complete`` a conversation into an answer's text."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        request_timeout: timedelta = timedelta(minutes=10),
        context_tokens: int = 8192,
        client: httpx.AsyncClient | None = None,
        retry: http.RetryPolicy = http.DEFAULT_RETRY,
        clock: Clock | None = None,
        name: str = "openai",
        chars_per_token: float = 2.5,
        parallel: int = 1,
    ) -> None:
        self.name = name
        self.model = model
        self.context_tokens = context_tokens
        self.parallel = max(1, parallel)  # requests sent at once (the parts of a long transcript)
        self._url = chat_endpoint(base_url)
        host = urlsplit(self._url).hostname or "?"
        self.who = "OpenAI" if host == "api.openai.com" else f"the chat server at {host}"
        self._key = api_key
        self._timeout = http.timeout(request_timeout)
        self._http = client or httpx.AsyncClient(timeout=self._timeout)
        self._own_client = client is None
        self._retry = retry
        self._clock: Clock = clock or SystemClock()
        self._scrub = scrubber([api_key])
        self._mode = 0  # index into _MODES: lowered when a server refuses response_format
        self._chars_per_token = chars_per_token

    async def aclose(self) -> None:
        if self._own_client:
            await self._http.aclose()

    @property
    def structured(self) -> str:
        """How answers are constrained now: json_schema, json_object or none."""
        return _MODES[self._mode]

    async def count_tokens(self, text: str) -> int:
        """An upper estimate of the tokens ``text`` takes (a server without a tokenizer route: by its length)."""
        return int(len(text) / self._chars_per_token) + 1

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"} if self._key else {}

    def _body(self, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
            "stream": False,
        }
        mode = _MODES[self._mode]
        if mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "insights", "strict": True, "schema": schema},
            }
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int) -> str:
        """The text of the server's answer (a JSON document, unchecked)."""
        waited = 0
        while True:
            body = self._body(messages, schema, max_tokens)
            resp = await http.send(
                functools.partial(self._post, body),
                who=self.who,
                policy=self._retry,
                scrub=self._scrub,
                describe=_message,
            )
            if resp.status_code == 200:
                return self._content(resp)
            message = _message(resp)
            if resp.status_code == 429:
                wait = http.retry_after(resp) or timedelta(seconds=30)
                if wait <= MAX_INLINE_WAIT and waited < RATE_LIMIT_TRIES - 1:
                    waited += 1
                    await self._clock.sleep(wait.total_seconds())
                    continue
                raise PostponeError(
                    self._scrub(f"{self.who} is rate limiting us (429): {short(message, self._scrub)}"),
                    delay=max(wait, timedelta(seconds=1)),
                )
            if resp.status_code in http.REFUSED_CREDENTIALS:
                raise http.credentials_refused(
                    self.who, resp.status_code, message, self._scrub, kept="the brief is made once they are fixed"
                )
            if resp.status_code in (400, 413, 422) and _is_context_error(resp, message):
                raise ContextExceeded(self._scrub(f"{self.who}: {short(message, self._scrub)}"))
            lowered = message.lower()
            if (
                resp.status_code in (400, 422)
                and self._mode < len(_MODES) - 1
                and ("response_format" in lowered or "json_schema" in lowered or "schema" in lowered)
            ):
                self._mode += 1  # the server does not take this form of structured output: the next one
                continue
            raise http.rejected(self.who, resp, message, self._scrub)

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        return await self._http.post(self._url, json=body, headers=self._headers(), timeout=self._timeout)

    def _content(self, resp: httpx.Response) -> str:
        data = http.json_body(resp, who=self.who, what="answer")
        try:
            choice = data["choices"][0]
            content = choice["message"].get("content")
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise RetryableError(f"{self.who} answered without a message ({short(json.dumps(data)[:300])})") from e
        if not isinstance(content, str):
            raise RetryableError(f"{self.who} answered with an empty message")
        return content
