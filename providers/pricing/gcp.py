"""GCP GPU machine prices from the Cloud Billing Catalog, assembled as the bill does.

Compute Engine bills an accelerator-optimized VM per resource, not per machine type: the series' vCPU
SKU x vCPUs + its memory SKU x GiB + the GPU SKU x GPUs (https://cloud.google.com/compute/vm-instance-pricing,
"Accelerator-optimized machine types"; https://cloud.google.com/compute/gpus-pricing). So a machine's price
per usage type (on-demand, Spot, 1- and 3-year resource-based committed use) is a sum of three SKUs of the
Cloud Billing Catalog API (https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list,
service ``services/6F81-5844-456A``, Compute Engine), read once for all regions since the catalog is global,
page by page. A component whose SKU is missing makes that tier unknown (never a partial sum), with a
warning naming the SKU looked for.

The machines' shapes (vCPUs, memory, GPUs) come from the Compute API's ``machineTypes.list`` in each zone
of each region (https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes/list); a region whose
machine types cannot be read, or for which the catalog has no SKU at all, is named in
``FetchResult.failed_regions`` and the other regions are still returned.

The SDKs (google-cloud-billing, google-cloud-compute) are imported when :func:`fetch` runs, so
``import providers.pricing.gcp`` needs neither.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
from typing import Any, Final, Literal

from models.catalog import GPU_MEMORY_GB, Offering
from models.priceterms import PriceTerm
from models.tiers import Tier
from providers.errors import (
    Auth,
    InvalidRequest,
    MissingSDK,
    NotFound,
    ProviderError,
    Throttled,
    Timeout,
)
from providers.pricing.common import (
    FetchRequest,
    FetchResult,
    Progress,
    Quote,
    Shape,
    assemble_offering,
    canonical_gpu_model,
    with_retries,
)

__all__ = ["COMPUTE_SERVICE", "fetch"]

CLOUD: Final = "gcp"
#: The Cloud Billing Catalog's service id of Compute Engine (``services.list``: displayName "Compute Engine").
COMPUTE_SERVICE: Final = "services/6F81-5844-456A"
DEFAULT_BILLING_ENDPOINT: Final = "cloudbilling.googleapis.com"
DEFAULT_COMPUTE_ENDPOINT: Final = "compute.googleapis.com"
#: The most SKUs ``services.skus.list`` returns in one page (its documented ``pageSize`` maximum).
PAGE_SIZE: Final = 5000
#: Seconds one API call may take before it is a failure (and retried as transient).
CALL_TIMEOUT: Final = 60.0

Component = Literal["core", "ram", "gpu"]
#: ``category.usageType`` -> the catalog tier it prices (https://cloud.google.com/billing/docs/reference/rest/
#: v1/services.skus#category: OnDemand, Preemptible = Spot VMs, Commit1Yr, Commit3Yr).
USAGE_TIER: Final[dict[str, Tier]] = {
    "OnDemand": Tier.ON_DEMAND,
    "Preemptible": Tier.SPOT,
    "Commit1Yr": Tier.RESERVED_1Y,
    "Commit3Yr": Tier.RESERVED_3Y,
}
#: The unit each component is priced in (``pricingExpression.usageUnit``): vCPU-hours, GiB-hours, GPU-hours.
USAGE_UNIT: Final[dict[Component, str]] = {"core": "h", "ram": "GiBy.h", "gpu": "h"}

#: Machine family (the type's name without its size) -> the series name its vCPU and memory SKUs carry
#: ("A3 Instance Core running in Americas", "Commitment v1: A3 Cpu in Americas for 1 Year"). A2 Ultra bills on
#: the A2 rates (its embedded-catalog host price, 96 x A2 core + 1360 GiB x A2 RAM = 8.79698, says so) and
#: A3 Mega on the A3 rates (same host price as A3 High in models/data/catalog.csv); A3 Ultra has its own
#: "A3Ultra Instance Core" SKUs. A family not listed uses its series letters (``g4-standard`` -> "G4"). This
#: table also covers a series the catalog lists late after launch (PRICE-APIS.md): add it here.
SERIES_SKU_NAME: Final[dict[str, str]] = {
    "a2-highgpu": "A2",
    "a2-megagpu": "A2",
    "a2-ultragpu": "A2",
    "a3-highgpu": "A3",
    "a3-megagpu": "A3",
    "a3-edgegpu": "A3",
    "a3-ultragpu": "A3Ultra",
    "a4-highgpu": "A4",
    "g2-standard": "G2",
}
#: Compute Engine accelerator type -> the names its GPU SKUs carry, preferred first (the SKU descriptions of
#: https://cloud.google.com/skus/?filter=GPU; newer ones drop "Nvidia", A3 Mega's has had two spellings).
GPU_SKU_NAMES: Final[dict[str, tuple[str, ...]]] = {
    "nvidia-tesla-a100": ("Nvidia Tesla A100 GPU",),
    "nvidia-a100-80gb": ("Nvidia Tesla A100 80GB GPU",),
    "nvidia-h100-80gb": ("Nvidia H100 80GB GPU",),
    "nvidia-h100-mega-80gb": ("Nvidia H100 80GB Mega GPU", "Nvidia H100 80GB Plus GPU"),
    "nvidia-h200-141gb": ("H200 141GB GPU",),
    "nvidia-b200": ("A4 Nvidia B200 (1 gpu slice)",),
    "nvidia-l4": ("Nvidia L4 GPU",),
    "nvidia-tesla-t4": ("Nvidia Tesla T4 GPU",),
    "nvidia-tesla-v100": ("Nvidia Tesla V100 GPU",),
}
_GPU_BY_SKU_NAME: Final[dict[str, tuple[str, int]]] = {
    name: (accelerator, rank)
    for accelerator, names in GPU_SKU_NAMES.items()
    for rank, name in enumerate(names)
}
#: The multi-node GPU fabric of each machine type and its bandwidth, as the embedded catalog records them
#: (models/data/catalog.csv: a3-highgpu-8g GPUDirect-TCPX 800 Gb/s, a3-megagpu-8g GPUDirect-TCPXO 1600,
#: a3-ultragpu-8g RDMA 3200 recorded as ``infiniband``; a4-highgpu-8g is RDMA over CX-7 too, as
#: providers/gcp.py MACHINE_FABRIC says). Every other GPU machine (a2, g2, 1-4 GPU sizes) has none.
MACHINE_FABRIC: Final[dict[str, tuple[str, float | None]]] = {
    "a3-highgpu-8g": ("tcpx", 800.0),
    "a3-megagpu-8g": ("tcpxo", 1600.0),
    "a3-ultragpu-8g": ("infiniband", 3200.0),
    "a4-highgpu-8g": ("infiniband", 3200.0),
}

# "Commitment v1: A3 Cpu in Americas for 3 Years", "Spot Preemptible A2 Instance Ram running in Virginia",
# "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas": a prefix saying how it is
# bought, the resource, where, and a commitment's length.
_PREFIX = re.compile(r"^(?:(?P<commit>Commitment(?: v\d+)?: )|(?P<spot>(?:Spot )?Preemptible ))?")
_WHERE = re.compile(
    r"^(?P<name>.+?)(?P<spot> attached to Spot Preemptible VMs)?(?: running)? in (?P<where>.+?)"
    r"(?: for (?P<years>\d+) Years?)?$"
)
_CORE = re.compile(r"^(?P<series>\S+(?: Ultra)?) (?:Instance Core|Cpu)$")
_RAM = re.compile(r"^(?P<series>\S+(?: Ultra)?) (?:Instance Ram|Ram)$")


@dataclass(frozen=True)
class SkuRate:
    """One SKU's price for one component, as read: USD per unit (vCPU-hour, GiB-hour or GPU-hour)."""

    sku_id: str
    description: str
    usd: float
    rank: int = 0


@dataclass(frozen=True)
class Machine:
    """A machine type with GPUs as ``machineTypes.list`` describes it."""

    name: str
    vcpus: int
    memory_gib: float
    accelerator: str
    gpus: int


SkuKey = tuple[Component, str, Tier, str]  # component, series or accelerator type, tier, region


def fetch(request: FetchRequest, progress: Progress | None = None) -> FetchResult:
    """GCP GPU offerings in ``request.regions``: shapes from each region's ``machineTypes``, prices from one
    paged read of the Cloud Billing Catalog, every tier quoted with its SKUs or unknown with a warning.

    Raises :class:`providers.errors.ProviderError` (Auth, Throttled, ...) only when the catalog itself cannot
    be read; a region that fails is in ``failed_regions``."""
    say = progress or (lambda line: None)
    sdk = _sdk()
    result = FetchResult(cloud=CLOUD)
    billing_endpoint = request.endpoints.get("gcp-billing", DEFAULT_BILLING_ENDPOINT)
    compute_endpoint = request.endpoints.get("gcp-compute", DEFAULT_COMPUTE_ENDPOINT)
    credentials, project = _credentials(sdk, (billing_endpoint, compute_endpoint), request.project)

    def retried(call: Callable[[], Any], what: str) -> Any:
        return with_retries(
            call,
            what=what,
            throttled=lambda error: _transient(sdk, error),
            attempts=request.attempts,
            backoff_seconds=request.backoff_seconds,
        )

    machines: dict[str, list[Machine]] = {}
    regions_client = sdk.compute.RegionsClient(**_client_kwargs(sdk, credentials, compute_endpoint))
    types_client = sdk.compute.MachineTypesClient(**_client_kwargs(sdk, credentials, compute_endpoint))
    for region in request.regions:
        try:
            machines[region] = _region_machines(sdk, regions_client, types_client, project, region, retried)
        except Exception as error:  # an API error, a dropped connection, a reply that does not parse
            result.failed_regions[region] = f"machineTypes: {_describe(error)}"
            say(f"gcp {region}: failed ({_describe(error)})")
            continue
        say(f"gcp {region}: {len(machines[region])} GPU machine types")

    wanted = _wanted_machines(request, machines, result)
    if not wanted:
        return result
    needed = {
        key
        for region, found in wanted.items()
        for machine, _ in found
        for component, name in _components(machine)
        for key in ((component, name, tier, region) for tier in USAGE_TIER.values())
    }
    catalog = sdk.billing.CloudCatalogClient(**_client_kwargs(sdk, credentials, billing_endpoint))
    try:
        rates = _read_catalog(sdk, catalog, needed, retried, say, result.warnings)
    except ProviderError:
        raise
    except Exception as error:  # the whole fetch fails: one ProviderError, the SDK's error as its cause
        raise _map_error(sdk, error, "list skus") from error

    source = f"GCP Cloud Billing Catalog {COMPUTE_SERVICE} skus ({_url(billing_endpoint)}/v1)"
    for region, found in wanted.items():
        if not any(key[3] == region for key in rates):
            result.failed_regions[region] = (
                f"no Compute Engine SKU in the Cloud Billing Catalog serves {region} "
                f"(looked for {len({k for k in needed if k[3] == region})} SKUs)"
            )
            continue
        for machine, shape in found:
            result.offerings.append(
                _offering(request, region, machine, shape, rates, source, result.terms, result.warnings)
            )
    say(f"gcp: {len(result.offerings)} offerings, {len(result.failed_regions)} regions failed")
    return result


# ---- shapes ---------------------------------------------------------------------------------------------


def _region_machines(
    sdk: SimpleNamespace,
    regions_client: Any,
    types_client: Any,
    project: str,
    region: str,
    retried: Callable[[Callable[[], Any], str], Any],
) -> list[Machine]:
    """The machine types with GPUs in any zone of ``region`` (a type is in some zones only: the union)."""
    info = retried(
        lambda: regions_client.get(project=project, region=region, retry=None, timeout=CALL_TIMEOUT),
        f"gcp regions.get {region}",
    )
    zones = sorted(url.rsplit("/", 1)[-1] for url in info.zones)
    found: dict[str, Machine] = {}
    for zone in zones:
        listed = retried(
            partial(_machine_types, types_client, project, zone), f"gcp machineTypes.list {zone}"
        )
        for mt in listed:
            if not mt.accelerators or mt.name in found:
                continue
            accelerator = mt.accelerators[0]
            found[mt.name] = Machine(
                name=mt.name,
                vcpus=int(mt.guest_cpus),
                memory_gib=mt.memory_mb / 1024,
                accelerator=accelerator.guest_accelerator_type,
                gpus=int(accelerator.guest_accelerator_count),
            )
    return [found[name] for name in sorted(found)]


def _machine_types(client: Any, project: str, zone: str) -> list[Any]:
    """Every page of one zone's machine types (the pager follows ``nextPageToken``)."""
    return list(client.list(project=project, zone=zone, retry=None, timeout=CALL_TIMEOUT))


def _wanted_machines(
    request: FetchRequest, machines: Mapping[str, list[Machine]], result: FetchResult
) -> dict[str, list[tuple[Machine, Shape]]]:
    """Each region's machines of the GPU models asked for, with their catalog shape; a GPU gpuplan does not
    plan (T4, V100, ...) is skipped with a warning."""
    wanted: dict[str, list[tuple[Machine, Shape]]] = {}
    unplanned: set[str] = set()
    for region, found in machines.items():
        wanted[region] = []
        for machine in found:
            model = canonical_gpu_model(machine.accelerator)
            if model is None:
                unplanned.add(machine.accelerator)
                continue
            if not request.wants(model):
                continue
            fabric, gbps = MACHINE_FABRIC.get(machine.name, ("none", None))
            memory = GPU_MEMORY_GB.get(model)
            if memory is None:  # pragma: no cover - every canonical model has one
                raise AssertionError(model)
            shape = Shape(
                gpu_model=model,
                gpus_per_node=machine.gpus,
                gpu_memory_gb=memory,
                fabric=fabric,
                fabric_gbps=gbps,
            )
            wanted[region].append((machine, shape))
        if not wanted[region]:
            result.warnings.append(f"gcp {region}: no machine type with the GPUs asked for")
    for accelerator in sorted(unplanned):
        result.warnings.append(f"gcp: skipped machine types with {accelerator}: a GPU gpuplan does not plan")
    return {region: found for region, found in wanted.items() if found}


def _series(machine: str) -> str:
    family = machine.rsplit("-", 1)[0]
    return SERIES_SKU_NAME.get(family, family.split("-", 1)[0].upper())


def _components(machine: Machine) -> tuple[tuple[Component, str], ...]:
    series = _series(machine.name)
    return (("core", series), ("ram", series), ("gpu", machine.accelerator))


# ---- the catalog ----------------------------------------------------------------------------------------


def _read_catalog(
    sdk: SimpleNamespace,
    client: Any,
    needed: set[SkuKey],
    retried: Callable[[Callable[[], Any], str], Any],
    say: Progress,
    warnings: list[str],
) -> dict[SkuKey, SkuRate]:
    """The rates of the SKUs ``needed`` from every page of the catalog. Pages are requested one by one (each
    retried on its own when throttled) and only the SKUs needed are kept, so memory holds one page."""
    rates: dict[SkuKey, SkuRate] = {}
    token = ""
    page = 0
    while True:
        page += 1
        ask = sdk.billing.ListSkusRequest(
            parent=COMPUTE_SERVICE, page_size=PAGE_SIZE, page_token=token, currency_code="USD"
        )
        response = retried(
            partial(client.list_skus, request=ask, retry=None, timeout=CALL_TIMEOUT),
            f"gcp billing catalog page {page}",
        )
        kept = 0
        for sku in response.skus:
            for key, rate in _sku_rates(sku, needed, warnings):
                old = rates.get(key)
                if old is None or rate.rank < old.rank:
                    rates[key] = rate
                    kept += 1
                elif rate.rank == old.rank and old.sku_id != rate.sku_id:
                    warnings.append(
                        f"gcp: SKUs {old.sku_id} and {rate.sku_id} both price {key[0]} {key[1]} "
                        f"{key[2].value} in {key[3]}; kept {old.sku_id} ({old.description!r})"
                    )
        say(f"gcp billing catalog: page {page}, {len(response.skus)} SKUs, {kept} kept")
        token = response.next_page_token
        if not token:
            return rates


def _sku_rates(sku: Any, needed: set[SkuKey], warnings: list[str]) -> Iterator[tuple[SkuKey, SkuRate]]:
    """What one SKU prices: (component, series or accelerator, tier, region) for each region it serves."""
    if sku.category.resource_family != "Compute":
        return
    tier = USAGE_TIER.get(sku.category.usage_type)
    parsed = _parse_description(sku.description, sku.category.resource_group)
    if tier is None or parsed is None:
        return
    component, name, rank, years, spot = parsed
    # the description and the usage type say the same thing, or the SKU is not what it seems
    committed = tier in (Tier.RESERVED_1Y, Tier.RESERVED_3Y)
    if (years is not None) != committed or (spot and tier is not Tier.SPOT):
        return
    if years is not None and years != (1 if tier is Tier.RESERVED_1Y else 3):
        return
    keys = [(component, name, tier, region) for region in sku.service_regions]
    keys = [key for key in keys if key in needed]
    if not keys or not sku.pricing_info:
        return
    # pricingInfo is a timeline, oldest first; without startTime/endTime the API sends the current one
    expression = sku.pricing_info[-1].pricing_expression
    if expression.usage_unit != USAGE_UNIT[component] or not expression.tiered_rates:
        warnings.append(
            f"gcp: SKU {sku.sku_id} ({sku.description!r}) is priced per {expression.usage_unit!r}, "
            f"not {USAGE_UNIT[component]!r}: not used"
        )
        return
    # The last tier's rate: tiers start at startUsageAmount and the last one is what usage beyond every
    # free or introductory allowance pays, i.e. what a fleet pays (compute SKUs have a single tier at 0).
    price = expression.tiered_rates[-1].unit_price
    if price.currency_code not in ("", "USD"):
        warnings.append(f"gcp: SKU {sku.sku_id} is priced in {price.currency_code}, not USD: not used")
        return
    usd = int(price.units) + int(price.nanos) / 1e9
    for key in keys:
        yield key, SkuRate(sku_id=sku.sku_id, description=sku.description, usd=usd, rank=rank)


def _parse_description(
    description: str, resource_group: str
) -> tuple[Component, str, int, int | None, bool] | None:
    """(component, series or accelerator type, preference rank, commitment years, spot) of a SKU
    description, or None for a SKU that is not a machine's vCPU, memory or GPU (custom shapes, sole
    tenancy, DWS, licences, storage)."""
    prefix = _PREFIX.match(description)
    rest = description[prefix.end() :] if prefix else description
    where = _WHERE.match(rest)
    if where is None:
        return None
    name = where.group("name")
    years = int(where.group("years")) if where.group("years") else None
    committed = bool(prefix and prefix.group("commit"))
    if committed != (years is not None):
        return None
    spot = bool((prefix and prefix.group("spot")) or where.group("spot"))
    if name in _GPU_BY_SKU_NAME:
        accelerator, rank = _GPU_BY_SKU_NAME[name]
        return "gpu", accelerator, rank, years, spot
    if resource_group == "GPU":
        return None
    for component, pattern in (("core", _CORE), ("ram", _RAM)):
        match = pattern.match(name)
        if match:
            return component, match.group("series"), 0, years, spot  # type: ignore[return-value]
    return None


def _expected_description(component: Component, name: str, tier: Tier, region: str) -> str:
    """How the SKU looked for is described in the catalog, for a warning that names it."""
    if component == "gpu":
        resource = GPU_SKU_NAMES.get(name, (name,))[0]
    else:
        committed = tier in (Tier.RESERVED_1Y, Tier.RESERVED_3Y)
        part = {
            "core": "Cpu" if committed else "Instance Core",
            "ram": "Ram" if committed else "Instance Ram",
        }
        resource = f"{name} {part[component]}"
    usage = next(usage for usage, t in USAGE_TIER.items() if t is tier)
    where = " running in" if component == "gpu" else " in"
    text = {
        Tier.ON_DEMAND: f"{resource} running in <{region}>",
        Tier.SPOT: (
            f"{resource} attached to Spot Preemptible VMs running in <{region}>"
            if component == "gpu"
            else f"Spot Preemptible {resource} running in <{region}>"
        ),
        Tier.RESERVED_1Y: f"Commitment v1: {resource}{where} <{region}> for 1 Year",
        Tier.RESERVED_3Y: f"Commitment v1: {resource}{where} <{region}> for 3 Years",
    }[tier]
    return f"'{text}' (usageType {usage})"


# ---- assembly -------------------------------------------------------------------------------------------


def _offering(
    request: FetchRequest,
    region: str,
    machine: Machine,
    shape: Shape,
    rates: Mapping[SkuKey, SkuRate],
    source: str,
    terms: list[PriceTerm],
    warnings: list[str],
) -> Offering:
    """One catalog row: each tier the sum of its three SKUs x quantities, or unknown when one is missing."""
    quantities = {"core": float(machine.vcpus), "ram": machine.memory_gib, "gpu": float(machine.gpus)}
    units = {"core": "vCPU", "ram": "GiB", "gpu": "GPU"}
    offering_id = f"{CLOUD}:{region}:{machine.name}"
    quotes: dict[Tier, Quote | None] = {}
    for tier in USAGE_TIER.values():
        parts = []
        missing = []
        for component, name in _components(machine):
            rate = rates.get((component, name, tier, region))
            if rate is None:
                missing.append(_expected_description(component, name, tier, region))
            else:
                parts.append((component, rate))
        if missing:
            quotes[tier] = None
            warnings.append(
                f"gcp {region} {machine.name} {tier.value}: price unknown, no SKU in the catalog for "
                + "; ".join(missing)
            )
            continue
        total = sum(quantities[c] * rate.usd for c, rate in parts)
        used = " + ".join(f"{rate.sku_id} x {quantities[c]:g} {units[c]}" for c, rate in parts)
        quotes[tier] = Quote(usd_h=total, source=f"{source}: {used}", as_of=request.now)
    for tier, years in ((Tier.RESERVED_1Y, 1), (Tier.RESERVED_3Y, 3)):
        quote = quotes[tier]
        if quote is not None:
            terms.append(
                PriceTerm(
                    offering=offering_id,
                    kind="committed-use",
                    term_years=years,
                    offering_class="resource-based",
                    payment="no-upfront",
                    usd_h=quote.usd_h,
                    upfront_usd=0.0,
                    zone="",
                    source=quote.source,
                    as_of=quote.as_of,
                )
            )
    return assemble_offering(
        cloud=CLOUD,
        region=region,
        instance_type=machine.name,
        shape=shape,
        on_demand=quotes[Tier.ON_DEMAND],
        spot=quotes[Tier.SPOT],
        terms=[t for t in terms if t.offering == offering_id],
        missing_source=source,
    )


# ---- the SDK boundary -----------------------------------------------------------------------------------


def _sdk() -> SimpleNamespace:
    """The Compute Engine SDK the provider adapter loads (``providers.gcp.sdk``), with the Cloud Billing
    client beside it; imported on first use so the rest of gpuplan needs none of them."""
    from providers.gcp import sdk

    modules = sdk()
    try:
        from google.cloud import billing_v1
    except ImportError as exc:
        raise MissingSDK(CLOUD, "google-cloud-billing", "gcp") from exc
    return SimpleNamespace(**vars(modules), billing=billing_v1)


def _url(endpoint: str) -> str:
    return endpoint if "://" in endpoint else f"https://{endpoint}"


def _credentials(sdk: SimpleNamespace, endpoints: Iterable[str], asked: str | None) -> tuple[Any, str]:
    """Credentials and the project whose machine types are read. An endpoint over plain http (a mirror, a
    test's stand-in) gets anonymous credentials, as no token is sent without TLS; otherwise Application
    Default Credentials. The project: the request's, GOOGLE_CLOUD_PROJECT, CLOUDSDK_CORE_PROJECT, else the
    credentials'."""
    project = asked or os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("CLOUDSDK_CORE_PROJECT") or ""
    if all(endpoint.startswith("http://") for endpoint in endpoints):
        credentials: Any = sdk.AnonymousCredentials()
    else:
        try:
            credentials, default_project = sdk.auth.default(
                scopes=["https://www.googleapis.com/auth/cloud-platform"]
            )
        except sdk.auth_exceptions.DefaultCredentialsError as exc:
            raise Auth(
                f"no Application Default Credentials ({exc})", cloud=CLOUD, operation="catalog fetch"
            ) from exc
        project = project or default_project or ""
    if not project:
        raise InvalidRequest(
            "no project to read machine types in: give --project or set GOOGLE_CLOUD_PROJECT",
            cloud=CLOUD,
            operation="catalog fetch",
        )
    return credentials, project


def _client_kwargs(sdk: SimpleNamespace, credentials: Any, endpoint: str) -> dict[str, Any]:
    return {
        "transport": "rest",
        "credentials": credentials,
        "client_options": sdk.ClientOptions(api_endpoint=endpoint),
    }


def _transient(sdk: SimpleNamespace, error: BaseException) -> bool:
    """Throttled (429) or a failure worth another try (5xx, a dropped connection, a timeout)."""
    exc = sdk.api_exceptions
    if isinstance(error, exc.TooManyRequests | exc.ServerError | exc.DeadlineExceeded | exc.RetryError):
        return True
    return isinstance(error, sdk.requests.ConnectionError | sdk.requests.Timeout)


def _describe(error: BaseException) -> str:
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or str(error)
    return f"HTTP {int(code)} {message}" if isinstance(code, int) else f"{type(error).__name__}: {message}"


def _map_error(sdk: SimpleNamespace, error: BaseException, operation: str) -> ProviderError:
    """The providers.errors class for an SDK error that ends the whole fetch."""
    exc = sdk.api_exceptions
    kind: type[ProviderError] = ProviderError
    if isinstance(error, exc.TooManyRequests):
        kind = Throttled
    elif isinstance(error, exc.Unauthorized | exc.Forbidden):
        kind = Auth
    elif isinstance(error, exc.NotFound):
        kind = NotFound
    elif isinstance(error, exc.BadRequest):
        kind = InvalidRequest
    elif isinstance(error, exc.DeadlineExceeded | sdk.requests.Timeout):
        kind = Timeout
    code = getattr(error, "code", None)
    return kind(
        _describe(error),
        cloud=CLOUD,
        operation=operation,
        code=str(int(code)) if isinstance(code, int) else None,
    )
