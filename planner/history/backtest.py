"""Backtest a forecast on the history's own last hours, beside a seasonal-naive baseline.

Why: a band is only worth planning on if it covers what happened. :func:`backtest` fits on all but the
last ``holdout_hours``, forecasts them, and scores the P50 and the P10-P90 band; the seasonal-naive
baseline gets the same scores, so a reader sees whether the model earns its keep.

Scores (Hyndman and Athanasopoulos, FPP3 section 5.8, https://otexts.com/fpp3/accuracy.html):

* MAPE of the P50, in %: mean |actual - P50| / actual. Undefined (``None``, with the reason) when any
  held-out hour is 0: one idle hour would make it infinite.
* MASE of the P50: mean |actual - P50| over the in-sample mean |y_t - y_{t-m}| of the training part,
  m = 168 h, or 24 h when the training part is shorter than two weeks. Below 1: better than the
  seasonal naive's in-sample one-season-ahead error. Undefined when that scale is 0.
* Coverage: the share of held-out hours with P10 <= actual <= P90 (ideally ~80 %).

Seasonal naive (FPP3 section 5.2 and 5.5, https://otexts.com/fpp3/prediction-intervals.html): the
P50 of hour T+h is the value one season before, y[T + h - m(k + 1)] with k = floor((h - 1) / m); its
quantiles add the empirical quantiles of the in-sample seasonal differences y_t - y_{t-m} less their
median (so the P50 stays the naive value), scaled by sqrt(k + 1), clipped at 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.errors import InputError
from planner.history.forecast import (
    DAY,
    DEFAULT_PATHS,
    DEFAULT_QUANTILES,
    WEEK,
    Forecast,
    check_quantiles,
    check_series,
    forecast,
)

BAND = (0.1, 0.9)


@dataclass(frozen=True)
class Scores:
    """One forecaster's scores on the held-out hours; ``None`` where a score is undefined (``notes``)."""

    mae: float
    mape: float | None
    mase: float | None
    coverage: float
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class BacktestResult:
    """The model's and the seasonal-naive baseline's scores on the same held-out hours."""

    name: str
    train_hours: int
    holdout_hours: int
    season: int
    model: Scores
    baseline: Scores
    forecast: Forecast
    baseline_quantiles: pd.DataFrame
    actual: pd.Series

    @property
    def earns_its_keep(self) -> bool | None:
        """Whether the model's P50 beats the baseline's (MASE, else MAE); None if neither is defined."""
        if self.model.mase is not None and self.baseline.mase is not None:
            return self.model.mase < self.baseline.mase
        return self.model.mae < self.baseline.mae

    def describe(self) -> str:
        """One line: both forecasters' scores on the holdout."""

        def fmt(scores: Scores) -> str:
            mape = f"{scores.mape:.1f} %" if scores.mape is not None else "undefined"
            mase = f"{scores.mase:.2f}" if scores.mase is not None else "undefined"
            return f"MAPE {mape}, MASE {mase}, P10-P90 coverage {scores.coverage * 100:.0f} %"

        return (
            f"{self.name}: last {self.holdout_hours} h held out ({self.train_hours} h fitted, season "
            f"{self.season} h): {self.forecast.model}: {fmt(self.model)}; "
            f"seasonal naive: {fmt(self.baseline)}"
        )


def season_for(train_hours: int) -> int:
    """The seasonal period of MASE and the baseline: weekly with two weeks of training, else daily."""
    return WEEK if train_hours >= 2 * WEEK else DAY


def seasonal_naive(train: np.ndarray, hours: int, season: int, quantiles: Sequence[float]) -> np.ndarray:
    """``hours x len(quantiles)``: the seasonal-naive forecast's quantiles (module docstring)."""
    if len(train) <= season:
        raise InputError(None, "history", f"the baseline needs more than one season ({season} h) of history")
    k = (np.arange(1, hours + 1) - 1) // season
    p50 = seasonal_naive_p50(train, hours, season)
    errors = train[season:] - train[:-season]
    offsets = np.quantile(errors - np.median(errors), list(quantiles))  # centred: P50 is the naive value
    return np.maximum(p50[:, None] + np.sqrt(k + 1)[:, None] * offsets[None, :], 0.0)


def seasonal_naive_p50(train: np.ndarray, hours: int, season: int) -> np.ndarray:
    """The seasonal-naive point forecast: the same hour one season (or k + 1 seasons) before."""
    steps = np.arange(1, hours + 1)
    return train[len(train) + steps - 1 - season * ((steps - 1) // season + 1)]


def score(
    actual: np.ndarray, p50: np.ndarray, low: np.ndarray, high: np.ndarray, train: np.ndarray, season: int
) -> Scores:
    """MAE, MAPE, MASE of ``p50`` and the coverage of [low, high] on ``actual``."""
    errors = np.abs(actual - p50)
    notes: list[str] = []
    zeros = int((actual == 0).sum())
    if zeros:
        mape = None
        notes.append(f"MAPE undefined: {zeros} of {len(actual)} held-out hours are 0")
    else:
        mape = float(np.mean(errors / np.abs(actual)) * 100.0)
    scale = float(np.mean(np.abs(train[season:] - train[:-season]))) if len(train) > season else 0.0
    if scale > 0:
        mase: float | None = float(errors.mean() / scale)
    else:
        mase = None
        notes.append(f"MASE undefined: the training part repeats exactly every {season} h (scale 0)")
    inside = (actual >= low) & (actual <= high)
    return Scores(float(errors.mean()), mape, mase, float(inside.mean()), tuple(notes))


def backtest(
    series: pd.Series,
    holdout_hours: int,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    n_paths: int = DEFAULT_PATHS,
    seed: int = 0,
    name: str | None = None,
) -> BacktestResult:
    """Fit on all but the last ``holdout_hours``, forecast them, score the model and the baseline."""
    label = name if name is not None else str(series.name or "series")
    values = check_series(series, label)
    qs = tuple(sorted(set(check_quantiles(quantiles)) | {0.5, *BAND}))
    if isinstance(holdout_hours, bool) or not isinstance(holdout_hours, int) or holdout_hours < 1:
        raise InputError(label, "holdout", f"need a whole number of hours >= 1, got {holdout_hours!r}")
    train_hours = len(values) - holdout_hours
    if train_hours < DAY + 1:
        raise InputError(
            label,
            "holdout",
            f"holding out {holdout_hours} h of {len(values)} leaves {max(train_hours, 0)} h: need at least "
            f"{DAY + 1} h to fit; hold out less",
        )
    season = season_for(train_hours)
    train, actual = values[:train_hours], values[train_hours:]
    fitted = forecast(series.iloc[:train_hours], holdout_hours, qs, n_paths, seed, label)
    table = fitted.quantiles
    model = score(
        actual, table[0.5].to_numpy(), table[BAND[0]].to_numpy(), table[BAND[1]].to_numpy(), train, season
    )
    naive = seasonal_naive(train, holdout_hours, season, qs)
    baseline_table = pd.DataFrame(naive, index=table.index, columns=list(qs))
    baseline = score(
        actual,
        baseline_table[0.5].to_numpy(),
        baseline_table[BAND[0]].to_numpy(),
        baseline_table[BAND[1]].to_numpy(),
        train,
        season,
    )
    return BacktestResult(
        label,
        train_hours,
        holdout_hours,
        season,
        model,
        baseline,
        fitted,
        baseline_table,
        series.iloc[train_hours:],
    )


def holdout_for(hours: int, days: int = 30, share: float = 0.2) -> int:
    """The usual holdout: the last ``days`` days if twice that is left to fit, else the last ``share``."""
    wanted = days * DAY
    return wanted if hours >= 3 * wanted else max(1, math.floor(hours * share))
