"""The provider protocol: the only way gpuplan touches a cloud, and what every call promises.

A provider manages the resources of one plan id (``plan_id``: the plan's scenario name, stable across
re-plans so a new plan adopts the fleet the last one built). Every resource it creates carries the tags
(AWS tags, GCP labels, Azure tags) of ``models.naming``, and inventory finds resources by those tags
alone, never by guessing from names:

- ``gpuplan-plan``: the plan id,
- ``gpuplan-pool``: the pool a node belongs to (``pool_name``), on nodes and their reservations,
- ``gpuplan-run``: the training run (``job-run``) whose gang a node, placement group or reservation serves.

Error contract (Karpenter's cloudprovider interface is the model): each call either does what it says or
raises one ``ProviderError`` subclass (the tree is in ``providers/errors.py``), mapped once at the SDK
boundary of the adapter (:func:`sdk_call`), never an SDK exception or a bare ``Exception``.

Capabilities (SkyPilot's ``CloudImplementationFeatures``): what only some clouds can do is a
:class:`Capability` in the adapter's ``capabilities``; callers ask :func:`supports` (or
:func:`require`) and never probe an adapter's attributes. A call that needs a capability the adapter
lacks raises ``Unsupported``.

Idempotency: ``ensure_*`` calls return the existing resource when one with the spec's name and our tags
exists; ``launch`` sends ``spec.token`` as the cloud's client token (AWS ClientToken, GCP requestId,
deterministic Azure resource names), so a retried launch after a lost reply creates nothing twice;
``terminate`` and ``delete_*`` of something already gone succeed.

Each adapter is checked against :class:`Provider` by mypy (a ``_conforms`` function at the end of its
module, as Karpenter's ``var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)``). The types the
protocol speaks in (``providers.resources``) and its errors (``providers.errors``) are re-exported here,
so an adapter imports its contract from one module. The SDKs are imported inside each adapter, never
here: ``gpuplan plan`` needs none of them.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import ClassVar, Protocol, TypeVar, runtime_checkable

from models.tiers import CapacityType  # re-exported: the adapters' vocabulary
from providers.errors import (
    Auth,
    Conflict,
    InsufficientCapacity,
    InvalidRequest,
    MissingSDK,
    NotFound,
    OperationFailed,
    ProviderError,
    QuotaExceeded,
    Throttled,
    Timeout,
    Unsupported,
)
from providers.resources import (
    GONE_STATES,
    CapacityBlockOffer,
    CapacityReservation,
    Interruption,
    Inventory,
    LaunchSpec,
    Node,
    OfferingInfo,
    PlacementGroup,
    PlacementGroupSpec,
    Quota,
    ReservationSpec,
    SpotPrice,
)

__all__ = [
    "GONE_STATES",
    "Auth",
    "Capability",
    "CapacityBlockOffer",
    "CapacityReservation",
    "CapacityType",
    "Conflict",
    "InsufficientCapacity",
    "Interruption",
    "InvalidRequest",
    "Inventory",
    "LaunchSpec",
    "MissingSDK",
    "NoCapacityBlocks",
    "Node",
    "NotFound",
    "OfferingInfo",
    "OperationFailed",
    "PlacementGroup",
    "PlacementGroupSpec",
    "Provider",
    "ProviderError",
    "Quota",
    "QuotaExceeded",
    "ReservationSpec",
    "RetryPolicy",
    "SpotPrice",
    "Throttled",
    "Timeout",
    "Unsupported",
    "require",
    "retry_throttled",
    "sdk_call",
    "supports",
    "tags_match",
]


class Capability(StrEnum):
    """What an adapter can do beyond the calls every adapter has."""

    #: a capacity reservation can hold a gang inside its placement group (AWS ODCRs take a cluster
    #: placement group, GCP reservations a compact policy; Azure's capacity reservations do not combine
    #: with proximity placement groups, so its gangs are never reserved)
    GANG_RESERVATIONS = "gang-reservations"
    #: fixed-term GPU blocks can be listed and bought (AWS Capacity Blocks for ML):
    #: ``capacity_block_offerings`` and ``purchase_capacity_block``
    CAPACITY_BLOCKS = "capacity-blocks"
    #: ``spot_prices`` returns the cloud's current spot prices (GCP's Compute API has none: empty)
    SPOT_PRICES = "spot-prices"
    #: ``interruptions`` also reports rebalance recommendations (elevated risk, before an interruption)
    REBALANCE_SIGNALS = "rebalance-signals"


@runtime_checkable
class Provider(Protocol):
    """One cloud account (or the simulated cloud). See the module docstring for the error contract."""

    cloud: str  # aws, gcp, azure, sim
    #: what this adapter can do beyond the calls below (ask :func:`supports`)
    capabilities: ClassVar[frozenset[Capability]]

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
        """Spot interruption and rebalance notices for our nodes, as the cloud sends them (AWS: the
        EventBridge rule's SQS queue; GCP: preempted operations; Azure: evictions), each with its
        ``deadline`` when the cloud names one. A notice may come again in a later call (a queue message
        is deleted only at the next read, after the caller has recorded it): callers drop repeats."""
        ...

    def quotas(self, wanted: Sequence[tuple[str, CapacityType]]) -> list[Quota]:
        """The account's quotas that launches of ``wanted`` (offering, capacity) count against, with their
        limits and usage now, read before anything is launched. A quota the cloud does not report is left
        out, never guessed; an error reading them is a ProviderError (the caller says quotas went
        unchecked)."""
        ...

    def capacity_block_offerings(
        self,
        offering: str,
        nodes: int,
        hours: int,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> list[CapacityBlockOffer]:
        """Capacity Blocks offered for ``nodes`` x ``offering`` for ``hours``, starting between ``start``
        and ``end``; listing buys nothing. Unsupported without ``Capability.CAPACITY_BLOCKS``."""
        ...

    def purchase_capacity_block(
        self, offering_id: str, *, max_usd: float, token: str, tags: Mapping[str, str] | None = None
    ) -> CapacityReservation:
        """Buy a block this provider listed, only if its upfront fee is at most ``max_usd``; a repeated
        purchase with the same ``token`` returns the block already bought. Unsupported without
        ``Capability.CAPACITY_BLOCKS``."""
        ...

    def capacity_blocks_held(self) -> list[CapacityReservation]:
        """The account's Capacity Blocks that are awaiting payment, scheduled or active, whoever bought
        them, in every region this provider works in: what counts toward the cloud's limit on instances
        across an account's blocks. A cloud that sells no blocks holds none."""
        ...


def supports(provider: Provider, capability: Capability) -> bool:
    """Whether ``provider`` has ``capability``."""
    return capability in provider.capabilities


def require(provider: Provider, capability: Capability, operation: str) -> None:
    """Unsupported (naming the cloud and what was asked) unless ``provider`` has ``capability``."""
    if not supports(provider, capability):
        raise Unsupported(
            f"{provider.cloud} does not have {capability.value}", cloud=provider.cloud, operation=operation
        )


class NoCapacityBlocks:
    """The Capacity Block calls of an adapter without ``Capability.CAPACITY_BLOCKS``: Unsupported."""

    cloud: str

    def capacity_block_offerings(
        self,
        offering: str,
        nodes: int,
        hours: int,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> list[CapacityBlockOffer]:
        raise Unsupported("sells no Capacity Blocks", cloud=self.cloud, operation="capacity_block_offerings")

    def purchase_capacity_block(
        self, offering_id: str, *, max_usd: float, token: str, tags: Mapping[str, str] | None = None
    ) -> CapacityReservation:
        raise Unsupported("sells no Capacity Blocks", cloud=self.cloud, operation="purchase_capacity_block")

    def capacity_blocks_held(self) -> list[CapacityReservation]:
        return []  # a cloud that sells no blocks holds none


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
