"""planner/solvers/work.py and its use in highs.py: budgets in counted work, the wall clock only as a
safety net that says when it cut something (issue 39 point 1).

Each test fails without what it checks: a quota that HiGHS ignored would reach the optimum; a node limit
read as an error would not be ``stopped``; a net that recorded nothing would leave ``cuts`` empty; a
planning module that read the clock for a decision shows up in the source scan.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner.planning.optimize.budget import TimeBudget, safety_net_for
from planner.solvers.highs import HighsModel, RowwiseModel
from planner.solvers.work import (
    CALLBACK_BY_STAGE,
    NOMINAL_SECONDS,
    SAFETY_AT_LEAST,
    SAFETY_FACTOR,
    SafetyNet,
    callbacks_for,
    deadline_after,
    guarded,
    iterations_for,
    meter,
    past,
    safety_net,
)

ROOT = Path(__file__).resolve().parents[2]


def knapsacks(n: int = 30, m: int = 4, seed: int = 3) -> RowwiseModel:
    """max value s.t. m knapsack rows (as min -value): hard enough that HiGHS branches for a while."""
    rng = np.random.default_rng(seed)
    weights = rng.integers(20, 100, size=(m, n)).astype(float)
    values = weights.sum(axis=0) / m + rng.integers(0, 20, size=n)
    capacity = weights.sum(axis=1) / 2
    return RowwiseModel(
        cost=-values,
        col_lower=np.zeros(n),
        col_upper=np.ones(n),
        row_lower=np.full(m, -np.inf),
        row_upper=capacity,
        start=np.arange(0, (m + 1) * n, n, dtype=np.int32),
        index=np.tile(np.arange(n, dtype=np.int32), m),
        value=weights.ravel(),
        integral=np.ones(n, dtype=bool),
    )


def covering_lp(n: int = 300, seed: int = 5) -> RowwiseModel:
    """A dense random covering LP: a few hundred simplex iterations to its optimum."""
    rng = np.random.default_rng(seed)
    rows = n // 2
    matrix = rng.random((rows, n))
    return RowwiseModel(
        cost=rng.random(n) + 0.5,
        col_lower=np.zeros(n),
        col_upper=np.full(n, np.inf),
        row_lower=np.ones(rows),
        row_upper=np.full(rows, np.inf),
        start=np.arange(0, (rows + 1) * n, n, dtype=np.int32),
        index=np.tile(np.arange(n, dtype=np.int32), rows),
        value=matrix.ravel(),
    )


def test_a_quota_stops_a_mip_at_the_same_point_every_time() -> None:
    free = HighsModel(knapsacks(), mip_rel_gap=0.0, threads=1)
    finished = free.run()
    assert finished.optimal and finished.stopped_by is None
    runs = []
    for _ in range(2):
        highs = HighsModel(knapsacks(), mip_rel_gap=0.0, threads=1)
        outcome = highs.run(work=0.01)
        assert outcome.stopped and outcome.stopped_by == "work"
        runs.append((outcome.objective, outcome.dual_bound, tuple(highs.col_value())))
    assert runs[0] == runs[1]
    objective, bound, _ = runs[0]
    # stopped short of the proof: the quota is what ended it
    assert bound < finished.objective - 1e-6 or objective > finished.objective + 1e-6


def test_a_run_charges_its_counted_work_to_the_meter() -> None:
    lp = covering_lp()
    before = meter().units
    HighsModel(lp).run()
    spent = meter().units - before
    # at least the run itself and its iterations (dozens on this LP) on its nonzeros
    per_iteration = len(lp.index) * NOMINAL_SECONDS["lp iteration per nonzero"]
    assert spent >= NOMINAL_SECONDS["run"] + 10 * per_iteration


def test_an_lp_quota_is_an_iteration_limit() -> None:
    highs = HighsModel(covering_lp())
    outcome = highs.run(work=5 * len(covering_lp().index) * NOMINAL_SECONDS["lp iteration per nonzero"])
    assert outcome.stopped and outcome.stopped_by == "work"
    # the limit is lifted again: the next run without a quota finishes
    assert highs.run().optimal


def test_a_node_limit_is_stopped_not_an_error() -> None:
    # HiGHS reports node, leaf and improving-solution limits as kSolutionLimit
    highs = HighsModel(knapsacks(), mip_rel_gap=0.0, mip_max_improving_sols=1, threads=1)
    outcome = highs.run()
    assert "solution limit" in outcome.status_text.lower()
    assert outcome.stopped and outcome.stopped_by == "work"


def test_the_safety_net_cuts_a_run_and_says_which() -> None:
    net = SafetyNet(0.0)
    with guarded(net):
        assert safety_net() is net
        outcome = HighsModel(knapsacks(), mip_rel_gap=0.0, threads=1).run(work=1e6, what="stage 1")
        assert outcome.stopped_by == "time"
        # a run without a quota (a dispatch LP, part of writing the plan) is not the net's to cut
        assert HighsModel(knapsacks(), mip_rel_gap=0.0, threads=1).run(what="a dispatch").optimal
        assert past(None, "the local search")
    assert safety_net() is None
    assert list(net.cuts) == ["stage 1", "the local search"]


def test_the_net_is_a_multiple_of_the_limit_and_never_short() -> None:
    assert safety_net_for(None).seconds is None
    assert safety_net_for(600.0).seconds == SAFETY_FACTOR * 600.0
    assert safety_net_for(5.0).seconds == SAFETY_AT_LEAST


def test_highs_takes_no_wall_clock_limit() -> None:
    with pytest.raises(ValueError, match="time_limit"):
        HighsModel(covering_lp(), time_limit=1.0)


def test_quotas_and_deadlines_count_work_not_seconds() -> None:
    assert callbacks_for(0.0, 100) == 1 and iterations_for(0.0, 100) == 1
    assert callbacks_for(10 * 1000 * NOMINAL_SECONDS["mip callback per nonzero"], 1000) == 10
    assert iterations_for(10 * 1000 * NOMINAL_SECONDS["lp iteration per nonzero"], 1000) == 10
    deadline = deadline_after(1.0)
    assert deadline is not None and not past(deadline, "x")
    meter().charge(1.0)
    assert past(deadline, "x")
    assert deadline_after(None) is None and not past(None, "x")


def test_stage_one_calls_cost_more_per_nonzero_above_the_calibrated_size() -> None:
    """The README example (85,579 nonzeros) keeps its 312 calls for 48 s; below it the flat figure
    holds (training-heavy-lab: 498 for 24 s); h100-shortage's 164,423 get 33 for 24 s, not 81: its
    calls measured 2.5x dearer per nonzero."""
    per_nonzero = CALLBACK_BY_STAGE["stage 1"]
    assert callbacks_for(48.0, 85_579, "stage 1") == 312 == math.ceil(48.0 / (85_579 * per_nonzero))
    assert callbacks_for(24.0, 26_777, "stage 1") == 498 == math.ceil(24.0 / (26_777 * per_nonzero))
    grown = per_nonzero * (164_423 / 85_579) ** 1.38
    assert callbacks_for(24.0, 164_423, "stage 1") == 33 == math.ceil(24.0 / (164_423 * grown))
    # other stages stay flat at any size
    assert callbacks_for(24.0, 164_423, "stage 2") == math.ceil(
        24.0 / (164_423 * CALLBACK_BY_STAGE["stage 2"])
    )


def test_the_budget_reads_the_meter() -> None:
    budget = TimeBudget(100.0)
    meter().charge(30.0)
    assert budget.elapsed() == pytest.approx(30.0)
    assert budget.left() == pytest.approx(70.0)


# -- no decision reads the clock ---------------------------------------------------------------------------

CLOCKS = {"perf_counter", "monotonic", "time", "process_time", "perf_counter_ns", "monotonic_ns"}


def _clock_reads(tree: ast.AST) -> list[ast.AST]:
    """``time.<clock>`` references (called or not) and bare ``<clock>()`` calls imported from time."""
    found: list[ast.AST] = []
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "time"
        for alias in node.names
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in CLOCKS:
            if isinstance(node.value, ast.Name) and node.value.id == "time":
                found.append(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported:
            found.append(node)
    return found


def _measured_only(tree: ast.AST, call: ast.AST) -> bool:
    """A read that only measures seconds for a report: stored in ``began`` (alone or in a tuple) or
    subtracted ``- began``. Anything else may decide."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name) and target.id == "began" and value is call:
                return True
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                for name, item in zip(target.elts, value.elts, strict=False):
                    if item is call and isinstance(name, ast.Name) and name.id == "began":
                        return True
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Sub)
            and node.left is call
            and isinstance(node.right, ast.Name)
            and node.right.id == "began"
        ):
            return True
    return False


def test_only_the_safety_net_reads_the_clock_for_decisions() -> None:
    """Every clock read under planner/planning and planner/solvers is either the safety net's
    (work.py) or a measurement of seconds for a report (``began = ...``, ``... - began``)."""
    offenders = []
    planner = ROOT / "planner"
    files = sorted([*(planner / "planning").rglob("*.py"), *(planner / "solvers").rglob("*.py")])
    assert len(files) > 20
    for path in files:
        if path.name == "work.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                child.parent = node  # type: ignore[attr-defined]
        for read in _clock_reads(tree):
            call = read.parent if isinstance(read.parent, ast.Call) else read  # type: ignore[attr-defined]
            if call is read or not _measured_only(tree, call):
                offenders.append(f"{path.relative_to(ROOT)}:{read.lineno}")  # type: ignore[attr-defined]
    assert offenders == []


def test_the_scan_finds_a_decision_on_the_clock() -> None:
    source = "import time\nbegan = time.perf_counter()\nif time.perf_counter() > 5:\n    pass\n"
    tree = ast.parse(source)
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node  # type: ignore[attr-defined]
    reads = _clock_reads(tree)
    kinds = [_measured_only(tree, read.parent) for read in reads]  # type: ignore[attr-defined]
    assert kinds == [True, False]


# -- a plan says when the net cut it -----------------------------------------------------------------------


def _small_plan_inputs(tmp_path: Path, kit: Any) -> tuple[Any, Any]:
    from models.catalog import Catalog
    from models.scenario import parse

    rows = [kit.offering_row(reserved_1y_usd_h=6.0)]
    catalog = Catalog.load(kit.write_catalog_csv(tmp_path / "catalog.csv", rows))
    data = kit.scenario_dict(
        hours=48,
        terms=["1y"],
        teams=[{"name": "t", "guaranteed_gpus": 0}],
        inference=[{"name": "chat", "team": "t", "gpus_per_replica": 2, "gpu_models": ["H100"],
                    "replicas": {"profile": "flat", "base": 3}}],
        training=[{"name": "pretrain", "team": "t", "nodes": 2, "gpus_per_node": 8, "gpu_models": ["H100"],
                   "hours": 10}],
    )  # fmt: skip
    return parse(data), catalog


def test_a_plan_says_which_stage_the_safety_net_cut(tmp_path: Path, kit: Any, monkeypatch) -> None:
    from planner.planning.optimize import optimize
    from planner.planning.optimize import run as run_module
    from planner.planning.optimize.budget import safety_net_for

    scenario, catalog = _small_plan_inputs(tmp_path, kit)

    class Expired(SafetyNet):
        """A net that has fired for the planner's own loops (the local search, whole replicas, the
        exact-start bound's rounds), while HiGHS runs still get their time: as on a machine far slower
        than the calibration one, late in a plan."""

        def expired(self) -> bool:
            return True

        def left(self) -> float | None:
            return 3600.0

    monkeypatch.setattr(run_module, "safety_net_for", lambda limit: Expired(safety_net_for(limit).seconds))
    cut = optimize(scenario, catalog, tmp_path, kit.exact_settings(method="staged"))
    solver = cut.document.solver
    notes = [note for note in solver.notes if "stopped by the wall-clock limit" in note]
    assert notes and all("a re-run may give another plan" in note for note in notes)
    assert any(note.startswith("the local search stopped") for note in notes)
    assert solver.status != "optimal"
