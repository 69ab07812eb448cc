"""An event-driven replay of a job trace on a GPU fleet, under one of three scheduling policies.

Why: a capacity plan is only as good as the scheduler that runs on it. This module replays a trace so
the policies (``policies``) can be compared on the same fleet (``fleet``) and the same jobs.

The loop is a heap of events (arrivals, completions; a preempted job re-enters the queue at once). After
all events at one instant are applied, the policy runs one scheduling pass. Time is in hours.

Preempted work restarts from its last checkpoint (``Job.checkpoint_hours``, every 30 minutes of run
time by default): the work since that checkpoint is lost and counted. Durations in the trace are used
as exact run-time estimates by the backfill, which is optimistic (real schedulers see user estimates).

Metrics (time-weighted over the measured window): allocation (GPUs allocated to jobs, including the
GPUs a half-placed gang holds, and whole MIG/share GPUs by the share of slices taken), utilization (the
GPUs jobs actually use: a 9 GB replica rounded up to a whole GPU allocates 1 and uses 0.11),
fragmentation (free GPUs on nodes that cannot host the per-node part of the first request that could
not start, plus leftover slices no such request fits; the per-node measure of Weng et al., ATC'23),
queueing delay per team (first start minus arrival; jobs still waiting at the end count with their wait
so far), completions, preemptions and lost work, gangs split across leaf switches.

Throughput (for the saturated regime, where it is the measure that matters): useful GPU-hours, the work
done in the window counted at full speed (a job slowed by its placement, :class:`fleet.Slowdown`,
advances at ``1 / factor``: the GPU-hours it holds count divided by the factor; GPUs held by a
half-placed gang count nothing; work lost at a preemption since the last checkpoint counts nothing), and
the GPU-hours of the jobs that completed in the window (their trace GPU-hours, however long they took).
A :class:`Backlog` keeps the queue filled from the job list in its order (each job enters the queue
when the queue falls below the backlog, with that time as its arrival), so the fleet never runs out of
work; ``empty_queue_hours`` shows whether it did.
"""

from __future__ import annotations

import heapq
import math
import time
from bisect import insort
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from planner.simulate.fleet import EPS, ClusterState, Fleet, Job, Shape, Slowdown
from planner.simulate.policies import Group, Placement, Policy, Run, make_policy

# ---- results ------------------------------------------------------------------------------------------


@dataclass
class SimResult:
    """What one replay measured; ``timeline`` holds the state after every event instant."""

    policy: str
    fleet: Fleet
    window: tuple[float, float]
    allocation_pct: float
    utilization_pct: float
    fragmentation_pct: float
    queue_delay: dict[str, dict[str, float]]  # team -> {jobs, mean_h, p95_h, waiting_at_end}
    delay_by_kind: dict[str, dict[str, float]]  # inference, training, and "gang" (multi-node jobs)
    completions: int
    completions_by_kind: dict[str, int]
    preemptions: int
    lost_gpu_hours: float
    gangs_started: int
    gangs_split: int
    expired_replicas: int
    rejected: int
    events: int
    wall_seconds: float
    timeline: pd.DataFrame
    useful_gpu_hours: float = 0.0  # work done in the window at full speed (see the module docstring)
    useful_multi_gpu_hours: float = 0.0  # the part of it done by jobs of more than one GPU
    completed_gpu_hours: float = 0.0  # trace GPU-hours of the jobs that completed in the window
    slowdown_gpu_hours: float = 0.0  # GPU-hours held in the window that slowed placements wasted
    slowed_starts: int = 0  # starts (in the window) on a placement slower than the best one
    empty_queue_hours: float = 0.0  # hours of the window with nothing waiting (0: saturated throughout)

    @property
    def days(self) -> float:
        return max(0.0, self.window[1] - self.window[0]) / 24.0

    @property
    def throughput_per_day(self) -> float:
        """Useful GPU-hours per day of the measured window."""
        return self.useful_gpu_hours / self.days if self.days > 0 else 0.0

    @property
    def overall_delay(self) -> dict[str, float]:
        return self.queue_delay.get("(all)", {})

    @property
    def events_per_second(self) -> float:
        return self.events / self.wall_seconds if self.wall_seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "fleet": self.fleet.describe(),
            "window_hours": list(self.window),
            "allocation_pct": round(self.allocation_pct, 3),
            "utilization_pct": round(self.utilization_pct, 3),
            "fragmentation_pct": round(self.fragmentation_pct, 3),
            "queue_delay_hours": self.queue_delay,
            "queue_delay_hours_by_kind": self.delay_by_kind,
            "completions": self.completions,
            "completions_by_kind": self.completions_by_kind,
            "preemptions": self.preemptions,
            "lost_gpu_hours": round(self.lost_gpu_hours, 3),
            "gangs_started": self.gangs_started,
            "gangs_split_across_leaves": self.gangs_split,
            "expired_replicas": self.expired_replicas,
            "rejected_jobs": self.rejected,
            "events": self.events,
            "wall_seconds": round(self.wall_seconds, 3),
            "events_per_second": round(self.events_per_second, 1),
            "useful_gpu_hours": round(self.useful_gpu_hours, 3),
            "useful_gpu_hours_per_day": round(self.throughput_per_day, 3),
            "useful_multi_gpu_hours": round(self.useful_multi_gpu_hours, 3),
            "completed_gpu_hours": round(self.completed_gpu_hours, 3),
            "slowdown_gpu_hours": round(self.slowdown_gpu_hours, 3),
            "slowed_starts": self.slowed_starts,
            "empty_queue_hours": round(self.empty_queue_hours, 4),
        }


def _delay_stats(delays: Sequence[float], waiting: int) -> dict[str, float]:
    if not delays:
        return {"jobs": 0, "mean_h": 0.0, "p95_h": 0.0, "waiting_at_end": waiting}
    values = np.asarray(delays, dtype=float)
    return {
        "jobs": len(values),
        "mean_h": round(float(values.mean()), 4),
        "p95_h": round(float(np.percentile(values, 95)), 4),
        "waiting_at_end": waiting,
    }


# ---- the event loop -----------------------------------------------------------------------------------

# at one instant: completions free GPUs, then waiting replicas whose demand has passed leave, then arrivals
_FINISH, _EXPIRE, _ARRIVE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Backlog:
    """The saturated regime: keep at least ``gpus`` GPUs of demand waiting (a half-placed gang
    included) and at least ``jobs`` jobs of one GPU (or less) among them, fed from the job list in its
    order.

    Why both: a bounded queue that only bigger jobs fill would leave free GPUs idle under a policy that
    could start smaller work, which an unbounded backlog (everything submitted at once) would not;
    keeping one-GPU jobs waiting means a free GPU always has work a policy could start, while the queue
    stays short enough for backfill passes to be cheap."""

    gpus: float = 0.0
    jobs: int = 1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.gpus) and self.gpus >= 0) or self.jobs < 1:
            raise ValueError(f"a backlog needs gpus >= 0 and jobs >= 1, got {self}")


@dataclass(slots=True)
class _Reservation:
    run: Run
    shadow: float  # the earliest start the running jobs' end times allow
    nodes: frozenset[int]  # where it would start then


class Simulator:
    """One replay: ``jobs`` on ``fleet`` under ``policy`` from ``start`` to ``end`` (hours; ``None``: until
    every job is done).

    Metrics cover ``[measure_from, end)``; jobs arriving before ``measure_from`` (or marked
    ``counted=False``) warm the fleet up and are left out of the queueing statistics. ``quotas`` are the
    teams' guaranteed GPUs (workload-aware fair share). ``progress`` is called now and then with the
    share of simulated time done. ``check`` verifies the cluster invariants after every instant (tests).
    ``slowdown``: how placement slows jobs (default: it does not). ``backlog``: the saturated regime,
    ``jobs`` enter the queue in the order given as it drains (their arrival times are replaced).
    """

    def __init__(
        self,
        jobs: Iterable[Job],
        fleet: Fleet,
        policy: Policy,
        *,
        start: float | None = None,
        end: float | None = None,
        measure_from: float | None = None,
        quotas: dict[str, float] | None = None,
        progress: Callable[[float], None] | None = None,
        check: bool = False,
        slowdown: Slowdown | None = None,
        backlog: Backlog | None = None,
    ) -> None:
        self.backlog = backlog
        self.slowdown = slowdown or Slowdown()
        self.jobs = list(jobs) if backlog is not None else sorted(jobs, key=lambda j: (j.arrival, j.id))
        ids = {j.id for j in self.jobs}
        if len(ids) != len(self.jobs):
            raise ValueError("job ids must be unique")
        self.fleet = fleet
        self.policy = policy
        first = self.jobs[0].arrival if self.jobs and backlog is None else 0.0
        self.start = start if start is not None else first
        self.drain = end is None  # no end given: run until every job is done, the window ends there
        self.end = end if end is not None else math.inf
        if self.end <= self.start:
            raise ValueError(f"the replay must end after it starts ({self.start} .. {self.end})")
        self.measure_from = min(self.end, max(self.start, measure_from if measure_from is not None else 0.0))
        self.quotas = dict(quotas or {})
        self.progress = progress
        self.check = check
        self.state = ClusterState(fleet)
        self._key: Callable[[Run], Any] = (lambda r: r.key) if policy.fair_share else (lambda r: r.fifo_key)
        self.queue: list[Run] = []  # sorted by self._key
        self.running: dict[int, Run] = {}
        self.runs: list[Run] = []
        self.usage: dict[str, float] = defaultdict(float)
        self.used = 0.0
        self.reservation: _Reservation | None = None
        self.reserved: Run | None = None  # who held the last reservation: keeps its place until it starts
        self.blocked: Shape | None = None  # the first request the last pass could not start
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._tie = 0
        self.preemptions = 0
        self.lost_gpu_hours = 0.0
        self.gangs_started = 0
        self.gangs_split = 0
        self.rejected = 0
        self.events = 0
        self._rows: list[tuple[float, float, float, float, int, int]] = []
        self._snapshot = (0.0, 0.0, 0.0)
        self._integral = np.zeros(3)
        self._feed: deque[Job] = deque()
        self.queued_gpus = 0.0  # GPUs asked by the queue (kept incrementally)
        self.queued_small = 0  # jobs of at most one GPU in the queue
        self.useful = 0.0
        self.useful_multi = 0.0
        self.completed_gpu_hours = 0.0
        self.slowdown_loss = 0.0
        self.slowed_starts = 0
        self.empty_queue_hours = 0.0

    # -- events --

    def _push(self, when: float, kind: int, index: int, attempt: int = 0) -> None:
        self._tie += 1
        heapq.heappush(self._heap, (when, kind, self._tie, index, attempt))

    def run(self) -> SimResult:
        began = time.perf_counter()
        now = self.start
        if self.backlog is None:
            for index, job in enumerate(self.jobs):
                self.runs.append(Run(job, index, job.duration, self.policy.shape(job)))
                if job.arrival < self.end:
                    self._push(max(job.arrival, self.start), _ARRIVE, index)
        else:
            self._feed = deque(self.jobs)
            self._fill(now, True, [])
            self._sample(now)
        reported = 0
        while self._heap and self._heap[0][0] < self.end:
            when = self._heap[0][0]
            self._account(now, when)
            now = when
            freed, arrived = False, []
            while self._heap and self._heap[0][0] == when:
                _, kind, _, index, attempt = heapq.heappop(self._heap)
                self.events += 1
                run = self.runs[index]
                if kind == _FINISH:
                    if run.attempt == attempt and run.started is not None:
                        self._finish(run, now)
                        freed = True
                elif kind == _EXPIRE:
                    if run.started is None and run.finished is None and not run.rejected:
                        self._expire(run)
                        freed = True
                else:
                    arrived.append(run)
            for run in arrived:
                self._arrive(run)
            if self.backlog is not None:
                self._fill(now, freed, arrived)
            elif freed:
                self._schedule(now, None)
            elif arrived:
                self._schedule(now, [r for r in arrived if not r.rejected and r.started is None])
            if self.check:
                self.state.check()
            self._sample(now)
            if self.progress is not None and self.events - reported >= 5000 and not self.drain:
                reported = self.events
                self.progress((now - self.start) / (self.end - self.start))
        if self.drain:
            self.end = max(now, self.start + EPS)
        self._account(now, self.end)
        for run in self.running.values():  # still running at the end: its work so far counts
            self._accrue(run, _since(run.started, now), self.end)
        if self.progress is not None:
            self.progress(1.0)
        return self._result(time.perf_counter() - began)

    def _fill(self, now: float, freed: bool, arrived: list[Run]) -> None:
        """Saturated regime: top the queue up to the backlog, schedule, and again while jobs started."""
        fed = self._top_up(now)
        self._schedule(now, None if freed else [r for r in arrived + fed if not r.rejected])
        while fed and self._short():
            fed = self._top_up(now)
            if fed:
                self._schedule(now, fed)

    def _short(self) -> bool:
        backlog = self.backlog
        assert backlog is not None
        return self.queued_small < backlog.jobs or self.queued_gpus < backlog.gpus - EPS

    def _top_up(self, now: float) -> list[Run]:
        """Move jobs from the feed into the queue (arriving now) until the backlog is met."""
        fed: list[Run] = []
        while self._feed and self._short():
            job = replace(self._feed.popleft(), arrival=now)
            run = Run(job, len(self.runs), job.duration, self.policy.shape(job))
            self.runs.append(run)
            self._arrive(run)
            if not run.rejected:
                fed.append(run)
        return fed

    def _arrive(self, run: Run) -> None:
        shape, fleet = run.shape, self.fleet
        too_many = shape.nodes * shape.per_node > fleet.total_gpus
        if not self.policy.pods_share_nodes:
            too_many = too_many or shape.nodes > fleet.nodes
        if too_many or shape.per_node > fleet.gpus_per_node:
            self.rejected += 1  # can never fit: kept out of the queue, where it would block it forever
            run.rejected = True
            return
        self.policy.observe(shape)
        self._enqueue(run)
        if run.job.end_by is not None:
            self._push(run.job.end_by, _EXPIRE, run.seq)

    def _enqueue(self, run: Run) -> None:
        insort(self.queue, run, key=self._key)
        self.queued_gpus += run.job.gpus
        self.queued_small += _one_gpu(run)

    def _dequeue(self, run: Run) -> None:
        self.queue.remove(run)
        self.queued_gpus -= run.job.gpus
        self.queued_small -= _one_gpu(run)

    def _accrue(self, run: Run, begin: float, end: float) -> None:
        """Count the work ``run`` did from ``begin`` to ``end`` (hours it ran) inside the window."""
        lo, hi = max(begin, self.measure_from), min(end, self.end)
        if hi > lo:
            held = (hi - lo) * run.job.gpus
            self.useful += held / run.factor
            if run.job.gpus > 1:
                self.useful_multi += held / run.factor
            self.slowdown_loss += held - held / run.factor

    def _finish(self, run: Run, now: float) -> None:
        self._accrue(run, _since(run.started, now), now)
        if self.measure_from <= now <= self.end and run.job.end_by is None:
            self.completed_gpu_hours += run.job.gpus * run.job.duration
        self._release(run)
        del self.running[run.seq]
        run.finished = now
        run.started = None

    def _expire(self, run: Run) -> None:
        """A service replica whose demand passed before it could start leaves the queue unserved."""
        if run.pods:
            self._release(run)
        self._dequeue(run)
        run.expired = True
        run.finished = run.job.end_by

    def _release(self, run: Run) -> None:
        self.usage[run.job.team] -= run.taken
        self.state.release(run.alloc, run.shape.profile)
        if run.started is not None:
            self.used -= run.job.gpus
        run.pods = 0

    # -- scheduling --

    def _schedule(self, now: float, arrivals: list[Run] | None) -> None:
        """One pass. ``arrivals``: only these are new and nothing was freed, so nothing that waited
        before can start now; only the new jobs are tried, against the last pass's reservation."""
        if not self.policy.backfill:
            self._schedule_fifo(now)
            return
        if arrivals is None:
            self.reservation = None
            groups = self.policy.order(self.queue, self.usage, self.quotas) if self.queue else []
            sticky = self.reserved
            if sticky is not None and sticky.started is None and sticky.finished is None:
                # the job that held the reservation goes first in its group, so the reservation stays
                # with it (no starvation of big gangs) while priorities and quotas still order groups
                for group in groups:
                    if any(r is sticky for r in group.runs):
                        group.runs = [sticky, *(r for r in group.runs if r is not sticky)]
        else:
            if self.reservation is not None and self.reservation.run.started is not None:
                self.reservation = None
            groups = [Group(0, False, sorted(arrivals, key=self._key))]
        failed: set[tuple[Any, ...]] = set()
        if arrivals is None:
            self.blocked = None  # after arrivals alone, what was blocked still is
        for index, group in enumerate(groups):
            deferred: list[Run] = []
            for run in group.runs:
                if run.started is not None or run.finished is not None:
                    continue
                team = run.job.team
                if group.under_quota and self.usage[team] >= self.quotas.get(team, 0.0):
                    deferred.append(run)  # went over its quota in this pass: waits with the others
                    continue
                self._try(run, now, failed)
            if deferred:
                if index + 1 < len(groups) and groups[index + 1].rank == group.rank:
                    later = groups[index + 1]
                    later.runs = list(heapq.merge(deferred, later.runs, key=lambda r: r.fifo_key))
                else:
                    for run in deferred:
                        self._try(run, now, failed)
        if self.reservation is not None:
            self.reserved = self.reservation.run
            if self.blocked is None:
                self.blocked = self.reservation.run.shape

    def _try(self, run: Run, now: float, failed: set[tuple[Any, ...]]) -> None:
        """Start ``run`` if it fits without delaying the reservation; production work may preempt."""
        shape = run.shape
        production = run.job.priority == "production"
        reservation = self.reservation
        avoid: frozenset[int] = frozenset()
        if reservation is not None and not production and run.end_if_started(now) > reservation.shadow + EPS:
            avoid = reservation.nodes  # would still run at the reserved start: keep off its nodes
        waited = now - run.job.arrival
        key = (shape, bool(avoid), shape.nodes > 1 and waited >= self.policy.split_after_hours)
        placement = None if key in failed else self.policy.place(self.state, shape, avoid, waited)
        if placement is None and production and self.policy.preempt and self._preempt_for(run, now):
            failed.clear()  # GPUs were freed
            placement = self.policy.place(self.state, shape, avoid, waited)
        if placement is not None:
            self._start(run, placement, now)
            return
        failed.add(key)
        if self.blocked is None:
            self.blocked = shape
        if reservation is None and not production:
            # production work is never reserved for: it goes first in every pass and may preempt
            self.reservation = self._reserve(run, now)

    def _schedule_each(self, now: float) -> None:
        """Kubernetes: every waiting pod in queue order, each placed on its own; a pod that does not fit
        is passed over (the unschedulable pool) and the next is tried. A gang starts when its last pod
        is placed; its placed pods hold their GPUs until then."""
        smallest_failed = math.inf  # nothing frees during a pass: a pod this big or bigger fails too
        share = self.policy.pods_share_nodes
        for run in list(self.queue):
            if self.state.whole_free == 0:
                break
            shape = run.shape
            need = shape.per_node
            if need >= smallest_failed:
                continue
            while run.pods < shape.nodes:
                avoid = frozenset() if share else frozenset(run.alloc.nodes)
                node = self.policy.place_pod(self.state, need, avoid)
                if node is None:
                    smallest_failed = need
                    if self.blocked is None:
                        self.blocked = shape
                    break
                self.state.take_whole(run.alloc, node, need)
                run.pods += 1
                self.usage[run.job.team] += need
            else:
                self._start(run, None, now)

    def _schedule_fifo(self, now: float) -> None:
        """Naive and best-fit: strict arrival order, stop at the first job that cannot start."""
        self.blocked = None
        if self.policy.skip_blocked:
            self._schedule_each(now)
            return
        while self.queue:
            run = self.queue[0]
            if self.policy.all_or_nothing or run.shape.nodes == 1:
                placement = self.policy.place(self.state, run.shape)
                if placement is None:
                    self.blocked = run.shape
                    return
                self._start(run, placement, now)
                continue
            # a gang without reservation: place the pods that fit, hold them, start when all are placed
            while run.pods < run.shape.nodes:
                node = self.policy.place_pod(self.state, run.shape.per_node, frozenset(run.alloc.nodes))
                if node is None:
                    self.blocked = run.shape
                    return
                self.state.take_whole(run.alloc, node, run.shape.per_node)
                run.pods += 1
                self.usage[run.job.team] += run.shape.per_node
            self._start(run, None, now)

    def _start(self, run: Run, placement: Placement | None, now: float) -> None:
        shape = run.shape
        if placement is not None:
            if shape.fractional:
                gpu = placement.gpus[0] if placement.gpus else None
                self.state.take_part(run.alloc, placement.nodes[0], gpu, shape)
            else:
                for node in placement.nodes:
                    self.state.take_whole(run.alloc, node, shape.per_node)
            run.pods = shape.nodes
            self.usage[run.job.team] += run.taken
        self._dequeue(run)
        run.factor = (
            1.0 if shape.fractional else self.slowdown.factor(self.fleet, run.job.gpus, run.alloc.nodes)
        )
        if run.factor > 1.0 and now >= self.measure_from:
            self.slowed_starts += 1
        run.started = now
        if run.first_start is None:
            run.first_start = now
        run.attempt += 1
        self.running[run.seq] = run
        self.used += run.job.gpus
        self._push(run.end_if_started(now), _FINISH, run.seq, run.attempt)
        if shape.nodes > 1 and now >= self.measure_from:
            self.gangs_started += 1
            if len({self.fleet.leaf(n) for n in run.alloc.nodes}) > 1:
                self.gangs_split += 1

    def _preempt_for(self, run: Run, now: float) -> bool:
        """Evict preemptible batch jobs from the one node where the fewest GPUs must go (newest first)."""
        if run.shape.nodes > 1:
            return False
        need = 1 if run.shape.fractional else run.shape.per_node
        victims_by_node: dict[int, list[Run]] = defaultdict(list)
        for other in self.running.values():
            job = other.job
            if job.priority == "batch" and job.preemptible and job.nodes == 1 and not other.shape.fractional:
                victims_by_node[other.alloc.whole[0][0]].append(other)
        best: tuple[float, float, int] | None = None
        chosen: list[Run] = []
        for node, victims in victims_by_node.items():
            free = self.state.free[node]
            picked: list[Run] = []
            for victim in sorted(victims, key=lambda v: -_since(v.started, now)):
                if free >= need:
                    break
                free += victim.shape.per_node
                picked.append(victim)
            if free < need:
                continue
            cost = (
                sum(v.shape.per_node for v in picked),
                sum(now - _since(v.started, now) for v in picked),
                node,
            )
            if best is None or cost < best:
                best, chosen = cost, picked
        for victim in chosen:
            self._evict(victim, now)
        return bool(chosen)

    def _evict(self, run: Run, now: float) -> None:
        """Back to the queue; the work since the last checkpoint is lost (checkpoints every
        ``checkpoint_hours`` of progress; a slowed job makes progress at 1 / factor)."""
        started = _since(run.started, now)
        done = (now - started) / run.factor
        saved = math.floor(done / run.job.checkpoint_hours + EPS) * run.job.checkpoint_hours
        self.lost_gpu_hours += (done - saved) * run.job.gpus
        self._accrue(run, started, started + saved * run.factor)  # only the saved part was useful
        self.preemptions += 1
        self._release(run)
        del self.running[run.seq]
        run.remaining = max(0.0, run.remaining - saved)
        run.started = None
        run.factor = 1.0
        run.attempt += 1  # its pending finish event is now stale
        self._enqueue(run)

    def _reserve(self, run: Run, now: float) -> _Reservation:
        """EASY: the earliest time ``run`` fits as running jobs end (their known end times), and where.

        Counts nodes with enough free GPUs, under one leaf for a gang until it may spread; a split GPU
        frees as a whole when its last slice ends."""
        shape = run.shape
        need = 1 if shape.fractional else shape.per_node
        free = list(self.state.free)
        releases: list[tuple[float, int, int]] = []
        split_ends: dict[tuple[int, int], float] = {}
        for other in self.running.values():
            end = other.end_if_started(_since(other.started, now))
            for node, gpus in other.alloc.whole:
                releases.append((end, node, gpus))
            for node, gpu, *_ in other.alloc.parts:
                split_ends[(node, gpu)] = max(split_ends.get((node, gpu), end), end)
        releases += [(end, node, 1) for (node, _), end in split_ends.items()]
        releases.sort()
        leaf = self.fleet.leaf
        split_from = run.job.arrival + self.policy.split_after_hours  # gangs: spread over leaves after this
        eligible = {n for n, f in enumerate(free) if f >= need}
        per_leaf = Counter(leaf(n) for n in eligible)

        one_leaf = shape.nodes > 1 and self.fleet.fits_one_leaf(shape.nodes)

        def fits(at: float) -> bool:
            if not one_leaf or max(per_leaf.values(), default=0) >= shape.nodes:
                return len(eligible) >= shape.nodes
            return len(eligible) >= shape.nodes and at >= split_from

        shadow = now
        for end, node, gpus in releases:
            if fits(shadow):
                break
            free[node] += gpus
            if free[node] >= need and node not in eligible:
                eligible.add(node)
                per_leaf[leaf(node)] += 1
            shadow = end
        if not fits(shadow):
            shadow = max(shadow, split_from) if len(eligible) >= shape.nodes else math.inf
        roomy = [lf for lf, count in per_leaf.items() if count >= shape.nodes]
        pool = [n for n in eligible if leaf(n) == min(roomy)] if roomy and one_leaf else list(eligible)
        chosen = sorted(pool, key=lambda n: (free[n], n))[: shape.nodes]
        return _Reservation(run, shadow, frozenset(chosen))

    # -- metrics --

    def _account(self, t0: float, t1: float) -> None:
        lo, hi = max(t0, self.measure_from), min(t1, self.end)
        if hi > lo:
            self._integral += (hi - lo) * np.asarray(self._snapshot)
            if not self.queue:
                self.empty_queue_hours += hi - lo

    def _sample(self, now: float) -> None:
        frag = self.state.fragmented(self.blocked) if self.queue else 0.0
        self._snapshot = (self.state.allocated, self.used, frag)
        self._rows.append((now, self.state.allocated, self.used, frag, len(self.queue), len(self.running)))

    def _result(self, wall: float) -> SimResult:
        span = (self.end - self.measure_from) * self.fleet.total_gpus
        alloc, used, frag = (self._integral / span * 100.0) if span > 0 else (0.0, 0.0, 0.0)
        delays: dict[str, list[float]] = defaultdict(list)
        by_kind: dict[str, list[float]] = defaultdict(list)
        waiting: Counter[str] = Counter()
        waiting_kind: Counter[str] = Counter()
        completions: Counter[str] = Counter()
        expired = 0
        for run in self.runs:
            job = run.job
            if run.rejected:
                continue
            if run.finished is not None and not run.expired and self.measure_from <= run.finished <= self.end:
                completions[job.kind] += 1
            if not job.counted or not (self.measure_from <= job.arrival < self.end + EPS * self.drain):
                continue
            if run.first_start is not None:
                delay = run.first_start - job.arrival
            elif run.expired:
                delay = min(self.end if job.end_by is None else job.end_by, self.end) - job.arrival
                expired += 1
            else:  # still waiting: censored at the end of the replay
                delay = self.end - job.arrival
                waiting[job.team] += 1
                waiting["(all)"] += 1
                waiting_kind[job.kind] += 1
            delays[job.team].append(delay)
            delays["(all)"].append(delay)
            by_kind[job.kind].append(delay)
            if job.nodes > 1:
                by_kind["gang"].append(delay)
        columns = ["hour", "allocated_gpus", "used_gpus", "fragmented_gpus", "queued", "running"]
        frame = pd.DataFrame(self._rows, columns=columns)
        frame["allocation"] = frame["allocated_gpus"] / self.fleet.total_gpus
        return SimResult(
            policy=self.policy.name,
            fleet=self.fleet,
            window=(self.measure_from, self.end),
            allocation_pct=float(alloc),
            utilization_pct=float(used),
            fragmentation_pct=float(frag),
            queue_delay={team: _delay_stats(v, waiting[team]) for team, v in sorted(delays.items())},
            delay_by_kind={kind: _delay_stats(v, waiting_kind[kind]) for kind, v in sorted(by_kind.items())},
            completions=sum(completions.values()),
            completions_by_kind=dict(completions),
            preemptions=self.preemptions,
            lost_gpu_hours=self.lost_gpu_hours,
            gangs_started=self.gangs_started,
            gangs_split=self.gangs_split,
            expired_replicas=expired,
            rejected=self.rejected,
            events=self.events,
            wall_seconds=wall,
            timeline=frame,
            useful_gpu_hours=self.useful,
            useful_multi_gpu_hours=self.useful_multi,
            completed_gpu_hours=self.completed_gpu_hours,
            slowdown_gpu_hours=self.slowdown_loss,
            slowed_starts=self.slowed_starts,
            empty_queue_hours=self.empty_queue_hours,
        )


def _one_gpu(run: Run) -> bool:
    return run.shape.nodes == 1 and run.shape.per_node <= 1


def _since(started: float | None, now: float) -> float:
    """When a running job started (``now`` for one that is not running); 0.0 is a valid start."""
    return now if started is None else started


def simulate(
    jobs: Iterable[Job],
    fleet: Fleet,
    policy: str | Policy = "workload-aware",
    **options: Any,
) -> SimResult:
    """Replay ``jobs`` on ``fleet`` under ``policy`` (a name or a Policy); options as :class:`Simulator`."""
    chosen = make_policy(policy, fleet) if isinstance(policy, str) else policy
    return Simulator(jobs, fleet, chosen, **options).run()
