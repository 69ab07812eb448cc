"""Which MIG layout each node of a pool carries in each period, with as few distinct node layouts (named
mig-parted configs) as the hours allow.

A pool is one offering; its spot and non-spot replicas run on separate nodes (two capacity groups), and
both groups share the pool's configs. For each group and period the *work* is the MIG replicas per
profile and the whole-GPU replicas per size (GPUs per replica, a divisor of the node's GPUs). The work
needs ``ceil((whole GPUs + packed MIG GPUs) / G)`` nodes of ``G`` GPUs (``planner.planning.mig.packing.pack``
for the MIG part); that many nodes, never more, carry it.

1. *Envelopes*: works needing the same number of nodes are merged, largest first, as long as the
   merged work (per profile and per size the larger count) still needs no more nodes. An envelope's
   nodes hold each of its works, so its hours share one assignment of configs to nodes: fewer configs,
   and no node is reconfigured between those hours.
2. Envelopes are taken largest first (so the configs made for the busy hours are there to cover the
   quiet ones), each covered by one small integer program over *node types*: the pool's configs so
   far, the node layouts of the envelope's own fresh arrangement (new configs, penalised so that one
   fewer new config beats any number of nodes), and the all-MIG-off node (no config). A choice is taken
   only when an explicit assignment confirms it: every profile's instances summed over the chosen nodes
   cover its replicas, and the whole-GPU replicas, largest first, fit the MIG-off GPUs. The fresh
   arrangement is the fallback and always fits: whole-GPU replicas first, largest first (sizes divide
   the node, so they fill nodes in order), then the MIG-partitioned GPUs on the freest nodes.

Layouts are the packing's own patterns, maximal layouts, not ``exact_patterns()``: the surplus instances
cost no GPU, are headroom for the hour's replicas, and are what lets a config made for one hour hold
another hour's different mix, so fewer configs are needed.

How few is bounded by the hours themselves: instances must match each replica's profile and the nodes
are the fewest the hour needs, so on a single node whose MIG and whole-GPU share moves hour by hour
nearly every share needs its own layout (on inference-heavy-saas' p4de pool an exact set cover of the
single-node hours alone needs 35 layouts; this gets 38 for the whole pool).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache

import numpy as np

from models.mig import MIG_PROFILES, Layout, canonical_model, valid_layouts
from planner.planning.mig.packing import pack, pack_lower_bound
from planner.solvers.highs import HighsModel, RowwiseModel
from planner.solvers.work import past

__all__ = ["NodeLayout", "PoolPlan", "Work", "envelopes", "lay_out", "merge", "nodes_needed", "plan_pool"]

NodeLayout = tuple[tuple[Layout, int], ...]
"""The MIG GPUs of one node as (layout, GPUs) pairs in a canonical order (``valid_layouts`` order); the
node's other GPUs have MIG disabled. The empty tuple is a node without MIG (no config)."""

Group = str
"""A capacity group: ``"held"`` (every non-spot tier, billed together) or ``"spot"``."""


@dataclass(frozen=True, slots=True)
class Work:
    """What one capacity group of a pool runs in one period."""

    mig: tuple[tuple[str, int], ...] = ()
    """(MIG profile, replicas > 0), sorted by profile name."""
    whole: tuple[tuple[int, int], ...] = ()
    """(GPUs per replica, replicas > 0), largest size first."""

    @property
    def whole_gpus(self) -> int:
        return sum(size * n for size, n in self.whole)


@dataclass
class PoolPlan:
    """A pool's configs and which nodes carry them, per (group, period)."""

    configs: list[NodeLayout]
    """Distinct node layouts with MIG, numbered by first use (period, then held before spot)."""
    use: dict[tuple[Group, int], dict[int, int]] = field(default_factory=dict)
    """(group, period) -> config index -> nodes carrying it (periods without MIG left out)."""
    nodes: dict[tuple[Group, int], int] = field(default_factory=dict)
    """(group, period) -> nodes the group's inference needs (with and without MIG)."""
    packed_gpus: dict[tuple[Group, int], int] = field(default_factory=dict)
    """(group, period) -> the fewest GPUs holding its MIG replicas."""


@cache
def _layout_order(gpu_model: str) -> dict[Layout, int]:
    return {layout: k for k, layout in enumerate(valid_layouts(gpu_model))}


def _canonical(gpu_model: str, gpus: Sequence[Layout]) -> NodeLayout:
    """One node's MIG GPUs, grouped and in ``valid_layouts`` order, so equal nodes get equal keys."""
    order = _layout_order(gpu_model)
    counts = Counter(gpus)
    return tuple((layout, counts[layout]) for layout in sorted(counts, key=order.__getitem__))


@lru_cache(maxsize=1 << 14)
def _instances(gpu_model: str, node: NodeLayout) -> np.ndarray:
    """Instances per profile (``MIG_PROFILES`` order) summed over a node's GPUs (cached, read-only)."""
    vector = np.zeros(len(MIG_PROFILES[canonical_model(gpu_model)]), dtype=np.int64)
    for layout, n in node:
        vector += n * np.array(layout.count_vector, dtype=np.int64)
    vector.setflags(write=False)
    return vector


def _mig_gpus(node: NodeLayout) -> int:
    return sum(n for _, n in node)


def nodes_needed(gpu_model: str, gpus_per_node: int, work: Work) -> int:
    """``ceil((whole GPUs + packed MIG GPUs) / G)``: the nodes the work is laid out on."""
    return math.ceil((work.whole_gpus + _packed(gpu_model, work)) / gpus_per_node)


def lay_out(gpu_model: str, gpus_per_node: int, work: Work) -> list[NodeLayout]:
    """The fresh arrangement of ``work`` on :func:`nodes_needed` nodes, one MIG layout per node.

    Whole-GPU replicas go first, largest first, onto the first node with room: sizes divide the node's
    GPUs, so nodes fill in order and the total always fits. The packed MIG GPUs then fill the free GPUs,
    freest node first, so they gather on as few nodes as they can.
    """
    g = gpus_per_node
    packing = pack(gpu_model, dict(work.mig)) if work.mig else None
    n = nodes_needed(gpu_model, g, work)
    free = [g] * n
    for size, count in work.whole:
        assert g % size == 0, (size, g)
        for _ in range(count):
            node = next(k for k, room in enumerate(free) if room >= size)  # always one: divisor sizes
            free[node] -= size
    gpus = list(packing.per_gpu()) if packing is not None else []
    assert len(gpus) <= sum(free), (work, n)
    placed: list[list[Layout]] = [[] for _ in range(n)]
    for node in sorted(range(n), key=lambda k: -free[k]):  # stable: ties keep node order
        take, gpus = gpus[: free[node]], gpus[free[node] :]
        placed[node] = take
    return [_canonical(gpu_model, node) for node in placed]


def _fits_whole(frees: Sequence[int], whole: tuple[tuple[int, int], ...]) -> bool:
    """Whole-GPU replicas, largest first, each onto the first node whose MIG-off GPUs have room (exact
    when sizes divide one another, as divisors of a power-of-two node do; else a safe under-estimate)."""
    room = sorted(frees, reverse=True)
    for size, count in whole:
        for _ in range(count):
            k = next((k for k, r in enumerate(room) if r >= size), None)
            if k is None:
                return False
            room[k] -= size
    return True


def _choose(
    gpu_model: str, gpus_per_node: int, work: Work, n: int, existing: Sequence[NodeLayout]
) -> list[NodeLayout]:
    """The nodes (one layout each, ``()`` for no MIG) that carry ``work``: existing configs where they
    can, new node layouts only where needed (see the module docstring); always ``n`` nodes."""
    g = gpus_per_node
    fresh = lay_out(gpu_model, g, work)
    known = set(existing)
    new = list(dict.fromkeys(node for node in fresh if node and node not in known))
    # a config without an instance of the work's profiles is worth no more than a MIG-off node (always
    # available): leave it out, so the program stays small however many configs the pool has
    names = [p.name for p in MIG_PROFILES[canonical_model(gpu_model)]]
    wanted = [names.index(name) for name, _ in work.mig]
    useful = [node for node in existing if _instances(gpu_model, node)[wanted].any()]
    types: list[NodeLayout] = [*useful, *new]
    if not types:
        return fresh
    chosen = _solve(gpu_model, g, work, n, types, len(useful))
    if chosen is None:
        return fresh
    nodes = [node for node, count in zip(types, chosen, strict=True) for _ in range(count)]
    nodes += [()] * (n - len(nodes))
    if not _carries(gpu_model, g, nodes, work):
        return fresh  # the program's whole-GPU rows are exact only for sizes that divide one another
    return nodes


def _carries(gpu_model: str, gpus_per_node: int, nodes: Sequence[NodeLayout], work: Work) -> bool:
    """Whether ``nodes`` hold ``work``: every profile's instances summed over them cover its replicas,
    and the whole-GPU replicas, largest first, fit their MIG-off GPUs."""
    names = [p.name for p in MIG_PROFILES[canonical_model(gpu_model)]]
    held = np.sum([_instances(gpu_model, node) for node in nodes], axis=0)
    if not all(held[names.index(name)] >= d for name, d in work.mig):
        return False
    return _fits_whole([gpus_per_node - _mig_gpus(node) for node in nodes], work.whole)


def _solve(
    gpu_model: str, g: int, work: Work, n: int, types: Sequence[NodeLayout], existing: int
) -> list[int] | None:
    """Nodes of each type: min (n + 1) * new types used + nodes with MIG, such that

    * sum_c x_c * instances_c[p] >= replicas[p] for every demanded profile p;
    * sum_c x_c <= n (the rest are all-MIG-off nodes);
    * for each whole-GPU size s: sum_c x_c * (G - s * floor(off_c / s)) <= n * G - V_s, V_s the GPUs of
      the replicas of size >= s (what the MIG-off GPUs must hold; exact for sizes dividing one another);
    * x_j <= n * y_j for each new type j (y binary).

    None if HiGHS finds it infeasible (then the fresh arrangement is used).
    """
    names = [p.name for p in MIG_PROFILES[canonical_model(gpu_model)]]
    vectors = [_instances(gpu_model, t) for t in types]
    offs = [g - _mig_gpus(t) for t in types]
    k, new = len(types), len(types) - existing
    rows: list[tuple[dict[int, float], float, float]] = []  # (column -> value, lower, upper)
    for name, d in work.mig:
        p = names.index(name)
        rows.append(({c: float(v[p]) for c, v in enumerate(vectors) if v[p]}, float(d), math.inf))
    rows.append(({c: 1.0 for c in range(k)}, -math.inf, float(n)))
    for s, _ in work.whole:
        volume = sum(size * count for size, count in work.whole if size >= s)
        use = {c: float(g - s * (off // s)) for c, off in enumerate(offs) if g - s * (off // s)}
        rows.append((use, -math.inf, float(n * g - volume)))
    for j in range(new):
        rows.append(({existing + j: 1.0, k + j: -float(n)}, -math.inf, 0.0))
    start, index, value = [0], [], []
    for entries, _, _ in rows:
        for column, coefficient in sorted(entries.items()):
            index.append(column)
            value.append(coefficient)
        start.append(len(index))
    cost = np.concatenate([np.ones(k), np.full(new, float(n + 1))])
    model = RowwiseModel(
        cost=cost,
        col_lower=np.zeros(k + new),
        col_upper=np.concatenate([np.full(k, float(n)), np.ones(new)]),
        row_lower=np.array([lo for _, lo, _ in rows]),
        row_upper=np.array([up for _, _, up in rows]),
        start=np.array(start, dtype=np.int32),
        index=np.array(index, dtype=np.int32),
        value=np.array(value, dtype=float),
        integral=np.ones(k + new, dtype=bool),
    )
    highs = HighsModel(model, quiet=True, output_flag=False, mip_abs_gap=1.0 - 1e-6)
    outcome = highs.run()
    if not outcome.optimal:
        return None
    return [round(v) for v in highs.col_value()[:k]]


FIRST_FIT_SCAN = 32  # envelopes a work tries before it starts its own


def merge(a: Work, b: Work) -> Work:
    """The envelope of two works: per profile and per size the larger count (holding it holds both)."""
    mig, whole = dict(a.mig), dict(a.whole)
    for name, n in b.mig:
        mig[name] = max(mig.get(name, 0), n)
    for size, n in b.whole:
        whole[size] = max(whole.get(size, 0), n)
    return Work(tuple(sorted(mig.items())), tuple(sorted(whole.items(), reverse=True)))


def envelopes(gpu_model: str, gpus_per_node: int, works: Sequence[Work]) -> dict[Work, Work]:
    """Work -> its envelope: works with MIG replicas that need the same nodes merged, largest first, into
    an envelope that still needs no more nodes (first fit over the ``FIRST_FIT_SCAN`` newest envelopes:
    a year of distinct hours made the full scan quadratic); a work without MIG is its own. An
    envelope's nodes hold each of its works, so the hours of one envelope share one assignment of
    configs to nodes (and no node is reconfigured between them).
    """
    g = gpus_per_node
    size = {w: (nodes_needed(gpu_model, g, w), _packed(gpu_model, w)) for w in works}
    order = sorted(works, key=lambda w: (-size[w][0], -size[w][1], -_replicas(w), w.mig, w.whole))
    groups: dict[int, list[tuple[Work, list[Work]]]] = {}  # nodes -> [(envelope, its works)]
    result = {w: w for w in works if not w.mig}
    for work in (w for w in order if w.mig):
        n = size[work][0]
        mine = groups.setdefault(n, [])
        for k in range(len(mine) - 1, max(-1, len(mine) - 1 - FIRST_FIT_SCAN), -1):  # newest first
            envelope, members = mine[k]
            merged = merge(envelope, work)
            # the volume bound rules most merges out without packing them
            if math.ceil((merged.whole_gpus + pack_lower_bound(gpu_model, dict(merged.mig))) / g) > n:
                continue
            if nodes_needed(gpu_model, g, merged) <= n:
                mine[k] = (merged, [*members, work])
                break
        else:
            mine.append((work, [work]))
    for mine in groups.values():
        for envelope, members in mine:
            result.update({w: envelope for w in members})
    return result


@lru_cache(maxsize=1 << 16)
def _packed(gpu_model: str, work: Work) -> int:
    """GPUs of the packed MIG replicas (cached: envelopes ask again and again)."""
    return pack(gpu_model, dict(work.mig)).gpus if work.mig else 0


def _replicas(work: Work) -> int:
    return sum(n for _, n in work.mig)


def plan_pool(
    gpu_model: str,
    gpus_per_node: int,
    works: Mapping[tuple[Group, int], Work],
    deadline: float | None = None,
) -> PoolPlan:
    """Configs for one pool over all its (group, period) works (see the module docstring). Past
    ``deadline`` (a work-meter reading, ``work.deadline_after``: counted work, not the clock)
    envelopes take their fresh arrangement without the program: more configs, as valid, in bounded
    time."""
    g = gpus_per_node
    envelope_of = envelopes(gpu_model, g, sorted(set(works.values()), key=lambda w: (w.mig, w.whole)))
    needed = {env: nodes_needed(gpu_model, g, env) for env in set(envelope_of.values())}
    # largest first: nodes, then MIG GPUs, then replicas; the envelope itself breaks ties (stable order)
    order = sorted(
        needed,
        key=lambda w: (-needed[w], -_packed(gpu_model, w), -_replicas(w), w.mig, w.whole),
    )
    configs: list[NodeLayout] = []
    index: dict[NodeLayout, int] = {}
    carried: dict[Work, dict[int, int]] = {}
    last: dict[int, list[NodeLayout]] = {}  # nodes -> the nodes chosen for the last envelope of that size
    for env in order:
        if not env.mig:
            carried[env] = {}
            continue
        counts: dict[int, int] = {}
        previous = last.get(needed[env])
        # the envelopes come largest first, so the last one's nodes often hold this one too: check that
        # explicitly (cheap) before the program (a year of distinct hours asks thousands of times)
        nodes = previous if previous and _carries(gpu_model, g, previous, env) else None
        if nodes is None:
            late = past(deadline, "MIG layouts")
            nodes = lay_out(gpu_model, g, env) if late else _choose(gpu_model, g, env, needed[env], configs)
        last[needed[env]] = nodes
        for node in nodes:
            if not node:
                continue
            if node not in index:
                index[node] = len(configs)
                configs.append(node)
            counts[index[node]] = counts.get(index[node], 0) + 1
        carried[env] = counts
    # number the configs by first use: period, then held before spot, then the order within a period
    keys = sorted(works, key=lambda key: (key[1], key[0] != "held"))
    renumber: dict[int, int] = {}
    for key in keys:
        for c in sorted(carried[envelope_of[works[key]]]):
            renumber.setdefault(c, len(renumber))
    result = PoolPlan(configs=[configs[c] for c in sorted(renumber, key=renumber.__getitem__)])
    for key in keys:
        work = works[key]
        env = envelope_of[work]
        result.nodes[key] = needed[env]
        result.packed_gpus[key] = _packed(gpu_model, work)
        if carried[env] and work.mig:
            result.use[key] = {renumber[c]: n for c, n in sorted(carried[env].items())}
    return result
