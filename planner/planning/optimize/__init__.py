"""The planning MILP and its two methods, each step in its own module.

``optimize`` (``run.py``) is the one entry point: it makes the run's time budget (``budget.py``), builds
the sets (``planner/planning/problem/sets.py``) and plans them by the staged method (``staged.py``: one
MILP over merged periods, then whole nodes) or the hourly method (``hourly.py``: the cluster model
decides, every period is dispatched); both end on the same finishing path (``finish.py``). The model
(``build.py``), the certified bounds (``bound.py``, ``bound_exact.py``), the whole replicas
(``realize.py``) and the plan (``solution.py``) stay separate so each can be tested and timed on its own
(``bench/plan_bench.py``). Only re-exports here: the submodules never import this package's namespace,
so any of them imports alone.
"""

from planner.planning.optimize.run import optimize
from planner.planning.optimize.settings import METHODS, SolveSettings

__all__ = ["METHODS", "SolveSettings", "optimize"]
