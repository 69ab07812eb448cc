"""Faults driven through the daemon on the simulated cloud: it keeps running, backs off, reports, and the
fleet ends at the plan with nothing made twice.

Each test drives ``Daemon.tick`` on its own clock in one-minute steps (never sleeping) with reconcile due
hourly and the default backoff (5 minutes after the first failed run, doubling). What the fleet should
hold is read from the plan's allocations.csv (``daemon_days.planned``), not from the reconciler; what it
holds is read from the simulated cloud's own state file.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from daemon_days import START, cached_planner, daemon_config, fleet, planned

from models.naming import pool_name
from models.tiers import CapacityType
from planner.operations.daemon.config import load_config
from planner.operations.daemon.store import RetryPolicy as StoreRetry
from planner.operations.daemon.store import Store
from planner.outputs.desired import run_name
from providers.base import LaunchSpec, Node, RetryPolicy
from providers.sim import SimProvider

AT = START + timedelta(hours=1)
#: reconcile hourly; prices and re-planning off (not under test here: one plan throughout)
JOBS = {
    "refresh_prices": {"every_minutes": 60, "enabled": False},
    "replan": {"every_hours": 24, "enabled": False},
    "reconcile": {"every_minutes": 60},
    "watch_interruptions": {"every_minutes": 30},
    "commitment_expiry": {"every_hours": 24},
}


def _daemon(tmp_path: Path, scenario: Path, cloud_retry: RetryPolicy | None = None, **extra: Any) -> Any:
    from planner.operations.daemon.daemon import Daemon

    config = load_config(daemon_config(tmp_path, scenario, **{"launch_batch": 4, "jobs": JOBS, **extra}))
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None, retry=cloud_retry)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    daemon = Daemon(config, provider=cloud, planner=cached_planner)
    daemon.replan(START)
    return daemon, cloud


def _reconciles(daemon: Any, minutes: range, at_minute: Callable[[int], None] = lambda _m: None) -> list[int]:
    """Tick once a minute over ``minutes`` after AT; the minutes at which reconcile ran."""
    ran = []
    for minute in minutes:
        at_minute(minute)
        if "reconcile" in daemon.tick(AT + timedelta(minutes=minute)):
            ran.append(minute)
    return ran


def _made_once(state: Path) -> None:
    """Every node the cloud ever made answers one launch token: no intent was launched twice."""
    data = json.loads(state.read_text(encoding="utf-8"))
    made = [i for ids in data["tokens"].values() for i in ids]
    assert len(made) == len(set(made)) == len(data["nodes"])


def _metric(daemon: Any, line: str) -> float:
    for row in daemon.metrics.exposition().decode().splitlines():
        if row.startswith(line + " "):
            return float(row.split()[-1])
    raise AssertionError(f"no metric {line}")


def test_a_throttling_storm_fails_cycles_with_growing_waits_then_the_fleet_recovers(
    scenario: Path, tmp_path: Path
) -> None:
    daemon, cloud = _daemon(tmp_path, scenario, cloud_retry=RetryPolicy(attempts=3))
    cloud.inject_fault("launch", "throttled", times=100_000)  # every launch, past the adapter's retries

    def storm_ends(minute: int) -> None:
        if minute == 30:
            cloud.clear_faults()

    ran = _reconciles(daemon, range(0, 50), storm_ends)
    assert ran == [0, 5, 15, 35]  # failed at 0, 5 and 15: waits of 5, 10, 20 minutes; then it went through
    failed = daemon.store.events("job-failed")
    assert [e.data["failures"] for e in failed] == [1, 2, 3]
    assert all("throttled x" in e.message for e in failed)
    assert [e.kind for e in daemon.store.events("job-recovered")] == ["job-recovered"]
    plan = daemon.current_plan()
    assert fleet(daemon.config.sim_state) == planned(plan, AT + timedelta(minutes=35))
    _made_once(daemon.config.sim_state)
    assert _metric(daemon, 'gpuplan_job_failures_total{job="reconcile"}') == 3
    assert _metric(daemon, 'gpuplan_job_consecutive_failures{job="reconcile"}') == 0
    assert daemon.health()["jobs"]["reconcile"]["last_success"] == (AT + timedelta(minutes=35)).isoformat()


def test_a_batch_that_fails_part_way_keeps_its_nodes_reports_the_shortfall_and_is_topped_up(
    scenario: Path, tmp_path: Path
) -> None:
    daemon, cloud = _daemon(tmp_path, scenario)
    wanted = planned(daemon.current_plan(), AT)
    pool, nodes = max(
        ((p, n) for p, n in wanted.items() if p.endswith(f"-{CapacityType.ON_DEMAND}")), key=lambda pn: pn[1]
    )
    assert nodes >= 2, wanted
    batch = min(4, nodes)  # the first launch of the pool: one batch of launch_batch nodes
    cloud.inject_fault("launch", "insufficient-capacity", match=pool, made=1)
    assert _reconciles(daemon, range(0, 1)) == [0]
    held = fleet(daemon.config.sim_state)
    assert held[pool] == nodes - batch + 1  # the batch kept the one node it made; the others launched
    (short,) = daemon.store.events("shortfall")
    assert short.data == {pool: batch - 1}
    assert _metric(daemon, f'gpuplan_shortfall_nodes{{pool="{pool}"}}') == batch - 1
    assert _reconciles(daemon, range(1, 10)) == [5]  # backed off 5 minutes, then topped up
    assert fleet(daemon.config.sim_state) == planned(daemon.current_plan(), AT + timedelta(minutes=5))
    _made_once(daemon.config.sim_state)
    assert 'gpuplan_shortfall_nodes{pool="' not in daemon.metrics.exposition().decode()  # cleared


def test_a_cloud_that_times_out_is_waited_out_and_a_lost_answer_is_not_launched_again(
    scenario: Path, tmp_path: Path
) -> None:
    daemon, cloud = _daemon(tmp_path, scenario)
    wanted = planned(daemon.current_plan(), AT)
    pool = max((p for p in wanted if p.endswith(("-spot", "-on-demand"))), key=lambda p: wanted[p])
    cloud.inject_fault("inventory", "timeout")  # the whole cycle: no answer to the first read
    assert _reconciles(daemon, range(0, 1)) == [0]
    assert not fleet(daemon.config.sim_state)
    (first,) = daemon.store.events("job-failed")
    assert "Timeout" in first.message
    cloud.inject_fault("launch", "timeout", match=pool, after=True)  # one launch acts; its answer is lost
    assert _reconciles(daemon, range(1, 10)) == [5]
    assert fleet(daemon.config.sim_state) == wanted  # the lost launch did make its nodes
    assert "timeout x1" in daemon.store.events("job-failed")[-1].message
    assert _reconciles(daemon, range(10, 20)) == [15]  # the next cycle reads them and launches nothing
    assert fleet(daemon.config.sim_state) == wanted
    _made_once(daemon.config.sim_state)
    cycles = daemon.store.cycles()
    assert [c.status for c in cycles] == ["failed", "done"]  # the inventory timeout began no cycle
    assert not cycles[-1].summary["actions"]


class _LockingCloud:
    """The simulated cloud, but after its ``lock_after``-th launch the daemon's SQLite database is locked
    by another connection (an exclusive transaction) until the test releases it: the database goes away
    between a launch and the journal's record of its result."""

    def __init__(self, cloud: SimProvider, database: Path, lock_after: int) -> None:
        self._cloud = cloud
        self._database = database
        self._left = lock_after
        self.holder: sqlite3.Connection | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cloud, name)

    def launch(self, spec: LaunchSpec) -> list[Node]:
        made = self._cloud.launch(spec)
        self._left -= 1
        if self._left == 0:
            self.holder = sqlite3.connect(self._database, isolation_level=None, check_same_thread=False)
            self.holder.execute("BEGIN EXCLUSIVE")
        return made

    def release(self) -> None:
        assert self.holder is not None
        self.holder.execute("ROLLBACK")
        self.holder.close()


def test_a_database_down_mid_cycle_fails_the_job_and_the_next_cycle_resumes_to_the_plan(
    scenario: Path, tmp_path: Path
) -> None:
    from planner.operations.daemon.daemon import Daemon

    config = load_config(daemon_config(tmp_path, scenario, launch_batch=4, jobs=JOBS))
    database = tmp_path / "daemon.db"
    store = Store(
        f"sqlite:///{database}",
        retry=StoreRetry(attempts=3, base_seconds=0.01, cap_seconds=0.02),
        busy_timeout_seconds=0.02,
    )
    sim = SimProvider(config.sim_state, sleep=lambda _s: None)
    sim.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    cloud = _LockingCloud(sim, database, lock_after=2)
    daemon = Daemon(config, provider=cloud, store=store, planner=cached_planner)  # type: ignore[arg-type]
    daemon.replan(START)
    wanted = planned(daemon.current_plan(), AT)
    assert sum(wanted.values()) > 8  # more than two launches of 4: the database goes mid-cycle
    # every job due fails at its first write (SQLite's readers go on under the lock), none stops the tick
    assert daemon.tick(AT) == ["reconcile", "watch_interruptions", "commitment_expiry"]
    assert all(daemon.failures(job)[0] == 1 for job in ("reconcile", "watch_interruptions"))
    made = sum(fleet(config.sim_state).values())
    assert 0 < made < sum(wanted.values())  # the first two launches went out, the rest never did
    cloud.release()
    (pending,) = store.pending(_plan_id(daemon))
    assert pending.kind == "launch"  # sent, its result never recorded: in doubt
    assert _reconciles(daemon, range(1, 10)) == [5]
    assert fleet(config.sim_state) == planned(daemon.current_plan(), AT + timedelta(minutes=5))
    _made_once(config.sim_state)
    (resumed,) = store.events("resume")
    assert resumed.data["entries"] == [{"id": pending.id, "outcome": "found", "status": "done"}]
    assert not store.pending(_plan_id(daemon))


def _plan_id(daemon: Any) -> str:
    from planner.outputs.desired import plan_id_of

    return plan_id_of(daemon.current_plan().document)


def test_backoff_doubles_from_the_shorter_of_interval_and_first_to_the_longer_of_interval_and_max() -> None:
    from planner.operations.daemon.config import Backoff

    backoff = Backoff(first_minutes=5, max_minutes=60)
    minutes = [backoff.seconds(300, n) / 60 for n in range(1, 8)]
    assert minutes == [5, 10, 20, 40, 60, 60, 60]  # reconcile every 5 minutes
    daily = [backoff.seconds(86400, n) / 60 for n in (1, 2, 9, 10, 100)]
    assert daily == [5, 10, 1280, 1440, 1440]  # a daily replan is tried again in minutes, never past a day
    assert [backoff.seconds(60, n) for n in (1, 2, 3)] == [60, 120, 240]  # a 1-minute job starts at 1


def test_under_apscheduler_a_failed_run_backs_off_and_moves_the_next_run_up(
    scenario: Path, tmp_path: Path
) -> None:
    """run_job is what APScheduler calls (at the real time now: before the plan starts, so the job used is
    watch_interruptions, which asks the cloud at any time)."""
    from apscheduler.schedulers.background import BackgroundScheduler

    from planner.operations.daemon import scheduler as production

    daemon, cloud = _daemon(tmp_path, scenario)
    key = daemon.config.database_url
    jobs = BackgroundScheduler(timezone="UTC")
    jobs.start(paused=True)
    job = "watch_interruptions"  # every 30 minutes in the config; a day in this scheduler
    jobs.add_job(production.run_job, "interval", hours=24, args=[key, job], id=job)
    production._DAEMONS[key], production._SCHEDULERS[key] = daemon, jobs
    try:
        cloud.inject_fault("interruptions", "timeout", times=2)
        production.run_job(key, job)
        assert daemon.failures(job)[0] == 1
        retry = daemon.next_run(job)
        assert retry is not None
        assert jobs.get_job(job).next_run_time == retry  # the backoff's 5 minutes, not the interval's day
        production.run_job(key, job)  # too early: skipped, no call made, nothing counted
        assert daemon.failures(job)[0] == 1 and len(daemon.store.events("job-failed")) == 1
        assert cloud.calls().count("interruptions") == 1
    finally:
        production._DAEMONS.pop(key), production._SCHEDULERS.pop(key)
        jobs.shutdown(wait=False)


def test_fallback_options_are_the_plans_alike_offerings_cheapest_first_and_never_spot_for_on_demand(
    scenario: Path, tmp_path: Path
) -> None:
    from planner.operations.daemon.daemon import fallback_options

    daemon, _cloud = _daemon(tmp_path, scenario)
    plan = daemon.current_plan()
    offerings = plan.document.offerings
    for offering, record in offerings.items():
        alike = {
            o
            for o, r in offerings.items()
            if o != offering and r.gpu_model == record.gpu_model and r.gpus_per_node == record.gpus_per_node
        }
        on_demand = fallback_options(plan, offering, CapacityType.ON_DEMAND)
        assert on_demand == sorted(
            ((o, CapacityType.ON_DEMAND) for o in alike), key=lambda oc: offerings[oc[0]].on_demand_usd_h
        )
        spot = fallback_options(plan, offering, CapacityType.SPOT)
        expected = {(o, CapacityType.SPOT) for o in alike} | {(o, CapacityType.ON_DEMAND) for o in alike}
        assert set(spot) == expected | {(offering, CapacityType.ON_DEMAND)}
        prices = [
            offerings[o].spot_usd_h if c is CapacityType.SPOT else offerings[o].on_demand_usd_h
            for o, c in spot
        ]
        assert prices == sorted(prices)


def test_an_on_demand_pool_the_cloud_cannot_fill_moves_to_an_alike_offering_until_its_own_is_back(
    scenario: Path, tmp_path: Path
) -> None:
    from planner.operations.daemon.daemon import fallback_options

    daemon, cloud = _daemon(tmp_path, scenario, launch_batch=100)
    plan = daemon.current_plan()
    wanted = planned(plan, AT)
    pools_capacity = CapacityType.ON_DEMAND
    pools = {pool_name(o, pools_capacity): o for o in plan.document.offerings}
    pool, offering = next(
        (p, o)
        for p, o in sorted(pools.items())
        if wanted[p] and fallback_options(plan, o, CapacityType.ON_DEMAND)
    )
    ((alike, _),) = fallback_options(plan, offering, CapacityType.ON_DEMAND)
    alike_pool = pool_name(alike, CapacityType.ON_DEMAND)
    cloud.configure(capacity={f"{offering}/on-demand": 0})  # a stock-out of the pool's own offering

    daemon.run("reconcile", AT)
    held = fleet(daemon.config.sim_state)
    assert held[pool] == 0 and held[alike_pool] == wanted[alike_pool] + wanted[pool]
    standing = _stand_ins(daemon.config.sim_state)
    assert standing == {pool: wanted[pool]}  # each stand-in says whose nodes it holds
    assert not daemon.store.events("job-failed") and not daemon.store.events("shortfall")

    again = daemon.run("reconcile", AT + timedelta(minutes=10))  # still stocked out
    assert again is not None and not [a for a in again.actions if a.stands_in]  # none made twice
    assert fleet(daemon.config.sim_state) == held and not daemon.store.events("job-failed")

    cloud.configure(capacity={f"{offering}/on-demand": 1000})  # its own capacity is back
    daemon.run("reconcile", AT + timedelta(minutes=20))
    assert fleet(daemon.config.sim_state) == wanted and _stand_ins(daemon.config.sim_state) == {}
    _made_once(daemon.config.sim_state)


def test_a_gang_the_cloud_cannot_place_is_a_shortfall_not_moved(scenario: Path, tmp_path: Path) -> None:
    daemon, cloud = _daemon(tmp_path, scenario)
    plan = daemon.current_plan()
    gang = next(t for t in plan.document.training if t.nodes > 1)
    at = gang.start + timedelta(minutes=30)
    name = run_name(gang.job, gang.run)
    cloud.inject_fault("launch", "insufficient-capacity", match=name, times=10)
    daemon.run("reconcile", at)
    held = fleet(daemon.config.sim_state)
    assert held[name] == 0
    (short,) = daemon.store.events("shortfall")
    assert short.data == {name: gang.nodes}
    assert not _stand_ins(daemon.config.sim_state)  # a gang keeps its placement: never split elsewhere
    assert "insufficient-capacity x1" in daemon.store.events("job-failed")[-1].message


def _stand_ins(state: Path) -> dict[str, int]:
    """Live fallback nodes per pool they stand in for, from the simulated cloud's file."""
    data = json.loads(state.read_text(encoding="utf-8"))
    held = Counter(
        n["tags"]["gpuplan-stands-in"]
        for n in data["nodes"].values()
        if n["state"] != "terminated" and "gpuplan-stands-in" in n["tags"]
    )
    return dict(held)


def test_a_rebalance_notice_replaces_the_node_before_it_is_let_go(scenario: Path, tmp_path: Path) -> None:
    daemon, cloud = _daemon(tmp_path, scenario)
    daemon.run("reconcile", AT)
    wanted = planned(daemon.current_plan(), AT)
    data = json.loads(daemon.config.sim_state.read_text(encoding="utf-8"))
    node, pool = next(
        (i, n["pool"])
        for i, n in sorted(data["nodes"].items())
        if n["state"] != "terminated" and n["run"] is None and n["capacity"] == "spot"
    )
    cloud.interrupt(node, kind="rebalance")  # at elevated risk: not reclaimed yet

    assert daemon.run("watch_interruptions", AT + timedelta(minutes=10)) == [f"{node}:rebalance"]
    held = fleet(daemon.config.sim_state)
    assert held[pool] == wanted[pool] + 1  # the replacement runs beside the node at risk, which still serves
    assert _live(daemon.config.sim_state, node)

    daemon.run("reconcile", AT + timedelta(minutes=20))  # the pool runs without it: it goes
    assert fleet(daemon.config.sim_state) == wanted and not _live(daemon.config.sim_state, node)
    assert daemon.store.get_state("at_risk") == []
    _made_once(daemon.config.sim_state)


def _live(state: Path, node: str) -> bool:
    return json.loads(state.read_text(encoding="utf-8"))["nodes"][node]["state"] != "terminated"


def test_an_interruption_is_replaced_in_the_same_cycle_and_the_checkpoint_beats_the_deadline(
    scenario: Path, tmp_path: Path
) -> None:
    """Issue 35 point 7: a spot interruption warning (two minutes, as EC2's) of a pool node gets its
    replacement in the watch's own cycle, before the cloud takes the node; one of a gang's nodes calls the
    run's checkpoint hook at once, which records that it finished before the notice ran out."""
    marker = tmp_path / "checkpointed"
    hook = {"command": [sys.executable, "-c", f"open({str(marker)!r}, 'a').write('{{run}} {{deadline}}\\n')"]}
    daemon, cloud = _daemon(tmp_path, scenario, checkpoint_hook=hook)
    gang = next(t for t in daemon.current_plan().document.training if t.nodes > 1)
    at = max(AT, gang.start + timedelta(hours=1))
    daemon.run("reconcile", at)
    wanted = planned(daemon.current_plan(), at)
    data = json.loads(daemon.config.sim_state.read_text(encoding="utf-8"))
    live = {i: n for i, n in sorted(data["nodes"].items()) if n["state"] != "terminated"}
    node, pool = next((i, n["pool"]) for i, n in live.items() if n["run"] is None and n["capacity"] == "spot")
    gang_node, run = next((i, n["run"]) for i, n in live.items() if n["run"] is not None)
    cloud.interrupt(node)  # the two-minute warning: the node still runs, the cloud takes it at the deadline
    cloud.interrupt(gang_node)

    notices = daemon.run("watch_interruptions", at + timedelta(minutes=10))
    assert sorted(notices) == sorted([f"{node}:interruption", f"{gang_node}:interruption"])
    data = json.loads(daemon.config.sim_state.read_text(encoding="utf-8"))
    replacements = [
        i for i, n in data["nodes"].items() if n["pool"] == pool and n["run"] is None and i not in live
    ]
    assert len(replacements) == 1  # launched in the watch's cycle, not the next reconcile's
    (event,) = [e for e in daemon.store.events("interruption") if e.data and e.data["node"] == node]
    assert event.data is not None and event.data["deadline"] is not None
    (checkpoint,) = daemon.store.events("checkpoint")
    assert (
        checkpoint.data is not None and checkpoint.data["run"] == run and checkpoint.data["in_time"] is True
    )
    assert checkpoint.data["finished"] < checkpoint.data["deadline"]
    assert marker.read_text(encoding="utf-8").split()[0] == run
    daemon.run("reconcile", at + timedelta(minutes=20))  # the interrupted node is gone; the pool is whole
    assert fleet(daemon.config.sim_state)[pool] == wanted[pool]
