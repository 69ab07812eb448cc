"""The plan's margin over its best peer, before and after issue 39 point 5 (peers a competent user runs).

    python bench/peers_bench.py [--plans DIR] [--time-limit S] [scenarios/*.yaml ...]

For each scenario (default: every ``scenarios/*.yaml``) the plan's horizon cost comes from
``DIR/<stem>/plan.json`` when ``--plans`` names a directory holding it, else from a ``gpuplan plan`` run at
default settings in a process of its own (the peers do not change the plan: they are priced after it).
The peers are priced again here on the planner's own sets, both ways:

- **before**: the committing peers (lookback, coverage, savings plan) on the per-period usage, every
  service on its cheapest offering each period; the cheapest was the report's "best peer";
- **after**: the peers on the fleet usage (``fleet_usage``: one offering per service for the horizon,
  overflow where max_nodes runs out, MIG packed, training at its window's start), the cheapest of them the
  best peer now, beside the per-period cheapest (no commitments) that stays as a lower reference.

Prints one row per scenario (costs in USD, margins as the plan's saving over the peer) and the median
margins. A negative margin is a peer cheaper than the plan.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from models.inputs import load_inputs  # noqa: E402
from planner.planning import baselines as peers  # noqa: E402
from planner.planning.problem.sets import ModelOptions, build_sets  # noqa: E402


def plan_total(scenario: Path, plans: Path | None, time_limit: float | None) -> float:
    """The plan's horizon cost: from an existing plan directory, else planned here."""
    if plans is not None and (plans / scenario.stem / "plan.json").exists():
        document = json.loads((plans / scenario.stem / "plan.json").read_text(encoding="utf-8"))
        return float(document["costs"]["total_usd"])
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "planner.cli", "plan", str(scenario), "-o", f"{tmp}/plan", "-q",
                   "--no-report", *(["--time-limit", str(time_limit)] if time_limit else [])]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
        document = json.loads(Path(tmp, "plan", "plan.json").read_text(encoding="utf-8"))
    return float(document["costs"]["total_usd"])


def before_and_after(scenario: Path) -> dict[str, tuple[str, float]]:
    """(name, cost) of the best peer before (per-period usage) and after (fleet), and the references."""
    inputs = load_inputs(scenario)
    sets = build_sets(inputs.scenario, inputs.catalog, inputs.base_dir, ModelOptions())
    per_period = peers.per_launch_usage(sets, allow_spot=True)
    old = peers._committing_peers(sets, per_period)  # the pre-issue-39 peers, priced again
    old_plan = peers._savings_plan_peer(sets, per_period)
    old = [*old, *([old_plan] if old_plan else [])]
    baselines = peers.compute_baselines(sets)
    best = baselines.peer(baselines.best_peer)
    reference = baselines.peer(peers.PER_PERIOD_PEER)
    assert best is not None and reference is not None
    old_best = min(old, key=lambda p: p.total_usd) if old else reference
    return {
        "before": (old_best.name, old_best.total_usd),
        "after": (best.name, best.total_usd),
        "per_period": (reference.name, reference.total_usd),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    parser.add_argument("--plans", type=Path, help="a directory of plan directories named by scenario stem")
    parser.add_argument("--time-limit", type=float, default=None)
    args = parser.parse_args()
    scenarios = args.scenarios or sorted((ROOT / "scenarios").glob("*.yaml"))
    print(
        "| scenario | plan | best peer before | margin before | best peer after | margin after "
        "| per-period cheapest |"
    )
    print("|---|---:|---|---:|---|---:|---:|")
    before_margins, after_margins = [], []
    for scenario in scenarios:
        total = plan_total(scenario, args.plans, args.time_limit)
        figures = before_and_after(scenario)
        (old_name, old), (new_name, new) = figures["before"], figures["after"]
        lower = figures["per_period"][1]
        m_old, m_new = (old - total) / old, (new - total) / new
        before_margins.append(m_old)
        after_margins.append(m_new)
        print(f"| {scenario.stem} | ${total:,.0f} | {old_name} ${old:,.0f} | {m_old:.1%} | {new_name} "
              f"${new:,.0f} | {m_new:.1%} | ${lower:,.0f} |", flush=True)  # fmt: skip
    print(
        f"\nmedian margin over the best peer: before {statistics.median(before_margins):.1%}, "
        f"after {statistics.median(after_margins):.1%}; smallest after {min(after_margins):.1%}"
    )


if __name__ == "__main__":
    main()
