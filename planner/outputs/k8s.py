"""A plan as Kubernetes tenancy: Kueue quotas (``kueue.x-k8s.io/v1beta2``, the storage version of the CRDs in
``../shared/data/kueue-crds/``) and one Namespace and ServiceAccount per team. Pure functions of the plan
(``plan.json`` echoes the scenario it was made from, so the teams and workloads come from there).

What is emitted and why:

- **ResourceFlavors**: one per (GPU product, capacity type) the plan holds, selecting nodes by
  ``nvidia.com/gpu.product`` (the label GPU Feature Discovery sets: NVIDIA/k8s-device-plugin
  ``docs/gpu-feature-discovery/README.md``, "Generated Labels") and ``gpuplan.io/capacity-type``
  (gpuplan's own label: ``reserved`` for nodes covered by a commitment or capacity reservation,
  ``owned`` for colocation servers, ``on-demand``, ``spot``); and one per GPU product with MIG slices (and
  spot or not) for the MIG resources. Nodes take their slicing from ``nvidia.com/mig.config`` (the GPU
  Operator's mig-manager label, FACTS 4.3), set to mig-config.yaml's names as plan.json's MIG schedule
  says. Spot flavors carry ``nodeTaints`` (the taint spot nodes get) and no ``tolerations``: the CRD
  says a flavor's own matching tolerations make Kueue ignore its taints at admission, which would admit
  latency-critical services to spot; workloads that may run on spot carry :data:`SPOT_TOLERATION`.
- **ClusterQueues**: one per team, all in cohort :data:`COHORT`. The team's ``nominalQuota`` of
  ``nvidia.com/gpu`` adds up to its ``guaranteed_gpus``, placed on the committed flavors it can use (the
  plan backs guarantees with committed GPUs), ``borrowingLimit`` = ``burst_gpus - guaranteed_gpus`` on
  each flavor (none without a burst cap), ``reclaimWithinCohort`` (default ``Any``: a guarantee is taken
  back from borrowers whatever their priority), ``withinClusterQueue: LowerPriority``, and a borrowing
  workload may preempt borrowers at or below training priority in other queues. Kueue counts a cohort's
  capacity as the sum of its queues' nominal quotas, so the GPUs the plan holds beyond the guarantees
  (on demand, spot, MIG slices, unguaranteed commitments) are the nominal quota of :data:`SHARED_QUEUE`, a
  queue no namespace may submit to (no ``namespaceSelector``), which only lends.
- Flavors are listed cheapest first as the plan prices them (:func:`flavor_order_key`).
- **WorkloadPriorityClasses** (:data:`PRIORITY_CLASSES`), **LocalQueues** (one per team namespace), a
  **ConfigMap** with the plan's mig-parted config for the GPU Operator's mig-manager, and per team a
  **Namespace** and **ServiceAccount**.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, cast

import numpy as np
import yaml
from pydantic import ValidationError

from models.catalog import gpu_model_matches
from models.errors import InputError
from models.naming import LABEL_CAPACITY, SPOT_TAINT, safe_name
from models.plan import OfferingRecord, Plan
from models.scenario import Scenario, Team
from models.tiers import Tier

__all__ = [
    "COHORT",
    "FILES",
    "GPU_RESOURCE",
    "KUEUE_API",
    "LABEL_CAPACITY",
    "LABEL_GPU_PRODUCT",
    "LABEL_MIG_CONFIG",
    "PRIORITY_CLASSES",
    "RECLAIM_POLICIES",
    "SHARED_QUEUE",
    "SPOT_TOLERATION",
    "Flavor",
    "Manifests",
    "NodeCapacity",
    "build_manifests",
    "flavor_order_key",
    "gpu_product",
    "priority_class",
]

KUEUE_API: Final = "kueue.x-k8s.io/v1beta2"
LABEL_GPU_PRODUCT: Final = "nvidia.com/gpu.product"
LABEL_MIG_CONFIG: Final = "nvidia.com/mig.config"
LABEL_TEAM: Final = "gpuplan.io/team"
LABEL_QUEUE: Final = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY: Final = "kueue.x-k8s.io/priority-class"
GPU_RESOURCE: Final = "nvidia.com/gpu"
COHORT: Final = "gpuplan"
SHARED_QUEUE: Final = "gpuplan-shared"
SERVICE_ACCOUNT: Final = "workloads"
MIG_CONFIGMAP: Final = "gpuplan-mig-parted-config"
MANAGED: Final = {"app.kubernetes.io/managed-by": "gpuplan"}
#: The toleration a workload that may run on spot adds (the taint is ``models.naming.SPOT_TAINT``).
SPOT_TOLERATION: Final = {**SPOT_TAINT, "operator": "Equal"}
#: ``reclaimWithinCohort`` values a team queue may take (the CRD's enum less ``Never``: no guarantee then).
RECLAIM_POLICIES: Final = ("Any", "LowerPriority")
#: Namespaces a team must not be given: Kubernetes' own.
_RESERVED_NAMESPACES: Final = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
_EPS: Final = 1e-6

#: name -> (value, description). Production inference above training above batch: a borrowing workload
#: may preempt others' borrowed work at or below training (``borrowWithinCohort.maxPriorityThreshold``).
PRIORITY_CLASSES: Final[dict[str, tuple[int, str]]] = {
    "gpuplan-production-inference": (1000, "latency-critical inference of a production team"),
    "gpuplan-inference": (800, "other latency-critical inference"),
    "gpuplan-training": (500, "training that is not preemptible"),
    "gpuplan-batch": (100, "batch: inference that tolerates interruption, preemptible training, batch teams"),
}
_TRAINING_PRIORITY: Final = PRIORITY_CLASSES["gpuplan-training"][0]

#: The files written, in the order ``kubectl apply -f DIR`` reads them (by name): namespaces first.
FILES: Final = (
    "00-namespaces.yaml",
    "01-service-accounts.yaml",
    "10-resource-flavors.yaml",
    "11-workload-priority-classes.yaml",
    "12-cluster-queues.yaml",
    "13-local-queues.yaml",
    "20-mig-parted-config.yaml",
)

#: ``nvidia.com/gpu.product`` per catalog GPU model: GFD's label value is NVML's device name with spaces as
#: ``-`` (GFD README, "Generated Labels"; e.g. ``NVIDIA-A100-SXM4-40GB``). The names are NVML's for the SXM
#: parts the catalog's 8-GPU instances carry; a site whose nodes report other names edits the flavors.
_PRODUCTS: Final = {
    "A100-40GB": "NVIDIA-A100-SXM4-40GB",
    "A100-80GB": "NVIDIA-A100-SXM4-80GB",
    "H100": "NVIDIA-H100-80GB-HBM3",
    "H100-NVL": "NVIDIA-H100-NVL",
    "H200": "NVIDIA-H200",
    "B200": "NVIDIA-B200",
    "L40S": "NVIDIA-L40S",
    "L4": "NVIDIA-L4",
    "A10G": "NVIDIA-A10G",
}
#: Instance types whose GPUs are the PCIe part: Azure's NC A100 v4 series carry A100 80GB PCIe.
_PCIE_PRODUCTS: Final = {("A100-80GB", "Standard_NC"): "NVIDIA-A100-80GB-PCIe"}


class NodeCapacity(StrEnum):
    """The value of :data:`LABEL_CAPACITY` on a node: how the node is paid for."""

    RESERVED = "reserved"
    OWNED = "owned"
    ON_DEMAND = "on-demand"
    SPOT = "spot"

    @property
    def committed(self) -> bool:
        """Paid whether used or not: using it costs nothing more."""
        return self in (NodeCapacity.RESERVED, NodeCapacity.OWNED)


_TIER_CAPACITY: Final = {
    Tier.RESERVED_1Y: NodeCapacity.RESERVED,
    Tier.RESERVED_3Y: NodeCapacity.RESERVED,
    Tier.CAPACITY_RESERVATION: NodeCapacity.RESERVED,
    Tier.CAPACITY_BLOCK: NodeCapacity.RESERVED,  # an AWS Capacity Block: reserved, paid upfront (issue 38)
    Tier.FLEX_START: NodeCapacity.ON_DEMAND,  # GCP flex-start VMs: billed as they run, nothing reserved
    Tier.OWNED: NodeCapacity.OWNED,
    Tier.SAVINGS_PLAN: NodeCapacity.ON_DEMAND,  # a $/h commitment discounts on-demand nodes, holds none
    Tier.ON_DEMAND: NodeCapacity.ON_DEMAND,
    Tier.SPOT: NodeCapacity.SPOT,
}


def gpu_product(offering: OfferingRecord) -> str:
    """The ``nvidia.com/gpu.product`` value the offering's nodes carry (see :data:`_PRODUCTS`)."""
    for (model, prefix), product in _PCIE_PRODUCTS.items():
        if offering.gpu_model == model and offering.instance_type.startswith(prefix):
            return product
    return _PRODUCTS.get(offering.gpu_model, "NVIDIA-" + offering.gpu_model)


@dataclass(frozen=True)
class Flavor:
    """A ResourceFlavor and what the plan holds of it.

    ``usd_per_gpu_hour`` is the plan's effective price of one GPU-hour on it: on committed capacity the
    commitments' cost in the horizon over their GPU-hours in it; on demand and spot the rows' cost over
    their GPU-hours. ``capacity`` is per resource: the most the plan holds in any period.
    """

    name: str
    product: str
    gpu_model: str
    capacity_type: NodeCapacity
    usd_per_gpu_hour: float
    capacity: dict[str, int]
    mig_configs: tuple[str, ...] = ()
    spot: bool = False

    @property
    def labels(self) -> dict[str, str]:
        labels = {LABEL_GPU_PRODUCT: self.product}
        if not self.mig_configs or self.spot:  # MIG slices off spot: on reserved and on-demand nodes alike
            labels[LABEL_CAPACITY] = self.capacity_type.value
        return labels

    def manifest(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"nodeLabels": self.labels}
        if self.spot:
            spec["nodeTaints"] = [dict(SPOT_TAINT)]
        annotations = {"gpuplan.io/usd-per-gpu-hour": f"{self.usd_per_gpu_hour:.6f}"}
        if self.mig_configs:
            annotations["gpuplan.io/mig-configs"] = ",".join(self.mig_configs)
        if self.spot:
            annotations["gpuplan.io/workload-toleration"] = (
                f"{SPOT_TOLERATION['key']}={SPOT_TOLERATION['value']}:{SPOT_TOLERATION['effect']}"
            )
        return _object("ResourceFlavor", self.name, spec, annotations=annotations)


def flavor_order_key(flavor: Flavor) -> tuple[int, float, str]:
    """Cheapest first, as the plan prices the next GPU-hour: committed capacity (reserved, owned) is paid
    whether used or not, so it comes first (among it, by its effective rate), then on demand and spot by
    their effective $/GPU-hour; the name breaks ties so the order is stable."""
    return (0 if flavor.capacity_type.committed else 1, round(flavor.usd_per_gpu_hour, 9), flavor.name)


def priority_class(kind: str, team: Team, *, latency_critical: bool = True, preemptible: bool = False) -> str:
    """The WorkloadPriorityClass of a workload: production inference > inference > training > batch."""
    if kind == "inference":
        if not latency_critical:
            return "gpuplan-batch"
        return "gpuplan-production-inference" if team.priority == "production" else "gpuplan-inference"
    if preemptible or team.priority == "batch":
        return "gpuplan-batch"
    return "gpuplan-training"


@dataclass
class Manifests:
    """The documents of each file of :data:`FILES`, a README for people, and warnings to print."""

    files: dict[str, list[dict[str, Any]]]
    readme: str
    warnings: list[str] = field(default_factory=list)

    def write(self, directory: Path) -> list[Path]:
        """Write every file (the same plan always gives the same bytes); the paths written."""
        written = []
        for name in FILES:
            documents = self.files.get(name, [])
            if not documents:
                continue
            header = "# written by gpuplan k8s from a plan; apply with: kubectl apply -f <this directory>\n"
            text = header + yaml.safe_dump_all(documents, sort_keys=True, explicit_start=True)
            path = directory / name
            path.write_text(text, encoding="utf-8")
            written.append(path)
        (directory / "README.md").write_text(self.readme, encoding="utf-8")
        return written


def _object(
    kind: str,
    name: str,
    spec: dict[str, Any] | None = None,
    *,
    api: str = KUEUE_API,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    **top: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {**MANAGED, **(labels or {})}}
    if namespace is not None:
        metadata["namespace"] = namespace
    if annotations:
        metadata["annotations"] = dict(annotations)
    document: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": metadata}
    if spec is not None:
        document["spec"] = spec
    document.update(top)
    return document


def _scenario(plan: Plan, source: Path | None) -> Scenario:
    """The scenario the plan echoes (plan.json ``inputs``), validated as a scenario file is."""
    data = plan.document.inputs.model_dump(mode="json")
    data.pop("max_spot_share", None)  # the echo's own summary field, not a scenario field
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "inputs." + ".".join(str(p) for p in first["loc"])
        raise InputError(
            source, where, f"the plan's scenario echo is not a scenario: {first['msg']}"
        ) from None


def _whole_flavors(plan: Plan) -> list[Flavor]:
    """One flavor per (GPU product, capacity type) the plan's rows or commitments hold."""
    document = plan.document
    hours = document.horizon.period_hours
    periods = document.horizon.periods
    offerings = document.offerings

    def key(offering: str, capacity: NodeCapacity) -> tuple[str, NodeCapacity]:
        return gpu_product(offerings[offering]), capacity

    models: dict[tuple[str, NodeCapacity], set[str]] = defaultdict(set)
    peak: dict[tuple[str, NodeCapacity], np.ndarray] = defaultdict(lambda: np.zeros(periods))
    cost: dict[tuple[str, NodeCapacity], float] = defaultdict(float)
    gpu_hours: dict[tuple[str, NodeCapacity], float] = defaultdict(float)
    for commitment in document.commitments:
        record = offerings[commitment.offering]
        flavor = key(commitment.offering, _TIER_CAPACITY[commitment.term.tier])
        models[flavor].add(record.gpu_model)
        end = periods if commitment.end_period is None else commitment.end_period
        gpus = commitment.nodes * record.gpus_per_node
        peak[flavor][commitment.start_period : end] += gpus
        cost[flavor] += commitment.cost_in_horizon_usd
        gpu_hours[flavor] += gpus * max(0, end - commitment.start_period) * hours
    rows = plan.allocations
    # a savings plan's rows are on-demand nodes it pays for (tier savings_plan, cost 0 in the row): with the
    # on-demand rows of their period they are one pool of whole nodes, priced at the plan's rate
    sp_rate = {(sp.name, o): rate for sp in document.savings_plans for o, rate in sp.rates.items()}
    for tiers in ((Tier.ON_DEMAND, Tier.SAVINGS_PLAN), (Tier.SPOT,)):
        capacity = _TIER_CAPACITY[tiers[0]]
        chosen = rows[rows["tier"].isin(list(tiers)).to_numpy()]
        if chosen.empty:
            continue
        nodes = chosen.groupby(["offering", "period"])["nodes"].sum()
        for index, value in nodes.items():
            offering, period = cast("tuple[Any, Any]", index)
            flavor = key(str(offering), capacity)
            whole = math.ceil(float(value) - _EPS)
            peak[flavor][int(period)] += whole * offerings[str(offering)].gpus_per_node
        for offering, part in chosen.groupby("offering"):
            flavor = key(str(offering), capacity)
            models[flavor].add(offerings[str(offering)].gpu_model)
            cost[flavor] += float(part["cost_usd"].sum())
            gpu_hours[flavor] += float(part["gpus"].sum()) * hours
            covered = part[part["tier"] == Tier.SAVINGS_PLAN]
            for name, nodes_on in covered.groupby("commitment")["nodes"].sum().items():
                cost[flavor] += float(nodes_on) * hours * sp_rate.get((str(name), str(offering)), 0.0)
    for offering, row_tier in rows[["offering", "tier"]].drop_duplicates().itertuples(index=False):
        capacity = _TIER_CAPACITY[Tier(str(row_tier))]  # committed rows: the flavor of held capacity
        if capacity.committed:
            models[key(str(offering), capacity)].add(offerings[str(offering)].gpu_model)
    result = []
    for flavor_key in sorted(models, key=lambda k: (k[0], k[1].value)):
        product, capacity = flavor_key
        top = round(float(peak[flavor_key].max())) if flavor_key in peak else 0
        price = cost[flavor_key] / gpu_hours[flavor_key] if gpu_hours[flavor_key] > 0 else 0.0
        result.append(
            Flavor(
                name=safe_name(f"{product}-{capacity.value}", limit=253),
                product=product,
                gpu_model=sorted(models[flavor_key])[0],
                capacity_type=capacity,
                usd_per_gpu_hour=price,
                capacity={GPU_RESOURCE: top},
                spot=capacity is NodeCapacity.SPOT,
            )
        )
    return result


def mig_resource(profile: str) -> str:
    """The extended resource of a MIG profile under the device plugin's mixed strategy."""
    return f"nvidia.com/mig-{profile}"


def _mig_flavors(plan: Plan, whole: list[Flavor]) -> list[Flavor]:
    """One flavor per GPU product with MIG slices (and spot or not). Per MIG resource it holds the most
    instances the pools' configs carry at once: a config's instances per node times the nodes carrying it
    in each period (plan.json's ``mig.pools[].configs[].schedule``), summed over the product's configs.

    Not one flavor per config: a year's plan has a config per layout change (80 and more on one
    scenario), past Kueue's 64 flavors per resource group. Which config a node carries is its
    ``nvidia.com/mig.config`` label, set as the schedule says; the flavor lists its configs in an
    annotation, and the MIG resource a pod requests already keeps it on nodes that have the slice.
    """
    mig = plan.document.mig
    if mig is None:
        return []
    periods = plan.document.horizon.periods
    by_key = {(f.product, f.capacity_type): f for f in whole}
    committed = {c.offering for c in plan.document.commitments}
    held: dict[tuple[str, bool], dict[str, np.ndarray]] = defaultdict(dict)
    configs: dict[tuple[str, bool], set[str]] = defaultdict(set)
    models: dict[str, str] = {}
    capacity_of: dict[tuple[str, bool], set[NodeCapacity]] = defaultdict(set)
    for pool in mig.pools:
        record = plan.document.offerings[pool.offering]
        product = gpu_product(record)
        models[product] = record.gpu_model
        if pool.offering.startswith("owned:"):
            non_spot = NodeCapacity.OWNED
        else:
            non_spot = NodeCapacity.RESERVED if pool.offering in committed else NodeCapacity.ON_DEMAND
        for config in pool.configs:
            per_node: dict[str, int] = defaultdict(int)
            for group in config.node_layout:
                for profile, count in (group.mig_devices or {}).items():
                    per_node[mig_resource(profile)] += group.gpus * count
            if not per_node:
                continue
            for entry in config.schedule:
                for is_spot, nodes in ((False, entry.nodes - entry.spot_nodes), (True, entry.spot_nodes)):
                    if nodes <= 0:
                        continue
                    key = (product, is_spot)
                    configs[key].add(config.name)
                    capacity_of[key].add(NodeCapacity.SPOT if is_spot else non_spot)
                    for resource, count in per_node.items():
                        line = held[key].setdefault(resource, np.zeros(periods))
                        for start, end in entry.periods:
                            line[start:end] += count * nodes
    result = []
    for (product, is_spot), lines in sorted(held.items()):
        kinds = capacity_of[(product, is_spot)]
        capacity = min(kinds, key=lambda c: (not c.committed, c.value))  # committed if any pool is
        priced = by_key.get((product, capacity))
        result.append(
            Flavor(
                name=safe_name(f"{product}-mig" + ("-spot" if is_spot else ""), limit=253),
                product=product,
                gpu_model=models[product],
                capacity_type=capacity,
                usd_per_gpu_hour=priced.usd_per_gpu_hour if priced else 0.0,
                capacity={r: round(float(line.max())) for r, line in sorted(lines.items())},
                mig_configs=tuple(sorted(configs[(product, is_spot)])),
                spot=is_spot,
            )
        )
    return result


def _usable(team: Team, scenario: Scenario) -> list[str]:
    """GPU-model patterns of the team's workloads (the flavors it can use match one)."""
    patterns = [p for s in scenario.inference if s.team == team.name for p in s.gpu_models]
    patterns += [p for j in scenario.training if j.team == team.name for p in j.gpu_models]
    return patterns


def _can_use(team: Team, scenario: Scenario, flavor: Flavor) -> bool:
    return gpu_model_matches(flavor.gpu_model, _usable(team, scenario))


def _back_guarantees(
    teams: list[Team], usable: Mapping[str, list[Flavor]], capacity: Mapping[str, int]
) -> dict[str, dict[str, int]]:
    """team -> flavor -> guaranteed GPUs: a maximum flow from the guarantees to the committed flavors each
    team can use (each committed GPU backs one team, as the plan's guarantee rule has it). Shortest
    augmenting paths, searched in a fixed order, so the same plan always gives the same split."""
    flow: dict[str, dict[str, int]] = {t.name: defaultdict(int) for t in teams}
    left = {t.name: t.guaranteed_gpus for t in teams}
    free = dict(capacity)
    while True:
        # nodes: ("team", name) and ("flavor", name); edges team -> flavor it can use, and flavor -> team
        # holding flow on it (that team's GPUs move to another of its flavors)
        parent: dict[tuple[str, str], tuple[str, str] | None] = {
            ("team", t.name): None for t in teams if left[t.name] > 0
        }
        queue = list(parent)
        end = None
        for node in queue:
            kind, name = node
            if kind == "flavor" and free.get(name, 0) > 0:
                end = node
                break
            if kind == "team":
                following = [("flavor", f.name) for f in usable[name]]
            else:
                following = [("team", t.name) for t in teams if flow[t.name][name] > 0]
            for nxt in following:
                if nxt not in parent:
                    parent[nxt] = node
                    queue.append(nxt)
        if end is None:
            return {t: {f: n for f, n in sorted(held.items()) if n > 0} for t, held in flow.items()}
        path = [end]
        while (step := parent[path[-1]]) is not None:
            path.append(step)
        path.reverse()
        amount = min(left[path[0][1]], free[end[1]])
        for (kind, name), (_, to) in itertools.pairwise(path):
            if kind == "flavor":  # flavor -> team: undo that team's flow on this flavor
                amount = min(amount, flow[to][name])
        for (kind, name), (_, to) in itertools.pairwise(path):
            if kind == "team":
                flow[name][to] += amount
            else:
                flow[to][name] -= amount
        left[path[0][1]] -= amount
        free[end[1]] -= amount


def _resource_groups(
    whole: list[Flavor], mig: list[Flavor], nominal: Mapping[tuple[str, str], int], borrowing: int | None
) -> list[dict[str, Any]]:
    """The queue's resource groups: whole GPUs over the whole-GPU flavors, MIG slices over the MIG ones."""

    def quota(flavor: Flavor, resource: str, limit: int | None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": resource,
            "nominalQuota": int(nominal.get((flavor.name, resource), 0)),
        }
        if limit is not None:
            entry["borrowingLimit"] = limit
        return entry

    groups = []
    if whole:
        groups.append(
            {
                "coveredResources": [GPU_RESOURCE],
                "flavors": [
                    {"name": f.name, "resources": [quota(f, GPU_RESOURCE, borrowing)]} for f in whole
                ],
            }
        )
    resources = sorted({r for f in mig for r in f.capacity})
    if mig:
        # burst caps count whole GPUs, which Kueue cannot compare with slices: MIG borrowing is uncapped
        groups.append(
            {
                "coveredResources": resources,
                "flavors": [
                    {"name": f.name, "resources": [quota(f, r, None) for r in resources]} for f in mig
                ],
            }
        )
    return groups


def build_manifests(
    plan: Plan,
    *,
    source: Path | None = None,
    reclaim: str = "Any",
    namespace_prefix: str = "",
    gpu_operator_namespace: str = "gpu-operator",
) -> Manifests:
    """Every manifest of :data:`FILES` for ``plan``; InputError for names Kubernetes cannot take."""
    if reclaim not in RECLAIM_POLICIES:
        raise InputError(None, "--reclaim", f"must be one of {', '.join(RECLAIM_POLICIES)}, got {reclaim!r}")
    scenario = _scenario(plan, source)
    warnings: list[str] = []
    whole = sorted(_whole_flavors(plan), key=flavor_order_key)
    mig = sorted(_mig_flavors(plan, whole), key=flavor_order_key)
    names = _team_names(scenario.teams, namespace_prefix, gpu_operator_namespace)

    usable = {
        t.name: [
            f
            for f in whole
            if f.capacity_type.committed and gpu_model_matches(f.gpu_model, _usable(t, scenario))
        ]
        for t in scenario.teams
    }
    backing = _back_guarantees(
        list(scenario.teams), usable, {f.name: f.capacity[GPU_RESOURCE] for f in whole}
    )
    nominal: dict[str, dict[tuple[str, str], int]] = {}
    for team in scenario.teams:
        held = {(flavor, GPU_RESOURCE): n for flavor, n in backing[team.name].items()}
        short = team.guaranteed_gpus - sum(held.values())
        if short > 0:
            candidates = [
                f for f in whole if gpu_model_matches(f.gpu_model, _usable(team, scenario))
            ] or whole
            if not candidates:
                raise InputError(source, f"teams.{team.name}", "a guarantee but the plan holds no GPUs")
            place = candidates[0]
            held[(place.name, GPU_RESOURCE)] = held.get((place.name, GPU_RESOURCE), 0) + short
            warnings.append(
                f"team {team.name}: {short} of its {team.guaranteed_gpus} guaranteed GPUs are beyond the "
                f"committed GPUs it can use; its quota puts them on {place.name}"
            )
        nominal[team.name] = held

    shared: dict[tuple[str, str], int] = {}
    for flavor in [*whole, *mig]:
        for resource, amount in flavor.capacity.items():
            given = sum(n.get((flavor.name, resource), 0) for n in nominal.values())
            shared[(flavor.name, resource)] = max(0, amount - given)

    preemption = {
        "reclaimWithinCohort": reclaim,
        "withinClusterQueue": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": _TRAINING_PRIORITY},
    }
    queues = [
        _object(
            "ClusterQueue",
            SHARED_QUEUE,
            {"cohortName": COHORT, "resourceGroups": _resource_groups(whole, mig, shared, None)},
            annotations={"gpuplan.io/role": "lends the GPUs the plan holds beyond the teams' guarantees"},
        )
    ]
    local_queues, namespaces, accounts = [], [], []
    for team in sorted(scenario.teams, key=lambda t: names[t.name]):
        name = names[team.name]
        borrowing = None if team.burst_gpus is None else team.burst_gpus - team.guaranteed_gpus
        team_labels = {LABEL_TEAM: name}
        queues.append(
            _object(
                "ClusterQueue",
                name,
                {
                    "cohortName": COHORT,
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
                    "preemption": preemption,
                    "resourceGroups": _resource_groups(whole, mig, nominal[team.name], borrowing),
                },
                labels=team_labels,
                annotations={"gpuplan.io/team": team.name},
            )
        )
        local_queues.append(
            _object("LocalQueue", name, {"clusterQueue": name}, namespace=name, labels=team_labels)
        )
        namespaces.append(_object("Namespace", name, api="v1", labels=team_labels))
        accounts.append(
            _object(
                "ServiceAccount",
                SERVICE_ACCOUNT,
                api="v1",
                namespace=name,
                labels=team_labels,
                automountServiceAccountToken=False,
            )
        )
    priorities = [
        _object("WorkloadPriorityClass", name, value=value, description=text)
        for name, (value, text) in sorted(PRIORITY_CLASSES.items(), key=lambda item: -item[1][0])
    ]
    files: dict[str, list[dict[str, Any]]] = {
        "00-namespaces.yaml": namespaces,
        "01-service-accounts.yaml": accounts,
        "10-resource-flavors.yaml": [f.manifest() for f in [*whole, *mig]],
        "11-workload-priority-classes.yaml": priorities,
        "12-cluster-queues.yaml": queues,
        "13-local-queues.yaml": local_queues,
    }
    mig_section = plan.document.mig
    if mig_section is not None and mig_section.config.mig_configs:
        text = yaml.safe_dump(mig_section.config.document(), sort_keys=False)  # as Plan.write writes it
        files["20-mig-parted-config.yaml"] = [
            _object(
                "ConfigMap",
                MIG_CONFIGMAP,
                None,
                api="v1",
                namespace=gpu_operator_namespace,
                data={"config.yaml": text},
            )
        ]
    readme = _readme(plan, scenario, names, whole, mig, nominal, gpu_operator_namespace)
    return Manifests(files, readme, warnings)


def _team_names(teams: Iterable[Team], prefix: str, gpu_operator_namespace: str) -> dict[str, str]:
    """team -> its namespace, queue and label value (a DNS-1123 label); InputError on a clash."""
    result: dict[str, str] = {}
    taken = {SHARED_QUEUE: "gpuplan's shared queue", gpu_operator_namespace: "the GPU Operator's namespace"}
    taken.update({n: "a Kubernetes namespace" for n in _RESERVED_NAMESPACES})
    for team in teams:
        name = safe_name(prefix + team.name)
        if name in taken:
            problem = f"namespace {name!r} would be {taken[name]}"
            hint = " (give --namespace-prefix)" if not prefix else ""
            raise InputError(None, f"teams.{team.name}", problem + hint)
        taken[name] = f"team {team.name!r}'s"
        result[team.name] = name
    return result


def _readme(
    plan: Plan,
    scenario: Scenario,
    names: Mapping[str, str],
    whole: list[Flavor],
    mig: list[Flavor],
    nominal: Mapping[str, Mapping[tuple[str, str], int]],
    gpu_operator_namespace: str,
) -> str:
    """For people: what each node must carry, each team's quota and how to submit a workload."""
    teams = {t.name: t for t in scenario.teams}
    lines = [
        f"# Kueue quotas for plan `{plan.document.scenario}`",
        "",
        "Apply (Kueue installed, v1beta2 CRDs): `kubectl apply -f <this directory>`. Files apply in name",
        "order: namespaces first, the MIG ConfigMap last (point the GPU Operator's ClusterPolicy",
        f"`migManager.config.name` at `{MIG_CONFIGMAP}` in `{gpu_operator_namespace}`).",
        "",
        "## Node labels the flavors select",
        "",
        "| flavor | node labels | taint | $/GPU-h | capacity |",
        "|---|---|---|---|---|",
    ]
    for f in [*whole, *mig]:
        labels = ", ".join(f"`{k}={v}`" for k, v in sorted(f.labels.items()))
        taint = f"`{SPOT_TAINT['key']}={SPOT_TAINT['value']}:{SPOT_TAINT['effect']}`" if f.spot else ""
        held = ", ".join(f"{n} {r}" for r, n in sorted(f.capacity.items()))
        lines.append(f"| {f.name} | {labels} | {taint} | {f.usd_per_gpu_hour:.4f} | {held} |")
    lines += [
        "",
        f"`{LABEL_GPU_PRODUCT}` is set by GPU Feature Discovery; `{LABEL_MIG_CONFIG}` picks a node's",
        "mig-parted config (a MIG flavor's `gpuplan.io/mig-configs` annotation lists its configs;",
        "plan.json's `mig.pools[].configs[].schedule` says when and on how many nodes);",
        f"`{LABEL_CAPACITY}` is gpuplan's: give it to each node pool (reserved: the nodes",
        "a commitment covers; on-demand: those beyond; spot nodes also get the taint).",
        "",
        "## Teams",
        "",
        "| team | namespace and queue | guaranteed GPUs (nominal quota) | burst GPUs |",
        "|---|---|---|---|",
    ]
    for team_name, name in sorted(names.items(), key=lambda item: item[1]):
        team = teams[team_name]
        quota = ", ".join(f"{n} on {flavor}" for (flavor, _r), n in sorted(nominal[team_name].items()))
        burst = "no cap" if team.burst_gpus is None else str(team.burst_gpus)
        lines.append(f"| {team_name} | {name} | {team.guaranteed_gpus} ({quota or 'none'}) | {burst} |")
    lines += [
        "",
        "## Workloads",
        "",
        f"Label a job `{LABEL_QUEUE}: <namespace>` and `{LABEL_PRIORITY}: <class>`; a workload that may run",
        f"on spot adds the toleration `{SPOT_TOLERATION['key']}={SPOT_TOLERATION['value']}:"
        f"{SPOT_TOLERATION['effect']}`.",
        "",
        "| workload | kind | namespace | priority class | spot |",
        "|---|---|---|---|---|",
    ]
    rows = []
    for s in scenario.inference:
        team = teams[s.team]
        cls = priority_class("inference", team, latency_critical=s.latency_critical)
        rows.append((s.name, "inference", names[s.team], cls, "no" if s.latency_critical else "may"))
    for j in scenario.training:
        team = teams[j.team]
        cls = priority_class("training", team, preemptible=j.preemptible)
        rows.append((j.name, "training", names[j.team], cls, "may" if j.preemptible else "no"))
    lines += [f"| {' | '.join(row)} |" for row in sorted(rows)]
    lines += ["", "Priority classes: " + ", ".join(f"{n} {v}" for n, (v, _) in PRIORITY_CLASSES.items()), ""]
    return "\n".join(lines)
