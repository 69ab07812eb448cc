"""What a cash limit on upfront fees costs, and what it saves in the peak month (issue 38, point 2).

    python bench/payment_bench.py [--scenario scenarios/upfront-payments.yaml] [--time-limit S]

Plans the scenario three times, each in its own ``gpuplan plan`` process, one at a time: as written (with its
``purchase.max_upfront_usd``), without the limit (every purchase paid its cheapest way), and with every
reservation paid by the hour (the upfront options taken out of the terms file). Prints per plan the horizon
cost, the upfront fees, the peak month's cash and the payment options bought; then the ratios.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
from pathlib import Path

import yaml
from variant_plans import plan_variant

ROOT = Path(__file__).resolve().parents[1]


def plan(scenario: Path, out: Path, time_limit: float, *, variant: str) -> dict[str, object]:
    """One plan of ``scenario``: ``as-written``, ``no-limit`` or ``by-the-hour``."""
    data = yaml.safe_load(scenario.read_text())
    catalog = (scenario.parent / data["catalog"]).resolve()
    if variant != "as-written":
        data["purchase"].pop("max_upfront_usd", None)
    if variant == "by-the-hour":  # the same catalog, its terms file without the upfront options
        copy_catalog = out / "hourly.catalog.csv"
        copy_catalog.write_bytes(catalog.read_bytes())
        terms = catalog.with_name(f"{catalog.stem}.terms.csv")
        with (
            terms.open(newline="") as source,
            (out / "hourly.catalog.terms.csv").open("w", newline="") as sink,
        ):
            rows = list(csv.reader(source))
            csv.writer(sink).writerows([rows[0], *(r for r in rows[1:] if r[4] == "no-upfront")])
        catalog = copy_catalog
    data["catalog"] = str(catalog)
    planned = plan_variant(data, out, variant, stem=scenario.stem, time_limit=time_limit, flags=())
    document, seconds = planned.document, planned.seconds
    months = document["costs"]["cash_by_month"]
    peak = max(months, key=lambda m: m["cash_usd"])
    bought: dict[str, int] = {}
    for c in document["commitments"]:
        bought[c["payment"]] = bought.get(c["payment"], 0) + c["nodes"]
    return {
        "variant": variant,
        "cost": document["costs"]["total_usd"],
        "owed": sum(c["obligation_beyond_horizon_usd"] for c in document["commitments"]),
        "fees": sum(m["upfront_usd"] for m in months),
        "peak": peak["cash_usd"],
        "peak_month": peak["month"],
        "bought": bought,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "upfront-payments.yaml")
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        results = [plan(args.scenario, out, args.time_limit, variant=v)
                   for v in ("as-written", "no-limit", "by-the-hour")]  # fmt: skip
    print("| plan | cost in horizon | owed after | upfront fees | peak month's cash | nodes by payment | s |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for r in results:
        bought = ", ".join(f"{n} {p}" for p, n in sorted(r["bought"].items()))  # type: ignore[attr-defined]
        print(
            f"| {r['variant']} | ${r['cost']:,.0f} | ${r['owed']:,.0f} | ${r['fees']:,.0f} | "
            f"${r['peak']:,.0f} ({r['peak_month']}) | {bought} | {r['seconds']:.1f} |"
        )
    capped, free, hourly = results
    print(f"cost with the limit / without: {capped['cost'] / free['cost']:.4f}")  # type: ignore[operator]
    print(f"cost paid by the hour / without the limit: {hourly['cost'] / free['cost']:.4f}")  # type: ignore[operator]
    print(f"peak month's cash with the limit / without: {capped['peak'] / free['peak']:.4f}")  # type: ignore[operator]


if __name__ == "__main__":
    main()
