"""A refused gang reservation falls back only as far as the plan allows (issue 35 point 3).

The scenario's ``training[].fallback`` (``other-zone``, ``no-reservation``, ``capacity-block``; default all,
in that order; ``[]`` the reservation or nothing) is planned into ``plan.json``, read back by provision from
the plan directory, and obeyed: the reservation action tells the adapter whether other zones may be tried,
a gang launch goes without its reservation only when ``no-reservation`` is allowed, and Capacity Blocks are
named only when ``capacity-block`` is. Each refused step is named in the result the summary prints. Run on
a tiny plan (one two-node H100 gang on AWS, planned in well under a second) and the simulated cloud.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_gangs_launch import BlockSeller

from models.actions import Action, ActionKind
from models.errors import InputError
from models.inputs import load_inputs
from models.plan import Plan
from models.scenario import FALLBACKS, parse
from planner.operations.provision import Provisioning, apply, prepare, reservation_spec
from planner.planning.optimize import SolveSettings, optimize
from providers.sim import SimProvider


def scenario(**gang: Any) -> dict[str, Any]:
    return {
        "name": "gang-fallback",
        "horizon": {"start": "2027-02-01T00:00:00Z", "hours": 24, "period_hours": 1},
        "clouds": {"aws": {"regions": ["us-east-1"]}},
        "teams": [{"name": "research"}],
        "training": [
            {"name": "pretrain", "team": "research", "nodes": 2, "gpu_models": ["H100"], "hours": 6, **gang}
        ],
    }


def planned(tmp_path: Path, **gang: Any) -> tuple[Plan, datetime]:
    """The scenario planned and written to ``tmp_path/plan``, read back from the directory (as provision
    reads it), and a time its gang runs at."""
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(scenario(**gang)), encoding="utf-8")
    inputs = load_inputs(tmp_path / "scenario.yaml")
    settings = SolveSettings(gap=0.05, time_limit=10, certify=False)
    (tmp_path / "plan").mkdir()
    optimize(inputs.scenario, inputs.catalog, inputs.base_dir, settings).write(tmp_path / "plan")
    plan = Plan.read(tmp_path / "plan")
    (run,) = plan.document.training
    assert run.tier == "on_demand"  # a reserved gang: what the fallback is about
    return plan, run.start + timedelta(minutes=30)


def sim(path: Path, cls: type[SimProvider] = SimProvider) -> SimProvider:
    cloud = cls(path)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    return cloud


def gang_actions(run: Provisioning) -> tuple[Action, Action]:
    reservation = next(a for a in run.actions if a.kind is ActionKind.CREATE_RESERVATION)
    launch = next(a for a in run.actions if a.kind is ActionKind.LAUNCH and a.run == reservation.run)
    return reservation, launch


def gang_nodes(cloud: SimProvider, run: Provisioning, name: str) -> list[Any]:
    return [n for n in cloud.inventory(run.desired.plan_id).live_nodes() if n.run == name]


# ---- the scenario field ------------------------------------------------------------------------------


def test_unknown_fallback_is_refused_naming_the_run_and_the_allowed_values() -> None:
    with pytest.raises(InputError) as caught:
        parse(scenario(fallback=["other-zone", "spot"]), "s.yaml")
    assert str(caught.value) == (
        "s.yaml: training[0].fallback: run 'pretrain': unknown fallback 'spot'; allowed: other-zone, "
        "no-reservation, capacity-block"
    )
    with pytest.raises(InputError, match=r"training\[0\].fallback: run 'pretrain': must be a list"):
        parse(scenario(fallback="no-reservation"), "s.yaml")
    with pytest.raises(InputError, match="a fallback is listed twice"):
        parse(scenario(fallback=["no-reservation", "no-reservation"]), "s.yaml")


def test_fallback_defaults_to_all_in_order_and_an_empty_list_is_nothing() -> None:
    assert (
        parse(scenario()).training[0].fallback
        == FALLBACKS
        == (
            "other-zone",
            "no-reservation",
            "capacity-block",
        )
    )
    assert parse(scenario(fallback=[])).training[0].fallback == ()
    assert parse(scenario(fallback=["capacity-block", "other-zone"])).training[0].fallback == (
        "capacity-block",
        "other-zone",
    )


def test_the_fallback_travels_in_plan_json_to_the_gang_actions(tmp_path: Path) -> None:
    plan, at = planned(tmp_path, fallback=["no-reservation"])
    written = json.loads((tmp_path / "plan" / "plan.json").read_text(encoding="utf-8"))
    assert written["training"][0]["fallback"] == ["no-reservation"]
    run = prepare(plan, sim(tmp_path / "sim.json"), at)
    (gang,) = run.desired.gangs
    assert gang.fallback == ("no-reservation",)
    reservation, launch = gang_actions(run)
    assert reservation.fallback == launch.fallback == ("no-reservation",)
    assert reservation.describe().endswith("; if refused: no-reservation")
    assert reservation_spec(reservation, run.desired.plan_id).other_zones is False  # what the adapter obeys
    # a plan written before the field (null) allows all, in order, and says nothing more
    del written["training"][0]["fallback"]
    (tmp_path / "plan" / "plan.json").write_text(json.dumps(written), encoding="utf-8")
    old = prepare(Plan.read(tmp_path / "plan"), sim(tmp_path / "sim2.json"), at)
    reservation, _ = gang_actions(old)
    assert reservation.fallbacks == FALLBACKS and "if refused" not in reservation.describe()
    assert reservation_spec(reservation, old.desired.plan_id).other_zones is True


# ---- provision obeys it ------------------------------------------------------------------------------


def test_an_empty_fallback_keeps_the_gang_waiting_for_its_reservation(tmp_path: Path) -> None:
    plan, at = planned(tmp_path, fallback=[])
    cloud = sim(tmp_path / "sim.json")
    cloud.inject_fault("ensure_reservation", "insufficient-capacity")
    run = prepare(plan, cloud, at)
    reservation, launch = gang_actions(run)
    apply(run, cloud)
    assert run.results[reservation.id].status == "failed"
    result = run.results[launch.id]
    assert result.status == "skipped"
    assert f"reservation {reservation.target} failed (insufficient-capacity" in result.message
    assert (
        "no launch without it (the plan's fallback refuses other-zone, no-reservation, capacity-block)"
        in (result.message)
    )
    assert not gang_nodes(cloud, run, launch.run or "")


def test_no_reservation_allowed_launches_without_it_and_names_what_the_plan_refuses(tmp_path: Path) -> None:
    plan, at = planned(tmp_path, fallback=["no-reservation"])
    cloud = sim(tmp_path / "sim.json", BlockSeller)
    BlockSeller.asked.clear()
    cloud.inject_fault("ensure_reservation", "insufficient-capacity")
    run = prepare(plan, cloud, at)
    _, launch = gang_actions(run)
    apply(run, cloud)
    result = run.results[launch.id]
    assert result.status == "done", result.message
    assert "launched without it; 2 nodes running" in result.message
    assert result.message.endswith("(the plan's fallback refuses other-zone, capacity-block)")
    assert len(gang_nodes(cloud, run, launch.run or "")) == 2
    # no capacity on demand either: the Capacity Blocks are not listed, the plan refuses them
    cloud2 = sim(tmp_path / "sim2.json", BlockSeller)
    cloud2.inject_fault("ensure_reservation", "insufficient-capacity")
    run2 = prepare(plan, cloud2, at)
    _, launch2 = gang_actions(run2)
    cloud2.inject_fault("launch", "insufficient-capacity", match=launch2.run or "")
    apply(run2, cloud2)
    failed = run2.results[launch2.id]
    assert failed.status == "failed" and "which failed too" in failed.message
    assert "no Capacity Block listed" in failed.message and "Capacity Blocks offered" not in failed.message
    assert BlockSeller.asked == []


def test_capacity_block_without_no_reservation_names_the_offers_at_once(tmp_path: Path) -> None:
    """The order skips a refused step: reservation refused, no launch without it, the blocks offered."""
    plan, at = planned(tmp_path, fallback=["capacity-block"])
    cloud = sim(tmp_path / "sim.json", BlockSeller)
    BlockSeller.asked.clear()
    cloud.inject_fault("ensure_reservation", "insufficient-capacity")
    run = prepare(plan, cloud, at)
    _, launch = gang_actions(run)
    apply(run, cloud)
    result = run.results[launch.id]
    assert result.status == "skipped"
    assert "(the plan's fallback refuses other-zone, no-reservation)" in result.message
    assert "1 Capacity Blocks offered, the first cb-0123456789abcdef0" in result.message
    assert [(o, n) for o, n, _ in BlockSeller.asked] == [(launch.offering, 2)]
    assert not gang_nodes(cloud, run, launch.run or "")
