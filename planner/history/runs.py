"""Training runs seen in a history: gangs of pods sharing a job or Kueue workload label.

Input: the ``runs`` query's series, one per pod (labels ``namespace``, ``pod``, ``node`` and the gang
labels), GPUs requested at each step. A gang is the pods of one namespace with the same value of the
first gang label they carry (JobSet name, Kubeflow job, Kueue pod group, Job name: queries.py). A run is
a stretch of steps at which the gang held GPUs; a step the monitoring saw with none of its pods running
ends it (a job name reused later is a new run), a step it did not see (a gap) does not. Per run:
start, end (the step after the last seen), nodes (the most distinct nodes held at one step), GPUs per
node (the most GPUs it held on one node at one step), pods (distinct pod names).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from planner.history.prometheus import RangeSeries
from planner.history.result import Run
from planner.history.series import unix_seconds

__all__ = ["gang_runs"]


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
    step = timedelta(seconds=int(seconds[1] - seconds[0])) if len(index) > 1 else timedelta(hours=1)
    # gang -> step -> node -> GPUs; gang -> pods
    held: dict[tuple[str, str], dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    pods: dict[tuple[str, str], dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for item in series:
        gang = next((item.labels[k] for k in gang_keys if item.labels.get(k)), "")
        if not gang:
            continue
        key = (item.labels.get("namespace", ""), gang)
        node = item.labels.get("node", "") or item.labels.get("pod", "")
        for stamp, value in item.samples:
            if not np.isfinite(value) or value <= 0:
                continue
            at = int(np.searchsorted(seconds, int(stamp)))
            if at >= len(seconds) or seconds[at] != int(stamp):
                continue
            nodes = held[key][at]
            nodes[node] = nodes.get(node, 0.0) + value
            pods[key][at].add(item.labels.get("pod", ""))
    runs = []
    for (namespace, gang), by_step in held.items():
        steps = sorted(by_step)
        stretch: list[int] = []
        for at in steps:
            if stretch and _ended(stretch[-1], at, covered):
                runs.append(
                    _run(gang, namespace, team_of, stretch, by_step, pods[(namespace, gang)], index, step)
                )
                stretch = []
            stretch.append(at)
        if stretch:
            runs.append(
                _run(gang, namespace, team_of, stretch, by_step, pods[(namespace, gang)], index, step)
            )
    return sorted(runs, key=lambda r: (r.start, r.namespace, r.name))


def _ended(last: int, at: int, covered: np.ndarray) -> bool:
    """Whether a step the monitoring saw lies between ``last`` and ``at`` (the gang held none then)."""
    return bool(covered[last + 1 : at].any())


def _run(
    gang: str,
    namespace: str,
    team_of: Callable[[str], str],
    stretch: list[int],
    by_step: dict[int, dict[str, float]],
    pods: dict[int, set[str]],
    index: pd.DatetimeIndex,
    step: timedelta,
) -> Run:
    first, last = stretch[0], stretch[-1]
    start = index[first].to_pydatetime().astimezone(UTC)
    end: datetime = index[last].to_pydatetime().astimezone(UTC) + step
    return Run(
        name=gang,
        namespace=namespace,
        team=team_of(namespace),
        start=start,
        end=end,
        nodes=max(len(by_step[at]) for at in stretch),
        gpus_per_node=max(max(by_step[at].values()) for at in stretch),
        pods=len(set().union(*(pods[at] for at in stretch))),
        truncated=first == 0 or last == len(index) - 1,
    )
