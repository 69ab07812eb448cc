"""Savings-plan scenarios for the savings-plan tests (issue 38): terms rows, held plans, a catalog with its
terms file beside it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from models.priceterms import PriceTerm, terms_path_for, write_terms

START = "2027-01-04T00:00:00Z"
P5 = "aws:us-east-1:p5.48xlarge"
P4 = "aws:us-east-1:p4d.24xlarge"


def sp_term(offering: str, kind: str, years: int, usd_h: float) -> PriceTerm:
    return PriceTerm(offering, kind, years, "", "no-upfront", usd_h, 0.0, "", "test",  # type: ignore[arg-type]
                     datetime(2026, 12, 1, tzinfo=UTC))  # fmt: skip


def write_sp_catalog(kit: Any, directory: Path, terms: list[PriceTerm], **od: float) -> Path:
    """p5 (and p4d) in us-east-1 at the on-demand rates ``od`` (p5=, p4=), with the terms file ``terms``."""
    rows = [kit.offering_row(on_demand_usd_h=od.get("p5", 10.0))]
    if "p4" in od:
        rows.append(kit.offering_row(instance_type="p4d.24xlarge", gpu_model="A100-40GB", gpu_memory_gb=40,
                                     on_demand_usd_h=od["p4"]))  # fmt: skip
    path = kit.write_catalog_csv(directory / "catalog.csv", rows)
    write_terms(terms, terms_path_for(path))
    return path


def held(name: str = "sp-a", **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": "compute", "term": "1y", "usd_per_hour": 5.0, "start": START, **fields}
