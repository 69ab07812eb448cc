"""Azure GPU prices from the Azure Retail Prices API, read into catalog rows and terms.

The API is public (no credential): ``GET {endpoint}/api/retail/prices`` with
``api-version=2023-01-01-preview`` and an OData ``$filter`` answers pages of at most 1,000 items and a
``NextPageLink`` to follow until it is null
(https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices). One query per
region asks for the Virtual Machines meters of the GPU families gpuplan plans (``contains(armSkuName,
'Standard_ND')``; filter values are case-sensitive from that api-version on), so a new size in a family
shows up as a warning instead of being missed. How the items become prices:

- ``type`` ``Consumption``: the on-demand hourly ``unitPrice``; a ``skuName`` ending `` Spot`` is the spot
  price, `` Low Priority`` is skipped (retired low-priority VMs), a ``productName`` with ``Windows`` is
  skipped (it includes the licence). Its ``savingsPlan`` list (only with api-version 2023-01-01-preview)
  holds the hourly savings-plan rates: terms of kind ``savings-plan`` (dollars per hour across sizes, so
  they never price the catalog's reserved tiers; issue 38 plans them).
- ``type`` ``Reservation``: ``unitPrice`` is the price of the **whole term** per VM: per hour = unitPrice
  / 8,760 (``1 Year``) or / 26,280 (``3 Years``). Azure bills a reservation monthly or upfront for the same
  total (https://learn.microsoft.com/azure/cost-management-billing/reservations/prepare-buy-reservation),
  so it is a ``no-upfront`` term; it prices the catalog's 1- and 3-year tiers. 5-year terms (some ND
  sizes) are left out: the catalog and the terms file plan 1 and 3 years.
- ``type`` ``DevTestConsumption``: skipped (Dev/Test subscriptions only). Items of a non-primary meter
  region (``isPrimaryMeterRegion`` false) and tiered items (``tierMinimumUnits`` above 0) are skipped too.
- An item not in USD or not per ``1 Hour`` is a warning and its price unknown, never converted or guessed;
  so is a price of 0. A price the API does not have is unknown (``assemble_offering`` records it so), with
  a warning naming the row and the tier.
- Of several items for the same price (a price change announced ahead), the newest ``effectiveStartDate``
  not after the fetch time counts; the source names that date.

Shapes come from :data:`SIZES`, a table of the sizes gpuplan plans written from the Azure size pages (the ARM
resource SKUs API needs a credential); a size the API lists that the table lacks is a warning and skipped.

Regions are read in parallel (the API takes about a second a page); a 429 (honouring ``Retry-After``), a 5xx
or a transport error is retried with :func:`providers.pricing.common.with_retries`; a region that still
fails, or answers a malformed page, is named in ``FetchResult.failed_regions`` and the others are returned.
Each page is parsed and reduced to the few items kept before the next is read, so memory stays at a page.

httpx is imported inside :func:`fetch`, so ``import providers.pricing.azure`` costs nothing without it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from models.priceterms import PriceTerm
from models.tiers import HOURS_PER_YEAR
from providers.errors import InvalidRequest, MissingSDK, OperationFailed
from providers.pricing.common import (
    FetchRequest,
    FetchResult,
    Progress,
    Quote,
    Shape,
    assemble_offering,
    with_retries,
)

__all__ = ["API_VERSION", "DEFAULT_ENDPOINT", "ENDPOINT_NAME", "SIZES", "fetch"]

log = logging.getLogger("gpuplan.pricing.azure")

CLOUD: Final = "azure"
#: ``FetchRequest.endpoints`` key that overrides :data:`DEFAULT_ENDPOINT` (a mirror, a test's stand-in).
ENDPOINT_NAME: Final = "azure-prices"
DEFAULT_ENDPOINT: Final = "https://prices.azure.com"
PATH: Final = "/api/retail/prices"
#: The version that carries savings-plan rates and makes filter values case-sensitive.
API_VERSION: Final = "2023-01-01-preview"
#: Reservation terms read, with their hours (a reservation's unitPrice covers the whole term).
TERM_YEARS: Final[Mapping[str, int]] = {"1 Year": 1, "3 Years": 3}
#: Most pages read for one region (a region's ND and NC meters are a few hundred items, under one page of
#: 1,000); beyond it the API is looping and the region fails.
MAX_PAGES: Final = 200
#: Regions read at once: the fetch is waiting on the network, not the CPU.
MAX_PARALLEL_REGIONS: Final = 8
#: Longest ``Retry-After`` honoured (the backoff's own cap in :func:`with_retries`).
MAX_RETRY_AFTER_S: Final = 20.0
TIMEOUT_S: Final = 30.0

#: The Azure GPU sizes gpuplan plans (the embedded catalog's Azure rows), from the size pages under
#: https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ :
#: ``ndasra100v4-series`` (ND A100 v4: 8x A100 40 GB SXM, InfiniBand HDR 8x200 Gb/s),
#: ``ndma100v4-series`` (NDm A100 v4: 8x A100 80 GB SXM, HDR 8x200), ``ndh100v5-series`` (ND H100 v5:
#: 8x H100 80 GB, InfiniBand NDR 8x400), ND H200 v5 (8x H200 141 GB, NDR 8x400: not on the size pages read,
#: so as the embedded catalog has it),
#: ``nca100v4-series`` (NC A100 v4: 1, 2 or 4 A100 80 GB PCIe, no InfiniBand), ``ncadsh100v5-series``
#: (NCads H100 v5: 1 or 2 H100 NVL 94 GB, no InfiniBand). Bandwidths as the embedded catalog has them.
SIZES: Final[Mapping[str, Shape]] = {
    "Standard_ND96asr_v4": Shape("A100-40GB", 8, 40, "infiniband", 1600),
    "Standard_ND96amsr_A100_v4": Shape("A100-80GB", 8, 80, "infiniband", 1600),
    "Standard_ND96isr_H100_v5": Shape("H100", 8, 80, "infiniband", 3200),
    "Standard_ND96isr_H200_v5": Shape("H200", 8, 141, "infiniband", 3200),
    "Standard_NC24ads_A100_v4": Shape("A100-80GB", 1, 80, "none", None),
    "Standard_NC48ads_A100_v4": Shape("A100-80GB", 2, 80, "none", None),
    "Standard_NC96ads_A100_v4": Shape("A100-80GB", 4, 80, "none", None),
    "Standard_NC40ads_H100_v5": Shape("H100-NVL", 1, 94, "none", None),
    "Standard_NC80adis_H100_v5": Shape("H100-NVL", 2, 94, "none", None),
}
#: The armSkuName prefixes asked for: every size of :data:`SIZES` starts with one.
FAMILIES: Final = ("Standard_NC", "Standard_ND")

_Kind = Literal["on-demand", "spot", "reservation"]


class _RegionFailed(Exception):
    """A region that cannot be read: its reason goes to ``failed_regions``."""


@dataclass
class _Found:
    """The items kept for one size in one region: the newest valid one per price."""

    on_demand: dict[str, Any] | None = None
    spot: dict[str, Any] | None = None
    reservations: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class _RegionRead:
    sizes: dict[str, _Found] = field(default_factory=dict)
    unknown_sizes: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    pages: int = 0
    items: int = 0


def fetch(request: FetchRequest, progress: Progress | None = None) -> FetchResult:
    """The GPU offerings of ``request.regions`` with their Azure retail prices, terms and warnings.

    Raises:
        InvalidRequest: no region, or an endpoint that is not an http(s) URL.
        MissingSDK: httpx is not installed.
        OperationFailed: every region failed (each one's reason in the message); fewer is a partial result.
    """
    endpoint = request.endpoints.get(ENDPOINT_NAME, DEFAULT_ENDPOINT).rstrip("/")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest(f"{ENDPOINT_NAME} endpoint {endpoint!r} is not an http(s) URL", cloud=CLOUD)
    if not request.regions:
        raise InvalidRequest("no region to fetch", cloud=CLOUD, operation="catalog fetch")
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - httpx is a dependency of gpuplan
        raise MissingSDK(CLOUD, "httpx", "azure") from exc

    result = FetchResult(cloud=CLOUD)
    wanted = {name: shape for name, shape in SIZES.items() if request.wants(shape.gpu_model)}
    if not wanted:
        result.warnings.append(
            f"azure: no size in gpuplan's Azure table has a GPU model matching {', '.join(request.gpus)}"
        )
        return result
    families = sorted({f for f in FAMILIES for name in wanted if name.startswith(f)})
    source = f"Azure Retail Prices API {endpoint} api-version={API_VERSION}"
    say = _locked(progress)
    regions = list(dict.fromkeys(request.regions))

    with httpx.Client(timeout=TIMEOUT_S, headers={"Accept": "application/json"}) as client:

        def one(region: str) -> _RegionRead | str:
            try:
                read = _read_region(client, httpx, endpoint, region, families, request, say)
            except _RegionFailed as failure:
                say(f"azure {region}: failed: {failure}")
                return str(failure)
            say(f"azure {region}: {read.pages} pages, {read.items} items")
            return read

        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_REGIONS, len(regions))) as pool:
            reads = list(pool.map(one, regions))

    unknown: dict[str, list[str]] = {}
    for region, read in zip(regions, reads, strict=True):
        if isinstance(read, str):
            result.failed_regions[region] = read
            continue
        result.warnings.extend(read.warnings)
        for name in sorted(read.unknown_sizes):
            unknown.setdefault(name, []).append(region)
        for name in sorted(read.sizes):
            if name in wanted:
                _add_offering(result, region, name, wanted[name], read.sizes[name], source, request.now)
    if unknown:
        listed = "; ".join(f"{name} ({', '.join(where)})" for name, where in sorted(unknown.items()))
        result.warnings.append(
            f"azure: sizes the Retail Prices API lists that gpuplan's size table lacks, skipped (shape not "
            f"guessed): {listed}"
        )
    if len(result.failed_regions) == len(regions):
        reasons = "; ".join(f"{r}: {why}" for r, why in result.failed_regions.items())
        raise OperationFailed(f"every region failed: {reasons}", cloud=CLOUD, operation="catalog fetch")
    say(
        f"azure: {len(result.offerings)} offerings, {len(result.terms)} terms, "
        f"{len(result.failed_regions)} failed regions"
    )
    return result


def _locked(progress: Progress | None) -> Progress:
    """``progress`` called one line at a time: the regions report from their threads."""
    lock = threading.Lock()

    def say(line: str) -> None:
        log.info("%s", line)
        if progress is not None:
            with lock:
                progress(line)

    return say


def _read_region(
    client: Any,
    httpx: Any,
    endpoint: str,
    region: str,
    families: list[str],
    request: FetchRequest,
    say: Progress,
) -> _RegionRead:
    """Every page of the region's GPU meters, reduced to the newest valid item per size and price."""
    families_filter = " or ".join(f"contains(armSkuName, '{f}')" for f in families)
    query_filter = (
        f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and ({families_filter})"
    )
    url: str | None = f"{endpoint}{PATH}"
    params: dict[str, str] | None = {"api-version": API_VERSION, "$filter": query_filter}
    host = urlsplit(endpoint).hostname
    read = _RegionRead()
    seen: set[str] = set()
    while url is not None:
        if read.pages >= MAX_PAGES:
            raise _RegionFailed(f"more than {MAX_PAGES} pages; stopped")
        page = _get_page(client, httpx, url, params, region, read.pages + 1, request)
        read.pages += 1
        items = page["Items"]
        read.items += len(items)
        for item in items:
            if not isinstance(item, dict):
                raise _RegionFailed(f"malformed page {read.pages}: an item is not an object")
            _keep(read, region, item, request.now)
        link = page.get("NextPageLink")
        if link is None or link == "":
            break
        if not isinstance(link, str) or urlsplit(link).hostname != host:
            raise _RegionFailed(f"malformed page {read.pages}: NextPageLink {link!r} leaves {endpoint}")
        if link in seen:
            raise _RegionFailed(f"page {read.pages}: NextPageLink repeats an earlier page")
        seen.add(link)
        url, params = link, None  # the link carries the query
        if read.pages % 5 == 0:
            say(f"azure {region}: {read.pages} pages read")
    return read


def _get_page(
    client: Any,
    httpx: Any,
    url: str,
    params: dict[str, str] | None,
    region: str,
    number: int,
    request: FetchRequest,
) -> dict[str, Any]:
    """One page, retried on 429 (after at least its ``Retry-After``), 5xx and transport errors."""
    retry_after = [0.0]

    def call() -> Any:
        response = client.get(url, params=params)
        if response.status_code == 429 or response.status_code >= 500:
            retry_after[0] = _seconds(response.headers.get("Retry-After"))
        response.raise_for_status()
        return response

    def throttled(error: BaseException) -> bool:
        if isinstance(error, httpx.HTTPStatusError):
            return bool(error.response.status_code == 429 or error.response.status_code >= 500)
        return isinstance(error, httpx.TransportError)

    def sleep(delay: float) -> None:
        time.sleep(max(delay, retry_after[0]))
        retry_after[0] = 0.0

    try:
        response = with_retries(
            call,
            what=f"azure {region} prices page {number}",
            throttled=throttled,
            attempts=request.attempts,
            backoff_seconds=request.backoff_seconds,
            sleep=sleep,
        )
    except httpx.HTTPStatusError as error:
        status = error.response.status_code
        tries = f" after {request.attempts} attempts" if status == 429 or status >= 500 else ""
        body = _excerpt(error.response.text)
        raise _RegionFailed(f"HTTP {status} on page {number}{tries}: {body}") from error
    except httpx.HTTPError as error:
        raise _RegionFailed(f"page {number}: {type(error).__name__}: {error}") from error
    try:
        page = response.json()
    except ValueError as error:
        raise _RegionFailed(f"malformed page {number}: not JSON ({error})") from error
    if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
        raise _RegionFailed(f"malformed page {number}: no Items list")
    return page


def _seconds(header: str | None) -> float:
    """A ``Retry-After`` in seconds (the API sends whole seconds), capped; 0 when absent or unreadable."""
    try:
        value = float(header) if header else 0.0
    except ValueError:
        return 0.0
    return min(MAX_RETRY_AFTER_S, value) if math.isfinite(value) and value > 0 else 0.0


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:200] + ("..." if len(flat) > 200 else "")


def _keep(read: _RegionRead, region: str, item: dict[str, Any], now: datetime) -> None:
    """Keep ``item`` if it is one of the prices gpuplan plans and newer than the one kept."""
    name = item.get("armSkuName")
    if not isinstance(name, str) or item.get("serviceName", "Virtual Machines") != "Virtual Machines":
        return
    if item.get("armRegionName", region) != region or item.get("isPrimaryMeterRegion") is False:
        return
    if _number(item.get("tierMinimumUnits", 0)) not in (0.0, None):
        return
    kind = _kind(item)
    if kind is None:
        return
    if name not in SIZES:
        read.unknown_sizes.add(name)
        return
    start = _start(item)
    if start is not None and start > now:
        return  # announced for later
    found = read.sizes.setdefault(name, _Found())
    if kind == "reservation":
        years = TERM_YEARS.get(str(item.get("reservationTerm")))
        if years is None:
            return  # 5 Years: not planned
        if _newer(item, found.reservations.get(years)):
            found.reservations[years] = item
    elif kind == "spot":
        if _newer(item, found.spot):
            found.spot = item
    elif _newer(item, found.on_demand):
        found.on_demand = item


def _kind(item: dict[str, Any]) -> _Kind | None:
    """What price ``item`` is, or None for one gpuplan does not plan (Windows, low priority, Dev/Test)."""
    price_type = item.get("type")
    if price_type == "Reservation":
        return "reservation"
    if price_type != "Consumption":
        return None
    if "Windows" in str(item.get("productName", "")):
        return None
    sku_name = str(item.get("skuName", ""))
    if sku_name.endswith(" Low Priority"):
        return None
    return "spot" if sku_name.endswith(" Spot") else "on-demand"


def _start(item: dict[str, Any]) -> datetime | None:
    text = item.get("effectiveStartDate")
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _newer(item: dict[str, Any], kept: dict[str, Any] | None) -> bool:
    if kept is None:
        return True
    floor = datetime.min.replace(tzinfo=UTC)
    return (_start(item) or floor) > (_start(kept) or floor)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _add_offering(
    result: FetchResult,
    region: str,
    name: str,
    shape: Shape,
    found: _Found,
    source: str,
    now: datetime,
) -> None:
    """One catalog row and its terms; each price the API lacks (or quotes unusably) unknown and warned."""
    offering_id = f"{CLOUD}:{region}:{name}"

    def price(item: dict[str, Any] | None, what: str) -> float | None:
        """The item's unitPrice if it is a USD price per hour above 0, else None with a warning."""
        if item is None:
            return None
        currency, unit = item.get("currencyCode"), item.get("unitOfMeasure")
        value = _number(item.get("unitPrice"))
        problem = (
            f"currencyCode {currency!r}, not USD"
            if currency != "USD"
            else f"unitOfMeasure {unit!r}, not '1 Hour'"
            if unit != "1 Hour"
            else f"unitPrice {item.get('unitPrice')!r} is not a price above 0"
            if value is None or value <= 0
            else None
        )
        if problem is not None:
            result.warnings.append(f"{offering_id}: {what}: {problem}; that price is unknown")
            return None
        return value

    def cited(item: dict[str, Any]) -> str:
        return f"{source} effectiveStartDate={item.get('effectiveStartDate', '?')}"

    terms: list[PriceTerm] = []
    on_demand = price(found.on_demand, "on-demand")
    spot = price(found.spot, "spot")
    for years, item in sorted(found.reservations.items()):
        whole_term = price(item, f"{years}-year reservation")
        if whole_term is None:
            continue
        terms.append(
            PriceTerm(
                offering=offering_id,
                kind="reservation",
                term_years=years,
                offering_class="",
                payment="no-upfront",
                usd_h=whole_term / (years * HOURS_PER_YEAR),
                upfront_usd=0.0,
                zone="",
                source=f"{cited(item)} reservationTerm={item.get('reservationTerm')}",
                as_of=now,
            )
        )
    if found.on_demand is not None and on_demand is not None:
        terms.extend(_savings_plans(result, offering_id, found.on_demand, cited(found.on_demand), now))

    offering = assemble_offering(
        cloud=CLOUD,
        region=region,
        instance_type=name,
        shape=shape,
        on_demand=None if on_demand is None else Quote(on_demand, cited(found.on_demand or {}), now),
        spot=None if spot is None else Quote(spot, cited(found.spot or {}), now),
        terms=terms,
        missing_source=source,
    )
    for tier, value in (
        ("on-demand", offering.on_demand_usd_h),
        ("spot", offering.spot_usd_h),
        ("1-year reservation", offering.reserved_1y_usd_h),
        ("3-year reservation", offering.reserved_3y_usd_h),
    ):
        if value is None:
            result.warnings.append(f"{offering_id}: no usable {tier} price in the Retail Prices API: unknown")
    result.offerings.append(offering)
    result.terms.extend(terms)


def _savings_plans(
    result: FetchResult, offering_id: str, item: dict[str, Any], source: str, now: datetime
) -> list[PriceTerm]:
    """The on-demand item's ``savingsPlan`` rates (hourly, per VM) as ``savings-plan`` terms."""
    plans = item.get("savingsPlan") or []
    if not isinstance(plans, list):
        result.warnings.append(f"{offering_id}: savingsPlan is not a list; savings plans skipped")
        return []
    terms: list[PriceTerm] = []
    for plan in plans:
        years = TERM_YEARS.get(str(plan.get("term"))) if isinstance(plan, dict) else None
        if years is None or not isinstance(plan, dict):
            continue
        rate = _number(plan.get("unitPrice"))
        if rate is None or rate <= 0:
            result.warnings.append(
                f"{offering_id}: {years}-year savings plan unitPrice {plan.get('unitPrice')!r} is not a "
                "price above 0; skipped"
            )
            continue
        terms.append(
            PriceTerm(
                offering=offering_id,
                kind="savings-plan",
                term_years=years,
                offering_class="",
                payment="no-upfront",
                usd_h=rate,
                upfront_usd=0.0,
                zone="",
                source=f"{source} savingsPlan term={plan.get('term')}",
                as_of=now,
            )
        )
    return terms
