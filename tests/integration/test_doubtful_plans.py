"""Nothing destructive from a doubtful plan (issue 35 point 1).

A plan directory whose allocations.csv was cut short (a partial copy, a full disk) or belongs to another
plan would hold no pools in the periods it lacks: provisioning it would terminate the live fleet. Every
command that acts on a plan directory (provision, terraform, k8s, chargeback, report, the daemon) refuses
such a directory with exit 2 (one line naming the file and what is wrong) and writes nothing. Beyond
that, a shrink the plan does ask for is limited per pool and cycle by the disruption budget (half the
pool's running nodes by default), so no single run empties a pool; ``--allow-shrink`` lifts it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from models.errors import InputError
from models.naming import managed_tags, pool_name
from models.plan import Plan
from models.tiers import CapacityType
from planner.cli import app
from planner.outputs.desired import period_of, plan_id_of
from providers.base import LaunchSpec
from providers.sim import SimProvider


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    return result.exit_code, result.output


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def _cut(plan_dir: Path) -> None:
    """``head -n 500 plan/allocations.csv > cut/allocations.csv`` (the issue cut a year at 1000)."""
    lines = (plan_dir / "allocations.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) > 500
    (plan_dir / "allocations.csv").write_text("".join(lines[:500]), encoding="utf-8")


def _foreign(plan_dir: Path, other: Path) -> None:
    shutil.copy(other / "allocations.csv", plan_dir / "allocations.csv")


def _old_and_cut(plan_dir: Path) -> None:
    """A plan written before plans recorded their allocations.csv, cut short: the totals give it away."""
    data = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    del data["allocations_file"]
    (plan_dir / "plan.json").write_text(json.dumps(data), encoding="utf-8")
    _cut(plan_dir)


DOUBTS = {
    "cut short": (_cut, ("allocations.csv", "is not the file written with plan.json", "499 rows")),
    "of another plan": (None, ("allocations.csv", "is not the file written with plan.json")),
    "an old plan, cut short": (_old_and_cut, ("plan.json", "costs.total_usd", "does not reconcile")),
}


def _commands(plan_dir: Path, out: Path, at: str) -> dict[str, list[str]]:
    return {
        "provision": [
            "provision",
            str(plan_dir),
            "--at",
            at,
            "--sim-state",
            str(out / "sim.json"),
            "--apply",
        ],
        "terraform": ["terraform", str(plan_dir), "-o", str(out / "tf")],
        "k8s": ["k8s", str(plan_dir), "-o", str(out / "k8s")],
        "chargeback": ["chargeback", str(plan_dir), "-o", str(out / "cb")],
        "report": ["report", str(plan_dir)],
    }


@pytest.mark.parametrize("doubt", sorted(DOUBTS))
@pytest.mark.parametrize("command", ["provision", "terraform", "k8s", "chargeback", "report"])
def test_every_command_that_acts_on_a_plan_refuses_a_doubtful_directory(
    week_plan: Callable[[str], Path], tmp_path: Path, doubt: str, command: str
) -> None:
    plan_dir = _copy(week_plan("aws"), tmp_path / "plan")
    break_it, needles = DOUBTS[doubt]
    if break_it is None:
        _foreign(plan_dir, week_plan("gcp"))
    else:
        break_it(plan_dir)
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    at = plan["horizon"]["start"]
    code, output = _run(_commands(plan_dir, tmp_path, at)[command])
    assert code == 2, output
    line = " ".join(output.split())
    assert all(needle in line for needle in needles), output
    assert "Traceback" not in output
    # nothing written, nothing done
    assert not (tmp_path / "sim.json").exists() or '"nodes": {}' in (tmp_path / "sim.json").read_text()
    assert (
        not (tmp_path / "tf").exists() and not (tmp_path / "k8s").exists() and not (tmp_path / "cb").exists()
    )
    assert not (plan_dir / "report.html").exists() and not (plan_dir / "actions.json").exists()


def test_verify_still_reads_a_doubtful_directory_and_reports_it(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    """verify is where a doubtful plan is looked at: it reads it untrusted and lists what is wrong."""
    plan_dir = _copy(week_plan("aws"), tmp_path / "plan")
    _cut(plan_dir)
    with pytest.raises(InputError, match=r"is not the file written with plan\.json"):
        Plan.read(plan_dir)
    untrusted = Plan.read(plan_dir, trusted=False)
    assert len(untrusted.allocations) == 499


def test_a_whole_plan_directory_still_reads(week_plan: Callable[[str], Path]) -> None:
    plan = Plan.read(week_plan("aws"))
    recorded = plan.document.allocations_file
    assert recorded is not None and recorded.rows == len(plan.allocations) > 500


def _extra_nodes(state: Path, plan: Plan, at_hour: int, factor: int) -> tuple[str, int]:
    """Launch ``factor`` times the nodes the plan holds in one on-demand pool at ``at_hour``, straight on
    the simulated cloud (as an older plan, or a hand, left them); (pool, nodes the plan holds)."""
    rows = plan.allocations
    non_spot = ~rows["tier"].isin(["spot", "owned"])
    rows = rows[(rows["period"] == at_hour) & (rows["kind"] == "inference") & non_spot]
    held = rows.groupby("offering")["nodes"].sum()
    offering = str(held.idxmax())
    nodes = int(-(-held.max() // 1))
    pool = pool_name(offering, CapacityType.ON_DEMAND)
    cloud = SimProvider(state, sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    tags = managed_tags(plan_id_of(plan.document), pool=pool)
    spec = LaunchSpec(offering, CapacityType.ON_DEMAND, nodes * factor, pool, tags, token="extra")
    cloud.launch(spec)
    return pool, nodes


def test_a_shrink_beyond_the_budget_waits_unless_allowed(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir = _copy(week_plan("all"), tmp_path / "plan")
    plan = Plan.read(plan_dir)
    at = plan.document.horizon.start + timedelta(hours=3)
    state = tmp_path / "sim.json"
    pool, held = _extra_nodes(state, plan, period_of(plan.document, at), factor=4)  # 3x of them surplus
    base = ["provision", str(plan_dir), "--at", f"{at:%Y-%m-%dT%H:%M:%SZ}", "--sim-state", str(state)]
    code, output = _run([*base, "--actions", str(tmp_path / "a.json")])
    assert code == 0, output
    actions = json.loads((tmp_path / "a.json").read_text())["actions"]
    (terminate,) = [a for a in actions if a["kind"] == "terminate" and a["target"] == pool]
    running = 4 * held
    assert terminate["count"] == -(-running // 2)  # half of the running nodes, rounded up
    assert f"{pool}: {3 * held - terminate['count']} of {3 * held} terminations held back" in " ".join(
        output.split()
    )
    code, output = _run([*base, "--allow-shrink", "--actions", str(tmp_path / "b.json")])
    assert code == 0, output
    actions = json.loads((tmp_path / "b.json").read_text())["actions"]
    (terminate,) = [a for a in actions if a["kind"] == "terminate" and a["target"] == pool]
    assert terminate["count"] == 3 * held
    code, output = _run([*base, "--disruption-budget", "half", "--actions", str(tmp_path / "c.json")])
    assert code == 2 and "--disruption-budget" in output and "is not a disruption budget" in output


def _daemon(tmp_path: Path, plan_dir: Path, **extra: Any) -> Any:
    """A daemon on the simulated cloud that only reconciles, applying, with ``plan_dir`` as its plan."""
    from daemon_days import daemon_config

    from planner.operations.daemon.config import load_config
    from planner.operations.daemon.daemon import Daemon

    off = {"every_hours": 10000, "enabled": False}
    jobs = {
        "refresh_prices": off,
        "replan": {**off, "price_change": 0.25},
        "reconcile": {"every_minutes": 60},
        "watch_interruptions": off,
        "commitment_expiry": {**off, "warn_days": 30},
    }
    config = load_config(daemon_config(tmp_path, plan_dir.parent / "scenario.yaml", jobs=jobs, **extra))
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    daemon = Daemon(config, provider=cloud)
    daemon.store.set_state("plan_dir", str(plan_dir))
    return daemon


def test_the_daemon_refuses_a_doubtful_plan_and_touches_nothing(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir = _copy(week_plan("all"), tmp_path / "week" / "plan")
    shutil.copy(week_plan("all").parent / "scenario.yaml", tmp_path / "week" / "scenario.yaml")
    _cut(plan_dir)
    daemon = _daemon(tmp_path, plan_dir)
    now = Plan.read(plan_dir, trusted=False).document.horizon.start + timedelta(hours=3)
    daemon.tick(now)
    (failed,) = daemon.store.events("job-failed")
    assert "allocations.csv" in failed.message and "is not the file written with plan.json" in failed.message
    assert daemon.provider.calls() == []  # not even an inventory read


def test_the_daemon_records_each_shrink_its_budget_holds_back(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir = _copy(week_plan("all"), tmp_path / "week" / "plan")
    shutil.copy(week_plan("all").parent / "scenario.yaml", tmp_path / "week" / "scenario.yaml")
    plan = Plan.read(plan_dir)
    now = plan.document.horizon.start + timedelta(hours=3)
    daemon = _daemon(tmp_path, plan_dir, disruption_budget="2")
    pool, held = _extra_nodes(daemon.config.sim_state, plan, period_of(plan.document, now), factor=4)
    daemon.tick(now)
    (event,) = daemon.store.events("disruption-budget")
    assert event.data["pool"] == pool and event.data["surplus"] == 3 * held and event.data["allowed"] == 2
    state = json.loads(daemon.config.sim_state.read_text(encoding="utf-8"))
    live = [n for n in state["nodes"].values() if n["pool"] == pool and n["state"] != "terminated"]
    assert len(live) == 4 * held - 2  # two went this cycle; the rest wait
