"""The Azure provider: azure-mgmt-compute against Azure Resource Manager (ARM).

How gpuplan's resources map onto Azure:

- a pool (non-gang nodes of one offering and tier) is one **VM scale set** named after the pool, and a gang is
  one scale set named after its run (Uniform orchestration, Manual upgrades, no overprovisioning, so the VMs
  ARM lists are the VMs asked for); nodes are the scale set's VMs;
- ``launch`` sets the scale set's capacity to ``spec.target``: a PUT by name is idempotent, so a retried
  launch never doubles a pool (Azure has no client tokens; deterministic names are its idempotency);
- spot is ``priority Spot`` with ``evictionPolicy Delete`` and ``billingProfile.maxPrice -1`` (pay up to the
  on-demand price, never evicted for price);
- a gang's scale set is a single placement group in its **proximity placement group**, on an InfiniBand SKU
  (ND...r...: the RDMA fabric comes with the SKU and the HPC image's drivers, there is no extra NIC to add);
- a capacity reservation is a **capacity reservation group** (named after the spec) holding one reservation of
  the SKU; scale sets launch into it through ``virtualMachineProfile.capacityReservation``.

How it behaves when ARM does not simply succeed (partial scale-outs, quotas, concurrent writers through
etags, long-running operations within ``operation_timeout_seconds``), how it reads quotas (compute usages)
and spot evictions (activity log, instance views), and the RBAC it needs: ``docs/provision-azure.md``.

Node ids are the VM's ARM resource id (``.../virtualMachineScaleSets/<set>/virtualMachines/<instance id>``),
so ``terminate`` finds the scale set and instance id from the node alone.

Errors: every SDK call goes through :meth:`AzureProvider._call`, which maps azure-core's exceptions with
:func:`map_error` (the one place that does) and retries Throttled (``providers.base.sdk_call``).
azure-core's own retry policy is kept for transport errors and 5xx but told to leave 429 alone, so
throttling is waited out here, bounded by the settings' RetryPolicy, and logged.

The SDK is imported inside the provider (:func:`_sdk`), never at module import: ``gpuplan plan`` needs none.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import os
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Annotated, Any, ClassVar, Final, Literal, TypeVar
from urllib.parse import urlsplit

import pydantic

from models.naming import TAG_PLAN, TAG_POOL, TAG_RUN, parse_offering, safe_name
from models.numbers import StrictModel
from providers.base import (
    Auth,
    Capability,
    CapacityReservation,
    CapacityType,
    Conflict,
    InsufficientCapacity,
    Interruption,
    InvalidRequest,
    Inventory,
    LaunchSpec,
    MissingSDK,
    NoCapacityBlocks,
    Node,
    NotFound,
    OfferingInfo,
    OperationFailed,
    PlacementGroup,
    PlacementGroupSpec,
    Provider,
    ProviderError,
    Quota,
    QuotaExceeded,
    ReservationSpec,
    RetryPolicy,
    SpotPrice,
    Throttled,
    Timeout,
    sdk_call,
    tags_match,
)
from providers.config import FILE, checked_retry

__all__ = [
    "ACCESS_TOKEN_ENV",
    "AzureProvider",
    "AzureSettings",
    "ImageSettings",
    "map_error",
    "open_provider",
]

log = logging.getLogger("gpuplan.providers.azure")

T = TypeVar("T")
_RNG = random.Random()

CLOUD = "azure"
ACCESS_TOKEN_ENV = "AZURE_ACCESS_TOKEN"
RETAIL_PRICES_URL = "https://prices.azure.com/api/retail/prices"
ARM_SCOPE = "https://management.azure.com/.default"

_CAPACITY_CODES = {
    "AllocationFailed",
    "ZonalAllocationFailed",
    "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest",
    "SkuNotAvailable",
}
_QUOTA_CODES = {"QuotaExceeded", "OperationNotAllowed"}  # the latter only with a quota message
#: another writer got there first: ARM's 409 "The request failed due to conflict with a concurrent request",
#: Compute's ConflictingConcurrentWriteNotAllowed, an operation ended by a newer PUT (OperationPreempted), an
#: If-Match / If-None-Match that no longer holds (412 PreconditionFailed). Re-reading and sending again is
#: safe: every write here names its resource and its absolute size.
_CONCURRENCY_CODES = {
    "Conflict",
    "ConflictingConcurrentWriteNotAllowed",
    "OperationPreempted",
    "PreconditionFailed",
}
#: the activity log operations of a spot eviction (the scale set's, its VM's, a standalone VM's)
_EVICTION_OPERATION = "/evictspotvm/action"
#: Azure Scheduled Events give a Preempt (spot eviction) event at least 30 s before it happens
#: (https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event scheduling")
PREEMPT_NOTICE = timedelta(seconds=30)
_GPU_MODEL = re.compile(r"_(GB300|GB200|B200|H200|H100|A100|MI300X|L40S|A10|T4|V100|P100|P40|M60)(?:_|$)")


_Text = Annotated[str, pydantic.Field(min_length=1, max_length=2048)]
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_SUBNET_ID = re.compile(
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+",
    re.IGNORECASE,
)
_SSH_KEY = re.compile(r"(ssh-(rsa|ed25519)|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+( .*)?")


class ImageSettings(StrictModel):
    """The marketplace image of every VM: by default Microsoft's Ubuntu HPC image, which carries the
    InfiniBand (OFED) and NVIDIA drivers an ND gang needs."""

    publisher: _Text = "microsoft-dsvm"
    offer: _Text = "ubuntu-hpc"
    sku: _Text = "2204"
    version: _Text = "latest"


class AzureSettings(StrictModel):
    """The ``azure:`` section of the provider settings file. Read from a file (the ``FILE`` context of
    providers.config), what a launch needs (``FILE_REQUIRES``) must be there and have Azure's shapes."""

    #: the settings a file must give, and what each is: launching without them fails at the first launch
    FILE_REQUIRES: ClassVar[dict[str, str]] = {
        "subscription_id": "the subscription's GUID",
        "resource_group": "the resource group the fleet lives in",
        "subnet_id": "the ARM id of the VMs' subnet",
        "ssh_public_key": "the admin user's public key",
    }

    subscription_id: _Text
    resource_group: Annotated[str, pydantic.Field(min_length=1, max_length=90)]
    image: ImageSettings = ImageSettings()
    admin_username: Annotated[str, pydantic.Field(min_length=1, max_length=64)] = "gpuplan"
    ssh_public_key: Annotated[str, pydantic.Field(min_length=1, max_length=16384)] | None = None  # to launch
    subnet_id: _Text | None = None  # required to launch: the ARM id of the subnet the VMs' NIC joins
    base_url: _Text | None = (
        None  # ARM endpoint; None = the public cloud's (a loopback http:// URL for fakes)
    )
    prices_url: _Text = RETAIL_PRICES_URL
    # default: azure-identity's DefaultAzureCredential; access-token-env: a bearer token fetched beforehand
    # (CI, fakes) read from $AZURE_ACCESS_TOKEN
    credential: Literal["default", "access-token-env"] = "default"
    retry: RetryPolicy = RetryPolicy()
    polling_interval_seconds: float = pydantic.Field(5.0, ge=0, le=600)
    timeout_seconds: float = pydantic.Field(
        60.0, gt=0, le=3600, description="connect and read timeout, each request"
    )
    #: how long one long-running operation (a scale set PUT of ND VMs takes minutes) may run before the call
    #: raises Timeout (the operation goes on in ARM; the next inventory tells what it did)
    operation_timeout_seconds: float = pydantic.Field(1800.0, gt=0, le=86400)
    #: a scale set PUT refused because another writer changed it meanwhile (409 concurrent request, 412 etag,
    #: OperationPreempted) is re-read and sent again at most this many times, then reported as Conflict
    conflict_retries: int = pydantic.Field(3, ge=0, le=20)
    #: how far back ``interruptions`` reads the activity log for spot evictions
    eviction_lookback_minutes: float = pydantic.Field(30.0, gt=0, le=7 * 24 * 60)

    _retry = pydantic.field_validator("retry", mode="before")(checked_retry)

    @pydantic.field_validator("subscription_id")
    @classmethod
    def _guid(cls, value: str, info: pydantic.ValidationInfo) -> str:
        if FILE in (info.context or {}) and not _GUID.fullmatch(value):
            raise ValueError(f"{value[:80]!r} is not a subscription id (a GUID)")
        return value

    @pydantic.field_validator("subnet_id")
    @classmethod
    def _arm_subnet(cls, value: str | None, info: pydantic.ValidationInfo) -> str | None:
        if value is not None and FILE in (info.context or {}) and not _SUBNET_ID.fullmatch(value):
            raise ValueError(
                f"{value[:80]!r} is not a subnet's ARM id (/subscriptions/.../resourceGroups/.../providers/"
                "Microsoft.Network/virtualNetworks/.../subnets/...)"
            )
        return value

    @pydantic.field_validator("ssh_public_key")
    @classmethod
    def _openssh(cls, value: str | None, info: pydantic.ValidationInfo) -> str | None:
        if value is not None and FILE in (info.context or {}) and not _SSH_KEY.fullmatch(value.strip()):
            raise ValueError("not an OpenSSH public key (ssh-ed25519 AAAA..., ssh-rsa AAAA...)")
        return value


# ----------------------------------------------------------------------------------------------------------
# errors: the one mapping


def map_error(exc: BaseException, operation: str) -> ProviderError:
    """An azure-core exception as the typed error of base.py. A failed long-running operation arrives as an
    HttpResponseError carrying the operation's error (its HTTP status is the poll's 200), so the error code
    decides first and the status only after."""
    code, message, status = _error_parts(exc)
    kw: dict[str, Any] = {
        "cloud": CLOUD,
        "operation": operation,
        "code": code or (str(status) if status else None),
    }
    name = type(exc).__name__
    if name in ("ServiceRequestTimeoutError", "ServiceResponseTimeoutError"):
        return Timeout(message, **kw)
    if status == 429 or code == "TooManyRequests":
        return Throttled(message, **kw)
    if code in _CAPACITY_CODES or (code or "").endswith("AllocationFailed"):
        return InsufficientCapacity(message, **kw)
    if code == "QuotaExceeded" or (code in _QUOTA_CODES and "quota" in message.lower()):
        return QuotaExceeded(message, **kw)
    if name == "ResourceNotFoundError" or status == 404:
        return NotFound(message, **kw)
    if name in ("ResourceExistsError", "ResourceModifiedError") or status in (409, 412):
        return Conflict(message, **kw)
    if code in _CONCURRENCY_CODES:  # a long-running operation another write ended
        return Conflict(message, **kw)
    if name in ("ClientAuthenticationError", "CredentialUnavailableError") or status in (401, 403):
        return Auth(message, **kw)
    if status == 400:
        return InvalidRequest(message, **kw)
    return OperationFailed(message, **kw)


def _error_parts(exc: BaseException) -> tuple[str | None, str, int | None]:
    """(ARM error code, message, HTTP status) of an azure-core exception; the message is the service's, which
    never holds request headers (the bearer token)."""
    status = getattr(exc, "status_code", None)
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None) if error is not None else None
    message = getattr(error, "message", None) if error is not None else None
    if not message:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return code, str(message).splitlines()[0], status if isinstance(status, int) else None


# ----------------------------------------------------------------------------------------------------------
# the SDK, imported lazily


def _sdk() -> SimpleNamespace:
    """The azure-core and azure-mgmt-compute pieces the adapter uses; MissingSDK when they are not
    installed. Classes that subclass SDK classes are built here too, for the same reason."""
    try:
        from azure.core import MatchConditions, PipelineClient
        from azure.core.credentials import AccessToken
        from azure.core.exceptions import AzureError
        from azure.core.pipeline.policies import RetryPolicy as CoreRetryPolicy
        from azure.core.pipeline.policies import UserAgentPolicy
        from azure.core.rest import HttpRequest
        from azure.mgmt.compute import ComputeManagementClient, models
        from azure.mgmt.core.policies import ARMChallengeAuthenticationPolicy
    except ImportError as exc:
        raise MissingSDK(CLOUD, "azure-mgmt-compute", "azure") from exc

    class LoopbackAuthPolicy(ARMChallengeAuthenticationPolicy):
        """ARM's bearer policy (the token comes from the credential, refreshed as it expires), which also
        accepts plain http to a loopback host (a local fake); any other http URL is still refused."""

        def on_request(self, request: Any) -> None:
            if _loopback_http(request.http_request.url):
                request.context["enforce_https"] = False
            super().on_request(request)

    class NoThrottleRetry(CoreRetryPolicy):
        """azure-core's retries minus 429: throttling is retried by the adapter (bounded, logged)."""

        def is_retry(self, settings: Any, response: Any) -> bool:
            if response.http_response.status_code == 429:
                return False
            return bool(super().is_retry(settings, response))

    return SimpleNamespace(
        PipelineClient=PipelineClient,
        MatchConditions=MatchConditions,
        AccessToken=AccessToken,
        AzureError=AzureError,
        HttpRequest=HttpRequest,
        UserAgentPolicy=UserAgentPolicy,
        ComputeManagementClient=ComputeManagementClient,
        models=models,
        LoopbackAuthPolicy=LoopbackAuthPolicy,
        NoThrottleRetry=NoThrottleRetry,
    )


def _loopback_http(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


class _EnvTokenCredential:
    """A TokenCredential over a bearer token fetched beforehand (``$AZURE_ACCESS_TOKEN``). The token is
    read once, kept out of repr() and never logged."""

    def __init__(self, access_token_cls: Any) -> None:
        token = os.environ.get(ACCESS_TOKEN_ENV, "").strip()
        if not token:
            raise Auth(
                f"credential access-token-env needs the environment variable {ACCESS_TOKEN_ENV}",
                cloud=CLOUD,
                operation="credential",
            )
        self._token = token
        self._cls = access_token_cls

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        return self._cls(self._token, int(time.time()) + 3600)

    def __repr__(self) -> str:
        return "_EnvTokenCredential(<hidden>)"


def _default_credential() -> Any:
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError as exc:
        raise MissingSDK(CLOUD, "azure-identity", "azure") from exc
    return DefaultAzureCredential()


def _wall_clock() -> datetime:
    return datetime.now(UTC)


def open_provider(
    settings: AzureSettings,
    *,
    credential: Any = None,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] | None = None,
) -> AzureProvider:
    """The provider for ``settings``; ``credential`` (any object with ``get_token``) overrides the one the
    settings name; ``now`` the wall clock (a test's stand-in clock)."""
    return AzureProvider(settings, credential=credential, sleep=sleep, now=now)


# ----------------------------------------------------------------------------------------------------------
# the provider


@dataclass(frozen=True)
class _ScaleSet:
    """What the adapter needs of a scale set."""

    name: str
    location: str
    sku: str
    capacity: int
    priority: str
    tags: Mapping[str, str]
    placement_group: str | None
    reservation: str | None


class AzureProvider(NoCapacityBlocks):
    """gpuplan's provider over one subscription and resource group. See the module docstring."""

    cloud = CLOUD
    #: Azure refuses a scale set with both a capacity reservation group and a proximity placement group
    #: (azurerm's linux_virtual_machine_scale_set page; Azure's capacity reservation limitations)
    # the Retail Prices API has spot prices; reservations take no PPG
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.SPOT_PRICES})

    def __init__(
        self,
        settings: AzureSettings,
        *,
        credential: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        # the wall clock the eviction look-back starts from (a test hands in its stand-in's clock, so the
        # activity log's window and the events it stamps agree)
        self._now = now or _wall_clock
        self._az = _sdk()
        base_url = settings.base_url
        if base_url is not None and not base_url.startswith("https://") and not _loopback_http(base_url):
            raise InvalidRequest(
                f"azure.base_url {base_url!r}: a bearer token goes over https only (plain http to a loopback "
                "fake excepted)",
                cloud=CLOUD,
            )
        if credential is None:
            if settings.credential == "access-token-env":
                credential = _EnvTokenCredential(self._az.AccessToken)
            else:
                credential = _default_credential()
        self._credential = credential
        self._rg = settings.resource_group
        self._sub = settings.subscription_id
        self._compute = self._az.ComputeManagementClient(
            credential,
            settings.subscription_id,
            base_url=base_url,
            polling_interval=settings.polling_interval_seconds,
            authentication_policy=self._az.LoopbackAuthPolicy(credential, ARM_SCOPE),
            retry_policy=self._az.NoThrottleRetry(retry_total=3),
            connection_timeout=settings.timeout_seconds,
            read_timeout=settings.timeout_seconds,
        )
        # ARM calls azure-mgmt-compute has no operation for (the activity log), with the same credential
        self._arm = self._az.PipelineClient(
            base_url=base_url or "https://management.azure.com",
            policies=[
                self._az.UserAgentPolicy(sdk_moniker="gpuplan"),
                self._az.NoThrottleRetry(retry_total=3),
                self._az.LoopbackAuthPolicy(credential, ARM_SCOPE),
            ],
        )
        self._prices = self._az.PipelineClient(
            base_url=settings.prices_url,
            policies=[
                self._az.UserAgentPolicy(sdk_moniker="gpuplan"),
                self._az.NoThrottleRetry(retry_total=3),
            ],
        )

    # -- the boundary -----------------------------------------------------------------------------------

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        """``fn()`` (one SDK call, a poller's result or a listing drained), with azure errors mapped and
        Throttled retried under the settings' policy."""

        return sdk_call(
            fn,
            operation,
            errors=self._az.AzureError,
            to_provider_error=map_error,
            policy=self.settings.retry,
            sleep=self._sleep,
            logger=log,
        )

    def _finish(self, poller: Any, operation: str) -> Any:
        """A long-running operation's result, waited for at most ``operation_timeout_seconds`` (azure-core's
        poller follows Azure-AsyncOperation / Location and Retry-After); Timeout after that. A Failed
        operation raises the SDK's error, which ``_call`` maps."""
        limit = self.settings.operation_timeout_seconds
        poller.wait(timeout=limit)
        if not poller.done():
            raise Timeout(
                f"operation still running after {limit:g}s (status {poller.status()}); it goes on in Azure, "
                "the next inventory shows what it did",
                cloud=CLOUD,
                operation=operation,
            )
        return poller.result()

    def handles(self, offering: str) -> bool:
        return offering.startswith(f"{CLOUD}:")

    # -- ids --------------------------------------------------------------------------------------------

    def _id(self, kind: str, name: str) -> str:
        return (
            f"/subscriptions/{self._sub}/resourceGroups/{self._rg}/providers/Microsoft.Compute/{kind}/{name}"
        )

    def _split(self, offering: str) -> tuple[str, str]:
        cloud, region, sku = parse_offering(offering)
        if cloud != CLOUD:
            raise InvalidRequest(f"not an azure offering: {offering}", cloud=CLOUD)
        return region, sku

    # -- offerings and prices ---------------------------------------------------------------------------

    def offerings(self, regions: Sequence[str]) -> list[OfferingInfo]:
        """GPU VM sizes from resource_skus: those with a ``GPUs`` capability, not restricted for this
        subscription in the region. ARM gives the GPU count, not the model or memory: the model is read
        from the size name, memory is left to the catalog."""
        out: list[OfferingInfo] = []
        for region in regions:
            skus = self._call(f"list skus {region}", functools.partial(self._list_skus, region))
            for sku in skus:
                if (sku.resource_type or "") != "virtualMachines" or not sku.name:
                    continue
                if sku.locations and region.lower() not in {loc.lower() for loc in sku.locations}:
                    continue
                if any(getattr(r, "type", None) == "Location" for r in sku.restrictions or []):
                    continue
                caps = {c.name: c.value for c in sku.capabilities or [] if c.name}
                gpus = int(float(caps.get("GPUs") or 0))
                if gpus <= 0:
                    continue
                model = _GPU_MODEL.search(sku.name)
                rdma = str(caps.get("RdmaEnabled", "")).lower() == "true"
                out.append(
                    OfferingInfo(
                        offering=f"{CLOUD}:{region}:{sku.name}",
                        gpu_model=model.group(1) if model else None,
                        gpus_per_node=gpus,
                        gpu_memory_gb=None,
                        fabric="infiniband" if rdma and _infiniband_sku(sku.name) else None,
                    )
                )
        return out

    def spot_prices(self, offerings: Sequence[str]) -> list[SpotPrice]:
        """Linux spot prices from the Azure Retail Prices API (public, no credential): the ``... Spot`` meter
        of the size in the region, the newest per offering. Offerings with no such meter are left out."""
        out: list[SpotPrice] = []
        for offering in offerings:
            if not self.handles(offering):
                continue
            region, sku = self._split(offering)
            flt = f"armRegionName eq '{region}' and armSkuName eq '{sku}' and priceType eq 'Consumption'"
            items = self._call(f"spot price {sku} {region}", functools.partial(self._price_items, flt))
            spot = [
                i
                for i in items
                if str(i.get("skuName", "")).endswith(" Spot")
                and "windows" not in str(i.get("productName", "")).lower()
                and i.get("currencyCode", "USD") == "USD"
                and str(i.get("unitOfMeasure", "1 Hour")) == "1 Hour"
            ]
            if not spot:
                continue
            newest = max(spot, key=lambda i: str(i.get("effectiveStartDate", "")))
            out.append(
                SpotPrice(
                    offering=offering,
                    usd_per_hour=float(newest.get("retailPrice") or newest.get("unitPrice") or 0.0),
                    at=_parse_time(newest.get("effectiveStartDate")) or datetime.now(UTC),
                )
            )
        return out

    def _list_usages(self, region: str) -> list[Any]:
        return list(self._compute.usage.list(region))

    def _list_skus(self, region: str) -> list[Any]:
        return list(self._compute.resource_skus.list(filter=f"location eq '{region}'"))

    def _price_items(self, flt: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        request = self._az.HttpRequest("GET", self.settings.prices_url, params={"$filter": flt})
        for _ in range(20):  # pages; a handful at most for one size in one region
            response = self._prices.send_request(request)
            response.raise_for_status()
            body = response.json()
            items.extend(body.get("Items") or [])
            nxt = body.get("NextPageLink")
            if not nxt:
                break
            request = self._az.HttpRequest("GET", nxt)
        return items

    # -- inventory --------------------------------------------------------------------------------------

    def _scale_sets(self) -> list[_ScaleSet]:
        raw = self._call(
            "list scale sets", lambda: list(self._compute.virtual_machine_scale_sets.list(self._rg))
        )
        return [_scale_set(s) for s in raw]

    def _get_scale_set(self, name: str) -> _ScaleSet | None:
        try:
            raw = self._call(
                f"get scale set {name}", lambda: self._compute.virtual_machine_scale_sets.get(self._rg, name)
            )
        except NotFound:
            return None
        return _scale_set(raw)

    def _vms(self, scale_set: str) -> list[Any]:
        return self._call(
            f"list VMs of {scale_set}",
            lambda: list(
                self._compute.virtual_machine_scale_set_vms.list(self._rg, scale_set, expand="instanceView")
            ),
        )

    def _nodes(self, vmss: _ScaleSet, vms: Sequence[Any]) -> list[Node]:
        capacity = CapacityType.SPOT if vmss.priority == "Spot" else CapacityType.ON_DEMAND
        return [
            Node(
                id=vm.id or f"{vmss.name}/{vm.instance_id}",
                offering=f"{CLOUD}:{vmss.location}:{vmss.sku}",
                capacity=capacity,
                pool=vmss.tags.get(TAG_POOL, vmss.name),
                run=vmss.tags.get(TAG_RUN),
                placement_group=vmss.placement_group,
                reservation=vmss.reservation,
                state=_vm_state(vm),
                zone=(getattr(vm, "zones", None) or [None])[0],
                launched=getattr(getattr(vm, "properties", None), "time_created", None),
                tags=dict(vmss.tags),
            )
            for vm in vms
        ]

    def inventory(self, plan_id: str) -> Inventory:
        """Scale sets, proximity placement groups and capacity reservation groups in the resource group
        tagged ``gpuplan-plan = safe_name(plan_id)``; nodes are the VMs of those scale sets."""
        ours = {TAG_PLAN: safe_name(plan_id)}
        nodes: list[Node] = []
        for vmss in self._scale_sets():
            if tags_match(vmss.tags, ours):
                nodes.extend(self._nodes(vmss, self._vms(vmss.name)))
        ppgs = self._call(
            "list proximity placement groups",
            lambda: list(self._compute.proximity_placement_groups.list_by_resource_group(self._rg)),
        )
        groups = [
            PlacementGroup(
                name=p.name,
                region=p.location,
                run=(p.tags or {}).get(TAG_RUN),
                id=p.id,
                state="available",
                tags=dict(p.tags or {}),
            )
            for p in ppgs
            if tags_match(p.tags or {}, ours)
        ]
        crgs = self._call(
            "list capacity reservation groups",
            lambda: list(self._compute.capacity_reservation_groups.list_by_resource_group(self._rg)),
        )
        reservations = [self._reservation(g) for g in crgs if tags_match(g.tags or {}, ours)]
        return Inventory(tuple(nodes), tuple(groups), tuple(r for r in reservations if r is not None))

    def _reservation(self, group: Any) -> CapacityReservation | None:
        """A capacity reservation group as one CapacityReservation: its SKU and the capacity it holds (None
        when it holds no reservation yet)."""
        items = self._call(
            f"list reservations of {group.name}",
            lambda: list(
                self._compute.capacity_reservations.list_by_capacity_reservation_group(self._rg, group.name)
            ),
        )
        if not items:
            return None
        sku = items[0].sku.name
        state = (getattr(items[0].properties, "provisioning_state", None) or "succeeded").lower()
        tags = dict(group.tags or {})
        return CapacityReservation(
            name=group.name,
            offering=f"{CLOUD}:{group.location}:{sku}",
            nodes=sum(int(r.sku.capacity or 0) for r in items if r.sku.name == sku),
            placement_group=None,
            run=tags.get(TAG_RUN),
            id=group.id,
            state="active" if state == "succeeded" else state,
            tags=tags,
        )

    # -- placement groups -------------------------------------------------------------------------------

    def ensure_placement_group(self, spec: PlacementGroupSpec) -> PlacementGroup:
        """A Standard proximity placement group whose intent is the gang's VM size. ARM's PUT is an upsert,
        so the adapter reads first: ours is adopted, a stranger's name is a Conflict (never overwritten)."""
        region, sku = self._split(spec.offering)
        name = safe_name(spec.name)
        ops = self._compute.proximity_placement_groups

        def existing() -> PlacementGroup | None:
            try:
                got = self._call(f"get proximity placement group {name}", lambda: ops.get(self._rg, name))
            except NotFound:
                return None
            if not tags_match(got.tags or {}, spec.tags):
                raise Conflict(
                    f"proximity placement group {name} exists without our tags",
                    cloud=CLOUD,
                    operation="ensure placement group",
                )
            return _placement_group(got)

        found = existing()
        if found is not None:
            log.info("proximity placement group %s exists with our tags: adopted", name)
            return found
        body = {
            "location": region,
            "tags": dict(spec.tags),
            "properties": {"proximityPlacementGroupType": "Standard", "intent": {"vmSizes": [sku]}},
        }
        log.info("creating proximity placement group %s in %s for %s", name, region, sku)
        try:
            made = self._call(
                f"create proximity placement group {name}",
                lambda: ops.create_or_update(self._rg, name, self._az.models.ProximityPlacementGroup(body)),
            )
        except Conflict:
            found = existing()  # made meanwhile by another apply: ours or not
            if found is None:
                raise
            log.info("proximity placement group %s was made meanwhile with our tags: adopted", name)
            return found
        return _placement_group(made)

    def delete_placement_group(self, group: PlacementGroup) -> None:
        log.info("deleting proximity placement group %s", group.name)
        try:
            self._call(
                f"delete proximity placement group {group.name}",
                lambda: self._compute.proximity_placement_groups.delete(self._rg, group.name),
            )
        except NotFound:
            log.info("proximity placement group %s was gone already", group.name)

    # -- capacity reservations --------------------------------------------------------------------------

    def ensure_reservation(self, spec: ReservationSpec) -> CapacityReservation:
        """A capacity reservation group named ``spec.name`` with one reservation (same name) of the SKU for
        ``spec.nodes`` VMs, polled to completion; a group without our tags is a Conflict. When Azure cannot
        reserve (all or nothing), a group this call made is deleted again."""
        region, sku = self._split(spec.offering)
        name = safe_name(spec.name)
        groups = self._compute.capacity_reservation_groups
        created = False
        try:
            group = self._call(f"get capacity reservation group {name}", lambda: groups.get(self._rg, name))
        except NotFound:
            group = None
        if group is not None:
            if not tags_match(group.tags or {}, spec.tags):
                raise Conflict(
                    f"capacity reservation group {name} exists without our tags",
                    cloud=CLOUD,
                    operation="ensure reservation",
                )
            current = self._reservation(group)
            if current is not None and current.offering == spec.offering and current.nodes == spec.nodes:
                log.info(
                    "capacity reservation %s (%d x %s) exists with our tags: adopted", name, spec.nodes, sku
                )
                return current
        else:
            log.info("creating capacity reservation group %s in %s", name, region)
            body: dict[str, Any] = {"location": region, "tags": dict(spec.tags)}
            group = self._call(
                f"create capacity reservation group {name}",
                lambda: groups.create_or_update(
                    self._rg, name, self._az.models.CapacityReservationGroup(body)
                ),
            )
            created = True
        reservation = {
            "location": region,
            "tags": dict(spec.tags),
            "sku": {"name": sku, "capacity": spec.nodes},
        }
        log.info("reserving %d x %s in capacity reservation group %s", spec.nodes, sku, name)
        try:
            self._call(
                f"create capacity reservation {name}",
                lambda: self._finish(
                    self._compute.capacity_reservations.begin_create_or_update(
                        self._rg, name, name, self._az.models.CapacityReservation(reservation)
                    ),
                    f"create capacity reservation {name}",
                ),
            )
        except ProviderError:
            if created:  # a failed reservation stays as a resource in state Failed: it goes first
                self._cleanup(
                    f"delete capacity reservation {name}/{name}",
                    functools.partial(self._delete_reservation, name, name),
                )
                self._cleanup(
                    f"delete capacity reservation group {name}",
                    lambda: self._finish(groups.begin_delete(self._rg, name), f"delete group {name}"),
                )
            raise
        return CapacityReservation(
            name=name,
            offering=spec.offering,
            nodes=spec.nodes,
            placement_group=None,
            run=spec.tags.get(TAG_RUN),
            id=group.id or self._id("capacityReservationGroups", name),
            tags=dict(spec.tags),
        )

    def release_reservation(self, reservation: CapacityReservation) -> None:
        """Delete the group's reservations, then the group (ARM deletes only an empty group); gone = done."""
        name = reservation.name
        log.info("releasing capacity reservation group %s", name)
        try:
            items = self._call(
                f"list reservations of {name}",
                lambda: list(
                    self._compute.capacity_reservations.list_by_capacity_reservation_group(self._rg, name)
                ),
            )
        except NotFound:
            log.info("capacity reservation group %s was gone already", name)
            return
        for item in items:
            log.info("deleting capacity reservation %s/%s", name, item.name)
            with contextlib.suppress(NotFound):
                self._call(
                    f"delete capacity reservation {name}/{item.name}",
                    functools.partial(self._delete_reservation, name, item.name),
                )
        try:
            self._call(
                f"delete capacity reservation group {name}",
                lambda: self._finish(
                    self._compute.capacity_reservation_groups.begin_delete(self._rg, name),
                    f"delete group {name}",
                ),
            )
        except NotFound:
            log.info("capacity reservation group %s was gone already", name)

    # -- nodes ------------------------------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> list[Node]:
        """Set the pool's (or gang's) scale set to ``spec.target`` VMs and return the VMs that are new.

        - The PUT carries the scale set's etag (``If-Match``; ``If-None-Match: *`` for a new one), so a write
          another client made between our read and our PUT is never overwritten: ARM answers 412, as it
          answers 409 to a concurrent request; the adapter reads the scale set again and resends, at most
          ``conflict_retries`` times, then raises Conflict.
        - A scale-out that ends Failed part way (AllocationFailed, OverconstrainedAllocationRequest, a quota)
          leaves the VMs ARM made and, in state Failed, those it could not: a gang (all or nothing) deletes
          every VM this launch made (the scale set too if it had none) and raises the error naming how many
          it got; a pool keeps the VMs that run, deletes the failed ones and raises with ``launched`` set.
        - Timeout leaves everything as it is: the operation goes on in Azure and the next reconcile sees it.
        """
        region, sku = self._split(spec.offering)
        if self.settings.ssh_public_key is None:
            raise InvalidRequest(
                "launch needs the setting azure.ssh_public_key", cloud=CLOUD, operation="launch"
            )
        if self.settings.subnet_id is None:
            raise InvalidRequest("launch needs the setting azure.subnet_id", cloud=CLOUD, operation="launch")
        if spec.fabric not in (None, "infiniband"):
            raise InvalidRequest(
                f"fabric {spec.fabric} is not an Azure fabric", cloud=CLOUD, operation="launch"
            )
        if spec.fabric == "infiniband" and not _infiniband_sku(sku):
            raise InvalidRequest(
                f"{sku} has no InfiniBand (an ND...r size has)", cloud=CLOUD, operation="launch"
            )
        name = safe_name(spec.run if spec.run is not None else spec.pool)
        priority = "Spot" if spec.capacity is CapacityType.SPOT else "Regular"
        operation = f"create or update scale set {name}"
        first_ids: set[str] | None = None  # the VMs before this launch: a retry's re-read may see ours
        for attempt in range(self.settings.conflict_retries + 1):
            raw = self._get_scale_set_raw(name)
            before = _scale_set(raw) if raw is not None else None
            if before is not None:
                if not tags_match(before.tags, spec.tags):
                    raise Conflict(
                        f"scale set {name} exists without our tags", cloud=CLOUD, operation="launch"
                    )
                if before.sku != sku or before.priority != priority or before.location != region:
                    raise Conflict(
                        f"scale set {name} runs {before.priority} {before.sku} in {before.location}, "
                        f"not {priority} {sku} in {region}",
                        cloud=CLOUD,
                        operation="launch",
                    )
            before_vms = self._vms(name) if before is not None else []
            if first_ids is None:
                first_ids = {vm.instance_id for vm in before_vms}
            before_ids = first_ids
            current = before.capacity if before is not None else 0
            target = spec.target if spec.target is not None else current + spec.count
            if target < current:
                # a lower capacity would make Azure delete VMs of its own choosing: removing nodes is
                # terminate's job (it names them), so launch never scales in
                log.warning(
                    "scale set %s holds %d VMs, more than the target %d: left as it is", name, current, target
                )
                target = current
            body = self._scale_set_body(spec, name, region, sku, priority, target)
            log.info(
                "launching scale set %s: %s %s in %s to %d VMs (had %d)%s%s",
                name,
                priority,
                sku,
                region,
                target,
                len(before_vms),
                f", placement group {spec.placement_group}" if spec.placement_group else "",
                f", reservation {spec.reservation}" if spec.reservation else "",
            )
            etag = getattr(raw, "etag", None) if raw is not None else None
            condition = (
                self._az.MatchConditions.IfNotModified
                if etag
                else self._az.MatchConditions.IfMissing
                if raw is None
                else None
            )
            try:
                self._call(
                    operation, functools.partial(self._put_scale_set, name, body, etag, condition, operation)
                )
            except Conflict as exc:
                if attempt == self.settings.conflict_retries:
                    raise Conflict(
                        f"scale set {name} was changed by another writer on each of {attempt + 1} tries "
                        f"({exc.message})",
                        cloud=CLOUD,
                        operation="launch",
                        code=exc.code,
                    ) from exc
                wait = self.settings.retry.delay(attempt, _RNG)
                log.warning(
                    "scale set %s changed under us (%s): reading it again, retry %d in %.2f s",
                    name,
                    exc.code,
                    attempt + 1,
                    wait,
                )
                self._sleep(wait)
                continue
            except Timeout:
                raise
            except ProviderError as exc:
                raise self._failed_launch(spec, name, before_ids, target, exc) from exc
            break
        after = self._get_scale_set(name)
        after_vms = self._vms(name)
        new = [vm for vm in after_vms if vm.instance_id not in before_ids]
        if spec.all_or_nothing and len(after_vms) < target:
            short = InsufficientCapacity(
                f"gang {spec.run} got {len(after_vms)} of {target} VMs",
                cloud=CLOUD,
                operation="launch",
            )
            self._scale_back(name, before_ids, target, short)
            raise short
        log.info("scale set %s holds %d VMs, %d new", name, len(after_vms), len(new))
        return self._nodes(after or _scale_set_from_body(name, body), new)

    def _put_scale_set(
        self, name: str, body: dict[str, Any], etag: str | None, condition: Any, operation: str
    ) -> Any:
        return self._finish(
            self._compute.virtual_machine_scale_sets.begin_create_or_update(
                self._rg,
                name,
                self._az.models.VirtualMachineScaleSet(body),
                etag=etag,
                match_condition=condition,
            ),
            operation,
        )

    def _get_scale_set_raw(self, name: str) -> Any:
        try:
            return self._call(
                f"get scale set {name}", lambda: self._compute.virtual_machine_scale_sets.get(self._rg, name)
            )
        except NotFound:
            return None

    def _failed_launch(
        self, spec: LaunchSpec, name: str, before_ids: set[str], target: int, cause: ProviderError
    ) -> ProviderError:
        """The error a scale-out that ended Failed raises, after the undo its kind needs (see ``launch``):
        the cause's kind and code, with what the launch got in the message."""
        asked = target - len(before_ids)
        try:
            vms = self._vms(name)
        except ProviderError as exc:
            if not isinstance(exc, NotFound):
                log.error("cannot list scale set %s after its failed launch: %s", name, exc)
            vms = []
        new = [vm for vm in vms if vm.instance_id not in before_ids]
        running = [vm for vm in new if _vm_state(vm) != "failed"]
        failed = [vm.instance_id for vm in new if _vm_state(vm) == "failed"]
        kind = type(cause)
        if spec.all_or_nothing:
            self._scale_back(name, before_ids, target, cause)
            return kind(
                f"gang {spec.run} got {len(running)} of the {asked} VMs it asked for, then {cause.code}: "
                f"{cause.message}; a gang is all or nothing, so the VMs this launch made were deleted",
                cloud=CLOUD,
                operation="launch",
                code=cause.code,
            )
        if failed:
            log.info("scale set %s: deleting the %d VMs Azure could not start", name, len(failed))
            self._cleanup(f"delete failed VMs of {name}", lambda: self._delete_instances(name, failed))
        vmss = self._get_scale_set(name)
        launched = tuple(self._nodes(vmss, running)) if vmss is not None else ()
        return kind(
            f"pool {spec.pool} got {len(running)} of the {asked} VMs it asked for, then {cause.code}: "
            f"{cause.message}; the {len(running)} running stay",
            cloud=CLOUD,
            operation="launch",
            code=cause.code,
            launched=launched,
        )

    def _scale_set_body(
        self, spec: LaunchSpec, name: str, region: str, sku: str, priority: str, target: int
    ) -> dict[str, Any]:
        s = self.settings
        profile: dict[str, Any] = {
            "priority": priority,
            "osProfile": {
                "computerNamePrefix": name[:15].rstrip("-"),
                "adminUsername": s.admin_username,
                "linuxConfiguration": {
                    "disablePasswordAuthentication": True,
                    "ssh": {
                        "publicKeys": [
                            {
                                "path": f"/home/{s.admin_username}/.ssh/authorized_keys",
                                "keyData": s.ssh_public_key,
                            }
                        ]
                    },
                },
            },
            "storageProfile": {
                "imageReference": s.image.model_dump(),
                "osDisk": {
                    "createOption": "FromImage",
                    "caching": "ReadWrite",
                    "managedDisk": {"storageAccountType": "Premium_LRS"},
                },
            },
            "networkProfile": {
                "networkInterfaceConfigurations": [
                    {
                        "name": "nic0",
                        "properties": {
                            "primary": True,
                            "enableAcceleratedNetworking": True,
                            "ipConfigurations": [
                                {"name": "ip0", "properties": {"subnet": {"id": s.subnet_id}}}
                            ],
                        },
                    }
                ]
            },
        }
        if priority == "Spot":
            profile["evictionPolicy"] = "Delete"
            profile["billingProfile"] = {"maxPrice": -1}
        if spec.reservation:
            if spec.placement_group:
                raise InvalidRequest(
                    f"{spec.run or spec.pool}: a scale set cannot join a proximity placement group and a "
                    "capacity reservation group at once (Azure has no Capability.GANG_RESERVATIONS)",
                    cloud=CLOUD,
                    operation="launch",
                )
            rid = self._id("capacityReservationGroups", safe_name(spec.reservation))
            profile["capacityReservation"] = {"capacityReservationGroup": {"id": rid}}
        props: dict[str, Any] = {
            "orchestrationMode": "Uniform",
            "upgradePolicy": {"mode": "Manual"},
            "overprovision": False,
            # a gang's VMs share one InfiniBand fabric only inside one placement group (at most 100 VMs)
            "singlePlacementGroup": spec.all_or_nothing,
            "virtualMachineProfile": profile,
        }
        if spec.placement_group:
            ppg = self._id("proximityPlacementGroups", safe_name(spec.placement_group))
            props["proximityPlacementGroup"] = {"id": ppg}
        return {
            "location": region,
            "tags": dict(spec.tags),
            "sku": {"name": sku, "tier": "Standard", "capacity": target},
            "properties": props,
        }

    def _scale_back(self, name: str, before_ids: set[str], target: int, cause: ProviderError) -> None:
        """Undo a gang launch that ended short of ``target``: delete the VMs it made, or the whole scale set
        if it had none before. A failure here is logged; the launch's own error is what the caller sees."""
        try:
            vms = self._vms(name)
        except ProviderError as exc:
            if not isinstance(exc, NotFound):
                log.error("cannot list scale set %s to scale it back: %s", name, exc)
            return
        if sum(_vm_state(vm) != "failed" for vm in vms) >= target:
            return
        if not before_ids:
            log.info(
                "gang scale set %s ended with %d of %d VMs (%s): deleting it",
                name,
                len(vms),
                target,
                cause.code,
            )
            self._cleanup(
                f"delete scale set {name}",
                lambda: self._finish(
                    self._compute.virtual_machine_scale_sets.begin_delete(self._rg, name),
                    f"delete scale set {name}",
                ),
            )
            return
        new = [vm.instance_id for vm in vms if vm.instance_id not in before_ids]
        log.info(
            "gang scale set %s ended with %d of %d VMs (%s): deleting the %d it made",
            name,
            len(vms),
            target,
            cause.code,
            len(new),
        )
        # deleteInstances lowers the scale set's capacity with the VMs it deletes: back to what it had
        self._cleanup(f"scale back {name}", lambda: self._delete_instances(name, new))

    def _cleanup(self, what: str, fn: Callable[[], object]) -> None:
        """Undo step of a failed call: gone already is done, any other failure is logged, not raised (the
        caller raises the failure that made it undo)."""
        log.info("undoing: %s", what)
        try:
            self._call(what, fn)
        except NotFound:
            pass
        except ProviderError as exc:
            log.error("%s failed: %s", what, exc)

    def _delete_reservation(self, group: str, name: str) -> None:
        self._finish(
            self._compute.capacity_reservations.begin_delete(self._rg, group, name),
            f"delete capacity reservation {group}/{name}",
        )

    def _delete_instances(self, name: str, instance_ids: Sequence[str]) -> None:
        if not instance_ids:
            return
        log.info("deleting %d VMs of scale set %s: %s", len(instance_ids), name, ", ".join(instance_ids))
        self._finish(
            self._compute.virtual_machine_scale_sets.begin_delete_instances(
                self._rg, name, {"instanceIds": list(instance_ids)}
            ),
            f"delete instances of {name}",
        )

    def terminate(self, nodes: Sequence[Node]) -> None:
        """deleteInstances per scale set with the nodes' instance ids; VMs (or scale sets) already gone are
        done. Azure lowers the scale set's capacity by the VMs deleted."""
        by_set: dict[str, list[str]] = {}
        for node in nodes:
            scale_set, instance = _parse_node_id(node.id)
            by_set.setdefault(scale_set, []).append(instance)
        for scale_set, ids in by_set.items():
            try:
                live = {vm.instance_id for vm in self._vms(scale_set)}
            except NotFound:
                log.info("scale set %s was gone already: %d VMs done", scale_set, len(ids))
                continue
            present = [i for i in ids if i in live]
            if len(present) < len(ids):
                log.info("%d VMs of scale set %s were gone already", len(ids) - len(present), scale_set)
            try:
                self._call(
                    f"delete instances of {scale_set}",
                    functools.partial(self._delete_instances, scale_set, present),
                )
            except NotFound:
                log.info("scale set %s was gone already", scale_set)

    # -- quotas -----------------------------------------------------------------------------------------

    def quotas(self, wanted: Sequence[tuple[str, CapacityType]]) -> list[Quota]:
        """Compute usages of each region (``GET .../locations/{region}/usages``, what ``az vm list-usage``
        shows) that launches of ``wanted`` count against, in vCPUs:

        - on demand: the size's family quota (``standardNDSH100v5Family``) and the total regional vCPUs
          (``cores``);
        - spot: the total regional spot vCPUs (``lowPriorityCores``), one bucket for every family; spot VMs
          do not count against the family quota.

        The family and the vCPUs of a size come from the resource SKU (its ``family`` is the usage's name,
        its ``vCPUs`` capability the units), as AzManagers.jl's quota check reads them; a size the SKU list
        omits falls back to the documented family names (``_FAMILIES``) and the vCPU count in the size's
        name. https://learn.microsoft.com/rest/api/compute/usage/list ,
        https://learn.microsoft.com/azure/virtual-machines/spot-vms ("Quota")."""
        by_region: dict[str, list[tuple[str, str, CapacityType]]] = {}
        for offering, capacity in wanted:
            if self.handles(offering):
                region, sku = self._split(offering)
                by_region.setdefault(region, []).append((offering, sku, capacity))
        out: list[Quota] = []
        for region, items in sorted(by_region.items()):
            skus = {
                (k.name or "").lower(): k
                for k in self._call(f"list skus {region}", functools.partial(self._list_skus, region))
                if (k.resource_type or "") == "virtualMachines"
            }
            usages = self._call(f"list usages {region}", functools.partial(self._list_usages, region))
            by_name = {str(u.name.value).lower(): u for u in usages if u.name is not None and u.name.value}
            counted: dict[str, dict[tuple[str, CapacityType], float]] = {}
            for offering, sku, capacity in items:
                family, vcpus = _family_and_vcpus(sku, skus.get(sku.lower()))
                if vcpus is None:
                    log.warning("%s: vCPUs unknown, its quotas are not checked", offering)
                    continue
                names = ["lowPriorityCores"] if capacity is CapacityType.SPOT else ["cores"]
                if capacity is not CapacityType.SPOT:
                    if family is None:
                        log.warning("%s: VM family unknown, its family quota is not checked", offering)
                    else:
                        names.insert(0, family)
                for quota in names:
                    counted.setdefault(quota.lower(), {})[(offering, capacity)] = float(vcpus)
            for key, per_node in counted.items():
                usage = by_name.get(key)
                if usage is None:  # not reported by the cloud: left out, never guessed
                    log.info("no usage %s in %s: not checked", key, region)
                    continue
                label = usage.name.localized_value or usage.name.value
                out.append(
                    Quota(
                        name=f"{label} ({usage.name.value})" if label != usage.name.value else label,
                        region=region,
                        limit=float(usage.limit),
                        used=float(usage.current_value),
                        unit="vCPUs",
                        per_node=per_node,
                    )
                )
        return out

    def interruptions(self, plan_id: str) -> list[Interruption]:
        """Spot evictions of the VMs of our spot scale sets, as the management plane shows them:

        1. the activity log: Azure writes an ``evictSpotVM/action`` operation
           (``Microsoft.Compute/virtualMachineScaleSets/virtualMachines/evictSpotVM/action`` for a scale set's
           VM) when it starts an eviction; the notice's deadline is the event's time plus the 30 s of the
           Preempt scheduled event (:data:`PREEMPT_NOTICE`). Events for a whole scale set, naming no VM, are
           logged and left to (2) and the inventory;
        2. the VM's instance view: a VM evicted under evictionPolicy Deallocate stays,
           ``PowerState/deallocating`` then ``deallocated`` (gpuplan never deallocates its own VMs); its
           deadline is now (or the status's time): the node is already being taken.

        Under evictionPolicy Delete (what gpuplan launches) an evicted VM leaves the list, and ARM lowers the
        scale set's capacity with it: (1) is the notice. The Scheduled Events endpoint itself is served
        inside the VM only (169.254.169.254), not to the control plane. A VM may be reported again in a
        later call while its events are younger than ``eviction_lookback_minutes``: callers drop repeats.
        https://learn.microsoft.com/rest/api/monitor/activity-logs/list"""
        ours = {TAG_PLAN: safe_name(plan_id)}
        now = self._now()
        spot = {
            vmss.name.lower(): vmss
            for vmss in self._scale_sets()
            if vmss.priority == "Spot" and tags_match(vmss.tags, ours)
        }
        if not spot:
            return []
        found: dict[str, Interruption] = {}

        def notice(vmss: _ScaleSet, node_id: str, at: datetime, deadline: datetime) -> Interruption:
            return Interruption(
                node_id=node_id,
                kind="interruption",
                at=at,
                offering=f"{CLOUD}:{vmss.location}:{vmss.sku}",
                pool=vmss.tags.get(TAG_POOL),
                run=vmss.tags.get(TAG_RUN),
                deadline=deadline,
            )

        since = now - timedelta(minutes=self.settings.eviction_lookback_minutes)
        for event in self._call("read activity log", functools.partial(self._eviction_events, since)):
            resource = str(event.get("resourceId") or "")
            m = _NODE_ID.search(resource)
            if m is None:
                log.info("eviction in scale set %s names no VM: left to the inventory", resource)
                continue
            vmss = spot.get(m.group(1).lower())
            if vmss is None:
                continue
            at = _parse_time(event.get("eventTimestamp")) or now
            node_id = f"{self._id('virtualMachineScaleSets', vmss.name)}/virtualMachines/{m.group(2)}"
            seen = found.get(node_id.lower())
            if seen is None or at < seen.at:
                found[node_id.lower()] = notice(vmss, node_id, at, at + PREEMPT_NOTICE)
        for vmss in spot.values():
            for vm in self._vms(vmss.name):
                if _power_state(vm) not in ("deallocating", "deallocated"):
                    continue
                node_id = vm.id or f"{vmss.name}/{vm.instance_id}"
                if node_id.lower() not in found:
                    at = _power_state_time(vm) or now
                    found[node_id.lower()] = notice(vmss, node_id, at, min(at, now))
        return sorted(found.values(), key=lambda i: (i.at, i.node_id))

    def _eviction_events(self, since: datetime) -> list[dict[str, Any]]:
        """The resource group's activity log since ``since``, only the spot eviction operations (paged by
        ``nextLink``; a handful of pages at most)."""
        base = (self.settings.base_url or "https://management.azure.com").rstrip("/")
        url = f"{base}/subscriptions/{self._sub}/providers/Microsoft.Insights/eventtypes/management/values"
        flt = f"eventTimestamp ge '{since:%Y-%m-%dT%H:%M:%SZ}' and resourceGroupName eq '{self._rg}'"
        request = self._az.HttpRequest(
            "GET",
            url,
            params={
                "api-version": "2015-04-01",
                "$filter": flt,
                "$select": "eventTimestamp,operationName,resourceId,status",
            },
        )
        events: list[dict[str, Any]] = []
        for _ in range(50):
            response = self._arm.send_request(
                request,
                connection_timeout=self.settings.timeout_seconds,
                read_timeout=self.settings.timeout_seconds,
            )
            response.raise_for_status()
            body = response.json()
            for event in body.get("value") or []:
                operation = str((event.get("operationName") or {}).get("value") or "").lower()
                status = str((event.get("status") or {}).get("value") or "").lower()
                if operation.endswith(_EVICTION_OPERATION) and status != "failed":
                    events.append(event)
            nxt = body.get("nextLink")
            if not nxt:
                break
            request = self._az.HttpRequest("GET", nxt)
        return events


# ----------------------------------------------------------------------------------------------------------
# helpers over SDK models


def _name_from_id(resource_id: str | None) -> str | None:
    return resource_id.rstrip("/").rsplit("/", 1)[-1] if resource_id else None


def _scale_set(raw: Any) -> _ScaleSet:
    props = raw.properties
    profile = getattr(props, "virtual_machine_profile", None)
    raw_priority = getattr(profile, "priority", None) or "Regular"
    priority = str(getattr(raw_priority, "value", raw_priority))  # the SDK's str enums print their names
    ppg = getattr(getattr(props, "proximity_placement_group", None), "id", None)
    crg = getattr(
        getattr(getattr(profile, "capacity_reservation", None), "capacity_reservation_group", None),
        "id",
        None,
    )
    return _ScaleSet(
        name=raw.name,
        location=raw.location,
        sku=raw.sku.name,
        capacity=int(raw.sku.capacity or 0),
        priority="Spot" if priority.lower() == "spot" else "Low" if priority.lower() == "low" else "Regular",
        tags=dict(raw.tags or {}),
        placement_group=_name_from_id(ppg),
        reservation=_name_from_id(crg),
    )


def _scale_set_from_body(name: str, body: Mapping[str, Any]) -> _ScaleSet:
    profile = body["properties"]["virtualMachineProfile"]
    return _ScaleSet(
        name=name,
        location=body["location"],
        sku=body["sku"]["name"],
        capacity=body["sku"]["capacity"],
        priority=profile["priority"],
        tags=body["tags"],
        placement_group=_name_from_id(body["properties"].get("proximityPlacementGroup", {}).get("id")),
        reservation=_name_from_id(
            profile.get("capacityReservation", {}).get("capacityReservationGroup", {}).get("id")
        ),
    )


def _placement_group(raw: Any) -> PlacementGroup:
    tags = dict(raw.tags or {})
    return PlacementGroup(name=raw.name, region=raw.location, run=tags.get(TAG_RUN), id=raw.id, tags=tags)


def _statuses(vm: Any) -> list[str]:
    view = getattr(getattr(vm, "properties", None), "instance_view", None)
    return [str(s.code) for s in getattr(view, "statuses", None) or [] if getattr(s, "code", None)]


def _power_state(vm: Any) -> str | None:
    for code in _statuses(vm):
        if code.startswith("PowerState/"):
            return code.split("/", 1)[1].lower()
    return None


def _power_state_time(vm: Any) -> datetime | None:
    view = getattr(getattr(vm, "properties", None), "instance_view", None)
    for status in getattr(view, "statuses", None) or []:
        if str(getattr(status, "code", "")).startswith("PowerState/"):
            when = getattr(status, "time", None)
            return when if isinstance(when, datetime) else _parse_time(when)
    return None


def _vm_state(vm: Any) -> str:
    """A VM's state in base.py's words (Inventory.live_nodes drops stopping/stopped/deleting)."""
    provisioning = str(getattr(getattr(vm, "properties", None), "provisioning_state", None) or "").lower()
    power = _power_state(vm)
    if provisioning == "deleting":
        return "deleting"
    if power in ("deallocating", "stopping"):
        return "stopping"
    if power in ("deallocated", "stopped"):
        return "stopped"
    if provisioning in ("creating", "updating") or power == "starting":
        return "pending"
    if provisioning == "failed":
        return "failed"
    return "running"


_NODE_ID = re.compile(r"/virtualMachineScaleSets/([^/]+)/virtualMachines/([^/]+)$", re.IGNORECASE)


def _parse_node_id(node_id: str) -> tuple[str, str]:
    """(scale set, instance id) of a node id: the VM's resource id or ``<scale set>/<instance id>``."""
    m = _NODE_ID.search(node_id)
    if m:
        return m.group(1), m.group(2)
    parts = node_id.split("/")
    if len(parts) == 2 and all(parts):
        return parts[0], parts[1]
    raise InvalidRequest(f"not an Azure scale set VM id: {node_id}", cloud=CLOUD, operation="terminate")


def _infiniband_sku(sku: str) -> bool:
    """Whether a size has InfiniBand: ``r`` among the letters after its vCPU count (ND96isr, HB120rs)."""
    m = re.match(r"Standard_[A-Z]+\d+([a-z]*)", sku)
    return bool(m and "r" in m.group(1))


def _parse_time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


#: VM family quota names (the usages' ``name.value``) of the GPU sizes, for a size the resource SKU list
#: does not describe (restricted, or listed without its family). From the table of Azure VM family names
#: in Red Hat's OpenShift on Azure docs ("GPU Accelerated"), which matches Azure's usages API.
_FAMILIES: Final = {
    "ND_H100_v5": "standardNDSH100v5Family",
    "ND_H200_v5": "standardNDISRH200V5Family",
    "ND_v4": "Standard NDASv4_A100 Family",  # ND96asr_v4 (NDasrA100_v4), sic: with spaces
    "NC_A100_v4": "StandardNCADSA100v4Family",
    "NC_H100_v5": "StandardNCadsH100v5Family",
    "NC_T4_v3": "Standard NCASv3_T4 Family",
    "NC_v3": "standardNCSv3Family",
    "ND_v2": "standardNDSv2Family",
    "NV_A10_v5": "StandardNVADSA10v5Family",
}
_SERIES = re.compile(r"^Standard_(N[A-Z])\d+[a-z]*(?:_([A-Z0-9]+))?_(v\d+)$")
_VCPUS = re.compile(r"^Standard_[A-Z]+(\d+)")


def _family_and_vcpus(sku: str, info: Any) -> tuple[str | None, int | None]:
    """(family quota name, vCPUs) of a VM size: from its resource SKU, else from ``_FAMILIES`` and the vCPU
    count Azure's size names carry after the family letters (ND**96**isr_H100_v5)."""
    family = getattr(info, "family", None) if info is not None else None
    vcpus: int | None = None
    for cap in getattr(info, "capabilities", None) or []:
        if getattr(cap, "name", None) == "vCPUs" and cap.value:
            vcpus = int(float(cap.value))
    if family is None:
        m = _SERIES.match(sku)
        if m:
            family = _FAMILIES.get("_".join(p for p in (m.group(1), m.group(2), m.group(3)) if p))
    if vcpus is None:
        n = _VCPUS.match(sku)
        vcpus = int(n.group(1)) if n else None
    return family, vcpus


def _conforms(provider: AzureProvider) -> Provider:
    """Never called: mypy checks here that AzureProvider has every call of the Provider protocol."""
    return provider
