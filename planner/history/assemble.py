"""Measured series per key made services: mapped (mapping.py), summed per service, repaired (series.py),
with one warning line per thing a user should act on. Shared by every source (Prometheus, OpenCost,
usage CSV), so each gives the same :class:`~planner.history.result.ServiceHistory`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import pandas as pd

from planner.history.mapping import Mapping, SeriesKey, Target
from planner.history.result import ServiceHistory
from planner.history.series import Quality, clean

__all__ = ["Measured", "services_from"]


@dataclass
class Measured:
    """One measured series on the grid: its key, values (NaN where it had no sample) and, for MIG, the
    resource (``nvidia_com_mig_1g_10gb``; '' for whole GPUs)."""

    key: SeriesKey
    values: np.ndarray
    resource: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"namespace={self.key.namespace}"]
        if self.key.team_label:
            parts.append(f"team={self.key.team_label}")
        if self.key.workload_label:
            parts.append(f"workload={self.key.workload_label}")
        if self.resource:
            parts.append(f"resource={self.resource}")
        return "{" + ", ".join(parts) + "}"


def services_from(
    measured: Iterable[Measured],
    mapping: Mapping,
    index: pd.DatetimeIndex,
    covered: np.ndarray,
    step: timedelta,
    *,
    counter: bool = False,
) -> tuple[dict[str, ServiceHistory], list[str]]:
    """Services from measured series; the warnings (unmapped namespaces, negative values, resets)."""
    warnings: list[str] = []
    by_target: dict[tuple[Target, str], list[Measured]] = defaultdict(list)
    unmapped: dict[str, list[Measured]] = defaultdict(list)
    for item in measured:
        target = mapping.target(item.key)
        if target is None:
            unmapped[item.key.namespace].append(item)
        else:
            by_target[(target, item.resource)].append(item)
    hours = step.total_seconds() / 3600
    for namespace, items in sorted(unmapped.items()):
        gpu_hours = sum(float(np.nansum(i.values)) for i in items if not i.resource) * hours
        shown = ", ".join(i.describe() for i in items[:3]) + (
            f" and {len(items) - 3} more" if len(items) > 3 else ""
        )
        warnings.append(
            f"namespace {namespace!r} maps to no service of the mapping file ({shown}): its "
            f"{gpu_hours:,.1f} GPU-hours are left out; add a rule for it to the mapping file"
        )
    targets: dict[str, Target] = {}
    gpus: dict[str, tuple[pd.Series, Quality]] = {}
    mig: dict[str, dict[str, pd.Series]] = defaultdict(dict)
    for (target, resource), items in sorted(by_target.items(), key=lambda kv: (kv[0][0].service, kv[0][1])):
        other = targets.setdefault(target.service, target)
        if other.team != target.team:
            warnings.append(
                f"service {target.service!r} is mapped to teams {other.team!r} and {target.team!r}; "
                f"counted under {other.team!r}: give it one team in the mapping file"
            )
        stacked = np.vstack([i.values for i in items])
        raw = np.where(np.isnan(stacked).all(axis=0), np.nan, np.nansum(stacked, axis=0))
        series, quality = clean(pd.Series(raw, index=index), index, covered, counter=counter)
        if quality.negatives:
            warnings.append(
                f"service {target.service!r}{' ' + resource if resource else ''}: {quality.negatives} "
                f"negative values in {items[0].describe()}: not a demand, treated as gaps and filled "
                "(history.json says how); check the exporter or recording rule"
            )
        if quality.resets:
            warnings.append(
                f"service {target.service!r}: {quality.resets} counter resets in {items[0].describe()}, "
                "mended (a decrease is read as a restart from 0)"
            )
        if resource:
            mig[target.service][resource] = series
        else:
            gpus[target.service] = (series, quality)
    result: dict[str, ServiceHistory] = {}
    for service, target in sorted(targets.items()):
        if service in gpus:
            series, quality = gpus[service]
        else:  # MIG slices only: no whole GPU measured, 0 at every step
            series = pd.Series(0.0, index=index, name="value")
            quality = Quality(len(index), len(index))
        every = [i for (t, _r), group in by_target.items() if t.service == service for i in group]
        result[service] = ServiceHistory(
            service=service,
            team=target.team,
            gpus=series,
            quality=quality,
            namespaces=tuple(sorted({i.key.namespace for i in every})),
            series=tuple(sorted({i.describe() for i in every})),
            gpus_per_replica=target.gpus_per_replica,
            mig=dict(mig.get(service, {})),
        )
    return result, warnings
