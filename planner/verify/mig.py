"""MIG configs: in every period, the mig-parted configs plan.json schedules on a pool's nodes hold that
period's MIG replicas, in legal layouts, on no more nodes than the plan holds.

Read from plan.json's ``mig`` block (per pool: its configs, each with a node layout and a schedule of
[start, end) period ranges and node counts) and from ``mig-config.yaml`` when the plan directory is
given (the file a GPU Operator applies: it must be plan.json's ``mig.config``, and its layouts are the
ones checked). Per pool (offering) and period, with the MIG replicas taken from allocations.csv by the
replica -> slice rule of ``models.mig`` (``context.replica_shape``):

- every scheduled config is in the file and lays out each of the node's GPUs exactly once, every MIG
  GPU in a legal layout (``models.mig.layout_for``);
- instances per profile, summed over the scheduled nodes' GPUs, cover the replicas of that profile:
  the spot rows' on the spot nodes, the other rows' on the non-spot nodes (separate nodes);
- the scheduled nodes are at most the nodes the plan holds: spot ``ceil(S)``, non-spot ``ceil(N)`` (its
  rows' nodes, training included) plus the idle committed nodes;
- the whole-GPU replicas of the group fit the MIG-off GPUs: the scheduled nodes' and those of the
  group's other nodes left after training gangs (exact for sizes that divide one another, as every
  node of 1, 2, 4, 8 or 16 GPUs has; otherwise only the GPU total is checked).

Replica counts are taken whole (a fractional count is ``fractional-replicas`` already, rounded down
here so one fault is reported once), as ``packing`` does. For the same reason the node checks (held
nodes, MIG-off GPUs) skip a group's periods with a fractional row: the planner rounds its replicas up,
which may take a node more than fractional rows hold.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.catalog import Offering
from models.errors import InputError
from models.mig import MIG_PROFILES, canonical_model, layout_for
from models.plan import MigConfigUse, MigPool
from models.yamlfile import read_yaml
from planner.verify.context import EPS, HELD, SPOT, Context
from planner.verify.findings import Findings, Violation

__all__ = ["check_mig", "read_mig_file"]

KIND = "mig-config"
MISSING: Any = object()  # no plan directory given: check plan.json's mig.config alone


def read_mig_file(directory: Path | None) -> Any:
    """mig-config.yaml of a plan directory as plain data; None if absent, ``MISSING`` without a
    directory, a string (the error) if it does not parse."""
    if directory is None:
        return MISSING
    path = directory / "mig-config.yaml"
    if not path.exists():
        return None
    try:
        return read_yaml(path)
    except InputError as exc:  # also a repeated key, which a plain YAML reader would drop silently
        where = f"{exc.where}: " if exc.where else ""
        return f"mig-config.yaml is not readable YAML: {where}{exc.problem}"


def check_mig(ctx: Context, findings: Findings, rows: pd.DataFrame, counts: pd.DataFrame, file: Any) -> None:
    """Every period and pool: scheduled configs legal, holding the MIG replicas, within the held nodes."""
    mig = ctx.plan.document.mig
    configs = _configs(ctx, findings, file)
    pools = {pool.offering: pool for pool in mig.pools} if mig is not None else {}
    replicas = _replicas(rows)
    offerings = sorted(set(pools) | {str(o) for o in replicas.loc[replicas["mig"], "offering"].unique()})
    for offering_id in offerings:
        offering = ctx.offerings.get(offering_id)
        if offering is None:
            findings.add(KIND, "a MIG pool on an offering the scenario may not buy", offering=offering_id)
            continue
        pool = pools.get(offering_id)
        if pool is not None and pool.gpu_model != offering.gpu_model:
            findings.add(
                KIND,
                f"pool says GPU model {pool.gpu_model}, the offering has {offering.gpu_model}",
                offering=offering_id,
            )
            continue
        _check_pool(ctx, findings, offering, pool, configs, replicas, rows, counts)


def _configs(ctx: Context, findings: Findings, file: Any) -> dict[str, list[dict[str, Any]]]:
    """Config name -> its device groups, as the GPU Operator would read them."""
    mig = ctx.plan.document.mig
    written = mig.config.document() if mig is not None else None
    if file is MISSING:
        document = written
    elif isinstance(file, str):
        findings.add(KIND, file)
        document = None
    elif file is None:
        if mig is not None and any(pool.configs for pool in mig.pools):
            findings.add(KIND, "plan.json schedules MIG configs but the plan has no mig-config.yaml")
        document = None
    else:
        if file != written:
            findings.add(KIND, "mig-config.yaml differs from plan.json's mig.config")
        document = file
    if not isinstance(document, dict) or not isinstance(document.get("mig-configs"), dict):
        return {}
    return {str(k): v for k, v in document["mig-configs"].items() if isinstance(v, list)}


def _replicas(rows: pd.DataFrame) -> pd.DataFrame:
    """Whole replicas per (offering, capacity, period, shape) of the inference rows that fit a node."""
    inference = rows[(rows["kind"] == "inference") & rows["shape"].notna()]
    frame = pd.DataFrame(
        {
            "offering": inference["offering"].to_numpy(),
            "capacity": inference["capacity"].to_numpy(),
            "period": inference["period"].to_numpy(dtype=np.int64),
            "mig": [s.profile is not None for s in inference["shape"]],
            "what": [s.profile if s.profile is not None else s.gpus for s in inference["shape"]],
            "replicas": inference["replicas"].to_numpy(dtype=float),
        }
    )
    grouped = frame.groupby(["offering", "capacity", "period", "mig", "what"], as_index=False)[
        "replicas"
    ].sum()
    grouped["replicas"] = np.floor(grouped["replicas"] + EPS).clip(lower=0).astype(np.int64)
    return grouped[grouped["replicas"] > 0]


def _node(offering: Offering, name: str, groups: Any) -> tuple[np.ndarray, int] | str:
    """A config's (instances per profile on one node, MIG-off GPUs), or what is wrong with it."""
    g = offering.gpus_per_node
    model = canonical_model(offering.gpu_model)
    names = [p.name for p in MIG_PROFILES[model]]
    instances = np.zeros(len(names), dtype=np.int64)
    seen: list[int] = []
    off = 0
    for group in groups:
        if not isinstance(group, dict):
            return f"config {name}: an entry is not a mapping"
        devices = group.get("devices")
        indices = list(range(g)) if devices == "all" else devices
        if not isinstance(indices, list) or not all(isinstance(d, int) for d in indices):
            return f"config {name}: devices must be a list of GPU indices or 'all'"
        seen += indices
        if group.get("mig-enabled") is not True:
            off += len(indices)
            continue
        counts = group.get("mig-devices") or {}
        try:
            layout = layout_for(model, counts) if isinstance(counts, dict) else None
        except ValueError as exc:
            return f"config {name}: {exc}"
        if layout is None:
            return f"config {name}: {counts} is not a legal {model} MIG layout"
        instances += len(indices) * np.array(layout.count_vector, dtype=np.int64)
    if sorted(seen) != list(range(g)):
        return f"config {name}: devices {sorted(seen)} are not each of the node's {g} GPUs once"
    return instances, off


def _schedule(ctx: Context, config: MigConfigUse) -> tuple[np.ndarray, np.ndarray] | str:
    """(nodes, spot nodes) per period carrying ``config``, or what is wrong with its schedule."""
    nodes = np.zeros(ctx.periods, dtype=np.int64)
    spot = np.zeros(ctx.periods, dtype=np.int64)
    for entry in config.schedule:
        if entry.nodes < 0 or not 0 <= entry.spot_nodes <= entry.nodes:
            return f"config {config.name}: {entry.nodes} nodes, {entry.spot_nodes} of them spot"
        for start, end in entry.periods:
            if not 0 <= start < end <= ctx.periods:
                return f"config {config.name}: period range [{start}, {end}) outside the horizon"
            if nodes[start:end].any():
                return f"config {config.name}: periods [{start}, {end}) scheduled twice"
            nodes[start:end] = entry.nodes
            spot[start:end] = entry.spot_nodes
    return nodes, spot


def _check_pool(
    ctx: Context,
    findings: Findings,
    offering: Offering,
    pool: MigPool | None,
    configs: dict[str, list[dict[str, Any]]],
    replicas: pd.DataFrame,
    rows: pd.DataFrame,
    counts: pd.DataFrame,
) -> None:
    oid, g, periods = offering.id, offering.gpus_per_node, ctx.periods
    try:
        size = len(MIG_PROFILES[canonical_model(offering.gpu_model)])
    except ValueError:
        size = 0
    # per group: instances per profile held, nodes scheduled
    held = {c: np.zeros((periods, size), dtype=np.int64) for c in (HELD, SPOT)}
    scheduled = {c: np.zeros(periods, dtype=np.int64) for c in (HELD, SPOT)}
    #: per group, (nodes per period, MIG-off GPUs of one node) of each config, for the whole-GPU check
    parts: dict[str, list[tuple[np.ndarray, int]]] = {HELD: [], SPOT: []}
    if pool is not None and pool.configs and not size:
        findings.add(KIND, f"MIG configs for {offering.gpu_model} GPUs, which have no MIG", offering=oid)
        return
    for config in pool.configs if pool is not None else []:
        if config.name not in configs:
            findings.add(KIND, f"config {config.name} is scheduled but not in mig-config.yaml", offering=oid)
            return
        node = _node(offering, config.name, configs[config.name])
        times = _schedule(ctx, config)
        for problem in (node, times):
            if isinstance(problem, str):
                findings.add(KIND, problem, offering=oid)
                return
        assert not isinstance(node, str) and not isinstance(times, str)
        (instances, free), (nodes, spot) = node, times
        for capacity, n in ((HELD, nodes - spot), (SPOT, spot)):
            held[capacity] += n[:, None] * instances[None, :]
            scheduled[capacity] += n
            parts[capacity].append((n, free))
    mine = replicas[replicas["offering"] == oid]
    frame = counts[counts["offering"] == oid].set_index("period")
    gangs = rows[(rows["kind"] == "training") & (rows["offering"] == oid)]
    for capacity in (HELD, SPOT):
        work = mine[mine["capacity"] == capacity]
        need = np.zeros((periods, size), dtype=np.int64)
        slices = work[work["mig"]]
        if size:
            np.add.at(
                need,
                (slices["period"].to_numpy(dtype=np.int64), slices["what"].to_numpy(dtype=np.int64)),
                slices["replicas"].to_numpy(dtype=np.int64),
            )
        whole = work[~work["mig"]]
        limit = _held_nodes(frame, capacity, ctx.committed.get(oid, np.zeros(periods)))
        gang = np.zeros(periods)
        mine_gangs = gangs[gangs["capacity"] == capacity]
        np.add.at(gang, mine_gangs["period"].to_numpy(dtype=np.int64), mine_gangs["nodes"].to_numpy())
        rounded = np.zeros(periods, dtype=bool)  # a fractional row: the planner had to round it up
        mine_rows = rows[
            (rows["kind"] == "inference") & (rows["offering"] == oid) & (rows["capacity"] == capacity)
        ]
        fractional = np.abs(mine_rows["replicas"] - np.round(mine_rows["replicas"])) > EPS
        rounded[mine_rows.loc[fractional, "period"].to_numpy(dtype=np.int64)] = True
        _report(
            findings, oid, capacity, need, held[capacity], scheduled[capacity], np.where(rounded, -1, limit)
        )
        whole_nodes = np.where(rounded, -1, limit - np.round(gang).astype(np.int64))
        _check_whole(findings, oid, capacity, g, whole, scheduled[capacity], parts[capacity], whole_nodes)


def _held_nodes(frame: pd.DataFrame, capacity: str, committed: np.ndarray) -> np.ndarray:
    """Nodes the plan holds per period: spot ``ceil(S)``; non-spot ``ceil(N)`` (rows' nodes, training
    included) + the idle committed nodes, i.e. the larger of ``ceil(N)`` and ``C`` (C is whole)."""
    used = np.zeros(len(committed))
    if not frame.empty:
        used[frame.index.to_numpy(dtype=np.int64)] = frame["S" if capacity == SPOT else "N"].to_numpy()
    limit = np.ceil(used - EPS)
    if capacity == HELD:
        limit = np.maximum(limit, np.round(committed))
    return limit.astype(np.int64)


def _report(
    findings: Findings,
    oid: str,
    capacity: str,
    need: np.ndarray,
    held: np.ndarray,
    scheduled: np.ndarray,
    limit: np.ndarray,
) -> None:
    what = "spot" if capacity == SPOT else "non-spot"
    short = np.flatnonzero((need > held).any(axis=1))
    findings.add_many(
        KIND,
        len(short),
        (
            Violation(
                kind=KIND,
                message=f"{what} MIG replicas {_vector(need[t])} but the configs scheduled hold "
                f"{_vector(held[t])} instances",
                period=int(t),
                offering=oid,
            )
            for t in short
        ),
    )
    over = np.flatnonzero((scheduled > limit) & (limit >= 0))
    findings.add_many(
        KIND,
        len(over),
        (
            Violation(
                kind=KIND,
                message=f"{scheduled[t]} {what} nodes scheduled a MIG config; the plan holds {limit[t]}",
                period=int(t),
                offering=oid,
            )
            for t in over
        ),
    )


def _vector(counts: np.ndarray) -> str:
    return "[" + ", ".join(str(int(n)) for n in counts) + "]"


def _check_whole(
    findings: Findings,
    oid: str,
    capacity: str,
    g: int,
    whole: pd.DataFrame,
    scheduled: np.ndarray,
    parts: list[tuple[np.ndarray, int]],
    inference_nodes: np.ndarray,
) -> None:
    """Whole-GPU replicas in the MIG-off GPUs: for each size s (largest first, sizes dividing one
    another), the GPUs usable by replicas of size >= s, ``sum over nodes of s * floor(off / s)``, hold
    their GPUs. Nodes without a config have all ``g`` GPUs MIG off. Periods with ``inference_nodes``
    below 0 are not checked."""
    if whole.empty:
        return
    off = sum((n * free for n, free in parts), np.zeros(len(scheduled), dtype=np.int64))
    others = np.maximum(0, inference_nodes - scheduled)  # nodes with every GPU MIG off
    sizes = sorted({int(s) for s in whole["what"]}, reverse=True)
    gpus = np.zeros((len(sizes), len(off)), dtype=np.int64)  # GPUs of replicas of size >= sizes[k]
    for k, size in enumerate(sizes):
        frame = whole[whole["what"] == size]
        np.add.at(gpus[k], frame["period"].to_numpy(dtype=np.int64), size * frame["replicas"].to_numpy())
    gpus = np.cumsum(gpus, axis=0)
    if all(a % b == 0 for a, b in itertools.pairwise(sizes)):
        usable = [others * g + sum(n * (s * (free // s)) for n, free in parts) for s in sizes]
    else:  # sizes that do not divide one another: only the GPU total is a sure condition
        usable = [np.full(len(off), np.iinfo(np.int64).max)] * (len(sizes) - 1) + [others * g + off]
    short = np.zeros(len(scheduled), dtype=bool)
    for k in range(len(sizes)):
        short |= gpus[k] > usable[k]
    bad = [int(t) for t in np.flatnonzero(short & (inference_nodes >= 0))]
    findings.add_many(
        KIND,
        len(bad),
        _whole_examples(bad, oid, capacity, whole),
    )


def _whole_examples(periods: list[int], oid: str, capacity: str, whole: pd.DataFrame) -> Iterator[Violation]:
    what = "spot" if capacity == SPOT else "non-spot"
    for t in periods:
        mine = whole[whole["period"] == t]
        items = ", ".join(
            f"{int(n)} x {int(s)} GPU(s)" for s, n in zip(mine["what"], mine["replicas"], strict=True)
        )
        yield Violation(
            kind=KIND,
            message=f"{what} whole-GPU replicas ({items}) do not fit the MIG-off GPUs of the nodes left "
            "beside the MIG configs",
            period=t,
            offering=oid,
        )
