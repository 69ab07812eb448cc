"""The GCP provider: Compute Engine through google-cloud-compute's REST clients.

What gpuplan's resources are on GCP:

- a placement group is a regional *resource policy* with ``groupPlacementPolicy {collocation: COLLOCATED,
  vmCount}`` (a compact placement policy), attached to a gang's instances;
- a capacity reservation is a zonal *reservation* with ``specificReservationRequired`` (only instances that
  name it consume it), the gang's placement policy attached;
- a node is an *instance*; spot nodes use ``provisioningModel: SPOT`` with ``instanceTerminationAction:
  DELETE``; a flex-start gang (``LaunchSpec.max_run_hours``, ``models/flex_start.py``) uses
  ``provisioningModel: FLEX_START`` with ``maxRunDuration`` and ``instanceTerminationAction: DELETE``
  (Compute Engine deletes its VMs at the end of the duration), consuming no reservation; and a3 gangs get
  the GPUDirect NICs (TCPX: 4 on a3-highgpu-8g, TCPXO: 8 on a3-megagpu-8g).

Instances carry our tags as labels and are found by a label filter. Resource policies and reservations have
no labels in the v1 API, so they carry our tags as a JSON object in their ``description`` (the one exception
to "tags are labels"); inventory reads that JSON, never the name.

Every insert sends a ``requestId`` (a UUID derived from the spec's token), which Compute Engine uses to
answer a repeated request with the first one's operation instead of creating anything twice, for a limited
time only (Google's APIs guarantee at least 60 minutes: the ``requestId`` field of e.g.
https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert). After that a repeat meets the
name it made (409 alreadyExists) and adopts the resource if its labels (or description tags) are ours.

Operations are waited with the public Zone/RegionOperationsClient ``wait`` built with the same endpoint and
credentials as the other clients (``ExtendedOperation.result()`` builds its own operations client without
the client options, so against anything but Google's endpoint it cannot work). ``wait`` returns when the
operation is DONE or after about two minutes with it still RUNNING
(https://cloud.google.com/compute/docs/reference/rest/v1/zoneOperations/wait), so it is called again,
with an HTTP timeout longer than those two minutes, until DONE or ``operation_timeout_seconds`` (then
Timeout: the outcome is unknown, and the requestId makes a retry safe).

Conflicts of concurrent updates: ``resourceNotReady`` (the resource, e.g. a placement policy whose insert
is still running, is in transition) is retried with backoff like throttling; ``conditionNotMet`` (412: a
precondition such as a fingerprint no longer holds, i.e. someone else changed it) and ``alreadyExists``
(409) are Conflicts, the latter adopted when the resource is ours.

The SDK is imported when a provider is opened (:func:`_sdk`), so ``import providers.gcp`` works without it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from models.catalog import GPU_MEMORY_GB
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
from providers.config import FILE, MAX_ITEMS, checked_retry

__all__ = ["GcpProvider", "GcpSettings", "NicSettings", "open_provider", "sdk"]

log = logging.getLogger("gpuplan.providers.gcp")

T = TypeVar("T")

CLOUD = "gcp"
DEFAULT_IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11"
#: GPUDirect NICs (besides the primary gVNIC) each a3 fabric needs: A3 High uses 4 for GPUDirect-TCPX,
#: A3 Mega 8 for GPUDirect-TCPXO.
GPUDIRECT_NICS: dict[str, int] = {"tcpx": 4, "tcpxo": 8}
#: RDMA NICs of the machines whose gangs run GPUDirect-RDMA (RoCE on ConnectX-7: A3 Ultra, A4), which the
#: catalog calls ``infiniband`` as it does every RDMA fabric; they sit on a network with an RDMA profile.
RDMA_NICS = 8
#: The machine types whose gangs run on a GPUDirect fabric.
MACHINE_FABRIC: dict[str, str] = {
    "a3-highgpu-8g": "tcpx",
    "a3-megagpu-8g": "tcpxo",
    "a3-ultragpu-8g": "infiniband",
    "a4-highgpu-8g": "infiniband",
}
#: Machine series that take Hyperdisk only, no Persistent Disk: A3 Ultra, A4, A4X ("Accelerator-optimized
#: machine family", supported disk types, https://cloud.google.com/compute/docs/accelerator-optimized-machines;
#: Vertex AI's DiskSpec defaults A3 Ultra boot disks to hyperdisk-balanced for the same reason,
#: https://cloud.google.com/vertex-ai/docs/reference/rest/v1/DiskSpec). Other GPU machines boot from
#: pd-balanced (a3-highgpu/megagpu take pd-balanced or hyperdisk-balanced, never pd-standard).
HYPERDISK_ONLY: tuple[str, ...] = ("a3-ultragpu-", "a4-highgpu-", "a4x-highgpu-")
#: Compute Engine accelerator type -> the regional GPU quota metric its VMs count against (Spot VMs count
#: against ``PREEMPTIBLE_<metric>`` when the project has that quota, else against the standard one), as
#: ``regions.get`` reports them (https://cloud.google.com/compute/resource-usage#gpu_quota,
#: https://cloud.google.com/compute/docs/instances/spot#quotas).
GPU_QUOTA_METRIC: dict[str, str] = {
    "nvidia-l4": "NVIDIA_L4_GPUS",
    "nvidia-tesla-t4": "NVIDIA_T4_GPUS",
    "nvidia-tesla-v100": "NVIDIA_V100_GPUS",
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
    "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_GPUS",
    "nvidia-h200-141gb": "NVIDIA_H200_GPUS",
    "nvidia-b200": "NVIDIA_B200_GPUS",
}
#: What a Spot VM's guest OS gets between the preemption's ACPI G2 Soft Off and the G3 Mechanical Off
#: (``Scheduling.skipGuestOsShutdown``: "120 seconds ... for Standard VMs and 30 seconds for Spot VMs",
#: https://cloud.google.com/compute/docs/reference/rest/v1/instances; the preemption process,
#: https://cloud.google.com/compute/docs/instances/spot#preemption-process).
PREEMPTION_NOTICE_SECONDS = 30.0
#: How long ``operations.wait`` blocks before it answers RUNNING (about 2 minutes).
WAIT_SECONDS = 120.0
PREEMPTED = "compute.instances.preempted"
#: Compute Engine accelerator types -> gpuplan's canonical GPU models (models.catalog.GPU_MODELS).
ACCELERATOR_MODEL: dict[str, str] = {
    "nvidia-l4": "L4",
    "nvidia-tesla-a100": "A100-40GB",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-h100-80gb": "H100",
    "nvidia-h100-mega-80gb": "H100",
    "nvidia-h200-141gb": "H200",
    "nvidia-b200": "B200",
}
# Operation and API error codes/reasons, upper-cased, and what they mean in the error contract.
_CAPACITY_CODES = ("ZONE_RESOURCE_POOL_EXHAUSTED", "STOCKOUT", "RESOURCE_POOL_EXHAUSTED")
_QUOTA_CODES = ("QUOTA_EXCEEDED", "QUOTAEXCEEDED", "LIMITEXCEEDED")
_RATE_CODES = ("RATELIMITEXCEEDED", "USERRATELIMITEXCEEDED", "RATE_LIMIT_EXCEEDED")
# Reasons of a resource in transition under another operation: worth retrying, like throttling.
_BUSY_REASONS = ("resourceNotReady",)
# Reasons of a request that clashes with the state someone else gave the resource: a Conflict, not retried.
_CLASH_REASONS = ("conditionNotMet", "resourceInUseByAnotherResource")
_DONE = "DONE"
# Compute Engine instance status -> Node.state (TERMINATED is a stopped VM on GCP, not a deleted one).
_INSTANCE_STATE = {
    "PROVISIONING": "pending",
    "STAGING": "pending",
    "REPAIRING": "pending",
    "RUNNING": "running",
    "STOPPING": "stopping",
    "SUSPENDING": "stopping",
    "SUSPENDED": "stopped",
    "TERMINATED": "stopped",
}
_REQUEST_NAMESPACE = uuid.UUID("5b0c7a52-2d1e-4f0e-9a57-6770706c616e")  # fixed: requestIds must repeat


_Text = Annotated[str, Field(min_length=1, max_length=2048)]
_GCP_REGION = re.compile(r"[a-z]+(?:-[a-z]+)*\d{1,2}")
#: a project id, or a domain-scoped one (example.com:my-project)
_PROJECT = re.compile(r"(?:[a-z0-9.-]+:)?[a-z][-a-z0-9]{0,29}")


class NicSettings(StrictModel):
    """One extra (GPUDirect) network interface of an a3 node: its VPC network and subnetwork."""

    network: _Text
    subnetwork: _Text


class GcpSettings(StrictModel):
    """The ``gcp:`` section of the provider settings.

    ``zones`` maps a region to the zone gpuplan uses there, or to a list of zones: the first is where
    pools and gangs launch, the others are where a gang's reservation is tried next when a zone has no
    capacity for it (the gang then launches in the zone that holds its reservation); a region not listed
    uses ``<region>-a``.
    ``gpudirect_networks`` are the extra NICs of a3 gang nodes (4 for tcpx on a3-highgpu-8g, 8 for tcpxo
    on a3-megagpu-8g; each its own VPC). ``api_endpoint`` points the clients at a fake or an emulator
    (None: Google's); ``credentials: anonymous`` sends no credentials and is only allowed with an endpoint.
    Read from a file (the ``FILE`` context of providers.config), each zone must be in its region.
    """

    #: the settings a file must give (``project`` is required everywhere)
    FILE_REQUIRES: ClassVar[dict[str, str]] = {"project": "the project id"}

    project: _Text
    zones: Annotated[
        dict[_Text, _Text | Annotated[list[_Text], Field(min_length=1, max_length=26)]],
        Field(max_length=MAX_ITEMS),
    ] = Field(default_factory=dict)
    image: _Text = DEFAULT_IMAGE
    boot_disk_gb: int = Field(200, ge=10, le=65536)
    boot_disk_type: _Text | None = Field(
        None, description="None: per machine type (hyperdisk-balanced on A3 Ultra / A4, else pd-balanced)"
    )
    network: _Text = "global/networks/default"
    subnetwork: _Text | None = None
    gpudirect_networks: list[NicSettings] = Field(
        default_factory=list, max_length=max(GPUDIRECT_NICS.values())
    )
    rdma_networks: list[NicSettings] = Field(
        default_factory=list,
        max_length=RDMA_NICS,
        description="the 8 MRDMA NICs of A3 Ultra gangs (a network with an RDMA profile)",
    )
    api_endpoint: _Text | None = None
    credentials: Literal["default", "anonymous"] = "default"
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    operation_timeout_seconds: float = Field(600.0, gt=0, le=86400)
    poll_seconds: float = Field(
        2.0, gt=0, le=600, description="pause between polls of an operation that is RUNNING"
    )
    request_timeout_seconds: float = Field(60.0, gt=0, le=3600, description="timeout of each API request")

    _retry = field_validator("retry", mode="before")(checked_retry)

    @field_validator("zones")
    @classmethod
    def _zones_in_regions(
        cls, value: dict[str, str | list[str]], info: ValidationInfo
    ) -> dict[str, str | list[str]]:
        for region, zones in value.items():
            listed = [zones] if isinstance(zones, str) else zones
            if len(set(listed)) != len(listed):
                raise ValueError(f"{region[:80]}: a zone is listed twice ({', '.join(listed)[:200]})")
            if FILE not in (info.context or {}):
                continue
            if not _GCP_REGION.fullmatch(region):
                raise ValueError(f"{region[:80]!r} is not a region such as us-central1")
            for zone in listed:
                if not re.fullmatch(rf"{re.escape(region)}-[a-z]", zone):
                    raise ValueError(f"{zone[:80]!r} is not a zone of {region} (such as {region}-a)")
        return value

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str, info: ValidationInfo) -> str:
        if FILE in (info.context or {}) and not _PROJECT.fullmatch(value):
            raise ValueError(f"{value[:80]!r} is not a project id (lower-case letters, digits and hyphens)")
        return value

    @model_validator(mode="after")
    def _anonymous_needs_endpoint(self) -> GcpSettings:
        if self.credentials == "anonymous" and self.api_endpoint is None:
            raise ValueError("credentials: anonymous is for local fakes only: set api_endpoint too")
        return self

    def zone(self, region: str) -> str:
        """Where pools and gangs launch in ``region``: its first zone."""
        return self.zones_of(region)[0]

    def zones_of(self, region: str) -> list[str]:
        """The zones of ``region`` in the order a gang's reservation tries them."""
        zones = self.zones.get(region, f"{region}-a")
        return [zones] if isinstance(zones, str) else list(zones)


def open_provider(
    settings: GcpSettings | Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> GcpProvider:
    """The GCP provider for ``settings`` (a validated section or its raw mapping)."""
    if not isinstance(settings, GcpSettings):
        settings = GcpSettings.model_validate(settings)
    return GcpProvider(settings, sleep=sleep, clock=clock)


def boot_disk_type(machine: str, configured: str | None) -> str:
    """The boot disk type of ``machine``: ``configured``, or by machine type when None (Hyperdisk Balanced
    on the Hyperdisk-only series, pd-balanced elsewhere). A Persistent Disk type on a Hyperdisk-only
    machine is refused before anything is sent: Compute Engine would refuse each insert."""
    hyperdisk_only = machine.startswith(HYPERDISK_ONLY)
    if configured is None:
        return "hyperdisk-balanced" if hyperdisk_only else "pd-balanced"
    if hyperdisk_only and not configured.startswith("hyperdisk-"):
        raise InvalidRequest(
            f"{machine} takes Hyperdisk only: gcp.boot_disk_type {configured} cannot boot it "
            "(use hyperdisk-balanced, or leave it unset)",
            cloud=CLOUD,
            operation="launch",
        )
    return configured


def sdk() -> SimpleNamespace:
    """The SDK modules, imported on first use so the rest of gpuplan needs none of them (the price fetcher,
    ``providers/pricing/gcp.py``, adds the billing client to them)."""
    try:
        import google.api_core.exceptions as api_exceptions
        import google.auth
        import google.auth.exceptions as auth_exceptions
        import requests
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import compute_v1
    except ImportError as exc:
        raise MissingSDK(CLOUD, "google-cloud-compute", "gcp") from exc
    return SimpleNamespace(
        compute=compute_v1,
        api_exceptions=api_exceptions,
        auth=google.auth,
        auth_exceptions=auth_exceptions,
        requests=requests,
        ClientOptions=ClientOptions,
        AnonymousCredentials=AnonymousCredentials,
    )


def request_id(token: str, *parts: object) -> str:
    """Compute Engine's requestId for one create: a UUID derived from the spec's token (and what tells the
    creates of one spec apart), the same every time the spec is applied."""
    return str(uuid.uuid5(_REQUEST_NAMESPACE, "/".join([token, *(str(p) for p in parts)])))


def instance_names(prefix: str, token: str, count: int) -> list[str]:
    """``<pool or run>-<token[:8]>-<i>``, the prefix cut so the name fits GCP's 63 characters."""
    names = []
    for i in range(count):
        suffix = f"-{token[:8]}-{i}"
        names.append(safe_name(prefix)[: 63 - len(suffix)].rstrip("-") + suffix)
    return names


def _last(url: str | None) -> str:
    return (url or "").rstrip("/").rsplit("/", 1)[-1]


def _region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def _time(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _description_tags(description: str | None) -> dict[str, str]:
    """Our tags from a resource policy's or reservation's description (see the module docstring)."""
    try:
        data = json.loads(description or "")
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def _describe(tags: Mapping[str, str]) -> str:
    return json.dumps(dict(tags), sort_keys=True, separators=(",", ":"))


def _error_class(code: str) -> type[ProviderError] | None:
    """The typed error an operation or API error code means, if it means a specific one."""
    upper = code.upper()
    if any(upper.startswith(c) for c in _CAPACITY_CODES):
        return InsufficientCapacity
    if upper in _QUOTA_CODES or "QUOTA" in upper:
        return QuotaExceeded
    if upper in _RATE_CODES:
        return Throttled
    return None


def _short(exc: ProviderError, spec: LaunchSpec, made: Sequence[Node] = (), note: str = "") -> ProviderError:
    """``exc`` again, saying which pool (or gang) is short and by how much, with the nodes it made."""
    what = f"gang {spec.run} of pool {spec.pool}" if spec.run else f"pool {spec.pool}"
    return type(exc)(
        f"{exc.message} ({len(made)} of {spec.count} nodes of {what} made{note})",
        cloud=CLOUD,
        operation=exc.operation,
        code=exc.code,
        launched=tuple(made),
    )


@dataclass(frozen=True)
class _Where:
    """Where an operation lives: a zone's operations or a region's."""

    zone: str | None = None
    region: str | None = None


class GcpProvider(NoCapacityBlocks):
    """One GCP project. See the module docstring for how gpuplan's resources map to Compute Engine's."""

    cloud = CLOUD
    # a reservation takes the compact placement policy; no spot price API
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.GANG_RESERVATIONS})

    def __init__(
        self,
        settings: GcpSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._clock = clock
        self._machine_cache: dict[tuple[str, str], Any] = {}
        self._rng = rng or random.Random()
        self._g = sdk()
        compute = self._g.compute

        def build() -> dict[str, Any]:
            if settings.credentials == "anonymous":
                credentials = self._g.AnonymousCredentials()
            else:
                credentials, _ = self._g.auth.default(scopes=["https://www.googleapis.com/auth/compute"])
            kwargs: dict[str, Any] = {"transport": "rest", "credentials": credentials}
            if settings.api_endpoint is not None:
                kwargs["client_options"] = self._g.ClientOptions(api_endpoint=settings.api_endpoint)
            return {
                "instances": compute.InstancesClient(**kwargs),
                "policies": compute.ResourcePoliciesClient(**kwargs),
                "reservations": compute.ReservationsClient(**kwargs),
                "zone_ops": compute.ZoneOperationsClient(**kwargs),
                "region_ops": compute.RegionOperationsClient(**kwargs),
                "machine_types": compute.MachineTypesClient(**kwargs),
                "regions": compute.RegionsClient(**kwargs),
            }

        clients = self._call("open", build)
        self._instances = clients["instances"]
        self._policies = clients["policies"]
        self._reservations = clients["reservations"]
        self._zone_ops = clients["zone_ops"]
        self._region_ops = clients["region_ops"]
        self._machine_types = clients["machine_types"]
        self._regions = clients["regions"]

    # ------------------------------------------------------------------------------------------------------
    # the SDK boundary

    def _map_error(self, exc: BaseException, operation: str) -> ProviderError:
        """The one place SDK exceptions become the error contract's typed errors."""
        g = self._g
        ex = g.api_exceptions
        if isinstance(exc, g.auth_exceptions.DefaultCredentialsError):
            # says where credentials were looked for, never what they hold
            return Auth(f"no credentials: {exc}", cloud=CLOUD, operation=operation)
        if isinstance(exc, g.auth_exceptions.GoogleAuthError):
            return Auth(f"credentials refused: {type(exc).__name__}", cloud=CLOUD, operation=operation)
        if isinstance(exc, g.requests.Timeout):
            what = f"no answer from the Compute API in time: {type(exc).__name__}"
            return Timeout(what, cloud=CLOUD, operation=operation)
        if isinstance(exc, g.requests.RequestException):
            return ProviderError(
                f"no answer from the Compute API: {type(exc).__name__}", cloud=CLOUD, operation=operation
            )
        if not isinstance(exc, ex.GoogleAPICallError):  # RetryError and the like
            return ProviderError(str(exc), cloud=CLOUD, operation=operation)
        reasons = [str(e.get("reason", "")) for e in exc.errors or () if isinstance(e, dict)]
        if exc.reason:
            reasons.append(str(exc.reason))
        status = exc.code if isinstance(exc.code, int) else None
        code = reasons[0] if reasons else (str(status) if status is not None else None)
        message = exc.message or type(exc).__name__
        specific = [c for c in (_error_class(r) for r in reasons) if c is not None]
        if not specific:
            specific = [c for c in (_error_class(w) for w in re.findall(r"[A-Z_]{8,}", message)) if c]
        cls: type[ProviderError]
        busy = next((r for r in reasons if r in _BUSY_REASONS + _CLASH_REASONS), None)
        if busy is not None or status == 412:
            return Conflict(message, cloud=CLOUD, operation=operation, code=busy or "conditionNotMet")
        if isinstance(exc, ex.TooManyRequests) or status == 429 or Throttled in specific:
            cls = Throttled
        elif QuotaExceeded in specific:
            cls = QuotaExceeded
        elif isinstance(exc, ex.Conflict) or status == 409:
            cls = Conflict
        elif isinstance(exc, ex.NotFound) or status == 404:
            cls = NotFound
        elif isinstance(exc, (ex.Unauthenticated, ex.Forbidden)) or status in (401, 403):
            cls = Auth
        elif isinstance(exc, ex.BadRequest) or status == 400:
            cls = InvalidRequest
        elif InsufficientCapacity in specific:
            cls = InsufficientCapacity
        else:
            cls = ProviderError
        return cls(message, cloud=CLOUD, operation=operation, code=code)

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        """``fn()`` (one SDK call) with its errors mapped, throttling retried with backoff, and a resource
        in transition (``resourceNotReady``) waited out the same way, within the same bound."""

        sdk_errors = (  # anything else is a bug here and should show as one
            self._g.api_exceptions.GoogleAPIError,
            self._g.auth_exceptions.GoogleAuthError,
            self._g.requests.RequestException,
        )
        policy = self.settings.retry
        for attempt in range(policy.attempts):
            try:
                return sdk_call(
                    fn,
                    operation,
                    errors=sdk_errors,
                    to_provider_error=self._map_error,
                    policy=policy,
                    sleep=self._sleep,
                    logger=log,
                    rng=self._rng,
                )
            except Conflict as exc:
                if exc.code not in _BUSY_REASONS or attempt == policy.attempts - 1:
                    raise
                wait = policy.delay(attempt, self._rng)
                log.warning(
                    "%s: resource not ready (%s); retry %d in %.2f s", operation, exc.code, attempt + 1, wait
                )
                self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _api(
        self, operation: str, method: Callable[..., T], /, *, http_timeout: float | None = None, **kwargs: Any
    ) -> T:
        """One client method through :meth:`_call`. The clients' own retries are off (``retry=None``): they
        would sleep for real on a 503, and retries are bounded here, in one place."""
        timeout = http_timeout or self.settings.request_timeout_seconds
        return self._call(operation, lambda: method(**kwargs, retry=None, timeout=timeout))

    def _list(self, operation: str, method: Callable[..., Iterable[T]], /, **kwargs: Any) -> list[T]:
        """Every item of a list call, all pages fetched inside the retried call."""
        timeout = self.settings.request_timeout_seconds
        return self._call(operation, lambda: list(method(**kwargs, retry=None, timeout=timeout)))

    def _mutate(self, operation: str, where: _Where, method: Callable[..., Any], /, **kwargs: Any) -> None:
        """A mutating call (insert, delete), waited until its operation is DONE."""
        op = self._api(operation, method, **kwargs)
        self._wait(op, where, operation)

    def _wait(self, op: Any, where: _Where, operation: str) -> None:
        """Wait for ``op`` to be DONE (through the public operations clients, see the module docstring):
        ``wait`` again while it answers RUNNING (after its ~2 minutes, or early), pausing ``poll_seconds``
        when it answered at once, until ``operation_timeout_seconds``: then Timeout. A wait that times out
        on the wire is a read and is repeated. An operation that ends with an error raises the error its
        code means."""
        project = self.settings.project
        s = self.settings
        deadline = self._clock() + s.operation_timeout_seconds
        done = self._g.compute.Operation.Status.DONE
        name = op.name
        # the HTTP timeout of a wait outlasts the ~2 minutes the server may hold it
        http_timeout = max(s.request_timeout_seconds, WAIT_SECONDS + 30.0)
        polls = 0
        while op.status != done:
            if self._clock() >= deadline:
                raise Timeout(
                    f"operation {name} still running after {s.operation_timeout_seconds:g}s ({polls} polls)",
                    cloud=CLOUD,
                    operation=operation,
                )
            started = self._clock()
            polls += 1
            try:
                if where.zone is not None:
                    op = self._api(
                        operation,
                        self._zone_ops.wait,
                        http_timeout=http_timeout,
                        project=project,
                        zone=where.zone,
                        operation=name,
                    )
                else:
                    op = self._api(
                        operation,
                        self._region_ops.wait,
                        http_timeout=http_timeout,
                        project=project,
                        region=where.region,
                        operation=name,
                    )
            except Timeout:
                log.warning("gcp: wait for operation %s timed out on the wire; waiting again", name)
            if op.status != done and self._clock() - started < s.poll_seconds:
                self._sleep(min(s.poll_seconds, max(0.0, deadline - self._clock())))
        if "error" in op and op.error.errors:
            first = op.error.errors[0]
            code = first.code or str(op.http_error_status_code or "")
            message = "; ".join(e.message or e.code for e in op.error.errors)
            cls = _error_class(code) or {
                "RESOURCE_NOT_FOUND": NotFound,
                "RESOURCE_ALREADY_EXISTS": Conflict,
            }.get(code.upper(), OperationFailed)
            raise cls(message, cloud=CLOUD, operation=operation, code=code)

    # ------------------------------------------------------------------------------------------------------
    # the protocol

    def handles(self, offering: str) -> bool:
        try:
            return parse_offering(offering)[0] == CLOUD
        except ValueError:
            return False

    def _split(self, offering: str) -> tuple[str, str]:
        cloud, region, machine = parse_offering(offering)
        if cloud != CLOUD:
            raise InvalidRequest(f"not a GCP offering: {offering}", cloud=CLOUD)
        return region, machine

    def _policy_path(self, region: str, name: str) -> str:
        return f"projects/{self.settings.project}/regions/{region}/resourcePolicies/{name}"

    def offerings(self, regions: Sequence[str]) -> list[OfferingInfo]:
        """The machine types with GPUs in each region's configured zone (a2, a3, g2 list their bundled
        accelerators); a3-highgpu-8g gangs use GPUDirect-TCPX, a3-megagpu-8g GPUDirect-TCPXO."""
        found: list[OfferingInfo] = []
        for region in regions:
            zone = self.settings.zone(region)
            types = self._list(
                "list machine types", self._machine_types.list, project=self.settings.project, zone=zone
            )
            for mt in types:
                if not mt.accelerators:
                    continue
                acc = mt.accelerators[0]
                model = ACCELERATOR_MODEL.get(acc.guest_accelerator_type)
                memory = GPU_MEMORY_GB.get(model) if model else None
                if memory is None:
                    m = re.search(r"(\d+)gb", acc.guest_accelerator_type)
                    memory = float(m.group(1)) if m else None
                fabric = MACHINE_FABRIC.get(mt.name)
                found.append(
                    OfferingInfo(
                        offering=f"{CLOUD}:{region}:{mt.name}",
                        gpu_model=model,
                        gpus_per_node=int(acc.guest_accelerator_count),
                        gpu_memory_gb=memory,
                        fabric=fabric,
                        network_interfaces=1 + GPUDIRECT_NICS.get(fabric or "", 0),
                    )
                )
        return found

    def spot_prices(self, offerings: Sequence[str]) -> list[SpotPrice]:
        """Always empty: the Compute API has no prices (GCP publishes them in the Cloud Billing Catalog
        API, a different service and credential), and an unpriced offering is left out, never 0."""
        return []

    def inventory(self, plan_id: str) -> Inventory:
        """Instances by the ``gpuplan-plan`` label (aggregated over all zones); resource policies and
        reservations whose description holds our tags (they have no labels)."""
        wanted = {TAG_PLAN: safe_name(plan_id)}
        project = self.settings.project
        nodes = [self._node(i) for i in self._instances_of(plan_id)]
        policies = self._list("list resource policies", self._policies.aggregated_list, project=project)
        groups = []
        for _, scope in policies:
            for p in scope.resource_policies:
                tags = _description_tags(p.description)
                if tags_match(tags, wanted) and "group_placement_policy" in p:
                    state = {"READY": "available"}.get(p.status, p.status.lower() or "available")
                    groups.append(
                        PlacementGroup(
                            name=p.name,
                            region=_last(p.region),
                            run=tags.get(TAG_RUN),
                            id=str(p.id) if p.id else None,
                            state=state,
                            tags=tags,
                        )
                    )
        reservations = self._list("list reservations", self._reservations.aggregated_list, project=project)
        held = []
        for _, scope in reservations:
            for r in scope.reservations:
                tags = _description_tags(r.description)
                if not tags_match(tags, wanted):
                    continue
                zone = _last(r.zone)
                machine = r.specific_reservation.instance_properties.machine_type
                policy = next(iter(r.resource_policies.values()), None)
                held.append(
                    CapacityReservation(
                        name=r.name,
                        offering=f"{CLOUD}:{_region_of(zone)}:{_last(machine)}",
                        nodes=int(r.specific_reservation.count),
                        placement_group=_last(policy) if policy else None,
                        run=tags.get(TAG_RUN),
                        id=f"zones/{zone}/reservations/{r.name}",
                        state={"READY": "active", "CREATING": "pending"}.get(r.status, r.status.lower()),
                        tags=tags,
                    )
                )
        return Inventory(nodes=tuple(nodes), placement_groups=tuple(groups), reservations=tuple(held))

    def _instances_of(self, plan_id: str) -> list[Any]:
        """Our instances (the ``gpuplan-plan`` label), as the API returns them, over all zones."""
        wanted = {TAG_PLAN: safe_name(plan_id)}
        scoped = self._list(
            "list instances",
            self._instances.aggregated_list,
            request={"project": self.settings.project, "filter": f'labels.{TAG_PLAN} = "{wanted[TAG_PLAN]}"'},
        )
        return [i for _, scope in scoped for i in scope.instances if tags_match(dict(i.labels), wanted)]

    def _node(self, i: Any) -> Node:
        labels = dict(i.labels)
        zone = _last(i.zone)
        spot = i.scheduling.provisioning_model == "SPOT" or bool(i.scheduling.preemptible)
        affinity = i.reservation_affinity
        reservation = None
        if affinity.consume_reservation_type == "SPECIFIC_RESERVATION" and affinity.values:
            reservation = _last(affinity.values[0])
        return Node(
            id=i.name,
            offering=f"{CLOUD}:{_region_of(zone)}:{_last(i.machine_type)}",
            capacity=CapacityType.SPOT if spot else CapacityType.ON_DEMAND,
            pool=labels.get(TAG_POOL, ""),
            run=labels.get(TAG_RUN),
            placement_group=_last(i.resource_policies[0]) if i.resource_policies else None,
            reservation=reservation,
            state=_INSTANCE_STATE.get(i.status, i.status.lower() or "pending"),
            zone=zone,
            launched=_time(i.creation_timestamp),
            tags=labels,
        )

    def ensure_placement_group(self, spec: PlacementGroupSpec) -> PlacementGroup:
        """A compact placement policy (``COLLOCATED``, ``vmCount`` = the gang's nodes) in the region; a
        409 adopts the policy if its description holds our tags, else Conflict."""
        compute = self._g.compute
        policy = compute.ResourcePolicy(
            name=spec.name,
            description=_describe(spec.tags),
            group_placement_policy=compute.ResourcePolicyGroupPlacementPolicy(
                collocation="COLLOCATED", vm_count=spec.nodes
            ),
        )
        request = compute.InsertResourcePolicyRequest(
            project=self.settings.project,
            region=spec.region,
            resource_policy_resource=policy,
            request_id=request_id(spec.token, "placement"),
        )
        log.info("gcp: creating placement policy %s in %s for %d nodes", spec.name, spec.region, spec.nodes)
        try:
            self._mutate(
                "create placement policy",
                _Where(region=spec.region),
                self._policies.insert_unary,
                request=request,
            )
        except Conflict as exc:
            if exc.code in _BUSY_REASONS + _CLASH_REASONS:
                raise
            existing = self._api(
                "get placement policy",
                self._policies.get,
                project=self.settings.project,
                region=spec.region,
                resource_policy=spec.name,
            )
            if not tags_match(_description_tags(existing.description), spec.tags):
                raise Conflict(
                    f"resource policy {spec.name} in {spec.region} exists and is not gpuplan's",
                    cloud=CLOUD,
                    operation="create placement policy",
                    code="409",
                ) from None
            log.info("gcp: adopted existing placement policy %s", spec.name)
        return PlacementGroup(
            name=spec.name, region=spec.region, run=spec.tags.get(TAG_RUN), tags=dict(spec.tags)
        )

    def ensure_reservation(self, spec: ReservationSpec) -> CapacityReservation:
        """A zonal specific reservation of ``spec.nodes`` machines with the gang's placement policy; a 409
        adopts ours (description tags), else Conflict. The region's zones (``zones``) are tried in order,
        as the AWS adapter tries its subnets' zones: a stockout (its operation's error) passes the request
        to the next zone, and only when none has the capacity is it InsufficientCapacity, naming the zones
        tried. ``spec.other_zones`` False (the plan's fallback has no ``other-zone``): the first zone only.
        With several zones, ours already made in one of them (a lost reply) is found first, so a retry
        never reserves the gang twice."""
        region, machine = self._split(spec.offering)
        zones = self.settings.zones_of(region)
        if len(zones) > 1 and (found := self._find_reservation(zones, spec)) is not None:
            return found
        if not spec.other_zones:
            zones = zones[:1]
        refused: list[str] = []
        stockout: InsufficientCapacity | None = None
        for zone in zones:
            # one requestId per zone: a retry in the same zone is deduped, a request in the next is new
            rid = request_id(spec.token, "reservation", *([zone] if refused else []))
            try:
                self._insert_reservation(spec, zone, machine, region, rid)
            except InsufficientCapacity as exc:
                refused.append(zone)
                stockout = exc
                log.warning(
                    "gcp: no capacity for reservation %s in %s (%s); next zone", spec.name, zone, exc.code
                )
                continue
            if refused:
                log.info(
                    "gcp: reservation %s made in %s (no capacity in %s)", spec.name, zone, ", ".join(refused)
                )
            return self._reservation_made(spec, zone)
        assert stockout is not None
        others = "" if spec.other_zones else "; the plan allows no other zone"
        raise InsufficientCapacity(
            f"no zone can reserve {spec.nodes} x {machine} for {spec.name} "
            f"(tried {', '.join(refused)}{others})",
            cloud=CLOUD,
            operation="create reservation",
            code=stockout.code,
        ) from stockout

    def _find_reservation(self, zones: Sequence[str], spec: ReservationSpec) -> CapacityReservation | None:
        """Ours named ``spec.name`` in one of ``zones`` (its description tags), or None."""
        for zone in zones:
            try:
                existing = self._api(
                    "get reservation",
                    self._reservations.get,
                    project=self.settings.project,
                    zone=zone,
                    reservation=spec.name,
                )
            except NotFound:
                continue
            if tags_match(_description_tags(existing.description), spec.tags):
                log.info("gcp: found reservation %s in %s", spec.name, zone)
                return self._reservation_made(spec, zone)
        return None

    def _reservation_zone(self, region: str, reservation: str) -> str:
        """The zone of the gang's reservation (its id ``zones/<zone>/reservations/<name>``, or its name
        looked up in the region's zones): the gang launches where its reservation is."""
        if match := re.fullmatch(r"zones/([^/]+)/reservations/[^/]+", reservation):
            return match.group(1)
        zones = self.settings.zones_of(region)
        for zone in zones if len(zones) > 1 else ():
            try:
                self._api(
                    "get reservation",
                    self._reservations.get,
                    project=self.settings.project,
                    zone=zone,
                    reservation=reservation,
                )
            except NotFound:
                continue
            return zone
        return zones[0]

    def _insert_reservation(
        self, spec: ReservationSpec, zone: str, machine: str, region: str, rid: str
    ) -> None:
        compute = self._g.compute
        reservation = compute.Reservation(
            name=spec.name,
            description=_describe(spec.tags),
            specific_reservation_required=True,
            specific_reservation=compute.AllocationSpecificSKUReservation(
                count=spec.nodes,
                instance_properties=compute.AllocationSpecificSKUAllocationReservedInstanceProperties(
                    machine_type=machine
                ),
            ),
        )
        if spec.placement_group:
            reservation.resource_policies = {"placement": self._policy_path(region, spec.placement_group)}
        if spec.ends is not None:  # Compute Engine deletes it then: no reservation bills on after its run
            reservation.delete_at_time = f"{spec.ends.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
        request = compute.InsertReservationRequest(
            project=self.settings.project,
            zone=zone,
            reservation_resource=reservation,
            request_id=rid,
        )
        log.info("gcp: creating reservation %s: %d x %s in %s", spec.name, spec.nodes, machine, zone)
        try:
            self._mutate(
                "create reservation", _Where(zone=zone), self._reservations.insert_unary, request=request
            )
        except Conflict as exc:
            if exc.code in _BUSY_REASONS + _CLASH_REASONS:
                raise
            existing = self._api(
                "get reservation",
                self._reservations.get,
                project=self.settings.project,
                zone=zone,
                reservation=spec.name,
            )
            if not tags_match(_description_tags(existing.description), spec.tags):
                raise Conflict(
                    f"reservation {spec.name} in {zone} exists and is not gpuplan's",
                    cloud=CLOUD,
                    operation="create reservation",
                    code="409",
                ) from None
            log.info("gcp: adopted existing reservation %s", spec.name)

    def _reservation_made(self, spec: ReservationSpec, zone: str) -> CapacityReservation:
        return CapacityReservation(
            name=spec.name,
            offering=spec.offering,
            nodes=spec.nodes,
            placement_group=spec.placement_group,
            run=spec.tags.get(TAG_RUN),
            id=f"zones/{zone}/reservations/{spec.name}",
            tags=dict(spec.tags),
        )

    def _interfaces(self, fabric: str | None) -> list[Any]:
        """The primary gVNIC, plus the GPUDirect NICs a tcpx/tcpxo gang needs."""
        compute = self._g.compute
        s = self.settings
        nics = [compute.NetworkInterface(network=s.network, nic_type="GVNIC")]
        if s.subnetwork:
            nics[0].subnetwork = s.subnetwork
        if fabric is None:
            return nics
        if fabric == "infiniband":
            networks, needed, setting, nic_type = s.rdma_networks, RDMA_NICS, "rdma_networks", "MRDMA"
        elif fabric in GPUDIRECT_NICS:
            networks, needed = s.gpudirect_networks, GPUDIRECT_NICS[fabric]
            setting, nic_type = "gpudirect_networks", "GVNIC"
        else:
            raise InvalidRequest(
                f"fabric {fabric} does not exist on GCP (tcpx, tcpxo or infiniband: GPUDirect-RDMA)",
                cloud=CLOUD,
                operation="launch",
            )
        if len(networks) < needed:
            raise InvalidRequest(
                f"a {fabric} gang needs {needed} extra networks, gcp.{setting} lists "
                f"{len(networks)}: add {needed - len(networks)} (network + subnetwork each)",
                cloud=CLOUD,
                operation="launch",
            )
        nics += [
            compute.NetworkInterface(network=n.network, subnetwork=n.subnetwork, nic_type=nic_type)
            for n in networks[:needed]
        ]
        return nics

    def _scheduling(self, capacity: CapacityType, max_run_hours: float | None = None) -> Any:
        compute = self._g.compute
        if max_run_hours is not None:  # flex-start: granted when capacity is, deleted after its run duration
            return compute.Scheduling(
                provisioning_model="FLEX_START",
                max_run_duration=compute.Duration(seconds=math.ceil(max_run_hours * 3600)),
                instance_termination_action="DELETE",
                on_host_maintenance="TERMINATE",
                automatic_restart=False,
            )
        if capacity is CapacityType.SPOT:
            return compute.Scheduling(
                provisioning_model="SPOT",
                instance_termination_action="DELETE",
                on_host_maintenance="TERMINATE",
                automatic_restart=False,
            )
        # GPU VMs cannot live-migrate: host maintenance stops them, and they restart afterwards
        return compute.Scheduling(
            provisioning_model="STANDARD", on_host_maintenance="TERMINATE", automatic_restart=True
        )

    def launch(self, spec: LaunchSpec) -> list[Node]:
        """Launch ``spec.count`` instances named ``<pool or run>-<token[:8]>-<i>``.

        A gang is one ``bulkInsert`` with ``count = minCount`` (Compute Engine makes all or none) in its
        compact placement policy, consuming ``spec.reservation`` when given; when it fails, whatever of it
        is still there is deleted (:meth:`_roll_back`), so no partial gang stays. Boot disks are
        :func:`boot_disk_type`'s (Hyperdisk on A3 Ultra / A4). Pool nodes are one insert each,
        each with its own requestId, so a stockout part way keeps the nodes made (they carry our labels and
        the next inventory counts them) and raises InsufficientCapacity. A 409 on a name adopts the
        instance if its labels are ours. ``spec.target`` is not used: Compute Engine adds instances rather
        than sizing a group, and the requestIds already make a repeated launch create nothing twice.
        """
        compute = self._g.compute
        region, machine = self._split(spec.offering)
        # a gang launches where its reservation is (another zone of the region, when the first had none)
        zone = (
            self._reservation_zone(region, spec.reservation)
            if spec.reservation and spec.max_run_hours is None
            else self.settings.zone(region)
        )
        names = instance_names(spec.run or spec.pool, spec.token, spec.count)
        nics = self._interfaces(spec.fabric)
        disk_type = boot_disk_type(machine, self.settings.boot_disk_type)
        labels = dict(spec.tags)
        affinity = None
        if spec.max_run_hours is not None:  # flex-start VMs come from DWS's capacity, never a reservation
            affinity = compute.ReservationAffinity(consume_reservation_type="NO_RESERVATION")
        elif spec.reservation:
            affinity = compute.ReservationAffinity(
                consume_reservation_type="SPECIFIC_RESERVATION",
                key="compute.googleapis.com/reservation-name",
                values=[spec.reservation],
            )
        kind = "gang" if spec.all_or_nothing else "pool"
        log.info(
            "gcp: launching %d %s %s nodes of %s in %s (%s %s)",
            spec.count,
            spec.capacity.value,
            kind,
            machine,
            zone,
            kind,
            spec.run or spec.pool,
        )
        if spec.all_or_nothing:
            props = compute.InstanceProperties(
                machine_type=machine,
                labels=labels,
                scheduling=self._scheduling(spec.capacity, spec.max_run_hours),
                network_interfaces=nics,
                disks=[self._boot_disk(disk_type)],
            )
            if spec.placement_group:
                props.resource_policies = [spec.placement_group]  # names, not URLs, in bulkInsert
            if affinity is not None:
                props.reservation_affinity = affinity
            resource = compute.BulkInsertInstanceResource(
                count=spec.count,
                min_count=spec.count,
                instance_properties=props,
                per_instance_properties={
                    n: compute.BulkInsertInstanceResourcePerInstanceProperties() for n in names
                },
            )
            request = compute.BulkInsertInstanceRequest(
                project=self.settings.project,
                zone=zone,
                bulk_insert_instance_resource_resource=resource,
                request_id=request_id(spec.token, "gang"),
            )
            try:
                self._mutate(
                    "launch gang", _Where(zone=zone), self._instances.bulk_insert_unary, request=request
                )
            except Conflict as exc:
                if exc.code in _BUSY_REASONS + _CLASH_REASONS:
                    raise _short(exc, spec) from exc
                return self._adopt(names, zone, spec)
            except Timeout as exc:  # it may still finish: the next inventory tells, the requestId repeats
                raise _short(exc, spec) from exc
            except ProviderError as exc:
                left = self._roll_back(names, zone, spec)
                raise _short(exc, spec, note=left) from exc
            return [self._launched(n, zone, spec) for n in names]

        ops: list[tuple[str, Any]] = []  # (name, operation), None: the name exists already
        failure: ProviderError | None = None
        for index, name in enumerate(names):
            instance = compute.Instance(
                name=name,
                machine_type=f"zones/{zone}/machineTypes/{machine}",
                labels=labels,
                scheduling=self._scheduling(spec.capacity, spec.max_run_hours),
                network_interfaces=nics,
                disks=[self._boot_disk(f"zones/{zone}/diskTypes/{disk_type}")],
            )
            if spec.placement_group:
                instance.resource_policies = [self._policy_path(region, spec.placement_group)]
            if affinity is not None:
                instance.reservation_affinity = affinity
            request = compute.InsertInstanceRequest(
                project=self.settings.project,
                zone=zone,
                instance_resource=instance,
                request_id=request_id(spec.token, index),
            )
            try:
                op = self._api("launch", self._instances.insert_unary, request=request)
            except Conflict as exc:
                if exc.code in _BUSY_REASONS + _CLASH_REASONS:
                    failure = exc
                    break
                op = None
            except ProviderError as exc:
                failure = exc  # the ones sent are waited below: they are ours either way
                break
            ops.append((name, op))
        made: list[Node] = []
        for name, op in ops:
            try:
                if op is None:
                    made += self._adopt([name], zone, spec)
                else:
                    self._wait(op, _Where(zone=zone), "launch")
                    made.append(self._launched(name, zone, spec))
            except ProviderError as exc:
                failure = failure or exc
        if failure is not None:
            raise _short(failure, spec, made) from failure
        return made

    def _boot_disk(self, disk_type: str) -> Any:
        compute = self._g.compute
        return compute.AttachedDisk(
            boot=True,
            auto_delete=True,
            initialize_params=compute.AttachedDiskInitializeParams(
                source_image=self.settings.image,
                disk_size_gb=self.settings.boot_disk_gb,
                disk_type=disk_type,
            ),
        )

    def _launched(self, name: str, zone: str, spec: LaunchSpec) -> Node:
        return Node(
            id=name,
            offering=spec.offering,
            capacity=spec.capacity,
            pool=spec.pool,
            run=spec.run,
            placement_group=spec.placement_group,
            reservation=spec.reservation,
            state="pending",
            zone=zone,
            tags=dict(spec.tags),
        )

    def _adopt(self, names: Iterable[str], zone: str, spec: LaunchSpec) -> list[Node]:
        """Instances whose names were taken: ours (labels match) are adopted, any other is a Conflict."""
        nodes = []
        for name in names:
            try:
                instance = self._api(
                    "get instance",
                    self._instances.get,
                    project=self.settings.project,
                    zone=zone,
                    instance=name,
                )
            except NotFound:
                raise Conflict(
                    f"the launch of {spec.run or spec.pool} clashed but instance {name} does not exist",
                    cloud=CLOUD,
                    operation="launch",
                    code="409",
                ) from None
            if not tags_match(dict(instance.labels), spec.tags):
                raise Conflict(
                    f"instance {name} in {zone} exists and is not gpuplan's",
                    cloud=CLOUD,
                    operation="launch",
                    code="409",
                )
            nodes.append(self._node(instance))
        log.info("gcp: adopted %d existing instances of %s", len(nodes), spec.run or spec.pool)
        return nodes

    def _roll_back(self, names: Sequence[str], zone: str, spec: LaunchSpec) -> str:
        """Delete what a failed gang insert left (ours by labels), so no partial gang stays. bulkInsert with
        ``minCount`` deletes the instances it made when it cannot make ``minCount`` ("instances already
        created will be deleted", ``BulkInsertInstanceResource.minCount``), but that may not be over when
        its operation reports the failure. Returns a note for the error when some could not be deleted."""
        left: list[Node] = []
        for name in names:
            try:
                instance = self._api(
                    "roll back gang",
                    self._instances.get,
                    project=self.settings.project,
                    zone=zone,
                    instance=name,
                )
            except NotFound:
                continue
            except ProviderError as exc:
                log.warning("gcp: could not read %s to roll back gang %s: %s", name, spec.run, exc)
                return f"; {name} may be left: {exc.message}"
            if tags_match(dict(instance.labels), spec.tags):
                left.append(self._node(instance))
        if not left:
            return ""
        log.warning("gcp: gang %s failed part way: deleting the %d instances it left", spec.run, len(left))
        try:
            self.terminate(left)
        except ProviderError as exc:
            return f"; {len(left)} left and their delete failed: {exc.message}"
        return f"; the {len(left)} it left deleted"

    def terminate(self, nodes: Sequence[Node]) -> None:
        """Delete the instances (all requests first, then the waits); one already gone is done."""
        pending: list[tuple[Node, Any, str]] = []
        gone = 0
        for node in nodes:
            zone = node.zone or self.settings.zone(self._split(node.offering)[0])
            log.info("gcp: deleting instance %s in %s", node.id, zone)
            try:
                op = self._api(
                    "terminate",
                    self._instances.delete_unary,
                    project=self.settings.project,
                    zone=zone,
                    instance=node.id,
                )
            except NotFound:
                gone += 1
                continue
            pending.append((node, op, zone))
        for _node, op, zone in pending:
            with contextlib.suppress(NotFound):
                self._wait(op, _Where(zone=zone), "terminate")
        log.info("gcp: deleted %d instances (%d were gone already)", len(nodes) - gone, gone)

    def release_reservation(self, reservation: CapacityReservation) -> None:
        """Delete the reservation; one already gone is done."""
        match = re.match(r"zones/([^/]+)/", reservation.id or "")
        zone = match.group(1) if match else self.settings.zone(self._split(reservation.offering)[0])
        log.info("gcp: deleting reservation %s in %s", reservation.name, zone)
        try:
            self._mutate(
                "release reservation",
                _Where(zone=zone),
                self._reservations.delete_unary,
                project=self.settings.project,
                zone=zone,
                reservation=reservation.name,
            )
        except NotFound:
            log.info("gcp: reservation %s was gone already", reservation.name)

    def delete_placement_group(self, group: PlacementGroup) -> None:
        """Delete the resource policy; one already gone is done."""
        log.info("gcp: deleting placement policy %s in %s", group.name, group.region)
        try:
            self._mutate(
                "delete placement policy",
                _Where(region=group.region),
                self._policies.delete_unary,
                project=self.settings.project,
                region=group.region,
                resource_policy=group.name,
            )
        except NotFound:
            log.info("gcp: placement policy %s was gone already", group.name)

    def interruptions(self, plan_id: str) -> list[Interruption]:
        """Spot preemptions of our nodes, as Compute Engine records them.

        - a ``compute.instances.preempted`` system operation (zone operations, filtered on its type) whose
          ``targetLink`` names one of our instances and that began after the instance was made (a name used
          again by a later launch is not preempted by an old operation): deadline = its start + 30 s, the
          ACPI soft-off a Spot VM gets (:data:`PREEMPTION_NOTICE_SECONDS`);
        - a Spot VM of ours whose termination action is STOP (Terraform's or someone's, not gpuplan's, which
          launches DELETE) that Compute Engine stopped (status TERMINATED, ``lastStopTimestamp``) with no
          operation left in the list: deadline = its stop, passed already.

        A preempted VM with DELETE is gone once its 30 s are over; inventory no longer lists it and the
        reconciler replaces it anyway. The same preemption comes again in later calls while its operation
        is listed: callers drop repeats (the provider contract)."""
        instances = self._instances_of(plan_id)
        nodes = {(_last(i.zone), i.name): (self._node(i), i) for i in instances}
        ours = {key: node for key, (node, _) in nodes.items() if node.capacity is CapacityType.SPOT}
        found: dict[tuple[str | None, str], Interruption] = {}
        for zone in sorted({z for z, _ in ours if z}):
            ops = self._list(
                "list preemptions",
                self._zone_ops.list,
                request={
                    "project": self.settings.project,
                    "zone": zone,
                    "filter": f'operationType = "{PREEMPTED}"',
                },
            )
            for op in ops:
                node = ours.get((zone, _last(op.target_link)))
                if node is None or op.operation_type != PREEMPTED:
                    continue
                began = _time(op.start_time) or _time(op.insert_time)
                if began is None:
                    log.warning("gcp: preemption operation %s names no time; skipped", op.name)
                    continue
                if node.launched is not None and began < node.launched:
                    continue  # an older instance of the same name
                found[(zone, node.id)] = self._interruption(
                    node, began, began + timedelta(seconds=PREEMPTION_NOTICE_SECONDS)
                )
        for key, node in ours.items():
            raw = nodes[key][1]
            stopped = _time(raw.last_stop_timestamp)
            stop_action = raw.scheduling.instance_termination_action == "STOP"
            if key in found or raw.status != "TERMINATED" or not stop_action or stopped is None:
                continue
            found[key] = self._interruption(node, stopped, stopped)
        return list(found.values())

    @staticmethod
    def _interruption(node: Node, at: datetime, deadline: datetime) -> Interruption:
        return Interruption(
            node_id=node.id,
            kind="interruption",
            at=at,
            offering=node.offering,
            pool=node.pool,
            run=node.run,
            deadline=deadline,
        )

    def _machine_type(self, zone: str, machine: str) -> Any | None:
        """The zone's machine type (vCPUs, bundled accelerators), read once per provider; None when the
        zone does not sell it."""
        key = (zone, machine)
        if key not in self._machine_cache:
            try:
                self._machine_cache[key] = self._api(
                    "read machine type",
                    self._machine_types.get,
                    project=self.settings.project,
                    zone=zone,
                    machine_type=machine,
                )
            except NotFound:
                self._machine_cache[key] = None
        return self._machine_cache[key]

    def quotas(self, wanted: Sequence[tuple[str, CapacityType]]) -> list[Quota]:
        """The regional quotas (``regions.get``: metric, limit, usage) that launches of ``wanted`` count
        against: the GPU metric of the machine's accelerator (:data:`GPU_QUOTA_METRIC`) and its vCPUs'
        metric (``<SERIES>_CPUS`` where the region reports one, e.g. A2_CPUS, else CPUS). Spot launches
        count against the ``PREEMPTIBLE_`` metric when the region grants it (limit > 0), else against the
        standard one (https://cloud.google.com/compute/docs/instances/spot#quotas). A metric the region
        does not report, or a machine type its zone does not sell, is left out, never guessed.

        A reservation takes its VMs' quota when it is made, and a VM that consumes it takes none of its
        own (https://cloud.google.com/compute/docs/instances/reservations-overview), so the region's
        usage holds the unused part of every reservation; ``reserved`` names it per reservation of the
        region's zone (``count - inUseCount`` VMs' units), so a launch into one is not counted again."""
        by_region: dict[str, list[tuple[str, CapacityType, str]]] = {}
        for offering, capacity in wanted:
            if self.handles(offering):
                region, machine = self._split(offering)
                by_region.setdefault(region, []).append((offering, capacity, machine))
        found: list[Quota] = []
        for region, items in sorted(by_region.items()):
            reply = self._api("read quotas", self._regions.get, project=self.settings.project, region=region)
            reported = {str(q.metric): q for q in reply.quotas}
            counted: dict[str, dict[tuple[str, CapacityType], float]] = {}
            for offering, capacity, machine in items:
                units = self._quota_units(region, machine, reported)
                if units is None:
                    log.warning("gcp: %s not sold in %s: its quotas are unchecked", machine, region)
                    continue
                for metric, per_node in units:
                    spot = reported.get(f"PREEMPTIBLE_{metric}")
                    if capacity is CapacityType.SPOT and spot is not None and spot.limit > 0:
                        metric = f"PREEMPTIBLE_{metric}"
                    if metric in reported:
                        counted.setdefault(metric, {})[(offering, capacity)] = per_node
            held = self._reserved_units(region, reported) if counted else {}
            for metric, per in sorted(counted.items()):
                q = reported[metric]
                found.append(
                    Quota(
                        name=metric,
                        region=region,
                        limit=float(q.limit),
                        used=float(q.usage),
                        unit="GPUs" if metric.endswith("_GPUS") else "vCPUs",
                        per_node=per,
                        reserved=held.get(metric, {}),
                    )
                )
        return found

    def _quota_units(
        self, region: str, machine: str, reported: Mapping[str, Any]
    ) -> list[tuple[str, float]] | None:
        """(metric, units) one VM of ``machine`` takes on demand: its GPUs and its vCPUs; None when the
        region's zone does not sell it."""
        mt = self._machine_type(self.settings.zone(region), machine)
        if mt is None:
            return None
        units: list[tuple[str, float]] = []
        if mt.accelerators:
            acc = mt.accelerators[0]
            metric = GPU_QUOTA_METRIC.get(acc.guest_accelerator_type)
            if metric is not None:
                units.append((metric, float(acc.guest_accelerator_count)))
        if mt.guest_cpus:
            series = f"{machine.split('-', 1)[0].upper()}_CPUS"
            units.append((series if series in reported else "CPUS", float(mt.guest_cpus)))
        return units

    def _reserved_units(self, region: str, reported: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        """Metric -> reservation name -> units its unused VMs hold, for the reservations of ``region``'s
        zone (every one in the project, not only ours: the quota is the project's)."""
        zone = self.settings.zone(region)
        listed = self._list(
            "list reservations", self._reservations.list, project=self.settings.project, zone=zone
        )
        held: dict[str, dict[str, float]] = {}
        for r in listed:
            sku = r.specific_reservation
            free = int(sku.count) - int(sku.in_use_count)
            units = self._quota_units(region, _last(sku.instance_properties.machine_type), reported)
            if free <= 0 or not units or r.status == "DELETING":
                continue
            for metric, per_node in units:
                held.setdefault(metric, {})[r.name] = free * per_node
        return held


def _conforms(provider: GcpProvider) -> Provider:
    """Never called: mypy checks here that GcpProvider has every call of the Provider protocol."""
    return provider
