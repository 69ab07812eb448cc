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

from models.naming import client_token, managed_tags, pool_name
from providers.aws import AwsProvider, AwsSettings, open_provider
from providers.base import Auth, CapacityType, LaunchSpec, PlacementGroupSpec, Throttled

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


@pytest.fixture
def account(aws_env: None) -> Iterator[Account]:
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        vpc = make_vpc(session)
        stand_in = Ec2StandIn()
        stand_in.install(session)
        settings = AwsSettings(image_id=vpc.image_id, subnets={REGION: vpc.subnets})
        provider = open_provider(settings, session=session, sleep=lambda s: None)
        yield Account(provider, stand_in, boto3.client("ec2", region_name=REGION))


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
