"""Hourly demand forecasts with their uncertainty, and training demand as runs per month, from history.

Why: a planner that commits for years should start from what the fleet used and say how sure it is
(issue 40, point 2). The scenario writer reads :class:`Forecast` quantiles (P50 CSVs) and the stochastic
planner of issue 41 reads its sampled paths.

Model (statsmodels; docs/forecast.md says why not statsforecast, with the measured figures):

* over two weeks of history (MSTL needs more than two cycles of a period): MSTL with daily and weekly
  periods (Bandara, Hyndman, Bergmeir 2021, https://arxiv.org/abs/2107.13462; statsmodels ``MSTL``),
  each seasonal component carried forward as its last cycle (as statsforecast's MSTL and R's
  ``forecast::mstl`` do); the deseasonalised rest (trend + remainder) of the last four weeks gets
  an ETS model with additive errors, Holt's linear trend or none, the lower AICc winning
  (Hyndman and Athanasopoulos, FPP3 section 8.6, https://otexts.com/fpp3/ets.html);
* over two days, up to two weeks: the same with the daily period only;
* two days or less: a flat forecast, each future hour drawn from the last day's values;
* a history holding one value throughout (an idle service, a fixed pool): that value, no spread.

Choices that matter, stated so they can be read:

* STL's seasonal smoother is local-constant (``seasonal_deg=0``) over 25 cycles: with the default
  local-linear fit the last cycle, which is what gets carried forward, is an extrapolation and doubles
  the median's error on a known law (docs/forecast.md). Trend and low-pass smoothers are evaluated
  every 10th point and interpolated, the speed-up R's ``stl`` uses by default (Cleveland et al. 1990).
* The band: the ETS model's own forecast variance plus the variance of the carried seasonal cycles,
  estimated as the remainder's variance over each smoother's effective number of cycles (tricube
  weights at the series end). Without that term a 80 % band covered ~55-70 % of a known law.
* Quantiles are Gaussian about the P50 (ETS additive errors) and clipped at zero; paths are ETS
  simulations plus one draw of the seasonal error per path (the same cycle error repeats in every
  cycle, as the same estimate is carried), clipped at zero. Their empirical quantiles converge to the
  quantiles (tested).
"""

from __future__ import annotations

import math
import time
import warnings
import zlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError

DAY = 24
WEEK = 168
DEFAULT_QUANTILES: tuple[float, ...] = (0.1, 0.5, 0.9)
DEFAULT_PATHS = 100
SEASONAL_WINDOW = 25  # cycles the seasonal smoother spans (odd, >= 7; STL's rule)
SMOOTHER_JUMP = 10  # trend and low-pass loess evaluated every 10th point (R stl's default is ~10 %)
ETS_HOURS = 4 * WEEK  # the trend model sees the last four weeks: recent growth, cheap fit
FLAT_HOURS = DAY  # the flat fallback's spread: the last day's values

Horizon = int | datetime | pd.Timestamp


@dataclass(frozen=True, eq=False)
class Forecast:
    """One series' forecast: quantiles per future hour, sampled paths, and how they were made.

    ``quantiles``: index = the future hours (UTC), one float column per quantile (0.1, 0.5, ...),
    non-decreasing across the columns at every hour, >= 0. ``paths``: ``n_paths x hours``, >= 0,
    reproducible from ``seed``. ``model`` names the model, ``reason`` why it was chosen (the fallbacks
    say so), ``diagnostics`` the fit's figures (history length, smoothing parameters, sigma, AICc).
    """

    name: str
    quantiles: pd.DataFrame
    paths: np.ndarray
    model: str
    reason: str
    seed: int
    diagnostics: Mapping[str, float | int | str] = field(default_factory=dict)

    @property
    def index(self) -> pd.DatetimeIndex:
        return pd.DatetimeIndex(self.quantiles.index)

    @property
    def hours(self) -> int:
        return len(self.quantiles)

    def quantile(self, q: float) -> pd.Series:
        """The column of quantile ``q`` (as given to :func:`forecast`)."""
        return self.quantiles[q]

    def describe(self) -> str:
        """One line for logs and pages: what model, on how much history, and how wide the band is."""
        qs = [float(q) for q in self.quantiles.columns]
        low, high = self.quantiles[qs[0]], self.quantiles[qs[-1]]
        mid = self.quantiles[0.5] if 0.5 in qs else self.quantiles[qs[len(qs) // 2]]
        return (
            f"{self.name}: {self.model} on {self.diagnostics.get('history_hours', '?')} h of history "
            f"({self.reason}); {self.hours} h ahead, P50 mean {mid.mean():.2f}, "
            f"P{_pct(qs[0])}-P{_pct(qs[-1])} mean width {(high - low).mean():.2f}; "
            f"{self.paths.shape[0]} paths (seed {self.seed})"
        )


def _pct(q: float) -> str:
    return f"{q * 100:g}"


# ---- input checks -----------------------------------------------------------------------------------


def check_series(series: pd.Series, name: str = "series") -> np.ndarray:
    """The values of a valid hourly history, else an InputError naming the series and the first bad hour.

    Valid: a pandas Series on a UTC DatetimeIndex, strictly hourly (no gap, no duplicate), finite,
    no NaN (the readers fill gaps first and say how), >= 0 (demand in GPUs or replicas).
    """
    if not isinstance(series, pd.Series):
        raise InputError(name, None, f"expected a pandas Series, got {type(series).__name__}")
    if len(series) == 0:
        raise InputError(name, None, "empty history: nothing to forecast from")
    index = series.index
    if not isinstance(index, pd.DatetimeIndex):
        raise InputError(name, "index", "must be a DatetimeIndex of hours")
    if index.tz is None or str(index.tz) not in ("UTC", "utc"):
        raise InputError(name, "index", f"must be in UTC, got {index.tz or 'no time zone'}")
    if len(series) > 1:
        steps = np.diff(index.as_unit("s").asi8)
        bad = np.flatnonzero(steps != 3600)
        if bad.size:
            at = index[bad[0] + 1]
            raise InputError(
                name, f"at {at.isoformat()}", "not a regular 1 h step (a gap, duplicate or disorder)"
            )
    try:
        values = series.to_numpy(dtype=float)
    except (TypeError, ValueError):
        raise InputError(name, None, "values must be numbers") from None
    finite = np.isfinite(values)
    if not finite.all():
        at = index[int(np.argmin(finite))]
        raise InputError(name, f"at {at.isoformat()}", "NaN or infinite value; fill gaps before forecasting")
    if (values < 0).any():
        at = index[int(np.argmax(values < 0))]
        raise InputError(name, f"at {at.isoformat()}", f"negative demand {values[values < 0][0]:g}")
    return values


def check_quantiles(quantiles: Sequence[float]) -> tuple[float, ...]:
    """Sorted, distinct, each strictly inside (0, 1)."""
    qs = tuple(sorted({float(q) for q in quantiles}))
    if not qs or any(not 0.0 < q < 1.0 for q in qs):
        raise InputError(None, "quantiles", f"need values strictly between 0 and 1, got {list(quantiles)}")
    return qs


def horizon_hours(last: pd.Timestamp, horizon: Horizon) -> int:
    """Hours to forecast: an int as is, or every hour after ``last`` strictly before an end time."""
    if isinstance(horizon, bool):
        raise InputError(None, "horizon", "must be hours or an end time")
    if isinstance(horizon, int):
        hours = horizon
    else:
        end = pd.Timestamp(horizon)
        end = end.tz_localize("UTC") if end.tz is None else end.tz_convert("UTC")
        hours = math.ceil((end - last) / pd.Timedelta(hours=1)) - 1
    if hours < 1:
        raise InputError(None, "horizon", f"must reach at least one hour past {last.isoformat()}")
    return int(hours)


# ---- the forecast ----------------------------------------------------------------------------------


def forecast(
    series: pd.Series,
    horizon: Horizon,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    n_paths: int = DEFAULT_PATHS,
    seed: int = 0,
    name: str | None = None,
) -> Forecast:
    """Forecast an hourly demand series ``horizon`` hours (or up to an end time) ahead.

    The model depends on the history's length (module docstring); ``Forecast.reason`` says which and why.
    """
    label = name if name is not None else str(series.name or "series")
    values = check_series(series, label)
    qs = check_quantiles(quantiles)
    if n_paths < 1:
        raise InputError(label, "n_paths", f"need at least one path, got {n_paths}")
    last = pd.Timestamp(series.index[-1])
    hours = horizon_hours(last, horizon)
    index = pd.date_range(last + pd.Timedelta(hours=1), periods=hours, freq="h", name=series.index.name)
    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    n = len(values)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):  # small matrices: BLAS threads only contend (2.4x slower measured)
        fit, model, reason = _fit(values, hours, qs, n_paths, rng)
    table = pd.DataFrame(fit.pop("quantiles"), index=index, columns=list(qs))
    paths = fit.pop("paths")
    diagnostics: dict[str, float | int | str] = {
        "history_hours": n,
        "fit_seconds": round(time.perf_counter() - began, 4),
        **fit,
    }
    return Forecast(label, table, paths, model, reason, seed, diagnostics)


def _fit(
    values: np.ndarray, hours: int, qs: tuple[float, ...], n_paths: int, rng: np.random.Generator
) -> tuple[dict[str, Any], str, str]:
    """The model the history's length allows: its quantiles, paths and figures, its name, and why."""
    n = len(values)
    if np.ptp(values) == 0:  # nothing varies: ETS has no error to fit (its likelihood is degenerate)
        level = float(values[0])
        return (
            {"quantiles": np.full((hours, len(qs)), level), "paths": np.full((n_paths, hours), level),
             "level": level},
            "constant",
            f"the history holds one value ({level:g}) in all {n} h: forecast as that value, no spread",
        )  # fmt: skip
    if n > 2 * WEEK:  # MSTL keeps a period only when the series holds more than two of its cycles
        fit = _seasonal_ets(values, (DAY, WEEK), hours, qs, n_paths, rng)
        model = f"MSTL(24,168)+ETS({fit.pop('ets')})"
        reason = "over two weeks of history: daily and weekly cycles and a trend"
    elif n > 2 * DAY:
        fit = _seasonal_ets(values, (DAY,), hours, qs, n_paths, rng)
        model = f"MSTL(24)+ETS({fit.pop('ets')})"
        reason = f"short history ({n} h, two weeks or less): daily cycle only"
    else:
        fit = _flat(values, hours, qs, n_paths, rng)
        model = "flat (last day's values)"
        reason = f"very short history ({n} h, two days or less): flat level with the last day's spread"
    return fit, model, reason


def _flat(
    values: np.ndarray, hours: int, qs: tuple[float, ...], n_paths: int, rng: np.random.Generator
) -> dict[str, Any]:
    """Every future hour drawn from the last day's values: no cycle or trend can be told from < 2 days."""
    recent = values[-FLAT_HOURS:]
    levels = np.quantile(recent, qs)
    table = np.tile(levels, (hours, 1))
    paths = rng.choice(recent, size=(n_paths, hours), replace=True)
    return {
        "quantiles": table,
        "paths": paths,
        "level": float(np.median(recent)),
        "spread_hours": len(recent),
    }


def _effective_cycles(cycles: int, window: int = SEASONAL_WINDOW) -> float:
    """Effective sample size of STL's local-constant seasonal fit at the series end (tricube weights).

    The end value of each cycle-subseries is a weighted mean of its last min(window, cycles) values;
    its variance is the remainder's over (sum w)^2 / sum w^2.
    """
    q = max(1, min(window, cycles))
    distance = np.arange(q) / q
    weights = (1.0 - distance**3) ** 3
    return float(weights.sum() ** 2 / (weights**2).sum())


def _seasonal_ets(
    values: np.ndarray,
    periods: tuple[int, ...],
    hours: int,
    qs: tuple[float, ...],
    n_paths: int,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """MSTL, then ETS on trend + remainder; seasonal cycles carried forward with their estimation error."""
    from statsmodels.tsa.seasonal import MSTL

    n = len(values)
    stl_kwargs = {"seasonal_deg": 0, "trend_jump": SMOOTHER_JUMP, "low_pass_jump": SMOOTHER_JUMP}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        decomposition = MSTL(
            values, periods=periods, windows=(SEASONAL_WINDOW,) * len(periods), stl_kwargs=stl_kwargs
        ).fit()
    seasonal = np.asarray(decomposition.seasonal, dtype=float).reshape(n, len(periods))
    rest = np.asarray(decomposition.trend, dtype=float) + np.asarray(decomposition.resid, dtype=float)
    remainder_var = float(np.var(decomposition.resid))

    future_seasonal = np.zeros(hours)
    seasonal_sd: list[float] = []
    for j, period in enumerate(periods):
        future_seasonal += _carry(seasonal[-period:, j], hours)
        seasonal_sd.append(math.sqrt(remainder_var / _effective_cycles(n // period)))

    ets = _fit_ets(rest[-ETS_HOURS:])
    mean, var = ets["mean"](hours), ets["var"](hours)
    total_sd = np.sqrt(var + sum(sd**2 for sd in seasonal_sd))
    z = np.array([NormalDist().inv_cdf(q) for q in qs])
    center = mean + future_seasonal
    table = np.maximum(center[:, None] + total_sd[:, None] * z[None, :], 0.0)

    paths = ets["simulate"](hours, n_paths, rng) + future_seasonal[None, :]
    for period, sd in zip(periods, seasonal_sd, strict=True):
        cycle_error = rng.normal(0.0, sd, size=(n_paths, period))
        paths += np.tile(cycle_error, (1, hours // period + 1))[:, :hours]
    paths = np.maximum(paths, 0.0)
    return {
        "quantiles": table,
        "paths": paths,
        "ets": ets["spec"],
        "alpha": ets["alpha"],
        "beta": ets["beta"],
        "aicc": ets["aicc"],
        "sigma": ets["sigma"],
        "remainder_sd": round(math.sqrt(remainder_var), 6),
        "seasonal_sd": round(math.sqrt(sum(sd**2 for sd in seasonal_sd)), 6),
        "ets_hours": min(n, ETS_HOURS),
        "converged": ets["converged"],
    }


def _carry(last_cycle: np.ndarray, hours: int) -> np.ndarray:
    """The last cycle repeated over the horizon."""
    return np.tile(last_cycle, hours // len(last_cycle) + 1)[:hours]


def _fit_ets(rest: np.ndarray) -> dict[str, Any]:
    """ETS(A,A,N) or ETS(A,N,N) on ``rest``, the lower AICc; closures give mean, variance, sampled paths."""
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    endog = pd.Series(rest)  # statsmodels 0.15's prediction wants a pandas input
    best: Any = None
    best_spec = ""
    for spec, trend in (("A,A,N", "add"), ("A,N,N", None)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = ETSModel(endog, error="add", trend=trend).fit(disp=False)
        except (ValueError, np.linalg.LinAlgError):
            continue
        if not np.isfinite(result.aicc):
            continue
        if best is None or result.aicc < best.aicc:
            best, best_spec = result, spec
    if best is None:
        raise InputError(None, None, "the trend model could not be fitted to this series")
    params = dict(zip(best.param_names, np.asarray(best.params, dtype=float), strict=True))

    # Mean, variance and paths in closed form: statsmodels' forecast, get_prediction and simulate step
    # through the horizon in Python (1.2 s of a 1.6 s fit for a year ahead); for ETS(A,A,N) and ETS(A,N,N)
    # the state equations sum up (Hyndman et al. 2008, "Forecasting with Exponential Smoothing", table 6.1;
    # FPP3 table 8.8, https://otexts.com/fpp3/ets-forecasting.html), and the same draws as statsmodels'
    # simulate (standard normals x sqrt(scale), hours x paths) give its paths to 1e-12 (tested).
    states = np.asarray(best.states, dtype=float)
    level = float(states[-1, 0])
    slope = float(states[-1, 1]) if best_spec == "A,A,N" else 0.0
    alpha = float(params.get("smoothing_level", 0.0))
    beta = float(params.get("smoothing_trend", 0.0)) if best_spec == "A,A,N" else 0.0
    scale = float(best.scale)

    def mean(hours: int) -> np.ndarray:
        return level + np.arange(1, hours + 1) * slope

    def var(hours: int) -> np.ndarray:
        h = np.arange(1, hours + 1, dtype=float)
        return scale * (1 + (h - 1) * (alpha**2 + alpha * beta * h + beta**2 * h * (2 * h - 1) / 6))

    def simulate(hours: int, n_paths: int, rng: np.random.Generator) -> np.ndarray:
        # y_t = l_{t-1} + b_{t-1} + e_t, l_t = l_{t-1} + b_{t-1} + alpha e_t, b_t = b_{t-1} + beta e_t:
        # with S_t the errors before t, y_t = l + (t + 1) b + beta sum_{k<=t} S_k + alpha S_t + e_t
        errors = rng.standard_normal((hours, n_paths)) * math.sqrt(scale)
        before = np.cumsum(errors, axis=0) - errors
        drawn = mean(hours)[:, None] + beta * np.cumsum(before, axis=0) + alpha * before + errors
        return drawn.T.copy()

    return {
        "spec": best_spec,
        "mean": mean,
        "var": var,
        "simulate": simulate,
        "alpha": round(float(params.get("smoothing_level", float("nan"))), 6),
        "beta": round(float(params.get("smoothing_trend", 0.0)), 6),
        "aicc": round(float(best.aicc), 3),
        "sigma": round(math.sqrt(float(best.mse)), 6),
        "converged": int(bool(best.mle_retvals.get("converged", True))) if best.mle_retvals else 1,
    }


# ---- many series ------------------------------------------------------------------------------------


def series_seed(seed: int, name: str) -> int:
    """A series' own seed: the same for the same (seed, name), whatever the order or the worker."""
    return int(np.random.SeedSequence([seed, zlib.crc32(name.encode())]).generate_state(1)[0])


def _one(args: tuple[str, pd.Series, Horizon, tuple[float, ...], int, int]) -> Forecast:
    name, series, horizon, qs, n_paths, seed = args
    return forecast(series, horizon, qs, n_paths, series_seed(seed, name), name)


def forecast_many(
    series: Mapping[str, pd.Series],
    horizon: Horizon,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    n_paths: int = DEFAULT_PATHS,
    seed: int = 0,
    workers: int = 1,
) -> dict[str, Forecast]:
    """Forecast every series; ``workers`` > 1 uses that many processes (the fits hold the GIL).

    Each series gets :func:`series_seed` (seed, name), so results do not depend on ``workers``.
    """
    qs = check_quantiles(quantiles)
    jobs = [(name, s, horizon, qs, n_paths, seed) for name, s in series.items()]
    if workers <= 1 or len(jobs) <= 1:
        return {job[0]: _one(job) for job in jobs}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(_one, jobs, chunksize=max(1, len(jobs) // (4 * workers))))
    return {f.name: f for f in results}


# ---- training demand: runs per month by size ---------------------------------------------------------

MONTH_HOURS = 365.25 * 24 / 12  # a mean calendar month, 730.5 h
RUN_COLUMNS = ("start", "end", "nodes", "gpus_per_node")
DEFAULT_SIZE_CLASSES: tuple[tuple[int, int | None], ...] = ((1, 8), (9, 64), (65, 512), (513, None))


def size_class(low: int, high: int | None) -> str:
    """A class's label: "1-8 GPUs", "513+ GPUs"."""
    return f"{low}+ GPUs" if high is None else f"{low}-{high} GPUs"


@dataclass(frozen=True)
class RunRate:
    """How often runs of one size class start: per month, with its spread and a 95 % interval.

    ``law`` is "poisson" unless the whole months' counts vary more than a Poisson law allows
    (variance > mean over >= 3 months), then "negative-binomial" with ``dispersion`` r (variance =
    mean + mean^2 / r). The interval is Garwood's exact Poisson interval for a Poisson law, else
    mean +- 1.96 standard errors of the monthly counts.
    """

    size_class: str
    gpus_low: int
    gpus_high: int | None
    runs: int
    months: float
    rate_per_month: float
    ci_low: float
    ci_high: float
    law: str
    dispersion: float | None
    monthly_counts: tuple[int, ...]


def check_runs(runs: pd.DataFrame, name: str = "runs") -> pd.DataFrame:
    """Runs with UTC ``start`` < ``end`` and whole ``nodes``, ``gpus_per_node`` >= 1; else InputError."""
    missing = [c for c in RUN_COLUMNS if c not in runs.columns]
    if missing:
        raise InputError(name, "columns", f"missing {', '.join(missing)}; need {', '.join(RUN_COLUMNS)}")
    out = runs.loc[:, list(RUN_COLUMNS)].copy()
    for column in ("start", "end"):
        stamps = pd.to_datetime(out[column], errors="coerce", utc=True)
        if stamps.isna().any():
            raise InputError(
                name, f"run {int(np.argmax(stamps.isna().to_numpy())) + 1}, {column}", "not a time"
            )
        out[column] = stamps
    for column in ("nodes", "gpus_per_node"):
        number = pd.to_numeric(out[column], errors="coerce")
        bad = number.isna() | (number < 1) | (number % 1 != 0)
        if bad.any():
            raise InputError(
                name, f"run {int(np.argmax(bad.to_numpy())) + 1}, {column}", "must be a whole number >= 1"
            )
        out[column] = number.astype(np.int64)
    bad = out["end"] <= out["start"]
    if bad.any():
        raise InputError(name, f"run {int(np.argmax(bad.to_numpy())) + 1}", "end must be after start")
    out["gpus"] = out["nodes"] * out["gpus_per_node"]
    return out.reset_index(drop=True)


def training_rates(
    runs: pd.DataFrame,
    since: datetime | pd.Timestamp | None = None,
    until: datetime | pd.Timestamp | None = None,
    classes: Sequence[tuple[int, int | None]] = DEFAULT_SIZE_CLASSES,
) -> list[RunRate]:
    """Runs per month by size class (total GPUs) over the window [since, until) of the history.

    The window defaults to the first start and the last end; it must be given when the history ran on
    without runs (months without a run count as zeros only inside it). Classes with no run are left out.
    """
    from scipy.stats import chi2

    table = check_runs(runs)
    begin = pd.Timestamp(since if since is not None else table["start"].min())
    finish = pd.Timestamp(until if until is not None else table["end"].max())
    begin = begin.tz_localize("UTC") if begin.tz is None else begin
    finish = finish.tz_localize("UTC") if finish.tz is None else finish
    months = (finish - begin) / pd.Timedelta(hours=MONTH_HOURS)
    if months <= 0:
        raise InputError("runs", "window", f"since {begin} must be before until {finish}")
    inside = table[(table["start"] >= begin) & (table["start"] < finish)]
    whole = int(months)
    month_of = ((inside["start"] - begin) / pd.Timedelta(hours=MONTH_HOURS)).to_numpy(dtype=float).astype(int)
    rates: list[RunRate] = []
    for low, high in classes:
        member = (inside["gpus"] >= low) & (inside["gpus"] <= (high if high is not None else np.inf))
        count = int(member.sum())
        if count == 0:
            continue
        counts = (
            np.bincount(month_of[member.to_numpy()], minlength=whole + 1)[:whole] if whole else np.array([])
        )
        rate = count / months
        law, dispersion = "poisson", None
        if whole >= 3 and counts.var(ddof=1) > counts.mean() > 0:
            law = "negative-binomial"
            dispersion = float(counts.mean() ** 2 / (counts.var(ddof=1) - counts.mean()))
            half = 1.96 * math.sqrt(counts.var(ddof=1) / whole)
            low_ci, high_ci = max(0.0, rate - half), rate + half
        else:
            low_ci = float(chi2.ppf(0.025, 2 * count) / 2) / months
            high_ci = float(chi2.ppf(0.975, 2 * count + 2) / 2) / months
        rates.append(
            RunRate(
                size_class(low, high), low, high, count, round(float(months), 6), float(rate),
                float(low_ci), float(high_ci), law, dispersion, tuple(int(c) for c in counts),
            )
        )  # fmt: skip
    return rates


def sample_runs(
    runs: pd.DataFrame,
    rates: Sequence[RunRate],
    start: datetime | pd.Timestamp,
    hours: int,
    n_samples: int = DEFAULT_PATHS,
    seed: int = 0,
) -> pd.DataFrame:
    """Sampled future run sets over ``hours`` from ``start``: one row per run, ``sample`` = which future.

    Per sample and class the count is drawn from the class's law (Poisson, or negative binomial: the
    sum of monthly NB(r, p) draws is NB(months * r, p)); each run starts uniformly in the horizon and
    takes the nodes, GPUs per node and duration of a history run of its class drawn at random.
    """
    table = check_runs(runs)
    origin = pd.Timestamp(start)
    origin = origin.tz_localize("UTC") if origin.tz is None else origin
    rng = np.random.default_rng(seed)
    months = hours / MONTH_HOURS
    duration = (table["end"] - table["start"]).dt.total_seconds() / 3600.0
    frames: list[pd.DataFrame] = []
    for rate in rates:
        high = rate.gpus_high if rate.gpus_high is not None else np.inf
        pool = table[(table["gpus"] >= rate.gpus_low) & (table["gpus"] <= high)].index.to_numpy()
        if pool.size == 0:
            continue
        mean = rate.rate_per_month * months
        if rate.law == "negative-binomial" and rate.dispersion and mean > 0:
            r = rate.dispersion * months
            counts = rng.negative_binomial(r, r / (r + mean), size=n_samples)
        else:
            counts = rng.poisson(mean, size=n_samples)
        picks = rng.choice(pool, size=int(counts.sum()), replace=True)
        begins = origin + pd.to_timedelta(rng.uniform(0.0, hours, size=picks.size), unit="h")
        frames.append(
            pd.DataFrame(
                {
                    "sample": np.repeat(np.arange(n_samples), counts),
                    "size_class": rate.size_class,
                    "start": begins,
                    "end": begins + pd.to_timedelta(duration.to_numpy()[picks], unit="h"),
                    "nodes": table["nodes"].to_numpy()[picks],
                    "gpus_per_node": table["gpus_per_node"].to_numpy()[picks],
                }
            )
        )
    columns = ["sample", "size_class", "start", "end", "nodes", "gpus_per_node"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return (
        pd.concat(frames, ignore_index=True)
        .sort_values(["sample", "start"], kind="stable")
        .reset_index(drop=True)
    )
