"""What providers return and what they are asked: the resource and request types of the contract.

Plain frozen dataclasses, no behaviour beyond reading themselves: the adapters build them from SDK
responses, reconcile and the daemon read them. ``providers.base`` re-exports them with the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from models.tiers import CapacityType

__all__ = [
    "GONE_STATES",
    "CapacityBlockOffer",
    "CapacityReservation",
    "Interruption",
    "Inventory",
    "LaunchSpec",
    "Node",
    "OfferingInfo",
    "PlacementGroup",
    "PlacementGroupSpec",
    "Quota",
    "ReservationSpec",
    "SpotPrice",
]


@dataclass(frozen=True)
class OfferingInfo:
    """A GPU instance type the cloud sells in a region, as its API describes it."""

    offering: str  # cloud:region:instance_type
    gpu_model: str | None
    gpus_per_node: int
    gpu_memory_gb: float | None
    fabric: str | None  # efa, tcpx, tcpxo, infiniband, or None
    network_interfaces: int = 1  # interfaces a gang node needs for its fabric (AWS: one EFA per card)


@dataclass(frozen=True)
class SpotPrice:
    offering: str
    usd_per_hour: float
    at: datetime
    zone: str | None = None


@dataclass(frozen=True)
class Node:
    """A node (instance, VM, scale-set instance) gpuplan manages."""

    id: str
    offering: str
    capacity: CapacityType
    pool: str
    run: str | None = None
    placement_group: str | None = None
    reservation: str | None = None
    state: str = "running"  # pending, running, stopping, terminated, failed, as the cloud says (lower case)
    zone: str | None = None
    launched: datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PlacementGroup:
    """A group whose nodes sit close on the fabric: AWS cluster placement group, GCP compact resource
    policy, Azure proximity placement group."""

    name: str
    region: str
    run: str | None = None
    id: str | None = None
    state: str = "available"
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CapacityReservation:
    """Capacity held for nodes of one offering (AWS ODCR, GCP reservation, Azure capacity reservation)."""

    name: str
    offering: str
    nodes: int
    placement_group: str | None = None
    run: str | None = None
    id: str | None = None
    state: str = "active"
    tags: Mapping[str, str] = field(default_factory=dict)
    ends: datetime | None = None  # when the cloud ends it by itself; None: until released
    #: an AWS Capacity Block (bought for a run, paid upfront, not cancellable): never released, and its
    #: nodes launch on its own market type; ``starts``: when it becomes active (its state before: scheduled)
    block: bool = False
    starts: datetime | None = None


#: Node states (lower case) of nodes that are gone or going: they count towards nothing.
GONE_STATES: Final = ("shutting-down", "terminated", "stopping", "stopped", "deleting", "deallocated")


@dataclass(frozen=True)
class Inventory:
    """Everything tagged with one plan id, as the cloud reports it."""

    nodes: tuple[Node, ...] = ()
    placement_groups: tuple[PlacementGroup, ...] = ()
    reservations: tuple[CapacityReservation, ...] = ()

    def live_nodes(self) -> tuple[Node, ...]:
        """Nodes that count towards a pool: not terminated, on their way out, or failed."""
        return tuple(n for n in self.nodes if n.state not in GONE_STATES and n.state != "failed")

    def failed_nodes(self) -> tuple[Node, ...]:
        """Nodes the cloud reports as failed: serving nothing, possibly still billed."""
        return tuple(n for n in self.nodes if n.state == "failed")


@dataclass(frozen=True)
class Interruption:
    """A spot interruption (the node will be reclaimed) or a rebalance recommendation (it is at elevated
    risk) the cloud announced for a node we manage."""

    node_id: str
    kind: str  # "interruption" or "rebalance"
    at: datetime
    offering: str | None = None
    pool: str | None = None
    run: str | None = None
    #: when the cloud takes the node (AWS: two minutes after the warning; GCP and Azure: about 30 s after
    #: the preemption begins); None for a rebalance recommendation or a notice that names no time
    deadline: datetime | None = None


@dataclass(frozen=True)
class Quota:
    """A limit of the cloud account that launches count against, as the cloud reports it now: AWS Service
    Quotas (the vCPUs of an instance family, on demand and spot apart), Compute Engine regional quotas
    (CPUs, GPUs of a model, preemptible GPUs), Azure compute usages (a VM family's cores, total regional
    cores, spot cores).

    ``per_node`` says which launches count against it and by how much: the units one node of each
    ``(offering, capacity)`` uses (a p5.48xlarge: 192 vCPUs; an a3-highgpu-8g: 8 H100 GPUs).

    ``reserved``: the part of ``used`` that is the unused capacity of reservations, by reservation name
    (as ``CapacityReservation.name`` gives it). Where a cloud counts a reservation against the quota as
    soon as it is made (an EC2 ODCR against the On-Demand vCPU quota, a Compute Engine reservation
    against its regional quotas), a node launched into it takes no more of the quota: it uses what the
    reservation holds."""

    name: str  # as the cloud names it, so a person can find it in the console (with its code, if any)
    region: str
    limit: float
    used: float
    unit: str  # vCPUs, GPUs, cores, instances
    per_node: Mapping[tuple[str, CapacityType], float] = field(default_factory=dict)
    reserved: Mapping[str, float] = field(default_factory=dict)

    @property
    def free(self) -> float:
        """Units still free under the limit now (never below 0)."""
        return max(0.0, self.limit - self.used)


# ----------------------------------------------------------------------------------------------------------
# what providers are asked


@dataclass(frozen=True)
class PlacementGroupSpec:
    name: str
    region: str
    offering: str  # the offering of the gang (GCP and Azure size the group for it)
    nodes: int
    fabric: str | None
    tags: Mapping[str, str]
    token: str  # client token for the create


@dataclass(frozen=True)
class ReservationSpec:
    name: str
    offering: str
    nodes: int
    placement_group: str | None
    tags: Mapping[str, str]
    token: str
    #: when the cloud ends the reservation by itself (AWS EndDate, GCP deleteAtTime); None: until released
    ends: datetime | None = None
    #: the other zones of the region may be tried when the first refuses it (the plan's ``other-zone``
    #: fallback); False: the first zone or nothing
    other_zones: bool = True


@dataclass(frozen=True)
class LaunchSpec:
    """Launch ``count`` nodes of ``offering`` on ``capacity`` into ``pool``. A gang (``run`` set) launches
    all or nothing into its placement group (and reservation, if any), with its fabric's interfaces."""

    offering: str
    capacity: CapacityType
    count: int
    pool: str
    tags: Mapping[str, str]
    token: str
    run: str | None = None
    placement_group: str | None = None
    reservation: str | None = None  # the reservation's name (adapters also accept its cloud id)
    fabric: str | None = None
    target: int | None = None  # nodes the pool (or gang) holds once this launch is done: clouds that size a
    # group (Azure scale sets) set its capacity to this, which repeats safely where "add count" would not
    max_run_hours: float | None = None  # a GCP flex-start gang: its VMs run at most this long (<= 7 days)

    @property
    def all_or_nothing(self) -> bool:
        return self.run is not None


@dataclass(frozen=True)
class CapacityBlockOffer:
    """A Capacity Block for ML EC2 offers: ``nodes`` instances for ``hours`` at a fixed upfront fee."""

    id: str
    offering: str
    zone: str | None
    nodes: int
    start: datetime | None
    end: datetime | None
    hours: int
    upfront_usd: float
    currency: str = "USD"
