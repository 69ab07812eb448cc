"""The whole nodes a group of services needs in a period, whatever packing a plan uses.

Services that share offerings form a group (a connected part of the service-offering graph). In every
period the group's replicas take at least ``sum_i D_i m_i`` node-equivalents of memory (and
``sum_i D_i k_i`` of compute), m_i (k_i) the fewest a replica of service i takes on any offering it may
use, counted by ``relaxed_serving`` so that no legal packing is cut off. Nodes are whole, so the
group's offerings hold at least the whole number above that beside their training; an unserved replica
frees at most ``ceil(max(m_i, k_i))`` of them (``ceil`` is subadditive).

The certified bound averages this count over its clusters (``bound.py``, step 3c); the hourly plan's
commitment tuning writes it per period (``dispatch.PeriodModel(rounding=True)``), so that commitments
are weighed against the whole on-demand nodes a period buys rather than their fractions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from models.mig import COMPUTE_SLICES, MEMORY_SLICES, replica_slice, replicas_per_gpu
from planner.planning.problem.sets import PlanningSets


@dataclass(frozen=True, slots=True)
class NodeNeed:
    """One group: its services, their offerings, and per service the fewest node-equivalents of memory
    and of compute a replica takes (indexed by service; zero outside the group)."""

    services: tuple[int, ...]
    offerings: frozenset[int]
    memory: np.ndarray  # (services,)
    compute: np.ndarray  # (services,)
    unserved: dict[int, float]  # service -> the most whole nodes one unserved replica of it frees

    def nodes(self, demand: np.ndarray) -> np.ndarray:
        """Whole nodes the group needs for ``demand`` (services x periods, or one column per slot)."""
        return np.maximum(np.ceil(demand.T @ self.memory - 1e-9), np.ceil(demand.T @ self.compute - 1e-9))


def node_needs(sets: PlanningSets) -> list[NodeNeed]:
    """The groups of services that share offerings, each with its per-replica node-equivalents."""
    offerings_of: dict[int, set[int]] = defaultdict(set)
    for i, o in sets.replicas_per_node:
        offerings_of[i].add(o)
    n = len(sets.services)
    edges = [(i, n + o) for i in offerings_of for o in offerings_of[i]]
    graph = coo_matrix(
        (np.ones(len(edges)), ([a for a, _ in edges], [b for _, b in edges])),
        shape=(n + len(sets.offerings),) * 2,
    )
    _, part = connected_components(graph, directed=False)
    members: dict[int, list[int]] = defaultdict(list)
    for i in sorted(offerings_of):
        members[int(part[i])].append(i)
    groups = []
    for services in members.values():
        memory, compute = np.zeros(n), np.zeros(n)
        unserved: dict[int, float] = {}
        for i in services:
            served = [relaxed_serving(sets, i, o) for o in offerings_of[i]]
            memory[i] = min(1.0 / q for q, _ in served)
            compute[i] = min(ratio / q for q, ratio in served)
            unserved[i] = float(math.ceil(max(memory[i], compute[i]) - 1e-9))
        offerings = frozenset(o for i in services for o in offerings_of[i])
        groups.append(NodeNeed(tuple(services), offerings, memory, compute, unserved))
    return groups


def relaxed_serving(sets: PlanningSets, i: int, o: int) -> tuple[float, float]:
    """How the bound counts service ``i`` on a node of ``o``: (replicas per node-equivalent, compute per
    node-equivalent), relaxed so that no packing a plan may use (``gpuplan verify``'s rules) is cut off.

    A MIG replica takes its profile's share of a GPU's 8 memory and 7 compute slices: a node-equivalent
    is a node's memory (``G * 8 / m`` replicas) and it takes ``(c / 7) / (m / 8)`` of a node's compute
    (above 1: compute fills the GPUs first, a second row counts it). Every legal MIG layout keeps both
    sums within the GPU, whatever profiles it mixes, so both rows hold for every plan; the planning
    model's own count (one profile's homogeneous layout, e.g. 3 x 2g.20gb where the slices would hold
    3.5) is no relaxation of mixed layouts. A whole-GPU replica takes its GPUs: ``G / gpus`` replicas per
    node, a fraction where they do not divide the node (a node of 8 holds a 3-GPU replica and five
    1-GPU ones; the model's divisor rounding gives the 3-GPU replica 4).
    """
    service = sets.services[i]
    offering = sets.offerings[o]
    g = float(offering.gpus_per_node)
    profile = replica_slice(offering.gpu_model, service.gpu_memory_gb, service.gpu_compute_share)
    if profile is not None:
        memory = profile.memory_slices / MEMORY_SLICES
        return g / memory, (profile.compute_slices / COMPUTE_SLICES) / memory
    if service.gpus_per_replica is not None:
        return g / service.gpus_per_replica, 1.0
    assert service.gpu_memory_gb is not None  # the scenario validator gives exactly one size
    per_gpu = replicas_per_gpu(
        offering.gpu_model, offering.gpu_memory_gb, service.gpu_memory_gb, service.gpu_compute_share
    )
    return g * per_gpu, 1.0
