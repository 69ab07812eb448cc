"""`gpuplan provision --apply` without the daemon: launch tokens unique per attempt (issue 35 point 4).

A client token comes from plan id + target + period + counts. After a whole gang and every pool are lost
within their launch hour, the counts are those of the first launch again, so the token was too: EC2
(ClientToken) and Compute Engine (requestId) answered the second apply with the first launch, gpuplan said
"done" and nothing ran until the next period. Here the mixed-fleet week is applied through the CLI, every
node is terminated and the gang's placement group and reservation deleted outside gpuplan, and a second
apply in the same period makes them all again under new tokens (``created.json`` beside the plan records
what the first made): the fleet holds its nodes again, on new node ids.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from stand_in_settings import aws_site, gcp_settings
from typer.testing import CliRunner

from models.actions import ActionKind, ActionPlan
from models.plan import Plan
from planner.cli import app
from planner.operations.provision import SETTLE
from providers.base import Provider
from providers.config import open_provider


@dataclass
class Cloud:
    """A provider's stand-in: the CLI flags that reach it, and the provider the test loses the fleet with."""

    name: str
    flags: list[str]
    provider: Provider


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _config(tmp_path: Path, section: str, body: dict[str, Any]) -> list[str]:
    path = tmp_path / "providers.yaml"
    path.write_text(yaml.safe_dump({section: body}), encoding="utf-8")
    return ["--provider-config", str(path)]


def _sim(tmp_path: Path) -> Iterator[Cloud]:
    from providers.sim import SimProvider

    state = tmp_path / "sim.json"
    sim = SimProvider(state)
    sim.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    yield Cloud("sim", ["--sim-state", str(state)], sim)


def _aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cloud]:
    """moto in process for EC2, with the stand-in's hooks (placement groups, reservations, their tokens)
    on every session the CLI makes."""
    with aws_site(monkeypatch) as body:
        yield Cloud("aws", _config(tmp_path, "aws", body), open_provider("aws", {"aws": body}))


def _gcp(tmp_path: Path) -> Iterator[Cloud]:
    from gcp_fake import FakeCompute, FakeServer

    compute = FakeCompute(project="fleet-project")
    with FakeServer(compute):
        body = gcp_settings(compute.url)
        yield Cloud("gcp", _config(tmp_path, "gcp", body), open_provider("gcp", {"gcp": body}))


@pytest.fixture(params=["sim", "aws", "gcp"])
def cloud(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cloud]:
    if request.param == "aws":
        yield from _aws(tmp_path, monkeypatch)
    elif request.param == "gcp":
        yield from _gcp(tmp_path)
    else:
        yield from _sim(tmp_path)


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    return result.exit_code, result.output


def _plan(week_plan: Callable[[str], Path], tmp_path: Path, cloud: str) -> tuple[Path, str]:
    plan_dir = tmp_path / "plan"
    shutil.copytree(week_plan("all" if cloud == "sim" else cloud), plan_dir)
    gang = next(t for t in Plan.read(plan_dir).document.training if t.nodes > 1)
    return plan_dir, f"{gang.start + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}"


def _actions(plan_dir: Path) -> ActionPlan:
    path = plan_dir.with_name("plan.provision") / "actions.json"
    return ActionPlan.model_validate_json(path.read_text(encoding="utf-8"))


def _held(provider: Provider, plan_id: str) -> dict[str, int]:
    held: dict[str, int] = {}
    for node in provider.inventory(plan_id).live_nodes():
        key = node.run or node.pool
        held[key] = held.get(key, 0) + 1
    return held


def _age(record: Path, by: timedelta) -> None:
    """``created.json`` as a run ``by`` later reads it: every create came back done that much earlier."""
    data = json.loads(record.read_text(encoding="utf-8"))
    for entry in data["creates"].values():
        at = datetime.fromisoformat(entry["at"].replace("Z", "+00:00")) - by
        entry["at"] = f"{at:%Y-%m-%dT%H:%M:%S}Z"
    record.write_text(json.dumps(data), encoding="utf-8")


def test_a_fleet_lost_in_its_launch_hour_is_made_again_by_the_next_apply(
    cloud: Cloud, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir, at = _plan(week_plan, tmp_path, cloud.name)
    base = ["provision", str(plan_dir), "--cloud", cloud.name, "--at", at, "--quiet", *cloud.flags]
    code, output = _run([*base, "--apply"])
    assert code == 0, output
    first = _actions(plan_dir)
    wanted = {a.run or a.target: a.target_nodes for a in first.actions if a.kind is ActionKind.LAUNCH}
    assert any(a.run for a in first.actions if a.kind is ActionKind.LAUNCH), "the hour has a gang"
    assert _held(cloud.provider, first.plan_id) == wanted

    # the whole gang and every pool lost at once, and the gang's group and reservation deleted outside
    lost = cloud.provider.inventory(first.plan_id)
    assert lost.placement_groups and lost.reservations
    cloud.provider.terminate(list(lost.live_nodes()))
    for reservation in lost.reservations:
        cloud.provider.release_reservation(reservation)
    for group in lost.placement_groups:
        cloud.provider.delete_placement_group(group)
    assert _held(cloud.provider, first.plan_id) == {}

    # just after, an absent group or reservation may be the cloud's read lag: not a new attempt yet
    code, output = _run(base)
    assert code == 0, output
    assert not [a for a in _actions(plan_dir).actions if a.attempt and a.kind is not ActionKind.LAUNCH]

    record = plan_dir.with_name("plan.provision") / "created.json"
    _age(record, SETTLE)  # past the cloud's read lag: an absent result is gone, not yet listed
    code, output = _run([*base, "--apply"])
    assert code == 0, output
    assert _held(cloud.provider, first.plan_id) == wanted  # the fleet holds its nodes again
    assert "attempt 2: the first launch's nodes are gone" in output
    assert "attempt 2: the placement group made first is gone" in output
    second = _actions(plan_dir)
    creates = [a for a in second.actions if a.kind is not ActionKind.TERMINATE]
    assert {a.kind for a in creates} == {a.kind for a in first.actions}
    assert creates and all(a.attempt == 1 for a in creates), [(a.kind, a.attempt) for a in creates]
    assert f"{len(creates)} creates as a new attempt (what the earlier attempt made is gone)" in output
    assert not {a.token for a in creates} & {a.token for a in first.actions}
    assert all(second.results[a.id].status == "done" for a in second.actions)
    again = cloud.provider.inventory(first.plan_id)
    assert not {n.id for n in again.live_nodes()} & {n.id for n in lost.live_nodes()}
    assert {g.name for g in again.placement_groups} == {g.name for g in lost.placement_groups}
    assert {r.name for r in again.reservations} == {r.name for r in lost.reservations}

    code, output = _run([*base, "--apply"])
    assert code == 0 and "0 actions: the fleet matches the plan" in output, output


def test_a_record_that_cannot_be_read_or_written_stops_provision_before_anything_is_made(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    sim = next(_sim(tmp_path))
    plan_dir, at = _plan(week_plan, tmp_path, "sim")
    base = ["provision", str(plan_dir), "--cloud", "sim", "--at", at, "--quiet", *sim.flags, "--apply"]
    beside = plan_dir.with_name("plan.provision")
    beside.mkdir()
    (beside / "created.json").write_text('{"schema": "gpuplan.created/v1", "creates": {"t": 1}}')
    code, output = _run(base)
    assert code == 2
    assert "created.json" in output and "creates.t" in output and len(output.strip().splitlines()) == 1
    (beside / "created.json").unlink()
    beside.rmdir()
    beside.write_text("not a directory")  # where the record goes cannot be written
    code, output = _run(base)
    assert code == 2 and "cannot write the record of what provision made" in output, output
    assert sim.provider.inventory("mixed-fleet-week-all").live_nodes() == ()
    code, output = _run([*base, "--actions", str(tmp_path / "created.json")])
    assert code == 2 and "--actions" in output and "record" in output, output
