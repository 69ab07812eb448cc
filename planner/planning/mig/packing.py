"""Packing MIG instances onto the fewest GPUs: a small cutting-stock problem (``planner.planning.mig.config``
writes the mig-parted config that creates the packed layouts).

``pack`` is a cutting-stock problem: each GPU takes one layout (a multiset of profiles that fits, see
``models.mig.valid_layouts``); choose how many GPUs get each layout so that every profile gets at least
its demand, with as few GPUs as possible. Valid layouts are closed under removing instances, so only the
maximal layouts are needed as patterns, and extra instances are allowed (reported as ``surplus``).

The planner calls ``pack`` for many (offering, period) demand vectors, so it is memoized on
(model, demand) and kept cheap:

* 7g instances take a GPU each and are set aside.
* One profile: ``ceil(d / max_instances)``, closed form. Several: if one homogeneous pattern per profile
  meets ``pack_lower_bound``, that is optimal too.
* Otherwise a greedy cover by maximal layouts; when it meets ``pack_lower_bound`` it is optimal
  (most mixed demands: ~0.05 ms instead of ~0.8 ms).
* Otherwise the MILP, kept small: patterns are projected onto the demanded profiles and dominated
  projections dropped (at most 27 columns, one row per demanded profile). Its LP relaxation is solved and
  rounded first; reaching ceil(LP) proves optimality (it always did in tests, ~0.5 ms), else HiGHS
  branches (~4 ms).

The profiles, placement rules and valid layouts are the domain's (``models.mig``); the solve is here, on
the planner side, through the one HiGHS adapter (``planner.solvers.highs``).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from models.errors import SolverError
from models.mig import (
    COMPUTE_SLICES,
    MEMORY_SLICES,
    MIG_PROFILES,
    Layout,
    canonical_model,
    layout_for,
    maximal_layouts,
    profile_named,
)
from planner.solvers.highs import HighsModel, RowwiseModel

_Demand = tuple[tuple[str, int], ...]
"""A demand as sorted (profile name, instances > 0) pairs: the memo key."""


@dataclass(frozen=True, slots=True)
class Packing:
    """The fewest GPUs holding a demand, as (layout, number of GPUs) patterns.

    Patterns are maximal layouts, so a GPU may carry instances beyond the demand (``surplus``): they cost
    nothing extra and serve as headroom. ``exact_patterns`` drops them if the config should not create
    idle instances.
    """

    gpu_model: str
    gpus: int
    """Number of GPUs; equals the sum of the pattern counts."""
    patterns: tuple[tuple[Layout, int], ...]
    """(layout, GPUs with that layout), each count >= 1, in ``maximal_layouts`` order."""
    demand_items: tuple[tuple[str, int], ...]
    """The demand packed, as sorted (profile, instances > 0) pairs (tuples keep the shared, memoized
    result immutable and picklable)."""
    surplus_items: tuple[tuple[str, int], ...]
    """Instances beyond the demand, as (profile, extra > 0) pairs in table order."""

    @property
    def demand(self) -> dict[str, int]:
        """Profile -> instances demanded (zero entries left out); a fresh dict each call."""
        return dict(self.demand_items)

    @property
    def surplus(self) -> dict[str, int]:
        """Profile -> instances beyond its demand (only positive entries); a fresh dict each call."""
        return dict(self.surplus_items)

    def per_gpu(self) -> list[Layout]:
        """One layout per GPU, patterns expanded in order."""
        return [layout for layout, n in self.patterns for _ in range(n)]

    def exact_patterns(self) -> tuple[tuple[Layout, int], ...]:
        """Patterns with the surplus instances removed, so the GPUs hold exactly the demand.

        Surplus is taken off the last GPUs first; consecutive GPUs with equal layouts are grouped again.
        No GPU ends up empty: in an optimal packing such a GPU could have been dropped.
        """
        names = [p.name for p in MIG_PROFILES[self.gpu_model]]
        vectors = [list(layout.count_vector) for layout in self.per_gpu()]
        for name, extra in self.surplus.items():
            k = names.index(name)
            for vector in reversed(vectors):
                take = min(extra, vector[k])
                vector[k] -= take
                extra -= take
        grouped: list[tuple[Layout, int]] = []
        for vector in vectors:
            layout = layout_for(self.gpu_model, dict(zip(names, vector, strict=True)))
            assert layout is not None  # removing instances keeps a layout valid
            if grouped and grouped[-1][0] == layout:
                grouped[-1] = (layout, grouped[-1][1] + 1)
            else:
                grouped.append((layout, 1))
        return tuple(grouped)


def _normalize(gpu_model: str, demand: Mapping[str, int]) -> tuple[str, _Demand]:
    model = canonical_model(gpu_model)
    items: dict[str, int] = {}
    for name, count in demand.items():
        profile_named(model, name)  # ValueError naming the profile
        if isinstance(count, bool):
            raise ValueError(f"demand for {name} must be an integer, got {count!r}")
        try:
            n = operator.index(count)
        except TypeError:
            raise ValueError(f"demand for {name} must be an integer, got {count!r}") from None
        if n < 0:
            raise ValueError(f"demand for {name} must be >= 0, got {n}")
        if n:
            items[name] = items.get(name, 0) + n
    return model, tuple(sorted(items.items()))


def _lower_bound(model: str, items: _Demand) -> int:
    memory = compute = per_profile = 0
    for name, d in items:
        p = profile_named(model, name)
        memory += d * p.memory_slices
        compute += d * p.compute_slices
        per_profile = max(per_profile, -(-d // p.max_instances))
    return max(-(-memory // MEMORY_SLICES), -(-compute // COMPUTE_SLICES), per_profile)


def pack_lower_bound(gpu_model: str, demand: Mapping[str, int]) -> int:
    """A quick bound on ``pack(...).gpus``: memory-slice volume / 8, compute-slice volume / 7, and the
    homogeneous count of each profile alone (``ceil(d / max_instances)``); the largest of the three.
    """
    return _lower_bound(*_normalize(gpu_model, demand))


@functools.cache
def _homogeneous(model: str, name: str) -> Layout:
    """The maximal layout with the most instances of ``name`` (then fewest instances, so the rest of the
    GPU stays in large pieces): the pattern of a single-profile packing.
    """
    index = [p.name for p in MIG_PROFILES[model]].index(name)
    # min keeps the first of equal keys, so ties go to the earlier layout in maximal_layouts order
    return min(maximal_layouts(model), key=lambda lay: (-lay.count_vector[index], lay.instances))


_first_highs = True  # HiGHS prints its banner once per process: only the first model needs quieting


def _new_highs(model: RowwiseModel) -> HighsModel:
    global _first_highs
    quiet, _first_highs = _first_highs, False
    return HighsModel(model, quiet=quiet, output_flag=False)


def _greedy(columns: Sequence[tuple[int, ...]], need: list[int], weights: list[int]) -> list[int]:
    """Cover ``need`` by repeatedly taking the column that covers the most weighted residual demand.

    A column that fits the residual whole is taken as many times as it keeps fitting whole: its cover
    stays the same while every other column's can only fall, so one-at-a-time picks it each time too.
    """
    cols = np.array(columns, dtype=np.int64).reshape(len(columns), len(need))
    w = np.array(weights, dtype=np.int64)
    residual = np.array(need, dtype=np.int64)
    x = [0] * len(columns)
    while (residual > 0).any():
        j = int(np.argmax(np.minimum(cols, np.maximum(residual, 0)) @ w))
        c = cols[j]
        used = c > 0
        times = max(1, int((residual[used] // c[used]).min())) if used.any() else 1
        x[j] += times
        residual = residual - times * c
    return x


def _solve_milp(
    columns: Sequence[tuple[int, ...]], need: list[int], weights: list[int], upper: int, rounding: bool = True
) -> list[int]:
    """min sum x  s.t.  sum_j columns[j][i] * x_j >= need[i],  x integer in [0, upper]; returns x.

    The LP relaxation is solved first and rounded (floor, then ``_greedy`` on the residual demand); if that
    reaches ceil(LP bound) it is optimal and the branch and bound is skipped. This is what makes ``pack``
    ~0.5 ms instead of ~4 ms: on thousands of random demands the rounding always closed the gap, but the
    MILP stays as the exact fallback (``rounding=False`` forces it, for the tests).
    """
    n_cols, n_rows = len(columns), len(need)
    a = np.array(columns, dtype=float).T  # rows = profiles
    nz = a != 0
    highs = _new_highs(
        RowwiseModel(
            cost=np.ones(n_cols),
            col_lower=np.zeros(n_cols),
            col_upper=np.full(n_cols, float(upper)),
            row_lower=np.array(need, dtype=float),
            row_upper=np.full(n_rows, math.inf),
            start=np.concatenate([[0], np.cumsum(nz.sum(axis=1))]).astype(np.int32),
            index=np.nonzero(nz)[1].astype(np.int32),
            value=a[nz],
        )
    )
    if rounding:
        outcome = highs.run()
        if not outcome.optimal:
            raise SolverError(f"HiGHS stopped with '{outcome.status_text}' on a MIG packing LP")
        bound = math.ceil(outcome.objective - 1e-6)
        x = [math.floor(v + 1e-9) for v in highs.col_value()]
        residual = [d - sum(c[i] * n for c, n in zip(columns, x, strict=True)) for i, d in enumerate(need)]
        x = [n + g for n, g in zip(x, _greedy(columns, residual, weights), strict=True)]
        if sum(x) <= bound:
            return x
    highs.make_integer(np.arange(n_cols, dtype=np.int32))
    # the objective is an integer, so a gap below 1 already proves optimality
    highs.set_options(mip_abs_gap=1.0 - 1e-6)
    outcome = highs.run()
    if not outcome.optimal:
        raise SolverError(f"HiGHS stopped with '{outcome.status_text}' on a MIG packing")
    return [round(v) for v in highs.col_value()]


@functools.lru_cache(maxsize=256)
def _patterns_for(model: str, names: tuple[str, ...]) -> tuple[tuple[tuple[int, ...], Layout], ...]:
    """Maximal layouts projected onto the demanded profiles, deduplicated and without dominated columns."""
    order = [p.name for p in MIG_PROFILES[model]]
    idx = [order.index(name) for name in names]
    first: dict[tuple[int, ...], Layout] = {}
    for layout in maximal_layouts(model):
        column = tuple(layout.count_vector[i] for i in idx)
        if any(column):
            first.setdefault(column, layout)
    columns = list(first)
    kept = [
        c
        for c in columns
        if not any(o != c and all(x >= y for x, y in zip(o, c, strict=True)) for o in columns)
    ]
    return tuple((c, first[c]) for c in kept)


def _choose(model: str, items: _Demand) -> dict[Layout, int]:
    """Pattern -> GPUs for a non-empty demand; the closed form when it is provably optimal, else the MILP."""
    alone = {name: -(-d // profile_named(model, name).max_instances) for name, d in items}
    # one profile: ceil(d / max_instances) is exact; several: one homogeneous pattern per profile is
    # optimal when it meets the volume lower bound
    if len(items) == 1 or sum(alone.values()) == _lower_bound(model, items):
        counts: dict[Layout, int] = {}
        for name, n in alone.items():
            layout = _homogeneous(model, name)
            counts[layout] = counts.get(layout, 0) + n
        return counts
    patterns = _patterns_for(model, tuple(name for name, _ in items))
    weights = [
        profile_named(model, name).memory_slices + profile_named(model, name).compute_slices
        for name, _ in items
    ]
    columns, need = [c for c, _ in patterns], [d for _, d in items]
    x = _greedy(columns, need, weights)  # optimal when it meets the volume bound: no LP needed
    if sum(x) > _lower_bound(model, items):
        x = _solve_milp(columns, need, weights, sum(alone.values()))
    return {layout: n for (_c, layout), n in zip(patterns, x, strict=True) if n > 0}


@functools.lru_cache(maxsize=1 << 16)
def _pack(model: str, items: _Demand) -> Packing:
    demand = dict(items)
    whole = MIG_PROFILES[model][-1].name  # the 7g profile fills a GPU alone: one GPU each, no MILP needed
    rest = tuple(item for item in items if item[0] != whole)
    counts = _choose(model, rest) if rest else {}
    if whole in demand:
        counts[_homogeneous(model, whole)] = demand[whole]
    order = {layout: k for k, layout in enumerate(maximal_layouts(model))}
    chosen = tuple(sorted(counts.items(), key=lambda item: order[item[0]]))
    held: dict[str, int] = {}
    for layout, n in chosen:
        for name, c in layout.counts.items():
            held[name] = held.get(name, 0) + n * c
    surplus = {p.name: held.get(p.name, 0) - demand.get(p.name, 0) for p in MIG_PROFILES[model]}
    assert all(v >= 0 for v in surplus.values()), (items, chosen)
    return Packing(
        gpu_model=model,
        gpus=sum(n for _, n in chosen),
        patterns=chosen,
        demand_items=items,
        surplus_items=tuple((name, v) for name, v in surplus.items() if v > 0),
    )


def pack(gpu_model: str, demand: Mapping[str, int]) -> Packing:
    """Fewest GPUs of ``gpu_model`` holding ``demand[p]`` instances of each profile ``p`` (or more).

    ``ValueError`` for a model without MIG, a profile the model does not have (named in the message), or
    a negative / non-integer count. Zero entries are ignored; an empty demand needs 0 GPUs. Memoized on
    (model, sorted demand): the returned ``Packing`` is shared and read-only.
    """
    return _pack(*_normalize(gpu_model, demand))
