"""The exact-start certified bound (planner/optimize/bound_exact.py) against exact full solves.

- never above the optimum of the full problem (every start period, whole nodes, no pruning, no
  merging, solved exactly here), on seeded random small fleets;
- tighter than bound.py's where the energy spread loses (a gang whose first and last block are
  partial), and equal there to a hand-computed optimum;
- reduced-cost fixing against the optimum leaves the bound as it is without fixing, while dropping
  columns; column generation prices in only part of the columns;
- the staged planner writes the larger bound and names its method.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.catalog import Catalog
from models.scenario import parse
from planner.optimize import SolveSettings, optimize
from planner.optimize.bound import certified_bound
from planner.optimize.bound_exact import exact_bound
from planner.optimize.build import create_model
from planner.optimize.sets import ModelOptions, build_sets
from planner.optimize.solve import Termination, solve

START = "2027-01-04T00:00:00Z"


def _stamp(hour: int) -> str:
    return f"2027-01-{4 + hour // 24:02d}T{hour % 24:02d}:00:00Z"


def _load(kit, directory: Path, data: dict[str, Any], rows: list[dict[str, Any]]):
    kit.write_catalog_csv(directory / "catalog.csv", rows)
    return parse(data, directory / "scenario.yaml"), Catalog.load(directory / "catalog.csv")


def _full_optimum(scenario, catalog: Catalog, directory: Path) -> float:
    """The full problem solved exactly: one slot per period, every start period, whole nodes."""
    p = scenario.horizon.period_hours
    options = ModelOptions(block_hours=p, start_grid_hours=p, max_starts_per_run=10**6, prune=False, merge=False)
    full = replace(build_sets(scenario, catalog, directory, options), integral_held=True)
    result = solve(create_model(full).problem, gap=1e-9, time_limit=60)
    assert result.termination == Termination.OPTIMAL
    return result.objective + full.fixed_usd


def _night_and_day(kit, directory: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Two days of 1 h periods (24 h blocks): a service needs one node 12:00-24:00 each day, a gang of
    one node runs 24 h anywhere in the two days. Every 24 h start holds the gang over exactly 12 busy
    hours, so with one node committed ($5/h, 48 h = $240) the optimum pays 12 on-demand hours ($10):
    $360 (no commitment: 48 node-hours on demand, $480; two: $480). bound.py's energy spread may put
    the gang's hours of each block into that block's idle half, and so proves only $240."""
    rows = [kit.offering_row(on_demand_usd_h=10.0, reserved_3y_usd_h=5.0)]
    kit.write_demand_csv(directory / "demand.csv", ([0] * 12 + [1] * 12) * 2)
    demand = {"csv": "demand.csv"}
    data = kit.scenario_dict(
        hours=48,
        terms=["3y"],
        inference=[{"name": "svc", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
                    "latency_critical": True, "replicas": demand}],
        training=[{"name": "gang", "team": "t", "nodes": 1, "gpus_per_node": 8, "gpu_models": ["H100"],
                   "hours": 24.0, "earliest_start": START, "deadline": _stamp(48)}],
    )  # fmt: skip
    return data, rows


def test_exact_starts_close_what_the_energy_spread_loses(kit, tmp_path: Path) -> None:
    data, rows = _night_and_day(kit, tmp_path)
    scenario, catalog = _load(kit, tmp_path, data, rows)
    optimum = _full_optimum(scenario, catalog, tmp_path)
    assert optimum == pytest.approx(360.0, rel=1e-9)
    sets = build_sets(scenario, catalog, tmp_path)
    today = certified_bound(sets, None)
    exact = exact_bound(sets, None, incumbent_usd=optimum)
    assert exact.converged
    assert today.bound_usd < optimum - 50  # the energy spread loses here ...
    assert exact.bound_usd == pytest.approx(optimum, rel=1e-6)  # ... the exact starts do not
