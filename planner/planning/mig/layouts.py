"""The plan's MIG section: how each node pool's MIG-sized replicas are sliced onto GPUs in every period,
and the mig-parted configs (``mig-config.yaml``) with the schedule saying which applies when.

The planning model counts replicas per node from each service's own homogeneous layout (7 x 1g.10gb per H100
for a 9 GB replica), which is always feasible. Here the replicas allocations.csv puts on an offering (a node
pool) are taken per capacity group (spot rows, and every non-spot row together: separate nodes) and per
period, packed service mix and all onto the fewest GPUs, and laid out on nodes with the group's whole-GPU
replicas; ``planner.planning.mig.schedule`` turns those node layouts into as few named configs as the hours
allow. Per pool the report shows, at the pool's busiest period, the GPUs that packing needs, the GPUs of
per-service layouts and the GPUs one-replica-per-GPU would hold, and how many configs cover the horizon.
Training never shares a GPU: only inference rows enter here.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from models.catalog import Offering
from models.mig import Layout, replica_slice
from models.plan import (
    MigConfigUse,
    MigNodeLayout,
    MigPartedConfig,
    MigPool,
    MigScheduleEntry,
    MigSection,
)
from models.tiers import Tier
from planner.planning.mig.config import config_name, mig_parted_config, with_suffix
from planner.planning.mig.packing import pack
from planner.planning.mig.schedule import NodeLayout, PoolPlan, Work, plan_pool
from planner.solvers.work import deadline_after

# only read here; planner.planning.optimize builds the plan from this section, not the reverse
if TYPE_CHECKING:
    from planner.planning.problem.sets import PlanningSets

EPS = 1e-6
SCHEDULE_SECONDS = 30.0  # the config-reuse programs' time over a plan's pools (a year: ~15,000 of them)
HELD, SPOT = "held", "spot"
WHOLE = "whole:"  # prefix of a whole-GPU replica's size in the replica table (MIG profiles have no colon)


def _mig_profiles(sets: PlanningSets) -> dict[tuple[str, str], str]:
    """(service name, offering id) -> MIG profile of one replica, where the service fits a slice there."""
    result = {}
    for (i, o), _q in sets.replicas_per_node.items():
        service, offering = sets.services[i], sets.offerings[o]
        profile = replica_slice(offering.gpu_model, service.gpu_memory_gb, service.gpu_compute_share)
        if profile is not None:
            result[(service.name, offering.id)] = profile.name
    return result


def whole_gpus_per_replica(gpus_per_node: int, replicas_per_node: float) -> int:
    """GPUs a whole-GPU replica takes on one node: ``G / replicas per node``, whole by construction (the
    planner's sets size replicas on a divisor chain of the node, ``sets.whole_gpu_size``: a 3-GPU
    replica on 8 GPUs holds 4)."""
    return round(gpus_per_node / replicas_per_node)


def _replicas(
    sets: PlanningSets, allocations: pd.DataFrame, profiles: dict[tuple[str, str], str]
) -> pd.Series:
    """Replicas per (offering, group, period, what), ``what`` a MIG profile name or ``WHOLE`` + the GPUs
    of a whole-GPU replica.

    From allocations.csv's ``replicas``: whole numbers per row once the optimizer writes them; until
    then a row may be fractional, so each sum is rounded up (``ceil(x - 1e-6)``).
    """
    rows = allocations[allocations["kind"] == "inference"]
    by_id = {o.id: (k, o) for k, o in enumerate(sets.offerings)}
    index = {s.name: i for i, s in enumerate(sets.services)}
    what: dict[tuple[str, str], str | None] = {}  # a MIG profile, or WHOLE + GPUs per replica
    pairs = list(zip(rows["workload"].tolist(), rows["offering"].tolist(), strict=True))  # not row by row
    for w, o in set(pairs):
        if (w, o) in profiles:
            what[(w, o)] = profiles[(w, o)]
            continue
        k, offering = by_id[o]
        q = sets.replicas_per_node.get((index[w], k), 0.0)
        what[(w, o)] = f"{WHOLE}{whole_gpus_per_replica(offering.gpus_per_node, q)}" if q > 0 else None
    frame = pd.DataFrame(
        {
            "offering": rows["offering"].to_numpy(),
            "group": np.where(rows["tier"].to_numpy() == Tier.SPOT, SPOT, HELD),
            "period": rows["period"].to_numpy(dtype=np.int64),
            "what": [what[key] for key in pairs],
            "replicas": rows["replicas"].to_numpy(dtype=float),
        }
    )
    frame = frame[frame["what"].notna()]
    summed = frame.groupby(["offering", "group", "period", "what"])["replicas"].sum()
    whole = np.ceil(summed - EPS).clip(lower=0).astype(np.int64)
    return whole[whole > 0]


def _works(replicas: pd.Series) -> dict[tuple[str, int], Work]:
    """One pool's replicas (index: group, period, what) as a :class:`Work` per (group, period)."""
    mig: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    whole: dict[tuple[str, int], dict[int, int]] = defaultdict(dict)
    for index, n in replicas.items():
        group, period, label = cast(tuple[str, int, str], index)
        key, what = (str(group), int(period)), str(label)
        if what.startswith(WHOLE):
            whole[key][int(what.removeprefix(WHOLE))] = int(n)
        else:
            mig[key][what] = int(n)
    return {
        key: Work(
            mig=tuple(sorted(mig.get(key, {}).items())),
            whole=tuple(sorted(whole.get(key, {}).items(), reverse=True)),
        )
        for key in set(mig) | set(whole)
    }


def _node_layout(node: NodeLayout, gpus_per_node: int) -> list[tuple[Layout | None, int]]:
    """A node's MIG GPUs and, after them, its MIG-off GPUs (what mig-parted and plan.json list)."""
    groups: list[tuple[Layout | None, int]] = list(node)
    off = gpus_per_node - sum(n for _, n in node)
    if off:
        groups.append((None, off))
    return groups


def _ranges(periods: list[int]) -> list[tuple[int, int]]:
    """Sorted periods as merged [start, end) ranges."""
    out: list[tuple[int, int]] = []
    for p in periods:
        if out and out[-1][1] == p:
            out[-1] = (out[-1][0], p + 1)
        else:
            out.append((p, p + 1))
    return out


def _schedule(plan: PoolPlan, config: int) -> list[MigScheduleEntry]:
    """When config ``config`` applies: per (nodes, spot nodes), the periods, as merged ranges."""
    per_period: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for (group, period), counts in plan.use.items():
        n = counts.get(config, 0)
        if n:
            per_period[period][0] += n
            if group == SPOT:
                per_period[period][1] += n
    by_count: dict[tuple[int, int], list[int]] = defaultdict(list)
    for period in sorted(per_period):
        nodes, spot = per_period[period]
        by_count[(nodes, spot)].append(period)
    entries = [
        MigScheduleEntry(periods=_ranges(periods), nodes=nodes, spot_nodes=spot)
        for (nodes, spot), periods in by_count.items()
    ]
    return sorted(entries, key=lambda e: e.periods[0])


def _pool(
    offering: Offering,
    replicas: pd.Series,
    planned: pd.Series,
    p: int,
    taken: set[str],
    deadline: float | None,
) -> tuple[MigPool, dict[str, list[tuple[Layout | None, int]]]] | None:
    """One pool's entry and its configs (name -> node layout); None without MIG replicas."""
    works = _works(replicas)
    if not any(work.mig for work in works.values()):
        return None
    model, g = offering.gpu_model, offering.gpus_per_node
    plan = plan_pool(model, g, works, deadline)
    demand_at: dict[int, dict[str, int]] = defaultdict(dict)
    packed_at: dict[int, int] = defaultdict(int)
    homogeneous_at: dict[int, int] = defaultdict(int)
    for key, work in works.items():
        period = key[1]
        for name, n in work.mig:
            demand_at[period][name] = demand_at[period].get(name, 0) + n
            homogeneous_at[period] += pack(model, {name: n}).gpus
        packed_at[period] += plan.packed_gpus[key]
    peak = max(demand_at, key=lambda t: (packed_at[t], sum(demand_at[t].values()), -t))
    base = config_name(f"{offering.cloud}-{offering.region}-{offering.instance_type}")
    configs: dict[str, list[tuple[Layout | None, int]]] = {}
    uses: list[MigConfigUse] = []
    for c, node in enumerate(plan.configs):
        name = base if len(plan.configs) == 1 else with_suffix(base, f"-{c + 1}")
        k = 1
        while name in taken:  # two offerings whose names read alike as label values
            k += 1
            name = with_suffix(base, f"-{c + 1}x{k}")
        taken.add(name)
        groups = _node_layout(node, g)
        configs[name] = groups
        uses.append(
            MigConfigUse(
                name=name,
                node_layout=[
                    MigNodeLayout(gpus=n, mig_devices=layout.counts if layout is not None else None)
                    for layout, n in groups
                ],
                schedule=_schedule(plan, c),
            )
        )
    pool = MigPool(
        offering=offering.id,
        gpu_model=model,
        peak_period=peak,
        peak_demand=dict(sorted(demand_at[peak].items())),
        gpus_packed=packed_at[peak],
        gpus_per_service_layouts=homogeneous_at[peak],
        gpus_whole_per_replica=sum(demand_at[peak].values()),
        gpus_planned=float(planned.get(peak, 0.0)),
        packed_gpu_hours=float(sum(packed_at.values()) * p),
        whole_gpu_hours=float(sum(sum(d.values()) for d in demand_at.values()) * p),
        configs=uses,
    )
    return pool, configs


def mig_section(
    sets: PlanningSets, allocations: pd.DataFrame, seconds: float = SCHEDULE_SECONDS
) -> MigSection | None:
    """plan.json's ``mig`` block (pools, savings, configs and their schedule), or None without MIG
    replicas. ``seconds`` (nominal: counted work, the same on any load) bounds the config-reuse programs
    of all pools together (``schedule.py``):
    after it, hours keep their own fresh node layouts (more configs, as valid)."""
    deadline = deadline_after(seconds)  # counted work (planner/solvers/work.py), not the clock
    profiles = _mig_profiles(sets)
    if not profiles or not len(allocations):
        return None
    replicas = _replicas(sets, allocations, profiles)
    mig_rows = allocations[
        [
            (w, o) in profiles
            for w, o in zip(allocations["workload"].tolist(), allocations["offering"].tolist(), strict=True)
        ]
    ]
    planned = mig_rows.groupby(["offering", "period"])["gpus"].sum()
    offerings = {o.id: o for o in sets.offerings}
    pools: list[MigPool] = []
    configs: dict[str, list[tuple[Layout | None, int]]] = {}
    gpus: dict[str, int] = {}
    taken: set[str] = set()
    pool_ids = sorted({o for _w, o in profiles} & set(replicas.index.get_level_values("offering")))
    for offering_id in pool_ids:
        offering = offerings[offering_id]
        mine = (
            planned.loc[offering_id]
            if offering_id in planned.index.get_level_values(0)
            else pd.Series(dtype=float)
        )
        made = _pool(offering, replicas.loc[offering_id], mine, sets.period_hours, taken, deadline)
        if made is None:
            continue
        pool, named = made
        pools.append(pool)
        configs.update(named)
        gpus.update({name: offering.gpus_per_node for name in named})
    if not pools:
        return None
    return MigSection(
        pools=pools,
        gpus_saved_vs_whole_at_peak=sum(pl.gpus_whole_per_replica - pl.gpus_packed for pl in pools),
        gpu_hours_saved_vs_whole=sum(pl.whole_gpu_hours - pl.packed_gpu_hours for pl in pools),
        config=MigPartedConfig.model_validate(mig_parted_config(configs, gpus, all_disabled=True)),
        note="replicas of MIG-sized services packed together per node pool and period (cutting stock over "
        "layouts), laid out on nodes with the whole-GPU replicas; each pool's configs are scheduled by "
        "period (nodes no config is scheduled on run all-disabled); training never shares a GPU",
    )
