"""The Azure adapter against an ARM fake that behaves as ARM does (issue 35 points 6-8): operations that take
several polls (both polling styles) or outlive the adapter's budget, scale-outs that fail part way, quota
errors and the compute usages behind them, concurrent writers (409, 412 on a stale etag, a preempted
operation), request ids ARM never deduplicates, and spot evictions from the activity log and instance views.
Every path goes through the real azure-mgmt-compute client against azure_fake.py on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure_fake import AzureFake, Fault
from test_provider_azure import (
    ARM,
    ND,
    ND_OFFERING,
    PLAN,
    RG,
    SUB,
    TOKEN,
    gang_spec,
    pool_spec,
    ppg_spec,
    settings_for,
    vm_ids,
)

from models.naming import TAG_PLAN, managed_tags
from providers.azure import PREEMPT_NOTICE, AzureProvider, open_provider
from providers.base import (
    Auth,
    CapacityType,
    Conflict,
    InsufficientCapacity,
    LaunchSpec,
    QuotaExceeded,
    ReservationSpec,
    Timeout,
)

NC = "Standard_NC24ads_A100_v4"
NC_OFFERING = f"azure:eastus:{NC}"
H200_OFFERING = "azure:eastus:Standard_ND96isr_H200_v5"  # not in the fake's SKU list: the fallback table


@pytest.fixture
def fake() -> Iterator[AzureFake]:
    server = AzureFake()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def sleeps() -> list[float]:
    return []


def open_for(fake: AzureFake, sleeps: list[float], **over: object) -> AzureProvider:
    return open_provider(settings_for(fake, **over), sleep=sleeps.append)


@pytest.fixture
def provider(fake: AzureFake, sleeps: list[float], monkeypatch: pytest.MonkeyPatch) -> AzureProvider:
    monkeypatch.setenv("AZURE_ACCESS_TOKEN", TOKEN)
    return open_for(fake, sleeps)


def sku_row(name: str, family: str, vcpus: int, gpus: int) -> dict[str, object]:
    """A resource SKU as ARM lists it: its family is the name of its quota in the usages."""
    return {
        "resourceType": "virtualMachines",
        "name": name,
        "tier": "Standard",
        "family": family,
        "locations": ["eastus"],
        "capabilities": [{"name": "vCPUs", "value": str(vcpus)}, {"name": "GPUs", "value": str(gpus)}],
        "restrictions": [],
    }


def seed_quotas(fake: AzureFake, family_limit: int = 192, spot_limit: int = 96) -> None:
    fake.skus = [
        sku_row(ND, "standardNDSH100v5Family", 96, 8),
        sku_row(NC, "StandardNCADSA100v4Family", 24, 1),
    ]
    fake.set_quota("eastus", "cores", 1000, "Total Regional vCPUs", base=100)
    fake.set_quota("eastus", "standardNDSH100v5Family", family_limit, "Standard NDSH100v5 Family vCPUs")
    fake.set_quota("eastus", "lowPriorityCores", spot_limit, "Total Regional Low-priority vCPUs")
    fake.set_quota("eastus", "virtualMachines", 25000, "Virtual Machines")


SPOT_SET = f"{ARM}/virtualMachineScaleSets/azure-eastus-nd-spot"


# ----------------------------------------------------------------------------------------------------------
# (1) operations that take several polls, or longer than the budget


def test_operations_taking_several_polls_are_followed_in_both_styles(
    provider: AzureProvider, fake: AzureFake
) -> None:
    fake.lro_polls = 3
    seen: list[str] = []
    gang = f"{ARM}/virtualMachineScaleSets/llm-pretrain-r1"
    fake.before(
        "GET",
        "/operations/",
        lambda f: seen.append(f.resources[gang.lower()]["properties"]["provisioningState"]),
    )
    provider.ensure_placement_group(ppg_spec())
    nodes = provider.launch(gang_spec())
    assert len(nodes) == 2 and {n.state for n in nodes} == {"running"}
    assert seen == ["Creating"]  # mid-operation the scale set reads Creating, as in ARM
    # the PUT's Azure-AsyncOperation was read 3 times InProgress, then Succeeded
    assert len(fake.sent("GET", "/locations/eastus/operations/")) == 4
    # deleteInstances is the Location style: 202 three times, then 200
    provider.terminate(nodes[:1])
    assert len(fake.sent("GET", "/operationResults/")) == 4
    assert vm_ids(fake, "llm-pretrain-r1") == ["1"]
    # a capacity reservation too
    tags = managed_tags(PLAN, run="r")
    provider.ensure_reservation(ReservationSpec("cr-r", ND_OFFERING, 1, None, tags, "t"))
    assert len(fake.sent("GET", "/locations/eastus/operations/")) == 8


def test_an_operation_outliving_the_budget_is_timeout_and_nothing_is_undone(
    fake: AzureFake, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_ACCESS_TOKEN", TOKEN)
    provider = open_for(fake, sleeps, operation_timeout_seconds=0.3)
    fake.lro_polls, fake.retry_after = 1000, "1"  # ARM says: ask again in a second, many times
    provider.ensure_placement_group(ppg_spec())
    started = time.monotonic()
    with pytest.raises(Timeout) as err:
        provider.launch(gang_spec())
    assert time.monotonic() - started < 3
    assert "still running after 0.3s" in str(err.value) and err.value.operation.startswith("create or update")
    # the outcome is unknown: no scale-back was attempted (it would fight the running operation)
    assert not fake.sent("DELETE") and not fake.sent("POST")


# ----------------------------------------------------------------------------------------------------------
# (2) scale-outs that fail part way


def test_a_new_gang_that_fails_part_way_is_deleted_whole(provider: AzureProvider, fake: AzureFake) -> None:
    provider.ensure_placement_group(ppg_spec())
    fake.fail_lro(
        "PUT", "/virtualMachineScaleSets/llm-pretrain-r1$", "OverconstrainedAllocationRequest", vms=1
    )
    with pytest.raises(InsufficientCapacity) as err:
        provider.launch(gang_spec(count=4, target=4))
    assert err.value.code == "OverconstrainedAllocationRequest" and err.value.launched == ()
    assert "gang llm-pretrain-r1 got 1 of the 4 VMs it asked for" in str(err.value)
    assert fake.sent("DELETE", "/virtualMachineScaleSets/llm-pretrain-r1$")
    assert f"{ARM}/virtualMachineScaleSets/llm-pretrain-r1".lower() not in fake.resources
    assert provider.inventory(PLAN).nodes == ()  # no partial gang left


def test_a_pool_that_fails_part_way_keeps_what_runs_and_says_so(
    provider: AzureProvider, fake: AzureFake
) -> None:
    fake.fail_lro("PUT", "/virtualMachineScaleSets/azure-eastus-nd-spot$", "AllocationFailed", vms=1)
    with pytest.raises(InsufficientCapacity) as err:
        provider.launch(pool_spec(count=3, target=3))
    assert "pool azure-eastus-nd-spot got 1 of the 3 VMs it asked for, then AllocationFailed" in str(
        err.value
    )
    assert [n.id for n in err.value.launched] == [f"{SPOT_SET}/virtualMachines/0"]
    # the two VMs Azure could not allocate (Failed, still counted in the scale set) were deleted
    assert fake.sent("POST", "/azure-eastus-nd-spot/delete$")[-1].body == {"instanceIds": ["1", "2"]}
    assert vm_ids(fake, "azure-eastus-nd-spot") == ["0"]
    assert fake.resources[SPOT_SET.lower()]["sku"]["capacity"] == 1
    assert [n.state for n in provider.inventory(PLAN).nodes] == ["running"]


# ----------------------------------------------------------------------------------------------------------
# (3) quotas: ARM's errors and the usages behind them


def test_quota_errors_from_arm_are_quota_exceeded_and_create_nothing(
    provider: AzureProvider, fake: AzureFake
) -> None:
    seed_quotas(fake)
    on_demand = pool_spec("azure-eastus-nd-od", capacity=CapacityType.ON_DEMAND, count=3, target=3)
    with pytest.raises(QuotaExceeded) as err:
        provider.launch(on_demand)  # 288 vCPUs > 192 of the family
    assert err.value.code == "OperationNotAllowed"
    assert "exceeding approved standardNDSH100v5Family Cores quota" in str(err.value)
    assert "Current Limit: 192, Current Usage: 0, Additional Required: 288" in str(err.value)
    assert f"{ARM}/virtualMachineScaleSets/azure-eastus-nd-od".lower() not in fake.resources
    with pytest.raises(QuotaExceeded, match="Low Priority Cores quota"):
        provider.launch(pool_spec(count=2, target=2))  # 192 spot vCPUs > 96


def test_quotas_come_from_compute_usages_in_vcpus(provider: AzureProvider, fake: AzureFake) -> None:
    seed_quotas(fake)
    provider.launch(pool_spec("azure-eastus-nd-od", capacity=CapacityType.ON_DEMAND, count=1, target=1))
    od, spot = (ND_OFFERING, CapacityType.ON_DEMAND), (ND_OFFERING, CapacityType.SPOT)
    nc, h200 = (NC_OFFERING, CapacityType.ON_DEMAND), (H200_OFFERING, CapacityType.ON_DEMAND)
    got = provider.quotas([od, spot, nc, h200, ("aws:us-east-1:p5.48xlarge", CapacityType.SPOT)])
    by_name = {q.name: q for q in got}
    assert set(by_name) == {
        "Standard NDSH100v5 Family vCPUs (standardNDSH100v5Family)",
        "Total Regional vCPUs (cores)",
        "Total Regional Low-priority vCPUs (lowPriorityCores)",
    }  # StandardNCADSA100v4Family and standardNDISRH200V5Family are not reported: left out
    family = by_name["Standard NDSH100v5 Family vCPUs (standardNDSH100v5Family)"]
    assert (family.region, family.limit, family.used, family.free, family.unit) == (
        "eastus",
        192,
        96,
        96,
        "vCPUs",
    )
    assert family.per_node == {od: 96}  # spot VMs do not count against the family quota
    cores = by_name["Total Regional vCPUs (cores)"]
    assert (cores.limit, cores.used) == (1000, 196)  # 100 used outside gpuplan + the one VM
    assert cores.per_node == {od: 96, nc: 24, h200: 96}  # H200: vCPUs from its size name
    low = by_name["Total Regional Low-priority vCPUs (lowPriorityCores)"]
    assert (low.limit, low.used, low.per_node) == (96, 0, {spot: 96})
    (usages,) = fake.sent("GET", "/usages$")
    assert usages.path == f"/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/usages"
    assert provider.quotas([("aws:us-east-1:p5.48xlarge", CapacityType.SPOT)]) == []
    # the family of a size the SKU list lacks comes from the documented names, when its usage is reported
    fake.set_quota("eastus", "standardNDISRH200V5Family", 0, "Standard NDISRH200V5 Family vCPUs")
    h200_family = [q for q in provider.quotas([h200]) if "H200" in q.name]
    assert [(q.limit, q.free, q.per_node) for q in h200_family] == [(0, 0, {h200: 96})]
    fake.fail("GET", "/usages$", 403, "AuthorizationFailed", "no Microsoft.Compute/locations/usages/read")
    with pytest.raises(Auth):
        provider.quotas([od])


# ----------------------------------------------------------------------------------------------------------
# (4) concurrent writers


def test_a_concurrent_request_is_read_again_and_resent(
    provider: AzureProvider, fake: AzureFake, sleeps: list[float]
) -> None:
    fake.fail("PUT", "/virtualMachineScaleSets/", 409, "Conflict", "conflict with a concurrent request")
    fake.fail_lro("PUT", "/virtualMachineScaleSets/", "OperationPreempted", vms=2)  # made, then preempted
    nodes = provider.launch(pool_spec())
    assert len(nodes) == 2 and vm_ids(fake, "azure-eastus-nd-spot") == ["0", "1"]
    puts = fake.sent("PUT", "/virtualMachineScaleSets/")
    assert len(puts) == 3 and len(sleeps) == 2
    # the first PUT asked for a new scale set (If-None-Match: *); after the preempted one it existed: If-Match
    assert puts[0].if_none_match == "*" and puts[0].if_match is None
    assert puts[2].if_match is not None and puts[2].if_none_match is None


def test_a_write_between_our_read_and_our_put_is_never_overwritten(
    provider: AzureProvider, fake: AzureFake
) -> None:
    provider.launch(pool_spec())

    def another_writer(f: AzureFake) -> None:  # e.g. a person adds a tag in the portal
        f.resources[SPOT_SET.lower()]["tags"]["owner"] = "ml-team"
        f.resources[SPOT_SET.lower()]["etag"] = '"someone-else"'

    fake.before("PUT", "/virtualMachineScaleSets/azure-eastus-nd-spot$", another_writer)
    nodes = provider.launch(pool_spec(count=2, target=4))
    assert [n.id.rsplit("/", 1)[1] for n in nodes] == ["2", "3"]
    puts = fake.sent("PUT", "/virtualMachineScaleSets/")
    assert puts[1].if_match != puts[2].if_match == '"someone-else"'  # 412, read again, sent with the new etag
    assert fake.resources[SPOT_SET.lower()]["sku"]["capacity"] == 4


def test_a_scale_set_that_keeps_changing_is_a_conflict(
    fake: AzureFake, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_ACCESS_TOKEN", TOKEN)
    provider = open_for(fake, sleeps, conflict_retries=2)
    for _ in range(3):
        fake.faults.append(
            Fault("PUT", "/virtualMachineScaleSets/", 409, {"error": {"code": "Conflict", "message": "busy"}})
        )
    with pytest.raises(Conflict) as err:
        provider.launch(pool_spec())
    assert "changed by another writer on each of 3 tries" in str(err.value)
    assert len(fake.sent("PUT", "/virtualMachineScaleSets/")) == 3


# ----------------------------------------------------------------------------------------------------------
# (5) request ids: ARM keeps none, a PUT is idempotent by name only


def test_a_create_after_the_first_was_deleted_creates_again(provider: AzureProvider, fake: AzureFake) -> None:
    spec = gang_spec()
    provider.ensure_placement_group(ppg_spec())
    first = provider.launch(spec)
    fake.resources.pop(f"{ARM}/virtualMachineScaleSets/llm-pretrain-r1".lower())  # deleted by someone
    fake.vms.pop(f"{ARM}/virtualMachineScaleSets/llm-pretrain-r1".lower())
    fake.next_instance.pop(f"{ARM}/virtualMachineScaleSets/llm-pretrain-r1".lower())
    again = provider.launch(spec)  # the same spec and token
    assert len(first) == len(again) == 2
    assert vm_ids(fake, "llm-pretrain-r1") == ["0", "1"]
    puts = fake.sent("PUT", "/virtualMachineScaleSets/")
    assert [p.if_none_match for p in puts] == ["*", "*"]  # both creates of a missing scale set
    # azure-core sends an x-ms-client-request-id (kept across one operation's polls, for tracing); the two
    # creates carried different ones, and nothing depends on them: ARM dedupes by resource name only
    assert all(p.client_request_id for p in puts) and puts[0].client_request_id != puts[1].client_request_id


# ----------------------------------------------------------------------------------------------------------
# evictions


def test_an_evicted_spot_vm_is_an_interruption_with_its_deadline(
    provider: AzureProvider, fake: AzureFake
) -> None:
    provider.launch(pool_spec(count=3, target=3))
    provider.launch(pool_spec("azure-eastus-nd-od", capacity=CapacityType.ON_DEMAND, count=1, target=1))
    theirs = managed_tags("someone-else", pool="other-pool")
    provider.launch(LaunchSpec(ND_OFFERING, CapacityType.SPOT, 1, "other-pool", theirs, "x", target=1))
    assert provider.interruptions(PLAN) == []
    when = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
    fake.evict(SPOT_SET, "1", "Delete", at=when.strftime("%Y-%m-%dT%H:%M:%SZ"))
    fake.evict(f"{ARM}/virtualMachineScaleSets/other-pool", "0", "Delete")  # another plan's
    long_ago = (when - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fake.evict(SPOT_SET, "2", "Deallocate", at=long_ago)  # its events are older than the lookback
    notices = provider.interruptions(PLAN)
    evicted, deallocated = notices
    assert evicted.node_id == f"{SPOT_SET}/virtualMachines/1"
    assert (evicted.kind, evicted.at, evicted.deadline) == ("interruption", when, when + PREEMPT_NOTICE)
    assert (evicted.pool, evicted.offering, evicted.run) == ("azure-eastus-nd-spot", ND_OFFERING, None)
    # the deallocated VM is still seen, from its instance view: already being taken
    assert deallocated.node_id == f"{SPOT_SET}/virtualMachines/2"
    assert deallocated.deadline is not None and deallocated.deadline <= datetime.now(UTC)
    # Delete policy: the VM left the scale set and its capacity, as Azure does
    assert vm_ids(fake, "azure-eastus-nd-spot") == ["0", "2"]
    assert fake.resources[SPOT_SET.lower()]["sku"]["capacity"] == 2
    log = fake.sent("GET", "/Microsoft.Insights/eventtypes/management/values$")[-1]
    assert log.query["api-version"] == ["2015-04-01"]
    assert f"resourceGroupName eq '{RG}'" in log.query["$filter"][0]
    assert log.authorization == f"Bearer {TOKEN}"
    # read again: reported again (callers drop repeats)
    assert [n.node_id for n in provider.interruptions(PLAN)] == [n.node_id for n in notices]


def test_no_spot_scale_set_reads_no_activity_log(provider: AzureProvider, fake: AzureFake) -> None:
    provider.launch(pool_spec("azure-eastus-nd-od", capacity=CapacityType.ON_DEMAND, count=1, target=1))
    assert provider.interruptions(PLAN) == []
    assert not fake.sent("GET", "/Microsoft.Insights/")
    fake.put_resource(f"{ARM}/proximityPlacementGroups/x", {"location": "eastus", "tags": {TAG_PLAN: PLAN}})
