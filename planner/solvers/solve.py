"""Solver choice and status, in one place.

HiGHS (through highspy) is the default: in this problem class it is ~2x faster than CBC and returns a
better solution (``../shared/reference/SOLVER-NOTES.md``). The model is handed to HiGHS as one row-wise
CSR matrix with a single ``passModel`` call (PuLP's own HiGHS interface adds rows and columns one by
one, about 2x slower), and the MIP dual bound is read back so the plan can state its gap; all HiGHS
calls go through ``planner.solvers.highs``. CBC is the fallback, driven through PuLP's ``COIN_CMD`` (a ``cbc``
on PATH, else the binary PuLP 3 bundles); its bound is parsed from its log. Only PuLP's public API is
used (``LpProblem.constraints()``, ``variables()``, ``objective``), so PuLP 4 keeps working.

``time_limit`` here is counted work in nominal seconds (``planner/solvers/work.py``), not the clock: HiGHS
runs stop after a count of its MIP callbacks or LP iterations, so the same problem gives the same answer on
an idle and a loaded machine; only the safety net's wall-clock limit may cut a run, and
``SolveResult.stopped_by`` then says ``time``. CBC takes it as wall seconds (it has no counted limit here).

Statuses follow linopy's split: ``status`` is what the caller acts on (``ok`` when a feasible
incumbent exists), ``termination`` says why the solver stopped. Nothing here asserts a status.
"""

from __future__ import annotations

import math
import re
import tempfile
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np
import pulp
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from models.errors import SolverError
from planner.solvers import highs, work
from planner.solvers.highs import HighsModel, RowwiseModel

SOLVERS = ("highs", "cbc")


class Termination(StrEnum):
    OPTIMAL = "optimal"  # within the requested gap
    TIME_LIMIT = "time_limit"  # stopped by the time limit with an incumbent
    FEASIBLE = "feasible"  # a plan, but its proven gap is above the requested one (hourly method)
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    NO_SOLUTION = "no_solution"  # stopped without an incumbent
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class SolveResult:
    solver: str
    termination: Termination
    objective: float
    bound: float
    seconds: float  # measured wall seconds, for reports only
    stopped_by: str | None = None  # "work" (its quota: deterministic), "time" (the safety net), None

    @property
    def ok(self) -> bool:
        return self.termination in (Termination.OPTIMAL, Termination.TIME_LIMIT, Termination.FEASIBLE)

    @property
    def gap(self) -> float:
        """Relative distance of the incumbent from the proven lower bound."""
        if not self.ok:
            return math.inf
        return max(0.0, self.objective - self.bound) / max(abs(self.objective), 1e-9)


def solve(
    problem: pulp.LpProblem,
    solver: str = "highs",
    time_limit: float | None = None,
    gap: float = 0.005,
    threads: int | None = None,
    verbose: bool = False,
    start: dict[str, float] | None = None,
    what: str = "a MILP",
) -> SolveResult:
    """Solve ``problem`` in place (variables get ``varValue``) and report how it went.

    ``start`` (variable name -> value) is a feasible solution handed to HiGHS as its first incumbent,
    so branch and bound can prune from the start (CBC ignores it). A start that names only some
    variables (say, the integer ones) is completed by HiGHS. The objective returned is what the values
    written back cost: a started run whose reported objective is not is solved again without the start.
    ``what`` names the run where the safety net records a cut (module docstring).
    """
    if solver not in SOLVERS:
        raise SolverError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if solver == "highs" and not highs.available():  # pragma: no cover - highspy is a dependency
        solver = "cbc"
    if solver == "highs":
        return _solve_highs(problem, time_limit, gap, threads, verbose, start, what)
    return _solve_cbc(problem, time_limit, gap, threads, verbose)


def rowwise(problem: pulp.LpProblem) -> tuple[list[pulp.LpVariable], RowwiseModel]:
    """The problem as one row-wise matrix: columns in ``problem.variables()`` order, rows in the order
    the constraints were added."""
    variables = problem.variables()
    index = {id(v): k for k, v in enumerate(variables)}
    starts, cols, vals, lower, upper = [0], [], [], [], []
    for constraint in problem.constraints():
        for var, coef in constraint.items():
            if coef:
                cols.append(index[id(var)])
                vals.append(coef)
        starts.append(len(cols))
        rhs = -constraint.constant
        sense = constraint.sense
        lower.append(rhs if sense in (pulp.LpConstraintGE, pulp.LpConstraintEQ) else -np.inf)
        upper.append(rhs if sense in (pulp.LpConstraintLE, pulp.LpConstraintEQ) else np.inf)
    cost = np.zeros(len(variables))
    for var, coef in problem.objective.items():
        cost[index[id(var)]] += coef
    return variables, RowwiseModel(
        cost=cost,
        col_lower=np.array([v.lowBound if v.lowBound is not None else -np.inf for v in variables]),
        col_upper=np.array([v.upBound if v.upBound is not None else np.inf for v in variables]),
        integral=np.array([v.cat == pulp.LpInteger for v in variables]),
        row_lower=np.array(lower, dtype=float),
        row_upper=np.array(upper, dtype=float),
        start=np.array(starts, dtype=np.int32),
        index=np.array(cols, dtype=np.int32),
        value=np.array(vals, dtype=float),
    )


# a HiGHS objective further than this (relative, and absolute in $) from what its solution costs is
# misreported (``_solve_highs``)
MISREPORT_TOLERANCE = 1e-7


def _solve_highs(
    problem: pulp.LpProblem,
    time_limit: float | None,
    gap: float,
    threads: int | None,
    verbose: bool,
    start: dict[str, float] | None = None,
    what: str = "a MILP",
) -> SolveResult:
    began, counted = time.perf_counter(), work.meter().units
    variables, model = rowwise(problem)
    if not variables:  # nothing to decide (no demand, nothing to buy): HiGHS calls that an empty model
        return SolveResult("HiGHS", Termination.OPTIMAL, 0.0, 0.0, time.perf_counter() - began)
    run = _run_highs(model, variables, time_limit, gap, threads, verbose, start, what)
    if start and run.values is not None:
        cost = float(model.cost @ run.values)
        if not math.isclose(cost, run.objective, rel_tol=MISREPORT_TOLERANCE, abs_tol=MISREPORT_TOLERANCE):
            # HiGHS (seen in 1.16 with presolve on) can take a MIP start into its presolved model
            # wrongly: it reports the objective and bound of a reduced-space point, calls that optimal
            # and hands back the start itself, which costs something else. Nothing it reported about
            # this run holds, so solve again without the start (tests/unit/test_solve.py).
            spent = work.meter().units - counted
            left = None if time_limit is None else max(1.0, time_limit - spent)
            cold = _run_highs(model, variables, left, gap, threads, verbose, None, what)
            if cold.values is not None and cold.objective <= cost + MISREPORT_TOLERANCE * max(1.0, cost):
                run = cold
            else:  # the cold run found nothing as good in time: keep the start, at what it costs
                bound = min(cold.bound, cost) if cold.values is not None else -math.inf
                within = max(0.0, cost - bound) / max(abs(cost), 1e-9) <= gap
                termination = Termination.OPTIMAL if within else Termination.TIME_LIMIT
                run = _HighsRun(termination, cost, bound, run.values, cold.stopped_by)
    if run.values is not None:
        for var, value in zip(variables, run.values, strict=True):
            var.varValue = float(value)
    seconds = time.perf_counter() - began
    return SolveResult("HiGHS", run.termination, run.objective, run.bound, seconds, run.stopped_by)


@dataclass(frozen=True, slots=True)
class _HighsRun:
    termination: Termination
    objective: float
    bound: float
    values: np.ndarray | None  # column values, when the run ended with a solution
    stopped_by: str | None = None


def _run_highs(
    model: RowwiseModel,
    variables: list[pulp.LpVariable],
    time_limit: float | None,
    gap: float,
    threads: int | None,
    verbose: bool,
    start: dict[str, float] | None,
    what: str = "a MILP",
) -> _HighsRun:
    """One HiGHS run of ``model`` (columns ``variables``), optionally from ``start``."""
    solver = HighsModel(
        model,
        quiet=not verbose,
        output_flag=bool(verbose),
        mip_rel_gap=float(gap),
        threads=None if threads is None else int(threads),
    )
    if start and len(start) < len(variables):  # a partial start: HiGHS completes it (integers fixed)
        given = [(k, start[var.name]) for k, var in enumerate(variables) if var.name in start]
        solver.set_partial_start(
            np.array([k for k, _ in given], dtype=np.int32),
            np.array([value for _, value in given], dtype=float),
        )
    elif start:
        solver.set_start([start.get(var.name, 0.0) for var in variables])
    outcome = solver.run(work=time_limit, what=what)
    if outcome.optimal:
        termination = Termination.OPTIMAL
    elif outcome.infeasible:
        termination = Termination.INFEASIBLE
    elif outcome.unbounded:
        termination = Termination.UNBOUNDED
    elif outcome.stopped and outcome.feasible:
        termination = Termination.TIME_LIMIT
    elif outcome.stopped:
        termination = Termination.NO_SOLUTION
    else:
        termination = Termination.ERROR
    if termination not in (Termination.OPTIMAL, Termination.TIME_LIMIT):
        return _HighsRun(termination, math.nan, math.nan, None, outcome.stopped_by)
    values = np.asarray(solver.col_value(), dtype=float)
    objective = outcome.objective
    bound = outcome.dual_bound if model.is_mip else objective
    if not math.isfinite(bound):
        bound = objective if termination == Termination.OPTIMAL else -math.inf
    return _HighsRun(termination, objective, bound, values, outcome.stopped_by)


_CBC_OBJECTIVE = re.compile(r"Objective value:\s*([-+0-9.eE]+)")
_CBC_BOUND = re.compile(r"Lower bound:\s*([-+0-9.eE]+)")


def _solve_cbc(
    problem: pulp.LpProblem, time_limit: float | None, gap: float, threads: int | None, verbose: bool
) -> SolveResult:
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpuplan-cbc-") as tmp:
        log = Path(tmp) / "cbc.log"
        command = _cbc_command(
            msg=verbose, timeLimit=time_limit, gapRel=gap, threads=threads, logPath=str(log)
        )
        try:
            problem.solve(command)
        except pulp.PulpSolverError as exc:
            raise SolverError(f"CBC failed: {exc}") from exc
        text = log.read_text(errors="replace") if log.exists() else ""
    status = pulp.LpStatus[problem.status]
    solution_status = problem.sol_status
    if status == "Optimal" and solution_status == pulp.LpSolutionOptimal:
        termination = Termination.OPTIMAL
    elif solution_status == pulp.LpSolutionIntegerFeasible or (
        status == "Optimal" and solution_status != pulp.LpSolutionOptimal
    ):
        termination = Termination.TIME_LIMIT
    elif status == "Infeasible":
        termination = Termination.INFEASIBLE
    elif status == "Unbounded":
        termination = Termination.UNBOUNDED
    else:
        termination = Termination.NO_SOLUTION
    objective = bound = math.nan
    if termination in (Termination.OPTIMAL, Termination.TIME_LIMIT):
        objective = float(pulp.value(problem.objective) or 0.0)
        found = _CBC_BOUND.findall(text)
        if found:
            bound = float(found[-1])
        elif termination == Termination.OPTIMAL:
            # CBC often prints no "Lower bound"; it stopped within gapRel, which proves this much
            bound = objective * (1 - gap)
        else:
            bound = -math.inf
        bound = min(bound, objective)
    return SolveResult("CBC", termination, objective, bound, time.perf_counter() - began)


def _cbc_command(**options: object) -> pulp.LpSolver:
    """CBC through PuLP's ``COIN_CMD`` (never the deprecated ``PULP_CBC_CMD``): a ``cbc`` on PATH (what
    ``pip install 'pulp[cbc]'`` provides, the only way in PuLP 4), else the binary PuLP 3 bundles."""
    for path in _cbc_paths():
        command = pulp.COIN_CMD(path=path, **options)
        if command.available():
            return command
    raise SolverError("CBC is not installed (pip install 'pulp[cbc]' or put cbc on PATH); use --solver highs")


def _cbc_paths() -> list[str | None]:
    """Where CBC may be: None lets COIN_CMD look on PATH; then PuLP 3's bundled binary, if it ships one."""
    from pulp.apis import coin_api

    bundled = getattr(coin_api, "pulp_cbc_path", None)
    return [None, bundled] if bundled else [None]


def solve_separable(
    problem: pulp.LpProblem, time_limit: float | None = None, gap: float = 1e-4, verbose: bool = False
) -> SolveResult:
    """Solve a MILP whose fixed variables (lower == upper) leave independent blocks, block by block.

    With commitments and training placements fixed, the planning model falls apart into one small
    problem per slot; HiGHS's branch and bound does not see that and, on a few hundred slots, can
    run for minutes on what takes a second block by block. The result is the sum over blocks (each
    solved to ``gap``); its bound is the sum of the blocks' bounds. HiGHS only.
    """
    began, counted = time.perf_counter(), work.meter().units
    variables, model = rowwise(problem)
    lower, upper, cost = model.col_lower, model.col_upper, model.cost
    fixed = np.isfinite(lower) & (lower == upper)
    values = np.where(fixed, lower, 0.0)
    starts, index, coef = model.start, model.index, model.value
    row_lower, row_upper = model.row_lower.copy(), model.row_upper.copy()
    free_rows: list[tuple[int, np.ndarray, np.ndarray]] = []
    for r in range(len(row_lower)):
        cols, vals = index[starts[r] : starts[r + 1]], coef[starts[r] : starts[r + 1]]
        constant = float(vals[fixed[cols]] @ lower[cols[fixed[cols]]]) if fixed[cols].any() else 0.0
        row_lower[r] -= constant
        row_upper[r] -= constant
        free = ~fixed[cols]
        if not free.any():
            if row_lower[r] > 1e-6 or row_upper[r] < -1e-6:
                return SolveResult(
                    "HiGHS", Termination.INFEASIBLE, math.nan, math.nan, time.perf_counter() - began
                )
            continue
        free_rows.append((r, cols[free], vals[free]))
    # the blocks: connected parts of the graph that links each free row's columns to its first one
    none = [np.zeros(0, dtype=np.int64)]
    heads = np.concatenate([np.full(len(cols) - 1, cols[0]) for _, cols, _ in free_rows] or none)
    tails = np.concatenate([cols[1:] for _, cols, _ in free_rows] or none)
    links = coo_matrix((np.ones(len(heads)), (heads, tails)), shape=(len(variables), len(variables)))
    _, part = connected_components(links, directed=False)
    blocks: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for row in free_rows:  # in row order, as the solves then go
        blocks.setdefault(int(part[row[1][0]]), []).append(row)
    in_rows = np.zeros(len(variables), dtype=bool)
    for _, cols, _ in free_rows:
        in_rows[cols] = True
    loose = ~fixed & ~in_rows  # in no constraint: sits at the cheaper bound
    values[loose] = np.where(cost[loose] >= 0, lower[loose], upper[loose])
    if not np.isfinite(values[loose]).all():
        return SolveResult("HiGHS", Termination.UNBOUNDED, math.nan, math.nan, time.perf_counter() - began)
    objective = bound = float(cost[fixed | loose] @ values[fixed | loose])
    worst, stopped_by = Termination.OPTIMAL, None
    for rows in blocks.values():
        cols = np.unique(np.concatenate([c for _, c, _ in rows]))
        local = {int(c): k for k, c in enumerate(cols)}
        integral = model.integral[cols]
        block = RowwiseModel(
            cost=cost[cols],
            col_lower=lower[cols],
            col_upper=upper[cols],
            row_lower=np.array([row_lower[r] for r, _, _ in rows]),
            row_upper=np.array([row_upper[r] for r, _, _ in rows]),
            start=np.cumsum([0] + [len(c) for _, c, _ in rows]).astype(np.int32),
            index=np.array([local[int(k)] for _, c, _ in rows for k in c], dtype=np.int32),
            value=np.concatenate([v for _, _, v in rows]),
            integral=integral,
        )
        left = None if time_limit is None else max(1.0, time_limit - (work.meter().units - counted))
        solver = HighsModel(block, quiet=not verbose, output_flag=bool(verbose), mip_rel_gap=float(gap))
        # a quota, but outside the safety net (required=True): without every block there is no plan
        outcome = solver.run(work=left, what="a slot's MILP", required=True)
        stopped_by = stopped_by or outcome.stopped_by
        if not outcome.feasible:
            termination = Termination.INFEASIBLE if outcome.infeasible else Termination.NO_SOLUTION
            return SolveResult("HiGHS", termination, math.nan, math.nan, time.perf_counter() - began)
        if not outcome.optimal:
            worst = Termination.TIME_LIMIT
        values[cols] = solver.col_value()
        objective += outcome.objective
        block_bound = outcome.dual_bound if integral.any() else outcome.objective
        bound += block_bound if math.isfinite(block_bound) else -math.inf
    for var, value in zip(variables, values, strict=True):
        var.varValue = float(value)
    return SolveResult("HiGHS", worst, objective, bound, time.perf_counter() - began, stopped_by)
