"""The inputs of a replay (fleet, jobs, request shapes) and the state of the cluster it runs on.

Why: the scheduling policies (``policies``) and the event loop (``events``) read and change one picture
of the fleet: free whole GPUs per node, GPUs split into MIG instances or shares, and what each job holds.
Keeping that bookkeeping here keeps its invariants (:meth:`ClusterState.check`) in one place.

A MIG instance goes at the legal start that leaves the most legal placements of every profile afterwards
(big contiguous regions stay free for big slices). Nodes are compared by their signature (the state up to
GPU order), so the fragmentation measure (:func:`unusable`: free capacity a request cannot use, the
per-node measure of Weng et al., ATC'23) is cached per signature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from models.mig import (
    COMPUTE_SLICES,
    GPU_MEMORY_GB,
    MEMORY_SLICES,
    MIG_PROFILES,
    MigProfile,
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
class Slowdown:
    """How much slower a job runs when placed worse than its best placement (the trace's durations are
    read as run times at the best placement: the fewest nodes, under the fewest leaf switches).

    ``cross_node``: a job spread over more nodes than it needs (its gradients cross the network instead
    of the node's NVLink/NVSwitch); ``cross_leaf``: a job over more leaf switches than it needs (its
    traffic crosses the spine). Both apply together (the factors multiply). A slowed job's remaining work
    advances at ``1 / factor`` per hour. ``1.0`` means placement does not matter (the default of a replay,
    so the week replay's figures do not change); the saturated Philly replay (``planner.simulate.philly``)
    sets the defaults it documents.
    """

    cross_node: float = 1.0
    cross_leaf: float = 1.0

    def __post_init__(self) -> None:
        for name in ("cross_node", "cross_leaf"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 1.0):
                raise ValueError(f"{name} slowdown must be a finite factor >= 1, got {value}")

    def factor(self, fleet: Fleet, gpus: float, nodes: list[int]) -> float:
        """The slowdown of a job of ``gpus`` GPUs placed on ``nodes`` (one entry per pod)."""
        used = set(nodes)
        if len(used) <= 1:
            return 1.0
        need_nodes = max(1, math.ceil(gpus / fleet.gpus_per_node - EPS))
        out = self.cross_node if len(used) > need_nodes else 1.0
        leaves = {fleet.leaf(n) for n in used}
        need_leaves = 1 if fleet.nodes_per_leaf is None else math.ceil(need_nodes / fleet.nodes_per_leaf)
        if len(leaves) > need_leaves:
            out *= self.cross_leaf
        return out


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
class Alloc:
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

    def take_whole(self, alloc: Alloc, node: int, gpus: int) -> None:
        if self.free[node] < gpus:
            raise AssertionError(f"node {node}: {gpus} GPUs asked, {self.free[node]} free")
        self.free[node] -= gpus
        self.whole_free -= gpus
        self.allocated += gpus
        self._sig[node] = None
        alloc.whole.append((node, gpus))

    def take_part(self, alloc: Alloc, node: int, gpu: int | None, shape: Shape) -> None:
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

    def release(self, alloc: Alloc, profile: MigProfile | None) -> None:
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
        return sum(unusable(self.signature(n), shape) for n in range(self.fleet.nodes))


_UNUSABLE: dict[tuple[tuple[Any, ...], tuple[Any, ...]], float] = {}


def _state_taken(state: tuple[Any, ...]) -> float:
    if state[0] == "m":
        return max(state[2] / COMPUTE_SLICES, state[1].bit_count() / MEMORY_SLICES)
    return min(1.0, state[1])


def _state_fits(state: tuple[Any, ...], shape: Shape) -> bool:
    if state[0] == "m":
        return shape.profile is not None and _mig_start(state[1], state[2], shape.profile) is not None
    return shape.profile is None and shape.per_node == 0 and state[1] + shape.share <= 1.0 + EPS


def unusable(sig: tuple[Any, ...], shape: Shape) -> float:
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


def after_fraction(
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
