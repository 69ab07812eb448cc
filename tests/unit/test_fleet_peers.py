"""Peers a competent user would run (issue 39, point 5): the fleet usage against hand calculations.

The per-period usage puts each service on its cheapest offering *per period*, so a service hops between
offerings; the fleet usage keeps it on one offering for the horizon (overflow to the next where
``max_nodes`` runs out), and the best peer is the cheapest peer on that fleet. Tiny cases, every expected
figure written out by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.catalog import Catalog
from models.scenario import load
from planner.outputs.reports.plan import render_markdown
from planner.planning.baselines import (
    FLEET_PEER,
    PER_PERIOD_PEER,
    compute_baselines,
    fleet_usage,
    per_launch_usage,
    service_ranking,
)
from planner.planning.optimize import optimize
from planner.planning.problem.sets import PlanningSets, build_sets

HOURS = 48
# A: one 8-GPU node at 16 $/h (2 $/GPU-h), 10 $/h on 1y; B: one 1-GPU node at 2.5 $/h, 1.6 $/h on 1y
A_OD, A_1Y, B_OD, B_1Y = 16.0, 10.0, 2.5, 1.6
BUSY = [8] * 24 + [1] * 24  # 1-GPU replicas: a busy day, then a quiet one


def _write(tmp_path: Path, kit, rows: list[dict[str, Any]], demand: list[int], **scenario: Any) -> Path:
    kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    kit.write_demand_csv(tmp_path / "demand.csv", demand)
    service = {
        "name": "svc",
        "team": "t",
        "gpus_per_replica": scenario.pop("gpus_per_replica", 1),
        "gpu_models": ["H100"],
        "latency_critical": True,
        "replicas": {"csv": "demand.csv"},
    }
    scenario.setdefault("terms", ["1y"])
    data = kit.scenario_dict(hours=HOURS, inference=[service], **scenario)
    return kit.write_scenario_yaml(tmp_path / "scenario.yaml", data)


def _sets(path: Path) -> PlanningSets:
    return build_sets(load(path), Catalog.load(path.parent / "catalog.csv"), path.parent)


def _hop_rows(kit) -> list[dict[str, Any]]:
    return [
        kit.offering_row(instance_type="a.8x", on_demand_usd_h=A_OD, reserved_1y_usd_h=A_1Y),
        kit.offering_row(
            instance_type="b.1x", gpus_per_node=1, fabric="none", on_demand_usd_h=B_OD, reserved_1y_usd_h=B_1Y
        ),
    ]


def test_the_per_period_peer_hops_and_the_fleet_peer_stays(tmp_path: Path, kit) -> None:
    """8 replicas: A's one node (16 $) beats B's eight (20 $); 1 replica: B's one node (2.5 $) beats A's.

    Per period the service hops A -> B. Over the horizon alone (by hand): A holds 1 node every hour, 1 on
    1y = 10 * 48 = 480 $; B holds 8 nodes 24 h and 1 node 24 h: on demand 216 * 2.5 = 540 $, or 1 on 1y
    (saving 48 * 2.5 - 1.6 * 48 = 43.2 > 0; 8 would lose) = 76.8 + 168 * 2.5 = 496.8 $. A wins: the fleet
    stays on A.
    """
    sets = _sets(_write(tmp_path, kit, _hop_rows(kit), BUSY))
    per_period = per_launch_usage(sets, allow_spot=True)
    fleet = fleet_usage(sets, allow_spot=True)
    assert per_period.service_offerings == {0: {0, 1}}
    assert fleet.service_offerings == {0: {0}}
    assert service_ranking(sets, 0, allow_spot=False) == [(0, 0), (1, 0)]
    assert per_period.nonspot.tolist() == [[1.0] * 24 + [0.0] * 24, [0.0] * 24 + [1.0] * 24]
    assert fleet.nonspot.tolist() == [[1.0] * HOURS, [0.0] * HOURS]


def test_the_fleet_peers_cost_what_a_hand_bill_says(tmp_path: Path, kit) -> None:
    """The peers of the case above, billed by hand (the 7/30/60 d lookbacks all see the 48 h horizon).

    Fleet: 1 node of A every hour; the lookback level 1 saves 48 * 16 - 10 * 48 = 288 $ -> 480 $; no
    commitments 48 * 16 = 768 $. Per period: A the first day, B the second; committing 1 node of either
    loses (A: 24 * 16 < 480; B: 24 * 2.5 < 76.8), so 24 * 16 + 24 * 2.5 = 444 $, below every fleet peer:
    the lower reference, never the best peer.
    """
    sets = _sets(_write(tmp_path, kit, _hop_rows(kit), BUSY))
    baselines = compute_baselines(sets)
    by_name = {p.name: p for p in baselines.peers}
    assert by_name[FLEET_PEER].total_usd == pytest.approx(HOURS * A_OD)
    assert by_name[PER_PERIOD_PEER].total_usd == pytest.approx(24 * A_OD + 24 * B_OD)
    assert baselines.greedy_usd == pytest.approx(24 * A_OD + 24 * B_OD)
    lookback = by_name["lookback 7 d, 1y"]
    assert lookback.total_usd == pytest.approx(A_1Y * HOURS)
    assert [(c.offering, c.term, c.nodes) for c in lookback.commitments] == [("aws:us-east-1:a.8x", "1y", 1)]
    assert lookback.obligation_beyond_horizon_usd == pytest.approx(A_1Y * (8760 - HOURS))
    assert baselines.best_peer == "lookback 7 d, 1y"
    assert {p.name for p in baselines.peers if p.usage == "fleet"} == {
        FLEET_PEER,
        "lookback 7 d, 1y",
        "coverage p0, 1y",
        "coverage p50, 1y",
    }
    assert by_name[PER_PERIOD_PEER].usage == by_name["all on-demand"].usage == "per_period"


def test_a_full_offering_overflows_to_the_next_and_a_gang_starts_where_there_is_room(
    tmp_path: Path, kit
) -> None:
    """A (8 $/h, max 2 nodes) beats C (9 $/h): a service of 3 whole-node replicas keeps 2 on A and
    overflows 1 to C every hour; a 2-node gang (5 h from hour 3) finds A full and starts at hour 3 on C."""
    rows = [
        kit.offering_row(instance_type="a.8x", on_demand_usd_h=8.0, max_nodes=2),
        kit.offering_row("gcp", "us-central1", "c.8x", on_demand_usd_h=9.0),
    ]
    job = {"name": "ft", "team": "t", "nodes": 2, "gpu_models": ["H100"], "hours": 5, "fabric": "required"}
    job["earliest_start"] = "2027-01-04T03:00:00Z"
    path = _write(tmp_path, kit, rows, [3] * HOURS, gpus_per_replica=8, terms=[], training=[job])
    sets = _sets(path)
    fleet = fleet_usage(sets, allow_spot=True)
    assert fleet.service_offerings == {0: {0, 1}}
    assert fleet.nonspot[0].tolist() == [2.0] * HOURS
    gang = np.zeros(HOURS)
    gang[3:8] = 2
    assert fleet.nonspot[1].tolist() == (1 + gang).tolist()
    assert fleet.unserved_replica_hours == 0 and fleet.unplaced_runs == []
    # per period: max_nodes ignored, everything on A
    assert per_launch_usage(sets, allow_spot=True).nonspot[0].tolist() == (3 + gang).tolist()
    peer = compute_baselines(sets).peer(FLEET_PEER)
    assert peer is not None
    assert peer.total_usd == pytest.approx(2 * 8.0 * HOURS + 9.0 * (HOURS + 10))


def test_what_no_offering_has_room_for_is_named(tmp_path: Path, kit) -> None:
    rows = [kit.offering_row(instance_type="a.8x", on_demand_usd_h=8.0, max_nodes=2)]
    sets = _sets(_write(tmp_path, kit, rows, [3] * HOURS, gpus_per_replica=8, terms=[]))
    fleet = fleet_usage(sets, allow_spot=True)
    assert fleet.unserved_replica_hours == HOURS
    peer = compute_baselines(sets).peer(FLEET_PEER)
    assert peer is not None and "48 replica-hours found no offering with room" in peer.how
    assert peer.total_usd == pytest.approx(2 * 8.0 * HOURS)


def test_the_report_names_the_peers_and_the_plan_beats_every_fleet_peer(tmp_path: Path, kit) -> None:
    """Planned: the plan is never dearer than a peer a user can run; the report says which peer is best
    and lists the per-period reference under its own name."""
    path = _write(tmp_path, kit, _hop_rows(kit), BUSY)
    scenario = load(path)
    plan = optimize(scenario, Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings())
    document = plan.document
    total = document.costs.total_usd
    for peer in document.baselines.peers:
        if peer.usage == "fleet":
            assert total <= peer.total_usd + 1e-6, peer.name
    md = render_markdown(document, plan.allocations)
    assert "vs best peer (lookback 7 d, 1y) ($480)" in md
    assert "lookback 7 d, 1y (best)" in md
    assert PER_PERIOD_PEER in md and FLEET_PEER in md
    assert "per-period cheapest (not a runnable policy) (best)" not in md


def test_a_service_joins_the_offering_where_it_packs_with_the_fleet(tmp_path: Path, kit) -> None:
    """Two 4-GPU services: the first runs only on A100 (A, 10 $/h per 8-GPU node); the second alone would
    take H100 (B, 9.9 $/h), but beside the first on A it fills the same node and adds nothing, so the
    fleet pools both on A: one node of A every hour, 480 $, where two separate nodes would cost 955.2 $."""
    rows = [
        kit.offering_row(instance_type="a.8x", gpu_model="A100-80GB", on_demand_usd_h=10.0),
        kit.offering_row("gcp", "us-central1", "b.8x", on_demand_usd_h=9.9),
    ]
    kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    kit.write_demand_csv(tmp_path / "demand.csv", [1] * HOURS)
    services = [
        {
            "name": name,
            "team": "t",
            "gpus_per_replica": 4,
            "gpu_models": models,
            "latency_critical": True,
            "replicas": {"csv": "demand.csv"},
        }
        for name, models in (("first", ["A100"]), ("second", ["A100", "H100"]))
    ]
    data = kit.scenario_dict(hours=HOURS, terms=[], inference=services)
    sets = _sets(kit.write_scenario_yaml(tmp_path / "scenario.yaml", data))
    assert service_ranking(sets, 1, allow_spot=False)[0] == (1, 0)  # alone: B
    fleet = fleet_usage(sets, allow_spot=True)
    assert fleet.service_offerings == {0: {0}, 1: {0}}
    assert fleet.nonspot.tolist() == [[1.0] * HOURS, [0.0] * HOURS]
    peer = compute_baselines(sets).peer(FLEET_PEER)
    assert peer is not None and peer.total_usd == pytest.approx(10.0 * HOURS)


def test_the_first_plan_line_names_the_best_runnable_peer_or_all_on_demand() -> None:
    """What ``gpuplan plan`` says before the search (run.first_plan): the best fleet peer, its price and
    what it buys; all on demand when no peer can be run."""
    from models.plan import Baselines, Peer, PeerCommitment
    from planner.planning.optimize.run import first_plan

    bought = [PeerCommitment(offering="aws:us-east-1:p5.48xlarge", term="1y", nodes=3)]
    peer = Peer(
        name="lookback 30 d, 1y", policy="lookback", usage="fleet", total_usd=1234.5, commitments=bought
    )
    chosen = Baselines(all_on_demand_usd=2000.0, greedy_usd=1900.0, peers=[peer], best_peer=peer.name)
    assert first_plan(chosen, 60.0) == (
        "first plan: $1,234, the best peer a user could run (lookback 30 d, 1y: each service on one "
        "offering, 3 nodes committed, the rest on demand); searching for a cheaper one within 60 s of "
        "counted work"
    )
    alone = Baselines(all_on_demand_usd=2000.0, greedy_usd=1900.0)
    assert first_plan(alone, None) == "first plan: all on demand, $2,000; searching for a cheaper one"
