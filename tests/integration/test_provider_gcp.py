"""The GCP provider with the real google-cloud-compute REST clients against a loopback fake of the API.

Assertions are on the requests the fake received (bodies as Compute Engine would see them) and on what the
provider returns; faults are injected in the fake (HTTP errors, failed operations).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gcp_fake import FakeCompute, FakeServer, error
from pydantic import ValidationError

from models.naming import client_token, managed_tags, pool_name
from providers.base import (
    Auth,
    CapacityReservation,
    CapacityType,
    Conflict,
    InsufficientCapacity,
    InvalidRequest,
    LaunchSpec,
    MissingSDK,
    Node,
    NotFound,
    PlacementGroup,
    PlacementGroupSpec,
    Provider,
    QuotaExceeded,
    ReservationSpec,
    RetryPolicy,
    Throttled,
)
from providers.gcp import GcpProvider, GcpSettings, NicSettings, open_provider

PROJECT = "test-project"
REGION = "us-central1"
ZONE = "us-central1-b"
A3 = f"gcp:{REGION}:a3-highgpu-8g"
A3_MEGA = f"gcp:{REGION}:a3-megagpu-8g"
PLAN = "Mixed Fleet"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake() -> Iterator[FakeCompute]:
    compute = FakeCompute(project=PROJECT)
    with FakeServer(compute):
        yield compute


def settings(fake: FakeCompute, **overrides: Any) -> GcpSettings:
    values: dict[str, Any] = {
        "project": PROJECT,
        "zones": {REGION: ZONE},
        "api_endpoint": fake.url,
        "credentials": "anonymous",
        "gpudirect_networks": [
            NicSettings(
                network=f"global/networks/gpu-{i}", subnetwork=f"regions/{REGION}/subnetworks/gpu-{i}"
            )
            for i in range(4)
        ],
        "retry": RetryPolicy(attempts=3, base_seconds=0.01, cap_seconds=0.02),
    }
    values.update(overrides)
    return GcpSettings(**values)


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def gcp(fake: FakeCompute, sleeps: list[float]) -> GcpProvider:
    return open_provider(settings(fake), sleep=sleeps.append)


def pool_spec(capacity: CapacityType = CapacityType.SPOT, count: int = 2, offering: str = A3) -> LaunchSpec:
    pool = pool_name(offering, capacity)
    return LaunchSpec(
        offering=offering,
        capacity=capacity,
        count=count,
        pool=pool,
        tags=managed_tags(PLAN, pool=pool),
        token=client_token(PLAN, pool, "2026-12", count),
        target=count,
    )


def gang_specs(
    nodes: int = 2, offering: str = A3, fabric: str = "tcpx", capacity: CapacityType = CapacityType.ON_DEMAND
) -> tuple[PlacementGroupSpec, ReservationSpec, LaunchSpec]:
    run = "llm-pretrain-1"
    pool = pool_name(offering, capacity)
    tags = managed_tags(PLAN, pool=pool, run=run)
    group = PlacementGroupSpec(
        name=f"{run}-pg",
        region=REGION,
        offering=offering,
        nodes=nodes,
        fabric=fabric,
        tags=tags,
        token="1" * 32,
    )
    reservation = ReservationSpec(
        name=f"{run}-res",
        offering=offering,
        nodes=nodes,
        placement_group=group.name,
        tags=tags,
        token="2" * 32,
    )
    launch = LaunchSpec(
        offering=offering,
        capacity=capacity,
        count=nodes,
        pool=pool,
        tags=tags,
        token="3" * 32,
        run=run,
        placement_group=group.name,
        reservation=reservation.name,
        fabric=fabric,
        target=nodes,
    )
    return group, reservation, launch


def posts(fake: FakeCompute, path: str) -> list[Any]:
    return fake.sent("POST", path)


# --------------------------------------------------------------------------------------------------------
# request bodies


def test_provider_protocol_and_handles(gcp: GcpProvider) -> None:
    assert isinstance(gcp, Provider)
    assert gcp.handles(A3) and not gcp.handles("aws:us-east-1:p5.48xlarge") and not gcp.handles("a3")
    assert gcp.spot_prices([A3]) == []  # the Compute API has no prices: left out, never 0


def test_placement_policy_is_compact_with_our_tags(gcp: GcpProvider, fake: FakeCompute) -> None:
    group, _, _ = gang_specs(nodes=4)
    made = gcp.ensure_placement_group(group)
    [sent] = posts(fake, f"^regions/{REGION}/resourcePolicies$")
    assert sent.body["name"] == group.name
    assert sent.body["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "vmCount": 4}
    assert json.loads(sent.body["description"]) == dict(group.tags)
    assert uuid.UUID(sent.query["requestId"])
    assert fake.sent("POST", f"^regions/{REGION}/operations/operation-\\d+/wait$")  # waited, region op
    assert made == PlacementGroup(name=group.name, region=REGION, run="llm-pretrain-1", tags=dict(group.tags))


def test_spot_pool_instances_carry_spot_scheduling_labels_and_request_ids(
    gcp: GcpProvider, fake: FakeCompute
) -> None:
    spec = pool_spec(CapacityType.SPOT, count=2)
    nodes = gcp.launch(spec)
    sent = posts(fake, f"^zones/{ZONE}/instances$")
    assert [s.body["name"] for s in sent] == [f"{spec.pool}-{spec.token[:8]}-{i}" for i in range(2)]
    for s in sent:
        assert s.body["scheduling"] == {
            "provisioningModel": "SPOT",
            "instanceTerminationAction": "DELETE",
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": False,
        }
        assert s.body["labels"] == dict(spec.tags)
        assert s.body["machineType"] == f"zones/{ZONE}/machineTypes/a3-highgpu-8g"
        assert s.body["networkInterfaces"] == [{"network": "global/networks/default", "nicType": "GVNIC"}]
        [disk] = s.body["disks"]
        assert disk["boot"] and disk["autoDelete"]
        assert disk["initializeParams"]["diskSizeGb"] == "200"
        assert "resourcePolicies" not in s.body and "reservationAffinity" not in s.body
        assert not s.authorization
    ids = [s.query["requestId"] for s in sent]
    assert len(set(ids)) == 2 and all(uuid.UUID(i) for i in ids)
    assert [n.id for n in nodes] == [s.body["name"] for s in sent]
    assert {(n.capacity, n.pool, n.run, n.zone, n.offering) for n in nodes} == {
        (CapacityType.SPOT, spec.pool, None, ZONE, A3)
    }


def test_on_demand_instances_terminate_on_host_maintenance(gcp: GcpProvider, fake: FakeCompute) -> None:
    gcp.launch(pool_spec(CapacityType.ON_DEMAND, count=1))
    [sent] = posts(fake, f"^zones/{ZONE}/instances$")
    assert sent.body["scheduling"]["provisioningModel"] == "STANDARD"
    assert sent.body["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert "instanceTerminationAction" not in sent.body["scheduling"]


def test_gang_is_one_all_or_nothing_bulk_insert_with_policy_reservation_and_tcpx_nics(
    gcp: GcpProvider, fake: FakeCompute
) -> None:
    group, reservation, launch = gang_specs(nodes=2)
    gcp.ensure_placement_group(group)
    gcp.ensure_reservation(reservation)
    nodes = gcp.launch(launch)
    [bulk] = posts(fake, f"^zones/{ZONE}/instances/bulkInsert$")
    assert not posts(fake, f"^zones/{ZONE}/instances$")
    body = bulk.body
    assert body["count"] == body["minCount"] == "2"
    names = [f"llm-pretrain-1-33333333-{i}" for i in range(2)]
    assert sorted(body["perInstanceProperties"]) == names
    props = body["instanceProperties"]
    assert props["machineType"] == "a3-highgpu-8g"
    assert props["resourcePolicies"] == [group.name]
    assert props["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": [reservation.name],
    }
    assert props["labels"] == dict(launch.tags)
    assert props["scheduling"]["provisioningModel"] == "STANDARD"
    nics = props["networkInterfaces"]
    assert len(nics) == 5 and all(n["nicType"] == "GVNIC" for n in nics)
    assert nics[0]["network"] == "global/networks/default"
    assert [n["network"] for n in nics[1:]] == [f"global/networks/gpu-{i}" for i in range(4)]
    assert [n["subnetwork"] for n in nics[1:]] == [f"regions/{REGION}/subnetworks/gpu-{i}" for i in range(4)]
    assert uuid.UUID(bulk.query["requestId"])
    assert sorted(n.id for n in nodes) == names
    assert all(n.run == "llm-pretrain-1" and n.placement_group == group.name for n in nodes)


def test_gpudirect_nic_count_follows_the_fabric(fake: FakeCompute, sleeps: list[float]) -> None:
    four = open_provider(settings(fake), sleep=sleeps.append)
    group, _, launch = gang_specs(nodes=2, offering=A3_MEGA, fabric="tcpxo")
    four.ensure_placement_group(group)
    with pytest.raises(InvalidRequest, match=r"needs 8 extra networks.*gpudirect_networks lists 4"):
        four.launch(launch)
    assert not posts(fake, "instances")  # refused before anything was sent
    nics = [NicSettings(network=f"global/networks/m{i}", subnetwork=f"s{i}") for i in range(8)]
    eight = open_provider(settings(fake, gpudirect_networks=nics), sleep=sleeps.append)
    eight.launch(launch)
    [bulk] = posts(fake, "bulkInsert$")
    assert len(bulk.body["instanceProperties"]["networkInterfaces"]) == 9
    with pytest.raises(InvalidRequest, match="does not exist on GCP"):
        eight.launch(gang_specs(fabric="efa")[2])
    # A3 Ultra's GPUDirect-RDMA (the catalog's infiniband): 8 MRDMA NICs from rdma_networks
    with pytest.raises(InvalidRequest, match=r"needs 8 extra networks.*rdma_networks lists 0"):
        eight.launch(gang_specs(fabric="infiniband")[2])
    rdma = [NicSettings(network=f"global/networks/rdma-{i}", subnetwork=f"r{i}") for i in range(8)]
    ultra = open_provider(settings(fake, rdma_networks=rdma), sleep=sleeps.append)
    ultra.launch(gang_specs(nodes=2, offering=A3_MEGA, fabric="infiniband")[2])
    sent = posts(fake, "bulkInsert$")[-1].body["instanceProperties"]["networkInterfaces"]
    assert [n["nicType"] for n in sent] == ["GVNIC"] + ["MRDMA"] * 8


def test_reservation_is_specific_with_the_placement_policy(gcp: GcpProvider, fake: FakeCompute) -> None:
    group, reservation, _ = gang_specs(nodes=3)
    gcp.ensure_placement_group(group)
    made = gcp.ensure_reservation(reservation)
    [sent] = posts(fake, f"^zones/{ZONE}/reservations$")
    assert sent.body["name"] == reservation.name
    assert sent.body["specificReservationRequired"] is True
    assert sent.body["specificReservation"] == {
        "count": "3",
        "instanceProperties": {"machineType": "a3-highgpu-8g"},
    }
    assert sent.body["resourcePolicies"] == {
        "placement": f"projects/{PROJECT}/regions/{REGION}/resourcePolicies/{group.name}"
    }
    assert json.loads(sent.body["description"]) == dict(reservation.tags)
    assert uuid.UUID(sent.query["requestId"])
    assert made.nodes == 3 and made.placement_group == group.name and made.run == "llm-pretrain-1"


def test_relaunching_the_same_spec_repeats_its_request_ids_and_creates_nothing_twice(
    gcp: GcpProvider, fake: FakeCompute
) -> None:
    spec = pool_spec(CapacityType.SPOT, count=2)
    first = gcp.launch(spec)
    second = gcp.launch(spec)
    sent = posts(fake, f"^zones/{ZONE}/instances$")
    assert len(sent) == 4
    assert [s.query["requestId"] for s in sent[:2]] == [s.query["requestId"] for s in sent[2:]]
    assert [n.id for n in first] == [n.id for n in second]
    assert len(fake.store[f"zones/{ZONE}/instances"]) == 2
    # every insert of every kind carries a requestId
    group, reservation, launch = gang_specs()
    gcp.ensure_placement_group(group)
    gcp.ensure_reservation(reservation)
    gcp.launch(launch)
    inserts = [r for r in fake.requests if r.method == "POST" and not r.path.endswith("/wait")]
    assert len(inserts) == 7 and all(uuid.UUID(r.query["requestId"]) for r in inserts)


def test_inventory_finds_our_resources_by_labels_and_descriptions(
    gcp: GcpProvider, fake: FakeCompute
) -> None:
    spot = pool_spec(CapacityType.SPOT, count=2)
    gcp.launch(spot)
    group, reservation, launch = gang_specs(nodes=2)
    gcp.ensure_placement_group(group)
    gcp.ensure_reservation(reservation)
    gcp.launch(launch)
    # someone else's: another plan's instance, an unlabelled one, a policy and a reservation named like ours
    fake.put(f"zones/{ZONE}/instances", {"name": "other", "labels": managed_tags("other plan", pool="p")})
    fake.put(f"zones/{ZONE}/instances", {"name": "bare"})
    compact = {"collocation": "COLLOCATED", "vmCount": 2}
    fake.put(
        f"regions/{REGION}/resourcePolicies",
        {"name": "llm-pretrain-1-pg2", "description": "mine", "groupPlacementPolicy": compact},
    )
    fake.put(f"zones/{ZONE}/reservations", {"name": "llm-pretrain-1-res2", "description": "{}"})

    inv = gcp.inventory(PLAN)
    [agg] = fake.sent("GET", "^aggregated/instances$")
    assert agg.query["filter"] == 'labels.gpuplan-plan = "mixed-fleet"'
    by_id = {n.id: n for n in inv.nodes}
    assert sorted(by_id) == sorted([f"{spot.pool}-{spot.token[:8]}-{i}" for i in range(2)]) + [
        f"llm-pretrain-1-33333333-{i}" for i in range(2)
    ]
    spot_node = by_id[f"{spot.pool}-{spot.token[:8]}-0"]
    assert (spot_node.capacity, spot_node.pool, spot_node.run) == (CapacityType.SPOT, spot.pool, None)
    assert (spot_node.offering, spot_node.zone, spot_node.state) == (A3, ZONE, "running")
    assert spot_node.launched is not None
    gang_node = by_id["llm-pretrain-1-33333333-0"]
    assert (gang_node.capacity, gang_node.pool, gang_node.run) == (
        CapacityType.ON_DEMAND,
        launch.pool,
        launch.run,
    )
    assert (gang_node.placement_group, gang_node.reservation) == (group.name, reservation.name)
    assert len(inv.live_nodes()) == 4
    [pg] = inv.placement_groups
    assert (pg.name, pg.region, pg.run, pg.state) == (group.name, REGION, "llm-pretrain-1", "available")
    [res] = inv.reservations
    assert (res.name, res.offering, res.nodes, res.placement_group, res.run) == (
        reservation.name,
        A3,
        2,
        group.name,
        "llm-pretrain-1",
    )
    assert gcp.inventory("another plan").nodes == ()


def test_offerings_list_gpu_machine_types_with_their_fabric(gcp: GcpProvider, fake: FakeCompute) -> None:
    def machine(name: str, accelerator: str | None, count: int = 8) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "guestCpus": 208}
        if accelerator:
            body["accelerators"] = [{"guestAcceleratorType": accelerator, "guestAcceleratorCount": count}]
        return body

    for body in (
        machine("a3-highgpu-8g", "nvidia-h100-80gb"),
        machine("a3-megagpu-8g", "nvidia-h100-mega-80gb"),
        machine("g2-standard-4", "nvidia-l4", 1),
        machine("n2-standard-8", None),
    ):
        fake.put(f"zones/{ZONE}/machineTypes", body)
    found = {o.offering: o for o in gcp.offerings([REGION])}
    assert sorted(found) == [A3, A3_MEGA, f"gcp:{REGION}:g2-standard-4"]
    assert (found[A3].gpu_model, found[A3].gpus_per_node, found[A3].gpu_memory_gb) == ("H100", 8, 80.0)
    assert (found[A3].fabric, found[A3].network_interfaces) == ("tcpx", 5)
    assert (found[A3_MEGA].fabric, found[A3_MEGA].network_interfaces) == ("tcpxo", 9)
    l4 = found[f"gcp:{REGION}:g2-standard-4"]
    assert (l4.gpu_model, l4.gpus_per_node, l4.fabric, l4.network_interfaces) == ("L4", 1, None, 1)


def test_interruptions_are_preemption_operations_on_our_nodes(gcp: GcpProvider, fake: FakeCompute) -> None:
    spec = pool_spec(CapacityType.SPOT, count=2)
    nodes = gcp.launch(spec)
    fake.put(f"zones/{ZONE}/instances", {"name": "theirs"})
    fake.preempt(ZONE, nodes[1].id)
    fake.preempt(ZONE, "theirs")
    [notice] = gcp.interruptions(PLAN)
    assert (notice.node_id, notice.kind, notice.pool, notice.offering) == (
        nodes[1].id,
        "interruption",
        spec.pool,
        A3,
    )
    assert notice.at.isoformat() == "2026-12-01T10:00:00-08:00"
    [listed] = fake.sent("GET", f"^zones/{ZONE}/operations$")
    assert listed.query["filter"] == 'operationType = "compute.instances.preempted"'


def test_mutating_calls_are_logged_without_credentials(
    gcp: GcpProvider, fake: FakeCompute, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gpuplan.providers.gcp")
    spec = pool_spec(CapacityType.SPOT, count=2)
    nodes = gcp.launch(spec)
    gcp.terminate(nodes)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "gpuplan.providers.gcp")
    assert f"launching 2 spot pool nodes of a3-highgpu-8g in {ZONE}" in text
    assert all(f"deleting instance {n.id}" in text for n in nodes)
    assert "requestId" not in text and "Authorization" not in text


# --------------------------------------------------------------------------------------------------------
# faults


def test_throttling_is_retried_then_succeeds(
    gcp: GcpProvider, fake: FakeCompute, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    fake.throttle("POST", f"^zones/{ZONE}/instances$", times=2)
    caplog.set_level(logging.WARNING, logger="gpuplan.providers.gcp")
    nodes = gcp.launch(pool_spec(count=1))
    assert len(nodes) == 1
    sent = posts(fake, f"^zones/{ZONE}/instances$")
    assert len(sent) == 3 and len({s.query["requestId"] for s in sent}) == 1  # the same create, repeated
    assert len(sleeps) == 2 and all(0 <= s <= 0.02 for s in sleeps)
    assert sum("throttled" in r.getMessage() for r in caplog.records) == 2


def test_throttling_that_never_ends_raises_throttled_after_the_attempts(
    gcp: GcpProvider, fake: FakeCompute, sleeps: list[float]
) -> None:
    fake.throttle("GET", "^aggregated/instances$", times=5)
    with pytest.raises(Throttled) as caught:
        gcp.inventory(PLAN)
    assert len(fake.sent("GET", "^aggregated/instances$")) == 3 and len(sleeps) == 2
    assert caught.value.cloud == "gcp" and caught.value.code == "rateLimitExceeded"


def test_a_stocked_out_gang_fails_whole_with_insufficient_capacity(
    gcp: GcpProvider, fake: FakeCompute
) -> None:
    group, _, launch = gang_specs()
    gcp.ensure_placement_group(group)
    fake.fail("POST", "bulkInsert$", op_error="ZONE_RESOURCE_POOL_EXHAUSTED")
    with pytest.raises(InsufficientCapacity, match="0 of 2 nodes of gang llm-pretrain-1 of pool") as caught:
        gcp.launch(launch)
    assert (caught.value.code, caught.value.operation) == ("ZONE_RESOURCE_POOL_EXHAUSTED", "launch gang")
    assert not fake.store.get(f"zones/{ZONE}/instances")  # all or nothing: none made
    assert gcp.inventory(PLAN).nodes == ()


def test_a_stocked_out_reservation_raises_insufficient_capacity(gcp: GcpProvider, fake: FakeCompute) -> None:
    group, reservation, _ = gang_specs()
    gcp.ensure_placement_group(group)
    fake.fail("POST", "reservations$", op_error="ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
    with pytest.raises(InsufficientCapacity):
        gcp.ensure_reservation(reservation)


@pytest.mark.parametrize(("how", "made"), [("http-403", 0), ("operation", 1)])
def test_quota_exceeded(gcp: GcpProvider, fake: FakeCompute, how: str, made: int) -> None:
    if how == "http-403":
        body = error(
            403, "Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 0.0 in region us-central1.", "quotaExceeded"
        )
        fake.fail("POST", "instances$", 403, body)
    else:
        fake.fail("POST", "instances$", op_error="QUOTA_EXCEEDED")
    with pytest.raises(QuotaExceeded, match=f"{made} of 2 nodes"):
        gcp.launch(pool_spec(count=2))
    assert len(fake.store.get(f"zones/{ZONE}/instances", {})) == made


def test_a_pool_stockout_part_way_keeps_the_nodes_made(gcp: GcpProvider, fake: FakeCompute) -> None:
    fake.fail("POST", f"^zones/{ZONE}/instances$", op_error="ZONE_RESOURCE_POOL_EXHAUSTED", skip=1)
    with pytest.raises(InsufficientCapacity, match="2 of 3 nodes of pool"):
        gcp.launch(pool_spec(count=3))
    assert len(posts(fake, f"^zones/{ZONE}/instances$")) == 3  # the failed one did not stop the others
    assert len(gcp.inventory(PLAN).nodes) == 2  # labelled: the next reconcile counts them


def test_ensure_of_our_existing_policy_adopts_it(gcp: GcpProvider, fake: FakeCompute) -> None:
    group, reservation, _ = gang_specs()
    fake.put(
        f"regions/{REGION}/resourcePolicies",
        {"name": group.name, "description": json.dumps(dict(group.tags))},
    )
    fake.put(
        f"zones/{ZONE}/reservations", {"name": reservation.name, "description": json.dumps(dict(group.tags))}
    )
    assert gcp.ensure_placement_group(group).name == group.name
    assert gcp.ensure_reservation(reservation).name == reservation.name
    assert fake.sent("GET", f"^regions/{REGION}/resourcePolicies/{group.name}$")
    assert fake.sent("GET", f"^zones/{ZONE}/reservations/{reservation.name}$")


def test_ensure_of_someone_elses_policy_is_a_conflict(gcp: GcpProvider, fake: FakeCompute) -> None:
    group, reservation, _ = gang_specs()
    fake.put(f"regions/{REGION}/resourcePolicies", {"name": group.name, "description": "team-b's"})
    other = json.dumps(managed_tags("another plan"))
    fake.put(f"zones/{ZONE}/reservations", {"name": reservation.name, "description": other})
    with pytest.raises(Conflict, match="not gpuplan's"):
        gcp.ensure_placement_group(group)
    with pytest.raises(Conflict, match="not gpuplan's"):
        gcp.ensure_reservation(reservation)


def test_a_launch_onto_taken_names_adopts_ours_and_refuses_others(
    gcp: GcpProvider, fake: FakeCompute
) -> None:
    spec = pool_spec(count=1)
    [node] = gcp.launch(spec)
    fake.by_request_id.clear()  # as if the requestId had expired: the insert now meets a 409
    [again] = gcp.launch(spec)
    assert again.id == node.id and again.pool == spec.pool
    fake.store[f"zones/{ZONE}/instances"][node.id]["labels"] = {"team": "b"}
    fake.by_request_id.clear()
    with pytest.raises(Conflict, match="not gpuplan's"):
        gcp.launch(spec)


def test_deletes_of_what_is_gone_are_done(gcp: GcpProvider, fake: FakeCompute) -> None:
    nodes = gcp.launch(pool_spec(count=2))
    group, reservation, _ = gang_specs()
    pg = gcp.ensure_placement_group(group)
    res = gcp.ensure_reservation(reservation)
    gone = Node(id="never-made", offering=A3, capacity=CapacityType.SPOT, pool="p", zone=ZONE)
    gcp.terminate([*nodes, gone])
    gcp.release_reservation(res)
    gcp.delete_placement_group(pg)
    assert not fake.store[f"zones/{ZONE}/instances"]
    assert (
        not fake.store[f"zones/{ZONE}/reservations"] and not fake.store[f"regions/{REGION}/resourcePolicies"]
    )
    # and again, everything already gone (404 on each delete)
    gcp.terminate(nodes)
    gcp.release_reservation(CapacityReservation(name=reservation.name, offering=A3, nodes=2))
    gcp.delete_placement_group(pg)
    deletes = [r for r in fake.requests if r.method == "DELETE"]
    assert len(deletes) == 3 + 1 + 1 + 2 + 1 + 1


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (401, "authError", Auth),
        (403, "forbidden", Auth),
        (403, "rateLimitExceeded", Throttled),
        (400, "invalid", InvalidRequest),
        (404, "notFound", NotFound),
        (503, "ZONE_RESOURCE_POOL_EXHAUSTED", InsufficientCapacity),
    ],
)
def test_http_errors_map_to_the_contract(
    gcp: GcpProvider, fake: FakeCompute, status: int, reason: str, expected: type
) -> None:
    for _ in range(3):
        fake.fail("POST", "instances$", status, error(status, f"the fake says {reason}", reason))
    with pytest.raises(expected):
        gcp.launch(pool_spec(count=1))


def test_default_credentials_missing_is_an_auth_error(
    fake: FakeCompute, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-key.json"))
    with pytest.raises(Auth):
        open_provider(settings(fake, credentials="default"))


def test_settings_validate() -> None:
    s = GcpSettings(project="p", zones={"europe-west4": "europe-west4-b"})
    assert s.zone("europe-west4") == "europe-west4-b" and s.zone("us-east5") == "us-east5-a"
    assert s.boot_disk_gb == 200 and s.credentials == "default" and s.retry == RetryPolicy()
    with pytest.raises(ValidationError, match="anonymous"):
        GcpSettings(project="p", credentials="anonymous")
    with pytest.raises(ValidationError, match="extra"):
        GcpSettings.model_validate({"project": "p", "zone": "us-central1-a"})
    parsed = GcpSettings.model_validate({"project": "p", "retry": {"attempts": 2}, "gpudirect_networks": []})
    assert parsed.retry.attempts == 2


def test_import_works_without_the_sdk_and_opening_names_the_extra() -> None:
    code = (
        "import sys\n"
        "for name in ('google', 'google.cloud', 'google.cloud.compute_v1', 'google.auth'):\n"
        "    sys.modules[name] = None  # an import of any of them now fails\n"
        "import providers.gcp as gcp\n"
        "from providers.base import MissingSDK\n"
        "try:\n"
        "    gcp.open_provider({'project': 'p'})\n"
        "except MissingSDK as exc:\n"
        "    print('MISSING', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (
        "MISSING" in done.stdout and "gpuplan[gcp]" in done.stdout and "google-cloud-compute" in done.stdout
    )
    assert MissingSDK("gcp", "google-cloud-compute", "gcp").kind == "missing-sdk"


def test_a_reservation_with_an_end_is_deleted_then(gcp: GcpProvider, fake: FakeCompute) -> None:
    """A gang's reservation ends a margin after its run (issue 35): Compute Engine deletes it at that
    time (``deleteAtTime``), so it never bills on after the run."""
    from dataclasses import replace
    from datetime import UTC, datetime

    group, reservation, _ = gang_specs(nodes=2)
    gcp.ensure_placement_group(group)
    gcp.ensure_reservation(replace(reservation, ends=datetime(2027, 1, 6, 18, 0, tzinfo=UTC)))
    [sent] = posts(fake, f"^zones/{ZONE}/reservations$")
    assert sent.body["deleteAtTime"] == "2027-01-06T18:00:00Z"
