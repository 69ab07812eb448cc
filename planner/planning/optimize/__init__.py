"""The planning MILP: sets -> model -> solve -> plan, each step in its own module.

``optimize`` (``run.py``) is the one entry point: it builds the sets (``sets.py``) and plans them by
the staged method (``staged.py``: one MILP over merged periods, then whole nodes) or the hourly method
(``hourly.py``); the model (``build.py``), the solver calls (``solve.py``), the certified bound
(``bound.py``) and the plan (``solution.py``) stay separate so each
can be tested and timed on its own (``bench/plan_bench.py``). Only re-exports here: the submodules
never import this package's namespace, so any of them imports alone.
"""

from planner.planning.optimize.run import optimize
from planner.planning.optimize.settings import METHODS, SolveSettings

__all__ = ["METHODS", "SolveSettings", "optimize"]
