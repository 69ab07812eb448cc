"""The AWS adapter against moto (in process, and once through moto's server on 127.0.0.1), with the calls
moto lacks answered by the stand-in's hook. Assertions are on the requests the adapter actually sent
(recorded by the hook), on what it returns, and on the instances describe_instances reports: moto drops
Placement.GroupName, the reservation and the EFA interface types, and the stand-in puts back on each
launched instance what its launch asked for, as EC2 reports it (``aws_stand_in``)."""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pydantic
import pytest
from aws_stand_in import FAKE_SECRET, Ec2StandIn, block_offering, make_vpc
from moto import mock_aws

from models.naming import TAG_PLAN, client_token, managed_tags, pool_name
from providers.aws import AwsProvider, AwsSettings, _error, open_provider
from providers.base import (
    Auth,
    CapacityReservation,
    CapacityType,
    Conflict,
    InsufficientCapacity,
    InvalidRequest,
    LaunchSpec,
    Node,
    NotFound,
    OperationFailed,
    PlacementGroup,
    PlacementGroupSpec,
    Provider,
    ProviderError,
    QuotaExceeded,
    ReservationSpec,
    RetryPolicy,
    Throttled,
    Timeout,
)

REGION = "us-east-1"
P5 = f"aws:{REGION}:p5.48xlarge"
G6E = f"aws:{REGION}:g6e.xlarge"
PLAN = "mixed-fleet"


@dataclass
class Cloud:
    provider: AwsProvider
    stand_in: Ec2StandIn
    sleeps: list[float]
    subnets: list[str]
    ec2: Any  # a plain client (no hooks) for checking moto's state


@pytest.fixture
def cloud(aws_env: None) -> Iterator[Cloud]:
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        vpc = make_vpc(session)
        stand_in = Ec2StandIn()
        stand_in.install(session)
        sleeps: list[float] = []
        settings = AwsSettings(
            image_id={REGION: vpc.image_id},
            subnets={REGION: vpc.subnets},
            security_group_ids=[],
            retry=RetryPolicy(attempts=4, base_seconds=0.5, cap_seconds=20.0),
        )
        provider = open_provider(settings, session=session, sleep=sleeps.append)
        yield Cloud(provider, stand_in, sleeps, vpc.subnets, boto3.client("ec2", region_name=REGION))


def gang_spec(
    capacity: CapacityType = CapacityType.ON_DEMAND, *, reservation: str | None = None, count: int = 2
) -> LaunchSpec:
    pool = pool_name(P5, capacity)
    return LaunchSpec(
        offering=P5,
        capacity=capacity,
        count=count,
        pool=pool,
        tags=managed_tags(PLAN, pool=pool, run="pretrain-r1"),
        token=client_token(PLAN, pool, "pretrain-r1", 0),
        run="pretrain-r1",
        placement_group="pg-pretrain-r1",
        reservation=reservation,
        fabric="efa",
        target=count,
    )


def pool_spec(capacity: CapacityType = CapacityType.SPOT, count: int = 3) -> LaunchSpec:
    pool = pool_name(G6E, capacity)
    return LaunchSpec(
        offering=G6E,
        capacity=capacity,
        count=count,
        pool=pool,
        tags=managed_tags(PLAN, pool=pool),
        token=client_token(PLAN, pool, "2027-01-01T00", count),
        target=count,
    )


def group_spec() -> PlacementGroupSpec:
    return PlacementGroupSpec(
        name="pg-pretrain-r1",
        region=REGION,
        offering=P5,
        nodes=2,
        fabric="efa",
        tags=managed_tags(PLAN, run="pretrain-r1"),
        token=client_token(PLAN, "pg-pretrain-r1"),
    )


def reservation_spec() -> ReservationSpec:
    pool = pool_name(P5, CapacityType.ON_DEMAND)
    return ReservationSpec(
        name="cr-pretrain-r1",
        offering=P5,
        nodes=2,
        placement_group="pg-pretrain-r1",
        tags=managed_tags(PLAN, pool=pool, run="pretrain-r1"),
        token=client_token(PLAN, "cr-pretrain-r1"),
    )


def _described(provider: AwsProvider, ids: list[str]) -> list[dict[str, Any]]:
    """The instances as describe_instances answers the adapter's own (hooked) client."""
    pages = provider._client(REGION).describe_instances(InstanceIds=ids)["Reservations"]
    return [i for r in pages for i in r["Instances"]]


def tag_dict(params: dict[str, Any], resource_type: str) -> dict[str, str]:
    specs = [s for s in params.get("TagSpecifications", []) if s["ResourceType"] == resource_type]
    assert len(specs) == 1, f"one {resource_type} tag specification in {params.get('TagSpecifications')}"
    return {t["Key"]: t["Value"] for t in specs[0]["Tags"]}


# ----------------------------------------------------------------------------------------------------------
# offerings and prices


def test_offerings_are_gpu_types_with_efa_interfaces_from_network_cards(cloud: Cloud) -> None:
    assert isinstance(cloud.provider, Provider) and cloud.provider.handles(P5)
    assert not cloud.provider.handles("gcp:us-central1:a3-highgpu-8g")
    offers = {o.offering: o for o in cloud.provider.offerings([REGION])}
    p5 = offers[P5]
    assert (p5.gpu_model, p5.gpus_per_node, p5.gpu_memory_gb) == ("H100", 8, 80.0)
    assert (p5.fabric, p5.network_interfaces) == ("efa", 32)
    assert offers["aws:us-east-1:p4d.24xlarge"].gpu_model == "A100"
    assert all(o.gpus_per_node > 0 for o in offers.values())
    assert "aws:us-east-1:m5.large" not in offers and "aws:us-east-1:c5.xlarge" not in offers
    assert offers[G6E].fabric is None and offers[G6E].network_interfaces == 1
    assert cloud.stand_in.calls("DescribeInstanceTypes"), "the types come from describe_instance_types"


def test_spot_prices_keep_the_newest_per_zone(cloud: Cloud) -> None:
    t0 = datetime(2027, 1, 1, tzinfo=UTC)

    def history(region: str, params: dict[str, Any]) -> dict[str, Any]:
        rows = [
            ("us-east-1a", "3.10", 0),
            ("us-east-1a", "2.50", 2),
            ("us-east-1a", "2.90", 1),
            ("us-east-1b", "4.00", 0),
        ]
        return {
            "SpotPriceHistory": [
                {
                    "AvailabilityZone": az,
                    "InstanceType": "p5.48xlarge",
                    "ProductDescription": "Linux/UNIX",
                    "SpotPrice": price,
                    "Timestamp": t0 + timedelta(hours=h),
                }
                for az, price, h in rows
            ]
        }

    cloud.stand_in.answers["DescribeSpotPriceHistory"] = history
    prices = cloud.provider.spot_prices([P5, "gcp:us-central1:a3-highgpu-8g"])
    assert [(p.zone, p.usd_per_hour, p.at) for p in prices] == [
        ("us-east-1a", 2.50, t0 + timedelta(hours=2)),
        ("us-east-1b", 4.00, t0),
    ]
    (sent,) = cloud.stand_in.calls("DescribeSpotPriceHistory")
    assert sent["InstanceTypes"] == ["p5.48xlarge"] and sent["ProductDescriptions"] == ["Linux/UNIX"]
    assert abs((sent["StartTime"] - datetime.now(UTC)).total_seconds()) < 60


# ----------------------------------------------------------------------------------------------------------
# a gang: placement group, reservation, EFA launch template, run_instances


def test_on_demand_gang_launches_into_its_group_and_reservation_with_efa_then_efa_only_per_card(
    cloud: Cloud,
) -> None:
    p, s = cloud.provider, cloud.stand_in
    group = p.ensure_placement_group(group_spec())
    reservation = p.ensure_reservation(reservation_spec())
    nodes = p.launch(gang_spec(reservation=reservation.name))

    (pg,) = s.calls("CreatePlacementGroup")
    assert pg["Strategy"] == "cluster" and pg["GroupName"] == "pg-pretrain-r1"
    assert tag_dict(pg, "placement-group") == group_spec().tags
    assert group.name == "pg-pretrain-r1" and group.run == "pretrain-r1"

    (cr,) = s.calls("CreateCapacityReservation")
    assert cr["ClientToken"] == reservation_spec().token
    assert (cr["InstanceType"], cr["InstanceCount"], cr["AvailabilityZone"]) == (
        "p5.48xlarge",
        2,
        "us-east-1a",
    )
    assert cr["PlacementGroupArn"].endswith(":placement-group/pg-pretrain-r1")
    assert (cr["InstanceMatchCriteria"], cr["EndDateType"], cr["InstancePlatform"]) == (
        "targeted",
        "unlimited",
        "Linux/UNIX",
    )
    assert tag_dict(cr, "capacity-reservation") == {**reservation_spec().tags, "Name": "cr-pretrain-r1"}

    (lt,) = s.calls("CreateLaunchTemplate")
    interfaces = lt["LaunchTemplateData"]["NetworkInterfaces"]
    assert len(interfaces) == 32  # p5.48xlarge's MaximumNetworkCards in moto's instance type data
    assert [i["NetworkCardIndex"] for i in interfaces] == list(range(32))
    assert [i["DeviceIndex"] for i in interfaces] == [0] + [1] * 31
    # AWS's advice for several cards: the primary (card 0, device 0) EFA with ENA and an IP, the rest
    # efa-only, which take no address (efa-acc-inst-types.html)
    assert [i["InterfaceType"] for i in interfaces] == ["efa"] + ["efa-only"] * 31
    assert {i["SubnetId"] for i in interfaces} == {cloud.subnets[0]}
    assert lt["LaunchTemplateData"]["ImageId"].startswith("ami-")
    assert lt["ClientToken"] and tag_dict(lt, "launch-template") == {TAG_PLAN: PLAN}

    (run,) = s.calls("RunInstances")
    spec = gang_spec(reservation=reservation.name)
    assert (run["MinCount"], run["MaxCount"]) == (2, 2)
    assert run["Placement"] == {"GroupName": "pg-pretrain-r1"}
    assert run["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": reservation.id}
    }
    assert "InstanceMarketOptions" not in run
    assert run["ClientToken"] == spec.token
    assert tag_dict(run, "instance") == dict(spec.tags) and tag_dict(run, "volume") == dict(spec.tags)
    assert run["LaunchTemplate"]["LaunchTemplateId"].startswith("lt-")

    assert len(nodes) == 2 and {n.capacity for n in nodes} == {CapacityType.ON_DEMAND}
    inv = p.inventory(PLAN)
    assert sorted(n.id for n in inv.live_nodes()) == sorted(n.id for n in nodes)
    assert {(n.pool, n.run, n.capacity, n.offering) for n in inv.nodes} == {
        (spec.pool, "pretrain-r1", CapacityType.ON_DEMAND, P5)
    }
    assert [g.name for g in inv.placement_groups] == ["pg-pretrain-r1"]
    assert [(r.name, r.nodes, r.placement_group, r.run) for r in inv.reservations] == [
        ("cr-pretrain-r1", 2, "pg-pretrain-r1", "pretrain-r1")
    ]
    # on the instances launched, as describe_instances reports them: group, reservation, interfaces
    assert {(n.placement_group, n.reservation) for n in inv.nodes} == {("pg-pretrain-r1", reservation.id)}
    described = [
        i
        for r in cloud.ec2.describe_instances(InstanceIds=[n.id for n in nodes])["Reservations"]
        for i in r["Instances"]
    ]
    # a client without the stand-in's hooks sees what moto keeps: no group, one plain interface
    assert {i["Placement"]["GroupName"] for i in described} == {""}
    assert {e["InterfaceType"] for i in described for e in i["NetworkInterfaces"]} == {"interface"}
    for inst in _described(p, [n.id for n in nodes]):
        assert inst["Placement"]["GroupName"] == "pg-pretrain-r1"
        assert inst["CapacityReservationId"] == reservation.id
        assert inst["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
            "CapacityReservationId": reservation.id
        }
        enis = sorted(inst["NetworkInterfaces"], key=lambda e: e["Attachment"]["NetworkCardIndex"])
        assert [e["InterfaceType"] for e in enis] == ["efa"] + ["efa-only"] * 31
        assert [(e["Attachment"]["NetworkCardIndex"], e["Attachment"]["DeviceIndex"]) for e in enis] == [
            (0, 0),
            *((card, 1) for card in range(1, 32)),
        ]
        assert [e for e in enis if e.get("PrivateIpAddress")] == [enis[0]], "one address per node"


def test_spot_gang_sends_one_time_terminate_market_options_and_inventory_says_spot(cloud: Cloud) -> None:
    cloud.provider.ensure_placement_group(group_spec())
    spec = gang_spec(CapacityType.SPOT)
    cloud.provider.launch(spec)
    (run,) = cloud.stand_in.calls("RunInstances")
    assert run["InstanceMarketOptions"] == {
        "MarketType": "spot",
        "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
    }
    assert "CapacityReservationSpecification" not in run
    assert {(n.capacity, n.pool, n.run) for n in cloud.provider.inventory(PLAN).nodes} == {
        (CapacityType.SPOT, spec.pool, "pretrain-r1")
    }


def test_existing_reservation_of_ours_is_returned_without_a_create(cloud: Cloud) -> None:
    cloud.provider.ensure_placement_group(group_spec())
    first = cloud.provider.ensure_reservation(reservation_spec())
    again = cloud.provider.ensure_reservation(reservation_spec())
    assert again.id == first.id and len(cloud.stand_in.calls("CreateCapacityReservation")) == 1


def test_reservation_without_capacity_is_insufficient_capacity(cloud: Cloud) -> None:
    cloud.provider.ensure_placement_group(group_spec())
    cloud.stand_in.reservation_capacity = 1
    with pytest.raises(InsufficientCapacity) as err:
        cloud.provider.ensure_reservation(reservation_spec())
    assert (
        err.value.code == "InsufficientInstanceCapacity"
        and err.value.operation == "create_capacity_reservation"
    )


def test_a_zone_without_capacity_passes_the_reservation_to_the_next_and_the_gang_follows(
    cloud: Cloud,
) -> None:
    """Issue 35 point 3: the first subnet's zone has no capacity for the whole-gang ODCR; the next zone's
    subnet does, and the gang launches there (its launch template's interfaces in that zone's subnet, into
    the reservation), not into the first subnet where its reservation is not."""
    p, s = cloud.provider, cloud.stand_in
    p.ensure_placement_group(group_spec())
    s.fail("CreateCapacityReservation", "InsufficientInstanceCapacity")
    reservation = p.ensure_reservation(reservation_spec())
    first, second = s.calls("CreateCapacityReservation")
    assert (first["AvailabilityZone"], second["AvailabilityZone"]) == ("us-east-1a", "us-east-1b")
    assert first["ClientToken"] == reservation_spec().token != second["ClientToken"]
    nodes = p.launch(gang_spec(reservation=reservation.name))
    (lt,) = s.calls("CreateLaunchTemplate")
    assert {i["SubnetId"] for i in lt["LaunchTemplateData"]["NetworkInterfaces"]} == {cloud.subnets[1]}
    (run,) = s.calls("RunInstances")
    assert run["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": reservation.id
    }
    assert len(nodes) == 2  # (moto places instances by the call's SubnetId, not a template's interfaces:
    # the interfaces' subnet above is what EC2 places them by)


def test_no_zone_with_capacity_is_insufficient_capacity_naming_the_zones(cloud: Cloud) -> None:
    cloud.provider.ensure_placement_group(group_spec())
    cloud.stand_in.fail("CreateCapacityReservation", "InsufficientInstanceCapacity", times=2)
    with pytest.raises(InsufficientCapacity, match=r"tried us-east-1a, us-east-1b"):
        cloud.provider.ensure_reservation(reservation_spec())
    assert len(cloud.stand_in.calls("CreateCapacityReservation")) == 2


def test_a_plan_without_other_zone_reserves_in_the_first_zone_only(cloud: Cloud) -> None:
    """The plan's fallback for the run has no ``other-zone``: the zone refused, nothing else is asked."""
    cloud.provider.ensure_placement_group(group_spec())
    cloud.stand_in.fail("CreateCapacityReservation", "InsufficientInstanceCapacity")
    spec = dataclasses.replace(reservation_spec(), other_zones=False)
    with pytest.raises(InsufficientCapacity, match=r"tried us-east-1a; the plan allows no other zone"):
        cloud.provider.ensure_reservation(spec)
    (only,) = cloud.stand_in.calls("CreateCapacityReservation")
    assert only["AvailabilityZone"] == "us-east-1a"


# ----------------------------------------------------------------------------------------------------------
# a pool: instant EC2 Fleet


def test_spot_pool_is_an_instant_price_capacity_optimized_fleet_across_the_subnets(cloud: Cloud) -> None:
    spec = pool_spec(CapacityType.SPOT, 3)
    nodes = cloud.provider.launch(spec)
    (fleet,) = cloud.stand_in.calls("CreateFleet")
    assert fleet["Type"] == "instant" and fleet["ClientToken"] == spec.token
    assert fleet["SpotOptions"]["AllocationStrategy"] == "price-capacity-optimized"
    assert fleet["OnDemandOptions"]["AllocationStrategy"] == "lowest-price"
    assert fleet["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 3,
        "OnDemandTargetCapacity": 0,
        "SpotTargetCapacity": 3,
        "DefaultTargetCapacityType": "spot",
    }
    (config,) = fleet["LaunchTemplateConfigs"]
    assert [o["SubnetId"] for o in config["Overrides"]] == cloud.subnets
    assert {o["InstanceType"] for o in config["Overrides"]} == {"g6e.xlarge"}
    assert tag_dict(fleet, "instance") == dict(spec.tags) and tag_dict(fleet, "fleet") == dict(spec.tags)
    (lt,) = cloud.stand_in.calls("CreateLaunchTemplate")
    assert "NetworkInterfaces" not in lt["LaunchTemplateData"], "a pool node needs no EFA interfaces"

    assert len(nodes) == 3
    inv = cloud.provider.inventory(PLAN)
    assert {(n.pool, n.run, n.capacity) for n in inv.nodes} == {(spec.pool, None, CapacityType.SPOT)}
    assert len(inv.live_nodes()) == 3


def test_on_demand_pool_targets_on_demand(cloud: Cloud) -> None:
    cloud.provider.launch(pool_spec(CapacityType.ON_DEMAND, 2))
    (fleet,) = cloud.stand_in.calls("CreateFleet")
    target = fleet["TargetCapacitySpecification"]
    assert (
        target["DefaultTargetCapacityType"],
        target["OnDemandTargetCapacity"],
        target["SpotTargetCapacity"],
    ) == (
        "on-demand",
        2,
        0,
    )


def test_short_fleet_keeps_what_it_made_and_raises_insufficient_capacity(cloud: Cloud) -> None:
    def short(parsed: dict[str, Any]) -> None:
        parsed["Instances"] = parsed["Instances"][:1]
        parsed["Errors"] = [
            {
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "no g6e in us-east-1b",
                "Lifecycle": "spot",
            }
        ]

    cloud.stand_in.rewrites["CreateFleet"] = short
    with pytest.raises(InsufficientCapacity) as err:
        cloud.provider.launch(pool_spec(CapacityType.SPOT, 3))
    assert "made 1 of 3" in str(err.value) and "2 short" in str(err.value)
    launched = err.value.launched  # type: ignore[attr-defined]
    assert len(launched) == 1 and isinstance(launched[0], Node)
    assert launched[0].pool == pool_spec().pool


def test_same_launch_twice_sends_the_same_client_token_and_reuses_the_template(cloud: Cloud) -> None:
    spec = pool_spec(CapacityType.SPOT, 1)
    cloud.provider.launch(spec)
    cloud.provider.launch(spec)
    # a second provider (a new gpuplan run) finds the template by name instead of making another
    again = AwsProvider(cloud.provider.settings, session=cloud.provider._session, sleep=cloud.sleeps.append)
    again.launch(spec)
    tokens = [f["ClientToken"] for f in cloud.stand_in.calls("CreateFleet")]
    assert tokens == [spec.token] * 3  # moto does not replay tokens; EC2 would return the first fleet
    assert len(cloud.stand_in.calls("CreateLaunchTemplate")) == 1


def test_launch_without_an_image_names_the_setting(cloud: Cloud) -> None:
    settings = cloud.provider.settings.model_copy(update={"image_id": None})
    bare = AwsProvider(settings, session=cloud.provider._session)
    with pytest.raises(InvalidRequest, match=r"aws\.image_id"):
        bare.launch(pool_spec())
    assert not cloud.stand_in.calls("CreateFleet")


def test_settings_refuse_unknown_fields() -> None:
    with pytest.raises(pydantic.ValidationError, match="subnet_ids"):
        AwsSettings.model_validate({"subnet_ids": {}})
    parsed = AwsSettings.model_validate({"image_id": "ami-1", "retry": {"attempts": 2}})
    assert parsed.retry == RetryPolicy(attempts=2)


# ----------------------------------------------------------------------------------------------------------
# faults


def test_throttling_is_retried_with_jittered_bounded_sleeps(
    cloud: Cloud, caplog: pytest.LogCaptureFixture
) -> None:
    cloud.stand_in.fail("CreatePlacementGroup", "RequestLimitExceeded", times=2)
    with caplog.at_level(logging.INFO, logger="gpuplan.providers.aws"):
        group = cloud.provider.ensure_placement_group(group_spec())
    assert group.name == "pg-pretrain-r1"
    assert len(cloud.stand_in.calls("CreatePlacementGroup")) == 3
    assert len(cloud.sleeps) == 2
    assert 0 <= cloud.sleeps[0] <= 0.5 and 0 <= cloud.sleeps[1] <= 1.0  # base * 2**attempt, full jitter
    retries = [r for r in caplog.records if "throttled" in r.getMessage()]
    assert len(retries) == 2 and "RequestLimitExceeded" in retries[0].getMessage()


def test_always_throttled_gives_up_after_the_policy_attempts(cloud: Cloud) -> None:
    cloud.stand_in.fail("DescribeInstances", "Throttling", times=None)
    with pytest.raises(Throttled) as err:
        cloud.provider.inventory(PLAN)
    assert err.value.code == "Throttling"
    assert len(cloud.stand_in.calls("DescribeInstances")) == 4 and len(cloud.sleeps) == 3


def test_503_slowdown_is_throttling(cloud: Cloud) -> None:
    cloud.stand_in.fail("TerminateInstances", "SlowDown", times=1, status=503)
    cloud.provider.terminate([])  # nothing to do sends nothing
    assert not cloud.stand_in.calls("TerminateInstances")
    nodes = cloud.provider.launch(pool_spec(CapacityType.ON_DEMAND, 1))
    cloud.provider.terminate(nodes)
    assert len(cloud.stand_in.calls("TerminateInstances")) == 2 and len(cloud.sleeps) == 1


def test_insufficient_capacity_on_a_gang_launch(cloud: Cloud) -> None:
    cloud.stand_in.fail("RunInstances", "InsufficientInstanceCapacity")
    with pytest.raises(InsufficientCapacity) as err:
        cloud.provider.launch(gang_spec())
    assert err.value.code == "InsufficientInstanceCapacity" and err.value.cloud == "aws"
    assert len(cloud.stand_in.calls("RunInstances")) == 1, "capacity errors are not retried"


def test_vcpu_limit_is_quota_exceeded(cloud: Cloud) -> None:
    cloud.stand_in.fail("CreateFleet", "VcpuLimitExceeded")
    with pytest.raises(QuotaExceeded, match="VcpuLimitExceeded"):
        cloud.provider.launch(pool_spec())


def test_a_duplicate_placement_group_of_ours_is_adopted(cloud: Cloud) -> None:
    cloud.stand_in.add_group(REGION, "pg-pretrain-r1", dict(group_spec().tags))
    group = cloud.provider.ensure_placement_group(group_spec())
    assert (group.name, group.run) == ("pg-pretrain-r1", "pretrain-r1") and group.id
    assert len(cloud.stand_in.calls("CreatePlacementGroup")) == 1
    assert cloud.stand_in.calls("DescribePlacementGroups")[-1]["GroupNames"] == ["pg-pretrain-r1"]


def test_a_duplicate_placement_group_not_ours_is_a_conflict(cloud: Cloud) -> None:
    cloud.stand_in.add_group(REGION, "pg-pretrain-r1", {TAG_PLAN: "someone-else"})
    with pytest.raises(Conflict, match="without our tags"):
        cloud.provider.ensure_placement_group(group_spec())


def test_terminate_counts_missing_instances_as_done(cloud: Cloud) -> None:
    nodes = cloud.provider.launch(pool_spec(CapacityType.ON_DEMAND, 2))
    gone = Node(id="i-0123456789abcdef0", offering=G6E, capacity=CapacityType.ON_DEMAND, pool="x")
    cloud.provider.terminate([*nodes, gone])
    batches = [c["InstanceIds"] for c in cloud.stand_in.calls("TerminateInstances")]
    assert len(batches[0]) == 3 and sorted(len(b) for b in batches[1:]) == [1, 1, 1]
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in cloud.ec2.describe_instances(InstanceIds=[n.id for n in nodes])["Reservations"]
        for i in r["Instances"]
    }
    assert set(states.values()) <= {"shutting-down", "terminated"}
    assert not cloud.provider.inventory(PLAN).live_nodes()


def test_release_and_delete_of_what_is_gone_are_done(cloud: Cloud) -> None:
    cloud.provider.ensure_placement_group(group_spec())
    reservation = cloud.provider.ensure_reservation(reservation_spec())
    cloud.provider.release_reservation(reservation)
    cloud.provider.release_reservation(reservation)
    cloud.provider.delete_placement_group(PlacementGroup("pg-pretrain-r1", REGION))
    cloud.provider.delete_placement_group(PlacementGroup("pg-pretrain-r1", REGION))
    cloud.provider.release_reservation(CapacityReservation("gone", P5, 1, id="cr-00000000000000000"))
    assert len(cloud.stand_in.calls("CancelCapacityReservation")) == 3
    assert len(cloud.stand_in.calls("DeletePlacementGroup")) == 2
    inv = cloud.provider.inventory(PLAN)
    assert not inv.reservations and not inv.placement_groups


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("InsufficientInstanceCapacity", InsufficientCapacity),
        ("InsufficientCapacityOnHost", InsufficientCapacity),
        ("InsufficientReservedInstanceCapacity", InsufficientCapacity),
        ("Unsupported", InsufficientCapacity),
        ("InstanceLimitExceeded", QuotaExceeded),
        ("MaxSpotInstanceCountExceeded", QuotaExceeded),
        ("ReservationCapacityExceeded", ProviderError),
        ("PlacementGroupLimitExceeded", QuotaExceeded),
        ("RequestLimitExceeded", Throttled),
        ("ThrottlingException", Throttled),
        ("InvalidInstanceID.NotFound", NotFound),
        ("InvalidLaunchTemplateName.NotFoundException", NotFound),
        ("InvalidPlacementGroup.Unknown", NotFound),
        ("InvalidPlacementGroup.Duplicate", Conflict),
        ("IdempotentParameterMismatch", Conflict),
        ("AuthFailure", Auth),
        ("UnauthorizedOperation", Auth),
        ("ExpiredToken", Auth),
        ("NoCredentialsError", Auth),
        ("InvalidParameterValue", InvalidRequest),
        ("MissingParameter", InvalidRequest),
        ("ParamValidationError", InvalidRequest),
        ("EndpointConnectionError", OperationFailed),
        ("ProxyConnectionError", OperationFailed),
        ("ConnectionClosedError", Timeout),
        ("IncompleteReadError", Timeout),
        ("ReadTimeoutError", Timeout),
        ("InsufficientFreeAddressesInSubnet", InvalidRequest),
        ("AccessDeniedException", Auth),
    ],
)
def test_error_codes_map_to_typed_errors(code: str, kind: type[ProviderError]) -> None:
    err = _error(code, "message", "op")
    assert type(err) is kind and err.code == code and err.cloud == "aws"


@pytest.mark.parametrize(
    ("status", "kind"), [(502, OperationFailed), (500, OperationFailed), (503, Throttled)]
)
def test_an_error_page_without_an_api_code_is_not_a_bare_error(
    status: int, kind: type[ProviderError]
) -> None:
    """botocore names an HTML error page's error by its status ("502"): a proxy or an outage, not EC2."""
    err = _error(str(status), "Bad Gateway", "op", status)
    assert type(err) is kind


def test_missing_credentials_are_auth_and_no_secret_is_logged(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="gpuplan"):
        cloud.provider.ensure_placement_group(group_spec())
        cloud.provider.launch(pool_spec())
        cloud.provider.inventory(PLAN)
    assert caplog.records and FAKE_SECRET not in caplog.text
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    bare = AwsProvider(cloud.provider.settings, session=boto3.Session(region_name=REGION))
    with pytest.raises(Auth) as err:
        bare.inventory(PLAN)
    assert err.value.code == "NoCredentialsError"


# ----------------------------------------------------------------------------------------------------------
# interruptions and capacity blocks


def test_interruptions_from_spot_request_status(cloud: Cloud) -> None:
    nodes = cloud.provider.launch(pool_spec(CapacityType.SPOT, 2))
    cloud.provider.launch(pool_spec(CapacityType.ON_DEMAND, 1))
    when = datetime(2027, 1, 2, 3, 4, tzinfo=UTC)
    doomed, fine = nodes

    def requests(region: str, params: dict[str, Any]) -> dict[str, Any]:
        asked = params["Filters"][0]["Values"]
        status = {doomed.id: "marked-for-termination", fine.id: "fulfilled"}
        return {
            "SpotInstanceRequests": [
                {
                    "SpotInstanceRequestId": f"sir-{i}",
                    "InstanceId": i,
                    "Status": {"Code": status[i], "UpdateTime": when},
                }
                for i in asked
                if i in status
            ]
        }

    cloud.stand_in.answers["DescribeSpotInstanceRequests"] = requests
    found = cloud.provider.interruptions(PLAN)
    assert [(i.node_id, i.kind, i.at, i.pool, i.offering) for i in found] == [
        (doomed.id, "interruption", when, pool_spec().pool, G6E)
    ]
    (sent,) = cloud.stand_in.calls("DescribeSpotInstanceRequests")
    assert sorted(sent["Filters"][0]["Values"]) == sorted(n.id for n in nodes), "spot nodes only"


def test_interruptions_from_a_spot_termination_state_reason(cloud: Cloud) -> None:
    spec = gang_spec(CapacityType.SPOT)
    cloud.provider.ensure_placement_group(group_spec())
    reclaimed, _ = cloud.provider.launch(spec)

    def reclaim(parsed: dict[str, Any]) -> None:
        for res in parsed["Reservations"]:
            for inst in res["Instances"]:
                if inst["InstanceId"] == reclaimed.id:
                    inst["State"] = {"Code": 32, "Name": "shutting-down"}
                    inst["StateReason"] = {
                        "Code": "Server.SpotInstanceTermination",
                        "Message": "Server.SpotInstanceTermination: Spot instance termination",
                    }

    cloud.stand_in.rewrites["DescribeInstances"] = reclaim
    found = cloud.provider.interruptions(PLAN)
    assert [(i.node_id, i.kind, i.run, i.pool) for i in found] == [
        (reclaimed.id, "interruption", "pretrain-r1", spec.pool)
    ]
    # interruptions look at every state (a reclaimed node is on its way out), inventory only at live ones
    first = cloud.stand_in.calls("DescribeInstances")[-1]
    assert not any(f["Name"] == "instance-state-name" for f in first["Filters"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"fabric": "infiniband"}, "no infiniband fabric"),
        (
            {"capacity": CapacityType.SPOT, "reservation": "cr-pretrain-r1"},
            "cannot use capacity reservation",
        ),
        ({"count": 0}, "launch of 0 nodes"),
        ({"offering": "gcp:us-central1:a3-highgpu-8g"}, "not an AWS offering"),
        ({"offering": "p5.48xlarge"}, "not an offering id"),
    ],
)
def test_gang_requests_aws_cannot_serve_are_refused_before_any_launch(
    cloud: Cloud, change: dict[str, Any], message: str
) -> None:
    spec = dataclasses.replace(gang_spec(), **change)
    with pytest.raises(InvalidRequest, match=message):
        cloud.provider.launch(spec)
    assert not cloud.stand_in.calls("RunInstances") and not cloud.stand_in.calls("CreateLaunchTemplate")


def test_capacity_blocks_are_listed_and_bought_only_under_the_cap(cloud: Cloud) -> None:
    cloud.stand_in.block_offerings = [
        block_offering("cb-cheap", "1234.50"),
        block_offering("cb-dear", "98765.00"),
    ]
    offers = cloud.provider.capacity_block_offerings(P5, 2, 24)
    assert [(o.id, o.upfront_usd, o.nodes, o.hours, o.zone) for o in offers] == [
        ("cb-cheap", 1234.50, 2, 24, "us-east-1a"),
        ("cb-dear", 98765.00, 2, 24, "us-east-1a"),
    ]
    (listing,) = cloud.stand_in.calls("DescribeCapacityBlockOfferings")
    assert (listing["InstanceType"], listing["InstanceCount"], listing["CapacityDurationHours"]) == (
        "p5.48xlarge",
        2,
        24,
    )
    with pytest.raises(InvalidRequest) as err:
        cloud.provider.purchase_capacity_block("cb-dear", max_usd=5000, token="t-1")
    assert "98765.00" in str(err.value) and "5000.00" in str(err.value)
    assert not cloud.stand_in.calls("PurchaseCapacityBlock")
    with pytest.raises(InvalidRequest, match="not listed"):
        cloud.provider.purchase_capacity_block("cb-unknown", max_usd=1e9, token="t-2")

    tags = managed_tags(PLAN, run="pretrain-r1")
    bought = cloud.provider.purchase_capacity_block("cb-cheap", max_usd=5000, token="t-3", tags=tags)
    again = cloud.provider.purchase_capacity_block("cb-cheap", max_usd=5000, token="t-3", tags=tags)
    (purchase,) = cloud.stand_in.calls("PurchaseCapacityBlock")
    assert purchase["CapacityBlockOfferingId"] == "cb-cheap" and purchase["InstancePlatform"] == "Linux/UNIX"
    assert tag_dict(purchase, "capacity-reservation") == {**tags, "gpuplan-purchase": "t-3"}
    assert again.id == bought.id and bought.nodes == 2 and bought.run == "pretrain-r1"


# ----------------------------------------------------------------------------------------------------------
# moto's server, and no SDK


def test_against_moto_server_on_loopback(aws_env: None, moto_server: str) -> None:
    session = boto3.Session(region_name=REGION)
    vpc = make_vpc(session, moto_server)
    stand_in = Ec2StandIn()
    stand_in.install(session)
    settings = AwsSettings(endpoint_url=moto_server, image_id=vpc.image_id, subnets={REGION: vpc.subnets})
    provider = open_provider(settings, session=session, sleep=lambda s: None)
    provider.ensure_placement_group(group_spec())
    gang = provider.launch(gang_spec(CapacityType.SPOT))
    pool = provider.launch(pool_spec(CapacityType.ON_DEMAND, 2))
    inv = provider.inventory(PLAN)
    assert sorted(n.id for n in inv.live_nodes()) == sorted(n.id for n in [*gang, *pool])
    assert {(n.pool, n.run, n.capacity) for n in inv.nodes} == {
        (gang_spec(CapacityType.SPOT).pool, "pretrain-r1", CapacityType.SPOT),
        (pool_spec(CapacityType.ON_DEMAND).pool, None, CapacityType.ON_DEMAND),
    }
    provider.terminate(inv.nodes)
    assert not provider.inventory(PLAN).live_nodes()
    assert {r.region for r in stand_in.requests} == {REGION}
    (run,) = stand_in.calls("RunInstances")
    assert len(run["LaunchTemplate"]) == 2 and run["Placement"] == {"GroupName": "pg-pretrain-r1"}
    client = provider._client(REGION)
    assert client.meta.endpoint_url == moto_server


def test_import_without_boto3_then_open_names_the_extra(tmp_path: Any) -> None:
    code = (
        "import sys; sys.modules['boto3'] = None\n"
        "import providers.aws as aws\n"
        "from providers.base import MissingSDK\n"
        "try:\n"
        "    aws.open_provider(aws.AwsSettings())\n"
        "except MissingSDK as exc:\n"
        "    print('missing:', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "missing:" in done.stdout and "gpuplan[aws]" in done.stdout and "boto3" in done.stdout


def test_a_reservation_with_an_end_is_limited_to_it(cloud: Cloud) -> None:
    """A gang's reservation ends a margin after its run (issue 35): EC2 cancels it then, so it never
    bills on at the on-demand rate after the run."""
    from dataclasses import replace
    from datetime import UTC, datetime

    ends = datetime(2027, 1, 6, 18, 0, tzinfo=UTC)
    cloud.provider.ensure_placement_group(group_spec())
    made = cloud.provider.ensure_reservation(replace(reservation_spec(), ends=ends))
    (cr,) = cloud.stand_in.calls("CreateCapacityReservation")
    assert cr["EndDateType"] == "limited" and cr["EndDate"] == ends
    assert made.name == "cr-pretrain-r1"


# ----------------------------------------------------------------------------------------------------------
# a gang's subnet must hold its addresses (issue 35 point 5)


@pytest.fixture
def small_subnet(aws_env: None) -> Iterator[Cloud]:
    """The cloud of :func:`cloud` with one /28 subnet: 11 free addresses (16 less the 5 AWS keeps)."""
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        ec2 = session.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.50.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.50.1.0/28", AvailabilityZone="us-east-1a")
        stand_in = Ec2StandIn()
        stand_in.install(session)
        subnets = [subnet["Subnet"]["SubnetId"]]
        settings = AwsSettings(image_id="ami-0a1b2c3d4e5f60718", subnets={REGION: subnets})
        provider = open_provider(settings, session=session, sleep=lambda s: None)
        provider.ensure_placement_group(group_spec())
        yield Cloud(provider, stand_in, [], subnets, ec2)


def test_a_gang_its_subnet_cannot_hold_is_refused_before_anything_is_made(small_subnet: Cloud) -> None:
    cloud = small_subnet
    with pytest.raises(InvalidRequest) as err:
        cloud.provider.launch(gang_spec(count=12))
    message = str(err.value)
    assert cloud.subnets[0] in message and "11 free IP addresses" in message
    assert "needs 12 (12 nodes x 1)" in message and err.value.code == "InsufficientFreeAddressesInSubnet"
    assert not cloud.stand_in.calls("RunInstances") and not cloud.stand_in.calls("CreateLaunchTemplate")
    (asked,) = cloud.stand_in.calls("DescribeSubnets")
    assert asked["SubnetIds"] == cloud.subnets


def test_no_reservation_is_made_for_a_gang_its_subnet_cannot_hold(small_subnet: Cloud) -> None:
    """A reservation bills at on demand from its creation: one for a gang whose launch the subnet would
    refuse bills for nothing, so the addresses are checked before it too."""
    cloud = small_subnet
    cloud.provider.ensure_placement_group(group_spec())
    spec = reservation_spec()
    big = ReservationSpec(spec.name, spec.offering, 12, spec.placement_group, spec.tags, spec.token)
    with pytest.raises(InvalidRequest, match="11 free IP addresses") as err:
        cloud.provider.ensure_reservation(big)
    assert err.value.code == "InsufficientFreeAddressesInSubnet"
    assert not cloud.stand_in.calls("CreateCapacityReservation")


def test_an_efa_gang_takes_one_address_per_node_so_eleven_p5_fit_a_slash_28(small_subnet: Cloud) -> None:
    """With an efa interface on all 32 cards a p5.48xlarge took 32 addresses: one node would not fit a
    /28. With efa-only on cards 1-31 it takes one, so 11 nodes fit."""
    nodes = small_subnet.provider.launch(gang_spec(count=11))
    assert len(nodes) == 11
    (run,) = small_subnet.stand_in.calls("RunInstances")
    assert run["MinCount"] == run["MaxCount"] == 11


def test_a_pool_is_not_held_to_one_subnet(small_subnet: Cloud) -> None:
    small_subnet.provider.launch(pool_spec(CapacityType.ON_DEMAND, 2))
    assert not small_subnet.stand_in.calls("DescribeSubnets"), "a fleet spreads over subnets: no gang check"


# ----------------------------------------------------------------------------------------------------------
# answers that are not the API's (issue 35 point 5): typed errors, never a traceback


def test_an_html_page_where_ec2_answers_is_operation_failed_naming_it(cloud: Cloud) -> None:
    """nginx's 502 page, sent as 200 (a captive proxy) and as 502, read by botocore's own parser."""
    cloud.stand_in.proxy_page("DescribeInstances", status=200)
    with pytest.raises(OperationFailed) as err:
        cloud.provider.inventory(PLAN)
    assert err.value.code == "ResponseParserError" and err.value.operation == "describe_instances"
    assert "could not be read" in str(err.value) and "502 Bad Gateway" in str(err.value)
    assert "<html>" not in str(err.value)
    cloud.stand_in.proxy_page("DescribeInstances", status=502)
    with pytest.raises(OperationFailed, match="EC2 answered HTTP 502 Bad Gateway, not the API's error"):
        cloud.provider.inventory(PLAN)


def test_moto_servers_own_500_page_is_operation_failed(aws_env: None, moto_server: str) -> None:
    """moto's server answers an operation it lacks (placement groups) with werkzeug's HTML 500 page."""
    settings = AwsSettings(endpoint_url=moto_server, image_id="ami-0a1b2c3d4e5f60718")
    provider = open_provider(settings, session=boto3.Session(region_name=REGION), sleep=lambda s: None)
    with pytest.raises(OperationFailed) as err:
        provider.inventory(PLAN)
    assert err.value.operation == "describe_placement_groups"
    assert "could not be read" in str(err.value) and "500 Internal Server Error" in str(err.value)
