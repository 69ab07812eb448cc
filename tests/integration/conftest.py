"""Fixtures the integration tests share: one throwaway PostgreSQL server per session (where the machine's
binaries start one; the tests that need it skip with the reason otherwise)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from postgres_server import PostgresServer, postgres_server


@pytest.fixture(scope="session")
def pg() -> Iterator[PostgresServer]:
    yield from postgres_server()
