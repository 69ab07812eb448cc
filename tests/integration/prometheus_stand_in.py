"""A real Prometheus with a fleet's history the tests draw: not a test module.

:func:`draw_fleet` draws ten days of hourly kube-state-metrics series (GPU requests of running pods in
a few namespaces with a daily cycle and growth, their phase, labels and info), DCGM utilization, Kueue
pending workloads, three gang runs with job labels, a two-hour monitoring outage, and two bad series
(negative values, a counter that resets) for the bad-data tests. :func:`prometheus_server` writes it as
OpenMetrics, backfills it with ``promtool tsdb create-blocks-from openmetrics`` and starts
``prometheus`` on 127.0.0.1 and a free port on that TSDB (no scrape targets), waits for ``/-/ready``,
yields a :class:`PrometheusServer` with the truth, and stops it. Where the binaries are missing it calls
``pytest.skip`` with the reason (``.ci/run`` installs Debian's ``prometheus`` package). The recipe:
``shared/reference/CLOUD-TESTING.md`` section 7.

:class:`Proxy` is a loopback HTTP proxy in front of it that can demand credentials, answer given statuses
first (a 503 then the real answer) and records the headers it saw: for the auth and retry tests.
"""

from __future__ import annotations

import math
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest

__all__ = ["Fleet", "PrometheusServer", "Proxy", "draw_fleet", "prometheus_server"]

HOURS = 240
GAP_HOURS = (100, 101)  # the monitoring saw nothing then
#: inference namespaces: (GPUs per replica, base replicas, daily amplitude, growth per day); the pods of
#: "chat" carry the workload label gpuplan.io/workload=chat and the team label gpuplan.io/team=assist
SERVICES = {"chat": (1, 6, 4, 0.5), "search": (2, 3, 2, 0.2), "research": (4, 1, 0, 0.0)}
#: gangs in "research": (gang label, its value, first hour, last hour, nodes, pods per node, GPUs per pod)
GANGS = [
    ("job_name", "train-a", 30, 50, 2, 1, 8),
    ("kueue_x_k8s_io_pod_group_name", "train-b", 120, 140, 2, 2, 4),
    ("job_name", "train-a", 200, 210, 2, 1, 8),  # the name again, later: a second run
]
NEGATIVE_HOUR = 60
RESET_HOUR = 80


@dataclass
class Fleet:
    """What was written: ``end`` (the last hour, UTC), ``gpus[namespace][h]`` (GPUs requested by the
    namespace's non-gang running pods at hour h; NaN in the gap), the pending and utilization values."""

    end: datetime
    gpus: dict[str, np.ndarray]
    pending: np.ndarray
    utilization: np.ndarray
    lines: list[str] = field(default_factory=list)

    @property
    def start(self) -> datetime:
        return self.end - timedelta(hours=HOURS - 1)

    def hour(self, h: int) -> int:
        return int((self.start + timedelta(hours=h)).timestamp())


def draw_fleet(end: datetime, seed: int = 40) -> Fleet:
    """The fleet's history (module docstring) ending at ``end``, as OpenMetrics lines."""
    rng = np.random.default_rng(seed)
    hours = np.arange(HOURS)
    down = np.isin(hours, GAP_HOURS)
    families: dict[str, list[str]] = {
        n: []
        for n in (
            "kube_pod_container_resource_requests",
            "kube_pod_status_phase",
            "kube_pod_labels",
            "kube_pod_info",
            "DCGM_FI_DEV_GPU_UTIL",
            "kueue_pending_workloads",
            "test_gpus_negative",
            "test_requests_total",
        )
    }
    fleet = Fleet(end, {}, np.zeros(HOURS), np.zeros(HOURS))
    pods: list[tuple[str, str, int, dict[str, str], str, np.ndarray]] = []  # ns, pod, gpus, labels, node, on
    for namespace, (gpus, base, amplitude, growth) in SERVICES.items():
        replicas = np.maximum(
            1, np.round(base + amplitude * np.sin(2 * math.pi * hours / 24) + growth * hours / 24)
        ).astype(int)
        fleet.gpus[namespace] = np.where(down, np.nan, replicas * gpus).astype(float)
        labels = {"gpuplan_io_workload": "chat", "gpuplan_io_team": "assist"} if namespace == "chat" else {}
        for i in range(int(replicas.max())):
            pods.append(
                (namespace, f"{namespace}-{i}", gpus, labels, f"node-{namespace}-{i // 4}", replicas > i)
            )
    for label, value, first, last, nodes, per_node, gpus in GANGS:
        on = (hours >= first) & (hours <= last)
        for n in range(nodes):
            for p in range(per_node):
                pods.append(
                    ("research", f"{value}-{first}-{n}-{p}", gpus, {label: value}, f"gpu-{value}-{n}", on)
                )
    for namespace, pod, gpus, labels, node, on in pods:
        shown = "".join(f',label_{k}="{v}"' for k, v in sorted(labels.items()))
        for h in np.flatnonzero(on & ~down):
            t = fleet.hour(int(h))
            families["kube_pod_container_resource_requests"].append(
                f'kube_pod_container_resource_requests{{namespace="{namespace}",pod="{pod}",container="main",'
                f'node="{node}",resource="nvidia_com_gpu",unit="integer"}} {gpus} {t}'
            )
            families["kube_pod_status_phase"].append(
                f'kube_pod_status_phase{{namespace="{namespace}",pod="{pod}",phase="Running"}} 1 {t}'
            )
            families["kube_pod_labels"].append(
                f'kube_pod_labels{{namespace="{namespace}",pod="{pod}"{shown}}} 1 {t}'
            )
            families["kube_pod_info"].append(
                f'kube_pod_info{{namespace="{namespace}",pod="{pod}",node="{node}"}} 1 {t}'
            )
    fleet.pending = np.round(3 + 2 * np.sin(2 * math.pi * hours / 24)).astype(float)
    fleet.utilization = np.round(50 + 30 * np.sin(2 * math.pi * hours / 24) + rng.normal(0, 2, HOURS), 1)
    counter = 0.0
    for h in np.flatnonzero(~down):
        t = fleet.hour(int(h))
        families["kueue_pending_workloads"].append(
            f'kueue_pending_workloads{{cluster_queue="research",status="active"}} {fleet.pending[h]:g} {t}'
        )
        families["DCGM_FI_DEV_GPU_UTIL"].append(
            f'DCGM_FI_DEV_GPU_UTIL{{exported_namespace="chat",gpu="0"}} {fleet.utilization[h]:g} {t}'
        )
        negative = -3 if h == NEGATIVE_HOUR else 2
        families["test_gpus_negative"].append(f'test_gpus_negative{{namespace="odd"}} {negative} {t}')
        counter = 5.0 if h == RESET_HOUR else counter + 10.0
        families["test_requests_total"].append(f'test_requests_total{{namespace="ctr"}} {counter:g} {t}')
    for lines in families.values():
        fleet.lines += _time_ordered(lines)
    fleet.lines.append("# EOF")
    return fleet


def _time_ordered(lines: list[str]) -> list[str]:
    """One family's lines, each series' samples in time order (promtool requires it)."""
    return sorted(lines, key=lambda line: (line.rsplit(" ", 2)[0], int(line.rsplit(" ", 1)[1])))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PrometheusServer:
    url: str
    fleet: Fleet
    folder: Path


def prometheus_server() -> Iterator[PrometheusServer]:
    """A session fixture's body (module docstring)."""
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus is None or promtool is None:
        pytest.skip("prometheus/promtool not installed (apt-get install prometheus; .ci/run does it as root)")
    folder = Path(tempfile.mkdtemp(prefix="gpuplan-prometheus-"))
    try:
        end = datetime.fromtimestamp(int(time.time()) // 3600 * 3600, UTC) - timedelta(hours=3)
        fleet = draw_fleet(end)
        _backfill(promtool, fleet.lines, folder)
        (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
        port = _free_port()
        log = (folder / "log").open("w")
        process = subprocess.Popen(
            [
                prometheus,
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'tsdb'}",
                "--storage.tsdb.retention.time=3650d",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, process, folder / "log")
            yield PrometheusServer(url, fleet, folder)
        finally:
            process.kill()  # a throwaway server: its graceful shutdown would take seconds
            process.wait()
            log.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _backfill(promtool: str, lines: list[str], folder: Path, parts: int = 4) -> None:
    """``promtool tsdb create-blocks-from openmetrics`` in ``parts`` processes at once, each on its own
    stretch of time cut at the 2-hour block boundaries (promtool writes one block per 2 hours and syncs
    each: one process takes ~10 s for ten days, four take ~2.5 s on two cores)."""
    block = 7200
    samples = [line for line in lines if not line.startswith("#")]
    blocks = [int(line.rsplit(" ", 1)[1]) // block for line in samples]
    first, count = min(blocks), max(blocks) - min(blocks) + 1
    chunks: list[list[str]] = [[] for _ in range(parts)]
    for line, b in zip(samples, blocks, strict=True):
        chunks[(b - first) * parts // count].append(line)
    running = []
    for i, chunk in enumerate(chunks):
        data = folder / f"fleet-{i}.om"
        data.write_text("\n".join([*chunk, "# EOF"]) + "\n", encoding="utf-8")
        command = [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "-q",
            str(data),
            str(folder / "tsdb"),
        ]
        running.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        )
    for process in running:
        _out, error = process.communicate(timeout=120)
        if process.returncode != 0:
            pytest.fail(f"promtool could not backfill: {error[-2000:]}")


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    pytest.fail(f"prometheus not ready in 30 s: {log.read_text(errors='replace')[-2000:]}")


class Proxy:
    """A loopback proxy to ``upstream`` (module docstring): ``require`` (an Authorization header value
    it demands, else 401), ``fail_first`` (statuses it answers before forwarding), ``seen`` (the
    Authorization header of each request)."""

    def __init__(self, upstream: str, require: str | None = None, fail_first: tuple[int, ...] = ()) -> None:
        self.upstream = upstream
        self.require = require
        self.fail_first = list(fail_first)
        self.seen: list[str | None] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.seen.append(self.headers.get("Authorization"))
                if proxy.fail_first:
                    status = proxy.fail_first.pop(0)
                    self._send(status, b'{"status":"error","errorType":"unavailable","error":"try later"}')
                    return
                if proxy.require is not None and self.headers.get("Authorization") != proxy.require:
                    self._send(401, b"Unauthorized\n")
                    return
                answer = httpx.get(proxy.upstream + self.path, timeout=30)
                self._send(answer.status_code, answer.content)

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
