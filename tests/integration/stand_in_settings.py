"""The settings the provisioning tests give each cloud's adapter to reach its local stand-in, written once.

``aws_site``: moto in process for EC2 with the project's stand-in hooks (placement groups, capacity
reservations, their tokens) on every boto3 session, and a VPC with one subnet per region; ``gcp_settings``
and ``azure_settings``: the provider settings that point the real SDKs at the loopback fakes
(``gcp_fake.py``, ``azure_fake.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

AWS_IMAGE = "ami-0a1b2c3d4e5f60718"
AZURE_SUBSCRIPTION = "00000000-0000-0000-0000-000000000001"


@contextmanager
def aws_site(
    monkeypatch: pytest.MonkeyPatch,
    regions: tuple[str, ...] = ("us-east-1", "us-east-2"),
    stand_in: Any = None,
) -> Iterator[dict[str, Any]]:
    """moto for EC2 with the stand-in installed on every session the code under test makes (``stand_in``,
    an ``aws_stand_in.Ec2StandIn`` the caller keeps to read its calls or set its offers, or a new one);
    yields the ``aws:`` provider settings (the image and a /20 subnet per region, in its zone ``a``)."""
    import boto3
    from aws_stand_in import Ec2StandIn
    from moto import mock_aws

    stand_in = stand_in if stand_in is not None else Ec2StandIn()
    real_session = boto3.Session

    class HookedSession(real_session):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            stand_in.install(self)

    with mock_aws():
        subnets = {}
        for region in regions:
            ec2 = real_session(region_name=region).client("ec2")
            vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
            subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.0.0/20", AvailabilityZone=f"{region}a")
            subnets[region] = [subnet["Subnet"]["SubnetId"]]
        monkeypatch.setattr(boto3, "Session", HookedSession)
        yield {"image_id": AWS_IMAGE, "subnets": subnets}


def gcp_settings(api_endpoint: str, project: str = "fleet-project") -> dict[str, Any]:
    """``gcp:`` settings for the fake at ``api_endpoint``: a zone in us-central1, four GPUDirect networks."""
    return {
        "project": project,
        "zones": {"us-central1": "us-central1-a"},
        "api_endpoint": api_endpoint,
        "credentials": "anonymous",
        "gpudirect_networks": [
            {"network": f"global/networks/gpu-{i}", "subnetwork": f"regions/us-central1/subnetworks/gpu-{i}"}
            for i in range(4)
        ],
    }


def azure_settings(base_url: str) -> dict[str, Any]:
    """``azure:`` settings for the ARM fake at ``base_url`` (a token from the environment, no waits)."""
    return {
        "subscription_id": AZURE_SUBSCRIPTION,
        "resource_group": "gpu-fleet",
        "base_url": base_url,
        "credential": "access-token-env",
        "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 gpuplan@test",
        "subnet_id": f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/net/providers/"
        "Microsoft.Network/virtualNetworks/v/subnets/gpu",
        "polling_interval_seconds": 0,
    }
