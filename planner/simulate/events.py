"""An event-driven replay of a job trace on a GPU fleet, under one of three scheduling policies.

Why: a capacity plan is only as good as the scheduler that runs on it. The same fleet can look full or
half empty depending on whether small inference replicas share GPUs, whether gangs wait whole or hold
GPUs half-placed, and whether a large job blocks the queue. This module replays a trace so the policies
can be compared on the same fleet and the same jobs.

The loop is a heap of events (arrivals, completions; a preempted job re-enters the queue at once). After
all events at one instant are applied, the policy runs one scheduling pass. Time is in hours.

Policies (one interface: :class:`Policy` orders the queue and picks placements; flags say how the loop
admits gangs, backfills and preempts):

* ``naive``: FIFO with head-of-line blocking, first-fit on whole GPUs (a fraction of a GPU is rounded
  up to a whole one), no gang reservation: a gang's pods are placed one by one as nodes free up, as a
  scheduler without gang scheduling does (the Kubernetes default scheduler placing pods independently),
  and the pods already placed *hold* their GPUs (allocated, not used) until the last pod lands. With
  strict FIFO only the head job can be half-placed, so this cannot deadlock.
* ``best-fit``: as naive, but every pod goes to the tightest node (fewest free GPUs that fit).
* ``workload-aware``: small requests on MIG slices (GPU models with MIG; ``models.mig`` smallest
  profile for the replica's memory) or on GPU shares (other models); gangs admitted all-or-nothing and
  kept under one leaf switch (a gang that fits one leaf waits for one to have room; ``split_after_hours``
  lets it spread after that long, as Slurm's ``--switches=1@max-time``); EASY backfill (the first job
  that cannot start gets a reservation at the earliest time it fits, computed from the running jobs'
  known end times; later jobs start only if they end before it or stay off its nodes); a
  fragmentation-aware node score (the expected free capacity that the recent mix of request sizes could
  not use, as in Weng et al., ATC'23); production work first, then each team's jobs while the team is
  under its guaranteed quota, then the rest (by arrival); production work preempts preemptible batch
  work when it cannot start otherwise.

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
"""

from __future__ import annotations

import heapq
import math
import time
from bisect import insort
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from models.mig import (
    COMPUTE_SLICES,
    GPU_MEMORY_GB,
    MEMORY_SLICES,
    MIG_PROFILES,
    MigProfile,
    smallest_profile,
    supports_mig,
)

PRIORITIES = ("production", "standard", "batch")
KINDS = ("inference", "training")
RANK = {name: rank for rank, name in enumerate(PRIORITIES)}
EPS = 1e-9


# ---- inputs -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fleet:
    """A homogeneous fleet: ``nodes`` nodes of ``gpus_per_node`` GPUs, ``nodes_per_leaf`` per leaf switch.

    Homogeneous because the planner sizes one offering at a time; ``nodes_per_leaf=None`` means no
    topology is known (every node under one switch, so no gang is ever split).
    """

    nodes: int
    gpus_per_node: int = 8
    gpu_model: str = "H100"
    nodes_per_leaf: int | None = None
    gpu_memory_gb: float | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError(f"a fleet needs at least one node and one GPU per node, got {self}")
        if self.nodes_per_leaf is not None and self.nodes_per_leaf < 1:
            raise ValueError(f"nodes_per_leaf must be at least 1, got {self.nodes_per_leaf}")

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def memory_gb(self) -> float:
        """Memory of one GPU: given, else the MIG table's figure, else 80 GB."""
        if self.gpu_memory_gb is not None:
            return self.gpu_memory_gb
        return GPU_MEMORY_GB.get(self.gpu_model, 80.0)

    @property
    def mig(self) -> bool:
        return supports_mig(self.gpu_model)

    def leaf(self, node: int) -> int:
        return 0 if self.nodes_per_leaf is None else node // self.nodes_per_leaf

    def fits_one_leaf(self, nodes: int) -> bool:
        """Whether a gang of ``nodes`` nodes can sit under one leaf switch at all."""
        return self.nodes_per_leaf is None or nodes <= min(self.nodes_per_leaf, self.nodes)

    @property
    def leaves(self) -> int:
        return 1 if self.nodes_per_leaf is None else math.ceil(self.nodes / self.nodes_per_leaf)

    def describe(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "gpus": self.total_gpus,
            "gpu_model": self.gpu_model,
            "nodes_per_leaf": self.nodes_per_leaf,
            "leaves": self.leaves,
            "mig": self.mig,
        }


@dataclass(frozen=True, slots=True)
class Job:
    """One request of the trace. ``gpus`` below 1 is a fraction of one GPU (a small inference replica).

    A gang spans ``nodes`` nodes with ``gpus / nodes`` whole GPUs on each. ``end_by`` is for service
    replicas: they stop when demand falls, whatever time they started (a replica that never started by
    then has expired). ``counted=False`` marks warm-up jobs, left out of the queueing statistics.
    """

    id: str
    team: str
    arrival: float
    duration: float
    gpus: float
    nodes: int = 1
    priority: str = "standard"
    kind: str = "training"
    preemptible: bool = False
    gpu_memory_gb: float | None = None
    end_by: float | None = None
    checkpoint_hours: float = 0.5
    counted: bool = True

    def __post_init__(self) -> None:
        if self.priority not in RANK:
            raise ValueError(f"job {self.id}: priority must be one of {', '.join(PRIORITIES)}")
        if self.kind not in KINDS:
            raise ValueError(f"job {self.id}: kind must be one of {', '.join(KINDS)}")
        if not (math.isfinite(self.arrival) and math.isfinite(self.duration) and self.duration >= 0):
            raise ValueError(f"job {self.id}: arrival and duration must be finite, duration >= 0")
        if not (math.isfinite(self.gpus) and self.gpus > 0) or self.nodes < 1:
            raise ValueError(f"job {self.id}: gpus must be > 0 and nodes >= 1")
        if self.gpus < 1 and self.nodes != 1:
            raise ValueError(f"job {self.id}: a fraction of a GPU cannot span nodes")
        if self.gpus >= 1 and abs(self.gpus / self.nodes - round(self.gpus / self.nodes)) > EPS:
            raise ValueError(f"job {self.id}: {self.gpus} GPUs do not split evenly over {self.nodes} nodes")
        if self.checkpoint_hours <= 0:
            raise ValueError(f"job {self.id}: checkpoint_hours must be > 0")

    @property
    def per_node(self) -> int:
        """Whole GPUs per node (0 for a fraction of a GPU)."""
        return 0 if self.gpus < 1 else round(self.gpus / self.nodes)

    @property
    def gang(self) -> bool:
        return self.nodes > 1


@dataclass(frozen=True, slots=True)
class Shape:
    """What a policy asks the fleet for: ``nodes`` x ``per_node`` whole GPUs, or one MIG slice or share."""

    nodes: int = 1
    per_node: int = 0
    profile: MigProfile | None = None
    share: float = 0.0

    @property
    def fractional(self) -> bool:
        return self.per_node == 0

    @property
    def key(self) -> tuple[Any, ...]:
        """A class of requests for the fragmentation score: the per-node part only."""
        if self.profile is not None:
            return ("mig", self.profile.name)
        if self.share:
            return ("share", round(self.share, 4))
        return ("whole", self.per_node)


# ---- cluster state ------------------------------------------------------------------------------------


def _bits(start: int, width: int) -> int:
    return ((1 << width) - 1) << start


class _Partial:
    """One GPU split into MIG instances (memory-slice mask + compute slices) or GPU shares."""

    __slots__ = ("compute", "jobs", "mask", "mig", "share")

    def __init__(self, mig: bool) -> None:
        self.mig = mig
        self.mask = 0
        self.compute = 0
        self.share = 0.0
        self.jobs = 0

    @property
    def taken(self) -> float:
        """Share of the GPU allocated: the scarcer of compute and memory slices for MIG."""
        if self.mig:
            return max(self.compute / COMPUTE_SLICES, self.mask.bit_count() / MEMORY_SLICES)
        return min(1.0, self.share)

    def state(self) -> tuple[Any, ...]:
        return ("m", self.mask, self.compute) if self.mig else ("s", round(self.share, 6))

    def fits(self, shape: Shape) -> bool:
        if self.mig:
            return (
                shape.profile is not None and _mig_start(self.mask, self.compute, shape.profile) is not None
            )
        return shape.profile is None and self.share + shape.share <= 1.0 + EPS


_START_CACHE: dict[tuple[int, int, str, str], int | None] = {}


def _mig_start(mask: int, compute: int, profile: MigProfile) -> int | None:
    """Where a new instance of ``profile`` goes on a GPU: the legal free start that leaves the most legal
    placements of every profile afterwards (keeps big contiguous regions for big slices)."""
    key = (mask, compute, profile.gpu_model, profile.name)
    if key in _START_CACHE:
        return _START_CACHE[key]
    best, best_room = None, -1
    if compute + profile.compute_slices <= COMPUTE_SLICES:
        others = MIG_PROFILES[profile.gpu_model]
        for start in profile.valid_starts:
            bits = _bits(start, profile.memory_slices)
            if mask & bits or start + profile.memory_slices > MEMORY_SLICES:
                continue
            after, used = mask | bits, compute + profile.compute_slices
            room = sum(
                1
                for other in others
                if used + other.compute_slices <= COMPUTE_SLICES
                for s in other.valid_starts
                if not after & _bits(s, other.memory_slices)
            )
            if room > best_room:
                best, best_room = start, room
    _START_CACHE[key] = best
    return best


@dataclass(slots=True)
class _Alloc:
    """Where one job runs: whole GPUs per node, and the slices or shares it holds."""

    whole: list[tuple[int, int]] = field(default_factory=list)  # (node, gpus)
    parts: list[tuple[int, int, int, float]] = field(default_factory=list)  # (node, gpu id, start, share)

    @property
    def nodes(self) -> list[int]:
        return [n for n, _ in self.whole] + [n for n, *_ in self.parts]


class ClusterState:
    """Free GPUs per node, split GPUs per node, and the totals the metrics read (kept incrementally)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.free = [fleet.gpus_per_node] * fleet.nodes
        self.partials: list[dict[int, _Partial]] = [{} for _ in range(fleet.nodes)]
        self._next_gpu = [0] * fleet.nodes
        self.allocated = 0.0
        self.whole_free = fleet.total_gpus
        self._sig: list[tuple[Any, ...] | None] = [None] * fleet.nodes

    def signature(self, node: int) -> tuple[Any, ...]:
        """A node's state up to GPU order: nodes with equal signatures score alike."""
        sig = self._sig[node]
        if sig is None:
            sig = (self.free[node], tuple(sorted(p.state() for p in self.partials[node].values())))
            self._sig[node] = sig
        return sig

    def take_whole(self, alloc: _Alloc, node: int, gpus: int) -> None:
        if self.free[node] < gpus:
            raise AssertionError(f"node {node}: {gpus} GPUs asked, {self.free[node]} free")
        self.free[node] -= gpus
        self.whole_free -= gpus
        self.allocated += gpus
        self._sig[node] = None
        alloc.whole.append((node, gpus))

    def take_part(self, alloc: _Alloc, node: int, gpu: int | None, shape: Shape) -> None:
        """Put a slice or share on split GPU ``gpu`` of ``node`` (``None``: split a free whole GPU)."""
        if gpu is None:
            if self.free[node] < 1:
                raise AssertionError(f"node {node}: no free GPU to split")
            self.free[node] -= 1
            self.whole_free -= 1
            gpu = self._next_gpu[node]
            self._next_gpu[node] += 1
            self.partials[node][gpu] = _Partial(shape.profile is not None)
        part = self.partials[node][gpu]
        before = part.taken
        start = -1
        if part.mig:
            assert shape.profile is not None
            found = _mig_start(part.mask, part.compute, shape.profile)
            if found is None:
                raise AssertionError(f"node {node} GPU {gpu}: {shape.profile.name} does not fit")
            start = found
            part.mask |= _bits(start, shape.profile.memory_slices)
            part.compute += shape.profile.compute_slices
        else:
            if part.share + shape.share > 1.0 + EPS:
                raise AssertionError(f"node {node} GPU {gpu}: share over 1")
            part.share += shape.share
        part.jobs += 1
        self.allocated += part.taken - before
        self._sig[node] = None
        alloc.parts.append((node, gpu, start, shape.share if shape.profile is None else 0.0))

    def release(self, alloc: _Alloc, profile: MigProfile | None) -> None:
        for node, gpus in alloc.whole:
            self.free[node] += gpus
            self.whole_free += gpus
            self.allocated -= gpus
            self._sig[node] = None
        for node, gpu, start, share in alloc.parts:
            part = self.partials[node][gpu]
            before = part.taken
            if part.mig:
                assert profile is not None
                part.mask &= ~_bits(start, profile.memory_slices)
                part.compute -= profile.compute_slices
            else:
                part.share = max(0.0, part.share - share)
            part.jobs -= 1
            self.allocated += part.taken - before
            if part.jobs == 0:  # an empty split GPU becomes a whole free GPU again
                self.allocated -= part.taken
                del self.partials[node][gpu]
                self.free[node] += 1
                self.whole_free += 1
            self._sig[node] = None
        alloc.whole.clear()
        alloc.parts.clear()

    def check(self) -> None:
        """Invariants (tests call this): nothing over-allocated, totals consistent."""
        g = self.fleet.gpus_per_node
        total = 0.0
        for node in range(self.fleet.nodes):
            assert 0 <= self.free[node] <= g - len(self.partials[node]), node
            for part in self.partials[node].values():
                assert part.jobs > 0
                if part.mig:
                    assert part.compute <= COMPUTE_SLICES and part.mask < (1 << MEMORY_SLICES)
                else:
                    assert part.share <= 1.0 + 1e-6
                total += part.taken
            total += g - self.free[node] - len(self.partials[node])
        assert abs(total - self.allocated) < 1e-6, (total, self.allocated)
        assert self.whole_free == sum(self.free)

    def fragmented(self, shape: Shape | None) -> float:
        """Free GPUs (and free slice capacity) that cannot host the per-node part of ``shape``."""
        if shape is None:
            return 0.0
        return sum(_unusable(self.signature(n), shape) for n in range(self.fleet.nodes))


_UNUSABLE: dict[tuple[tuple[Any, ...], tuple[Any, ...]], float] = {}


def _state_taken(state: tuple[Any, ...]) -> float:
    if state[0] == "m":
        return max(state[2] / COMPUTE_SLICES, state[1].bit_count() / MEMORY_SLICES)
    return min(1.0, state[1])


def _state_fits(state: tuple[Any, ...], shape: Shape) -> bool:
    if state[0] == "m":
        return shape.profile is not None and _mig_start(state[1], state[2], shape.profile) is not None
    return shape.profile is None and shape.per_node == 0 and state[1] + shape.share <= 1.0 + EPS


def _unusable(sig: tuple[Any, ...], shape: Shape) -> float:
    """GPU capacity on a node of signature ``sig`` that a request of ``shape`` cannot use."""
    key = (sig, (shape.per_node, shape.profile.name if shape.profile else None, shape.share))
    value = _UNUSABLE.get(key)
    if value is None:
        free, states = sig
        if shape.fractional:
            value = sum(1.0 - _state_taken(s) for s in states if not _state_fits(s, shape))
        else:
            value = sum(1.0 - _state_taken(s) for s in states) + (free if free < shape.per_node else 0)
        _UNUSABLE[key] = value
    return value


# ---- policies -----------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Run:
    """A job's life in the replay (compared by identity: the queue removes runs by ``is``)."""

    job: Job
    seq: int
    remaining: float
    shape: Shape
    alloc: _Alloc = field(default_factory=_Alloc)
    first_start: float | None = None
    started: float | None = None  # start of the current attempt
    attempt: int = 0
    pods: int = 0  # pods placed (a naive gang holds them before it starts)
    expired: bool = False
    rejected: bool = False
    finished: float | None = None

    @property
    def key(self) -> tuple[int, float, int]:
        return (RANK[self.job.priority], self.job.arrival, self.seq)

    @property
    def fifo_key(self) -> tuple[float, int]:
        return (self.job.arrival, self.seq)

    def end_if_started(self, now: float) -> float:
        return self.job.end_by if self.job.end_by is not None else now + self.remaining

    @property
    def taken(self) -> float:
        """GPUs this run holds, for its team's fair-share usage (a MIG slice by its compute share)."""
        if self.shape.fractional:
            return self.shape.profile.compute_fraction if self.shape.profile else self.shape.share
        return float(self.shape.per_node * self.pods)


@dataclass(slots=True)
class Group:
    """Queued runs the pass tries in order; ``under_quota`` groups lose a run whose team goes over."""

    rank: int
    under_quota: bool
    runs: list[_Run]


class Policy:
    """One scheduling policy: how to size a request, order the queue and place a request.

    The loop in :class:`Simulator` reads the flags: ``all_or_nothing`` (gangs start whole or wait, else
    pods are placed one by one and hold their GPUs), ``backfill`` (jobs behind a blocked one may start;
    else the queue stops at the first job that cannot start), ``preempt`` (production work may evict
    preemptible batch work) and ``fair_share`` (order by guaranteed quota).
    """

    name: ClassVar[str] = ""
    all_or_nothing: ClassVar[bool] = False
    backfill: ClassVar[bool] = False
    preempt: ClassVar[bool] = False
    fair_share: ClassVar[bool] = False
    split_after_hours: float = 0.0  # a gang may spread over leaf switches after queueing this long

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def shape(self, job: Job) -> Shape:
        """Whole GPUs, a fraction rounded up to one GPU."""
        return Shape(nodes=job.nodes, per_node=max(1, job.per_node))

    def order(self, queue: list[_Run], usage: dict[str, float], quotas: dict[str, float]) -> list[Group]:
        """The queue in the order a pass tries it. FIFO policies keep the queue in arrival order."""
        return [Group(0, False, list(queue))]

    def place(
        self, state: ClusterState, shape: Shape, avoid: frozenset[int] = frozenset(), waited: float = 0.0
    ) -> Placement | None:
        """Where a whole request goes now, or None; ``waited``: hours the job has queued so far."""
        if shape.nodes > 1:
            nodes: list[int] = []
            for _ in range(shape.nodes):
                node = self.place_pod(state, shape.per_node, avoid | frozenset(nodes))
                if node is None:
                    return None
                nodes.append(node)
            return Placement(nodes=nodes)
        node = self.place_pod(state, shape.per_node, avoid)
        return None if node is None else Placement(nodes=[node])

    def place_pod(self, state: ClusterState, gpus: int, avoid: frozenset[int] = frozenset()) -> int | None:
        raise NotImplementedError

    def observe(self, shape: Shape) -> None:
        """Called on every arrival (the workload-aware score learns the mix of requests)."""


@dataclass(slots=True)
class Placement:
    nodes: list[int]
    gpus: list[int | None] | None = None  # fractional: the split GPU to use (None: split a free one)


class NaivePolicy(Policy):
    """FIFO, first-fit on whole GPUs, pods placed one by one without gang reservation."""

    name = "naive"

    def place_pod(self, state: ClusterState, gpus: int, avoid: frozenset[int] = frozenset()) -> int | None:
        for node, free in enumerate(state.free):
            if free >= gpus and node not in avoid:
                return node
        return None


class BestFitPolicy(Policy):
    """FIFO, whole GPUs, every pod on the tightest node that fits."""

    name = "best-fit"

    def place_pod(self, state: ClusterState, gpus: int, avoid: frozenset[int] = frozenset()) -> int | None:
        best, best_free = None, math.inf
        for node, free in enumerate(state.free):
            if gpus <= free < best_free and node not in avoid:
                best, best_free = node, free
                if free == gpus:
                    break
        return best


class WorkloadAwarePolicy(Policy):
    """MIG slices / GPU shares, all-or-nothing gangs under one leaf, backfill, fragmentation-aware score,
    fair share and preemption (see the module docstring)."""

    name = "workload-aware"
    all_or_nothing = True
    backfill = True
    preempt = True
    fair_share = True

    def __init__(self, fleet: Fleet, sharing: str = "auto", split_after_hours: float = math.inf) -> None:
        super().__init__(fleet)
        self.split_after_hours = split_after_hours
        if sharing not in ("auto", "mig", "share", "none"):
            raise ValueError(f"sharing must be auto, mig, share or none, got {sharing!r}")
        self.use_mig = fleet.mig if sharing == "auto" else sharing == "mig"
        self.sharing = sharing != "none"
        if self.use_mig and not fleet.mig:
            raise ValueError(f"{fleet.gpu_model} has no MIG")
        self._mix: Counter[Shape] = Counter()
        self._weights: list[tuple[Shape, float]] = [(Shape(per_node=g), 1.0) for g in (1, 2, 4, 8)]
        self._delta: dict[tuple[Any, ...], float] = {}
        self._seen = 0

    def shape(self, job: Job) -> Shape:
        if job.gpus >= 1 or not self.sharing:
            return Shape(nodes=job.nodes, per_node=max(1, job.per_node))
        if self.use_mig:
            memory = job.gpu_memory_gb if job.gpu_memory_gb is not None else job.gpus * self.fleet.memory_gb
            profile = smallest_profile(self.fleet.gpu_model, memory)
            if profile is None or profile.compute_slices == COMPUTE_SLICES:
                return Shape(per_node=1)
            return Shape(profile=profile)
        share = job.gpus
        if job.gpu_memory_gb is not None:
            share = max(share, job.gpu_memory_gb / self.fleet.memory_gb)
        return Shape(per_node=1) if share > 1.0 - EPS else Shape(share=min(1.0, share))

    def observe(self, shape: Shape) -> None:
        """Weights of the score: how often each per-node request size arrives (refreshed as arrivals come)."""
        self._mix[Shape(per_node=shape.per_node, profile=shape.profile, share=shape.share)] += 1
        self._seen += 1
        if self._seen in (10, 100) or self._seen % 1000 == 0:
            total = sum(self._mix.values())
            self._weights = [(s, c / total) for s, c in self._mix.most_common(12)]
            self._delta.clear()

    def order(self, queue: list[_Run], usage: dict[str, float], quotas: dict[str, float]) -> list[Group]:
        """Per priority: jobs of teams under their guaranteed quota, then the others; each by arrival
        (``queue`` is kept sorted by priority, then arrival)."""
        groups: list[Group] = []
        for rank in range(len(PRIORITIES)):
            runs = [run for run in queue if RANK[run.job.priority] == rank]
            if not quotas:
                groups.append(Group(rank, False, runs))
                continue
            under = [r for r in runs if usage.get(r.job.team, 0.0) < quotas.get(r.job.team, 0.0)]
            over = [r for r in runs if usage.get(r.job.team, 0.0) >= quotas.get(r.job.team, 0.0)]
            groups += [Group(rank, True, under), Group(rank, False, over)]
        return groups

    def _frag(self, sig: tuple[Any, ...]) -> float:
        return sum(w * _unusable(sig, s) for s, w in self._weights)

    def _score(self, before: tuple[Any, ...], after: tuple[Any, ...]) -> float:
        key = (before, after)
        value = self._delta.get(key)
        if value is None:
            value = self._frag(after) - self._frag(before)
            self._delta[key] = value
        return value

    def _whole_candidates(
        self, state: ClusterState, gpus: int, avoid: frozenset[int]
    ) -> list[tuple[float, int, int]]:
        """(score, free after, node) of every node that can take ``gpus`` whole GPUs; lower is better."""
        out = []
        cache: dict[tuple[Any, ...], float] = {}
        for node, free in enumerate(state.free):
            if free < gpus or node in avoid:
                continue
            sig = state.signature(node)
            score = cache.get(sig)
            if score is None:
                score = self._score(sig, (free - gpus, sig[1]))
                cache[sig] = score
            out.append((score, free - gpus, node))
        return out

    def place_pod(self, state: ClusterState, gpus: int, avoid: frozenset[int] = frozenset()) -> int | None:
        candidates = self._whole_candidates(state, gpus, avoid)
        return min(candidates)[2] if candidates else None

    def place(
        self, state: ClusterState, shape: Shape, avoid: frozenset[int] = frozenset(), waited: float = 0.0
    ) -> Placement | None:
        if shape.fractional:
            return self._place_fraction(state, shape, avoid)
        if shape.nodes == 1:
            node = self.place_pod(state, shape.per_node, avoid)
            return None if node is None else Placement(nodes=[node])
        candidates = self._whole_candidates(state, shape.per_node, avoid)
        if len(candidates) < shape.nodes:
            return None
        by_leaf: dict[int, list[tuple[float, int, int]]] = defaultdict(list)
        for candidate in candidates:
            by_leaf[self.fleet.leaf(candidate[2])].append(candidate)
        roomy = [(len(c), leaf) for leaf, c in by_leaf.items() if len(c) >= shape.nodes]
        if roomy:  # one leaf: the tightest that has room, so roomier leaves stay for bigger gangs
            _, leaf = min(roomy)
            return Placement(nodes=[c[2] for c in sorted(by_leaf[leaf])[: shape.nodes]])
        if waited < self.split_after_hours - EPS and self.fleet.fits_one_leaf(shape.nodes):
            return None  # wait for one leaf (Slurm's --switches=1@max-time) before spreading over several
        # no leaf has room: spread over the fewest leaves (largest groups first)
        nodes: list[int] = []
        for _, leaf in sorted(((-len(c), leaf) for leaf, c in by_leaf.items())):
            nodes += [c[2] for c in sorted(by_leaf[leaf])]
        return Placement(nodes=nodes[: shape.nodes])

    def _place_fraction(self, state: ClusterState, shape: Shape, avoid: frozenset[int]) -> Placement | None:
        """A slice or share: on an already split GPU if one fits (the fullest), else split a free GPU on
        the node whose score suffers least."""
        best: tuple[float, float, int] | None = None
        best_target: tuple[int, int | None] | None = None
        for node in range(self.fleet.nodes):
            if node in avoid:
                continue
            parts = state.partials[node]
            target: int | None = None
            fullest = -1.0
            for gpu, part in parts.items():
                if part.fits(shape) and part.taken > fullest:
                    target, fullest = gpu, part.taken
            if target is None and state.free[node] < 1:
                continue
            sig = state.signature(node)
            after = _after_fraction(sig, parts, target, shape)
            rank = (0.0 if target is not None else 1.0, self._score(sig, after), node)
            if best is None or rank < best:
                best, best_target = rank, (node, target)
        if best_target is None:
            return None
        return Placement(nodes=[best_target[0]], gpus=[best_target[1]])


def _after_fraction(
    sig: tuple[Any, ...], parts: dict[int, _Partial], target: int | None, shape: Shape
) -> tuple[Any, ...]:
    """The node's signature after a slice or share lands on split GPU ``target`` (None: a fresh one)."""
    free, states = sig
    if target is None:
        fresh = _Partial(shape.profile is not None)
        new_states = [*states]
        free -= 1
        part = fresh
    else:
        part = parts[target]
        new_states = list(states)
        new_states.remove(part.state())
    if part.mig:
        assert shape.profile is not None
        start = _mig_start(part.mask, part.compute, shape.profile)
        assert start is not None
        state: tuple[Any, ...] = (
            "m",
            part.mask | _bits(start, shape.profile.memory_slices),
            part.compute + shape.profile.compute_slices,
        )
    else:
        state = ("s", round(part.share + shape.share, 6))
    return (free, tuple(sorted([*new_states, state])))


POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (NaivePolicy, BestFitPolicy, WorkloadAwarePolicy)
}


def make_policy(name: str, fleet: Fleet, **options: Any) -> Policy:
    """A policy by name (naive, best-fit, workload-aware); ValueError names the valid ones. ``options``
    go to the policy (workload-aware: ``sharing``, ``split_after_hours``)."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose {', '.join(POLICIES)}")
    return POLICIES[name](fleet, **options)


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


@dataclass(slots=True)
class _Reservation:
    run: _Run
    shadow: float  # the earliest start the running jobs' end times allow
    nodes: frozenset[int]  # where it would start then


class Simulator:
    """One replay: ``jobs`` on ``fleet`` under ``policy`` from ``start`` to ``end`` (hours; ``None``: until
    every job is done).

    Metrics cover ``[measure_from, end)``; jobs arriving before ``measure_from`` (or marked
    ``counted=False``) warm the fleet up and are left out of the queueing statistics. ``quotas`` are the
    teams' guaranteed GPUs (workload-aware fair share). ``progress`` is called now and then with the
    share of simulated time done. ``check`` verifies the cluster invariants after every instant (tests).
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
    ) -> None:
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.id))
        ids = {j.id for j in self.jobs}
        if len(ids) != len(self.jobs):
            raise ValueError("job ids must be unique")
        self.fleet = fleet
        self.policy = policy
        self.start = start if start is not None else (self.jobs[0].arrival if self.jobs else 0.0)
        self.drain = end is None  # no end given: run until every job is done, the window ends there
        self.end = end if end is not None else math.inf
        if self.end <= self.start:
            raise ValueError(f"the replay must end after it starts ({self.start} .. {self.end})")
        self.measure_from = min(self.end, max(self.start, measure_from if measure_from is not None else 0.0))
        self.quotas = dict(quotas or {})
        self.progress = progress
        self.check = check
        self.state = ClusterState(fleet)
        self._key: Callable[[_Run], Any] = (lambda r: r.key) if policy.fair_share else (lambda r: r.fifo_key)
        self.queue: list[_Run] = []  # sorted by self._key
        self.running: dict[int, _Run] = {}
        self.runs: list[_Run] = []
        self.usage: dict[str, float] = defaultdict(float)
        self.used = 0.0
        self.reservation: _Reservation | None = None
        self.reserved: _Run | None = None  # who held the last reservation: keeps its place until it starts
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

    # -- events --

    def _push(self, when: float, kind: int, index: int, attempt: int = 0) -> None:
        self._tie += 1
        heapq.heappush(self._heap, (when, kind, self._tie, index, attempt))

    def run(self) -> SimResult:
        began = time.perf_counter()
        for index, job in enumerate(self.jobs):
            self.runs.append(_Run(job, index, job.duration, self.policy.shape(job)))
            if job.arrival < self.end:
                self._push(max(job.arrival, self.start), _ARRIVE, index)
        now = self.start
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
            if freed:
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
        if self.progress is not None:
            self.progress(1.0)
        return self._result(time.perf_counter() - began)

    def _arrive(self, run: _Run) -> None:
        shape, fleet = run.shape, self.fleet
        if shape.nodes > fleet.nodes or shape.per_node > fleet.gpus_per_node:
            self.rejected += 1  # can never fit: kept out of the queue, where it would block it forever
            run.rejected = True
            return
        self.policy.observe(shape)
        insort(self.queue, run, key=self._key)
        if run.job.end_by is not None:
            self._push(run.job.end_by, _EXPIRE, run.seq)

    def _finish(self, run: _Run, now: float) -> None:
        self._release(run)
        del self.running[run.seq]
        run.finished = now
        run.started = None

    def _expire(self, run: _Run) -> None:
        """A service replica whose demand passed before it could start leaves the queue unserved."""
        if run.pods:
            self._release(run)
        self.queue.remove(run)
        run.expired = True
        run.finished = run.job.end_by

    def _release(self, run: _Run) -> None:
        self.usage[run.job.team] -= run.taken
        self.state.release(run.alloc, run.shape.profile)
        if run.started is not None:
            self.used -= run.job.gpus
        run.pods = 0

    # -- scheduling --

    def _schedule(self, now: float, arrivals: list[_Run] | None) -> None:
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
            deferred: list[_Run] = []
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

    def _try(self, run: _Run, now: float, failed: set[tuple[Any, ...]]) -> None:
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

    def _schedule_fifo(self, now: float) -> None:
        """Naive and best-fit: strict arrival order, stop at the first job that cannot start."""
        self.blocked = None
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

    def _start(self, run: _Run, placement: Placement | None, now: float) -> None:
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
        self.queue.remove(run)
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

    def _preempt_for(self, run: _Run, now: float) -> bool:
        """Evict preemptible batch jobs from the one node where the fewest GPUs must go (newest first)."""
        if run.shape.nodes > 1:
            return False
        need = 1 if run.shape.fractional else run.shape.per_node
        victims_by_node: dict[int, list[_Run]] = defaultdict(list)
        for other in self.running.values():
            job = other.job
            if job.priority == "batch" and job.preemptible and job.nodes == 1 and not other.shape.fractional:
                victims_by_node[other.alloc.whole[0][0]].append(other)
        best: tuple[float, float, int] | None = None
        chosen: list[_Run] = []
        for node, victims in victims_by_node.items():
            free = self.state.free[node]
            picked: list[_Run] = []
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

    def _evict(self, run: _Run, now: float) -> None:
        """Back to the queue; the work since the last checkpoint is lost."""
        ran = now - _since(run.started, now)
        saved = math.floor(ran / run.job.checkpoint_hours + EPS) * run.job.checkpoint_hours
        self.lost_gpu_hours += (ran - saved) * run.job.gpus
        self.preemptions += 1
        self._release(run)
        del self.running[run.seq]
        run.remaining = max(0.0, run.remaining - saved)
        run.started = None
        run.attempt += 1  # its pending finish event is now stale
        insort(self.queue, run, key=self._key)

    def _reserve(self, run: _Run, now: float) -> _Reservation:
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
        )


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
