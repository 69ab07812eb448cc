"""Quotas before launch (issue 35 point 8): a launch beyond a quota is refused before anything is created.

The simulated cloud reports quotas as the real adapters do (``Provider.quotas``: a limit, what is in use,
the units one node of each offering and capacity takes); the real clouds' readings are tested in each
adapter's tests. Here: which launches are admitted (a brute force over the order of the action list), that
a refused gang's reservation is not made either, and that the CLI names the quota and what the plan needs.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from models.actions import Action, ActionKind
from models.plan import Plan
from models.tiers import CapacityType
from planner.cli import app
from planner.operations.provision import apply, prepare
from planner.operations.quotas import check_quotas
from providers.base import Quota
from providers.sim import SimProvider

OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT


def _launch(id_: int, offering: str, count: int, capacity: CapacityType = OD, **more: object) -> Action:
    return Action(
        id=id_,
        kind=ActionKind.LAUNCH,
        target=f"t{id_}",
        offering=offering,
        capacity=capacity,
        count=count,
        **more,
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, 96, 192, 384, 576, 1000])
def test_launches_are_admitted_in_order_while_every_quota_has_room(limit: int) -> None:
    """Against a brute force: a launch is sent iff it and the launches admitted before it fit every quota."""
    p5, p4 = "aws:us-east-1:p5.48xlarge", "aws:us-east-1:p4d.24xlarge"
    family = Quota("L-417A185B Running On-Demand P instances", "us-east-1", limit, 0, "vCPUs",
                   {(p5, OD): 192, (p4, OD): 96})  # fmt: skip
    spot = Quota("L-7212CCBC All P Spot Instance Requests", "us-east-1", 192, 96, "vCPUs", {(p5, SPOT): 192})
    actions = [
        _launch(1, p5, 2),
        _launch(2, p4, 1),
        _launch(3, p5, 1, SPOT),
        _launch(4, p4, 3),
        _launch(5, p5, 1),
    ]
    checked = check_quotas(actions, [family, spot])
    room = {"family": float(limit), "spot": 96.0}
    expected = set()
    for action in actions:
        quota = "spot" if action.capacity is SPOT else "family"
        units = action.count * (192 if "p5" in (action.offering or "") else 96)
        if units <= room[quota]:
            room[quota] -= units
        else:
            expected.add(action.id)
    assert set(checked.refused) == expected
    assert 3 in checked.refused  # 96 of the spot quota's 192 in use: a 192-vCPU node does not fit
    assert all(f"quota {q.quota.name}" in q.describe() for q in checked.shortfalls)
    # every subset admitted fits: no order of the admitted launches breaks a quota
    admitted = [a for a in actions if a.id not in checked.refused]
    for r in range(len(admitted) + 1):
        for subset in itertools.combinations(admitted, r):
            used = sum(
                a.count * (192 if "p5" in (a.offering or "") else 96) for a in subset if a.capacity is OD
            )
            assert used <= limit


def test_a_gang_whose_reservation_does_not_fit_is_refused_with_it() -> None:
    """The reservation is checked first (it is made first, and EC2 refuses it beyond the On-Demand
    limit); the launch into it counts once, so it is refused with its reservation, not counted again."""
    p5 = "aws:us-east-1:p5.48xlarge"
    quota = Quota(
        "L-417A185B Running On-Demand P instances", "us-east-1", 1536, 1152, "vCPUs", {(p5, OD): 192}
    )
    reservation = Action(
        id=2, kind=ActionKind.CREATE_RESERVATION, target="res-pretrain", offering=p5, count=16, run="pretrain"
    )
    gang = _launch(3, p5, 16, run="pretrain", reservation="res-pretrain", depends_on=(2,))
    checked = check_quotas([reservation, gang], [quota])
    assert set(checked.refused) == {2, 3}
    assert (
        "the reservation of 16 x aws:us-east-1:p5.48xlarge for gang pretrain needs 3072 vCPUs of quota "
        "L-417A185B Running On-Demand P instances, which has 384 free (limit 1536, 1152 in use"
        in checked.refused[2]
    )
    assert checked.refused[3].startswith("not sent: its reservation #2 was refused too: the reservation")
    (short,) = checked.shortfalls
    assert short.needed == 3072 and short.refused == (2,)


def test_a_refused_gang_takes_its_reservation_with_it() -> None:
    """A reservation that fits, for a gang launch that does not (it asks more nodes than the reservation
    holds): the reservation would bill for a gang that is not there, so it is not made either."""
    p5 = "aws:us-east-1:p5.48xlarge"
    quota = Quota("L-417A185B Running On-Demand P instances", "us-east-1", 2500, 0, "vCPUs", {(p5, OD): 192})
    reservation = Action(
        id=1, kind=ActionKind.CREATE_RESERVATION, target="res-pretrain", offering=p5, count=8, run="pretrain"
    )
    gang = _launch(2, p5, 16, run="pretrain", reservation="res-pretrain", depends_on=(1,))
    checked = check_quotas([reservation, gang], [quota])
    assert set(checked.refused) == {1, 2}
    # the reservation takes 1536 of the 2500 vCPUs; the launch needs 1536 beyond it, and 964 are left
    assert "8 x aws:us-east-1:p5.48xlarge on-demand need 1536 vCPUs of quota" not in checked.refused[2]
    assert "16 x aws:us-east-1:p5.48xlarge on-demand need 1536 vCPUs" in checked.refused[2]
    assert "which has 964 free" in checked.refused[2]
    assert "its gang's launch #2 exceeds a quota" in checked.refused[1]


def test_a_gang_beyond_the_gpu_quota_is_refused_before_anything_is_created(
    gang_week: tuple[Path, Plan, datetime], tmp_path: Path
) -> None:
    plan_dir, plan, at = gang_week
    sim = SimProvider(tmp_path / "sim.json")
    sim.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    gang = next(t for t in plan.document.training if t.nodes > 1 and t.tier != "spot")
    gpus = plan.document.offerings[gang.offering].gpus_per_node
    limit = gpus * (gang.nodes - 1)
    per_node = {f"{gang.offering}/on-demand": gpus}
    quota = {"limit": limit, "unit": "GPUs", "region": "us-east-1", "per_node": per_node}
    sim.configure(quotas={"NVIDIA_H100_GPUS": quota})
    run = prepare(plan, sim, at)
    launch = next(a for a in run.actions if a.kind is ActionKind.LAUNCH and a.run)
    assert launch.id in run.refused
    need = f"{gpus * gang.nodes:g} GPUs of quota NVIDIA_H100_GPUS, which has {limit:g} free"
    assert need in run.refused[launch.id]
    assert any("quota NVIDIA_H100_GPUS in us-east-1" in n for n in run.notes)
    before = len(sim.calls())
    apply(run, sim)
    sent = sim.calls()[before:]
    assert "launch" in sent  # the pools still launch
    assert "ensure_reservation" not in sent  # nothing billed for a gang that cannot run
    assert run.results[launch.id].status == "failed" and run.results[launch.id].error_kind == "quota-exceeded"
    assert not [n for n in sim.inventory(run.desired.plan_id).live_nodes() if n.run == launch.run]

    state = str(tmp_path / "sim.json")
    code_args = [
        "provision",
        str(plan_dir),
        "--cloud",
        "sim",
        "--sim-state",
        state,
        "--at",
        f"{at:%Y-%m-%dT%H:%M:%SZ}",
    ]
    result = CliRunner().invoke(app, code_args, catch_exceptions=False)
    assert "quota NVIDIA_H100_GPUS in us-east-1: the plan's launches need" in " ".join(result.output.split())
