"""A gang whose placement group keeps failing is seen, not skipped silently (issue 35 point 3).

A gang never launches outside its placement group (it would train slowly), so a group the cloud refuses
skips the gang every cycle. From the second cycle in a row, the daemon records a ``gang-blocked`` event
with the count, the cycle's summary lists the gang under ``blocked``, and the failed cycle's message says
for how many cycles. Driven through ``Daemon.run`` on the simulated cloud with the tiny one-gang plan of
``test_gang_fallback``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from daemon_days import daemon_config
from test_gang_fallback import scenario

from planner.operations.daemon.config import load_config
from planner.outputs.desired import run_name
from providers.sim import SimProvider

JOBS = {
    "refresh_prices": {"every_minutes": 60, "enabled": False},
    "replan": {"every_hours": 24, "enabled": False},
    "reconcile": {"every_minutes": 60},
    "watch_interruptions": {"every_minutes": 30},
    "commitment_expiry": {"every_hours": 24},
}


def blocked(daemon: Any) -> Any:
    """The last reconcile cycle's blocked gangs, from its summary in the store."""
    summary = daemon.store.cycles("reconcile")[-1].summary
    assert summary is not None
    return summary["blocked"]


def test_a_placement_group_failing_cycle_after_cycle_is_a_gang_blocked_event(tmp_path: Path) -> None:
    from planner.operations.daemon.daemon import Daemon

    (tmp_path / "inputs").mkdir()
    path = tmp_path / "inputs" / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario()), encoding="utf-8")
    config = load_config(daemon_config(tmp_path, path, jobs=JOBS))
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    daemon = Daemon(config, provider=cloud)
    daemon.replan(datetime(2027, 2, 1, tzinfo=UTC))  # the scenario's start
    plan = daemon.current_plan()
    assert plan is not None
    (gang,) = plan.document.training
    name = run_name(gang.job, gang.run)
    at = gang.start + timedelta(minutes=10)
    cloud.inject_fault("ensure_placement_group", "operation-failed", times=3)

    daemon.run("reconcile", at)  # the first failure: the gang waits, nothing blocked yet
    assert not daemon.store.events("gang-blocked")
    assert blocked(daemon) == {}
    daemon.run("reconcile", at + timedelta(minutes=20))
    daemon.run("reconcile", at + timedelta(minutes=40))
    events = daemon.store.events("gang-blocked")
    assert [(e.data or {}).get("cycles") for e in events] == [2, 3]
    assert (events[-1].data or {}).get("run") == name
    assert events[-1].message.startswith(f"gang {name} blocked for 3 cycles: its placement group failed")
    assert blocked(daemon) == {name: 3}
    assert f"gang {name} blocked for 3 cycles" in daemon.store.events("job-failed")[-1].message

    daemon.run("reconcile", at + timedelta(minutes=50))  # the cloud makes the group: the count ends
    assert blocked(daemon) == {}
    assert len(daemon.store.events("gang-blocked")) == 2
    assert daemon.store.get_state("blocked_gangs") == {}
