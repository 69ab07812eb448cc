"""`gpuplan provision --capacity-only`: placement groups and reservations for an autoscaler to launch into
(``gpuplan karpenter``), never a node launched or terminated (issue 38 point 5: with Karpenter launching
the pools, a provision that launched them too would double the fleet)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from models.actions import ActionKind
from models.plan import Plan
from planner.cli import app
from planner.operations.provision import CAPACITY_KINDS, apply, prepare
from providers.sim import SimProvider


def test_capacity_only_makes_the_gangs_capacity_and_no_node(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    shutil.copytree(week_plan("aws"), tmp_path / "plan")
    plan = Plan.read(tmp_path / "plan")
    gang = next(t for t in plan.document.training if t.nodes > 1 and t.tier != "spot")
    at = gang.start - timedelta(hours=1)  # inside the lead time: its group and reservation are due
    sim = SimProvider(tmp_path / "sim.json")
    sim.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    full = prepare(plan, sim, at)
    only = prepare(plan, sim, at, capacity_only=True)
    kinds = [a.kind for a in full.actions]
    assert ActionKind.LAUNCH in kinds and ActionKind.CREATE_RESERVATION in kinds
    # the same capacity actions, in the same order, numbered from 1, depending only on each other
    assert [(a.kind, a.target) for a in only.actions] == [
        (a.kind, a.target) for a in full.actions if a.kind in CAPACITY_KINDS
    ]
    assert [a.id for a in only.actions] == list(range(1, len(only.actions) + 1))
    assert all(d < a.id for a in only.actions for d in a.depends_on)
    left = sum(1 for k in kinds if k not in CAPACITY_KINDS)
    assert any(f"capacity only: {left} node launch(es)" in n for n in only.notes)
    apply(only, sim)
    inventory = sim.inventory(only.desired.plan_id)
    assert inventory.nodes == ()  # no node made
    reserved = {a.run for a in only.actions if a.kind is ActionKind.CREATE_RESERVATION}
    assert reserved and {r.run for r in inventory.reservations} == reserved
    assert inventory.placement_groups

    result = CliRunner().invoke(
        app,
        ["provision", str(tmp_path / "plan"), "--cloud", "sim", "--sim-state", str(tmp_path / "sim2.json"),
         "--at", f"{at:%Y-%m-%dT%H:%M:%SZ}", "--capacity-only", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)["actions"]
    assert listed and {a["kind"] for a in listed} <= {str(k) for k in CAPACITY_KINDS}


def test_the_daemon_with_capacity_only_makes_no_node(scenario: Path, tmp_path: Path) -> None:
    from daemon_days import START, cached_planner, daemon_config

    from planner.operations.daemon.config import load_config
    from planner.operations.daemon.daemon import Daemon

    config = load_config(daemon_config(tmp_path, scenario, capacity_only=True))
    assert config.capacity_only and config.apply
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    daemon = Daemon(config, provider=cloud, planner=cached_planner)
    daemon.replan(START)
    run = daemon.reconcile(START + timedelta(hours=3))
    assert run is not None and all(a.kind in CAPACITY_KINDS for a in run.actions)
    assert json.loads(config.sim_state.read_text())["nodes"] == {}
