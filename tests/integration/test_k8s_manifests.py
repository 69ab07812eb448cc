"""`gpuplan k8s`: the manifests of every scenario validate strictly (Kueue CRDs with unknown fields refused
and their CEL rules run, kubernetes-validate for the built-in kinds, the mig-parted config against the
project's schema and NVIDIA's profile names), quotas follow the teams' guarantees and bursts, flavors come
cheapest first, and the validator itself refuses what the API server would; and `gpuplan chargeback` of
the same plans reconciles with each plan's total.

Plans are small: each scenario cut to 24 hours (training runs shortened to fit, windows dropped), solved to
a 5 % gap; these tests are about the manifests a plan gives, not about its optimality.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kueue_validate import CRDS, KueueValidator, count_rules
from typer.testing import CliRunner

from models.plan import OfferingRecord
from planner.cli import app
from planner.outputs.k8s import gpu_product

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
MIG_PARTED = CRDS.parent / "mig-parted"
MIG_SCHEMA = json.loads((ROOT / "models" / "data" / "mig-parted.schema.json").read_text(encoding="utf-8"))
HOURS = 24
K8S_VERSION = "1.34"

pytestmark = pytest.mark.skipif(not CRDS.is_dir(), reason=f"the Kueue CRDs are not at {CRDS}")


@pytest.fixture(scope="module")
def validator() -> KueueValidator:
    return KueueValidator()


@pytest.fixture(scope="module")
def short_plan(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``short_plan(path)``: the scenario at ``path`` cut to HOURS, planned once per module; its directory."""
    from models.inputs import load_inputs
    from planner.planning.optimize import SolveSettings, optimize

    made: dict[str, Path] = {}

    def get(path: Path) -> Path:
        if path.stem not in made:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            data["horizon"] = {"start": data["horizon"]["start"], "hours": HOURS}
            data["training"] = [
                {**job, "earliest_start": None, "deadline": None, "repeat": "none", "hours": HOURS / 4}
                for job in data.get("training", [])
            ]
            directory = tmp_path_factory.mktemp(path.stem)
            if data.get("catalog") not in (None, "embedded"):  # its own catalog: from beside the original
                data["catalog"] = str(path.parent / data["catalog"])
            for service in data.get("inference", []):
                if "csv" in service["replicas"]:
                    service["replicas"]["csv"] = str(path.parent / service["replicas"]["csv"])
            scenario = directory / "scenario.yaml"
            scenario.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
            inputs = load_inputs(scenario)
            settings = SolveSettings(gap=0.05, time_limit=5, certify=False)
            plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, settings)
            (directory / "plan").mkdir()
            plan.write(directory / "plan")
            made[path.stem] = directory / "plan"
        return made[path.stem]

    return get


def run_k8s(plan_dir: Path, out: Path, *extra: str) -> dict[str, list[dict[str, Any]]]:
    result = CliRunner().invoke(app, ["k8s", str(plan_dir), "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    return {
        p.name: [d for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]
        for p in out.glob("*.yaml")
    }


def by_kind(files: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for documents in files.values():
        for document in documents:
            kinds[document["kind"]].append(document)
    return kinds


def gpu_quota(queue: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """flavor -> its nvidia.com/gpu entry in the queue."""
    return {
        flavor["name"]: resource
        for group in queue["spec"]["resourceGroups"]
        for flavor in group["flavors"]
        for resource in flavor["resources"]
        if resource["name"] == "nvidia.com/gpu"
    }


def nvidia_profile_names() -> set[str]:
    default = yaml.safe_load((MIG_PARTED / "config-default.yaml").read_text(encoding="utf-8"))
    return {
        name
        for groups in default["mig-configs"].values()
        for g in groups
        for name in g.get("mig-devices") or {}
    }


# ---- the validator and the schema refuse what they should ---------------------------------------------


def test_validator_evaluates_every_cel_rule_of_the_crds(validator: KueueValidator):
    assert set(validator.schemas) == {"ClusterQueue", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass"}
    assert sum(count_rules(s) for s in validator.schemas.values()) == 13  # CLOUD-TESTING.md section 6


def _flavor(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "f"},
        "spec": spec,
    }


def _queue(**spec: Any) -> dict[str, Any]:
    groups = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
        }
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": {"cohortName": "c", "resourceGroups": groups, **spec},
    }


def test_a_typo_is_refused_which_the_plain_crd_schema_lets_through(validator: KueueValidator):
    assert validator.errors(_flavor(nodeLabels={"a": "b"})) == []
    typo = _flavor(nodeLabel={"a": "b"})
    assert any("nodeLabel" in e for e in validator.errors(typo))
    assert not list(jsonschema.Draft202012Validator(validator.schemas["ResourceFlavor"]).iter_errors(typo))
    queue = _queue()
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuotas"] = 1
    assert any("nominalQuotas" in e for e in validator.errors(queue))


def test_cel_rule_violations_are_refused(validator: KueueValidator):
    ok = {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}}
    assert validator.errors(_queue(preemption=ok)) == []
    never = {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
    assert any("reclaimWithinCohort" in e for e in validator.errors(_queue(preemption=never)))
    # a default counts: reclaimWithinCohort left out is Never, so the same rule refuses it
    assert validator.errors(_queue(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}))
    bad_toleration = _flavor(nodeLabels={"a": "b"}, tolerations=[{"operator": "Equal", "value": "x"}])
    assert any("operator" in e for e in validator.errors(bad_toleration))
    no_cohort = _queue()
    del no_cohort["spec"]["cohortName"]
    no_cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 4
    assert validator.errors(no_cohort)  # borrowing needs a cohort
    uneven = _queue()
    uneven["spec"]["resourceGroups"][0]["coveredResources"].append("nvidia.com/mig-1g.10gb")
    assert any("coveredResources" in e for e in validator.errors(uneven))


def test_the_mig_parted_schema_takes_nvidias_configs_and_refuses_typos():
    for name in ("config-default.yaml", "examples-config.yaml"):
        jsonschema.validate(yaml.safe_load((MIG_PARTED / name).read_text(encoding="utf-8")), MIG_SCHEMA)
    typo = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enable": True}]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(typo, MIG_SCHEMA)
    off_with_slices = {
        "version": "v1",
        "mig-configs": {"x": [{"devices": [0], "mig-enabled": False, "mig-devices": {"1g.10gb": 7}}]},
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(off_with_slices, MIG_SCHEMA)


# ---- every scenario ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_manifests_of_every_scenario_validate(
    path: Path, short_plan: Any, validator: KueueValidator, tmp_path
):
    plan_dir = short_plan(path)
    files = run_k8s(plan_dir, tmp_path / "k8s")
    kinds = by_kind(files)
    before = validator.rules_evaluated
    for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"):
        assert kinds[kind], kind
        for document in kinds[kind]:
            assert validator.errors(document) == [], (kind, document["metadata"]["name"])
    assert validator.rules_evaluated > before
    for kind in ("Namespace", "ServiceAccount", "ConfigMap"):
        for document in kinds.get(kind, []):
            kubernetes_validate.validate(document, K8S_VERSION, strict=True)

    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    teams = plan["inputs"]["teams"]
    flavors = {f["metadata"]["name"]: f for f in kinds["ResourceFlavor"]}
    queues = {q["metadata"]["name"]: q for q in kinds["ClusterQueue"]}
    assert {q["spec"]["cohortName"] for q in queues.values()} == {"gpuplan"}
    assert len(queues) == len(teams) + 1  # the teams' and the shared lender
    assert {n["metadata"]["name"] for n in kinds["Namespace"]} == {
        lq["metadata"]["namespace"] for lq in kinds["LocalQueue"]
    }
    for local in kinds["LocalQueue"]:
        assert local["spec"]["clusterQueue"] in queues
    for queue in queues.values():
        for group in queue["spec"]["resourceGroups"]:
            assert all(f["name"] in flavors for f in group["flavors"])
    for team in teams:
        queue = next(
            q for q in queues.values() if q["metadata"]["annotations"].get("gpuplan.io/team") == team["name"]
        )
        quota = gpu_quota(queue)
        assert sum(entry["nominalQuota"] for entry in quota.values()) == team.get("guaranteed_gpus", 0)
        burst = team.get("burst_gpus")
        limits = {entry.get("borrowingLimit") for entry in quota.values()}
        assert limits == {None if burst is None else burst - team.get("guaranteed_gpus", 0)}
        assert queue["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    # spot flavors are tainted and do not tolerate their own taint (so only tolerating workloads go there)
    for flavor in flavors.values():
        spot = flavor["spec"]["nodeLabels"].get("gpuplan.io/capacity-type") == "spot"
        assert ("nodeTaints" in flavor["spec"]) is spot
        assert "tolerations" not in flavor["spec"]
    # the MIG config: the plan's own, valid against the schema, NVIDIA's profile names, one flavor per config
    written = plan_dir / "mig-config.yaml"
    maps = kinds.get("ConfigMap", [])
    assert bool(maps) == written.exists()
    if maps:
        config = yaml.safe_load(maps[0]["data"]["config.yaml"])
        assert config == yaml.safe_load(written.read_text(encoding="utf-8"))
        jsonschema.validate(config, MIG_SCHEMA)
        used = {
            name
            for groups in config["mig-configs"].values()
            for g in groups
            for name in g.get("mig-devices") or {}
        }
        assert used and used <= nvidia_profile_names()
        listed = [f["metadata"]["annotations"].get("gpuplan.io/mig-configs") for f in flavors.values()]
        selected = {name for names in listed if names for name in names.split(",")}
        assert selected == set(config["mig-configs"]) - {"all-disabled"}


def test_same_plan_same_bytes(week_plan: Any, tmp_path: Path):
    plan_dir = week_plan("all")
    run_k8s(plan_dir, tmp_path / "a")
    run_k8s(plan_dir, tmp_path / "b")
    first = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    assert first and first == {p.name: p.read_bytes() for p in (tmp_path / "b").iterdir()}


# ---- quotas and order against hand computations --------------------------------------------------------


def test_a_team_without_a_guarantee_only_borrows(kit: Any, tmp_path: Path, validator: KueueValidator):
    """Three teams on one H100 offering: prod (16 guaranteed, burst 32), research (none, burst 24), adhoc
    (none, no cap). By hand: prod holds 16 GPUs of nominal quota on the reserved flavor and may borrow 16;
    research and adhoc hold none, research borrows up to 24, adhoc without limit; the shared queue lends
    the committed GPUs beyond prod's 16 and the on-demand peak."""
    from models.inputs import load_inputs
    from planner.planning.optimize import SolveSettings, optimize

    kit.write_catalog_csv(
        tmp_path / "catalog.csv",
        [
            kit.offering_row(
                on_demand_usd_h=16.0, spot_usd_h=6.0, reserved_1y_usd_h=9.0, reserved_3y_usd_h=7.0
            )
        ],
    )

    def service(name: str, team: str, replicas: float) -> dict[str, Any]:
        return {
            "name": name,
            "team": team,
            "gpus_per_replica": 8,
            "gpu_models": ["H100"],
            "latency_critical": True,
            "replicas": {"profile": "flat", "base": replicas},
        }

    data = kit.scenario_dict(
        hours=24,
        terms=["1y"],
        teams=[
            {"name": "prod", "guaranteed_gpus": 16, "burst_gpus": 32, "priority": "production"},
            {"name": "research", "burst_gpus": 24},
            {"name": "adhoc"},
        ],
        inference=[service("chat", "prod", 2), service("eval", "research", 1), service("probe", "adhoc", 1)],
    )
    scenario = kit.write_scenario_yaml(tmp_path / "s.yaml", data)
    inputs = load_inputs(scenario)
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=10))
    (tmp_path / "plan").mkdir()
    plan.write(tmp_path / "plan")
    kinds = by_kind(run_k8s(tmp_path / "plan", tmp_path / "k8s"))
    for document in kinds["ClusterQueue"]:
        assert validator.errors(document) == []
    queues = {q["metadata"]["name"]: gpu_quota(q) for q in kinds["ClusterQueue"]}
    reserved = "nvidia-h100-80gb-hbm3-reserved"
    assert {f: e["nominalQuota"] for f, e in queues["prod"].items() if e["nominalQuota"]} == {reserved: 16}
    assert all(e["borrowingLimit"] == 16 for e in queues["prod"].values())
    assert all(e["nominalQuota"] == 0 for e in queues["research"].values())
    assert all(e["borrowingLimit"] == 24 for e in queues["research"].values())
    assert all(e["nominalQuota"] == 0 and "borrowingLimit" not in e for e in queues["adhoc"].values())
    committed = sum(
        c["nodes"] * 8 for c in json.loads((tmp_path / "plan" / "plan.json").read_text())["commitments"]
    )
    assert committed >= 16  # the plan backs the guarantee
    assert queues["gpuplan-shared"][reserved]["nominalQuota"] == committed - 16
    assert (
        "namespaceSelector"
        not in next(q for q in kinds["ClusterQueue"] if q["metadata"]["name"] == "gpuplan-shared")["spec"]
    )


def test_flavors_are_ordered_cheapest_first(week_plan: Any, tmp_path: Path):
    """Prices from plan.json and allocations.csv, computed here: committed capacity at its commitments'
    cost over their GPU-hours in the horizon (and first: it is paid whether used or not), on demand and
    spot at their rows' cost over their GPU-hours."""
    import pandas as pd

    plan_dir = week_plan("all")
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    rows = pd.read_csv(plan_dir / "allocations.csv")
    hours = plan["horizon"]["period_hours"]
    offerings = plan["offerings"]
    cost: dict[tuple[str, str], float] = defaultdict(float)
    gpu_hours: dict[tuple[str, str], float] = defaultdict(float)
    for c in plan["commitments"]:
        end = plan["horizon"]["periods"] if c["end_period"] is None else c["end_period"]
        key = (offerings[c["offering"]]["gpu_model"], "committed")
        cost[key] += c["cost_in_horizon_usd"]
        gpu_hours[key] += (
            c["nodes"] * offerings[c["offering"]]["gpus_per_node"] * (end - c["start_period"]) * hours
        )
    for tier in ("on_demand", "spot"):
        part = rows[rows["tier"] == tier]
        for offering, group in part.groupby("offering"):
            key = (offerings[offering]["gpu_model"], tier)
            cost[key] += group["cost_usd"].sum()
            gpu_hours[key] += group["gpus"].sum() * hours
    price = {key: cost[key] / gpu_hours[key] for key in cost}
    assert any(k[1] == "spot" for k in price) and any(k[1] == "committed" for k in price)
    assert all(gpu_product(OfferingRecord(**offerings[o])) != "" for o in offerings)
    model_of = {gpu_product(OfferingRecord(**record)): record["gpu_model"] for record in offerings.values()}

    kinds = by_kind(run_k8s(plan_dir, tmp_path / "k8s"))
    flavors = {f["metadata"]["name"]: f for f in kinds["ResourceFlavor"]}
    tiers = {"reserved": "committed", "owned": "committed", "on-demand": "on_demand", "spot": "spot"}
    queue = next(q for q in kinds["ClusterQueue"] if q["metadata"]["name"] == "assistant")
    whole = next(g for g in queue["spec"]["resourceGroups"] if g["coveredResources"] == ["nvidia.com/gpu"])
    keys = []
    for entry in whole["flavors"]:
        labels = flavors[entry["name"]]["spec"]["nodeLabels"]
        tier = tiers[labels["gpuplan.io/capacity-type"]]
        keys.append((tier != "committed", price[(model_of[labels["nvidia.com/gpu.product"]], tier)]))
    assert len(keys) == len(price)
    assert keys == sorted(keys), keys
    assert not math.isclose(keys[0][1], keys[-1][1])


# ---- the command line ---------------------------------------------------------------------------------


def test_a_bad_plan_directory_is_one_clear_error(tmp_path: Path, week_plan: Any):
    out = tmp_path / "k8s"
    missing = CliRunner().invoke(app, ["k8s", str(tmp_path / "nothing"), "-o", str(out)])
    assert missing.exit_code == 2
    assert "plan.json" in missing.output and "Traceback" not in missing.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "plan.json").write_text('{"schema": "gpuplan.plan/v1", "scenario": 3}', encoding="utf-8")
    result = CliRunner().invoke(app, ["k8s", str(broken), "-o", str(out)])
    assert result.exit_code == 2 and "plan.json" in result.output
    bad = CliRunner().invoke(app, ["k8s", str(week_plan("all")), "-o", str(out), "--reclaim", "Never"])
    assert bad.exit_code == 2 and "--reclaim" in bad.output
    assert not out.exists()


def test_more_mig_configs_than_kueue_has_flavors_for(
    week_plan: Any, tmp_path: Path, validator: KueueValidator
):
    """A year's plan may have 80 and more MIG configs; a queue takes 64 flavors per resource group, so the
    flavors must not grow with the configs. The week plan with its first config copied 70 times."""
    import shutil

    plan_dir = tmp_path / "plan"
    shutil.copytree(week_plan("all"), plan_dir)
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    pool = plan["mig"]["pools"][0]
    first = pool["configs"][0]
    for copy in range(70):
        pool["configs"].append({**first, "name": f"copy-{copy}"})
        plan["mig"]["config"]["mig-configs"][f"copy-{copy}"] = plan["mig"]["config"]["mig-configs"][
            first["name"]
        ]
    (plan_dir / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    kinds = by_kind(run_k8s(plan_dir, tmp_path / "k8s"))
    for document in kinds["ClusterQueue"] + kinds["ResourceFlavor"]:
        assert validator.errors(document) == [], document["metadata"]["name"]
    listed = {f["metadata"]["annotations"].get("gpuplan.io/mig-configs", "") for f in kinds["ResourceFlavor"]}
    assert any(f"copy-{n}" in names.split(",") for names in listed for n in range(70))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_chargeback_of_every_scenario_reconciles_with_its_plan(path: Path, short_plan: Any, tmp_path: Path):
    """The other half of issue 17 on the same plans (made once per module): gpuplan chargeback runs on
    every scenario and its rows add up to plan.json's total to the cent, under both idle rules."""
    import pandas as pd

    plan_dir = short_plan(path)
    total = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))["costs"]["total_usd"]
    for rule in ("guarantees", "usage"):
        out = tmp_path / rule
        args = ["chargeback", str(plan_dir), "-o", str(out), "--idle-rule", rule]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        rows = pd.read_csv(out / "chargeback.csv")
        assert abs(float(rows["cost_usd"].sum()) - total) < 0.005, (rule, total)
        assert set(rows["team"]) <= {
            t["name"] for t in json.loads((plan_dir / "plan.json").read_text())["inputs"]["teams"]
        }
