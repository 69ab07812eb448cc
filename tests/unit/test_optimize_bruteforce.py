"""The optimizer against an exhaustive search on small training-only scenarios.

Two offerings with ``max_nodes`` limits, 2-3 training jobs that compete for them, hourly periods, no
commitments (``purchase: {terms: []}``). The brute force enumerates every (offering, tier, start hour)
per job: a run holds ``nodes`` nodes for ``ceil(hours)`` periods on demand or ``ceil(expected wall
hours)`` on spot (``models.preemption.spot_overhead`` with the job's checkpoint and the offering's
interruption rate); an option costs ``nodes * price * held periods * period_hours``. A combination is
feasible when, in every hour and on every offering, the nodes of the runs active then fit ``max_nodes``
and the spot GPU-hours stay within ``max_spot_share`` of all GPU-hours (``nodes * gpus_per_node *
hours``). The cheapest feasible combination is the expected total.

The search is exhaustive but ordered: (offering, tier) choices are tried in increasing cost (start hours
do not change the cost), and the first whose start hours can be chosen without exceeding capacity wins.

A last group adds an inference service sharing a 1y commitment with one run, enumerating the
commitment, the run's tier and start, and whole on-demand nodes per hour.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from models.catalog import Catalog
from models.preemption import spot_overhead
from models.scenario import parse
from planner.planning.optimize import optimize

HOURS = 60
START = "2027-01-04T00:00:00Z"
A = "aws:us-east-1:a8.fabric"
B = "gcp:us-central1:b8.fabric"


def _catalog_rows(kit, a_max: int = 2, b_max: int = 3) -> list[dict[str, Any]]:
    return [
        kit.offering_row(
            "aws", "us-east-1", "a8.fabric", fabric="efa", on_demand_usd_h=10.0, spot_usd_h=4.0,
            spot_interruptions_per_hour=0.01, max_nodes=a_max,
        ),
        kit.offering_row(
            "gcp", "us-central1", "b8.fabric", fabric="tcpxo", on_demand_usd_h=13.0, spot_usd_h=6.0,
            spot_interruptions_per_hour=0.02, max_nodes=b_max,
        ),
    ]  # fmt: skip


def _later(hours: float) -> str:
    day, hour = divmod(int(hours), 24)
    return f"2027-01-{4 + day:02d}T{hour:02d}:00:00Z"


def _job(
    name: str,
    nodes: int,
    hours: float,
    *,
    preemptible: bool = False,
    earliest: int | None = None,
    deadline: int | None = None,
    checkpoint: tuple[float, float] = (3.0, 10.0),
) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": name,
        "team": "t",
        "nodes": nodes,
        "gpus_per_node": 8,
        "gpu_models": ["H100"],
        "hours": hours,
        "preemptible": preemptible,
        "checkpoint": {"write_minutes": checkpoint[0], "restart_minutes": checkpoint[1]},
    }
    if earliest is not None:
        job["earliest_start"] = _later(earliest)
    if deadline is not None:
        job["deadline"] = _later(deadline)
    return job


# ---- the brute force ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    offering: str
    tier: str
    periods: int
    cost: float
    first: int  # earliest start period
    last: int  # latest start period


def _choices(job: dict[str, Any], offerings: list[dict[str, Any]]) -> list[Choice]:
    """Every (offering, tier) a job may use, with its duration, cost and start range (hourly periods)."""
    first = 0 if "earliest_start" not in job else _hours_from_start(job["earliest_start"])
    end = HOURS if "deadline" not in job else _hours_from_start(job["deadline"])
    result = []
    for row in offerings:
        oid = f"{row['cloud']}:{row['region']}:{row['instance_type']}"
        if row["gpus_per_node"] != job["gpus_per_node"]:
            continue
        if job["nodes"] > 1 and row["fabric"] == "none":
            continue
        if row.get("max_nodes") is not None and row["max_nodes"] < job["nodes"]:
            continue
        tiers = [("on_demand", row["on_demand_usd_h"], math.ceil(job["hours"] - 1e-9))]
        if job["preemptible"] and row.get("spot_usd_h") is not None:
            wall = spot_overhead(
                work_hours=job["hours"],
                nodes=job["nodes"],
                per_node_rate_per_hour=row["spot_interruptions_per_hour"],
                write_minutes=job["checkpoint"]["write_minutes"],
                restart_minutes=job["checkpoint"]["restart_minutes"],
            ).expected_wall_hours
            tiers.append(("spot", row["spot_usd_h"], math.ceil(wall - 1e-9)))
        for tier, price, periods in tiers:
            if end - periods >= first:
                cost = job["nodes"] * price * periods * 1
                result.append(Choice(oid, tier, periods, cost, first, end - periods))
    return result


def _hours_from_start(stamp: str) -> int:
    day, hour = int(stamp[8:10]) - 4, int(stamp[11:13])
    return day * 24 + hour


def _starts_fit(jobs: list[dict[str, Any]], combo: tuple[Choice, ...], limits: dict[str, int | None]) -> bool:
    """Is there a start hour per job such that every offering stays within max_nodes in every hour?"""
    used = {oid: [0] * HOURS for oid in limits}

    def place(k: int) -> bool:
        if k == len(combo):
            return True
        choice, nodes = combo[k], jobs[k]["nodes"]
        cap = limits[choice.offering]
        for start in range(choice.first, choice.last + 1):
            span = range(start, start + choice.periods)
            if cap is not None and any(used[choice.offering][h] + nodes > cap for h in span):
                continue
            for h in span:
                used[choice.offering][h] += nodes
            if place(k + 1):
                return True
            for h in span:
                used[choice.offering][h] -= nodes
        return False

    return place(0)


def brute_force(
    jobs: list[dict[str, Any]], offerings: list[dict[str, Any]], max_spot_share: float
) -> tuple[float, tuple[Choice, ...]]:
    limits = {f"{r['cloud']}:{r['region']}:{r['instance_type']}": r.get("max_nodes") for r in offerings}
    per_job = [_choices(job, offerings) for job in jobs]
    gpu_hours = [job["nodes"] * job["gpus_per_node"] * job["hours"] for job in jobs]
    total_gpu_hours = sum(gpu_hours)
    combos = sorted(itertools.product(*per_job), key=lambda combo: sum(c.cost for c in combo))
    for combo in combos:
        spot = sum(g for g, c in zip(gpu_hours, combo, strict=True) if c.tier == "spot")
        if spot > max_spot_share * total_gpu_hours + 1e-9:
            continue
        if _starts_fit(jobs, combo, limits):
            return sum(c.cost for c in combo), combo
    raise AssertionError("no feasible combination: the test scenario is wrong")


# ---- running the planner --------------------------------------------------------------------------


def _plan(tmp_path: Path, kit, jobs: list[dict[str, Any]], rows: list[dict[str, Any]], share: float = 1.0):
    kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    data = kit.scenario_dict(hours=HOURS, start=START, terms=[], max_spot_share=share, training=jobs)
    scenario = parse(data, tmp_path / "scenario.yaml")
    return optimize(scenario, Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings())


def _check_plan(plan, jobs: list[dict[str, Any]], rows: list[dict[str, Any]], share: float) -> float:
    expected, _ = brute_force(jobs, rows, share)
    assert plan.document.unserved == []
    assert plan.document.commitments == []
    assert plan.document.solver.status == "optimal"
    assert plan.document.costs.total_usd == pytest.approx(expected, rel=1e-6)
    # the plan's own runs: capacity per hour and offering, windows, spot share, cost of each run
    limits = {f"{r['cloud']}:{r['region']}:{r['instance_type']}": r.get("max_nodes") for r in rows}
    by_name = {job["name"]: job for job in jobs}
    use: dict[tuple[str, int], int] = {}
    spot_gpu_hours = 0.0
    for run in plan.document.training:
        job = by_name[run.job]
        choices = [c for c in _choices(job, rows) if c.offering == run.offering and c.tier == run.tier]
        assert len(choices) == 1, run
        choice = choices[0]
        assert run.periods == choice.periods
        assert choice.first <= run.start_period <= choice.last
        assert run.cost_usd == pytest.approx(choice.cost, rel=1e-9)
        for h in range(run.start_period, run.start_period + run.periods):
            use[(run.offering, h)] = use.get((run.offering, h), 0) + run.nodes
        if run.tier == "spot":
            spot_gpu_hours += job["nodes"] * job["gpus_per_node"] * job["hours"]
    assert sorted(r.job for r in plan.document.training) == sorted(by_name)
    for (oid, hour), nodes in use.items():
        assert limits[oid] is None or nodes <= limits[oid], f"{oid} holds {nodes} nodes in hour {hour}"
    total_gpu_hours = sum(j["nodes"] * j["gpus_per_node"] * j["hours"] for j in jobs)
    assert spot_gpu_hours <= share * total_gpu_hours + 1e-6
    return expected


def test_capacity_forces_a_job_to_wait(tmp_path: Path, kit) -> None:
    """Both 2-node jobs are cheapest on A (max 2 nodes): they must run one after the other there."""
    rows = _catalog_rows(kit, a_max=2, b_max=3)
    jobs = [_job("j1", 2, 10, deadline=40), _job("j2", 2, 8, deadline=30)]
    plan = _plan(tmp_path, kit, jobs, rows)
    expected = _check_plan(plan, jobs, rows, 1.0)
    assert expected == 2 * 10.0 * 10 + 2 * 10.0 * 8  # both on A on demand
    runs = sorted(plan.document.training, key=lambda r: r.start_period)
    assert [r.offering for r in runs] == [A, A]
    first, second = runs
    assert second.start_period >= first.start_period + first.periods, "runs overlap on A"
    # the allocations say the same: never more than 2 nodes on A in any hour
    on_a = plan.allocations[plan.allocations["offering"] == A].groupby("period")["nodes"].sum()
    assert on_a.max() <= 2 + 1e-9


def test_capacity_forces_a_job_onto_the_dearer_offering(tmp_path: Path, kit) -> None:
    """Deadlines too close for both runs on A in turn: the cheaper move sends j2 (not j1) to B."""
    rows = _catalog_rows(kit, a_max=2, b_max=3)
    jobs = [_job("j1", 2, 10, deadline=12), _job("j2", 2, 8, deadline=12)]
    plan = _plan(tmp_path, kit, jobs, rows)
    expected = _check_plan(plan, jobs, rows, 1.0)
    assert expected == 2 * 10.0 * 10 + 2 * 13.0 * 8
    assert {r.job: r.offering for r in plan.document.training} == {"j1": A, "j2": B}


def test_windows_and_capacity_with_three_jobs(tmp_path: Path, kit) -> None:
    """Three jobs with earliest starts and deadlines sharing A (max 2) and B (max 2): not all fit on A."""
    rows = _catalog_rows(kit, a_max=2, b_max=2)
    jobs = [
        _job("j1", 2, 12, earliest=4, deadline=30),
        _job("j2", 2, 9.5, earliest=0, deadline=20),  # 10 whole periods
        _job("j3", 1, 20, earliest=10, deadline=36),
    ]
    plan = _plan(tmp_path, kit, jobs, rows)
    expected = _check_plan(plan, jobs, rows, 1.0)
    cheapest_alone = sum(min(c.cost for c in _choices(job, rows)) for job in jobs)
    assert expected > cheapest_alone, "capacity must bind in this case"


def test_spot_share_forbids_putting_everything_on_spot(tmp_path: Path, kit) -> None:
    """All three jobs could run on spot, but max_spot_share 0.5 leaves room for only part of them."""
    rows = _catalog_rows(kit, a_max=4, b_max=4)
    jobs = [
        _job("big", 2, 10, preemptible=True),  # 160 GPU-hours
        _job("mid", 1, 14, preemptible=True),  # 112 GPU-hours
        _job("small", 1, 6, preemptible=True),  # 48 GPU-hours
    ]
    share = 0.5  # 160 of 320 GPU-hours
    unrestricted, combo = brute_force(jobs, rows, 1.0)
    assert all(c.tier == "spot" for c in combo), "without the share limit everything would be on spot"
    plan = _plan(tmp_path, kit, jobs, rows, share)
    expected = _check_plan(plan, jobs, rows, share)
    assert expected > unrestricted
    tiers = {r.job: r.tier for r in plan.document.training}
    assert "on_demand" in tiers.values() and "spot" in tiers.values()


def test_spot_and_capacity_together(tmp_path: Path, kit) -> None:
    """Spot runs hold nodes longer (preemption overhead) and count against max_nodes like any tier."""
    rows = _catalog_rows(kit, a_max=2, b_max=2)
    jobs = [
        _job("j1", 2, 16, preemptible=True, deadline=30, checkpoint=(6.0, 20.0)),
        _job("j2", 2, 12, preemptible=True, deadline=30),
        _job("j3", 1, 8, preemptible=False, earliest=6, deadline=24),
    ]
    share = 0.7  # 358.4 of 512 GPU-hours: j1 (256) and j2 (192) cannot both be on spot
    plan = _plan(tmp_path, kit, jobs, rows, share)
    expected = _check_plan(plan, jobs, rows, share)
    cheapest_alone = sum(min(c.cost for c in _choices(job, rows)) for job in jobs)
    assert expected > cheapest_alone
    spot_runs = [r for r in plan.document.training if r.tier == "spot"]
    for run in spot_runs:
        assert run.expected_overhead > 0
        work = next(j["hours"] for j in jobs if j["name"] == run.job)
        assert run.periods >= math.ceil(work)


def test_brute_force_helpers_agree_with_the_timestamps() -> None:
    """The test's own time arithmetic: hour offsets from the horizon start round-trip."""
    for hours in (0, 5, 23, 24, 30, 47, 59):
        assert _hours_from_start(_later(hours)) == hours


# ---- inference and training sharing a commitment ---------------------------------------------------


def brute_force_shared_pool(
    demand: list[int], q: int, job_nodes: int, job_hours: int, c_od: float, c_spot: float, c_1y: float
) -> tuple[float, tuple]:
    """One unlimited offering, one inference service (q replicas per node), one training run, 1y terms.

    Enumerates the commitment R, the run's tier (committed pool, on demand, spot with no interruptions)
    and its start; each hour, replicas go on committed nodes the run leaves free (a committed node may be
    partly used), the rest on whole on-demand nodes.
    """
    hours = len(demand)
    best = (math.inf, ())
    for r in range(0, max(demand) // q + job_nodes + 2):
        for tier in ("pool", "on_demand", "spot"):
            if tier == "pool" and r < job_nodes:
                continue
            run_cost = {"pool": 0.0, "on_demand": c_od, "spot": c_spot}[tier] * job_nodes * job_hours
            for start in range(hours - job_hours + 1):
                cost = r * c_1y * hours + run_cost
                for t, d in enumerate(demand):
                    busy = job_nodes if tier == "pool" and start <= t < start + job_hours else 0
                    pooled = min(d, (r - busy) * q)
                    cost += math.ceil((d - pooled) / q) * c_od
                if cost < best[0] - 1e-9:
                    best = (cost, (r, tier, start))
    return best


@pytest.mark.parametrize(
    "demand",
    [[1] * 48, [1] * 12 + [3] * 12 + [2] * 12 + [0] * 12],
    ids=["flat-one-replica", "stepped"],
)
def test_inference_and_training_sharing_a_commitment(tmp_path: Path, kit, demand: list[int]) -> None:
    """Half-used nodes (2 replicas per node) make the fractional relaxation misleading: a run on the
    committed pool looks cheap when inference may use half an on-demand node, but with whole nodes
    the run is cheaper on spot. The plan must be the whole-node optimum."""
    c_od, c_spot, c_1y = 10.0, 6.0, 5.0
    expected, decision = brute_force_shared_pool(demand, 2, 1, 24, c_od, c_spot, c_1y)
    kit.write_catalog_csv(
        tmp_path / "catalog.csv",
        [
            kit.offering_row(
                on_demand_usd_h=c_od, spot_usd_h=c_spot, reserved_1y_usd_h=c_1y, spot_interruptions_per_hour=0
            )
        ],
    )
    kit.write_demand_csv(tmp_path / "demand.csv", demand)
    data = kit.scenario_dict(
        hours=len(demand),
        start=START,
        terms=["1y"],
        inference=[
            {
                "name": "svc",
                "team": "t",
                "gpus_per_replica": 4,  # 2 replicas per 8-GPU node
                "gpu_models": ["H100"],
                "latency_critical": True,
                "replicas": {"csv": "demand.csv"},
            }
        ],
        training=[
            {
                "name": "run",
                "team": "t",
                "nodes": 1,
                "gpus_per_node": 8,
                "gpu_models": ["H100"],
                "hours": 24,
                "preemptible": True,
                "checkpoint": {"write_minutes": 1, "restart_minutes": 5},
            }
        ],
    )
    scenario = parse(data, tmp_path / "scenario.yaml")
    plan = optimize(scenario, Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings())
    assert plan.document.unserved == []
    assert plan.document.costs.total_usd == pytest.approx(expected, rel=1e-6), f"optimum: {decision}"
    assert plan.document.solver.bound_usd <= plan.document.costs.total_usd + 1e-6
