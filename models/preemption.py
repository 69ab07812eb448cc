"""Effective cost of running a synchronous training gang on spot capacity.

A spot job pays in wall time for three things that an uninterrupted run does not: checkpoint writes, the
compute lost when an interruption hits a segment that has not been checkpointed yet, and the restart after
each interruption. The planner turns that into an overhead factor on the spot price, so this module gives
the expected wall time of a job under an explicit model, plus a Monte Carlo of exactly the same model to
check the closed form against.

Model (all times in hours)
--------------------------
* Gang failure rate. A synchronous gang stops when any node is preempted (a series system), so with
  independent preemptions ``lambda = nodes * per_node_rate`` (FACTS.md section 3, gang failure scaling).
  Preemptions of one instance type in one AZ are strongly correlated in practice (Spot-and-Scoot: >92% of
  co-interruptions land within 3 minutes; FACTS.md section 2), so a gang in one AZ behaves more like a single
  failure domain. ``nodes * rate`` is therefore a *conservative* (pessimistic) rate for a single-AZ gang:
  the true gang rate lies between ``per_node_rate`` and ``nodes * per_node_rate``.
* Segments. The ``W = work_hours`` of useful compute is cut into ``n = ceil(W / tau)`` segments: ``n - 1``
  full segments of ``tau`` compute hours, each followed by a checkpoint write of ``C`` hours, and a last
  segment of ``W - (n - 1) tau`` compute hours with **no** checkpoint write after it (the job is finished
  when its compute is; saving the final model is part of the job on any capacity, so it is not spot
  overhead). So segment ``i`` must run for ``L_i`` hours (compute plus its write) without an interruption
  to be committed: ``L_i = tau + C`` for the full segments, ``L_n = W - (n - 1) tau``.
* Interruptions are a Poisson process of rate ``lambda`` that runs during compute *and* checkpoint writes.
  An interruption discards the partial segment (work since the last committed checkpoint, and a write in
  progress), then a restart of ``R`` hours follows. Restarts are *not* interruptible: ``R`` stands for
  getting replacement capacity and reloading the checkpoint, and it is not exposed to the clock. After the
  restart the segment is retried from its start.

Exact expectation
-----------------
For one segment of length ``L`` the number of failed attempts ``K`` is geometric with success probability
``p = e^{-lambda L}``, so ``E[K] = e^{lambda L} - 1``; a failed attempt costs ``E[X | X < L] + R`` with
``X ~ Exp(lambda)``, and ``E[X | X < L] = 1/lambda - L / (e^{lambda L} - 1)``. Hence

    E[T_seg(L)] = L + E[K] (E[X | X < L] + R) = (e^{lambda L} - 1) (1/lambda + R)

and, segments being independent, ``E[T] = sum_i E[T_seg(L_i)]`` and the expected number of interruptions is
``sum_i (e^{lambda L_i} - 1)``. At ``lambda = 0`` this is exactly ``W + (n - 1) C``: the writes only.
(This is Daly's 2006 model with a non-interruptible restart: his ``M e^{R/M}`` factor becomes ``M + R``.)

Checkpoint interval
-------------------
Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9):
``tau = sqrt(2 C M)`` with ``M = 1/lambda``. Daly (2006), "A higher order estimate of the optimum
checkpoint interval for restart dumps", FGCS 22(3):

    tau = sqrt(2CM) [1 + (1/3) sqrt(C/2M) + (1/9) (C/2M)] - C     for C < 2M,    tau = M otherwise.

Daly's formula estimates the minimizer of ``(e^{(tau + C)/M} - 1) / tau``, which is the per-unit-of-work
cost of the model above (up to the constant ``M + R``), so it is near-optimal here too (the tests check it
against a numeric minimum). FACTS.md marks the exact Daly form as quoted from memory.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

DEFAULT_WRITE_MINUTES = 5.0
"""Assumed checkpoint write time for a job that gives no checkpoint spec: a sharded write of a
mid-size model's restartable state to local NVMe / object storage (FACTS.md section 3, [U] bandwidths)."""

DEFAULT_RESTART_MINUTES = 10.0
"""Assumed restart time after a preemption for a job that gives no checkpoint spec: obtain replacement
spot capacity, start the containers and reload the last checkpoint."""

_MINUTES_PER_HOUR = 60.0
# A Monte Carlo expected to draw more exponentials than this would take minutes or never finish.
_MAX_EXPECTED_DRAWS = 5e8
# Cells (run x segment attempts) simulated per numpy batch; bounds memory at a few tens of MB.
_BATCH_CELLS = 1_000_000


@dataclass(frozen=True, slots=True)
class SpotOverhead:
    """Expected cost in wall time of running ``work_hours`` of gang compute on spot."""

    gang_interruptions_per_hour: float
    """lambda = nodes x per-node rate; conservative for a single-AZ gang (correlated preemptions)."""
    checkpoint_interval_hours: float
    """tau, compute hours between checkpoints (capped at the job's work: one segment, no writes)."""
    expected_wall_hours: float
    """Expected elapsed hours to finish the work, including writes, lost work and restarts."""
    expected_overhead: float
    """expected_wall_hours / work_hours - 1."""
    expected_interruptions: float
    """Expected number of interruptions during the run."""


def _check_finite(name: str, value: float, *, positive: bool = False) -> float:
    """Reject NaN, infinities, negatives (and zero if ``positive``) with a message naming the input."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and value <= 0.0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if value < 0.0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return value


def young_daly_interval(write_hours: float, mtbf_hours: float) -> float:
    """Daly's higher-order estimate of the optimal compute time between checkpoints.

    ``sqrt(2CM) [1 + (1/3) sqrt(C/2M) + (1/9)(C/2M)] - C`` for ``C < 2M``, else ``M``. It reduces to
    Young's ``sqrt(2CM)`` when ``C << M``. ``mtbf_hours = inf`` (no interruptions) gives ``inf``: never
    checkpoint.
    """
    c = _check_finite("write_hours", write_hours, positive=True)
    if isinstance(mtbf_hours, bool) or not isinstance(mtbf_hours, numbers.Real) or math.isnan(mtbf_hours):
        raise ValueError(f"mtbf_hours must be a number, got {mtbf_hours!r}")
    m = float(mtbf_hours)
    if m <= 0.0:
        raise ValueError(f"mtbf_hours must be > 0, got {mtbf_hours!r}")
    if math.isinf(m):
        return math.inf
    if c >= 2.0 * m:
        return m
    ratio = c / (2.0 * m)
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - c


def _segments(work_hours: float, interval_hours: float, write_hours: float) -> tuple[int, float, float]:
    """Split the work: (number of full segments, full segment length tau + C, last segment length).

    The last segment has no write after it. A relative slack of 1e-9 keeps ``W = k tau`` from growing an
    extra empty segment through rounding.
    """
    n = max(1, math.ceil(work_hours / interval_hours - 1e-9))
    last = max(0.0, work_hours - (n - 1) * interval_hours)
    return n - 1, interval_hours + write_hours, last


def _segment_expectations(length: float, restart_hours: float, rate_per_hour: float) -> tuple[float, float]:
    """(E[wall time], E[interruptions]) of committing one segment of ``length`` hours."""
    if rate_per_hour == 0.0 or length == 0.0:
        return length, 0.0
    x = rate_per_hour * length
    try:
        failures = math.expm1(x)
    except OverflowError:
        return math.inf, math.inf
    # (e^x - 1)/lambda written as L (e^x - 1)/x, which stays exact for tiny (even subnormal) lambda
    compute_and_lost = length * (failures / x if x > 1e-10 else 1.0 + x / 2.0)
    return compute_and_lost + failures * restart_hours, failures


def _check_process(
    work_hours: float, interval_hours: float, write_hours: float, restart_hours: float, rate_per_hour: float
) -> tuple[float, float, float, float, float]:
    return (
        _check_finite("work_hours", work_hours, positive=True),
        _check_finite("interval_hours", interval_hours, positive=True),
        _check_finite("write_hours", write_hours),
        _check_finite("restart_hours", restart_hours),
        _check_finite("rate_per_hour", rate_per_hour),
    )


def _expectations(
    work_hours: float, interval_hours: float, write_hours: float, restart_hours: float, rate_per_hour: float
) -> tuple[float, float]:
    full, full_len, last_len = _segments(work_hours, interval_hours, write_hours)
    wall_full, intr_full = _segment_expectations(full_len, restart_hours, rate_per_hour)
    wall_last, intr_last = _segment_expectations(last_len, restart_hours, rate_per_hour)
    wall = wall_last + (full * wall_full if full else 0.0)
    interruptions = intr_last + (full * intr_full if full else 0.0)
    return wall, interruptions


def expected_wall_hours(
    work_hours: float, interval_hours: float, write_hours: float, restart_hours: float, rate_per_hour: float
) -> float:
    """Exact expected wall time of the segment / Poisson / restart process in the module docstring.

    ``sum_i (e^{lambda L_i} - 1)(1/lambda + R)`` over the ``ceil(W/tau)`` segments, ``L_i = tau + C`` except
    the last (no write after it). ``lambda = 0`` gives ``W + (n - 1) C`` exactly. Returns ``inf`` when
    ``e^{lambda L}`` overflows (the job would practically never finish).
    """
    args = _check_process(work_hours, interval_hours, write_hours, restart_hours, rate_per_hour)
    return _expectations(*args)[0]


def spot_overhead(
    work_hours: float,
    nodes: int,
    per_node_rate_per_hour: float,
    write_minutes: float,
    restart_minutes: float,
    interval_hours: float | None = None,
) -> SpotOverhead:
    """Expected wall-time overhead of a gang of ``nodes`` spot nodes doing ``work_hours`` of compute.

    ``interval_hours=None`` uses :func:`young_daly_interval` with ``M = 1/lambda``; an interval longer than
    the job (including ``lambda = 0``: never checkpoint) is capped at ``work_hours``: one segment, no writes.
    """
    work = _check_finite("work_hours", work_hours, positive=True)
    if isinstance(nodes, bool) or not isinstance(nodes, numbers.Integral) or nodes < 1:
        raise ValueError(f"nodes must be an integer >= 1, got {nodes!r}")
    rate = _check_finite("per_node_rate_per_hour", per_node_rate_per_hour)
    write = _check_finite("write_minutes", write_minutes) / _MINUTES_PER_HOUR
    restart = _check_finite("restart_minutes", restart_minutes) / _MINUTES_PER_HOUR
    gang_rate = int(nodes) * rate
    if interval_hours is None:
        if gang_rate == 0.0:
            tau = math.inf
        elif write == 0.0:
            raise ValueError(
                "write_minutes is 0, so the optimal checkpoint interval is 0 (checkpoint continuously); "
                "give interval_hours explicitly"
            )
        else:
            tau = young_daly_interval(write, 1.0 / gang_rate)
    else:
        tau = _check_finite("interval_hours", interval_hours, positive=True)
    tau = min(tau, work)
    wall, interruptions = _expectations(work, tau, write, restart, gang_rate)
    return SpotOverhead(
        gang_interruptions_per_hour=gang_rate,
        checkpoint_interval_hours=tau,
        expected_wall_hours=wall,
        expected_overhead=wall / work - 1.0,
        expected_interruptions=interruptions,
    )


def _simulate_walls(
    work_hours: float,
    interval_hours: float,
    write_hours: float,
    restart_hours: float,
    rate_per_hour: float,
    runs: int,
    seed: int,
) -> np.ndarray:
    """Wall time of each of ``runs`` simulated jobs (see :func:`simulate_wall_hours`)."""
    work, tau, write, restart, rate = _check_process(
        work_hours, interval_hours, write_hours, restart_hours, rate_per_hour
    )
    if isinstance(runs, bool) or not isinstance(runs, numbers.Integral) or runs < 1:
        raise ValueError(f"runs must be an integer >= 1, got {runs!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    runs = int(runs)
    full, full_len, last_len = _segments(work, tau, write)
    groups = [(count, length) for count, length in ((full, full_len), (1, last_len)) if count and length > 0]
    walls = np.zeros(runs)
    if rate == 0.0:
        walls += sum(count * length for count, length in groups)
        return walls
    expected_draws = runs * sum(count * math.exp(min(rate * length, 700.0)) for count, length in groups)
    if expected_draws > _MAX_EXPECTED_DRAWS:
        raise ValueError(
            f"Monte Carlo would need about {expected_draws:.3g} draws (lambda x segment length too large or "
            "too many runs); reduce runs or use expected_wall_hours"
        )
    rng = np.random.default_rng(int(seed))
    scale = 1.0 / rate
    for count, length in groups:
        # Every (run, segment) cell is an independent renewal: draw the time to the next interruption from
        # the start of an attempt (memoryless, so a fresh draw is exact); commit if it is >= the segment
        # length, else lose the partial attempt, pay the restart and retry. Order within a run does not
        # change its total, so all cells of equal length are simulated together, in bounded batches.
        runs_per_batch = max(1, _BATCH_CELLS // count)
        for first in range(0, runs, runs_per_batch):
            batch = walls[first : first + runs_per_batch]  # a view: updates land in ``walls``
            batch += count * length  # each cell commits exactly once
            pending = np.repeat(np.arange(batch.size), count)
            while pending.size:
                arrival = rng.exponential(scale, size=pending.size)
                failed = arrival < length
                pending = pending[failed]
                batch += np.bincount(pending, weights=arrival[failed] + restart, minlength=batch.size)
    return walls


def simulate_wall_hours(
    work_hours: float,
    interval_hours: float,
    write_hours: float,
    restart_hours: float,
    rate_per_hour: float,
    runs: int,
    seed: int,
) -> float:
    """Monte Carlo mean wall time of the same process as :func:`expected_wall_hours`, event by event.

    Exponential inter-arrival times from ``numpy.random.default_rng(seed)``; vectorized over runs and
    segments. Used to test the closed form, not by the planner.
    """
    return float(
        _simulate_walls(
            work_hours, interval_hours, write_hours, restart_hours, rate_per_hour, runs, seed
        ).mean()
    )
