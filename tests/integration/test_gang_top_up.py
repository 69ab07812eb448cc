"""A gang that cannot be whole is not paid for (issue 35 point 3, the residual): a top-up that fails takes
the gang's survivors with it.

A gang that lost nodes (spot reclaims, a failed host) is topped up with ``gang.nodes - have``. When the
top-up failed, only its own nodes were undone: the survivors kept running and billing while the run could
not train, retried every cycle. Now the top-up launch carries the survivors (``node_ids``, never a
Terraform root's), and a failure terminates them in the same action, releases the reservation provision
made for the gang (an ODCR bills its unused part at on demand, so terminating the nodes alone would save
nothing), and says so in the summary. On the simulated cloud through provision's operations layer, and
once through the CLI for the summary's words.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from models.actions import ActionKind
from models.naming import BY_TERRAFORM, TAG_MANAGED_BY, pool_name
from models.plan import Plan
from planner.cli import app
from planner.operations.provision import apply, prepare
from planner.operations.reconcile import reconcile
from planner.outputs.desired import DesiredGang, DesiredState, plan_id_of
from providers.base import CapacityType, Inventory, Node, PlacementGroup
from providers.sim import SimProvider


def _sim(path: Path) -> SimProvider:
    sim = SimProvider(path)
    sim.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    return sim


def _gang_nodes(sim: SimProvider, plan_id: str, run: str) -> list[Node]:
    return sorted((n for n in sim.inventory(plan_id).live_nodes() if n.run == run), key=lambda n: n.id)


def _launched_then_lost(plan: Plan, sim: SimProvider, at: datetime, lost: int) -> tuple[str, list[Node]]:
    """The gang launched whole, then ``lost`` of its nodes gone (the cloud took them); its run and the
    survivors."""
    first = prepare(plan, sim, at)
    apply(first, sim)
    run = next(a.run for a in first.actions if a.kind is ActionKind.LAUNCH and a.run)
    assert run is not None
    nodes = _gang_nodes(sim, first.desired.plan_id, run)
    sim.terminate(nodes[:lost])
    return run, nodes[lost:]


def test_a_failed_top_up_terminates_the_survivors_and_nothing_of_the_gang_bills(
    gang_week: tuple[Path, Plan, datetime], tmp_path: Path
) -> None:
    _, plan, at = gang_week
    sim = _sim(tmp_path / "sim.json")
    run, survivors = _launched_then_lost(plan, sim, at, 5)
    assert len(survivors) == 11
    sim.inject_fault("launch", "insufficient-capacity", match=run)  # made nothing
    again = prepare(plan, sim, at + timedelta(minutes=10))  # the default budget: no --allow-shrink
    (top_up,) = [a for a in again.actions if a.kind is ActionKind.LAUNCH and a.run == run]
    assert top_up.count == 5 and top_up.target_nodes == 16
    assert set(top_up.node_ids) == {n.id for n in survivors}
    assert "if this top-up fails, its 11 running nodes are terminated too" in top_up.reason
    apply(again, sim)
    result = again.results[top_up.id]
    assert result.status == "failed" and result.made == ()
    assert "the gang's 11 running nodes (" in result.message
    assert "were terminated (a gang is all or nothing)" in result.message
    assert f"its reservation {top_up.reservation} was released" in result.message
    assert f"nothing of gang {run} runs or bills now; a later cycle launches all 16 nodes" in result.message
    inventory = sim.inventory(again.desired.plan_id)
    assert not [n for n in inventory.live_nodes() if n.run == run], "no node of the gang bills"
    assert not [r for r in inventory.reservations if r.run == run], "nor its reservation"
    # the next cycle asks for the whole gang again, all or nothing
    later = prepare(plan, sim, at + timedelta(minutes=20))
    relaunch = next(a for a in later.actions if a.kind is ActionKind.LAUNCH and a.run == run)
    assert relaunch.count == 16 and relaunch.node_ids == ()


def test_a_top_up_that_succeeds_keeps_the_survivors(
    gang_week: tuple[Path, Plan, datetime], tmp_path: Path
) -> None:
    _, plan, at = gang_week
    sim = _sim(tmp_path / "sim.json")
    run, survivors = _launched_then_lost(plan, sim, at, 5)
    again = prepare(plan, sim, at + timedelta(minutes=10))
    apply(again, sim)
    (top_up,) = [a for a in again.actions if a.kind is ActionKind.LAUNCH and a.run == run]
    assert again.results[top_up.id].status == "done"
    nodes = _gang_nodes(sim, again.desired.plan_id, run)
    assert len(nodes) == 16 and {n.id for n in survivors} <= {n.id for n in nodes}


def test_a_top_up_never_carries_terraforms_nodes() -> None:
    """Terraform's gang nodes count toward the gang but are never the top-up's to terminate."""
    at = datetime(2027, 2, 5, 0, tzinfo=UTC)
    p5 = "aws:us-east-1:p5.48xlarge"
    gang = DesiredGang(run="pretrain-0", job="pretrain", run_index=0, team="research", offering=p5,
                       capacity=CapacityType.SPOT, nodes=4, placement_group="pg-pretrain-0", fabric="efa",
                       start=at, end=at + timedelta(hours=48), running=True, reserve=False)  # fmt: skip
    pool = pool_name(p5, CapacityType.SPOT)
    nodes = [Node(f"i-{k}", p5, CapacityType.SPOT, pool, run="pretrain-0") for k in range(3)]
    nodes[0] = replace(nodes[0], tags={TAG_MANAGED_BY: BY_TERRAFORM})
    desired = DesiredState(plan_id="fleet", at=at, period=96, pools=(), gangs=(gang,), ended_runs=(),
                           purchases=(), notes=())  # fmt: skip
    group = PlacementGroup("pg-pretrain-0", "us-east-1", run="pretrain-0")
    (launch,) = reconcile(desired, Inventory(nodes=tuple(nodes), placement_groups=(group,)))
    assert launch.count == 1 and launch.node_ids == ("i-1", "i-2")
    assert "its 2 running nodes are terminated too" in launch.reason


def test_the_summary_says_the_gang_was_let_go(gang_week: tuple[Path, Plan, datetime], tmp_path: Path) -> None:
    plan_dir, plan, at = gang_week
    state = tmp_path / "sim.json"
    sim = _sim(state)
    run, _ = _launched_then_lost(plan, sim, at, 5)
    sim.inject_fault("launch", "insufficient-capacity", match=run)
    args = ["provision", str(plan_dir), "--cloud", "sim", "--sim-state", str(state)]
    result = CliRunner().invoke(
        app,
        [*args, "--at", f"{at + timedelta(minutes=10):%Y-%m-%dT%H:%M:%SZ}", "--apply"],
        catch_exceptions=False,
    )
    words = " ".join(result.output.split())
    assert "the gang's 11 running nodes" in words
    assert f"nothing of gang {run} runs or bills now" in words
    assert not _gang_nodes(sim, plan_id_of(plan.document), run)
