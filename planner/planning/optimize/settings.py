"""How a plan is solved: the method and the solver's limits, shared by both methods (the time limit's
shares per stage are ``budget.py``'s)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.planning.problem.sets import ModelOptions

__all__ = ["METHODS", "SolveSettings"]

METHODS = ("auto", "staged", "hourly")
#: The local search stops after a round of moves that saved less than this share of the plan's cost.
SEARCH_MIN_ROUND_GAIN = 1e-4


@dataclass(frozen=True, slots=True)
class SolveSettings:
    solver: str = "highs"
    time_limit: float | None = 120.0  # nominal seconds: counted work (planner/solvers/work.py)
    gap: float = 0.005
    threads: int | None = 1  # pinned: HiGHS sizes its workers by the cores otherwise (issue 39)
    verbose: bool = False
    block_hours: int | None = None
    start_grid_hours: int | None = None
    certify: bool = True  # also bound the full hourly problem (planner/planning/optimize/bound.py)
    bound_clusters_per_block: int | None = None  # None: by size (bound.clusters_per_block)
    method: str = "auto"  # staged (one MILP, then whole nodes) or hourly (hourly.py); see METHODS
    cluster_relax: bool | None = None  # hourly method: True stops at the cluster model's LP (no MILP)
    realize_seconds: float | None = None  # whole replicas: the period MILPs' time (None: their share)
    # a plan read only for its fleet, cost and bound (the futures' own plans, never written): no MIG
    # config schedule, no per-team charges (``solution.build_plan``)
    lean: bool = False

    def model_options(self) -> ModelOptions:
        """The sets' options these settings ask for (training blocks and start grid)."""
        return ModelOptions(block_hours=self.block_hours, start_grid_hours=self.start_grid_hours)
