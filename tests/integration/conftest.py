"""Fixtures the integration tests share: one throwaway PostgreSQL server per session (where the machine's
binaries start one; the tests that need it skip with the reason otherwise), moto's server and fake AWS
credentials (``aws_stand_in``), and the daemon tests' scenario
(the mixed-fleet week on AWS offerings, copied where the test may change it) and its plan at the hour after
its first non-spot gang starts (``gang_week``: the provisioning tests of gangs)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from aws_stand_in import aws_env, moto_server
from postgres_server import PostgresServer, postgres_server
from prometheus_stand_in import PrometheusServer, prometheus_server

from models.plan import Plan

__all__ = ["aws_env", "gang_week", "moto_server", "pg", "prom", "scenario"]  # fixtures, by name


@pytest.fixture(scope="session")
def pg() -> Iterator[PostgresServer]:
    yield from postgres_server()


@pytest.fixture(scope="session")
def prom() -> Iterator[PrometheusServer]:
    """A real Prometheus with a drawn fleet's history (prometheus_stand_in.py); skips without it."""
    yield from prometheus_server()


@pytest.fixture
def scenario(week_plan: Callable[[str], Path], tmp_path: Path) -> Path:
    source = week_plan("aws").parent / "scenario.yaml"
    target = tmp_path / "inputs" / "scenario.yaml"
    target.parent.mkdir()
    shutil.copy(source, target)
    return target


@pytest.fixture
def gang_week(week_plan: Callable[[str], Path], tmp_path: Path) -> tuple[Path, Plan, datetime]:
    """The AWS mixed-fleet week's plan, copied (its directory and the plan read), and the hour after its
    first non-spot multi-node gang starts, when that gang's reservation and launch are due."""
    shutil.copytree(week_plan("aws"), tmp_path / "plan")
    plan = Plan.read(tmp_path / "plan")
    gang = next(t for t in plan.document.training if t.nodes > 1 and t.tier != "spot")
    return tmp_path / "plan", plan, gang.start + timedelta(hours=1)
