"""Actual GPU usage, pod by pod: the usage CSV that ``gpuplan chargeback --usage`` charges, and a
converter from an OpenCost allocation export.

The usage CSV (UTF-8, header row first; columns in any order):

======================  ========  ===================================================================
column                  required  meaning
======================  ========  ===================================================================
``team``                yes       the team that pays (plan.json ``teams``)
``project``             no        below the team; default: ``namespace``, else the team
``namespace``           no        the Kubernetes namespace (echoed, not charged by)
``start``, ``end``      yes       ISO 8601 times (``2027-03-01T00:00:00Z``; a time without an offset is
                                  UTC), ``end`` after ``start``
``gpus``                one of    whole or fractional GPUs held from start to end (> 0)
``mig_profile``         one of    a MIG profile of the offering's GPU (``1g.10gb``): that slice, charged
                                  as its compute slices / 7 of a GPU
``offering``            yes       ``cloud:region:instance_type``, an offering of the plan
``tier``                yes       ``on_demand``, ``spot``, or a committed tier the plan holds on that
                                  offering (``reserved_1y``, ``reserved_3y``, ``owned``,
                                  ``capacity_reservation``)
``job``                 no        the training job (gang) the pod belongs to: ``gpuplan demand`` reads
                                  the rows of one namespace and job as one training run; chargeback
                                  ignores it
``node``                no        the node the pod ran on (a run's nodes; without it, each row is a
                                  pod on a node of its own); chargeback ignores it
======================  ========  ===================================================================

Every problem is an :class:`~models.errors.InputError` naming the file, the row as a spreadsheet
numbers it (the header is row 1) and the column. Rows are read against the plan (:func:`check_usage`):
its teams, offerings and held tiers, its horizon (unless ``allow_outside_horizon``); numbers through
:mod:`models.numbers`; files bounded by :class:`UsageLimits`. :func:`read_usage` and
:func:`from_opencost` each read one file against one plan and raise InputError or return rows that
:func:`charge_usage` prices without fail: what a fuzzer drives.

OpenCost (https://opencost.io/docs/integrations/api): its ``/allocation`` API returns
``{"code": 200, "data": [{NAME: allocation, ...}, ...]}``, one map per ``step``, with
``aggregate=pod`` one allocation per pod. :func:`from_opencost` reads these fields of an allocation
(the Go ``Allocation`` type of ``opencost/core/pkg/opencost/allocation.go``): ``start``, ``end``,
``gpuHours`` (GPU-hours requested over the window; GPUs held = ``gpuHours`` / hours), and
``properties.namespace`` and ``properties.labels``. ``gpuCost`` (on-demand list price x GPU-hours,
the API's pricing) is not used: gpuplan prices from the plan. OpenCost knows neither the purchase tier
nor MIG, so these come from pod labels: ``team`` (default: the namespace), ``project`` (default: the
namespace), ``gpuplan.io/offering`` (required unless a default offering is given),
``gpuplan.io/tier`` (default ``on_demand``) and ``gpuplan.io/mig-profile``. ``__idle__``,
``__unallocated__`` and ``__unmounted__`` entries and allocations with ``gpuHours: 0`` are skipped;
anything else unreadable (``code`` other than 200, ``gpuHours`` NaN or not a number, an allocation or
label of the wrong type) is refused, never skipped: a pod must not vanish from the bill.

Given ``job_labels`` (``gpuplan demand`` passes its gang labels; chargeback none, so what it charges
is unchanged), :func:`from_opencost` also reads each pod's job (the first of those labels it carries),
``properties.node`` and ``properties.pod`` (else the allocation's name): what groups pods into runs.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from models.chargeback import (
    Book,
    Chargeback,
    CommitmentWindow,
    IdleRule,
    charge,
    mig_gpu_fraction,
    month_of,
    month_span,
)
from models.csvheader import checked_header
from models.errors import InputError
from models.inputfile import decode_utf8, read_input_bytes, size_text
from models.numbers import Range, number_text, parse_number
from models.tiers import COMMITTED_TIERS, Tier

__all__ = [
    "OPENCOST_LABELS",
    "OPENCOST_LIMITS",
    "USAGE_COLUMNS",
    "USAGE_LIMITS",
    "UsageLimits",
    "UsageRow",
    "charge_usage",
    "check_usage",
    "from_opencost",
    "read_usage",
    "write_usage",
]

USAGE_COLUMNS: Final = (
    "team",
    "project",
    "namespace",
    "start",
    "end",
    "gpus",
    "mig_profile",
    "offering",
    "tier",
    "job",
    "node",
)
_REQUIRED: Final = ("team", "start", "end", "offering", "tier")
#: Pod labels the OpenCost converter reads (OpenCost's allocation has no tier, offering or MIG slice).
OPENCOST_LABELS: Final = {
    "team": "team",
    "project": "project",
    "offering": "gpuplan.io/offering",
    "tier": "gpuplan.io/tier",
    "mig_profile": "gpuplan.io/mig-profile",
}
#: Where each usage column comes from in an OpenCost allocation (what an error about it names).
_OPENCOST_FIELDS: Final = {
    "team": "properties.labels.team (else properties.namespace)",
    "project": "properties.labels.project",
    "namespace": "properties.namespace",
    "start": "start",
    "end": "end",
    "gpus": "gpuHours / hours (GPUs)",
    "mig_profile": "properties.labels.gpuplan.io/mig-profile",
    "offering": "properties.labels.gpuplan.io/offering (or --opencost-offering)",
    "tier": "properties.labels.gpuplan.io/tier",
    "job": "properties.labels (the job label)",
    "node": "properties.node",
    "pod": "properties.pod",
}
#: OpenCost's own entries that are not pods (idle, unallocated and unmounted cost; also "cluster/__idle__").
_OPENCOST_NOT_PODS: Final = frozenset({"__idle__", "__unallocated__", "__unmounted__"})
#: A use longer than this (five years) is a typo in a date, not a pod.
_MAX_HOURS: Final = 5 * 8784.0
_MAX_GPUS: Final = 100_000.0
#: Names (team, project, namespace, offering, profile): a Kubernetes name is at most 253 characters.
_MAX_NAME: Final = 253
#: Times outside these years are a typo or an attack, even with ``--allow-outside-horizon``.
_YEARS: Final = (2000, 2099)
_ISO_CHARS: Final = re.compile(r"[0-9T:.,+\-Z ]+", re.ASCII)
_GPU_HOURS: Final = Range(ge=0, unit="GPU-hours")
_GPUS: Final = Range(gt=0, le=_MAX_GPUS, unit="GPUs")


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """How big a usage file may be: bytes on disk and rows (usage CSV) or allocations (OpenCost). A file
    beyond them is refused before it is parsed, so a runaway export cannot exhaust memory or time."""

    max_bytes: int
    max_rows: int


#: 64 MiB and 200,000 rows: a month of a few thousand pods a day, charged in seconds.
USAGE_LIMITS: Final = UsageLimits(max_bytes=64 * 2**20, max_rows=200_000)
#: OpenCost allocations carry every resource (~2 KB each): 256 MiB, 200,000 allocations.
OPENCOST_LIMITS: Final = UsageLimits(max_bytes=256 * 2**20, max_rows=200_000)


class UsageRow(BaseModel):
    """One row of a usage CSV (or one OpenCost pod): a pod's GPUs (or MIG slice) on one offering and
    tier from start to end. ``ref`` is empty for a CSV row, the allocation's path for OpenCost.

    Built from values the readers have already parsed (``gpus`` by :func:`models.numbers.parse_number`
    or from a checked ``gpuHours``), so not a :class:`~models.numbers.StrictModel`, whose per-field
    check would triple the time of a 200,000-row file; ``gpus`` is checked against the same range here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    row: int = Field(ge=1, description="its row in the file, as a spreadsheet numbers it")
    ref: str = Field("", description="OpenCost: data[step].name of the allocation")
    team: str = Field(min_length=1, max_length=_MAX_NAME)
    project: str = Field(min_length=1, max_length=_MAX_NAME)
    namespace: str = Field("", max_length=_MAX_NAME)
    start: datetime
    end: datetime
    gpus: float | None = Field(None, description="GPUs held, a number in _GPUS")
    mig_profile: str | None = Field(None, min_length=1, max_length=_MAX_NAME)
    offering: str = Field(min_length=1, max_length=_MAX_NAME)
    tier: Tier
    job: str = Field("", max_length=_MAX_NAME, description="its training job (gang); '' for none")
    node: str = Field("", max_length=_MAX_NAME, description="the node it ran on; '' when not known")
    pod: str = Field("", max_length=1024, description="OpenCost: the pod's name; '' for a CSV row")

    @field_validator("team", "project", "namespace", "mig_profile", "offering", "job", "node", "pod")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        """Names end up in CSV, JSON and HTML: control and direction characters are refused."""
        if value is not None and not value.isprintable():
            raise ValueError(f"{value!r} holds a control, formatting or separator character")
        return value

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus(cls, value: Any) -> Any:
        """Not a boolean, finite, inside :data:`_GPUS` (a number from a reader; text is a reader's job)."""
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a number, got {value!r}")
        problem = "must be a finite number" if not math.isfinite(value) else _GPUS.problem(value)
        if problem:
            raise ValueError(problem)
        return float(value)

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    @model_validator(mode="after")
    def _shape(self) -> UsageRow:
        if self.end <= self.start:
            raise ValueError("end: must be after start")
        if self.hours > _MAX_HOURS:
            raise ValueError(f"end: {self.hours:,.0f} hours after start; at most five years")
        if (self.gpus is None) == (self.mig_profile is None):
            raise ValueError("gpus: give exactly one of gpus or mig_profile")
        return self

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600.0

    def where(self, column: str) -> str:
        """Where ``column`` of this row is in its file: ``row 7, column tier`` or, for OpenCost,
        ``data[0].chat-0, properties.labels.gpuplan.io/tier``."""
        if self.ref:
            return f"{self.ref}, {_OPENCOST_FIELDS.get(column, column)}"
        return f"row {self.row}, column {column}"


def _read_text(path: Path, limits: UsageLimits, what: str, hint: str) -> str:
    """The file as text, refused before reading when larger than ``limits.max_bytes``."""
    data = read_input_bytes(
        path,
        limits.max_bytes,
        missing=f"{what} not found",
        directory=f"is a directory, expected {what}",
        too_large=lambda size: (
            f"{size_text(size)}; {what} may be at most {size_text(limits.max_bytes)} ({hint})"
        ),
    )
    return decode_utf8(path, data)


def _time(text: str) -> datetime:
    """An ISO 8601 / RFC 3339 time in ASCII digits (no offset: UTC), in UTC; ValueError saying why not."""
    if not _ISO_CHARS.fullmatch(text):
        raise ValueError(f"{text!r} is not a time (ISO 8601 in plain digits: 2027-03-01T00:00:00Z)")
    try:
        value = datetime.fromisoformat(text)
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"{text!r} is not a time (ISO 8601: 2027-03-01T00:00:00Z)") from None
    if not _YEARS[0] <= value.year <= _YEARS[1]:
        raise ValueError(f"{text!r} is not a plausible time (years {_YEARS[0]} to {_YEARS[1]})")
    return value


def read_usage(
    path: Path, book: Book | None, *, allow_outside_horizon: bool = False, limits: UsageLimits = USAGE_LIMITS
) -> list[UsageRow]:
    """The usage CSV at ``path``, every cell checked, and every row against the plan ``book``
    (:func:`check_usage`; None: no plan, as ``gpuplan demand --usage`` reads a fleet's history); the
    first problem is an InputError naming the row and column."""
    _refuse_savings_plans(book, path)
    text = _read_text(path, limits, "a usage CSV", "split it by month")
    try:
        records = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(path, None, f"not a readable CSV: {exc}") from None
    while records and not any(cell.strip() for cell in records[-1]):
        records.pop()
    what = "a usage CSV has the columns " + ", ".join(USAGE_COLUMNS)
    if not records:
        raise InputError(path, "row 1", f"empty file; {what}")
    if len(records) - 1 > limits.max_rows:
        raise InputError(
            path,
            f"row {limits.max_rows + 2}",
            f"more than {limits.max_rows:,} rows; a usage CSV may have at most {limits.max_rows:,} "
            "(split it by month)",
        )
    header = checked_header(path, records[0], USAGE_COLUMNS, _REQUIRED, what)
    if "gpus" not in header and "mig_profile" not in header:
        raise InputError(path, "row 1", "needs a gpus or a mig_profile column (or both)")
    rows = []
    for index, record in enumerate(records[1:]):
        number = index + 2
        if not any(cell.strip() for cell in record):
            continue
        if len(record) > len(header) and any(cell.strip() for cell in record[len(header) :]):
            raise InputError(path, f"row {number}", f"{len(record)} cells but the header has {len(header)}")
        cells = dict(zip(header, (c.strip() for c in [*record, *[""] * len(header)]), strict=False))
        rows.append(_row(path, number, cells))
    if not rows:
        raise InputError(path, "row 2", "the usage file has no rows")
    if book is not None:
        check_usage(book, rows, path, allow_outside_horizon=allow_outside_horizon)
    return rows


def _row(path: Path, number: int, cells: dict[str, str]) -> UsageRow:
    def where(column: str) -> str:
        return f"row {number}, column {column}"

    for column in _REQUIRED:
        if not cells.get(column):
            raise InputError(path, where(column), "empty cell; every row needs one")
    values: dict[str, Any] = {k: v for k, v in cells.items() if v != ""}
    values.setdefault("project", cells.get("namespace") or cells["team"])
    if "gpus" in values:
        try:
            values["gpus"] = parse_number(values["gpus"], _GPUS)
        except ValueError as exc:
            raise InputError(path, where("gpus"), str(exc)) from None
    for column in ("start", "end"):
        try:
            values[column] = _time(values[column])
        except ValueError as exc:
            raise InputError(path, where(column), str(exc)) from None
    return _usage_row(path, where, {"row": number, **values}, cells.get("tier"))


def _usage_row(path: Path, where: Callable[[str], str], values: dict[str, Any], tier: Any) -> UsageRow:
    """``UsageRow(**values)``, its first problem an InputError at ``where(column)``."""
    try:
        return UsageRow(**values)
    except ValidationError as exc:
        problem = exc.errors()[0]
        column = str(problem["loc"][0]) if problem["loc"] else ""
        message = str(problem["msg"]).removeprefix("Value error, ")
        if not column and ": " in message:  # a row-level rule names its column first
            column, message = message.split(": ", 1)
        if column == "tier":
            message = f"unknown tier {tier!r}; valid: {', '.join(str(t) for t in Tier)}"
        raise InputError(path, where(column or "row"), message) from None


def _refuse_savings_plans(book: Book | None, path: Path) -> None:
    """Usage is not charged against a plan holding savings plans (issue 38): which of the usage a savings
    plan covered is the cloud's hour-by-hour rule over every on-demand node of the account, which a usage
    file of some pods does not tell; charging their commitment by the plan's forecast instead would not
    reconcile with the bill. The plan's own forecast (no --usage) splits them."""
    if book is not None and book.savings_plans:
        names = ", ".join(sp.name for sp in book.savings_plans)
        raise InputError(
            path,
            None,
            f"the plan holds savings plans ({names}); usage is not charged against them yet (which usage a "
            "savings plan covered is the cloud's hourly rule over all on-demand nodes): charge the plan's "
            "forecast, without --usage or --opencost",
        )


def check_usage(book: Book, rows: list[UsageRow], path: Path, *, allow_outside_horizon: bool = False) -> None:
    """Every row against the plan: its team, offering and tier the plan's (a committed tier only where
    a commitment of the plan on that offering serves for all of the row's time), its MIG profile the
    offering's GPU's, its GPUs what a fleet can hold, its times inside the plan's horizon unless
    ``allow_outside_horizon``. The first problem is an InputError naming the row and column."""
    _refuse_savings_plans(book, path)
    horizon_end = book.end
    known_teams = set(book.teams)
    committed = {str(t) for t in COMMITTED_TIERS}
    held: dict[tuple[str, str], list[Any]] = {}
    for c in book.commitments:
        held.setdefault((c.offering, str(c.term.tier)), []).append(c)
    for r in rows:
        if r.team not in known_teams:
            raise InputError(
                path, r.where("team"), f"{r.team!r} is not a team of the plan ({_names(book.teams)})"
            )
        rates = book.offerings.get(r.offering)
        if rates is None:
            raise InputError(
                path,
                r.where("offering"),
                f"{r.offering!r} is not an offering of the plan ({_names(book.offerings)})",
            )
        if r.mig_profile is not None:
            try:
                mig_gpu_fraction(rates.gpu_model, r.mig_profile)
            except ValueError as exc:
                raise InputError(path, r.where("mig_profile"), str(exc)) from None
        if r.gpus is not None and r.gpus > rates.gpus_per_node * 10_000:
            raise InputError(
                path,
                r.where("gpus"),
                f"{number_text(r.gpus)} GPUs: more than any fleet of {r.offering} holds",
            )
        tier = str(r.tier)
        if tier in committed and (r.offering, tier) not in held:
            raise InputError(
                path,
                r.where("tier"),
                f"the plan holds no {tier} commitment on {r.offering}; use on_demand or spot",
            )
        if r.tier == Tier.SPOT and rates.spot_usd_h is None:
            raise InputError(path, r.where("tier"), f"{r.offering} has no spot price in the plan")
        if r.tier == Tier.ON_DEMAND and rates.on_demand_usd_h is None:
            raise InputError(path, r.where("tier"), f"{r.offering} has no on-demand price in the plan")
        if not allow_outside_horizon:
            if r.start < book.start:
                raise InputError(path, r.where("start"), _outside(r.start, "before", book.start))
            if r.end > horizon_end:
                raise InputError(path, r.where("end"), _outside(r.end, "after", horizon_end))
        if tier in committed:
            for piece in _pieces(r, None):
                if _commitment_for(book, held[(r.offering, tier)], piece) is None:
                    raise InputError(
                        path,
                        r.where("tier"),
                        f"no {tier} commitment of the plan on {r.offering} serves from "
                        f"{_stamp(piece.start)} to {_stamp(piece.end)}; charge that time as on_demand",
                    )


def _names(names: Any) -> str:
    """Known names for a message, at most ten of them."""
    listed = sorted(str(n) for n in names)
    more = f", and {len(listed) - 10} more" if len(listed) > 10 else ""
    return (", ".join(listed[:10]) or "none") + more


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _outside(when: datetime, side: str, bound: datetime) -> str:
    return (
        f"{_stamp(when)} is {side} the plan's horizon ({'starts' if side == 'before' else 'ends'} "
        f"{_stamp(bound)}); pass --allow-outside-horizon to charge it at the plan's rates"
    )


def write_usage(rows: list[UsageRow], path: Path) -> None:
    """Rows as a usage CSV (what the OpenCost converter hands on, so it can be read and edited)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(USAGE_COLUMNS)
        for r in rows:
            stamp = [_stamp(t) for t in (r.start, r.end)]
            gpus = "" if r.gpus is None else repr(r.gpus)
            writer.writerow(
                [r.team, r.project, r.namespace, *stamp, gpus, r.mig_profile or "", r.offering, r.tier,
                 r.job, r.node]
            )  # fmt: skip


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number OpenCost writes (a finite number is expected)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        twice = next(k for i, k in enumerate(keys) if k in keys[:i])
        raise ValueError(f"key {twice!r} appears twice in one object")
    return dict(pairs)


def from_opencost(
    path: Path,
    book: Book | None,
    offering: str | None = None,
    *,
    allow_outside_horizon: bool = False,
    limits: UsageLimits = OPENCOST_LIMITS,
    job_labels: Sequence[str] = (),
) -> list[UsageRow]:
    """Usage rows from an OpenCost ``/allocation`` JSON export (module docstring: the fields used),
    each checked against the plan ``book`` (:func:`check_usage`); ``offering``: for pods without the
    ``gpuplan.io/offering`` label. The first problem is an InputError naming the allocation and field.
    ``book`` None: no plan to check against (``gpuplan demand --opencost`` reads a fleet's history).
    ``job_labels``: also read each pod's job, node and pod name (module docstring)."""
    _refuse_savings_plans(book, path)
    text = _read_text(path, limits, "an OpenCost export", "export a shorter window")
    try:
        data = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise InputError(path, None, "not an OpenCost allocation export: nested too deep") from None
    except ValueError as exc:  # JSONDecodeError, and the hooks' refusals
        raise InputError(path, None, f"not a JSON OpenCost allocation export: {exc}") from None
    shape = "expected the /allocation API's answer {code: 200, data: [{name: allocation}]}"
    if not isinstance(data, dict):
        raise InputError(path, None, f"{shape}, got {_kind(data)}")
    code = data.get("code")
    if isinstance(code, bool) or not isinstance(code, int):
        raise InputError(path, "code", f"{shape}; code is {_kind(code) if code is not None else 'missing'}")
    if code != 200:
        message = data.get("message")
        said = f" ({str(message)[:200]!r})" if isinstance(message, str) and message else ""
        raise InputError(
            path, "code", f"the API answered code {code}{said}, not 200: export a successful answer"
        )
    sets = data.get("data")
    if not isinstance(sets, list):
        raise InputError(path, "data", f"{shape}, got {_kind(sets) if sets is not None else 'no data'}")
    count = sum(len(s) for s in sets if isinstance(s, dict))
    if count > limits.max_rows:
        raise InputError(
            path,
            "data",
            f"{count:,} allocations; an export may have at most {limits.max_rows:,} "
            "(export a shorter window)",
        )
    rows: list[UsageRow] = []
    for s, allocations in enumerate(sets):
        if not isinstance(allocations, dict):
            raise InputError(
                path,
                f"data[{s}]",
                f"expected a map of allocation name -> allocation, got {_kind(allocations)}",
            )
        for name, item in allocations.items():
            where = f"data[{s}].{name}"
            if name.rsplit("/", 1)[-1] in _OPENCOST_NOT_PODS:
                continue
            if not isinstance(item, dict):
                raise InputError(path, where, f"expected an allocation object, got {_kind(item)}")
            gpu_hours = _gpu_hours(path, where, item)
            if gpu_hours == 0:
                continue  # a pod without GPUs
            row = _opencost_row(path, where, len(rows) + 2, item, gpu_hours, offering)
            if job_labels:
                row = _with_job(path, where, name, item, row, job_labels)
            rows.append(row)
    if not rows:
        raise InputError(path, "data", "no allocation with gpuHours > 0")
    if book is not None:
        check_usage(book, rows, path, allow_outside_horizon=allow_outside_horizon)
    return rows


def _kind(value: Any) -> str:
    """What a JSON value is, for a message: ``a list``, ``the string '200'``, ``true``."""
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, int | float):
        return f"the number {number_text(value)}"
    if isinstance(value, dict):
        return "an object"
    return "a list" if isinstance(value, list) else type(value).__name__


def _gpu_hours(path: Path, where: str, item: dict[str, Any]) -> float:
    """``gpuHours``: a finite JSON number >= 0 (a boolean, a string, null or NaN is refused, never
    skipped: a pod whose GPU-hours cannot be read must not vanish from the bill)."""
    if "gpuHours" not in item:
        raise InputError(path, f"{where}.gpuHours", "missing; every allocation has gpuHours (0 without GPUs)")
    value = item["gpuHours"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(path, f"{where}.gpuHours", f"must be a number, got {_kind(value)}")
    number = float(value)
    problem = "must be a finite number" if not math.isfinite(number) else _GPU_HOURS.problem(number)
    if problem:
        raise InputError(path, f"{where}.gpuHours", problem)
    return number


def _text_field(path: Path, where: str, holder: dict[str, Any], key: str) -> str | None:
    """A string field (a label, the namespace, a time) or None when absent; a non-string is refused."""
    value = holder.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(path, where, f"must be a string, got {_kind(value)}")
    return value


def _opencost_row(
    path: Path, where: str, number: int, item: dict[str, Any], gpu_hours: float, default: str | None
) -> UsageRow:
    props = item.get("properties", {})
    if not isinstance(props, dict):
        raise InputError(path, f"{where}.properties", f"expected an object, got {_kind(props)}")
    labels = props.get("labels", {})
    if not isinstance(labels, dict):
        raise InputError(path, f"{where}.properties.labels", f"expected an object, got {_kind(labels)}")
    namespace = _text_field(path, f"{where}.properties.namespace", props, "namespace") or ""
    read = {
        key: _text_field(path, f"{where}.properties.labels.{label}", labels, label)
        for key, label in OPENCOST_LABELS.items()
    }
    for key, label in OPENCOST_LABELS.items():
        if label.startswith("gpuplan.io/") and read[key] == "":
            raise InputError(
                path, f"{where}.properties.labels.{label}", "empty label; remove it or give a value"
            )
    offering = read["offering"] or default
    if not offering:
        raise InputError(
            path,
            where,
            f"no offering: label the pod {OPENCOST_LABELS['offering']} or pass --opencost-offering",
        )
    times = {}
    for key in ("start", "end"):
        text = _text_field(path, f"{where}.{key}", item, key)
        if text is None:
            raise InputError(path, f"{where}.{key}", "missing; an allocation has start and end (RFC 3339)")
        try:
            times[key] = _time(text)
        except ValueError as exc:
            raise InputError(path, f"{where}.{key}", str(exc)) from None
    team = read["team"] or namespace
    if not team:
        raise InputError(path, where, "no team: label the pod team or give its namespace")
    values: dict[str, Any] = {
        "row": number,
        "ref": where,
        "team": team,
        "project": read["project"] or namespace or team,
        "namespace": namespace,
        **times,
        "offering": offering,
        "tier": read["tier"] or Tier.ON_DEMAND,
    }
    hours = (times["end"] - times["start"]).total_seconds() / 3600.0
    if hours <= 0:
        raise InputError(path, f"{where}.end", "must be after start")
    if read["mig_profile"]:
        values["mig_profile"] = read["mig_profile"]
    else:
        values["gpus"] = gpu_hours / hours

    def field(column: str) -> str:
        return f"{where}, {_OPENCOST_FIELDS.get(column, column)}"

    return _usage_row(path, field, values, read["tier"])


def _with_job(
    path: Path, where: str, name: str, item: dict[str, Any], row: UsageRow, job_labels: Sequence[str]
) -> UsageRow:
    """``row`` with its pod's job (the first of ``job_labels`` it carries), node and pod name; a value
    of the wrong type is refused, naming the field (what _opencost_row checked is not checked again)."""
    props = item.get("properties", {})
    labels = props.get("labels", {})
    job = ""
    for label in job_labels:
        job = _text_field(path, f"{where}.properties.labels.{label}", labels, label) or ""
        if job:
            break
    node = _text_field(path, f"{where}.properties.node", props, "node") or ""
    pod = _text_field(path, f"{where}.properties.pod", props, "pod") or name

    def field(column: str) -> str:
        return f"{where}, {_OPENCOST_FIELDS.get(column, column)}"

    values = {**row.model_dump(), "job": job, "node": node, "pod": pod}
    return _usage_row(path, field, values, row.tier)


# ---- charging usage ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    """A usage row inside one calendar month: [start, end) of it."""

    row: UsageRow
    month: str
    start: datetime
    end: datetime

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600.0


def _pieces(row: UsageRow, month: str | None) -> list[_Piece]:
    """``row`` cut at month boundaries (UTC); only ``month``'s piece when one is asked for."""
    pieces = []
    at = row.start
    while at < row.end:
        label = month_of(at)
        _first, after = month_span(label)
        until = min(after, row.end)
        if month is None or label == month:
            pieces.append(_Piece(row, label, at, until))
        at = until
    return pieces


def _months_covered(rows: list[UsageRow]) -> list[str]:
    """Every calendar month from the first row's to the last row's, those nobody used between them too:
    the commitments are paid in each of them, so the bill of the usage's time holds them all."""
    first = month_of(min(r.start for r in rows))
    last_instant = max(r.end for r in rows)
    months = []
    label = first
    while True:
        months.append(label)
        _start, after = month_span(label)
        if after >= last_instant:
            return months
        label = month_of(after)


def charge_usage(
    book: Book, rows: list[UsageRow], rule: IdleRule, path: Path, month: str | None = None
) -> Chargeback:
    """Charge actual usage at the plan's rates: on-demand and spot GPU-hours at their prices, and every
    commitment of the plan paid in full for each month the usage covers (from its first month to its
    last, months nobody used included; with ``month``, that month), split over the hours used of it by
    :func:`models.chargeback.amortize`. Reconciles with the bill those rates make: the commitments'
    cost in the months plus the pay-as-you-go usage.

    ``rows`` come from :func:`read_usage` or :func:`from_opencost` against the same ``book``; they are
    checked again here (times aside: the horizon rule is the reader's), so no row can fail to price."""
    check_usage(book, rows, path, allow_outside_horizon=True)
    committed_tiers = {str(t) for t in COMMITTED_TIERS}
    records = []
    by_tier: dict[tuple[str, str], list[Any]] = {}
    for c in book.commitments:
        by_tier.setdefault((c.offering, str(c.term.tier)), []).append(c)
    for r in rows:
        rates = book.offerings[r.offering]
        fraction = 1.0 if r.mig_profile is None else mig_gpu_fraction(rates.gpu_model, r.mig_profile)
        gpus = r.gpus if r.gpus is not None else fraction
        tier = str(r.tier)
        for piece in _pieces(r, month):
            gpu_hours = gpus * piece.hours
            commitment = ""
            if tier in committed_tiers:
                commitment = _commitment_for(book, by_tier[(r.offering, tier)], piece) or ""
            records.append(
                {
                    "month": piece.month,
                    "team": r.team,
                    "project": r.project,
                    "tier": tier,
                    "offering": r.offering,
                    "commitment": commitment,
                    "gpu_hours": gpu_hours,
                    "work_gpu_hours": gpu_hours,
                    "node_hours": gpu_hours / rates.gpus_per_node,
                    "cost_usd": 0.0 if commitment else gpu_hours * rates.usd_per_gpu_hour(r.tier),
                }
            )
    use = pd.DataFrame(records, columns=list(_USE_COLUMNS))
    months = _months_covered(rows) if month is None else [month]
    windows = _usage_windows(book, months)
    expected = float(use["cost_usd"].sum()) + sum(w.cost_usd for w in windows)
    result = charge(book, use, windows, rule, expected, "usage")
    over = result.windows[result.windows["used_node_hours"] > result.windows["node_hours"] + 1e-6]
    for w in over.itertuples():
        result.notes.append(
            f"{w.commitment} in {w.month}: usage lists {w.used_node_hours:,.1f} node-hours on it, more than "
            f"its {w.node_hours:,.1f}; the excess ran on demand in the bill (the tier column is wrong there)"
        )
    return result


_USE_COLUMNS: Final = (
    "month", "team", "project", "tier", "offering", "commitment", "gpu_hours", "work_gpu_hours",
    "node_hours", "cost_usd",
)  # fmt: skip


def _commitment_for(book: Book, commitments: list[Any], piece: _Piece) -> str | None:
    """The commitment a committed usage row uses in ``piece``: the first of its offering and tier whose
    term covers all of the piece's time; None if none does."""
    for c in commitments:
        start, end = _calendar_span(book, c)
        if start <= piece.start and end >= piece.end:
            return str(c.name)
    return None


def _calendar_span(book: Book, commitment: Any) -> tuple[datetime, datetime]:
    """[start, end) of a commitment in time: its own start and end, else its periods in the horizon."""
    start, end = book.commitment_span(commitment)
    return (commitment.start or start), (commitment.end or end)


def _usage_windows(book: Book, months: list[str]) -> list[CommitmentWindow]:
    """Every commitment of the plan in each month: its hours then at its rate (paid whether used or not)."""
    windows = []
    for c in book.commitments:
        start, end = _calendar_span(book, c)
        for label in months:
            first, after = month_span(label)
            hours = (min(end, after) - max(start, first)).total_seconds() / 3600.0
            if hours <= 0:
                continue
            windows.append(
                CommitmentWindow(
                    commitment=str(c.name),
                    offering=c.offering,
                    tier=c.term.tier,
                    month=label,
                    cost_usd=c.nodes * c.usd_per_node_hour * hours,
                    node_hours=c.nodes * hours,
                )
            )
    return windows
