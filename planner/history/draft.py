"""``scenario.yaml`` drafted from a history and its forecast: a scenario ``gpuplan validate`` and
``gpuplan plan`` accept as written, with every value the history cannot tell set to a stated default on a
line marked ``# REVIEW:``.

What comes from the history: the services and their teams, each service's replicas (its P50 forecast,
``replicas: {csv: forecast/<service>/p50.csv}``), GPUs per replica when the mapping gives them, and the
training runs: per team, the sampled future whose GPU-hours are the median of all samples
(``outlook.TeamTraining``), each run a job with its nodes, GPUs per node and hours, its window from its
sampled start. The horizon starts at the hour after the history's last.

What is a default (``# REVIEW:``): clouds and regions, purchase terms and the spot share, GPU models,
GPUs per replica where the mapping has none (1: replicas = GPUs), latency-critical (true), teams'
guarantees and burst limits (none), training's window slack and preemptibility.

The text is validated with ``models.scenario.parse`` before it is written: a draft that does not parse
is a gpuplan bug, never a file the user gets.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import pandas as pd
import yaml

from models.catalog import MAX_GPUS_PER_NODE
from models.errors import InputError
from models.naming import safe_name
from models.scenario import parse
from planner.history.outlook import Outlook, ceil_hours
from planner.history.result import History

__all__ = ["DEFAULT_CLOUDS", "draft_scenario", "write_scenario"]

#: Regions where the embedded catalog sells H100 and A100 nodes on every cloud (REVIEW in the file).
DEFAULT_CLOUDS: Final = {"aws": ["us-east-1"], "gcp": ["us-central1"], "azure": ["eastus"]}
INFERENCE_GPUS: Final = ["A100", "H100"]
TRAINING_GPUS: Final = ["H100"]
#: A sampled run may start this long after its sampled start (and at least its own length): REVIEW.
SLACK: Final = timedelta(hours=24)


def _y(value: Any) -> str:
    """One YAML flow value, quoted where YAML needs it."""
    text = yaml.safe_dump(value, default_flow_style=True, width=math.inf, allow_unicode=True).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _stamp(when: Any) -> str:
    return pd.Timestamp(when).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def draft_scenario(history: History, future: Outlook) -> str:
    """The scenario's text (module docstring)."""
    p = history.provenance
    start = future.start
    end = start + pd.Timedelta(hours=future.hours)
    lines = [
        "# Drafted by gpuplan demand from the fleet's history: every line marked REVIEW is a default the",
        "# history cannot tell; read it before you plan. demand.md says what was read and how it was",
        "# forecast.",
        f"# Read from {p.source} {p.location}, {_stamp(p.start)} to {_stamp(p.end)}, step {p.step}.",
        f"name: {_y('demand-' + start.strftime('%Y-%m-%d'))}",
        f"description: {_y(f'{len(future.services)} services and their training, from history; P50')}",
        "",
        "horizon:  # from the hour after the history's last, as long as --horizon",
        f"  start: {_stamp(start)}",
        f"  hours: {future.hours}",
        "  period_hours: 1",
        "",
        "catalog: embedded",
        "",
        "# REVIEW: clouds and regions are not in the history; these sell A100 and H100 in the catalog",
        "clouds:",
        *[f"  {cloud}: {{regions: {_y(regions)}}}" for cloud, regions in DEFAULT_CLOUDS.items()],
        "",
        "# REVIEW: purchase terms and the most training on spot are policy, not history",
        "purchase:",
        "  terms: [1y, 3y]",
        "  max_spot_share: 0.5",
        "",
    ]
    teams = sorted({s.service.team for s in future.services.values()} | set(future.training))
    lines += ["# REVIEW: guarantees, burst limits and priorities are policy: none set", "teams:"]
    lines += [f"  - {{name: {_y(team)}}}" for team in teams]
    lines += ["", "inference:"]
    for name, item in sorted(future.services.items()):
        per = item.gpus_per_replica
        whole = min(MAX_GPUS_PER_NODE, max(1, math.ceil(per - 1e-9)))
        if item.assumed:
            size = "  # REVIEW: not in the mapping; 1 GPU per replica (replicas = GPUs)"
        elif whole != per:
            size = f"  # REVIEW: the mapping says {per:g} GPUs per replica; a replica takes whole GPUs"
        else:
            size = "  # the mapping's"
        lines += [
            f"  - name: {_y(name)}",
            f"    team: {_y(item.service.team)}",
            f"    gpus_per_replica: {whole}{size}",
            f"    gpu_models: {_y(INFERENCE_GPUS)}  # REVIEW: the GPUs it may run on are not in the history",
            "    latency_critical: true  # REVIEW: never on spot",
            f"    replicas: {{csv: {_y(future.csv_name(name, 0.5 if 0.5 in future.settings.quantiles else future.settings.quantiles[len(future.settings.quantiles) // 2]))}}}"  # noqa: E501
            f"  # {item.forecast.model}",
        ]
        if item.service.mig:
            lines.append(
                f"    # REVIEW: MIG slices were measured ({', '.join(sorted(item.service.mig))}) and are not "
                "in these replicas"
            )
    jobs = _jobs(future, end, {s for s in future.services})
    if jobs:
        lines += [
            "",
            "# REVIEW: each team's median sampled future of runs (paths/training_runs.csv holds all)",
        ]
        lines += ["training:", *jobs]
    lines.append("")
    return "\n".join(lines)


def _node_sizes() -> list[int]:
    """GPUs per node of the training GPU models in the default regions of the embedded catalog: a gang
    is planned on offerings of exactly its GPUs per node (planning/problem/sets.py)."""
    from models.catalog import Catalog, gpu_model_matches

    return sorted(
        {
            o.gpus_per_node
            for o in Catalog.load().offerings
            if o.region in DEFAULT_CLOUDS.get(o.cloud, []) and gpu_model_matches(o.gpu_model, TRAINING_GPUS)
        }
    )


def _gang_shape(nodes: int, per_node: int, sizes: list[int]) -> tuple[int, int, str]:
    """A gang seen as ``nodes`` x ``per_node`` GPUs, on nodes the defaults sell: as seen when that size is
    sold, else the same GPUs on the next larger size (or the largest), with a REVIEW note."""
    if not sizes or per_node in sizes:
        return nodes, per_node, ""
    size = next((s for s in sizes if s >= per_node), sizes[-1])
    whole = max(1, math.ceil(nodes * per_node / size))
    return (
        whole,
        size,
        f"  # REVIEW: seen as {nodes} x {per_node} GPUs; no {per_node}-GPU {TRAINING_GPUS} node",
    )


def _jobs(future: Outlook, end: pd.Timestamp, taken: set[str]) -> list[str]:
    """The chosen sample's runs as training jobs with windows inside the horizon."""
    lines: list[str] = []
    sizes = _node_sizes() if future.training else []
    slugs = {safe_name(n) for n in taken}
    for team, training in sorted(future.training.items()):
        rows: list[dict[Hashable, Any]] = training.chosen_runs.to_dict("records")
        for k, run in enumerate(rows, start=1):
            hours = ceil_hours((run["end"] - run["start"]).total_seconds() / 3600.0)
            earliest = pd.Timestamp(run["start"]).floor("h")
            if earliest + pd.Timedelta(hours=hours) > end:
                continue  # it would not end inside the horizon: past what this plan can hold
            deadline = min(
                end,
                earliest + pd.Timedelta(hours=hours) + max(pd.Timedelta(SLACK), pd.Timedelta(hours=hours)),
            )
            name = f"{team}-run-{k}"
            while safe_name(name) in slugs:
                name += "-x"
            slugs.add(safe_name(name))
            nodes, per_node, note = _gang_shape(
                int(run["nodes"]), min(MAX_GPUS_PER_NODE, int(run["gpus_per_node"])), sizes
            )
            lines += [
                f"  - name: {_y(name)}",
                f"    team: {_y(team)}",
                f"    nodes: {nodes}",
                f"    gpus_per_node: {per_node}{note}",
                f"    gpu_models: {_y(TRAINING_GPUS)}  # REVIEW",
                f"    hours: {hours:g}  # {run['size_class']}, a length seen in the history",
                f"    earliest_start: {_stamp(earliest)}",
                f"    deadline: {_stamp(deadline)}  # REVIEW: its length and as much again, at least a day",
                "    preemptible: false  # REVIEW",
            ]
    return lines


def write_scenario(history: History, future: Outlook, directory: Path) -> Path:
    """``directory/scenario.yaml``, validated first (module docstring)."""
    text = draft_scenario(history, future)
    path = directory / "scenario.yaml"
    try:
        parse(yaml.safe_load(text), path)
    except InputError as exc:  # the draft's own fault, never the user's: say so
        raise RuntimeError(f"gpuplan demand drafted a scenario that does not validate: {exc}") from exc
    path.write_text(text, encoding="utf-8")
    return path
