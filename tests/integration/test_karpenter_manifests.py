"""`gpuplan karpenter`: the NodePools and EC2NodeClasses validate strictly against Karpenter's CRDs (unknown
fields refused, defaults applied, CEL rules run, Kubernetes' ``find`` included), and they do what the plan
says: reserved NodePools for every capacity reservation (held, and the gangs' that provision makes), weights
reserved > committed on demand > the rest cheapest first, limits at the plan's peaks computed here from
allocations.csv, spot pools tainted as the Kueue export taints spot nodes; bad input is one line, exit 2.

The mixed-fleet week on AWS (``tests/provision_plans.py``, planned once per session) has a reserved 16-node
pretraining gang, committed p4d and p5, on-demand p5 and spot p4d; a small plan made here adds a held
capacity reservation.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from kueue_validate import CrdValidator, count_rules
from typer.testing import CliRunner

from planner.cli import app

KARPENTER_CRDS = Path(__file__).resolve().parents[3] / "shared" / "data" / "karpenter-crds"

pytestmark = pytest.mark.skipif(
    not KARPENTER_CRDS.is_dir(), reason=f"the Karpenter CRDs are not at {KARPENTER_CRDS}"
)


@pytest.fixture(scope="module")
def validator() -> CrdValidator:
    return CrdValidator(KARPENTER_CRDS, "v1")


def run_karpenter(plan_dir: Path, out: Path, *extra: str) -> dict[str, list[dict[str, Any]]]:
    """kind -> the objects written (every region's)."""
    result = CliRunner().invoke(app, ["karpenter", str(plan_dir), "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(out.glob("*/*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document:
                kinds[document["kind"]].append(document)
    return kinds


def requirement(pool: dict[str, Any], key: str) -> list[str]:
    found = [r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    assert len(found) == 1, (pool["metadata"]["name"], key)
    return list(found[0]["values"])


def _pool(**spec: Any) -> dict[str, Any]:
    template = {
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}],
        }
    }
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {"template": template, **spec},
    }


def _node_class(**spec: Any) -> dict[str, Any]:
    base = {
        "role": "r",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"a": "b"}}],
        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
    }
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "c"},
        "spec": {**base, **spec},
    }


# ---- the validator refuses what the API server would ----------------------------------------------------


def test_the_validator_knows_karpenters_kinds_and_their_rules(validator: CrdValidator):
    assert set(validator.schemas) == {"NodePool", "NodeClaim", "EC2NodeClass"}
    assert validator.groups["EC2NodeClass"] == "karpenter.k8s.aws"
    assert sum(count_rules(s) for s in validator.schemas.values()) == 74  # grep -c 'rule:' over the CRDs


def test_typos_and_rule_violations_are_refused(validator: CrdValidator):
    assert validator.errors(_pool(weight=10)) == []
    assert validator.errors(_node_class()) == []
    assert any("weigth" in e for e in validator.errors(_pool(weigth=10)))  # unknown field
    assert validator.errors(_pool(weight=101))  # beyond the CRD's maximum
    # Kubernetes' CEL find(): the karpenter.sh label domain is Karpenter's own
    restricted = _pool()
    restricted["spec"]["template"]["metadata"] = {"labels": {"karpenter.sh/mine": "x"}}
    assert any("karpenter.sh" in e for e in validator.errors(restricted))
    allowed = _pool()
    allowed["spec"]["template"]["metadata"] = {"labels": {"gpuplan.io/capacity-type": "spot"}}
    assert validator.errors(allowed) == []
    # an id term takes no other field
    both = _node_class(capacityReservationSelectorTerms=[{"id": "cr-0abc", "tags": {"a": "b"}}])
    assert any("mutually exclusive" in e for e in validator.errors(both))
    assert validator.errors(_node_class(amiSelectorTerms=[{"alias": "windows2022@v1"}]))
    # consolidateAfter has no default of its own: a disruption without it is refused
    assert validator.errors(_pool(disruption={"consolidationPolicy": "WhenEmpty"}))
    assert (
        validator.errors(_pool(disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m"}))
        == []
    )
    bad_budget = _pool(
        disruption={"consolidateAfter": "1m", "budgets": [{"nodes": "1", "schedule": "@daily"}]}
    )
    assert any("duration" in e for e in validator.errors(bad_budget))


# ---- the mixed-fleet week on AWS --------------------------------------------------------------------------


def test_the_week_plans_fleet_validates_and_follows_the_plan(
    week_plan: Any, tmp_path: Path, validator: CrdValidator
):
    plan_dir = week_plan("aws")
    kinds = run_karpenter(plan_dir, tmp_path / "out")
    before = validator.rules_evaluated
    for kind in ("NodePool", "EC2NodeClass"):
        assert kinds[kind], kind
        for document in kinds[kind]:
            assert validator.errors(document) == [], (kind, document["metadata"]["name"])
    assert validator.rules_evaluated > before
    classes = {c["metadata"]["name"]: c for c in kinds["EC2NodeClass"]}
    pools = {p["metadata"]["name"]: p for p in kinds["NodePool"]}
    for pool in pools.values():
        assert pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] in classes

    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    offerings = plan["offerings"]
    rows = pd.read_csv(plan_dir / "allocations.csv")

    # every non-spot multi-node gang has its reserved pool, selecting the reservation provision tags
    gangs = [t for t in plan["training"] if t["nodes"] > 1 and t["tier"] != "spot"]
    assert gangs
    for gang in gangs:
        run = f"{gang['job']}-{gang['run']}"
        pool = pools[f"res-{run}"]
        assert requirement(pool, "karpenter.sh/capacity-type") == ["reserved"]
        assert pool["spec"]["limits"] == {
            "nodes": gang["nodes"],
            "nvidia.com/gpu": gang["nodes"] * offerings[gang["offering"]]["gpus_per_node"],
        }
        node_class = classes[pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]]
        assert node_class["spec"]["capacityReservationSelectorTerms"] == [
            {"tags": {"gpuplan-plan": plan["scenario"], "gpuplan-run": run}}
        ]
        assert node_class["spec"]["placementGroupSelector"] == {"name": gang["placement_group"]}
        assert {"key": "gpuplan.io/run", "value": run, "effect": "NoSchedule"} in pool["spec"]["template"][
            "spec"
        ]["taints"]

    # limits: the peak of whole nodes per period of each (offering, tier), gangs' rows apart
    def in_gang(row: Any) -> bool:
        return any(
            row.kind == "training"
            and row.workload == g["job"]
            and row.offering == g["offering"]
            and g["start_period"] <= row.period < g["start_period"] + g["periods"]
            for g in plan["training"]
            if g["nodes"] > 1
        )

    tier_of = {
        "reserved_1y": "committed",
        "reserved_3y": "committed",
        "on_demand": "on-demand",
        "spot": "spot",
    }
    per_period: dict[tuple[str, str, int], float] = defaultdict(float)
    for row in rows.itertuples(index=False):
        if row.tier in tier_of and row.offering.startswith("aws:") and not in_gang(row):
            per_period[(row.offering, tier_of[row.tier], row.period)] += row.nodes
    peaks: dict[tuple[str, str], int] = defaultdict(int)
    for (offering, tier, _period), nodes in per_period.items():
        peaks[(offering, tier)] = max(peaks[(offering, tier)], math.ceil(nodes - 1e-6))
    tier_pools = {k: v for k, v in pools.items() if not k.startswith("res-")}
    assert len(tier_pools) == len([k for k, n in peaks.items() if n > 0])
    seen_tiers = set()
    for pool in tier_pools.values():
        offering = "aws:{}:{}".format(
            requirement(pool, "topology.kubernetes.io/region")[0],
            requirement(pool, "node.kubernetes.io/instance-type")[0],
        )
        label = pool["spec"]["template"]["metadata"]["labels"]["gpuplan.io/capacity-type"]
        capacity = requirement(pool, "karpenter.sh/capacity-type")[0]
        tier = {"reserved": "committed", "on-demand": "on-demand", "spot": "spot"}[label]
        assert capacity == ("spot" if tier == "spot" else "on-demand")
        seen_tiers.add(tier)
        nodes = peaks[(offering, tier)]
        assert pool["spec"]["limits"] == {
            "nodes": nodes,
            "nvidia.com/gpu": nodes * offerings[offering]["gpus_per_node"],
        }, pool["metadata"]["name"]
    assert seen_tiers == {"committed", "on-demand", "spot"}


def test_weights_try_reservations_then_commitments_then_the_cheapest(week_plan: Any, tmp_path: Path):
    """Prices from plan.json, computed here: committed pools at their commitments' cost over GPU-hours,
    on demand and spot at the offering's rate over its GPUs."""
    plan_dir = week_plan("aws")
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    offerings, hours = plan["offerings"], plan["horizon"]["period_hours"]
    cost: dict[str, float] = defaultdict(float)
    gpu_hours: dict[str, float] = defaultdict(float)
    for c in plan["commitments"]:
        if c["term"] in ("1y", "3y"):
            end = plan["horizon"]["periods"] if c["end_period"] is None else c["end_period"]
            cost[c["offering"]] += c["cost_in_horizon_usd"]
            gpu_hours[c["offering"]] += (
                c["nodes"] * offerings[c["offering"]]["gpus_per_node"] * (end - c["start_period"]) * hours
            )
    kinds = run_karpenter(plan_dir, tmp_path / "out")
    ranked = []
    for pool in kinds["NodePool"]:
        capacity = requirement(pool, "karpenter.sh/capacity-type")[0]
        label = pool["spec"]["template"]["metadata"]["labels"]["gpuplan.io/capacity-type"]
        offering = "aws:{}:{}".format(
            requirement(pool, "topology.kubernetes.io/region")[0],
            requirement(pool, "node.kubernetes.io/instance-type")[0],
        )
        record = offerings[offering]
        if capacity == "reserved":
            key: tuple[int, float] = (0, 0.0)
        elif label == "reserved":
            key = (1, cost[offering] / gpu_hours[offering])
        else:
            rate = record["spot_usd_h"] if capacity == "spot" else record["on_demand_usd_h"]
            key = (2, rate / record["gpus_per_node"])
        ranked.append((key, pool["spec"]["weight"]))
    assert {k[0] for k, _ in ranked} == {0, 1, 2}
    ranked.sort(key=lambda item: item[0])
    weights = [w for _, w in ranked]
    # Karpenter tries the higher weight first: the cheaper tier (as the plan ranks them) never weighs less
    for (key, weight), (next_key, next_weight) in itertools.pairwise(ranked):
        assert weight > next_weight or (key[0] == 0 and next_key[0] == 0 and weight == next_weight), ranked
    assert max(weights) == 100 and min(weights) >= 1


def test_spot_pools_carry_the_kueue_exports_taint(week_plan: Any, tmp_path: Path):
    from planner.outputs.k8s import SPOT_TOLERATION

    kinds = run_karpenter(week_plan("aws"), tmp_path / "out")
    k8s_flavors = tmp_path / "k8s"
    result = CliRunner().invoke(app, ["k8s", str(week_plan("aws")), "-o", str(k8s_flavors)])
    assert result.exit_code == 0, result.output
    flavors = [
        d
        for d in yaml.safe_load_all((k8s_flavors / "10-resource-flavors.yaml").read_text(encoding="utf-8"))
        if d
    ]
    kueue_spot_taints = [t for f in flavors for t in f["spec"].get("nodeTaints", [])]
    assert kueue_spot_taints
    spot = [p for p in kinds["NodePool"] if requirement(p, "karpenter.sh/capacity-type") == ["spot"]]
    assert spot
    for pool in kinds["NodePool"]:
        taints = pool["spec"]["template"]["spec"].get("taints", [])
        labels = pool["spec"]["template"]["metadata"]["labels"]
        if pool in spot:
            assert kueue_spot_taints[0] in taints and labels["gpuplan.io/capacity-type"] == "spot"
            assert {k: SPOT_TOLERATION[k] for k in ("key", "value", "effect")} == kueue_spot_taints[0]
        else:
            assert all(t["key"] != "gpuplan.io/capacity-type" for t in taints)
    # --gpu-taint adds nvidia.com/gpu to every pool; without it no pool has it
    assert all(
        t["key"] != "nvidia.com/gpu"
        for p in kinds["NodePool"]
        for t in p["spec"]["template"]["spec"].get("taints", [])
    )
    tainted = run_karpenter(week_plan("aws"), tmp_path / "gpu", "--gpu-taint")
    assert all(
        any(t["key"] == "nvidia.com/gpu" for t in p["spec"]["template"]["spec"]["taints"])
        for p in tainted["NodePool"]
    )


def test_same_plan_same_bytes(week_plan: Any, tmp_path: Path):
    run_karpenter(week_plan("aws"), tmp_path / "a")
    run_karpenter(week_plan("aws"), tmp_path / "b")
    first = {
        p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()
    }
    second = {
        p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()
    }
    assert first and first == second


# ---- a held capacity reservation ---------------------------------------------------------------------------


def _small_plan(kit: Any, directory: Path, row: dict[str, Any], commitments: list[dict[str, Any]]) -> Path:
    """Two days of one latency-critical H100 service on ``row``'s offering, holding ``commitments``."""
    from models.inputs import load_inputs
    from planner.planning.optimize import SolveSettings, optimize

    kit.write_catalog_csv(directory / "catalog.csv", [row])
    service = {
        "name": "chat",
        "team": "t",
        "gpus_per_replica": 8,
        "gpu_models": ["H100"],
        "latency_critical": True,
        "replicas": {"profile": "flat", "base": 3},
    }
    data = kit.scenario_dict(hours=48, terms=["1y"], inference=[service])
    data["commitments"] = commitments
    inputs = load_inputs(kit.write_scenario_yaml(directory / "s.yaml", data))
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=10))
    (directory / "plan").mkdir()
    plan.write(directory / "plan")
    return directory / "plan"


@pytest.fixture(scope="module")
def held_plan(kit: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """p5 in us-east-1 with a 2-node capacity reservation held."""
    row = kit.offering_row(on_demand_usd_h=16.0, spot_usd_h=6.0, reserved_1y_usd_h=9.0, reserved_3y_usd_h=7.0)
    held = {
        "name": "odcr-launch",
        "offering": "aws:us-east-1:p5.48xlarge",
        "term": "reservation",
        "nodes": 2,
        "start": "2027-01-01T00:00:00Z",
        "end": "2027-03-01T00:00:00Z",
    }
    return _small_plan(kit, tmp_path_factory.mktemp("held"), row, [held])


def test_every_held_reservation_has_its_reserved_pool(
    held_plan: Path, tmp_path: Path, validator: CrdValidator
):
    by_tag = run_karpenter(held_plan, tmp_path / "tag")
    pools = {p["metadata"]["name"]: p for p in by_tag["NodePool"]}
    classes = {c["metadata"]["name"]: c for c in by_tag["EC2NodeClass"]}
    pool = pools["held-odcr-launch"]
    assert requirement(pool, "karpenter.sh/capacity-type") == ["reserved"]
    assert requirement(pool, "node.kubernetes.io/instance-type") == ["p5.48xlarge"]
    assert pool["spec"]["weight"] == 100 and pool["spec"]["limits"] == {"nodes": 2, "nvidia.com/gpu": 16}
    selected = classes[pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]]
    assert selected["spec"]["capacityReservationSelectorTerms"] == [{"tags": {"Name": "odcr-launch"}}]
    assert all(p["spec"]["weight"] < 100 for name, p in pools.items() if name != "held-odcr-launch")
    by_id = run_karpenter(held_plan, tmp_path / "id", "--reservation-id", "odcr-launch=cr-0123abcd")
    for document in by_id["NodePool"] + by_id["EC2NodeClass"]:
        assert validator.errors(document) == [], document["metadata"]["name"]
    selected = next(c for c in by_id["EC2NodeClass"] if c["metadata"]["name"] == "held-odcr-launch")
    assert selected["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123abcd"}]


# ---- bad input ---------------------------------------------------------------------------------------------


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, week_plan: Any, held_plan: Path):
    out = tmp_path / "out"

    def refused(*args: str) -> str:
        result = CliRunner().invoke(app, ["karpenter", *args, "-o", str(out)])
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
        return result.output

    assert "plan.json" in refused(str(tmp_path / "nothing"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "plan.json" in refused(str(empty))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "plan.json").write_text('{"schema": "gpuplan.plan/v1", "scenario": 3}', encoding="utf-8")
    assert "plan.json" in refused(str(broken))
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / "plan.json").write_text('{"schema": "gpuplan.plan/v0", "offerings": []}', encoding="utf-8")
    assert "plan.json" in refused(str(hostile))
    week = str(week_plan("aws"))
    assert "--ami-alias" in refused(week, "--ami-alias", "windows2022@latest")
    assert "--subnet-tag" in refused(week, "--subnet-tag", "novalue")
    assert "--reservation-id" in refused(str(held_plan), "--reservation-id", "odcr-launch=r-123")
    assert "--reservation-id" in refused(str(held_plan), "--reservation-id", "nonesuch=cr-0123")
    assert not out.exists()


def test_a_plan_without_aws_capacity_is_refused(kit: Any, tmp_path: Path):
    """A plan on GCP alone: nothing for Karpenter on AWS, so exit 2 naming the plan's clouds, and nothing
    written (an empty directory would apply as silently doing nothing)."""
    row = kit.offering_row("gcp", "us-central1", "a3-highgpu-8g", fabric="tcpx", spot_usd_h=4.0)
    plan_dir = _small_plan(kit, tmp_path, row, [])
    result = CliRunner().invoke(app, ["karpenter", str(plan_dir), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "no AWS capacity" in result.output and "gcp" in result.output
    assert not (tmp_path / "out").exists()
