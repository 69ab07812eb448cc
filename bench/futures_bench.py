"""gpuplan futures on a shipped scenario (issue 41): what planning for three demand futures buys and saves,
and what it costs to compute.

Run ``python bench/futures_bench.py [--scenario growth-year] [--time-limit 30] [--workers 2]`` from anywhere.
It plans ``scenarios/<name>.yaml`` over ``scenarios/futures/<name>.yaml`` and prints: the chosen purchases'
expected cost (horizon and tail), P10/P50/P90, the point forecast's purchases on the same futures and the
value of the stochastic solution (VSS), the best peer's, the expected value of perfect information (EVPI),
the certified bound and gap over the horizon, and the wall and CPU seconds (this process and its workers,
which the machine's load does not change) with the load average it ran at.

``--futures N`` replaces the shipped futures by N equally weighted ones whose demand is the scenario's times
the midpoint quantiles of a lognormal (median 1, sigma ``--sigma``, default 0.2): the size of issue 41's
"10-50 futures", with the split of the time (the futures' own plans; the master, the billing and the chosen
purchases' dispatch) printed. ``--own-plans full|quick`` overrides the futures file's ``own_plans`` (auto:
full up to 10 futures, quick beyond). ``--second-stage replanned`` prices every candidate by re-planning each
future (the slow, exact second stage). ``--replan-check`` re-plans each future holding the chosen and the
point forecast's purchases and prints those costs beside their fleet bills (a fleet bill is a feasible
second stage, so it should be at or above the re-planned cost, up to the planner's own gap).

``--cap-usd X [--cap-quantile 0.9]`` and ``--committed-min M --committed-probability P`` add the risk
constraints (docs/futures.md) and print, per candidate, its capped quantile and committed-share weight,
what the choice met and what it costs against the unconstrained one. ``--act-on`` also makes the plan to
act on (``gpuplan plan --futures``) and prints its purchases and the seconds it took.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time
from pathlib import Path
from statistics import NormalDist
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from models.futures import CommittedShare, CostCap, FutureSpec, load_futures  # noqa: E402
from models.held import holding_only  # noqa: E402
from models.inputs import load_inputs  # noqa: E402
from models.variation import parse_all  # noqa: E402
from planner.planning.futures import carried_tail, plan_futures  # noqa: E402
from planner.planning.optimize import SolveSettings, optimize  # noqa: E402


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="growth-year")
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cap-usd", type=float, default=None)
    parser.add_argument("--cap-quantile", type=float, default=0.9)
    parser.add_argument("--committed-min", type=float, default=None)
    parser.add_argument("--committed-probability", type=float, default=0.9)
    parser.add_argument("--act-on", action="store_true")
    parser.add_argument("--futures", type=int, default=None)
    parser.add_argument("--sigma", type=float, default=0.2)
    parser.add_argument("--second-stage", choices=["fleet", "replanned"], default=None)
    parser.add_argument("--own-plans", choices=["auto", "full", "quick"], default=None)
    parser.add_argument("--replan-check", action="store_true")
    args = parser.parse_args()
    scenario = ROOT / "scenarios" / f"{args.scenario}.yaml"
    spec = load_futures(ROOT / "scenarios" / "futures" / f"{args.scenario}.yaml")
    if args.futures is not None:
        spec = spec.model_copy(update={"futures": lognormal_futures(args.futures, args.sigma)})
    if args.second_stage is not None:
        spec = spec.model_copy(update={"second_stage": args.second_stage})
    if args.own_plans is not None:
        spec = spec.model_copy(update={"own_plans": args.own_plans})
    risk = spec.risk
    if args.cap_usd is not None:
        risk = risk.model_copy(update={"cap": CostCap(quantile=args.cap_quantile, usd=args.cap_usd)})
    if args.committed_min is not None:
        asked = CommittedShare(min=args.committed_min, probability=args.committed_probability)
        risk = risk.model_copy(update={"committed_share": asked})
    spec = spec.model_copy(update={"risk": risk})
    load, cpu, began = os.getloadavg()[0], cpu_seconds(), time.perf_counter()
    settings = SolveSettings(time_limit=args.time_limit)
    marks: list[tuple[float, str]] = []
    result = plan_futures(
        scenario, spec, settings, args.workers, act_on=args.act_on,
        say=lambda m: marks.append((time.perf_counter() - began, m)),
    )  # fmt: skip
    wall, used = time.perf_counter() - began, cpu_seconds() - cpu
    doc, s = result.document, result.document.summary
    print(
        f"{args.scenario}: {len(spec.futures)} futures, {len(doc.candidates)} candidates priced "
        f"({len(doc.excluded)} not), --time-limit {args.time_limit:g} per plan, {args.workers} workers, "
        f"own plans {doc.own_plans}"
    )
    print(
        f"chosen: {doc.chosen}; expected ${s.expected_usd:,.0f} (horizon ${s.expected_horizon_usd:,.0f}, "
        f"after it ${s.expected_tail_usd:,.0f}); P10/P50/P90 ${s.p10_usd:,.0f} / ${s.p50_usd:,.0f} / "
        f"${s.p90_usd:,.0f}"
    )
    print(
        f"point forecast's purchases ${s.point_forecast_expected_usd:,.0f}: VSS ${s.vss_usd:,.0f} "
        f"({s.vss_usd / s.point_forecast_expected_usd:.2%})"
    )
    if s.best_peer is not None and s.best_peer_expected_usd is not None:
        print(
            f"best peer {s.best_peer}: ${s.best_peer_expected_usd:,.0f} "
            f"({(s.best_peer_expected_usd - s.expected_usd) / s.best_peer_expected_usd:.2%} above)"
        )
    print(f"EVPI ${s.evpi_usd:,.0f}; horizon bound ${s.bound_usd:,.0f}, gap {s.gap:.2%}")
    if s.bound_with_tail_usd is not None and s.gap_with_tail is not None:
        print(f"bound with the tail ${s.bound_with_tail_usd:,.0f}, gap {s.gap_with_tail:.2%}")
    for c in sorted(doc.candidates, key=lambda c: c.expected_usd):
        least = min(c.committed_share.values()) if c.committed_share else None
        print(
            f"  {c.name}: expected ${c.expected_usd:,.0f}, P90 ${c.p90_usd:,.0f}"
            + (f", capped quantile ${c.cap_quantile_usd:,.0f}" if c.cap_quantile_usd is not None else "")
            + (f", least committed share {least:.0%}" if least is not None else "")
            + (f", weight met {c.committed_share_weight:.0%}" if c.committed_share_weight is not None else "")
            + (f"; breaks: {'; '.join(c.why_not)}" if c.why_not else "")
        )
    if s.unconstrained is not None and s.unconstrained_expected_usd is not None:
        extra = s.expected_usd - s.unconstrained_expected_usd
        print(f"the risk constraints cost ${extra:,.0f} expected against {s.unconstrained}")
    if result.act_on is not None:
        bought = [c for c in result.act_on.document.commitments if not c.existing]
        print(
            f"plan to act on: {len(bought)} purchases ({sum(c.nodes for c in bought)} nodes), "
            f"${result.act_on.document.costs.total_usd:,.0f} over the horizon"
        )
    print(
        f"wall {wall:.1f} s, CPU {used:.1f} s ({used / args.workers:.1f} s per worker on idle cores); "
        f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print("split (wall seconds at each step):")
    for at, message in marks:
        if not message.startswith(("  ", "dispatch:", "whole replicas", "inference dispatched")):
            print(f"  {at:7.1f} s  {message}")
    if doc.master is not None:
        m = doc.master
        print(
            f"master: {m.columns:,} columns, {m.rows:,} rows, {m.seconds:.2f} s; "
            f"its score ${m.score_usd:,.0f}"
        )
    if args.replan_check:
        replan_check(scenario, spec, result, settings)


def lognormal_futures(count: int, sigma: float) -> list[FutureSpec]:
    """``count`` equally weighted futures: demand times the lognormal's quantiles at (i + 0.5) / count."""
    factors = [math.exp(sigma * NormalDist().inv_cdf((i + 0.5) / count)) for i in range(count)]
    return [
        FutureSpec(name=f"f{i:02d}", weight=1.0, vary=[f"demand=x{f:.4f}"]) for i, f in enumerate(factors)
    ]


def replan_check(scenario: Path, spec: Any, result: Any, settings: SolveSettings) -> None:
    """Each future re-planned holding the chosen and the point forecast's purchases, beside the bills."""
    doc = result.document
    until = doc.summary.tail_until
    for name in dict.fromkeys([doc.chosen, "point forecast"]):
        stage = result.stages[name]
        row = next(c for c in doc.candidates if c.name == name)
        for future in spec.futures:
            given = load_inputs(scenario, parse_all(future.vary, future.name))
            held = holding_only(given.scenario, stage.commitments, stage.plans)
            plan = optimize(held, given.catalog, given.base_dir, settings)
            replanned = float(plan.document.solver.objective_usd) + (
                carried_tail(plan, until) if until else 0.0
            )
            billed = row.cost_usd[future.name]
            print(
                f"  {name} in {future.name}: fleet bill ${billed:,.0f}, re-planned ${replanned:,.0f} "
                f"({(billed - replanned) / replanned:+.2%})"
            )


if __name__ == "__main__":
    main()
