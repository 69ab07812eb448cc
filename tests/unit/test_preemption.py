"""Spot preemption overhead: closed form vs Monte Carlo, Young/Daly interval, validation."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from models.preemption import (
    DEFAULT_RESTART_MINUTES,
    DEFAULT_WRITE_MINUTES,
    SpotOverhead,
    _simulate_walls,
    expected_wall_hours,
    simulate_wall_hours,
    spot_overhead,
    young_daly_interval,
)

# (nodes, per-node rate /h, write min, restart min, work h, Monte Carlo runs). Runs are chosen so that the
# Monte Carlo standard error is well below the 3% tolerance (asserted below); rare interruptions need more.
PARAMETER_SETS = [
    (1, 0.005, 1.0, 5.0, 20.0, 400_000),
    (1, 0.02, 10.0, 20.0, 100.0, 100_000),
    (16, 0.01, 5.0, 10.0, 168.0, 20_000),
    (16, 0.02, 10.0, 20.0, 720.0, 5_000),
    (64, 0.005, 2.0, 15.0, 72.0, 20_000),
    (64, 0.02, 10.0, 20.0, 720.0, 2_000),
]


def test_defaults_are_documented_assumptions() -> None:
    assert DEFAULT_WRITE_MINUTES == 5.0
    assert DEFAULT_RESTART_MINUTES == 10.0


def test_zero_rate_costs_exactly_the_writes() -> None:
    # 100 h in 8 h segments: 13 segments, 12 writes (none after the last, 4 h, segment).
    assert expected_wall_hours(100.0, 8.0, 0.25, 1.0, 0.0) == 100.0 + 12 * 0.25
    # Work that is an exact multiple of the interval gets no empty trailing segment.
    assert expected_wall_hours(30.0, 0.1, 0.5, 1.0, 0.0) == pytest.approx(30.0 + 299 * 0.5, rel=1e-12)
    overhead = spot_overhead(100.0, 4, 0.0, write_minutes=15.0, restart_minutes=10.0, interval_hours=8.0)
    assert overhead.expected_wall_hours == 103.0
    assert overhead.expected_overhead == pytest.approx(0.03, rel=1e-12)
    assert overhead.expected_interruptions == 0.0
    assert simulate_wall_hours(100.0, 8.0, 0.25, 1.0, 0.0, runs=10, seed=0) == 103.0


def test_zero_rate_without_interval_never_checkpoints() -> None:
    overhead = spot_overhead(50.0, 8, 0.0, write_minutes=5.0, restart_minutes=10.0)
    assert overhead == SpotOverhead(0.0, 50.0, 50.0, 0.0, 0.0)


def test_single_segment_closed_form() -> None:
    # One segment of L = 2 h at lambda = 0.1: (e^{0.2} - 1)(10 + 0.5).
    assert expected_wall_hours(2.0, 5.0, 0.1, 0.5, 0.1) == pytest.approx(math.expm1(0.2) * 10.5, rel=1e-12)


def test_young_daly_first_order_is_young() -> None:
    for c, m in [(1e-4, 10.0), (1e-3, 100.0), (1 / 60, 1000.0)]:
        young = math.sqrt(2 * c * m)
        ratio = young_daly_interval(c, m) / young
        # Daly's correction relative to Young: (1/3) sqrt(C/2M) - C / sqrt(2CM) = -(2/3) sqrt(C/2M), + O(C/M).
        assert ratio == pytest.approx(1.0 - 2 * math.sqrt(c / (2 * m)) / 3, abs=c / m)
        assert abs(ratio - 1.0) < 0.01


def test_young_daly_higher_order_and_large_write() -> None:
    c, m = 0.5, 4.0
    x = c / (2 * m)
    expected = math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c
    assert young_daly_interval(c, m) == pytest.approx(expected, rel=1e-15)
    assert young_daly_interval(3.0, 1.0) == 1.0  # C >= 2M -> M
    assert young_daly_interval(2.0, 1.0) == 1.0
    assert young_daly_interval(0.1, math.inf) == math.inf


def test_young_daly_is_the_continuous_optimum() -> None:
    # Per unit of work the model costs (e^{lambda(tau+C)} - 1)/tau times a constant (ignoring the shorter
    # last segment); Daly's estimate should sit on its minimizer while C is small against M.
    for lam, c in [(0.005, 1 / 60), (0.16, 5 / 60), (1.28, 10 / 60), (1.28, 1 / 3)]:
        tau = young_daly_interval(c, 1 / lam)
        res = minimize_scalar(
            lambda t, lam=lam, c=c: math.expm1(lam * (t + c)) / t,
            bounds=(tau / 10, tau * 10),
            method="bounded",
            options={"xatol": 1e-10},
        )
        assert tau == pytest.approx(res.x, rel=0.01)


@pytest.mark.parametrize(("nodes", "rate", "write_min", "restart_min", "work", "runs"), PARAMETER_SETS)
def test_formula_matches_monte_carlo(
    nodes: int, rate: float, write_min: float, restart_min: float, work: float, runs: int
) -> None:
    """Relative error on the overhead (E - W)/W, formula vs Monte Carlo of the same process, within 3%."""
    overhead = spot_overhead(work, nodes, rate, write_min, restart_min)
    args = (work, overhead.checkpoint_interval_hours, write_min / 60, restart_min / 60, nodes * rate)
    walls = _simulate_walls(*args, runs=runs, seed=20240611 + nodes)
    mc_overhead = walls.mean() / work - 1.0
    standard_error = walls.std(ddof=1) / math.sqrt(runs) / work
    assert standard_error < 0.01 * overhead.expected_overhead  # so 3% is > 3 sigma
    assert mc_overhead == pytest.approx(overhead.expected_overhead, rel=0.03)
    assert simulate_wall_hours(*args, runs=runs, seed=20240611 + nodes) == pytest.approx(
        walls.mean(), rel=1e-12
    )
    assert overhead.expected_wall_hours == pytest.approx(expected_wall_hours(*args), rel=1e-15)


def test_monte_carlo_interruption_count_and_explicit_interval() -> None:
    # A non-dividing interval (last segment 1 h, no write) and the interruption count.
    work, tau, c, r, lam = 31.0, 3.0, 0.2, 0.3, 0.08
    exact = expected_wall_hours(work, tau, c, r, lam)
    mc = simulate_wall_hours(work, tau, c, r, lam, runs=100_000, seed=7)
    assert (mc - work) / work == pytest.approx((exact - work) / work, rel=0.03)
    overhead = spot_overhead(work, 2, lam / 2, c * 60, r * 60, interval_hours=tau)
    assert overhead.expected_interruptions == pytest.approx(
        10 * math.expm1(lam * (tau + c)) + math.expm1(lam)
    )


def test_monte_carlo_is_reproducible() -> None:
    args = (48.0, 2.0, 0.1, 0.2, 0.3)
    assert simulate_wall_hours(*args, runs=1000, seed=3) == simulate_wall_hours(*args, runs=1000, seed=3)
    assert simulate_wall_hours(*args, runs=1000, seed=3) != simulate_wall_hours(*args, runs=1000, seed=4)


def test_overhead_grows_with_gang_size() -> None:
    for rate, write, restart in [(0.005, 1.0, 5.0), (0.02, 10.0, 20.0)]:
        gangs = (1, 2, 4, 8, 16, 32, 64)
        overheads = [spot_overhead(240.0, n, rate, write, restart).expected_overhead for n in gangs]
        assert all(a < b for a, b in pairwise(overheads))
        rates = [spot_overhead(240.0, n, rate, write, restart).gang_interruptions_per_hour for n in (1, 64)]
        assert rates == [rate, 64 * rate]


@settings(max_examples=60, deadline=None)
@given(
    work=st.floats(1.0, 1000.0),
    tau=st.floats(0.05, 50.0),
    write=st.floats(0.0, 0.5),
    restart=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
)
@example(work=1.0, tau=1.0, write=0.0, restart=0.0, lam=5e-324)  # subnormal rate: 1/lambda overflows
def test_expected_wall_properties(work: float, tau: float, write: float, restart: float, lam: float) -> None:
    wall = expected_wall_hours(work, tau, write, restart, lam)
    no_failures = expected_wall_hours(work, tau, write, restart, 0.0)
    assert wall >= no_failures * (1 - 1e-12)
    assert no_failures >= work
    assert expected_wall_hours(work, tau, write, restart, lam + 0.1) >= wall


@pytest.mark.parametrize(("nodes", "rate", "write_min", "restart_min", "work", "runs"), PARAMETER_SETS)
def test_young_daly_nearly_minimizes_exact_wall_time(
    nodes: int, rate: float, write_min: float, restart_min: float, work: float, runs: int
) -> None:
    """E[T] at the Young/Daly interval is within 1% of the numeric minimum of the exact E[T] over tau."""
    del runs
    lam, c, r = nodes * rate, write_min / 60, restart_min / 60
    chosen = spot_overhead(work, nodes, rate, write_min, restart_min)
    tau = chosen.checkpoint_interval_hours

    def wall(t: float) -> float:
        return expected_wall_hours(work, t, c, r, lam)

    lo, hi = tau / 4, min(4 * tau, work)
    # E[T] has a sawtooth in tau (ceil(W/tau) segments), so take the better of a bounded search and a grid.
    res = minimize_scalar(wall, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
    numeric_min = min(res.fun, *(wall(t) for t in np.geomspace(lo, hi, 2000)))
    assert chosen.expected_wall_hours <= numeric_min * 1.01


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"work_hours": 0.0}, "work_hours must be > 0"),
        ({"work_hours": -5.0}, "work_hours must be > 0"),
        ({"work_hours": math.nan}, "work_hours must be finite"),
        ({"nodes": 0}, "nodes must be an integer >= 1"),
        ({"nodes": 2.5}, "nodes must be an integer >= 1"),
        ({"nodes": True}, "nodes must be an integer >= 1"),
        ({"per_node_rate_per_hour": -0.01}, "per_node_rate_per_hour must be >= 0"),
        ({"per_node_rate_per_hour": math.inf}, "per_node_rate_per_hour must be finite"),
        ({"write_minutes": -1.0}, "write_minutes must be >= 0"),
        ({"restart_minutes": -1.0}, "restart_minutes must be >= 0"),
        ({"interval_hours": 0.0}, "interval_hours must be > 0"),
        ({"write_minutes": 0.0}, "give interval_hours explicitly"),
        ({"work_hours": "10"}, "work_hours must be a number"),
    ],
)
def test_spot_overhead_rejects_bad_input(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {
        "work_hours": 10.0,
        "nodes": 2,
        "per_node_rate_per_hour": 0.01,
        "write_minutes": 5.0,
        "restart_minutes": 10.0,
    }
    with pytest.raises(ValueError, match=message):
        spot_overhead(**{**base, **kwargs})  # type: ignore[arg-type]


def test_other_functions_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="write_hours must be > 0"):
        young_daly_interval(0.0, 10.0)
    with pytest.raises(ValueError, match="mtbf_hours must be > 0"):
        young_daly_interval(0.1, 0.0)
    with pytest.raises(ValueError, match="interval_hours must be > 0"):
        expected_wall_hours(10.0, -1.0, 0.1, 0.1, 0.1)
    with pytest.raises(ValueError, match="rate_per_hour must be >= 0"):
        expected_wall_hours(10.0, 1.0, 0.1, 0.1, -0.1)
    with pytest.raises(ValueError, match="runs must be an integer >= 1"):
        simulate_wall_hours(10.0, 1.0, 0.1, 0.1, 0.1, runs=0, seed=1)
    with pytest.raises(ValueError, match="seed must be an integer"):
        simulate_wall_hours(10.0, 1.0, 0.1, 0.1, 0.1, runs=10, seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="draws"):
        simulate_wall_hours(10.0, 10.0, 0.1, 0.1, 5.0, runs=1000, seed=1)


def test_hopeless_job_is_infinite_not_an_error() -> None:
    assert expected_wall_hours(1000.0, 1000.0, 0.0, 0.1, 10.0) == math.inf
