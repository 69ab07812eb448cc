"""The scenario: the validated YAML input, one place for units and defaults.

Units: money in USD, time in hours (timestamps are UTC), counts in nodes unless a name says GPUs.
Unknown fields are errors (a typo must never be silently ignored). Every number is finite and inside
the range its field's description states (a boolean is not a number; counts are whole numbers), every
name is printable text (:data:`Name`). Every error names the file, the field path
(``inference[0].replicas.peak``) and the problem; see :class:`models.errors.InputError`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticUndefined

from models.catalog import (
    CLOUDS,
    GPU_MODELS,
    MAX_FABRIC_GBPS,
    MAX_GPU_MEMORY_GB,
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    MAX_USD_PER_NODE_HOUR,
    Cloud,
)
from models.errors import InputError
from models.flex_start import DEFAULT_FLEX_START_DELAY_HOURS
from models.naming import safe_name
from models.numbers import Range, StrictModel
from models.overlay import PricingOverlay
from models.tiers import CLOUD_TERMS, HOURS_PER_MONTH, HOURS_PER_YEAR, Term
from models.yamlfile import read_yaml

PRIORITIES = ("production", "standard", "batch")

#: What a gang may do when the cloud refuses its targeted capacity reservation, in the order tried:
#: reserve in another zone of the region, launch without a reservation (on demand, in its placement
#: group), name the Capacity Blocks offered for it (listing buys nothing). A training job's ``fallback``
#: lists those it allows (default: all, in this order; empty: the reservation or nothing).
Fallback = Literal["other-zone", "no-reservation", "capacity-block"]
FALLBACKS: tuple[Fallback, ...] = ("other-zone", "no-reservation", "capacity-block")

# ---- numbers and names ------------------------------------------------------------------------------
# Every numeric field is finite and inside a documented range (the bounds are generous: a value past one
# is a typo or a unit mix-up). A boolean is not a number (YAML reads `yes` and `true` as booleans, which
# pydantic would take as 1), and a count takes whole numbers only (2 and 2.0, not 2.5). The range is
# enforced by _Strict's validator with a short message, and stated in the field's description and as
# JSON Schema bounds (see _number).

#: The longest horizon (five years of 8,760 h); training hours and period_hours are bounded by it too.
MAX_HORIZON_HOURS: int = 5 * HOURS_PER_YEAR
#: Most replicas of one service in any hour (profile values, CSV cells, and the grown, scaled peak).
MAX_REPLICAS: int = 1_000_000
#: Most GPUs a team may be guaranteed or burst to.
MAX_TEAM_GPUS: int = 1_000_000
#: Timestamps are in [EARLIEST, LATEST): anything else is a typo (and beyond what pandas can represent).
EARLIEST: datetime = datetime(1970, 1, 1, tzinfo=UTC)
LATEST: datetime = datetime(2200, 1, 1, tzinfo=UTC)
#: Longest name of a team, workload, commitment, site or scenario.
MAX_NAME_LENGTH: int = 200

_NODES = Range(gt=0, le=MAX_NODES, unit="nodes", whole=True)
_GPUS_PER_NODE = Range(gt=0, le=MAX_GPUS_PER_NODE, unit="GPUs", whole=True)
_TEAM_GPUS = Range(ge=0, le=MAX_TEAM_GPUS, unit="GPUs", whole=True)
_HOURS = Range(gt=0, le=MAX_HORIZON_HOURS, unit="hours", whole=True)
_REPLICAS = Range(ge=0, le=MAX_REPLICAS, unit="replicas")
_GROWTH = Range(gt=-1.0, le=10.0)
_NODE_HOUR_PRICE = Range(ge=0, lt=MAX_USD_PER_NODE_HOUR, unit="USD per node-hour")
_PERCENT = Range(ge=0, le=100, unit="%")
_MINUTES = Range(ge=0, le=24 * 60, unit="minutes")


def _number(description: str, allowed: Range, default: Any = PydanticUndefined) -> Any:
    """A numeric field: ``allowed`` as pydantic bounds (JSON Schema minimum/maximum) and in the description.

    The field's annotation says int (a count: whole numbers only, ``allowed.whole``) or float; the unit
    rides along in the schema (``unit``), where _Strict's validator finds it for its messages.
    """
    return Field(
        default,
        description=f"{description}; {allowed.describe()}",
        ge=allowed.ge,
        gt=allowed.gt,
        le=allowed.le,
        lt=allowed.lt,
        json_schema_extra={"unit": allowed.unit} if allowed.unit else None,
    )


class _Strict(StrictModel):
    """A scenario's parts: strict as every user input is (``models.numbers.StrictModel``)."""


def _check_name(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    if value != value.strip():
        raise ValueError(f"{value!r} starts or ends with whitespace; remove it")
    bad = next((ch for ch in value if not ch.isprintable()), None)
    if bad is not None:
        raise ValueError(f"{value!r} contains a control or invisible character ({bad!r})")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"is {len(value)} characters long; at most {MAX_NAME_LENGTH}")
    return value


#: A name the user gives (team, workload, commitment, site, scenario): printable text, not empty, no
#: leading or trailing space, no control character, at most MAX_NAME_LENGTH characters.
Name = Annotated[
    str,
    AfterValidator(_check_name),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_NAME_LENGTH,
            "pattern": r"^\S(.*\S)?$",
            "description": f"printable text, 1 to {MAX_NAME_LENGTH} characters, no leading or trailing "
            "whitespace, no control character",
        }
    ),
]
#: A GPU model or a prefix of one (``A100`` = A100-40GB and A100-80GB): printable text like a Name.
GpuPattern = Name


def _utc(value: datetime) -> datetime:
    """Naive timestamps are read as UTC: capacity plans are written in UTC by convention."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _checked_time(value: datetime) -> datetime:
    """A scenario's timestamp, in UTC and in [EARLIEST, LATEST)."""
    value = _utc(value)
    if not EARLIEST <= value < LATEST:
        raise ValueError(
            f"{value.isoformat()} is outside {EARLIEST.date().isoformat()} to {LATEST.date().isoformat()}"
        )
    return value


class Horizon(_Strict):
    """The planning window: ``hours`` from ``start``, in periods of ``period_hours``."""

    start: datetime = Field(description="its first hour (UTC; a naive time is UTC), 1970 to 2200")
    hours: int = _number("length of the horizon", _HOURS)
    period_hours: int = _number("planning granularity; hours is a multiple of it", _HOURS, 1)

    @field_validator("start")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return _checked_time(value)

    @model_validator(mode="after")
    def _whole_periods(self) -> Horizon:
        if self.hours % self.period_hours:
            raise ValueError(f"hours ({self.hours}) must be a multiple of period_hours ({self.period_hours})")
        return self

    @property
    def periods(self) -> int:
        return self.hours // self.period_hours

    @property
    def end(self) -> datetime:
        return self.start + timedelta(hours=self.hours)

    def hour_of(self, when: datetime) -> float:
        """Hours from the horizon start to ``when``."""
        return (_utc(when) - self.start).total_seconds() / 3600.0


class CloudScope(_Strict):
    regions: list[str] | None = Field(None, description="allowed regions; absent = every catalog region")


def _cloud_term(value: Any) -> Any:
    """Only the cloud terms (``owned`` comes with a colocation section), with the message a
    ``Literal["1y", "3y"]`` gives, so the error reads the same as the field's values."""
    if value not in CLOUD_TERMS:
        names = [repr(term.value) for term in CLOUD_TERMS]
        raise ValueError(f"Input should be {', '.join(names[:-1])} or {names[-1]}")
    return value


#: A commitment term a scenario may buy from a cloud: a :class:`~models.tiers.Term`, ``1y`` or ``3y``.
CloudTerm = Annotated[
    Term,
    BeforeValidator(_cloud_term),
    WithJsonSchema({"enum": [term.value for term in CLOUD_TERMS], "type": "string"}),
]


#: When new commitments may start: only at the horizon's first hour, or at the first hour of any
#: calendar quarter or month inside it (``planner/planning/problem/purchases.py``).
PurchaseSchedule = Literal["horizon", "quarterly", "monthly"]
#: The window a cash limit on upfront fees applies to: a calendar month or quarter of the horizon.
CashWindow = Literal["month", "quarter"]


#: The savings plans a scenario may buy or hold (issue 38): an AWS Compute Savings Plan (any instance type
#: and region it prices), an AWS EC2 Instance Savings Plan (one instance family in one region), an Azure
#: savings plan for compute, or GCP resource-based committed use (``gcp-resource``: GPUs of one model in
#: one region, with their vCPUs and memory, shared by every machine type with that GPU; bought in whole
#: GPUs). Each is billed as a commitment of USD per hour, not of nodes (``models/savingsplans.py``).
SavingsPlanKind = Literal["compute", "ec2-instance", "azure", "gcp-resource"]
#: A scenario's kind -> the kind of its rates in a catalog's terms file (``models/priceterms.py``).
SAVINGS_PLAN_TERM_KIND: dict[str, str] = {
    "compute": "savings-plan-compute",
    "ec2-instance": "savings-plan-ec2-instance",
    "azure": "savings-plan",
    "gcp-resource": "committed-use",
}
#: Kinds whose scope is one family (EC2: an instance family; GCP: a GPU model) in one region.
SCOPED_KINDS: tuple[str, ...] = ("ec2-instance", "gcp-resource")
_USD_PER_HOUR = Range(gt=0, le=1_000_000, unit="USD per hour")


class UpfrontCap(_Strict):
    """The most the upfront fees of commitments, savings plans and Capacity Blocks (or calendar-mode
    reservations) bought may add up to in one calendar month or quarter (issue 38): a finance limit on cash,
    not on cost; no-upfront options need none, and a gang a block would pass it for runs without one, so a
    plan always fits."""

    per: CashWindow = Field(description="the window the limit applies to: month or quarter (calendar)")
    usd: float = _number("the most upfront fees paid in one window", Range(ge=0, lt=1e12, unit="USD"))


class Purchase(_Strict):
    terms: list[CloudTerm] = Field(default_factory=lambda: list(CLOUD_TERMS))
    savings_plans: list[SavingsPlanKind] = Field(
        default_factory=list,
        description="savings plans the plan may buy (opt-in): compute, ec2-instance, azure (at the rates "
        "of the catalog's terms file), gcp-resource (GCP committed use as GPUs per model and region, in "
        "place of one commitment per machine type); for the terms in terms",
    )
    capacity_blocks: bool = Field(
        False,
        description="training gangs may run in an AWS Capacity Block bought for the run (opt-in: paid "
        "upfront for the sold duration, 1-14 days or weeks up to 182, at most 64 instances), at the "
        "catalog's capacity_block_usd_h rate, where that beats on-demand and commitments",
    )
    calendar_mode: bool = Field(
        False,
        description="training gangs may run in a GCP calendar-mode future reservation bought for the run "
        "(opt-in: paid for its whole duration, 1 to 90 days), at the catalog's capacity_block_usd_h rate of "
        "the GCP offering, where that beats on-demand and commitments",
    )
    flex_start: bool = Field(
        False,
        description="training gangs of at most 7 days may run on GCP flex-start VMs (opt-in: Dynamic "
        "Workload Scheduler grants them after a start delay, paid per hour at the catalog's flex_start_usd_h "
        "rate), where the run's window holds the delay plus the run and that beats the other tiers",
    )
    flex_start_delay_hours: float = _number(
        "the start delay a flex-start gang plans for: it starts no earlier than its window's start plus this "
        "(default 24 h, the longest Vertex AI's flex-start waits by default: models/flex_start.py)",
        Range(ge=0, le=8760, unit="hours"),
        DEFAULT_FLEX_START_DELAY_HOURS,
    )
    max_spot_share: float = _number("most training GPU-hours on spot", Range(ge=0, le=1), 1.0)
    schedule: PurchaseSchedule = Field(
        "quarterly",
        description="when new commitments may start: horizon (day one only), quarterly or monthly "
        "(the first hour of any calendar quarter or month in the horizon)",
    )
    max_upfront_usd: UpfrontCap | None = Field(
        None,
        description="a cash limit on upfront fees per calendar month or quarter, e.g. {per: month, usd: "
        "100000}: commitments' and savings plans' upfront parts and the fees of Capacity Blocks (and "
        "calendar-mode reservations) starting in it; without it each purchase takes the payment option (no, "
        "partial, all upfront) with the lowest effective rate",
    )

    def buys_blocks(self, cloud: str) -> bool:
        """Whether a gang may run in a reservation of fixed duration bought for it on ``cloud``: an AWS
        Capacity Block (``capacity_blocks``) or a GCP calendar-mode reservation (``calendar_mode``)."""
        return {"aws": self.capacity_blocks, "gcp": self.calendar_mode}.get(cloud, False)


def _held_term(value: Any) -> Any:
    if value not in (*CLOUD_TERMS, Term.RESERVATION):
        raise ValueError("Input should be '1y', '3y' or 'reservation'")
    return value


#: The term of a commitment already held: a cloud term, or a capacity reservation (with an end date).
HeldTerm = Annotated[
    Term,
    BeforeValidator(_held_term),
    WithJsonSchema({"enum": [*(t.value for t in CLOUD_TERMS), Term.RESERVATION.value], "type": "string"}),
]


class ExistingCommitment(_Strict):
    """A commitment the fleet already holds: paid whether used or not, usable from ``start`` to its end.

    A ``1y``/``3y`` term ends one or three years (8,760 h each) after ``start``; a capacity
    ``reservation`` ends at ``end``. ``usd_per_node_hour`` is the rate actually paid (a negotiated
    one); without it, the catalog's rate for the term (a reservation: the on-demand rate, which is
    how AWS, GCP and Azure bill reserved capacity).
    """

    name: Name | None = Field(None, description="a label; default held:offering/term/start date")
    offering: str = Field(min_length=1, description="offering id, cloud:region:instance_type")
    term: HeldTerm
    nodes: int = _number("nodes held", _NODES)
    start: datetime = Field(description="when it began (may be before the horizon)")
    end: datetime | None = Field(None, description="capacity reservations only: when it ends")
    usd_per_node_hour: float | None = _number("the rate paid; default the catalog's", _NODE_HOUR_PRICE, None)

    @field_validator("start", "end")
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return _checked_time(value) if value is not None else None

    @model_validator(mode="after")
    def _ends(self) -> ExistingCommitment:
        if self.term == Term.RESERVATION and self.end is None:
            raise ValueError("a capacity reservation needs an end (ISO time)")
        if self.term != Term.RESERVATION and self.end is not None:
            raise ValueError(
                f"a {self.term} commitment ends {self.term} after its start; end is only for reservations"
            )
        if self.ends <= self.start:
            raise ValueError(f"end ({self.ends.isoformat()}) is not after start ({self.start.isoformat()})")
        return self

    @property
    def ends(self) -> datetime:
        """When the commitment ends."""
        if self.end is not None:
            return self.end
        return self.start + timedelta(hours=(self.term.years or 0) * HOURS_PER_YEAR)

    @property
    def label(self) -> str:
        """Its name, by default ``held:OFFERING/TERM/START-DATE`` (never a purchase's name)."""
        return self.name or f"held:{self.offering}/{self.term}/{self.start.date().isoformat()}"


class HeldSavingsPlan(_Strict):
    """A savings plan the fleet already holds: ``usd_per_hour`` committed from ``start`` for its ``term``,
    paid every hour whether spent or not. Each hour it covers the on-demand nodes it has a rate for, at
    those rates, highest savings first (``models/savingsplans.py``). An ``ec2-instance`` plan covers one
    instance ``family`` in one ``region``; a ``compute`` or ``azure`` plan every offering its kind prices.
    Its rates are the catalog's (the terms file); a plan whose kind and scope the catalog has no rate for
    is refused when the scenario is planned."""

    name: Name
    kind: SavingsPlanKind
    term: CloudTerm
    usd_per_hour: float = _number("the commitment", _USD_PER_HOUR)
    start: datetime = Field(description="when it began (may be before the horizon)")
    family: str | None = Field(
        None,
        min_length=1,
        description="ec2-instance: the instance family (p5 of p5.48xlarge); gcp-resource: the GPU model",
    )
    region: str | None = Field(
        None, min_length=1, description="ec2-instance and gcp-resource plans only: the region"
    )
    payment: Literal["no-upfront", "partial-upfront", "all-upfront"] = Field(
        "no-upfront",
        description="how it was paid: each payment option has its own rates in the catalog's terms file "
        "(a partial or all-upfront plan's fee was paid when it was bought; its rates are lower)",
    )

    @field_validator("start")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return _checked_time(value)

    @model_validator(mode="after")
    def _scope(self) -> HeldSavingsPlan:
        scoped = self.kind in SCOPED_KINDS
        for field in ("family", "region"):
            given = getattr(self, field) is not None
            if scoped and not given:
                raise _FieldError(
                    field,
                    f"a {self.kind} plan covers one family (EC2: an instance family; GCP: a GPU "
                    "model) in one region: give it",
                )
            if given and not scoped:
                raise _FieldError(field, f"only an ec2-instance or a gcp-resource plan has a {field}; a "
                                  f"{self.kind} plan covers every offering its kind prices")  # fmt: skip
        return self

    @property
    def ends(self) -> datetime:
        return self.start + timedelta(hours=(self.term.years or 0) * HOURS_PER_YEAR)

    @property
    def scope(self) -> str:
        """The scope as ``models.savingsplans.plan_groups`` names it: ``compute``, ``azure``,
        ``ec2-instance FAMILY REGION`` or ``gcp-resource GPU_MODEL REGION``."""
        if self.kind in SCOPED_KINDS:
            return f"{self.kind} {self.family} {self.region}"
        return self.kind


class Team(_Strict):
    name: Name
    guaranteed_gpus: int = _number("GPUs always provisioned (committed) for the team", _TEAM_GPUS, 0)
    burst_gpus: int | None = _number("most GPUs the team may use at once; None = no cap", _TEAM_GPUS, None)
    priority: Literal["production", "standard", "batch"] = "standard"

    @model_validator(mode="after")
    def _burst_covers_guarantee(self) -> Team:
        if self.burst_gpus is not None and self.burst_gpus < self.guaranteed_gpus:
            raise ValueError(
                f"burst_gpus ({self.burst_gpus}) is below guaranteed_gpus ({self.guaranteed_gpus})"
            )
        return self


# ---- demand series ----------------------------------------------------------------------------------


class FlatProfile(_Strict):
    profile: Literal["flat"]
    base: float = _number("replicas in every hour", _REPLICAS)
    monthly_growth: float = _number("compound growth per 730 h (0.03: 3% a month)", _GROWTH, 0.0)


class DiurnalProfile(_Strict):
    """A daily cosine between ``base`` (trough) and ``peak`` at ``peak_hour_utc``."""

    profile: Literal["diurnal"]
    base: float = _number("replicas at the daily trough", _REPLICAS)
    peak: float = _number("replicas at the daily peak, at least base", _REPLICAS)
    peak_hour_utc: float = _number("hour of the peak (UTC)", Range(ge=0, lt=24, unit="h"), 12.0)
    weekend_factor: float = _number("multiplier on Saturdays and Sundays (UTC)", Range(ge=0, le=100), 1.0)
    monthly_growth: float = _number("compound growth per 730 h (0.03: 3% a month)", _GROWTH, 0.0)

    @model_validator(mode="after")
    def _peak_above_base(self) -> DiurnalProfile:
        if self.peak < self.base:
            raise ValueError(f"peak ({self.peak}) is below base ({self.base})")
        return self


class CsvSeries(_Strict):
    """A demand series from a CSV file (format: end of catalog-format.md); path relative to the scenario."""

    csv: str = Field(min_length=1)


def _demand_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        if "csv" in value:
            return "csv"
        return value.get("profile")
    return getattr(value, "profile", "csv" if isinstance(value, CsvSeries) else None)


DemandSpec = Annotated[
    Annotated[FlatProfile, Tag("flat")]
    | Annotated[DiurnalProfile, Tag("diurnal")]
    | Annotated[CsvSeries, Tag("csv")],
    Discriminator(
        _demand_kind,
        custom_error_type="demand_kind",
        custom_error_message="expected a profile (flat or diurnal) or {csv: FILE}",
    ),
]
_DEMAND_TAGS = {"flat", "diurnal", "csv"}


# ---- workloads -------------------------------------------------------------------------------------


def _check_gpu_patterns(patterns: list[str]) -> list[str]:
    """Each entry must prefix-match a canonical model (catalog-format.md), so typos are caught early."""
    if not patterns:
        raise ValueError(
            f"list at least one GPU model or prefix (A100, H100); known: {', '.join(GPU_MODELS)}"
        )
    for pattern in patterns:
        if not any(model.lower().startswith(pattern.lower()) for model in GPU_MODELS):
            raise ValueError(f"unknown GPU model {pattern!r}; known: {', '.join(GPU_MODELS)}")
    return patterns


class InferenceService(_Strict):
    """A service whose replicas must be up in every period (demand in replicas)."""

    name: Name
    team: str
    project: Name | None = Field(None, description="what chargeback splits team cost by; default: the name")
    gpus_per_replica: int | None = _number("whole GPUs per replica (on one node)", _GPUS_PER_NODE, None)
    gpu_memory_gb: float | None = _number(
        "memory per replica (may fit a MIG slice)",
        Range(gt=0, le=MAX_GPUS_PER_NODE * MAX_GPU_MEMORY_GB, unit="GB"),
        None,
    )
    gpu_compute_share: float | None = _number(
        "with gpu_memory_gb: share of a GPU's SMs a replica needs (MIG: g/7)", Range(gt=0, le=1), None
    )
    gpu_models: list[GpuPattern] = Field(
        description="GPU models it may run on (prefixes: A100 = A100-40GB and A100-80GB); at least one",
        json_schema_extra={"minItems": 1},
    )
    latency_critical: bool = Field(True, description="never on spot")
    replicas: DemandSpec
    scale: float = _number(
        "multiplies the replica series (what-if demand changes)", Range(gt=0, le=1000), 1.0
    )

    _gpu_models = field_validator("gpu_models")(_check_gpu_patterns)

    @property
    def project_name(self) -> str:
        """The project chargeback splits by (``models/chargeback.py``): ``project``, else the name."""
        return self.project or self.name

    @model_validator(mode="after")
    def _one_size(self) -> InferenceService:
        if (self.gpus_per_replica is None) == (self.gpu_memory_gb is None):
            raise ValueError("give exactly one of gpus_per_replica or gpu_memory_gb")
        if self.gpu_compute_share is not None and self.gpu_memory_gb is None:
            raise ValueError("gpu_compute_share goes with gpu_memory_gb (a whole-GPU replica has all SMs)")
        return self


class Checkpoint(_Strict):
    write_minutes: float = _number("time to write one checkpoint", _MINUTES)
    restart_minutes: float = _number("time from an interruption until training resumes", _MINUTES)


class TrainingJob(_Strict):
    """A gang of ``nodes`` nodes that runs ``hours`` once (or once per day/week with ``repeat``)."""

    name: Name
    team: str
    project: Name | None = Field(None, description="what chargeback splits team cost by; default: the name")
    nodes: int = _number("nodes in the gang", _NODES)
    gpus_per_node: int = _number("GPUs of each node", _GPUS_PER_NODE, 8)
    gpu_models: list[GpuPattern] = Field(
        description="GPU models it may run on (prefixes: A100 = A100-40GB and A100-80GB); at least one",
        json_schema_extra={"minItems": 1},
    )
    hours: float = _number(
        "run time of an uninterrupted gang", Range(gt=0, le=MAX_HORIZON_HOURS, unit="hours")
    )
    earliest_start: datetime | None = None
    deadline: datetime | None = None
    fabric: Literal["required", "preferred", "none"] | None = Field(
        None, description="multi-node GPU network; default: required when nodes > 1"
    )
    preemptible: bool = False
    checkpoint: Checkpoint | None = None
    repeat: Literal["none", "daily", "weekly"] = "none"
    fallback: tuple[Fallback, ...] = Field(
        FALLBACKS,
        description="what its gang may do when the cloud refuses its capacity reservation, tried in the "
        "order given: other-zone (reserve in another zone of the region), no-reservation (launch on "
        "demand without one), capacity-block (name the Capacity Blocks offered); default: all three; "
        "[] the reservation or nothing",
    )

    _gpu_models = field_validator("gpu_models")(_check_gpu_patterns)

    @model_validator(mode="before")
    @classmethod
    def _known_fallbacks(cls, data: Any) -> Any:
        """Name the run and the allowed values (pydantic's own message names neither)."""
        if not isinstance(data, dict) or "fallback" not in data:
            return data
        steps, run = data["fallback"], data.get("name", "?")
        if not isinstance(steps, list | tuple) or not all(isinstance(s, str) for s in steps):
            raise _FieldError("fallback", f"run {run!r}: must be a list of {', '.join(FALLBACKS)}")
        for step in steps:
            if step not in FALLBACKS:
                raise _FieldError(
                    "fallback", f"run {run!r}: unknown fallback {step!r}; allowed: {', '.join(FALLBACKS)}"
                )
        if len(set(steps)) != len(steps):
            raise _FieldError("fallback", f"run {run!r}: a fallback is listed twice ({', '.join(steps)})")
        return data

    @field_validator("earliest_start", "deadline")
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _checked_time(value)

    @model_validator(mode="after")
    def _window_order(self) -> TrainingJob:
        if self.earliest_start and self.deadline and self.deadline <= self.earliest_start:
            raise ValueError("deadline must be after earliest_start")
        return self

    @property
    def project_name(self) -> str:
        """The project chargeback splits by (``models/chargeback.py``): ``project``, else the name."""
        return self.project or self.name

    @property
    def needs_fabric(self) -> bool:
        return (self.fabric or ("required" if self.nodes > 1 else "none")) == "required"


class Colocation(_Strict):
    """Own GPU servers in a colocation site, bought as a tier the planner may mix with cloud capacity.

    Defaults are the documented example of ``FACTS.md`` section 5 (an 8x H100 HGX node); each says
    where it comes from. Two inputs have no figure there and are marked as assumptions.
    """

    site: Name = Field("colo", description="a name for the site (offering id owned:SITE:...), no colon")
    gpu_model: str = "H100"
    gpus_per_node: int = _number("GPUs of each node", _GPUS_PER_NODE, 8)
    gpu_memory_gb: float | None = _number(
        "per GPU; default: the model's usual size", Range(gt=0, le=MAX_GPU_MEMORY_GB, unit="GB"), None
    )
    fabric: Literal["infiniband", "none"] = Field(
        "infiniband", description="FACTS 5: node price quoted with IB NICs for 8x400G"
    )
    fabric_gbps: float = _number(
        "8 x 400 Gb/s NDR (FACTS 5)", Range(ge=0, le=MAX_FABRIC_GBPS, unit="Gb/s"), 3200.0
    )
    capex_per_node_usd: float = _number(
        "all-in: FACTS 5 worked example, $310k HGX node + ~$25k network share",
        Range(gt=0, le=10_000_000, unit="USD"),
        335_000.0,
    )
    power_kw_per_node: float = _number(
        "FACTS 5: DGX H100 max power 10.2 kW", Range(gt=0, le=1_000, unit="kW"), 10.2
    )
    pue: float = _number("FACTS 5: enterprise colo PUE 1.5-1.8 (Uptime 2024)", Range(ge=1, le=5), 1.5)
    power_usd_per_kwh: float = _number(
        "FACTS 5: $0.06-0.12 per kWh, midpoint", Range(ge=0, le=10, unit="USD per kWh"), 0.09
    )
    colo_usd_per_kw_month: float = _number(
        "FACTS 5: $150-250 per kW-month, mid", Range(ge=0, le=10_000, unit="USD per kW-month"), 200.0
    )
    support_pct_per_year: float = _number(
        "FACTS 5: not found, ~8-15% of hardware per year assumed; 10% as worked", _PERCENT, 10.0
    )
    depreciation_months: int = _number(
        "FACTS 5: 3-5 years; 36 months as v2-pseo-ai", Range(gt=0, le=240, unit="months", whole=True), 36
    )
    residual_value_pct: float = _number("FACTS 5: 25-35% after 36 months", _PERCENT, 30.0)
    cost_of_capital_pct_per_year: float = _number(
        "ASSUMPTION, not in FACTS 5: a typical corporate cost of capital", _PERCENT, 8.0
    )
    lead_time_months: float = _number(
        "ASSUMPTION, not in FACTS 5: months from order until a node is usable",
        Range(ge=0, le=60, unit="months"),
        0.0,
    )
    max_nodes: int = _number("most nodes that may be bought (space, power, budget)", _NODES)
    existing_nodes: int = _number(
        "servers already bought and running: usable from the first hour, paid as owned",
        Range(ge=0, le=MAX_NODES, unit="nodes", whole=True),
        0,
    )

    _gpu_model = field_validator("gpu_model")(lambda value: _canonical_gpu(value))

    @field_validator("site")
    @classmethod
    def _site_is_one_id_part(cls, value: str) -> str:
        if ":" in value:
            raise ValueError(f"{value!r} contains a colon, which separates the parts of an offering id")
        return value


def _canonical_gpu(value: str) -> str:
    if value not in GPU_MODELS:
        raise ValueError(f"unknown GPU model {value!r}; known: {', '.join(GPU_MODELS)}")
    return value


class Scenario(_Strict):
    name: Name
    description: str = ""
    horizon: Horizon
    catalog: str = Field("embedded", description="'embedded' or a path to a catalog CSV")
    pricing: PricingOverlay | Annotated[str, Field(min_length=1, max_length=4096)] | None = Field(
        None,
        description="your own prices on top of the catalog: a pricing overlay file (path relative to the "
        "scenario) or the overlay itself (discounts:, rates:); see docs/prices.md",
    )
    clouds: dict[Cloud, CloudScope] = Field(default_factory=lambda: {c: CloudScope() for c in CLOUDS})
    purchase: Purchase = Field(default_factory=Purchase)
    teams: list[Team] = Field(default_factory=list)
    inference: list[InferenceService] = Field(default_factory=list)
    training: list[TrainingJob] = Field(default_factory=list)
    colocation: Colocation | None = Field(None, description="own servers the planner may buy")
    commitments: list[ExistingCommitment] = Field(
        default_factory=list, description="commitments already held (reserved, committed use, reservations)"
    )
    savings_plans: list[HeldSavingsPlan] = Field(
        default_factory=list, description="savings plans already held (USD per hour committed)"
    )
    adjust: list[str] = Field(
        default_factory=list, description="changes to apply first, as gpuplan whatif --vary (spot_price=+50%)"
    )

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        team_names = [t.name for t in self.teams]
        _no_duplicates(team_names, "teams")
        _no_duplicates([w.name for w in self.workloads], "workload")
        _no_collisions_in_the_clouds(self.training)
        sections: tuple[tuple[str, Sequence[InferenceService | TrainingJob]], ...] = (
            ("inference", self.inference),
            ("training", self.training),
        )
        for section, workloads in sections:
            for index, workload in enumerate(workloads):
                if workload.team not in team_names:
                    raise _FieldError(
                        f"{section}[{index}].team",
                        f"unknown team {workload.team!r}; teams: {', '.join(team_names) or '(none)'}",
                    )
        for index, service in enumerate(self.inference):
            top = _highest_demand(service, self.horizon)
            if top > MAX_REPLICAS:
                raise _FieldError(
                    f"inference[{index}].replicas",
                    f"grows to {top:.3g} replicas in the horizon (peak, weekend_factor, monthly_growth "
                    f"and scale together); at most {MAX_REPLICAS} replicas",
                )
        for index, job in enumerate(self.training):
            for field in ("earliest_start", "deadline"):
                when = getattr(job, field)
                if when is not None and not self.horizon.start <= when <= self.horizon.end:
                    raise _FieldError(
                        f"training[{index}].{field}",
                        f"{when.isoformat()} is outside the horizon "
                        f"({self.horizon.start.isoformat()} to {self.horizon.end.isoformat()})",
                    )
        _no_duplicates([c.label for c in self.commitments], "commitment")
        labels = {c.label for c in self.commitments}
        for index, plan in enumerate(self.savings_plans):
            if plan.name in labels:
                raise _FieldError(
                    f"savings_plans[{index}].name",
                    f"{plan.name!r} is already the name of a commitment or savings plan; names are unique",
                )
            labels.add(plan.name)
            if plan.ends <= self.horizon.start or plan.start >= self.horizon.end:
                raise _FieldError(
                    f"savings_plans[{index}]",
                    f"{plan.start.isoformat()} to {plan.ends.isoformat()} does not overlap the horizon "
                    f"({self.horizon.start.isoformat()} to {self.horizon.end.isoformat()}); remove it",
                )
        for index, held in enumerate(self.commitments):
            if held.ends <= self.horizon.start or held.start >= self.horizon.end:
                raise _FieldError(
                    f"commitments[{index}]",
                    f"{held.start.isoformat()} to {held.ends.isoformat()} does not overlap the horizon "
                    f"({self.horizon.start.isoformat()} to {self.horizon.end.isoformat()}); remove it",
                )
        colocation = self.colocation
        if colocation and colocation.existing_nodes > colocation.max_nodes:
            raise _FieldError(
                "colocation.existing_nodes",
                f"{colocation.existing_nodes} is above colocation.max_nodes ({colocation.max_nodes})",
            )
        return self

    @property
    def workloads(self) -> list[InferenceService | TrainingJob]:
        """Every workload, inference first (names are unique across both kinds)."""
        return [*self.inference, *self.training]

    @property
    def team(self) -> dict[str, Team]:
        return {t.name: t for t in self.teams}


def _highest_demand(service: InferenceService, horizon: Horizon) -> float:
    """An upper bound of the service's replicas in any hour of the horizon (a CSV series: 0, its cells
    are checked when it is read), computed in logarithms so that no growth overflows."""
    spec = service.replicas
    if isinstance(spec, CsvSeries):
        return 0.0
    top = (
        spec.base
        if isinstance(spec, FlatProfile)
        else max(spec.base, spec.peak) * max(1.0, spec.weekend_factor)
    )
    if top <= 0:
        return 0.0
    months = max(0.0, (horizon.hours - 1) / HOURS_PER_MONTH) if spec.monthly_growth > 0 else 0.0
    log_top = math.log(top) + months * math.log1p(spec.monthly_growth) + math.log(service.scale)
    return math.exp(min(log_top, 700.0))


class _FieldError(ValueError):
    """A cross-field error that knows its own path (pydantic would report it at the root)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


def _no_collisions_in_the_clouds(jobs: Sequence[TrainingJob]) -> None:
    """Training jobs whose names are one name in the clouds are refused, naming both.

    A run's placement group, reservation, tags and client tokens are named from its job's name through
    ``models.naming.safe_name`` (lower case, ``-`` for anything else): ``ft a`` and ``FT-A`` would be one
    gang in the cloud, and one of them would silently get nothing."""
    seen: dict[str, tuple[int, str]] = {}
    for index, job in enumerate(jobs):
        slug = safe_name(job.name)
        if slug in seen:
            first, name = seen[slug]
            raise _FieldError(
                f"training[{index}].name",
                f"{job.name!r} and {name!r} (training[{first}]) are one name in the clouds ({slug!r}: "
                "placement groups, reservations and tags are named in lower case with '-'); rename one",
            )
        seen[slug] = (index, job.name)


def _no_duplicates(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"duplicate {what} name {name!r}")
        seen.add(name)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in _DEMAND_TAGS or part.startswith("function-"):
            continue  # union tags are pydantic's internals, not the user's field names
        else:
            path += f".{part}" if path else part
    return path


def parse(data: Any, file: str | Path | None = None) -> Scenario:
    """Validate an already-parsed YAML document; raise InputError on the first problem."""
    if not isinstance(data, dict):
        raise InputError(file, None, "a scenario must be a YAML mapping (name:, horizon:, ...)")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # an unknown field usually explains the rest (a misspelt key also reads as a missing one)
        error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        ctx_error = (error.get("ctx") or {}).get("error")
        if isinstance(ctx_error, _FieldError):  # inside a part (savings_plans[0]): its path first
            where = ".".join(part for part in (_format_loc(error["loc"]), ctx_error.where) if part)
            raise InputError(file, where, ctx_error.problem) from None
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; see scenarios/README.md for the fields)"
        if error["type"] == "missing":
            message = "required field is missing"
        extra = len(errors) - 1
        if extra:
            message += f" (and {extra} more problem{'s' if extra > 1 else ''})"
        raise InputError(file, _format_loc(error["loc"]) or None, message) from None


def load(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file (read as :func:`models.yamlfile.read_yaml` reads any)."""
    path = Path(path)
    return parse(read_yaml(path), path)
