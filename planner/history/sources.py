"""A history from files instead of Prometheus: an OpenCost ``/allocation`` export or a usage CSV (the
format ``gpuplan chargeback`` reads), read by the same code chargeback uses (models/usage.py, without a
plan to check them against) and made the same :class:`~planner.history.result.History`.

Each row (a pod's GPUs, or one MIG slice, from ``start`` to ``end``) adds to every step it overlaps in
proportion to the overlap: the value at step ``t`` is the average GPUs held during ``[t, t + step)``
(Prometheus gives the GPUs held at the instant ``t``; over an hour of whole pods the two agree). The
series key is the row's namespace (else its team), its team and its project (the workload label), so the
default mapping makes each project a service of its team. A file knows no monitoring gaps: every step is
measured; no row means 0 GPUs.

Training runs: a row with a job (OpenCost: the first gang label of queries.py the pod carries, e.g.
``batch.kubernetes.io/job-name``; usage CSV: the ``job`` column) and whole GPUs is a pod of a gang, not
service demand (as the Prometheus ``allocated`` query leaves gang pods out). The rows of one namespace
(else team) and job are grouped as runs.py groups Prometheus gangs: the file's exact times give, for
each moment between two row starts or ends, the GPUs per node (``properties.node`` / the ``node``
column; without one, each pod is a node of its own) and the pods, and runs.py makes the runs (start =
the first pod's start, end = the last pod's end; ``truncated`` when it starts at the file's first
instant or ends at its last, where an export's window may have cut it). A file with no job gets a
warning naming the labels or the column looked for. MIG rows stay service demand (a gang holds whole
GPUs).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from models.errors import InputError
from models.naming import safe_name
from models.usage import UsageRow, from_opencost, read_usage
from planner.history.assemble import Measured, services_from
from planner.history.mapping import Mapping, SeriesKey
from planner.history.queries import DEFAULT_GANG_LABELS
from planner.history.result import History, Provenance, Run, SourceKind
from planner.history.runs import Gangs, Held, runs_of
from planner.history.series import grid, short_history, unix_seconds

__all__ = ["file_runs", "read_opencost_history", "read_usage_history", "rows_history"]

#: OpenCost knows no offering; chargeback's reader needs one, demand does not use it.
_NO_OFFERING = "history:unknown:unknown"


def read_usage_history(
    path: Path, mapping: Mapping, step: timedelta, say: Callable[[str], None] | None = None
) -> History:
    """The history in the usage CSV at ``path`` (module docstring)."""
    if say is not None:
        say(f"reading the usage CSV {path}")
    looked_for = "no row has a job (the usage CSV's job column)"
    return rows_history(read_usage(path, None), mapping, step, "usage", str(path), looked_for)


def read_opencost_history(
    path: Path,
    mapping: Mapping,
    step: timedelta,
    say: Callable[[str], None] | None = None,
    job_labels: Sequence[str] = DEFAULT_GANG_LABELS,
) -> History:
    """The history in the OpenCost ``/allocation`` JSON export at ``path`` (module docstring); a pod's
    job is the first of ``job_labels`` it carries."""
    if say is not None:
        say(f"reading the OpenCost export {path}")
    rows = from_opencost(path, None, _NO_OFFERING, job_labels=job_labels)
    looked_for = f"no pod carries a job label (properties.labels: {', '.join(job_labels)})"
    return rows_history(rows, mapping, step, "opencost", str(path), looked_for)


def rows_history(
    rows: list[UsageRow],
    mapping: Mapping,
    step: timedelta,
    source: SourceKind,
    location: str,
    looked_for: str = "no row has a job",
) -> History:
    """Usage rows as a History on a ``step`` grid from the first row's start to the last row's end;
    ``looked_for`` ends the warning given when no row is a gang's pod."""
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
    gang_rows = [r for r in rows if _in_gang(r)]
    for r in rows:
        if _in_gang(r):
            continue
        resource = "" if r.mig_profile is None else "nvidia_com_mig_" + r.mig_profile.replace(".", "_")
        amount = r.gpus if r.gpus is not None else 1.0
        _spread(values[(_key(r), resource)], r.start.timestamp(), r.end.timestamp(), first, seconds, amount)
    measured = [Measured(key, array, resource) for (key, resource), array in sorted(values.items())]
    covered = np.ones(len(index), dtype=bool)
    services, warnings = services_from(measured, mapping, index, covered, step)
    runs = file_runs(gang_rows, mapping, index, (min(r.start for r in rows), max(r.end for r in rows)))
    if not runs:
        warnings.append(f"{source}: no training runs were read: {looked_for}; their GPUs are in the services")
    short = short_history(index, step)
    if short:
        warnings.append(short)
    provenance = Provenance(source=source, location=location, start=start, end=end, step=step)
    return History(index, services, tuple(runs), provenance, warnings=tuple(warnings))


def _in_gang(row: UsageRow) -> bool:
    """A pod of a training run: it has a job and holds whole GPUs (not a MIG slice)."""
    return bool(row.job) and row.gpus is not None


def _key(row: UsageRow) -> SeriesKey:
    return SeriesKey(row.namespace or row.team, row.team, row.project)


def file_runs(
    rows: list[UsageRow], mapping: Mapping, index: pd.DatetimeIndex, window: tuple[datetime, datetime]
) -> list[Run]:
    """The runs of the gang pods ``rows`` on the grid ``index``: per namespace and job, what it held
    between each two of its rows' starts and ends (runs.Held) on every step that stretch overlaps, then
    runs.runs_of. ``window``: the file's first and last instants. The team is the mapping's for the
    first row's key, else its team."""
    if not rows or len(index) == 0:
        return []
    stamps = unix_seconds(index)
    origin = int(stamps[0])
    seconds = int(stamps[1] - stamps[0]) if len(index) > 1 else 3600
    by_gang: dict[tuple[str, str], list[UsageRow]] = defaultdict(list)
    for r in rows:
        by_gang[(r.namespace or r.team, r.job)].append(r)
    gangs: Gangs = defaultdict(dict)
    teams: dict[tuple[str, str], str] = {}
    for key, group in by_gang.items():
        target = mapping.target(_key(group[0]))
        teams[key] = target.team if target is not None else safe_name(group[0].team)
        for held, (low, high) in _moments(group):
            first = int((low.timestamp() - origin) // seconds)
            after = min(len(index), math.ceil((high.timestamp() - origin) / seconds))
            for at in range(first, after):
                gangs[key].setdefault(at, []).append(held)
    covered = np.ones(len(index), dtype=bool)
    return runs_of(gangs, index, covered, lambda namespace, gang: teams[(namespace, gang)], window)


def _moments(group: list[UsageRow]) -> list[tuple[Held, tuple[datetime, datetime]]]:
    """What the rows of one gang held between each two consecutive instants at which a row starts or
    ends: GPUs per node (a row without a node is a node of its own), the pods (a CSV row is a pod). An
    instant where one row of a pod ends and its next begins (OpenCost's windows) is no moment, so the
    two never add up."""
    events = sorted(
        [(r.start, 1, i) for i, r in enumerate(group)] + [(r.end, 0, i) for i, r in enumerate(group)]
    )
    active: set[int] = set()
    moments = []
    for n, (at, starts, i) in enumerate(events):
        if starts:
            active.add(i)
        else:
            active.discard(i)
        after = events[n + 1][0] if n + 1 < len(events) else at
        if after <= at or not active:
            continue
        held = Held(span=(at, after))
        for k in sorted(active):
            r = group[k]
            pod = r.pod or f"row {r.row}"
            node = r.node or pod
            held.nodes[node] = held.nodes.get(node, 0.0) + float(r.gpus or 0.0)
            held.pods.add(pod)
        moments.append((held, (at, after)))
    return moments


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
