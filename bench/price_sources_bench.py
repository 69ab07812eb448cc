"""How the shipped scenarios' plans change when the embedded catalog takes published commitment rates.

    python bench/price_sources_bench.py [--before REV] [--scenarios a.yaml b.yaml ...] [--time-limit S]

Plans each scenario twice with the same settings: on the catalog as it was at git revision ``--before``
(every commitment price an assumed ratio of on-demand) and on the embedded catalog (format 2, 54 published
rates), and prints per scenario the horizon cost, the saving against all on-demand, the commitments bought
and what they leave owed after the horizon, and how many of the prices each plan uses are assumed. Each
plan runs in its own ``gpuplan plan`` process, one at a time (the plan depends on the machine's load:
issue 39), so run it on a quiet machine.
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


def plan(scenario: Path, catalog: str, out: Path, time_limit: float | None) -> dict[str, object]:
    """One plan of ``scenario`` on ``catalog`` ('embedded' or a CSV path), its figures."""
    data = yaml.safe_load(scenario.read_text())
    data["catalog"] = catalog
    copy = out / f"{scenario.stem}.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    command = [
        sys.executable,
        "-m",
        "planner.cli",
        "plan",
        str(copy),
        "-o",
        str(out / "plan"),
        "-q",
        "--no-report",
    ]
    if time_limit:
        command += ["--time-limit", str(time_limit)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 4):
        raise SystemExit(f"{scenario}: gpuplan plan failed ({done.returncode}):\n{done.stderr[-2000:]}")
    document = json.loads((out / "plan" / "plan.json").read_text())
    total = document["costs"]["total_usd"]
    on_demand = document["baselines"]["all_on_demand_usd"]
    bought = [c for c in document["commitments"] if not c["existing"]]
    prices = document.get("prices") or {}
    return {
        "total": total,
        "saves": (on_demand - total) / on_demand if on_demand else 0.0,
        "bought": ", ".join(f"{c['nodes']} x {c['offering'].split(':', 1)[1]} {c['term']}" for c in bought)
        or "none",
        "owed": sum(c["obligation_beyond_horizon_usd"] for c in bought),
        "assumed": prices.get("counts", {}).get("assumed", "-"),
        "used": len(prices.get("used", [])) or "-",
        "seconds": seconds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="87d498b", help="git revision of the assumed-ratio catalog")
    parser.add_argument(
        "--scenarios", nargs="*", type=Path, default=sorted((ROOT / "scenarios").glob("*.yaml"))
    )
    parser.add_argument("--time-limit", type=float, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        before = Path(scratch) / "catalog-before.csv"
        shown = subprocess.run(
            ["git", "show", f"{args.before}:models/data/catalog.csv"],
            capture_output=True,
            cwd=ROOT,
            check=True,
        )
        before.write_bytes(shown.stdout)
        print("| scenario | catalog | cost $ | saves vs OD | bought | owed after $ | assumed / used | s |")
        print("|---|---|---:|---:|---|---:|---:|---:|")
        for scenario in args.scenarios:
            for label, catalog in (("assumed ratios", str(before)), ("quoted (embedded)", "embedded")):
                out = Path(tempfile.mkdtemp(dir=scratch))
                r = plan(scenario, catalog, out, args.time_limit)
                print(
                    f"| {scenario.stem} | {label} | {r['total']:,.0f} | {r['saves']:.1%} | {r['bought']} | "
                    f"{r['owed']:,.0f} | {r['assumed']} / {r['used']} | {r['seconds']:.0f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
