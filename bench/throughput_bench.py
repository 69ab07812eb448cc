"""Throughput bench: the Philly trace in the saturated regime (a backlog larger than the fleet) under naive,
kubernetes (the default kube-scheduler with the NVIDIA device plugin), best-fit and workload-aware, on
fleets of 64, 256 and 1,024 H100 GPUs (8 per node, 32 nodes per leaf switch).

Run ``python bench/throughput_bench.py [--trace FILE] [--days D] [--warmup-hours H] [--sizes 64,256,1024]``
from anywhere. Defaults read ``../shared/data/philly-jobs-pollux/philly.csv``; without it, says so and
exits 0.

Printed, all from one run: per fleet, useful GPU-hours per day (work at full speed, the measure; see
``planner/simulate/events.py``), its share of the fleet's GPU-hours, the multi-GPU jobs' share of it,
completed GPU-hours per day, allocation and utilization, GPU-hours lost to slowed placements, and
whether the queue stayed non-empty through the window; then the ratio workload-aware / kubernetes at
each size, with the placement slowdown on (defaults of ``planner.simulate.philly.DEFAULT_SLOWDOWN``) and
off (1.0: scheduling alone), and a sensitivity row of kubernetes launching one pod per GPU.

Single process (2 shared cores): +-30 % on times. Workload-aware is the slow one at 1,024 GPUs (about
100 s per simulated day): the full 9-day run takes about 20 minutes there; ``--days 1 --warmup-hours 12``
gives the 1,024 figure in minutes.

One run (this machine, 7-day window after 48 h, backlog 2x; useful GPU-hours per day, % of the fleet,
and the multi-GPU jobs' share of the work):

| GPUs | naive | kubernetes | best-fit | workload-aware | ratio |
|---:|---:|---:|---:|---:|---:|
| 64 | 1,075.6 (70.0 %, 92 %) | 1,536.0 (100 %, 16 %) | 1,077.4 (70.1 %) | 1,535.7 (100 %, 75 %) | 1.000 |
| 256 | 5,202.5 (84.7 %, 85 %) | 6,144.0 (100 %, 13 %) | 5,222.5 (85.0 %) | 6,143.9 (100 %, 63 %) | 1.000 |
| 1,024 * | 20,066 (81.7 %, 87 %) | 24,576 (100 %, 6 %) | 20,466 (83.3 %) | 24,576 (100 %, 27 %) | 1.000 |

ratio: workload-aware / kubernetes. * 12 h warm-up, 1-day window. At 1,024 GPUs (4 leaf switches)
naive and best-fit split 5 of their 7-8 gangs over leaves (0.4-0.7 % of the GPU-hours lost);
workload-aware and kubernetes split none. Slowdown on or off gives the same figures at 64 and 256 GPUs
(one leaf switch of 32 nodes: no gang is split, and the default pod shape never spreads a job that fits
one node); kubernetes with one pod per GPU delivers 65-70 % (29-35 % of the GPU-hours lost to the
cross-node slowdown).
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

from planner.simulate.fleet import Fleet, Slowdown  # noqa: E402
from planner.simulate.philly import (  # noqa: E402
    DEFAULT_NODES_PER_LEAF,
    DEFAULT_SLOWDOWN,
    THROUGHPUT_POLICIES,
    load_trace,
    replay_saturated,
    throughput_ratio,
    throughput_rows,
    throughput_table,
    trace_jobs,
)

DEFAULT_TRACE = ROOT.parent / "shared" / "data" / "philly-jobs-pollux" / "philly.csv"
CLAIM = (1.20, 1.40)  # the seed's claim: +20-40 % effective throughput against standard Kubernetes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None, help="philly.csv (default: ../shared/data)")
    parser.add_argument("--days", type=float, default=7.0, help="measured window, days")
    parser.add_argument("--warmup-hours", type=float, default=48.0)
    parser.add_argument("--sizes", default="64,256,1024", help="fleet sizes in GPUs (multiples of 8)")
    parser.add_argument("--backlog", type=float, default=2.0, help="queue depth, x the fleet's GPUs")
    args = parser.parse_args()
    trace_path = args.trace or DEFAULT_TRACE
    if not trace_path.exists():
        if args.trace is not None:
            sys.exit(f"error: {trace_path}: file not found")
        print(f"no Philly trace at {trace_path}: nothing to measure")
        return
    trace = load_trace(trace_path)
    jobs = trace_jobs(trace)
    print(
        f"Philly trace: {len(jobs):,} jobs fed in submission order from the busiest week; warm-up "
        f"{args.warmup_hours:g} h, window {args.days:g} d, backlog {args.backlog:g} x fleet GPUs; slowdown "
        f"cross-node {DEFAULT_SLOWDOWN.cross_node:g}, cross-leaf {DEFAULT_SLOWDOWN.cross_leaf:g}\n"
    )
    ratios: list[tuple[int, str, float | None]] = []
    for gpus in (int(x) for x in args.sizes.split(",")):
        fleet = Fleet(gpus // 8, 8, "H100", nodes_per_leaf=DEFAULT_NODES_PER_LEAF)
        for label, slowdown in (("placement slowdown on", DEFAULT_SLOWDOWN), ("slowdown off", Slowdown())):
            began = time.perf_counter()
            results = replay_saturated(
                jobs, fleet, THROUGHPUT_POLICIES, warmup_hours=args.warmup_hours, days=args.days,
                backlog_factor=args.backlog, slowdown=slowdown,
            )  # fmt: skip
            rows = throughput_rows(results)
            if slowdown is DEFAULT_SLOWDOWN:
                pods = replay_saturated(
                    jobs, fleet, ("kubernetes",), warmup_hours=args.warmup_hours, days=args.days,
                    backlog_factor=args.backlog, slowdown=slowdown,
                    policy_options={"kubernetes": {"pod_gpus": 1}},
                )  # fmt: skip
                extra = throughput_rows(pods)[0]
                extra["policy"] = "kubernetes (1 GPU/pod)"
                rows.append(extra)
            print(
                f"## {gpus} GPUs ({fleet.nodes} nodes, {fleet.leaves} leaf switch(es)), {label} "
                f"({time.perf_counter() - began:.1f} s)\n"
            )
            print(throughput_table(rows))
            ratio = throughput_ratio(rows)
            ratios.append((gpus, label, ratio))
            print(f"workload-aware / kubernetes: {ratio:.3f}\n" if ratio else "ratio: n/a\n")
    print("## the seed's claim: +20-40 % effective throughput from scheduling against default Kubernetes\n")
    print("| GPUs | slowdown | workload-aware / kubernetes | within 1.20-1.40 |")
    print("|---:|---|---:|---|")
    for gpus, label, ratio in ratios:
        within = ratio is not None and CLAIM[0] <= ratio <= CLAIM[1]
        shown = f"{ratio:.3f}" if ratio is not None else "n/a"
        print(f"| {gpus} | {label} | {shown} | {'yes' if within else 'no'} |")


if __name__ == "__main__":
    main()
