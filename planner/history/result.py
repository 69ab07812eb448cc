"""What a history read gives: :class:`History`, the type the forecast, the scenario writer and the page
consume, and how it is written (``DIR/history/<service>.csv``, ``DIR/history/runs.csv``,
``DIR/history.json``).

A History holds, on one regular grid (``index``, UTC, ``provenance.step`` apart):

- ``services``: per gpuplan service, its demand in GPUs per step (and in replicas when the mapping gives
  GPUs per replica), MIG slices per profile, and the :class:`~planner.history.series.Quality` of its
  demand (steps measured, fills);
- ``runs``: the training runs seen (gangs): start, end, nodes, GPUs per node;
- ``utilization`` (DCGM, % per namespace) and ``pending`` (Kueue pending workloads per cluster queue),
  empty where the source has none;
- ``provenance``: where it was read (URL without credentials, or file), the queries, the window and the
  step, the steps the monitoring did not see; and ``warnings``, one line each.

Every value a consumer reads is a measurement or a stated fill: nothing is invented silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, Literal

import pandas as pd

from planner.history.series import Gap, Quality

__all__ = ["FORMAT", "History", "Provenance", "Run", "ServiceHistory"]

#: history.json's format; a reader refuses another.
FORMAT: Final = "gpuplan-history/1"
SourceKind = Literal["prometheus", "opencost", "usage"]


@dataclass(frozen=True)
class ServiceHistory:
    """One service's measured demand. ``gpus`` (GPUs requested by its running pods at each step, filled
    where stated in ``quality``), ``replicas`` (``gpus`` / ``gpus_per_replica`` when the mapping gives
    it, else None), ``mig`` (slices per MIG resource, e.g. ``nvidia_com_mig_1g_10gb``). ``namespaces``
    and ``series``: what was read for it (namespace and label values of each measured series)."""

    service: str
    team: str
    gpus: pd.Series
    quality: Quality
    namespaces: tuple[str, ...]
    series: tuple[str, ...]
    gpus_per_replica: float | None = None
    mig: dict[str, pd.Series] = field(default_factory=dict)

    @property
    def replicas(self) -> pd.Series | None:
        return None if self.gpus_per_replica is None else self.gpus / self.gpus_per_replica

    def frame(self) -> pd.DataFrame:
        """The service's CSV: time, gpus, filled (1 where the value is a fill), replicas, MIG columns."""
        filled = pd.Series(0, index=self.gpus.index, dtype=int)
        for f in self.quality.fills:
            filled[(filled.index >= f.start) & (filled.index <= f.end)] = 1
        columns: dict[str, pd.Series] = {"gpus": self.gpus, "filled": filled}
        if self.replicas is not None:
            columns["replicas"] = self.replicas
        for resource, values in sorted(self.mig.items()):
            columns[resource] = values
        return pd.DataFrame(columns, index=self.gpus.index)


@dataclass(frozen=True)
class Run:
    """A training run seen in the history: a gang of pods sharing a job or Kueue workload label.
    ``end`` is the step after the last one it was seen at; ``truncated``: it was already running at the
    window's start or still running at its end (its true length is longer)."""

    name: str
    namespace: str
    team: str
    start: datetime
    end: datetime
    nodes: int
    gpus_per_node: float
    pods: int
    truncated: bool = False

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600

    def row(self) -> dict[str, object]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "team": self.team,
            "start": _stamp(self.start),
            "end": _stamp(self.end),
            "hours": round(self.hours, 6),
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "pods": self.pods,
            "truncated": self.truncated,
        }


@dataclass(frozen=True)
class Provenance:
    """Where a history comes from: ``source`` (``prometheus``: ``location`` is the URL without
    credentials; ``opencost``/``usage``: the file), the query per role, the window [start, end] and the
    step, the steps the monitoring did not see (``gaps``, filled in every series), when it was read, and
    how many requests it took."""

    source: SourceKind
    location: str
    start: datetime
    end: datetime
    step: timedelta
    queries: dict[str, str] = field(default_factory=dict)
    gaps: tuple[Gap, ...] = ()
    read_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    requests: int = 0

    def as_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "location": self.location,
            "start": _stamp(self.start),
            "end": _stamp(self.end),
            "step_seconds": int(self.step.total_seconds()),
            "queries": dict(self.queries),
            "gaps": [g.as_json() for g in self.gaps],
            "read_at": _stamp(self.read_at),
            "requests": self.requests,
        }


@dataclass(frozen=True)
class History:
    """A fleet's measured demand (module docstring). ``index``: the grid every series is on."""

    index: pd.DatetimeIndex
    services: dict[str, ServiceHistory]
    runs: tuple[Run, ...]
    provenance: Provenance
    utilization: dict[str, pd.Series] = field(default_factory=dict)
    pending: dict[str, pd.Series] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        """history.json: provenance, per service its team, what was read for it and its quality, the
        runs' count, the warnings."""
        return {
            "format": FORMAT,
            "provenance": self.provenance.as_json(),
            "steps": len(self.index),
            "services": {
                name: {
                    "team": s.team,
                    "namespaces": list(s.namespaces),
                    "series": list(s.series),
                    "gpus_per_replica": s.gpus_per_replica,
                    "file": f"history/{name}.csv",
                    "quality": s.quality.as_json(),
                    "mig_resources": sorted(s.mig),
                    "mean_gpus": round(float(s.gpus.mean()), 6) if len(s.gpus) else 0.0,
                    "peak_gpus": round(float(s.gpus.max()), 6) if len(s.gpus) else 0.0,
                }
                for name, s in sorted(self.services.items())
            },
            "runs": len(self.runs),
            "utilization_namespaces": sorted(self.utilization),
            "pending_queues": sorted(self.pending),
            "warnings": list(self.warnings),
        }

    def write(self, directory: Path, say: Callable[[str], None] | None = None) -> list[Path]:
        """The history's files under ``directory`` (a staging directory: the caller makes it appear
        whole, models.files.atomic_directory). Returns the files written."""
        folder = directory / "history"
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for name, service in sorted(self.services.items()):
            path = folder / f"{name}.csv"
            _write_frame(service.frame(), path)
            written.append(path)
        runs = pd.DataFrame(
            [r.row() for r in self.runs],
            columns=["name", "namespace", "team", "start", "end", "hours", "nodes", "gpus_per_node", "pods",
                     "truncated"],
        )  # fmt: skip
        runs.to_csv(folder / "runs.csv", index=False)
        written.append(folder / "runs.csv")
        for label, series in (("utilization", self.utilization), ("pending", self.pending)):
            if series:
                path = folder / f"{label}.csv"
                _write_frame(pd.DataFrame(dict(sorted(series.items())), index=self.index), path)
                written.append(path)
        path = directory / "history.json"
        path.write_text(json.dumps(self.as_json(), indent=2) + "\n", encoding="utf-8")
        written.append(path)
        if say is not None:
            say(f"wrote {len(written)} files: {len(self.services)} services, {len(self.runs)} runs")
        return written


def _write_frame(frame: pd.DataFrame, path: Path) -> None:
    out = frame.copy()
    out.index = pd.Index([_stamp(t) for t in frame.index], name="time")
    out.to_csv(path, float_format="%.10g")


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
