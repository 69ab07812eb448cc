"""planner/solvers/highs.py: HiGHS's one scheduler per process does not break runs that ask other thread
counts."""

from __future__ import annotations

import numpy as np
import pytest

from planner.solvers.highs import HighsModel, RowwiseModel


def _knapsack() -> RowwiseModel:
    """max 5a + 4b + 3c  s.t.  2a + 3b + c <= 4, binaries: by hand a = c = 1, b = 0, value 8."""
    return RowwiseModel(
        cost=np.array([-5.0, -4.0, -3.0]),
        col_lower=np.zeros(3),
        col_upper=np.ones(3),
        row_lower=np.array([-np.inf]),
        row_upper=np.array([4.0]),
        start=np.array([0, 3], dtype=np.int32),
        index=np.array([0, 1, 2], dtype=np.int32),
        value=np.array([2.0, 3.0, 1.0]),
        integral=np.array([True, True, True]),
    )


def test_runs_with_changing_thread_counts_all_solve() -> None:
    """HiGHS alone fails the second of these runs (model status "not set": its scheduler was built
    for another count); through HighsModel every one is optimal at the hand-computed value."""
    for threads in (None, 1, 2, 0, 1):
        outcome = HighsModel(_knapsack(), threads=threads).run()
        assert outcome.optimal, threads
        assert outcome.objective == pytest.approx(-8.0)
