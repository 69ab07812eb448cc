"""A fleet's history read from Prometheus: :func:`read_prometheus` runs each role's query
(queries.py) over the window, maps the series to services (mapping.py), repairs and states gaps
(series.py), finds the training runs (runs.py), and returns a :class:`~planner.history.result.History`.

Which problems stop the read and which are warnings: the server unreachable, refusing or failing is a
:class:`~planner.history.errors.HistorySourceError`; ``allocated`` or ``coverage`` returning nothing is an
InputError (there is no demand to read: the metric is not scraped, or the query needs overriding);
``mig``, ``utilization``, ``pending`` or ``runs`` returning nothing, a namespace no service maps to,
gaps, negative values, counter resets and a history shorter than a week are warnings, each one line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from models.errors import InputError
from planner.history.assemble import Measured, services_from
from planner.history.mapping import Mapping, SeriesKey
from planner.history.prometheus import PrometheusClient, RangeSeries
from planner.history.queries import QueryConfig, Role
from planner.history.result import History, Provenance
from planner.history.runs import gang_runs
from planner.history.series import clean, gaps, grid, short_history, unix_seconds

__all__ = ["Window", "read_prometheus", "window"]


@dataclass(frozen=True)
class Window:
    """The steps read: ``start`` to ``end`` (both included), ``step`` apart, UTC."""

    start: datetime
    end: datetime
    step: timedelta

    @property
    def index(self) -> pd.DatetimeIndex:
        return grid(self.start, self.end, self.step)


def window(since: timedelta, step: timedelta, until: datetime | None = None) -> Window:
    """The ``since / step`` steps ending at ``until`` (default now) floored to the step (UTC epoch)."""
    if step <= timedelta(0) or since < step:
        raise InputError(None, "--since", f"must be at least one step ({step})")
    at = (until or datetime.now(UTC)).astimezone(UTC)
    seconds = int(step.total_seconds())
    end = datetime.fromtimestamp(int(at.timestamp()) // seconds * seconds, UTC)
    steps = int(since / step)
    return Window(end - (steps - 1) * step, end, step)


def read_prometheus(
    client: PrometheusClient,
    config: QueryConfig,
    mapping: Mapping,
    span: Window,
    say: Callable[[str], None] | None = None,
) -> History:
    """The history of the window ``span`` from ``client``'s server (module docstring)."""
    index = span.index

    def run(role: Role) -> list[RangeSeries]:
        if say is not None:
            say(f"reading {role} from {client.shown}")
        return client.query_range(config.query(role), span.start, span.end, span.step)

    def empty(role: Role, hint: str) -> InputError:
        return InputError(
            client.shown,
            f"queries.{role}",
            f"the query returned no series from {_stamp(span.start)} to {_stamp(span.end)}: {hint}; "
            "see gpuplan demand --show-queries, override it with --queries",
        )

    warnings: list[str] = []
    coverage = run("coverage")
    if not coverage:
        raise empty("coverage", "kube-state-metrics is not scraped by this server, or not in this window")
    covered = np.zeros(len(index), dtype=bool)
    for item in coverage:
        covered |= ~np.isnan(_on_grid(item, index))
    holes = gaps(index, covered)
    if holes:
        total = sum(g.steps for g in holes)
        warnings.append(
            f"the monitoring saw nothing at {total} of {len(index)} steps ({len(holes)} gaps, the first "
            f"{holes[0].text()}): every series is filled there, history.json says how"
        )
    if not covered.any():
        raise empty("coverage", "it has no sample on the step grid")
    counters = set(config.counters)
    allocated = run("allocated")
    if not allocated:
        raise empty("allocated", "no running pod requested nvidia.com/gpu in the window")
    team_key, workload_key = config.team_key, config.workload_key
    measured = [_measured(s, index, team_key, workload_key) for s in allocated]
    mig = run("mig")
    measured += [_measured(s, index, team_key, workload_key, s.labels.get("resource", "mig")) for s in mig]
    services, found = services_from(
        measured, mapping, index, covered, span.step, counter="allocated" in counters
    )
    warnings += found
    if not services:
        warnings.append("no measured series maps to a service: every namespace was left out (see above)")
    utilization = _by_label(run("utilization"), "exported_namespace", index, covered, absent_is_zero=False)
    pending = _by_label(
        run("pending"), "cluster_queue", index, covered, absent_is_zero=True, counter="pending" in counters
    )
    for role, found_series in (("utilization", utilization), ("pending", pending)):
        if not found_series:
            warnings.append(f"{role}: the query returned no series (optional; the page will show none)")
    pod_series = run("runs")
    team_of = _team_of(mapping)
    runs = gang_runs(pod_series, config.gang_keys, index, covered, team_of)
    short = short_history(index, span.step)
    if short:
        warnings.append(short)
    provenance = Provenance(
        source="prometheus",
        location=client.shown,
        start=span.start,
        end=span.end,
        step=span.step,
        queries={str(role): text for role, text in config.all().items()},
        gaps=tuple(holes),
        requests=client.requests,
    )
    return History(index, services, tuple(runs), provenance, utilization, pending, tuple(warnings))


def _on_grid(item: RangeSeries, index: pd.DatetimeIndex) -> np.ndarray:
    """The samples of ``item`` at the grid's steps (NaN where none)."""
    values = np.full(len(index), np.nan)
    if not item.samples or not len(index):
        return values
    seconds = unix_seconds(index)
    stamps = np.array([t for t, _ in item.samples], dtype=float)
    seen = np.array([v for _, v in item.samples], dtype=float)
    where = np.searchsorted(seconds, stamps)
    ok = (where < len(index)) & (seconds[np.minimum(where, len(index) - 1)] == stamps)
    values[where[ok]] = seen[ok]
    return values


def _measured(
    item: RangeSeries, index: pd.DatetimeIndex, team_key: str, workload_key: str, resource: str = ""
) -> Measured:
    labels = item.labels
    key = SeriesKey(labels.get("namespace", ""), labels.get(team_key, ""), labels.get(workload_key, ""))
    return Measured(key, _on_grid(item, index), resource, labels)


def _by_label(
    series: list[RangeSeries],
    label: str,
    index: pd.DatetimeIndex,
    covered: np.ndarray,
    *,
    absent_is_zero: bool,
    counter: bool = False,
) -> dict[str, pd.Series]:
    result = {}
    for item in series:
        name = item.labels.get(label, "") or "(none)"
        values, _quality = clean(
            pd.Series(_on_grid(item, index), index=index),
            index,
            covered,
            absent_is_zero=absent_is_zero,
            counter=counter,
        )
        result[name] = values
    return result


def _team_of(mapping: Mapping) -> Callable[[str], str]:
    def team(namespace: str) -> str:
        target = mapping.target(SeriesKey(namespace))
        if target is not None:
            return target.team
        return namespace.removeprefix(mapping.namespace_prefix) or namespace

    return team


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
