"""The optimizer against the load-duration-curve closed form for commitments.

One offering (8 GPUs per node) and one inference service with ``gpus_per_replica: 8``, so one replica
is one node and demand D_t is in nodes. With a commitment of R nodes for the H-hour horizon the cost is

    f(R) = R * c_1y * H + sum_t max(0, D_t - R) * c_od

and the optimal R* is the largest R with #{t : D_t >= R} * c_od >= c_1y * H (the R-th committed node
pays for itself when it would be used in enough hours). The expected values here are computed by
enumeration, independently of the planner, and the two forms are checked against each other.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from models.catalog import Catalog
from models.scenario import parse
from planner.planning.optimize import optimize

H = 168  # one week, hourly periods
C_OD = 10.0
C_1Y = 6.0
C_3Y = 4.0
OFFERING = "aws:us-east-1:p5.48xlarge"


def _levels(counts: dict[int, int], seed: int) -> list[int]:
    """A demand series of H hours holding level ``k`` in ``counts[k]`` hours, in a shuffled order."""
    series = [level for level, n in counts.items() for _ in range(n)]
    assert len(series) == H, f"the counts must cover {H} hours, got {len(series)}"
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.permutation(series)]


# hours above each level: >=1: 168, >=3: 150, >=5: 130, >=6: 112, >=7: 70, >=9: 30
# with 1y only: commit while #{D >= R} >= c_1y H / c_od = 100.8 -> R* = 6
# with 3y at 4 $/h: commit while #{D >= R} >= 67.2 -> R3* = 8 (#{D >= 8} = 70, #{D >= 9} = 30)
STEADY = _levels({1: 10, 2: 8, 4: 20, 5: 18, 6: 42, 8: 40, 10: 30}, seed=7)
# mostly idle with rare spikes: #{D >= 1} = 40 < 100.8, so commitment never pays
SPIKY = _levels({0: 128, 1: 10, 3: 10, 8: 12, 12: 8}, seed=11)


def f_1y(demand: list[int], r: int) -> float:
    return r * C_1Y * H + sum(max(0, d - r) for d in demand) * C_OD


def f_1y_3y(demand: list[int], r1: int, r3: int) -> float:
    return (r1 * C_1Y + r3 * C_3Y) * H + sum(max(0, d - r1 - r3) for d in demand) * C_OD


def unique_argmin(costs: dict) -> tuple:
    """The argmin of ``costs``; fails if the minimum is not unique (by a clear margin)."""
    ordered = sorted(costs.items(), key=lambda kv: kv[1])
    (best, best_cost), (_, runner_up) = ordered[0], ordered[1]
    assert runner_up - best_cost > 1e-3 * max(1.0, best_cost), "test data must have a unique optimum"
    return best


def _plan(tmp_path: Path, kit, demand: list[int], terms: list[str], **prices: float):
    kit.write_catalog_csv(tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=C_OD, **prices)])
    kit.write_demand_csv(tmp_path / "demand.csv", demand)
    data = kit.scenario_dict(
        hours=H,
        terms=terms,
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
    scenario = parse(data, tmp_path / "scenario.yaml")
    catalog = Catalog.load(tmp_path / "catalog.csv")
    return optimize(scenario, catalog, tmp_path, kit.exact_settings())


def _committed(plan, term: str) -> int:
    commitments = plan.document.commitments
    return sum(c.nodes for c in commitments if c.term == term and c.offering == OFFERING)


def test_closed_form_forms_agree() -> None:
    """The threshold rule and the enumeration pick the same R* (guards the test's own arithmetic)."""
    for demand in (STEADY, SPIKY):
        enumerated = unique_argmin({r: f_1y(demand, r) for r in range(max(demand) + 2)})
        threshold = max(
            (r for r in range(max(demand) + 2) if sum(d >= r for d in demand) * C_OD >= C_1Y * H), default=0
        )
        assert enumerated == threshold
    assert unique_argmin({r: f_1y(STEADY, r) for r in range(12)}) == 6
    assert unique_argmin({r: f_1y(SPIKY, r) for r in range(14)}) == 0


def test_1y_commitment_matches_load_duration_curve(tmp_path: Path, kit) -> None:
    r_star = unique_argmin({r: f_1y(STEADY, r) for r in range(max(STEADY) + 2)})
    plan = _plan(tmp_path, kit, STEADY, ["1y"], reserved_1y_usd_h=C_1Y)

    assert plan.document.unserved == []
    assert plan.document.solver.status == "optimal"
    assert _committed(plan, "1y") == r_star == 6
    assert [c.term for c in plan.document.commitments] == ["1y"]
    assert plan.document.costs.total_usd == pytest.approx(f_1y(STEADY, r_star), rel=1e-6)
    # the split by tier follows from R*: commitments for the horizon, the rest on demand
    by_tier = plan.document.costs.by_tier
    assert by_tier["reserved_1y"] == pytest.approx(r_star * C_1Y * H, rel=1e-6)
    assert by_tier["on_demand"] == pytest.approx(sum(max(0, d - r_star) for d in STEADY) * C_OD, rel=1e-6)
    assert by_tier["spot"] == 0.0
    assert by_tier["reserved_3y"] == 0.0


def test_1y_and_3y_commitments_match_enumeration(tmp_path: Path, kit) -> None:
    top = max(STEADY) + 2
    costs = {(r1, r3): f_1y_3y(STEADY, r1, r3) for r1 in range(top) for r3 in range(top)}
    r1_star, r3_star = unique_argmin(costs)
    assert (r1_star, r3_star) == (0, 8)  # 3y is cheaper per hour, so it takes the whole base
    plan = _plan(tmp_path, kit, STEADY, ["1y", "3y"], reserved_1y_usd_h=C_1Y, reserved_3y_usd_h=C_3Y)

    assert plan.document.unserved == []
    assert _committed(plan, "1y") == r1_star
    assert _committed(plan, "3y") == r3_star
    assert plan.document.costs.total_usd == pytest.approx(costs[(r1_star, r3_star)], rel=1e-6)
    commitment = next(c for c in plan.document.commitments if c.term == "3y")
    assert commitment.cost_in_horizon_usd == pytest.approx(r3_star * C_3Y * H, rel=1e-9)


def test_1y_offered_but_not_allowed_by_scenario_buys_nothing(tmp_path: Path, kit) -> None:
    """``purchase.terms: []`` keeps the planner off commitments even where the catalog offers them."""
    plan = _plan(tmp_path, kit, STEADY, [], reserved_1y_usd_h=C_1Y)
    assert plan.document.commitments == []
    assert plan.document.costs.total_usd == pytest.approx(f_1y(STEADY, 0), rel=1e-6)


def test_spiky_load_never_commits(tmp_path: Path, kit) -> None:
    assert unique_argmin({r: f_1y(SPIKY, r) for r in range(max(SPIKY) + 2)}) == 0
    plan = _plan(tmp_path, kit, SPIKY, ["1y"], reserved_1y_usd_h=C_1Y)

    assert plan.document.commitments == []
    assert plan.document.unserved == []
    assert plan.document.costs.total_usd == pytest.approx(sum(SPIKY) * C_OD, rel=1e-6)
    assert set(plan.allocations["tier"]) == {"on_demand"}


@pytest.mark.parametrize("demand", [STEADY, SPIKY], ids=["steady", "spiky"])
def test_all_on_demand_baseline(tmp_path: Path, kit, demand: list[int]) -> None:
    plan = _plan(tmp_path, kit, demand, ["1y"], reserved_1y_usd_h=C_1Y)
    expected = sum(demand) * C_OD
    assert plan.document.baselines.all_on_demand_usd == pytest.approx(expected, rel=1e-9)
    # the optimum never costs more than the all-on-demand reference
    assert plan.document.costs.total_usd <= expected + 1e-6


def test_allocations_cover_the_demand_every_hour(tmp_path: Path, kit) -> None:
    plan = _plan(tmp_path, kit, STEADY, ["1y"], reserved_1y_usd_h=C_1Y)
    nodes = plan.allocations.groupby("period")["nodes"].sum().reindex(range(H), fill_value=0.0)
    reserved = (
        plan.allocations[plan.allocations["tier"] == "reserved_1y"]
        .groupby("period")["nodes"]
        .sum()
        .reindex(range(H), fill_value=0.0)
    )
    for t, d in enumerate(STEADY):
        assert nodes[t] >= d - 1e-9, f"hour {t}: {nodes[t]} nodes for {d} replicas"
        assert reserved[t] <= 6 + 1e-9
    # in hours where demand exceeds R*, the on-demand part is exactly the excess (whole nodes)
    od = plan.allocations[plan.allocations["tier"] == "on_demand"].groupby("period")["nodes"].sum()
    for t, d in enumerate(STEADY):
        assert math.isclose(float(od.get(t, 0.0)), max(0, d - 6), abs_tol=1e-9)


def test_two_services_share_one_on_demand_node(tmp_path: Path, kit) -> None:
    """j needs 4 GPUs (H200 only), i needs 1 GPU (H100 or H200): one 8-GPU H200 node holds both.

    The model lets services share a held node (XO continuous, NO whole per offering), so the optimum
    is one H200 node every hour: 10 $/h. Two nodes (H200 for j, the cheaper H100 for i) cost 19.99 $/h.
    """
    kit.write_catalog_csv(
        tmp_path / "catalog.csv",
        [
            kit.offering_row(
                "aws", "us-east-1", "h200.8x", gpu_model="H200", gpu_memory_gb=141, on_demand_usd_h=10.0
            ),
            kit.offering_row("gcp", "us-central1", "h100.8x", gpu_model="H100", on_demand_usd_h=9.99),
        ],
    )
    data = kit.scenario_dict(
        hours=24,
        inference=[
            {"name": "j", "team": "t", "gpus_per_replica": 1, "gpu_models": ["H200"],
             "replicas": {"profile": "flat", "base": 4}},
            {"name": "i", "team": "t", "gpus_per_replica": 1, "gpu_models": ["H100", "H200"],
             "replicas": {"profile": "flat", "base": 1}},
        ],
    )  # fmt: skip
    scenario = parse(data, tmp_path / "scenario.yaml")
    plan = optimize(scenario, Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings())
    assert plan.document.unserved == []
    assert plan.document.costs.total_usd == pytest.approx(10.0 * 24, rel=1e-6)
    assert set(plan.allocations["offering"]) == {"aws:us-east-1:h200.8x"}


def _capped_catalog(kit, with_open_offering: bool) -> list[dict]:
    capped = kit.offering_row(
        "aws", "us-east-1", "capped.1x", gpus_per_node=1, on_demand_usd_h=1.0,
        reserved_1y_usd_h=0.6, reserved_3y_usd_h=0.4, max_nodes=1,
    )  # fmt: skip
    open_ = kit.offering_row("aws", "us-east-1", "open.1x", gpus_per_node=1, on_demand_usd_h=1.0)
    return [open_, capped] if with_open_offering else [capped]


@pytest.mark.parametrize("case", ["demand", "guarantee"])
def test_commitments_respect_max_nodes(tmp_path: Path, kit, case: str) -> None:
    """An offering with max_nodes 1 that sells 1y and 3y: at most 1 node may be committed on it."""
    demand = 2 if case == "demand" else 0
    kit.write_catalog_csv(tmp_path / "catalog.csv", _capped_catalog(kit, with_open_offering=case == "demand"))
    data = kit.scenario_dict(
        hours=24,
        terms=["1y", "3y"],
        teams=[{"name": "t", "guaranteed_gpus": 2 if case == "guarantee" else 0}],
        inference=[
            {"name": "svc", "team": "t", "gpus_per_replica": 1, "gpu_models": ["H100"],
             "replicas": {"profile": "flat", "base": demand}},
        ],
    )  # fmt: skip
    scenario = parse(data, tmp_path / "scenario.yaml")
    plan = optimize(scenario, Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings())
    committed = sum(c.nodes for c in plan.document.commitments if c.offering == "aws:us-east-1:capped.1x")
    assert committed <= 1
    per_period = plan.allocations.groupby(["period", "offering"])["nodes"].sum()
    assert per_period.get((0, "aws:us-east-1:capped.1x"), 0.0) <= 1 + 1e-9
    if case == "demand":
        # 1 node on 3y (0.4 $/h) + 1 on demand (1 $/h), every hour
        assert plan.document.costs.total_usd == pytest.approx((0.4 + 1.0) * 24, rel=1e-6)
