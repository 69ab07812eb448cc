"""Does the fleet consume what was bought? (issue 38 point 5): each commitment's use planned beside actual,
and a reservation paid idle while on-demand nodes of its offering run outside it.

The daemon runs on the simulated cloud over the mixed-fleet week (``daemon_days``); the figures are checked
against an independent reading of the plan's allocations.csv and of the simulated cloud's own file.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from daemon_days import START, cached_planner, daemon_config

from models.plan import Plan
from planner.operations.daemon.commitment_use import commitment_use, idle_reservations
from planner.operations.daemon.config import load_config
from providers.resources import CapacityReservation, CapacityType, Inventory, Node
from providers.sim import SimProvider


def _committed_plan(plan: Plan, now: datetime) -> dict[str, tuple[int, float]]:
    """offering -> (committed nodes active at ``now``, committed rows' nodes in its period), read directly."""
    period = int(
        (now - plan.document.horizon.start).total_seconds() // 3600 // plan.document.horizon.period_hours
    )
    rows = plan.allocations[
        (plan.allocations.period == period)
        & plan.allocations.tier.isin(["reserved_1y", "reserved_3y", "reservation"])
    ]
    found: dict[str, tuple[int, float]] = {}
    for c in plan.document.commitments:
        if (c.start is None or c.start <= now) and (c.end is None or now < c.end):
            held, _ = found.get(c.offering, (0, 0.0))
            found[c.offering] = (held + c.nodes, float(rows[rows.offering == c.offering].nodes.sum()))
    return found


def test_use_is_reported_planned_beside_actual_and_a_fleet_that_matches_the_plan_uses_what_it_planned(
    scenario: Path, tmp_path: Path
) -> None:
    from planner.operations.daemon.daemon import Daemon

    config = load_config(daemon_config(tmp_path, scenario))
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    daemon = Daemon(config, provider=cloud, planner=cached_planner)
    now = START + timedelta(hours=10)
    daemon.replan(now)
    daemon.reconcile(now)  # launches the fleet the plan holds now
    daemon.reconcile(now + timedelta(minutes=1))  # reads it back: the fleet now matches the plan
    plan = daemon.current_plan()
    assert plan is not None
    expected = _committed_plan(plan, now + timedelta(minutes=1))
    assert expected, "the week's plan holds commitments"
    registry = daemon.metrics.registry
    state = json.loads(config.sim_state.read_text())
    running: dict[str, int] = {}
    for node in state["nodes"].values():
        if node["state"] != "terminated" and node["capacity"] != "spot":
            running[node["offering"]] = running.get(node["offering"], 0) + 1
    for c in plan.document.commitments:
        if c.offering not in expected:
            continue
        held, rows = expected[c.offering]
        name = c.name or c.offering
        planned = registry.get_sample_value(
            "gpuplan_commitment_used_fraction", {"commitment": name, "state": "planned"}
        )
        actual = registry.get_sample_value(
            "gpuplan_commitment_used_fraction", {"commitment": name, "state": "actual"}
        )
        assert planned == pytest.approx(min(1.0, rows / held))
        assert actual == pytest.approx(min(running.get(c.offering, 0), held) / held)
        assert actual >= planned - 1e-9  # the fleet holds at least what the plan runs on its commitments


def _node(i: int, offering: str, capacity: CapacityType, reservation: str | None = None) -> Node:
    return Node(id=f"n{i}", offering=offering, capacity=capacity, pool="p", reservation=reservation)


def test_a_reservation_paid_idle_beside_on_demand_nodes_is_found() -> None:
    p5 = "aws:us-east-1:p5.48xlarge"
    reservation = CapacityReservation(name="gang-a", offering=p5, nodes=4, id="cr-1")
    inventory = Inventory(
        nodes=(
            _node(1, p5, CapacityType.ON_DEMAND, reservation="cr-1"),  # one runs in it
            _node(2, p5, CapacityType.ON_DEMAND),  # two run outside it, on demand: paid twice
            _node(3, p5, CapacityType.ON_DEMAND),
            _node(4, p5, CapacityType.SPOT),  # spot never uses a reservation
        ),
        reservations=(reservation,),
    )
    (idle,) = idle_reservations(inventory)
    assert (idle.name, idle.held, idle.running_in_it, idle.on_demand_outside) == ("gang-a", 4, 1, 2)
    assert "3 of them run nothing while 2 on-demand nodes" in idle.describe()
    full = Inventory(
        nodes=tuple(_node(i, p5, CapacityType.ON_DEMAND, "cr-1") for i in range(4)),
        reservations=(reservation,),
    )
    assert idle_reservations(full) == []  # full: nothing idle
    alone = Inventory(nodes=(_node(1, p5, CapacityType.ON_DEMAND, "cr-1"),), reservations=(reservation,))
    assert idle_reservations(alone) == []  # idle slots, but no on-demand node of it runs elsewhere
    released = Inventory(
        nodes=inventory.nodes,
        reservations=(CapacityReservation(name="x", offering=p5, nodes=4, state="cancelled"),),
    )
    assert idle_reservations(released) == []


def test_the_daemon_warns_once_and_exports_an_idle_reservation(scenario: Path, tmp_path: Path) -> None:
    """A reconcile that sees an idle reservation beside on-demand nodes records one ``reservation-idle``
    event while it lasts, and the gauge shows its idle slots."""
    from planner.operations.daemon.daemon import Daemon

    config = load_config(daemon_config(tmp_path, scenario, apply=False))
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    daemon = Daemon(config, provider=cloud, planner=cached_planner)
    now = START + timedelta(hours=10)
    daemon.replan(now)
    plan = daemon.current_plan()
    assert plan is not None
    offering = plan.document.commitments[0].offering
    inventory = Inventory(
        nodes=(_node(1, offering, CapacityType.ON_DEMAND),),
        reservations=(CapacityReservation(name="held-res", offering=offering, nodes=2, id="cr-9"),),
    )
    for minute in (0, 5):  # two cycles: one event
        daemon._commitment_metrics(plan, _Run(inventory), now + timedelta(minutes=minute))  # type: ignore[arg-type]
    events = daemon.store.events("reservation-idle")
    assert len(events) == 1 and "held-res holds 2" in events[0].message
    assert (
        daemon.metrics.registry.get_sample_value(
            "gpuplan_reservation_idle_nodes", {"reservation": "held-res"}
        )
        == 2
    )
    daemon._commitment_metrics(plan, _Run(Inventory()), now + timedelta(minutes=10))  # type: ignore[arg-type]
    assert (
        daemon.metrics.registry.get_sample_value(
            "gpuplan_reservation_idle_nodes", {"reservation": "held-res"}
        )
        is None
    )
    assert commitment_use(
        plan.document, plan.allocations, Inventory(), now
    )  # active commitments, nothing running
    assert all(u.actual == 0.0 for u in commitment_use(plan.document, plan.allocations, Inventory(), now))


class _Run:
    """What _commitment_metrics reads of a provisioning run: its inventory."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
