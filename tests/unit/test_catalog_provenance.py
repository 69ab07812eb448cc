"""Catalog format 2 (per-price provenance) and the terms file: read strictly, written and read back whole."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from models.catalog import Catalog, write_catalog
from models.errors import InputError
from models.priceterms import PriceTerm, headline_commitment, read_terms, terms_path_for, write_terms
from models.tiers import Tier

QUOTED = {"on_demand_basis": "quoted", "on_demand_source": "AWS Price List", "on_demand_as_of": "2026-12-01"}


def _load(kit, tmp_path: Path, **cells: Any) -> Catalog:
    return Catalog.load(kit.write_catalog_csv(tmp_path / "c.csv", [kit.offering_row(**cells)]))


def test_a_format_1_catalog_loads_with_every_price_unstated(kit, tmp_path: Path) -> None:
    catalog = _load(kit, tmp_path, spot_usd_h=3.0)
    offering = next(iter(catalog))
    assert offering.provenance == ()
    said = offering.price_provenance(Tier.ON_DEMAND)
    assert (said.basis, said.source, said.as_of) == ("unstated", "test fixture 2027-01-01", None)
    assert catalog.provenance_counts()["unstated"] == 2  # on-demand and spot: the prices it has


def test_provenance_is_read_per_tier(kit, tmp_path: Path) -> None:
    offering = next(
        iter(
            _load(
                kit, tmp_path, **QUOTED, reserved_1y_usd_h=6.0, reserved_1y_basis="assumed",
                reserved_1y_source="0.60 x on-demand", reserved_3y_basis="unknown",
                reserved_3y_source="not in the Savings Plans rates",
            )
        )
    )  # fmt: skip
    assert offering.price_provenance(Tier.ON_DEMAND).as_of == datetime(2026, 12, 1, tzinfo=UTC)
    assert offering.price_provenance(Tier.RESERVED_1Y).basis == "assumed"
    assert offering.price_provenance(Tier.RESERVED_3Y).basis == "unknown"
    assert offering.reserved_3y_usd_h is None


@pytest.mark.parametrize(
    ("cells", "column", "problem"),
    [
        ({"on_demand_basis": "guessed"}, "on_demand_basis", "unknown price basis 'guessed'"),
        ({"on_demand_basis": "quoted"}, "on_demand_basis", "names its source and date"),
        ({"on_demand_source": "x"}, "on_demand_basis", "empty, but on_demand_source"),
        ({**QUOTED, "on_demand_as_of": "yesterday"}, "on_demand_as_of", "not an ISO 8601 date"),
        ({**QUOTED, "on_demand_as_of": "2999-01-01"}, "on_demand_as_of", "in the future"),
        ({**QUOTED, "on_demand_as_of": "1999-01-01"}, "on_demand_as_of", "not a date a price was read on"),
        ({"spot_basis": "quoted", "spot_source": "s", "spot_as_of": "2026-01-01"}, "spot_basis", "is empty"),
        ({"spot_usd_h": 3.0, "spot_basis": "unknown"}, "spot_basis", "leave the price empty"),
        ({**QUOTED, "on_demand_source": b"a\\x07b".decode("unicode_escape")}, "on_demand_source", "control"),
    ],
)  # fmt: skip
def test_bad_provenance_names_the_cell(
    kit, tmp_path: Path, cells: dict[str, Any], column: str, problem: str
) -> None:
    with pytest.raises(InputError) as info:
        _load(kit, tmp_path, **cells)
    assert info.value.where == f"row 2, column {column}"
    assert problem in info.value.problem


def test_an_unknown_price_is_a_warning_and_an_unknown_on_demand_row_is_not_planned(
    kit, tmp_path: Path
) -> None:
    rows = [
        kit.offering_row(spot_basis="unknown", spot_source="no spot history"),
        {
            **kit.offering_row(instance_type="p5en.48xlarge"),
            "on_demand_usd_h": None,
            "on_demand_basis": "unknown",
        },
    ]
    catalog = Catalog.load(kit.write_catalog_csv(tmp_path / "c.csv", rows))
    assert [o.instance_type for o in catalog] == ["p5.48xlarge"]
    warned = "\n".join(catalog.warnings)
    assert "row 2: the spot price of aws:us-east-1:p5.48xlarge is unknown (no spot history)" in warned
    assert (
        "row 3: the on-demand price of aws:us-east-1:p5en.48xlarge is unknown; the offering is not planned"
        in warned
    )


def test_a_catalog_written_reads_back_the_same(kit, tmp_path: Path) -> None:
    original = _load(
        kit, tmp_path, **QUOTED, spot_usd_h=3.25, reserved_1y_usd_h=6.0, reserved_1y_basis="negotiated",
        reserved_1y_source="PPA", spot_interruptions_per_hour=0.05,
    )  # fmt: skip
    write_catalog(original, tmp_path / "again.csv")
    again = Catalog.load(tmp_path / "again.csv")
    (before,), (after,) = list(original), list(again)
    assert before == after and before.provenance == after.provenance


def _term(**overrides: Any) -> PriceTerm:
    values: dict[str, Any] = {
        "offering": "aws:us-east-1:p5.48xlarge", "kind": "reserved-instance", "term_years": 1,
        "offering_class": "standard", "payment": "no-upfront", "usd_h": 30.0, "upfront_usd": 0.0, "zone": "",
        "source": "AWS Price List", "as_of": datetime(2026, 12, 1, tzinfo=UTC),
    }  # fmt: skip
    return PriceTerm(**{**values, **overrides})


def test_the_effective_rate_spreads_the_upfront_fee_over_the_term() -> None:
    assert _term(usd_h=10.0, upfront_usd=87_600.0).effective_usd_h == pytest.approx(20.0)
    assert (
        _term(term_years=3, usd_h=0.0, upfront_usd=262_800.0, payment="all-upfront").effective_usd_h == 10.0
    )


def test_the_headline_is_the_cheapest_node_shaped_no_upfront_term() -> None:
    terms = [
        _term(usd_h=30.0),
        _term(kind="savings-plan-ec2-instance", offering_class="", usd_h=29.0),
        _term(payment="all-upfront", usd_h=0.0, upfront_usd=200_000.0),  # cheaper, but paid upfront
        _term(kind="savings-plan-compute", offering_class="", usd_h=28.0),  # cheaper, but across types
        _term(term_years=3, usd_h=20.0),
        _term(offering="aws:us-east-1:p4d.24xlarge", usd_h=1.0),
    ]
    assert headline_commitment(terms, "aws:us-east-1:p5.48xlarge", 1).kind == "savings-plan-ec2-instance"
    assert headline_commitment(terms, "aws:us-east-1:p5.48xlarge", 3).usd_h == 20.0
    only_plans = [_term(kind="savings-plan-compute", offering_class="", usd_h=28.0)]
    assert headline_commitment(only_plans, "aws:us-east-1:p5.48xlarge", 1).usd_h == 28.0  # the fallback
    assert headline_commitment(terms, "aws:us-west-2:p5.48xlarge", 1) is None


def test_the_terms_file_reads_back_and_is_checked(tmp_path: Path) -> None:
    spot = _term(
        kind="spot-zone", term_years=None, offering_class="", payment="", usd_h=18.2, zone="us-east-1a"
    )
    terms = [_term(), _term(payment="partial-upfront", usd_h=15.0, upfront_usd=131_400.0), spot]
    path = terms_path_for(tmp_path / "catalog.csv")
    assert path.name == "catalog.terms.csv"
    write_terms(terms, path)
    assert sorted(read_terms(path), key=repr) == sorted(terms, key=repr)
    text = path.read_text().replace(
        "15,131400,30,", "15,131400,29,"
    )  # an effective rate that does not add up
    path.write_text(text)
    with pytest.raises(InputError, match="column effective_usd_h: 29 is not usd_h"):
        read_terms(path)


def test_a_catalog_carries_the_terms_file_beside_it(kit, tmp_path: Path) -> None:
    path = kit.write_catalog_csv(tmp_path / "c.csv", [kit.offering_row()])
    write_terms(
        [_term(), _term(kind="savings-plan-compute", offering_class="", usd_h=33.0),
         _term(offering="aws:us-west-2:p5.48xlarge")],  # no catalog row: left out, with a warning
        terms_path_for(path),
    )  # fmt: skip
    catalog = Catalog.load(path)
    assert sorted(t.kind for t in catalog.terms) == ["reserved-instance", "savings-plan-compute"]
    assert any("1 offering(s) with terms but no catalog row" in w for w in catalog.warnings)
    assert catalog.filter(cloud="gcp").terms == ()  # a filter keeps the terms of the offerings it keeps
    assert len(catalog.filter(cloud="aws").terms) == 2


def test_the_embedded_catalog_has_its_published_rates_as_terms() -> None:
    catalog = Catalog.load()
    by_key = {(t.offering, t.kind, t.term_years): t for t in catalog.terms}
    ec2 = by_key[("aws:us-east-1:p5.48xlarge", "savings-plan-ec2-instance", 3)]
    assert ec2.usd_h == 23.77728 and ec2.basis == "quoted" and ec2.payment == "no-upfront"
    assert by_key[("aws:us-east-1:p6-b200.48xlarge", "savings-plan-compute", 1)].usd_h == 89.72208
    assert by_key[("azure:eastus:Standard_ND96isr_H100_v5", "reservation", 1)].usd_h == 62.9248
    for offering in catalog:  # every quoted commitment price of the catalog is one of its terms
        for tier, years in ((Tier.RESERVED_1Y, 1), (Tier.RESERVED_3Y, 3)):
            if offering.price_provenance(tier).basis == "quoted":
                rates = {
                    t.usd_h for t in catalog.terms if t.offering == offering.id and t.term_years == years
                }
                assert offering.price(tier) in rates, (offering.id, tier)
