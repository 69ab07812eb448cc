"""`gpuplan terraform` end to end: the mixed-fleet plans as Terraform roots.

Every root and its copied module parse with python-hcl2 and use only the attribute paths of each
cloud's allow-list (``terraform_allowlist_<cloud>.py``, written from the providers' documentation); the
root passes its module exactly the variables the module declares (every required one, no unknown one);
the pools in ``terraform.tfvars.json`` are checked against an independent reading of allocations.csv;
a second run writes the same bytes. With the ``terraform`` binary and the local AWS provider mirror,
the AWS root also passes ``init``, ``validate`` and ``fmt -check``, and a root of pools applies and
destroys against moto's server on 127.0.0.1; without them those tests skip, saying why.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hcl_walk import attribute_paths, blocks, check_allowed, load
from typer.testing import CliRunner

from models.naming import pool_name
from models.plan import Plan
from models.tiers import CapacityType
from planner.cli import app
from planner.outputs.desired import RESERVATION_MARGIN, desired_state, reservation_name

TERRAFORM = shutil.which("terraform")
MIRROR = Path(os.environ.get("GPUPLAN_TF_MIRROR", "/opt/tf-plugins"))
HAS_AWS_PROVIDER = (MIRROR / "registry.terraform.io" / "hashicorp" / "aws").is_dir()
needs_terraform = pytest.mark.skipif(
    TERRAFORM is None or not HAS_AWS_PROVIDER,
    reason="needs the terraform binary on PATH and the AWS provider in a local mirror (GPUPLAN_TF_MIRROR, "
    "default /opt/tf-plugins): see CLOUD-TESTING.md section 4",
)


def _write(plan_dir: Path, output: Path, *extra: str) -> str:
    result = CliRunner().invoke(
        app, ["terraform", str(plan_dir), "-o", str(output), *extra], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return result.output


def _gang_hour(plan_dir: Path) -> str:
    plan = Plan.read(plan_dir)
    gang = next(t for t in plan.document.training if t.nodes > 1)
    return f"{gang.start + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}"


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def roots(week_plan: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each cloud's root, written --at the hour its week plan's gang runs."""
    out: dict[str, Path] = {}
    for cloud in ("aws", "gcp", "azure"):
        plan_dir = week_plan(cloud)
        target = tmp_path_factory.mktemp(f"tf-{cloud}")
        _write(plan_dir, target / "roots", "--at", _gang_hour(plan_dir))
        out[cloud] = target / "roots" / cloud
    return out


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_roots_and_modules_parse_and_keep_to_the_allow_list(cloud: str, roots: dict[str, Path]) -> None:
    root = roots[cloud]
    allowed: dict[str, set[str]] = importlib.import_module(f"terraform_allowlist_{cloud}").ALLOWED
    files = sorted(root.rglob("*.tf"))
    assert {f.name for f in files} >= {"main.tf", "variables.tf", "versions.tf", "outputs.tf"}
    found = attribute_paths(files)
    assert found, "no resources found"
    assert check_allowed(found, allowed) == []
    text = (root / "main.tf").read_text(encoding="utf-8")
    assert all(word not in text.lower() for word in ("access_key", "secret", "client_secret", "credentials"))


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_the_root_passes_the_module_exactly_its_variables(cloud: str, roots: dict[str, Path]) -> None:
    root = roots[cloud]
    module_dir = root / "modules" / f"{cloud}-gpu-pool"
    declared: dict[str, bool] = {}  # variable -> required (no default)
    for path in sorted(module_dir.glob("*.tf")):
        for name, _label, body in blocks(load(path), "variable"):
            declared[name] = "default" not in body
    calls = [body for _name, _label, body in blocks(load(root / "main.tf"), "module")]
    assert calls
    meta = {"source", "for_each", "providers", "count", "depends_on", "__is_block__"}
    for call in calls:
        passed = {k for k in call if k not in meta}
        assert passed - set(declared) == set(), "arguments the module does not declare"
        assert {v for v, required in declared.items() if required} - passed == set(), "required ones missing"


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_the_root_pins_its_provider_as_its_module_does(cloud: str, roots: dict[str, Path]) -> None:
    """A root whose provider range does not meet its module's fails ``terraform init`` (no version fits
    both): the azurerm 4.x root beside the 5.x module, the google >= 5.0 root beside a module that needs
    6.19's MRDMA, were exactly that."""

    def pins(path: Path) -> dict[str, str]:
        found = {}
        for body in load(path).get("terraform", []):
            for providers in body.get("required_providers", []):
                found |= {name: spec["version"] for name, spec in providers.items() if isinstance(spec, dict)}
        return found

    root = roots[cloud]
    module = pins(root / "modules" / f"{cloud}-gpu-pool" / "versions.tf")
    assert module and pins(root / "versions.tf") == module


def _independent_pools(plan: Plan, cloud: str, period: int) -> dict[str, tuple[int, int]]:
    """offering -> (on-demand, spot) whole nodes of the period's inference rows, by pandas."""
    rows = plan.allocations
    rows = rows[
        (rows.period == period) & (rows.kind == "inference") & rows.offering.str.startswith(f"{cloud}:")
    ]
    out: dict[str, tuple[int, int]] = {}
    for offering, group in rows.groupby("offering"):
        spot = group[group.tier == "spot"].nodes.sum()
        other = group[group.tier != "spot"].nodes.sum()
        out[str(offering)] = (math.ceil(other - 1e-6), math.ceil(spot - 1e-6))
    return {k: v for k, v in out.items() if v != (0, 0)}


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_the_pools_are_the_plans_at_that_hour(
    cloud: str, roots: dict[str, Path], week_plan: Callable[[str], Path]
) -> None:
    plan = Plan.read(week_plan(cloud))
    tfvars = json.loads((roots[cloud] / "terraform.tfvars.json").read_text(encoding="utf-8"))
    pools = tfvars["pools"]
    gang = next(t for t in plan.document.training if t.nodes > 1)
    period = gang.start_period + 1
    type_field = {"aws": "instance_type", "gcp": "machine_type", "azure": "vm_size"}[cloud]
    plain: dict[str, tuple[int, int]] = {}
    for p in pools.values():
        if p["run"] is not None:
            continue
        offering = f"{cloud}:{p['region']}:{p[type_field]}"
        # one module instance per pool as provision names it: an offering's nodes on one capacity type
        assert (p["on_demand_nodes"] == 0) != (p["spot_nodes"] == 0), p
        capacity = CapacityType.SPOT if p["spot_nodes"] else CapacityType.ON_DEMAND
        assert p["pool"] == pool_name(offering, capacity)
        on_demand, spot = plain.get(offering, (0, 0))
        plain[offering] = (on_demand + p["on_demand_nodes"], spot + p["spot_nodes"])
    assert plain == _independent_pools(plan, cloud, period)
    (gang_pool,) = [p for p in pools.values() if p["run"] is not None]
    # the gang's group and reservation carry the names provision gives them
    at = plan.document.horizon.start + timedelta(hours=period)
    (desired,) = [
        g
        for g in desired_state(plan, at, handles=lambda o: o.startswith(f"{cloud}:")).gangs
        if g.run == gang_pool["run"]
    ]
    assert gang_pool["placement_group"] == desired.placement_group
    assert gang_pool["reservation"] == (reservation_name(desired) if gang_pool["reserved_nodes"] else None)
    kind = "spot_nodes" if gang.tier == "spot" else "on_demand_nodes"
    assert gang_pool[kind] == gang.nodes and gang_pool["fabric"] == gang.fabric
    reserved = gang.tier != "spot" and cloud != "azure"  # Azure: a proximity placement group takes none
    assert gang_pool["reserved_nodes"] == (gang.nodes if reserved else 0)
    # the reservation ends with the run: its planned end plus provision's margin, so none bills forever
    if cloud == "azure":
        assert "reservation_end" not in gang_pool  # no gang reservation there, and no module input for it
    else:
        end = gang.end + RESERVATION_MARGIN
        assert gang_pool["reservation_end"] == (f"{end:%Y-%m-%dT%H:%M:%SZ}" if reserved else None)
        assert end > gang.end and end.utcoffset() == timedelta(0)
    assert tfvars["plan_id"] == f"mixed-fleet-week-{cloud}"


def test_the_steady_state_holds_each_pools_peak_and_the_committed_baseline(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir = week_plan("aws")
    _write(plan_dir, tmp_path / "roots", "--peak")
    plan = Plan.read(plan_dir)
    pools = json.loads((tmp_path / "roots" / "aws" / "terraform.tfvars.json").read_text(encoding="utf-8"))[
        "pools"
    ]
    assert all(p["run"] is None for p in pools.values())  # gangs are transient: not in the steady state
    rows = plan.allocations[plan.allocations.kind == "inference"]
    for pool in pools.values():
        offering = f"aws:{pool['region']}:{pool['instance_type']}"
        mine = rows[rows.offering == offering]
        spot = mine[mine.tier == "spot"].groupby("period").nodes.sum()
        other = mine[mine.tier != "spot"].groupby("period").nodes.sum()
        periods = plan.document.horizon.periods
        held = [0] * periods
        for c in (c for c in plan.document.commitments if c.offering == offering):
            for t in range(c.start_period, periods if c.end_period is None else c.end_period):
                held[t] += c.nodes
        committed = max(held)
        assert pool["spot_nodes"] == (math.ceil(spot.max() - 1e-6) if len(spot) else 0)
        assert pool["on_demand_nodes"] == max(committed, math.ceil(other.max() - 1e-6) if len(other) else 0)
    main = (tmp_path / "roots" / "aws" / "main.tf").read_text(encoding="utf-8")
    assert "the steady state" in main


def test_a_second_run_writes_the_same_bytes(week_plan: Callable[[str], Path], tmp_path: Path) -> None:
    plan_dir = week_plan("all")
    at = _gang_hour(plan_dir)
    _write(plan_dir, tmp_path / "first", "--at", at)
    _write(plan_dir, tmp_path / "second", "--at", at)
    first, second = _tree(tmp_path / "first"), _tree(tmp_path / "second")
    assert first == second
    plan = Plan.read(plan_dir)
    used = {offering.split(":")[0] for offering in plan.document.offerings}
    assert len(used) >= 2 and {name.split("/")[0] for name in first} == used  # one root per cloud it uses
    readme = (tmp_path / "first" / "aws" / "README.md").read_text(encoding="utf-8")
    for commitment in (c for c in plan.document.commitments if c.offering.startswith("aws:")):
        assert f"| {commitment.offering} | {commitment.term} | {commitment.nodes} |" in readme
    assert "decisions, not resources" in readme


def test_bad_options_exit_2(week_plan: Callable[[str], Path], tmp_path: Path) -> None:
    runner = CliRunner()
    plan_dir = str(week_plan("aws"))
    for extra, message in (
        (["--at", "2027-02-01T00:00:00Z", "--peak"], "not both"),
        (["--at", "2031-01-01"], "outside the plan's horizon"),
        (["--cloud", "oci"], "unknown cloud 'oci'"),
        (["--lead-hours", "800"], "--lead-hours: must be from 0 to 744 hours (a month), got 800"),
    ):
        result = runner.invoke(app, ["terraform", plan_dir, "-o", str(tmp_path / "x"), *extra])
        assert result.exit_code == 2 and message in result.output
        assert not (tmp_path / "x").exists()  # nothing half-written


# ----------------------------------------------------------------------------------------------------------
# with the terraform binary


def _terraform(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    assert TERRAFORM is not None
    environment = {k: v for k, v in os.environ.items() if k != "TF_CLI_CONFIG_FILE"}
    environment.update(TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1", **(env or {}))
    done = subprocess.run(
        [TERRAFORM, f"-chdir={root}", *args], capture_output=True, text=True, env=environment, timeout=timeout
    )
    assert done.returncode == 0, f"terraform {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _moto_site(root: Path, regions: list[str], url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A VPC and subnet per region on moto's server, the root's site settings for them, and an override
    file pointing each regional provider at moto (override files merge into the root's provider blocks,
    Terraform's own rule); the site settings."""
    import boto3

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    site: dict[str, Any] = {"image_id": {}, "subnet_ids": {}}
    for region in regions:
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=url)
        vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.40.1.0/24", AvailabilityZone=f"{region}a")
        site["subnet_ids"][region] = [subnet["Subnet"]["SubnetId"]]
        site["image_id"][region] = "ami-0a1b2c3d4e5f60718"
    (root / "site.auto.tfvars.json").write_text(json.dumps(site), encoding="utf-8")
    overrides = []
    for region in regions:
        overrides += [
            'provider "aws" {',
            f'  alias                       = "{region.replace("-", "_")}"',
            "  skip_credentials_validation = true",
            "  skip_requesting_account_id  = true",
            "  skip_metadata_api_check     = true",
            "  max_retries                 = 1",
            "  endpoints {",
            f'    ec2         = "{url}"',
            f'    autoscaling = "{url}"',
            f'    sts         = "{url}"',
            f'    iam         = "{url}"',
            "  }",
            "}",
        ]
    (root / "moto_override.tf").write_text("\n".join(overrides) + "\n", encoding="utf-8")
    return site


@needs_terraform
def test_the_aws_root_validates_and_plans_a_gang_reservation_that_ends(
    roots: dict[str, Path],
    week_plan: Callable[[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moto_server: str,
) -> None:
    """The root written at the gang's hour passes init, validate and fmt with the real provider, and its
    plan against moto's server (the data sources read from it) holds the gang's capacity reservation as
    ``limited``, ending at the run's planned end plus provision's margin. moto has no capacity
    reservations or placement groups, so the root is planned, not applied (the apply of a root of pools
    is test_an_aws_root_of_pools_applies_and_destroys_against_moto)."""
    root = tmp_path / "aws"
    shutil.copytree(roots["aws"], root)
    _terraform(root, "init", "-backend=false", "-input=false", f"-plugin-dir={MIRROR}")
    _terraform(root, "validate")
    _terraform(root, "fmt", "-check", "-recursive")

    pools = json.loads((root / "terraform.tfvars.json").read_text(encoding="utf-8"))["pools"]
    (key,) = [k for k, p in pools.items() if p["run"] is not None and p["reserved_nodes"]]
    _moto_site(root, sorted({p["region"] for p in pools.values()}), moto_server, monkeypatch)
    _terraform(root, "plan", "-input=false", "-lock=false", "-out=gang.tfplan")
    shown = json.loads(_terraform(root, "show", "-json", "gang.tfplan"))
    reservations = [
        change
        for change in shown["resource_changes"]
        if change["type"] == "aws_ec2_capacity_reservation" and change["change"]["actions"] == ["create"]
    ]
    assert [r["module_address"] for r in reservations] == [
        f'module.{pools[key]["region"].replace("-", "_")}["{key}"]'
    ]
    after = reservations[0]["change"]["after"]
    plan = Plan.read(week_plan("aws"))
    (gang,) = [t for t in plan.document.training if t.nodes == pools[key]["reserved_nodes"] and t.nodes > 1]
    assert after["end_date_type"] == "limited"
    assert after["end_date"] == f"{gang.end + RESERVATION_MARGIN:%Y-%m-%dT%H:%M:%SZ}"
    assert after["instance_count"] == gang.nodes and after["instance_match_criteria"] == "targeted"


@pytest.mark.slow  # ~40 s: every terraform command starts the AWS provider several times
@needs_terraform
def test_an_aws_root_of_pools_applies_and_destroys_against_moto(
    week_plan: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: str
) -> None:
    import boto3

    plan_dir = week_plan("aws")
    plan = Plan.read(plan_dir)
    gang = next(t for t in plan.document.training if t.nodes > 1)
    # 03:00 the day before the gang: pools only (no placement group, which moto lacks), spot ones among them
    quiet = f"{gang.start - timedelta(hours=21):%Y-%m-%dT%H:%M:%SZ}"
    _write(plan_dir, tmp_path / "roots", "--at", quiet)
    root = tmp_path / "roots" / "aws"
    pools = json.loads((root / "terraform.tfvars.json").read_text(encoding="utf-8"))["pools"]
    assert pools and all(p["run"] is None for p in pools.values())
    assert any(p["spot_nodes"] for p in pools.values()), "the hour should have a spot pool to mix"

    url = moto_server
    regions = sorted({p["region"] for p in pools.values()})
    site = _moto_site(root, regions, url, monkeypatch)
    _terraform(root, "init", "-backend=false", "-input=false", f"-plugin-dir={MIRROR}")
    _terraform(root, "apply", "-auto-approve", "-input=false")
    for region in regions:
        groups = boto3.client(
            "autoscaling", region_name=region, endpoint_url=url
        ).describe_auto_scaling_groups()
        tags = [{t["Key"]: t["Value"] for t in g["Tags"]} for g in groups["AutoScalingGroups"]]
        by_pool = {t["gpuplan-pool"]: g for t, g in zip(tags, groups["AutoScalingGroups"], strict=True)}
        mine = {p["pool"]: p for p in pools.values() if p["region"] == region}
        assert set(by_pool) == set(mine)
        for name, pool in mine.items():
            group = by_pool[name]
            size = pool["on_demand_nodes"] + pool["spot_nodes"]
            assert (group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == (size, size, size)
            if pool["spot_nodes"]:  # on-demand base, spot above it, price-capacity-optimized
                distribution = group["MixedInstancesPolicy"]["InstancesDistribution"]
                assert distribution["OnDemandBaseCapacity"] == pool["on_demand_nodes"]
                assert distribution["OnDemandPercentageAboveBaseCapacity"] == 0
                assert distribution["SpotAllocationStrategy"] == "price-capacity-optimized"
            else:
                assert "MixedInstancesPolicy" not in group
    # the same plan provisioned beside the applied root: one naming rule, and Terraform's nodes are never
    # provision's to terminate (issue 35 point 2): nothing to terminate, and Terraform's nodes fill the pools
    _provision_beside(plan_dir, quiet, site, url, tmp_path, monkeypatch)
    _terraform(root, "destroy", "-auto-approve", "-input=false")
    for region in regions:
        groups = boto3.client(
            "autoscaling", region_name=region, endpoint_url=url
        ).describe_auto_scaling_groups()
        assert groups["AutoScalingGroups"] == []


def _provision_beside(
    plan_dir: Path, at: str, site: dict[str, Any], url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gpuplan provision --cloud aws`` on moto's server, after a root of the same plan was applied
    there: its dry run must terminate nothing, and launch nothing for the pools Terraform holds."""
    import boto3
    from aws_stand_in import Ec2StandIn

    ec2 = boto3.client("ec2", region_name=sorted(site["subnet_ids"])[0], endpoint_url=url)
    tagged = [
        {t["Key"]: t["Value"] for t in i.get("Tags", [])}
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
    ]
    assert tagged and all(t.get("gpuplan-managed-by") == "terraform" for t in tagged)
    stand_in = Ec2StandIn()  # placement groups and reservations, which moto lacks
    real_session = boto3.Session

    class HookedSession(real_session):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            stand_in.install(self)

    monkeypatch.setattr(boto3, "Session", HookedSession)
    config = tmp_path / "providers.yaml"
    aws = {"endpoint_url": url, "image_id": site["image_id"], "subnets": site["subnet_ids"]}
    config.write_text(json.dumps({"aws": aws}), encoding="utf-8")
    actions = tmp_path / "actions.json"
    result = CliRunner().invoke(
        app,
        ["provision", str(plan_dir), "--cloud", "aws", "--at", at, "--provider-config", str(config),
         "--actions", str(actions), "-q"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    kinds = [a["kind"] for a in json.loads(actions.read_text(encoding="utf-8"))["actions"]]
    assert "terminate" not in kinds, result.output
    assert "launch" not in kinds, result.output  # Terraform's nodes count toward provision's pools
