"""The daemon's store and action journal (issue 16 point 2): journaled before sent, resumed after a kill.

Every test runs on SQLite; those that take ``db_url`` also run on a throwaway PostgreSQL server started
from the machine's binaries (``postgres_server.py``; skipped with the reason where it cannot start), each
test in a database of its own. The kill test SIGKILLs ``daemon_kill_worker.py`` in the middle of an apply
that launches the mixed-fleet week's fleet node by node on the ``sim`` provider, restarts it, and checks
the sim's own state file: the fleet is exactly the plan's, and no node was ever made twice.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from postgres_server import PostgresServer, fresh_database

from models.actions import Action, ActionKind, ActionResult
from models.naming import pool_name
from models.plan import Plan
from planner.operations.daemon.journal import apply_journaled, resume
from planner.operations.daemon.store import RetryPolicy, Store, action_key
from planner.operations.errors import StoreUnavailable
from planner.operations.provision import Provisioning, apply, launch_spec, prepare
from planner.outputs.desired import desired_state, plan_id_of
from providers.base import LaunchSpec, PlacementGroupSpec, Provider, ReservationSpec, SpotPrice
from providers.sim import SimProvider

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("daemon_kill_worker.py")


# ----------------------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'daemon.db'}"
    return fresh_database(request.getfixturevalue("pg"))


@pytest.fixture
def week(week_plan: Callable[[str], Path], tmp_path: Path) -> tuple[Path, datetime, Plan]:
    """The AWS mixed-fleet week, copied, and the hour after its gang starts (its group, reservation and
    launch are all due then, beside the pools)."""
    plan_dir = tmp_path / "plan"
    shutil.copytree(week_plan("aws"), plan_dir)
    plan = Plan.read(plan_dir)
    gang = next(t for t in plan.document.training if t.nodes > 1)
    return plan_dir, gang.start + timedelta(hours=1), plan


def _sim(tmp_path: Path, name: str = "sim.json") -> SimProvider:
    sim = SimProvider(tmp_path / name)
    sim.configure(api_latency_seconds=0, boot_seconds=0)
    return sim


class Recording:
    """A SimProvider that records, at each create call, the journal status of the call's token: the
    proof that the intent was committed before the call went out."""

    def __init__(self, sim: SimProvider, store: Store, plan_id: str) -> None:
        self._sim, self._store, self._plan_id = sim, store, plan_id
        self.seen: list[tuple[str, str, str | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)

    def _record(self, operation: str, token: str) -> None:
        entry = self._store.entry(self._plan_id, token)
        self.seen.append((operation, token, None if entry is None else entry.status))

    def launch(self, spec: LaunchSpec) -> Any:
        self._record("launch", spec.token)
        return self._sim.launch(spec)

    def ensure_placement_group(self, spec: PlacementGroupSpec) -> Any:
        self._record("ensure_placement_group", spec.token)
        return self._sim.ensure_placement_group(spec)

    def ensure_reservation(self, spec: ReservationSpec) -> Any:
        self._record("ensure_reservation", spec.token)
        return self._sim.ensure_reservation(spec)


def _sim_state(path: Path) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(path.read_text(encoding="utf-8")))


# ----------------------------------------------------------------------------------------------------------
# the journal


def test_each_action_is_journaled_pending_before_its_call_and_a_second_apply_sends_nothing(
    db_url: str, week: tuple[Path, datetime, Plan], tmp_path: Path
) -> None:
    _, at, plan = week
    sim = _sim(tmp_path)
    plan_id = plan_id_of(plan.document)
    with Store(db_url) as store:
        recording = Recording(sim, store, plan_id)
        provider = cast(Provider, recording)
        run = prepare(plan, provider, at, launch_batch=2)
        cycle = store.begin_cycle("reconcile", plan_id, at)
        results = apply_journaled(run, provider, store, cycle)
        store.finish_cycle(cycle, "done", {"actions": len(results)})

        creates = [a for a in run.actions if a.token]
        assert len(creates) == len(run.actions) >= 10  # every action of a fresh fleet is a create
        assert recording.seen == [(_operation(a), a.token, "pending") for a in creates]
        entries = store.entries(plan_id)
        assert [(e.action_id, e.key, e.status) for e in entries] == [(a.id, a.token, "done") for a in creates]
        assert all(e.cycle_id == cycle and e.result == results[e.action_id] for e in entries)
        assert {e.action for e in entries} == set(run.actions)
        assert [c.status for c in store.cycles()] == ["done"]

        # the same actions again (an inventory that lags, a re-run of the cycle): nothing is sent
        calls = len(sim.calls())
        again = prepare(plan, provider, at, launch_batch=2)
        again.actions = list(run.actions)
        repeated = apply_journaled(again, provider, store, store.begin_cycle("reconcile", plan_id, at))
        assert repeated == results
        assert sim.calls()[calls:] == ["inventory"]  # the prepare's read, and no create
        assert len(store.entries(plan_id)) == len(entries)


def _operation(action: Action) -> str:
    return {
        ActionKind.LAUNCH: "launch",
        ActionKind.CREATE_PLACEMENT_GROUP: "ensure_placement_group",
        ActionKind.CREATE_RESERVATION: "ensure_reservation",
    }[action.kind]


def test_keys_are_unique_per_plan_and_statuses_move_pending_to_done_or_failed(tmp_path: Path) -> None:
    launch = Action(id=1, kind=ActionKind.LAUNCH, target="pool-a", offering="aws:r:t", token="tok-1", count=1)
    stop = Action(id=2, kind=ActionKind.TERMINATE, target="pool-a", node_ids=("n-2", "n-1"), count=2)
    assert action_key(launch) == "tok-1"
    assert action_key(stop) == "terminate:pool-a:n-1,n-2"
    many = stop.model_copy(update={"node_ids": tuple(f"i-{n:017x}" for n in range(200))})
    assert len(action_key(many)) <= 255 and action_key(many) != action_key(stop)

    with Store(f"sqlite:///{tmp_path / 'd.db'}") as store:
        first = store.journal(1, "plan", launch)
        assert first is not None and first.status == "pending" and first.key == "tok-1"
        again = store.journal(2, "plan", launch)  # still in doubt: the same entry, not a second one
        assert again is not None and again.id == first.id
        other_plan = store.journal(1, "other", launch)  # unique per plan, not across plans
        assert other_plan is not None and other_plan.id != first.id
        store.finish(first.id, ActionResult(status="done", made=("n-1",)))
        assert store.journal(3, "plan", launch) is None  # done: never journaled (nor sent) twice
        assert store.pending("plan") == []

        entry = store.journal(1, "plan", stop)
        assert entry is not None
        store.finish(entry.id, ActionResult(status="failed", error_kind="throttled", message="slow down"))
        failed = store.entries("plan", status="failed")
        assert [(e.key, e.result and e.result.error_kind) for e in failed] == [(entry.key, "throttled")]
        retry = store.journal(4, "plan", stop)  # a failed intent is taken up again, in the same row
        assert (
            retry is not None and retry.id == entry.id and retry.status == "pending" and retry.cycle_id == 4
        )
        assert [e.id for e in store.pending("plan")] == [entry.id]
        assert len(store.entries("plan")) == 2 and len(store.entries()) == 3


def test_a_failed_launch_is_journaled_failed_and_the_next_cycle_retries_it_in_the_same_entry(
    week: tuple[Path, datetime, Plan], tmp_path: Path
) -> None:
    _, at, plan = week
    sim = _sim(tmp_path)
    plan_id = plan_id_of(plan.document)
    with Store(f"sqlite:///{tmp_path / 'd.db'}") as store:
        run = prepare(plan, sim, at)
        spot = next(a for a in run.actions if a.kind is ActionKind.LAUNCH and a.capacity == "spot")
        sim.inject_fault("launch", "insufficient-capacity", match=spot.target)
        apply_journaled(run, sim, store, store.begin_cycle("reconcile", plan_id, at))
        statuses = {e.key: e.status for e in store.entries(plan_id)}
        assert statuses.pop(spot.token) == "failed"
        assert set(statuses.values()) == {"done"}
        failed = store.entry(plan_id, spot.token)
        assert failed is not None and failed.result is not None
        assert failed.result.error_kind == "insufficient-capacity"

        retry = prepare(plan, sim, at)  # the stock-out is over: only the short pool is left, same token
        assert [a.token for a in retry.actions] == [spot.token]
        results = apply_journaled(retry, sim, store, store.begin_cycle("reconcile", plan_id, at))
        assert [r.status for r in results.values()] == ["done"]
        after = store.entry(plan_id, spot.token)
        assert after is not None and after.id == failed.id and after.status == "done"


def test_resume_finds_what_was_sent_and_resends_only_what_was_not(
    db_url: str, week: tuple[Path, datetime, Plan], tmp_path: Path
) -> None:
    _, at, plan = week
    sim = _sim(tmp_path)
    plan_id = plan_id_of(plan.document)
    run = prepare(plan, sim, at)
    group = next(a for a in run.actions if a.kind is ActionKind.CREATE_PLACEMENT_GROUP)
    pools = [a for a in run.actions if a.kind is ActionKind.LAUNCH and not a.run]
    sent, unsent = pools[0], pools[1]
    with Store(db_url) as store:
        cycle = store.begin_cycle("reconcile", plan_id, at)
        # a killed process: the group and one launch went out before it died, the other launch did not
        for action in (group, sent, unsent):
            assert store.journal(cycle, plan_id, action) is not None
        part = Provisioning(run.provider, run.desired, run.inventory, [group, sent], [])
        apply(part, sim)
        made = {n["id"] for n in _sim_state(sim.path)["nodes"].values()}
        assert len(made) == sent.count

        calls = len(sim.calls())
        report = resume(store, sim, plan_id)
        assert [(r.entry.action.id, r.outcome, r.result.status) for r in report] == [
            (group.id, "found", "done"),
            (sent.id, "found", "done"),
            (unsent.id, "re-sent", "done"),
        ]
        launches = [c for c in sim.calls()[calls:] if c != "inventory"]
        assert launches == ["launch"]  # only the one that never went out
        nodes = _sim_state(sim.path)["nodes"].values()
        assert Counter(n["pool"] for n in nodes) == {
            sent.target: sent.count,
            unsent.target: unsent.count,
        }
        assert store.pending(plan_id) == []
        assert [c.status for c in store.cycles()] == ["crashed"]
        assert [e.kind for e in store.events()] == ["resume"]
        assert resume(store, sim, plan_id) == []  # settled: a second start finds nothing to do

        # a terminate left pending whose nodes are gone is done; one whose nodes live is re-sent
        node_ids = tuple(sorted(made))
        stop = Action(id=9, kind=ActionKind.TERMINATE, target=sent.target, node_ids=node_ids, count=1)
        entry = store.journal(cycle, plan_id, stop)
        assert entry is not None
        (again,) = resume(store, sim, plan_id)
        assert again.outcome == "re-sent" and again.result.status == "done"
        assert sim.inventory(plan_id).live_nodes() and not {
            n.id for n in sim.inventory(plan_id).live_nodes()
        } & set(node_ids)
        store.finish(entry.id, ActionResult(status="failed"))
        store.journal(cycle, plan_id, stop)
        (found,) = resume(store, sim, plan_id)
        assert found.outcome == "found"


def test_a_resent_launch_keeps_its_token_so_the_cloud_makes_nothing_twice(tmp_path: Path) -> None:
    """The in-doubt case resume cannot see from counts alone: the launch went out, but the pool still
    looks short (its nodes were lost since). The re-send carries the same token, and the sim replays it."""
    sim = _sim(tmp_path)
    launch = Action(
        id=1,
        kind=ActionKind.LAUNCH,
        target="aws-us-east-1-p5-48xlarge-on-demand",
        offering="aws:us-east-1:p5.48xlarge",
        capacity="on-demand",
        count=2,
        target_nodes=2,
        token="token-once",
    )
    with Store(f"sqlite:///{tmp_path / 'd.db'}") as store:
        assert store.journal(1, "plan", launch) is not None
        first = sim.launch(launch_spec(launch, "plan"))
        sim.terminate(first[:1])
        (report,) = resume(store, sim, "plan")
        assert report.outcome == "re-sent" and report.result.made == tuple(n.id for n in first)
        assert len(_sim_state(sim.path)["nodes"]) == 2


# ----------------------------------------------------------------------------------------------------------
# the kill test


def _spawn(db: str, sim_path: Path, plan_dir: Path, at: datetime) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(WORKER), "--db", db, "--sim", str(sim_path), "--plan", str(plan_dir)]
    command += ["--at", f"{at:%Y-%m-%dT%H:%M:%SZ}"]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_daemon_killed_mid_apply_resumes_to_exactly_the_plan_with_no_duplicate(
    db_url: str, week: tuple[Path, datetime, Plan], tmp_path: Path
) -> None:
    plan_dir, at, plan = week
    sim_path = tmp_path / "sim.json"
    plan_id = plan_id_of(plan.document)
    with Store(db_url) as watcher:
        worker = _spawn(db_url, sim_path, plan_dir, at)
        try:
            # kill it once 5 actions are done and the next one is journaled but unfinished: in doubt
            deadline = time.monotonic() + 60
            while watcher.count_entries("done") < 5 or watcher.count_entries("pending") < 1:
                assert worker.poll() is None, f"the worker ended before the kill: {worker.communicate()}"
                assert time.monotonic() < deadline, "the worker journaled no 5 actions in 60 s"
                time.sleep(0.005)
            worker.send_signal(signal.SIGKILL)
        finally:
            worker.wait(timeout=30)
        assert worker.returncode == -signal.SIGKILL
        killed = Counter(e.status for e in watcher.entries(plan_id))
        assert killed["pending"] == 1  # one action at a time: one was in doubt
        assert [c.status for c in watcher.cycles()] == ["running"]

        restart = _spawn(db_url, sim_path, plan_dir, at)
        out, err = restart.communicate(timeout=120)
        assert restart.returncode == 0, err[-3000:]
        summary = json.loads(out.strip().splitlines()[-1])
        entries = watcher.entries(plan_id)
        assert killed["done"] < len(entries)  # the kill came mid-apply: the restart had work left
        assert [r["status"] for r in summary["resumed"]] == ["done"]  # found, or re-sent with its token
        assert summary["sent"] == len(entries) - killed["done"] - killed["pending"]
        assert all(e.status == "done" for e in entries)
        assert [c.status for c in watcher.cycles()] == ["crashed", "done"]

    desired = desired_state(plan, at, handles=lambda _: True)
    wanted = Counter({(p.pool, None): p.nodes for p in desired.pools})
    wanted.update({(pool_name(g.offering, g.capacity), g.run): g.nodes for g in desired.gangs})
    assert sum(wanted.values()) >= 30

    state = _sim_state(sim_path)
    nodes = state["nodes"]
    live = Counter((n["pool"], n["run"]) for n in nodes.values() if n["state"] != "terminated")
    assert live == wanted  # per pool and gang, exactly the plan
    assert len(nodes) == sum(wanted.values())  # no node beyond them was ever made (none terminated)
    made_by = Counter(node for ids in state["tokens"].values() for node in ids)
    assert set(made_by) == set(nodes) and set(made_by.values()) == {1}  # every node: one token's
    for entry in entries:
        if entry.kind == "launch":  # each launch's token made exactly its nodes, once
            assert len(state["tokens"][entry.key]) == entry.action.count
    assert len(state["placement_groups"]) == len([g for g in desired.gangs if g.placement_group])
    assert len(state["reservations"]) == len([g for g in desired.gangs if g.reserve])


# ----------------------------------------------------------------------------------------------------------
# a database that goes away


def test_sqlite_locked_briefly_is_retried_and_locked_for_good_is_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    policy = RetryPolicy(attempts=6, base_seconds=0.1, cap_seconds=0.5)
    with Store(f"sqlite:///{path}", retry=policy, sleep=sleep, busy_timeout_seconds=0.02) as store:
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN EXCLUSIVE")
        release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
        release.start()
        try:
            store.set_state("plan_dir", "/srv/plans/week-7")  # blocked for 0.3 s, then written
        finally:
            release.join()
        assert waits, "the lock was never hit: the test proves nothing"
        assert sum(waits) < 2.0
        assert store.get_state("plan_dir") == "/srv/plans/week-7"

    counted: list[float] = []  # the waits of a lock held for good are counted, not slept
    with Store(f"sqlite:///{path}", retry=policy, sleep=counted.append, busy_timeout_seconds=0.02) as store:
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StoreUnavailable, match=r"unavailable after 6 attempts: database is locked"):
                store.set_state("plan_dir", "elsewhere")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert counted == [0.1, 0.2, 0.4, 0.5, 0.5]
        assert store.get_state("plan_dir") == "/srv/plans/week-7"


def test_a_database_that_stays_down_names_its_url_with_the_password_masked() -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    secret = "s3cr3t-Pa55"
    url = f"postgresql+psycopg2://gpuplan:{secret}@127.0.0.1:{port}/gpuplan"
    waits: list[float] = []
    with pytest.raises(StoreUnavailable) as caught:
        Store(url, retry=RetryPolicy(attempts=3, base_seconds=0.01), sleep=waits.append)
    message = str(caught.value)
    assert secret not in message and secret not in repr(caught.value)
    assert f"gpuplan:***@127.0.0.1:{port}/gpuplan" in message and "after 3 attempts" in message
    assert waits == [0.01, 0.02]
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_postgresql_server_stopped_then_started_is_waited_for(pg: PostgresServer) -> None:
    url = fresh_database(pg)
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    with Store(url, retry=RetryPolicy(attempts=8, base_seconds=0.25, cap_seconds=2.0), sleep=sleep) as store:
        store.set_state("last_replan", "2027-02-01T00:00:00Z")
        pg.stop()
        restart = threading.Timer(0.5, pg.start)
        restart.start()
        try:
            store.record_event("warning", "written while the server restarts")
        finally:
            restart.join()
            if not _accepts(pg):  # leave the session's server up for the tests after this one
                pg.start()
        assert waits, "the server was never missed: the test proves nothing"
        assert [e.message for e in store.events()] == ["written while the server restarts"]
        assert store.get_state("last_replan") == "2027-02-01T00:00:00Z"


def _accepts(server: PostgresServer) -> bool:
    import socket

    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", server.port)) == 0


# ----------------------------------------------------------------------------------------------------------
# the rest of the store


def test_prices_state_and_events_round_trip(db_url: str) -> None:
    t0 = datetime(2027, 2, 1, tzinfo=UTC)
    with Store(db_url) as store:
        assert store.latest_prices() == {} and store.get_state("missing", 7) == 7
        assert store.record_prices(
            [
                SpotPrice("aws:us-east-1:p5.48xlarge", 30.0, t0, "us-east-1a"),
                SpotPrice("aws:us-east-1:p5.48xlarge", 28.0, t0 + timedelta(hours=1), "us-east-1a"),
                SpotPrice("aws:us-east-1:p5.48xlarge", 27.5, t0 + timedelta(hours=1), "us-east-1b"),
                SpotPrice("aws:us-east-1:p4d.24xlarge", 12.0, t0, None),
            ]
        )
        assert store.latest_prices() == {
            "aws:us-east-1:p5.48xlarge": (27.5, t0 + timedelta(hours=1)),
            "aws:us-east-1:p4d.24xlarge": (12.0, t0),
        }
        store.set_state("inputs", {"digest": "abc", "files": 3})
        store.set_state("inputs", {"digest": "def", "files": 3})
        assert store.get_state("inputs") == {"digest": "def", "files": 3}
        store.record_event("interruption", "sim-000001 reclaimed", at=t0, data={"node": "sim-000001"})
        store.record_event("warning", "commitment ends in 7 days")
        assert [(e.kind, e.data) for e in store.events()] == [
            ("interruption", {"node": "sim-000001"}),
            ("warning", None),
        ]
        assert [e.kind for e in store.events(limit=1)] == ["warning"]
        assert store.events("interruption")[0].at == t0
