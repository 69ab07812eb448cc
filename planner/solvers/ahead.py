"""Independent solves worked ahead in threads, consumed in order: the cores in use, the plan unchanged.

Why: the whole-replica step solves hundreds of small period MILPs one after another (inference-heavy-saas:
640, growth-year: 1,525), each a HiGHS run that releases the GIL, while the plan was written on one core of
two. Run in worker threads, the same runs take about half the wall time. The plan must not change with the
cores or the load (issue 39, ``work.py``), so :func:`in_order` hands back each task's result *in task
order*, and charges the caller's work meter with what its run counted in its worker thread (HiGHS's counts:
the same on any thread and any load) as it hands the result over. A caller that stops where its budget
ends then stops exactly where a loop in one thread would, its meter reading the same; what the workers
solved beyond that is dropped. :class:`Beside` does the same for one solve (the finer cluster bound) run
beside the caller's own stages and taken where one thread would have run it. Each thread gets its own
HiGHS scheduler (HiGHS keeps one per calling thread, and ``highs._scheduler_for`` keeps its record per
thread), so no thread's reset touches another's runs.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from functools import partial
from typing import Generic, TypeVar

from planner.solvers.work import SafetyNet, apart, guarded, meter, safety_net

__all__ = ["MAX_WORKERS", "Beside", "in_order", "workers"]

T = TypeVar("T")
R = TypeVar("R")

#: At most this many worker threads (small MILPs: past a few workers the caller's own work between them,
#: applying each answer in order, is what limits).
MAX_WORKERS = 4


def workers() -> int:
    """Worker threads for :func:`in_order`: the cores this process may run on, at most MAX_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def in_order(
    tasks: Iterable[T], solve: Callable[[T], R], threads: int | None = None
) -> Generator[tuple[T, R, float], None, None]:
    """``(task, solve(task), work)`` for each task in order, ``work`` the nominal seconds its run counted,
    charged to the calling thread's meter as the result is handed over (as if solved there, then).

    Up to twice ``threads`` (default :func:`workers`) tasks are solved ahead of the one consumed. Stopping
    the iteration (``break``, or closing the generator) cancels what has not started and waits for what
    has (at most ``threads`` runs, each within its own quota). With one thread the tasks are solved in the
    caller's thread, one at a time, when consumed. The caller's safety net (``work.py``) guards the
    workers' runs too.
    """
    count = workers() if threads is None else max(1, threads)
    if count == 1:
        for task in tasks:
            result, work = _counted(None, partial(solve, task), guard=False)
            meter().charge(work)
            yield task, result, work
        return
    net = safety_net()
    pending: deque[tuple[T, Future[tuple[R, float]]]] = deque()
    source = iter(tasks)
    with ThreadPoolExecutor(count, thread_name_prefix="gpuplan-ahead") as pool:
        try:
            while True:
                for task in itertools.islice(source, 2 * count - len(pending)):
                    pending.append((task, pool.submit(_counted, net, partial(solve, task))))
                if not pending:
                    return
                task, future = pending.popleft()
                result, work = future.result()
                meter().charge(work)
                yield task, result, work
        finally:
            for _task, future in pending:
                future.cancel()


def _counted(net: SafetyNet | None, job: Callable[[], R], guard: bool = True) -> tuple[R, float]:
    """``job()`` under the caller's safety net (``guard``: in a worker thread, whose own net is none), with
    the work it counted on a meter of its own (``work.apart``: the same figure in any thread)."""
    with guarded(net) if guard else nullcontext(), apart() as counted:
        result = job()
    return result, counted.units


class Beside(Generic[R]):
    """One solve run in a thread beside the caller's own work, from the inputs it has now, its result taken
    (or dropped) at the point where a single thread would have run it.

    :meth:`take` waits for it and charges the caller's meter with the work it counted (``work.apart``), so
    the meter reads then what it would have read had the solve run there and then; :meth:`drop` charges
    nothing (as if it had never run). So the stages after either point decide what they would in one
    thread. The solve must read only what the caller does not change meanwhile. With one core
    (:func:`workers`) the solve runs in the caller's thread when taken: no work is wasted on a drop.
    """

    def __init__(self, solve: Callable[[], R], threads: int | None = None) -> None:
        self._solve = solve
        self._future: Future[tuple[R, float]] | None = None
        if (workers() if threads is None else threads) > 1:
            pool = ThreadPoolExecutor(1, thread_name_prefix="gpuplan-beside")
            self._future = pool.submit(_counted, safety_net(), solve)
            pool.shutdown(wait=False)  # the thread ends with the solve

    def take(self) -> R:
        """The solve's result (its exception, if it raised), its work now on the caller's meter."""
        if self._future is None:
            result, work = _counted(None, self._solve, guard=False)
        else:
            result, work = self._future.result()
        meter().charge(work)
        return result

    def drop(self) -> None:
        """Not wanted: nothing charged; a solve not yet started never starts (one running ends on its own
        quota)."""
        if self._future is not None:
            self._future.cancel()
