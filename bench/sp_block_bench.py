"""What a savings plan and a Capacity Block save together against reservations only (issue 38, point 6).

    python bench/sp_block_bench.py [--scenario scenarios/savings-plan-and-block.yaml] [--time-limit S]

Plans the scenario three times, each in its own ``gpuplan plan`` process, one at a time: as written
(``purchase.savings_plans`` and ``purchase.capacity_blocks``), with reservations only (``savings_plans: []``,
``capacity_blocks: false``), and as written with ``purchase.max_upfront_usd`` a cent below the block's fee
(the cash limit drops the block). Each plan is checked by ``gpuplan verify``. Prints per plan the horizon
cost, what is owed after it, the savings plans and blocks bought, the most upfront cash in a month; then
the saving against reservations only in dollars and percent. Seconds are measured wall time, for the
record only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from variant_plans import plan_variant

ROOT = Path(__file__).resolve().parents[1]


def plan(scenario: Path, out: Path, time_limit: float, variant: str, change: Callable[[dict], None]) -> dict:
    """One plan of ``scenario`` changed by ``change``, verified."""
    data = yaml.safe_load(scenario.read_text())
    change(data)
    data["catalog"] = str(scenario.parent / data["catalog"])  # the copy is planned from elsewhere
    for service in data.get("inference", []):
        if "csv" in service["replicas"]:
            service["replicas"]["csv"] = str(scenario.parent / service["replicas"]["csv"])
    planned = plan_variant(
        data, out, variant, stem=scenario.stem, time_limit=time_limit, flags=("--no-report", "-q")
    )
    copy, directory, seconds = out / f"{scenario.stem}-{variant}.yaml", planned.directory, planned.seconds
    checked = subprocess.run(
        [sys.executable, "-m", "planner.cli", "verify", str(copy), str(directory), "--json"],
        capture_output=True, cwd=ROOT, text=True,
    )  # fmt: skip
    document = planned.document
    owed = [*document["commitments"], *document["savings_plans"]]
    return {
        "variant": variant,
        "cost": document["costs"]["total_usd"],
        "owed": sum(c["obligation_beyond_horizon_usd"] for c in owed),
        "plans": [f"{p['kind']} ${p['usd_per_hour']:,.3f}/h" for p in document["savings_plans"]],
        "reserved": sum(c["nodes"] for c in document["commitments"]),
        "blocks": [
            f"{t['job']} {t['nodes']} x {t['block_hours']} h ${t['cost_usd']:,.0f}"
            for t in document["training"]
            if t["tier"] == "capacity_block"
        ],
        "peak_upfront": max(m["upfront_usd"] for m in document["costs"]["cash_by_month"]),
        "verified": json.loads(checked.stdout)["ok"],
        "seconds": seconds,
        "fee": sum(t["cost_usd"] for t in document["training"] if t["tier"] == "capacity_block"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "savings-plan-and-block.yaml")
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args()

    def as_written(data: dict[str, Any]) -> None:
        pass

    def reservations_only(data: dict[str, Any]) -> None:
        data["purchase"]["savings_plans"] = []
        data["purchase"]["capacity_blocks"] = False

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        both = plan(args.scenario, out, args.time_limit, "savings plan + block", as_written)

        def below_fee(data: dict[str, Any]) -> None:
            data["purchase"]["max_upfront_usd"]["usd"] = round(both["fee"] - 0.01, 2)

        results = [
            both,
            plan(args.scenario, out, args.time_limit, "reservations only", reservations_only),
            plan(args.scenario, out, args.time_limit, "cap a cent below the fee", below_fee),
        ]
    print(
        "| plan | cost in horizon | owed after | savings plans | reserved | blocks | most upfront a month "
        "| verified | s |"
    )
    print("|---|---:|---:|---|---:|---|---:|---|---:|")
    for r in results:
        print(
            f"| {r['variant']} | ${r['cost']:,.0f} | ${r['owed']:,.0f} | {', '.join(r['plans']) or 'none'} | "
            f"{r['reserved']} | {'; '.join(r['blocks']) or 'none'} | ${r['peak_upfront']:,.0f} | "
            f"{'ok' if r['verified'] else 'FINDINGS'} | {r['seconds']:.1f} |"
        )
    written, ris = results[0], results[1]
    saved = ris["cost"] - written["cost"]
    print(f"cost as written / reservations only: {written['cost'] / ris['cost']:.4f}")
    print(f"saved against reservations only: ${saved:,.0f} ({100 * saved / ris['cost']:.2f} %)")


if __name__ == "__main__":
    main()
