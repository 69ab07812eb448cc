"""A plan's AWS fleet as Karpenter objects: ``NodePool`` (``karpenter.sh/v1``) and ``EC2NodeClass``
(``karpenter.k8s.aws/v1``), the storage versions of the CRDs in ``../shared/data/karpenter-crds/``. Pure
functions of the plan files, as the Kueue export (``k8s.py``) is.

A fleet that consumes its commitments, tier by tier, through NodePool ``weight`` (a higher weight is
tried first: https://karpenter.sh/docs/concepts/nodepools/#specweight):

- **Reserved** (weight :data:`RESERVED_WEIGHT`): one NodePool per capacity reservation, with the
  ``karpenter.sh/capacity-type: reserved`` requirement and an EC2NodeClass whose
  ``capacityReservationSelectorTerms`` select that reservation alone (by ``id``, or by the tags gpuplan gives
  it): the capacity reservations the scenario holds (plan.json commitments of term ``reservation``) and
  those ``gpuplan provision`` (or a Terraform root) makes for non-spot multi-node gangs, tagged
  ``gpuplan-plan`` and ``gpuplan-run`` (``models/naming.py``). Karpenter prices reserved offerings near
  zero and launches into them first (aws/karpenter-provider-aws ``designs/odcr.md``, "Consider ODCR first
  during Scheduling"; https://karpenter.sh/docs/tasks/odcrs/). :func:`reserved_fleet` takes a list of
  :class:`Reservation`; the Capacity Blocks the plan holds its gangs in (tier ``capacity_block``) come in
  the same way, as reservations of kind ``capacity-block`` selected by the tags ``gpuplan provision`` buys
  them with (``gpuplan-plan``, ``gpuplan-run``): Karpenter models a block as a reserved offering and
  launches it on the block's own market (aws/karpenter-provider-aws ``designs/capacity-block-support.md``;
  https://karpenter.sh/docs/concepts/nodeclasses/#speccapacityreservationselectorterms).
- **Committed on demand**: 1y/3y reserved instances and savings plans are billing constructs over
  on-demand instances, so the NodePool that consumes them is an on-demand one of the committed offering.
  Its nodes carry ``gpuplan.io/capacity-type: reserved`` (the Kueue export's reserved flavor selects them)
  and it is weighted above every plain on-demand and spot pool.
- **On demand and spot** per offering, weighted cheapest first as the plan prices a GPU-hour (the
  offering's on-demand or spot rate over its GPUs). Spot nodes carry the Kueue export's spot taint
  (``models.naming.SPOT_TAINT``), so only workloads that tolerate it land there.

Every NodePool pins its instance type (``node.kubernetes.io/instance-type``) and region
(``topology.kubernetes.io/region``) and has ``limits`` of ``nvidia.com/gpu`` and ``nodes`` at the plan's
peak for that pool and tier (whole nodes per period from allocations.csv, the most in any period), so
Karpenter cannot run past the plan. Objects are grouped per region: a Karpenter installation launches in
its cluster's region.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, cast

import numpy as np
import yaml

from models.errors import InputError
from models.naming import (
    LABEL_CAPACITY,
    SPOT_TAINT,
    TAG_PLAN,
    TAG_RUN,
    parse_offering,
    pool_name,
    safe_name,
)
from models.plan import Plan
from models.tiers import CapacityType, Term, Tier
from planner.outputs.desired import plan_id_of, run_name

__all__ = [
    "CLOUD",
    "FILES",
    "GPU_TAINT",
    "KARPENTER_API",
    "LABEL_POOL",
    "LABEL_RUN",
    "NODECLASS_API",
    "RESERVED_WEIGHT",
    "TOP_POOL_WEIGHT",
    "Fleet",
    "NodeClassSettings",
    "PoolTier",
    "Reservation",
    "build_fleet",
    "gang_reservations",
    "held_reservations",
    "pool_order_key",
    "pool_peaks",
    "reserved_fleet",
]

KARPENTER_API: Final = "karpenter.sh/v1"
NODECLASS_API: Final = "karpenter.k8s.aws/v1"
CLOUD: Final = "aws"
LABEL_CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
LABEL_INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
LABEL_REGION: Final = "topology.kubernetes.io/region"
LABEL_POOL: Final = "gpuplan.io/pool"
LABEL_RUN: Final = "gpuplan.io/run"
LABEL_PLAN: Final = "gpuplan.io/plan"
GPU_RESOURCE: Final = "nvidia.com/gpu"
MANAGED: Final = {"app.kubernetes.io/managed-by": "gpuplan"}
#: Reservations are paid whether used or not: tried before anything else.
RESERVED_WEIGHT: Final = 100
#: The weight of the first pool after the reservations; each next pool one less (never below 1).
TOP_POOL_WEIGHT: Final = 90
#: ``--gpu-taint``: the taint many GPU clusters put on GPU nodes to keep other pods off them. Off by default:
#: the Kueue export taints no GPU node and its workloads carry no such toleration.
GPU_TAINT: Final = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
#: AMI families (``amiSelectorTerms`` alias) with NVIDIA GPU variants of the EKS-optimized images.
_GPU_AMI_FAMILIES: Final = ("al2", "al2023", "bottlerocket")
_RESERVATION_ID: Final = re.compile(r"^cr-[0-9a-z]+$")
_ALIAS: Final = re.compile(r"^[a-zA-Z0-9]+@.+$")
_NODE_TOLERANCE: Final = 1e-6
#: The files of each region's directory, in the order ``kubectl apply -f`` reads them (node classes first).
FILES: Final = ("00-ec2nodeclasses.yaml", "10-nodepools.yaml")


class PoolTier(StrEnum):
    """A NodePool's tier, in the order Karpenter should try them."""

    RESERVED = "reserved"  # a capacity reservation: capacity-type reserved
    COMMITTED = "committed"  # on-demand nodes 1y/3y commitments cover
    ON_DEMAND = "on-demand"
    SPOT = "spot"


_TIER_OF_ROW: Final = {
    Tier.RESERVED_1Y: PoolTier.COMMITTED,
    Tier.RESERVED_3Y: PoolTier.COMMITTED,
    # a savings plan is a $/h discount over on-demand nodes of any pool it covers: they launch on demand
    Tier.SAVINGS_PLAN: PoolTier.ON_DEMAND,
    Tier.ON_DEMAND: PoolTier.ON_DEMAND,
    Tier.SPOT: PoolTier.SPOT,
}


@dataclass(frozen=True)
class NodeClassSettings:
    """What the EC2NodeClasses need from the cluster (``gpuplan karpenter`` flags).

    The defaults follow Karpenter's getting-started conventions: the node role
    ``KarpenterNodeRole-<cluster>`` and subnets and security groups tagged
    ``karpenter.sh/discovery: <cluster>`` (https://karpenter.sh/docs/getting-started/).
    """

    cluster: str = "gpuplan"
    role: str | None = None
    subnet_tags: Mapping[str, str] | None = None
    security_group_tags: Mapping[str, str] | None = None
    ami_alias: str = "al2023@latest"
    reservation_ids: Mapping[str, str] = field(default_factory=dict)
    gpu_taint: bool = False

    @property
    def node_role(self) -> str:
        return self.role if self.role is not None else f"KarpenterNodeRole-{self.cluster}"

    def discovery(self, tags: Mapping[str, str] | None) -> dict[str, str]:
        return dict(tags) if tags else {"karpenter.sh/discovery": self.cluster}

    def check(self) -> None:
        """InputError (naming the flag) for what the EC2NodeClass CRD or Karpenter would refuse."""
        if not self.node_role.strip():
            raise InputError(None, "--role", "must not be empty")
        if not self.cluster.strip():
            raise InputError(None, "--cluster", "must not be empty")
        if not _ALIAS.fullmatch(self.ami_alias):
            raise InputError(
                None, "--ami-alias", f"must be FAMILY@VERSION (al2023@latest), got {self.ami_alias!r}"
            )
        family = self.ami_alias.split("@", 1)[0]
        if family not in _GPU_AMI_FAMILIES:
            raise InputError(
                None,
                "--ami-alias",
                f"family {family!r} has no GPU image; one of {', '.join(_GPU_AMI_FAMILIES)}",
            )
        for flag, tags in (
            ("--subnet-tag", self.subnet_tags),
            ("--security-group-tag", self.security_group_tags),
        ):
            for key, value in (tags or {}).items():
                if not key or not value:
                    raise InputError(
                        None, flag, f"needs KEY=VALUE with both non-empty, got {key!r}={value!r}"
                    )
            if tags and len(tags) > 20:
                raise InputError(None, flag, f"at most 20 tags (the CRD's limit), got {len(tags)}")
        for name, rid in self.reservation_ids.items():
            if not _RESERVATION_ID.fullmatch(rid):
                raise InputError(
                    None, "--reservation-id", f"{name}: {rid!r} is not a capacity reservation id (cr-...)"
                )


@dataclass(frozen=True)
class Reservation:
    """A capacity reservation a reserved NodePool consumes.

    ``selector`` is its one ``capacityReservationSelectorTerms`` entry (``{"id": ...}`` or ``{"tags": ...}``).
    ``kind`` is ``odcr`` or ``capacity-block`` (a block the plan holds a gang in, selected the same way:
    designs/capacity-block-support.md). A gang's reservation has its ``run`` (its nodes are tainted
    for that run alone) and ``placement_group`` (the cluster placement group the reservation lives in).
    """

    name: str
    offering: str
    nodes: int
    gpus_per_node: int
    selector: Mapping[str, Any]
    why: str
    kind: str = "odcr"
    run: str | None = None
    placement_group: str | None = None
    start: datetime | None = None
    end: datetime | None = None

    @property
    def region(self) -> str:
        return parse_offering(self.offering)[1]


@dataclass
class Fleet:
    """Per region, the EC2NodeClasses and NodePools; what the README says; warnings for stderr."""

    regions: dict[str, dict[str, list[dict[str, Any]]]]
    readme: str
    warnings: list[str] = field(default_factory=list)

    @property
    def node_pools(self) -> list[dict[str, Any]]:
        return [p for files in self.regions.values() for p in files.get(FILES[1], [])]

    @property
    def node_classes(self) -> list[dict[str, Any]]:
        return [c for files in self.regions.values() for c in files.get(FILES[0], [])]

    def write(self, directory: Path) -> list[Path]:
        """``<region>/00-ec2nodeclasses.yaml``, ``<region>/10-nodepools.yaml`` and ``README.md``; the same
        plan always gives the same bytes."""
        written = []
        for region, files in sorted(self.regions.items()):
            (directory / region).mkdir()
            for name in FILES:
                header = (
                    f"# written by gpuplan karpenter from a plan, for the cluster in {region}; "
                    "apply with: kubectl apply -f <this directory>\n"
                )
                text = header + yaml.safe_dump_all(files.get(name, []), sort_keys=True, explicit_start=True)
                path = directory / region / name
                path.write_text(text, encoding="utf-8")
                written.append(path)
        (directory / "README.md").write_text(self.readme, encoding="utf-8")
        return written


@dataclass(frozen=True)
class _Pool:
    """An on-demand, committed or spot NodePool of one offering."""

    name: str
    offering: str
    tier: PoolTier
    nodes: int
    gpus_per_node: int
    usd_per_gpu_hour: float

    @property
    def region(self) -> str:
        return parse_offering(self.offering)[1]


def _object(kind: str, name: str, spec: dict[str, Any], plan_id: str, **labels: str) -> dict[str, Any]:
    api = KARPENTER_API if kind == "NodePool" else NODECLASS_API
    metadata = {"name": name, "labels": {**MANAGED, LABEL_PLAN: plan_id, **labels}}
    return {"apiVersion": api, "kind": kind, "metadata": metadata, "spec": spec}


def _node_class(
    name: str,
    settings: NodeClassSettings,
    plan_id: str,
    *,
    reservation: Mapping[str, Any] | None = None,
    placement_group: str | None = None,
) -> dict[str, Any]:
    """An EC2NodeClass: the cluster's role, subnets, security groups and AMI; a reservation's selector term
    (https://karpenter.sh/docs/concepts/nodeclasses/#speccapacityreservationselectorterms) and a gang's
    cluster placement group (``placementGroupSelector``: Karpenter resolves a group that exists, it does not
    make one; ``gpuplan provision`` or the Terraform root makes it)."""
    spec: dict[str, Any] = {
        "role": settings.node_role,
        "amiSelectorTerms": [{"alias": settings.ami_alias}],
        "subnetSelectorTerms": [{"tags": settings.discovery(settings.subnet_tags)}],
        "securityGroupSelectorTerms": [{"tags": settings.discovery(settings.security_group_tags)}],
    }
    if reservation is not None:
        spec["capacityReservationSelectorTerms"] = [dict(reservation)]
    if placement_group is not None:
        spec["placementGroupSelector"] = {"name": placement_group}
    return _object("EC2NodeClass", name, spec, plan_id)


def _requirements(offering: str, capacity: str) -> list[dict[str, Any]]:
    _cloud, region, instance_type = parse_offering(offering)
    return [
        {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity]},
        {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [instance_type]},
        {"key": LABEL_REGION, "operator": "In", "values": [region]},
    ]


def _node_pool(
    name: str,
    node_class: str,
    plan_id: str,
    *,
    offering: str,
    capacity: str,
    node_label: str,
    weight: int,
    nodes: int,
    gpus_per_node: int,
    taints: list[dict[str, str]],
    disruption: dict[str, Any],
    run: str | None = None,
    expire_after: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A NodePool of one offering on one capacity type (https://karpenter.sh/docs/concepts/nodepools/)."""
    labels = {LABEL_CAPACITY: node_label, LABEL_POOL: name}
    if run is not None:
        labels[LABEL_RUN] = run
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
        "requirements": _requirements(offering, capacity),
    }
    if taints:
        template_spec["taints"] = taints
    if expire_after is not None:
        template_spec["expireAfter"] = expire_after
    spec = {
        "weight": weight,
        "limits": {GPU_RESOURCE: nodes * gpus_per_node, "nodes": nodes},
        "disruption": disruption,
        "template": {"metadata": {"labels": labels}, "spec": template_spec},
    }
    document = _object("NodePool", name, spec, plan_id)
    if annotations:
        document["metadata"]["annotations"] = dict(annotations)
    return document


def _taints(settings: NodeClassSettings, *, spot: bool, run: str | None = None) -> list[dict[str, str]]:
    taints = []
    if spot:
        taints.append(dict(SPOT_TAINT))
    if run is not None:  # a gang's nodes are its own: nothing else may take its reservation or group
        taints.append({"key": LABEL_RUN, "value": run, "effect": "NoSchedule"})
    if settings.gpu_taint:
        taints.append(dict(GPU_TAINT))
    return taints


#: Paid capacity is not consolidated away for being underused, only removed when empty.
_KEEP_PAID: Final = {
    "consolidationPolicy": "WhenEmpty",
    "consolidateAfter": "10m",
    "budgets": [{"nodes": "10%"}],
}
_CONSOLIDATE: Final = {
    "consolidationPolicy": "WhenEmptyOrUnderutilized",
    "consolidateAfter": "10m",
    "budgets": [{"nodes": "10%"}],
}
#: A gang's nodes leave only when empty (its run ended): no drift or consolidation mid-run.
_GANG: Final = {
    "consolidationPolicy": "WhenEmpty",
    "consolidateAfter": "10m",
    "budgets": [
        {"nodes": "0", "reasons": ["Drifted", "Underutilized"]},
        {"nodes": "100%", "reasons": ["Empty"]},
    ],
}


def held_reservations(
    plan: Plan, settings: NodeClassSettings, source: Path | None = None
) -> list[Reservation]:
    """The AWS capacity reservations the scenario holds (plan.json commitments of term ``reservation``).

    gpuplan did not make them, so they carry none of its tags: each is selected by its id when
    ``--reservation-id NAME=cr-...`` gives one (or its name is an id), else by the tag ``Name=<name>``, the
    tag by which ``gpuplan provision`` finds a reservation too."""
    document = plan.document
    names = {c.name for c in document.commitments if c.term == Term.RESERVATION}
    unknown = sorted(set(settings.reservation_ids) - names)
    if unknown:
        known = ", ".join(sorted(names)) or "none"
        raise InputError(
            source,
            "--reservation-id",
            f"{', '.join(unknown)}: no such held reservation (the plan's: {known})",
        )
    result = []
    for c in document.commitments:
        if c.term != Term.RESERVATION or parse_offering(c.offering)[0] != CLOUD:
            continue
        rid = settings.reservation_ids.get(c.name) or (c.name if _RESERVATION_ID.fullmatch(c.name) else None)
        selector: dict[str, Any] = {"id": rid} if rid else {"tags": {"Name": c.name}}
        end = f" to {c.end:%Y-%m-%d %H:%M}Z" if c.end else ""
        result.append(
            Reservation(
                name=safe_name(f"held-{c.name}"),
                offering=c.offering,
                nodes=c.nodes,
                gpus_per_node=document.offerings[c.offering].gpus_per_node,
                selector=selector,
                why=f"held capacity reservation {c.name}: {c.nodes} x {parse_offering(c.offering)[2]}{end}",
                start=c.start,
                end=c.end,
            )
        )
    return result


def _gangs(plan: Plan) -> list[Any]:
    """The plan's multi-node AWS training runs: each gets its own NodePool (and NodeClass with its group)."""
    return [t for t in plan.document.training if t.nodes > 1 and parse_offering(t.offering)[0] == CLOUD]


def gang_reservations(plan: Plan) -> list[Reservation]:
    """The reservations ``gpuplan provision`` (and the Terraform roots) make for non-spot multi-node gangs
    on AWS, and the Capacity Blocks it buys for the gangs the plan holds in one (any size), selected by the
    tags they carry: ``gpuplan-plan=<plan id>`` and ``gpuplan-run=<run>``. A block places its instances
    together itself, so its NodePool names no placement group."""
    plan_id = plan_id_of(plan.document)
    blocks = [
        t
        for t in plan.document.training
        if t.tier == Tier.CAPACITY_BLOCK and t.nodes < 2 and parse_offering(t.offering)[0] == CLOUD
    ]
    result = []
    for t in [*_gangs(plan), *blocks]:
        if t.tier == Tier.SPOT:
            continue
        run = run_name(t.job, t.run)
        block = t.tier == Tier.CAPACITY_BLOCK
        when = f"{t.nodes} nodes {t.start:%Y-%m-%d %H:%M}Z to {t.end:%Y-%m-%d %H:%M}Z"
        result.append(
            Reservation(
                # an ODCR as desired.reservation_name names it; a block by its run
                name=safe_name(f"block-{run}" if block else f"res-{run}"),
                offering=t.offering,
                nodes=t.nodes,
                gpus_per_node=plan.document.offerings[t.offering].gpus_per_node,
                selector={"tags": {TAG_PLAN: plan_id, TAG_RUN: run}},
                why=f"{t.job} run {t.run}: {when}"
                + (f" in a Capacity Block of {t.block_hours} h" if block else ""),
                kind="capacity-block" if block else "odcr",
                run=run,
                placement_group=None if block else safe_name(t.placement_group),
                start=t.start,
                end=t.end,
            )
        )
    return result


def reserved_fleet(
    reservations: Iterable[Reservation], settings: NodeClassSettings, plan_id: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Per reservation, an EC2NodeClass selecting it alone and a NodePool of capacity type ``reserved`` at
    :data:`RESERVED_WEIGHT`, limited to its nodes. Capacity Blocks, once planned, come in here as
    reservations of kind ``capacity-block`` (Karpenter models them as reservations too)."""
    result = []
    for r in sorted(reservations, key=lambda r: r.name):
        node_class = _node_class(
            r.name, settings, plan_id, reservation=r.selector, placement_group=r.placement_group
        )
        annotations = {"gpuplan.io/why": r.why, "gpuplan.io/reservation-kind": r.kind}
        pool = _node_pool(
            r.name,
            r.name,
            plan_id,
            offering=r.offering,
            capacity="reserved",
            node_label="reserved",
            weight=RESERVED_WEIGHT,
            nodes=r.nodes,
            gpus_per_node=r.gpus_per_node,
            taints=_taints(settings, spot=False, run=r.run),
            disruption=_GANG if r.run else _KEEP_PAID,
            run=r.run,
            expire_after="Never" if r.run else None,
            annotations=annotations,
        )
        result.append((node_class, pool))
    return result


def _spot_gangs(
    plan: Plan, settings: NodeClassSettings, plan_id: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Spot multi-node gangs: no reservation (an ODCR is on demand), their own group and spot NodePool."""
    result = []
    for t in _gangs(plan):
        if t.tier != Tier.SPOT:
            continue
        run = run_name(t.job, t.run)
        name = safe_name(f"gang-{run}")
        node_class = _node_class(name, settings, plan_id, placement_group=safe_name(t.placement_group))
        pool = _node_pool(
            name,
            name,
            plan_id,
            offering=t.offering,
            capacity="spot",
            node_label="spot",
            weight=RESERVED_WEIGHT,
            nodes=t.nodes,
            gpus_per_node=plan.document.offerings[t.offering].gpus_per_node,
            taints=_taints(settings, spot=True, run=run),
            disruption=_GANG,
            run=run,
            expire_after="Never",
            annotations={
                "gpuplan.io/why": f"{t.job} run {t.run} on spot: {t.nodes} nodes {t.start:%Y-%m-%d %H:%M}Z"
            },
        )
        result.append((node_class, pool))
    return result


def pool_peaks(plan: Plan) -> dict[tuple[str, PoolTier], int]:
    """(offering, tier) -> the most whole nodes the plan runs on it in any period, from allocations.csv:
    AWS rows on 1y/3y commitments (committed), on demand and spot. Held reservations' rows and the rows of
    gangs with their own NodePool are theirs, not the pools'."""
    rows = plan.allocations
    aws = np.array([parse_offering(o)[0] == CLOUD for o in rows["offering"]], dtype=bool)
    tiers = rows["tier"].to_numpy()
    keep = aws & np.isin(tiers, [str(t) for t in _TIER_OF_ROW])
    gang_rows = np.zeros(len(rows), dtype=bool)
    kinds, jobs, offerings, periods = (rows[c].to_numpy() for c in ("kind", "workload", "offering", "period"))
    for t in _gangs(plan):
        gang_rows |= (
            (kinds == "training")
            & (jobs == t.job)
            & (offerings == t.offering)
            & (periods >= t.start_period)
            & (periods < t.start_period + t.periods)
        )
    chosen = rows[keep & ~gang_rows]
    result: dict[tuple[str, PoolTier], int] = {}
    if chosen.empty:
        return result
    tier_of = chosen["tier"].map(lambda t: str(_TIER_OF_ROW[Tier(t)]))
    summed = chosen.assign(pool_tier=tier_of).groupby(["offering", "pool_tier", "period"])["nodes"].sum()
    for key, value in summed.groupby(level=[0, 1]).max().items():
        offering, tier = cast("tuple[str, str]", key)  # a two-level index
        nodes = math.ceil(float(value) - _NODE_TOLERANCE)
        if nodes > 0:
            result[(str(offering), PoolTier(str(tier)))] = nodes
    return result


def _pools(plan: Plan) -> list[_Pool]:
    """The on-demand, committed and spot pools with their peaks and the plan's price of a GPU-hour on them:
    committed at the commitments' cost in the horizon over their GPU-hours (as the Kueue export prices its
    reserved flavors), on demand and spot at the offering's rate the plan was made with."""
    document = plan.document
    periods, hours = document.horizon.periods, document.horizon.period_hours
    cost: dict[str, float] = defaultdict(float)
    gpu_hours: dict[str, float] = defaultdict(float)
    for c in document.commitments:
        if c.term in (Term.ONE_YEAR, Term.THREE_YEARS):
            end = periods if c.end_period is None else c.end_period
            cost[c.offering] += c.cost_in_horizon_usd
            gpu_hours[c.offering] += (
                c.nodes * document.offerings[c.offering].gpus_per_node * max(0, end - c.start_period) * hours
            )
    result = []
    for (offering, tier), nodes in sorted(pool_peaks(plan).items()):
        record = document.offerings[offering]
        gpus = record.gpus_per_node
        if tier is PoolTier.COMMITTED:
            price = cost[offering] / gpu_hours[offering] if gpu_hours[offering] > 0 else 0.0
            name = safe_name(f"{offering}-committed")
        elif tier is PoolTier.SPOT:
            price = (record.spot_usd_h or 0.0) / gpus
            name = pool_name(offering, CapacityType.SPOT)
        else:
            price = (record.on_demand_usd_h or 0.0) / gpus
            name = pool_name(offering, CapacityType.ON_DEMAND)
        result.append(_Pool(name, offering, tier, nodes, gpus, price))
    return result


def pool_order_key(pool: _Pool) -> tuple[bool, float, str]:
    """Committed pools first (paid whether used or not), then cheapest per GPU-hour as the plan prices it."""
    return (pool.tier is not PoolTier.COMMITTED, pool.usd_per_gpu_hour, pool.name)


def build_fleet(plan: Plan, settings: NodeClassSettings, *, source: Path | None = None) -> Fleet:
    """Every EC2NodeClass and NodePool for ``plan``'s AWS capacity; InputError when it has none or a flag is
    wrong."""
    settings.check()
    document = plan.document
    plan_id = plan_id_of(document)
    warnings: list[str] = []
    held = held_reservations(plan, settings, source)
    for r in held:
        if "tags" in r.selector:
            warnings.append(
                f"{r.why}: selected by its tag Name={r.selector['tags']['Name']}; give --reservation-id "
                f"NAME=cr-... to select it by id"
            )
    reserved = reserved_fleet([*held, *gang_reservations(plan)], settings, plan_id)
    reserved += _spot_gangs(plan, settings, plan_id)
    pools = sorted(_pools(plan), key=pool_order_key)
    if not reserved and not pools:
        clouds = sorted({parse_offering(o)[0] for o in document.offerings} - {CLOUD})
        raise InputError(
            source,
            None,
            f"the plan holds no AWS capacity (its clouds: {', '.join(clouds) or 'none'}): "
            "Karpenter has nothing to launch",
        )
    regions: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: {name: [] for name in FILES})
    for node_class, pool in reserved:
        region = pool["spec"]["template"]["spec"]["requirements"][2]["values"][0]
        regions[region][FILES[0]].append(node_class)
        regions[region][FILES[1]].append(pool)
    for region in sorted({p.region for p in pools}):
        regions[region][FILES[0]].append(_node_class(safe_name(f"gpuplan-{region}"), settings, plan_id))
    for rank, p in enumerate(pools):
        weight = max(1, TOP_POOL_WEIGHT - rank)
        spot = p.tier is PoolTier.SPOT
        regions[p.region][FILES[1]].append(
            _node_pool(
                p.name,
                safe_name(f"gpuplan-{p.region}"),
                plan_id,
                offering=p.offering,
                capacity="spot" if spot else "on-demand",
                node_label="reserved" if p.tier is PoolTier.COMMITTED else p.tier.value,
                weight=weight,
                nodes=p.nodes,
                gpus_per_node=p.gpus_per_node,
                taints=_taints(settings, spot=spot),
                disruption=_KEEP_PAID if p.tier is PoolTier.COMMITTED else _CONSOLIDATE,
                annotations={"gpuplan.io/usd-per-gpu-hour": f"{p.usd_per_gpu_hour:.4f}"},
            )
        )
    if len(pools) >= TOP_POOL_WEIGHT:
        warnings.append(f"{len(pools)} pools: the last {len(pools) - TOP_POOL_WEIGHT + 1} share weight 1")
    readme = _readme(plan, settings, regions, held)
    return Fleet(dict(sorted(regions.items())), readme, warnings)


def _readme(
    plan: Plan,
    settings: NodeClassSettings,
    regions: Mapping[str, Mapping[str, list[dict[str, Any]]]],
    held: list[Reservation],
) -> str:
    """For people: what to apply where, each NodePool's tier, weight and limits, and what workloads need."""
    lines = [
        f"# Karpenter NodePools for plan `{plan.document.scenario}`",
        "",
        "One directory per AWS region: apply each to the cluster whose Karpenter runs there",
        "(`kubectl apply -f <region>/`; node classes first). Karpenter v1 with the `ReservedCapacity`",
        "feature gate on (reserved capacity type); the node role, subnets and security groups must exist:",
        f"role `{settings.node_role}`, subnets tagged "
        + ", ".join(f"`{k}={v}`" for k, v in settings.discovery(settings.subnet_tags).items())
        + ", security groups tagged "
        + ", ".join(f"`{k}={v}`" for k, v in settings.discovery(settings.security_group_tags).items())
        + f", AMI `{settings.ami_alias}`.",
        "",
        "| region | NodePool | capacity type | node label | weight | limits | taints |",
        "|---|---|---|---|---|---|---|",
    ]
    for region, files in regions.items():
        for pool in sorted(files[FILES[1]], key=lambda p: (-p["spec"]["weight"], p["metadata"]["name"])):
            spec = pool["spec"]
            template = spec["template"]["spec"]
            capacity = template["requirements"][0]["values"][0]
            label = spec["template"]["metadata"]["labels"][LABEL_CAPACITY]
            limits = ", ".join(f"{k} {v}" for k, v in sorted(spec["limits"].items()))
            taints = ", ".join(
                f"`{t['key']}={t.get('value', '')}:{t['effect']}`" for t in template.get("taints", [])
            )
            cells = (region, pool["metadata"]["name"], capacity, label, str(spec["weight"]), limits, taints)
            lines.append(f"| {' | '.join(cells)} |")
    lines += [
        "",
        f"Nodes carry `{LABEL_CAPACITY}` (reserved, on-demand, spot), the label the Kueue export's flavors",
        "(`gpuplan k8s`) select, and spot nodes its taint, so apply both: Kueue admits, Karpenter launches.",
        f"A training gang's nodes are tainted `{LABEL_RUN}=<run>:NoSchedule`; its pods tolerate that taint,",
        "request `vpc.amazonaws.com/efa` (the EFA device plugin installed: Karpenter then gives the node its",
        "EFA interfaces) and launch into the gang's cluster placement group and reservation, which",
        "`gpuplan provision` or the Terraform root makes ahead of the run.",
    ]
    if held:
        lines += ["", "Held capacity reservations and how they are selected:", ""]
        lines += [f"- {r.why}: `{dict(r.selector)}`" for r in held]
    lines.append("")
    return "\n".join(lines)
