"""A measured series made a clean series on a regular time grid, every repair stated.

What can be wrong with a series read from monitoring, and what is done (each repair is a :class:`Fill`
kept with the series, so the page and ``history.json`` can say what was measured and what was filled):

- **gaps**: steps where the monitoring saw nothing (the ``coverage`` query empty: Prometheus or
  kube-state-metrics down). Up to ``max_linear`` steps in a row are interpolated linearly between the
  values around them; a longer gap takes the value one week earlier (the same hour of the same weekday),
  else one day earlier, else the nearest value. A step the monitoring saw, where a series has no sample,
  is 0 (no running pod asked for GPUs then), not a gap.
- **negative and non-finite values** (a broken exporter or recording rule): not a demand; treated as a
  gap and filled the same way.
- **counter resets** (a ``counters`` role, e.g. a raw ``_total``): a decrease is a restart from 0; the
  series becomes the increase per step, as Prometheus' ``increase()`` counts it.

A history shorter than a week (:data:`SEASON`) cannot show a weekly cycle: :func:`short_history` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

import numpy as np
import pandas as pd

__all__ = ["SEASON", "Fill", "Gap", "Quality", "clean", "gaps", "grid", "short_history", "unix_seconds"]

#: The longest seasonal cycle of GPU demand (working days and weekends): a history shorter than this
#: cannot tell the weekly cycle from a trend.
SEASON: Final = timedelta(days=7)
FillMethod = Literal["linear", "week-before", "day-before", "nearest"]
Reason = Literal["gap", "negative", "non-finite"]


@dataclass(frozen=True)
class Gap:
    """Steps ``start`` to ``end`` (both included) the monitoring did not see at all: every series is
    filled there (each series' :class:`Fill` says how)."""

    start: datetime
    end: datetime
    steps: int

    def text(self) -> str:
        span = _stamp(self.start) if self.steps == 1 else f"{_stamp(self.start)} to {_stamp(self.end)}"
        return f"{self.steps} step{'s' * (self.steps != 1)} {span}"

    def as_json(self) -> dict[str, object]:
        return {"start": _stamp(self.start), "end": _stamp(self.end), "steps": self.steps}


@dataclass(frozen=True)
class Fill(Gap):
    """Steps ``start`` to ``end`` (both included) of a series were not measured (``reason``) and were
    filled by ``method``."""

    reason: Reason
    method: FillMethod

    def text(self) -> str:
        return f"{super().text()} ({self.reason}): {self.method}"

    def as_json(self) -> dict[str, object]:
        return {**super().as_json(), "reason": self.reason, "method": self.method}


def gaps(index: pd.DatetimeIndex, covered: np.ndarray) -> list[Gap]:
    """The runs of steps where ``covered`` is False."""
    found = []
    i = 0
    while i < len(covered):
        if covered[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(covered) and not covered[j + 1]:
            j += 1
        found.append(Gap(index[i].to_pydatetime(), index[j].to_pydatetime(), j - i + 1))
        i = j + 1
    return found


@dataclass(frozen=True)
class Quality:
    """How much of a series was measured: its steps, those measured, the fills, the counter resets."""

    steps: int
    measured: int
    fills: tuple[Fill, ...] = ()
    negatives: int = 0
    resets: int = 0

    @property
    def filled(self) -> int:
        return sum(f.steps for f in self.fills)

    def as_json(self) -> dict[str, object]:
        return {
            "steps": self.steps,
            "measured": self.measured,
            "filled": self.filled,
            "negative_values": self.negatives,
            "counter_resets": self.resets,
            "fills": [f.as_json() for f in self.fills],
        }


def grid(start: datetime, end: datetime, step: timedelta) -> pd.DatetimeIndex:
    """The steps from ``start`` to ``end``, both included when on the grid (as a range query), UTC."""
    return pd.date_range(start.astimezone(UTC), end.astimezone(UTC), freq=step, name="time")


def unix_seconds(index: pd.DatetimeIndex) -> np.ndarray:
    """The steps as unix seconds (int64), whatever the index's resolution (pandas 3 keeps microseconds
    for indexes built from datetimes)."""
    return np.asarray(index.as_unit("s").asi8, dtype=np.int64)


def short_history(index: pd.DatetimeIndex, step: timedelta) -> str | None:
    """A warning when ``index`` spans less than :data:`SEASON`, else None."""
    span = len(index) * step
    if span >= SEASON:
        return None
    hours = span.total_seconds() / 3600
    return (
        f"the history covers {hours:,.0f} hours, less than a week: a weekly cycle cannot be seen in it; "
        "read at least 14 days (--since 14d) before forecasting from it"
    )


def clean(
    samples: Sequence[tuple[float, float]] | pd.Series,
    index: pd.DatetimeIndex,
    covered: np.ndarray,
    *,
    counter: bool = False,
    absent_is_zero: bool = True,
    max_linear: int = 6,
) -> tuple[pd.Series, Quality]:
    """``samples`` (unix seconds, value; or a Series on ``index``) on the grid ``index``, repaired (module
    docstring). ``covered[i]``: the monitoring saw step ``i``; ``absent_is_zero``: a covered step
    without a sample is 0 (a sum of requests) rather than a gap."""
    if isinstance(samples, pd.Series):
        values = samples.reindex(index).to_numpy(dtype=float, copy=True)
    else:
        values = np.full(len(index), np.nan)
        if samples:
            stamps = np.array([t for t, _ in samples], dtype=float)
            seen = np.array([v for _, v in samples], dtype=float)
            seconds = unix_seconds(index)
            where = np.searchsorted(seconds, stamps)
            on_grid = (where < len(index)) & (seconds[np.minimum(where, len(index) - 1)] == stamps)
            values[where[on_grid]] = seen[on_grid]
    covered = np.asarray(covered, dtype=bool)
    present = ~np.isnan(values)
    reason = np.full(len(index), "", dtype=object)
    non_finite = present & ~np.isfinite(values)
    values[non_finite] = np.nan
    reason[non_finite] = "non-finite"
    missing = ~present & ~covered
    if absent_is_zero:
        values[~present & covered] = 0.0
    else:
        missing |= ~present
    reason[missing] = "gap"
    resets = 0
    if counter:
        values, resets = _increases(values)
    negative = values < 0
    negatives = int(negative.sum())
    values[negative] = np.nan
    reason[negative] = "negative"
    measured = int(np.isfinite(values).sum())
    filled, fills = _fill(values, reason, index, max_linear)
    return pd.Series(filled, index=index, name="value"), Quality(
        len(index), measured, tuple(fills), negatives, resets
    )


def _increases(values: np.ndarray) -> tuple[np.ndarray, int]:
    """A counter's increase per step; a decrease is a reset (the counter restarted from 0, so the
    increase is the new value). The first step has no increase: NaN there, filled like a gap."""
    result = np.full(len(values), np.nan)
    resets = 0
    last = np.nan
    for i, value in enumerate(values):
        if np.isnan(value):
            continue
        if not np.isnan(last):
            if value < last:
                resets += 1
                result[i] = value
            else:
                result[i] = value - last
        last = value
    if len(values) and np.isnan(result[0]) and not np.isnan(values[0]):
        result[0] = 0.0
    return result, resets


def _fill(
    values: np.ndarray, reason: np.ndarray, index: pd.DatetimeIndex, max_linear: int
) -> tuple[np.ndarray, list[Fill]]:
    """Every run of NaN filled (module docstring); the Fill of each run."""
    out = values.copy()
    fills: list[Fill] = []
    if len(index) < 2:
        return np.nan_to_num(out), fills
    step = index[1] - index[0]
    week = int(pd.Timedelta(days=7) / step)
    day = int(pd.Timedelta(days=1) / step)
    missing = np.isnan(values)
    if missing.all():
        out[:] = 0.0
        fills.append(_run(index, 0, len(values) - 1, reason, "nearest"))
        return out, fills
    i = 0
    while i < len(values):
        if not missing[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(values) and missing[j + 1]:
            j += 1
        length = j - i + 1
        inside = i > 0 and j < len(values) - 1
        method: FillMethod
        if inside and length <= max_linear:
            left, right = out[i - 1], values[j + 1]
            out[i : j + 1] = left + (right - left) * np.arange(1, length + 1) / (length + 1)
            method = "linear"
        elif i - week >= 0 and not np.isnan(out[i - week : j + 1 - week]).any():
            out[i : j + 1] = out[i - week : j + 1 - week]
            method = "week-before"
        elif i - day >= 0 and not np.isnan(out[i - day : j + 1 - day]).any():
            out[i : j + 1] = out[i - day : j + 1 - day]
            method = "day-before"
        else:
            out[i : j + 1] = out[i - 1] if i > 0 else values[j + 1]
            method = "nearest"
        fills.append(_run(index, i, j, reason, method))
        i = j + 1
    return out, fills


def _run(index: pd.DatetimeIndex, i: int, j: int, reason: np.ndarray, method: FillMethod) -> Fill:
    kinds = [str(r) for r in reason[i : j + 1] if r]
    why: Reason = "gap"
    for kind in ("negative", "non-finite"):
        if kind in kinds:
            why = kind
    start, end = index[i].to_pydatetime(), index[j].to_pydatetime()
    return Fill(start, end, j - i + 1, why, method)


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
