"""How the plan's MIG-sized inference replicas are sliced onto GPUs, and the mig-parted config for it.

The planning model counts replicas per node from each service's own homogeneous layout (7 x 1g.10gb per
H100 for a 9 GB replica), which is always feasible. Here the replicas that share an offering (a node pool)
are packed together, service mix and all, onto the fewest GPUs (``planner.mig.packing.pack``), period by
period. Per pool the report shows, at the pool's busiest period, the GPUs that packing needs, the GPUs of
per-service layouts, and the GPUs one-replica-per-GPU would hold; ``mig-config.yaml`` gets one named
config per pool: the same layout on every node (what a node label can select), sized for the peak.
Training never shares a GPU: only inference rows enter here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from models.mig import Layout, smallest_profile, supports_mig
from models.plan import MigNodeLayout, MigPartedConfig, MigPool, MigSection
from planner.mig.config import config_name, mig_parted_config
from planner.mig.packing import pack

if TYPE_CHECKING:  # only read here; planner.optimize builds the plan from this section, not the reverse
    from planner.optimize.sets import PlanningSets

EPS = 1e-6


def _mig_profiles(sets: PlanningSets) -> dict[tuple[str, str], str]:
    """(service name, offering id) -> MIG profile of one replica, where the service fits a slice there."""
    result = {}
    for (i, o), _q in sets.replicas_per_node.items():
        service, offering = sets.services[i], sets.offerings[o]
        if service.gpu_memory_gb is None or not supports_mig(offering.gpu_model):
            continue
        profile = smallest_profile(offering.gpu_model, service.gpu_memory_gb, service.gpu_compute_share)
        if profile is not None and profile.compute_slices < 7:  # a 7g slice is a whole GPU
            result[(service.name, offering.id)] = profile.name
    return result


def mig_section(sets: PlanningSets, allocations: pd.DataFrame) -> MigSection | None:
    """plan.json's ``mig`` block (pools, savings, the mig-parted config), or None without MIG replicas."""
    profiles = _mig_profiles(sets)
    if not profiles or not len(allocations):
        return None
    rows = allocations[allocations["kind"] == "inference"]
    keys = list(zip(rows["workload"], rows["offering"], strict=True))
    mask = np.array([key in profiles for key in keys], dtype=bool)
    rows = rows[mask]
    if not len(rows):
        return None
    by_id = {o.id: (k, o) for k, o in enumerate(sets.offerings)}
    index = {s.name: i for i, s in enumerate(sets.services)}
    p = sets.period_hours
    replicas = rows.assign(
        profile=[profiles[(w, o)] for w, o in zip(rows["workload"], rows["offering"], strict=True)],
        replicas=[
            n * sets.replicas_per_node[(index[w], by_id[o][0])]
            for w, o, n in zip(rows["workload"], rows["offering"], rows["nodes"], strict=True)
        ],
        planned_gpus=rows["gpus"],
    )
    # committed nodes cost nothing extra, so the plan may cover more replicas than asked: count only the
    # demand, shared between the offerings that serve it in proportion to what each covers
    covered = replicas.groupby(["workload", "period"])["replicas"].transform("sum").to_numpy()
    asked = sets.demand[
        [index[w] for w in replicas["workload"]], replicas["period"].to_numpy(dtype=np.int64)
    ].astype(float)
    replicas["replicas"] = replicas["replicas"].to_numpy() * np.minimum(1.0, asked / np.maximum(covered, EPS))
    per = replicas.groupby(["offering", "period", "profile"])["replicas"].sum()
    planned = replicas.groupby(["offering", "period"])["planned_gpus"].sum()
    pools: list[MigPool] = []
    configs: dict[str, list[tuple[Layout | None, int]]] = {}
    for offering_id, frame in per.groupby(level=0):
        offering = by_id[str(offering_id)][1]
        demand_by_period: dict[int, dict[str, int]] = defaultdict(dict)
        for key, value in frame.items():
            _o, period, profile = cast(tuple[str, int, str], key)  # (offering, period, profile)
            demand_by_period[int(period)][str(profile)] = math.ceil(float(value) - EPS)
        packed_hours = whole_hours = 0.0
        peak_period, peak = -1, None
        for period, demand in demand_by_period.items():
            packing = pack(offering.gpu_model, demand)
            packed_hours += packing.gpus * p
            whole_hours += sum(demand.values()) * p
            if peak is None or (packing.gpus, sum(demand.values())) > (peak.gpus, sum(peak.demand.values())):
                peak_period, peak = period, packing
        assert peak is not None
        demand = peak.demand
        homogeneous = sum(pack(offering.gpu_model, {name: n}).gpus for name, n in demand.items())
        per_node, nodes = _uniform_node_layout(offering.gpu_model, offering.gpus_per_node, demand, peak.gpus)
        name = config_name(f"{offering.cloud}-{offering.region}-{offering.instance_type}")
        configs[name] = per_node
        pools.append(
            MigPool(
                offering=offering.id,
                gpu_model=offering.gpu_model,
                config=name,
                peak_period=peak_period,
                peak_demand=demand,
                gpus_packed=peak.gpus,
                gpus_per_service_layouts=homogeneous,
                gpus_whole_per_replica=sum(demand.values()),
                gpus_planned=float(planned.loc[(offering_id, peak_period)]),
                nodes_with_config=nodes,
                node_layout=[
                    MigNodeLayout(gpus=n, mig_devices=layout.counts if layout is not None else None)
                    for layout, n in per_node
                ],
                packed_gpu_hours=packed_hours,
                whole_gpu_hours=whole_hours,
            )
        )
    return MigSection(
        pools=pools,
        gpus_saved_vs_whole_at_peak=sum(pl.gpus_whole_per_replica - pl.gpus_packed for pl in pools),
        gpu_hours_saved_vs_whole=sum(pl.whole_gpu_hours - pl.packed_gpu_hours for pl in pools),
        config=MigPartedConfig.model_validate(
            mig_parted_config(configs, max(o.gpus_per_node for o in sets.offerings))
        ),
        note="replicas of MIG-sized services packed together per node pool (cutting stock over layouts); "
        "training never shares a GPU",
    )


def _uniform_node_layout(
    gpu_model: str, gpus_per_node: int, demand: dict[str, int], packed_gpus: int
) -> tuple[list[tuple[Layout | None, int]], int]:
    """One layout for every node of the pool (a node label selects one config): the peak demand spread
    evenly over the fewest nodes whose share still packs into one node's GPUs."""
    nodes = max(1, math.ceil(packed_gpus / gpus_per_node))
    while True:
        share = {name: math.ceil(n / nodes) for name, n in demand.items()}
        packing = pack(gpu_model, share)
        if packing.gpus <= gpus_per_node:
            return list(packing.exact_patterns()), nodes
        nodes += 1
