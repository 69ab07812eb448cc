"""gpuplan demand's speed target (issue 40): 90 days of hourly history for 200 series read and forecast in
under a minute on 2 cores.

Run ``python bench/demand_bench.py [--series 200] [--days 90] [--horizon-days 365 30] [--paths 100]``
from anywhere. The history: ``--series`` namespaces, each ``bench_gpus{namespace=...}`` hourly with a
daily and a weekly cycle, growth and noise (drawn, seed 40). Where Debian's ``prometheus`` and
``promtool`` are installed, it is backfilled into a real Prometheus on 127.0.0.1 (as the tests'
``tests/integration/prometheus_stand_in.py`` does, in blocks of up to 31 days as Prometheus' compaction
leaves them; the backfill and a first cold read are not timed) and read through
``planner.history.read.read_prometheus`` over HTTP; else it is written as a usage CSV (chargeback's
format, one file per 30 days: a usage CSV holds at most 200,000 rows) and read by
``planner.history.sources.read_usage_history``. Then ``planner.history.outlook``
forecasts every series (quantiles, paths, the CLI's defaults) on 2 worker processes, for each horizon.

Printed: seconds to read, to forecast, the total, and the ratio to the 60 s target; per horizon; and, as a
figure the machine's load does not change, the forecast's CPU seconds (this process and its workers) with the
load average it ran at: on a shared box the wall clock measures the neighbours, CPU seconds / workers is
what the forecast takes on idle cores.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for extra in (ROOT, ROOT / "tests" / "integration"):
    if str(extra) not in sys.path:  # the repo's packages (not an installed copy) and the stand-in's helpers
        sys.path.insert(0, str(extra))

from planner.history.mapping import Mapping  # noqa: E402
from planner.history.outlook import Settings, outlook  # noqa: E402
from planner.history.prometheus import PrometheusClient  # noqa: E402
from planner.history.queries import QueryConfig  # noqa: E402
from planner.history.read import read_prometheus, window  # noqa: E402
from planner.history.result import History  # noqa: E402
from planner.history.sources import read_usage_history  # noqa: E402

TARGET_SECONDS = 60.0
HOUR = timedelta(hours=1)


def draw(series: int, hours: int, seed: int = 40) -> np.ndarray:
    """``series x hours`` GPUs: level 2-40, daily cycle, weekend dip, 0-3 % growth a month, noise."""
    rng = np.random.default_rng(seed)
    h = np.arange(hours)
    level = rng.uniform(2, 40, (series, 1))
    daily = rng.uniform(0.1, 0.4, (series, 1)) * np.sin(
        2 * math.pi * (h - rng.uniform(0, 24, (series, 1))) / 24
    )
    weekend = np.where((h // 24) % 7 >= 5, rng.uniform(0.6, 0.95, (series, 1)), 1.0)
    growth = (1 + rng.uniform(0, 0.03, (series, 1))) ** (h / 730.5)
    values = level * (1 + daily) * weekend * growth + rng.normal(0, 0.05, (series, hours)) * level
    return np.round(np.maximum(values, 0.1), 2)


def from_prometheus(values: np.ndarray, end: datetime) -> tuple[History, float]:
    """Backfill a real Prometheus, read the history back over HTTP; seconds of the read only."""
    from prometheus_stand_in import _free_port, _wait_ready

    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    assert prometheus and promtool
    series, hours = values.shape
    start = end - timedelta(hours=hours - 1)
    stamps = [int((start + k * HOUR).timestamp()) for k in range(hours)]
    lines = [
        f'bench_gpus{{namespace="ns-{i:03d}"}} {values[i, k]:g} {stamps[k]}'
        for i in range(series)
        for k in range(hours)
    ]
    folder = Path(tempfile.mkdtemp(prefix="gpuplan-demand-bench-"))
    try:
        began = time.perf_counter()
        # blocks of up to 31 days, as Prometheus' own compaction leaves them (its largest block is 10 % of
        # the retention, at most 31 d); promtool's default 2 h blocks would leave 1,080 blocks to open
        data = folder / "bench.om"
        data.write_text("\n".join([*lines, "# EOF"]) + "\n", encoding="utf-8")
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", "--max-block-duration=744h",
             str(data), str(folder / "tsdb")],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        print(f"backfilled {len(lines):,} samples in {time.perf_counter() - began:.1f} s (not timed)")
        (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
        port = _free_port()
        with (folder / "log").open("w") as log:
            process = subprocess.Popen(
                [prometheus, f"--config.file={folder / 'prometheus.yml'}",
                 f"--storage.tsdb.path={folder / 'tsdb'}", "--storage.tsdb.retention.time=3650d",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                url = f"http://127.0.0.1:{port}"
                _wait_ready(url, process, folder / "log")
                config = QueryConfig(
                    queries={
                        "allocated": "sum by (namespace) (bench_gpus)",
                        "coverage": "count(bench_gpus)",
                    }
                )
                span = window(timedelta(hours=hours - 1), HOUR, end)
                client = PrometheusClient(url)
                read_prometheus(client, config, Mapping(), span)  # warm: the first query loads the blocks
                print(f"first read (cold: Prometheus opens {len(lines) // 1000}k samples' blocks): not timed")
                began = time.perf_counter()
                history = read_prometheus(PrometheusClient(url), config, Mapping(), span)
                return history, time.perf_counter() - began
            finally:
                process.kill()
                process.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def from_usage(values: np.ndarray, end: datetime) -> tuple[History, float]:
    """The same history as usage CSVs (one row per namespace and hour), one file per 30 days (a usage CSV
    holds at most 200,000 rows: "split it by month"), read and joined; seconds of the reads and the join."""
    import dataclasses

    import pandas as pd

    series, hours = values.shape
    start = end - timedelta(hours=hours - 1)
    folder = Path(tempfile.mkdtemp(prefix="gpuplan-demand-bench-"))
    try:
        paths = []
        for first in range(0, hours, 30 * 24):
            path = folder / f"usage-{first // (30 * 24)}.csv"
            with path.open("w") as f:
                f.write("team,project,namespace,start,end,gpus,offering,tier\n")
                for k in range(first, min(hours, first + 30 * 24)):
                    a = (start + k * HOUR).strftime("%Y-%m-%dT%H:%M:%SZ")
                    b = (start + (k + 1) * HOUR).strftime("%Y-%m-%dT%H:%M:%SZ")
                    for i in range(series):
                        row = f"t{i:03d},ns-{i:03d},ns-{i:03d},{a},{b},{values[i, k]:g}"
                        f.write(f"{row},aws:us-east-1:p5.48xlarge,on_demand\n")
            paths.append(path)
        began = time.perf_counter()
        parts = [read_usage_history(path, Mapping(), HOUR) for path in paths]
        services = {
            name: dataclasses.replace(
                service, gpus=pd.concat([p.services[name].gpus for p in parts if name in p.services])
            )
            for name, service in parts[0].services.items()
        }
        index = pd.DatetimeIndex(pd.concat([pd.Series(0, index=p.index) for p in parts]).index, name="time")
        provenance = dataclasses.replace(parts[0].provenance, end=parts[-1].provenance.end)
        history = dataclasses.replace(parts[0], index=index, services=services, provenance=provenance)
        return history, time.perf_counter() - began
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def cpu_seconds() -> float:
    """User + system CPU of this process and of its reaped children (the forecast's worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--horizon-days", type=int, nargs="+", default=[365, 30])
    parser.add_argument("--paths", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--usage", action="store_true", help="read a usage CSV even where Prometheus is installed"
    )
    args = parser.parse_args()
    hours = args.days * 24
    values = draw(args.series, hours)
    end = datetime(2027, 3, 1, tzinfo=UTC) - HOUR
    live = not args.usage and shutil.which("prometheus") and shutil.which("promtool")
    history, read_s = from_prometheus(values, end) if live else from_usage(values, end)
    source = "a real Prometheus (HTTP query_range)" if live else "a usage CSV"
    assert len(history.services) == args.series, sorted(history.services)[:5]
    print(f"read {args.series} series x {len(history.index)} h from {source}: {read_s:.1f} s")
    for days in args.horizon_days:
        settings = Settings(hours=days * 24, paths=args.paths, seed=0, workers=args.workers)
        load, cpu, began = os.getloadavg()[0], cpu_seconds(), time.perf_counter()
        future = outlook(history, settings)
        fit_s, fit_cpu = time.perf_counter() - began, cpu_seconds() - cpu
        assert len(future.services) == args.series
        total = read_s + fit_s
        print(
            f"horizon {days} d, {args.paths} paths, {args.workers} workers: forecast {fit_s:.1f} s; "
            f"read + forecast {total:.1f} s; ratio to the {TARGET_SECONDS:.0f} s target "
            f"{total / TARGET_SECONDS:.2f} ({'met' if total <= TARGET_SECONDS else 'not met'}); "
            f"forecast CPU {fit_cpu:.1f} s ({fit_cpu / args.workers:.1f} s per worker on idle cores); "
            f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
        )


if __name__ == "__main__":
    main()
