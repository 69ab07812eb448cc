"""What every price fetcher shares: the request, the result, retries on throttling, and the catalog row.

A fetcher reads one cloud's price APIs for some regions and GPU models and returns a :class:`FetchResult`:
offerings with a provenance record per price (quoted from the API with its endpoint and version, or
``unknown`` when the API had none: never zero, never dropped), every commitment and per-zone spot term in
the terms file's shape, warnings, and the regions that failed (the others are still written).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from models.catalog import (
    DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR,
    GPU_MODELS,
    Offering,
    PriceProvenance,
    gpu_model_matches,
)
from models.priceterms import PriceTerm, headline_commitment
from models.tiers import Tier

__all__ = [
    "FetchRequest",
    "FetchResult",
    "Progress",
    "Quote",
    "Shape",
    "assemble_offering",
    "canonical_gpu_model",
    "median",
    "with_retries",
]

log = logging.getLogger("gpuplan.pricing")

#: Called with one line of progress ("aws us-east-1: 12 price list pages").
Progress = Callable[[str], None]
T = TypeVar("T")


@dataclass(frozen=True)
class FetchRequest:
    """What to fetch. ``gpus`` are GPU-model prefixes as a scenario's ``gpu_models`` (empty: every GPU model
    gpuplan knows); ``endpoints`` overrides API addresses by name (``aws-pricing``, ``aws-savingsplans``,
    ``aws-ec2``, ``gcp-billing``, ``gcp-compute``, ``azure-prices``): a private mirror, a test's stand-in."""

    regions: tuple[str, ...]
    gpus: tuple[str, ...]
    now: datetime
    endpoints: Mapping[str, str] = field(default_factory=dict)
    #: Days of spot price history read per zone (AWS); the catalog's spot price is the median over the zones
    #: of each zone's time-weighted median over these days (a price holds until the next change).
    spot_days: int = 7
    #: The GCP project whose machine types are read (``compute.machineTypes.list`` needs one); None: the
    #: environment's (GOOGLE_CLOUD_PROJECT, CLOUDSDK_CORE_PROJECT, the credentials').
    project: str | None = None
    #: Attempts per throttled or failed call (exponential backoff with jitter between them).
    attempts: int = 5
    #: The first backoff, in seconds (doubled each attempt, at most 20 s).
    backoff_seconds: float = 1.0

    def wants(self, gpu_model: str) -> bool:
        return not self.gpus or gpu_model_matches(gpu_model, self.gpus)


@dataclass
class FetchResult:
    """One cloud's fetch: what was read, what was doubtful, which regions failed and why."""

    cloud: str
    offerings: list[Offering] = field(default_factory=list)
    terms: list[PriceTerm] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failed_regions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Shape:
    """What a node is, from the cloud's own instance-type API."""

    gpu_model: str
    gpus_per_node: int
    gpu_memory_gb: float
    fabric: str
    fabric_gbps: float | None = None


@dataclass(frozen=True)
class Quote:
    """One price as read: USD per node-hour, the source (API, endpoint, version) and when."""

    usd_h: float
    source: str
    as_of: datetime


def canonical_gpu_model(name: str, memory_gib: float | None = None) -> str | None:
    """The catalog's GPU model for a cloud's GPU name (``NVIDIA H100 80GB``, ``nvidia-h100-mega-80gb``,
    ``A100`` with 80 GiB, ``A10G``); None for a model gpuplan does not plan (it is skipped with a warning)."""
    text = name.upper().replace("NVIDIA", "").replace("_", "-").replace(" ", "-").strip("-")
    if "A100" in text:
        big = "80" in text or (memory_gib is not None and memory_gib > 60)
        return "A100-80GB" if big else "A100-40GB"
    if "H100" in text and "NVL" in text:
        return "H100-NVL"
    for model in ("H200", "B200", "H100", "L40S", "A10G", "L4"):
        if model in text:
            return model
    return next((m for m in GPU_MODELS if m == text), None)


def median(values: Iterable[float]) -> float:
    """The median (the mean of the middle two of an even count)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of nothing")
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def with_retries(
    call: Callable[[], T],
    *,
    what: str,
    throttled: Callable[[BaseException], bool],
    attempts: int = 5,
    backoff_seconds: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()``, retried with exponential backoff and full jitter while ``throttled(error)`` says the
    error is a throttle or a transient failure (HTTP 429/5xx, ``ThrottlingException``); the last error
    is raised as it is. Jitter keeps parallel fetches from retrying in step (AWS Architecture Blog,
    "Exponential Backoff And Jitter")."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as error:
            if attempt == attempts or not throttled(error):
                raise
            delay = min(20.0, backoff_seconds * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            log.info(
                "%s: throttled or failed (%s); retry %d of %d in %.1f s",
                what,
                error,
                attempt,
                attempts - 1,
                delay,
            )
            sleep(delay)
    raise AssertionError("unreachable")


def assemble_offering(
    *,
    cloud: str,
    region: str,
    instance_type: str,
    shape: Shape,
    on_demand: Quote | None,
    spot: Quote | None,
    terms: Sequence[PriceTerm],
    missing_source: str,
) -> Offering:
    """A catalog row from what a fetcher read: each price quoted with its source and date, the 1- and
    3-year prices from :func:`models.priceterms.headline_commitment`, and every price the API did not have
    recorded as ``unknown`` (``missing_source`` says where it was looked for)."""
    offering_id = f"{cloud}:{region}:{instance_type}"
    provenance: list[PriceProvenance] = []
    prices: dict[Tier, float | None] = {}
    for tier, quote in ((Tier.ON_DEMAND, on_demand), (Tier.SPOT, spot)):
        prices[tier] = None if quote is None else quote.usd_h
        provenance.append(_record(tier, quote, missing_source))
    for tier, years in ((Tier.RESERVED_1Y, 1), (Tier.RESERVED_3Y, 3)):
        term = headline_commitment(terms, offering_id, years)
        if term is None:
            prices[tier] = None
            provenance.append(_record(tier, None, missing_source))
            continue
        prices[tier] = term.effective_usd_h
        named = " ".join(part for part in (term.kind, term.offering_class, term.payment) if part)
        provenance.append(
            PriceProvenance(
                tier=tier.value, basis="quoted", source=f"{term.source} ({named})", as_of=term.as_of
            )
        )
    return Offering(
        cloud=cloud,
        region=region,
        instance_type=instance_type,
        gpu_model=shape.gpu_model,
        gpus_per_node=shape.gpus_per_node,
        gpu_memory_gb=shape.gpu_memory_gb,
        fabric=shape.fabric,
        fabric_gbps=shape.fabric_gbps,
        on_demand_usd_h=prices[Tier.ON_DEMAND],
        spot_usd_h=prices[Tier.SPOT],
        reserved_1y_usd_h=prices[Tier.RESERVED_1Y],
        reserved_3y_usd_h=prices[Tier.RESERVED_3Y],
        spot_interruptions_per_hour=DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR[cloud],
        max_nodes=None,
        source=f"gpuplan catalog fetch: {missing_source}",
        provenance=tuple(provenance),
    )


def _record(tier: Tier, quote: Quote | None, missing_source: str) -> PriceProvenance:
    if quote is None:
        return PriceProvenance(
            tier=tier.value, basis="unknown", source=f"not in {missing_source}", as_of=None
        )
    return PriceProvenance(tier=tier.value, basis="quoted", source=quote.source, as_of=quote.as_of)
