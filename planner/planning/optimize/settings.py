"""How a plan is solved: the method and the solver's limits, shared by both methods."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["METHODS", "SolveSettings"]

METHODS = ("auto", "staged", "hourly")
REALIZE_SHARE = 0.25  # of the time limit, for refining whole replicas (the rounding itself always runs)
#: Of the time limit, at most, for the local search (local_search.py). Its gains come early: on
#: bench/gen.py medium 10 moves made -0.75 % in 15 s, and on growth-year an unbounded search took 48 s
#: of a 60 s limit for less than the whole-replica step lost by waiting for it.
SEARCH_SHARE = 0.2
#: The local search stops after a round of moves that saved less than this share of the plan's cost.
SEARCH_MIN_ROUND_GAIN = 1e-4


@dataclass(frozen=True, slots=True)
class SolveSettings:
    solver: str = "highs"
    time_limit: float | None = 120.0
    gap: float = 0.005
    threads: int | None = None
    verbose: bool = False
    block_hours: int | None = None
    start_grid_hours: int | None = None
    certify: bool = True  # also bound the full hourly problem (planner/planning/optimize/bound.py)
    bound_clusters_per_block: int | None = None  # None: by size (bound.clusters_per_block)
    method: str = "auto"  # staged (one MILP, then whole nodes) or hourly (hourly.py); see METHODS
    cluster_relax: bool | None = None  # hourly method: True stops at the cluster model's LP (no MILP)
    realize_seconds: float | None = None  # whole replicas: the period MILPs' time (None: see below)

    @property
    def realize_budget(self) -> float:
        """Seconds the local search and period MILPs of ``realize.py`` may take in all:
        ``realize_seconds``, else a quarter of the time limit (30 s without one); periods beyond it keep
        the rounded answer (the plan's notes say how many were refined)."""
        if self.realize_seconds is not None:
            return self.realize_seconds
        return 30.0 if self.time_limit is None else REALIZE_SHARE * self.time_limit
