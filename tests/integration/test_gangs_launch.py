"""Gangs that launch (issue 35 point 3): all or nothing for real, and a failed reservation that falls back.

A targeted reservation of a whole gang in one zone is what clouds refuse most often; a launch that needed
it used to be skipped, cycle after cycle. Now the order is: the adapter tries the region's other zones
(its own ``ensure_reservation``), then provision launches the gang without a reservation, and if the cloud
has no capacity for that either, the summary names the Capacity Blocks offered for it. A gang launch that
fails part way leaves nothing running. Run on the simulated cloud (its faults are the cloud's answers)
through provision's operations layer, and once through the CLI for the summary's words.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from typer.testing import CliRunner

from models.actions import ActionKind
from models.plan import Plan
from planner.cli import app
from planner.operations.provision import Provisioning, apply, prepare
from providers.base import Capability, CapacityBlockOffer
from providers.sim import SimProvider


def _sim(path: Path) -> SimProvider:
    sim = SimProvider(path)
    sim.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    return sim


def _gang(run: Provisioning) -> tuple[Any, Any]:
    reservation = next(a for a in run.actions if a.kind is ActionKind.CREATE_RESERVATION)
    launch = next(a for a in run.actions if a.kind is ActionKind.LAUNCH and a.run == reservation.run)
    return reservation, launch


def test_a_refused_reservation_falls_back_to_a_launch_without_it(
    gang_week: tuple[Path, Plan, datetime], tmp_path: Path
) -> None:
    _, plan, at = gang_week
    sim = _sim(tmp_path / "sim.json")
    sim.inject_fault("ensure_reservation", "insufficient-capacity")
    run = prepare(plan, sim, at)
    reservation, launch = _gang(run)
    assert launch.reservation == reservation.target and reservation.id in launch.depends_on
    apply(run, sim)
    assert run.results[reservation.id].status == "failed"
    result = run.results[launch.id]
    assert result.status == "done", result.message
    assert f"fallback: reservation {reservation.target} failed (insufficient-capacity)" in result.message
    assert f"{launch.count} nodes running" in result.message
    gang = [n for n in sim.inventory(run.desired.plan_id).live_nodes() if n.run == launch.run]
    assert len(gang) == launch.count
    assert {n.reservation for n in gang} == {None}  # on demand, in its placement group
    assert {n.placement_group for n in gang} == {launch.placement_group}
    # the next cycle finds the gang whole: no reservation is asked for again, nothing to do for it
    again = prepare(plan, sim, at)
    assert not [a for a in again.actions if a.run == launch.run]


def test_a_failed_placement_group_still_skips_its_gang(
    gang_week: tuple[Path, Plan, datetime], tmp_path: Path
) -> None:
    """The fallback is for a refused reservation only: a gang without its placement group does not launch."""
    _, plan, at = gang_week
    sim = _sim(tmp_path / "sim.json")
    sim.inject_fault("ensure_placement_group", "operation-failed")
    run = prepare(plan, sim, at)
    _, launch = _gang(run)
    apply(run, sim)
    assert run.results[launch.id].status == "skipped"


class BlockSeller(SimProvider):
    """The simulated cloud selling Capacity Blocks as EC2 lists them (what the fallback's last step reads)."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {*SimProvider.capabilities, Capability.CAPACITY_BLOCKS}
    )
    asked: ClassVar[list[tuple[str, int, int]]] = []

    def capacity_block_offerings(
        self,
        offering: str,
        nodes: int,
        hours: int,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> list[CapacityBlockOffer]:
        self.asked.append((offering, nodes, hours))
        assert start is not None
        return [
            CapacityBlockOffer(
                "cb-0123456789abcdef0",
                offering,
                "us-east-1a",
                nodes,
                start + timedelta(hours=3),
                None,
                hours,
                91_000.0,
            )
        ]

    def purchase_capacity_block(self, offering_id: str, **_: Any) -> Any:
        raise AssertionError("the fallback lists blocks; buying one is a person's decision")


def test_no_capacity_on_demand_either_names_the_capacity_blocks_offered(
    gang_week: tuple[Path, Plan, datetime], tmp_path: Path
) -> None:
    _, plan, at = gang_week
    BlockSeller.asked.clear()  # a class attribute: another test in this worker may have asked before
    seller = BlockSeller(tmp_path / "sim.json")
    seller.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    seller.inject_fault("ensure_reservation", "insufficient-capacity")
    run = prepare(plan, seller, at)
    _, launch = _gang(run)
    seller.inject_fault("launch", "insufficient-capacity", match=launch.run)
    apply(run, seller)
    message = run.results[launch.id].message
    assert run.results[launch.id].status == "failed"
    assert "launched without it, which failed too" in message
    assert "1 Capacity Blocks offered, the first cb-0123456789abcdef0" in message
    assert "gpuplan provision --buy-capacity-block ID --max-usd N" in message
    ((offering, nodes, hours),) = BlockSeller.asked
    assert (offering, nodes) == (launch.offering, launch.count)
    assert hours % 24 == 0 and hours >= 24  # whole days, covering the run to its reservation's end
    assert not [n for n in seller.inventory(run.desired.plan_id).live_nodes() if n.run == launch.run]


def test_a_gang_launch_that_fails_part_way_leaves_nothing_running(
    gang_week: tuple[Path, Plan, datetime], tmp_path: Path
) -> None:
    _, plan, at = gang_week
    sim = _sim(tmp_path / "sim.json")
    run = prepare(plan, sim, at)
    _, launch = _gang(run)
    assert launch.count >= 8
    sim.inject_fault("launch", "insufficient-capacity", match=launch.run, made=5)
    apply(run, sim)
    result = run.results[launch.id]
    assert result.status == "failed" and result.made == ()
    assert "the 5 nodes it made anyway were terminated (a gang is all or nothing)" in result.message
    assert not [n for n in sim.inventory(run.desired.plan_id).live_nodes() if n.run == launch.run]
    # a pool keeps what a short launch made (it serves), and says how short it is
    pool = next(a for a in run.actions if a.kind is ActionKind.LAUNCH and not a.run)
    sim2 = _sim(tmp_path / "sim2.json")
    run2 = prepare(plan, sim2, at)
    sim2.inject_fault("launch", "insufficient-capacity", match=pool.target, made=1)
    apply(run2, sim2)
    kept = run2.results[pool.id]
    assert kept.status == "failed" and len(kept.made) == 1


def test_the_summary_says_the_gang_fell_back(gang_week: tuple[Path, Plan, datetime], tmp_path: Path) -> None:
    plan_dir, _, at = gang_week
    state = tmp_path / "sim.json"
    _sim(state).inject_fault("ensure_reservation", "insufficient-capacity")
    args = [
        "provision",
        str(plan_dir),
        "--cloud",
        "sim",
        "--sim-state",
        str(state),
        "--at",
        f"{at:%Y-%m-%dT%H:%M:%SZ}",
    ]
    result = CliRunner().invoke(app, [*args, "--apply"], catch_exceptions=False)
    assert "fallback: reservation res-" in result.output
    assert "launched without it" in result.output
