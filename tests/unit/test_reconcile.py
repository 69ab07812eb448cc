"""planner/operations/reconcile.py: the plan's desired state at a time, and the actions that turn an
inventory into it.

The desired state is checked against an independent reading of the plan files (pandas over
allocations.csv, plan.json's training rows); the action rules (order, dependencies, minimality, tokens,
never terminating a gang) on hand-made inventories.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from models.errors import InputError
from models.naming import pool_name
from models.plan import Plan
from planner.operations.provision import launch_spec, placement_group_spec, reservation_spec
from planner.operations.reconcile import RESERVATION_MARGIN, ActionKind, reconcile
from planner.outputs.desired import DesiredGang, DesiredPool, DesiredState, desired_state
from providers.base import CapacityReservation, CapacityType, Inventory, Node, PlacementGroup

AT = datetime(2027, 2, 5, 0, tzinfo=UTC)  # the week plans' pretraining gang starts then
P5 = "aws:us-east-1:p5.48xlarge"
P4 = "aws:us-east-2:p4d.24xlarge"


def _everything(_offering: str) -> bool:
    return True


def _aws(offering: str) -> bool:
    return offering.startswith("aws:")


# ----------------------------------------------------------------------------------------------------------
# desired state from a real plan


@pytest.fixture(scope="module")
def plan(week_plan) -> Plan:  # type: ignore[no-untyped-def]
    return Plan.read(week_plan("all"))


def test_pools_are_the_whole_nodes_of_the_periods_inference_rows(plan: Plan) -> None:
    for hours in (0, 17, 96, 150):
        at = plan.document.horizon.start + timedelta(hours=hours, minutes=30)
        desired = desired_state(plan, at, handles=_everything)
        assert desired.period == hours
        rows = plan.allocations
        rows = rows[(rows.period == hours) & (rows.kind == "inference") & (rows.tier != "owned")]
        capacity = rows.tier.map(lambda t: "spot" if t == "spot" else "on-demand")
        expected = rows.groupby([rows.offering, capacity]).nodes.sum()
        got = {(p.offering, str(p.capacity)): p.nodes for p in desired.pools}
        assert got == {key: math.ceil(value - 1e-6) for key, value in expected.items()}
        assert all(p.pool == pool_name(p.offering, p.capacity) for p in desired.pools)


def test_a_gang_is_prepared_within_the_lead_time_and_held_while_it_runs(plan: Plan) -> None:
    gang = next(t for t in plan.document.training if t.nodes > 1)
    before = gang.start - timedelta(hours=3)
    assert not [
        g for g in desired_state(plan, before, handles=_everything, lead_hours=2).gangs if g.nodes > 1
    ]
    ahead = desired_state(plan, gang.start - timedelta(hours=1), handles=_everything, lead_hours=2)
    (prepared,) = [g for g in ahead.gangs if g.nodes > 1]
    assert not prepared.running and prepared.placement_group and prepared.nodes == gang.nodes
    assert prepared.reserve == (gang.tier != "spot")
    during = desired_state(plan, gang.start + timedelta(hours=1), handles=_everything)
    (running,) = [g for g in during.gangs if g.nodes > 1]
    assert running.running and running.fabric == gang.fabric
    after = desired_state(plan, gang.end + timedelta(minutes=1), handles=_everything)
    assert running.run in after.ended_runs and running.run not in {g.run for g in after.gangs}


def test_other_clouds_are_left_out_and_said_so(plan: Plan) -> None:
    desired = desired_state(plan, AT, handles=_aws)
    assert all(p.offering.startswith("aws:") for p in desired.pools)
    rows = plan.allocations
    others = rows[
        (rows.period == desired.period) & (rows.kind == "inference") & ~rows.offering.str.startswith("aws:")
    ]
    for offering in set(others.offering):
        assert any(note.startswith(offering) for note in desired.notes)


def test_purchases_are_recommendations_due_from_their_start(plan: Plan) -> None:
    desired = desired_state(plan, AT, handles=_everything)
    bought = [c for c in plan.document.commitments if not c.existing]
    assert [p.name for p in desired.purchases] == [c.name for c in bought]
    for purchase, commitment in zip(desired.purchases, bought, strict=True):
        assert purchase.due == (commitment.start is None or commitment.start <= AT)
        assert purchase.cost_in_horizon_usd == commitment.cost_in_horizon_usd


def test_a_time_outside_the_horizon_is_an_input_error(plan: Plan) -> None:
    start = plan.document.horizon.start
    with pytest.raises(InputError, match="outside the plan's horizon"):
        desired_state(plan, start - timedelta(seconds=1), handles=_everything)
    with pytest.raises(InputError, match="--at"):
        desired_state(plan, start + timedelta(hours=plan.document.horizon.hours), handles=_everything)


# ----------------------------------------------------------------------------------------------------------
# the action rules, on hand-made states


def _pool(offering: str, capacity: CapacityType, nodes: int) -> DesiredPool:
    return DesiredPool(
        pool=pool_name(offering, capacity),
        offering=offering,
        capacity=capacity,
        nodes=nodes,
        node_hours=nodes,
    )


def _gang(
    *, nodes: int = 4, running: bool = True, capacity: CapacityType = CapacityType.ON_DEMAND
) -> DesiredGang:
    return DesiredGang(
        run="pretrain-0",
        job="pretrain",
        run_index=0,
        team="research",
        offering=P5,
        capacity=capacity,
        nodes=nodes,
        placement_group="pg-pretrain-0",
        fabric="efa",
        start=AT,
        end=AT + timedelta(hours=48),
        running=running,
        reserve=capacity is CapacityType.ON_DEMAND and nodes > 1,
    )


def _state(pools=(), gangs=(), period: int = 96, ended=()) -> DesiredState:  # type: ignore[no-untyped-def]
    return DesiredState(
        plan_id="fleet",
        at=AT,
        period=period,
        pools=tuple(pools),
        gangs=tuple(gangs),
        ended_runs=tuple(ended),
        purchases=(),
        notes=(),
        prices={P5: {"on-demand": 55.0, "spot": 30.0}, P4: {"on-demand": 22.0, "spot": 9.0}},
    )


def _nodes(
    offering: str,
    capacity: CapacityType,
    count: int,
    *,
    run: str | None = None,
    first: int = 0,
    state: str = "running",
) -> list[Node]:
    return [
        Node(
            id=f"i-{first + k:04d}",
            offering=offering,
            capacity=capacity,
            pool=pool_name(offering, capacity),
            run=run,
            state=state,
            launched=AT - timedelta(hours=100 - first - k),
        )
        for k in range(count)
    ]


def test_an_empty_fleet_gets_groups_then_reservations_then_launches() -> None:
    desired = _state(pools=[_pool(P4, CapacityType.SPOT, 3)], gangs=[_gang()])
    actions = reconcile(desired, Inventory())
    kinds = [a.kind for a in actions]
    assert kinds == [
        ActionKind.CREATE_PLACEMENT_GROUP,
        ActionKind.CREATE_RESERVATION,
        ActionKind.LAUNCH,
        ActionKind.LAUNCH,
    ]
    group, reservation, gang, pool = actions
    assert reservation.depends_on == (group.id,)
    assert set(gang.depends_on) == {group.id, reservation.id}
    assert gang.placement_group == group.target and gang.reservation == reservation.target and gang.count == 4
    assert pool.count == 3 and pool.capacity is CapacityType.SPOT and pool.depends_on == ()
    assert [a.id for a in actions] == [1, 2, 3, 4]
    assert reservation.usd_per_hour == pytest.approx(4 * 55.0) and gang.usd_per_hour is None
    assert pool.usd_per_hour == pytest.approx(3 * 9.0)
    # the reservation ends by itself a margin after the run's planned end: none bills on forever
    assert reservation.ends == _gang().end + RESERVATION_MARGIN and RESERVATION_MARGIN.total_seconds() > 0
    assert reservation_spec(reservation, "fleet").ends == reservation.ends


def test_a_fleet_that_matches_has_no_actions() -> None:
    desired = _state(pools=[_pool(P4, CapacityType.SPOT, 3)], gangs=[_gang()])
    inventory = Inventory(
        nodes=(
            *_nodes(P4, CapacityType.SPOT, 3),
            *_nodes(P5, CapacityType.ON_DEMAND, 4, run="pretrain-0", first=10),
        ),
        placement_groups=(PlacementGroup("pg-pretrain-0", "us-east-1", run="pretrain-0"),),
        reservations=(CapacityReservation("res-pretrain-0", P5, 4, "pg-pretrain-0", run="pretrain-0"),),
    )
    assert reconcile(desired, inventory) == []


def test_a_pool_above_the_plan_terminates_after_the_replacement_launch() -> None:
    # the plan moves the pool of P5 from spot to on-demand: launch 2 on demand, then let 3 spot nodes go
    desired = _state(pools=[_pool(P5, CapacityType.ON_DEMAND, 2)])
    inventory = Inventory(nodes=tuple(_nodes(P5, CapacityType.SPOT, 3)))
    launch, terminate = reconcile(desired, inventory, budget=None)  # no disruption budget
    assert launch.kind is ActionKind.LAUNCH and launch.count == 2
    assert terminate.kind is ActionKind.TERMINATE and terminate.count == 3
    assert terminate.depends_on == (launch.id,)
    assert terminate.usd_per_hour == pytest.approx(-3 * 30.0)


def test_surplus_nodes_go_pending_first_then_newest() -> None:
    nodes = [
        *_nodes(P4, CapacityType.ON_DEMAND, 4),
        *_nodes(P4, CapacityType.ON_DEMAND, 1, first=50, state="pending"),
    ]
    (terminate,) = reconcile(
        _state(pools=[_pool(P4, CapacityType.ON_DEMAND, 3)]), Inventory(nodes=tuple(nodes))
    )
    assert terminate.node_ids == ("i-0050", "i-0003")  # the pending one, then the newest running


def test_gang_nodes_are_never_terminated_for_a_pool_or_after_the_run() -> None:
    gang_nodes = _nodes(P5, CapacityType.ON_DEMAND, 4, run="pretrain-0")
    inventory = Inventory(
        nodes=tuple(gang_nodes),
        placement_groups=(PlacementGroup("pg-pretrain-0", "us-east-1", run="pretrain-0"),),
    )
    desired = _state(pools=[_pool(P5, CapacityType.ON_DEMAND, 0)], ended=["pretrain-0"])
    actions = reconcile(desired, inventory)
    assert actions == []  # the group still holds the run's nodes: not deleted either
    retired = reconcile(desired, inventory, retire_finished_runs=True)
    assert [a.kind for a in retired] == [ActionKind.TERMINATE, ActionKind.DELETE_PLACEMENT_GROUP]
    assert set(retired[0].node_ids) == {n.id for n in gang_nodes}


def test_a_finished_runs_reservation_is_released_and_its_empty_group_deleted() -> None:
    inventory = Inventory(
        placement_groups=(PlacementGroup("pg-pretrain-0", "us-east-1", run="pretrain-0"),),
        reservations=(CapacityReservation("res-pretrain-0", P5, 4, "pg-pretrain-0", run="pretrain-0"),),
    )
    release, delete = reconcile(_state(ended=["pretrain-0"]), inventory)
    assert release.kind is ActionKind.RELEASE_RESERVATION and release.target == "res-pretrain-0"
    assert delete.kind is ActionKind.DELETE_PLACEMENT_GROUP and delete.target == "pg-pretrain-0"
    assert "ended" in release.reason and release.usd_per_hour == pytest.approx(-4 * 55.0)


def test_a_partly_lost_gang_is_topped_up_in_its_group() -> None:
    inventory = Inventory(
        nodes=tuple(_nodes(P5, CapacityType.SPOT, 3, run="pretrain-0")),
        placement_groups=(PlacementGroup("pg-pretrain-0", "us-east-1", run="pretrain-0"),),
    )
    (launch,) = reconcile(_state(gangs=[_gang(capacity=CapacityType.SPOT)]), inventory)
    assert launch.count == 1 and launch.target_nodes == 4 and launch.placement_group == "pg-pretrain-0"
    assert launch.reservation is None and launch.depends_on == ()


def test_an_upcoming_gang_gets_its_group_and_reservation_but_no_nodes_yet() -> None:
    actions = reconcile(_state(gangs=[_gang(running=False)]), Inventory())
    assert [a.kind for a in actions] == [ActionKind.CREATE_PLACEMENT_GROUP, ActionKind.CREATE_RESERVATION]


def test_tokens_are_deterministic_and_change_with_the_intent() -> None:
    desired = _state(pools=[_pool(P4, CapacityType.SPOT, 3)], gangs=[_gang()])
    first = reconcile(desired, Inventory())
    again = reconcile(desired, Inventory())
    assert [a.token for a in first] == [a.token for a in again]
    assert len({a.token for a in first}) == len(first)
    later = reconcile(_state(pools=[_pool(P4, CapacityType.SPOT, 3)], period=97), Inventory())
    assert later[0].token != first[-1].token  # another period is another intent
    partly = reconcile(desired, Inventory(nodes=tuple(_nodes(P4, CapacityType.SPOT, 1))))
    assert partly[-1].count == 2 and partly[-1].token != first[-1].token
    # the same count of other nodes (one interrupted, gone, and a new one in its place): another intent
    other = reconcile(desired, Inventory(nodes=tuple(_nodes(P4, CapacityType.SPOT, 1, first=7))))
    assert other[-1].count == 2 and other[-1].token != partly[-1].token
    again = reconcile(desired, Inventory(nodes=tuple(_nodes(P4, CapacityType.SPOT, 1, first=7))))
    assert again[-1].token == other[-1].token


def test_launch_specs_carry_the_tags_inventory_finds() -> None:
    (group, reservation, gang) = reconcile(_state(gangs=[_gang()]), Inventory())
    spec = launch_spec(gang, "fleet")
    assert spec.tags == {
        "gpuplan-plan": "fleet",
        "gpuplan-managed-by": "provision",
        "gpuplan-pool": pool_name(P5, CapacityType.ON_DEMAND),
        "gpuplan-run": "pretrain-0",
    }
    assert spec.all_or_nothing and spec.token == gang.token and spec.fabric == "efa"
    group_spec = placement_group_spec(group, "fleet")
    assert group_spec.tags["gpuplan-run"] == "pretrain-0" and (group_spec.region, group_spec.nodes) == (
        "us-east-1",
        4,
    )
    assert reservation_spec(reservation, "fleet").placement_group == "pg-pretrain-0"


def test_the_action_document_round_trips_and_a_wrong_one_names_its_field(tmp_path: Path) -> None:
    from models.actions import ActionPlan, read_actions

    actions = reconcile(_state(pools=[_pool(P4, CapacityType.SPOT, 3)], gangs=[_gang()]), Inventory())
    document = ActionPlan(
        plan_id="fleet",
        provider="sim",
        at=AT,
        period=96,
        actions=tuple(actions),
        recommended_purchases=(),
        notes=(),
        inventory={},
    )
    path = tmp_path / "actions.json"
    path.write_text(document.to_json(), encoding="utf-8")
    again = read_actions(path)
    assert again == document and again.actions[0].kind == "create-placement-group"
    broken = json.loads(document.to_json())
    broken["actions"][0]["kind"] = "explode"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(InputError, match=r"actions\.0\.kind"):
        read_actions(path)


def test_failed_nodes_are_replaced_then_terminated() -> None:
    nodes = [
        *_nodes(P4, CapacityType.ON_DEMAND, 2),
        *_nodes(P4, CapacityType.ON_DEMAND, 1, first=7, state="failed"),
    ]
    launch, terminate = reconcile(
        _state(pools=[_pool(P4, CapacityType.ON_DEMAND, 3)]), Inventory(nodes=tuple(nodes))
    )
    assert launch.kind is ActionKind.LAUNCH and launch.count == 1  # the failed node counts for nothing
    assert terminate.kind is ActionKind.TERMINATE and terminate.node_ids == ("i-0007",)
    assert "terminate 1 nodes of failed nodes" in terminate.describe()


def test_a_reservation_bought_for_the_run_is_used_not_duplicated() -> None:
    # a Capacity Block bought for the run (named by its id, tagged with the run) serves the gang
    block = CapacityReservation("cr-0123456789abcdef0", P5, 4, None, run="pretrain-0")
    inventory = Inventory(
        placement_groups=(PlacementGroup("pg-pretrain-0", "us-east-1", run="pretrain-0"),),
        reservations=(block,),
    )
    (launch,) = reconcile(_state(gangs=[_gang()]), inventory)
    assert launch.kind is ActionKind.LAUNCH and launch.reservation == "cr-0123456789abcdef0"


def test_launches_split_into_batches_each_its_own_intent_but_gangs_never() -> None:
    desired = _state(
        pools=[_pool(P4, CapacityType.SPOT, 10)], gangs=[_gang(nodes=6, capacity=CapacityType.SPOT)]
    )
    actions = reconcile(desired, Inventory(nodes=tuple(_nodes(P4, CapacityType.SPOT, 1))), launch_batch=4)
    gang = [a for a in actions if a.kind is ActionKind.LAUNCH and a.run]
    pool = [a for a in actions if a.kind is ActionKind.LAUNCH and not a.run]
    assert [a.count for a in gang] == [6]  # all or nothing
    assert [(a.count, a.target_nodes) for a in pool] == [(4, 5), (4, 9), (1, 10)]
    assert len({a.token for a in pool}) == 3
    unbatched = reconcile(desired, Inventory(nodes=tuple(_nodes(P4, CapacityType.SPOT, 1))))
    (whole,) = [a for a in unbatched if a.kind is ActionKind.LAUNCH and not a.run]
    assert (whole.count, whole.target_nodes) == (9, 10)


# ---- the disruption budget and what Terraform manages (issue 35 points 1 and 2) ----------------------


def _terraform(nodes: list[Node]) -> list[Node]:
    from dataclasses import replace

    from models.naming import BY_TERRAFORM, TAG_MANAGED_BY

    return [replace(n, tags={TAG_MANAGED_BY: BY_TERRAFORM}) for n in nodes]


def test_the_disruption_budget_terminates_half_a_pool_per_run_and_says_what_it_held() -> None:
    from planner.operations.reconcile import DisruptionBudget, HeldBack

    desired = _state(pools=[])  # the plan holds nothing of P4 now: the whole pool is surplus
    inventory = Inventory(nodes=tuple(_nodes(P4, CapacityType.ON_DEMAND, 7)))
    held: list[HeldBack] = []
    (terminate,) = reconcile(desired, inventory, held_back=held)
    assert terminate.count == 4  # ceil(7 / 2)
    (back,) = held
    assert (back.running, back.surplus, back.allowed, back.held) == (7, 7, 4, 3)
    assert "3 of 7 terminations held back" in back.describe()
    (terminate,) = reconcile(desired, inventory, budget=DisruptionBudget.parse("2"))
    assert terminate.count == 2
    assert reconcile(desired, inventory, budget=DisruptionBudget.parse("0")) == []
    (terminate,) = reconcile(desired, inventory, budget=None)
    assert terminate.count == 7
    # failed nodes are outside the budget: they serve nothing
    broken = Inventory(nodes=tuple(_nodes(P4, CapacityType.ON_DEMAND, 3, state="failed")))
    (terminate,) = reconcile(_state(pools=[]), broken, budget=DisruptionBudget.parse("0"))
    assert terminate.target == "failed nodes" and terminate.count == 3


def test_terraforms_nodes_count_toward_their_pool_and_are_never_terminated() -> None:
    from planner.operations.reconcile import terraform_notes

    pool = _pool(P4, CapacityType.ON_DEMAND, 3)
    theirs = _terraform(_nodes(P4, CapacityType.ON_DEMAND, 2))
    ours = _nodes(P4, CapacityType.ON_DEMAND, 3, first=10)
    # 2 of Terraform's and 3 of ours for a pool of 3: two of ours go, none of Terraform's
    (terminate,) = reconcile(_state(pools=[pool]), Inventory(nodes=(*theirs, *ours)), budget=None)
    assert terminate.count == 2 and not {n.id for n in theirs} & set(terminate.node_ids)
    # Terraform's alone beyond the plan: nothing to do, and a note says whose they are
    many = _terraform(_nodes(P4, CapacityType.ON_DEMAND, 5))
    desired = _state(pools=[pool])
    assert reconcile(desired, Inventory(nodes=tuple(many)), budget=None) == []
    (note,) = terraform_notes(desired, Inventory(nodes=tuple(many)))
    assert "holds 5 nodes, 2 more than the plan" in note
    # they count toward the pool: nothing launched beside them
    assert reconcile(desired, Inventory(nodes=tuple(many[:3]))) == []
    # failed, at risk, or of a finished run: still Terraform's to handle
    failed = _terraform(_nodes(P4, CapacityType.ON_DEMAND, 1, state="failed"))
    assert [a.kind for a in reconcile(desired, Inventory(nodes=(*many[:3], *failed)))] == []
    gang = _terraform(_nodes(P5, CapacityType.ON_DEMAND, 2, run="old-0", first=50))
    retired = reconcile(_state(pools=[]), Inventory(nodes=tuple(gang)), retire_finished_runs=True)
    assert retired == []


def test_terraforms_groups_and_reservations_are_never_deleted() -> None:
    from models.naming import BY_TERRAFORM, TAG_MANAGED_BY

    tags = {TAG_MANAGED_BY: BY_TERRAFORM}
    inventory = Inventory(
        placement_groups=(PlacementGroup("tf-pg", "us-east-1", run="gone-0", tags=tags),),
        reservations=(CapacityReservation("tf-cr", P5, 2, run="gone-0", tags=tags),),
    )
    assert reconcile(_state(pools=[]), inventory) == []
    ours = Inventory(
        placement_groups=(PlacementGroup("pg", "us-east-1", run="gone-0"),),
        reservations=(CapacityReservation("cr", P5, 2, run="gone-0"),),
    )
    assert {a.kind for a in reconcile(_state(pools=[]), ours)} == {
        ActionKind.RELEASE_RESERVATION, ActionKind.DELETE_PLACEMENT_GROUP,
    }  # fmt: skip


def test_names_that_collide_in_the_clouds_are_refused_at_validation(tmp_path: Path, kit) -> None:
    from models.scenario import parse

    job = {"team": "t", "nodes": 2, "gpus_per_node": 8, "hours": 4, "gpu_models": ["H100"]}
    data = kit.scenario_dict(hours=24, training=[{"name": "ft a", **job}, {"name": "FT-A", **job}])
    with pytest.raises(InputError) as caught:
        parse(data, tmp_path / "scenario.yaml")
    message = str(caught.value)
    assert "training[1].name" in message and "'FT-A' and 'ft a'" in message and "'ft-a'" in message
    data["training"][1]["name"] = "ft-b"
    assert [j.name for j in parse(data, tmp_path / "scenario.yaml").training] == ["ft a", "ft-b"]


@pytest.mark.parametrize("text", ["1_0", "١٠", "nan%", "inf", "2.5", "true", "-1", "150%"])
def test_a_disruption_budget_is_read_as_strictly_as_every_number(text: str) -> None:
    """``--disruption-budget`` and daemon.yaml's ``disruption_budget``: plain digits, whole nodes, 0-100 %."""
    from planner.operations.reconcile import DisruptionBudget

    with pytest.raises(ValueError, match="is not a disruption budget"):
        DisruptionBudget.parse(text)
    assert DisruptionBudget.parse("3") == DisruptionBudget(share=None, nodes=3)
    assert DisruptionBudget.parse(" 25% ") == DisruptionBudget(share=0.25, nodes=None)
