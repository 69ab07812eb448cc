"""Plans to provision in tests: the mixed-fleet example (``scenarios/mixed-fleet.yaml``) cut to one week.

The week starts on 2027-02-01 and keeps the example's services, teams and both training programs; the
16-node pretraining gang runs 48 hours inside the week (so it is a gang to place, with its fabric), and
the weekly fine-tune runs once. A batch-scoring service that tolerates interruptions is added, so the
plan has spot pools beside the on-demand and committed ones. ``cloud`` restricts the clouds to one
(``aws``, ``gcp``, ``azure``) or keeps all three (``all``), in the example's own regions. On GCP the gang
asks for H100s, so it lands on an a3 machine with GPUDirect-TCPX/TCPXO rather than the H200's RDMA. The
solve stops at a 5 % gap: these tests are about provisioning a plan, not about its optimality.

``aws-sp`` is the AWS week holding a savings plan (issue 38): :data:`HELD_SAVINGS_PLAN`, an EC2 Instance
Savings Plan for p5 in us-east-1 of :data:`SP_USD_PER_HOUR` an hour, held since 2026-09-01 for a year,
at the embedded catalog's rate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from models.inputs import load_inputs
from planner.planning.optimize import SolveSettings, optimize

__all__ = ["HELD_SAVINGS_PLAN", "SP_USD_PER_HOUR", "WEEK_START", "mixed_fleet_week", "week_scenario"]

EXAMPLE = Path(__file__).resolve().parents[1] / "scenarios" / "mixed-fleet.yaml"
WEEK_START = "2027-02-01T00:00:00Z"
SP_USD_PER_HOUR = 40.0
HELD_SAVINGS_PLAN = {
    "name": "sp-p5",
    "kind": "ec2-instance",
    "term": "1y",
    "usd_per_hour": SP_USD_PER_HOUR,
    "start": "2026-09-01T00:00:00Z",
    "family": "p5",
    "region": "us-east-1",
}


def week_scenario(cloud: str) -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    data["name"] = f"mixed-fleet-week-{cloud}"
    if cloud == "aws-sp":
        data["savings_plans"] = [dict(HELD_SAVINGS_PLAN)]
        cloud = "aws"
    data["horizon"] = {"start": WEEK_START, "hours": 168, "period_hours": 1}
    if cloud != "all":
        data["clouds"] = {cloud: data["clouds"][cloud]}
    pretrain = next(job for job in data["training"] if job["name"] == "pretrain-34b")
    pretrain.update(hours=48, earliest_start=WEEK_START, deadline="2027-02-07T00:00:00Z")
    if cloud == "gcp":
        pretrain["gpu_models"] = ["H100"]
    data["inference"].append(  # fault tolerant: may run on spot, so the plan has spot pools too
        {
            "name": "batch-scoring",
            "team": "research",
            "gpus_per_replica": 8,
            "gpu_models": ["A100", "H100"],
            "latency_critical": False,
            "replicas": {"profile": "diurnal", "base": 2, "peak": 10, "peak_hour_utc": 3},
        }
    )
    return data


def mixed_fleet_week(cloud: str, directory: Path) -> Path:
    """Plan the week on ``cloud`` into ``directory`` (plan.json and allocations.csv); the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    scenario_path = directory / "scenario.yaml"
    scenario_path.write_text(yaml.safe_dump(week_scenario(cloud), sort_keys=False), encoding="utf-8")
    inputs = load_inputs(scenario_path)
    settings = SolveSettings(gap=0.05, time_limit=10, certify=False)
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, settings)
    plan_dir = directory / "plan"
    plan_dir.mkdir()
    plan.write(plan_dir)
    return plan_dir
