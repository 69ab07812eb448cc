"""Forecast bench (issue 40, point 6): backtests on real job traces, and the speed target.

Run ``python bench/forecast_bench.py [--no-speed] [--series 200]`` from anywhere. Reads
``../shared/data`` (the product never does); without the data it says so and skips that part.

Printed, all from one run on this machine:

* Philly (``philly-jobs-pollux/philly.csv``, read by ``planner.simulate.philly.load_trace``): per virtual
  cluster, the hourly mean of GPUs requested by running jobs (a job runs from its submit time for its
  duration: the trace has no queueing), 2017-09-04 to the last submit; the clusters with at least 10
  GPUs on average, and their sum;
* openb (``alibaba-openb-gpu-v2023/openb_pod_list_default.csv``, validated by
  ``planner.simulate.openb.load_pods``; the time columns read beside it): GPUs requested (num_gpu x
  gpu_milli / 1000) per workload kind (qos LS, BE) and all, from the first deletion (before it the
  trace only holds pods that outlived it) to the last; times are seconds from an unstated trace start,
  put at 2023-01-01 UTC;
* for each series: ``planner.history.backtest`` with the last 30 days held out (the last 20 % where
  less than 90 days): MAPE and MASE of P50 and P10-P90 coverage, model and seasonal naive;
* speed: ``--series`` synthetic series of 90 days hourly (daily + weekly cycles, growth, noise), each
  forecast 30 days ahead with 100 paths on 2 worker processes; seconds and the ratio to the 60 s target.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: the repo's packages, not an installed copy
    sys.path.insert(0, str(ROOT))

from planner.history.backtest import BacktestResult, backtest, holdout_for  # noqa: E402
from planner.history.forecast import forecast_many  # noqa: E402
from planner.simulate.openb import load_pods  # noqa: E402
from planner.simulate.philly import load_trace  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
PHILLY = DATA / "philly-jobs-pollux" / "philly.csv"
OPENB = DATA / "alibaba-openb-gpu-v2023" / "openb_pod_list_default.csv"
OPENB_ORIGIN = pd.Timestamp("2023-01-01", tz="UTC")  # ASSUMPTION: the trace's times have no stated origin
TARGET_SECONDS = 60.0


def hourly_load(start_s: np.ndarray, end_s: np.ndarray, gpus: np.ndarray, origin: pd.Timestamp) -> pd.Series:
    """Mean GPUs requested per hour: each job's GPUs spread over the hours it overlaps, exactly."""
    first = np.floor(start_s.min() / 3600.0)
    hours = int(np.ceil(end_s.max() / 3600.0) - first)
    edges = (np.arange(hours + 1) + first) * 3600.0
    # GPU-seconds of running jobs before each hour edge: sum of gpus x clip(edge - start, 0, duration)
    order_s, order_e = np.argsort(start_s), np.argsort(end_s)
    cum_s = np.concatenate([[0.0], np.cumsum((gpus * start_s)[order_s])])
    cum_e = np.concatenate([[0.0], np.cumsum((gpus * end_s)[order_e])])
    g_s = np.concatenate([[0.0], np.cumsum(gpus[order_s])])
    g_e = np.concatenate([[0.0], np.cumsum(gpus[order_e])])
    i = np.searchsorted(start_s[order_s], edges, side="right")
    j = np.searchsorted(end_s[order_e], edges, side="right")
    # started by the edge: gpus x (edge - start); ended by it: less gpus x (edge - end)
    area = (g_s[i] * edges - cum_s[i]) - (g_e[j] * edges - cum_e[j])
    index = origin + pd.to_timedelta(edges[:-1], unit="s")
    return pd.Series(np.diff(area) / 3600.0, index=pd.DatetimeIndex(index))


def philly_series(path: Path) -> dict[str, pd.Series]:
    trace = load_trace(path)
    origin = pd.Timestamp("1970-01-01", tz="UTC")
    start = (trace["submit"] - origin).dt.total_seconds().to_numpy()
    end = start + trace["hours"].to_numpy() * 3600.0
    last_submit = start.max()
    out: dict[str, pd.Series] = {}
    whole = hourly_load(start, end, trace["gpus"].to_numpy(dtype=float), origin)
    whole = whole[whole.index < origin + pd.Timedelta(seconds=last_submit)]
    for team, rows in trace.groupby("team"):
        mask = trace.index.isin(rows.index)
        series = hourly_load(start[mask], end[mask], trace["gpus"].to_numpy(dtype=float)[mask], origin)
        series = series.reindex(whole.index, fill_value=0.0)
        if series.mean() >= 10.0:
            out[f"philly vc {team}"] = series
    out["philly all"] = whole
    return out


def openb_series(path: Path) -> dict[str, pd.Series]:
    pods = load_pods(path)  # the project's loader checks the GPU columns
    times = pd.read_csv(path, usecols=["qos", "creation_time", "deletion_time"])
    gpus = pods.num_gpu * pods.gpu_milli / 1000.0
    start = times["creation_time"].to_numpy(dtype=float)
    end = times["deletion_time"].to_numpy(dtype=float)
    window_start = end.min()
    out: dict[str, pd.Series] = {}
    kinds = {
        "openb LS": times["qos"] == "LS",
        "openb BE": times["qos"] == "BE",
        "openb all": times["qos"].notna(),
    }
    for name, kind in kinds.items():
        mask = kind.to_numpy() & (gpus > 0)
        series = hourly_load(start[mask], end[mask], gpus[mask], OPENB_ORIGIN)
        out[name] = series[series.index >= OPENB_ORIGIN + pd.Timedelta(seconds=window_start)]
    return out


def _cell(value: float | None, fmt: str) -> str:
    return format(value, fmt) if value is not None else "undef."


def table(results: list[BacktestResult]) -> str:
    lines = [
        "| series | hours fitted / held out | mean GPUs | model | MAPE % | MASE | P10-P90 cover | "
        "naive MAPE % | naive MASE | naive cover | model beats naive |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m, b = r.model, r.baseline
        lines.append(
            f"| {r.name} | {r.train_hours} / {r.holdout_hours} | {r.actual.mean():.1f} | "
            f"{r.forecast.model} | "
            f"{_cell(m.mape, '.1f')} | {_cell(m.mase, '.2f')} | {m.coverage * 100:.0f} % | "
            f"{_cell(b.mape, '.1f')} | {_cell(b.mase, '.2f')} | {b.coverage * 100:.0f} % | "
            f"{'yes' if r.earns_its_keep else 'no'} |"
        )
    return "\n".join(lines)


def backtests(series: dict[str, pd.Series]) -> list[BacktestResult]:
    return [backtest(s, holdout_for(len(s)), n_paths=100, seed=0, name=name) for name, s in series.items()]


def synthetic(count: int, hours: int = 90 * 24, seed: int = 0) -> dict[str, pd.Series]:
    rng = np.random.default_rng(seed)
    t = np.arange(hours)
    index = pd.date_range("2026-01-05", periods=hours, freq="h", tz="UTC")
    out = {}
    for k in range(count):
        base, growth = rng.uniform(5, 200), rng.uniform(-0.01, 0.05)
        law = base * (1 + 0.3 * np.sin(2 * np.pi * t / 24) + 0.1 * np.sin(2 * np.pi * t / 168)) + growth * t
        out[f"s{k}"] = pd.Series(np.maximum(law + rng.normal(0, 0.05 * base, hours), 0.0), index=index)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200, help="synthetic series for the speed figure")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-speed", action="store_true")
    args = parser.parse_args()
    for label, path, reader in (("Philly", PHILLY, philly_series), ("openb", OPENB, openb_series)):
        if not path.exists():
            print(f"{label}: {path} not found, skipped\n")
            continue
        began = time.perf_counter()
        results = backtests(reader(path))
        print(f"{label} ({path.name}), {time.perf_counter() - began:.1f} s:\n{table(results)}\n")
    if args.no_speed:
        return
    series = synthetic(args.series)
    began = time.perf_counter()
    done = forecast_many(series, 720, n_paths=100, seed=0, workers=args.workers)
    seconds = time.perf_counter() - began
    print(
        f"Speed: {len(done)} series x {90 * 24} h, 720 h ahead, 100 paths each, {args.workers} workers: "
        f"{seconds:.1f} s ({seconds / len(done):.3f} s per series); target {TARGET_SECONDS:.0f} s, "
        f"ratio {seconds / TARGET_SECONDS:.2f}"
    )


if __name__ == "__main__":
    main()
