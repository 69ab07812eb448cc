"""Forecasts, training-run rates and backtests on series whose law the tests know (issue 40, point 2).

Each law is drawn with a seed: daily and weekly sinusoids, linear growth and Gaussian noise of known
sigma. The bounds are stated where they are checked; each test fails without the behaviour it names.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from planner.history.backtest import backtest, season_for, seasonal_naive
from planner.history.forecast import (
    Forecast,
    forecast,
    forecast_many,
    sample_runs,
    training_rates,
)

SIGMA = 2.0
START = pd.Timestamp("2026-01-05", tz="UTC")  # a Monday


def law(hours: int, base: float = 50.0, growth: float = 0.01) -> np.ndarray:
    t = np.arange(hours)
    return base + growth * t + 10 * np.sin(2 * np.pi * t / 24) + 5 * np.sin(2 * np.pi * t / 168)


def drawn(hours: int, seed: int = 0, **kwargs: float) -> tuple[pd.Series, np.ndarray]:
    truth = law(hours, **kwargs)
    noisy = truth + np.random.default_rng(seed).normal(0.0, SIGMA, hours)
    index = pd.date_range(START, periods=hours, freq="h")
    return pd.Series(noisy, index=index, name="svc"), truth


@pytest.fixture(scope="module")
def known() -> tuple[pd.Series, np.ndarray, Forecast]:
    """Eight weeks fitted, a month (720 h) held out: the law and its forecast."""
    series, truth = drawn(8 * 168 + 720, seed=3)
    fitted = forecast(series.iloc[: 8 * 168], 720, n_paths=400, seed=7)
    return series, truth, fitted


def test_p50_tracks_the_law_and_the_band_covers_a_held_out_month(known) -> None:
    series, truth, fitted = known
    held = series.to_numpy()[8 * 168 :]
    p50 = fitted.quantiles[0.5].to_numpy()
    assert fitted.model == "MSTL(24,168)+ETS(A,A,N)"  # growth is seen: the trend model wins
    # the median's error against the noiseless law: well under one noise sigma (the noise itself is 2)
    assert np.abs(p50 - truth[8 * 168 :]).mean() < 0.75 * SIGMA
    inside = (held >= fitted.quantiles[0.1].to_numpy()) & (held <= fitted.quantiles[0.9].to_numpy())
    assert 0.70 <= inside.mean() <= 0.95


def test_quantiles_are_monotone_and_paths_agree_with_them(known) -> None:
    _, _, fitted = known
    table = fitted.quantiles.to_numpy()
    assert list(fitted.quantiles.columns) == [0.1, 0.5, 0.9]
    assert (np.diff(table, axis=1) >= 0).all()
    assert fitted.paths.shape == (400, 720)
    assert fitted.quantiles.index[0] == START + pd.Timedelta(hours=8 * 168)
    # the paths' own quantiles per hour, averaged: within 15 % of the band's half-width of the stated ones
    half = (table[:, 2] - table[:, 0]).mean() / 2
    for column, q in enumerate((0.1, 0.5, 0.9)):
        empirical = np.quantile(fitted.paths, q, axis=0)
        assert abs((empirical - table[:, column]).mean()) < 0.15 * half


def test_paths_are_reproducible_with_the_seed_and_differ_with_another() -> None:
    series, _ = drawn(3 * 168, seed=1)
    one = forecast(series, 48, n_paths=20, seed=5)
    again = forecast(series, 48, n_paths=20, seed=5)
    other = forecast(series, 48, n_paths=20, seed=6)
    np.testing.assert_array_equal(one.paths, again.paths)
    assert not np.allclose(one.paths, other.paths)
    pd.testing.assert_frame_equal(one.quantiles, other.quantiles)  # the quantiles do not depend on the seed


def test_a_series_near_zero_never_goes_negative() -> None:
    series, _ = drawn(3 * 168, seed=2, base=0.5, growth=-0.002)
    series = series.clip(lower=0.0)  # demand near zero, often exactly zero
    fitted = forecast(series, 336, n_paths=50, seed=0)
    assert (fitted.quantiles.to_numpy() >= 0).all()
    assert (fitted.paths >= 0).all()
    assert (fitted.quantiles[0.1] == 0).any()  # the clip did something: without it P10 would be < 0


def test_short_histories_fall_back_and_say_so() -> None:
    ten_days, _ = drawn(10 * 24, seed=4)
    daily = forecast(ten_days, 24, seed=0)
    assert daily.model.startswith("MSTL(24)+ETS(")
    assert "daily cycle only" in daily.reason
    one_day, _ = drawn(30, seed=4)
    flat = forecast(one_day, 24, n_paths=30, seed=0)
    assert flat.model.startswith("flat")
    assert "very short history (30 h" in flat.reason
    recent = one_day.to_numpy()[-24:]
    np.testing.assert_allclose(flat.quantiles.iloc[0].to_numpy(), np.quantile(recent, [0.1, 0.5, 0.9]))
    assert set(np.unique(flat.paths)) <= set(recent)
    assert "flat" in flat.describe() and "30 h of history" in flat.describe()


def test_horizon_as_an_end_time_and_bad_input_named() -> None:
    series, _ = drawn(60, seed=0)
    end = series.index[-1] + pd.Timedelta(hours=11)
    assert forecast(series, end, n_paths=5).hours == 10  # the hours strictly before the end
    gappy = series.drop(series.index[10])
    with pytest.raises(InputError, match=r"svc: at 2026-01-05T11:00:00\+00:00: not a regular 1 h step"):
        forecast(gappy, 24)
    with pytest.raises(InputError, match=r"svc: at .*: NaN"):
        forecast(series.where(series.index != series.index[3]), 24)
    with pytest.raises(InputError, match="must be in UTC"):
        forecast(series.tz_localize(None), 24)
    with pytest.raises(InputError, match="negative demand"):
        forecast(series - 1000, 24)
    with pytest.raises(InputError, match="quantiles"):
        forecast(series, 24, quantiles=(0.1, 1.0))


def test_forecast_many_does_not_depend_on_order() -> None:
    a, _ = drawn(60, seed=0)
    b, _ = drawn(60, seed=1)
    first = forecast_many({"a": a, "b": b}, 12, n_paths=8, seed=3)
    second = forecast_many({"b": b, "a": a}, 12, n_paths=8, seed=3)
    np.testing.assert_array_equal(first["a"].paths, second["a"].paths)
    assert not np.array_equal(first["a"].paths, first["b"].paths[:, :12])


# ---- training runs ----------------------------------------------------------------------------------


def poisson_runs(
    rate_per_month: float, months: int, seed: int
) -> tuple[pd.DataFrame, pd.Timestamp, pd.Timestamp]:
    """Runs of 8 GPUs (one node) arriving as a Poisson process, plus a few 64-GPU gangs."""
    rng = np.random.default_rng(seed)
    month = pd.Timedelta(hours=730.5)
    total = rng.poisson(rate_per_month * months)
    starts = START + pd.to_timedelta(rng.uniform(0, months * 730.5, total), unit="h")
    small = pd.DataFrame(
        {"start": starts, "end": starts + pd.Timedelta(hours=5), "nodes": 1, "gpus_per_node": 8}
    )
    big_starts = START + pd.to_timedelta([100.0, 2000.0, 5000.0], unit="h")
    big = pd.DataFrame(
        {"start": big_starts, "end": big_starts + pd.Timedelta(hours=48), "nodes": 8, "gpus_per_node": 8}
    )
    return pd.concat([small, big], ignore_index=True), START, START + months * month


def test_training_rate_recovers_a_known_poisson_rate() -> None:
    runs, since, until = poisson_runs(40.0, 24, seed=11)
    rates = {r.size_class: r for r in training_rates(runs, since, until)}
    small = rates["1-8 GPUs"]
    assert small.law == "poisson"
    assert small.ci_low < 40.0 < small.ci_high
    assert small.ci_high - small.ci_low < 10.0  # 24 months pin it down: +-~2.5 per month
    assert abs(small.rate_per_month - 40.0) < 4.0
    assert len(small.monthly_counts) == 24 and sum(small.monthly_counts) == small.runs
    assert rates["9-64 GPUs"].runs == 3


def test_bursty_months_are_negative_binomial_and_samples_follow_the_rate() -> None:
    rng = np.random.default_rng(5)
    starts = []
    for month, count in enumerate([2, 60, 1, 55, 3, 70]):  # far more spread than a Poisson law allows
        starts += list(START + pd.to_timedelta(month * 730.5 + rng.uniform(0, 730, count), unit="h"))
    index = pd.DatetimeIndex(starts)
    runs = pd.DataFrame(
        {"start": index, "end": index + pd.Timedelta(hours=3), "nodes": 2, "gpus_per_node": 4}
    )
    (rate,) = training_rates(runs, START, START + 6 * pd.Timedelta(hours=730.5))
    assert rate.law == "negative-binomial" and rate.dispersion is not None
    sampled = sample_runs(runs, [rate], START, 730, n_samples=400, seed=1)
    per_sample = sampled.groupby("sample").size().reindex(range(400), fill_value=0)
    assert abs(per_sample.mean() - rate.rate_per_month) < 5.0
    assert per_sample.var() > 4 * per_sample.mean()  # overdispersed, as the history
    assert ((sampled["nodes"] == 2) & (sampled["gpus_per_node"] == 4)).all()
    again = sample_runs(runs, [rate], START, 730, n_samples=400, seed=1)
    pd.testing.assert_frame_equal(sampled, again)


# ---- backtest ---------------------------------------------------------------------------------------


def test_seasonal_naive_backtest_equals_a_hand_computation() -> None:
    """Three days, the last held out: season 24 h (short), baseline = day 2, band from day 2 - day 1."""
    day1 = np.array([4.0, 2.0, 6.0, 8.0] * 6)
    day2 = day1 + np.array([1.0, -1.0, 0.0, 2.0] * 6)
    day3 = np.array([5.0, 1.0, 7.0, 10.0] * 6)  # day2 is (5, 1, 6, 10)
    series = pd.Series(np.concatenate([day1, day2, day3]), index=pd.date_range(START, periods=72, freq="h"))
    result = backtest(series, 24, n_paths=10, name="tiny")
    assert result.season == 24 == season_for(48)
    # by hand: P50 = day2; actual - P50 = (0, 0, 1, 0) repeated: MAE 0.25, MAPE mean(0, 0, 1/7, 0) = 3.571 %
    assert result.baseline.mae == pytest.approx(0.25)
    assert result.baseline.mape == pytest.approx(100 * (1 / 7) / 4)
    # MASE scale: mean |day2 - day1| = mean(1, 1, 0, 2) = 1
    assert result.baseline.mase == pytest.approx(0.25)
    # differences day2 - day1 = (1, -1, 0, 2) x6, median 0.5, centred (0.5, -1.5, -0.5, 1.5): P10 = -1.5,
    # P90 = 1.5 (numpy's linear quantile of six copies each): band day2 -+ 1.5 -> every actual inside
    assert result.baseline.coverage == pytest.approx(1.0)
    np.testing.assert_allclose(result.baseline_quantiles[0.1].to_numpy(), np.maximum(day2 - 1.5, 0))
    assert result.model.mase is not None and result.model.coverage >= 0.0
    assert "seasonal naive: MAPE 3.6 %" in result.describe()


def test_seasonal_naive_steps_past_one_season_widen_by_sqrt_k() -> None:
    train = np.arange(48, dtype=float)  # differences all 24: centred 0 -> a zero-width band, P50 day 2
    table = seasonal_naive(train, 30, 24, (0.1, 0.5, 0.9))
    np.testing.assert_allclose(table[:24, 1], train[24:48])
    np.testing.assert_allclose(table[24:, 1], train[24:30])  # hour 25 ahead: two seasons back


def test_backtest_on_a_known_law_beats_the_baseline_and_says_when_mape_is_undefined() -> None:
    series, _ = drawn(6 * 168, seed=9)
    result = backtest(series, 168, n_paths=50)
    assert result.season == 168
    assert result.model.mase is not None and result.model.mase < 1.0
    assert result.earns_its_keep
    assert 0.6 <= result.model.coverage <= 0.98
    zeroed = series.copy()
    zeroed.iloc[-3] = 0.0
    with_zero = backtest(zeroed, 168, n_paths=10)
    assert with_zero.model.mape is None
    assert "MAPE undefined: 1 of 168 held-out hours are 0" in with_zero.model.notes
    with pytest.raises(InputError, match="hold out less"):
        backtest(series, len(series) - 5)


def test_a_constant_history_is_forecast_as_that_value_without_spread() -> None:
    """ETS cannot be fitted to a series that never varies (a fixed pool of GPUs): it is said, not failed."""
    index = pd.date_range("2027-01-01", periods=400, freq="h", tz="UTC")
    f = forecast(pd.Series(4.0, index=index), 48, n_paths=3)
    assert f.model == "constant" and "one value (4)" in f.reason
    assert (f.quantiles.to_numpy() == 4.0).all() and (f.paths == 4.0).all()
    varying = pd.Series(4.0 + np.sin(np.arange(400)), index=index)
    assert forecast(varying, 48, n_paths=3).model != "constant"


@pytest.mark.parametrize(("drift", "spec"), [(0.3, "A,A,N"), (0.0, "A,N,N")])
def test_the_closed_form_ets_is_statsmodels_own(drift: float, spec: str) -> None:
    """Mean, variance and sampled paths summed in closed form equal statsmodels' forecast, get_prediction
    and simulate (same draws): the speed-up changes no figure. (The drawn series are fixed by their seed:
    a drift makes AICc choose the trend, none makes it choose the level only.)"""
    import warnings

    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    from planner.history.forecast import _fit_ets

    rest = np.cumsum(np.random.default_rng(3).normal(drift, 1.0, 672)) + 50
    fitted = _fit_ets(rest)
    assert fitted["spec"] == spec
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = ETSModel(pd.Series(rest), error="add", trend="add" if spec == "A,A,N" else None).fit(
            disp=False
        )
    n, hours = len(rest), 500
    np.testing.assert_allclose(fitted["mean"](hours), np.asarray(result.forecast(hours)), atol=1e-9)
    expected_var = np.asarray(result.get_prediction(start=n, end=n + hours - 1).var_pred_mean)
    np.testing.assert_allclose(fitted["var"](hours), expected_var, rtol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        drawn = result.simulate(hours, anchor="end", repetitions=7, rng=np.random.default_rng(5))
    paths = fitted["simulate"](hours, 7, np.random.default_rng(5))
    np.testing.assert_allclose(paths, np.asarray(drawn).T, atol=1e-9)
