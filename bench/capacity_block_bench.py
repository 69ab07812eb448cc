"""What AWS Capacity Blocks save a plan's training gangs (issue 38, point 4).

    python bench/capacity_block_bench.py [--scenario scenarios/capacity-blocks.yaml] [--time-limit S]

Plans the scenario twice, each in its own ``gpuplan plan`` process, one at a time: as written (blocks allowed,
``purchase.capacity_blocks: true``) and without blocks (reservations, on demand). Prints per plan the horizon
cost, what is owed after it, the blocks bought (run, nodes, hours sold, fee) and the tier of every gang; then
the ratio of the two costs. Seconds are measured wall time, for the record only.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import yaml
from variant_plans import plan_variant

ROOT = Path(__file__).resolve().parents[1]


def plan(scenario: Path, out: Path, time_limit: float, *, blocks: bool) -> dict[str, object]:
    """One plan of ``scenario`` with Capacity Blocks allowed or not."""
    data = yaml.safe_load(scenario.read_text())
    data["purchase"]["capacity_blocks"] = blocks
    variant = "blocks" if blocks else "no-blocks"
    planned = plan_variant(data, out, variant, stem=scenario.stem, time_limit=time_limit)
    document, seconds = planned.document, planned.seconds
    return {
        "variant": variant,
        "cost": document["costs"]["total_usd"],
        "owed": sum(c["obligation_beyond_horizon_usd"] for c in document["commitments"]),
        "blocks": [
            (t["job"], t["nodes"], t["block_hours"], t["cost_usd"])
            for t in document["training"]
            if t["tier"] == "capacity_block"
        ],
        "tiers": {t["job"]: t["tier"] for t in document["training"]},
        "reserved": sum(c["nodes"] for c in document["commitments"]),
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "capacity-blocks.yaml")
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        results = [plan(args.scenario, out, args.time_limit, blocks=b) for b in (True, False)]
    print("| plan | cost in horizon | owed | reserved | blocks (run, nodes x h sold, fee) | gangs | s |")
    print("|---|---:|---:|---:|---|---|---:|")
    for r in results:
        blocks = "; ".join(f"{j} {n} x {h} h ${fee:,.0f}" for j, n, h, fee in r["blocks"]) or "none"  # type: ignore[attr-defined]
        tiers = ", ".join(f"{j}: {t}" for j, t in sorted(r["tiers"].items()))  # type: ignore[attr-defined]
        print(
            f"| {r['variant']} | ${r['cost']:,.0f} | ${r['owed']:,.0f} | {r['reserved']} | {blocks} | "
            f"{tiers} | {r['seconds']:.1f} |"
        )
    with_blocks, without = results
    print(f"cost with blocks / without: {with_blocks['cost'] / without['cost']:.4f}")  # type: ignore[operator]
    print(f"saved by blocks: ${without['cost'] - with_blocks['cost']:,.0f}")  # type: ignore[operator]


if __name__ == "__main__":
    main()
