"""Synthetic, seeded scenarios for benchmarking the planner at sizes the example does not reach.

The example (``scenarios/mixed-fleet.yaml``) has 2 services and 2 training jobs: it exercises every
constraint family but says little about how build time, solve time and memory grow. ``medium_scenario``
returns a scenario dict in the normal scenario format (validated by ``models.scenario.parse``) with the
shape of the "medium" row of ``SOLVER-NOTES.md``: a quarter at 4 h periods, ~30 offerings, 20
inference services, ~30 training jobs, 4 teams.

Sizes are data (:class:`Size`), not code paths, so the later "large" size is one more ``SIZES`` entry
(hours, period_hours, regions, counts); the generator itself is the same. Everything random comes from
one ``numpy`` generator seeded by ``seed``: the same seed gives the same scenario, byte for byte.

Run ``python bench/gen.py [--seed N] [-o FILE]`` to print the model-size summary (offerings in scope,
services, runs) and optionally write the YAML.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: the repo's packages, not an installed copy
    sys.path.insert(0, str(ROOT))

__all__ = ["SIZES", "Size", "generate", "medium_scenario", "write_scenario"]


@dataclass(frozen=True, slots=True)
class Size:
    """Everything that differs between benchmark sizes; the generator reads nothing else."""

    name: str
    hours: int
    period_hours: int
    clouds: dict[str, list[str]]  # cloud -> allowed regions (chosen for the offering count in scope)
    services: int
    training_jobs: int  # entries in ``training``; one of them repeats weekly (so runs > jobs)
    teams: tuple[str, ...] = ("assistant", "search", "platform", "research")
    start: datetime = field(default_factory=lambda: datetime(2027, 1, 4, tzinfo=UTC))  # a Monday


SIZES: dict[str, Size] = {
    # 13 weeks at 4 h periods = 546 periods. aws us-east-2 + us-west-2 (17), gcp us-east4 (6) and azure
    # eastus2 (7) give exactly 30 offerings of the embedded catalog, with every GPU model of the brief
    # (L40S and A10G exist on AWS only) and fabric-capable 8-GPU nodes on all three clouds.
    "medium": Size(
        name="medium",
        hours=2184,
        period_hours=4,
        clouds={"aws": ["us-east-2", "us-west-2"], "gcp": ["us-east4"], "azure": ["eastus2"]},
        services=20,
        training_jobs=30,
    ),
}

# Service archetypes: (gpu_models, size) pairs that some offering of each cloud mix can hold. Whole-GPU
# replicas of 2/4/8 need 8-GPU (or 2/4-GPU) nodes; L4/L40S/A10G nodes have 1 or 4 GPUs, so those
# services are sized 1 GPU or by memory (MIG slices on A100/H100, whole small GPUs elsewhere).
_BIG_MODELS = (["H100", "H200"], ["H100"], ["H200"], ["A100"], ["A100", "H100"])
_SMALL_MODELS = (["L4"], ["L4", "A10G"], ["A10G"], ["L40S"], ["L40S", "L4"])
_MIG_MODELS = (["A100"], ["A100", "H100"], ["H100"])
_TRAIN_MODELS = (["H100", "H200"], ["H100"], ["H200"], ["A100"], ["A100", "H100"])
_GANGS = (1, 1, 2, 2, 4, 4, 8, 16)


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _service(rng: np.random.Generator, index: int, team: str) -> tuple[dict[str, Any], float]:
    """One inference service and an upper estimate of the GPUs it holds at its peak (for burst limits)."""
    kind = rng.choice(["big", "small", "mig"], p=[0.45, 0.3, 0.25])
    spec: dict[str, Any] = {"name": f"svc-{index:02d}", "team": team}
    if kind == "big":
        gpus = int(rng.choice([1, 2, 4, 8], p=[0.2, 0.35, 0.3, 0.15]))
        spec["gpus_per_replica"] = gpus
        spec["gpu_models"] = list(_BIG_MODELS[rng.integers(len(_BIG_MODELS))])
        scale = {1: 24.0, 2: 12.0, 4: 6.0, 8: 3.0}[gpus]
        gpus_per_replica = float(gpus)
    elif kind == "small":
        spec["gpus_per_replica"] = 1
        spec["gpu_models"] = list(_SMALL_MODELS[rng.integers(len(_SMALL_MODELS))])
        scale, gpus_per_replica = 40.0, 1.0
    else:
        memory = float(rng.choice([5.0, 9.0, 10.0, 18.0, 20.0, 35.0, 40.0]))
        spec["gpu_memory_gb"] = memory
        spec["gpu_models"] = list(_MIG_MODELS[rng.integers(len(_MIG_MODELS))])
        scale, gpus_per_replica = 60.0, 1.0  # at most a whole GPU per replica (80 GB GPUs)
    spec["latency_critical"] = bool(rng.random() < 0.6)
    growth = round(float(rng.uniform(0.0, 0.08)), 3)
    base = max(1.0, round(float(rng.uniform(0.2, 0.6) * scale), 1))
    if rng.random() < 0.7:
        peak = round(base * float(rng.uniform(1.5, 4.0)), 1)
        spec["replicas"] = {
            "profile": "diurnal",
            "base": base,
            "peak": peak,
            "peak_hour_utc": float(rng.integers(0, 24)),
            "weekend_factor": round(float(rng.uniform(0.4, 1.0)), 2),
            "monthly_growth": growth,
        }
        top = peak
    else:
        spec["replicas"] = {
            "profile": "flat",
            "base": base,
            "monthly_growth": growth if rng.random() < 0.5 else 0.0,
        }
        top = base
    return spec, top * gpus_per_replica


def _training_job(
    rng: np.random.Generator, index: int, team: str, size: Size, weekly: bool
) -> tuple[dict[str, Any], float]:
    """One training job (window a day to a month) and its gang's GPUs."""
    nodes = int(rng.choice(_GANGS))
    spec: dict[str, Any] = {
        "name": f"train-{index:02d}",
        "team": team,
        "nodes": nodes,
        "gpus_per_node": 8,
        "gpu_models": list(_TRAIN_MODELS[rng.integers(len(_TRAIN_MODELS))]),
    }
    if weekly:
        spec["hours"] = float(rng.integers(8, 40))
        spec["repeat"] = "weekly"
    else:
        window_days = int(rng.integers(1, 31))
        window_days = min(window_days, size.hours // 24 - 1)
        first_day = int(rng.integers(0, size.hours // 24 - window_days))
        start = size.start + timedelta(days=first_day)
        spec["hours"] = float(max(4, math.floor(window_days * 24 * rng.uniform(0.3, 0.8))))
        spec["earliest_start"] = _iso(start)
        spec["deadline"] = _iso(start + timedelta(days=window_days))
    if nodes > 1:
        spec["fabric"] = str(rng.choice(["required", "required", "preferred"]))
    elif rng.random() < 0.2:
        spec["fabric"] = "required"  # a single node on a fabric offering (e.g. for a later scale-out)
    if rng.random() < 0.5:
        spec["preemptible"] = True
        spec["checkpoint"] = {
            "write_minutes": float(rng.integers(1, 11)),
            "restart_minutes": float(rng.integers(3, 21)),
        }
    return spec, float(nodes * 8)


def generate(size: Size | str = "medium", seed: int = 0) -> dict[str, Any]:
    """A scenario dict of ``size`` (a :class:`Size` or a key of ``SIZES``), reproducible from ``seed``."""
    size = SIZES[size] if isinstance(size, str) else size
    rng = np.random.default_rng(seed)
    serving_teams = size.teams[:-1]  # the last team (research) trains; the others serve and fine-tune
    peak_gpus = dict.fromkeys(size.teams, 0.0)
    services = []
    for index in range(size.services):
        team = serving_teams[index % len(serving_teams)]
        spec, gpus = _service(rng, index, team)
        # growth compounds over the horizon: the burst limit must hold at the end, not the start
        growth = spec["replicas"].get("monthly_growth", 0.0)
        peak_gpus[team] += gpus * (1.0 + growth) ** (size.hours / 730.0)
        services.append(spec)
    training = []
    gang_gpus = dict.fromkeys(size.teams, 0.0)
    for index in range(size.training_jobs):
        team = size.teams[-1] if rng.random() < 0.7 else serving_teams[int(rng.integers(len(serving_teams)))]
        spec, gpus = _training_job(rng, index, team, size, weekly=index == size.training_jobs - 1)
        gang_gpus[team] += gpus
        training.append(spec)
    teams = []
    for k, name in enumerate(size.teams):
        guaranteed = int(rng.choice([16, 32, 48, 64, 128])) if name != size.teams[-1] else 128
        # room for the team's peak inference plus most of its gangs at once: limits that shape the plan
        # in busy weeks but never force unserved demand in a benchmark
        need = 1.3 * peak_gpus[name] + 0.75 * gang_gpus[name]
        burst = max(guaranteed, 64 * math.ceil(need / 64))
        priority = "batch" if name == size.teams[-1] else ("production" if k < 2 else "standard")
        teams.append({"name": name, "guaranteed_gpus": guaranteed, "burst_gpus": burst, "priority": priority})
    return {
        "name": f"bench-{size.name}-seed{seed}",
        "description": f"Synthetic {size.name} benchmark scenario (bench/gen.py, seed {seed}).",
        "horizon": {"start": _iso(size.start), "hours": size.hours, "period_hours": size.period_hours},
        "catalog": "embedded",
        "clouds": {cloud: {"regions": list(regions)} for cloud, regions in size.clouds.items()},
        "purchase": {"terms": ["1y", "3y"], "max_spot_share": 0.6},
        "teams": teams,
        "inference": services,
        "training": training,
    }


def medium_scenario(seed: int = 0) -> dict[str, Any]:
    """The medium benchmark scenario: a quarter at 4 h periods, 30 offerings, 20 services, 30 jobs."""
    return generate("medium", seed)


def write_scenario(scenario: dict[str, Any], path: str | Path) -> Path:
    """Write ``scenario`` as YAML (keys in their natural order), so a plan can be re-run with the CLI."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(scenario, sort_keys=False, default_flow_style=None), encoding="utf-8")
    return path


def summary(scenario: dict[str, Any]) -> str:
    """Validate ``scenario`` and say how big its planning sets are (offerings in scope, runs, slots)."""
    from models.catalog import Catalog
    from models.scenario import parse
    from planner.optimize.sets import build_sets

    parsed = parse(scenario)
    sets = build_sets(parsed, Catalog.load(None), None)
    return (
        f"{parsed.name}: {len(sets.offerings)} offerings in scope, {len(sets.services)} services, "
        f"{len(parsed.training)} training jobs -> {len(sets.runs)} runs, {len(sets.options)} placement "
        f"options, {parsed.horizon.periods} periods -> {len(sets.slots)} model slots"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="medium", choices=sorted(SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", type=Path, help="write the scenario YAML here")
    args = parser.parse_args(argv)
    scenario = generate(args.size, args.seed)
    print(summary(scenario))
    if args.output:
        print(f"wrote {write_scenario(scenario, args.output)}")


if __name__ == "__main__":
    main()
