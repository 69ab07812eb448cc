"""The provider protocol: the only way gpuplan touches a cloud, and what every call promises.

A provider manages the resources of one plan id (``plan_id``: the plan's scenario name, stable across
re-plans so a new plan adopts the fleet the last one built). Every resource it creates carries the tags
(AWS tags, GCP labels, Azure tags) below, and inventory finds resources by those tags alone, never by
guessing from names:

- ``gpuplan-plan``: the plan id,
- ``gpuplan-pool``: the pool a node belongs to (:func:`pool_name`), on nodes and their reservations,
- ``gpuplan-run``: the training run (``job-run``) whose gang a node, placement group or reservation serves.

Error contract (Karpenter's cloudprovider interface is the model): each call either does what it says or
raises one :class:`ProviderError` subclass, mapped once at the SDK boundary of the adapter (never an SDK
exception, never a bare ``Exception``):

==========================  ==========================================================================
InsufficientCapacity        the cloud has no capacity for the request now (AWS InsufficientInstance-
                            Capacity, GCP ZONE_RESOURCE_POOL_EXHAUSTED, Azure AllocationFailed)
QuotaExceeded               an account quota or limit stops it (vCPU, GPU, instance count quotas)
Throttled                   the API rate limit; adapters retry it themselves (:func:`retry_throttled`), so
                            callers see it only after the bounded retries are spent
NotFound                    the resource does not exist (a delete of a missing one is *not* an error: done)
Conflict                    it exists already and is not ours (a create that finds our own resource
                            adopts it instead), or a request clashes with the resource's state
Auth                        credentials missing, expired or not allowed (the message never holds them)
InvalidRequest              the cloud refused the request as malformed (bad parameter, unknown type)
OperationFailed             a long-running operation ended in failure without a more specific cause
Timeout                     no answer in time (a read or connect timeout, an operation still running at
                            its deadline): the call may or may not have acted; the next inventory tells,
                            and a retry with the same token creates nothing twice
MissingSDK                  the adapter's SDK is not installed; names the extra (``pip install gpuplan[aws]``)
==========================  ==========================================================================

Idempotency: ``ensure_*`` calls return the existing resource when one with the spec's name and our tags
exists; ``launch`` sends ``spec.token`` as the cloud's client token (AWS ClientToken, GCP requestId,
deterministic Azure resource names), so a retried launch after a lost reply creates nothing twice;
``terminate`` and ``delete_*`` of something already gone succeed.

The SDKs are imported inside each adapter, never here: ``gpuplan plan`` needs none of them.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Protocol, TypeVar, runtime_checkable

from models.errors import GpuplanError
from models.tiers import CapacityType  # re-exported: the adapters' vocabulary

__all__ = [
    "GONE_STATES",
    "TAG_PLAN",
    "TAG_POOL",
    "TAG_RUN",
    "TAG_STANDS_IN",
    "Auth",
    "CapacityReservation",
    "CapacityType",
    "Conflict",
    "InsufficientCapacity",
    "Interruption",
    "InvalidRequest",
    "Inventory",
    "LaunchSpec",
    "MissingSDK",
    "Node",
    "NotFound",
    "OfferingInfo",
    "OperationFailed",
    "PlacementGroup",
    "PlacementGroupSpec",
    "Provider",
    "ProviderError",
    "QuotaExceeded",
    "ReservationSpec",
    "RetryPolicy",
    "SpotPrice",
    "Throttled",
    "Timeout",
    "client_token",
    "managed_tags",
    "parse_offering",
    "pool_name",
    "retry_throttled",
    "safe_name",
    "sdk_call",
    "tags_match",
]

TAG_PLAN = "gpuplan-plan"
TAG_POOL = "gpuplan-pool"
TAG_RUN = "gpuplan-run"
#: On fallback nodes: the pool whose short nodes they stand in for (the daemon's capacity fallback).
TAG_STANDS_IN = "gpuplan-stands-in"


# ----------------------------------------------------------------------------------------------------------
# errors


class ProviderError(GpuplanError):
    """A cloud call that did not do what it says. ``cloud`` and ``operation`` say where; ``code`` is the
    cloud's own error code (``InsufficientInstanceCapacity``, ``409``), kept for logs and summaries."""

    kind = "error"

    def __init__(
        self,
        message: str,
        *,
        cloud: str = "",
        operation: str = "",
        code: str | None = None,
        launched: tuple[Node, ...] = (),
    ) -> None:
        self.message = message
        self.cloud = cloud
        self.operation = operation
        self.code = code
        #: a launch that failed part way: the nodes it made, which carry our tags and stay (a pool keeps
        #: them; a gang, all or nothing, never has any)
        self.launched = launched
        super().__init__(self.format())

    def format(self) -> str:
        where = ": ".join(p for p in (self.cloud, self.operation) if p)
        code = f" [{self.code}]" if self.code else ""
        return f"{where}: {self.message}{code}" if where else f"{self.message}{code}"


class InsufficientCapacity(ProviderError):
    kind = "insufficient-capacity"


class QuotaExceeded(ProviderError):
    kind = "quota-exceeded"


class Throttled(ProviderError):
    kind = "throttled"


class NotFound(ProviderError):
    kind = "not-found"


class Conflict(ProviderError):
    kind = "conflict"


class Auth(ProviderError):
    kind = "auth"


class InvalidRequest(ProviderError):
    kind = "invalid-request"


class OperationFailed(ProviderError):
    kind = "operation-failed"


class Timeout(ProviderError):
    """No answer in time: the outcome is unknown (unlike the others, which say it did not act)."""

    kind = "timeout"


class MissingSDK(ProviderError):
    """The adapter's SDK is not installed."""

    kind = "missing-sdk"

    def __init__(self, cloud: str, package: str, extra: str) -> None:
        super().__init__(f"the {cloud} provider needs {package}: pip install 'gpuplan[{extra}]'", cloud=cloud)


# ----------------------------------------------------------------------------------------------------------
# what providers return


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

    @property
    def all_or_nothing(self) -> bool:
        return self.run is not None


@runtime_checkable
class Provider(Protocol):
    """One cloud account (or the simulated cloud). See the module docstring for the error contract."""

    cloud: str  # aws, gcp, azure, sim
    #: whether a capacity reservation can hold a gang inside its placement group (AWS ODCRs take a
    #: cluster placement group, GCP reservations a compact policy; Azure's capacity reservations do not
    #: combine with proximity placement groups, so its gangs are never reserved)
    reserves_gangs: bool

    def handles(self, offering: str) -> bool:
        """Whether this provider can run ``offering`` (its cloud is this provider's cloud)."""
        ...

    def offerings(self, regions: Sequence[str]) -> list[OfferingInfo]:
        """GPU instance types sold in ``regions``, with their GPUs and fabric."""
        ...

    def spot_prices(self, offerings: Sequence[str]) -> list[SpotPrice]:
        """Current spot prices of ``offerings`` (the newest per offering and zone); an offering the cloud
        has no spot price API for is left out, never priced at 0."""
        ...

    def inventory(self, plan_id: str) -> Inventory:
        """What carries ``gpuplan-plan = plan_id``: nodes, placement groups, capacity reservations."""
        ...

    def ensure_placement_group(self, spec: PlacementGroupSpec) -> PlacementGroup:
        """Create the placement group, or return ours if it exists (Conflict if the name is taken by a
        group without our tags)."""
        ...

    def ensure_reservation(self, spec: ReservationSpec) -> CapacityReservation:
        """Create the capacity reservation, or return ours if it exists. InsufficientCapacity when the cloud
        cannot reserve it."""
        ...

    def launch(self, spec: LaunchSpec) -> list[Node]:
        """Launch ``spec.count`` nodes (a gang: all or none) tagged with ``spec.tags``; the nodes it made.
        Idempotent on ``spec.token``."""
        ...

    def terminate(self, nodes: Sequence[Node]) -> None:
        """Terminate ``nodes``; those already gone count as done."""
        ...

    def release_reservation(self, reservation: CapacityReservation) -> None:
        """Cancel a capacity reservation; one already gone counts as done."""
        ...

    def delete_placement_group(self, group: PlacementGroup) -> None:
        """Delete an (empty) placement group; one already gone counts as done."""
        ...

    def interruptions(self, plan_id: str) -> list[Interruption]:
        """Spot interruption and rebalance notices for our nodes that are pending now."""
        ...


# ----------------------------------------------------------------------------------------------------------
# names, tags, tokens


def parse_offering(offering: str) -> tuple[str, str, str]:
    """``cloud:region:instance_type`` -> its three parts (ValueError if it is not one)."""
    parts = offering.split(":")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"not an offering id (cloud:region:instance_type): {offering!r}")
    return parts[0], parts[1], parts[2]


_UNSAFE = re.compile(r"[^a-z0-9-]+")


def safe_name(text: str, limit: int = 63) -> str:
    """A name every cloud accepts as a resource name and a label value: lower-case letters, digits and
    ``-``, starting with a letter, at most ``limit`` characters (GCP's 63). Long names keep a hash of the
    whole so two long names never collide."""
    slug = _UNSAFE.sub("-", text.lower()).strip("-") or "x"
    if not slug[0].isalpha():
        slug = "g-" + slug
    if len(slug) <= limit:
        return slug
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return slug[: limit - 9].rstrip("-") + "-" + digest


def pool_name(offering: str, capacity: CapacityType) -> str:
    """The pool of ``offering``'s nodes bought on ``capacity``: ``aws-us-east-1-p5-48xlarge-spot``."""
    return safe_name(f"{offering}-{capacity.value}")


def managed_tags(
    plan_id: str, *, pool: str | None = None, run: str | None = None, stands_in: str | None = None
) -> dict[str, str]:
    """The tags (labels) that make a resource ours; values are :func:`safe_name` so GCP accepts them."""
    tags = {TAG_PLAN: safe_name(plan_id)}
    if pool is not None:
        tags[TAG_POOL] = pool
    if run is not None:
        tags[TAG_RUN] = run
    if stands_in is not None:
        tags[TAG_STANDS_IN] = stands_in
    return tags


def client_token(*parts: object) -> str:
    """A deterministic client token from what identifies an intent (plan id, pool, period, target):
    32 hex characters, within AWS's 64 and usable as GCP's requestId once formatted as a UUID."""
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:32]


# ----------------------------------------------------------------------------------------------------------
# retries

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of Throttled with capped exponential backoff and full jitter (AWS's advice)."""

    attempts: int = 6
    base_seconds: float = 0.5
    cap_seconds: float = 20.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap_seconds, self.base_seconds * 2**attempt))


def retry_throttled(
    call: Callable[[], T],
    policy: RetryPolicy = RetryPolicy(),
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[Throttled, int, float], None] | None = None,
) -> T:
    """``call()``, retried while it raises Throttled, at most ``policy.attempts`` times in all; the last
    Throttled propagates. Other errors propagate at once (retrying a create is safe only with a token,
    which every create here carries, but only throttling is worth waiting out)."""
    rng = rng or random.Random()
    for attempt in range(policy.attempts):
        try:
            return call()
        except Throttled as exc:
            if attempt == policy.attempts - 1:
                raise
            wait = policy.delay(attempt, rng)
            if on_retry is not None:
                on_retry(exc, attempt + 1, wait)
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


def sdk_call(
    call: Callable[[], T],
    operation: str,
    *,
    errors: type[BaseException] | tuple[type[BaseException], ...],
    to_provider_error: Callable[[BaseException, str], ProviderError | None],
    policy: RetryPolicy,
    sleep: Callable[[float], None],
    logger: logging.Logger,
    rng: random.Random | None = None,
) -> T:
    """One SDK call at an adapter's boundary: the SDK's ``errors`` mapped by ``to_provider_error`` (None:
    not a cloud error, re-raised as the bug it is), Throttled retried under ``policy``, each retry logged.
    Every adapter's calls go through here, so the mapping and the bound are in one place per cloud."""

    def once() -> T:
        try:
            return call()
        except errors as exc:
            mapped = to_provider_error(exc, operation)
            if mapped is None:
                raise
            raise mapped from exc

    def on_retry(exc: Throttled, attempt: int, wait: float) -> None:
        logger.warning("%s throttled (%s); retry %d in %.2f s", operation, exc.code, attempt, wait)

    return retry_throttled(once, policy, sleep=sleep, rng=rng, on_retry=on_retry)


def tags_match(tags: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """Whether ``tags`` carry every ``wanted`` key and value (how adoption decides a resource is ours)."""
    return all(tags.get(k) == v for k, v in wanted.items())
