"""`gpuplan daemon --check` checks what the daemon will use (issue 36 point 3): the database opens, with
an error a user can act on; the hook's program runs; and what --check accepts, --once runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from daemon_days import daemon_config
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from planner.cli import app


def _check(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["daemon", "--config", str(path), "--check"])
    return result.exit_code, result.output


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_database_that_cannot_be_opened_is_named_with_what_to_do(
    scenario: Path, tmp_path: Path, pg: Any
) -> None:
    # a user with a password, asked for it (the test server trusts everyone else)
    admin = create_engine(pg.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text("drop role if exists keeper"))
        connection.execute(text("create role keeper login password 'right-pw-36'"))
    admin.dispose()
    hba = pg.folder / "data" / "pg_hba.conf"
    if "keeper" not in hba.read_text():
        hba.write_text("host all keeper 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        pg._pg_ctl("reload")
    good = f"postgresql+psycopg2://keeper:right-pw-36@127.0.0.1:{pg.port}/gpuplan"
    code, output = _check(daemon_config(tmp_path, scenario, database=good))
    assert code == 0 and "valid" in output and "PostgreSQL" in output and "right-pw-36" not in output, output
    for database, words in (
        (good.replace("right-pw-36", "wrong-pw-36"), "wrong password"),
        (good.replace("127.0.0.1", "no-such-host.invalid"), "no such host 'no-such-host.invalid'"),
        (good.replace(str(pg.port), str(_free_port())), "nothing answers at 127.0.0.1:"),
        (good.replace("/gpuplan", "/nodb36"), "has no database 'nodb36'"),
        (f"sqlite:///{tmp_path / 'gone' / 'd.db'}", "directory"),
    ):
        code, output = _check(daemon_config(tmp_path, scenario, database=database))
        assert code == 2 and words in output, output
        assert (
            "Traceback" not in output
            and "wrong-pw-36" not in output
            and len(output.strip().splitlines()) == 1
        )


def test_without_the_driver_the_check_names_the_extra(scenario: Path, tmp_path: Path) -> None:
    path = daemon_config(tmp_path, scenario, database="postgresql+psycopg2://u:pw@127.0.0.1:1/d")
    script = (
        "import sys; sys.modules['psycopg2'] = None\n"
        f"sys.argv = ['gpuplan', 'daemon', '--config', {str(path)!r}, '--check']\n"
        "from planner.cli import main; main()"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "psycopg2" in done.stderr and "gpuplan[daemon]" in done.stderr and "Traceback" not in done.stderr


def _variants(tmp_path: Path) -> list[dict[str, Any]]:
    """Configs --check accepts, each at an edge of what it allows."""
    hook = tmp_path / "hooks" / "save"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    hook.chmod(0o755)
    off = {"every_hours": 10_000, "enabled": False}
    return [
        {"checkpoint_hook": {"command": [str(Path("hooks") / "save"), "{run}"]}, "disruption_budget": 3},
        {
            "checkpoint_hook": {"webhook": "http://127.0.0.1:9/checkpoint", "timeout_seconds": 3600},
            "jobs": {
                "refresh_prices": {"every_minutes": 1 / 6},
                "replan": off,
                "reconcile": {"every_hours": 10_000},
                "watch_interruptions": {"every_minutes": 0.5},
                "commitment_expiry": {"every_hours": 24, "warn_days": 1100},
            },
            "backoff": {"first_minutes": 10080, "max_minutes": 10080},
            "lead_hours": 744,
            "disruption_budget": "0%",
            "database": "sqlite:///relative-36.db",
        },
    ]


def test_what_check_accepts_once_runs(scenario: Path, tmp_path: Path) -> None:
    for number, variant in enumerate(_variants(tmp_path)):
        folder = tmp_path / f"v{number}"
        folder.mkdir()
        if "checkpoint_hook" in variant and "command" in variant["checkpoint_hook"]:
            (folder / "hooks").symlink_to(tmp_path / "hooks")
        data = yaml.safe_load(daemon_config(folder, scenario).read_text(encoding="utf-8"))
        data.update(variant)
        data["jobs"] = {
            **data["jobs"],
            "replan": {"every_hours": 10_000, "enabled": False},
            **variant.get("jobs", {}),
        }
        path = folder / "daemon.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        code, output = _check(path)
        assert code == 0 and "valid" in output, output
        args = ["daemon", "--config", str(path), "--once", "--at", "2027-02-01T01:00:00Z"]
        script = f"import sys; sys.argv = ['gpuplan', *{args!r}]; from planner.cli import main; main()"
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=folder,
            env=os.environ,
        )
        assert done.returncode == 0, (variant, done.stderr[-2000:])
        assert "ran " in done.stdout and "Traceback" not in done.stderr
