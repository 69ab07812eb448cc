"""The daemon's Prometheus metrics and its ``/metrics`` + ``/healthz`` HTTP endpoint.

The jobs call :class:`DaemonMetrics`' methods (``metrics.action("launch", "done")``), never the metric
objects, so names, labels and their bounds live here alone. Each instance has its own registry unless given
one: two daemons in one process (the tests run several) never clash on a name.

| metric | type | labels | method: meaning |
| --- | --- | --- | --- |
| ``gpuplan_plan_cost_usd_per_hour`` | gauge | | ``plan_cost``: the current plan's cost |
| ``gpuplan_pool_nodes`` | gauge | pool, capacity, state | ``pool_nodes``: nodes ``desired``, ``actual`` |
| ``gpuplan_actions_total`` | counter | kind, outcome | ``action``: done / failed / skipped |
| ``gpuplan_interruptions_total`` | counter | kind | ``interruption``: interruption / rebalance |
| ``gpuplan_job_duration_seconds`` | histogram | job | ``job``: each run, failed runs included |
| ``gpuplan_job_last_success_timestamp_seconds`` | gauge | job | ``job``: Unix time of the last success |
| ``gpuplan_job_failures_total`` | counter | job | ``job``: runs that raised |
| ``gpuplan_job_consecutive_failures`` | gauge | job | ``job``: failed runs since the last success |
| ``gpuplan_shortfall_nodes`` | gauge | pool | ``shortfall``: nodes the cloud would not give, per pool |
| ``gpuplan_commitment_days_left`` | gauge | commitment | ``commitment_expiry``: days until it ends |
| ``gpuplan_price_age_seconds`` | gauge | | ``price_age``: age of the oldest live price used |
| ``gpuplan_commitment_used_fraction`` | gauge | commitment, state | ``commitment_use``: share in use |
| ``gpuplan_reservation_idle_nodes`` | gauge | reservation | ``idle_reservations``: slots paid idle |

``gpuplan_commitment_used_fraction`` is the share of a commitment's offering's committed nodes that
non-spot nodes use, ``planned`` (the plan's current period) beside ``actual`` (the fleet);
``gpuplan_reservation_idle_nodes`` counts a reservation's free slots while on-demand nodes of its offering
run outside it (``commitment_use.py``).

``state`` is ``desired`` (the plan) or ``actual`` (the fleet); ``capacity`` is a capacity type
(``on-demand``, ``spot``); ``kind`` on actions is an :class:`models.actions.ActionKind` value.

Label values are bounded sets (pool names, action kinds, job names, commitment names): never node or
request ids, which would make a new series per node and swamp Prometheus. Each value is redacted like a log
line (:func:`planner.operations.daemon.logs.redact`) and cut to 128 characters, so a secret cannot reach the
exposition even through a badly chosen name. Alerts worth writing: ``time() -
gpuplan_job_last_success_timestamp_seconds > N``, ``gpuplan_pool_nodes{state="actual"} <
gpuplan_pool_nodes{state="desired"}`` for longer than a reconcile cycle, ``gpuplan_shortfall_nodes > 0``,
``gpuplan_job_consecutive_failures >= 3``, ``gpuplan_commitment_days_left <
30``, ``gpuplan_reservation_idle_nodes > 0`` (money paid twice), a commitment's ``actual`` use well below
its ``planned``, ``rate(gpuplan_actions_total{outcome="failed"}[15m]) > 0``.

:class:`MetricsServer` serves ``/metrics`` (Prometheus' text format) and ``/healthz`` (JSON; 200 when
``ok``, 503 otherwise, so a load balancer or Kubernetes probe reads it without parsing) on loopback unless
told otherwise: the metrics name pools and costs, which are not for the whole network.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from planner.operations.daemon.logs import redact

__all__ = ["OUTCOMES", "DaemonMetrics", "MetricsServer"]

log = logging.getLogger("gpuplan.daemon.metrics")

#: An action's outcomes, as :class:`models.actions.ActionResult` spells them.
OUTCOMES: Final = frozenset({"done", "failed", "skipped"})
_MAX_LABEL: Final = 128
# jobs run from well under a second (a price refresh against a fake) to many minutes (a 500-node reconcile)
_JOB_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


def _label(value: object) -> str:
    """A label value: an enum's value rather than its repr, redacted, bounded in length."""
    text = str(getattr(value, "value", value))
    return redact(text)[:_MAX_LABEL]


@dataclass
class _JobState:
    last_success: float | None = None  # clock() time
    last_failure: float | None = None
    failures_in_a_row: int = 0
    running: bool = False


class DaemonMetrics:
    """The daemon's metrics, set through one method per fact (see the module docstring's table).

    ``clock`` gives the wall time recorded as a job's last success (``time.time`` by default); the daemon's
    simulated-time tests pass their own, so health ages follow simulated days. Durations always use the
    real monotonic clock: they measure work done, not simulated time.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        self._clock = clock
        self._started = clock()
        self._jobs: dict[str, _JobState] = {}
        self._lock = threading.Lock()
        r = self.registry
        self._plan_cost = Gauge(
            "gpuplan_plan_cost_usd_per_hour", "Cost of the current plan, USD per hour.", registry=r
        )
        self._pool_nodes = Gauge(
            "gpuplan_pool_nodes",
            "Nodes per pool and capacity type: desired by the plan, actual in the fleet.",
            ["pool", "capacity", "state"],
            registry=r,
        )
        self._actions = Counter(
            "gpuplan_actions_total",
            "Provisioning actions by kind and outcome (done, failed, skipped).",
            ["kind", "outcome"],
            registry=r,
        )
        self._interruptions = Counter(
            "gpuplan_interruptions_total",
            "Spot interruption and rebalance notices for managed nodes.",
            ["kind"],
            registry=r,
        )
        self._job_duration = Histogram(
            "gpuplan_job_duration_seconds",
            "Duration of each run of a daemon job, failed runs included.",
            ["job"],
            buckets=_JOB_BUCKETS,
            registry=r,
        )
        self._job_last_success = Gauge(
            "gpuplan_job_last_success_timestamp_seconds",
            "Unix time of the last successful run of a daemon job.",
            ["job"],
            registry=r,
        )
        self._job_failures = Counter(
            "gpuplan_job_failures_total", "Runs of a daemon job that raised.", ["job"], registry=r
        )
        self._job_in_a_row = Gauge(
            "gpuplan_job_consecutive_failures",
            "Failed runs of a daemon job since its last success (the daemon backs off while above 0).",
            ["job"],
            registry=r,
        )
        self._shortfall = Gauge(
            "gpuplan_shortfall_nodes",
            "Nodes a pool or gang is short after the last reconcile and its fallbacks (the cloud had none).",
            ["pool"],
            registry=r,
        )
        self._commitment_days = Gauge(
            "gpuplan_commitment_days_left",
            "Days until a bought commitment (reservation, savings plan, CUD) ends.",
            ["commitment"],
            registry=r,
        )
        self._price_age = Gauge(
            "gpuplan_price_age_seconds", "Age of the oldest live price the current plan uses.", registry=r
        )
        self._commitment_use = Gauge(
            "gpuplan_commitment_used_fraction",
            "Share of a commitment's offering's committed nodes that non-spot nodes use: planned and actual.",
            ["commitment", "state"],
            registry=r,
        )
        self._reservation_idle = Gauge(
            "gpuplan_reservation_idle_nodes",
            "Free slots of a capacity reservation while on-demand nodes of its offering run outside it.",
            ["reservation"],
            registry=r,
        )

    # -- the facts the jobs report ---------------------------------------------------------------------

    def plan_cost(self, usd_per_hour: float) -> None:
        self._plan_cost.set(usd_per_hour)

    def pool_nodes(self, pool: str, capacity: str, desired: int, actual: int) -> None:
        """Both numbers at once, so a dashboard never sees one pool's desired beside another cycle's
        actual."""
        p, c = _label(pool), _label(capacity)
        self._pool_nodes.labels(p, c, "desired").set(desired)
        self._pool_nodes.labels(p, c, "actual").set(actual)

    def forget_pool(self, pool: str, capacity: str) -> None:
        """Drop a pool the plan no longer has, so its last numbers do not linger as if current."""
        p, c = _label(pool), _label(capacity)
        for state in ("desired", "actual"):
            with suppress(KeyError):
                self._pool_nodes.remove(p, c, state)

    def action(self, kind: str, outcome: str) -> None:
        out = _label(outcome)
        if out not in OUTCOMES:
            raise ValueError(f"action outcome {outcome!r}: expected one of {sorted(OUTCOMES)}")
        self._actions.labels(_label(kind), out).inc()

    def shortfall(self, short: Mapping[str, int]) -> None:
        """The last reconcile's shortfall per pool (a gang by its run name); pools not named are at 0."""
        self._shortfall.clear()
        for pool, nodes in short.items():
            self._shortfall.labels(_label(pool)).set(nodes)

    def interruption(self, kind: str) -> None:
        self._interruptions.labels(_label(kind)).inc()

    def commitment_expiry(self, name: str, days_left: float) -> None:
        self._commitment_days.labels(_label(name)).set(days_left)

    def forget_commitment(self, name: str) -> None:
        """Drop a commitment that has ended or been sold, so it stops counting down below zero."""
        with suppress(KeyError):
            self._commitment_days.remove(_label(name))

    def price_age(self, seconds: float) -> None:
        self._price_age.set(seconds)

    def commitment_use(self, used: Mapping[str, tuple[float, float]]) -> None:
        """Each active commitment's (planned, actual) use; commitments no longer active are dropped."""
        self._commitment_use.clear()
        for name, (planned, actual) in used.items():
            self._commitment_use.labels(_label(name), "planned").set(planned)
            self._commitment_use.labels(_label(name), "actual").set(actual)

    def idle_reservations(self, idle: Mapping[str, int]) -> None:
        """Free slots per reservation that sits idle beside on-demand nodes; reservations not named: none."""
        self._reservation_idle.clear()
        for name, nodes in idle.items():
            self._reservation_idle.labels(_label(name)).set(nodes)

    @contextmanager
    def job(self, name: str) -> Iterator[None]:
        """Time one run of job ``name``: its duration always, its last-success time when the block ends
        normally, a failure when it raises (the exception goes on: the scheduler decides what follows).

        The failure counter's series exists from the first run on, at 0, so ``rate()`` and ``increase()``
        see the first failure rather than a series appearing from nothing.
        """
        job = _label(name)
        failures = self._job_failures.labels(job)
        with self._lock:
            state = self._jobs.setdefault(job, _JobState())
            state.running = True
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            self._job_duration.labels(job).observe(time.perf_counter() - start)
            failures.inc()
            with self._lock:
                state.running = False
                state.last_failure = self._clock()
                state.failures_in_a_row += 1
                self._job_in_a_row.labels(job).set(state.failures_in_a_row)
            raise
        self._job_duration.labels(job).observe(time.perf_counter() - start)
        now = self._clock()
        self._job_last_success.labels(job).set(now)
        with self._lock:
            state.running = False
            state.last_success = now
            state.failures_in_a_row = 0
            self._job_in_a_row.labels(job).set(0)

    # -- reading back ----------------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format, as ``/metrics`` serves it."""
        return generate_latest(self.registry)

    def health(self, max_age: Mapping[str, float] | None = None) -> dict[str, Any]:
        """A ``/healthz`` body: each job's last success and its age; ``degraded`` when a job named in
        ``max_age`` (seconds) has not succeeded within that time. A job that has not succeeded yet counts
        from the daemon's start, so a fresh daemon is ``ok`` until its first deadline passes.

        Staleness, not a single failure, makes it degraded: one throttled refresh should not get the
        daemon restarted by a probe, a refresh that has failed for an hour should be looked at.
        """
        now = self._clock()
        limits = dict(max_age or {})
        with self._lock:
            states = {name: _JobState(**vars(s)) for name, s in self._jobs.items()}
        for name in limits:
            states.setdefault(_label(name), _JobState())
        jobs: dict[str, dict[str, Any]] = {}
        stale: list[str] = []
        for name, s in sorted(states.items()):
            since = s.last_success if s.last_success is not None else self._started
            entry: dict[str, Any] = {
                "last_success": _iso(s.last_success),
                "age_seconds": None if s.last_success is None else round(now - s.last_success, 3),
                "failures_in_a_row": s.failures_in_a_row,
                "running": s.running,
            }
            limit = limits.get(name)
            if limit is not None:
                entry["max_age_seconds"] = limit
                if now - since > limit:
                    stale.append(name)
            jobs[name] = entry
        return {"status": "degraded" if stale else "ok", "stale": stale, "jobs": jobs}


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck scraper must not keep the daemon from exiting
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class MetricsServer:
    """``/metrics`` and ``/healthz`` over HTTP, in a background thread.

    ``health`` returns the ``/healthz`` body (``{"status": "ok" | "degraded", "jobs": {...}, ...}``); by
    default :meth:`DaemonMetrics.health` with no deadlines. A status other than ``ok`` answers 503; a
    ``health`` that raises answers 500 with ``{"status": "error"}`` (its exception is logged, redacted, not
    sent). ``port=0`` takes a free port; :attr:`url` says which.
    """

    def __init__(
        self,
        metrics: DaemonMetrics,
        host: str = "127.0.0.1",
        port: int = 0,
        health: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self._health = health if health is not None else metrics.health
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` once started (the real port when 0 was asked)."""
        if self._server is None:
            raise RuntimeError("the metrics server is not started")
        address = self._server.server_address
        host, port = str(address[0]), address[1]
        host_text = f"[{host}]" if ":" in host else host
        return f"http://{host_text}:{port}"

    def start(self) -> MetricsServer:
        if self._server is not None:
            raise RuntimeError("the metrics server is already started")
        cls = _Server6 if ":" in self.host else _Server
        self._server = cls((self.host, self.port), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="gpuplan-metrics", kwargs={"poll_interval": 0.1}
        )
        self._thread.daemon = True
        self._thread.start()
        log.info("metrics on %s/metrics, health on %s/healthz", self.url, self.url)
        return self

    def stop(self) -> None:
        """Stop serving and release the port; safe to call twice."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        metrics, health = self.metrics, self._health

        class Handler(BaseHTTPRequestHandler):
            server_version = "gpuplan-metrics"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, metrics.exposition())
                elif path == "/healthz":
                    try:
                        body = dict(health())
                        code = 200 if body.get("status") == "ok" else 503
                    except Exception:
                        log.exception("health check failed")
                        body, code = {"status": "error"}, 500
                    payload = redact(json.dumps(body, default=str, sort_keys=True)).encode()
                    self._send(code, "application/json", payload)
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found: try /metrics or /healthz\n")

            def _send(self, code: int, content_type: str, payload: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                # scrapes every 15 s would drown the daemon's log at INFO; the default writes to stderr raw
                log.debug("metrics http: " + format, *args)

        return Handler
