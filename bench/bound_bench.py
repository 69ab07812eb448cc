"""The certified bound against the proven optimum (issue 19, point 1): today's bound vs the exact one.

Run ``python bench/bound_bench.py [--sizes month,medium] [--full-time-limit S] [--bound-time-limit S]``.
For each size (``bench/gen.py``, seed 0):

- **full**: the full per-period model (every period its own slot, every start period of every run,
  whole nodes, no pruning; ``bench/scale_bench.py``'s model (a) without the start thinning), solved
  with HiGHS to ``--full-gap``: its incumbent is the optimum (within that gap) and its dual bound the
  proven lower bound. Skipped with ``--full-time-limit 0``.
- **today**: ``bound.certified_bound`` (block-resolution training with its energy spread), the MILP
  under ``--bound-time-limit``.
- **exact**: ``bound_exact.exact_bound`` (every start a column, column generation, reduced-cost fixing
  against the full model's incumbent when there is one, else against ``--incumbent``), with
  ``--clusters`` clusters per block (default: by size; a large number gives every period its own),
  and its integer solution dispatched as a plan (``exact_plan.py``).

Each prints: bound, seconds, and its distance below the full model's incumbent ("gap"); for exact
also the columns in all, generated and kept after fixing. Single-threaded HiGHS (``--threads``).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen import load, write  # noqa: E402

from planner.planning.optimize.bound import certified_bound, clusters_per_block  # noqa: E402
from planner.planning.optimize.bound_exact import exact_bound  # noqa: E402
from planner.planning.optimize.build import create_model  # noqa: E402
from planner.planning.optimize.exact_plan import exact_candidate  # noqa: E402
from planner.planning.problem.sets import build_sets, full_sets  # noqa: E402
from planner.solvers.solve import solve  # noqa: E402


def full_optimum(path: Path, time_limit: float, gap: float, threads: int) -> tuple[float, float, float]:
    """(incumbent, proven bound, seconds) of the full per-period model, held commitments included."""
    scenario, catalog = load(path)
    sets = full_sets(scenario, catalog, path.parent)
    began = time.perf_counter()
    result = solve(create_model(sets).problem, time_limit=time_limit, gap=gap, threads=threads)
    if not result.ok:
        return math.nan, math.nan, time.perf_counter() - began
    return result.objective + sets.fixed_usd, result.bound + sets.fixed_usd, time.perf_counter() - began


def _gap(bound: float, optimum: float) -> str:
    return f"{(optimum - bound) / optimum:.3%}" if math.isfinite(optimum) and optimum else "-"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="month,medium")
    parser.add_argument("--full-time-limit", type=float, default=900.0)
    parser.add_argument("--full-gap", type=float, default=1e-4)
    parser.add_argument("--bound-time-limit", type=float, default=120.0)
    parser.add_argument(
        "--incumbent", type=float, default=None, help="a plan's cost, for reduced-cost fixing"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clusters", type=int, default=0, help="clusters per block for exact (0: by size)")
    args = parser.parse_args(argv)
    for size in args.sizes.split(","):
        with tempfile.TemporaryDirectory(prefix="gpuplan-bound-bench-") as scratch:
            path = write(size, scratch, seed=0)
            optimum = proven = math.nan
            if args.full_time_limit > 0:
                optimum, proven, seconds = full_optimum(
                    path, args.full_time_limit, args.full_gap, args.threads
                )
                print(f"{size} full: incumbent ${optimum:,.0f}, proven bound ${proven:,.0f}, {seconds:.1f} s")
            scenario, catalog = load(path)
            sets = build_sets(scenario, catalog, path.parent)
            per_block = clusters_per_block(sets)
            today = certified_bound(sets, per_block, time_limit=args.bound_time_limit)
            print(
                f"{size} today: bound ${today.bound_usd:,.0f} ({_gap(today.bound_usd, optimum)} below), "
                f"{today.seconds:.1f} s, {today.clusters} clusters"
            )
            incumbent = optimum if math.isfinite(optimum) else args.incumbent
            # HiGHS keeps one thread scheduler per process: the exact bound runs on whatever it has
            exact = exact_bound(
                sets, args.clusters or per_block, time_limit=args.bound_time_limit, incumbent_usd=incumbent
            )
            print(
                f"{size} exact: bound ${exact.bound_usd:,.0f} ({_gap(exact.bound_usd, optimum)} below), "
                f"LP ${exact.lp_usd:,.0f} ({_gap(exact.lp_usd, optimum)}), {exact.seconds:.1f} s, "
                f"{exact.rounds} LP rounds, columns {exact.columns_total:,} in all, "
                f"{exact.columns_generated:,} generated, {exact.columns_kept:,} kept after fixing; "
                f"integer stage: {exact.integer_status or 'not run'}"
            )
            if exact.decisions is not None:  # its integer solution as a plan (exact_plan.py)
                candidate = exact_candidate(sets, exact.decisions, lambda _line: None)
                print(
                    f"{size} exact-start plan: "
                    + (
                        "breaks a rule by period"
                        if candidate is None
                        else f"${candidate.objective:,.0f}, "
                        f"{(candidate.objective - exact.bound_usd) / candidate.objective:.3%} above the bound"
                    )
                )


if __name__ == "__main__":
    main()
