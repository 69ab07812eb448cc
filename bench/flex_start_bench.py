"""What GCP flex-start and calendar-mode reservations save a plan's training gangs (issue 38, point 4).

    python bench/flex_start_bench.py [--time-limit S]

One GCP scenario (written here, not in scenarios/: it exists for this comparison) with a steady chat service
on a3-highgpu-8g in us-central1 committed for the quarter, and three H100 gangs: a 4-day 8-node fine-tune
with a 10-day window (room for flex-start's 24 h default delay), a 6-day 8-node eval whose window is exactly
its run (no room for the delay) and a 20-day 16-node pretraining run (over flex-start's 7 days). Plans it
four times, each in its own ``gpuplan plan`` process, one at a time: neither tier allowed, flex-start only,
calendar mode only, both. Prints per plan the horizon cost, the tier of every gang and the wall seconds (for
the record only), then each plan's cost as a ratio of the plan with neither. Prices are the embedded
catalog's: flex-start and calendar-mode rates there are assumed (0.47 x on-demand), so the savings are as
optimistic as that assumption.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from variant_plans import plan_variant

SCENARIO: dict[str, object] = {
    "name": "gcp-flex-start-2027q1",
    "horizon": {"start": "2027-01-01T00:00:00Z", "hours": 2160, "period_hours": 24},
    "catalog": "embedded",
    "clouds": {"gcp": {"regions": ["us-central1"]}},
    "purchase": {"terms": ["1y"], "schedule": "horizon", "max_spot_share": 0},
    "teams": [{"name": "product", "priority": "production"}, {"name": "research", "priority": "batch"}],
    "inference": [
        {"name": "chat", "team": "product", "gpus_per_replica": 8, "gpu_models": ["H100"],
         "latency_critical": True, "replicas": {"profile": "flat", "base": 4}},
    ],
    "training": [
        {"name": "finetune", "team": "research", "nodes": 8, "gpus_per_node": 8, "gpu_models": ["H100"],
         "hours": 96, "earliest_start": "2027-01-11T00:00:00Z", "deadline": "2027-01-21T00:00:00Z",
         "fabric": "required"},
        {"name": "eval", "team": "research", "nodes": 8, "gpus_per_node": 8, "gpu_models": ["H100"],
         "hours": 144, "earliest_start": "2027-02-01T00:00:00Z", "deadline": "2027-02-07T00:00:00Z",
         "fabric": "required"},
        {"name": "pretrain", "team": "research", "nodes": 16, "gpus_per_node": 8, "gpu_models": ["H100"],
         "hours": 480, "earliest_start": "2027-02-15T00:00:00Z", "deadline": "2027-03-31T00:00:00Z",
         "fabric": "required"},
    ],
}  # fmt: skip
#: variant -> (purchase.flex_start, purchase.calendar_mode)
VARIANTS = {
    "neither": (False, False), "flex-start": (True, False), "calendar": (False, True), "both": (True, True),
}  # fmt: skip


def plan(out: Path, variant: str, time_limit: float) -> dict[str, object]:
    """One plan of the scenario with flex-start and calendar mode allowed as ``variant`` says."""
    flex, calendar = VARIANTS[variant]
    data = json.loads(json.dumps(SCENARIO))
    data["purchase"].update(flex_start=flex, calendar_mode=calendar)
    planned = plan_variant(data, out, variant, stem="flex-start", time_limit=time_limit)
    document, seconds = planned.document, planned.seconds
    return {
        "variant": variant,
        "cost": document["costs"]["total_usd"],
        "tiers": {t["job"]: t["tier"] for t in document["training"]},
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [plan(Path(tmp), v, args.time_limit) for v in VARIANTS]
    base = float(results[0]["cost"])  # type: ignore[arg-type]
    print("| plan | cost in horizon | / neither | gangs | s |")
    print("|---|---:|---:|---|---:|")
    for r in results:
        tiers = ", ".join(f"{j}: {t}" for j, t in sorted(r["tiers"].items()))  # type: ignore[attr-defined]
        cost = float(r["cost"])  # type: ignore[arg-type]
        print(f"| {r['variant']} | ${cost:,.0f} | {cost / base:.4f} | {tiers} | {r['seconds']:.1f} |")


if __name__ == "__main__":
    main()
