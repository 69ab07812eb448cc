"""Rebuild the embedded catalog's provenance, and take published commitment rates where they exist.

    python tools/quote_embedded_catalog.py [--shared ../shared] [--check]

Reads ``models/data/catalog.csv`` and the published commitment rates in
``<shared>/data/commitment-prices/{aws,gcp,azure}.csv`` (each row with its source and date; see their
SOURCE*.md), and writes the catalog in format 2:

- on-demand and spot: ``quoted`` from the row's own source (read 2026-11-29 unless the row's source dates
  it otherwise), ``assumed`` where the row says the price was derived or assumed;
- 1-year and 3-year: the published rate of the same region and instance type where one exists (``quoted``,
  with the source and its date); among several, the node-shaped no-upfront one of the most trusted source
  (the files' row order), a Compute Savings Plan only where nothing node-shaped is published; otherwise the
  row keeps its assumed ratio of on-demand (``assumed``);
- Capacity Blocks (``capacity_block_usd_h``, issue 38): kept as the row records them (quoted or assumed,
  models/data/CATALOG-SOURCES.md says from where); GCP flex-start (``flex_start_usd_h``) likewise.

``--check`` writes nothing and exits 1 when the embedded file differs from what it would write (a test runs
it). The product never reads ``../shared``; this tool is how the snapshot was made.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from models.catalog import EMBEDDED_CATALOG_PATH, Catalog, Offering, PriceProvenance, write_catalog  # noqa: E402
from models.priceterms import PriceTerm, terms_path_for, write_terms  # noqa: E402
from models.tiers import Tier  # noqa: E402

#: When the snapshot's on-demand and spot prices were read (models/data/CATALOG-SOURCES.md).
READ_ON = datetime(2026, 11, 29, tzinfo=UTC)
#: Rows whose own source dates their on-demand price otherwise.
DATED_ELSEWHERE = {"silybench-data": datetime(2026, 9, 26, tzinfo=UTC)}
ASSUMED_MARKERS = ("OD assumed", "OD DERIVED", "GPU rate UNVERIFIED")
ASSUMED_SPOT = ("spot = 0.40 x OD", "Spot is an assumed", "spot assumed 0.40")

#: The columns of each cloud's file that price a term: (tier, kind label, node-shaped).
TERM_COLUMNS = {
    "aws": [
        ("ri_1y_no_upfront_usd_h", Tier.RESERVED_1Y, "1-year standard RI, no upfront", True),
        ("sp_ec2_1y_usd_h", Tier.RESERVED_1Y, "1-year EC2 Instance Savings Plan, no upfront", True),
        ("sp_compute_1y_usd_h", Tier.RESERVED_1Y, "1-year Compute Savings Plan, no upfront", False),
        ("ri_3y_no_upfront_usd_h", Tier.RESERVED_3Y, "3-year standard RI, no upfront", True),
        ("sp_ec2_3y_usd_h", Tier.RESERVED_3Y, "3-year EC2 Instance Savings Plan, no upfront", True),
        ("sp_compute_3y_usd_h", Tier.RESERVED_3Y, "3-year Compute Savings Plan, no upfront", False),
    ],
    "gcp": [
        ("cud_1y_usd_h", Tier.RESERVED_1Y, "1-year resource-based committed use (vCPU + RAM + GPU)", True),
        ("cud_3y_usd_h", Tier.RESERVED_3Y, "3-year resource-based committed use (vCPU + RAM + GPU)", True),
    ],
    "azure": [
        ("reservation_1y_usd_h", Tier.RESERVED_1Y, "1-year reservation (whole-term price / 8,760 h)", True),
        ("reservation_3y_usd_h", Tier.RESERVED_3Y, "3-year reservation (whole-term price / 26,280 h)", True),
    ],
}
TYPE_COLUMN = {"aws": "instance_type", "gcp": "machine_type", "azure": "vm_size"}
SUFFIX = "; commitment prices: reserved_1y_source, reserved_3y_source"
#: Rows whose payment option or term class their source does not state are not taken as quotes.
UNSTATED = ("as stated",)


def published(shared: Path) -> dict[tuple[str, str, str, Tier], tuple[float, str, datetime]]:
    """(cloud, region, type, tier) -> (USD per node-hour, source, date): the first node-shaped rate in the
    files' order of trust, a Compute Savings Plan only where no node-shaped one exists."""
    found: dict[tuple[str, str, str, Tier], tuple[bool, float, str, datetime]] = {}
    for cloud, columns in TERM_COLUMNS.items():
        with (shared / "data" / "commitment-prices" / f"{cloud}.csv").open(encoding="utf-8") as stream:
            for row in csv.DictReader(stream):
                if any(mark in row["source_date"] for mark in UNSTATED):
                    continue
                as_of = datetime.fromisoformat(row["source_date"][:10]).replace(tzinfo=UTC)
                for column, tier, label, shaped in columns:
                    if not row.get(column):
                        continue
                    key = (cloud, row["region"], row[TYPE_COLUMN[cloud]], tier)
                    held = found.get(key)
                    if held is not None and (held[0] or not shaped):
                        continue  # an earlier (more trusted) rate, or a node-shaped one already
                    source = (
                        f"{label}: {row['source'].split(' (')[0]} ({cloud}.csv of gpuplan's price research)"
                    )
                    found[key] = (shaped, float(row[column]), source, as_of)
    return {key: (price, source, as_of) for key, (_, price, source, as_of) in found.items()}


def published_list_prices(shared: Path) -> dict[tuple[str, str, str, Tier], tuple[float, str, datetime]]:
    """(cloud, region, type, on-demand or spot) -> the published price: used where the catalog's own is an
    assumption (a derived H200 price, an unverified GPU rate)."""
    found: dict[tuple[str, str, str, Tier], tuple[float, str, datetime]] = {}
    for cloud in TERM_COLUMNS:
        with (shared / "data" / "commitment-prices" / f"{cloud}.csv").open(encoding="utf-8") as stream:
            for row in csv.DictReader(stream):
                if any(mark in row["source_date"] for mark in UNSTATED):
                    continue
                as_of = datetime.fromisoformat(row["source_date"][:10]).replace(tzinfo=UTC)
                for column, tier in (("on_demand_usd_h", Tier.ON_DEMAND), ("spot_usd_h", Tier.SPOT)):
                    key = (cloud, row["region"], row[TYPE_COLUMN[cloud]], tier)
                    if row.get(column) and key not in found:
                        source = f"{row['source'].split(' (')[0]} ({cloud}.csv of gpuplan's price research)"
                        found[key] = (float(row[column]), source, as_of)
    return found


Rates = dict[tuple[str, str, str, Tier], tuple[float, str, datetime]]

#: The terms file's kind, offering class and term of each published column.
TERM_OF_COLUMN = {
    "ri_1y_no_upfront_usd_h": ("reserved-instance", "standard", 1),
    "ri_3y_no_upfront_usd_h": ("reserved-instance", "standard", 3),
    "sp_ec2_1y_usd_h": ("savings-plan-ec2-instance", "", 1),
    "sp_ec2_3y_usd_h": ("savings-plan-ec2-instance", "", 3),
    "sp_compute_1y_usd_h": ("savings-plan-compute", "", 1),
    "sp_compute_3y_usd_h": ("savings-plan-compute", "", 3),
    "cud_1y_usd_h": ("committed-use", "resource-based", 1),
    "cud_3y_usd_h": ("committed-use", "resource-based", 3),
    "reservation_1y_usd_h": ("reservation", "", 1),
    "reservation_3y_usd_h": ("reservation", "", 3),
}


def published_terms(shared: Path, catalog: list[Offering]) -> list[PriceTerm]:
    """Every published commitment rate of an embedded offering as a term (no upfront, quoted), the first
    source of each (offering, kind, term) in the files' order of trust: the embedded terms file."""
    ids = {o.id for o in catalog}
    found: dict[tuple[str, str, int], PriceTerm] = {}
    for cloud in TERM_COLUMNS:
        with (shared / "data" / "commitment-prices" / f"{cloud}.csv").open(encoding="utf-8") as stream:
            for row in csv.DictReader(stream):
                if any(mark in row["source_date"] for mark in UNSTATED):
                    continue
                offering = f"{cloud}:{row['region']}:{row[TYPE_COLUMN[cloud]]}"
                if offering not in ids:
                    continue
                as_of = datetime.fromisoformat(row["source_date"][:10]).replace(tzinfo=UTC)
                for column, (kind, offering_class, years) in TERM_OF_COLUMN.items():
                    if not row.get(column) or (offering, kind, years) in found:
                        continue
                    found[(offering, kind, years)] = PriceTerm(
                        offering=offering,
                        kind=kind,  # type: ignore[arg-type]
                        term_years=years,
                        offering_class=offering_class,
                        payment="no-upfront",
                        usd_h=float(row[column]),
                        upfront_usd=0.0,
                        zone="",
                        source=f"{row['source'].split(' (')[0]} ({cloud}.csv of gpuplan's price research)",
                        as_of=as_of,
                    )
    return list(found.values())


def quoted_catalog(catalog: Catalog, rates: Rates, list_prices: Rates) -> list[Offering]:
    """Every offering with its provenance: published commitment rates taken, the rest as the row says."""
    result = []
    for offering in catalog:
        row_source = offering.source.removesuffix(SUFFIX)
        cut = row_source.find("reserved_1y =")
        if cut >= 0:  # format 1: the assumption closes the row's source
            assumption, base = row_source[cut:], row_source[:cut].rstrip("; ")
        else:  # format 2 (a re-run): the assumption is in the reserved tiers' own source
            said = [offering.price_provenance(t) for t in (Tier.RESERVED_1Y, Tier.RESERVED_3Y)]
            assumption = next((r.source for r in said if r.basis == "assumed"), "assumed ratio of on-demand")
            base = row_source
        as_of = next((d for key, d in DATED_ELSEWHERE.items() if key in base), READ_ON)
        updated = replace(offering, source=f"{base}{SUFFIX}")
        records = []
        for tier, assumed in (
            (Tier.ON_DEMAND, any(m in base for m in ASSUMED_MARKERS)),
            (Tier.SPOT, any(m in base for m in ASSUMED_SPOT) or "a2-ultragpu" in offering.id),
        ):
            said = offering.price_provenance(tier)
            if said.basis != "unstated":  # a re-run: what the first run decided
                records.append(said)
                continue
            if offering.price(tier) is None:
                continue
            listed = list_prices.get((offering.cloud, offering.region, offering.instance_type, tier))
            if assumed and listed is not None:
                price, source, dated = listed
                updated = replace(updated, **{f"{tier.value}_usd_h": price})
                records.append(PriceProvenance(tier.value, "quoted", source, dated))
            else:
                records.append(PriceProvenance(tier.value, "assumed" if assumed else "quoted", base, as_of))
        for tier in (Tier.RESERVED_1Y, Tier.RESERVED_3Y):
            rate = rates.get((offering.cloud, offering.region, offering.instance_type, tier))
            if rate is None:
                old, new = offering.on_demand_usd_h, updated.on_demand_usd_h
                if old and new and old != new:  # an assumed ratio follows a published on-demand price
                    scaled = round(float(offering.price(tier) or 0) * new / old, 4)
                    updated = replace(updated, **{f"{tier.value}_usd_h": scaled})
                records.append(PriceProvenance(tier.value, "assumed", assumption, None))
                continue
            price, source, dated = rate
            updated = replace(updated, **{f"{tier.value}_usd_h": price})
            records.append(PriceProvenance(tier.value, "quoted", source, dated))
        if offering.capacity_block_usd_h is not None:  # Capacity Block rates: as the row records them
            records.append(offering.price_provenance(Tier.CAPACITY_BLOCK))
        if offering.flex_start_usd_h is not None:  # GCP flex-start rates: as the row records them
            records.append(offering.price_provenance(Tier.FLEX_START))
        result.append(replace(updated, provenance=tuple(records)))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the embedded catalog is not what this writes"
    )
    args = parser.parse_args()
    offerings = quoted_catalog(
        Catalog.load(EMBEDDED_CATALOG_PATH), published(args.shared), published_list_prices(args.shared)
    )
    terms = published_terms(args.shared, offerings)
    terms_path = terms_path_for(EMBEDDED_CATALOG_PATH)
    if args.check:
        scratch = Path(EMBEDDED_CATALOG_PATH.parent / ".quote-check.csv")
        scratch_terms = terms_path_for(scratch)
        try:
            write_catalog(offerings, scratch)
            write_terms(terms, scratch_terms)
            same = scratch.read_bytes() == EMBEDDED_CATALOG_PATH.read_bytes()
            same = same and terms_path.is_file() and scratch_terms.read_bytes() == terms_path.read_bytes()
        finally:
            scratch.unlink(missing_ok=True)
            scratch_terms.unlink(missing_ok=True)
        print("the embedded catalog is as this tool writes it" if same else "the embedded catalog differs")
        return 0 if same else 1
    write_catalog(offerings, EMBEDDED_CATALOG_PATH)
    write_terms(terms, terms_path)
    print(f"wrote {terms_path}: {len(terms)} published commitment rates")
    counts = Catalog.load(EMBEDDED_CATALOG_PATH).provenance_counts()
    print(f"wrote {EMBEDDED_CATALOG_PATH}: {len(offerings)} offerings; prices {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
