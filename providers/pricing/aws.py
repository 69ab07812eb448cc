"""AWS GPU prices read from AWS's own price APIs: on-demand and Reserved Instances, Savings Plans, spot.

Per region (the regions are read in parallel; one that fails is named in ``failed_regions`` and the others
are still returned):

1. **Price List Query API** ``GetProducts`` (https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html),
   one query per region for the whole ``instanceFamily = GPU instance`` family (plain Linux, shared
   tenancy, no pre-installed software, capacity status Used), paginated by ``NextToken``. Each ``PriceList``
   item is a JSON string, parsed as it comes into a small record and dropped (a region's page is a few MB
   of JSON; nothing holds it twice). ``terms.OnDemand`` is the on-demand price; every ``terms.Reserved``
   offer (1yr/3yr, standard/convertible, No/Partial/All Upfront) becomes a ``reserved-instance`` term with
   its hourly (``Hrs``) and upfront (``Quantity``) dimensions.
2. **EC2** ``DescribeInstanceTypes`` (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html)
   for the types the price list named: the GPU model, count and memory, and EFA. Only the GPU models the
   request wants are kept.
3. **Savings Plans** ``DescribeSavingsPlansOfferingRates`` (https://docs.aws.amazon.com/savingsplans/latest/APIReference/API_DescribeSavingsPlansOfferingRates.html)
   for those types, Compute and EC2 Instance plans, ``BoxUsage`` rows only, paginated by ``nextToken``.
   A rate there is the plan's hourly rate for its payment option: the API quotes no upfront fee per
   instance-hour (a partial/all-upfront plan's fee is the buyer's commitment, not the type's), so the
   terms carry ``upfront_usd`` 0 and only no-upfront rates can head a catalog tier.
4. **EC2** ``DescribeSpotPriceHistory`` (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html)
   over the last ``spot_days``: per zone the **time-weighted** median (a price holds from its timestamp until
   the next change, or until now), one ``spot-zone`` term per zone; the catalog's spot price is the plain
   median of the zone values.

Retries: botocore's own are switched off (``total_max_attempts`` 1: its ``max_attempts`` 1 would still
retry once) and every page is retried by
:func:`providers.pricing.common.with_retries` on throttling (``ThrottlingException``,
``RequestLimitExceeded``, HTTP 429) and transient failures (HTTP 5xx, a proxy's HTML page, a dropped
connection), so the retrying is visible and bounded. botocore (boto3's core) is imported inside :func:`fetch`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Final, TypeVar

from models.catalog import GPU_MEMORY_GB, Offering
from models.priceterms import Payment, PriceTerm, TermKind
from providers.errors import InvalidRequest, MissingSDK, OperationFailed
from providers.pricing.common import (
    FetchRequest,
    FetchResult,
    Progress,
    Quote,
    Shape,
    assemble_offering,
    canonical_gpu_model,
    median,
    with_retries,
)

__all__ = ["fetch"]

CLOUD: Final = "aws"
#: The Price List Query API answers in us-east-1 (also eu-central-1, ap-south-1); Savings Plans is global.
PRICING_REGION: Final = "us-east-1"
#: The plain Linux price of a GPU type: the Price List's attributes for it (PRICE-APIS.md, AWS).
PRODUCT_FILTERS: Final = (
    ("instanceFamily", "GPU instance"),
    ("operatingSystem", "Linux"),
    ("tenancy", "Shared"),
    ("preInstalledSw", "NA"),
    ("capacitystatus", "Used"),
    ("licenseModel", "No License required"),
)
_PAYMENT: Final[dict[str, Payment]] = {
    "No Upfront": "no-upfront",
    "Partial Upfront": "partial-upfront",
    "All Upfront": "all-upfront",
}
_LEASE_YEARS: Final = {"1yr": 1, "3yr": 3}
_SP_YEARS: Final = {31_536_000: 1, 94_608_000: 3}
_SP_KIND: Final[dict[str, TermKind]] = {
    "EC2Instance": "savings-plan-ec2-instance",
    "Compute": "savings-plan-compute",
}
#: Error codes that mean "slow down" (Price List, Savings Plans, EC2's own name for it).
_THROTTLE_CODES: Final = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "SlowDown",
    }
)
#: Where each tier's price is looked for, for the warning when it is not there.
_LOOKED_IN: Final = {
    "on_demand": "no OnDemand term in the AWS Price List",
    "spot": "no Linux/UNIX spot price history in the window",
    "reserved_1y": "no 1-year no-upfront Reserved Instance or EC2 Instance Savings Plan",
    "reserved_3y": "no 3-year no-upfront Reserved Instance or EC2 Instance Savings Plan",
}
#: DescribeInstanceTypes takes at most 100 types a call.
_TYPES_PER_CALL: Final = 100
_MAX_WORKERS: Final = 8
T = TypeVar("T")


def fetch(request: FetchRequest, progress: Progress | None = None) -> FetchResult:
    """Every GPU offering of ``request.regions`` whose GPU model ``request.gpus`` wants, priced from AWS's
    APIs (see the module docstring). A region that fails after the retries is named in ``failed_regions``
    with why; when every region fails the fetch raises :class:`providers.errors.OperationFailed`."""
    if not request.regions:
        raise InvalidRequest("no region to fetch prices for", cloud=CLOUD, operation="catalog fetch")
    clients = _Clients.open(request)
    result = FetchResult(cloud=CLOUD)
    say = _locked(progress)
    regions = tuple(dict.fromkeys(request.regions))
    with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(regions))) as pool:
        outcomes = list(pool.map(lambda r: _fetch_region(clients, request, r, say), regions))
    for region, outcome in zip(regions, outcomes, strict=True):
        if isinstance(outcome, str):
            result.failed_regions[region] = outcome
            result.warnings.append(f"aws {region}: not fetched: {outcome}")
            say(f"aws {region}: failed: {outcome}")
            continue
        result.offerings.extend(outcome.offerings)
        result.terms.extend(outcome.terms)
        result.warnings.extend(outcome.warnings)
    if len(result.failed_regions) == len(regions):
        why = "; ".join(f"{r}: {w}" for r, w in result.failed_regions.items())
        raise OperationFailed(
            f"no region's prices could be read ({why})", cloud=CLOUD, operation="catalog fetch"
        )
    return result


# ---- clients ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Clients:
    """The botocore clients of one fetch, made up front in one thread (making clients is not thread-safe;
    using them is)."""

    pricing: Any
    savingsplans: Any
    ec2: Mapping[str, Any]
    client_error: type[Exception]
    transient_errors: tuple[type[Exception], ...]
    endpoints: Mapping[str, str]

    @classmethod
    def open(cls, request: FetchRequest) -> _Clients:
        try:
            import botocore.session
            from botocore.config import Config
            from botocore.exceptions import (
                ClientError,
                ConnectionClosedError,
                EndpointConnectionError,
                ReadTimeoutError,
            )
            from botocore.parsers import ResponseParserError
        except ImportError as exc:
            raise MissingSDK(CLOUD, "boto3", "aws") from exc
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=60
        )
        session = botocore.session.get_session()  # a new one each fetch: credentials are read afresh
        session.register_component("data_loader", _shared_loader(session))
        pricing = session.create_client(
            "pricing",
            region_name=PRICING_REGION,
            endpoint_url=request.endpoints.get("aws-pricing"),
            config=config,
        )
        savingsplans = session.create_client(
            "savingsplans",
            region_name=PRICING_REGION,
            endpoint_url=request.endpoints.get("aws-savingsplans"),
            config=config,
        )
        ec2 = {
            region: session.create_client(
                "ec2", region_name=region, endpoint_url=request.endpoints.get("aws-ec2"), config=config
            )
            for region in request.regions
        }
        return cls(
            pricing=pricing,
            savingsplans=savingsplans,
            ec2=ec2,
            client_error=ClientError,
            transient_errors=(
                ConnectionClosedError,
                EndpointConnectionError,
                ReadTimeoutError,
                ResponseParserError,
            ),
            endpoints={
                "pricing": pricing.meta.endpoint_url,
                "savingsplans": savingsplans.meta.endpoint_url,
                **{f"ec2 {r}": c.meta.endpoint_url for r, c in ec2.items()},
            },
        )

    def throttled(self, error: BaseException) -> bool:
        """Whether ``error`` is worth another try: a throttle, an HTTP 429 or 5xx, a lost connection."""
        if isinstance(error, self.transient_errors):
            return True
        if isinstance(error, self.client_error):
            answer: dict[str, Any] = getattr(error, "response", {}) or {}
            code = str(answer.get("Error", {}).get("Code", ""))
            status = int(answer.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            return code in _THROTTLE_CODES or status == 429 or status >= 500
        return False


_LOADER_LOCK = threading.Lock()
_LOADERS: list[Any] = []


def _shared_loader(session: Any) -> Any:
    """botocore's data loader, kept between fetches: it caches the service models it has read (EC2's is
    several MB of JSON, ~0.5 s to load), which never change while the process runs."""
    with _LOADER_LOCK:
        if not _LOADERS:
            _LOADERS.append(session.get_component("data_loader"))
        return _LOADERS[0]


def _locked(progress: Progress | None) -> Progress:
    """``progress`` callable from the region threads one line at a time (a no-op when None)."""
    lock = threading.Lock()

    def say(line: str) -> None:
        if progress is not None:
            with lock:
                progress(line)

    return say


def _describe(error: BaseException) -> str:
    """Why a call failed, in one line: the AWS error code and message when there is one."""
    answer = getattr(error, "response", None)
    if isinstance(answer, dict) and "Error" in answer:
        status = answer.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = answer["Error"].get("Code", "")
        message = answer["Error"].get("Message", "")
        return f"{code} (HTTP {status}): {message}".strip().rstrip(":")
    return f"{type(error).__name__}: {error}"


# ---- one region -------------------------------------------------------------------------------------------


@dataclass
class _Product:
    """What one Price List item says, kept small: the item's JSON is dropped once read."""

    instance_type: str
    on_demand: float | None
    version: str
    published: str
    reserved: list[tuple[int, str, Payment, float, float]]  # years, class, payment, usd_h, upfront


@dataclass
class _RegionResult:
    offerings: list[Offering] = field(default_factory=list)
    terms: list[PriceTerm] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _fetch_region(
    clients: _Clients, request: FetchRequest, region: str, say: Progress
) -> _RegionResult | str:
    """One region's offerings, or why it failed (a string, so one region never stops the others)."""
    try:
        return _read_region(clients, request, region, say)
    except Exception as error:  # one region's failure, whatever it is, is named and the others go on
        return _describe(error)


def _read_region(clients: _Clients, request: FetchRequest, region: str, say: Progress) -> _RegionResult:
    out = _RegionResult()
    products = _price_list(clients, request, region, say)
    shapes = _shapes(clients, request, region, sorted(products), out.warnings)
    wanted = sorted(t for t in products if t in shapes)
    say(f"aws {region}: {len(wanted)} GPU instance types wanted of {len(products)} in the price list")
    if not wanted:
        return out
    plans = _savings_plans(clients, request, region, wanted, say)
    spot = _spot(clients, request, region, wanted, say)
    api = clients.pricing.meta.service_model.api_version
    missing = (
        f"AWS Price List GetProducts ({clients.endpoints['pricing']}, API {api}), "
        f"Savings Plans DescribeSavingsPlansOfferingRates and EC2 DescribeSpotPriceHistory for {region}"
    )
    for instance_type in wanted:
        product = products[instance_type]
        offering_id = f"{CLOUD}:{region}:{instance_type}"
        source = (
            f"AWS Price List GetProducts {clients.endpoints['pricing']} (API {api}; offer version "
            f"{product.version}, published {product.published})"
        )
        terms = [
            PriceTerm(
                offering=offering_id,
                kind="reserved-instance",
                term_years=years,
                offering_class=offering_class,
                payment=payment,
                usd_h=usd_h,
                upfront_usd=upfront,
                zone="",
                source=source,
                as_of=request.now,
            )
            for years, offering_class, payment, usd_h, upfront in product.reserved
        ]
        terms.extend(replace(t, offering=offering_id) for t in plans.get(instance_type, ()))
        zone_terms = [replace(t, offering=offering_id) for t in spot.get(instance_type, ())]
        terms.extend(zone_terms)
        on_demand = None if product.on_demand is None else Quote(product.on_demand, source, request.now)
        spot_quote = None
        if zone_terms:
            spot_quote = Quote(
                median(t.usd_h for t in zone_terms),
                f"AWS EC2 DescribeSpotPriceHistory {clients.endpoints[f'ec2 {region}']} (API "
                f"{clients.ec2[region].meta.service_model.api_version}): median over {len(zone_terms)} "
                f"zone(s) of each zone's time-weighted median over {request.spot_days} days, Linux/UNIX",
                request.now,
            )
        offering = assemble_offering(
            cloud=CLOUD,
            region=region,
            instance_type=instance_type,
            shape=shapes[instance_type],
            on_demand=on_demand,
            spot=spot_quote,
            terms=terms,
            missing_source=missing,
        )
        for provenance in offering.provenance:
            if provenance.basis == "unknown":
                out.warnings.append(
                    f"aws {region} {instance_type}: no {provenance.tier} price "
                    f"({_LOOKED_IN[provenance.tier]}): the tier is unknown, not offered"
                )
        out.offerings.append(offering)
        out.terms.extend(terms)
    say(f"aws {region}: {len(out.offerings)} offerings, {len(out.terms)} terms")
    return out


def _pages(
    clients: _Clients,
    request: FetchRequest,
    what: str,
    call: Callable[[str | None], dict[str, Any]],
    token_key: str,
) -> Iterator[dict[str, Any]]:
    """Each page of a paginated call, each page retried on its own (a throttled third page does not
    restart the first two)."""
    token: str | None = None
    seen: set[str] = set()
    page_number = 0
    while True:
        page_number += 1
        page = with_retries(
            partial(call, token),
            what=f"{what} page {page_number}",
            throttled=clients.throttled,
            attempts=request.attempts,
            backoff_seconds=request.backoff_seconds,
        )
        token = page.get(token_key) or None
        yield page
        if token is None:
            return
        if token in seen:  # a server that hands back a token it gave before would loop for ever
            raise RuntimeError(f"{what}: page {page_number} repeats an earlier NextToken")
        seen.add(token)


# ---- the price list -------------------------------------------------------------------------------------


def _price_list(clients: _Clients, request: FetchRequest, region: str, say: Progress) -> dict[str, _Product]:
    """The region's GPU instance types from the Price List, each with its on-demand and RI prices."""
    filters = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}]
    filters += [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in PRODUCT_FILTERS]

    def call(token: str | None) -> dict[str, Any]:
        extra = {"NextToken": token} if token else {}
        answer: dict[str, Any] = clients.pricing.get_products(
            ServiceCode="AmazonEC2", Filters=filters, MaxResults=100, **extra
        )
        return answer

    products: dict[str, _Product] = {}
    pages = 0
    for page in _pages(clients, request, f"aws {region} GetProducts", call, "NextToken"):
        pages += 1
        items: list[str] = page.pop("PriceList", [])
        for index, raw in enumerate(items):
            items[index] = ""  # the page's string goes as soon as it is read
            product = _product(json.loads(raw) if isinstance(raw, str) else raw)
            if product is not None and product.instance_type not in products:
                products[product.instance_type] = product
    say(f"aws {region}: {pages} price list page(s), {len(products)} GPU instance types")
    return products


def _product(item: Mapping[str, Any]) -> _Product | None:
    """One Price List item (``product.attributes``, ``terms.OnDemand``, ``terms.Reserved``) read."""
    attributes = item.get("product", {}).get("attributes", {})
    instance_type = attributes.get("instanceType")
    if not instance_type:
        return None
    terms = item.get("terms", {})
    on_demand: float | None = None
    for offer in terms.get("OnDemand", {}).values():
        hourly, _ = _dimensions(offer)
        if hourly:  # AWS writes 0.0000000000 for a price it does not sell; that is unknown, not free
            on_demand = hourly
            break
    reserved: list[tuple[int, str, Payment, float, float]] = []
    for offer in terms.get("Reserved", {}).values():
        attrs = offer.get("termAttributes", {})
        years = _LEASE_YEARS.get(attrs.get("LeaseContractLength", ""))
        payment = _PAYMENT.get(attrs.get("PurchaseOption", ""))
        offering_class = str(attrs.get("OfferingClass", "")).lower()
        if years is None or payment is None:
            continue
        hourly, upfront = _dimensions(offer)
        if hourly or upfront:
            reserved.append((years, offering_class, payment, hourly, upfront))
    return _Product(
        instance_type=instance_type,
        on_demand=on_demand,
        version=str(item.get("version", "unknown")),
        published=str(item.get("publicationDate", "unknown")),
        reserved=sorted(reserved),
    )


def _dimensions(offer: Mapping[str, Any]) -> tuple[float, float]:
    """An offer term's hourly rate (``Hrs``) and upfront fee (``Quantity``), in USD."""
    hourly = upfront = 0.0
    for dimension in offer.get("priceDimensions", {}).values():
        usd = float(dimension.get("pricePerUnit", {}).get("USD", "0") or 0)
        unit = dimension.get("unit", "")
        if unit in ("Hrs", "Hours", "hours"):
            hourly += usd
        elif unit == "Quantity":
            upfront += usd
    return hourly, upfront


# ---- shapes ----------------------------------------------------------------------------------------------


def _shapes(
    clients: _Clients, request: FetchRequest, region: str, types: list[str], warnings: list[str]
) -> dict[str, Shape]:
    """The shape of each of ``types`` whose GPU model the request wants, from DescribeInstanceTypes."""
    shapes: dict[str, Shape] = {}
    skipped: list[str] = []
    ec2 = clients.ec2[region]
    for start in range(0, len(types), _TYPES_PER_CALL):
        chunk = types[start : start + _TYPES_PER_CALL]

        def call(token: str | None, chunk: list[str] = chunk) -> dict[str, Any]:
            extra = {"NextToken": token} if token else {}
            answer: dict[str, Any] = ec2.describe_instance_types(InstanceTypes=chunk, **extra)
            return answer

        for page in _pages(clients, request, f"aws {region} DescribeInstanceTypes", call, "NextToken"):
            for described in page.get("InstanceTypes", []):
                shape = _shape(described)
                name = described.get("InstanceType", "")
                if shape is None:
                    gpus = described.get("GpuInfo", {}).get("Gpus") or [{}]
                    skipped.append(f"{name} ({gpus[0].get('Name', 'no GPU')})")
                elif request.wants(shape.gpu_model):
                    shapes[name] = shape
    if skipped:
        warnings.append(
            f"aws {region}: GPU models gpuplan does not plan, skipped: {', '.join(sorted(skipped))}"
        )
    return shapes


def _shape(described: Mapping[str, Any]) -> Shape | None:
    """A DescribeInstanceTypes entry as a :class:`Shape`; None when its GPU is not one gpuplan plans.

    The memory is the model's nominal size (``GPU_MEMORY_GB``) where the API's usable MiB (A10G: 22,888)
    would make the same card look different from the embedded catalog; the fabric bandwidth is the
    ``NetworkPerformance`` figure (``3200 Gigabit``, ``4x 100 Gigabit``: 400), the catalog's convention,
    recorded only where EFA is supported."""
    gpus = described.get("GpuInfo", {}).get("Gpus") or []
    if not gpus:
        return None
    gpu = gpus[0]
    mib = float(gpu.get("MemoryInfo", {}).get("SizeInMiB") or 0)
    model = canonical_gpu_model(str(gpu.get("Name", "")), mib / 1024 if mib else None)
    if model is None:
        return None
    count = sum(int(g.get("Count") or 0) for g in gpus)
    if count < 1:  # a fractional GPU (g6f: GpuPartitionSize < 1) is not a node gpuplan can plan
        return None
    network = described.get("NetworkInfo", {})
    efa = bool(network.get("EfaSupported"))
    return Shape(
        gpu_model=model,
        gpus_per_node=count,
        gpu_memory_gb=GPU_MEMORY_GB.get(model, round(mib / 1024, 1)),
        fabric="efa" if efa else "none",
        fabric_gbps=_gbps(str(network.get("NetworkPerformance", ""))) if efa else None,
    )


def _gbps(performance: str) -> float | None:
    """``3200 Gigabit`` -> 3200, ``4x 100 Gigabit`` -> 400, ``Up to 25 Gigabit`` -> 25; None if unreadable."""
    found = re.search(r"(?:(\d+)\s*x\s*)?(\d+(?:\.\d+)?)\s*Gigabit", performance, re.IGNORECASE)
    if found is None:
        return None
    return float(found.group(1) or 1) * float(found.group(2))


# ---- savings plans ---------------------------------------------------------------------------------------


def _savings_plans(
    clients: _Clients, request: FetchRequest, region: str, types: list[str], say: Progress
) -> dict[str, list[PriceTerm]]:
    """The Compute and EC2 Instance Savings Plans rates of ``types`` in ``region``, per instance type."""
    filters = [
        {"name": "region", "values": [region]},
        {"name": "instanceType", "values": types},
        {"name": "tenancy", "values": ["shared"]},
        {"name": "productDescription", "values": ["Linux/UNIX"]},
    ]
    api = clients.savingsplans.meta.service_model.api_version

    def call(token: str | None) -> dict[str, Any]:
        extra = {"nextToken": token} if token else {}
        answer: dict[str, Any] = clients.savingsplans.describe_savings_plans_offering_rates(
            savingsPlanTypes=["Compute", "EC2Instance"],
            products=["EC2"],
            serviceCodes=["AmazonEC2"],
            filters=filters,
            maxResults=1000,
            **extra,
        )
        return answer

    found: dict[tuple[str, TermKind, int, Payment], PriceTerm] = {}
    pages = 0
    for page in _pages(
        clients, request, f"aws {region} DescribeSavingsPlansOfferingRates", call, "nextToken"
    ):
        pages += 1
        for row in page.get("searchResults", []):
            term = _plan_rate(row, region, api, clients.endpoints["savingsplans"], request.now)
            if term is not None:
                key = (term.offering, term.kind, term.term_years or 0, term.payment)
                found.setdefault(key, term)
    say(f"aws {region}: {pages} savings plans page(s), {len(found)} rates")
    by_type: dict[str, list[PriceTerm]] = {}
    for term in found.values():
        by_type.setdefault(term.offering, []).append(term)
    return by_type


def _plan_rate(
    row: Mapping[str, Any], region: str, api: str, endpoint: str, now: datetime
) -> PriceTerm | None:
    """One ``searchResults`` row as a term keyed by instance type (the caller names the offering), or
    None for a row that is not a plain shared Linux box hour of this region."""
    usage = str(row.get("usageType", ""))
    if "BoxUsage" not in usage.split(":")[0]:
        return None
    properties = {p.get("name"): p.get("value") for p in row.get("properties", [])}
    instance_type = properties.get("instanceType")
    if not instance_type or properties.get("region", region) != region:
        return None
    plan = row.get("savingsPlanOffering", {})
    kind = _SP_KIND.get(str(plan.get("planType", "")))
    years = _SP_YEARS.get(int(plan.get("durationSeconds") or 0))
    payment = _PAYMENT.get(str(plan.get("paymentOption", "")))
    if kind is None or years is None or payment is None:
        return None
    try:
        rate = float(row.get("rate", ""))
    except ValueError:
        return None
    if rate <= 0:
        return None
    return PriceTerm(
        offering=instance_type,
        kind=kind,
        term_years=years,
        offering_class="",
        payment=payment,
        usd_h=rate,
        upfront_usd=0.0,
        zone="",
        source=f"AWS Savings Plans DescribeSavingsPlansOfferingRates {endpoint} (API {api}; offering "
        f"{plan.get('offeringId', 'unknown')})",
        as_of=now,
    )


# ---- spot ------------------------------------------------------------------------------------------------


def _spot(
    clients: _Clients, request: FetchRequest, region: str, types: list[str], say: Progress
) -> dict[str, list[PriceTerm]]:
    """Per instance type, one ``spot-zone`` term per zone: the zone's time-weighted median price over the
    last ``spot_days`` days (each price weighted by how long it held inside the window)."""
    ec2 = clients.ec2[region]
    start = request.now - timedelta(days=request.spot_days)

    def call(token: str | None) -> dict[str, Any]:
        extra = {"NextToken": token} if token else {}
        answer: dict[str, Any] = ec2.describe_spot_price_history(
            InstanceTypes=types,
            ProductDescriptions=["Linux/UNIX"],
            StartTime=start,
            EndTime=request.now,
            MaxResults=1000,
            **extra,
        )
        return answer

    history: dict[tuple[str, str], list[tuple[datetime, float]]] = {}
    pages = 0
    for page in _pages(clients, request, f"aws {region} DescribeSpotPriceHistory", call, "NextToken"):
        pages += 1
        for row in page.get("SpotPriceHistory", []):
            if not str(row.get("ProductDescription", "")).startswith("Linux/UNIX"):
                continue
            price = float(row["SpotPrice"])
            if price > 0:
                key = (row["InstanceType"], row["AvailabilityZone"])
                history.setdefault(key, []).append((_utc(row["Timestamp"]), price))
    say(f"aws {region}: {pages} spot history page(s), {len(history)} zone series")
    source = (
        f"AWS EC2 DescribeSpotPriceHistory {clients.endpoints[f'ec2 {region}']} (API "
        f"{ec2.meta.service_model.api_version}): time-weighted median over {request.spot_days} days, "
        "Linux/UNIX"
    )
    by_type: dict[str, list[PriceTerm]] = {}
    for (instance_type, zone), changes in sorted(history.items()):
        value = time_weighted_median(changes, start, request.now)
        if value is None:
            continue
        by_type.setdefault(instance_type, []).append(
            PriceTerm(
                offering=instance_type,
                kind="spot-zone",
                term_years=None,
                offering_class="",
                payment="",
                usd_h=value,
                upfront_usd=0.0,
                zone=zone,
                source=source,
                as_of=request.now,
            )
        )
    return by_type


def _utc(moment: datetime | str) -> datetime:
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def time_weighted_median(
    changes: Iterable[tuple[datetime, float]], start: datetime, end: datetime
) -> float | None:
    """The price that held at least half of the window ``[start, end]``, from ``(time, price)`` changes: each
    price holds from its time until the next change (the one before ``start`` holds from ``start``). Where
    the halfway point falls exactly between two prices, their mean (as :func:`median`). None when no
    price held inside the window."""
    ordered = sorted(changes)
    spans: dict[float, float] = {}
    for index, (moment, price) in enumerate(ordered):
        until = ordered[index + 1][0] if index + 1 < len(ordered) else end
        held = (min(until, end) - max(moment, start)).total_seconds()
        if held > 0:
            spans[price] = spans.get(price, 0.0) + held
    total = sum(spans.values())
    if total <= 0:
        return None
    running = 0.0
    prices = sorted(spans)
    for index, price in enumerate(prices):
        running += spans[price]
        if abs(running - total / 2) <= 1e-9 * total and index + 1 < len(prices):
            return (price + prices[index + 1]) / 2
        if running >= total / 2:
            return price
    return prices[-1]
