"""The scenario: the validated YAML input, one place for units and defaults.

Units: money in USD, time in hours (timestamps are UTC), counts in nodes unless a name says GPUs.
Unknown fields are errors (a typo must never be silently ignored). Every error names the file, the
field path (``inference[0].replicas.peak``) and the problem; see :class:`models.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from models.catalog import CLOUDS, GPU_MODELS, Cloud
from models.errors import InputError
from models.tiers import CLOUD_TERMS, HOURS_PER_YEAR, Term
from models.yamlfile import read_yaml

PRIORITIES = ("production", "standard", "batch")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _utc(value: datetime) -> datetime:
    """Naive timestamps are read as UTC: capacity plans are written in UTC by convention."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Horizon(_Strict):
    """The planning window: ``hours`` from ``start``, in periods of ``period_hours``."""

    start: datetime
    hours: int = Field(gt=0, le=5 * HOURS_PER_YEAR, description="length of the horizon in hours")
    period_hours: int = Field(1, gt=0, description="planning granularity in hours")

    @field_validator("start")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return _utc(value)

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
#: calendar quarter or month inside it (``planner/optimize/purchases.py``).
PurchaseSchedule = Literal["horizon", "quarterly", "monthly"]


class Purchase(_Strict):
    terms: list[CloudTerm] = Field(default_factory=lambda: list(CLOUD_TERMS))
    max_spot_share: float = Field(1.0, ge=0.0, le=1.0, description="most training GPU-hours on spot")
    schedule: PurchaseSchedule = Field(
        "quarterly",
        description="when new commitments may start: horizon (day one only), quarterly or monthly "
        "(the first hour of any calendar quarter or month in the horizon)",
    )


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

    name: str | None = Field(None, min_length=1, description="a label; default held:offering/term/start date")
    offering: str = Field(min_length=1, description="offering id, cloud:region:instance_type")
    term: HeldTerm
    nodes: int = Field(gt=0)
    start: datetime = Field(description="when it began (may be before the horizon)")
    end: datetime | None = Field(None, description="capacity reservations only: when it ends")
    usd_per_node_hour: float | None = Field(None, ge=0, description="the rate paid; default the catalog's")

    @field_validator("start", "end")
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value) if value is not None else None

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


class Team(_Strict):
    name: str = Field(min_length=1)
    guaranteed_gpus: int = Field(0, ge=0, description="GPUs always provisioned (committed) for the team")
    burst_gpus: int | None = Field(
        None, ge=0, description="most GPUs the team may use at once; None = no cap"
    )
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
    base: float = Field(ge=0, description="replicas in every hour")
    monthly_growth: float = Field(0.0, gt=-1.0, description="compound growth per 730 h")


class DiurnalProfile(_Strict):
    """A daily cosine between ``base`` (trough) and ``peak`` at ``peak_hour_utc``."""

    profile: Literal["diurnal"]
    base: float = Field(ge=0)
    peak: float = Field(ge=0)
    peak_hour_utc: float = Field(12.0, ge=0, lt=24)
    weekend_factor: float = Field(1.0, ge=0, description="multiplier on Saturdays and Sundays (UTC)")
    monthly_growth: float = Field(0.0, gt=-1.0, description="compound growth per 730 h")

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
    for pattern in patterns:
        if not any(model.lower().startswith(pattern.lower()) for model in GPU_MODELS):
            raise ValueError(f"unknown GPU model {pattern!r}; known: {', '.join(GPU_MODELS)}")
    return patterns


class InferenceService(_Strict):
    """A service whose replicas must be up in every period (demand in replicas)."""

    name: str = Field(min_length=1)
    team: str
    gpus_per_replica: int | None = Field(None, gt=0, description="whole GPUs per replica")
    gpu_memory_gb: float | None = Field(None, gt=0, description="memory per replica (may fit a MIG slice)")
    gpu_compute_share: float | None = Field(
        None, gt=0, le=1, description="with gpu_memory_gb: share of a GPU's SMs a replica needs (MIG: g/7)"
    )
    gpu_models: list[str] = Field(min_length=1)
    latency_critical: bool = Field(True, description="never on spot")
    replicas: DemandSpec
    scale: float = Field(1.0, gt=0, description="multiplies the replica series (what-if demand changes)")

    _gpu_models = field_validator("gpu_models")(_check_gpu_patterns)

    @model_validator(mode="after")
    def _one_size(self) -> InferenceService:
        if (self.gpus_per_replica is None) == (self.gpu_memory_gb is None):
            raise ValueError("give exactly one of gpus_per_replica or gpu_memory_gb")
        if self.gpu_compute_share is not None and self.gpu_memory_gb is None:
            raise ValueError("gpu_compute_share goes with gpu_memory_gb (a whole-GPU replica has all SMs)")
        return self


class Checkpoint(_Strict):
    write_minutes: float = Field(ge=0, description="time to write one checkpoint")
    restart_minutes: float = Field(ge=0, description="time from an interruption until training resumes")


class TrainingJob(_Strict):
    """A gang of ``nodes`` nodes that runs ``hours`` once (or once per day/week with ``repeat``)."""

    name: str = Field(min_length=1)
    team: str
    nodes: int = Field(gt=0)
    gpus_per_node: int = Field(8, gt=0)
    gpu_models: list[str] = Field(min_length=1)
    hours: float = Field(gt=0, description="run time of an uninterrupted gang")
    earliest_start: datetime | None = None
    deadline: datetime | None = None
    fabric: Literal["required", "preferred", "none"] | None = Field(
        None, description="multi-node GPU network; default: required when nodes > 1"
    )
    preemptible: bool = False
    checkpoint: Checkpoint | None = None
    repeat: Literal["none", "daily", "weekly"] = "none"

    _gpu_models = field_validator("gpu_models")(_check_gpu_patterns)

    @field_validator("earliest_start", "deadline")
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _utc(value)

    @model_validator(mode="after")
    def _window_order(self) -> TrainingJob:
        if self.earliest_start and self.deadline and self.deadline <= self.earliest_start:
            raise ValueError("deadline must be after earliest_start")
        return self

    @property
    def needs_fabric(self) -> bool:
        return (self.fabric or ("required" if self.nodes > 1 else "none")) == "required"


class Colocation(_Strict):
    """Own GPU servers in a colocation site, bought as a tier the planner may mix with cloud capacity.

    Defaults are the documented example of ``FACTS.md`` section 5 (an 8x H100 HGX node); each says
    where it comes from. Two inputs have no figure there and are marked as assumptions.
    """

    site: str = Field("colo", min_length=1, description="a name for the site (offering id owned:SITE:...)")
    gpu_model: str = "H100"
    gpus_per_node: int = Field(8, gt=0)
    gpu_memory_gb: float | None = Field(None, gt=0, description="per GPU; default: the model's usual size")
    fabric: Literal["infiniband", "none"] = Field(
        "infiniband", description="FACTS 5: node price quoted with IB NICs for 8x400G"
    )
    fabric_gbps: float = Field(3200.0, ge=0, description="8 x 400 Gb/s NDR (FACTS 5)")
    capex_per_node_usd: float = Field(
        335_000.0, gt=0, description="all-in: FACTS 5 worked example, $310k HGX node + ~$25k network share"
    )
    power_kw_per_node: float = Field(10.2, gt=0, description="FACTS 5: DGX H100 max power 10.2 kW")
    pue: float = Field(1.5, ge=1.0, description="FACTS 5: enterprise colo PUE 1.5-1.8 (Uptime 2024)")
    power_usd_per_kwh: float = Field(0.09, ge=0, description="FACTS 5: $0.06-0.12 per kWh, midpoint")
    colo_usd_per_kw_month: float = Field(200.0, ge=0, description="FACTS 5: $150-250 per kW-month, mid")
    support_pct_per_year: float = Field(
        10.0, ge=0, description="FACTS 5: not found, ~8-15% of hardware per year assumed; 10% as worked"
    )
    depreciation_months: int = Field(36, gt=0, description="FACTS 5: 3-5 years; 36 months as v2-pseo-ai")
    residual_value_pct: float = Field(30.0, ge=0, le=100, description="FACTS 5: 25-35% after 36 months")
    cost_of_capital_pct_per_year: float = Field(
        8.0, ge=0, description="ASSUMPTION, not in FACTS 5: a typical corporate cost of capital"
    )
    lead_time_months: float = Field(
        0.0, ge=0, description="ASSUMPTION, not in FACTS 5: months from order until a node is usable"
    )
    max_nodes: int = Field(gt=0, description="most nodes that may be bought (space, power, budget)")
    existing_nodes: int = Field(
        0, ge=0, description="servers already bought and running: usable from the first hour, paid as owned"
    )

    _gpu_model = field_validator("gpu_model")(lambda value: _canonical_gpu(value))


def _canonical_gpu(value: str) -> str:
    if value not in GPU_MODELS:
        raise ValueError(f"unknown GPU model {value!r}; known: {', '.join(GPU_MODELS)}")
    return value


class Scenario(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    horizon: Horizon
    catalog: str = Field("embedded", description="'embedded' or a path to a catalog CSV")
    clouds: dict[Cloud, CloudScope] = Field(default_factory=lambda: {c: CloudScope() for c in CLOUDS})
    purchase: Purchase = Field(default_factory=Purchase)
    teams: list[Team] = Field(default_factory=list)
    inference: list[InferenceService] = Field(default_factory=list)
    training: list[TrainingJob] = Field(default_factory=list)
    colocation: Colocation | None = Field(None, description="own servers the planner may buy")
    commitments: list[ExistingCommitment] = Field(
        default_factory=list, description="commitments already held (reserved, committed use, reservations)"
    )
    adjust: list[str] = Field(
        default_factory=list, description="changes to apply first, as gpuplan whatif --vary (spot_price=+50%)"
    )

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        team_names = [t.name for t in self.teams]
        _no_duplicates(team_names, "teams")
        _no_duplicates([w.name for w in self.workloads], "workload")
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


class _FieldError(ValueError):
    """A cross-field error that knows its own path (pydantic would report it at the root)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


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
        if isinstance(ctx_error, _FieldError):
            raise InputError(file, ctx_error.where, ctx_error.problem) from None
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
