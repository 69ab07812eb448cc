"""Launch tokens unique per attempt (issue 35 point 4), on every cloud's stand-in.

The daemon's journal keeps each create it sent; the same intent (plan, target, period, counts) used to map
to the same token and journal key, so a gang or pool lost within its launch hour was "done" already and
nothing replaced it until the next period, and a placement group deleted outside gpuplan was never made
again (the gang's launch then failed "not found" every cycle). Here the mixed-fleet week is reconciled
once, everything it made is lost at once (all nodes terminated, the gang's reservation and placement
group deleted outside gpuplan), and the next cycle, in the same period, makes it all again under new
tokens: every pool and the gang hold their nodes again, on new node ids.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from stand_in_settings import aws_site, azure_settings, gcp_settings

from models.actions import ActionKind
from models.plan import Plan
from planner.operations.daemon.journal import SETTLE, apply_journaled
from planner.operations.daemon.store import Store
from planner.operations.provision import Provisioning, prepare
from providers.base import Provider
from providers.config import open_provider


class Clock:
    """The store's clock, moved by hand: how long ago a create was journaled is what decides whether its
    absence is the cloud's read lag or a loss."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AZURE_ACCESS_TOKEN", "test-token")


def _sim(tmp_path: Path) -> Iterator[Provider]:
    from providers.sim import SimProvider

    sim = SimProvider(tmp_path / "sim.json")
    sim.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    yield sim


def _aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Provider]:
    with aws_site(monkeypatch) as settings:
        yield open_provider("aws", {"aws": settings})


def _gcp(tmp_path: Path) -> Iterator[Provider]:
    from gcp_fake import FakeCompute, FakeServer

    compute = FakeCompute(project="fleet-project")
    with FakeServer(compute):
        yield open_provider("gcp", {"gcp": gcp_settings(compute.url)})


def _azure(tmp_path: Path) -> Iterator[Provider]:
    from azure_fake import AzureFake

    fake = AzureFake()
    fake.start()
    try:
        settings = azure_settings(fake.base_url)
        yield open_provider("azure", {"azure": settings})
    finally:
        fake.stop()


@pytest.fixture(params=["sim", "aws", "gcp", "azure"])
def cloud(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Provider]:
    if request.param == "aws":
        yield from _aws(tmp_path, monkeypatch)
    elif request.param == "sim":
        yield from _sim(tmp_path)
    else:
        yield from {"gcp": _gcp, "azure": _azure}[request.param](tmp_path)


def _week(week_plan: Callable[[str], Path], tmp_path: Path, cloud: str) -> tuple[Plan, datetime]:
    source = week_plan("all" if cloud == "sim" else cloud)
    shutil.copytree(source, tmp_path / "plan")
    plan = Plan.read(tmp_path / "plan")
    gang = next(t for t in plan.document.training if t.nodes > 1)
    return plan, gang.start + timedelta(hours=1)


def _cycle(plan: Plan, provider: Provider, store: Store, at: datetime) -> Provisioning:
    run = prepare(plan, provider, at, budget=None)
    cycle = store.begin_cycle("reconcile", run.desired.plan_id, at)
    apply_journaled(run, provider, store, cycle)
    return run


def _held(provider: Provider, plan_id: str) -> dict[str, int]:
    held: dict[str, int] = {}
    for node in provider.inventory(plan_id).live_nodes():
        key = node.run or node.pool
        held[key] = held.get(key, 0) + 1
    return held


def test_a_fleet_lost_within_its_launch_hour_is_made_again_in_the_next_cycle(
    cloud: Provider, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan, at = _week(week_plan, tmp_path, cloud.cloud)
    clock = Clock()
    with Store(f"sqlite:///{tmp_path / 'daemon.db'}", clock=clock) as store:
        first = _cycle(plan, cloud, store, at)
        plan_id = first.desired.plan_id
        assert not first.failed(), [first.results[a.id].message for a in first.failed()]
        wanted = {g.run: g.nodes for g in first.desired.gangs} | {
            p.pool: p.nodes for p in first.desired.pools
        }
        wanted = {k: v for k, v in wanted.items() if v}
        assert _held(cloud, plan_id) == wanted
        gangs = [g for g in first.desired.gangs if g.placement_group]
        assert gangs, "the week's hour has a gang in a placement group"

        # everything lost at once, within the launch hour: every node, and the gang's reservation and
        # group deleted outside gpuplan
        lost = cloud.inventory(plan_id)
        reserved = {r.name for r in lost.reservations}
        assert reserved or cloud.cloud == "azure"  # Azure's gangs are never reserved (no PPG + CRG)
        cloud.terminate(lost.live_nodes())
        for reservation in lost.reservations:
            cloud.release_reservation(reservation)
        for group in lost.placement_groups:
            cloud.delete_placement_group(group)
        assert _held(cloud, plan_id) == {} and not cloud.inventory(plan_id).reservations

        # read lag: just after the creates, an absent result may be the cloud's eventual consistency
        clock.now += SETTLE / 4
        lagging = _cycle(plan, cloud, store, at)
        sent = [a for a in lagging.actions if a.id in lagging.results and lagging.results[a.id].made]
        assert not [a for a in sent if a.attempt], "nothing is sent again within the settle window"

        clock.now += SETTLE
        second = _cycle(plan, cloud, store, at)
        assert not second.failed(), [second.results[a.id].message for a in second.failed()]
        assert _held(cloud, plan_id) == wanted
        again = cloud.inventory(plan_id)
        assert not {n.id for n in again.live_nodes()} & {n.id for n in lost.live_nodes()}
        assert {g.placement_group for g in gangs} <= {g.name for g in again.placement_groups}
        assert {r.name for r in again.reservations} == reserved
        launches = [a for a in second.actions if a.kind is ActionKind.LAUNCH]
        assert launches and all(a.attempt == 1 for a in launches)
        first_tokens = {a.token for a in first.actions}
        assert not {a.token for a in launches} & first_tokens
        journal = json.dumps([e.key for e in store.entries(plan_id)])
        assert all(a.token in journal for a in launches)
