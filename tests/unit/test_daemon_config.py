"""daemon.yaml read strictly (issue 36): every wrong value is one InputError naming the file and the field,
and what the config names (the hook's program, the SQLite file's directory) is looked at when it loads."""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.errors import InputError
from planner.operations.daemon.config import check_database, load_config, read_config


def _write(tmp_path: Path, **fields: Any) -> Path:
    (tmp_path / "scenario.yaml").write_text("name: x\n", encoding="utf-8")
    path = tmp_path / "daemon.yaml"
    path.write_text(yaml.safe_dump({"scenario": "scenario.yaml", **fields}), encoding="utf-8")
    return path


def _refused(path: Path, where: str, words: str) -> None:
    with pytest.raises(InputError) as caught:
        load_config(path)
    error = caught.value
    assert error.file == str(path) and error.where == where, str(error)
    assert words in error.problem, str(error)
    assert "\n" not in str(error)


@pytest.mark.parametrize(
    ("fields", "where", "words"),
    [
        ({"lead_hours": 2**63}, "lead_hours", "at most 744"),
        ({"lead_hours": True}, "lead_hours", "boolean is not a number"),
        ({"lead_hours": "１２"}, "lead_hours", "plain digits"),
        ({"plan_time_limit": float("nan")}, "plan_time_limit", "finite"),
        ({"launch_batch": 2.5}, "launch_batch", "whole number"),
        ({"apply": 1}, "apply", "boolean"),
        ({"jobs": {"reconcile": {"every_minutes": float("inf")}}}, "jobs.reconcile.every_minutes", "finite"),
        ({"jobs": {"reconcile": {"every_minutes": True}}}, "jobs.reconcile.every_minutes", "boolean"),
        ({"jobs": {"reconcile": {"every_minutes": 0}}}, "jobs.reconcile.every_minutes", "greater than 0"),
        ({"jobs": {"reconcile": {"every_minutes": 0.01}}}, "jobs.reconcile", "whole seconds"),
        ({"jobs": {"reconcile": {"every_minutes": 0.1}}}, "jobs.reconcile", "at least 10 s"),
        ({"jobs": {"replan": {"every_hours": 10**7}}}, "jobs.replan.every_hours", "at most 10000"),
        (
            {"jobs": {"commitment_expiry": {"every_hours": 24, "warn_days": 1e300}}},
            "jobs.commitment_expiry.warn_days",
            "at most",
        ),
        ({"jobs": {"replan": {"every_hours": 24, "enabled": "yes"}}}, "jobs.replan.enabled", "boolean"),
        ({"backoff": {"max_minutes": 2**63}}, "backoff.max_minutes", "at most"),
        ({"backoff": {"first_minutes": 90, "max_minutes": 60}}, "backoff", "not be more than max_minutes"),
        ({"disruption_budget": "1_0"}, "disruption_budget", "plain digits"),
        ({"disruption_budget": "150%"}, "disruption_budget", "at most 100"),
        ({"disruption_budget": "nan%"}, "disruption_budget", "finite"),
        ({"metrics": {"port": 70000}}, "metrics.port", "at most 65535"),
        ({"metrics": {"host": "a b"}}, "metrics.host", "pattern"),
        ({"database": "garbage"}, "database", "not a database URL"),
        ({"database": "mysql://x"}, "database", "SQLite or PostgreSQL"),
        ({"database": "postgresql+asyncpg://u@h/d"}, "database", "SQLite or PostgreSQL"),
        ({"database": "sqlite://"}, "database", "must be a file"),
        ({"database": "postgresql+psycopg2://u:p@h:99999/d"}, "database", "port must be from 1 to 65535"),
        ({"database": "sqlite:///:memory:"}, "database", "must be a file"),
        ({"checkpoint_hook": {"command": []}}, "checkpoint_hook.command", "at least 1"),
        ({"checkpoint_hook": {"command": ["{run}"]}}, "checkpoint_hook.command", "placeholder"),
        ({"checkpoint_hook": {"command": ["x"] * 65}}, "checkpoint_hook.command", "at most 64"),
        ({"checkpoint_hook": {"webhook": "ftp://h/x"}}, "checkpoint_hook.webhook", "http"),
        ({"checkpoint_hook": {"webhook": "http://"}}, "checkpoint_hook.webhook", "with a host"),
        ({"checkpoint_hook": {"webhook": "http://h:99999/x"}}, "checkpoint_hook.webhook", "not a URL"),
        ({"checkpoint_hook": {"webhook": "http://h/a b"}}, "checkpoint_hook.webhook", "spaces"),
        (
            {"checkpoint_hook": {"webhook": "http://h/", "timeout_seconds": -1}},
            "checkpoint_hook.timeout_seconds",
            "greater than 0",
        ),
        ({"base": "/etc"}, "base", "Extra inputs"),
        ({"scenario": ""}, "scenario", "empty"),
        ({"provider": {"cloud": "sim", "sim_state": "a\x00b"}}, "provider.sim_state", "NUL"),
    ],
)  # fmt: skip
def test_a_wrong_value_is_one_line_naming_the_field(
    tmp_path: Path, fields: dict[str, Any], where: str, words: str
) -> None:
    _refused(_write(tmp_path, **fields), where, words)


def test_the_defaults_and_the_bounds_themselves_are_accepted(tmp_path: Path) -> None:
    config = load_config(
        _write(
            tmp_path,
            lead_hours=744,
            disruption_budget=3,
            jobs={
                "watch_interruptions": {"every_minutes": 0.5},
                "reconcile": {"every_minutes": "10"},  # YAML 1.1 strings in ASCII digits are numbers
                "replan": {"every_hours": 10_000},
                "refresh_prices": {"every_minutes": 1 / 6},  # 10 s
            },
            database="postgresql+psycopg2://u:pw@db.example:5432/gpuplan",
        )
    )
    assert config.jobs.watch_interruptions.seconds == 30 and config.jobs.reconcile.seconds == 600
    assert config.budget.nodes == 3 and config.lead_hours == 744
    assert read_config(_write(tmp_path)).database_url.endswith("daemon.db")


def test_the_hook_program_must_exist_and_be_executable(tmp_path: Path) -> None:
    _refused(
        _write(tmp_path, checkpoint_hook={"command": ["no-such-program-36", "{run}"]}),
        "checkpoint_hook.command",
        "not a program on PATH",
    )
    _refused(
        _write(tmp_path, checkpoint_hook={"command": ["hooks/save"]}),
        "checkpoint_hook.command",
        "does not exist",
    )
    hook = tmp_path / "hooks" / "save"
    hook.parent.mkdir()
    hook.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    if os.geteuid() != 0:  # root may run anything: os.access says yes
        _refused(
            _write(tmp_path, checkpoint_hook={"command": ["hooks/save"]}),
            "checkpoint_hook.command",
            "chmod +x",
        )
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    # a relative program is the config directory's, as every path in the file, whatever the daemon's cwd
    config = load_config(_write(tmp_path, checkpoint_hook={"command": ["hooks/save", "{run}"]}))
    assert config.checkpoint_hook is not None and config.checkpoint_hook.command == [str(hook), "{run}"]
    named = load_config(_write(tmp_path, checkpoint_hook={"command": [Path(sys.executable).name, "-V"]}))
    assert named.checkpoint_hook is not None and named.checkpoint_hook.command[0] == Path(sys.executable).name


def test_a_sqlite_database_is_checked_without_being_made(tmp_path: Path) -> None:
    path = _write(tmp_path, database=f"sqlite:///{tmp_path / 'nowhere' / 'd.db'}")
    with pytest.raises(InputError, match=r"daemon.yaml: database: the SQLite file's directory .*nowhere"):
        check_database(path, load_config(path))
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database, just some text that is long enough" * 20)
    path = _write(tmp_path, database=f"sqlite:///{junk}")
    with pytest.raises(InputError, match="cannot be opened as a SQLite database"):
        check_database(path, load_config(path))
    fresh = tmp_path / "fresh.db"
    path = _write(tmp_path, database=f"sqlite:///{fresh}")
    assert "(new)" in check_database(path, load_config(path)) and not fresh.exists()
    sqlite3.connect(fresh).close()
    assert check_database(path, load_config(path)) == f"SQLite file {fresh}"
