"""What-if changes (models/variation.py): the grammar, what each key changes, and clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.catalog import Catalog
from models.errors import InputError
from models.inputs import load_inputs
from models.scenario import parse
from models.variation import apply_variations, parse_all, parse_variation
from models.workloads import service_demand

H = 48


@pytest.fixture
def base(tmp_path: Path, kit):
    rows = [
        kit.offering_row(on_demand_usd_h=50.0, spot_usd_h=20.0, reserved_1y_usd_h=30.0),
        kit.offering_row("gcp", "us-central1", "a2-highgpu-8g", gpu_model="A100-40GB", gpu_memory_gb=40,
                         fabric="none", on_demand_usd_h=30.0, spot_usd_h=12.0, max_nodes=10),
    ]  # fmt: skip
    kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    data = kit.scenario_dict(
        hours=H,
        teams=[{"name": "web"}, {"name": "lab"}],
        inference=[
            {"name": "chat", "team": "web", "gpus_per_replica": 8, "gpu_models": ["H100"],
             "replicas": {"profile": "flat", "base": 10, "monthly_growth": 0.02}},
            {"name": "embed", "team": "lab", "gpus_per_replica": 1, "gpu_models": ["A100"],
             "replicas": {"profile": "flat", "base": 3}},
        ],
        training=[{"name": "ft", "team": "lab", "nodes": 1, "gpu_models": ["A100"], "hours": 10}],
    )  # fmt: skip
    return parse(data), Catalog.load(tmp_path / "catalog.csv")


@pytest.mark.parametrize(
    ("text", "key", "target", "op", "value"),
    [
        ("demand=x1.3", "demand", None, "x", 1.3),
        ("spot_price=+50%", "spot_price", None, "%", 50.0),
        ("capacity:H100=-50%", "capacity", "H100", "%", -50.0),
        ("capacity:aws:us-east-1:p5.48xlarge=16", "capacity", "aws:us-east-1:p5.48xlarge", "=", 16.0),
        (" colocation.max_nodes = 8 ", "colocation.max_nodes", None, "=", 8.0),
        ("growth:chat=*2", "growth", "chat", "x", 2.0),
    ],
)
def test_grammar(text: str, key: str, target: str | None, op: str, value: float) -> None:
    v = parse_variation(text)
    assert (v.key, v.target, v.op, v.value) == (key, target, op, value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("demand", r"expected KEY\[:TARGET\]=VALUE"),
        ("demnd=x2", "unknown key 'demnd'"),
        ("demand=2", "takes a factor"),
        ("spot_price=-150%", "below -100%"),
        ("colocation.capex=1", "no field 'capex'"),
        ("max_spot_share=x2", "max_spot_share=0.3"),
    ],
)
def test_bad_changes_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        parse_all([text], "--vary")
    assert caught.value.where == "--vary[0]"


def test_prices_change_only_where_targeted(base) -> None:
    scenario, catalog = base
    _, varied = apply_variations(
        scenario, catalog, parse_all(["spot_price:H100=+50%", "on_demand_price:gcp=x0.5"])
    )
    h100, a100 = varied.offerings
    assert (
        h100.spot_usd_h == pytest.approx(30.0)
        and h100.on_demand_usd_h == 50.0
        and h100.reserved_1y_usd_h == 30.0
    )
    assert a100.spot_usd_h == 12.0 and a100.on_demand_usd_h == pytest.approx(15.0)
    assert [o.spot_usd_h for o in catalog.offerings] == [20.0, 12.0]  # the input is not changed


def test_demand_growth_and_training(base, tmp_path: Path) -> None:
    scenario, catalog = base
    varied, _ = apply_variations(
        scenario, catalog, parse_all(["demand:web=x1.3", "growth=x2", "training_hours:ft=+50%"])
    )
    chat, embed = varied.inference
    assert chat.scale == pytest.approx(1.3) and embed.scale == 1.0
    assert chat.replicas.monthly_growth == pytest.approx(0.04)
    assert varied.training[0].hours == pytest.approx(15.0)
    expected = np.ceil(10 * 1.3 * 1.04 ** (np.arange(H) / 730) - 1e-6)
    assert np.array_equal(service_demand(varied, chat, tmp_path), expected)


def test_capacity_absolute_relative_and_reference(base) -> None:
    scenario, catalog = base
    _, varied = apply_variations(scenario, catalog, parse_all(["capacity:A100=-50%"]))
    assert varied.offerings[1].max_nodes == 5  # a limited offering scales its own limit
    with pytest.raises(InputError, match="has no capacity limit to scale"):
        apply_variations(scenario, catalog, parse_all(["capacity:H100=-50%"]))
    _, varied = apply_variations(
        scenario, catalog, parse_all(["capacity:H100=-50%"]), {"aws:us-east-1:p5.48xlarge": 7.0}
    )
    assert varied.offerings[0].max_nodes == 3  # floor(7 * 0.5)
    _, varied = apply_variations(scenario, catalog, parse_all(["capacity:aws=4"]))
    assert [o.max_nodes for o in varied.offerings] == [4, 10]


def test_colocation_can_be_added_and_changed(base) -> None:
    scenario, catalog = base
    varied, _ = apply_variations(
        scenario, catalog, parse_all(["colocation.max_nodes=16", "colocation.pue=x1.2"])
    )
    assert varied.colocation is not None
    assert varied.colocation.max_nodes == 16 and varied.colocation.pue == pytest.approx(1.8)
    with pytest.raises(InputError, match="no colocation section"):
        apply_variations(scenario, catalog, parse_all(["colocation.pue=1.3"]))


def test_targets_that_match_nothing_are_errors(base) -> None:
    scenario, catalog = base
    with pytest.raises(InputError, match="no offering matches 'B200'"):
        apply_variations(scenario, catalog, parse_all(["price:B200=+10%"]))
    with pytest.raises(InputError, match="no inference workload or team named 'nope'"):
        apply_variations(scenario, catalog, parse_all(["demand:nope=x2"]))


def test_a_scenario_applies_its_own_adjust_list(tmp_path: Path, kit) -> None:
    kit.write_catalog_csv(tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=50.0, spot_usd_h=20.0)])
    data = kit.scenario_dict(hours=H)
    data["adjust"] = ["spot_price=+50%"]
    path = kit.write_scenario_yaml(tmp_path / "s.yaml", data)
    inputs = load_inputs(path)
    assert inputs.catalog.offerings[0].spot_usd_h == pytest.approx(30.0)
    assert inputs.scenario.adjust == []  # applied once, not again downstream
    data["adjust"] = ["spot_price=lots"]
    kit.write_scenario_yaml(path, data)
    with pytest.raises(InputError) as caught:
        load_inputs(path)
    assert caught.value.file == str(path) and caught.value.where == "adjust[0]"


def test_a_scenario_adjust_that_matches_nothing_is_named_as_such(tmp_path: Path, kit) -> None:
    kit.write_catalog_csv(tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=50.0)])
    data = kit.scenario_dict(hours=H)
    data["adjust"] = ["spot_price:oracle=+5%"]
    path = kit.write_scenario_yaml(tmp_path / "s.yaml", data)
    with pytest.raises(InputError, match="no offering matches 'oracle'") as caught:
        load_inputs(path)
    assert caught.value.file == str(path) and caught.value.where == "adjust[0]"  # the entry itself


def test_colocation_max_nodes_zero_means_cloud_only(base) -> None:
    scenario, catalog = base
    owned, _ = apply_variations(scenario, catalog, parse_all(["colocation.max_nodes=4"]))
    assert owned.colocation is not None
    cloud_only, _ = apply_variations(owned, catalog, parse_all(["colocation.max_nodes=0"]))
    assert cloud_only.colocation is None


def test_a_change_keeps_clouds_left_out(base) -> None:
    """The base names no ``clouds:`` and its catalog has no Azure offering; a change must not write the
    every-cloud default back as if the user had named Azure (planning would refuse it)."""
    from planner.planning.problem.checks import check_inputs

    scenario, catalog = base
    assert "clouds" not in scenario.model_fields_set
    for change in ("demand=x1.1", "max_spot_share=0.5", "colocation.max_nodes=2"):
        varied, varied_catalog = apply_variations(scenario, catalog, parse_all([change]))
        assert "clouds" not in varied.model_fields_set, change
        check_inputs(varied, varied_catalog)  # raised "clouds.azure: ... has no azure offering" before
    assert (
        apply_variations(scenario, catalog, parse_all(["max_spot_share=0.5"]))[0].purchase.max_spot_share
        == 0.5
    )
