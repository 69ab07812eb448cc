"""`gpuplan provision` end to end on every provider: the mixed-fleet week, dry run, apply, apply again.

Each cloud's plan is the mixed-fleet example cut to a week on that cloud (``tests/provision_plans.py``),
provisioned at an hour when its 16-node pretraining gang runs. The real SDK talks to its local stand-in
(moto for EC2, the loopback fakes of the GCP and Azure REST APIs), and the simulated cloud to its state
file. Every run plants fake secrets in the environment and checks that no output, log line or written
file holds one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from stand_in_settings import azure_settings, gcp_settings
from typer.testing import CliRunner

from models.actions import ActionPlan
from models.plan import Plan
from planner.cli import app
from providers.base import Capability
from providers.config import capabilities_of

#: Planted in the environment of every run: none may appear in any output.
SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "planted-aws-secret-8c1f0e",
    "AWS_SESSION_TOKEN": "planted-aws-session-52d9aa",
    "AZURE_ACCESS_TOKEN": "planted-azure-token-a41b77",
    "AZURE_CLIENT_SECRET": "planted-azure-client-secret-19e0c3",
    "GOOGLE_OAUTH_ACCESS_TOKEN": "planted-google-token-7e22d5",
}


@dataclass
class Stand:
    """A provider's stand-in: the CLI flags that reach it, and what it was asked to create."""

    cloud: str
    flags: list[str]
    created: Callable[[], dict[str, Any]]  # what exists at the stand-in, by kind
    fake: Any = None  # the stand-in itself, for injecting faults


@pytest.fixture(autouse=True)
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def _settings(tmp_path: Path, section: str, body: dict[str, Any]) -> list[str]:
    path = tmp_path / "providers.yaml"
    path.write_text(yaml.safe_dump({section: body}), encoding="utf-8")
    return ["--provider-config", str(path)]


@pytest.fixture
def sim_stand(tmp_path: Path) -> Stand:
    from providers.sim import SimProvider

    state = tmp_path / "sim.json"
    SimProvider(state).configure(api_latency_seconds=0.0, boot_seconds=0.0)

    def created() -> dict[str, Any]:
        data = json.loads(state.read_text(encoding="utf-8"))
        nodes = [n for n in data["nodes"].values() if n["state"] != "terminated"]
        reads = ("inventory", "interruptions", "spot_prices", "quotas")
        writes = [c for c in data["calls"] if c not in reads]
        return {"nodes": nodes, "groups": list(data["placement_groups"].values()),
                "reservations": list(data["reservations"].values()), "writes": len(writes)}  # fmt: skip

    return Stand("sim", ["--sim-state", str(state)], created)


@pytest.fixture
def gcp_stand(tmp_path: Path) -> Iterator[Stand]:
    from gcp_fake import FakeCompute, FakeServer

    compute = FakeCompute(project="fleet-project")
    with FakeServer(compute):
        body = gcp_settings(compute.url)

        def created() -> dict[str, Any]:
            store = compute.store
            return {
                "nodes": list(store.get("zones/us-central1-a/instances", {}).values()),
                "groups": list(store.get("regions/us-central1/resourcePolicies", {}).values()),
                "reservations": list(store.get("zones/us-central1-a/reservations", {}).values()),
                "writes": len(compute.sent("POST", "")) + len(compute.sent("DELETE", "")),
            }

        yield Stand("gcp", _settings(tmp_path, "gcp", body), created, compute)


@pytest.fixture
def azure_stand(tmp_path: Path) -> Iterator[Stand]:
    from azure_fake import AzureFake

    fake = AzureFake()
    fake.start()
    body = azure_settings(fake.base_url)

    def created() -> dict[str, Any]:
        puts = {r.path: r.body for r in fake.sent("PUT")}
        return {
            "nodes": [b for p, b in puts.items() if "/virtualMachineScaleSets/" in p],
            "groups": [b for p, b in puts.items() if "/proximityPlacementGroups/" in p],
            "reservations": [b for p, b in puts.items() if "/capacityReservations/" in p],
            "writes": sum(len(fake.sent(method)) for method in ("PUT", "POST", "DELETE")),
        }

    yield Stand("azure", _settings(tmp_path, "azure", body), created, fake)
    fake.stop()


@pytest.fixture
def aws_stand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stand]:
    """moto in process for EC2, with the stand-in's hooks (placement groups, reservations) on every
    session the CLI makes."""
    import boto3
    from aws_stand_in import Ec2StandIn
    from moto import mock_aws

    stand_in = Ec2StandIn()
    real_session = boto3.Session

    class HookedSession(real_session):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            stand_in.install(self)

    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with mock_aws():
        subnets = {}
        for region in ("us-east-1", "us-east-2"):
            ec2 = real_session(region_name=region).client("ec2")
            vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
            subnets[region] = [
                ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.1.0/24", AvailabilityZone=f"{region}a")[
                    "Subnet"
                ]["SubnetId"]
            ]
        monkeypatch.setattr(boto3, "Session", HookedSession)
        body = {"image_id": "ami-0a1b2c3d4e5f60718", "subnets": subnets}
        mutating = ("Create", "Run", "Terminate", "Cancel", "Delete", "Purchase")

        def created() -> dict[str, Any]:
            nodes = []
            for region in subnets:
                pages = real_session(region_name=region).client("ec2").describe_instances()["Reservations"]
                nodes += [
                    i
                    for r in pages
                    for i in r["Instances"]
                    if i["State"]["Name"] not in ("terminated", "shutting-down")
                ]
            return {
                "nodes": nodes,
                "groups": list(stand_in.groups.values()),
                "reservations": list(stand_in.reservations.values()),
                "writes": sum(1 for r in stand_in.requests if r.operation.startswith(mutating)),
            }

        yield Stand("aws", _settings(tmp_path, "aws", body), created, stand_in)


STANDS = ["sim", "aws", "gcp", "azure"]


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest) -> Stand:
    return request.getfixturevalue(f"{request.param}_stand")


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    return result.exit_code, result.output


def _no_secret(*texts: str) -> None:
    for text in texts:
        for name, value in SECRETS.items():
            assert value not in text, f"{name}'s value leaked"


def _actions_of(plan_dir: Path) -> Path:
    """Where a provision without --actions writes: beside the plan, never in it."""
    return plan_dir.with_name(f"{plan_dir.name}.provision") / "actions.json"


def _plan_for(stand: Stand, week_plan: Callable[[str], Path], tmp_path: Path) -> tuple[Path, str, Plan]:
    import shutil

    source = week_plan("all" if stand.cloud == "sim" else stand.cloud)
    plan_dir = tmp_path / "plan"
    shutil.copytree(source, plan_dir)
    plan = Plan.read(plan_dir)
    gang = next(t for t in plan.document.training if t.nodes > 1)
    at = gang.start + timedelta(hours=1)
    return plan_dir, f"{at:%Y-%m-%dT%H:%M:%SZ}", plan


def test_dry_run_then_apply_then_nothing_left_to_do(
    stand: Stand, week_plan: Callable[[str], Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    plan_dir, at, plan = _plan_for(stand, week_plan, tmp_path)
    base = ["provision", str(plan_dir), "--cloud", stand.cloud, "--at", at, *stand.flags]

    code, dry = _run(base)
    assert code == 0, dry
    assert "dry run: nothing was changed" in dry
    assert stand.created() == {"nodes": [], "groups": [], "reservations": [], "writes": 0}
    document = ActionPlan.model_validate_json(_actions_of(plan_dir).read_text(encoding="utf-8"))
    gang = next(t for t in plan.document.training if t.nodes > 1)
    groups = [a for a in document.actions if a.kind == "create-placement-group"]
    assert [(g.run, g.fabric, g.count) for g in groups] == [
        (f"{gang.job}-{gang.run}", gang.fabric, gang.nodes)
    ]
    launches = [a for a in document.actions if a.kind == "launch"]
    assert {str(a.capacity) for a in launches} == {"on-demand", "spot"}  # both kinds of pool
    assert "provision never buys a commitment" in dry

    code, applied = _run([*base, "--apply"])
    assert code == 0, applied
    assert f"applied: {len(document.actions)} done, 0 failed, 0 skipped" in applied
    made = stand.created()
    reserved = gang.tier != "spot" and Capability.GANG_RESERVATIONS in capabilities_of(
        stand.cloud
    )  # Azure: a PPG takes no reservation
    assert len(made["groups"]) == 1 and len(made["reservations"]) == reserved
    _check_fabric(stand, made, gang.fabric, gang.nodes)
    wanted = {a.target: a.target_nodes for a in document.actions if a.kind == "launch"}
    assert _held(stand.cloud, made) == wanted  # every pool and the gang, whole, as the stand-in saw them

    code, again = _run([*base, "--apply"])
    assert code == 0, again
    assert "0 actions: the fleet matches the plan" in again
    assert stand.created() == made  # nothing created, nothing changed, nothing sent but reads
    logs = capfd.readouterr()
    _no_secret(dry, applied, again, logs.out, logs.err, _actions_of(plan_dir).read_text(encoding="utf-8"))


def _held(cloud: str, made: dict[str, Any]) -> dict[str, int]:
    """Nodes per pool (or run, for a gang's nodes), read from the stand-in's own records by tag."""
    held: dict[str, int] = {}
    for node in made["nodes"]:
        if cloud == "sim":
            key, count = node["run"] or node["pool"], 1
        elif cloud == "aws":
            tags = {t["Key"]: t["Value"] for t in node.get("Tags", [])}
            key, count = tags.get("gpuplan-run") or tags["gpuplan-pool"], 1
        elif cloud == "gcp":
            key, count = node["labels"].get("gpuplan-run") or node["labels"]["gpuplan-pool"], 1
        else:  # azure: a scale set per pool or gang, of sku.capacity VMs
            key, count = (
                node["tags"].get("gpuplan-run") or node["tags"]["gpuplan-pool"],
                node["sku"]["capacity"],
            )
        held[key] = held.get(key, 0) + int(count)
    return held


def _check_fabric(stand: Stand, made: dict[str, Any], fabric: str | None, nodes: int) -> None:
    """The placement group is the cloud's own kind, and the gang is launched in it with its fabric."""
    cloud = stand.cloud
    (group,) = made["groups"]
    if cloud == "gcp":
        assert group["groupPlacementPolicy"]["collocation"] == "COLLOCATED"
        gang_nodes = [n for n in made["nodes"] if n.get("resourcePolicies")]
        assert gang_nodes and all(len(n["networkInterfaces"]) == 5 for n in gang_nodes)  # gVNIC + 4 TCPX
    elif cloud == "azure":
        assert group["properties"]["proximityPlacementGroupType"] == "Standard"
        gangs = [n for n in made["nodes"] if n["properties"].get("proximityPlacementGroup")]
        assert gangs and all(n["sku"]["name"].startswith("Standard_ND") for n in gangs)  # InfiniBand SKUs
    elif cloud == "aws":
        assert group["Strategy"] == "cluster"
        (gang_run,) = [p for p in stand.fake.calls("RunInstances") if p.get("Placement")]
        assert gang_run["Placement"]["GroupName"] == group["GroupName"]
        assert gang_run["MinCount"] == gang_run["MaxCount"] == nodes  # all or nothing
        assert "LaunchTemplateId" in gang_run["LaunchTemplate"]
        (template,) = [  # the gang's type has one template: with its EFA interfaces
            t["LaunchTemplateData"]
            for t in stand.fake.calls("CreateLaunchTemplate")
            if t["LaunchTemplateData"].get("InstanceType") == "p5.48xlarge"
            and "NetworkInterfaces" in t["LaunchTemplateData"]
        ]
        interfaces = template["NetworkInterfaces"]
        # p5: 32 cards, one EFA with the node's address, the rest efa-only (no address)
        assert [i["InterfaceType"] for i in interfaces] == ["efa"] + ["efa-only"] * 31
    elif cloud == "sim":
        assert group["fabric"] == fabric


def test_a_short_pool_fails_its_action_names_the_pool_and_the_rest_is_done(
    sim_stand: Stand, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    from providers.sim import SimProvider

    plan_dir, at, _ = _plan_for(sim_stand, week_plan, tmp_path)
    base = ["provision", str(plan_dir), "--cloud", "sim", "--at", at, *sim_stand.flags]
    _, _ = _run(base)
    document = ActionPlan.model_validate_json(_actions_of(plan_dir).read_text(encoding="utf-8"))
    spot = next(a for a in document.actions if a.kind == "launch" and a.capacity == "spot")
    sim = SimProvider(Path(sim_stand.flags[1]))
    sim.inject_fault("launch", "insufficient-capacity", match=spot.target)
    sim.inject_fault("launch", "throttled", times=2)  # survived: retried with backoff

    code, output = _run([*base, "--apply"])
    assert code == 1
    assert (
        f"FAILED #{spot.id}: pool {spot.target} is short {spot.count} nodes (insufficient-capacity)" in output
    )
    assert f"applied: {len(document.actions) - 1} done, 1 failed, 0 skipped" in output
    code, retry = _run([*base, "--apply"])  # the stock-out is over: only the short pool is left
    assert code == 0 and "applied: 1 done, 0 failed" in retry


def test_a_failed_placement_group_skips_only_its_gang(
    sim_stand: Stand, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    from providers.sim import SimProvider

    plan_dir, at, _ = _plan_for(sim_stand, week_plan, tmp_path)
    SimProvider(Path(sim_stand.flags[1])).inject_fault("ensure_placement_group", "quota-exceeded")
    code, output = _run(
        ["provision", str(plan_dir), "--cloud", "sim", "--at", at, *sim_stand.flags, "--apply"]
    )
    assert code == 1
    document = ActionPlan.model_validate_json(_actions_of(plan_dir).read_text(encoding="utf-8"))
    status = {a.kind: document.results[a.id].status for a in document.actions if a.run and a.kind != "launch"}
    assert status == {"create-placement-group": "failed", "create-reservation": "skipped"}
    gang_launch = next(a for a in document.actions if a.kind == "launch" and a.run)
    assert document.results[gang_launch.id].status == "skipped"
    pools = [a for a in document.actions if a.kind == "launch" and not a.run]
    assert pools and all(document.results[a.id].status == "done" for a in pools)
    assert "needs #1, which did not succeed" in output


def test_a_gcp_stockout_is_a_clear_failure(
    gcp_stand: Stand, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir, at, _ = _plan_for(gcp_stand, week_plan, tmp_path)
    # the gang's bulk insert ends in a failed operation: the zone has no capacity
    gcp_stand.fake.fail("POST", "instances/bulkInsert$", op_error="ZONE_RESOURCE_POOL_EXHAUSTED")
    code, output = _run(
        ["provision", str(plan_dir), "--cloud", "gcp", "--at", at, *gcp_stand.flags, "--apply"]
    )
    assert code == 1
    assert "is short 16 nodes (insufficient-capacity)" in output
    assert "applied:" in output and "1 failed" in output


def test_an_azure_eviction_policy_and_a_failed_gang_lro(
    azure_stand: Stand, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir, at, plan = _plan_for(azure_stand, week_plan, tmp_path)
    gang = next(t for t in plan.document.training if t.nodes > 1)
    run = f"{gang.job}-{gang.run}"
    azure_stand.fake.fail_lro("PUT", f"/virtualMachineScaleSets/{run}$", "AllocationFailed")
    code, output = _run(
        ["provision", str(plan_dir), "--cloud", "azure", "--at", at, *azure_stand.flags, "--apply"]
    )
    assert code == 1
    assert f"gang {run} is short {gang.nodes} nodes (insufficient-capacity)" in output
    spot = [
        n
        for n in azure_stand.created()["nodes"]
        if n["properties"]["virtualMachineProfile"]["priority"] == "Spot"
    ]
    assert spot and all(
        n["properties"]["virtualMachineProfile"]["evictionPolicy"] == "Delete"
        and n["properties"]["virtualMachineProfile"]["billingProfile"]["maxPrice"] == -1
        for n in spot
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--at", "2026-01-01T00:00:00Z"], "--at: 2026-01-01T00:00:00Z is outside the plan's horizon"),
        (["--at", "next tuesday"], "--at: not an ISO 8601 time"),
        (["--cloud", "oracle"], "--cloud: unknown provider 'oracle'"),
        (["--lead-hours", "-1"], "--lead-hours: must be from 0 to 744 hours (a month), got -1"),
        (["--lead-hours", "1e9"], "--lead-hours: must be from 0 to 744 hours (a month), got 1e+09"),
        (["--lead-hours", "nan"], "--lead-hours: must be from 0 to 744 hours (a month), got nan"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    extra: list[str], message: str, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    code, output = _run(["provision", str(week_plan("aws")), "--sim-state", str(tmp_path / "s.json"), *extra])
    assert code == 2 and message in output and "Traceback" not in output


def test_bad_provider_settings_name_the_field(week_plan: Callable[[str], Path], tmp_path: Path) -> None:
    flags = _settings(tmp_path, "gcp", {"project": "p", "zone": "us-central1-a"})
    code, output = _run(["provision", str(week_plan("gcp")), "--cloud", "gcp", *flags])
    assert code == 2 and "gcp.zone" in output
    (tmp_path / "providers.yaml").write_text("oci: {}\n", encoding="utf-8")
    code, output = _run(["provision", str(week_plan("gcp")), "--cloud", "gcp", *flags])
    assert code == 2 and "oci: unknown section" in output


def test_an_unreachable_cloud_exits_6(week_plan: Callable[[str], Path], tmp_path: Path) -> None:
    flags = _settings(
        tmp_path, "gcp", {"project": "p", "api_endpoint": "http://127.0.0.1:9", "credentials": "anonymous"}
    )
    code, output = _run(["provision", str(week_plan("gcp")), "--cloud", "gcp", *flags])
    assert code == 6 and "cloud error:" in output


def test_without_at_a_plan_that_has_not_started_is_provisioned_from_its_start(
    week_plan: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the simulated cloud's default file
    plan_dir = tmp_path / "plan"
    import shutil

    shutil.copytree(week_plan("aws"), plan_dir)
    code, output = _run(["provision", str(plan_dir)])
    assert code == 0, output
    assert "is before the plan's horizon: provisioning its start" in output
    assert "at 2027-02-01T00:00Z (period 0) on sim" in output
    assert (tmp_path / "state" / "gpuplan" / "sim-cloud" / "mixed-fleet-week-aws.json").exists()
    assert not (plan_dir / "actions.json").exists()  # never into the plan it reads
    assert ActionPlan.model_validate_json(_actions_of(plan_dir).read_text(encoding="utf-8")).period == 0


def test_an_aws_stockout_and_quota_are_clear_failures(
    aws_stand: Stand, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir, at, plan = _plan_for(aws_stand, week_plan, tmp_path)
    gang = next(t for t in plan.document.training if t.nodes > 1)
    aws_stand.fake.fail("RunInstances", "InsufficientInstanceCapacity")
    aws_stand.fake.fail("CreateFleet", "VcpuLimitExceeded")
    aws_stand.fake.fail("DescribeInstances", "RequestLimitExceeded", times=2)  # survived: retried
    code, output = _run(
        ["provision", str(plan_dir), "--cloud", "aws", "--at", at, *aws_stand.flags, "--apply"]
    )
    assert code == 1
    run = f"{gang.job}-{gang.run}"
    assert f"gang {run} is short {gang.nodes} nodes (insufficient-capacity)" in output
    assert "(quota-exceeded)" in output and "2 failed" in output


def test_capacity_blocks_are_listed_and_bought_only_when_asked_under_the_cap(
    aws_stand: Stand, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    from aws_stand_in import block_offering

    plan_dir, _, plan = _plan_for(aws_stand, week_plan, tmp_path)
    gang = next(t for t in plan.document.training if t.nodes > 1)
    run = f"{gang.job}-{gang.run}"
    at = f"{gang.start - timedelta(days=2):%Y-%m-%dT%H:%M:%SZ}"  # two days before the gang starts
    hours = 48 if gang.hours <= 48 else 72
    aws_stand.fake.block_offerings += [
        block_offering("cb-cheap", "30000.00", count=gang.nodes, hours=hours),
        block_offering("cb-dear", "90000.00", count=gang.nodes, hours=hours),
    ]
    base = ["provision", str(plan_dir), "--cloud", "aws", "--at", at, *aws_stand.flags, "--capacity-blocks"]
    code, listing = _run(base)
    assert code == 0, listing
    (asked,) = aws_stand.fake.calls("DescribeCapacityBlockOfferings")
    assert (asked["InstanceType"], asked["InstanceCount"], asked["CapacityDurationHours"]) == (
        "p5.48xlarge",
        gang.nodes,
        hours,
    )
    assert f"  {run}: {gang.nodes} x {gang.offering} for {hours} h" in listing
    assert "cb-cheap" in listing and "$30,000.00 upfront" in listing and "cb-dear" in listing

    code, output = _run([*base, "--buy-capacity-block", "cb-cheap"])
    assert code == 2 and "--max-usd" in output  # no cap, no purchase
    code, output = _run([*base, "--buy-capacity-block", "cb-cheap", "--max-usd", "40000"])
    assert code == 0 and "dry run: would buy cb-cheap" in output
    code, output = _run([*base, "--apply", "--buy-capacity-block", "cb-dear", "--max-usd", "40000"])
    assert code == 1 and "over the cap of 40000.00 USD: not bought" in output
    assert not aws_stand.fake.calls("PurchaseCapacityBlock")
    code, output = _run([*base, "--apply", "--buy-capacity-block", "cb-cheap", "--max-usd", "40000"])
    assert code == 0 and f"bought cb-cheap for {run}" in output
    (bought,) = aws_stand.fake.calls("PurchaseCapacityBlock")
    tags = {t["Key"]: t["Value"] for t in bought["TagSpecifications"][0]["Tags"]}
    assert tags["gpuplan-run"] == run

    # at the gang's start, it launches into the block (the block's market type), with no ODCR made for it
    start = f"{gang.start + timedelta(minutes=30):%Y-%m-%dT%H:%M:%SZ}"
    code, output = _run(
        ["provision", str(plan_dir), "--cloud", "aws", "--at", start, *aws_stand.flags, "--apply"]
    )
    assert code == 0, output
    assert not aws_stand.fake.calls("CreateCapacityReservation")
    (gang_run,) = [p for p in aws_stand.fake.calls("RunInstances") if p.get("Placement")]
    assert gang_run["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    target = gang_run["CapacityReservationSpecification"]["CapacityReservationTarget"][
        "CapacityReservationId"
    ]
    assert target.startswith("cr-")


def test_capacity_blocks_through_the_operations_layer(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    """What the CLI prints is ``planner.operations.capacity_blocks``, which the daemon can call as well: a
    provider without ``Capability.CAPACITY_BLOCKS`` is refused before any call, naming its cloud; a buy
    must name a listed offer and a positive cap, and a dry run buys nothing."""
    from planner.operations.capacity_blocks import BlockListing, BlockRequest, buy_block, list_blocks
    from providers.base import InvalidRequest, Unsupported
    from providers.resources import CapacityBlockOffer
    from providers.sim import SimProvider

    plan = Plan.read(week_plan("aws"))
    sim = SimProvider(tmp_path / "s.json")
    at = plan.document.horizon.start
    with pytest.raises(Unsupported, match="sim: capacity_block_offerings: sim does not have capacity-blocks"):
        list_blocks(plan, sim, at)
    with pytest.raises(Unsupported, match="sim: purchase_capacity_block"):
        buy_block(plan, sim, [], "cb-1", max_usd=1.0, apply=True)
    assert sim.calls() == []  # refused before asking the cloud anything

    class Seller(SimProvider):  # the sim cloud, selling one listed block (what only the contract is asked)
        capabilities = frozenset({*SimProvider.capabilities, Capability.CAPACITY_BLOCKS})

        def purchase_capacity_block(self, offering_id: str, **_: Any) -> Any:  # type: ignore[override]
            raise AssertionError("a dry run or a refused buy must not reach the cloud")

    request = BlockRequest("job-0", "aws:us-east-1:p5.48xlarge", 2, 24, at, at, 5000.0)
    offer = CapacityBlockOffer("cb-1", request.offering, None, 2, at, None, 24, 3000.0)
    listings = [BlockListing(request, (offer,))]
    seller = Seller(tmp_path / "seller.json")
    assert listings[0].saving_usd(offer) == 2000.0
    with pytest.raises(InvalidRequest, match="not among the blocks listed"):
        buy_block(plan, seller, listings, "cb-2", max_usd=4000.0, apply=True)
    with pytest.raises(InvalidRequest, match="positive USD figure"):
        buy_block(plan, seller, listings, "cb-1", max_usd=0.0, apply=True)
    dry = buy_block(plan, seller, listings, "cb-1", max_usd=4000.0, apply=False)
    assert (dry.run, dry.offer.id, dry.reservation) == ("job-0", "cb-1", None)


def test_capacity_blocks_only_on_aws(week_plan: Callable[[str], Path], tmp_path: Path) -> None:
    args = ["provision", str(week_plan("aws")), "--sim-state", str(tmp_path / "s.json"), "--capacity-blocks"]
    args += ["--actions", str(tmp_path / "actions.json")]  # not into the shared plan directory
    code, output = _run(args)
    assert code == 2 and "only --cloud aws sells Capacity Blocks" in output


def test_a_missing_sdk_names_the_extra_to_install(week_plan: Callable[[str], Path], tmp_path: Path) -> None:
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['boto3'] = None\n"  # boto3 not installed
        "from planner.cli import main\n"
        f"sys.argv = ['gpuplan', 'provision', {str(week_plan('aws'))!r}, '--cloud', 'aws',"
        f" '--actions', {str(tmp_path / 'a.json')!r}]\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 6, done.stderr
    assert "pip install 'gpuplan[aws]'" in done.stderr and "Traceback" not in done.stderr
