"""The scheduling policies a replay compares, behind one interface.

Why: the same fleet can look full or half empty depending on whether small inference replicas share
GPUs, whether gangs wait whole or hold GPUs half-placed, and whether a large job blocks the queue. Each
policy is one answer; :class:`Policy` sizes a request, orders the queue and picks placements, and its
flags tell the loop in ``events`` how to admit gangs, backfill and preempt.

* ``naive``: FIFO with head-of-line blocking, first-fit on whole GPUs (a fraction of a GPU is rounded
  up to a whole one), no gang reservation: a gang's pods are placed one by one as nodes free up, as a
  scheduler without gang scheduling does (the Kubernetes default scheduler placing pods independently),
  and the pods already placed *hold* their GPUs (allocated, not used) until the last pod lands. With
  strict FIFO only the head job can be half-placed, so this cannot deadlock.
* ``kubernetes``: the default kube-scheduler with the NVIDIA device plugin. GPUs are an opaque integer
  resource (``nvidia.com/gpu``: a fraction of a GPU asks for one, no MIG or sharing); pods are taken in
  queue order (PrioritySort: priority, then creation time; Philly has one priority) and each is placed
  on its own, on the feasible node with the best NodeResourcesFit ``LeastAllocated`` score (the default
  strategy: it spreads); no gang admission (a gang's placed pods hold their GPUs until the last one
  lands), no topology (leaf switches are not looked at). It differs from ``naive`` in two ways that the
  real scheduler has: a pod that does not fit does not block the queue (it goes back to the
  unschedulable pool and the next pod is tried), and the node is the least allocated, not the first.
  So several gangs can be half-placed at once, which ``naive`` cannot (and which can deadlock, as the
  real one can without a gang scheduler such as Kueue, Volcano or coscheduling).
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

The openb replay (``planner.simulate.openb``) has policies of its own and the FGD paper's node scorers
(``planner.simulate.openb_scorers``).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from models.mig import COMPUTE_SLICES, smallest_profile
from planner.simulate.fleet import (
    EPS,
    PRIORITIES,
    RANK,
    Alloc,
    ClusterState,
    Fleet,
    Job,
    Shape,
    after_fraction,
    unusable,
)


@dataclass(slots=True, eq=False)
class Run:
    """A job's life in the replay (compared by identity: the queue removes runs by ``is``)."""

    job: Job
    seq: int
    remaining: float
    shape: Shape
    alloc: Alloc = field(default_factory=Alloc)
    first_start: float | None = None
    started: float | None = None  # start of the current attempt
    attempt: int = 0
    pods: int = 0  # pods placed (a naive gang holds them before it starts)
    factor: float = 1.0  # slowdown of the current attempt's placement: its work advances at 1 / factor
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
        """When it ends if started at ``now`` (a running job: at its start) at its placement's speed."""
        return self.job.end_by if self.job.end_by is not None else now + self.remaining * self.factor

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
    runs: list[Run]


class Policy:
    """One scheduling policy: how to size a request, order the queue and place a request.

    The loop in :class:`Simulator` reads the flags: ``all_or_nothing`` (gangs start whole or wait, else
    pods are placed one by one and hold their GPUs), ``skip_blocked`` (without backfill: a job that cannot
    be placed is passed over instead of stopping the pass), ``backfill`` (jobs behind a blocked one may start;
    else the queue stops at the first job that cannot start), ``preempt`` (production work may evict
    preemptible batch work) and ``fair_share`` (order by guaranteed quota).
    """

    name: ClassVar[str] = ""
    all_or_nothing: ClassVar[bool] = False
    backfill: ClassVar[bool] = False
    preempt: ClassVar[bool] = False
    fair_share: ClassVar[bool] = False
    skip_blocked: ClassVar[bool] = False  # no head-of-line blocking: a pod that does not fit is passed over
    pods_share_nodes: ClassVar[bool] = False  # a job's pods may land on the same node
    split_after_hours: float = 0.0  # a gang may spread over leaf switches after queueing this long

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def shape(self, job: Job) -> Shape:
        """Whole GPUs, a fraction rounded up to one GPU."""
        return Shape(nodes=job.nodes, per_node=max(1, job.per_node))

    def order(self, queue: list[Run], usage: dict[str, float], quotas: dict[str, float]) -> list[Group]:
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

    def order(self, queue: list[Run], usage: dict[str, float], quotas: dict[str, float]) -> list[Group]:
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
        return sum(w * unusable(sig, s) for s, w in self._weights)

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
            after = after_fraction(sig, parts, target, shape)
            rank = (0.0 if target is not None else 1.0, self._score(sig, after), node)
            if best is None or rank < best:
                best, best_target = rank, (node, target)
        if best_target is None:
            return None
        return Placement(nodes=[best_target[0]], gpus=[best_target[1]])


class KubernetesPolicy(Policy):
    """The default kube-scheduler with the NVIDIA device plugin (see the module docstring).

    Pods are scored by NodeResourcesFit's ``LeastAllocated`` strategy, the default: for each resource
    ``(allocatable - requested) * MaxNodeScore / allocatable`` (integer arithmetic, MaxNodeScore 100),
    averaged with the resource weights (https://kubernetes.io/docs/reference/scheduling/config/, the
    default NodeResourcesFitArgs: ``LeastAllocated``, cpu and memory of weight 1; formula in
    pkg/scheduler/framework/plugins/noderesources/least_allocated.go). ASSUMPTION: a pod requests CPU
    and memory in proportion to its GPUs (a GPU's share of the node), so both fractions equal the node's
    free GPU fraction after placement and NodeResourcesBalancedAllocation scores every node alike. The
    highest score wins; equal scores are drawn at random (seeded), as ``selectHost`` does. On clusters of
    100 nodes or more only the first ``numFeasibleNodesToFind`` feasible nodes are scored, searched from
    a start index that rotates between pods (percentageOfNodesToScore adaptive default: max(5, 50 -
    nodes / 125) %, at least 100 nodes; https://kubernetes.io/docs/concepts/scheduling-eviction/
    scheduler-perf-tuning/).
    """

    name = "kubernetes"
    skip_blocked = True
    pods_share_nodes = True

    def __init__(self, fleet: Fleet, pod_gpus: int | None = None, seed: int = 0) -> None:
        super().__init__(fleet)
        if pod_gpus is not None and not 1 <= pod_gpus <= fleet.gpus_per_node:
            raise ValueError(f"pod_gpus must be 1..{fleet.gpus_per_node}, got {pod_gpus}")
        self.pod_gpus = pod_gpus
        self._rng = np.random.default_rng(seed)
        self._next_start = 0
        nodes = fleet.nodes
        percent = max(5, 50 - nodes // 125)
        self._to_find = nodes if nodes < 100 else max(100, nodes * percent // 100)

    def shape(self, job: Job) -> Shape:
        """nvidia.com/gpu is an integer resource: a fraction of a GPU asks for one. ``pod_gpus``: the job
        is launched as pods of that many GPUs (e.g. one worker per GPU) when its GPUs divide evenly."""
        gpus = max(1, round(job.gpus)) if job.gpus >= 1 else 1
        if self.pod_gpus is not None and gpus % self.pod_gpus == 0:
            return Shape(nodes=gpus // self.pod_gpus, per_node=self.pod_gpus)
        return Shape(nodes=job.nodes, per_node=max(1, job.per_node))

    def score(self, free: int, gpus: int) -> int:
        """LeastAllocated on a node with ``free`` GPUs for a pod of ``gpus``: both resources (cpu,
        memory) have the fraction left free after placement, so the weighted mean is that one figure."""
        per_node = self.fleet.gpus_per_node
        return (free - gpus) * 100 // per_node

    def place_pod(self, state: ClusterState, gpus: int, avoid: frozenset[int] = frozenset()) -> int | None:
        nodes = self.fleet.nodes
        best: list[int] = []
        best_score = -1
        found = checked = 0
        start = self._next_start
        for offset in range(nodes):
            node = (start + offset) % nodes
            checked += 1
            free = state.free[node]
            if free < gpus or node in avoid:
                continue
            found += 1
            value = self.score(free, gpus)
            if value > best_score:
                best, best_score = [node], value
            elif value == best_score:
                best.append(node)
            if found >= self._to_find:
                break
        self._next_start = (start + checked) % nodes
        if not best:
            return None
        return best[0] if len(best) == 1 else best[int(self._rng.integers(len(best)))]


POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (NaivePolicy, KubernetesPolicy, BestFitPolicy, WorkloadAwarePolicy)
}


def make_policy(name: str, fleet: Fleet, **options: Any) -> Policy:
    """A policy by name (naive, kubernetes, best-fit, workload-aware); ValueError names the valid ones.
    ``options`` go to the policy (workload-aware: ``sharing``, ``split_after_hours``; kubernetes:
    ``pod_gpus``, ``seed``)."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose {', '.join(POLICIES)}")
    return POLICIES[name](fleet, **options)
