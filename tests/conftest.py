"""Shared helpers for the optimizer and CLI tests: small user catalogs and scenarios written to disk.

Catalogs are written with only the required columns of ``catalog-format.md`` plus the optional ones a
test actually gives, so each test states every number its expected value depends on.
"""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import settings
from pulp.v4_migration import set_v4_migration_warnings

import planner.planning.optimize.build  # noqa: F401  (imported for its side effect, undone below)
from models.catalog import OPTIONAL_COLUMNS, REQUIRED_COLUMNS

# planner/planning/optimize/build.py turns PuLP's 4.0 migration warnings off when it is imported (pulp is
# pinned below 4, and users should not see them). The tests want them: pyproject.toml's filterwarnings makes
# them errors, so a new use of an API that PuLP 4 removes fails here. build is imported above, so its mute has
# already run and cannot undo this.
set_v4_migration_warnings(True)

# CI replays the same examples every run (a landing must not depend on luck); local runs keep exploring
# new ones. .ci/run sets HYPOTHESIS_PROFILE=ci.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _gpuplan_loggers_restored() -> Iterator[None]:
    """Each test leaves gpuplan's loggers as it found them: a command run in process (``provision``, the
    daemon) points them at its own handler and stops them propagating, which hid a later test's records
    from ``caplog`` in the same worker (test_provider_azure's, after the in-process provision tests)."""
    names = [
        name for name in logging.root.manager.loggerDict if name == "gpuplan" or name.startswith("gpuplan.")
    ]
    saved = {name: logging.getLogger(name) for name in ["gpuplan", *names]}
    state = {name: (lg.handlers[:], lg.level, lg.propagate) for name, lg in saved.items()}
    yield
    for name, (handlers, level, propagate) in state.items():
        logger = saved[name]
        logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate
    for name in list(logging.root.manager.loggerDict):  # loggers made during the test: back to the defaults
        if (name == "gpuplan" or name.startswith("gpuplan.")) and name not in state:
            logger = logging.getLogger(name)
            logger.handlers[:], logger.level, logger.propagate = [], logging.NOTSET, True


def offering_row(
    cloud: str = "aws",
    region: str = "us-east-1",
    instance_type: str = "p5.48xlarge",
    *,
    gpu_model: str = "H100",
    gpus_per_node: int = 8,
    gpu_memory_gb: float = 80,
    fabric: str = "efa",
    on_demand_usd_h: float = 10.0,
    source: str = "test fixture 2027-01-01",
    **optional: Any,
) -> dict[str, Any]:
    """One catalog row; ``optional`` takes the optional columns (None = empty cell)."""
    unknown = set(optional) - set(OPTIONAL_COLUMNS)
    if unknown:
        raise ValueError(f"not catalog columns: {sorted(unknown)}")
    return {
        "cloud": cloud,
        "region": region,
        "instance_type": instance_type,
        "gpu_model": gpu_model,
        "gpus_per_node": gpus_per_node,
        "gpu_memory_gb": gpu_memory_gb,
        "fabric": fabric,
        "on_demand_usd_h": on_demand_usd_h,
        "source": source,
        **optional,
    }


def write_catalog_csv(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``rows`` as a catalog CSV: required columns plus every optional column any row uses."""
    rows = list(rows)
    used = {key for row in rows for key in row}
    columns = [*REQUIRED_COLUMNS, *(c for c in OPTIONAL_COLUMNS if c in used)]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if row.get(c) is None else row[c] for c in columns])
    return path


def write_demand_csv(path: Path, replicas: Iterable[float]) -> Path:
    """An hourly demand series (columns hour,replicas), one row per hour from hour 0."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["hour", "replicas"])
        for hour, value in enumerate(replicas):
            writer.writerow([hour, value])
    return path


def scenario_dict(
    *,
    hours: int,
    catalog: str = "catalog.csv",
    name: str = "test-scenario",
    start: str = "2027-01-04T00:00:00Z",
    period_hours: int = 1,
    terms: list[str] | None = None,
    max_spot_share: float = 1.0,
    teams: list[dict[str, Any]] | None = None,
    inference: list[dict[str, Any]] | None = None,
    training: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A scenario mapping as the YAML would hold it (clouds: all allowed)."""
    return {
        "name": name,
        "horizon": {"start": start, "hours": hours, "period_hours": period_hours},
        "catalog": catalog,
        "purchase": {"terms": [] if terms is None else terms, "max_spot_share": max_spot_share},
        "teams": teams if teams is not None else [{"name": "t"}],
        "inference": inference or [],
        "training": training or [],
    }


def exact_settings(**overrides: Any) -> Any:
    """Solver settings under which the model is exact (hourly blocks and starts) and solved to optimality."""
    from planner.planning.optimize import SolveSettings

    values: dict[str, Any] = {"block_hours": 1, "start_grid_hours": 1, "gap": 1e-6, "time_limit": 60}
    values.update(overrides)
    return SolveSettings(**values)


def write_scenario_yaml(path: Path, data: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(data), sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def kit() -> SimpleNamespace:
    """The helpers above, as a fixture (test modules cannot import conftest reliably).

    Session-scoped and stateless, so hypothesis tests may use it too.
    """
    return SimpleNamespace(
        offering_row=offering_row,
        write_catalog_csv=write_catalog_csv,
        write_demand_csv=write_demand_csv,
        scenario_dict=scenario_dict,
        write_scenario_yaml=write_scenario_yaml,
        exact_settings=exact_settings,
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Make ``--dist loadgroup`` group again under pytest 9.2.

    pytest-xdist 3.8 names a test's group by setting ``item._nodeid`` to ``<nodeid>@<group>``, and its
    scheduler groups by that suffix; pytest 9.2 keeps the node id in ``item._id`` (a ``NodeId``) and no
    longer reads ``_nodeid``, so every group was silently split across workers (the example was planned
    twice). Carry xdist's id over; without xdist, or once either side changes, this does nothing.
    """
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # an older pytest reads _nodeid itself
        return
    for item in items:
        wanted = getattr(item, "_nodeid", None)
        if isinstance(wanted, str) and wanted != item.nodeid and hasattr(item, "_id"):
            item._id = NodeId.parse(wanted)  # type: ignore[attr-defined]


EXAMPLE_SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "mixed-fleet.yaml"


@pytest.fixture(scope="session")
def example_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one-year example planned once per test session, as a user runs it (default settings, report).

    It takes about a minute and a half on one core, and three modules need it: each marks itself
    ``pytest.mark.xdist_group("mixed-fleet")`` so that pytest-xdist (``--dist loadgroup`` in pyproject.toml)
    runs them all on one worker, which plans it once. Read it; copy it before writing into it.
    """
    from typer.testing import CliRunner

    from planner.cli import app

    out = tmp_path_factory.mktemp("example-plan") / "plan"
    result = CliRunner().invoke(app, ["plan", str(EXAMPLE_SCENARIO), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def week_plan(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``week_plan(cloud)``: the mixed-fleet week planned on ``cloud`` (``tests/provision_plans.py``), once
    per test session and cloud; copy it before writing into it."""
    from provision_plans import mixed_fleet_week

    made: dict[str, Path] = {}

    def get(cloud: str) -> Path:
        if cloud not in made:
            made[cloud] = mixed_fleet_week(cloud, tmp_path_factory.mktemp(f"week-{cloud}"))
        return made[cloud]

    return get
