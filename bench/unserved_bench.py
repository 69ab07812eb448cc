"""Issue 39 point 4: a run dropped by a stage cut short, placed after the search or named truthfully.

scenarios/mixed-fleet.yaml with ``monthly_growth: 0.0`` (the issue's case) planned at several time
limits; per limit: the plan's cost as written (penalties included), its certified gap, its status, and
what became of the 16-node ``pretrain-34b`` gang (placed, or unserved with its reason), plus whether
the repair pass (planner/planning/optimize/repair.py) placed runs the search had left unserved.
Timings depend on the machine's load (the limits are wall-clock until the work budgets land), so
which limit drops the gang varies; the truth of the reason does not.

    python bench/unserved_bench.py [LIMIT ...]      (default: 5 20 60)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import yaml

from models.inputs import load_inputs
from planner.planning.optimize import SolveSettings, optimize

REPO = Path(__file__).resolve().parents[1]
GANG = "pretrain-34b"


def main(limits: list[float]) -> None:
    data = yaml.safe_load((REPO / "scenarios" / "mixed-fleet.yaml").read_text(encoding="utf-8"))
    for service in data["inference"]:
        if "monthly_growth" in service["replicas"]:
            service["replicas"]["monthly_growth"] = 0.0
    with tempfile.TemporaryDirectory(prefix="unserved-bench-") as tmp:
        path = Path(tmp) / "mixed-fleet-flat.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        inputs = load_inputs(path)
        print(f"{'limit s':>8} {'wall s':>7} {'plan $ (with penalty)':>22} {'gap':>7} {'status':>9}  {GANG}")
        for limit in limits:
            said: list[str] = []
            began = time.perf_counter()
            plan = optimize(
                inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=limit), said.append
            )
            wall = time.perf_counter() - began
            solver = plan.document.solver
            placed = any(t.job == GANG for t in plan.document.training)
            reasons = [u.reason for u in plan.document.unserved if u.workload == GANG]
            repaired = [line for line in said if line.startswith("repair:")]
            fate = "placed" if placed else f"unserved: {reasons[0] if reasons else '?'}"
            if repaired:
                fate += f" ({repaired[-1]})"
            paid = plan.total_usd + solver.penalty_usd
            print(f"{limit:8g} {wall:7.1f} {paid:22,.0f} {solver.gap:7.2%} {solver.status:>9}  {fate}")


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]] or [5.0, 20.0, 60.0])
