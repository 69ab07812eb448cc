"""Workloads turned into numbers the planner can use: demand per period, training runs with windows.

The scenario (``models.scenario``) says *what* the user asked for; this module says *how much, when*:
- an inference service's demand series, in whole replicas per planning period (the peak hour of the
  period, so a plan that covers a period covers every hour in it);
- a training job's runs (one, or one per day/week with ``repeat``), each with its window in periods.

A ``{csv: FILE}`` series is read strictly, like a catalog: every cell a finite number in range, times
increasing, and each problem an :class:`~models.errors.InputError` naming the file, row and column.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from models.csvheader import checked_header
from models.errors import InputError
from models.inputfile import decode_utf8, read_input_bytes
from models.numbers import Range, parse_number
from models.scenario import (
    MAX_HORIZON_HOURS,
    MAX_REPLICAS,
    CsvSeries,
    DiurnalProfile,
    FlatProfile,
    Horizon,
    InferenceService,
    Scenario,
    TrainingJob,
)
from models.tiers import HOURS_PER_MONTH

_REPEAT_HOURS = {"daily": 24, "weekly": 168}
# Replica counts are rounded up, but float noise (20.000000001) must not add a replica.
_ROUNDING_SLACK = 1e-6


def hourly_demand(
    spec: FlatProfile | DiurnalProfile | CsvSeries,
    horizon: Horizon,
    base_dir: Path | None = None,
    where: str = "replicas",
) -> np.ndarray:
    """Replicas wanted in each hour of the horizon (float; not yet rounded)."""
    hours = np.arange(horizon.hours, dtype=float)
    if isinstance(spec, CsvSeries):
        return _csv_series(spec, horizon, base_dir, where)
    growth = (1.0 + spec.monthly_growth) ** (hours / HOURS_PER_MONTH)
    if isinstance(spec, FlatProfile):
        return spec.base * growth
    start_hour = horizon.start.hour + horizon.start.minute / 60.0
    hour_of_day = (start_hour + hours) % 24.0
    shape = (1.0 + np.cos(2.0 * np.pi * (hour_of_day - spec.peak_hour_utc) / 24.0)) / 2.0
    value = spec.base + (spec.peak - spec.base) * shape
    weekday = (horizon.start.weekday() + (start_hour + hours) // 24.0) % 7
    value = np.where(weekday >= 5, value * spec.weekend_factor, value)
    return value * growth


#: Most rows of one demand series (a year of minutes is 525,600) and its largest size: a bigger file is
#: not a demand series.
MAX_SERIES_ROWS: int = 1_000_000
MAX_SERIES_BYTES: int = 64 * 1024 * 1024
#: The columns of a demand series: a time (``hour`` from the horizon start, or an ISO ``timestamp``,
#: naive = UTC) and the ``replicas`` wanted from that time until the next row's.
SERIES_COLUMNS: tuple[str, ...] = ("hour", "timestamp", "replicas")
_SERIES_REPLICAS = Range(ge=0, le=MAX_REPLICAS, unit="replicas")
# A row's time is within five years (the longest horizon) of the horizon start, before or after it.
_SERIES_HOURS = Range(ge=-MAX_HORIZON_HOURS, le=MAX_HORIZON_HOURS, unit="hours from the horizon start")


def _csv_series(spec: CsvSeries, horizon: Horizon, base_dir: Path | None, where: str) -> np.ndarray:
    """The series of a ``{csv: FILE}`` demand, every cell checked; errors name the row and the column as
    a spreadsheet shows them (the header is row 1)."""
    path = Path(spec.csv)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    data = read_input_bytes(
        path,
        MAX_SERIES_BYTES,
        missing=f"demand series not found (referenced by {where}.csv)",
        directory=f"is a directory, expected a CSV file (referenced by {where}.csv)",
        too_large=lambda size: f"{size:,} bytes; a demand series is at most {MAX_SERIES_BYTES:,}",
    )
    text = decode_utf8(path, data)
    try:
        records = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(path, None, f"not a readable CSV: {exc}") from None
    while records and not any(cell.strip() for cell in records[-1]):
        records.pop()  # trailing blank lines are not rows anyone meant to write
    if not records:
        raise InputError(path, "row 1", "empty file; expected a header row: hour (or timestamp), replicas")
    header = _series_header(path, records[0])
    if len(records) - 1 > MAX_SERIES_ROWS:
        raise InputError(
            path, f"row {MAX_SERIES_ROWS + 2}", f"more than {MAX_SERIES_ROWS:,} rows in one demand series"
        )
    column = "hour" if "hour" in header else "timestamp"
    at_time, at_replicas = header.index(column), header.index("replicas")
    rows: list[int] = []
    times: list[float] = []
    replicas: list[float] = []
    for index, record in enumerate(records[1:]):
        row = index + 2
        if not any(cell.strip() for cell in record):
            continue  # a blank line in the middle is skipped, but still counts as a row
        if any(cell.strip() for cell in record[len(header) :]):
            raise InputError(
                path,
                f"row {row}, column {len(header) + 1}",
                f"{len(record)} cells but the header has {len(header)}",
            )
        cells = [*record, *[""] * (len(header) - len(record))]
        raw_time, raw_replicas = cells[at_time].strip(), cells[at_replicas].strip()
        if not raw_time:
            raise InputError(path, f"row {row}, column {column}", "empty cell; every row needs a time")
        if not raw_replicas:
            raise InputError(
                path, f"row {row}, column replicas", "empty cell; give the replicas (0 for none)"
            )
        try:
            hour = (
                parse_number(raw_time, _SERIES_HOURS) if column == "hour" else _stamp_hour(raw_time, horizon)
            )
        except ValueError as exc:
            raise InputError(path, f"row {row}, column {column}", str(exc)) from None
        try:
            value = parse_number(raw_replicas, _SERIES_REPLICAS)
        except ValueError as exc:
            raise InputError(path, f"row {row}, column replicas", str(exc)) from None
        if times and hour <= times[-1]:
            raise InputError(
                path,
                f"row {row}, column {column}",
                f"times must increase from row to row (row {rows[-1]} has the same or a later time)",
            )
        rows.append(row)
        times.append(hour)
        replicas.append(value)
    if not rows:
        raise InputError(path, "row 2", "the series has no rows")
    if times[0] > 0:
        raise InputError(
            path, f"row {rows[0]}, column {column}", "the series must start at or before the horizon"
        )
    # each row holds from its time until the next row's time
    holding = np.searchsorted(np.array(times), np.arange(horizon.hours, dtype=float), side="right") - 1
    return np.array(replicas, dtype=float)[holding]


def _series_header(path: Path, raw: list[str]) -> list[str]:
    header = checked_header(
        path,
        raw,
        SERIES_COLUMNS,
        ("replicas",),
        "a demand series has the columns hour (or timestamp) and replicas",
    )
    if "hour" in header and "timestamp" in header:
        raise InputError(path, "row 1, column timestamp", "give hour or timestamp, not both")
    if "hour" not in header and "timestamp" not in header:
        raise InputError(path, "row 1", "needs an 'hour' or a 'timestamp' column")
    return header


def _stamp_hour(raw: str, horizon: Horizon) -> float:
    """An ISO 8601 timestamp cell (naive = UTC) as hours from the horizon start."""
    try:
        stamp = datetime.fromisoformat(raw)
        stamp = stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"{raw!r} is not a valid time (ISO 8601: 2027-01-01T00:00:00Z)") from None
    hour = horizon.hour_of(stamp)
    if _SERIES_HOURS.problem(hour):
        raise ValueError(
            f"{raw!r} is {abs(hour):.0f} hours {'after' if hour > 0 else 'before'} the horizon start; "
            f"at most {MAX_HORIZON_HOURS} (five years)"
        )
    return hour


def per_period_max(hourly: np.ndarray, period_hours: int) -> np.ndarray:
    """Whole replicas needed in each period: the peak hour of the period, rounded up."""
    peaks = hourly.reshape(-1, period_hours).max(axis=1)
    return np.ceil(peaks - _ROUNDING_SLACK).clip(min=0).astype(np.int64)


def service_demand(scenario: Scenario, service: InferenceService, base_dir: Path | None) -> np.ndarray:
    """Replicas per planning period for one inference service."""
    index = scenario.inference.index(service)
    hourly = hourly_demand(service.replicas, scenario.horizon, base_dir, f"inference[{index}].replicas")
    if service.scale != 1.0:
        hourly = hourly * service.scale
    top = float(hourly.max(initial=0.0))
    if top > MAX_REPLICAS:  # a CSV series times scale (profiles are bounded when the scenario loads)
        raise InputError(
            None,
            f"inference[{index}].scale",
            f"the series times scale reaches {top:.3g} replicas; at most {MAX_REPLICAS} replicas",
        )
    return per_period_max(hourly, scenario.horizon.period_hours)


@dataclass(frozen=True, slots=True)
class TrainingRun:
    """One run of a training job, with its window in whole periods of the horizon."""

    job: TrainingJob
    run: int
    window_start_hour: float
    window_end_hour: float
    first_period: int  # earliest period the run may start in
    end_period: int  # the run must finish by the start of this period (exclusive)

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def gpus(self) -> int:
        return self.job.nodes * self.job.gpus_per_node

    def window_periods(self) -> int:
        return max(0, self.end_period - self.first_period)


def training_runs(scenario: Scenario) -> list[TrainingRun]:
    """Expand every training job into its runs (``repeat`` gives one run per day or week)."""
    horizon = scenario.horizon
    runs: list[TrainingRun] = []
    for job in scenario.training:
        start = horizon.hour_of(job.earliest_start) if job.earliest_start else 0.0
        end = horizon.hour_of(job.deadline) if job.deadline else float(horizon.hours)
        windows: list[tuple[float, float]]
        if job.repeat == "none":
            windows = [(start, end)]
        else:
            step = _REPEAT_HOURS[job.repeat]
            windows = []
            begin = start
            while begin < end:
                # a last window cut short by the horizon (or deadline) is no demand if the run cannot fit
                if min(begin + step, end) - begin >= job.hours or not windows:
                    windows.append((begin, min(begin + step, end)))
                begin += step
        for number, (lo, hi) in enumerate(windows):
            runs.append(
                TrainingRun(
                    job=job,
                    run=number,
                    window_start_hour=lo,
                    window_end_hour=hi,
                    first_period=math.ceil(lo / horizon.period_hours - 1e-9),
                    end_period=math.floor(hi / horizon.period_hours + 1e-9),
                )
            )
    return runs


def period_start(horizon: Horizon, period: int) -> datetime:
    return horizon.start + pd.Timedelta(hours=period * horizon.period_hours).to_pytimedelta()
