"""`AwsProvider.quotas` (issue 35 point 8): EC2's vCPU quotas from Service Quotas (answered by the
stand-in in GetServiceQuota's real shape: moto's service-quotas knows only VPC's), per-node vCPUs from
describe_instance_types and usage from the account's instances in moto, ours and others'."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from aws_stand_in import Ec2StandIn, make_vpc
from moto import mock_aws

from models.actions import Action, ActionKind
from models.naming import client_token, managed_tags, pool_name
from planner.operations.quotas import check_quotas
from providers.aws import AwsProvider, AwsSettings, open_provider
from providers.base import Auth, CapacityType, LaunchSpec, PlacementGroupSpec, ReservationSpec, Throttled

REGION = "us-east-1"
P5 = f"aws:{REGION}:p5.48xlarge"
G6E = f"aws:{REGION}:g6e.xlarge"
M5 = f"aws:{REGION}:m5.large"
PLAN = "quota-plan"
OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT


@dataclass
class Account:
    provider: AwsProvider
    stand_in: Ec2StandIn
    ec2: Any  # a client without hooks: another team's launches in the same account
    hooked: Any  # a client through the stand-in: another team's capacity reservations


@pytest.fixture
def account(aws_env: None) -> Iterator[Account]:
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        vpc = make_vpc(session)
        stand_in = Ec2StandIn()
        stand_in.install(session)
        settings = AwsSettings(image_id=vpc.image_id, subnets={REGION: vpc.subnets})
        provider = open_provider(settings, session=session, sleep=lambda s: None)
        yield Account(provider, stand_in, boto3.client("ec2", region_name=REGION), session.client("ec2"))


def _launch(account: Account) -> None:
    """Ours: a 2-node on-demand p5 gang and 3 spot g6e.xlarge; someone else's: a p4d and an m5.large."""
    p = account.provider
    tags = managed_tags(PLAN, run="r1")
    p.ensure_placement_group(PlacementGroupSpec("pg-r1", REGION, P5, 2, "efa", tags, client_token("pg")))
    pool = pool_name(P5, OD)
    p.launch(LaunchSpec(P5, OD, 2, pool, managed_tags(PLAN, pool=pool, run="r1"), "t1", run="r1",
                        placement_group="pg-r1", fabric="efa"))  # fmt: skip
    pool = pool_name(G6E, SPOT)
    p.launch(LaunchSpec(G6E, SPOT, 3, pool, managed_tags(PLAN, pool=pool), "t2"))
    for instance_type in ("p4d.24xlarge", "m5.large"):
        account.ec2.run_instances(
            ImageId="ami-0a1b2c3d4e5f60718", InstanceType=instance_type, MinCount=1, MaxCount=1
        )


def test_quotas_name_limit_usage_and_vcpus_per_node_of_what_is_wanted(account: Account) -> None:
    _launch(account)
    account.stand_in.applied_quotas |= {(REGION, "L-417A185B"): 1000.0, (REGION, "L-3819A6DF"): 64.0}
    account.stand_in.default_quotas |= {"L-7212CCBC": 192.0}  # no applied value: AWS's default
    before = len(account.stand_in.requests)
    found = account.provider.quotas([(P5, OD), (P5, SPOT), (G6E, SPOT), (M5, OD)])
    got = {q.name: (q.region, q.limit, q.used, q.unit, dict(q.per_node)) for q in found}
    assert got == {
        # 2 p5 (192 vCPUs each) of ours and a p4d (96) of another team's: the quota is the account's
        "Running On-Demand P instances (L-417A185B)": (REGION, 1000.0, 480.0, "vCPUs", {(P5, OD): 192.0}),
        "All P Spot Instance Requests (L-7212CCBC)": (REGION, 192.0, 0.0, "vCPUs", {(P5, SPOT): 192.0}),
        "All G and VT Spot Instance Requests (L-3819A6DF)": (REGION, 64.0, 12.0, "vCPUs", {(G6E, SPOT): 4.0}),
    }  # Standard on-demand (the m5.large): Service Quotas reports no value, so it is left out, not guessed
    assert {q.name: q.free for q in found}["All G and VT Spot Instance Requests (L-3819A6DF)"] == 52.0
    asked = [r for r in account.stand_in.requests[before:] if r.operation == "GetServiceQuota"]
    assert sorted(r.params["QuotaCode"] for r in asked) == [
        "L-1216C47A",
        "L-3819A6DF",
        "L-417A185B",
        "L-7212CCBC",
    ]
    assert all(r.params["ServiceCode"] == "ec2" for r in asked)
    writes = [
        r
        for r in account.stand_in.requests[before:]
        if r.operation.startswith(("Create", "Run", "Terminate"))
    ]
    assert writes == [], "reading quotas creates nothing"


def test_families_without_a_vcpu_quota_read_here_and_other_clouds_are_left_out(account: Account) -> None:
    assert (
        account.provider.quotas([(f"aws:{REGION}:inf2.xlarge", OD), ("gcp:us-central1:a3-highgpu-8g", OD)])
        == []
    )
    assert not account.stand_in.calls("GetServiceQuota")


def test_access_denied_on_service_quotas_is_auth(account: Account) -> None:
    account.stand_in.fail("GetServiceQuota", "AccessDeniedException", times=None)
    with pytest.raises(Auth) as err:
        account.provider.quotas([(P5, OD)])
    assert err.value.code == "AccessDeniedException" and err.value.operation == "get_service_quota"


def test_service_quotas_throttling_is_retried(account: Account) -> None:
    account.stand_in.applied_quotas[(REGION, "L-417A185B")] = 384.0
    account.stand_in.fail("GetServiceQuota", "TooManyRequestsException", times=1)
    (quota,) = account.provider.quotas([(P5, OD)])
    assert quota.limit == 384.0 and len(account.stand_in.calls("GetServiceQuota")) == 2
    account.stand_in.fail("GetServiceQuota", "TooManyRequestsException", times=None)
    with pytest.raises(Throttled):
        account.provider.quotas([(P5, OD)])


def _reserve(account: Account, nodes: int) -> str:
    """Ours: a placement group and an ODCR of ``nodes`` p5 for run r1; its name."""
    p = account.provider
    tags = managed_tags(PLAN, run="r1")
    p.ensure_placement_group(PlacementGroupSpec("pg-r1", REGION, P5, nodes, "efa", tags, client_token("pg")))
    pool = pool_name(P5, OD)
    spec = ReservationSpec(
        "res-r1", P5, nodes, "pg-r1", managed_tags(PLAN, pool=pool, run="r1"), client_token("res")
    )
    return p.ensure_reservation(spec).name


def test_the_unused_part_of_active_capacity_reservations_is_in_use(account: Account) -> None:
    """EC2 holds an ODCR's capacity against the On-Demand limit: its AvailableInstanceCount x vCPUs is in
    use, ours and other teams' alike, and a launch into it takes no more (``Quota.reserved``). A
    cancelled reservation holds nothing; a node terminated out of a reservation gives its place back."""
    account.stand_in.applied_quotas[(REGION, "L-417A185B")] = 2000.0
    name = _reserve(account, 4)
    pool = pool_name(P5, OD)
    p = account.provider
    made = p.launch(
        LaunchSpec(P5, OD, 2, pool, managed_tags(PLAN, pool=pool, run="r1"), "t-r1", run="r1",
                   placement_group="pg-r1", reservation=name, fabric="efa")
    )  # fmt: skip
    other = account.hooked.create_capacity_reservation(
        InstanceType="p4d.24xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone=f"{REGION}a",
        InstanceCount=2, ClientToken="theirs",
    )["CapacityReservation"]["CapacityReservationId"]  # fmt: skip
    gone = account.hooked.create_capacity_reservation(
        InstanceType="p4d.24xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone=f"{REGION}a",
        InstanceCount=8, ClientToken="cancelled",
    )["CapacityReservation"]["CapacityReservationId"]  # fmt: skip
    account.hooked.cancel_capacity_reservation(CapacityReservationId=gone)

    (quota,) = p.quotas([(P5, OD)])
    # 2 p5 running (384) + 2 p5 reserved unused (384) + 2 p4d reserved unused by another team (192)
    assert quota.used == 960.0 and quota.free == 1040.0
    assert dict(quota.reserved) == {name: 384.0, other: 192.0}

    p.terminate(made[:1])
    (quota,) = p.quotas([(P5, OD)])
    assert quota.used == 960.0 and dict(quota.reserved) == {name: 576.0, other: 192.0}

    # the quota full: a launch of 3 into the reservation fits (it uses what the reservation holds), one
    # more p5 beside it does not, and the refusal names the quota and the figures
    account.stand_in.applied_quotas[(REGION, "L-417A185B")] = 960.0
    quotas = p.quotas([(P5, OD)])
    into = Action(id=1, kind=ActionKind.LAUNCH, target="r1", offering=P5, capacity=OD, count=3, run="r1",
                  reservation=name)  # fmt: skip
    beside = Action(id=2, kind=ActionKind.LAUNCH, target="pool", offering=P5, capacity=OD, count=1)
    checked = check_quotas([into, beside], quotas)
    assert set(checked.refused) == {2}
    assert (
        "need 192 vCPUs of quota Running On-Demand P instances (L-417A185B), which has 0 free"
        in (checked.refused[2])
    )
    assert "(limit 960, 960 in use" in checked.refused[2]
