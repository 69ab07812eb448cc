"""GPU offerings and their prices: the embedded snapshot or a user's own catalog CSV.

One row of the CSV (format 2, ``docs/catalog.md``; format 1 is ``spec/catalog-format.md`` and still loads)
is one *offering*: a node type in a region of a cloud, with its GPUs, its multi-node fabric and a price per
node-hour for each purchase tier. Format 2 adds, per price, where it comes from (:class:`PriceProvenance`:
quoted from a price API or a published rate, assumed, negotiated; its source and date), so a plan can say
what its figures rest on. The planner only ever sees :class:`Catalog` and :class:`Offering`; the embedded
snapshot's sources are in ``models/data/CATALOG-SOURCES.md``.

Loading is strict because a silently mis-read price turns into a wrong plan: every problem raises
:class:`models.errors.InputError` naming the file, the spreadsheet row and the column.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from models.csvheader import checked_header
from models.errors import InputError
from models.inputfile import decode_utf8, read_input_bytes
from models.numbers import Range, parse_number
from models.priceterms import PriceTerm, read_terms, terms_path_for
from models.tiers import Tier

if TYPE_CHECKING:
    import pandas as pd


__all__ = [
    "CATALOG_FORMAT",
    "CLOUDS",
    "DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR",
    "EMBEDDED_CATALOG_PATH",
    "FABRICS",
    "GPU_MEMORY_GB",
    "GPU_MODELS",
    "MAX_CATALOG_BYTES",
    "MAX_CATALOG_ROWS",
    "MAX_GPUS_PER_NODE",
    "MAX_NODES",
    "MAX_PRICE_RATIO",
    "MAX_USD_PER_NODE_HOUR",
    "OWNED_CLOUD",
    "PRICE_BASES",
    "PRICE_FIELD",
    "PROVENANCE_COLUMNS",
    "TIERS",
    "TIER_COLUMN",
    "Catalog",
    "Cloud",
    "Offering",
    "PriceBasis",
    "PriceProvenance",
    "Range",
    "catalog_csv",
    "gpu_model_matches",
    "parse_number",
    "write_catalog",
]

GPU_MODELS: tuple[str, ...] = (
    "A10G",
    "L4",
    "L40S",
    "A100-40GB",
    "A100-80GB",
    "H100",
    "H100-NVL",
    "H200",
    "B200",
)
#: Memory per GPU of each model's usual SKU (the 7g MIG profile's size where the model has MIG), for
#: nodes described without a catalog row (a scenario's own servers, a simulated fleet).
GPU_MEMORY_GB: dict[str, float] = {
    "A10G": 24.0, "L4": 24.0, "L40S": 48.0, "A100-40GB": 40.0, "A100-80GB": 80.0,
    "H100": 80.0, "H100-NVL": 94.0, "H200": 141.0, "B200": 180.0,
}  # fmt: skip
FABRICS: tuple[str, ...] = ("efa", "tcpx", "tcpxo", "infiniband", "none")
#: The clouds gpuplan plans on (owned servers are the ``owned`` tier, not a cloud).
Cloud = Literal["aws", "gcp", "azure"]
CLOUDS: tuple[Cloud, ...] = ("aws", "gcp", "azure")
#: The tiers a catalog row prices (a cloud's tiers; owned nodes are priced from a scenario's colocation).
TIERS: tuple[Tier, ...] = (
    Tier.RESERVED_1Y, Tier.RESERVED_3Y, Tier.ON_DEMAND, Tier.SPOT, Tier.CAPACITY_BLOCK, Tier.FLEX_START,
)  # fmt: skip
#: The :class:`Offering` field that holds each tier's price per node-hour (the catalog CSV's columns).
PRICE_FIELD: dict[Tier, str] = {
    Tier.ON_DEMAND: "on_demand_usd_h",
    Tier.SPOT: "spot_usd_h",
    Tier.RESERVED_1Y: "reserved_1y_usd_h",
    Tier.RESERVED_3Y: "reserved_3y_usd_h",
    Tier.OWNED: "owned_usd_h",
    Tier.CAPACITY_BLOCK: "capacity_block_usd_h",
    Tier.FLEX_START: "flex_start_usd_h",
}
#: The column prefix of each tier's price and provenance columns (``reserved_1y``: ``reserved_1y_usd_h``,
#: ``reserved_1y_basis``, ``reserved_1y_source``, ``reserved_1y_as_of``).
TIER_COLUMN: dict[Tier, str] = {
    Tier.ON_DEMAND: "on_demand",
    Tier.SPOT: "spot",
    Tier.RESERVED_1Y: "reserved_1y",
    Tier.RESERVED_3Y: "reserved_3y",
    Tier.CAPACITY_BLOCK: "capacity_block",
    Tier.FLEX_START: "flex_start",
}
#: Where a price comes from. ``quoted``: read from the cloud's price API or a published rate, with its source
#: and date. ``assumed``: a guess (a ratio of on-demand). ``negotiated``: the user's own (a private-price
#: overlay or their catalog). ``unknown``: the API had none, so the tier is not offered (never zero).
#: ``unstated``: a format-1 catalog, which does not say.
PriceBasis = Literal["quoted", "assumed", "negotiated", "unknown", "unstated"]
PRICE_BASES: tuple[PriceBasis, ...] = ("quoted", "assumed", "negotiated", "unknown", "unstated")
_WRITTEN_BASES: tuple[PriceBasis, ...] = PRICE_BASES[:-1]  # what a basis cell may say
#: The "cloud" of the nodes the user owns (a colocation site): named after the tier they are paid on.
OWNED_CLOUD: str = Tier.OWNED.value

# Expected spot interruptions per node-hour when a catalog row leaves the column empty.
# ASSUMPTION, not a measurement. FACTS.md section 2 has no GPU interruption figures:
# - AWS Spot Instance Advisor buckets "frequency of interruption" over the trailing month
#   (<5%, 5-10%, 10-15%, 15-20%, >20%). Read literally, the worst bucket (>20% of instances reclaimed in a
#   730 h month) is only -ln(0.8)/730 ~ 3e-4 per hour, but that is a floor averaged over a whole pool;
#   large GPU nodes sit in small pools and are reclaimed together (Spot-and-Scoot: >92% of co-interruptions
#   of a type+AZ land within 3 minutes), so we plan with 0.01/h, i.e. an MTBF of 100 node-hours (~4 days).
# - GCP publishes no interruption data, gives 30 s notice and no SLA for Spot VMs: 0.015/h (MTBF ~67 h).
# - Azure shows AWS-like eviction-rate buckets (0-5% ... 20+%) with 30 s notice [unverified]: 0.012/h
#   (MTBF ~83 h), between the two.
# A row's spot_interruptions_per_hour overrides these, e.g. after ingesting spot-advisor-data.json.
DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR: dict[str, float] = {"aws": 0.01, "gcp": 0.015, "azure": 0.012}

# ---- numeric inputs -----------------------------------------------------------------------------------
# Every number a user gives (a catalog cell, a scenario field, a demand-series cell) is finite and inside a
# documented range. The bounds are generous; a value past one is a typo or a unit mix-up, and planning
# with it would give a wrong plan (or a crash much later), so it is an input error naming the value.

#: Most nodes of one gang, one commitment, one colocation site or one offering's capacity.
MAX_NODES: int = 10_000
#: Most GPUs in one node (the largest nodes sold have 8 or 16; a rack-scale system counts as many nodes).
MAX_GPUS_PER_NODE: int = 64
#: Prices per node-hour are below this (the dearest catalog node is about $114 per hour).
MAX_USD_PER_NODE_HOUR: float = 10_000.0
#: Most memory of one GPU (B200: 180 GB).
MAX_GPU_MEMORY_GB: float = 1_024.0
#: Most fabric bandwidth of one node (8 x 400 Gb/s is 3,200).
MAX_FABRIC_GBPS: float = 100_000.0
#: Most expected spot interruptions per node-hour (one an hour; the defaults are 0.01 to 0.015).
MAX_INTERRUPTIONS_PER_HOUR: float = 1.0

#: Most offerings in one catalog CSV (every GPU node type of the three clouds in every region is a few
#: thousand) and its largest size; a bigger file is not a price list.
MAX_CATALOG_ROWS: int = 100_000
MAX_CATALOG_BYTES: int = 64 * 1024 * 1024

# ---- price ratios -------------------------------------------------------------------------------------
# A tier's price against the same row's on-demand price. Real catalogs: spot 30-90 % below on-demand,
# 1-year commitments 25-45 % below, 3-year 45-70 % below (models/data/CATALOG-SOURCES.md). Above on-demand
# happens for a short while on spot (AWS capped spot at on-demand only in 2017; GCP and Azure move spot
# prices daily), and a commitment above on-demand is never worth buying, so the planner simply leaves it:
# a warning. Beyond MAX_PRICE_RATIO the cell is a unit mix-up (a monthly or yearly rate, a price per
# instance of a bigger size, an upfront fee), not a price, and planning with it would be wrong: an error.
#: Most a spot or committed rate may be, in on-demand prices of the same row.
MAX_PRICE_RATIO: float = 2.0

# Resolved from this file, not the working directory, so the snapshot is found wherever the package is
# installed (pyproject ships models/data/*.csv as package data). Nothing is read at import time.
EMBEDDED_CATALOG_PATH: Path = Path(__file__).parent / "data" / "catalog.csv"

#: The catalog format gpuplan writes. Format 1 (``spec/catalog-format.md``) is format 2 without the
#: provenance columns; a file is read as format 2 when its header has any of them.
CATALOG_FORMAT: int = 2
#: Format 2's provenance columns: for each tier, ``<tier>_basis`` (:data:`PRICE_BASES`), ``<tier>_source`` and
#: ``<tier>_as_of`` (ISO 8601 date or time, UTC when it has no offset).
PROVENANCE_COLUMNS: tuple[str, ...] = tuple(
    f"{prefix}_{part}" for prefix in TIER_COLUMN.values() for part in ("basis", "source", "as_of")
)
# The CSV columns: format 1's in the order of catalog-format.md (the embedded file uses exactly this order),
# then format 2's provenance columns.
_V1_COLUMNS: tuple[str, ...] = (
    "cloud",
    "region",
    "instance_type",
    "gpu_model",
    "gpus_per_node",
    "gpu_memory_gb",
    "fabric",
    "fabric_gbps",
    "on_demand_usd_h",
    "spot_usd_h",
    "reserved_1y_usd_h",
    "reserved_3y_usd_h",
    "spot_interruptions_per_hour",
    "max_nodes",
    "source",
)
#: Format 2's price columns beyond format 1's: the AWS Capacity Block rate per instance-hour (issue 38; the
#: fee of a block is this rate x instances x its sold hours, ``models/capacity_blocks.py``), empty where the
#: cloud sells no block of the offering; the GCP flex-start rate per node-hour (``models/flex_start.py``),
#: empty where the offering has none.
_V2_PRICE_COLUMNS: tuple[str, ...] = ("capacity_block_usd_h", "flex_start_usd_h")
_COLUMNS: tuple[str, ...] = (*_V1_COLUMNS, *PROVENANCE_COLUMNS, *_V2_PRICE_COLUMNS)
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "fabric_gbps",
    "spot_usd_h",
    "reserved_1y_usd_h",
    "reserved_3y_usd_h",
    "spot_interruptions_per_hour",
    "max_nodes",
    *PROVENANCE_COLUMNS,
    *_V2_PRICE_COLUMNS,
)
REQUIRED_COLUMNS: tuple[str, ...] = tuple(c for c in _COLUMNS if c not in OPTIONAL_COLUMNS)
_REQUIRED: frozenset[str] = frozenset(REQUIRED_COLUMNS)
_PRICE_COLUMNS: frozenset[str] = frozenset(
    ("on_demand_usd_h", "spot_usd_h", "reserved_1y_usd_h", "reserved_3y_usd_h", *_V2_PRICE_COLUMNS)
)
_PRICE_RANGE = Range(gt=0, lt=MAX_USD_PER_NODE_HOUR, unit="USD per node-hour")
#: The range of each numeric column (catalog format v1); an empty optional cell is "not given".
COLUMN_RANGES: dict[str, Range] = {
    "gpus_per_node": Range(ge=1, le=MAX_GPUS_PER_NODE, unit="GPUs", whole=True),
    "gpu_memory_gb": Range(gt=0, le=MAX_GPU_MEMORY_GB, unit="GB"),
    "fabric_gbps": Range(ge=0, le=MAX_FABRIC_GBPS, unit="Gb/s"),
    **dict.fromkeys(sorted(_PRICE_COLUMNS), _PRICE_RANGE),
    "spot_interruptions_per_hour": Range(ge=0, le=MAX_INTERRUPTIONS_PER_HOUR, unit="per node-hour"),
    "max_nodes": Range(ge=0, le=MAX_NODES, unit="nodes", whole=True),
}


def gpu_model_matches(gpu_model: str, patterns: Iterable[str]) -> bool:
    """Whether ``gpu_model`` matches one of ``patterns`` by case-insensitive prefix (catalog-format.md):
    the one GPU-model match of the planner, chargeback and the Kueue export. No pattern matches nothing
    (``Offering.matches_gpu`` reads "no preference" as every offering itself)."""
    model = gpu_model.upper()
    return any(model.startswith(p.strip().upper()) for p in patterns)


@dataclass(frozen=True, slots=True)
class PriceProvenance:
    """Where one price of an offering comes from: ``basis`` (see :data:`PriceBasis`), ``source`` (the API and
    endpoint, its version or offer version, or the published page), ``as_of`` (when it was read or
    published; None when not known)."""

    tier: str
    basis: PriceBasis
    source: str
    as_of: datetime | None

    def age_days(self, now: datetime) -> float | None:
        """Days between ``as_of`` and ``now``; None when the date is not known."""
        if self.as_of is None:
            return None
        return (now - self.as_of).total_seconds() / 86_400


@dataclass(frozen=True, slots=True)
class Offering:
    """A node type in a region of a cloud, priced per node-hour for each purchase tier.

    Prices are USD per node-hour; ``None`` means the tier is not offered. ``spot_interruptions_per_hour``
    is already resolved (the row's value or the cloud default), so consumers never deal with a missing rate.
    Catalog rows always have an on-demand price; only an *owned* offering (cloud ``owned``, built from a
    scenario's ``colocation`` section) has none, and is priced on the ``owned`` tier instead (its
    amortized cost per node-hour, capital included), usable from ``available_from_hour`` on.
    """

    cloud: str
    region: str
    instance_type: str
    gpu_model: str
    gpus_per_node: int
    gpu_memory_gb: float
    fabric: str
    fabric_gbps: float | None
    on_demand_usd_h: float | None
    spot_usd_h: float | None
    reserved_1y_usd_h: float | None
    reserved_3y_usd_h: float | None
    spot_interruptions_per_hour: float
    max_nodes: int | None
    source: str
    owned_usd_h: float | None = None
    available_from_hour: float = 0.0
    #: The AWS Capacity Block rate per instance-hour (None: no block sold); a block's fee is this times
    #: instances times its sold hours (``models/capacity_blocks.py``).
    capacity_block_usd_h: float | None = None
    #: The GCP flex-start (Dynamic Workload Scheduler) rate per node-hour (None: not sold;
    #: ``models/flex_start.py``).
    flex_start_usd_h: float | None = None
    #: Where each tier's price comes from (format 2); a tier not listed is ``unstated`` (see ``source``).
    provenance: tuple[PriceProvenance, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        # The CSV loader reports these with row and column; this guards offerings built in code.
        if self.gpus_per_node < 1:
            raise ValueError(f"{self.id}: gpus_per_node must be >= 1, got {self.gpus_per_node}")
        if self.fabric not in FABRICS:
            raise ValueError(f"{self.id}: unknown fabric {self.fabric!r}; valid: {', '.join(FABRICS)}")
        if self.gpu_model not in GPU_MODELS:
            raise ValueError(
                f"{self.id}: unknown gpu_model {self.gpu_model!r}; valid: {', '.join(GPU_MODELS)}"
            )
        prices = (
            self.on_demand_usd_h,
            self.spot_usd_h,
            self.reserved_1y_usd_h,
            self.reserved_3y_usd_h,
            self.owned_usd_h,
            self.capacity_block_usd_h,
            self.flex_start_usd_h,
        )
        if any(p is not None and not (p >= 0 and math.isfinite(p)) for p in prices):
            raise ValueError(f"{self.id}: prices must be finite and >= 0")
        rate = self.spot_interruptions_per_hour
        if not (rate >= 0 and math.isfinite(rate)):
            raise ValueError(f"{self.id}: spot_interruptions_per_hour must be finite and >= 0, got {rate}")
        if self.max_nodes is not None and self.max_nodes < 0:
            raise ValueError(f"{self.id}: max_nodes must be >= 0 or None, got {self.max_nodes}")

    @property
    def id(self) -> str:
        """``cloud:region:instance_type``, the key plans and reports use (plan-contract.md)."""
        return f"{self.cloud}:{self.region}:{self.instance_type}"

    @property
    def owned(self) -> bool:
        return self.cloud == OWNED_CLOUD

    @property
    def has_fabric(self) -> bool:
        """True when multi-node jobs get a GPU network (EFA, GPUDirect-TCPX/O, InfiniBand)."""
        return self.fabric != "none"

    def price(self, tier: str) -> float | None:
        """USD per node-hour on ``tier`` (a :class:`~models.tiers.Tier`: one of :data:`TIERS`, or
        ``owned``; the model's ``Capacity.SPOT`` is the same string);
        ``None`` when the tier is not offered."""
        field = PRICE_FIELD.get(tier)  # type: ignore[call-overload]
        if field is None:
            raise ValueError(f"unknown tier {tier!r}; valid: {', '.join(TIERS)}")
        return getattr(self, field)

    def price_provenance(self, tier: str) -> PriceProvenance:
        """Where the price on ``tier`` comes from: the row's own record, else ``unstated`` with the row's
        ``source`` (a format-1 catalog)."""
        for record in self.provenance:
            if record.tier == tier:
                return record
        return PriceProvenance(tier=tier, basis="unstated", source=self.source, as_of=None)

    def with_price(self, tier: Tier, price: float | None, provenance: PriceProvenance) -> Offering:
        """This offering with ``tier`` priced at ``price`` (None: not offered), its provenance replaced."""
        others = tuple(record for record in self.provenance if record.tier != tier)
        return replace(self, **{PRICE_FIELD[tier]: price}, provenance=(*others, provenance))  # type: ignore[arg-type]

    def matches_gpu(self, patterns: Iterable[str] | None) -> bool:
        """Prefix match of the canonical model name, case-insensitive (catalog-format.md).

        ``"A100"`` matches A100-40GB and A100-80GB, ``"H100"`` matches H100 and H100-NVL. ``None`` or an
        empty list matches every offering, so "no GPU preference" needs no special case in callers.
        """
        wanted = _as_list(patterns)
        return not wanted or gpu_model_matches(self.gpu_model, wanted)


class Catalog:
    """An immutable collection of offerings with unique ids, in file order."""

    offerings: tuple[Offering, ...]
    source: str

    def __init__(
        self,
        offerings: Iterable[Offering],
        source: str = "embedded",
        warnings: Iterable[str] = (),
        overlays: Iterable[str] = (),
        terms: Iterable[PriceTerm] = (),
    ) -> None:
        self.offerings = tuple(offerings)
        self.source = source
        #: every commitment offer and zone spot price of these offerings (the terms file beside the CSV:
        #: ``models/priceterms.py``); empty when the catalog has none
        ids = {o.id for o in self.offerings}
        self.terms: tuple[PriceTerm, ...] = tuple(t for t in terms if t.offering in ids)
        #: the pricing overlays applied on top of the file, in order (``models/overlay.py``)
        self.overlays: tuple[str, ...] = tuple(overlays)
        #: what reading the CSV found doubtful but usable (a spot or committed rate above on-demand), each
        #: naming the file, row and column; also logged (``gpuplan.catalog``, stderr by default)
        self.warnings: tuple[str, ...] = tuple(warnings)
        self._by_id: dict[str, Offering] = {}
        for offering in self.offerings:
            if offering.id in self._by_id:
                raise ValueError(f"duplicate offering id {offering.id!r} in catalog {source!r}")
            self._by_id[offering.id] = offering

    @classmethod
    def load(cls, path: str | Path | None = None) -> Catalog:
        """Read a catalog CSV; ``None`` or ``"embedded"`` reads the snapshot shipped with gpuplan.

        Errors name rows as a spreadsheet shows them: the header is row 1, so the first data row is
        row 2. Required columns must be present; optional ones may be absent altogether, and an empty
        optional cell means "not offered" (prices), "cloud default" (spot_interruptions_per_hour) or
        "unlimited" (max_nodes). A spot or reserved price above the row's on-demand price is accepted
        with a warning (:attr:`warnings`), above :data:`MAX_PRICE_RATIO` times it refused; a 3-year rate
        above the 1-year rate is a warning too. At most :data:`MAX_CATALOG_ROWS` offerings.
        Every number must be finite and inside its column's range (:data:`COLUMN_RANGES`: prices above
        0 and below $10,000 per node-hour, 1 to 64 GPUs per node, ...); region and instance_type are
        identifiers (no colon, space or control character), and an offering id appears once.

        Raises:
            InputError: missing file, empty file, unknown or missing column, or a bad value.
        """
        found: list[str] = []
        embedded = path is None or (isinstance(path, str) and path == "embedded")
        file = EMBEDDED_CATALOG_PATH if embedded or path is None else Path(path)
        offerings = _read_csv(file, found)
        terms = _terms_beside(file, offerings, found)
        # the commands say them: ``gpuplan catalog`` at once, plan and validate with the plan's warnings
        return cls(offerings, source="embedded" if embedded else str(path), warnings=found, terms=terms)

    def with_offerings(self, offerings: Iterable[Offering], overlay: str | None = None) -> Catalog:
        """The same catalog (source, warnings, overlays) holding ``offerings``; ``overlay`` names one more
        pricing overlay applied to them."""
        overlays = (*self.overlays, overlay) if overlay else self.overlays
        return Catalog(
            offerings, source=self.source, warnings=self.warnings, overlays=overlays, terms=self.terms
        )

    def __len__(self) -> int:
        return len(self.offerings)

    def __iter__(self) -> Iterator[Offering]:
        return iter(self.offerings)

    def __repr__(self) -> str:
        return f"Catalog({len(self.offerings)} offerings from {self.source!r})"

    def get(self, offering_id: str) -> Offering:
        """The offering with this ``cloud:region:instance_type`` id.

        Raises:
            KeyError: no such id; the message lists the closest ids to make typos easy to fix.
        """
        try:
            return self._by_id[offering_id]
        except KeyError:
            close = difflib.get_close_matches(offering_id, list(self._by_id), n=5, cutoff=0.5)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise KeyError(f"no offering {offering_id!r} in catalog {self.source!r}{hint}") from None

    def filter(
        self,
        *,
        gpu: Iterable[str] | str | None = None,
        cloud: Iterable[str] | str | None = None,
        regions: Mapping[str, Iterable[str]] | None = None,
        fabric_required: bool = False,
    ) -> Catalog:
        """The offerings a scenario may use.

        Args:
            gpu: GPU model prefixes (see :meth:`Offering.matches_gpu`); ``None`` or empty = any model.
            cloud: cloud names, case-insensitive; ``None`` or empty = any cloud.
            regions: allowed regions per cloud. A cloud missing from the mapping, or mapped to an empty
                list, is not restricted by region (use ``cloud`` to exclude clouds).
            fabric_required: keep only offerings with a multi-node GPU fabric.
        """
        clouds = {c.strip().lower() for c in _as_list(cloud)}
        allowed: dict[str, set[str]] = {}
        for name, names in (regions or {}).items():
            listed = set(_as_list(names))  # materialise once: the value may be a generator
            if listed:
                allowed[name.strip().lower()] = listed
        gpu_patterns = _as_list(gpu)

        def keep(o: Offering) -> bool:
            if clouds and o.cloud not in clouds:
                return False
            if o.cloud in allowed and o.region not in allowed[o.cloud]:
                return False
            if fabric_required and not o.has_fabric:
                return False
            return o.matches_gpu(gpu_patterns)

        return self.with_offerings(o for o in self.offerings if keep(o))

    def to_dataframe(self) -> pd.DataFrame:
        """One row per offering: the catalog columns, ``id`` and ``on_demand_usd_gpu_h`` (per GPU-hour).

        ``spot_interruptions_per_hour`` holds the resolved rate; absent prices are NaN and an unlimited
        ``max_nodes`` is <NA> (nullable integer), so the frame round-trips through CSV.
        """
        import pandas as pd  # deferred: importing the module must stay cheap

        records = [
            {
                **{name: getattr(o, name) for name in _V1_COLUMNS},
                **_provenance_cells(o),
                "capacity_block_usd_h": o.capacity_block_usd_h,
                "flex_start_usd_h": o.flex_start_usd_h,
                "id": o.id,
                "on_demand_usd_gpu_h": (
                    None if o.on_demand_usd_h is None else o.on_demand_usd_h / o.gpus_per_node
                ),
            }
            for o in self.offerings
        ]
        frame = pd.DataFrame.from_records(records, columns=[*_COLUMNS, "id", "on_demand_usd_gpu_h"])
        float_columns = [
            "gpu_memory_gb",
            "fabric_gbps",
            "on_demand_usd_h",
            "spot_usd_h",
            "reserved_1y_usd_h",
            "reserved_3y_usd_h",
            "spot_interruptions_per_hour",
            "on_demand_usd_gpu_h",
            "capacity_block_usd_h",
            "flex_start_usd_h",
        ]
        dtypes = {**dict.fromkeys(float_columns, "float64"), "gpus_per_node": "int64", "max_nodes": "Int64"}
        return frame.astype(dtypes)

    def provenance_counts(self) -> dict[str, int]:
        """How many of the catalog's prices are quoted, assumed, negotiated, unknown or unstated."""
        counts: dict[str, int] = dict.fromkeys(PRICE_BASES, 0)
        for offering in self.offerings:
            for tier in TIER_COLUMN:
                record = offering.price_provenance(tier)
                if record.basis == "unknown" or offering.price(tier) is not None:
                    counts[record.basis] += 1
        return counts


def _provenance_cells(offering: Offering) -> dict[str, str]:
    """The format-2 provenance cells of ``offering`` (empty where it states none)."""
    cells = dict.fromkeys(PROVENANCE_COLUMNS, "")
    for record in offering.provenance:
        prefix = TIER_COLUMN[Tier(record.tier)]
        cells[f"{prefix}_basis"] = record.basis
        cells[f"{prefix}_source"] = record.source
        cells[f"{prefix}_as_of"] = "" if record.as_of is None else _iso(record.as_of)
    return cells


def _iso(moment: datetime) -> str:
    """``2026-12-05`` for a midnight, else ``2026-12-05T08:00:00Z``."""
    if moment.time() == datetime.min.time():
        return moment.date().isoformat()
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def catalog_csv(offerings: Iterable[Offering]) -> str:
    """``offerings`` as the text of a catalog CSV in format :data:`CATALOG_FORMAT`: it loads back as it is."""
    offerings = list(offerings)
    frame = Catalog(offerings).to_dataframe()[list(_COLUMNS)]
    # an empty cell is "the cloud's default rate": keep it so, so that a better default reaches the row
    import numpy as np

    defaults = np.array(
        [o.spot_interruptions_per_hour == DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR[o.cloud] for o in offerings],
        dtype=bool,
    )
    frame["spot_interruptions_per_hour"] = frame["spot_interruptions_per_hour"].mask(defaults)
    return frame.to_csv(index=False, float_format="%.10g", lineterminator="\n")


def write_catalog(offerings: Iterable[Offering], path: Path) -> None:
    """``offerings`` as a catalog CSV in format :data:`CATALOG_FORMAT`, written whole or not at all (a
    temporary sibling renamed into place): a fetch that fails part way never leaves half a catalog."""
    import os
    import tempfile

    text = catalog_csv(offerings)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# ---- reading ------------------------------------------------------------------------------------------


def _as_list(value: Iterable[str] | str | None) -> list[str]:
    """Accept one string or many, so ``gpu="H100"`` does not iterate over characters."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def _read_csv(path: Path, warnings: list[str]) -> list[Offering]:
    """Parse and validate every row; the first problem found raises InputError. What is doubtful but
    usable is appended to ``warnings``."""
    data = read_input_bytes(
        path,
        MAX_CATALOG_BYTES,
        directory="is a directory, expected a catalog CSV file",
        too_large=lambda size: f"{size:,} bytes; a catalog CSV is at most {MAX_CATALOG_BYTES:,}",
    )
    text = decode_utf8(path, data)
    # csv.reader yields blank lines as records ([]), keeping our row numbers equal to a spreadsheet's.
    records = list(csv.reader(io.StringIO(text, newline="")))
    while records and not any(cell.strip() for cell in records[-1]):
        records.pop()  # trailing blank lines are not rows anyone meant to write
    if not records:
        raise InputError(
            path, "row 1", f"empty file; expected a header row with the columns {', '.join(_COLUMNS)}"
        )
    header = _check_header(path, records[0])
    offerings: list[Offering] = []
    first_row_of: dict[str, int] = {}
    if len(records) - 1 > MAX_CATALOG_ROWS:
        raise InputError(
            path, f"row {MAX_CATALOG_ROWS + 2}", f"more than {MAX_CATALOG_ROWS:,} offerings in one catalog"
        )
    for index, record in enumerate(records[1:]):
        row = index + 2  # the header is spreadsheet row 1
        if not any(cell.strip() for cell in record):
            continue
        if _on_demand_unknown(header, record):
            name = ":".join(record[header.index(c)].strip() for c in ("cloud", "region", "instance_type"))
            warnings.append(
                f"{path}: row {row}: the on-demand price of {name} is unknown; the offering is not planned"
            )
            continue
        offering = _parse_row(path, row, header, record)
        warnings.extend(_price_ratios(path, row, offering))
        warnings.extend(_unknown_prices(path, row, offering))
        if offering.id in first_row_of:
            raise InputError(
                path,
                f"row {row}, column instance_type",
                f"duplicate offering {offering.id!r}, already defined in row {first_row_of[offering.id]}",
            )
        first_row_of[offering.id] = row
        offerings.append(offering)
    if not offerings:
        raise InputError(path, "row 2", "no data rows: the catalog needs at least one offering")
    return offerings


def _terms_beside(path: Path, offerings: list[Offering], warnings: list[str]) -> list[PriceTerm]:
    """The terms file beside a catalog (``catalog.csv`` -> ``catalog.terms.csv``), if there is one; a term of
    an offering the catalog does not have is left out with one warning naming how many."""
    beside = terms_path_for(path)
    if not beside.is_file():
        return []
    terms = read_terms(beside)
    ids = {o.id for o in offerings}
    strays = sorted({t.offering for t in terms if t.offering not in ids})
    if strays:
        warnings.append(
            f"{beside}: {len(strays)} offering(s) with terms but no catalog row (left out): "
            + ", ".join(strays[:5])
            + (" ..." if len(strays) > 5 else "")
        )
    return [t for t in terms if t.offering in ids]


def _on_demand_unknown(header: list[str], record: list[str]) -> bool:
    """Whether the row says its on-demand price is unknown (format 2): it is kept in the file, not planned."""
    if "on_demand_basis" not in header:
        return False
    at = header.index("on_demand_basis")
    return at < len(record) and record[at].strip().lower() == "unknown"


def _unknown_prices(path: Path, row: int, offering: Offering) -> list[str]:
    """A warning for each tier whose price the source did not have: the tier is not offered for the row."""
    return [
        f"{path}: row {row}: the {TIER_COLUMN[Tier(record.tier)].replace('_', '-')} price of "
        f"{offering.id} is unknown ({record.source or 'no source given'}); that tier is not planned"
        for record in offering.provenance
        if record.basis == "unknown"
    ]


def _price_ratios(path: Path, row: int, offering: Offering) -> list[str]:
    """InputError for a spot or committed rate above :data:`MAX_PRICE_RATIO` x on-demand; the warnings
    for one above on-demand, and for a 3-year rate above the 1-year rate (see the price ratios above)."""
    on_demand = offering.on_demand_usd_h
    if on_demand is None:
        return []
    found: list[str] = []
    for column in ("spot_usd_h", "reserved_1y_usd_h", "reserved_3y_usd_h", *_V2_PRICE_COLUMNS):
        price = getattr(offering, column)
        if price is None or price <= on_demand:
            continue
        ratio = price / on_demand
        where = f"row {row}, column {column}"
        said = f"${price:,.4g} per node-hour is {ratio:.2f} x the on-demand ${on_demand:,.4g}"
        if ratio > MAX_PRICE_RATIO:
            raise InputError(
                path,
                where,
                f"{said}; more than {MAX_PRICE_RATIO:g} x is a unit mix-up (a monthly, yearly or upfront "
                "figure?), not a price per node-hour",
            )
        why = (
            "planned as given (spot above on-demand happens briefly)"
            if column == "spot_usd_h"
            else "a commitment dearer than on-demand is never bought"
        )
        found.append(f"{path}: {where}: {said}; {why}")
    one, three = offering.reserved_1y_usd_h, offering.reserved_3y_usd_h
    if one is not None and three is not None and three > one:
        found.append(
            f"{path}: row {row}, column reserved_3y_usd_h: ${three:,.4g} per node-hour is above the 1-year "
            f"${one:,.4g}; the 3-year term is planned as given"
        )
    return found


def _check_header(path: Path, raw: list[str]) -> list[str]:
    return checked_header(
        path, raw, _COLUMNS, _REQUIRED, f"catalog format {CATALOG_FORMAT} columns: {', '.join(_COLUMNS)}"
    )


def _parse_row(path: Path, row: int, header: list[str], record: list[str]) -> Offering:
    if any(cell.strip() for cell in record[len(header) :]):  # trailing empty cells are harmless
        raise InputError(
            path,
            f"row {row}, column {len(header) + 1}",
            f"{len(record)} cells but the header has {len(header)}",
        )
    cells = {name: (record[i].strip() if i < len(record) else "") for i, name in enumerate(header)}

    def where(column: str) -> str:
        return f"row {row}, column {column}"

    def text(column: str) -> str:
        value = cells.get(column, "")
        if not value and column in _REQUIRED:
            raise InputError(path, where(column), "required value is empty")
        return value

    def number(column: str) -> float | None:
        raw = text(column)
        if not raw:
            return None
        try:
            return parse_number(raw, COLUMN_RANGES[column])
        except ValueError as exc:
            problem = str(exc)
            if column in _PRICE_COLUMNS and column not in _REQUIRED and problem.startswith("must be greater"):
                problem += " (leave the cell empty where the tier is not offered)"
            raise InputError(path, where(column), problem) from None

    def integer(column: str) -> int | None:
        value = number(column)  # spreadsheets export 8 as "8.0"; the range says whole numbers only
        return None if value is None else int(value)

    def identifier(column: str) -> str:
        value = text(column)
        if ":" in value or any(ch.isspace() or not ch.isprintable() for ch in value):
            raise InputError(
                path,
                where(column),
                f"{value!r} is not an identifier: it is part of the offering id cloud:region:instance_type,"
                " so no colon, space or control character",
            )
        return value

    cloud = text("cloud").lower()
    if cloud not in CLOUDS:
        raise InputError(path, where("cloud"), f"unknown cloud {text('cloud')!r}; valid: {', '.join(CLOUDS)}")
    gpu_model = _canonical(text("gpu_model"), GPU_MODELS)
    if gpu_model is None:
        raise InputError(
            path,
            where("gpu_model"),
            f"unknown GPU model {text('gpu_model')!r}; valid: {', '.join(GPU_MODELS)}"
            f"{_did_you_mean(text('gpu_model'), GPU_MODELS)}",
        )
    fabric = text("fabric").lower()
    if fabric not in FABRICS:
        raise InputError(
            path,
            where("fabric"),
            f"unknown fabric {text('fabric')!r}; valid: {', '.join(FABRICS)}"
            " (plain ethernet, ENA and gVNIC are none)",
        )
    gpus = integer("gpus_per_node")
    memory = number("gpu_memory_gb")
    on_demand = number("on_demand_usd_h")
    # Unreachable (text() rejects empty required cells); narrows the types without an assert.
    if gpus is None or memory is None or on_demand is None:
        raise InputError(path, f"row {row}", "a required value is empty")
    rate = number("spot_interruptions_per_hour")
    provenance = tuple(
        said
        for tier, prefix in TIER_COLUMN.items()
        if (said := _provenance(path, row, cells, tier, prefix)) is not None
    )
    return Offering(
        cloud=cloud,
        region=identifier("region"),
        instance_type=identifier("instance_type"),
        gpu_model=gpu_model,
        gpus_per_node=gpus,
        gpu_memory_gb=memory,
        fabric=fabric,
        fabric_gbps=number("fabric_gbps"),
        on_demand_usd_h=on_demand,
        spot_usd_h=number("spot_usd_h"),
        reserved_1y_usd_h=number("reserved_1y_usd_h"),
        reserved_3y_usd_h=number("reserved_3y_usd_h"),
        capacity_block_usd_h=number("capacity_block_usd_h"),
        flex_start_usd_h=number("flex_start_usd_h"),
        spot_interruptions_per_hour=DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR[cloud] if rate is None else rate,
        max_nodes=integer("max_nodes"),
        source=_printable(path, where("source"), text("source")),
        provenance=provenance,
    )


def _provenance(
    path: Path, row: int, cells: dict[str, str], tier: Tier, prefix: str
) -> PriceProvenance | None:
    """The row's record of where its ``tier`` price comes from (format 2), or None when it says nothing.

    A quoted price names its source and date; a price whose basis is ``unknown`` is empty (the tier is not
    offered); a basis without a price, other than ``unknown``, is refused."""
    basis_text = cells.get(f"{prefix}_basis", "").lower()
    source = _printable(path, f"row {row}, column {prefix}_source", cells.get(f"{prefix}_source", ""))
    as_of_text = cells.get(f"{prefix}_as_of", "")
    if not basis_text:
        if source or as_of_text:
            raise InputError(
                path,
                f"row {row}, column {prefix}_basis",
                f"empty, but {prefix}_source or {prefix}_as_of is given; write one of "
                f"{', '.join(_WRITTEN_BASES)}",
            )
        return None
    where = f"row {row}, column {prefix}_basis"
    if basis_text not in _WRITTEN_BASES:
        raise InputError(
            path,
            where,
            f"unknown price basis {basis_text!r}; valid: {', '.join(_WRITTEN_BASES)}",
        )
    basis: PriceBasis = basis_text
    has_price = bool(cells.get(f"{prefix}_usd_h", ""))
    if basis == "unknown" and has_price:
        raise InputError(path, where, f"unknown, but {prefix}_usd_h holds a price: leave the price empty")
    if basis != "unknown" and not has_price:
        raise InputError(
            path, where, f"{basis}, but {prefix}_usd_h is empty: a price not offered or not found is unknown"
        )
    if basis == "quoted" and not (source and as_of_text):
        raise InputError(
            path, where, f"a quoted price names its source and date ({prefix}_source, {prefix}_as_of)"
        )
    as_of = _as_of(path, f"row {row}, column {prefix}_as_of", as_of_text) if as_of_text else None
    return PriceProvenance(tier=tier.value, basis=basis, source=source, as_of=as_of)


def _as_of(path: Path, where: str, text: str) -> datetime:
    """An ISO 8601 date (``2026-12-05``) or time (``2026-12-05T08:00:00Z``), in UTC; not in the future."""
    try:
        if len(text) == 10:
            moment = datetime.combine(date.fromisoformat(text), datetime.min.time(), tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(text)
            moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except ValueError:
        raise InputError(
            path, where, f"{text!r} is not an ISO 8601 date or time (2026-12-05 or 2026-12-05T08:00:00Z)"
        ) from None
    if not text.isascii() or moment.year < 2000:
        raise InputError(path, where, f"{text!r} is not a date a price was read on")
    if moment > datetime.now(UTC) + timedelta(days=1):
        raise InputError(path, where, f"{text!r} is in the future")
    return moment


def _printable(path: Path, where: str, value: str) -> str:
    bad = next((ch for ch in value if not ch.isprintable()), None)
    if bad is not None:
        raise InputError(path, where, f"contains a control character ({bad!r}); write it on one line")
    return value


def _canonical(value: str, names: tuple[str, ...]) -> str | None:
    """The canonical spelling of ``value`` (case-insensitive), or None."""
    lowered = value.lower()
    return next((name for name in names if name.lower() == lowered), None)


def _did_you_mean(value: str, names: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(value.upper(), [n.upper() for n in names], n=1, cutoff=0.5)
    if not close:
        return ""
    return f" (did you mean {_canonical(close[0], names)!r}?)"
