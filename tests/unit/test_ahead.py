"""``solvers.ahead.in_order``: solves worked ahead in threads, handed over in order with their work on the
caller's meter, so a loop that stops on its budget stops where one thread would."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from planner.solvers.ahead import Beside, in_order, workers
from planner.solvers.highs import HighsModel, RowwiseModel
from planner.solvers.work import NOMINAL_SECONDS, SafetyNet, guarded, meter, safety_net


def _charging(task: int) -> tuple[int, str]:
    """Charges ``task + 1`` moves to the meter of the thread it runs in; says which thread that was."""
    meter().charge_moves(task + 1)
    return task * task, threading.current_thread().name


def test_results_come_in_task_order_with_their_work_on_the_callers_meter() -> None:
    tasks = list(range(12))
    for threads in (1, 2, 3):
        before = meter().units
        handed = list(in_order(tasks, _charging, threads))
        assert [task for task, _result, _work in handed] == tasks
        assert [result for _task, (result, _name), _work in handed] == [t * t for t in tasks]
        works = [work for _task, _result, work in handed]
        assert works == pytest.approx([(t + 1) * NOMINAL_SECONDS["move"] for t in tasks])
        # the workers' own meters' work, moved onto this thread's: as if it had solved them itself
        assert meter().units - before == pytest.approx(sum(works))
        names = {name for _task, (_result, name), _work in handed}
        if threads == 1:
            assert names == {threading.current_thread().name}  # no pool: solved here, when consumed
        else:
            assert threading.current_thread().name not in names


def test_stopping_early_charges_only_what_was_consumed_and_leaves_no_thread_behind() -> None:
    started: list[int] = []

    def solve(task: int) -> int:
        started.append(task)
        meter().charge_moves(1)
        return task

    before = meter().units
    results = in_order(range(100), solve, 2)
    consumed = [next(results)[0] for _ in range(3)]
    results.close()
    assert consumed == [0, 1, 2]
    assert meter().units - before == pytest.approx(3 * NOMINAL_SECONDS["move"])
    assert len(started) <= 3 + 2 * 2  # at most twice the workers solved ahead
    assert not [t for t in threading.enumerate() if t.name.startswith("gpuplan-ahead")]


def test_the_callers_safety_net_guards_the_workers() -> None:
    net = SafetyNet(None)
    with guarded(net):
        seen = [found for _task, found, _work in in_order(range(4), lambda _task: safety_net(), 2)]
    assert all(found is net for found in seen)


def _knapsack(seed: int) -> RowwiseModel:
    """A small integer knapsack of 12 items and 3 weight rows (branching needed)."""
    rng = np.random.default_rng(seed)
    n, m = 12, 3
    weights = rng.integers(3, 17, (m, n)).astype(float)
    return RowwiseModel(
        cost=-rng.integers(4, 25, n).astype(float),
        col_lower=np.zeros(n),
        col_upper=np.full(n, 3.0),
        row_lower=np.full(m, -np.inf),
        row_upper=weights.sum(axis=1) * 0.7,
        start=np.arange(0, m * n + 1, n, dtype=np.int32),
        index=np.tile(np.arange(n, dtype=np.int32), m),
        value=weights.ravel(),
        integral=np.ones(n, dtype=bool),
    )


def _solved(seed: int) -> float:
    highs = HighsModel(_knapsack(seed), threads=1, output_flag=False)
    outcome = highs.run(work=1.0, what="whole replicas")
    assert outcome.optimal
    return outcome.objective


def test_highs_runs_in_worker_threads_give_the_answers_and_counts_of_one_thread() -> None:
    seeds = list(range(16))
    one = [(result, work) for _seed, result, work in in_order(seeds, _solved, 1)]
    for threads in (2, 3):
        assert [(result, work) for _seed, result, work in in_order(seeds, _solved, threads)] == one


def test_workers_are_the_cores_at_most_four() -> None:
    assert 1 <= workers() <= 4


def _charged_solve(moves: int) -> tuple[str, int]:
    meter().charge_moves(moves)
    return threading.current_thread().name, moves


def test_a_solve_beside_is_charged_where_it_is_taken_and_not_at_all_when_dropped() -> None:
    for threads in (1, 2):
        before = meter().units
        beside = Beside(lambda: _charged_solve(7), threads)
        name, moves = beside.take()
        assert moves == 7
        assert meter().units - before == pytest.approx(7 * NOMINAL_SECONDS["move"])
        here = threading.current_thread().name
        assert (name == here) if threads == 1 else name.startswith("gpuplan-beside")

        before = meter().units
        dropped = Beside(lambda: _charged_solve(5), threads)
        dropped.drop()
        assert meter().units == before  # as if it had never run


def test_a_solve_beside_that_fails_fails_where_it_is_taken() -> None:
    def fails() -> None:
        raise ValueError("no bound")

    for threads in (1, 2):
        beside = Beside(fails, threads)
        with pytest.raises(ValueError, match="no bound"):
            beside.take()
