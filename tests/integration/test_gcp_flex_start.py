"""A GCP flex-start gang (issue 38 point 4) launched through the real google-cloud-compute clients against
the loopback Compute Engine fake: one all-or-nothing bulkInsert with ``provisioningModel: FLEX_START``, its
``maxRunDuration`` the planned run, deleted at its end, consuming no reservation and drawing on the
preemptible GPU quota; a run longer than 7 days is refused by the cloud and made nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from gcp_fake import FakeCompute, FakeServer
from test_provider_gcp import PROJECT, ZONE, gang_specs, posts, settings

from providers.base import CapacityType, InvalidRequest, QuotaExceeded
from providers.gcp import open_provider


@pytest.fixture
def fake() -> Iterator[FakeCompute]:
    compute = FakeCompute(project=PROJECT)
    with FakeServer(compute):
        yield compute


def test_a_flex_start_gang_is_one_bulk_insert_with_its_run_duration(fake: FakeCompute) -> None:
    gcp = open_provider(settings(fake), sleep=lambda _s: None)
    group, _reservation, launch = gang_specs(nodes=2)
    gcp.ensure_placement_group(group)
    nodes = gcp.launch(replace(launch, reservation=None, max_run_hours=96.5))
    [bulk] = posts(fake, f"^zones/{ZONE}/instances/bulkInsert$")
    props = bulk.body["instanceProperties"]
    assert bulk.body["count"] == bulk.body["minCount"] == "2"
    assert props["scheduling"]["provisioningModel"] == "FLEX_START"
    assert props["scheduling"]["maxRunDuration"] == {"seconds": str(int(96.5 * 3600))}
    assert props["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert props["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert props["resourcePolicies"] == [group.name]
    assert len(nodes) == 2 and all(n.capacity is CapacityType.ON_DEMAND for n in nodes)
    # inventory reads them back as the gang's non-spot nodes
    found = gcp.inventory("Mixed Fleet").nodes
    assert sorted(n.id for n in found) == sorted(n.id for n in nodes)
    assert {n.run for n in found} == {"llm-pretrain-1"}


def test_flex_start_draws_on_the_preemptible_quota(fake: FakeCompute) -> None:
    """Only 8 preemptible H100 GPUs in the region: the first 8-GPU flex-start VM fits, a second does not,
    though the on-demand H100 quota is ample."""
    fake.put(
        f"zones/{ZONE}/machineTypes",
        {
            "name": "a3-highgpu-8g",
            "guestCpus": 208,
            "zone": ZONE,
            "accelerators": [{"guestAcceleratorType": "nvidia-h100-80gb", "guestAcceleratorCount": 8}],
        },
    )
    fake.quotas["us-central1"] = {
        "CPUS": 10_000.0, "NVIDIA_H100_GPUS": 64.0, "PREEMPTIBLE_NVIDIA_H100_GPUS": 8.0,
    }  # fmt: skip
    gcp = open_provider(settings(fake), sleep=lambda _s: None)
    _group, _reservation, launch = gang_specs(nodes=1)
    flex = replace(launch, reservation=None, placement_group=None, max_run_hours=24)
    gcp.launch(flex)
    with pytest.raises(QuotaExceeded, match="PREEMPTIBLE_NVIDIA_H100_GPUS"):
        gcp.launch(replace(flex, token="4" * 32, run="llm-pretrain-2"))


def test_a_run_over_seven_days_is_refused_and_makes_nothing(fake: FakeCompute) -> None:
    gcp = open_provider(settings(fake), sleep=lambda _s: None)
    group, _reservation, launch = gang_specs(nodes=2)
    gcp.ensure_placement_group(group)
    with pytest.raises(InvalidRequest):
        gcp.launch(replace(launch, reservation=None, max_run_hours=7 * 24 + 1))
    assert not fake.store.get(f"zones/{ZONE}/instances")
