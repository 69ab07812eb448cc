"""Workloads turned into numbers the planner can use: demand per period, training runs with windows.

The scenario (``models.scenario``) says *what* the user asked for; this module says *how much, when*:
- an inference service's demand series, in whole replicas per planning period (the peak hour of the
  period, so a plan that covers a period covers every hour in it);
- a training job's runs (one, or one per day/week with ``repeat``), each with its window in periods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from models.errors import InputError
from models.scenario import (
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


def _csv_series(spec: CsvSeries, horizon: Horizon, base_dir: Path | None, where: str) -> np.ndarray:
    path = Path(spec.csv)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise InputError(path, None, f"demand series not found (referenced by {where}.csv)") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"not a readable CSV: {exc}") from None
    if "replicas" not in frame.columns:
        raise InputError(path, "header", "missing column 'replicas'")
    if "hour" in frame.columns:
        times = pd.to_numeric(frame["hour"], errors="coerce")
        bad = times.isna()
        column = "hour"
    elif "timestamp" in frame.columns:
        stamps = pd.to_datetime(frame["timestamp"], errors="coerce", utc=True)
        bad = stamps.isna()
        times = (stamps - pd.Timestamp(horizon.start)).dt.total_seconds() / 3600.0
        column = "timestamp"
    else:
        raise InputError(path, "header", "needs an 'hour' or a 'timestamp' column")
    replicas = pd.to_numeric(frame["replicas"], errors="coerce")
    for mask, col, problem in (
        (bad, column, "not a valid time"),
        (replicas.isna() | (replicas < 0), "replicas", "must be a number >= 0"),
    ):
        if mask.any():
            row = int(np.flatnonzero(mask.to_numpy())[0]) + 2  # spreadsheet row: header is row 1
            raise InputError(path, f"row {row}, column {col}", problem)
    steps = np.diff(times.to_numpy())
    if (steps <= 0).any():
        row = int(np.flatnonzero(steps <= 0)[0]) + 3
        raise InputError(path, f"row {row}, column {column}", "times must increase from row to row")
    if len(frame) == 0:
        raise InputError(path, None, "the series has no rows")
    if times.iloc[0] > 0:
        raise InputError(path, f"row 2, column {column}", "the series must start at or before the horizon")
    # each row holds from its time until the next row's time
    index = np.searchsorted(times.to_numpy(), np.arange(horizon.hours, dtype=float), side="right") - 1
    return replicas.to_numpy(dtype=float)[index]


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
