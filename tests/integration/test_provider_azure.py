"""The Azure adapter with the real azure-mgmt-compute client against the loopback ARM fake (azure_fake.py):
the request bodies ARM receives, what the adapter returns, and every fault of the error contract."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure_fake import AzureFake

from models.naming import TAG_PLAN, client_token, managed_tags
from providers.azure import AzureProvider, AzureSettings, open_provider
from providers.base import (
    Auth,
    CapacityType,
    Conflict,
    InsufficientCapacity,
    InvalidRequest,
    LaunchSpec,
    Node,
    OperationFailed,
    PlacementGroup,
    PlacementGroupSpec,
    QuotaExceeded,
    ReservationSpec,
    RetryPolicy,
    Throttled,
)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "eyJ0eXAi.fake-azure-bearer-8c1f2e7d"
SUB, RG = "sub", "rg"
ND = "Standard_ND96isr_H100_v5"
ND_OFFERING = f"azure:eastus:{ND}"
ARM = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute"
PLAN = "mixed-fleet"
SUBNET = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/virtualNetworks/v/subnets/s"


@pytest.fixture
def fake() -> Iterator[AzureFake]:
    server = AzureFake()
    server.start()
    yield server
    server.stop()


def settings_for(fake: AzureFake, **over: object) -> AzureSettings:
    base: dict[str, object] = {
        "subscription_id": SUB,
        "resource_group": RG,
        "ssh_public_key": "ssh-ed25519 AAAAC3Nza gpuplan@test",
        "subnet_id": SUBNET,
        "base_url": fake.base_url,
        "prices_url": f"{fake.base_url}/api/retail/prices",
        "credential": "access-token-env",
        "retry": {"attempts": 3, "base_seconds": 0.01, "cap_seconds": 0.01},
        "polling_interval_seconds": 0,
    }
    base.update(over)
    return AzureSettings.model_validate(base)


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def provider(fake: AzureFake, sleeps: list[float], monkeypatch: pytest.MonkeyPatch) -> AzureProvider:
    monkeypatch.setenv("AZURE_ACCESS_TOKEN", TOKEN)
    return open_provider(settings_for(fake), sleep=sleeps.append)


def pool_spec(
    pool: str = "azure-eastus-nd-spot",
    *,
    capacity: CapacityType = CapacityType.SPOT,
    count: int = 2,
    target: int | None = 2,
) -> LaunchSpec:
    return LaunchSpec(
        offering=ND_OFFERING,
        capacity=capacity,
        count=count,
        pool=pool,
        tags=managed_tags(PLAN, pool=pool),
        token=client_token(PLAN, pool, target),
        target=target,
    )


def gang_spec(
    run: str = "llm-pretrain-r1",
    *,
    capacity: CapacityType = CapacityType.SPOT,
    count: int = 2,
    target: int | None = 2,
    reservation: str | None = None,
) -> LaunchSpec:
    pool = "azure-eastus-nd-gang"
    return LaunchSpec(
        offering=ND_OFFERING,
        capacity=capacity,
        count=count,
        pool=pool,
        tags=managed_tags(PLAN, pool=pool, run=run),
        token=client_token(PLAN, run, target),
        run=run,
        placement_group=f"pg-{run}",
        reservation=reservation,
        fabric="infiniband",
        target=target,
    )


def reserved_pool_spec(reservation: str, count: int = 2) -> LaunchSpec:
    """On-demand nodes of a pool (no placement group) launched into a capacity reservation."""
    pool = "azure-eastus-nd-reserved"
    return LaunchSpec(
        offering=ND_OFFERING,
        capacity=CapacityType.ON_DEMAND,
        count=count,
        pool=pool,
        tags=managed_tags(PLAN, pool=pool),
        token=client_token(PLAN, pool, count),
        reservation=reservation,
        target=count,
    )


def ppg_spec(run: str = "llm-pretrain-r1") -> PlacementGroupSpec:
    return PlacementGroupSpec(
        name=f"pg-{run}",
        region="eastus",
        offering=ND_OFFERING,
        nodes=2,
        fabric="infiniband",
        tags=managed_tags(PLAN, run=run),
        token=client_token(PLAN, run, "pg"),
    )


def vm_ids(fake: AzureFake, scale_set: str) -> list[str]:
    return sorted(fake.scale_set_vms(f"{ARM}/virtualMachineScaleSets/{scale_set}"), key=int)


# ----------------------------------------------------------------------------------------------------------
# request bodies


def test_placement_group_body_then_adopted(provider: AzureProvider, fake: AzureFake) -> None:
    group = provider.ensure_placement_group(ppg_spec())
    puts = fake.sent("PUT", "/proximityPlacementGroups/")
    assert [p.path for p in puts] == [f"{ARM}/proximityPlacementGroups/pg-llm-pretrain-r1"]
    assert puts[0].body == {
        "location": "eastus",
        "tags": {TAG_PLAN: PLAN, "gpuplan-managed-by": "provision", "gpuplan-run": "llm-pretrain-r1"},
        "properties": {"proximityPlacementGroupType": "Standard", "intent": {"vmSizes": [ND]}},
    }
    assert (group.name, group.region, group.run) == ("pg-llm-pretrain-r1", "eastus", "llm-pretrain-r1")
    assert group.id == f"{ARM}/proximityPlacementGroups/pg-llm-pretrain-r1"
    again = provider.ensure_placement_group(ppg_spec())
    assert again == group
    assert len(fake.sent("PUT", "/proximityPlacementGroups/")) == 1  # read, found ours, nothing re-sent


def test_spot_gang_scale_set_body(provider: AzureProvider, fake: AzureFake) -> None:
    provider.ensure_placement_group(ppg_spec())
    nodes = provider.launch(gang_spec())
    (put,) = fake.sent("PUT", "/virtualMachineScaleSets/")
    assert put.path == f"{ARM}/virtualMachineScaleSets/llm-pretrain-r1"
    body = put.body
    assert body["location"] == "eastus"
    assert body["sku"] == {"name": ND, "tier": "Standard", "capacity": 2}
    assert body["tags"] == {
        TAG_PLAN: PLAN,
        "gpuplan-managed-by": "provision",
        "gpuplan-pool": "azure-eastus-nd-gang",
        "gpuplan-run": "llm-pretrain-r1",
    }
    props = body["properties"]
    assert props["orchestrationMode"] == "Uniform"
    assert props["upgradePolicy"] == {"mode": "Manual"}
    assert props["singlePlacementGroup"] is True
    assert props["overprovision"] is False
    assert props["proximityPlacementGroup"] == {"id": f"{ARM}/proximityPlacementGroups/pg-llm-pretrain-r1"}
    profile = props["virtualMachineProfile"]
    assert profile["priority"] == "Spot"
    assert profile["evictionPolicy"] == "Delete"
    assert profile["billingProfile"] == {"maxPrice": -1}
    assert "capacityReservation" not in profile
    assert profile["storageProfile"]["imageReference"] == {
        "publisher": "microsoft-dsvm",
        "offer": "ubuntu-hpc",
        "sku": "2204",
        "version": "latest",
    }
    linux = profile["osProfile"]["linuxConfiguration"]
    assert linux["disablePasswordAuthentication"] is True
    assert linux["ssh"]["publicKeys"][0]["keyData"] == "ssh-ed25519 AAAAC3Nza gpuplan@test"
    nic = profile["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]
    assert nic["ipConfigurations"][0]["properties"]["subnet"] == {"id": SUBNET}
    # what the adapter returns: the two new VMs, as nodes of the gang
    assert [n.id for n in nodes] == [
        f"{ARM}/virtualMachineScaleSets/llm-pretrain-r1/virtualMachines/{i}" for i in (0, 1)
    ]
    assert {(n.offering, n.capacity, n.pool, n.run, n.placement_group, n.state) for n in nodes} == {
        (
            ND_OFFERING,
            CapacityType.SPOT,
            "azure-eastus-nd-gang",
            "llm-pretrain-r1",
            "pg-llm-pretrain-r1",
            "running",
        )
    }


def test_reservation_bodies_and_on_demand_gang_into_it(provider: AzureProvider, fake: AzureFake) -> None:
    tags = managed_tags(PLAN, pool="azure-eastus-nd-gang", run="llm-pretrain-r1")
    spec = ReservationSpec("cr-llm-pretrain-r1", ND_OFFERING, 2, "pg-llm-pretrain-r1", tags, "t" * 32)
    reservation = provider.ensure_reservation(spec)
    (group_put,) = fake.sent("PUT", "/capacityReservationGroups/[^/]+$")
    assert group_put.path == f"{ARM}/capacityReservationGroups/cr-llm-pretrain-r1"
    assert group_put.body == {"location": "eastus", "tags": tags}
    (res_put,) = fake.sent("PUT", "/capacityReservations/")
    assert (
        res_put.path
        == f"{ARM}/capacityReservationGroups/cr-llm-pretrain-r1/capacityReservations/cr-llm-pretrain-r1"
    )
    assert res_put.body == {"location": "eastus", "tags": tags, "sku": {"name": ND, "capacity": 2}}
    # polled to completion: the async operation was read
    assert fake.sent("GET", "/locations/eastus/operations/")
    assert (reservation.name, reservation.offering, reservation.nodes, reservation.run) == (
        "cr-llm-pretrain-r1",
        ND_OFFERING,
        2,
        "llm-pretrain-r1",
    )
    # the same spec again adopts it: no PUT
    assert provider.ensure_reservation(spec).nodes == 2
    assert len(fake.sent("PUT")) == 2

    # a gang (in a proximity placement group) cannot also take the reservation: refused, nothing sent
    with pytest.raises(InvalidRequest, match="cannot join a proximity placement group and a capacity"):
        provider.launch(gang_spec(capacity=CapacityType.ON_DEMAND, reservation="cr-llm-pretrain-r1"))
    assert not fake.sent("PUT", "/virtualMachineScaleSets/")
    provider.launch(reserved_pool_spec("cr-llm-pretrain-r1"))
    profile = fake.sent("PUT", "/virtualMachineScaleSets/")[0].body["properties"]["virtualMachineProfile"]
    assert profile["priority"] == "Regular"
    assert "evictionPolicy" not in profile and "billingProfile" not in profile
    assert profile["capacityReservation"] == {
        "capacityReservationGroup": {"id": f"{ARM}/capacityReservationGroups/cr-llm-pretrain-r1"}
    }


def test_launch_twice_with_the_same_target_does_not_double(provider: AzureProvider, fake: AzureFake) -> None:
    first = provider.launch(pool_spec(count=3, target=3))
    second = provider.launch(pool_spec(count=3, target=3))  # a retried apply after a lost reply
    assert len(first) == 3 and second == []
    assert [p.body["sku"]["capacity"] for p in fake.sent("PUT", "/virtualMachineScaleSets/")] == [3, 3]
    assert vm_ids(fake, "azure-eastus-nd-spot") == ["0", "1", "2"]
    pool = fake.sent("PUT", "/virtualMachineScaleSets/")[0].body["properties"]
    assert pool["singlePlacementGroup"] is False and "proximityPlacementGroup" not in pool
    # with no target, capacity grows by count from what the scale set holds
    grown = provider.launch(pool_spec(count=2, target=None))
    assert fake.sent("PUT", "/virtualMachineScaleSets/")[-1].body["sku"]["capacity"] == 5
    assert [n.id.rsplit("/", 1)[1] for n in grown] == ["3", "4"]
    # a stale target below what it holds never scales in (Azure would pick the VMs to delete)
    assert provider.launch(pool_spec(count=1, target=1)) == []
    assert fake.sent("PUT", "/virtualMachineScaleSets/")[-1].body["sku"]["capacity"] == 5
    assert vm_ids(fake, "azure-eastus-nd-spot") == ["0", "1", "2", "3", "4"]


def test_inventory_finds_ours_by_tag(provider: AzureProvider, fake: AzureFake) -> None:
    provider.ensure_placement_group(ppg_spec())
    tags = managed_tags(PLAN, pool="azure-eastus-nd-gang", run="llm-pretrain-r1")
    provider.ensure_reservation(ReservationSpec("cr-llm-pretrain-r1", ND_OFFERING, 2, None, tags, "t" * 32))
    provider.launch(pool_spec(count=1, target=1))
    provider.launch(gang_spec(capacity=CapacityType.ON_DEMAND))
    provider.launch(reserved_pool_spec("cr-llm-pretrain-r1"))
    # another plan's scale set and placement group in the same resource group
    theirs = managed_tags("someone-else", pool="other-pool")
    provider.launch(LaunchSpec(ND_OFFERING, CapacityType.SPOT, 1, "other-pool", theirs, "x", target=1))
    fake.put_resource(
        f"{ARM}/proximityPlacementGroups/theirs", {"location": "eastus", "tags": {TAG_PLAN: "x"}}
    )

    inv = provider.inventory(PLAN)
    summary = sorted((n.pool, n.run, n.capacity, n.offering, n.reservation) for n in inv.nodes)
    gang = ("azure-eastus-nd-gang", "llm-pretrain-r1", CapacityType.ON_DEMAND, ND_OFFERING, None)
    reserved = ("azure-eastus-nd-reserved", None, CapacityType.ON_DEMAND, ND_OFFERING, "cr-llm-pretrain-r1")
    spot = ("azure-eastus-nd-spot", None, CapacityType.SPOT, ND_OFFERING, None)
    assert summary == [gang, gang, reserved, reserved, spot]
    assert len(inv.live_nodes()) == 5
    assert [(g.name, g.run) for g in inv.placement_groups] == [("pg-llm-pretrain-r1", "llm-pretrain-r1")]
    assert [(r.name, r.offering, r.nodes, r.run) for r in inv.reservations] == [
        ("cr-llm-pretrain-r1", ND_OFFERING, 2, "llm-pretrain-r1")
    ]
    # the VM lists asked for instance views (power states)
    assert all(r.query.get("$expand") == ["instanceView"] for r in fake.sent("GET", "/virtualMachines$"))


def test_terminate_sends_delete_instances(provider: AzureProvider, fake: AzureFake) -> None:
    nodes = provider.launch(pool_spec(count=3, target=3))
    gone = Node(
        id=f"{ARM}/virtualMachineScaleSets/azure-eastus-nd-spot/virtualMachines/99",
        offering=ND_OFFERING,
        capacity=CapacityType.SPOT,
        pool="azure-eastus-nd-spot",
    )
    elsewhere = Node(id="vanished-set/0", offering=ND_OFFERING, capacity=CapacityType.SPOT, pool="p")
    provider.terminate([nodes[0], nodes[2], gone, elsewhere])
    (post,) = fake.sent("POST", "/delete$")
    assert post.path == f"{ARM}/virtualMachineScaleSets/azure-eastus-nd-spot/delete"
    assert post.body == {"instanceIds": ["0", "2"]}
    assert vm_ids(fake, "azure-eastus-nd-spot") == ["1"]
    assert [n.id for n in provider.inventory(PLAN).nodes] == [nodes[1].id]


def test_interruptions_are_evicted_spot_vms(provider: AzureProvider, fake: AzureFake) -> None:
    provider.launch(pool_spec(count=2, target=2))
    provider.launch(
        pool_spec("azure-eastus-nd-on-demand", capacity=CapacityType.ON_DEMAND, count=1, target=1)
    )
    assert provider.interruptions(PLAN) == []
    fake.set_vm_power_state(
        f"{ARM}/virtualMachineScaleSets/azure-eastus-nd-spot", "1", "PowerState/deallocated"
    )
    fake.set_vm_power_state(
        f"{ARM}/virtualMachineScaleSets/azure-eastus-nd-on-demand", "0", "PowerState/deallocated"
    )
    (notice,) = provider.interruptions(PLAN)
    assert notice.node_id == f"{ARM}/virtualMachineScaleSets/azure-eastus-nd-spot/virtualMachines/1"
    assert (notice.kind, notice.pool, notice.offering) == (
        "interruption",
        "azure-eastus-nd-spot",
        ND_OFFERING,
    )
    states = {
        n.id.rsplit("/", 1)[1]: n.state
        for n in provider.inventory(PLAN).nodes
        if n.capacity is CapacityType.SPOT
    }
    assert states == {"0": "running", "1": "stopped"}


def test_spot_prices_from_the_retail_prices_api(provider: AzureProvider, fake: AzureFake) -> None:
    row = {
        "armRegionName": "eastus",
        "armSkuName": ND,
        "type": "Consumption",
        "currencyCode": "USD",
        "unitOfMeasure": "1 Hour",
        "productName": "Virtual Machines NDisrH100v5 Series",
    }
    fake.prices = [
        {
            **row,
            "skuName": "ND96isr H100 v5",
            "retailPrice": 98.32,
            "effectiveStartDate": "2026-01-01T00:00:00Z",
        },
        {
            **row,
            "skuName": "ND96isr H100 v5 Spot",
            "retailPrice": 41.5,
            "effectiveStartDate": "2026-06-01T00:00:00Z",
        },
        {
            **row,
            "skuName": "ND96isr H100 v5 Spot",
            "retailPrice": 39.0,
            "effectiveStartDate": "2026-10-01T00:00:00Z",
        },
        {
            **row,
            "skuName": "ND96isr H100 v5 Low Priority",
            "retailPrice": 20.0,
            "effectiveStartDate": "2026-10-01",
        },
        {
            **row,
            "skuName": "ND96isr H100 v5 Spot",
            "retailPrice": 55.0,
            "effectiveStartDate": "2026-11-01T00:00:00Z",
            "productName": "Virtual Machines NDisrH100v5 Series Windows",
        },
    ]
    prices = provider.spot_prices(
        [ND_OFFERING, "azure:westus:Standard_NC4as_T4_v3", "aws:us-east-1:p5.48xlarge"]
    )
    assert [(p.offering, p.usd_per_hour, p.at.isoformat()) for p in prices] == [
        (ND_OFFERING, 39.0, "2026-10-01T00:00:00+00:00")
    ]
    filters = [r.query["$filter"][0] for r in fake.sent("GET", "^/api/retail/prices$")]
    assert filters[0] == f"armRegionName eq 'eastus' and armSkuName eq '{ND}' and priceType eq 'Consumption'"
    assert len(filters) == 2  # the aws offering is not asked about
    assert all(r.authorization is None for r in fake.sent("GET", "^/api/retail/prices$"))  # a public API


def test_offerings_from_resource_skus(provider: AzureProvider, fake: AzureFake) -> None:
    def sku(
        name: str, caps: dict[str, str], restrictions: list[dict[str, object]] | None = None
    ) -> dict[str, object]:
        return {
            "resourceType": "virtualMachines",
            "name": name,
            "locations": ["eastus"],
            "capabilities": [{"name": k, "value": v} for k, v in caps.items()],
            "restrictions": restrictions or [],
        }

    fake.skus = [
        sku(ND, {"GPUs": "8", "RdmaEnabled": "True", "vCPUs": "96"}),
        sku("Standard_NC24ads_A100_v4", {"GPUs": "1", "vCPUs": "24"}),
        sku("Standard_D4s_v5", {"vCPUs": "4"}),
        sku(
            "Standard_ND96isr_H200_v5",
            {"GPUs": "8", "RdmaEnabled": "True"},
            [{"type": "Location", "values": ["eastus"], "reasonCode": "NotAvailableForSubscription"}],
        ),
    ]
    got = provider.offerings(["eastus"])
    assert [(o.offering, o.gpu_model, o.gpus_per_node, o.fabric) for o in got] == [
        (ND_OFFERING, "H100", 8, "infiniband"),
        ("azure:eastus:Standard_NC24ads_A100_v4", "A100", 1, None),
    ]
    (req,) = fake.sent("GET", "/skus$")
    assert req.query["$filter"] == ["location eq 'eastus'"]


# ----------------------------------------------------------------------------------------------------------
# faults


def test_throttling_is_retried_then_gives_up(
    provider: AzureProvider, fake: AzureFake, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gpuplan.providers.azure")
    for _ in range(2):
        fake.fail("PUT", "/virtualMachineScaleSets/", 429, "TooManyRequests")
    nodes = provider.launch(pool_spec())
    assert len(nodes) == 2
    assert len(fake.sent("PUT", "/virtualMachineScaleSets/")) == 3
    assert len(sleeps) == 2
    assert sum("throttled" in r.getMessage() for r in caplog.records) == 2

    for _ in range(3):
        fake.fail("GET", "/proximityPlacementGroups/", 429, "TooManyRequests")
    with pytest.raises(Throttled) as err:
        provider.ensure_placement_group(ppg_spec())
    assert err.value.code == "TooManyRequests"
    assert len(fake.sent("GET", "/proximityPlacementGroups/")) == 3  # attempts=3, azure-core did not retry
    assert not fake.sent("PUT", "/proximityPlacementGroups/")


def test_failed_gang_lro_is_insufficient_capacity_and_scaled_back(
    provider: AzureProvider, fake: AzureFake
) -> None:
    # a new gang: one of two VMs made, then AllocationFailed: the scale set is deleted
    fake.fail_lro("PUT", "/virtualMachineScaleSets/llm-pretrain-r1$", "AllocationFailed", vms=1)
    with pytest.raises(InsufficientCapacity) as err:
        provider.launch(gang_spec())
    assert err.value.code == "AllocationFailed"
    assert fake.sent("DELETE", "/virtualMachineScaleSets/llm-pretrain-r1$")
    assert f"{ARM}/virtualMachineScaleSets/llm-pretrain-r1".lower() not in fake.resources

    # a gang growing from 2 to 4 gets 1 more (and a Failed one), then fails: both new VMs are deleted,
    # the 2 it had stay
    provider.launch(gang_spec())
    fake.fail_lro("PUT", "/virtualMachineScaleSets/llm-pretrain-r1$", "ZonalAllocationFailed", vms=1)
    with pytest.raises(InsufficientCapacity) as grown:
        provider.launch(gang_spec(count=2, target=4))
    assert "got 1 of the 2 VMs it asked for, then ZonalAllocationFailed" in str(grown.value)
    assert fake.sent("POST", "/llm-pretrain-r1/delete$")[-1].body == {"instanceIds": ["2", "3"]}
    assert vm_ids(fake, "llm-pretrain-r1") == ["0", "1"]

    # a pool is not all or nothing: what it got stays
    fake.fail_lro("PUT", "/virtualMachineScaleSets/azure-eastus-nd-spot$", "AllocationFailed", vms=1)
    with pytest.raises(InsufficientCapacity):
        provider.launch(pool_spec())
    assert vm_ids(fake, "azure-eastus-nd-spot") == ["0"]


def test_failed_reservation_lro_is_mapped_and_its_new_group_removed(
    provider: AzureProvider, fake: AzureFake
) -> None:
    tags = managed_tags(PLAN, run="r")
    fake.fail_lro("PUT", "/capacityReservations/cr-r$", "AllocationFailed")
    with pytest.raises(InsufficientCapacity) as err:
        provider.ensure_reservation(ReservationSpec("cr-r", ND_OFFERING, 4, None, tags, "t"))
    assert err.value.code == "AllocationFailed" and err.value.operation == "create capacity reservation cr-r"
    assert fake.sent("DELETE", "/capacityReservationGroups/cr-r$")
    assert not [k for k in fake.resources if "cr-r" in k]
    # a failed operation with a code of no specific meaning: OperationFailed
    fake.fail_lro("PUT", "/capacityReservations/cr-r$", "InternalExecutionError")
    with pytest.raises(OperationFailed) as failed:
        provider.ensure_reservation(ReservationSpec("cr-r", ND_OFFERING, 4, None, tags, "t"))
    assert failed.value.code == "InternalExecutionError"


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        (
            409,
            "OperationNotAllowed",
            "Operation results in exceeding approved standardNDISRH100v5Family Cores quota",
        ),
        (400, "QuotaExceeded", "Operation could not be completed as it results in exceeding quota"),
    ],
)
def test_quota_is_quota_exceeded(
    provider: AzureProvider, fake: AzureFake, status: int, code: str, message: str
) -> None:
    fake.fail("PUT", "/virtualMachineScaleSets/", status, code, message)
    with pytest.raises(QuotaExceeded) as err:
        provider.launch(pool_spec())
    assert err.value.code == code and "quota" in str(err.value)


def test_placement_group_409_ours_is_adopted_theirs_is_conflict(
    provider: AzureProvider, fake: AzureFake
) -> None:
    path = f"{ARM}/proximityPlacementGroups/pg-llm-pretrain-r1"
    # another apply makes it between our read and our PUT: the PUT answers 409, the re-read finds ours
    fake.fail("GET", "/proximityPlacementGroups/pg-llm-pretrain-r1$", 404, "ResourceNotFound")
    fake.fail("PUT", "/proximityPlacementGroups/pg-llm-pretrain-r1$", 409, "Conflict")
    fake.put_resource(path, {"location": "eastus", "tags": dict(ppg_spec().tags)})
    group = provider.ensure_placement_group(ppg_spec())
    assert group.name == "pg-llm-pretrain-r1" and group.run == "llm-pretrain-r1"
    assert len(fake.sent("PUT", "/proximityPlacementGroups/")) == 1
    assert len(fake.sent("GET", "/proximityPlacementGroups/")) == 2

    # someone else's group by that name: Conflict, and it is not overwritten
    fake.put_resource(
        f"{ARM}/proximityPlacementGroups/pg-other", {"location": "eastus", "tags": {"team": "x"}}
    )
    other = PlacementGroupSpec(
        "pg-other", "eastus", ND_OFFERING, 2, "infiniband", managed_tags(PLAN, run="r"), "t"
    )
    with pytest.raises(Conflict):
        provider.ensure_placement_group(other)
    fake.fail("GET", "/proximityPlacementGroups/pg-third$", 404, "ResourceNotFound")
    fake.fail("PUT", "/proximityPlacementGroups/pg-third$", 409, "Conflict")
    fake.put_resource(
        f"{ARM}/proximityPlacementGroups/pg-third", {"location": "eastus", "tags": {"team": "x"}}
    )
    third = PlacementGroupSpec(
        "pg-third", "eastus", ND_OFFERING, 2, "infiniband", managed_tags(PLAN, run="r"), "t"
    )
    with pytest.raises(Conflict):
        provider.ensure_placement_group(third)
    assert fake.resources[f"{ARM}/proximityPlacementGroups/pg-other".lower()]["tags"] == {"team": "x"}
    assert len(fake.sent("PUT", "/proximityPlacementGroups/")) == 2  # only pg-third's refused PUT added


def test_delete_of_what_is_gone_is_done(provider: AzureProvider, fake: AzureFake) -> None:
    fake.fail("DELETE", "/proximityPlacementGroups/pg-gone$", 404, "ResourceNotFound")
    provider.delete_placement_group(PlacementGroup("pg-gone", "eastus"))
    assert fake.sent("DELETE", "/proximityPlacementGroups/pg-gone$")

    tags = managed_tags(PLAN, run="r")
    reservation = provider.ensure_reservation(ReservationSpec("cr-r", ND_OFFERING, 1, None, tags, "t"))
    provider.release_reservation(reservation)
    assert [r.path for r in fake.sent("DELETE")][-2:] == [
        f"{ARM}/capacityReservationGroups/cr-r/capacityReservations/cr-r",
        f"{ARM}/capacityReservationGroups/cr-r",
    ]
    assert not [k for k in fake.resources if "capacityreservationgroups/cr-r" in k]
    provider.release_reservation(reservation)  # again: the group is gone (404 on its listing): done

    nodes = provider.launch(pool_spec(count=1, target=1))
    fake.fail("POST", "/delete$", 404, "ResourceNotFound")
    provider.terminate(nodes)  # the scale set vanished between the listing and the delete


# ----------------------------------------------------------------------------------------------------------
# credentials, settings, the missing SDK


def test_bearer_token_from_the_environment_and_never_logged(
    provider: AzureProvider, fake: AzureFake, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, azure-core's HTTP logging included
    provider.ensure_placement_group(ppg_spec())
    provider.launch(gang_spec())
    fake.fail(
        "PUT", "/virtualMachineScaleSets/", 401, "InvalidAuthenticationToken", "The access token is invalid"
    )
    with pytest.raises(Auth) as err:
        provider.launch(pool_spec())
    arm = [r for r in fake.requests if not r.path.startswith("/api/")]
    assert arm and {r.authorization for r in arm} == {f"Bearer {TOKEN}"}  # polls included
    assert fake.sent("GET", "/operations/")
    assert TOKEN not in str(err.value) and TOKEN not in repr(err.value)
    assert TOKEN not in caplog.text
    assert any(r.name == "gpuplan.providers.azure" and r.levelno == logging.INFO for r in caplog.records)
    assert TOKEN not in repr(provider._credential)


def test_settings_and_launch_preconditions(fake: AzureFake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_ACCESS_TOKEN", TOKEN)
    with pytest.raises(ValueError, match="extra"):
        settings_for(fake, region="eastus")
    defaults = AzureSettings(subscription_id=SUB, resource_group=RG)
    assert (defaults.credential, defaults.admin_username, defaults.base_url) == ("default", "gpuplan", None)
    assert defaults.image.offer == "ubuntu-hpc" and defaults.retry == RetryPolicy()

    for missing in ("ssh_public_key", "subnet_id"):
        provider = open_provider(settings_for(fake, **{missing: None}), sleep=lambda s: None)
        with pytest.raises(InvalidRequest, match=f"azure.{missing}"):
            provider.launch(pool_spec())
    provider = open_provider(settings_for(fake), sleep=lambda s: None)
    with pytest.raises(InvalidRequest, match="InfiniBand"):
        provider.launch(
            LaunchSpec(
                "azure:eastus:Standard_NC24ads_A100_v4",
                CapacityType.SPOT,
                2,
                "p",
                {},
                "t",
                run="r",
                fabric="infiniband",
                target=2,
            )
        )
    assert fake.requests == []  # refused before anything was sent

    with pytest.raises(InvalidRequest, match="https"):
        open_provider(settings_for(fake, base_url="http://management.example.com"))
    monkeypatch.delenv("AZURE_ACCESS_TOKEN")
    with pytest.raises(Auth, match="AZURE_ACCESS_TOKEN"):
        open_provider(settings_for(fake))


def test_import_without_the_sdk_and_missing_sdk_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['azure'] = None\n"  # hides every azure.* package
        "import providers.azure as az\n"
        "from providers.base import MissingSDK\n"
        "s = az.AzureSettings(subscription_id='s', resource_group='g')\n"
        "try:\n"
        "    az.open_provider(s)\n"
        "except MissingSDK as e:\n"
        "    print('MISSING', e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "MISSING" in out.stdout and "gpuplan[azure]" in out.stdout and "azure-mgmt-compute" in out.stdout
