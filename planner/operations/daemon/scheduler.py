"""The daemon in production: its jobs as APScheduler 3 interval jobs, persisted in the SQLAlchemy job
store of the daemon's own database, with the metrics server beside them.

APScheduler pickles a job's function and arguments into the job store, so a job is the module-level
:func:`run_job` with the daemon's key and the job's name; the running :class:`Daemon` is found in
``_DAEMONS`` by that key. ``max_instances=1`` keeps one run of a job at a time and ``coalesce=True``
turns the runs missed while the daemon was down (or busy) into one.

The daemon's backoff after failed runs (``Daemon.next_run``) rides on the interval: a run that comes
while the job backs off is skipped, and when the backoff is shorter than the interval (a daily replan
that failed) the job's next run is moved up to it.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from planner.operations.daemon.daemon import JOBS, Daemon

__all__ = ["run_forever", "run_job"]

log = logging.getLogger("gpuplan.daemon")

_DAEMONS: dict[str, Daemon] = {}
_SCHEDULERS: dict[str, Any] = {}


def run_job(key: str, name: str) -> None:
    """What APScheduler calls: job ``name`` of the daemon registered as ``key``, at the time it is now,
    unless the job is backing off from failed runs."""
    daemon = _DAEMONS[key]
    now = datetime.now(UTC)
    if daemon.failures(name)[0] and not daemon.due(name, now):
        log.info("%s backs off until %s", name, daemon.next_run(name))
        return
    daemon.run(name, now)
    retry = daemon.next_run(name) if daemon.failures(name)[0] else None
    scheduler = _SCHEDULERS.get(key)
    if retry is not None and scheduler is not None:
        interval = getattr(daemon.config.jobs, name).seconds
        if retry < now + timedelta(seconds=interval):
            scheduler.modify_job(name, next_run_time=retry)


def run_forever(
    daemon: Daemon,
    *,
    stop: threading.Event | None = None,
    on_ready: Callable[[Any], None] | None = None,
) -> None:
    """Schedule the jobs, serve /metrics and /healthz, and block until SIGTERM / SIGINT (or ``stop``);
    ``on_ready(metrics_server or None)`` is called once both run (a supervisor, a test)."""
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    from planner.operations.daemon.metrics import MetricsServer

    key = daemon.config.database_url
    _DAEMONS[key] = daemon
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=daemon.config.database_url, tablename="gpuplan_jobs")},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 3600},
        timezone=UTC,
    )
    for name in JOBS:
        schedule = getattr(daemon.config.jobs, name)
        if schedule.enabled:
            scheduler.add_job(
                run_job,
                "interval",
                seconds=schedule.seconds,
                args=[key, name],
                id=name,
                name=name,
                replace_existing=True,
                next_run_time=datetime.now(UTC),
            )
    server: Any = None
    if daemon.config.metrics.enabled:
        server = MetricsServer(
            daemon.metrics,
            host=daemon.config.metrics.host,
            port=daemon.config.metrics.port,
            health=daemon.health,
        )
        server.start()
        log.info("metrics on %s/metrics", server.url)
    stop = stop or threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        # not in the main thread (tests) signals cannot be caught: the caller's stop event ends it
        with contextlib.suppress(ValueError):
            signal.signal(sig, lambda *_: stop.set())
    _SCHEDULERS[key] = scheduler
    scheduler.start()
    log.info("daemon running: %s", ", ".join(j.id for j in scheduler.get_jobs()))
    if on_ready is not None:
        on_ready(server)
    try:
        stop.wait()
    finally:
        scheduler.shutdown(wait=True)
        if server is not None:
            server.stop()
        _DAEMONS.pop(key, None)
        _SCHEDULERS.pop(key, None)
        log.info("daemon stopped")
