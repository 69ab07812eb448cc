"""Simulation bench: the Philly week replayed under naive, best-fit and workload-aware scheduling.

Run ``python bench/sim_bench.py [--trace FILE] [--no-openb]`` from anywhere. Defaults read
``../shared/data/philly-jobs-pollux/philly.csv`` (and the openb files beside it); without the data it
says so and exits 0.

Printed, all from one run on this machine:

* the busiest Philly week, training only, on the fleet the planner sizes for it, then the same week mixed
  with the diurnal inference services of ``planner.simulate.philly.DEFAULT_SERVICES`` on the fleet sized
  for both (the default rule: training at its mean over the week, inference at its hourly peak):
  allocation, utilization, fragmentation, queueing delay (mean / p95; training, inference and gang
  means), completions, preemptions, gangs split across leaf switches, and the replay speed;
* a sensitivity row set: the mixed week on the roomier fleet of the 24 h sizing rule;
* the check of the issue's "done when": workload-aware allocation >= 80 % on the mixed week, naive
  next to it;
* the openb packing table (``planner.simulate.openb.compare``) when that module and its data exist.

Single process (the machine has 2 cores shared with other work): +-30 % on times.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: the repo's packages, not an installed copy
    sys.path.insert(0, str(ROOT))

from planner.simulate.philly import (  # noqa: E402
    DEFAULT_SERVICES,
    build_week,
    load_trace,
    markdown_table,
    replay_week,
    size_fleet,
    summary_rows,
)

DATA = ROOT.parent / "shared" / "data"
DEFAULT_TRACE = DATA / "philly-jobs-pollux" / "philly.csv"
OPENB = DATA / "alibaba-openb-gpu-v2023"
POLICIES = ("naive", "best-fit", "workload-aware")
TARGET_PCT = 80.0


def philly(trace_path: Path) -> None:
    began = time.perf_counter()
    trace = load_trace(trace_path)
    print(f"Philly trace: {len(trace):,} jobs ({trace_path}), read in {time.perf_counter() - began:.2f} s\n")
    mixed_rows = None
    cases = (
        ("training only", (), None, POLICIES),
        ("mixed inference + training", DEFAULT_SERVICES, None, POLICIES),
        ("mixed, roomier fleet (24 h sizing rule)", DEFAULT_SERVICES, 24, ("naive", "workload-aware")),
    )
    for label, services, smoothing, policies in cases:
        week = build_week(trace, services=services)
        sizing = size_fleet(week, smoothing_hours=smoothing)
        fleet = sizing.fleet
        counted = week.describe()["jobs_in_week"]
        print(f"## {label}: week from {week.start:%Y-%m-%d}, {len(week.jobs):,} jobs replayed {counted}")
        print(
            f"fleet: {fleet.nodes} x {fleet.gpus_per_node} {fleet.gpu_model} = {fleet.total_gpus} GPUs, "
            f"{fleet.leaves} leaf switches of {fleet.nodes_per_leaf} nodes; planner {sizing.seconds:.1f} s "
            f"({sizing.rule}); training load mean {week.training_load.mean():.0f} GPUs, "
            f"hourly peak {week.training_load.max():.0f}\n"
        )
        results = replay_week(week, fleet, policies)
        rows = summary_rows(results)
        print(markdown_table(rows))
        events = sum(r.events for r in results)
        wall = sum(r.wall_seconds for r in results)
        speed = events / wall if wall > 0 else float("inf")
        print(f"replay: {events:,} events in {wall:.2f} s = {speed:,.0f} events/s, {len(rows)} policies\n")
        if smoothing is None and services:
            mixed_rows = rows
    if mixed_rows is not None:
        by = {row["policy"]: row for row in mixed_rows}
        aware, naive = by["workload-aware"], by["naive"]
        verdict = "MET" if aware["allocation_pct"] >= TARGET_PCT else "NOT MET"
        print(
            f"done-when (mixed week, same run): workload-aware allocation {aware['allocation_pct']}% "
            f"(utilization {aware['utilization_pct']}%) vs naive {naive['allocation_pct']}% "
            f"(utilization {naive['utilization_pct']}%): >= {TARGET_PCT:.0f}% {verdict}"
        )
        print(
            "note: naive's allocation counts small replicas rounded up to whole GPUs and GPUs held by "
            "half-placed gangs; utilization is the useful part.\n"
        )


def openb(pods_path: Path, nodes_path: Path) -> None:
    try:
        from planner.simulate.openb import compare, load_nodes, load_pods
    except ImportError:
        print("openb: planner/simulate/openb.py is not there yet; skipped")
        return
    if not (pods_path.exists() and nodes_path.exists()):
        print(f"openb: {pods_path.name} / {nodes_path.name} not found under {pods_path.parent}; skipped")
        return
    nodes, pods = load_nodes(nodes_path), load_pods(pods_path)
    began = time.perf_counter()
    comparison = compare(nodes, pods)
    wall = time.perf_counter() - began
    print(
        f"## openb: unallocated GPUs (% of {nodes.capacity_gpus}) by arrival level, seed 0 ({wall:.1f} s)\n"
    )
    table = comparison.table.reset_index()
    columns = [str(c) for c in table.columns]
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---:" for _ in columns) + "|")
    for record in table.itertuples(index=False):
        print("| " + " | ".join("" if v != v else f"{v:.2f}" for v in record) + " |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None, help="philly.csv (default: ../shared/data)")
    parser.add_argument("--openb-pods", type=Path, default=OPENB / "openb_pod_list_default.csv")
    parser.add_argument("--openb-nodes", type=Path, default=OPENB / "openb_node_list_gpu_node.csv")
    parser.add_argument("--no-openb", action="store_true", help="skip the openb table")
    args = parser.parse_args()
    trace = args.trace or DEFAULT_TRACE
    if not trace.exists():
        if args.trace is not None:
            sys.exit(f"error: {trace}: file not found")
        print(f"no Philly trace at {trace}: nothing to measure")
        return
    philly(trace)
    if not args.no_openb:
        openb(args.openb_pods, args.openb_nodes)


if __name__ == "__main__":
    main()
