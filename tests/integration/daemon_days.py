"""What the daemon's integration tests share: a config on the simulated cloud, the fleet read from the
simulated cloud's own file, what the plan holds at a time read from allocations.csv directly (an
independent reading: not the reconciler's), and the daemon's planner with its plans cached per process."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from models.naming import pool_name
from models.plan import Plan
from models.tiers import CapacityType
from planner.outputs.desired import run_name

START = datetime(2027, 2, 1, tzinfo=UTC)
STEP = timedelta(minutes=30)
END = START + timedelta(days=4, hours=12)  # the week's 16-node gang starts on day 4 at 00:00


def daemon_config(tmp_path: Path, scenario: Path, database: str | None = None, **extra: Any) -> Path:
    data: dict[str, Any] = {
        "scenario": str(scenario),
        "provider": {"cloud": "sim", "sim_state": str(tmp_path / "sim.json")},
        "apply": True,
        "plan_time_limit": 10,
        "jobs": {
            "refresh_prices": {"every_minutes": 60},
            "replan": {"every_hours": 10000, "price_change": 0.25},  # on triggers only, here
            "reconcile": {"every_minutes": 60},
            "watch_interruptions": {"every_minutes": 30},
            "commitment_expiry": {"every_hours": 24, "warn_days": 30},
        },
        "metrics": {"enabled": False},
        **extra,
    }
    if database is not None:
        data["database"] = database
    path = tmp_path / "daemon.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def fleet(state: Path) -> Counter[str]:
    """Live nodes per pool (gang nodes per run), from the simulated cloud's own file."""
    data = json.loads(state.read_text(encoding="utf-8"))
    return Counter(n["run"] or n["pool"] for n in data["nodes"].values() if n["state"] != "terminated")


def planned(plan: Plan, now: datetime) -> Counter[str]:
    """What the plan holds at ``now``, read from allocations.csv and plan.json directly."""
    period = int((now - plan.document.horizon.start).total_seconds() // 3600)
    rows = plan.allocations[(plan.allocations.period == period) & (plan.allocations.kind == "inference")]
    held: Counter[str] = Counter()
    for (offering, spot), group in rows.groupby([rows.offering, rows.tier == "spot"]):
        pool = pool_name(str(offering), CapacityType.SPOT if spot else CapacityType.ON_DEMAND)
        held[pool] = math.ceil(group.nodes.sum() - 1e-6)
    for run in plan.document.training:
        if run.start <= now < run.end:
            held[run_name(run.job, run.run)] = run.nodes
    return +held


_PLANS: dict[tuple[str, ...], Path] = {}


def cached_planner(config: Any, previous: Any, now: datetime, live: dict[str, float]) -> Path:
    """The daemon's own planner, its plans reused across the two database runs (same inputs, same plan)."""
    from planner.operations.daemon.daemon import plan_scenario

    key = (*(f"{o}={v:.4f}" for o, v in sorted(live.items())), str(previous is not None))
    if key not in _PLANS:
        made = plan_scenario(config, previous, now, live)
        keep = Path(str(config.plans_dir) + "-cache") / made.name
        shutil.copytree(made, keep, dirs_exist_ok=True)
        _PLANS[key] = keep
    target = config.plans_dir / f"plan-{now:%Y%m%dT%H%M%SZ}"
    shutil.copytree(_PLANS[key], target, dirs_exist_ok=True)
    return target
