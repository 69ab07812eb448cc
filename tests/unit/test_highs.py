"""planner/solvers/highs.py: HiGHS's one scheduler per process does not break runs that ask other thread
counts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from planner.solvers.highs import HighsModel, RowwiseModel, quiet_stdout


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


def test_a_run_after_highs_ran_outside_this_module_solves() -> None:
    """PuLP's own HiGHS solver (or a library user's code) builds the process's scheduler at HiGHS's
    default size; the planner's first run, pinned to one thread, failed after it (status 'error' in a
    staged plan, found when the savings-plan tests ran in file order). In a fresh process, as the
    scheduler is process-wide."""
    script = textwrap.dedent(
        """
        import pulp
        from planner.solvers.highs import HighsModel
        from tests.unit.test_highs import _knapsack
        model = pulp.LpProblem("outside", pulp.LpMinimize)
        x = pulp.LpVariable("x", 0, 4, cat="Integer")
        model += x
        model += x >= 1.5
        model.solve(pulp.HiGHS(msg=False))
        assert pulp.LpStatus[model.status] == "Optimal", model.status
        outcome = HighsModel(_knapsack(), threads=1).run()
        print(outcome.optimal, outcome.objective)
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["True", "-8.0"]


def test_two_threads_silencing_stdout_at_once_leave_it_where_it_was() -> None:
    """Two threads creating models at once (``solvers/ahead.py``'s workers): without one redirect at a
    time, the second saves the first's /dev/null and restores it last, and the plan's summary that
    followed was lost (found on inference-heavy-saas: exit 0, empty stdout)."""
    before = os.fstat(1)
    first_inside, second_trying, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with quiet_stdout():
            first_inside.set()
            second_trying.wait(5)
            time.sleep(0.2)  # the second thread now tries to redirect while this one is inside
        first_out.set()

    def second() -> None:
        first_inside.wait(5)
        second_trying.set()
        with quiet_stdout():
            first_out.wait(5)  # leaves after the first: the last to restore descriptor 1

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    after = os.fstat(1)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)


def test_runs_with_changing_thread_counts_solve_in_threads_beside_each_other() -> None:
    """HiGHS's scheduler is per calling thread, so is the record of its size: a worker builds one for 2
    threads, the main thread then runs at 1, and the worker's next run at 1 must still reset its own
    (a record shared by the threads said 1 already, and that run failed)."""
    worker_built, main_ran = threading.Event(), threading.Event()
    seen: list[bool] = []

    def worker() -> None:
        seen.append(HighsModel(_knapsack(), threads=2).run().optimal)
        worker_built.set()
        main_ran.wait(30)
        seen.append(HighsModel(_knapsack(), threads=1).run().optimal)

    thread = threading.Thread(target=worker)
    thread.start()
    worker_built.wait(30)
    outcome = HighsModel(_knapsack(), threads=1).run()
    main_ran.set()
    thread.join(30)
    assert outcome.optimal and outcome.objective == pytest.approx(-8.0)
    assert seen == [True, True]


def test_a_run_has_one_thread_unless_it_asks_another_count() -> None:
    """HiGHS's own default follows the cores (2 workers on 2 cores), so a model that names no count is
    pinned to 1: the hourly method's runs named none, and a machine with more cores could plan otherwise."""
    assert HighsModel(_knapsack()).highs.getOptionValue("threads")[1] == 1
    assert HighsModel(_knapsack(), threads=None).highs.getOptionValue("threads")[1] == 1
    assert HighsModel(_knapsack(), threads=0).highs.getOptionValue("threads")[1] == 0
    assert HighsModel(_knapsack(), threads=2).highs.getOptionValue("threads")[1] == 2
