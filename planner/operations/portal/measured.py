"""What a team really used, for its portal page (issue 40, point 7): its allocated GPUs (its services' pods
and its training runs' gangs), the DCGM utilization of its namespaces and its Kueue pending workloads over
the last days, read from the Prometheus the daemon's config names (``history:``), as ``gpuplan demand``
reads it (planner/history: the same queries, mapping and credentials from the environment).

Why one read for every team, filtered per team: the mapping decides which series are whose (a namespace
may hold two teams' pods, told apart by their team label), so the filter is the mapping's, never the
URL's. A team's view holds only its own series: the page is given :meth:`MeasuredSource.for_team`'s
result and nothing else, so another team's series cannot reach it. A read is reused for
``cache_minutes``; a server that cannot be read gives the page one line, never an error page.

Steps the monitoring did not see are shown as gaps (None), not filled: this is a monitoring view.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from models.errors import GpuplanError
from models.naming import safe_name

if TYPE_CHECKING:
    from planner.history.result import History
    from planner.operations.daemon.config import DaemonConfig, HistorySection

__all__ = ["Measured", "MeasuredSource"]

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Measured:
    """One team's measured use: ``times`` (hourly, UTC), ``allocated`` GPUs (None where the monitoring
    saw nothing), ``utilization`` (DCGM %, per namespace of the team), ``pending`` (Kueue pending
    workloads, per cluster queue of the team), where it was read and the services it sums."""

    team: str
    times: list[datetime]
    allocated: list[float | None]
    utilization: dict[str, list[float | None]]
    pending: dict[str, list[float | None]]
    services: list[str]
    namespaces: list[str]
    location: str
    read_at: datetime

    @property
    def seen(self) -> list[float]:
        return [v for v in self.allocated if v is not None]

    def summary(self) -> str:
        """One line: mean and peak allocated GPUs, mean utilization, pending workloads at the last step."""
        parts = []
        if self.seen:
            parts.append(f"{np.mean(self.seen):.1f} GPUs allocated on average, {max(self.seen):g} at peak")
        used = [v for values in self.utilization.values() for v in values if v is not None]
        if used:
            parts.append(f"DCGM utilization {np.mean(used):.0f} % on average")
        last = [next((v for v in reversed(vs) if v is not None), None) for vs in self.pending.values()]
        if any(v is not None for v in last):
            parts.append(
                f"{sum(v for v in last if v is not None):g} Kueue workloads pending at the last step"
            )
        return "; ".join(parts) or "nothing measured for this team"


@dataclass
class MeasuredSource:
    """The daemon config's ``history:`` section as a reader with a cache (module docstring). ``now``
    gives the wall clock (the window ends at its hour: Prometheus data is real time, whatever clock the
    portal's plans run on)."""

    config: DaemonConfig
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _read: tuple[float, History] | None = None

    @property
    def section(self) -> HistorySection:
        assert self.config.history is not None
        return self.config.history

    def history(self) -> History:
        """The fleet's last ``days``, read again after ``cache_minutes``; GpuplanError when unreadable."""
        from planner.history.mapping import load_mapping
        from planner.history.prometheus import PrometheusClient, auth_from_env
        from planner.history.queries import load_queries
        from planner.history.read import read_prometheus, window

        section = self.section
        with self._lock:
            fresh = self._read is not None and time.monotonic() - self._read[0] < section.cache_minutes * 60
            if fresh and self._read is not None:
                return self._read[1]
            queries = load_queries(None if section.queries is None else self.config.path(section.queries))
            mapping = load_mapping(None if section.mapping is None else self.config.path(section.mapping))
            client = PrometheusClient(
                section.prometheus,
                auth=auth_from_env(),
                timeout=section.timeout_seconds,
                retries=section.retries,
            )
            span = window(timedelta(days=section.days), HOUR, self.now())
            history = read_prometheus(client, queries, mapping, span)
            self._read = (time.monotonic(), history)
            return history

    def for_team(self, team: str) -> Measured | str:
        """``team``'s measured use, or the one line saying why it cannot be read."""
        try:
            history = self.history()
        except GpuplanError as exc:
            return f"measured use unavailable: {exc}"
        return team_view(history, team)


def team_view(history: History, team: str) -> Measured:
    """Only ``team``'s series of ``history``: its services' GPUs plus its runs' gangs, its namespaces'
    utilization, its cluster queues' pending workloads (a queue is the team's when it is named after one
    of its namespaces or after the team, as gpuplan k8s names them); gaps as None."""
    index = history.index
    unseen = np.zeros(len(index), dtype=bool)
    for gap in history.provenance.gaps:
        unseen |= (index >= pd.Timestamp(gap.start)) & (index <= pd.Timestamp(gap.end))
    mine = {name: s for name, s in history.services.items() if s.team == team}
    allocated = np.zeros(len(index))
    for service in mine.values():
        allocated += service.gpus.to_numpy(dtype=float)
    for run in history.runs:
        if run.team == team:
            held = (index >= pd.Timestamp(run.start)) & (index < pd.Timestamp(run.end))
            allocated[held] += run.nodes * run.gpus_per_node
    namespaces = sorted({ns for s in mine.values() for ns in s.namespaces})
    queues = {*namespaces, safe_name(team), team}

    def shown(values: pd.Series | np.ndarray) -> list[float | None]:
        array = np.asarray(values, dtype=float)
        return [None if unseen[k] or not np.isfinite(v) else round(float(v), 4) for k, v in enumerate(array)]

    return Measured(
        team=team,
        times=[t.to_pydatetime() for t in index],
        allocated=shown(allocated) if mine or any(r.team == team for r in history.runs) else [],
        utilization={ns: shown(v) for ns, v in sorted(history.utilization.items()) if ns in namespaces},
        pending={q: shown(v) for q, v in sorted(history.pending.items()) if q in queues},
        services=sorted(mine),
        namespaces=namespaces,
        location=history.provenance.location,
        read_at=history.provenance.read_at,
    )
