"""A history from files instead of Prometheus: an OpenCost ``/allocation`` export or a usage CSV (the
format ``gpuplan chargeback`` reads), read by the same code chargeback uses (models/usage.py, without a
plan to check them against) and made the same :class:`~planner.history.result.History`.

Each row (a pod's GPUs, or one MIG slice, from ``start`` to ``end``) adds to every step it overlaps in
proportion to the overlap: the value at step ``t`` is the average GPUs held during ``[t, t + step)``
(Prometheus gives the GPUs held at the instant ``t``; over an hour of whole pods the two agree). The
series key is the row's namespace (else its team), its team and its project (the workload label), so the
default mapping makes each project a service of its team. A file knows no monitoring gaps (every step is
measured; no row means 0 GPUs) and no gangs: no training runs are read from it, and a warning says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from models.errors import InputError
from models.usage import UsageRow, from_opencost, read_usage
from planner.history.assemble import Measured, services_from
from planner.history.mapping import Mapping, SeriesKey
from planner.history.result import History, Provenance, SourceKind
from planner.history.series import grid, short_history

__all__ = ["read_opencost_history", "read_usage_history", "rows_history"]

#: OpenCost knows no offering; chargeback's reader needs one, demand does not use it.
_NO_OFFERING = "history:unknown:unknown"


def read_usage_history(
    path: Path, mapping: Mapping, step: timedelta, say: Callable[[str], None] | None = None
) -> History:
    """The history in the usage CSV at ``path`` (module docstring)."""
    if say is not None:
        say(f"reading the usage CSV {path}")
    return rows_history(read_usage(path, None), mapping, step, "usage", str(path))


def read_opencost_history(
    path: Path, mapping: Mapping, step: timedelta, say: Callable[[str], None] | None = None
) -> History:
    """The history in the OpenCost ``/allocation`` JSON export at ``path`` (module docstring)."""
    if say is not None:
        say(f"reading the OpenCost export {path}")
    return rows_history(from_opencost(path, None, _NO_OFFERING), mapping, step, "opencost", str(path))


def rows_history(
    rows: list[UsageRow], mapping: Mapping, step: timedelta, source: SourceKind, location: str
) -> History:
    """Usage rows as a History on a ``step`` grid from the first row's start to the last row's end."""
    seconds = int(step.total_seconds())
    if seconds <= 0:
        raise InputError(None, "--step", "must be positive")
    first = int(min(r.start for r in rows).timestamp()) // seconds * seconds
    last = -(-int(max(r.end for r in rows).timestamp()) // seconds) * seconds - seconds
    start, end = datetime.fromtimestamp(first, UTC), datetime.fromtimestamp(last, UTC)
    index = grid(start, end, step)
    if len(index) > 20 * 8784 * 3600 // seconds:
        raise InputError(location, None, f"spans {len(index):,} steps of {step}: give a longer --step")
    values: dict[tuple[SeriesKey, str], np.ndarray] = defaultdict(lambda: np.zeros(len(index)))
    for r in rows:
        key = SeriesKey(r.namespace or r.team, r.team, r.project)
        resource = "" if r.mig_profile is None else "nvidia_com_mig_" + r.mig_profile.replace(".", "_")
        amount = r.gpus if r.gpus is not None else 1.0
        _spread(values[(key, resource)], r.start.timestamp(), r.end.timestamp(), first, seconds, amount)
    measured = [Measured(key, array, resource) for (key, resource), array in sorted(values.items())]
    covered = np.ones(len(index), dtype=bool)
    services, warnings = services_from(measured, mapping, index, covered, step)
    warnings.append(
        f"{source} files hold no gangs: no training runs were read (their GPUs are in the services)"
    )
    short = short_history(index, step)
    if short:
        warnings.append(short)
    provenance = Provenance(source=source, location=location, start=start, end=end, step=step)
    return History(index, services, (), provenance, warnings=tuple(warnings))


def _spread(target: np.ndarray, start: float, end: float, origin: int, seconds: int, amount: float) -> None:
    """Add ``amount`` x (the share of each step ``[t, t + step)`` that ``[start, end)`` covers)."""
    i, j = int((start - origin) // seconds), int((end - origin) // seconds)
    if i == j:
        target[i] += amount * (end - start) / seconds
        return
    target[i] += amount * (origin + (i + 1) * seconds - start) / seconds
    target[i + 1 : j] += amount
    if j < len(target):
        target[j] += amount * (end - (origin + j * seconds)) / seconds
