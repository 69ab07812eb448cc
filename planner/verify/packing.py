"""Can each period's work be put on the whole nodes the plan holds? Per (period, offering, capacity),
capacity being held (committed + on-demand, one pool of N nodes) or spot (S nodes), an explicit
assignment must exist:

- each training gang takes its nodes whole, so B = N - gang nodes remain for inference;
- a whole-GPU replica takes ``g`` GPUs of one node;
- a MIG replica takes one slice; each GPU is either used whole or partitioned in a legal layout of its
  model (``models.mig.maximal_layouts``).

Exact, and cheap: single-GPU items (one-GPU replicas, and every MIG-partitioned GPU) fit in any free
GPU, so the work fits iff (a) the replicas of two or more GPUs pack into B nodes (bin packing), (b) the
MIG replicas need m GPUs at least (cutting stock over the legal layouts), and (c) all GPUs needed, m
included, are at most B x GPUs per node. (a) and (b) are one small exact search, :func:`min_bins`:
bounds first, a greedy upper bound, then a depth-first search over patterns, branching on the largest
remaining item (it must go in some bin). Periods repeat, so results are cached by (offering, B, work).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from models.catalog import Offering
from models.mig import COMPUTE_SLICES, MEMORY_SLICES, MIG_PROFILES, canonical_model, maximal_layouts
from planner.verify.context import EPS, HELD, SPOT, Context, Shape, replica_shape
from planner.verify.findings import Findings, Violation

__all__ = ["check_packing", "fits", "min_bins"]

SEARCH_BUDGET = 200_000  # search nodes per question; beyond it the answer is "undecided" (reported)


class _Undecided(Exception):
    """The exact search ran out of budget (never seen on the scenarios; reported, not guessed)."""


Vector = tuple[int, ...]


def min_bins(
    counts: Vector,
    patterns: Sequence[Vector],
    resources: Sequence[tuple[Vector, int]],
) -> int:
    """Fewest bins covering ``counts`` (items per type, types ordered largest first), each bin one of
    ``patterns`` (what fits in a bin; maximal ones suffice since fewer items always fit too).

    ``resources`` are (per-type use, bin capacity) pairs for lower bounds. Raises ``_Undecided``
    when the search would exceed its budget.
    """
    if not any(counts):
        return 0
    most = [max((p[k] for p in patterns), default=0) for k in range(len(counts))]
    if any(c and not m for c, m in zip(counts, most, strict=True)):
        raise ValueError("an item fits no bin")

    def lower(c: Vector) -> int:
        bound = max(math.ceil(n / m) for n, m in zip(c, most, strict=True) if n)
        for use, cap in resources:
            bound = max(bound, math.ceil(sum(u * n for u, n in zip(use, c, strict=True)) / cap - 1e-9))
        return bound

    def take(c: Vector, p: Vector) -> Vector:
        return tuple(max(0, n - q) for n, q in zip(c, p, strict=True))

    def candidates(c: Vector, j: int) -> list[Vector]:
        cut = {tuple(min(n, q) for n, q in zip(c, p, strict=True)) for p in patterns if p[j]}
        return [
            r for r in cut if not any(o != r and all(a >= b for a, b in zip(o, r, strict=True)) for o in cut)
        ]

    # greedy upper bound: the pattern covering the most resource, as often as it stays whole
    weight = resources[0][0]
    upper, c = 0, counts
    while any(c):
        j = next(k for k, n in enumerate(c) if n)
        best = max(candidates(c, j), key=lambda r: sum(w * n for w, n in zip(weight, r, strict=True)))
        times = min(n // q for n, q in zip(c, best, strict=True) if q)
        c = tuple(n - q * times for n, q in zip(c, best, strict=True))
        upper += times
    bound = lower(counts)
    if bound >= upper:
        return upper
    spent = 0
    seen: set[tuple[Vector, int]] = set()  # (counts, bins) known infeasible

    def feasible(c: Vector, bins: int) -> bool:
        nonlocal spent
        if not any(c):
            return True
        if bins <= 0 or lower(c) > bins or (c, bins) in seen:
            return False
        spent += 1
        if spent > SEARCH_BUDGET:
            raise _Undecided
        j = next(k for k, n in enumerate(c) if n)
        for r in candidates(c, j):
            if feasible(take(c, r), bins - 1):
                return True
        seen.add((c, bins))
        return False

    for bins in range(bound, upper):
        if feasible(counts, bins):
            return bins
    return upper


@functools.cache
def _whole_patterns(gpus_per_node: int, sizes: tuple[int, ...]) -> tuple[Vector, ...]:
    """Maximal multisets of replica sizes (largest first) that fit one node."""
    out: list[Vector] = []

    def grow(k: int, room: int, chosen: tuple[int, ...]) -> None:
        if k == len(sizes):
            if all(size > room for size in sizes):
                out.append(chosen)
            return
        for n in range(room // sizes[k], -1, -1):
            grow(k + 1, room - n * sizes[k], (*chosen, n))

    grow(0, gpus_per_node, ())
    return tuple(out)


@functools.cache
def _mig_patterns(gpu_model: str) -> tuple[tuple[Vector, ...], tuple[tuple[Vector, int], ...]]:
    """Maximal legal layouts as count vectors, largest profile first, and their slice budgets."""
    model = canonical_model(gpu_model)
    patterns = tuple(tuple(reversed(layout.count_vector)) for layout in maximal_layouts(model))
    profiles = tuple(reversed(MIG_PROFILES[model]))
    resources = (
        (tuple(p.memory_slices for p in profiles), MEMORY_SLICES),
        (tuple(p.compute_slices for p in profiles), COMPUTE_SLICES),
    )
    return patterns, resources


@functools.cache
def mig_gpus(gpu_model: str, counts: Vector) -> int:
    """Fewest GPUs holding ``counts`` replicas per MIG profile (``MIG_PROFILES`` order) in legal layouts."""
    patterns, resources = _mig_patterns(gpu_model)
    return min_bins(tuple(reversed(counts)), patterns, resources)


@functools.cache
def fits(
    gpus_per_node: int, gpu_model: str, nodes: int, whole: tuple[tuple[int, int], ...], mig: Vector
) -> bool:
    """Whether ``whole`` ((GPUs per replica, replicas), ...) and ``mig`` (replicas per MIG profile) fit on
    ``nodes`` nodes of ``gpus_per_node`` GPUs. Raises ``_Undecided`` if the search gives up."""
    if nodes < 0:
        return False
    gpus = sum(g * n for g, n in whole) + (mig_gpus(gpu_model, mig) if any(mig) else 0)
    if gpus > nodes * gpus_per_node:
        return False
    big = sorted(((g, n) for g, n in whole if g > 1 and n), reverse=True)
    if not big:
        return True
    sizes = tuple(g for g, _ in big)
    patterns = _whole_patterns(gpus_per_node, sizes)
    return min_bins(tuple(n for _, n in big), patterns, ((sizes, gpus_per_node),)) <= nodes


def check_packing(ctx: Context, findings: Findings, rows: pd.DataFrame, counts: pd.DataFrame) -> None:
    """Every (period, offering, capacity) with work: an assignment onto its whole nodes exists."""
    held = {HELD: "N", SPOT: "S"}
    gangs = rows[rows["kind"] == "training"].groupby(["offering", "capacity", "period"])["nodes"].sum()
    inference = rows[(rows["kind"] == "inference") & rows["shape"].notna()]
    replicas = inference.groupby(["offering", "capacity", "period", "workload"])["replicas"].sum()
    # a fractional count is reported as fractional-replicas; packing takes its whole replicas (rounded
    # down), so one fault is not reported twice
    replicas = np.floor(replicas + EPS).clip(lower=0)
    for offering_id, by_offering in counts.groupby("offering"):
        offering = ctx.offerings[str(offering_id)]
        for capacity, column in held.items():
            frame = by_offering[["period", column]].rename(columns={column: "nodes"})
            if column == "N":  # non-spot work may use every committed node, used or not
                frame["nodes"] = np.maximum(frame["nodes"], by_offering["C"])
            frame = frame[frame["nodes"] > EPS].set_index("period")
            if frame.empty:
                continue
            try:
                gang = gangs.loc[(offering_id, capacity)]
            except KeyError:
                gang = pd.Series(dtype=float)
            # whole nodes held (a fractional count is a billing violation already: round it up here)
            whole = np.ceil(frame["nodes"] - EPS) - np.round(gang.reindex(frame.index).fillna(0.0))
            left = whole.astype(np.int64)
            try:
                wide = (
                    replicas.loc[(offering_id, capacity)].unstack("workload").reindex(frame.index).fillna(0)
                )
            except KeyError:
                wide = pd.DataFrame(index=frame.index)
            _check_offering(ctx, findings, offering, capacity, left, wide.astype(np.int64))


def _check_offering(
    ctx: Context,
    findings: Findings,
    offering: Offering,
    capacity: str,
    nodes: pd.Series,
    replicas: pd.DataFrame,
) -> None:
    """One offering and capacity over all periods: distinct (nodes, replicas) rows are decided once."""
    services = list(replicas.columns)
    shapes: list[Shape] = [_shape(ctx, str(s), offering) for s in services]
    matrix = (
        np.column_stack([nodes.to_numpy(), replicas.to_numpy()]) if services else nodes.to_numpy()[:, None]
    )
    unique, inverse = np.unique(matrix, axis=0, return_inverse=True)
    failed: dict[int, str] = {}
    mig_size = len(MIG_PROFILES.get(_mig_model(offering), ()))
    for u, row in enumerate(unique):
        whole: dict[int, int] = {}
        mig = [0] * mig_size
        for shape, n in zip(shapes, row[1:], strict=True):
            if n <= 0:
                continue
            if shape.profile is None:
                whole[shape.gpus] = whole.get(shape.gpus, 0) + int(n)
            else:
                mig[shape.profile] += int(n)
        try:
            ok = fits(
                offering.gpus_per_node,
                offering.gpu_model,
                int(row[0]),
                tuple(sorted(whole.items())),
                tuple(mig),
            )
        except _Undecided:
            failed[u] = "undecided: the exact search gave up"
            continue
        if not ok:
            work = (
                ", ".join(f"{int(n)} {s}" for s, n in zip(services, row[1:], strict=True) if n) or "nothing"
            )
            node = f"{offering.gpus_per_node} x {offering.gpu_model}"
            failed[u] = f"{work} do not fit on {int(row[0])} {capacity} node(s) of {node} left after gangs"
    if not failed:
        return
    periods = nodes.index.to_numpy()
    bad = [(int(periods[t]), failed[int(u)]) for t, u in enumerate(inverse.reshape(-1)) if int(u) in failed]
    findings.add_many(
        "packing",
        len(bad),
        (Violation(kind="packing", message=m, period=t, offering=offering.id) for t, m in bad),
    )


def _mig_model(offering: Offering) -> str:
    try:
        return canonical_model(offering.gpu_model)
    except ValueError:
        return ""


def _shape(ctx: Context, service: str, offering: Offering) -> Shape:
    shape = replica_shape(ctx.services[service], offering)
    assert shape is not None  # ineligible rows were left out
    return shape
