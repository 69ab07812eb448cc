"""The plan's MIG section and mig-config.yaml: replicas of several services packed per node pool."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from models.catalog import Catalog
from models.inputs import Inputs
from models.mig import layout_for, profile_named
from models.plan import Plan
from models.scenario import parse
from planner.planning.optimize import optimize
from planner.verify import verify, verify_directory

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
    kit.write_scenario_yaml(tmp_path / "scenario.yaml", data)  # for gpuplan verify
    result = optimize(parse(data), Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings())
    out = tmp_path / "plan"
    out.mkdir()
    result.write(out)
    return result, out


def test_a_lean_plan_is_the_same_fleet_and_cost_without_the_schedule_and_charges(plan, kit) -> None:
    """``SolveSettings.lean`` (the futures' own plans): the same allocations, commitments and cost as the
    full plan, with no MIG config schedule and the teams not charged (their costs left at zero)."""
    full, out = plan
    scenario = parse(yaml.safe_load((out.parent / "scenario.yaml").read_text()))
    catalog = Catalog.load(out.parent / "catalog.csv")
    lean = optimize(scenario, catalog, out.parent, kit.exact_settings(lean=True))
    pd.testing.assert_frame_equal(lean.allocations, full.allocations)
    assert lean.document.solver.objective_usd == pytest.approx(full.document.solver.objective_usd, abs=1e-6)
    assert lean.document.commitments == full.document.commitments
    assert full.document.mig is not None and lean.document.mig is None
    assert full.document.teams["t"].cost_usd > 0 and lean.document.teams["t"].cost_usd == 0.0


def test_services_share_gpus_and_the_count_is_bounded(plan) -> None:
    result, _ = plan
    (pool,) = result.document.mig.pools
    assert pool.offering == POOL
    demand = pool.peak_demand
    assert demand == {"1g.10gb": 14, "1g.20gb": 5, "3g.40gb": 3}  # the busiest hour: 9 + 5 small replicas
    # independent bounds: memory slices (8 per GPU) from below, one homogeneous layout per service above
    slices = sum(n * profile_named("H100", name).memory_slices for name, n in demand.items())
    assert math.ceil(slices / 8) <= pool.gpus_packed <= pool.gpus_per_service_layouts
    assert pool.gpus_per_service_layouts == math.ceil(14 / 7) + math.ceil(5 / 4) + math.ceil(3 / 2)
    assert pool.gpus_whole_per_replica == 22
    saved = result.document.mig.gpus_saved_vs_whole_at_peak
    assert saved == 22 - pool.gpus_packed


def _slices(out: Path, gpus_per_node: int) -> dict[str, dict[str, int]]:
    """mig-config.yaml read independently: config name -> instances per profile on one node, each entry a
    legal layout and every GPU of the node listed once (``all-disabled`` is every GPU MIG off)."""
    config = yaml.safe_load((out / "mig-config.yaml").read_text())
    assert config["version"] == "v1"
    result: dict[str, dict[str, int]] = {}
    for name, entries in config["mig-configs"].items():
        devices = [
            d for e in entries for d in (range(gpus_per_node) if e["devices"] == "all" else e["devices"])
        ]
        assert sorted(devices) == list(range(gpus_per_node)), name  # each GPU of the node exactly once
        per_node: dict[str, int] = {}
        for entry in entries:
            if entry["mig-enabled"]:
                assert layout_for("H100", entry["mig-devices"]) is not None  # a legal MIG layout
                for profile, n in entry["mig-devices"].items():
                    per_node[profile] = per_node.get(profile, 0) + n * len(entry["devices"])
        result[name] = per_node
    assert config["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    return result


def _asked(alloc: pd.DataFrame, profiles: dict[str, str]) -> dict[int, dict[str, int]]:
    """Period -> MIG replicas per profile from allocations.csv (sums rounded up, as the plan's may be
    fractional until the optimizer writes whole replicas)."""
    rows = alloc[alloc["workload"].isin(list(profiles))]
    per = rows.assign(profile=rows["workload"].map(profiles)).groupby(["period", "profile"])["replicas"].sum()
    asked: dict[int, dict[str, int]] = {}
    for (period, profile), n in per.items():
        if math.ceil(n - 1e-6) > 0:
            asked.setdefault(int(period), {})[str(profile)] = math.ceil(n - 1e-6)
    return asked


def _assert_every_period_is_held(result, out: Path, profiles: dict[str, str], gpus_per_node: int) -> None:
    """Each period's MIG replicas fit the configs scheduled then: instances of the scheduled nodes (from
    mig-config.yaml's layout counts and plan.json's schedule) >= replicas per profile."""
    (pool,) = result.document.mig.pools
    per_node = _slices(out, gpus_per_node)
    assert set(per_node) == {c.name for c in pool.configs} | {"all-disabled"}  # one entry per config
    for period, asked in _asked(result.allocations, profiles).items():
        held: dict[str, int] = {}
        for c in pool.configs:
            nodes = sum(e.nodes for e in c.schedule for a, b in e.periods if a <= period < b)
            for profile, n in per_node[c.name].items():
                held[profile] = held.get(profile, 0) + n * nodes
        assert all(held.get(p, 0) >= n for p, n in asked.items()), (period, asked, held)


PROFILES = {"small": "1g.10gb", "mid": "1g.20gb", "big": "3g.40gb"}


def test_every_period_is_held_by_the_configs_scheduled_then(plan) -> None:
    """small varies 9..14 while mid and big are flat: every hour's replicas are within the peak's, on the
    same nodes, so the one config of the peak covers all 48 hours."""
    result, out = plan
    _assert_every_period_is_held(result, out, PROFILES, 8)
    (pool,) = result.document.mig.pools
    asked = _asked(result.allocations, PROFILES)
    peak = asked[pool.peak_period]
    assert all(n <= peak.get(p, 0) for hour in asked.values() for p, n in hour.items())
    (config,) = pool.configs  # dominated hours need no other config
    assert config.name == "aws-us-east-1-p5.48xlarge"  # one config: the bare pool name
    assert [(e.periods, e.nodes, e.spot_nodes) for e in config.schedule] == [([(0, H)], 1, 0)]
    assert sum(g.gpus for g in config.node_layout) == 8 and config.node_layout[-1].mig_devices is None


def test_verify_checks_the_schedule_against_the_whole_gpu_replicas(plan, tmp_path) -> None:
    """The plan passes gpuplan verify; scheduling its config on a second node leaves no MIG-off node for
    the 8-GPU replica of ``whole`` (within the nodes held, so only that is wrong)."""
    result, out = plan
    scenario = out.parent / "scenario.yaml"
    assert verify_directory(scenario, out).ok
    document = result.document.model_copy(deep=True)
    (pool,) = document.mig.pools
    (entry,) = pool.configs[0].schedule
    entry.nodes = 2
    broken = tmp_path / "broken"
    broken.mkdir()
    Plan(document, result.allocations).write(broken)
    report = verify_directory(scenario, broken)
    (group,) = report.kinds
    assert group.kind == "mig-config" and group.count == H
    assert "whole-GPU replicas (1 x 8 GPU(s)) do not fit" in group.examples[0].message


def _shifting_plan(tmp_path: Path, kit, gpus_per_node: int, tiny: int, wide: int):
    """Hours 0-11 serve only ``tiny`` 1g.10gb replicas, hours 12-23 only ``wide`` 3g.40gb ones."""
    kit.write_catalog_csv(
        tmp_path / "catalog.csv",
        [kit.offering_row(gpus_per_node=gpus_per_node, on_demand_usd_h=5.0 * gpus_per_node)],
    )
    kit.write_demand_csv(tmp_path / "tiny.csv", [tiny if h < 12 else 0 for h in range(24)])
    kit.write_demand_csv(tmp_path / "wide.csv", [0 if h < 12 else wide for h in range(24)])
    data = kit.scenario_dict(
        hours=24,
        inference=[
            {"name": "tiny", "team": "t", "gpu_memory_gb": 9, "gpu_models": ["H100"],
             "replicas": {"csv": "tiny.csv"}},  # 1g.10gb: 7 per GPU
            {"name": "wide", "team": "t", "gpu_memory_gb": 35, "gpu_models": ["H100"],
             "replicas": {"csv": "wide.csv"}},  # 3g.40gb: 2 per GPU
        ],
    )  # fmt: skip
    scenario = parse(data)
    result = optimize(scenario, Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings())
    out = tmp_path / "plan"
    out.mkdir()
    result.write(out)
    return result, out, Inputs(scenario, Catalog.load(tmp_path / "catalog.csv"), tmp_path)


@pytest.mark.parametrize(("gpus_per_node", "tiny", "wide"), [(1, 7, 2), (8, 35, 10)])
def test_a_mix_that_shifts_between_profiles_gets_a_config_per_mix(tmp_path, kit, gpus_per_node, tiny, wide):
    """The peak's config cannot hold the other half-day: 7 x 1g.10gb fill a GPU (7 per GPU) and leave no
    room for a 3g.40gb; on 8 GPUs, 35 x 1g.10gb + 10 x 3g.40gb take 35 + 40 = 75 memory slices, more than
    a node's 64. Each half-day needs one node (5 GPUs of 7 x 1g.10gb, or of 2 x 3g.40gb), so exactly two
    configs, each scheduled on one node for its half."""
    result, out, inputs = _shifting_plan(tmp_path, kit, gpus_per_node, tiny, wide)
    profiles = {"tiny": "1g.10gb", "wide": "3g.40gb"}
    _assert_every_period_is_held(result, out, profiles, gpus_per_node)
    asked = _asked(result.allocations, profiles)
    assert {frozenset(hour) for hour in asked.values()} == {frozenset({"1g.10gb"}), frozenset({"3g.40gb"})}
    slices = {"1g.10gb": profile_named("H100", "1g.10gb").memory_slices, "3g.40gb": 4}
    both = {p: max(hour.get(p, 0) for hour in asked.values()) for p in slices}
    assert sum(n * slices[p] for p, n in both.items()) > 8 * gpus_per_node  # no node holds both halves
    (pool,) = result.document.mig.pools
    first, second = pool.configs
    assert [first.name, second.name] == [f"aws-us-east-1-p5.48xlarge-{k}" for k in (1, 2)]  # by first use
    assert [(e.periods, e.nodes) for e in first.schedule] == [([(0, 12)], 1)]
    assert [(e.periods, e.nodes) for e in second.schedule] == [([(12, 24)], 1)]
    assert pool.nodes_in(3) == {first.name: 1} and pool.nodes_in(12) == {second.name: 1}
    # the independent checker agrees: no violation at all, MIG configs included
    findings = verify(inputs, Plan.read(out), directory=out)
    assert findings.ok, [(k.kind, k.examples[:2]) for k in findings.summary()]


def test_training_and_whole_gpu_services_are_not_sliced(plan) -> None:
    result, _ = plan
    alloc = result.allocations
    assert set(alloc.loc[alloc["kind"] == "training", "workload"]) == {"ft"}
    (pool,) = result.document.mig.pools
    assert set(pool.peak_demand) == {"1g.10gb", "1g.20gb", "3g.40gb"}  # the 8-GPU service is not sliced
    # the planned GPUs reported are the plan's own GPUs for the sliced services at that hour
    held = alloc[(alloc["period"] == pool.peak_period) & alloc["workload"].isin(["small", "mid", "big"])]
    assert isinstance(held, pd.DataFrame) and held["gpus"].sum() == pytest.approx(pool.gpus_planned)


def test_the_report_shows_the_layouts(plan) -> None:
    from planner.outputs.reports.plan import write_reports

    _, out = plan
    md, html = write_reports(out)
    text = md.read_text()
    assert "## MIG layouts" in text and "3g.40gb" in text
    assert 'id="mig"' in html.read_text()


def test_a_compute_share_picks_a_bigger_slice(tmp_path, kit) -> None:
    from planner.planning.problem.sets import build_sets

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


@pytest.mark.parametrize("gpus_per_node", [1, 2, 8])
def test_random_pools_every_hour_is_held_on_the_nodes_it_needs(gpus_per_node: int) -> None:
    """planner.planning.mig.schedule on random works (MIG replicas of three profiles, whole-GPU replicas of
    divisor sizes, spot and non-spot): each (group, period) gets ceil((whole GPUs + packed GPUs) / G) nodes,
    and on them the configs' instances (summed from the layouts here) cover its replicas, and its whole-GPU
    replicas, largest first, fit the MIG-off GPUs of those nodes and of the nodes without a config."""
    import random

    from planner.planning.mig.packing import pack
    from planner.planning.mig.schedule import Work, plan_pool

    g = gpus_per_node
    rng = random.Random(11 + g)
    sizes = [d for d in (1, 2, 4, 8) if g % d == 0]
    works = {}
    for period in range(60):
        for group in ("held", "spot"):
            mig = {p: rng.randint(0, 9) for p in ("1g.10gb", "2g.20gb", "3g.40gb") if rng.random() < 0.7}
            whole = {s: rng.randint(0, 2) for s in sizes if rng.random() < 0.4}
            mig = {p: n for p, n in mig.items() if n}
            whole = {s: n for s, n in whole.items() if n}
            if mig or whole:
                works[(group, period)] = Work(
                    tuple(sorted(mig.items())), tuple(sorted(whole.items(), reverse=True))
                )
    plan = plan_pool("H100", g, works)
    assert len(plan.configs) == len(set(plan.configs))
    for node in plan.configs:
        assert 0 < sum(n for _, n in node) <= g
        assert all(layout_for("H100", layout.counts) == layout for layout, _ in node)  # legal layouts
    for key, work in works.items():
        packed = pack("H100", dict(work.mig)).gpus if work.mig else 0
        assert plan.nodes[key] == math.ceil((work.whole_gpus + packed) / g)
        use = plan.use.get(key, {})
        assert sum(use.values()) <= plan.nodes[key]
        held: dict[str, int] = {}
        free = [g] * (plan.nodes[key] - sum(use.values()))
        for c, nodes in use.items():
            for layout, n in plan.configs[c]:
                for profile, k in layout.counts.items():
                    held[profile] = held.get(profile, 0) + k * n * nodes
            free += [g - sum(n for _, n in plan.configs[c])] * nodes
        assert all(held.get(p, 0) >= n for p, n in work.mig), (key, work, held)
        for size, count in work.whole:  # divisor sizes: largest first into any node with room is exact
            for _ in range(count):
                k = next(k for k, room in enumerate(free) if room >= size)
                free[k] -= size
