"""The one place the planner drives HiGHS (highspy): create, set options, pass a model, run, read back.

Every HiGHS model of the planner goes through :class:`HighsModel`: the staged MILP and its slot-by-slot
blocks (``solvers/solve.py``), the per-period covering LP (``planning/optimize/dispatch.py``) and MIG
packing's cutting-stock MILP (``planning/mig/packing.py``). A model is handed over as one row-wise CSR matrix
(:class:`RowwiseModel`) with a single ``passModel`` call; the caller picks the options (names and values
as HiGHS spells them), so each call site keeps exactly its own settings. What a run ended with is read
through :class:`Outcome` (status first; the info record, values, duals and row activities on demand,
since the hourly method re-solves one model thousands of times and mostly needs only the status).

HiGHS prints a banner on the process's stdout (file descriptor 1, which Python's ``sys.stdout``
redirection cannot catch) when the first ``Highs`` object is created: :func:`quiet_stdout` silences it.

HiGHS keeps one thread scheduler per calling thread, sized by that thread's first run; a later run
asking another ``threads`` count fails at once (model status "not set", which the planner reported as
status 'error'), as when ``gpuplan whatif`` in-process or a library user plans with ``--threads 1`` after
a default run. :meth:`HighsModel.run` resets the thread's scheduler when the count asked for changes
(``Highs.resetGlobalScheduler``), so any sequence of thread settings works, in any thread.

Runs are budgeted in counted work, never the clock (``planner/solvers/work.py``): :meth:`HighsModel.run`
takes a ``work`` quota in nominal seconds (a MIP: a count of ``cbMipInterrupt`` calls, then interrupted;
an LP: a simplex iteration limit), charges what the run did to the thread's
:class:`~planner.solvers.work.WorkMeter`, and passes HiGHS only the safety net's wall-clock
``time_limit``. Every run has ``random_seed`` 0 and one thread unless it is given another count (HiGHS's
own default follows the cores: 2 workers on the 2-core development machine, so the hourly method's runs,
which passed none, could take another path on a machine with more cores), so a run stopped by its quota
gives the same answer on an idle and a loaded machine, and on any number of cores.

highspy is imported on first use, so importing this module does not load the solver.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from planner.solvers import work as _work

__all__ = ["HighsModel", "Outcome", "RowwiseModel", "available", "quiet_stdout"]


def available() -> bool:
    """True when highspy can be imported."""
    try:
        import highspy  # noqa: F401
    except ImportError:  # pragma: no cover - highspy is a dependency
        return False
    return True


@contextmanager
def quiet_stdout(active: bool = True) -> Iterator[None]:
    """Point file descriptor 1 at /dev/null while the block runs (no-op when ``active`` is False).

    One block at a time in the process: descriptor 1 is the process's, and two threads redirecting it at
    once (``solvers/ahead.py``'s workers each creating a model) would each save the other's /dev/null,
    and one would restore that: stdout lost for the rest of the run (the plan's summary with it)."""
    if not active:
        yield
        return
    with _stdout_lock:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as devnull:
                os.dup2(devnull.fileno(), 1)
                yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


_stdout_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class RowwiseModel:
    """min cost @ x  s.t.  row_lower <= A x <= row_upper,  col_lower <= x <= col_upper.

    ``A`` is row-wise CSR: row ``r``'s entries are ``index[start[r]:start[r + 1]]`` (columns) and
    ``value[...]``. ``integral`` (a bool per column) marks integer columns; None or all False: an LP.
    Infinite bounds are ``±inf``. The arrays are handed to HiGHS as given (no copy, no reordering).
    """

    cost: Any
    col_lower: Any
    col_upper: Any
    row_lower: Any
    row_upper: Any
    start: Any
    index: Any
    value: Any
    integral: Any = None

    @property
    def num_col(self) -> int:
        return len(self.cost)

    @property
    def num_row(self) -> int:
        return len(self.row_lower)

    @property
    def is_mip(self) -> bool:
        return self.integral is not None and bool(np.any(self.integral))


class Outcome:
    """How a run ended: HiGHS's model status, and the figures of its info record (read on first use,
    so a re-solve loop that only checks the status does not pay for them; read them before the next
    run of the same model)."""

    __slots__ = ("_highs", "_info", "quota_hit", "status")

    def __init__(self, highs: Any, quota_hit: bool = False) -> None:
        self._highs = highs
        self._info: Any = None
        self.status = highs.getModelStatus()  # a highspy.HighsModelStatus
        self.quota_hit = quota_hit  # interrupted by the run's work quota (not by anything else)

    @property
    def status_text(self) -> str:
        """HiGHS's own wording of the status, for messages."""
        return self._highs.modelStatusToString(self.status)

    @property
    def optimal(self) -> bool:
        return self.status == _highspy().HighsModelStatus.kOptimal

    @property
    def infeasible(self) -> bool:
        return self.status == _highspy().HighsModelStatus.kInfeasible

    @property
    def unbounded(self) -> bool:
        statuses = _highspy().HighsModelStatus
        return self.status in (statuses.kUnbounded, statuses.kUnboundedOrInfeasible)

    @property
    def stopped(self) -> bool:
        """Stopped by a limit (time, iterations, nodes, solutions) or an interrupt, with or without an
        incumbent (HiGHS reports node, leaf and improving-solution limits as ``kSolutionLimit``)."""
        statuses = _highspy().HighsModelStatus
        return self.status in (
            statuses.kTimeLimit,
            statuses.kIterationLimit,
            statuses.kInterrupt,
            statuses.kSolutionLimit,
        )

    @property
    def stopped_by(self) -> Literal["work", "time"] | None:
        """What stopped the run: its counted work (a quota, an iteration, node or solution limit:
        deterministic), the wall-clock safety net (``time``: a re-run may end elsewhere), or None (it
        ended by itself)."""
        statuses = _highspy().HighsModelStatus
        if self.status == statuses.kTimeLimit:
            return "time"
        if self.status in (statuses.kIterationLimit, statuses.kSolutionLimit):
            return "work"
        if self.quota_hit and self.status == statuses.kInterrupt:
            return "work"
        return None

    @property
    def feasible(self) -> bool:
        """HiGHS holds a primal feasible solution (for a MIP: an incumbent)."""
        return self._read().primal_solution_status == _highspy().SolutionStatus.kSolutionStatusFeasible

    @property
    def objective(self) -> float:
        """``objective_function_value``: the objective at the solution HiGHS holds."""
        return self._read().objective_function_value

    @property
    def dual_bound(self) -> float:
        """``mip_dual_bound``: a MIP's proven lower bound (not meaningful for an LP)."""
        return self._read().mip_dual_bound

    def _read(self) -> Any:
        if self._info is None:
            self._info = self._highs.getInfo()
        return self._info


class HighsModel:
    """A ``highspy.Highs`` holding one model: created (quietly unless ``quiet`` is False), ``options``
    set in the order given (a None value leaves that option at HiGHS's default), then the model passed.

    The model stays loaded: bounds, integrality and options can change between runs (``run`` again
    re-solves from the last basis, as HiGHS does).
    """

    def __init__(self, model: RowwiseModel, *, quiet: bool = True, **options: Any) -> None:
        highspy = _highspy()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = model.num_col, model.num_row
        lp.col_cost_ = model.cost
        lp.col_lower_, lp.col_upper_ = model.col_lower, model.col_upper
        lp.row_lower_, lp.row_upper_ = model.row_lower, model.row_upper
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = lp.num_col_, lp.num_row_
        lp.a_matrix_.start_ = model.start
        lp.a_matrix_.index_ = model.index
        lp.a_matrix_.value_ = model.value
        if model.is_mip:
            lp.integrality_ = [
                highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous
                for flag in model.integral
            ]
        with quiet_stdout(quiet):  # HiGHS prints a banner on stdout when created
            self.highs = highspy.Highs()
        self._threads = 0  # HiGHS's default: its own choice
        self._mip = model.is_mip  # integer columns: budgeted by callback calls, else by iterations
        self.callbacks = 0  # cbMipInterrupt calls of the last run
        self.highs.setOptionValue("random_seed", 0)  # pinned, whatever HiGHS's default becomes
        if options.get("threads") is None:  # one unless asked (module docstring)
            options["threads"] = 1
        self.set_options(**options)
        self.highs.passModel(lp)

    def set_options(self, **options: Any) -> None:
        """HiGHS options by name (``mip_rel_gap=1e-4``), in the order given; None values are skipped.
        ``time_limit`` is not one of them: runs take a ``work`` quota (module docstring)."""
        if "time_limit" in options:
            raise ValueError("HighsModel takes no time_limit: pass run(work=...) (planner/solvers/work.py)")
        for name, value in options.items():
            if value is not None:
                self.highs.setOptionValue(name, value)
                if name == "threads":
                    self._threads = int(value)

    def set_start(self, values: Sequence[float]) -> None:
        """A full primal solution (one value per column) as the first incumbent."""
        incumbent = _highspy().HighsSolution()
        incumbent.col_value = values
        incumbent.value_valid = True
        self.highs.setSolution(incumbent)

    def set_partial_start(self, columns: np.ndarray, values: np.ndarray) -> None:
        """Values for some columns (int32 indices): HiGHS completes the start (integers fixed)."""
        self.highs.setSolution(len(columns), columns, values)

    def make_integer(self, columns: np.ndarray) -> None:
        """Mark ``columns`` (int32 indices) integer."""
        kind = _highspy().HighsVarType.kInteger
        self._mip = self._mip or len(columns) > 0
        self.highs.changeColsIntegrality(len(columns), columns, np.array([kind] * len(columns)))

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self.highs.changeRowsBounds(len(rows), rows, lower, upper)

    def set_col_bounds(self, columns: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self.highs.changeColsBounds(len(columns), columns, lower, upper)

    def run(self, work: float | None = None, what: str = "a HiGHS run", required: bool = False) -> Outcome:
        """Solve (or re-solve) within ``work`` nominal seconds of counted work (None: to the end), and,
        with a quota, the safety net's wall-clock limit, if a net is up; charge the work done to the
        thread's meter. ``what`` names the run where the net records a cut; a ``required`` run (one
        without which there is no plan, such as stage 2's slot blocks) is outside the net."""
        _scheduler_for(self._threads)
        # the net limits budgeted runs only: a run without a quota (a period's dispatch LP, a packing)
        # is part of writing the plan and must finish
        net = _work.safety_net() if work is not None and not required else None
        left = None if net is None else net.left()
        self.highs.setOptionValue("time_limit", math.inf if left is None else float(left))
        mip = self._mip
        calls = [0]
        nonzeros = self.highs.getNumNz()
        quota = None if work is None or not mip else _work.callbacks_for(work, nonzeros, what)

        def count(event: Any) -> None:
            calls[0] += 1
            # a run without an incumbent goes on to NO_INCUMBENT_FACTOR x its quota (still a count):
            # stopped with nothing, the stage would fail where a little more work finds a plan
            if quota is not None and calls[0] >= quota:
                found = math.isfinite(event.data_out.mip_primal_bound)
                if found or calls[0] >= _work.NO_INCUMBENT_FACTOR * quota:
                    event.interrupt()

        if mip:  # counted with or without a quota: a MIP run is charged its calls too
            self.highs.cbMipInterrupt.subscribe(count)
        elif work is not None:
            self.highs.setOptionValue("simplex_iteration_limit", _work.iterations_for(work, nonzeros))
            self.highs.setOptionValue("ipm_iteration_limit", _work.iterations_for(work, nonzeros, ipm=True))
        try:
            self.highs.run()
        finally:
            if mip:
                self.highs.cbMipInterrupt.unsubscribe(count)
            if work is not None and not mip:
                self.highs.setOptionValue("simplex_iteration_limit", _NO_LIMIT)
                self.highs.setOptionValue("ipm_iteration_limit", _NO_LIMIT)
        outcome = Outcome(self.highs, quota_hit=quota is not None and calls[0] >= quota)
        self.callbacks = calls[0]
        _work.meter().charge_run(
            iterations=self._info_count("simplex_iteration_count"),
            ipm_iterations=self._info_count("ipm_iteration_count"),
            nodes=self._info_count("mip_node_count") if mip else 0,
            callbacks=calls[0],
            nonzeros=nonzeros,
            what=what,
        )
        if net is not None and outcome.stopped_by == "time":
            net.cut(what)
        return outcome

    def _info_count(self, name: str) -> int:
        """An iteration count of the last run's info record (0 where HiGHS has none)."""
        status, value = self.highs.getInfoValue(name)
        return max(0, int(value)) if status == _highspy().HighsStatus.kOk else 0

    def solution(self) -> Any:
        """The last run's ``HighsSolution``: ``col_value``, ``row_value``, ``row_dual``."""
        return self.highs.getSolution()

    def col_value(self) -> Any:
        """The columns' values of the last run, as highspy returns them."""
        return self.highs.getSolution().col_value


_NO_LIMIT = 2_147_483_647  # HiGHS's simplex_iteration_limit default (kHighsIInf)
_module: Any = None
_scheduler = threading.local()  # .threads: the ``threads`` option of this thread's last run


def _scheduler_for(threads: int) -> None:
    """Reset this thread's HiGHS scheduler if a run asks a thread count it was not built for (module
    docstring). 0 (HiGHS's default: its own choice) fits any scheduler. A thread's first run with a count
    resets it too: HiGHS may have run in it outside this module (PuLP's own ``HiGHS`` solver, a library
    user's code) and built a scheduler of another size. HiGHS keeps one scheduler per calling thread (its
    executor handle is thread-local), so the record is per thread too: a reset here never touches another
    thread's runs (``solvers/ahead.py``'s workers)."""
    if threads and threads != getattr(_scheduler, "threads", None):
        _highspy().Highs.resetGlobalScheduler(True)
    _scheduler.threads = threads


def _highspy() -> Any:
    global _module
    if _module is None:
        import highspy

        _module = highspy
    return _module
