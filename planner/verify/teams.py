"""Teams: burst limits per period (on the GPUs the team's work occupies), and guarantees backed by
committed GPUs.

A committed GPU backs one team's guarantee only, and only a team that could use its offering (the GPU
models of the team's workloads), and only while it serves: nodes still on order, or a commitment
before its start or after its end, back nothing. Whether the commitments can back
every guarantee at once is a transportation problem: feasible exactly when the max flow from teams
(their guarantee less any shortfall listed unserved) to offerings (their committed GPUs) carries every
team's need. The network is a handful of teams and offerings: a plain augmenting-path max flow.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd

from models.mig import COMPUTE_SLICES, MIG_PROFILES, canonical_model
from models.plan import UnservedGuarantee
from planner.verify.context import EPS, Context
from planner.verify.findings import Findings
from planner.verify.rows import row_examples

__all__ = ["check_teams", "max_flow"]


def check_teams(ctx: Context, findings: Findings, rows: pd.DataFrame) -> None:
    occupied = rows.assign(gpus=occupied_gpus(ctx, rows))
    per_period = occupied.groupby(["team", "period"])["gpus"].sum().reset_index()
    limit = per_period["team"].map({t.name: t.burst_gpus for t in ctx.scenario.teams}).astype(float)
    over = per_period.assign(limit=limit)[limit.notna() & (per_period["gpus"] > limit + EPS)]
    findings.add_many(
        "burst",
        len(over),
        row_examples(over, "burst", lambda r: f"team {r.team} uses {r.gpus:g} GPUs; burst_gpus {r.limit:g}"),
    )
    _check_guarantees(ctx, findings)


def occupied_gpus(ctx: Context, rows: pd.DataFrame) -> np.ndarray:
    """GPUs each row's work occupies, what a burst limit ("most GPUs the team may use at once") caps, as
    a quota system such as Kueue counts requests: a gang its nodes' GPUs, a whole-GPU replica the GPUs
    it asks for, a MIG replica its slice's share of the GPU's compute (slices / 7). Idle GPUs of a node
    the team pays for are charged to it (the ``gpus`` column) but are not in use."""
    used: list[float] = []
    columns = (rows["kind"], rows["shape"], rows["offering"], rows["replicas"], rows["gpus"])
    for kind, shape, offering_id, replicas, gpus in zip(*(c.tolist() for c in columns), strict=True):
        if kind != "inference" or shape is None:
            used.append(float(gpus))
        elif shape.profile is None:
            used.append(float(replicas) * shape.gpus)
        else:
            model = canonical_model(ctx.offerings[offering_id].gpu_model)
            used.append(float(replicas) * MIG_PROFILES[model][shape.profile].compute_slices / COMPUTE_SLICES)
    return np.array(used, dtype=float)


def _check_guarantees(ctx: Context, findings: Findings) -> None:
    """In every period, the committed GPUs serving then can back every guarantee not listed unserved
    (checked once per distinct set of committed nodes: they change only where a commitment starts or
    ends)."""
    scenario = ctx.scenario
    listed: dict[str, float] = {}
    for item in ctx.plan.document.unserved:
        if isinstance(item, UnservedGuarantee):
            listed[item.team] = listed.get(item.team, 0.0) + item.gpus
    need = {t.name: t.guaranteed_gpus - listed.get(t.name, 0.0) for t in scenario.teams}
    need = {team: gpus for team, gpus in need.items() if gpus > EPS}
    if not need or not ctx.periods:
        return
    ids = sorted(oid for oid in ctx.committed if oid in ctx.offerings)  # unknown ones: check_commitments
    gpus = np.array([[ctx.offerings[oid].gpus_per_node] for oid in ids], dtype=float).reshape(len(ids), 1)
    supply_by_period = (
        np.vstack([ctx.committed[oid] for oid in ids]) * gpus if ids else np.zeros((0, ctx.periods))
    )
    patterns, first = np.unique(supply_by_period.T, axis=0, return_index=True)
    wanted = sum(need.values())
    for pattern, period in zip(patterns, first, strict=True):
        supply = {oid: float(value) for oid, value in zip(ids, pattern, strict=True) if value > 0}
        edges: dict[str, dict[str, float]] = {"source": {}}
        for team, gpus_needed in need.items():
            models = [m for w in scenario.workloads if w.team == team for m in w.gpu_models]
            usable = [oid for oid in supply if models and ctx.offerings[oid].matches_gpu(models)]
            edges["source"][f"team:{team}"] = gpus_needed
            edges[f"team:{team}"] = {f"offering:{oid}": float("inf") for oid in usable}
        for oid, value in supply.items():
            edges[f"offering:{oid}"] = {"sink": value}
        flow = max_flow(edges, "source", "sink")
        if flow < wanted - EPS:
            findings.add(
                "guarantee",
                f"in period {int(period)}, committed GPUs back {flow:g} of the {wanted:g} guaranteed GPUs "
                f"not listed unserved (teams {', '.join(sorted(need))}; committed GPUs {supply or 'none'})",
            )
            return


def max_flow(capacity: dict[str, dict[str, float]], source: str, sink: str) -> float:
    """Edmonds-Karp on a small graph given as node -> {node: capacity}."""
    residual: dict[str, dict[str, float]] = {}
    for u, out in capacity.items():
        for v, cap in out.items():
            residual.setdefault(u, {})[v] = residual.get(u, {}).get(v, 0.0) + cap
            residual.setdefault(v, {}).setdefault(u, 0.0)
    total = 0.0
    while True:
        parent: dict[str, str] = {source: source}
        queue = deque([source])
        while queue and sink not in parent:
            u = queue.popleft()
            for v, cap in residual.get(u, {}).items():
                if cap > EPS and v not in parent:
                    parent[v] = u
                    queue.append(v)
        if sink not in parent:
            return total
        path, v = [], sink
        while v != source:
            path.append((parent[v], v))
            v = parent[v]
        push = min(residual[u][v] for u, v in path)
        for u, v in path:
            residual[u][v] -= push
            residual[v][u] += push
        total += push
