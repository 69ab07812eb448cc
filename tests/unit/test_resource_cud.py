"""GCP resource-based committed use (issue 38, point 3): GPUs of one model in one region, shared by every
machine type with that GPU, bought in whole GPUs. Closed forms on a3-highgpu-1g (1 H100) and
a3-highgpu-8g (8 H100) in us-central1, whose committed-use prices are proportional to their GPUs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.inputs import Inputs, load_inputs
from models.plan import Plan
from models.savingsplans import resource_groups
from models.tiers import Tier
from planner.planning.optimize import SolveSettings, optimize
from planner.verify import verify

HOURS = 48
OD_1G, CUD_1G = 11.0, 7.5  # a3-highgpu-1g on demand and 1y committed use, USD per node-hour
ONE_G = "gcp:us-central1:a3-highgpu-1g"
EIGHT_G = "gcp:us-central1:a3-highgpu-8g"


def _inputs(kit: Any, directory: Path, small: list[int], big: list[int], buy: bool = True) -> Inputs:
    """1-GPU replicas following ``small`` and 8-GPU replicas following ``big``, hour by hour, on H100s."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [
        kit.offering_row("gcp", "us-central1", "a3-highgpu-1g", gpus_per_node=1, fabric="none",
                         on_demand_usd_h=OD_1G, reserved_1y_usd_h=CUD_1G),
        kit.offering_row("gcp", "us-central1", "a3-highgpu-8g", gpus_per_node=8, fabric="none",
                         on_demand_usd_h=8 * OD_1G, reserved_1y_usd_h=8 * CUD_1G),
    ]  # fmt: skip
    kit.write_catalog_csv(directory / "catalog.csv", rows)
    kit.write_demand_csv(directory / "small.csv", small)
    kit.write_demand_csv(directory / "big.csv", big)
    services = [
        {"name": name, "team": "t", "gpus_per_replica": gpus, "gpu_models": ["H100"],
         "latency_critical": True, "replicas": {"csv": f"{name}.csv"}}
        for name, gpus in (("small", 1), ("big", 8))
    ]  # fmt: skip
    data = kit.scenario_dict(hours=HOURS, inference=services, terms=["1y"])
    data["purchase"]["savings_plans"] = ["gcp-resource"] if buy else []
    return load_inputs(kit.write_scenario_yaml(directory / "s.yaml", data))


def _plan(inputs: Inputs, method: str = "staged") -> Plan:
    return optimize(inputs.scenario, inputs.catalog, inputs.base_dir,
                    SolveSettings(time_limit=30, method=method))  # fmt: skip


def test_one_group_per_gpu_model_and_region_priced_per_gpu(kit, tmp_path: Path) -> None:
    inputs = _inputs(kit, tmp_path, [1] * HOURS, [0] * HOURS)
    (group,) = [g for g in resource_groups(inputs.catalog.offerings) if g.term_years == 1]
    assert (group.kind, group.scope) == ("committed-use", "gcp-resource H100 us-central1")
    assert dict(group.rates) == {ONE_G: CUD_1G, EIGHT_G: 8 * CUD_1G}
    assert group.unit_usd_per_hour == pytest.approx(CUD_1G)


@pytest.mark.parametrize("method", ["staged", "hourly"])
def test_one_commitment_of_gpus_serves_both_machine_types(kit, tmp_path: Path, method: str) -> None:
    """16 GPUs of 8-GPU replicas for the first day, 16 GPUs of 1-GPU replicas for the second: 16 GPUs
    committed cover both, $7.5 x 16 an hour, whatever machine types serve them; no machine-type
    commitment is bought (resource-based committed use takes their place)."""
    plan = _plan(_inputs(kit, tmp_path, [0] * 24 + [16] * 24, [2] * 24 + [0] * 24), method)
    (cud,) = plan.document.savings_plans
    assert (cud.kind, cud.gpus, cud.existing) == ("committed-use", 16, False)
    assert cud.usd_per_hour == pytest.approx(16 * CUD_1G)
    assert cud.name == "committed-use/1y/H100/us-central1/2027-01-04"
    assert plan.document.commitments == []
    assert plan.document.costs.total_usd == pytest.approx(16 * CUD_1G * HOURS)
    rows = plan.allocations
    assert (rows["tier"] == Tier.SAVINGS_PLAN).all() and set(rows["commitment"]) == {cud.name}


@pytest.mark.parametrize(("usage", "gpus"), [([3] * 36 + [7] * 12, 3), ([3] * 12 + [7] * 36, 7)])
def test_whole_gpus_at_the_newsvendor_level(kit, tmp_path: Path, usage: list[int], gpus: int) -> None:
    """1-GPU replicas: a GPU level is worth committing when used in at least 7.5 / 11 = 68 % of hours;
    the plan commits whole GPUs, and its cost is the hour-by-hour bill."""
    plan = _plan(_inputs(kit, tmp_path, usage, [0] * HOURS))
    (cud,) = plan.document.savings_plans
    assert cud.gpus == gpus and cud.usd_per_hour == pytest.approx(gpus * CUD_1G)
    expected = sum(gpus * CUD_1G + max(0, u - gpus) * OD_1G for u in usage)
    assert plan.document.costs.total_usd == pytest.approx(expected)
    levels = [g for g in range(0, 8) if np.mean(np.array(usage) >= g) >= CUD_1G / OD_1G]
    assert gpus == max(levels)


def test_verify_passes_and_refuses_a_fraction_of_a_gpu(kit, tmp_path: Path) -> None:
    inputs = _inputs(kit, tmp_path, [4] * HOURS, [0] * HOURS)
    plan = _plan(inputs)
    assert verify(inputs, plan).ok
    doc = plan.document.model_copy(deep=True)
    doc.savings_plans[0] = doc.savings_plans[0].model_copy(update={"usd_per_hour": 4.5 * CUD_1G})
    assert "savings-plan-purchase" in verify(inputs, Plan(doc, plan.allocations)).kinds
    assert inputs.scenario.purchase.savings_plans == ["gcp-resource"]


def test_without_it_gcp_commitments_stay_per_machine_type(kit, tmp_path: Path) -> None:
    plan = _plan(_inputs(kit, tmp_path, [4] * HOURS, [0] * HOURS, buy=False))
    assert plan.document.savings_plans == []
    assert sum(c.nodes for c in plan.document.commitments) == 4
    assert plan.document.costs.total_usd == pytest.approx(4 * CUD_1G * HOURS)


def test_the_daemon_holds_the_gpus_a_previous_plan_committed(kit, tmp_path: Path) -> None:
    """Re-planned after its start, the committed GPUs are held (scenario ``savings_plans:`` of kind
    gcp-resource, family the GPU model): the same 4 GPUs, nothing more bought, the same cost."""
    from datetime import timedelta

    from planner.operations.daemon.config import DaemonConfig
    from planner.operations.daemon.daemon import plan_scenario

    first = _plan(_inputs(kit, tmp_path, [4] * HOURS, [0] * HOURS))
    (bought,) = first.document.savings_plans
    config = DaemonConfig(scenario=Path("s.yaml"), plan_time_limit=30, base=tmp_path)
    again = Plan.read(plan_scenario(config, first, bought.start + timedelta(hours=1), {}))
    (held,) = again.document.savings_plans
    assert held.existing and (held.kind, held.gpus, held.scope) == ("committed-use", 4, bought.scope)
    assert again.document.costs.total_usd == pytest.approx(first.document.costs.total_usd)
