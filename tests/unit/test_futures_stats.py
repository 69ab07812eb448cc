"""Weighted quantiles and CVaR of a discrete law (models/futures.py) against brute force."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.futures import cvar, weighted_quantile


def test_quantile_by_hand() -> None:
    values, weights = [30.0, 10.0, 20.0], [0.2, 0.5, 0.3]
    assert weighted_quantile(values, weights, 0.1) == 10.0
    assert weighted_quantile(values, weights, 0.5) == 10.0  # cumulative 0.5 reached at 10
    assert weighted_quantile(values, weights, 0.51) == 20.0
    assert weighted_quantile(values, weights, 0.9) == 30.0


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=12), st.integers(0, 11))
def test_cvar_of_equal_weights_is_the_mean_of_the_top(values: list[int], k: int) -> None:
    """With n equal weights and level k/n, the CVaR is the mean of the n - k largest values."""
    n = len(values)
    k = min(k, n - 1)
    top = sorted(values, reverse=True)[: n - k]
    assert cvar([float(v) for v in values], [1.0] * n, k / n) == pytest.approx(sum(top) / len(top))


@given(
    st.lists(st.tuples(st.integers(0, 100), st.integers(1, 10)), min_size=1, max_size=8),
    st.integers(1, 99),
)
def test_cvar_is_the_rockafellar_uryasev_minimum(pairs: list[tuple[int, int]], percent: int) -> None:
    """CVaR_a = min over t of t + E[(X - t)+] / (1 - a); for a discrete law the minimum is at a value."""
    values = [float(v) for v, _w in pairs]
    weights = [float(w) for _v, w in pairs]
    level = percent / 100
    total = sum(weights)
    exact = min(
        Fraction(t)
        + sum(Fraction(w) / Fraction(total) * max(Fraction(v) - Fraction(t), 0) for v, w in pairs)
        / (1 - Fraction(percent, 100))
        for t in {v for v, _w in pairs}
    )
    assert cvar(values, weights, level) == pytest.approx(float(exact), rel=1e-9, abs=1e-9)
