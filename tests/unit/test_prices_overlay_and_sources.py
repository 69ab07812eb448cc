"""Private prices (``models/overlay.py``) and where a plan's prices come from (``models/pricesources.py``).

One 8-GPU offering and a service of one node per replica, so the demand series is the usage in nodes: the
plan's cost and the prices it uses are written out by hand from the catalog and the overlay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from models.catalog import Catalog
from models.errors import InputError
from models.inputs import load_inputs
from models.overlay import PricingOverlay, apply_overlay
from models.tiers import Tier
from planner.cli import app

C_OD, C_1Y = 10.0, 6.0
HOURS = 48


def _catalog(kit, tmp_path: Path, **provenance: Any) -> Path:
    rows = [
        kit.offering_row(
            on_demand_usd_h=C_OD,
            reserved_1y_usd_h=C_1Y,
            spot_usd_h=3.0,
            on_demand_basis="quoted",
            on_demand_source="AWS Price List GetProducts (test)",
            on_demand_as_of="2026-12-01",
            reserved_1y_basis="assumed",
            reserved_1y_source="0.60 x on-demand: ASSUMPTION",
            **provenance,
        ),
        kit.offering_row(cloud="gcp", region="us-central1", instance_type="a3-highgpu-8g", fabric="tcpx"),
    ]
    return kit.write_catalog_csv(tmp_path / "catalog.csv", rows)


def _scenario(kit, tmp_path: Path, **extra: Any) -> Path:
    kit.write_demand_csv(tmp_path / "demand.csv", [2] * HOURS)
    data = kit.scenario_dict(
        hours=HOURS,
        terms=["1y"],
        inference=[
            {
                "name": "svc",
                "team": "t",
                "gpus_per_replica": 8,
                "gpu_models": ["H100"],
                "latency_critical": True,
                "replicas": {"csv": "demand.csv"},
            }
        ],
    )
    data["clouds"] = {"aws": {}}
    data.update(extra)
    return kit.write_scenario_yaml(tmp_path / "scenario.yaml", data)


def _overlay(tmp_path: Path, data: dict[str, Any], name: str = "prices.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_discount_takes_its_percent_off_and_marks_the_price_negotiated(kit, tmp_path: Path) -> None:
    catalog = Catalog.load(_catalog(kit, tmp_path))
    overlay = PricingOverlay.model_validate({"discounts": [{"cloud": "aws", "percent": 8, "note": "EDP"}]})
    applied = apply_overlay(catalog, overlay, "prices.yaml")
    aws = applied.get("aws:us-east-1:p5.48xlarge")
    assert aws.on_demand_usd_h == pytest.approx(C_OD * 0.92)
    assert aws.reserved_1y_usd_h == pytest.approx(C_1Y * 0.92)
    assert aws.spot_usd_h == pytest.approx(3.0 * 0.92)
    said = aws.price_provenance(Tier.ON_DEMAND)
    assert said.basis == "negotiated"
    assert "EDP" in said.source and "less 8 %" in said.source and "AWS Price List" in said.source
    assert applied.get("gcp:us-central1:a3-highgpu-8g").on_demand_usd_h == 10.0  # another cloud: untouched
    assert applied.overlays == ("prices.yaml",)


def test_a_negotiated_rate_is_net_of_the_discount(kit, tmp_path: Path) -> None:
    catalog = Catalog.load(_catalog(kit, tmp_path))
    overlay = PricingOverlay.model_validate(
        {
            "discounts": [{"cloud": "aws", "percent": 10, "tiers": ["on_demand", "reserved_1y"]}],
            "rates": [{"offering": "aws:us-east-1:p5.48xlarge", "tier": "reserved_1y", "usd_h": 5.0}],
        }
    )
    aws = apply_overlay(catalog, overlay, "x").get("aws:us-east-1:p5.48xlarge")
    assert aws.reserved_1y_usd_h == 5.0  # the rate, not 5.0 x 0.9
    assert aws.on_demand_usd_h == pytest.approx(9.0)
    assert aws.spot_usd_h == 3.0  # spot not in the discount's tiers
    assert aws.price_provenance(Tier.SPOT).basis == "unstated"


@pytest.mark.parametrize(
    ("data", "where", "problem"),
    [
        ({"rates": [{"offering": "aws:us-east-1:p5.48xlarg", "tier": "on_demand", "usd_h": 1}]},
         "rates[0].offering", "closest: aws:us-east-1:p5.48xlarge"),
        ({"rates": [{"offering": "aws:us-east-1:p5.48xlarge", "tier": "reserved_3y", "usd_h": 1}]},
         "rates[0].tier", "no reserved_3y price"),
        ({"discounts": [{"cloud": "azure", "percent": 5}]}, "discounts[0].cloud", "no azure offering"),
        ({"discounts": [{"cloud": "aws", "percent": 100}]}, "discounts.0.percent", "less than 100"),
        ({"discounts": [{"cloud": "aws", "percent": True}]}, "discounts.0.percent", "boolean"),
        ({"rates": [{"offering": "aws:us-east-1:p5.48xlarge", "tier": "spot", "usd_h": "nan"}]},
         "rates.0.usd_h", ""),
        ({"discount": []}, "discount", "Extra inputs"),
    ],
)  # fmt: skip
def test_a_bad_overlay_names_the_entry(
    kit, tmp_path: Path, data: dict[str, Any], where: str, problem: str
) -> None:
    _catalog(kit, tmp_path)
    scenario = _scenario(kit, tmp_path)
    overlay = _overlay(tmp_path, data)
    with pytest.raises(InputError) as info:
        load_inputs(scenario, prices=overlay)
    assert info.value.file == str(overlay)
    assert info.value.where == where
    assert problem in info.value.problem


def test_a_scenario_pricing_inline_or_as_a_file_is_the_same(kit, tmp_path: Path) -> None:
    _catalog(kit, tmp_path)
    data = {"discounts": [{"cloud": "aws", "percent": 20}]}
    _overlay(tmp_path, data)
    inline = load_inputs(_scenario(kit, tmp_path, pricing=data)).catalog
    by_file = load_inputs(_scenario(kit, tmp_path, pricing="prices.yaml")).catalog
    for catalog in (inline, by_file):
        assert catalog.get("aws:us-east-1:p5.48xlarge").on_demand_usd_h == pytest.approx(8.0)
    assert by_file.overlays == (str(tmp_path / "prices.yaml"),)
    with pytest.raises(InputError, match="pricing overlay not found"):
        load_inputs(_scenario(kit, tmp_path, pricing="missing.yaml"))


def test_the_plan_says_which_prices_it_uses_and_warns_on_an_assumed_purchase(kit, tmp_path: Path) -> None:
    """Two nodes all the time: the 1-year rate (6 < 10) is bought for both; the plan uses the assumed
    1-year price only, and says so in plan.json, the CLI, the report and a warning."""
    _catalog(kit, tmp_path)
    scenario = _scenario(kit, tmp_path)
    runner = CliRunner()
    result = runner.invoke(
        app, ["plan", str(scenario), "-o", str(tmp_path / "plan"), "-q", "--time-limit", "30"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "plan" / "plan.json").read_text())
    prices = document["prices"]
    assert [(u["offering"], u["tier"], u["basis"]) for u in prices["used"]] == [
        ("aws:us-east-1:p5.48xlarge", "reserved_1y", "assumed")
    ]
    assert prices["used"][0]["usd_per_node_hour"] == C_1Y
    assert prices["used"][0]["node_hours"] == pytest.approx(2 * HOURS)
    assert prices["counts"] == {"assumed": 1} and prices["catalog_format"] == 2
    said = " ".join(result.output.split())  # rich wraps long warnings
    assert "prices: " in said and "the plan uses 1: 1 assumed" in said
    assert "the 1y purchase of 2 x aws:us-east-1:p5.48xlarge rests on an assumed price" in said
    report = (tmp_path / "plan" / "report.md").read_text()
    assert "Assumed, not quoted: aws:us-east-1:p5.48xlarge reserved_1y" in report


def test_a_negotiated_rate_changes_the_plan_and_verify_needs_the_same_overlay(kit, tmp_path: Path) -> None:
    _catalog(kit, tmp_path)
    scenario = _scenario(kit, tmp_path)
    overlay = _overlay(
        tmp_path, {"rates": [{"offering": "aws:us-east-1:p5.48xlarge", "tier": "reserved_1y", "usd_h": 5.0,
                              "note": "PPA", "as_of": "2026-11-02"}]}
    )  # fmt: skip
    runner = CliRunner()
    out = tmp_path / "plan"
    made = runner.invoke(app, ["plan", str(scenario), "-o", str(out), "-q", "--prices", str(overlay)])
    assert made.exit_code == 0, made.output
    document = json.loads((out / "plan.json").read_text())
    # two nodes on the 1-year term for the horizon at the negotiated 5.0 (by hand: 2 x 5 x 48)
    assert document["costs"]["total_usd"] == pytest.approx(2 * 5.0 * HOURS)
    used = document["prices"]["used"][0]
    assert (used["basis"], used["usd_per_node_hour"]) == ("negotiated", 5.0) and "PPA" in used["source"]
    assert document["prices"]["overlays"] == [str(overlay)]
    assert "assumed price" not in made.output
    same = runner.invoke(app, ["verify", str(scenario), str(out), "--prices", str(overlay)])
    assert same.exit_code == 0, same.output
    missing = runner.invoke(app, ["verify", str(scenario), str(out)])
    assert missing.exit_code == 2 and "give verify the same --prices" in " ".join(missing.output.split())
