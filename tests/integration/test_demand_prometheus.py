"""`gpuplan demand --prometheus` against a real Prometheus holding a history the test drew
(prometheus_stand_in.py): the hourly demand read back is what was written, per namespace and hour; the
runs are the gangs; chunked reads equal one read; credentials are sent and never shown; and every bad-data
path (unreachable, 4xx, 5xx then success, 5xx to the end, a query returning nothing, a gap, a negative
value, a counter reset, an unmapped namespace, a short history) gives its one line and writes nothing
half."""

from __future__ import annotations

import base64
import logging
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from cli_output import assert_input_error, output_lines
from prometheus_stand_in import GANGS, GAP_HOURS, HOURS, NEGATIVE_HOUR, RESET_HOUR, PrometheusServer, Proxy
from typer.testing import CliRunner

from planner.cli.app import app
from planner.history.errors import HistorySourceError
from planner.history.mapping import Mapping
from planner.history.prometheus import PrometheusClient
from planner.history.queries import QueryConfig
from planner.history.read import read_prometheus, window

pytestmark = pytest.mark.xdist_group("prometheus")
SECRET = "s3cr3t-t0ken-40"


def demand(
    prom: PrometheusServer, out: Path, *args: str, url: str | None = None, env: dict[str, str] | None = None
) -> Any:
    command = [
        "demand",
        "--prometheus",
        url or prom.url,
        "--since",
        "10d",
        "--until",
        prom.fleet.end.isoformat(),
    ]
    ahead = ["--horizon", "1d", "--paths", "5"]  # these tests read; test_demand_forecast.py forecasts
    return CliRunner().invoke(app, [*command, *ahead, "-o", str(out), "-q", *args], env=env)


def nothing_written(out: Path) -> None:
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]


def one_line(result: Any, code: int, *needles: str) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    lines = output_lines(result.output)
    assert len(lines) == 1 and "Traceback" not in result.output, lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def expected_filled(values: np.ndarray) -> np.ndarray:
    """The drawn series with the gap filled linearly between its neighbours (series.py's rule)."""
    first, last = min(GAP_HOURS) - 1, max(GAP_HOURS) + 1
    filled = values.copy()
    steps = last - first
    for k, h in enumerate(range(first + 1, last), start=1):
        filled[h] = values[first] + (values[last] - values[first]) * k / steps
    return filled


def test_the_hourly_demand_read_back_is_what_was_written(prom: PrometheusServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = demand(prom, out)
    assert result.exit_code == 0, result.output
    fleet = prom.fleet
    for namespace, written in fleet.gpus.items():
        frame = pd.read_csv(out / "history" / f"{namespace}.csv")
        assert len(frame) == HOURS
        assert frame["time"].iloc[0] == fleet.start.strftime("%Y-%m-%dT%H:%M:%SZ")
        np.testing.assert_allclose(frame["gpus"].to_numpy(), expected_filled(written), atol=1e-6)
        assert list(np.flatnonzero(frame["filled"].to_numpy())) == list(GAP_HOURS)
    runs = pd.read_csv(out / "history" / "runs.csv")
    assert len(runs) == len(GANGS)
    for row, (_label, name, first, last, nodes, per_node, gpus) in zip(runs.itertuples(), GANGS, strict=True):
        assert row.name == name and row.namespace == "research"
        assert row.hours == last - first + 1
        assert row.start == (fleet.start + pd.Timedelta(hours=first)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert (row.nodes, row.gpus_per_node, row.pods) == (nodes, per_node * gpus, nodes * per_node)
    pending = pd.read_csv(out / "history" / "pending.csv")
    np.testing.assert_allclose(pending["research"], expected_filled(fleet.pending), atol=1e-6)
    utilization = pd.read_csv(out / "history" / "utilization.csv")
    np.testing.assert_allclose(utilization["chat"], expected_filled(fleet.utilization), atol=1e-6)
    document = pd.read_json(out / "history.json", typ="series")
    assert document["services"]["chat"]["team"] == "assist"  # the pods' team label
    assert document["services"]["search"]["team"] == "search"  # a namespace is a team
    assert document["provenance"]["gaps"][0]["steps"] == len(GAP_HOURS)
    assert document["provenance"]["location"] == prom.url
    assert set(document["provenance"]["queries"]) >= {"allocated", "coverage", "runs"}
    assert any("saw nothing at 2 of 240 steps" in w for w in document["warnings"])


def test_a_chunked_read_equals_one_read(prom: PrometheusServer) -> None:
    config = QueryConfig()
    span = window(
        pd.Timedelta(days=10).to_pytimedelta(), pd.Timedelta(hours=1).to_pytimedelta(), prom.fleet.end
    )
    whole = PrometheusClient(prom.url)
    chunked = PrometheusClient(prom.url, max_points=50)
    one = whole.query_range(config.query("allocated"), span.start, span.end, span.step)
    many = chunked.query_range(config.query("allocated"), span.start, span.end, span.step)
    assert (whole.requests, chunked.requests) == (1, 5)  # 240 steps in chunks of 50
    key = lambda s: sorted(s.labels.items())  # noqa: E731
    assert [(s.labels, s.samples) for s in sorted(one, key=key)] == [
        (s.labels, s.samples) for s in sorted(many, key=key)
    ]
    assert sum(len(s.samples) for s in one) == 3 * (HOURS - len(GAP_HOURS))


def test_credentials_are_sent_and_never_shown(
    prom: PrometheusServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy = Proxy(prom.url, require=f"Bearer {SECRET}")
    try:
        result = demand(prom, tmp_path / "ok", url=proxy.url, env={"GPUPLAN_PROMETHEUS_TOKEN": SECRET})
        assert result.exit_code == 0, result.output
        assert proxy.seen and set(proxy.seen) == {f"Bearer {SECRET}"}
        refused = demand(
            prom, tmp_path / "no", url=proxy.url, env={"GPUPLAN_PROMETHEUS_TOKEN": "wrong-" + SECRET}
        )
        one_line(refused, 6, proxy.url, "HTTP 401", "GPUPLAN_PROMETHEUS_TOKEN")
        nothing_written(tmp_path / "no")
        in_url = proxy.url.replace("http://", f"http://admin:{SECRET}@")
        refused = demand(prom, tmp_path / "no", url=in_url, env={"GPUPLAN_PROMETHEUS_TOKEN": ""})
        one_line(refused, 6, proxy.url.replace("http://", "http://"), "HTTP 401")
        basic = "Basic " + base64.b64encode(f"ops:{SECRET}".encode()).decode()
        proxy.require = basic
        env = {"GPUPLAN_PROMETHEUS_USER": "ops", "GPUPLAN_PROMETHEUS_PASSWORD": SECRET}
        assert demand(prom, tmp_path / "basic", url=proxy.url, env=env).exit_code == 0
        assert proxy.seen[-1] == basic
    finally:
        proxy.close()
    for text in (result.output, refused.output, caplog.text, (tmp_path / "ok" / "history.json").read_text()):
        assert SECRET not in text
        assert base64.b64encode(f"ops:{SECRET}".encode()).decode() not in text


def test_an_unreachable_server_is_one_line_naming_it(prom: PrometheusServer, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "out"
    result = demand(prom, out, "--retries", "0", url=f"http://127.0.0.1:{port}")
    one_line(result, 6, f"http://127.0.0.1:{port}", "unreachable", "count(kube_pod_info)")
    nothing_written(out)


def test_a_4xx_names_the_query_and_prometheus_error(prom: PrometheusServer, tmp_path: Path) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  allocated: 'sum by (namespace ('\n")
    out = tmp_path / "out"
    result = demand(prom, out, "--queries", str(queries))
    one_line(result, 6, prom.url, "HTTP 400", "bad_data", "sum by (namespace (")
    nothing_written(out)


def test_a_5xx_is_retried_then_succeeds_and_a_lasting_one_fails(prom: PrometheusServer) -> None:
    span = window(
        pd.Timedelta(days=10).to_pytimedelta(), pd.Timedelta(hours=1).to_pytimedelta(), prom.fleet.end
    )
    proxy = Proxy(prom.url, fail_first=(503, 429))
    try:
        client = PrometheusClient(proxy.url, backoff=0.001)
        history = read_prometheus(client, QueryConfig(), Mapping(), span)
        assert client.requests == 6 + 2  # six roles, two refused answers retried
        assert history.services["chat"].gpus.iloc[0] == prom.fleet.gpus["chat"][0]
        proxy.fail_first = [503] * 4
        client = PrometheusClient(proxy.url, backoff=0.001, retries=3)
        with pytest.raises(HistorySourceError, match=r"HTTP 503 after retries: unavailable: try later"):
            client.query_range("count(kube_pod_info)", span.start, span.end, span.step)
        assert client.requests == 4
    finally:
        proxy.close()


def test_a_query_returning_nothing_is_an_input_error(prom: PrometheusServer, tmp_path: Path) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  allocated: sum by (namespace) (no_such_metric)\n")
    out = tmp_path / "out"
    result = demand(prom, out, "--queries", str(queries))
    assert_input_error(result, "queries.allocated", "returned no series", "--show-queries")
    nothing_written(out)


def test_negative_values_are_filled_and_said(prom: PrometheusServer, tmp_path: Path) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  allocated: sum by (namespace) (test_gpus_negative)\n")
    out = tmp_path / "out"
    result = demand(prom, out, "--queries", str(queries))
    assert result.exit_code == 0, result.output
    assert "service 'odd': 1 negative values in {namespace=odd}" in result.output
    frame = pd.read_csv(out / "history" / "odd.csv")
    assert frame["gpus"].min() == 2 and frame["filled"].iloc[NEGATIVE_HOUR] == 1


def test_a_counter_reset_is_mended(prom: PrometheusServer, tmp_path: Path) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text(
        "queries:\n  allocated: sum by (namespace) (test_requests_total)\ncounters: [allocated]\n"
    )
    out = tmp_path / "out"
    result = demand(prom, out, "--queries", str(queries))
    assert result.exit_code == 0, result.output
    assert "service 'ctr': 1 counter resets" in result.output
    gpus = pd.read_csv(out / "history" / "ctr.csv")["gpus"].to_numpy()
    assert gpus[RESET_HOUR] == 5  # restarted from 0
    plain = [h for h in range(1, HOURS) if h != RESET_HOUR and h not in GAP_HOURS and h - 1 not in GAP_HOURS]
    assert set(gpus[plain]) == {10}


def test_an_unmapped_namespace_is_named(prom: PrometheusServer, tmp_path: Path) -> None:
    mapping = tmp_path / "m.yaml"
    mapping.write_text("services:\n  - {service: chat, team: assist, namespace: chat, gpus_per_replica: 1}\n")
    out = tmp_path / "out"
    result = demand(prom, out, "--mapping", str(mapping))
    assert result.exit_code == 0, result.output
    warnings = [line for line in output_lines(result.output) if line.startswith("warning:")]
    assert any("namespace 'search' maps to no service" in w and "add a rule" in w for w in warnings)
    assert any("namespace 'research' maps to no service" in w for w in warnings)
    assert sorted(
        p.name for p in (out / "history").glob("*.csv") if p.stem not in ("runs", "pending", "utilization")
    ) == ["chat.csv"]
    assert "replicas" in pd.read_csv(out / "history" / "chat.csv").columns


def test_a_history_shorter_than_a_week_is_flagged(prom: PrometheusServer, tmp_path: Path) -> None:
    result = demand(prom, tmp_path / "out", "--since", "3d")
    assert result.exit_code == 0, result.output
    assert "covers 72 hours, less than a week" in result.output


def test_show_queries_prints_each_role_and_marks_overrides(tmp_path: Path) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  pending: sum(kueue_pending_workloads)\n")
    result = CliRunner().invoke(app, ["demand", "--show-queries", "--queries", str(queries)])
    assert result.exit_code == 0, result.output
    assert "# pending (from --queries)\nsum(kueue_pending_workloads)" in result.output
    assert 'kube_pod_container_resource_requests{resource="nvidia_com_gpu"}' in result.output
