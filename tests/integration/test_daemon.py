"""`gpuplan daemon` over simulated days on the simulated cloud (issue 16's done-when).

Time is driven by the test: ``Daemon.tick(now)`` runs the jobs that are due at ``now`` on a clock the test
advances in 30-minute steps, never by sleeping. Over four and a half days of the mixed-fleet week (on AWS
offerings, in the simulated cloud) a spot price jumps (refresh_prices sees it, replan plans again with
it), a spot node is interrupted (watch_interruptions replaces it in the same cycle) and the daemon is
restarted (a new process on the same database and cloud). After every reconcile the fleet is checked
against the current plan by an independent reading of its allocations.csv: every pool holds exactly
its planned whole nodes, every running gang all of its own, and nothing else, so no resource was made
twice. The same runs on PostgreSQL where the machine's server binaries start one.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from daemon_days import END, START, STEP, cached_planner, daemon_config, fleet, planned
from typer.testing import CliRunner

from models.naming import pool_name
from models.plan import Plan
from models.tiers import CapacityType
from planner.cli import app
from planner.operations.daemon.config import load_config
from providers.sim import SimProvider


def _run_days(tmp_path: Path, config_path: Path) -> list[str]:
    """Four and a half simulated days; returns what happened, for the assertions."""
    from planner.operations.daemon.daemon import Daemon

    config = load_config(config_path)
    state = config.sim_state
    cloud = SimProvider(state, sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    daemon = Daemon(config, provider=cloud, planner=cached_planner)
    log: list[str] = []
    now = START
    interrupted = restarted = priced = False
    while now < END:
        if not priced and now >= START + timedelta(hours=30):
            plan = daemon.current_plan()
            assert plan is not None
            offering, record = next(
                (o, r) for o, r in sorted(plan.document.offerings.items()) if r.spot_usd_h
            )
            cloud.configure(spot_prices={offering: record.spot_usd_h * 1.6})  # a jump: +60 %
            priced = True
            log.append(f"price {offering}")
        if not interrupted and now >= START + timedelta(hours=50):
            spot = next(
                (
                    i
                    for i, n in json.loads(state.read_text())["nodes"].items()
                    if n["capacity"] == "spot" and n["state"] != "terminated"
                ),
                None,
            )
            if spot is not None:
                cloud.interrupt(spot, warning=timedelta(0))  # taken within the step, as at its deadline
                interrupted = True
                log.append(f"interrupt {spot}")
        if not restarted and now >= START + timedelta(hours=60):
            daemon = Daemon(
                load_config(config_path),
                provider=SimProvider(state, sleep=lambda _s: None),
                planner=cached_planner,
            )
            restarted = True
            log.append("restart")
        before = daemon.store.get_state("last_replan")
        ran = daemon.tick(now)
        if daemon.store.get_state("last_replan") != before:
            log.append(f"replan {now:%dT%H:%M}")
        if "reconcile" in ran or "watch_interruptions" in ran:
            plan = daemon.current_plan()
            assert plan is not None
            assert fleet(state) == planned(plan, now), f"fleet differs from the plan at {now}"
        now += STEP
    assert priced and interrupted and restarted
    assert fleet(state)["pretrain-34b-0"] == 16  # the gang runs, all of it
    return log


def test_days_on_sqlite_match_the_plan_at_every_check(scenario: Path, tmp_path: Path) -> None:
    log = _run_days(tmp_path, daemon_config(tmp_path, scenario))
    assert any(entry.startswith("replan 02T") for entry in log), log  # the price jump re-planned
    data = json.loads((tmp_path / "sim.json").read_text(encoding="utf-8"))
    tokens = Counter(token for token, ids in data["tokens"].items() for _ in ids)
    assert all(count >= 1 for count in tokens.values())
    made = [i for ids in data["tokens"].values() for i in ids]
    assert len(made) == len(set(made))  # no node made for two intents


def test_days_on_postgresql(scenario: Path, tmp_path: Path, postgres_url: str) -> None:
    _run_days(tmp_path, daemon_config(tmp_path, scenario, database=postgres_url))


@pytest.fixture
def postgres_url(pg: Any) -> str:
    from postgres_server import fresh_database

    return fresh_database(pg)


def test_check_validates_and_names_what_is_wrong(scenario: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    path = daemon_config(tmp_path, scenario)
    result = runner.invoke(app, ["daemon", "--config", str(path), "--check"])
    assert result.exit_code == 0 and "valid" in result.output and "applies" in result.output
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for change, message in (
        ({"jobs": {"reconcile": {"every_minutes": 5, "every_hours": 1}}}, "every_minutes or every_hours"),
        ({"scenario": "missing.yaml"}, "scenario"),
        ({"reconcile_every": 5}, "reconcile_every"),
        ({"launch_batch": 0}, "launch_batch"),
    ):
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**data, **change}), encoding="utf-8")
        result = runner.invoke(app, ["daemon", "--config", str(tmp_path / "bad.yaml"), "--check"])
        assert result.exit_code == 2 and message in result.output, result.output


def test_once_from_the_command_line_acts_logs_json_and_leaks_no_secret(
    scenario: Path, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    path = daemon_config(tmp_path, scenario, database=f"sqlite:///{tmp_path / 'once.db'}")
    planted = {
        "AZURE_CLIENT_SECRET": "planted-daemon-secret-5f1c2e",
        "AWS_SECRET_ACCESS_KEY": "planted-aws-9d3b1a",
    }
    env = {**os.environ, **planted}
    args = ["daemon", "--config", str(path), "--once", "--at", "2027-02-01T01:00:00Z"]
    script = f"import sys; sys.argv = ['gpuplan', *{args!r}]; from planner.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "ran refresh_prices, replan, reconcile" in done.stdout
    assert done.stdout.count("re-planned: ") == 1 and "re-planned: no plan yet" in done.stdout  # once
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    for value in planted.values():
        assert value not in done.stdout and value not in done.stderr
    config = load_config(path)
    (plan_dir,) = sorted(config.plans_dir.glob("plan-*"))
    assert fleet(config.sim_state) == planned(Plan.read(plan_dir), datetime(2027, 2, 1, 1, tzinfo=UTC))


def test_commitment_expiry_warns_with_what_the_plan_buys_instead(scenario: Path, tmp_path: Path) -> None:
    from planner.operations.daemon.daemon import Daemon

    config = load_config(daemon_config(tmp_path, scenario))
    expiry = config.jobs.commitment_expiry.model_copy(update={"warn_days": 4000})
    config = config.model_copy(update={"jobs": config.jobs.model_copy(update={"commitment_expiry": expiry})})
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    daemon = Daemon(config, provider=cloud, planner=cached_planner)
    daemon.replan(START)
    plan = daemon.current_plan()
    assert plan is not None and plan.document.commitments
    warnings = daemon.commitment_expiry(START)
    horizon_end = plan.document.horizon.start + timedelta(hours=plan.document.horizon.hours)
    assert warnings[-1].startswith(f"the plan's horizon ends {horizon_end:%Y-%m-%d %H:%M}Z")
    warnings = warnings[:-1]
    assert len(warnings) == sum(1 for c in plan.document.commitments if c.end is not None)
    first = plan.document.commitments[0]
    assert any(first.offering in w and f"ends {first.end:%Y-%m-%d}" in w for w in warnings)
    assert "the plan lets it lapse" in " ".join(warnings)  # nothing bought after the horizon's plan
    assert [e.kind for e in daemon.store.events("commitment-expiry")]


def test_apscheduler_runs_the_jobs_from_its_sqlalchemy_store_and_serves_metrics(
    scenario: Path, tmp_path: Path
) -> None:
    """The production path: APScheduler 3 with the SQLAlchemy job store in the daemon's database, one run
    of a job at a time, and /metrics and /healthz served beside it (real seconds here, a few of them)."""
    import threading
    import time
    import urllib.request

    import sqlalchemy

    from planner.operations.daemon.daemon import Daemon
    from planner.operations.daemon.scheduler import run_forever

    path = daemon_config(tmp_path, scenario, metrics={"enabled": True, "host": "127.0.0.1", "port": 0})
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["apply"] = False  # a dry run: journals what it would do
    data["jobs"] = {  # the shortest interval a config takes (10 s); the first runs start at once
        name: {"every_minutes": 1 / 6} for name in ("refresh_prices", "reconcile", "watch_interruptions")
    }
    data["jobs"]["replan"] = {"every_hours": 10000}
    data["jobs"]["commitment_expiry"] = {"every_hours": 10000}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    config = load_config(path)
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    daemon = Daemon(config, provider=cloud, planner=cached_planner)
    daemon.replan(START)  # a plan to work on (the scheduled replan is days away)
    stop = threading.Event()
    servers: list[Any] = []
    worker = threading.Thread(
        target=run_forever, args=(daemon,), kwargs={"stop": stop, "on_ready": servers.append}
    )
    try:
        worker.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            not servers or daemon.store.get_state("last_run:reconcile") is None
        ):  # the jobs may run before on_ready is called: wait for both
            time.sleep(0.2)
        assert daemon.store.get_state("last_run:reconcile") is not None, "the scheduler never ran reconcile"
        assert servers, "no metrics server"
        with urllib.request.urlopen(f"{servers[0].url}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        assert "gpuplan_job_last_success_timestamp_seconds" in text and 'job="reconcile"' in text
        jobs = (
            sqlalchemy.create_engine(config.database_url)
            .connect()
            .execute(sqlalchemy.text("select id from gpuplan_jobs"))
        )
        assert {row[0] for row in jobs} >= {"refresh_prices", "reconcile", "watch_interruptions"}
    finally:
        stop.set()
        worker.join(timeout=30)
    assert not worker.is_alive()
    assert fleet(config.sim_state) == Counter()  # a dry run changed nothing


def test_without_the_daemon_extra_the_command_names_it(scenario: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    path = daemon_config(tmp_path, scenario)
    args = ["daemon", "--config", str(path), "--once"]
    script = (
        "import sys; sys.modules['sqlalchemy'] = None; sys.modules['apscheduler'] = None\n"  # not installed
        f"sys.argv = ['gpuplan', *{args!r}]; from planner.cli import main; main()"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "pip install 'gpuplan[daemon]'" in done.stderr and "Traceback" not in done.stderr


def test_a_spot_pool_the_cloud_cannot_fill_falls_back_in_the_plans_order_until_spot_returns(
    scenario: Path, tmp_path: Path
) -> None:
    from planner.operations.daemon.daemon import Daemon, fallback_options

    config = load_config(daemon_config(tmp_path, scenario, launch_batch=100))
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    daemon = Daemon(config, provider=cloud, planner=cached_planner)
    daemon.replan(START)
    plan = daemon.current_plan()
    assert plan is not None
    at = next(  # the first hour with a spot pool
        START + timedelta(hours=h)
        for h in range(24)
        if any(k.endswith("-spot") for k in planned(plan, START + timedelta(hours=h)))
    )
    wanted = planned(plan, at)
    spot_pool = next(k for k in wanted if k.endswith("-spot"))
    offering = next(o for o in plan.document.offerings if pool_name(o, CapacityType.SPOT) == spot_pool)
    options = fallback_options(plan, offering, CapacityType.SPOT)
    assert (offering, CapacityType.ON_DEMAND) in options and len(options) >= 2
    (first, first_capacity), (second, second_capacity) = options[:2]
    # a stock-out of that offering's spot capacity and of the first place its nodes would go
    cloud.configure(capacity={f"{offering}/spot": 0, f"{first}/{first_capacity}": 0})
    daemon.reconcile(at)
    held = fleet(config.sim_state)
    there = pool_name(second, second_capacity)
    assert held[spot_pool] == 0
    assert held[there] == wanted[there] + wanted[spot_pool]  # the short nodes, in the second place
    assert not daemon.store.events("shortfall") and not daemon.store.events("job-failed")
    cloud.configure(capacity={f"{offering}/spot": 1000})  # spot is back
    daemon.reconcile(at + timedelta(minutes=30))
    assert fleet(config.sim_state) == wanted  # spot launched, then the fallback let go
