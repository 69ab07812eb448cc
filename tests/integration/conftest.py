"""Fixtures the integration tests share: one throwaway PostgreSQL server per session (where the machine's
binaries start one; the tests that need it skip with the reason otherwise), moto's server and fake AWS
credentials (``aws_stand_in``), and the daemon tests' scenario
(the mixed-fleet week on AWS offerings, copied where the test may change it)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aws_stand_in import aws_env, moto_server
from postgres_server import PostgresServer, postgres_server
from prometheus_stand_in import PrometheusServer, prometheus_server

__all__ = ["aws_env", "moto_server", "pg", "prom", "scenario"]  # fixtures, by name


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
