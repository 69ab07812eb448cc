"""The daemon's metrics, its /metrics + /healthz server and its JSON logs (issue 16, point 3).

Metrics are read back the way Prometheus reads them (the text exposition, parsed by prometheus_client's
parser); the server is asked over real HTTP on loopback; logs are parsed line by line. A planted fake
credential (an environment secret, a Bearer token, a database URL's password, an AWS-style secret key) is
logged every way a job could log it and must appear in no output.
"""

from __future__ import annotations

import io
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from planner.operations.daemon.logs import (
    THIRD_PARTY_LOGGERS,
    JsonFormatter,
    configure_json_logging,
    mask_url,
    redact,
)
from planner.operations.daemon.metrics import DaemonMetrics, MetricsServer

ENV_SECRET = "planted-azure-secret-Qx7Zp2"
BEARER = "eyJplanted.bearer-token_9f3k"
DB_PASSWORD = "planted-db-pw-77"
DB_URL = f"postgresql://gpuplan:{DB_PASSWORD}@db.internal:5432/gpuplan"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTEDKEY"  # 40 characters
assert len(AWS_SECRET) == 40
PLANTED = (ENV_SECRET, BEARER, DB_PASSWORD, AWS_SECRET)


class Clock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def samples(metrics: DaemonMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, by name and sorted labels, parsed from the text Prometheus reads."""
    text = metrics.exposition().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(metrics: DaemonMetrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, tuple(sorted(labels.items()))))


# -- metrics ---------------------------------------------------------------------------------------------


def test_each_method_shows_in_the_exposition() -> None:
    m = DaemonMetrics()
    m.plan_cost(123.5)
    m.pool_nodes("aws-us-east-1-p5-48xlarge-spot", "spot", desired=8, actual=5)
    m.action("launch", "done")
    m.action("launch", "done")
    m.action("terminate", "failed")
    m.interruption("interruption")
    m.interruption("rebalance")
    m.interruption("interruption")
    m.commitment_expiry("ri-p5-1y", 12.5)
    m.price_age(90.0)

    assert value(m, "gpuplan_plan_cost_usd_per_hour") == 123.5
    pool = {"pool": "aws-us-east-1-p5-48xlarge-spot", "capacity": "spot"}
    assert value(m, "gpuplan_pool_nodes", **pool, state="desired") == 8
    assert value(m, "gpuplan_pool_nodes", **pool, state="actual") == 5
    assert value(m, "gpuplan_actions_total", kind="launch", outcome="done") == 2
    assert value(m, "gpuplan_actions_total", kind="terminate", outcome="failed") == 1
    assert value(m, "gpuplan_actions_total", kind="launch", outcome="failed") is None
    assert value(m, "gpuplan_interruptions_total", kind="interruption") == 2
    assert value(m, "gpuplan_interruptions_total", kind="rebalance") == 1
    assert value(m, "gpuplan_commitment_days_left", commitment="ri-p5-1y") == 12.5
    assert value(m, "gpuplan_price_age_seconds") == 90.0

    # a later report replaces the gauges (not added), and forget_* removes a pool or commitment
    m.pool_nodes("aws-us-east-1-p5-48xlarge-spot", "spot", desired=8, actual=8)
    assert value(m, "gpuplan_pool_nodes", **pool, state="actual") == 8
    m.forget_pool("aws-us-east-1-p5-48xlarge-spot", "spot")
    m.forget_commitment("ri-p5-1y")
    names = {name for name, _ in samples(m)}
    assert "gpuplan_pool_nodes" not in names and "gpuplan_commitment_days_left" not in names
    m.forget_pool("never-seen", "spot")  # no error for a pool that was never reported


def test_enum_labels_use_their_value_and_outcomes_are_checked() -> None:
    from models.actions import ActionKind
    from models.tiers import CapacityType

    m = DaemonMetrics()
    m.action(ActionKind.CREATE_PLACEMENT_GROUP, "skipped")
    m.pool_nodes("gcp-a3", CapacityType.ON_DEMAND, 2, 2)
    assert value(m, "gpuplan_actions_total", kind="create-placement-group", outcome="skipped") == 1
    assert value(m, "gpuplan_pool_nodes", pool="gcp-a3", capacity="on-demand", state="desired") == 2
    with pytest.raises(ValueError, match="outcome"):
        m.action("launch", "succeeded")


def test_job_records_duration_success_and_failure() -> None:
    clock = Clock()
    m = DaemonMetrics(clock=clock)
    with m.job("reconcile"):
        pass
    assert value(m, "gpuplan_job_last_success_timestamp_seconds", job="reconcile") == clock.t
    assert value(m, "gpuplan_job_duration_seconds_count", job="reconcile") == 1
    assert value(m, "gpuplan_job_failures_total", job="reconcile") == 0  # exists at 0 from the first run

    clock.t += 600
    with pytest.raises(RuntimeError, match="boom"), m.job("reconcile"):
        raise RuntimeError("boom")
    assert value(m, "gpuplan_job_failures_total", job="reconcile") == 1
    assert value(m, "gpuplan_job_duration_seconds_count", job="reconcile") == 2  # failed runs timed too
    # a failure leaves the last success where it was
    assert value(m, "gpuplan_job_last_success_timestamp_seconds", job="reconcile") == clock.t - 600
    assert value(m, "gpuplan_job_duration_seconds_bucket", job="reconcile", le="+Inf") == 2


def test_two_instances_do_not_share_a_registry() -> None:
    a, b = DaemonMetrics(), DaemonMetrics()
    a.plan_cost(1.0)
    b.plan_cost(2.0)
    assert value(a, "gpuplan_plan_cost_usd_per_hour") == 1.0
    assert value(b, "gpuplan_plan_cost_usd_per_hour") == 2.0
    shared = CollectorRegistry()
    DaemonMetrics(shared)
    with pytest.raises(ValueError, match="Duplicated"):  # one registry holds one daemon's metrics
        DaemonMetrics(shared)


def test_health_degrades_when_a_job_is_stale() -> None:
    clock = Clock()
    m = DaemonMetrics(clock=clock)
    limits = {"refresh_prices": 3600.0, "reconcile": 900.0}
    fresh = m.health(limits)
    assert fresh["status"] == "ok"  # a fresh daemon has until its first deadline
    assert fresh["jobs"]["reconcile"]["last_success"] is None

    with m.job("refresh_prices"):
        pass
    clock.t += 1000  # reconcile never succeeded and its 900 s have passed
    h = m.health(limits)
    assert h["status"] == "degraded" and h["stale"] == ["reconcile"]
    assert h["jobs"]["refresh_prices"]["age_seconds"] == 1000
    assert h["jobs"]["refresh_prices"]["last_success"] == "2023-11-14T22:13:20Z"

    with m.job("reconcile"):
        pass
    assert m.health(limits)["status"] == "ok"
    clock.t += 3000  # refresh_prices is now 4000 s old
    assert m.health(limits)["stale"] == ["reconcile", "refresh_prices"]


# -- the HTTP server -------------------------------------------------------------------------------------


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


@pytest.fixture
def served() -> Iterator[tuple[DaemonMetrics, MetricsServer, dict[str, Any]]]:
    m = DaemonMetrics()
    body: dict[str, Any] = {"status": "ok", "jobs": {}}
    server = MetricsServer(m, health=lambda: body).start()
    try:
        yield m, server, body
    finally:
        server.stop()


def test_server_serves_metrics_and_health_over_http(
    served: tuple[DaemonMetrics, MetricsServer, dict[str, Any]],
) -> None:
    m, server, body = served
    assert server.url.startswith("http://127.0.0.1:") and not server.url.endswith(":0")
    m.plan_cost(42.0)
    code, ctype, text = get(server.url + "/metrics")
    assert code == 200 and ctype == CONTENT_TYPE_LATEST
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["gpuplan_plan_cost_usd_per_hour"].samples[0].value == 42.0

    code, ctype, text = get(server.url + "/healthz")
    assert (code, ctype, json.loads(text)["status"]) == (200, "application/json", "ok")
    body["status"] = "degraded"
    code, _, text = get(server.url + "/healthz")
    assert code == 503 and json.loads(text)["status"] == "degraded"

    assert get(server.url + "/")[0] == 404
    assert get(server.url + "/metrics/extra")[0] == 404


def test_server_default_health_and_a_failing_health() -> None:
    clock = Clock()
    m = DaemonMetrics(clock=clock)
    with m.job("replan"):
        pass
    with MetricsServer(m) as server:  # default health: DaemonMetrics.health() without deadlines
        code, _, text = get(server.url + "/healthz")
        assert code == 200 and json.loads(text)["jobs"]["replan"]["age_seconds"] == 0

    def broken() -> dict[str, Any]:
        raise RuntimeError(f"cannot reach {DB_URL}")

    with MetricsServer(m, health=broken) as server:
        code, _, text = get(server.url + "/healthz")
    assert code == 500 and json.loads(text) == {"status": "error"}


def test_server_stops_and_frees_its_port() -> None:
    server = MetricsServer(DaemonMetrics()).start()
    url = server.url
    assert get(url + "/metrics")[0] == 200
    server.stop()
    server.stop()  # twice is fine
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/metrics", timeout=2)
    with pytest.raises(RuntimeError):
        _ = server.url


# -- JSON logs and redaction ---------------------------------------------------------------------------


@pytest.fixture
def restored_loggers() -> Iterator[None]:
    """configure_json_logging changes process-wide loggers: put them back for the tests that follow."""
    names = ["gpuplan", *THIRD_PARTY_LOGGERS]
    saved = {n: (lg.handlers[:], lg.level, lg.propagate) for n in names for lg in [logging.getLogger(n)]}
    try:
        yield
    finally:
        for n, (handlers, level, propagate) in saved.items():
            lg = logging.getLogger(n)
            lg.handlers[:], lg.level, lg.propagate = handlers, level, propagate


@pytest.fixture
def json_log(monkeypatch: pytest.MonkeyPatch, restored_loggers: None) -> io.StringIO:
    """The JSON handler on a buffer, at DEBUG, with a planted secret in the environment."""
    monkeypatch.setenv("AZURE_CLIENT_SECRET", ENV_SECRET)
    stream = io.StringIO()
    configure_json_logging(stream, level="DEBUG")
    return stream


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_time_level_logger_message_and_extras(json_log: io.StringIO) -> None:
    log = logging.getLogger("gpuplan.daemon.jobs")
    log.info("reconciled %d actions", 3, extra={"job": "reconcile", "pool": "p", "counts": {"launch": 2}})
    log.debug("details")
    logging.getLogger("gpuplan.daemon").warning("odd", extra={"level": "extra-level"})
    first, second, third = lines(json_log)
    assert first["message"] == "reconciled 3 actions"
    assert (first["level"], first["logger"]) == ("INFO", "gpuplan.daemon.jobs")
    assert first["time"].endswith("Z") and first["time"][:2] == "20"
    assert first["job"] == "reconcile" and first["counts"] == {"launch": 2}
    assert second["level"] == "DEBUG"
    assert third["level"] == "WARNING" and third["extra_level"] == "extra-level"  # extras never overwrite


def test_third_party_loggers_are_json_at_warning(json_log: io.StringIO) -> None:
    logging.getLogger("botocore.endpoint").info("request dump")  # below WARNING: dropped
    logging.getLogger("apscheduler.scheduler").warning("job missed")
    logging.getLogger("sqlalchemy.pool").error("connection lost")
    (a, b) = lines(json_log)
    assert (a["logger"], a["message"]) == ("apscheduler.scheduler", "job missed")
    assert (b["logger"], b["level"]) == ("sqlalchemy.pool", "ERROR")


def test_configuring_twice_does_not_duplicate_lines(json_log: io.StringIO) -> None:
    configure_json_logging(json_log, level="INFO")
    logging.getLogger("gpuplan").info("once")
    logging.getLogger("gpuplan").debug("not at INFO")
    assert [r["message"] for r in lines(json_log)] == ["once"]


def test_a_planted_secret_never_reaches_a_log_line(json_log: io.StringIO) -> None:
    log = logging.getLogger("gpuplan.daemon.jobs")
    log.info("connecting to %s", DB_URL)
    log.info(f"env leaked: {ENV_SECRET}")
    log.warning("sdk said: Authorization: Bearer %s", BEARER)
    log.warning("headers", extra={"headers": {"Authorization": f"Bearer {BEARER}"}, "dsn": DB_URL})
    log.error("config", extra={"password": DB_PASSWORD, "client_secret": "short", "nested": [ENV_SECRET]})
    log.error("botocore: SecretAccessKey='%s' rejected", AWS_SECRET)
    try:
        raise ConnectionError(f"could not connect to {DB_URL} with token={BEARER} and {ENV_SECRET}")
    except ConnectionError:
        log.exception("job failed", extra={"job": "reconcile"})
    logging.getLogger("azure.identity").warning("ClientSecretCredential failed: %s", ENV_SECRET)
    log.info("stack", stack_info=True, extra={"note": f"aws_secret_access_key = {AWS_SECRET}"})

    out = json_log.getvalue()
    records = lines(json_log)
    assert len(records) == 9
    for secret in PLANTED:
        assert secret not in out, secret
    assert "short" not in out  # a secret-named extra is masked whatever its length
    # ...and what is not secret is still there to debug with
    by_msg = {r["message"]: r for r in records}
    assert (
        "postgresql://gpuplan:***@db.internal:5432/gpuplan"
        in by_msg["connecting to " + mask_url(DB_URL)]["message"]
    )
    failed = by_msg["job failed"]
    assert "ConnectionError" in failed["exception"] and "Traceback" in failed["exception"]
    assert failed["job"] == "reconcile"
    assert by_msg["config"]["password"] == "***" and by_msg["config"]["nested"] == ["***"]
    assert by_msg["sdk said: Authorization: Bearer ***"]


def test_redaction_filter_also_covers_a_plain_formatter(
    monkeypatch: pytest.MonkeyPatch, restored_loggers: None
) -> None:
    """The filter rewrites the record itself: a text formatter on the same handler is safe too."""
    monkeypatch.setenv("GPUPLAN_WEBHOOK_TOKEN", ENV_SECRET)
    stream = io.StringIO()
    handler = configure_json_logging(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    try:
        raise ValueError(ENV_SECRET)
    except ValueError:
        logging.getLogger("gpuplan.x").exception("webhook %s failed", ENV_SECRET)
    out = stream.getvalue()
    assert "ValueError: ***" in out and "webhook *** failed" in out and ENV_SECRET not in out


def test_redact_patterns() -> None:
    env = {"AWS_SESSION_TOKEN": "tok-12345678", "SHORT_KEY": "abc", "HOME": "/root/planted-home"}
    assert redact("x tok-12345678 y", env) == "x *** y"
    assert redact("abc", env) == "abc"  # under 8 characters: not treated as a secret
    assert redact("/root/planted-home", env) == "/root/planted-home"  # not a secret-looking name
    assert redact("call Bearer abc.DEF-123=", env) == "call Bearer ***"
    assert redact("https://blob/c?sv=1&sig=AbC%2F&se=2", env) == "https://blob/c?sv=1&sig=***&se=2"
    assert redact('{"clientSecret": "two words"}', env) == '{"clientSecret": "***"}'
    # not secrets: client and idempotency tokens (hashes of an intent), keys that merely contain a word
    text = "client_token=ab12cd34 idempotency_key=k1 design=x keyboard=y pool=aws-p5-spot"
    assert redact(text, env) == text
    sha1 = "0123456789abcdef0123456789abcdef01234567"
    assert redact(f"commit {sha1}", env) == f"commit {sha1}"  # 40 characters but no secret word


def test_mask_url() -> None:
    assert mask_url(DB_URL) == "postgresql://gpuplan:***@db.internal:5432/gpuplan"
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_url("sqlite:///var/lib/gpuplan/state.db") == "sqlite:///var/lib/gpuplan/state.db"
    assert mask_url("https://hooks.example/x?token=abc&run=r1") == "https://hooks.example/x?token=***&run=r1"
    assert mask_url("postgresql://u:p%40ss@[::1]:5432/d") == "postgresql://u:***@[::1]:5432/d"
    assert DB_PASSWORD not in mask_url("postgresql://u:" + DB_PASSWORD + "@h:bad-port/d")


# -- nothing secret in the metrics either ------------------------------------------------------------------


def test_a_planted_secret_never_reaches_the_exposition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_CLIENT_SECRET", ENV_SECRET)
    m = DaemonMetrics()
    # label values that a careless caller built from an error or a config value
    m.action(f"launch {ENV_SECRET}", "failed")
    m.pool_nodes(f"pool-{ENV_SECRET}", "spot", 1, 0)
    m.commitment_expiry(f"ri via {DB_URL}", 3)
    m.interruption(f"Bearer {BEARER}")
    with pytest.raises(ValueError), m.job(f"job SecretAccessKey={AWS_SECRET}"):
        raise ValueError(ENV_SECRET)
    m.action("x" * 500, "done")
    with MetricsServer(m, health=lambda: {"status": "ok", "detail": f"dsn {DB_URL} {ENV_SECRET}"}) as server:
        exposition = get(server.url + "/metrics")[2]
        health = get(server.url + "/healthz")[2]
    for secret in PLANTED:
        assert secret not in exposition and secret not in health, secret
    assert "pool-***" in exposition
    labels = [s.labels for f in text_string_to_metric_families(exposition) for s in f.samples]
    assert max(len(v) for lab in labels for v in lab.values()) <= 128


def test_json_formatter_redacts_without_the_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The formatter is the second layer: a handler someone built with it alone still leaks nothing."""
    monkeypatch.setenv("GCP_SERVICE_ACCOUNT_KEY", ENV_SECRET)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("gpuplan.test.formatter_only")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        try:
            raise PermissionError(f"key {ENV_SECRET} rejected for {DB_URL}")
        except PermissionError:
            logger.exception("auth %s", ENV_SECRET, extra={"dsn": DB_URL, "api_key": "k"})
    finally:
        logger.removeHandler(handler)
    (record,) = lines(stream)
    assert ENV_SECRET not in stream.getvalue() and DB_PASSWORD not in stream.getvalue()
    assert "PermissionError: key *** rejected" in record["exception"] and record["api_key"] == "***"
