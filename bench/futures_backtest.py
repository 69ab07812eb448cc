"""Plans over forecast futures backtested on real history (issue 41, point 6).

Run ``python bench/futures_backtest.py [--trace philly|openb] [--futures 5] [--time-limit 10]`` from anywhere;
it reads ``../shared/data`` (the product never does) through ``bench/forecast_bench.py``'s series and says so
and stops without it.

The fleet: one latency-critical service per series (Philly: the virtual clusters with >= 10 GPUs on
average; openb: the LS and BE kinds), one replica per GPU requested, on AWS us-east-1 A100/H100 nodes,
buying 1-year commitments on day one. The last 30 days (openb: the last 20 %) are held out. From the rest,
``planner.history.forecast`` forecasts each series (statsmodels MSTL + ETS) with its sampled paths; the point
forecast is the P50, the futures the first ``--futures`` sampled paths (equal weights). Three purchase
policies are made on the forecast and then billed on what really happened (the held-out demand planned
with the purchases held, nothing more for sale, the tail carried as gpuplan futures counts it):

* **futures**: ``gpuplan futures``' choice over the sampled futures;
* **point forecast**: what the plan of the P50 buys;
* **lookback**: the cloud's recommendation peer of the point forecast's plan (best of 7/30/60 days);

beside the plan made knowing the held-out demand (clairvoyant: its purchases free). Printed, for
bench/RESULTS.md: each policy's realized cost (horizon, and with the tail), its regret against the
clairvoyant plan, and the seconds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for extra in (ROOT, BENCH):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from forecast_bench import OPENB, PHILLY, openb_series, philly_series  # noqa: E402

from models.futures import FuturesFile, FutureSpec  # noqa: E402
from models.held import holding_only  # noqa: E402
from models.inputs import load_inputs  # noqa: E402
from planner.history.forecast import forecast_many  # noqa: E402
from planner.outputs.reports.futures import render_futures_markdown  # noqa: E402
from planner.planning.futures import carried_tail, peer_stages, plan_futures  # noqa: E402
from planner.planning.optimize import SolveSettings, optimize  # noqa: E402

HELD_OUT_DAYS = 30


def _csv(path: Path, values: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"hour": np.arange(len(values)), "replicas": np.maximum(values, 0.0)}).to_csv(
        path, index=False, float_format="%.6g"
    )


def _scenario(folder: Path, start: pd.Timestamp, hours: int, names: list[str], csv: str) -> Path:
    """The fleet (module docstring) with each service reading ``<csv>/<service>.csv``."""
    data = {
        "name": "backtest",
        "horizon": {"start": start.strftime("%Y-%m-%dT%H:%M:%SZ"), "hours": hours, "period_hours": 1},
        "catalog": "embedded",
        "clouds": {"aws": {"regions": ["us-east-1"]}},
        "purchase": {"terms": ["1y"], "schedule": "horizon"},
        "teams": [{"name": "fleet", "guaranteed_gpus": 0}],
        "inference": [
            {"name": n, "team": "fleet", "gpus_per_replica": 1, "gpu_models": ["A100", "H100"],
             "latency_critical": True, "replicas": {"csv": f"{csv}/{n}.csv"}}
            for n in names
        ],
    }  # fmt: skip
    path = folder / f"{csv}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", choices=["philly", "openb"], default="philly")
    parser.add_argument("--futures", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    source = PHILLY if args.trace == "philly" else OPENB
    if not source.exists():
        print(f"no {source}: the backtest needs ../shared/data")
        return
    series = philly_series(source) if args.trace == "philly" else openb_series(source)
    series = {k: v for k, v in series.items() if not k.endswith(" all")}  # the parts, not their sum
    names = {k: k.split(" ")[-1].replace(".", "-") for k in series}
    length = min(len(s) for s in series.values())
    held = HELD_OUT_DAYS * 24 if length >= 90 * 24 else length // 5
    began = time.perf_counter()
    fits = {names[k]: s.iloc[:-held] for k, s in series.items()}
    actual = {names[k]: s.iloc[-held:] for k, s in series.items()}
    forecasts = forecast_many(fits, held, n_paths=max(args.futures, 1), seed=41, workers=args.workers)
    start = next(iter(actual.values())).index[0]
    folder = Path(tempfile.mkdtemp(prefix="gpuplan-futures-backtest-"))
    services = sorted(fits)
    for name in services:
        _csv(folder / "p50" / f"{name}.csv", forecasts[name].quantile(0.5).to_numpy())
        _csv(folder / "actual" / f"{name}.csv", actual[name].to_numpy())
        for k in range(args.futures):
            _csv(folder / f"path{k}" / f"{name}.csv", forecasts[name].paths[k])
    point = _scenario(folder, start, held, services, "p50")
    truth = _scenario(folder, start, held, services, "actual")
    spec = FuturesFile(
        futures=[
            FutureSpec(name=f"path{k}", series={n: str(folder / f"path{k}" / f"{n}.csv") for n in services})
            for k in range(args.futures)
        ]
    )
    settings = SolveSettings(time_limit=args.time_limit)
    result = plan_futures(point, spec, settings, args.workers)
    doc = result.document
    by_name = {c.name: c for c in doc.candidates}
    inputs = load_inputs(truth)
    clairvoyant = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, settings)
    until = doc.summary.tail_until
    policies: dict[str, tuple[float, float]] = {}
    stages = {"futures": result.stages[doc.chosen], "point forecast": result.stages["point forecast"]}
    peers = peer_stages(result.point, inputs.catalog)
    lookback = [s for s in peers if s.name.startswith("peer: lookback")]
    if lookback:
        stages["lookback"] = lookback[0]
    for label, stage in stages.items():
        held_scenario = holding_only(inputs.scenario, stage.commitments, stage.plans)
        plan = optimize(held_scenario, inputs.catalog, inputs.base_dir, settings)
        horizon = float(plan.document.solver.objective_usd)
        policies[label] = (horizon, horizon + (carried_tail(plan, until) if until else 0.0))
    best = float(clairvoyant.document.solver.objective_usd)
    best_tail = best + (carried_tail(clairvoyant, until) if until else 0.0)
    seconds = time.perf_counter() - began
    print(f"{args.trace}: {len(services)} services, {held} h held out, {args.futures} futures, "
          f"{len(by_name)} candidates; tail to {until.date() if until else 'none'}")  # fmt: skip
    p50 = sum(float(forecasts[n].quantile(0.5).mean()) for n in services)
    paths = [sum(float(forecasts[n].paths[k].mean()) for n in services) for k in range(args.futures)]
    print(f"mean GPUs held out: actual {sum(float(actual[n].mean()) for n in services):.1f}, P50 forecast "
          f"{p50:.1f}, futures {', '.join(f'{x:.1f}' for x in paths)}; chosen: {doc.chosen}")  # fmt: skip
    for label, stage in stages.items():
        print(
            f"  {label} buys {', '.join(f'{c.nodes} x {c.offering}' for c in stage.commitments) or 'nothing'}"
        )
    (folder / "futures.md").write_text(render_futures_markdown(doc), encoding="utf-8")
    print(f"  the futures report: {folder / 'futures.md'}")
    print("| policy | realized, horizon | regret | realized, with tail | regret |")
    print("|---|---:|---:|---:|---:|")
    print(f"| clairvoyant (knows the held-out demand) | ${best:,.0f} | 0 | ${best_tail:,.0f} | 0 |")
    for label, (horizon, total) in policies.items():
        print(f"| {label} | ${horizon:,.0f} | {(horizon - best) / best:+.2%} | ${total:,.0f} | "
              f"{(total - best_tail) / best_tail:+.2%} |")  # fmt: skip
    print(f"{seconds:.0f} s")


if __name__ == "__main__":
    main()
