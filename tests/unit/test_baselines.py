"""The peers (``planner/planning/baselines.py``) against independent calculations on tiny scenarios.

Most cases use one 8-GPU H100 offering and ``gpus_per_replica: 8``, so one replica is one node and the
demand series *is* the usage in nodes; expected values are written out by hand or found by brute force.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.catalog import Catalog
from models.scenario import parse
from planner.planning.baselines import (
    FLEET_PEER,
    Usage,
    bill,
    compute_baselines,
    coverage_level,
    lookback_level,
    per_launch_usage,
)
from planner.planning.mig.packing import pack
from planner.planning.problem.sets import PlanningSets, build_sets

C_OD, C_1Y, C_3Y = 10.0, 6.0, 4.2
YEAR = 8760


def _node_service(name: str = "svc", team: str = "t", csv: str = "demand.csv") -> dict[str, Any]:
    return {
        "name": name,
        "team": team,
        "gpus_per_replica": 8,
        "gpu_models": ["H100"],
        "latency_critical": True,
        "replicas": {"csv": csv},
    }


def _sets(tmp_path: Path, kit, rows: list[dict[str, Any]], **scenario: Any) -> PlanningSets:
    kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    data = kit.scenario_dict(**scenario)
    return build_sets(
        parse(data, tmp_path / "scenario.yaml"), Catalog.load(tmp_path / "catalog.csv"), tmp_path
    )


def _one_offering(kit, **prices: float) -> list[dict[str, Any]]:
    values = {"reserved_1y_usd_h": C_1Y, "reserved_3y_usd_h": C_3Y, **prices}
    return [kit.offering_row(on_demand_usd_h=C_OD, **values)]


def _hand_cost(demand: np.ndarray, nodes: int, rate: float, hours: int) -> float:
    """Commit ``nodes`` at ``rate`` for ``hours``; every node-hour above them on demand."""
    return nodes * rate * hours + float(np.clip(demand - nodes, 0, None).sum()) * C_OD


def _brute_force_level(series: np.ndarray, commit: float) -> int:
    """Every integer level from 0 to the peak: the largest saving over ``series``, ties to the lower."""
    savings = {
        c: sum(min(int(u), c) for u in series) * C_OD - c * commit * len(series)
        for c in range(int(series.max()) + 1)
    }
    best = max(savings.values())
    return min(c for c, s in savings.items() if s >= best - 1e-9)


SERIES_CASES = [
    np.array([0, 0, 5, 5, 5, 1, 2, 9, 5, 3]),  # a busy middle
    np.array([4] * 20 + [12] * 3),  # a flat base with a short peak
    np.array([0] * 10 + [3]),  # mostly idle: committing never pays
    np.random.default_rng(3).integers(0, 15, 200),
]


@pytest.mark.parametrize("series", SERIES_CASES)
@pytest.mark.parametrize("commit", [C_1Y, C_3Y, 9.9])
def test_lookback_level_is_the_brute_force_best_level(series: np.ndarray, commit: float) -> None:
    assert lookback_level(series, C_OD, commit) == _brute_force_level(series, commit)


def test_lookback_level_on_a_worked_example() -> None:
    """Levels seen 0/2/4 over 4 hours, on demand 10 $/h, commitment 6 $/h."""
    series = np.array([4, 4, 2, 0])
    # saving(c) = sum min(u, c) * 10 - c * 6 * 4:  c=2: 60 - 48 = 12;  c=4: 100 - 96 = 4
    assert lookback_level(series, 10.0, 6.0) == 2


def test_lookback_peer_is_the_best_of_brute_forced_combinations(tmp_path: Path, kit) -> None:
    """14 days: the 7 d lookback sees the first week only, 30 and 60 d the whole horizon."""
    hours = 14 * 24
    rng = np.random.default_rng(5)
    demand = np.concatenate([rng.integers(2, 9, 168), rng.integers(0, 4, 168)])  # busy week, quiet week
    kit.write_demand_csv(tmp_path / "demand.csv", demand.tolist())
    sets = _sets(
        tmp_path, kit, _one_offering(kit), hours=hours, terms=["1y", "3y"], inference=[_node_service()]
    )
    peers = {p.name: p for p in compute_baselines(sets).peers}
    expected: dict[str, tuple[int, float]] = {}
    for days, window in ((7, 168), (30, hours), (60, hours)):
        for term, rate in (("1y", C_1Y), ("3y", C_3Y)):
            level = _brute_force_level(demand[:window], rate)
            expected[f"lookback {days} d, {term}"] = (level, _hand_cost(demand, level, rate, hours))
    best = min(expected, key=lambda name: expected[name][1])
    lookback = [p for p in peers.values() if p.policy == "lookback"]
    assert [p.name for p in lookback] == [best]
    level, cost = expected[best]
    assert lookback[0].total_usd == pytest.approx(cost, rel=1e-12)
    assert sum(c.nodes for c in lookback[0].commitments) == level > 0
    years = 3 if best.endswith("3y") else 1
    rate = C_3Y if years == 3 else C_1Y
    assert lookback[0].obligation_beyond_horizon_usd == pytest.approx(level * rate * (years * YEAR - hours))


def test_coverage_peers_commit_numpy_percentiles_of_the_lookback(tmp_path: Path, kit) -> None:
    hours = 35 * 24  # the 30 d coverage window is the first 720 h
    rng = np.random.default_rng(8)
    demand = np.concatenate([rng.integers(3, 11, 720), np.zeros(120, dtype=np.int64)])
    kit.write_demand_csv(tmp_path / "demand.csv", demand.tolist())
    sets = _sets(
        tmp_path, kit, _one_offering(kit), hours=hours, terms=["1y", "3y"], inference=[_node_service()]
    )
    peers = {p.name: p for p in compute_baselines(sets).peers}
    for pct in (0, 50):
        level = int(np.floor(np.percentile(demand[:720], pct)))
        assert level == coverage_level(demand[:720], pct)
        costs = {term: _hand_cost(demand, level, rate, hours) for term, rate in (("1y", C_1Y), ("3y", C_3Y))}
        term = min(costs, key=costs.__getitem__)
        peer = peers[f"coverage p{pct}, {term}"]
        assert [(c.term, c.nodes) for c in peer.commitments] == [(term, level)]
        assert peer.total_usd == pytest.approx(costs[term], rel=1e-12)
    assert coverage_level(demand[:720], 0) == demand[:720].min() >= 3  # p0: the always-on floor


def test_bill_follows_the_billing_rule_by_hand(tmp_path: Path, kit) -> None:
    """Committed nodes cover non-spot nodes; the excess is on demand; spot is paid as used."""
    kit.write_demand_csv(tmp_path / "demand.csv", [1, 1, 1, 1])
    sets = _sets(
        tmp_path, kit, _one_offering(kit, spot_usd_h=3.0), hours=4, terms=["1y"], inference=[_node_service()]
    )
    usage = Usage(
        nonspot=np.array([[3.0, 1.0, 0.0, 5.0]]), spot=np.array([[0.0, 2.0, 2.0, 0.0]]), spot_training_usd=7.5
    )
    total, beyond = bill(sets, usage, {(0, "1y"): 2})  # type: ignore[dict-item]
    # commitments 2 * 6 * 4 h = 48; above 2 nodes: 1 + 0 + 0 + 3 node-hours * 10 = 40; spot 4 * 3 = 12
    assert total == pytest.approx(48 + 40 + 12 + 7.5)
    assert beyond == pytest.approx(2 * 6.0 * (YEAR - 4))


def test_committed_nodes_also_cover_on_demand_training(tmp_path: Path, kit) -> None:
    """A 2-node gang for 5 h on top of 1 always-on node: the lookback peer commits the level that pays."""
    hours = 24
    kit.write_demand_csv(tmp_path / "demand.csv", [1] * hours)
    job = {"name": "ft", "team": "t", "nodes": 2, "gpu_models": ["H100"], "hours": 5, "fabric": "none"}
    sets = _sets(
        tmp_path,
        kit,
        _one_offering(kit),
        hours=hours,
        terms=["1y"],
        inference=[_node_service()],
        training=[job],
    )
    usage = per_launch_usage(sets, allow_spot=True)
    expected = np.array([3] * 5 + [1] * (hours - 5))  # earliest start: hour 0
    assert usage.nonspot[0].tolist() == expected.tolist()
    peer = next(p for p in compute_baselines(sets).peers if p.policy == "lookback")
    level = _brute_force_level(expected, C_1Y)  # 1 node: 24*10 - 6*24 > 0; 2 nodes add 5*10 - 6*24 < 0
    assert level == 1
    assert peer.total_usd == pytest.approx(_hand_cost(expected, level, C_1Y, hours))


def _mig_sets(tmp_path: Path, kit) -> PlanningSets:
    """Two small services on 1-GPU H100 nodes: 3 x 1g.10gb and 2 x 1g.20gb replicas every hour."""
    kit.write_demand_csv(tmp_path / "a.csv", [3] * 48)
    kit.write_demand_csv(tmp_path / "b.csv", [2] * 48)
    row = kit.offering_row(
        instance_type="h100.1x", gpus_per_node=1, on_demand_usd_h=C_OD, reserved_1y_usd_h=C_1Y, fabric="none"
    )
    services = [
        {"name": "a", "team": "t", "gpu_memory_gb": 9, "gpu_models": ["H100"], "replicas": {"csv": "a.csv"}},
        {"name": "b", "team": "t", "gpu_memory_gb": 18, "gpu_models": ["H100"], "replicas": {"csv": "b.csv"}},
    ]
    return _sets(tmp_path, kit, [row], hours=48, terms=["1y"], inference=services)


def test_mig_packing_puts_two_services_on_one_gpu(tmp_path: Path, kit) -> None:
    sets = _mig_sets(tmp_path, kit)
    # 3 x 1g.10gb (1 memory slice each) + 2 x 1g.20gb (2 each) = 7 of 8 slices, 5 of 7 compute: one GPU
    assert pack("H100", {"1g.10gb": 3, "1g.20gb": 2}).gpus == 1
    packed = per_launch_usage(sets, allow_spot=False)
    unpacked = per_launch_usage(sets, allow_spot=False, packed=False)
    assert packed.nonspot.sum(axis=0).tolist() == [1.0] * 48
    assert unpacked.nonspot.sum(axis=0).tolist() == [2.0] * 48  # one GPU per service's own layout
    baselines = compute_baselines(sets)
    assert baselines.all_on_demand_usd == pytest.approx(1 * C_OD * 48)
    peer = next(p for p in baselines.peers if p.policy == "lookback")
    assert [(c.nodes, c.term) for c in peer.commitments] == [(1, "1y")]  # not the 2 of unpacked usage
    assert peer.total_usd == pytest.approx(1 * C_1Y * 48)


def _guarantee_sets(tmp_path: Path, kit) -> tuple[PlanningSets, np.ndarray]:
    """Spiky use (committing never pays) and a 16-GPU guarantee; two offerings, B cheaper per GPU."""
    demand = np.array([0] * 40 + [1] * 8)
    kit.write_demand_csv(tmp_path / "demand.csv", demand.tolist())
    rows = [
        kit.offering_row(instance_type="a.8x", on_demand_usd_h=C_OD, reserved_1y_usd_h=C_1Y),
        kit.offering_row("gcp", "us-central1", "b.8x", on_demand_usd_h=11.0, reserved_1y_usd_h=5.0),
    ]
    sets = _sets(
        tmp_path,
        kit,
        rows,
        hours=48,
        terms=["1y"],
        teams=[{"name": "t", "guaranteed_gpus": 16}],
        inference=[_node_service()],
    )
    return sets, demand


def test_guarantees_make_the_peer_commit_the_guaranteed_gpus(tmp_path: Path, kit) -> None:
    sets, demand = _guarantee_sets(tmp_path, kit)
    assert lookback_level(demand, C_OD, C_1Y) == 0  # without the guarantee nothing would be bought
    baselines = compute_baselines(sets)
    for peer in baselines.peers:
        if peer.policy not in ("lookback", "coverage"):
            continue
        # 16 GPUs = 2 nodes of B (5 $/h per 8 GPUs beats A's 6); they also serve the 8 busy hours
        assert [(c.offering, c.nodes) for c in peer.commitments] == [("gcp:us-central1:b.8x", 2)]
        assert peer.total_usd == pytest.approx(2 * 5.0 * 48 + 8 * C_OD)  # usage stays on A, on demand
    # all on-demand holds idle on-demand GPUs: 16 missing GPUs in 40 h, 8 in the 8 busy hours, on A
    # (10 $/h per 8 GPUs beats B's 11)
    assert baselines.all_on_demand_usd == pytest.approx(8 * C_OD + (2 * 40 + 1 * 8) * C_OD)
    assert any("without that rule it costs $80" in note for note in baselines.notes)


def test_a_peer_that_buys_nothing_pays_the_per_launch_price(tmp_path: Path, kit) -> None:
    """Spiky use, no guarantee: the recommendation is no commitment, so the peer is greedy exactly."""
    demand = [0] * 40 + [1] * 8
    kit.write_demand_csv(tmp_path / "demand.csv", demand)
    sets = _sets(tmp_path, kit, _one_offering(kit), hours=48, terms=["1y"], inference=[_node_service()])
    baselines = compute_baselines(sets)
    peer = next(p for p in baselines.peers if p.policy == "lookback")
    assert peer.commitments == []
    assert peer.total_usd == pytest.approx(baselines.greedy_usd) and baselines.greedy_usd == pytest.approx(
        80.0
    )


def test_no_terms_no_committing_peer(tmp_path: Path, kit) -> None:
    """Nothing to commit to: the best peer a user can run is the fleet without commitments."""
    kit.write_demand_csv(tmp_path / "demand.csv", [2] * 24)
    sets = _sets(tmp_path, kit, _one_offering(kit), hours=24, terms=[], inference=[_node_service()])
    baselines = compute_baselines(sets)
    assert baselines.best_peer == FLEET_PEER
    assert [(p.policy, p.usage) for p in baselines.peers] == [
        ("all_on_demand", "per_period"),
        ("greedy", "per_period"),
        ("greedy", "fleet"),
    ]
    assert baselines.all_on_demand_usd == pytest.approx(2 * 24 * C_OD)
    assert baselines.peer(FLEET_PEER).total_usd == pytest.approx(2 * 24 * C_OD)  # type: ignore[union-attr]


def test_whole_gpu_replicas_share_nodes(tmp_path: Path, kit) -> None:
    """On 8-GPU nodes: 3 replicas of 200 GB (3 GPUs each, 2 per node), 2 of 1 GPU and 1 of 4 GPUs.

    By hand: the 3-GPU replicas take 2 nodes (9 of 16 GPUs, 7 spare); the two 1-GPU replicas use 2 of
    the spare GPUs; the 4-GPU replica needs a node of its own: 3 nodes. Each service on nodes of its
    own: ceil(3 / 2) + ceil(2 / 8) + ceil(1 / 2) = 4.
    """
    for name, n in (("big", 3), ("one", 2), ("four", 1)):
        kit.write_demand_csv(tmp_path / f"{name}.csv", [n] * 4)
    services = [
        {
            "name": "big",
            "team": "t",
            "gpu_memory_gb": 200,
            "gpu_models": ["H100"],
            "replicas": {"csv": "big.csv"},
        },
        {
            "name": "one",
            "team": "t",
            "gpus_per_replica": 1,
            "gpu_models": ["H100"],
            "replicas": {"csv": "one.csv"},
        },
        {
            "name": "four",
            "team": "t",
            "gpus_per_replica": 4,
            "gpu_models": ["H100"],
            "replicas": {"csv": "four.csv"},
        },
    ]
    sets = _sets(tmp_path, kit, _one_offering(kit), hours=4, terms=["1y"], inference=services)
    assert per_launch_usage(sets, allow_spot=False).nonspot[0].tolist() == [3.0] * 4
    assert per_launch_usage(sets, allow_spot=False, packed=False).nonspot[0].tolist() == [4.0] * 4
