"""``--time-limit`` made once into one budget, and every stage's share of it named here, once.

Why: a plan is made in stages (the staged method's MILPs, the hourly method's cluster model, the local
search, the exact-start bound, the whole replicas); each may take part of the limit, and the parts must
add up. Every share, floor and ratio is a row of :data:`OF_LIMIT`, :data:`OF_LEFT` or :data:`SECONDS`,
with the measurement that chose it, and a stage asks :class:`TimeBudget` for its seconds instead of
computing them where it runs.

The seconds are *nominal*: counted work (HiGHS callback calls and LP iterations, the planner's own moves)
converted by fixed constants (``planner/solvers/work.py``), counted from the start of planning, never the
clock: so every share, floor and gate below decides the same on an idle and a loaded machine, and the same
scenario gives the same plan (issue 39). ``--time-limit`` means "about this many seconds of work on a typical
machine"; the wall-clock safety net (``work.SafetyNet``, made beside this budget in ``run.optimize``) is the
only limit that reads the clock. What each stage does with its seconds is the stage's business; a stage that
ends before its share leaves the rest to the next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from planner.solvers.work import SAFETY_AT_LEAST, SAFETY_FACTOR, SafetyNet, meter

__all__ = ["OF_LEFT", "OF_LIMIT", "SECONDS", "Share", "TimeBudget", "safety_net_for"]


class Share(StrEnum):
    """A stage's part of the budget: of the whole limit (:data:`OF_LIMIT`), or of what is left when the
    stage starts (:data:`OF_LEFT`)."""

    # of the limit
    STAGE_1 = "stage 1 (staged)"
    STAGES = "stages 1-3 and the local search (staged)"
    LOCAL_SEARCH = "local search"
    EXACT_BOUND = "exact-start bound"
    FINER_BOUND = "finer cluster bound (hourly)"
    REALIZE = "whole replicas"
    CERTIFIED = "certified bound, at least"
    # of what is left
    STAGE_2_FREE = "stage 2 with commitments free (staged)"
    CLUSTER_MILP_MOST = "cluster MILP, at most (hourly)"
    CLUSTER_MILP_LEAST = "cluster MILP, at least (hourly)"
    MOVE_TRAINING = "training moves, per round (hourly)"
    TUNE_COMMITMENTS = "commitments re-tuned (hourly)"


#: Shares of ``--time-limit``.
OF_LIMIT: Final[dict[Share, float]] = {
    # where sharing idle commitments between gangs and inference leaves many near-equal plans, HiGHS can
    # spend any budget closing stage 1's last 1 %: stage 1 stops here
    Share.STAGE_1: 0.4,
    # the certified bound keeps the other 30 %, whatever the stages took
    Share.STAGES: 0.7,
    # the local search's gains come early: on bench/gen.py medium 10 moves made -0.75 % in 15 s, and on
    # growth-year an unbounded search took 48 s of a 60 s limit for less than the whole-replica step lost
    # by waiting for it
    Share.LOCAL_SEARCH: 0.2,
    # measured on mixed-fleet, 120 s of it stayed below the cluster bound (its integer stage does not
    # finish), while a plan that was done early would otherwise always take its whole limit
    Share.EXACT_BOUND: 0.15,
    # the hourly method's cluster LP again with finer clusters (bound.finer_bound), at most: at 16
    # clusters per block it took 17.3 nominal s (4.0 s of the clock: its LP's iterations are cheaper
    # than the stage-1 iterations the constant was fitted on) on inference-heavy-saas, 2-4 s elsewhere;
    # an LP that finishes early leaves the rest
    Share.FINER_BOUND: 0.3,
    # refining whole replicas (the rounding itself always runs), at least: they take what is left
    Share.REALIZE: 0.25,
    # the certified bound gets at least this, whatever the stages overran: on the README example 30
    # nominal seconds prove its cluster MILP optimal ($1,813,689, 13 CPU s), while the 5 s floor left
    # it at $1,771,409 (certified gap 5.08 % against 2.82 %)
    Share.CERTIFIED: 0.25,
}

#: Shares of what is left of the limit when the stage starts.
OF_LEFT: Final[dict[Share, float]] = {
    Share.STAGE_2_FREE: 0.5,
    # long limits: the cluster MILP takes at most 3/4 and at least a third of what is left (the bound
    # keeps rising with MILP time)
    Share.CLUSTER_MILP_MOST: 0.75,
    Share.CLUSTER_MILP_LEAST: 1 / 3,
    Share.MOVE_TRAINING: 0.5,
    Share.TUNE_COMMITMENTS: 0.5,
}

#: Floors, thresholds and the figures used without a limit, in seconds (ratios where named so).
SECONDS: Final[dict[str, float]] = {
    # a stage given less than this still gets it (a bound stopped early is still valid)
    "stage floor": 5.0,
    # the exact-start bound is started only with this much; without a limit it gets the next figure
    "exact bound at least": 5.0,
    "exact bound without a limit": 60.0,
    # whole replicas' period MILPs without a limit
    "realize without a limit": 30.0,
    # the local search is not started with less than this
    "local search at least": 1.0,
    # the hourly method's cluster LP, without which there is no plan, gets this at least, past the limit
    # if need be (on the large benchmark at --time-limit 60 it takes 56-65 s)
    "cluster LP at least": 600.0,
    # the cluster MILP runs only with this much left; it gets at least the next figure, or this many
    # times the cluster LP's time (medium: done in ~10 s; large: 16 s LP -> 40 s): measured on the large
    # benchmark, 80 s of MILP improved the plan by nothing and the bound by 1.07 M, while the same time
    # spent moving training saved 1.07 M
    "cluster MILP when left": 10.0,
    "cluster MILP at least": 20.0,
    "cluster MILP per LP second (ratio)": 2.5,
    # training moves stop with less than this left; commitments are re-tuned only with this much
    "training moves when left": 2.0,
    "tuning at least": 1.0,
    # the local search keeps time for this many more dispatches of the plan after it (ratio)
    "dispatches kept (ratio)": 1.5,
}


@dataclass
class TimeBudget:
    """``--time-limit`` nominal seconds (None: no limit) from ``began`` (a reading of the thread's work
    meter), and what each stage may take of them. Made once per plan by ``run.optimize``; handed to
    whatever runs, with the run's safety net (``net``; None: none)."""

    limit: float | None
    realize_seconds: float | None = None  # whole replicas' budget as given (None: its share)
    began: float = field(default_factory=lambda: _work_done())
    clock: Callable[[], float] = field(default=lambda: _work_done())
    net: SafetyNet | None = None

    def elapsed(self) -> float:
        """Nominal seconds of work since planning began."""
        return self.clock() - self.began

    def wall_seconds(self) -> float:
        """Wall seconds since planning began, measured for reports only (the safety net's clock; 0.0
        without a net): never a decision."""
        return 0.0 if self.net is None else self.net.elapsed()

    def deadline(self, seconds: float | None) -> float | None:
        """The meter reading ``seconds`` of work from now (None: no limit), for :meth:`past`."""
        return None if seconds is None else self.clock() + seconds

    def past(self, deadline: float | None, what: str) -> bool:
        """Whether the work done has reached ``deadline`` (from :meth:`deadline`), or the safety net has
        fired (then recorded as cutting ``what``)."""
        if self.net is not None and self.net.expired():
            self.net.cut(what)
            return True
        return deadline is not None and self.clock() >= deadline

    def left(self) -> float | None:
        """Seconds left of the limit (negative once past it); None without a limit."""
        return None if self.limit is None else self.limit - self.elapsed()

    def of_limit(self, share: Share) -> float | None:
        """``share`` of the limit, in seconds; None without a limit."""
        return None if self.limit is None else OF_LIMIT[share] * self.limit

    def until(self, share: Share) -> float | None:
        """Seconds left until ``share`` of the limit has passed since planning began."""
        end = self.of_limit(share)
        return None if end is None else end - self.elapsed()

    def of_left(self, share: Share, left: float | None) -> float | None:
        """``share`` of ``left`` seconds (None: no limit)."""
        return None if left is None else OF_LEFT[share] * left

    @property
    def realize(self) -> float:
        """Seconds the whole replicas' local search and period MILPs may take in all: as given, else what
        is left of the limit, at least their share (a fixed figure without one); periods beyond it keep
        the rounded answer. What is left, because their gains are real money: growth-year at
        ``--time-limit 60`` saved $87,336 refining 1,525 periods in 47 s, and with its share alone (15 s)
        the plan cost 1.5 % more."""
        if self.realize_seconds is not None:
            return self.realize_seconds
        share, left = self.of_limit(Share.REALIZE), self.left()
        if share is None or left is None:
            return SECONDS["realize without a limit"]
        return max(share, left)

    # -- the rules of the stages that weigh several figures -----------------------------------------------

    def stage_floor(self, seconds: float) -> float:
        """``seconds``, at least the stage floor."""
        return max(SECONDS["stage floor"], seconds)

    def certified(self) -> float | None:
        """The certified bound's work: what is left of the limit, at least its share (None: no limit)."""
        left, share = self.left(), self.of_limit(Share.CERTIFIED)
        if left is None or share is None:
            return None
        return max(left, share, SECONDS["stage floor"])

    def worth_a_stage(self, seconds: float | None) -> bool:
        """Whether ``seconds`` (None: no limit) are more than the stage floor: enough to start a stage."""
        return seconds is None or seconds > SECONDS["stage floor"]

    def exact_bound(self, bound_usd: float, plan_usd: float, gap: float) -> float | None:
        """Seconds for the exact-start bound now, or None: skip it (the plan is already proven within
        ``gap`` by ``bound_usd``, or too little is left). What is left, at most its share; no limit: a
        fixed figure."""
        if plan_usd - bound_usd <= gap * max(plan_usd, 1e-9):
            return None
        left, share = self.left(), self.of_limit(Share.EXACT_BOUND)
        if left is None or share is None:
            return SECONDS["exact bound without a limit"]
        seconds = min(left, share)
        return seconds if seconds >= SECONDS["exact bound at least"] else None

    def local_search(
        self, left: float | None, reserve: float, dispatch_seconds: float, say: Callable[[str], None]
    ) -> float | None:
        """Seconds the local search may take (None: no limit): ``left`` less ``reserve`` and the
        dispatches kept after it, at most its share of the limit; says so when that is too short."""
        if left is None:
            return None
        seconds = left - reserve - SECONDS["dispatches kept (ratio)"] * dispatch_seconds
        share = self.of_limit(Share.LOCAL_SEARCH)
        if share is not None:
            seconds = min(seconds, share)
        if seconds < SECONDS["local search at least"]:
            say(f"local search: no time left ({max(left, 0.0):.0f} s, {reserve:.0f} s kept)")
        return seconds

    def searchable(self, seconds: float | None) -> bool:
        """Whether a local search given ``seconds`` is worth starting."""
        return seconds is None or seconds >= SECONDS["local search at least"]

    def cluster_lp(self) -> float | None:
        """The hourly method's cluster LP: what is left, at least its floor (past the limit if need be)."""
        left = self.left()
        return None if left is None else max(left, SECONDS["cluster LP at least"])

    def cluster_milp(self, lp_seconds: float) -> float | None:
        """The cluster MILP after an LP of ``lp_seconds``: None when too little is left to start it, else
        at most 3/4 and at least a third of what is left, capped relative to the LP's time."""
        left = self.left()
        per_lp_second = SECONDS["cluster MILP per LP second (ratio)"]
        cap = max(SECONDS["cluster MILP at least"], per_lp_second * lp_seconds)
        if left is None:
            return cap
        return max(
            min(OF_LEFT[Share.CLUSTER_MILP_MOST] * left, cap), OF_LEFT[Share.CLUSTER_MILP_LEAST] * left
        )

    def runs_cluster_milp(self) -> bool:
        left = self.left()
        return left is None or left > SECONDS["cluster MILP when left"]


def safety_net_for(limit: float | None) -> SafetyNet:
    """The run's wall-clock safety net: ``SAFETY_FACTOR`` x ``--time-limit`` seconds, at least
    ``SAFETY_AT_LEAST`` (none without a limit)."""
    return SafetyNet(None if limit is None else max(SAFETY_FACTOR * limit, SAFETY_AT_LEAST))


def _work_done() -> float:
    return meter().units
