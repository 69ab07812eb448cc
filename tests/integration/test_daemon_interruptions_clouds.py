"""Issue 35 point 7 end to end: the daemon against each cloud's stand-in, the notice in the shape the cloud
sends it, the lost spot node replaced in the watch cycle that saw the notice, and the checkpoint hook run
before the notice runs out.

- AWS: moto's server (EC2 and SQS, with the EC2 stand-in's hooks for what moto lacks); EC2's EventBridge
  events ("EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation") sent to the
  interruption queue as the EventBridge rule would (``aws_stand_in.ec2_event``);
- GCP: the Compute Engine fake's ``compute.instances.preempted`` system operation and the Spot VM's
  DELETE termination action (``gcp_fake.FakeCompute.preempt``);
- Azure: the ARM fake's ``evictSpotVM/action`` activity-log events and the scale set losing the VM
  (``azure_fake.AzureFake.evict``).

The plan is a six-hour scenario per cloud (a spot pool of two nodes and a one-node preemptible training
run, both on spot), planned by the daemon itself. Time is the stand-ins' own: the daemon's clock (what it
times the hook by) is the clock that stamps the notices (the GCP fake's :class:`~gcp_fake.FakeClock`, a
test clock for moto and ARM, whose messages carry the time the test gives them), so a notice seen late is
late on the same clock, and no test sleeps. What the fleet should hold is read from allocations.csv
(``daemon_days.planned``), what it holds from the provider's inventory.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from daemon_days import daemon_config, planned
from stand_in_settings import azure_settings

from models.plan import Plan
from planner.operations.daemon.config import load_config
from planner.outputs.desired import plan_id_of
from providers.base import Node, Provider

#: the horizon's start: the GCP fake's clock zero, so its stamps and the plan's hours line up
START = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)
#: the reconcile that builds the fleet, half an hour into the plan's first hour
BUILT = START + timedelta(minutes=30)
#: the watch that sees the notices
WATCH = BUILT + timedelta(minutes=10)
#: every job but the two under test off: one plan, no price refresh, no expiry warnings
JOBS = {
    "refresh_prices": {"every_minutes": 60, "enabled": False},
    "replan": {"every_hours": 10000},
    "reconcile": {"every_minutes": 60},
    "watch_interruptions": {"every_minutes": 0.5},
    "commitment_expiry": {"every_hours": 24, "enabled": False},
}
#: cloud -> (region, GPU model of a spot offering the embedded catalog prices there, pool replicas)
SPOT = {"aws": ("us-east-1", "L40S", 2), "gcp": ("us-central1", "L4", 2), "azure": ("eastus", "A100-80GB", 4)}


@dataclass
class Clock:
    """The time the stand-in stamps notices with and the daemon times its hook by: the instant the test
    set, moving on in real time from when it was set, so the hook's own run (a process started and
    finished) takes its real milliseconds on this timeline, while the test's steps of minutes cost none."""

    base: Callable[[], datetime] = lambda: START
    mark: float = field(default_factory=time.monotonic)

    def set(self, at: datetime, base: Callable[[], datetime] | None = None) -> None:
        self.base = base or (lambda: at)
        self.mark = time.monotonic()

    def __call__(self) -> datetime:
        return self.base() + timedelta(seconds=time.monotonic() - self.mark)


@dataclass
class Cloud:
    """One cloud's stand-in behind its real adapter: the provider, the daemon's clock, and how the cloud
    sends a notice for a node (kind, the notice's own time)."""

    name: str
    provider: Provider
    clock: Callable[[], datetime]
    set_time: Callable[[datetime], None]
    notify: Callable[[Node, str, datetime], None]
    settings: dict[str, Any]
    launches: Callable[[], int]  # launch requests the stand-in has answered
    extra: dict[str, Any] = field(default_factory=dict)


def _scenario(tmp_path: Path, cloud: str) -> Path:
    region, gpu, replicas = SPOT[cloud]
    data = {
        "name": f"interruptions-{cloud}",
        "horizon": {"start": f"{START:%Y-%m-%dT%H:%M:%SZ}", "hours": 6},
        "clouds": {cloud: {"regions": [region]}},
        "purchase": {"terms": []},
        "teams": [{"name": "research"}],
        "inference": [
            {
                "name": "batch-scoring",
                "team": "research",
                "gpus_per_replica": 1,
                "gpu_models": [gpu],
                "latency_critical": False,
                "replicas": {"profile": "flat", "base": replicas},
            }
        ],
        "training": [
            {
                "name": "finetune",
                "team": "research",
                "nodes": 1,
                "gpus_per_node": 1,
                "gpu_models": [gpu],
                "hours": 5,
                "preemptible": True,
                "fabric": "none",
                "checkpoint": {"write_minutes": 1, "restart_minutes": 5},
            }
        ],
    }
    path = tmp_path / "inputs" / "scenario.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _daemon(tmp_path: Path, cloud: Cloud) -> Any:
    """The daemon on ``cloud``, with a checkpoint hook that appends ``run deadline`` to a file, its plan
    made (by the daemon's own planner) and the fleet built by a reconcile at :data:`BUILT`."""
    from planner.operations.daemon.daemon import Daemon

    settings = tmp_path / "providers.yaml"
    settings.write_text(yaml.safe_dump({cloud.name: cloud.settings}), encoding="utf-8")
    marker = tmp_path / "checkpointed"
    hook = {"command": ["/bin/sh", "-c", f"echo '{{run}} {{deadline}}' >> '{marker}'"]}
    path = daemon_config(
        tmp_path,
        _scenario(tmp_path, cloud.name),
        provider={"cloud": cloud.name, "settings": str(settings)},
        jobs=JOBS,
        checkpoint_hook=hook,
    )
    daemon = Daemon(load_config(path), provider=cloud.provider, clock=cloud.clock)
    cloud.set_time(START)
    assert daemon.replan(START) is not None
    cloud.set_time(BUILT)
    daemon.run("reconcile", BUILT)
    assert _held(daemon) == planned(_plan(daemon), BUILT)  # the fleet is the plan's
    return daemon


def _plan(daemon: Any) -> Plan:
    plan = daemon.current_plan()
    assert plan is not None
    return plan


def _live(daemon: Any) -> list[Node]:
    return daemon.provider.inventory(plan_id_of(_plan(daemon).document)).live_nodes()


def _held(daemon: Any) -> Counter[str]:
    """Live nodes per pool (a run's nodes under the run), as the cloud's inventory lists them."""
    return Counter(n.run or n.pool for n in _live(daemon))


def _pool_and_run_nodes(daemon: Any) -> tuple[Node, Node]:
    live = _live(daemon)
    pool_node = next(n for n in sorted(live, key=lambda n: n.id) if n.run is None)
    run_node = next(n for n in live if n.run is not None)
    return pool_node, run_node


def _checkpoint(daemon: Any) -> dict[str, Any]:
    (event,) = daemon.store.events("checkpoint")
    assert event.data is not None
    return dict(event.data)


def _replaced_in_the_watch_cycle(
    cloud: Cloud, notice_at: datetime, deadline: timedelta, tmp_path: Path
) -> tuple[Any, Node, Node]:
    """The shared story: notices for a pool node and the training run's node, sent ``WATCH - notice_at``
    before the watch; the watch sees both, launches the pool's replacement in its own cycle, and calls the
    run's checkpoint hook, which finishes before the notice's deadline (``notice_at + deadline``)."""
    daemon = _daemon(tmp_path, cloud)
    wanted = planned(_plan(daemon), WATCH)
    pool_node, run_node = _pool_and_run_nodes(daemon)
    cloud.set_time(notice_at)
    cloud.notify(pool_node, "interruption", notice_at)
    cloud.notify(run_node, "interruption", notice_at)
    cloud.set_time(WATCH)
    launches = cloud.launches()

    notices = daemon.run("watch_interruptions", WATCH)

    assert sorted(notices) == sorted([f"{pool_node.id}:interruption", f"{run_node.id}:interruption"])
    assert cloud.launches() > launches  # the replacement was asked for in the watch's own cycle
    after = _live(daemon)
    pool = pool_node.pool
    fresh = [n for n in after if n.pool == pool and n.run is None and n.id != pool_node.id]
    assert len(fresh) == wanted[pool]  # the pool is whole without the node the cloud takes
    events = {e.data["node"]: e.data for e in daemon.store.events("interruption") if e.data}
    assert events[pool_node.id]["deadline"] == (notice_at + deadline).isoformat()
    checkpoint = _checkpoint(daemon)
    assert checkpoint["run"] == run_node.run and checkpoint["in_time"] is True
    assert checkpoint["deadline"] == (notice_at + deadline).isoformat()
    called, finished = (datetime.fromisoformat(checkpoint[k]) for k in ("called", "finished"))
    assert WATCH <= called <= finished <= notice_at + deadline  # the hook's real run, on the stand-in's clock
    written = (tmp_path / "checkpointed").read_text(encoding="utf-8").split()
    assert written == [str(run_node.run), (notice_at + deadline).isoformat()]  # the hook itself ran
    return daemon, pool_node, run_node


# ----------------------------------------------------------------------------------------------------------
# AWS: moto's server, the interruption queue


@pytest.fixture
def aws(aws_env: None, moto_server: str) -> Iterator[Cloud]:
    import boto3
    from aws_stand_in import Ec2StandIn, ec2_event, make_vpc

    from providers.aws import AwsSettings
    from providers.aws import open_provider as open_aws

    region = SPOT["aws"][0]
    session = boto3.Session(region_name=region)
    vpc = make_vpc(session, moto_server)
    stand_in = Ec2StandIn()
    stand_in.install(session)
    sqs = boto3.client("sqs", region_name=region, endpoint_url=moto_server)
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=moto_server)  # EC2's own hand, no hooks
    url = sqs.create_queue(QueueName="gpuplan-interruptions")["QueueUrl"]
    body = {
        "endpoint_url": moto_server,
        "image_id": vpc.image_id,
        "subnets": {region: vpc.subnets},
        "interruption_queue_url": url,
        "interruption_wait_seconds": 0,
    }
    provider = open_aws(AwsSettings.model_validate(body), session=session, sleep=lambda _s: None)
    clock = Clock()
    events = {"interruption": "EC2 Spot Instance Interruption Warning",
              "rebalance": "EC2 Instance Rebalance Recommendation"}  # fmt: skip

    def notify(node: Node, kind: str, at: datetime) -> None:
        detail = {"instance-action": "terminate"} if kind == "interruption" else {}
        sqs.send_message(QueueUrl=url, MessageBody=ec2_event(events[kind], node.id, at, region, **detail))

    yield Cloud(
        "aws", provider, clock, clock.set, notify, body, lambda: _launches(stand_in), {"sqs": sqs, "ec2": ec2}
    )


def _launches(stand_in: Any) -> int:
    """EC2 launch requests: RunInstances (gangs) and CreateFleet (pools)."""
    return len(stand_in.calls("RunInstances")) + len(stand_in.calls("CreateFleet"))


def test_aws_a_queued_spot_warning_is_replaced_in_the_watch_cycle_and_checkpointed_in_time(
    aws: Cloud, tmp_path: Path
) -> None:
    """EC2's two-minute warning, read from the queue 20 s after EC2 sent it. The training run's node
    still runs through its two minutes and is not replaced alone (its gang would have a node too many);
    once EC2 has taken it, the first watch after the deadline makes the gang whole again, without waiting
    for the hourly reconcile."""
    notice_at = WATCH - timedelta(seconds=20)
    daemon, pool_node, run_node = _replaced_in_the_watch_cycle(aws, notice_at, timedelta(minutes=2), tmp_path)
    wanted = planned(_plan(daemon), WATCH)
    assert run_node.id in {n.id for n in _live(daemon)} and _held(daemon)[str(run_node.run)] == 1

    aws.extra["ec2"].terminate_instances(InstanceIds=[pool_node.id, run_node.id])  # EC2 takes them
    after = notice_at + timedelta(minutes=2, seconds=10)  # the first 30 s watch after the deadline
    aws.set_time(after)
    assert daemon.run("watch_interruptions", after) == []  # nothing new to say...
    live = {n.id for n in _live(daemon)}
    assert _held(daemon) == wanted and not live & {pool_node.id, run_node.id}  # ...but the gang is whole
    assert daemon.store.get_state("reclaims") == {}


def test_aws_a_rebalance_recommendation_gets_its_replacement_before_the_node_is_let_go(
    aws: Cloud, tmp_path: Path
) -> None:
    """EC2's rebalance recommendation (elevated risk, no deadline): the replacement launches in the watch's
    cycle beside the node, which still serves; the next reconcile lets it go."""
    daemon = _daemon(tmp_path, aws)
    wanted = planned(_plan(daemon), WATCH)
    pool_node, _ = _pool_and_run_nodes(daemon)
    aws.notify(pool_node, "rebalance", WATCH - timedelta(seconds=20))
    aws.set_time(WATCH)

    assert daemon.run("watch_interruptions", WATCH) == [f"{pool_node.id}:rebalance"]
    (event,) = daemon.store.events("interruption")
    assert event.data is not None and event.data["deadline"] is None
    held = _held(daemon)
    assert held[pool_node.pool] == wanted[pool_node.pool] + 1  # beside the node at risk, still running
    assert pool_node.id in {n.id for n in _live(daemon)}
    assert daemon.store.events("checkpoint") == []  # a pool node: no run to checkpoint

    later = WATCH + timedelta(minutes=10)
    aws.set_time(later)
    daemon.run("reconcile", later)  # the pool runs without it: it goes
    assert _held(daemon) == wanted and pool_node.id not in {n.id for n in _live(daemon)}
    assert daemon.store.get_state("at_risk") == []


# ----------------------------------------------------------------------------------------------------------
# GCP: the Compute Engine fake, a preempted operation


@pytest.fixture
def gcp() -> Iterator[Cloud]:
    from gcp_fake import EPOCH, FakeCompute, FakeServer

    from providers.gcp import open_provider as open_gcp

    assert EPOCH == START  # the fake's clock zero is the plan's start
    compute = FakeCompute(project="fleet-project")
    region = SPOT["gcp"][0]
    zone = f"{region}-a"
    with FakeServer(compute):
        body = {
            "project": "fleet-project",
            "zones": {region: zone},
            "api_endpoint": compute.url,
            "credentials": "anonymous",
        }
        provider = open_gcp(body, sleep=compute.clock.sleep, clock=compute.clock)

        clock = Clock()

        def set_time(at: datetime) -> None:  # the fake's clock, which its operations may move on
            compute.clock.now = (at - START).total_seconds()
            clock.set(at, lambda: START + timedelta(seconds=compute.clock.now))

        def notify(node: Node, kind: str, at: datetime) -> None:
            assert kind == "interruption"  # Compute Engine sends no rebalance recommendation
            offset = (at - START).total_seconds() - compute.clock.now  # stamp() is relative to now
            compute.preempt(zone, node.id, at=compute.clock.stamp(offset))

        def launches() -> int:
            return len(compute.sent("POST", r"/instances(/bulkInsert)?$"))

        yield Cloud("gcp", provider, clock, set_time, notify, body, launches, {"compute": compute})


def test_gcp_a_preempted_operation_is_replaced_in_the_watch_cycle_and_checkpointed_in_time(
    gcp: Cloud, tmp_path: Path
) -> None:
    """Compute Engine's 30 s: the preemption operation read 5 s after it began."""
    _replaced_in_the_watch_cycle(gcp, WATCH - timedelta(seconds=5), timedelta(seconds=30), tmp_path)


# ----------------------------------------------------------------------------------------------------------
# Azure: the ARM fake, an evictSpotVM activity-log event


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cloud]:
    from azure_fake import AzureFake

    from providers.azure import AzureSettings
    from providers.azure import open_provider as open_azure

    monkeypatch.setenv("AZURE_ACCESS_TOKEN", "fake-token-for-the-loopback-fake")
    fake = AzureFake()
    fake.start()
    try:
        body = azure_settings(fake.base_url)
        clock = Clock()
        provider = open_azure(AzureSettings.model_validate(body), sleep=lambda _s: None, now=clock)

        def notify(node: Node, kind: str, at: datetime) -> None:
            assert kind == "interruption"  # Azure sends no rebalance recommendation
            scale_set, instance = node.id.rsplit("/virtualMachines/", 1)
            fake.evict(scale_set, instance, "Delete", at=f"{at:%Y-%m-%dT%H:%M:%S.%f}Z")

        def launches() -> int:
            return len(fake.sent("PUT", r"/virtualMachineScaleSets/[^/]+$"))

        yield Cloud("azure", provider, clock, clock.set, notify, body, launches, {"fake": fake})
    finally:
        fake.stop()


def test_azure_an_evict_spot_vm_event_is_replaced_in_the_watch_cycle_and_checkpointed_in_time(
    azure: Cloud, tmp_path: Path
) -> None:
    """Azure's 30 s: the activity log's evictSpotVM event read 5 s after it."""
    _replaced_in_the_watch_cycle(azure, WATCH - timedelta(seconds=5), timedelta(seconds=30), tmp_path)


@pytest.mark.parametrize("name", ["gcp", "azure"])
def test_a_notice_seen_after_its_deadline_calls_the_hook_but_records_it_not_in_time(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """GCP's and Azure's 30 s, seen by a control-plane read: a preemption that begins just after one watch
    (here 31 s before the next, at the 30 s interval) has run out when the next watch sees it. The hook is
    still called (it may save something, and the node may linger) but the event says it was late; the
    node is replaced all the same."""
    cloud: Cloud = request.getfixturevalue(name)
    daemon = _daemon(tmp_path, cloud)
    wanted = planned(_plan(daemon), WATCH)
    pool_node, run_node = _pool_and_run_nodes(daemon)
    notice_at = WATCH - timedelta(seconds=31)
    cloud.set_time(notice_at)
    cloud.notify(pool_node, "interruption", notice_at)
    cloud.notify(run_node, "interruption", notice_at)
    cloud.set_time(WATCH)

    daemon.run("watch_interruptions", WATCH)

    (event,) = daemon.store.events("checkpoint")
    assert event.data is not None and event.data["in_time"] is False and event.data["error"] is None
    assert event.data["deadline"] == (notice_at + timedelta(seconds=30)).isoformat()
    called, finished = (datetime.fromisoformat(event.data[k]) for k in ("called", "finished"))
    assert WATCH <= called <= finished < WATCH + timedelta(seconds=10)  # on the stand-in's clock
    late = finished - (notice_at + timedelta(seconds=30))
    assert event.message == (
        f"{run_node.run}: checkpoint hook NOT done in time {late.total_seconds():.0f} s after the notice "
        "ran out"
    )
    assert (tmp_path / "checkpointed").read_text(encoding="utf-8").split()[0] == run_node.run
    fresh = [n for n in _live(daemon) if n.pool == pool_node.pool and n.run is None and n.id != pool_node.id]
    assert len(fresh) == wanted[pool_node.pool]
