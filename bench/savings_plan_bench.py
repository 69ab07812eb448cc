"""What buying savings plans saves against reservations only (issue 38, point 6).

    python bench/savings_plan_bench.py [--scenario scenarios/savings-plans.yaml] [--time-limit S]

Plans the scenario three times, each in its own ``gpuplan plan`` process, one at a time: as written
(reservations and savings plans for sale), with ``purchase.savings_plans: []`` (reservations only) and by
the hourly method as written. Prints per plan the horizon cost, what it leaves owed after the horizon, the
savings plans and reservations bought, the certified gap, the cloud-recommendation peer and the seconds;
then the ratios. The plans depend on the machine's load (issue 39): run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def plan(scenario: Path, out: Path, time_limit: float, *, buy_plans: bool, method: str) -> dict[str, object]:
    """One plan of ``scenario`` (savings plans for sale or not, by ``method``), its figures."""
    data = yaml.safe_load(scenario.read_text())
    if not buy_plans:
        data["purchase"]["savings_plans"] = []
    for key in ("catalog",):  # paths stay relative to the original scenario
        if data.get(key) not in (None, "embedded"):
            data[key] = str((scenario.parent / data[key]).resolve())
    for service in data.get("inference", []):
        csv = service["replicas"].get("csv")
        if csv:
            service["replicas"]["csv"] = str((scenario.parent / csv).resolve())
    copy = out / f"{scenario.stem}-{'sp' if buy_plans else 'ri'}-{method}.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    target = out / copy.stem
    command = [sys.executable, "-m", "planner.cli", "plan", str(copy), "-o", str(target),
               "--time-limit", str(time_limit), "--method", method]  # fmt: skip
    began = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
    seconds = time.perf_counter() - began
    doc = json.loads((target / "plan.json").read_text())
    peer = next((p for p in doc["baselines"]["peers"] if p["policy"] == "savings_plan"), None)
    return {
        "total": doc["costs"]["total_usd"],
        "owed": sum(c["obligation_beyond_horizon_usd"] for c in doc["commitments"])
        + sum(s["obligation_beyond_horizon_usd"] for s in doc["savings_plans"]),
        "plans": [
            (s["name"], s["usd_per_hour"], s["spent_usd"] / max(s["cost_in_horizon_usd"], 1e-9))
            for s in doc["savings_plans"]
        ],
        "nodes": [(c["offering"], c["term"], c["nodes"]) for c in doc["commitments"]],
        "gap": doc["solver"]["gap"],
        "on_demand": doc["baselines"]["all_on_demand_usd"],
        "peer": None if peer is None else (peer["name"], peer["total_usd"]),
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "savings-plans.yaml")
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        runs = {
            "reservations only (staged)": plan(args.scenario, out, args.time_limit, buy_plans=False,
                                               method="staged"),
            "with savings plans (staged)": plan(args.scenario, out, args.time_limit, buy_plans=True,
                                                method="staged"),
            "with savings plans (hourly)": plan(args.scenario, out, args.time_limit, buy_plans=True,
                                                method="hourly"),
        }  # fmt: skip
    print(f"{args.scenario.name}: all on-demand ${runs['reservations only (staged)']['on_demand']:,.0f}")
    for name, figures in runs.items():
        print(f"\n{name}: ${figures['total']:,.0f} in the horizon, ${figures['owed']:,.0f} owed after it, "
              f"certified gap {figures['gap']:.2%}, {figures['seconds']:.1f} s")  # fmt: skip
        for offering, term, nodes in figures["nodes"]:  # type: ignore[attr-defined]
            print(f"  reserve {nodes} x {offering} on {term}")
        for plan_name, usd, used in figures["plans"]:  # type: ignore[attr-defined]
            print(f"  savings plan {plan_name}: ${usd:,.3f}/h, {used:.0%} spent")
        if figures["peer"]:
            peer_name, peer_usd = figures["peer"]  # type: ignore[misc]
            print(f"  cloud-recommendation peer ({peer_name}): ${peer_usd:,.0f}")
    base = runs["reservations only (staged)"]
    for name in ("with savings plans (staged)", "with savings plans (hourly)"):
        figures = runs[name]
        saved = 1 - float(figures["total"]) / float(base["total"])  # type: ignore[arg-type]
        owed = float(figures["owed"]) / max(float(base["owed"]), 1e-9)  # type: ignore[arg-type]
        print(f"\n{name} against reservations only: {saved:.2%} less in the horizon, owed after x{owed:.2f}")


if __name__ == "__main__":
    main()
