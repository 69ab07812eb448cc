"""Quotas counting reservations (issue 35 point 8): a gang's reservation made ahead of its start is checked
against the quotas before it is made, on the simulated cloud through provision's operations layer.

EC2 refuses CreateCapacityReservation beyond the On-Demand vCPU limit and a Compute Engine reservation
takes its VMs' quota when it is made; a reservation made ``lead_hours`` before its gang, in a cycle with no
launch, used to be sent unchecked. (The AWS adapter's reading of held reservations is in
``test_aws_quotas.py``.)
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from models.actions import ActionKind
from models.plan import Plan
from planner.operations.provision import apply, prepare
from providers.sim import SimProvider


@pytest.fixture
def early(week_plan: Callable[[str], Path], tmp_path: Path) -> tuple[Plan, Any, datetime]:
    """The week's first on-demand gang, an hour before it starts (inside the default two-hour lead)."""
    shutil.copytree(week_plan("aws"), tmp_path / "plan")
    plan = Plan.read(tmp_path / "plan")
    gang = next(t for t in plan.document.training if t.nodes > 1 and t.tier != "spot")
    return plan, gang, gang.start - timedelta(hours=1)


def _sim(path: Path, plan: Plan, gang: Any, limit: float) -> SimProvider:
    sim = SimProvider(path)
    sim.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    gpus = plan.document.offerings[gang.offering].gpus_per_node
    per_node = {f"{gang.offering}/on-demand": gpus}
    quota = {"limit": limit, "unit": "GPUs", "region": "us-east-1", "per_node": per_node}
    sim.configure(quotas={"NVIDIA_H100_GPUS": quota})
    return sim


def test_a_reservation_ahead_of_its_gang_beyond_the_quota_is_refused_before_it_is_made(
    early: tuple[Plan, Any, datetime], tmp_path: Path
) -> None:
    plan, gang, at = early
    gpus = plan.document.offerings[gang.offering].gpus_per_node
    sim = _sim(tmp_path / "sim.json", plan, gang, gpus * (gang.nodes - 1))
    run = prepare(plan, sim, at)
    reservation = next(a for a in run.actions if a.kind is ActionKind.CREATE_RESERVATION)
    assert reservation.count == gang.nodes and reservation.offering == gang.offering
    assert not [a for a in run.actions if a.kind is ActionKind.LAUNCH and a.run == reservation.run]
    assert reservation.id in run.refused, "a reservation with no launch in the list is checked too"
    why = run.refused[reservation.id]
    assert f"the reservation of {gang.nodes} x {gang.offering} for gang {reservation.run} needs" in why
    free = gpus * (gang.nodes - 1)
    assert f"{gpus * gang.nodes:g} GPUs of quota NVIDIA_H100_GPUS, which has {free:g} free" in why
    assert any(n.startswith("quota NVIDIA_H100_GPUS in us-east-1") for n in run.notes)
    before = len(sim.calls())
    apply(run, sim)
    assert "ensure_reservation" not in sim.calls()[before:], "nothing billed for a gang that cannot run"
    assert run.results[reservation.id].error_kind == "quota-exceeded"
    assert not sim.inventory(run.desired.plan_id).reservations


def test_a_reservation_that_fits_is_made_and_takes_the_quota_first(
    early: tuple[Plan, Any, datetime], tmp_path: Path
) -> None:
    """The boundary: a quota of exactly the gang's GPUs admits its reservation ahead of the gang; the
    reservation is made first, so the pool launches of the same offering after it find no room left."""
    plan, gang, at = early
    gpus = plan.document.offerings[gang.offering].gpus_per_node
    sim = _sim(tmp_path / "sim.json", plan, gang, gpus * gang.nodes)
    run = prepare(plan, sim, at)
    reservation = next(a for a in run.actions if a.kind is ActionKind.CREATE_RESERVATION)
    pools = [a for a in run.actions if a.kind is ActionKind.LAUNCH and a.offering == gang.offering]
    assert reservation.id not in run.refused
    assert pools and all(p.id in run.refused for p in pools)
    assert "which has 0 free" in run.refused[pools[0].id]
    apply(run, sim)
    assert run.results[reservation.id].status == "done"
    assert [r.name for r in sim.inventory(run.desired.plan_id).reservations] == [reservation.target]
