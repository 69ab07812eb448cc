"""Training runs seen in a history: gangs of pods sharing a job or Kueue workload label.

Input: what each gang held, step by step (:class:`Held`: GPUs per node and the pods). From Prometheus,
:func:`gang_runs` builds it from the ``runs`` query's series, one per pod (labels ``namespace``, ``pod``,
``node`` and the gang labels), GPUs requested at each step; from a file, sources.py builds it from the
rows of a job. A gang is the pods of one namespace with the same value of the first gang label they
carry (JobSet name, Kubeflow job, Kueue pod group, Job name: queries.py). :func:`runs_of` makes the
runs, the same way for every source: a run is a stretch of steps at which the gang held GPUs; a step
the monitoring saw with none of its pods running ends it (a job name reused later is a new run), a step
it did not see (a gap) does not. Per run: start, end (the step after the last seen; a file's exact
times when it has them), nodes (the most distinct nodes held at one moment), GPUs per node (the most
GPUs it held on one node at one moment), pods (distinct pod names).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from planner.history.prometheus import RangeSeries
from planner.history.result import Run
from planner.history.series import unix_seconds

__all__ = ["Gangs", "Held", "gang_runs", "runs_of"]


@dataclass
class Held:
    """What a gang held at one moment: GPUs per node and the pods holding them. ``span``: the moment's
    [start, end) when the source knows it exactly (a file's rows); None for a Prometheus sample."""

    nodes: dict[str, float] = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)
    span: tuple[datetime, datetime] | None = None


#: (namespace, gang) -> step -> what the gang held at the moments of that step.
Gangs = dict[tuple[str, str], dict[int, list[Held]]]


def gang_runs(
    series: Sequence[RangeSeries],
    gang_keys: Sequence[str],
    index: pd.DatetimeIndex,
    covered: np.ndarray,
    team_of: Callable[[str], str],
) -> list[Run]:
    """The runs in ``series`` (module docstring), ordered by start; ``team_of(namespace)`` names the team."""
    if len(index) == 0:
        return []
    seconds = unix_seconds(index)
    gangs: Gangs = defaultdict(dict)
    for item in series:
        gang = next((item.labels[k] for k in gang_keys if item.labels.get(k)), "")
        if not gang:
            continue
        namespace = item.labels.get("namespace", "")
        node = item.labels.get("node", "") or item.labels.get("pod", "")
        for stamp, value in item.samples:
            if not np.isfinite(value) or value <= 0:
                continue
            at = int(np.searchsorted(seconds, int(stamp)))
            if at >= len(seconds) or seconds[at] != int(stamp):
                continue
            held = gangs[(namespace, gang)].setdefault(at, [Held()])[0]  # one instant per step
            held.nodes[node] = held.nodes.get(node, 0.0) + value
            held.pods.add(item.labels.get("pod", ""))
    return runs_of(gangs, index, covered, lambda namespace, _gang: team_of(namespace))


def runs_of(
    gangs: Gangs,
    index: pd.DatetimeIndex,
    covered: np.ndarray,
    team_of: Callable[[str, str], str],
    window: tuple[datetime, datetime] | None = None,
) -> list[Run]:
    """The runs of ``gangs`` (module docstring), ordered by start; ``team_of(namespace, gang)`` names
    the team. ``window``: the exact first and last instants a file holds (a run touching one may have
    been cut by the export: truncated); None: the grid's first and last steps."""
    if len(index) == 0:
        return []
    seconds = unix_seconds(index)
    step = timedelta(seconds=int(seconds[1] - seconds[0])) if len(index) > 1 else timedelta(hours=1)
    runs = []
    for (namespace, gang), by_step in gangs.items():
        stretch: list[int] = []
        for at in sorted(by_step):
            if stretch and _ended(stretch[-1], at, covered):
                runs.append(_run(gang, namespace, team_of, stretch, by_step, index, step, window))
                stretch = []
            stretch.append(at)
        if stretch:
            runs.append(_run(gang, namespace, team_of, stretch, by_step, index, step, window))
    return sorted(runs, key=lambda r: (r.start, r.namespace, r.name))


def _ended(last: int, at: int, covered: np.ndarray) -> bool:
    """Whether a step the monitoring saw lies between ``last`` and ``at`` (the gang held none then)."""
    return bool(covered[last + 1 : at].any())


def _run(
    gang: str,
    namespace: str,
    team_of: Callable[[str, str], str],
    stretch: list[int],
    by_step: dict[int, list[Held]],
    index: pd.DatetimeIndex,
    step: timedelta,
    window: tuple[datetime, datetime] | None,
) -> Run:
    first, last = stretch[0], stretch[-1]
    held = [h for at in stretch for h in by_step[at]]
    spans = [h.span for h in held if h.span is not None]
    if spans and len(spans) == len(held):
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
    else:
        start = index[first].to_pydatetime().astimezone(UTC)
        end = index[last].to_pydatetime().astimezone(UTC) + step
    if window is not None:
        truncated = start <= window[0] or end >= window[1]
    else:
        truncated = first == 0 or last == len(index) - 1
    return Run(
        name=gang,
        namespace=namespace,
        team=team_of(namespace, gang),
        start=start,
        end=end,
        nodes=max(len(h.nodes) for h in held),
        gpus_per_node=max(max(h.nodes.values()) for h in held),
        pods=len(set().union(*(h.pods for h in held))),
        truncated=truncated,
    )
