"""The plan's MIG section and mig-config.yaml: replicas of several services packed per node pool."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from models.catalog import Catalog
from models.mig import layout_for, profile_named
from models.scenario import parse
from planner.optimize import optimize

H = 48
POOL = "aws:us-east-1:p5.48xlarge"


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory, kit):
    tmp_path = tmp_path_factory.mktemp("mig")
    kit.write_catalog_csv(
        tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=40.0, reserved_1y_usd_h=20.0)]
    )
    kit.write_demand_csv(tmp_path / "small.csv", [9 + (h % 6) for h in range(H)])
    data = kit.scenario_dict(
        hours=H,
        terms=["1y"],
        inference=[
            {"name": "small", "team": "t", "gpu_memory_gb": 9, "gpu_models": ["H100"],
             "replicas": {"csv": "small.csv"}},  # 1g.10gb
            {"name": "mid", "team": "t", "gpu_memory_gb": 18, "gpu_models": ["H100"],
             "replicas": {"profile": "flat", "base": 5}},  # 1g.20gb
            {"name": "big", "team": "t", "gpu_memory_gb": 35, "gpu_models": ["H100"],
             "replicas": {"profile": "flat", "base": 3}},  # 3g.40gb
            {"name": "whole", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
             "replicas": {"profile": "flat", "base": 1}},  # not MIG: never in the section
        ],
        training=[{"name": "ft", "team": "t", "nodes": 1, "gpu_models": ["H100"], "hours": 5}],
    )  # fmt: skip
    result = optimize(parse(data), Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings())
    out = tmp_path / "plan"
    out.mkdir()
    result.write(out)
    return result, out


def _mig(result) -> dict:
    """The plan's MIG section as plan.json has it."""
    return result.document.model_dump(mode="json")["mig"]


def test_services_share_gpus_and_the_count_is_bounded(plan) -> None:
    result, _ = plan
    (pool,) = _mig(result)["pools"]
    assert pool["offering"] == POOL
    demand = pool["peak_demand"]
    assert demand == {"1g.10gb": 14, "1g.20gb": 5, "3g.40gb": 3}  # the busiest hour: 9 + 5 small replicas
    # independent bounds: memory slices (8 per GPU) from below, one homogeneous layout per service above
    slices = sum(n * profile_named("H100", name).memory_slices for name, n in demand.items())
    assert math.ceil(slices / 8) <= pool["gpus_packed"] <= pool["gpus_per_service_layouts"]
    assert pool["gpus_per_service_layouts"] == math.ceil(14 / 7) + math.ceil(5 / 4) + math.ceil(3 / 2)
    assert pool["gpus_whole_per_replica"] == 22
    saved = _mig(result)["gpus_saved_vs_whole_at_peak"]
    assert saved == 22 - pool["gpus_packed"]


def test_mig_config_gives_every_node_a_legal_layout_that_covers_the_peak(plan) -> None:
    result, out = plan
    (pool,) = _mig(result)["pools"]
    config = yaml.safe_load((out / "mig-config.yaml").read_text())
    assert config["version"] == "v1"
    entries = config["mig-configs"][pool["config"]]
    devices = [d for entry in entries for d in entry["devices"]]
    assert sorted(devices) == list(range(8))  # each GPU of the node exactly once
    per_node: dict[str, int] = {}
    for entry in entries:
        if entry["mig-enabled"]:
            assert layout_for("H100", entry["mig-devices"]) is not None  # a legal MIG layout
            for name, n in entry["mig-devices"].items():
                per_node[name] = per_node.get(name, 0) + n * len(entry["devices"])
    for name, n in pool["peak_demand"].items():
        assert per_node.get(name, 0) * pool["nodes_with_config"] >= n


def test_training_and_whole_gpu_services_are_not_sliced(plan) -> None:
    result, _ = plan
    alloc = result.allocations
    assert set(alloc.loc[alloc["kind"] == "training", "workload"]) == {"ft"}
    (pool,) = _mig(result)["pools"]
    assert set(pool["peak_demand"]) == {"1g.10gb", "1g.20gb", "3g.40gb"}  # the 8-GPU service is not sliced
    # the planned GPUs reported are the plan's own GPUs for the sliced services at that hour
    held = alloc[(alloc["period"] == pool["peak_period"]) & alloc["workload"].isin(["small", "mid", "big"])]
    assert isinstance(held, pd.DataFrame) and held["gpus"].sum() == pytest.approx(pool["gpus_planned"])


def test_the_report_shows_the_layouts(plan) -> None:
    from planner.reports.plan import write_reports

    _, out = plan
    md, html = write_reports(out)
    text = md.read_text()
    assert "## MIG layouts" in text and "3g.40gb" in text
    assert 'id="mig"' in html.read_text()


def test_a_compute_share_picks_a_bigger_slice(tmp_path, kit) -> None:
    from planner.optimize.sets import build_sets

    kit.write_catalog_csv(tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=40.0)])
    service = {"name": "s", "team": "t", "gpu_memory_gb": 9, "gpu_models": ["H100"],
               "replicas": {"profile": "flat", "base": 1}}  # fmt: skip
    catalog = Catalog.load(tmp_path / "catalog.csv")
    memory_only = build_sets(parse(kit.scenario_dict(hours=4, inference=[service])), catalog, tmp_path)
    assert memory_only.replicas_per_node[(0, 0)] == 8 * 7  # 1g.10gb
    shared = build_sets(
        parse(kit.scenario_dict(hours=4, inference=[{**service, "gpu_compute_share": 0.4}])),
        catalog,
        tmp_path,
    )
    assert shared.replicas_per_node[(0, 0)] == 8 * 2  # 3g.40gb: 3 of 7 SM slices >= 0.4
