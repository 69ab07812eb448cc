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
======================  ========  ===================================================================

Every problem is an :class:`~models.errors.InputError` naming the file, the row as a spreadsheet
numbers it (the header is row 1) and the column.

OpenCost (https://opencost.io/docs/integrations/api): its ``/allocation`` API returns
``{"code": 200, "data": [{NAME: allocation, ...}, ...]}``, one map per ``step``, with
``aggregate=pod`` one allocation per pod. :func:`from_opencost` reads these fields of an allocation
(the Go ``Allocation`` type of ``opencost/core/pkg/opencost/allocation.go``): ``start``, ``end``,
``gpuHours`` (GPU-hours requested over the window; GPUs held = ``gpuHours`` / hours), and
``properties.namespace`` and ``properties.labels``. ``gpuCost`` (on-demand list price x GPU-hours,
the API's pricing) is not used: gpuplan prices from the plan. OpenCost knows neither the purchase tier
nor MIG, so these come from pod labels: ``team`` (default: the namespace), ``project`` (default: the
namespace), ``gpuplan.io/offering`` (required unless a default offering is given),
``gpuplan.io/tier`` (default ``on_demand``) and ``gpuplan.io/mig-profile``. ``__idle__`` and
``__unallocated__`` entries and allocations without GPU-hours are skipped.
"""

from __future__ import annotations

import csv
import io
import json
import math
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
from models.tiers import COMMITTED_TIERS, Tier

__all__ = [
    "OPENCOST_LABELS",
    "USAGE_COLUMNS",
    "UsageRow",
    "charge_usage",
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
#: A use longer than this (five years) is a typo in a date, not a pod.
_MAX_HOURS: Final = 5 * 8784.0
_MAX_GPUS: Final = 100_000.0


class UsageRow(BaseModel):
    """One row of a usage CSV: a pod's GPUs (or MIG slice) on one offering and tier from start to end."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    row: int = Field(description="its row in the file, as a spreadsheet numbers it")
    team: str = Field(min_length=1)
    project: str
    namespace: str = ""
    start: datetime
    end: datetime
    gpus: float | None = None
    mig_profile: str | None = None
    offering: str = Field(min_length=1)
    tier: Tier

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and 0 < value <= _MAX_GPUS):
            raise ValueError(f"must be a number > 0 and at most {_MAX_GPUS:,.0f}, got {value:g}")
        return value

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


def read_usage(path: Path) -> list[UsageRow]:
    """The usage CSV at ``path``, every cell checked; InputError naming the row and column otherwise."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: spreadsheets often write a BOM
    except FileNotFoundError:
        raise InputError(path, None, "usage file not found") from None
    except IsADirectoryError:
        raise InputError(path, None, "is a directory, expected a usage CSV file") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        records = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(path, None, f"not a readable CSV: {exc}") from None
    while records and not any(cell.strip() for cell in records[-1]):
        records.pop()
    what = "a usage CSV has the columns " + ", ".join(USAGE_COLUMNS)
    if not records:
        raise InputError(path, "row 1", f"empty file; {what}")
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
    return rows


def _row(path: Path, number: int, cells: dict[str, str]) -> UsageRow:
    for column in _REQUIRED:
        if not cells.get(column):
            raise InputError(path, f"row {number}, column {column}", "empty cell; every row needs one")
    values: dict[str, Any] = {k: v for k, v in cells.items() if v != ""}
    values.setdefault("project", cells.get("namespace") or cells["team"])
    if "gpus" in values:
        try:
            values["gpus"] = float(values["gpus"])
        except ValueError:
            raise InputError(
                path, f"row {number}, column gpus", f"{values['gpus']!r} is not a number"
            ) from None
    try:
        return UsageRow(row=number, **values)
    except ValidationError as exc:
        problem = exc.errors()[0]
        column = str(problem["loc"][0]) if problem["loc"] else ""
        message = str(problem["msg"]).removeprefix("Value error, ")
        if not column and ": " in message:  # a row-level rule names its column first
            column, message = message.split(": ", 1)
        if column == "tier":
            message = f"unknown tier {cells.get('tier')!r}; valid: {', '.join(str(t) for t in Tier)}"
        elif column in ("start", "end") and problem["type"].startswith("datetime"):
            message = f"{cells.get(column)!r} is not a time (ISO 8601: 2027-03-01T00:00:00Z)"
        raise InputError(path, f"row {number}, column {column or 'row'}", message) from None


def write_usage(rows: list[UsageRow], path: Path) -> None:
    """Rows as a usage CSV (what the OpenCost converter hands on, so it can be read and edited)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(USAGE_COLUMNS)
        for r in rows:
            stamp = [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in (r.start, r.end)]
            gpus = "" if r.gpus is None else repr(r.gpus)
            writer.writerow(
                [r.team, r.project, r.namespace, *stamp, gpus, r.mig_profile or "", r.offering, r.tier]
            )


def from_opencost(path: Path, offering: str | None = None) -> list[UsageRow]:
    """Usage rows from an OpenCost ``/allocation`` JSON export (module docstring: the fields used);
    ``offering``: for pods without the ``gpuplan.io/offering`` label."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise InputError(path, None, "OpenCost export not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, None, f"not a JSON OpenCost allocation export: {exc}") from None
    sets = data.get("data") if isinstance(data, dict) else None
    if not isinstance(sets, list):
        raise InputError(path, "data", "expected the /allocation API's {code, data: [{name: allocation}]}")
    rows: list[UsageRow] = []
    for s, allocations in enumerate(sets):
        if not isinstance(allocations, dict):
            raise InputError(path, f"data[{s}]", "expected a map of allocation name -> allocation")
        for name, item in allocations.items():
            where = f"data[{s}].{name}"
            if name in ("__idle__", "__unallocated__") or not isinstance(item, dict):
                continue
            if not float(item.get("gpuHours") or 0.0) > 0:
                continue
            rows.append(_opencost_row(path, where, len(rows) + 2, item, offering))
    if not rows:
        raise InputError(path, "data", "no allocation with gpuHours > 0")
    return rows


def _opencost_row(path: Path, where: str, number: int, item: dict[str, Any], default: str | None) -> UsageRow:
    props = item.get("properties") or {}
    labels = props.get("labels") or {}
    namespace = str(props.get("namespace") or "")
    offering = labels.get(OPENCOST_LABELS["offering"]) or default
    if not offering:
        raise InputError(
            path,
            where,
            f"no offering: label the pod {OPENCOST_LABELS['offering']} or pass --opencost-offering",
        )
    try:
        start = datetime.fromisoformat(str(item["start"]))
        end = datetime.fromisoformat(str(item["end"]))
        hours = (end - start).total_seconds() / 3600.0
        gpu_hours = float(item["gpuHours"])
    except (KeyError, ValueError, TypeError) as exc:
        raise InputError(path, where, f"needs start, end (RFC 3339) and gpuHours: {exc}") from None
    mig = labels.get(OPENCOST_LABELS["mig_profile"])
    values: dict[str, Any] = {
        "row": number,
        "team": labels.get(OPENCOST_LABELS["team"]) or namespace,
        "project": labels.get(OPENCOST_LABELS["project"]) or namespace,
        "namespace": namespace,
        "start": start,
        "end": end,
        "offering": offering,
        "tier": labels.get(OPENCOST_LABELS["tier"]) or Tier.ON_DEMAND,
    }
    if mig:
        values["mig_profile"] = mig
    else:
        values["gpus"] = gpu_hours / hours if hours > 0 else 0.0
    try:
        return UsageRow(**values)
    except ValidationError as exc:
        problem = exc.errors()[0]
        field = ".".join(str(part) for part in problem["loc"])
        raise InputError(path, f"{where}{'.' + field if field else ''}", str(problem["msg"])) from None


# ---- charging usage ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    """A usage row inside one calendar month."""

    row: UsageRow
    month: str
    hours: float


def _pieces(row: UsageRow, month: str | None) -> list[_Piece]:
    """``row`` cut at month boundaries (UTC); only ``month``'s piece when one is asked for."""
    pieces = []
    at = row.start
    while at < row.end:
        label = month_of(at)
        _first, after = month_span(label)
        until = min(after, row.end)
        if month is None or label == month:
            pieces.append(_Piece(row, label, (until - at).total_seconds() / 3600.0))
        at = until
    return pieces


def charge_usage(
    book: Book, rows: list[UsageRow], rule: IdleRule, path: Path, month: str | None = None
) -> Chargeback:
    """Charge actual usage at the plan's rates: on-demand and spot GPU-hours at their prices, and every
    commitment of the plan paid in full for each month the usage covers, split over the hours used of
    it by :func:`models.chargeback.amortize`. Reconciles with the bill those rates make: the
    commitments' cost in the months plus the pay-as-you-go usage."""
    committed_tiers = {str(t) for t in COMMITTED_TIERS}
    records = []
    by_tier: dict[tuple[str, str], list[Any]] = {}
    for c in book.commitments:
        by_tier.setdefault((c.offering, str(c.term.tier)), []).append(c)
    for r in rows:
        rates = book.offerings.get(r.offering)
        if rates is None:
            known = ", ".join(sorted(book.offerings)) or "none"
            raise InputError(
                path,
                f"row {r.row}, column offering",
                f"{r.offering!r} is not an offering of the plan ({known})",
            )
        fraction = 1.0
        if r.mig_profile is not None:
            try:
                fraction = mig_gpu_fraction(rates.gpu_model, r.mig_profile)
            except ValueError as exc:
                raise InputError(path, f"row {r.row}, column mig_profile", str(exc)) from None
        gpus = r.gpus if r.gpus is not None else fraction
        if r.gpus is not None and r.gpus > rates.gpus_per_node * 10_000:
            raise InputError(path, f"row {r.row}, column gpus", "more GPUs than any fleet holds")
        tier = str(r.tier)
        if tier in committed_tiers and (r.offering, tier) not in by_tier:
            raise InputError(
                path,
                f"row {r.row}, column tier",
                f"the plan holds no {tier} commitment on {r.offering}; use on_demand or spot",
            )
        if tier == Tier.SPOT and rates.spot_usd_h is None:
            raise InputError(path, f"row {r.row}, column tier", f"{r.offering} has no spot price in the plan")
        for piece in _pieces(r, month):
            gpu_hours = gpus * piece.hours
            commitment = ""
            if tier in committed_tiers:
                found = _commitment_for(book, by_tier[(r.offering, tier)], piece.month)
                if found is None:
                    raise InputError(
                        path,
                        f"row {r.row}, column tier",
                        f"no {tier} commitment of the plan on {r.offering} serves in {piece.month}",
                    )
                commitment = found
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
    months = sorted(set(use["month"])) if month is None else [month]
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


def _commitment_for(book: Book, commitments: list[Any], month: str) -> str | None:
    """The commitment a committed usage row uses in ``month``: the first of its offering and tier that
    serves then; None if none does."""
    first, after = month_span(month)
    for c in commitments:
        start, end = _calendar_span(book, c)
        if start < after and end > first:
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
