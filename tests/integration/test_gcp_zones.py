"""GCP gangs reserve in another zone of the region when the first has no capacity (issue 35 point 3).

``zones`` in the GCP settings maps a region to a list of zones; ``ensure_reservation`` tries them in
order as the AWS adapter tries its subnets' zones, and the gang launches in the zone that holds its
reservation. Against the loopback Compute Engine fake with the real google-cloud-compute clients: zone A's
reservation insert ends in a stockout, zone B's succeeds, the gang's bulkInsert goes to zone B.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from gcp_fake import FakeCompute, FakeServer
from pydantic import ValidationError
from test_provider_gcp import PLAN, PROJECT, REGION, gang_specs, settings

from providers.base import InsufficientCapacity
from providers.config import FILE
from providers.gcp import GcpProvider, GcpSettings, open_provider

ZONE_A, ZONE_B = f"{REGION}-a", f"{REGION}-b"
STOCKOUT = "ZONE_RESOURCE_POOL_EXHAUSTED"


@pytest.fixture
def fake() -> Iterator[FakeCompute]:
    compute = FakeCompute(project=PROJECT)
    with FakeServer(compute):
        yield compute


@pytest.fixture
def gcp(fake: FakeCompute) -> GcpProvider:
    sleeps: list[float] = []
    return open_provider(settings(fake, zones={REGION: [ZONE_A, ZONE_B]}), sleep=sleeps.append)


def posts(fake: FakeCompute, path: str) -> list[Any]:
    return fake.sent("POST", path)


def test_zone_a_out_of_capacity_reserves_in_zone_b_and_the_gang_launches_there(
    gcp: GcpProvider, fake: FakeCompute
) -> None:
    group, reservation, launch = gang_specs(nodes=2)
    gcp.ensure_placement_group(group)
    fake.fail("POST", f"^zones/{ZONE_A}/reservations$", op_error=STOCKOUT)
    made = gcp.ensure_reservation(reservation)
    assert made.id == f"zones/{ZONE_B}/reservations/{reservation.name}"
    (in_a,) = posts(fake, f"^zones/{ZONE_A}/reservations$")
    (in_b,) = posts(fake, f"^zones/{ZONE_B}/reservations$")
    assert in_a.query["requestId"] != in_b.query["requestId"]  # a new request in the next zone
    assert reservation.name in fake.store[f"zones/{ZONE_B}/reservations"]
    assert not fake.store.get(f"zones/{ZONE_A}/reservations")
    # a retry (a lost reply) finds it in zone B: nothing reserved twice
    assert gcp.ensure_reservation(reservation).id == made.id
    assert len(posts(fake, "reservations$")) == 2
    nodes = gcp.launch(launch)  # the reservation by name, as provision sends it
    (bulk,) = posts(fake, "bulkInsert$")
    assert bulk.path == f"zones/{ZONE_B}/instances/bulkInsert"
    assert bulk.body["instanceProperties"]["reservationAffinity"]["values"] == [reservation.name]
    assert {n.zone for n in nodes} == {ZONE_B}
    assert sorted(n.id for n in gcp.inventory(PLAN).nodes) == sorted(fake.store[f"zones/{ZONE_B}/instances"])


def test_every_zone_out_of_capacity_names_the_zones_tried(gcp: GcpProvider, fake: FakeCompute) -> None:
    group, reservation, _ = gang_specs()
    gcp.ensure_placement_group(group)
    fake.fail("POST", f"^zones/{ZONE_A}/reservations$", op_error=STOCKOUT)
    fake.fail("POST", f"^zones/{ZONE_B}/reservations$", op_error=STOCKOUT)
    with pytest.raises(InsufficientCapacity, match=f"tried {ZONE_A}, {ZONE_B}\\)") as caught:
        gcp.ensure_reservation(reservation)
    assert caught.value.code == STOCKOUT


def test_a_plan_without_other_zone_tries_the_first_zone_only(gcp: GcpProvider, fake: FakeCompute) -> None:
    group, reservation, _ = gang_specs()
    gcp.ensure_placement_group(group)
    fake.fail("POST", f"^zones/{ZONE_A}/reservations$", op_error=STOCKOUT)
    with pytest.raises(InsufficientCapacity, match=f"tried {ZONE_A}; the plan allows no other zone"):
        gcp.ensure_reservation(replace(reservation, other_zones=False))
    assert not posts(fake, f"^zones/{ZONE_B}/")


def test_zones_per_region_are_a_zone_or_a_list_of_its_own_zones() -> None:
    def read(zones: Any) -> GcpSettings:
        return GcpSettings.model_validate({"project": "p-1", "zones": zones}, context={FILE: True})

    assert read({REGION: ZONE_B}).zones_of(REGION) == [ZONE_B]
    assert read({REGION: [ZONE_B, ZONE_A]}).zone(REGION) == ZONE_B
    assert read({}).zones_of(REGION) == [ZONE_A]
    with pytest.raises(ValidationError, match="'europe-west4-a' is not a zone of us-central1"):
        read({REGION: [ZONE_A, "europe-west4-a"]})
    with pytest.raises(ValidationError, match="a zone is listed twice"):
        read({REGION: [ZONE_A, ZONE_A]})
    with pytest.raises(ValidationError, match="at least 1 item"):
        read({REGION: []})
