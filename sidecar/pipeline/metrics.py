"""Prometheus metrics (P20): step runs by stage and outcome; records per stage; what PocketBase's login
guard saw (read from it now and then: PocketBase exports no metrics of its own)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from sidecar.outcome import Verdict
from sidecar.runtime.clock import Clock
from sidecar.storage.model import LoginFigures
from sidecar.storage.protocol import Storage

log = logging.getLogger("transcriber.metrics")


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape or health check."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.step_runs = Counter(
            "transcriber_step_runs",
            "Step runs by the stage the record was in and how they ended.",
            ["stage", "outcome"],
            registry=self.registry,
        )
        self.records = Gauge(
            "transcriber_records",
            "Records per stage; halted ones counted apart.",
            ["stage", "halted"],
            registry=self.registry,
        )
        self.claims = Counter(
            "transcriber_claims", "Claim calls by result (work, empty, refused).", ["result"], registry=self.registry
        )
        self.set_aside = Counter(
            "transcriber_records_set_aside",
            "Records the claim could not read and halted (unclaimable) so that the queue behind them moves on.",
            registry=self.registry,
        )
        self.copies = Counter(
            "transcriber_provider_copies",
            "Provider-side copies (uploaded audio, stored results) removed, or that failed to be removed.",
            ["result"],
            registry=self.registry,
        )
        self.audio_seconds = Counter(
            "transcriber_audio_seconds",
            "Seconds of audio a provider accepted to recognize, by provider.",
            ["provider"],
            registry=self.registry,
        )
        self.normalized_removed = Counter(
            "transcriber_normalized_copies_removed",
            "Normalized copies of finished recordings removed after [pipeline] keep_normalized.",
            registry=self.registry,
        )
        self.normalized_removed_bytes = Counter(
            "transcriber_normalized_removed_bytes",
            "Bytes of normalized copies of finished recordings removed.",
            registry=self.registry,
        )
        self.credentials_refused = Counter(
            "transcriber_credentials_refused",
            "Steps postponed because a provider refused our credentials (401/403), by stage.",
            ["stage"],
            registry=self.registry,
        )

        self.failed_logins = Counter(
            "transcriber_failed_logins",
            "Wrong passwords PocketBase's login guard counted (senders and the owner; the service account is "
            "left to the per-address limit). Every worker reports the same figures: take the max, not the sum.",
            registry=self.registry,
        )
        self.accounts_under_attack = Gauge(
            "transcriber_accounts_under_attack",
            "Accounts whose wrong passwords from addresses they never signed in from make an attack now "
            "(identities no account has count as one); the panel's login_alerts has the rows.",
            registry=self.registry,
        )
        self._failed_logins_seen = 0

    def audio_sent(self, provider: str, seconds: float) -> None:
        self.audio_seconds.labels(provider=provider).inc(max(seconds, 0.0))

    def step_finished(self, stage: str, verdict: Verdict) -> None:
        self.step_runs.labels(stage=stage, outcome=verdict.value).inc()

    def serve(self, host: str, port: int, health: Callable[[], tuple[bool, str]] | None = None) -> Callable[[], None]:
        """Serves ``/metrics`` (and ``/health``: 200 when ``health()`` says ready, else 503) in a thread;
        returns a function that stops it."""
        metrics_app = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == "/health":
                ready, detail = health() if health is not None else (True, "ready")
                body = json.dumps({"ready": ready, "detail": detail}).encode()
                start_response("200 OK" if ready else "503 Service Unavailable", [("Content-Type", "application/json")])
                return [body]
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]

        server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
        thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
        thread.start()
        log.info("metrics on http://%s:%d/metrics, health on /health", host, port)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(5)

        return stop

    async def refresh_records(self, storage: Storage, stages: Iterable[str]) -> None:
        counts = await storage.count_records(list(stages))
        for (stage, halted), n in counts.items():
            self.records.labels(stage=stage, halted=str(halted).lower()).set(n)

    def logins_seen(self, figures: LoginFigures) -> None:
        """Takes in the login guard's figures: its count since PocketBase started grows the counter by what
        is new (a smaller count: PocketBase restarted, and all of it is new)."""
        seen = figures.failed_logins
        self.failed_logins.inc(seen - self._failed_logins_seen if seen >= self._failed_logins_seen else seen)
        self._failed_logins_seen = seen
        self.accounts_under_attack.set(figures.accounts_under_attack)

    async def refresh_logins(self, storage: Storage) -> None:
        self.logins_seen(await storage.login_figures())

    async def keep_fresh(self, storage: Storage, stages: Iterable[str], clock: Clock, every: float = 15.0) -> None:
        """The records gauge and the login figures, read every ``every`` seconds until cancelled."""
        names = list(stages)
        while True:
            try:
                await self.refresh_records(storage, names)
            except Exception as exc:  # metrics must never take the workers down
                log.debug("records gauge refresh failed: %s", type(exc).__name__)
            try:
                await self.refresh_logins(storage)
            except Exception as exc:
                log.debug("login figures refresh failed: %s", type(exc).__name__)
            await clock.sleep(every)
