"""planner/operations/reconcile.py for a gang the plan holds in a Capacity Block (``DesiredGang.block``): no
ODCR, a launch only into the run's own active block, a note while it waits, and a block never released.
Hand-made desired states and inventories, as tests/unit/test_reconcile.py builds them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.actions import ActionKind
from planner.operations.reconcile import block_notes, reconcile
from planner.outputs.desired import DesiredGang, DesiredState
from providers.base import CapacityReservation, CapacityType, Inventory

AT = datetime(2027, 1, 11, 1, tzinfo=UTC)
P5 = "aws:us-east-1:p5.48xlarge"
RUN = "finetune-0"


def _gang(*, running: bool = True) -> DesiredGang:
    return DesiredGang(
        run=RUN,
        job="finetune",
        run_index=0,
        team="research",
        offering=P5,
        capacity=CapacityType.ON_DEMAND,
        nodes=8,
        placement_group=None,
        fabric="efa",
        start=AT - timedelta(hours=1),
        end=AT + timedelta(hours=119),
        running=running,
        reserve=False,
        block=True,
        block_hours=120,
        block_fee_usd=39866.88,
    )


def _state(*gangs: DesiredGang) -> DesiredState:
    return DesiredState(
        plan_id="capacity-blocks-2027q1",
        at=AT,
        period=10,
        pools=(),
        gangs=gangs,
        ended_runs=(),
        purchases=(),
        notes=(),
        prices={P5: {"on-demand": 55.0, "spot": 30.0}},
    )


def _block(
    state: str = "active", *, run: str | None = RUN, offering: str = P5, nodes: int = 8, rid: str = "cr-0b10c"
) -> CapacityReservation:
    return CapacityReservation(
        rid, offering, nodes, run=run, id=rid, state=state, block=True, starts=AT - timedelta(hours=12)
    )


def test_a_running_block_gang_launches_into_its_active_block_and_makes_no_odcr() -> None:
    (launch,) = reconcile(_state(_gang()), Inventory(reservations=(_block(),)))
    assert launch.kind is ActionKind.LAUNCH and launch.reservation == "cr-0b10c" and launch.count == 8
    assert launch.usd_per_hour is None  # paid upfront with the block
    assert "into its Capacity Block cr-0b10c" in launch.reason
    assert reconcile(_state(_gang(running=False)), Inventory()) == []  # ahead of its start: nothing, no ODCR


@pytest.mark.parametrize(
    ("held", "said"),
    [
        ((), "none is held for it"),
        (
            (_block("scheduled"),),
            "waits for its Capacity Block cr-0b10c (scheduled, active from 2027-01-10 13:00Z)",
        ),
        ((_block(nodes=4),), "holds fewer than 8 nodes, so it is not used"),
        ((_block(offering="aws:us-east-1:p4d.24xlarge"),), "is not its offering"),
        ((_block(run="pretrain-0"),), "none is held for it"),  # another run's block
    ],
)
def test_without_its_own_active_block_the_gang_waits_and_is_never_launched_on_demand(
    held: tuple[CapacityReservation, ...], said: str
) -> None:
    desired = _state(_gang())
    inventory = Inventory(reservations=held)
    actions = reconcile(desired, inventory)
    assert not [a for a in actions if a.kind in (ActionKind.LAUNCH, ActionKind.CREATE_RESERVATION)]
    (note,) = block_notes(desired, inventory)
    assert note.startswith(f"{RUN} waits") and said in note


def test_a_block_is_never_released_even_when_no_gang_of_the_plan_needs_it() -> None:
    other = _block(run="sweep-0", rid="cr-0other")
    actions = reconcile(_state(), Inventory(reservations=(_block(), other)))
    assert not [a for a in actions if a.kind is ActionKind.RELEASE_RESERVATION]
    odcr = CapacityReservation("res-sweep-0", P5, 8, run="sweep-0")
    (release,) = reconcile(_state(), Inventory(reservations=(odcr,)))
    assert release.kind is ActionKind.RELEASE_RESERVATION and release.target == "res-sweep-0"


def test_the_desired_state_holds_a_planned_block_gang_in_its_block_not_a_reservation(week_plan) -> None:  # type: ignore[no-untyped-def]
    """The week plan's multi-node gang moved to tier capacity_block (as the planner writes it): a block
    gang, no reservation and no placement group; on a cloud that sells no blocks, the gang as it was, and a
    note."""
    import dataclasses

    from models.plan import Plan
    from planner.outputs.desired import desired_state

    plan = Plan.read(week_plan("aws"))
    gang = next(t for t in plan.document.training if t.nodes > 1 and t.tier != "spot")
    moved = gang.model_copy(update={"tier": "capacity_block", "block_hours": 168, "cost_usd": 1234.5})
    training = [moved if t is gang else t for t in plan.document.training]
    plan = dataclasses.replace(plan, document=plan.document.model_copy(update={"training": training}))
    at = gang.start + timedelta(hours=1)
    (held,) = [g for g in desired_state(plan, at, handles=lambda _o: True).gangs if g.nodes > 1]
    assert held.block and not held.reserve and held.placement_group is None
    assert (held.block_hours, held.block_fee_usd) == (168, 1234.5)
    without = desired_state(plan, at, handles=lambda _o: True, blocks=False)
    (plain,) = [g for g in without.gangs if g.nodes > 1]
    assert not plain.block and plain.reserve and plain.placement_group
    assert any("does not sell" in note for note in without.notes)
