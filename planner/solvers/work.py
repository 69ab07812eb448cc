"""Work counted, not timed: the one budget unit every stage of a plan spends, and the wall-clock safety net.

Why: a plan whose stages stop on the clock depends on how busy the machine is (issue 39: h100-shortage
came out 8.4 % dearer on a loaded machine). So every decision of the planner that used to read the clock
reads a :class:`WorkMeter` instead: a count of solver work (HiGHS's MIP callback calls, LP simplex
iterations, runs) and of the planner's own moves, each converted to *nominal seconds* by the fixed
constants of :data:`NOMINAL_SECONDS` (measured on an idle 2-core machine, see below). The same scenario
and options then take the same decisions, whatever else the machine runs. ``--time-limit`` keeps its
meaning "about this many seconds of work on a typical machine".

The clock is read for decisions in one place only, :class:`SafetyNet`: an outer wall-clock limit that
HiGHS gets as its ``time_limit`` and own loops ask :meth:`SafetyNet.expired`. It fires only far past the
nominal budget (a machine several times slower than the calibration one); when it cuts a stage, the
stage says so (``stopped_by="time"``) and the plan's notes name it, since a re-run may then give another
plan. Seconds measured for reports (``seconds`` fields, progress lines) are read from the clock too, but
never decide anything; tests/unit/test_work.py scans the planning code for clock reads outside both.

HiGHS is deterministic when stopped by a count of ``cbMipInterrupt`` calls (same objective, bound and
solution idle and beside two CPU burners, with 1 and 2 threads: measured on HiGHS 1.16), by an LP
iteration limit, or at the end; a wall-clock ``time_limit`` is not. Its callbacks are coarse (mixed-fleet's
stage 1: 86 calls in 48 s, up to 26 s between two calls at the root), so a quota is a count of calls.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "CALLBACK_BY_STAGE",
    "CALL_GROWTH",
    "NOMINAL_SECONDS",
    "NO_INCUMBENT_FACTOR",
    "SAFETY_AT_LEAST",
    "SAFETY_FACTOR",
    "SafetyNet",
    "WorkMeter",
    "apart",
    "deadline_after",
    "guarded",
    "meter",
    "past",
    "safety_net",
]

#: Nominal seconds per unit of counted work: the calibration constants, fitted to the CPU seconds of one
#: HiGHS thread on the 2-core development machine (CPU seconds, not wall: they hold on a loaded machine
#: too); bench/determinism_bench.py prints cost and seconds idle and loaded (bench/RESULTS.md).
NOMINAL_SECONDS: Final[dict[str, float]] = {
    # a MIP run's quota: one cbMipInterrupt call per nonzero of its matrix, unless its stage has its
    # own figure (CALLBACK_BY_STAGE: the calls come per node in a search, or between root rounds, so
    # their cost differs by model)
    "mip callback per nonzero": 6e-6,
    # what a run is charged: one simplex iteration per nonzero of the matrix (an iteration's cost grows
    # with the model; stage 1 of mixed-fleet: 80,715 iterations in 23.7 CPU s; a MIP's LPs count too)
    "lp iteration per nonzero": 3.4e-9,
    # one interior-point iteration per nonzero (a factorization each)
    "ipm iteration per nonzero": 2e-7,
    # one branch-and-bound node beyond its LP iterations (a small knapsack: 4,530 nodes in 1.8 s)
    "mip node": 4e-4,
    # one HiGHS run of any kind: setting up, presolve, reading back (the dispatch loop runs thousands).
    # More than a small run costs: growth-year's 19,533 runs of 48 nonzeros took 0.27 ms each inside the
    # run and 0.48 ms from one to the next (2026-12-07). Charged at 0.5 ms, the local search and the
    # training moves took their whole shares for little: spot-price-shock -0.08 %, fleet-mid-contract
    # -0.02 %, colocation-decision the same plan, each 20-30 s longer at --time-limit 60; so 4 ms stays
    "run": 0.004,
    # one local-search evaluation or one move tried by the planner's own loops, beyond its LPs
    "move": 0.001,
    # one price evaluation of the whole-replica local search (``PeriodState._added``, with the moves and
    # undos around it), measured 2026-12-07 beside another plan: growth-year at --time-limit 60, 292,548
    # evaluations in 14.4 s; inference-heavy-saas 46,220 in 3.0 s (one "move" per period, as charged
    # before, made that 1.5 and 0.7 nominal s)
    "price evaluation": 5e-5,
    # one period's whole-replica MILP beyond its HiGHS run's count: the model is built and read back in
    # Python and its small runs cost more than their calls (growth-year: 1,525 MILPs, 28.7 s in HiGHS,
    # charged 8.4; inference-heavy-saas: 655 MILPs, 26.9 s, charged 10.9)
    "period model": 0.015,
}

#: Nominal seconds per callback call and nonzero, for the stages whose calls cost another figure,
#: by the ``what`` a run is given (CPU seconds of one HiGHS thread on mixed-fleet, the README example).
CALLBACK_BY_STAGE: Final[dict[str, float]] = {
    # 184 calls in 27.6 CPU s on 85,579 nonzeros: at the default limit its quota, 312 calls, is about
    # what the clock-limited stage reached in 48 s on an idle machine (the e2e example's model gap)
    "stage 1": 1.8e-6,
    "stage 2": 6.0e-6,  # 74 calls in 31.3 CPU s on 69,672 nonzeros
    "stage 3": 6.7e-6,  # 129 calls in 73.2 CPU s on 85,579 nonzeros
    "the exact-start bound": 1.1e-5,  # 11 calls in 62.4 CPU s on 510,800 nonzeros
    # its calls are cheaper (many nodes): at 6e-6, 30 nominal s cut it at $1,726,240; at 3.1e-6 it
    # proves $1,813,707 optimal in 12.4 CPU s (1 thread, the README example)
    "the cluster model's MILP": 3.1e-6,
}

#: A MIP run that has used its quota without an incumbent goes on to this many times it (a count still).
NO_INCUMBENT_FACTOR: Final = 4

#: The safety net's wall-clock limit is this many times ``--time-limit``, and at least
#: ``SAFETY_AT_LEAST`` seconds: far enough that an ordinary loaded machine never reaches it, short limits
#: included (the work outside the solver, building models and writing the plan, does not shrink with
#: the limit). Measured: 2.7x slower beside two burners; at load 15 on 2 cores (three test suites beside
#: it) stage 1 of the README example took 478 s for 48 nominal, so 4x would have cut it.
SAFETY_FACTOR: Final = 10.0
SAFETY_AT_LEAST: Final = 300.0


@dataclass
class WorkMeter:
    """Nominal seconds of work done so far in this thread (see module docstring); only ever grows."""

    units: float = 0.0

    def charge(self, units: float) -> None:
        self.units += max(0.0, units)

    def charge_run(
        self,
        *,
        iterations: int = 0,
        ipm_iterations: int = 0,
        nodes: int = 0,
        callbacks: int = 0,
        nonzeros: int = 0,
        what: str = "",
    ) -> float:
        """Charge one HiGHS run's counted work (its info record and callback calls: the same on any
        load); return what it cost in nominal seconds. A MIP run costs at least what its callback calls
        buy (:func:`callbacks_for`), so a run stopped by its quota is charged that quota."""
        size = max(1, nonzeros)
        lp = (
            iterations * size * NOMINAL_SECONDS["lp iteration per nonzero"]
            + ipm_iterations * size * NOMINAL_SECONDS["ipm iteration per nonzero"]
            + nodes * NOMINAL_SECONDS["mip node"]
        )
        calls = callbacks * size * callback_cost(what, size)
        cost = NOMINAL_SECONDS["run"] + max(lp, calls)
        self.charge(cost)
        return cost

    def charge_moves(self, moves: int = 1, kind: str = "move") -> None:
        """Charge ``moves`` of the planner's own steps of ``kind`` (a key of :data:`NOMINAL_SECONDS`)."""
        self.charge(moves * NOMINAL_SECONDS[kind])


#: Stages whose calls cost more than in proportion to the matrix above the size they were calibrated on:
#: (nonzeros calibrated, exponent), the cost per call and nonzero growing as (nonzeros / calibrated) **
#: exponent above it. Stage 1's calls (each a node or a round of cuts, an LP re-solve each) measured per
#: call and nonzero on 2026-12-07: training-heavy-lab 26,777 nonzeros 1.9e-6 s, mixed-fleet 85,579
#: 3.1e-6, h100-shortage 164,423 7.8e-6 (2.5x mixed-fleet's for 1.9x its size: exponent 1.38); at the
#: flat figure h100-shortage's stage 1 took 104 s for 24 nominal. Below the calibrated size the flat
#: figure held (training-heavy-lab), so the README example and smaller models are charged as before.
CALL_GROWTH: Final[dict[str, tuple[int, float]]] = {"stage 1": (85_579, 1.38)}


def callback_cost(what: str, nonzeros: int = 0) -> float:
    """Nominal seconds per callback call and nonzero of the stage named ``what`` on a matrix of
    ``nonzeros`` (:data:`CALL_GROWTH` above its calibrated size)."""
    cost = CALLBACK_BY_STAGE.get(what, NOMINAL_SECONDS["mip callback per nonzero"])
    if what in CALL_GROWTH:
        calibrated, exponent = CALL_GROWTH[what]
        cost *= max(1.0, nonzeros / calibrated) ** exponent
    return cost


def callbacks_for(units: float, nonzeros: int, what: str = "") -> int:
    """The count of MIP callback calls that ``units`` nominal seconds buy on a matrix of ``nonzeros``
    in the stage named ``what`` (at least 1)."""
    per = max(1, nonzeros) * callback_cost(what, nonzeros)
    return max(1, math.ceil(units / per - 1e-9))  # a hair below: float rounding is no extra call


def iterations_for(units: float, nonzeros: int, ipm: bool = False) -> int:
    """The simplex (``ipm``: interior-point) iterations that ``units`` nominal seconds buy on a matrix of
    ``nonzeros`` (at least 1)."""
    kind = "ipm iteration per nonzero" if ipm else "lp iteration per nonzero"
    per = max(1, nonzeros) * NOMINAL_SECONDS[kind]
    return max(1, math.ceil(units / per - 1e-9))  # a hair below: float rounding is no extra call


@dataclass
class SafetyNet:
    """The outer wall-clock limit (None: none) and what it cut: the only reader of the clock that may
    decide anything (module docstring)."""

    seconds: float | None
    clock: Callable[[], float] = time.perf_counter
    began: float = field(default=math.nan)
    cuts: dict[str, float] = field(default_factory=dict)  # what the net stopped, in order: wall seconds

    def __post_init__(self) -> None:
        if math.isnan(self.began):
            self.began = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.began

    def left(self) -> float | None:
        """Wall seconds left before the net (None: no net); never below a hundredth of a second."""
        return None if self.seconds is None else max(0.01, self.seconds - self.elapsed())

    def expired(self) -> bool:
        return self.seconds is not None and self.elapsed() >= self.seconds

    def cut(self, what: str) -> None:
        """Record that the net stopped ``what`` (once per name, with the wall seconds it had run)."""
        self.cuts.setdefault(what, round(self.elapsed(), 1))


_local = threading.local()


def meter() -> WorkMeter:
    """This thread's meter (plans run one at a time in a thread; sweeps use processes)."""
    found: WorkMeter | None = getattr(_local, "meter", None)
    if found is None:
        found = _local.meter = WorkMeter()
    return found


@contextmanager
def apart() -> Iterator[WorkMeter]:
    """A fresh meter for this thread while the block runs (the thread's own back after it): what the block
    counted, summed from zero in the order charged, so the same figure in any thread (``solvers/ahead.py``
    moves it onto the caller's meter)."""
    saved = meter()
    _local.meter = fresh = WorkMeter()
    try:
        yield fresh
    finally:
        _local.meter = saved


def safety_net() -> SafetyNet | None:
    """The net of the plan running in this thread, if any."""
    return getattr(_local, "net", None)


@contextmanager
def guarded(net: SafetyNet | None) -> Iterator[SafetyNet | None]:
    """Make ``net`` this thread's safety net while the block runs."""
    saved = safety_net()
    _local.net = net
    try:
        yield net
    finally:
        _local.net = saved


def deadline_after(seconds: float | None) -> float | None:
    """The meter reading ``seconds`` nominal seconds of work from now (None: no limit), for :func:`past`:
    what an own loop (local search, moves, refined periods) stops at instead of a clock time."""
    return None if seconds is None else meter().units + seconds


def past(deadline: float | None, what: str) -> bool:
    """Whether the thread's work has reached ``deadline`` (:func:`deadline_after`), or the safety net has
    fired (then recorded as cutting ``what``): the check of every own loop."""
    net = safety_net()
    if net is not None and net.expired():
        net.cut(what)
        return True
    return deadline is not None and meter().units >= deadline
