"""The GCP provider against a fake that behaves as Compute Engine does where it hurts (issue 35, points 6-8).

Each test drives the real google-cloud-compute REST clients against ``gcp_fake`` on 127.0.0.1: operations
that take several polls (and a ``wait`` that holds two minutes), a bulkInsert that fails part way and rolls
back, quotas enforced and reported by ``regions.get``, resources in transition, requestIds that expire, and
spot preemptions in their real shape. The fake's clock is shared with the provider, so minutes pass in
microseconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from gcp_fake import FakeClock, FakeCompute, FakeServer, error
from test_provider_gcp import A3, PLAN, PROJECT, REGION, ZONE, gang_specs, pool_spec, settings

from models.actions import Action, ActionKind
from models.naming import managed_tags, pool_name
from planner.operations.quotas import check_quotas
from providers.base import (
    Auth,
    CapacityType,
    Conflict,
    InsufficientCapacity,
    InvalidRequest,
    Quota,
    QuotaExceeded,
    Timeout,
)
from providers.gcp import GcpProvider, NicSettings, open_provider

ULTRA = f"gcp:{REGION}:a3-ultragpu-8g"
A4 = f"gcp:{REGION}:a4-highgpu-8g"
G2 = f"gcp:{REGION}:g2-standard-48"
A2 = f"gcp:{REGION}:a2-ultragpu-8g"
INSTANCES = f"zones/{ZONE}/instances"
RDMA = [NicSettings(network=f"global/networks/rdma-{i}", subnetwork=f"r{i}") for i in range(8)]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake(clock: FakeClock) -> Iterator[FakeCompute]:
    compute = FakeCompute(project=PROJECT, clock=clock)
    with FakeServer(compute):
        yield compute


def provider(
    fake: FakeCompute, clock: FakeClock, sleeps: list[float] | None = None, **overrides: Any
) -> GcpProvider:
    """A provider on the fake's clock: its sleeps move the clock (and are recorded)."""

    def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)
        clock.sleep(seconds)

    return open_provider(settings(fake, **overrides), sleep=sleep, clock=clock)


@pytest.fixture
def gcp(fake: FakeCompute, clock: FakeClock) -> GcpProvider:
    return provider(fake, clock)


def machine(fake: FakeCompute, name: str, cpus: int, accelerator: str | None = None, count: int = 8) -> None:
    body: dict[str, Any] = {"name": name, "guestCpus": cpus, "zone": ZONE}
    if accelerator:
        body["accelerators"] = [{"guestAcceleratorType": accelerator, "guestAcceleratorCount": count}]
    fake.put(f"zones/{ZONE}/machineTypes", body)


def disk_type(body: dict[str, Any]) -> str:
    [disk] = body["disks"]
    return str(disk["initializeParams"]["diskType"])


# --------------------------------------------------------------------------------------------------------
# A. A3 Ultra and A4 boot from Hyperdisk


def test_a3_ultra_and_a4_boot_from_hyperdisk_others_from_pd_balanced(
    fake: FakeCompute, clock: FakeClock
) -> None:
    gcp = provider(fake, clock, rdma_networks=RDMA)
    for offering in (ULTRA, A4):
        group, _, launch = gang_specs(nodes=2, offering=offering, fabric="infiniband")
        gcp.ensure_placement_group(replace(group, name=f"pg-{offering[-14:-3]}"))
        gcp.launch(replace(launch, placement_group=f"pg-{offering[-14:-3]}", reservation=None))
    bulks = fake.sent("POST", "bulkInsert$")
    assert [b.body["instanceProperties"]["machineType"] for b in bulks] == ["a3-ultragpu-8g", "a4-highgpu-8g"]
    assert [disk_type(b.body["instanceProperties"]) for b in bulks] == ["hyperdisk-balanced"] * 2
    gcp.launch(pool_spec(CapacityType.SPOT, count=1, offering=ULTRA))
    gcp.launch(pool_spec(CapacityType.SPOT, count=1, offering=A3))
    inserts = fake.sent("POST", f"^{INSTANCES}$")
    assert [disk_type(i.body) for i in inserts] == [
        f"zones/{ZONE}/diskTypes/hyperdisk-balanced",
        f"zones/{ZONE}/diskTypes/pd-balanced",
    ]


def test_a_persistent_disk_on_a3_ultra_is_refused_before_anything_is_sent(
    fake: FakeCompute, clock: FakeClock
) -> None:
    gcp = provider(fake, clock, boot_disk_type="pd-balanced")
    with pytest.raises(InvalidRequest, match="a3-ultragpu-8g takes Hyperdisk only"):
        gcp.launch(pool_spec(count=1, offering=ULTRA))
    assert not fake.sent("POST", "instances")
    gcp.launch(pool_spec(count=1, offering=A3))  # a3-highgpu takes pd-balanced as configured
    [sent] = fake.sent("POST", f"^{INSTANCES}$")
    assert disk_type(sent.body).endswith("/pd-balanced")


# --------------------------------------------------------------------------------------------------------
# C1. Operations that take several polls


def test_operations_are_polled_until_done(fake: FakeCompute, clock: FakeClock) -> None:
    fake.op_polls = 3
    nodes = provider(fake, clock).launch(pool_spec(count=2))
    assert len(nodes) == 2
    waits = fake.sent("POST", f"^zones/{ZONE}/operations/operation-\\d+/wait$")
    assert len(waits) == 2 * 4  # three RUNNING answers, then DONE, for each insert
    assert clock.now == 2 * 3 * 120.0  # each RUNNING wait held its two minutes
    assert {i["status"] for i in fake.store[INSTANCES].values()} == {"RUNNING"}


def test_a_get_is_a_poll_too_and_shows_the_transitional_state(fake: FakeCompute, gcp: GcpProvider) -> None:
    """The fake's operations count GET reads as polls (as ExtendedOperation's polling would), and what an
    operation does shows as it runs: PROVISIONING until DONE."""
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    fake.fail("POST", f"^{INSTANCES}$", polls=1)
    kw: dict[str, Any] = {
        "transport": "rest",
        "credentials": AnonymousCredentials(),
        "client_options": ClientOptions(api_endpoint=fake.url),
    }
    instances = compute_v1.InstancesClient(**kw)
    ops = compute_v1.ZoneOperationsClient(**kw)
    op = instances.insert_unary(
        project=PROJECT,
        zone=ZONE,
        instance_resource=compute_v1.Instance(
            name="vm", machine_type=f"zones/{ZONE}/machineTypes/n2-standard-2"
        ),
    )
    assert instances.get(project=PROJECT, zone=ZONE, instance="vm").status == "PROVISIONING"
    running = ops.get(project=PROJECT, zone=ZONE, operation=op.name)
    assert running.status == compute_v1.Operation.Status.RUNNING
    done = ops.get(project=PROJECT, zone=ZONE, operation=op.name)
    assert done.status == compute_v1.Operation.Status.DONE
    assert instances.get(project=PROJECT, zone=ZONE, instance="vm").status == "RUNNING"


def test_an_operation_that_outlasts_the_budget_is_a_timeout(fake: FakeCompute, clock: FakeClock) -> None:
    fake.fail("POST", f"^{INSTANCES}$", polls=10**6)
    gcp = provider(fake, clock, operation_timeout_seconds=300)
    with pytest.raises(Timeout, match=r"still running after 300s \(3 polls\)") as caught:
        gcp.launch(pool_spec(count=1))
    assert caught.value.cloud == "gcp"
    assert len(fake.sent("POST", "/wait$")) == 3 and clock.now == 360.0


def test_a_wait_that_answers_running_at_once_is_not_hammered(fake: FakeCompute, clock: FakeClock) -> None:
    """A wait may answer early; the provider then pauses ``poll_seconds`` before the next one."""
    sleeps: list[float] = []
    gcp = provider(fake, clock, sleeps, poll_seconds=5.0)
    fake.fail("POST", f"^{INSTANCES}$", polls=2)
    fake.wait_seconds = 0.0  # these waits answer at once
    gcp.launch(pool_spec(count=1))
    assert sleeps == [5.0, 5.0]


# --------------------------------------------------------------------------------------------------------
# C2. Partial failures


def test_a_gang_whose_bulk_insert_fails_part_way_leaves_nothing(fake: FakeCompute, gcp: GcpProvider) -> None:
    """minCount = count: Compute Engine deletes what it made when it cannot make them all."""
    group, _, launch = gang_specs(nodes=3)
    gcp.ensure_placement_group(group)
    fake.fail("POST", "bulkInsert$", op_error="ZONE_RESOURCE_POOL_EXHAUSTED", created=2, polls=1)
    with pytest.raises(InsufficientCapacity, match="0 of 3 nodes of gang llm-pretrain-1") as caught:
        gcp.launch(launch)
    assert caught.value.launched == ()
    assert not fake.store.get(INSTANCES) and gcp.inventory(PLAN).nodes == ()


def test_a_gang_rollback_slower_than_the_report_is_finished_by_the_provider(
    fake: FakeCompute, gcp: GcpProvider
) -> None:
    group, _, launch = gang_specs(nodes=3)
    gcp.ensure_placement_group(group)
    fake.fail("POST", "bulkInsert$", op_error="ZONE_RESOURCE_POOL_EXHAUSTED", created=2, rollback_lag=True)
    with pytest.raises(InsufficientCapacity, match="the 2 it left deleted") as caught:
        gcp.launch(launch)
    assert caught.value.launched == ()
    deleted = [r.path.rsplit("/", 1)[-1] for r in fake.requests if r.method == "DELETE"]
    assert len(deleted) == 2 and set(deleted) <= {f"llm-pretrain-1-33333333-{i}" for i in range(3)}
    assert not fake.store.get(INSTANCES)  # no partial gang stays


def test_a_pool_batch_over_the_gpu_quota_keeps_the_nodes_it_made(fake: FakeCompute, gcp: GcpProvider) -> None:
    machine(fake, "a3-highgpu-8g", 208, "nvidia-h100-80gb")
    fake.quotas[REGION] = {"NVIDIA_H100_GPUS": 16.0, "CPUS": 10_000.0}
    fake.op_polls = 1
    with pytest.raises(
        QuotaExceeded, match=r"Quota 'NVIDIA_H100_GPUS' exceeded.*2 of 3 nodes of pool"
    ) as caught:
        gcp.launch(pool_spec(CapacityType.ON_DEMAND, count=3))
    assert caught.value.code == "QUOTA_EXCEEDED"
    assert len(caught.value.launched) == 2 and len(fake.store[INSTANCES]) == 2
    failed = [o for o in fake.operations.values() if "error" in o]
    [entry] = failed[0]["error"]["errors"]
    assert entry["errorDetails"][0]["quotaInfo"]["metricName"] == "compute.googleapis.com/nvidia_h100_gpus"


# --------------------------------------------------------------------------------------------------------
# C3. Quota errors against rate limits (both 403)


def test_403_quota_exceeded_is_final_and_403_rate_limit_exceeded_is_retried(
    fake: FakeCompute, gcp: GcpProvider
) -> None:
    """Both come as 403; only the reason tells an allocation quota (final) from a rate limit (wait)."""
    quota = error(403, "Quota 'CPUS' exceeded.  Limit: 24.0 in region us-central1.", "quotaExceeded")
    fake.fail("POST", f"^{INSTANCES}$", 403, quota)
    with pytest.raises(QuotaExceeded, match="Quota 'CPUS' exceeded") as caught:
        gcp.launch(pool_spec(count=1))
    assert caught.value.code == "quotaExceeded" and len(fake.sent("POST", f"^{INSTANCES}$")) == 1
    rate = error(403, "Rate Limit Exceeded", "rateLimitExceeded")
    fake.fail("POST", f"^{INSTANCES}$", 403, rate)
    fake.fail("POST", f"^{INSTANCES}$", 403, rate)
    assert len(gcp.launch(pool_spec(count=1))) == 1
    assert len(fake.sent("POST", f"^{INSTANCES}$")) == 1 + 3


# --------------------------------------------------------------------------------------------------------
# C4. Conflicting concurrent updates


def test_a_policy_still_being_created_is_waited_for(fake: FakeCompute, clock: FakeClock) -> None:
    sleeps: list[float] = []
    gcp = provider(fake, clock, sleeps)
    group, _, launch = gang_specs(nodes=2)
    gcp.ensure_placement_group(group)
    not_ready = error(
        400, f"The resource 'regions/{REGION}/resourcePolicies/{group.name}' is not ready", "resourceNotReady"
    )
    fake.fail("POST", "bulkInsert$", 400, not_ready)
    fake.fail("POST", "bulkInsert$", 400, not_ready)
    nodes = gcp.launch(replace(launch, reservation=None))
    assert len(nodes) == 2 and len(fake.sent("POST", "bulkInsert$")) == 3 and len(sleeps) == 2


def test_a_policy_that_stays_in_transition_is_a_conflict_not_an_adoption(
    fake: FakeCompute, gcp: GcpProvider
) -> None:
    group, _, launch = gang_specs(nodes=2)
    fake.put(
        f"regions/{REGION}/resourcePolicies",
        {"name": group.name, "status": "CREATING", "groupPlacementPolicy": {"vmCount": 2}},
    )
    with pytest.raises(Conflict, match="is not ready") as caught:
        gcp.launch(replace(launch, reservation=None))
    assert caught.value.code == "resourceNotReady"
    assert len(fake.sent("POST", "bulkInsert$")) == 3  # the retry policy's attempts
    assert not fake.sent("GET", f"^{INSTANCES}/")  # nothing to adopt: it never clashed on a name
    assert not fake.store.get(INSTANCES)


def test_412_condition_not_met_is_a_conflict_and_not_retried(fake: FakeCompute, gcp: GcpProvider) -> None:
    fake.fail("POST", f"^{INSTANCES}$", 412, error(412, "Labels fingerprint invalid", "conditionNotMet"))
    with pytest.raises(Conflict) as caught:
        gcp.launch(pool_spec(count=1))
    assert caught.value.code == "conditionNotMet" and len(fake.sent("POST", f"^{INSTANCES}$")) == 1


def test_a_delete_of_a_policy_still_in_use_is_a_conflict(fake: FakeCompute, gcp: GcpProvider) -> None:
    group, _, launch = gang_specs(nodes=2)
    pg = gcp.ensure_placement_group(group)
    gcp.launch(replace(launch, reservation=None))
    with pytest.raises(Conflict, match="already being used") as caught:
        gcp.delete_placement_group(pg)
    assert caught.value.code == "resourceInUseByAnotherResource"


def test_a_relaunch_after_the_request_id_expired_adopts_the_instance_still_in_flight(
    fake: FakeCompute, clock: FakeClock
) -> None:
    """The first insert is still RUNNING when its caller gives up (Timeout); an hour later its requestId
    is forgotten, the same spec meets the name (409 alreadyExists) and adopts the PROVISIONING instance."""
    fake.fail("POST", f"^{INSTANCES}$", polls=10**6)
    gcp = provider(fake, clock, operation_timeout_seconds=240)
    spec = pool_spec(count=1)
    with pytest.raises(Timeout):
        gcp.launch(spec)
    clock.sleep(3600)
    [node] = gcp.launch(spec)
    assert node.state == "pending" and node.pool == spec.pool
    sent = fake.sent("POST", f"^{INSTANCES}$")
    assert len(sent) == 2 and sent[0].query["requestId"] == sent[1].query["requestId"]
    assert len(fake.store[INSTANCES]) == 1


# --------------------------------------------------------------------------------------------------------
# C5. requestIds that expire


def test_a_request_id_replays_within_the_hour_and_runs_again_after_it(
    fake: FakeCompute, clock: FakeClock
) -> None:
    gcp = provider(fake, clock)
    spec = pool_spec(count=1)
    [node] = gcp.launch(spec)
    gcp.terminate([node])
    clock.sleep(1800)
    gcp.launch(spec)  # the first operation replayed: nothing made
    assert not fake.store[INSTANCES]
    clock.sleep(1801)
    [again] = gcp.launch(spec)  # forgotten: Compute Engine runs it again
    assert list(fake.store[INSTANCES]) == [again.id] == [node.id]


def test_a_placement_policy_request_repeated_after_the_hour_adopts_ours(
    fake: FakeCompute, clock: FakeClock
) -> None:
    gcp = provider(fake, clock)
    group, _, _ = gang_specs()
    gcp.ensure_placement_group(group)
    clock.sleep(3601)
    assert gcp.ensure_placement_group(group).name == group.name
    assert fake.sent("GET", f"^regions/{REGION}/resourcePolicies/{group.name}$")  # 409, then adopted
    assert len(fake.store[f"regions/{REGION}/resourcePolicies"]) == 1


# --------------------------------------------------------------------------------------------------------
# D. Preemptions


def test_a_preempted_spot_node_is_reported_with_its_30_second_deadline(
    fake: FakeCompute, gcp: GcpProvider
) -> None:
    spec = pool_spec(CapacityType.SPOT, count=2)
    nodes = gcp.launch(spec)
    op = fake.preempt(ZONE, nodes[0].id, at="2026-12-01T10:00:00.000-08:00")
    assert fake.store[INSTANCES][nodes[0].id]["status"] == "STOPPING"  # DELETE: soft-off running
    assert op["operationType"] == "compute.instances.preempted" and op["user"] == "system"
    [notice] = gcp.interruptions(PLAN)
    at = datetime(2026, 12, 1, 18, 0, tzinfo=UTC)
    assert (notice.node_id, notice.kind, notice.pool, notice.at, notice.deadline) == (
        nodes[0].id,
        "interruption",
        spec.pool,
        at,
        at + timedelta(seconds=30),
    )
    assert gcp.interruptions(PLAN) == [notice]  # listed again while the operation is: callers drop repeats


def test_a_spot_vm_stopped_by_preemption_is_reported_even_when_the_operation_is_gone(
    fake: FakeCompute, gcp: GcpProvider
) -> None:
    pool = pool_name(A3, CapacityType.SPOT)
    fake.put(
        INSTANCES,
        {
            "name": "tf-spot-0",
            "labels": managed_tags(PLAN, pool=pool),
            "machineType": f"zones/{ZONE}/machineTypes/a3-highgpu-8g",
            "scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"},
        },
    )
    fake.preempt(ZONE, "tf-spot-0", at="2026-12-01T11:00:00.000-08:00")
    stored = fake.store[INSTANCES]["tf-spot-0"]
    assert stored["status"] == "TERMINATED" and stored["lastStopTimestamp"] == "2026-12-01T11:00:00.000-08:00"
    [from_op] = gcp.interruptions(PLAN)
    assert from_op.deadline == datetime(2026, 12, 1, 19, 0, 30, tzinfo=UTC)
    fake.operations.clear()  # operations age out of the list
    [from_state] = gcp.interruptions(PLAN)
    assert from_state.node_id == "tf-spot-0" and from_state.deadline == datetime(
        2026, 12, 1, 19, 0, tzinfo=UTC
    )


def test_preemptions_of_nodes_gone_or_of_an_older_instance_of_the_name_are_not_reported(
    fake: FakeCompute, gcp: GcpProvider
) -> None:
    nodes = gcp.launch(pool_spec(CapacityType.SPOT, count=2))
    fake.preempt(ZONE, nodes[0].id, over=True)  # DELETE and its 30 s over: gone
    assert nodes[0].id not in fake.store[INSTANCES]
    fake.preempt(ZONE, nodes[1].id, at="2026-12-01T08:00:00.000-08:00")  # before this instance was made
    fake.store[INSTANCES][nodes[1].id]["status"] = "RUNNING"
    assert gcp.interruptions(PLAN) == []
    on_demand = gcp.launch(pool_spec(CapacityType.ON_DEMAND, count=1))
    fake.preempt(ZONE, on_demand[0].id)
    assert gcp.interruptions(PLAN) == []  # only Spot VMs are preempted


# --------------------------------------------------------------------------------------------------------
# E. Quotas


def test_quotas_come_from_the_region_with_units_per_node(fake: FakeCompute, gcp: GcpProvider) -> None:
    machine(fake, "a3-highgpu-8g", 208, "nvidia-h100-80gb")
    machine(fake, "g2-standard-48", 48, "nvidia-l4", 4)
    machine(fake, "a2-ultragpu-8g", 96, "nvidia-a100-80gb")
    machine(fake, "a3-ultragpu-8g", 224, "nvidia-h200-141gb")
    fake.quotas[REGION] = {
        "CPUS": 2400.0,
        "NVIDIA_H100_GPUS": 64.0,
        "PREEMPTIBLE_NVIDIA_H100_GPUS": 32.0,
        "NVIDIA_L4_GPUS": 8.0,
        "PREEMPTIBLE_NVIDIA_L4_GPUS": 0.0,  # no preemptible quota: spot counts against the standard one
        "A2_CPUS": 96.0,
        "NVIDIA_A100_80GB_GPUS": 0.0,
        "INSTANCES": 500.0,
    }
    fake.quota_usage[REGION] = {"CPUS": 100.0}
    gcp.launch(pool_spec(CapacityType.ON_DEMAND, count=2))
    gcp.launch(pool_spec(CapacityType.SPOT, count=1))
    wanted = [
        (A3, CapacityType.ON_DEMAND),
        (A3, CapacityType.SPOT),
        (G2, CapacityType.SPOT),
        (A2, CapacityType.ON_DEMAND),
        (ULTRA, CapacityType.ON_DEMAND),  # its NVIDIA_H200_GPUS is not reported here: left out
        (f"gcp:{REGION}:n9-nothing-1", CapacityType.ON_DEMAND),  # not sold in the zone: left out
        ("aws:us-east-1:p5.48xlarge", CapacityType.ON_DEMAND),  # not this cloud's
    ]
    found = {q.name: q for q in gcp.quotas(wanted)}
    assert found == {
        "CPUS": Quota(
            "CPUS",
            REGION,
            2400.0,
            100.0 + 3 * 208,
            "vCPUs",
            {
                (A3, CapacityType.ON_DEMAND): 208.0,
                (A3, CapacityType.SPOT): 208.0,
                (G2, CapacityType.SPOT): 48.0,
                (ULTRA, CapacityType.ON_DEMAND): 224.0,
            },
        ),
        "NVIDIA_H100_GPUS": Quota(
            "NVIDIA_H100_GPUS", REGION, 64.0, 16.0, "GPUs", {(A3, CapacityType.ON_DEMAND): 8.0}
        ),
        "PREEMPTIBLE_NVIDIA_H100_GPUS": Quota(
            "PREEMPTIBLE_NVIDIA_H100_GPUS", REGION, 32.0, 8.0, "GPUs", {(A3, CapacityType.SPOT): 8.0}
        ),
        "NVIDIA_L4_GPUS": Quota("NVIDIA_L4_GPUS", REGION, 8.0, 0.0, "GPUs", {(G2, CapacityType.SPOT): 4.0}),
        "A2_CPUS": Quota("A2_CPUS", REGION, 96.0, 0.0, "vCPUs", {(A2, CapacityType.ON_DEMAND): 96.0}),
        "NVIDIA_A100_80GB_GPUS": Quota(
            "NVIDIA_A100_80GB_GPUS", REGION, 0.0, 0.0, "GPUs", {(A2, CapacityType.ON_DEMAND): 8.0}
        ),
    }
    assert found["NVIDIA_H100_GPUS"].free == 48.0 and found["NVIDIA_A100_80GB_GPUS"].free == 0.0
    assert len(fake.sent("GET", f"^regions/{REGION}$")) == 1
    assert gcp.quotas([("aws:us-east-1:p5.48xlarge", CapacityType.SPOT)]) == []


def test_an_error_reading_quotas_is_a_provider_error(fake: FakeCompute, gcp: GcpProvider) -> None:
    fake.fail(
        "GET",
        f"^regions/{REGION}$",
        403,
        error(403, "Required 'compute.regions.get' permission", "forbidden"),
    )
    with pytest.raises(Auth):
        gcp.quotas([(A3, CapacityType.ON_DEMAND)])


def test_a_reservation_takes_its_quota_when_made_and_a_launch_into_it_takes_none_more(
    fake: FakeCompute, gcp: GcpProvider
) -> None:
    """Compute Engine counts a reservation's VMs against the regional quotas from its insert (beyond them
    it is QUOTA_EXCEEDED), and a VM consuming it adds nothing; ``reserved`` names the unused part, so
    the pre-launch check admits a launch into it that a launch beside it could not make."""
    machine(fake, "a3-highgpu-8g", 208, "nvidia-h100-80gb")
    fake.quotas[REGION] = {"CPUS": 10_000.0, "NVIDIA_H100_GPUS": 40.0}
    group, reservation, launch = gang_specs(nodes=4)
    big = replace(reservation, name="too-big", nodes=6, token="4" * 32)
    gcp.ensure_placement_group(group)
    with pytest.raises(QuotaExceeded):
        gcp.ensure_reservation(big)  # 48 GPUs of 40
    gcp.ensure_reservation(reservation)
    (gpus,) = [q for q in gcp.quotas([(A3, CapacityType.ON_DEMAND)]) if q.name == "NVIDIA_H100_GPUS"]
    assert (gpus.used, gpus.free, dict(gpus.reserved)) == (32.0, 8.0, {reservation.name: 32.0})

    into = Action(id=1, kind=ActionKind.LAUNCH, target="gang", offering=A3, capacity=CapacityType.ON_DEMAND,
                  count=3, run="llm-pretrain-1", reservation=reservation.name)  # fmt: skip
    beside = Action(id=2, kind=ActionKind.LAUNCH, target="pool", offering=A3, capacity=CapacityType.ON_DEMAND,
                    count=2)  # fmt: skip
    checked = check_quotas([into, beside], [gpus])
    assert set(checked.refused) == {2}  # 16 GPUs of the 8 free; the gang's 24 are the reservation's
    assert "need 16 GPUs of quota NVIDIA_H100_GPUS, which has 8 free" in checked.refused[2]

    made = gcp.launch(replace(launch, count=3, target=3))
    assert len(made) == 3
    (gpus,) = [q for q in gcp.quotas([(A3, CapacityType.ON_DEMAND)]) if q.name == "NVIDIA_H100_GPUS"]
    assert (gpus.used, dict(gpus.reserved)) == (32.0, {reservation.name: 8.0})  # 3 of 4 in use: no more quota
