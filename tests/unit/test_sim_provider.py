"""providers/sim.py: a cloud kept in a file, with the protocol's promises (tokens, tags, errors, limits)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from models.naming import managed_tags, pool_name
from providers.base import (
    CapacityType,
    Conflict,
    InsufficientCapacity,
    LaunchSpec,
    NotFound,
    PlacementGroupSpec,
    Provider,
    ProviderError,
    QuotaExceeded,
    RetryPolicy,
    Throttled,
)
from providers.sim import SimProvider

P5 = "aws:us-east-1:p5.48xlarge"
POOL = pool_name(P5, CapacityType.SPOT)


def _sim(path: Path, **kwargs) -> SimProvider:  # type: ignore[no-untyped-def]
    sim = SimProvider(path, sleep=lambda _s: None, **kwargs)
    sim.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    return sim


def _launch(count: int, token: str = "t1", *, run: str | None = None, group: str | None = None) -> LaunchSpec:
    return LaunchSpec(
        offering=P5,
        capacity=CapacityType.SPOT,
        count=count,
        pool=POOL,
        tags=managed_tags("fleet", pool=POOL, run=run),
        token=token,
        run=run,
        placement_group=group,
    )


def test_it_is_a_provider_and_its_state_outlives_the_process(tmp_path: Path) -> None:
    state = tmp_path / "cloud.json"
    sim = _sim(state)
    assert isinstance(sim, Provider)
    made = sim.launch(_launch(3))
    again = SimProvider(state)  # another run of gpuplan: the same cloud
    nodes = again.inventory("fleet").nodes
    assert sorted(n.id for n in nodes) == sorted(n.id for n in made)
    assert {(n.pool, n.capacity, n.offering) for n in nodes} == {(POOL, CapacityType.SPOT, P5)}
    assert again.inventory("another-plan").nodes == ()  # found by the plan tag only


def test_a_token_is_replayed_not_launched_twice(tmp_path: Path) -> None:
    sim = _sim(tmp_path / "cloud.json")
    first = sim.launch(_launch(2, "same"))
    second = sim.launch(_launch(2, "same"))
    assert [n.id for n in first] == [n.id for n in second]
    assert len(sim.inventory("fleet").nodes) == 2
    sim.launch(_launch(2, "other"))
    assert len(sim.inventory("fleet").nodes) == 4


def test_nodes_boot_then_run(tmp_path: Path) -> None:
    now = [datetime(2027, 2, 1, tzinfo=UTC)]
    sim = SimProvider(tmp_path / "cloud.json", sleep=lambda _s: None, clock=lambda: now[0])
    sim.configure(boot_seconds=90, api_latency_seconds=0)
    sim.launch(_launch(1))
    assert [n.state for n in sim.inventory("fleet").nodes] == ["pending"]
    now[0] += timedelta(seconds=91)
    assert [n.state for n in sim.inventory("fleet").nodes] == ["running"]


def test_capacity_limits_a_gang_all_or_nothing(tmp_path: Path) -> None:
    sim = _sim(tmp_path / "cloud.json")
    sim.configure(capacity={f"{P5}/spot": 5})
    sim.ensure_placement_group(
        PlacementGroupSpec("pg", "us-east-1", P5, 4, "efa", managed_tags("fleet"), "t")
    )
    sim.launch(_launch(2, "a"))
    with pytest.raises(InsufficientCapacity, match="4 nodes asked, 3 available"):
        sim.launch(_launch(4, "b", run="r", group="pg"))
    assert len(sim.inventory("fleet").nodes) == 2  # nothing of the gang was made


def test_faults_fire_once_each_and_throttling_is_retried(tmp_path: Path) -> None:
    waits: list[float] = []
    sim = SimProvider(tmp_path / "cloud.json", sleep=waits.append, retry=RetryPolicy(attempts=3))
    sim.configure(api_latency_seconds=0.0)
    sim.inject_fault("launch", "throttled", times=2)
    assert len(sim.launch(_launch(1, "x"))) == 1  # two throttles, then it went through
    assert len(waits) == 2 and all(0 <= w <= 1.0 for w in waits)
    sim.inject_fault("launch", "throttled", times=5)
    with pytest.raises(Throttled):
        sim.launch(_launch(1, "y"))  # bounded: three attempts, then the error
    sim.inject_fault("launch", "quota-exceeded", match="other-pool")
    sim.launch(_launch(1, "z"))  # the fault matches another pool: not this one
    sim.inject_fault("launch", "quota-exceeded", match=POOL)
    with pytest.raises(QuotaExceeded):
        sim.launch(_launch(1, "w"))


def test_a_fault_after_the_call_acts_and_loses_the_answer(tmp_path: Path) -> None:
    """A timeout: the nodes exist though the caller heard an error, and the same token finds them."""
    sim = _sim(tmp_path / "cloud.json")
    sim.inject_fault("launch", "operation-failed", after=True)
    with pytest.raises(ProviderError) as lost:
        sim.launch(_launch(3, "lost"))
    assert lost.value.launched == ()  # the caller learns nothing of what it made
    assert len(sim.inventory("fleet").live_nodes()) == 3
    again = sim.launch(_launch(3, "lost"))  # the retry with its token: the same three, none new
    assert len(again) == 3 and len(sim.inventory("fleet").live_nodes()) == 3


def test_a_partial_launch_fault_makes_part_and_reports_it(tmp_path: Path) -> None:
    sim = _sim(tmp_path / "cloud.json")
    sim.inject_fault("launch", "insufficient-capacity", made=2)
    with pytest.raises(InsufficientCapacity) as short:
        sim.launch(_launch(5, "part"))
    live = sim.inventory("fleet").live_nodes()
    assert sorted(n.id for n in short.value.launched) == sorted(n.id for n in live) and len(live) == 2
    with pytest.raises(ValueError, match="launch faults"):
        sim.inject_fault("terminate", "conflict", made=1)


def test_groups_are_adopted_when_ours_and_refused_when_not(tmp_path: Path) -> None:
    sim = _sim(tmp_path / "cloud.json")
    spec = PlacementGroupSpec("pg", "us-east-1", P5, 4, "efa", managed_tags("fleet", run="r"), "t")
    first = sim.ensure_placement_group(spec)
    assert sim.ensure_placement_group(spec) == first
    stranger = PlacementGroupSpec("pg", "us-east-1", P5, 4, "efa", managed_tags("someone-else"), "t")
    with pytest.raises(Conflict):
        sim.ensure_placement_group(stranger)
    with pytest.raises(NotFound):
        sim.launch(_launch(2, run="r", group="missing"))


def test_terminate_and_deletes_of_what_is_gone_are_done(tmp_path: Path) -> None:
    sim = _sim(tmp_path / "cloud.json")
    nodes = sim.launch(_launch(2))
    sim.terminate(nodes)
    sim.terminate(nodes)
    assert sim.inventory("fleet").nodes == ()
    group = sim.ensure_placement_group(PlacementGroupSpec("pg", "r", P5, 2, None, managed_tags("fleet"), "t"))
    sim.delete_placement_group(group)
    sim.delete_placement_group(group)
    assert sim.inventory("fleet").placement_groups == ()


def test_interruptions_are_announced_and_reclaimed_nodes_disappear_at_the_deadline(tmp_path: Path) -> None:
    now = [datetime(2026, 12, 6, 12, 0, tzinfo=UTC)]
    sim = _sim(tmp_path / "cloud.json", clock=lambda: now[0])
    first, second = sim.launch(_launch(2))
    sim.interrupt(second.id, "rebalance")
    sim.interrupt(first.id)
    notices = sim.interruptions("fleet")
    assert [(n.node_id, n.kind) for n in notices] == [(second.id, "rebalance"), (first.id, "interruption")]
    assert [n.deadline for n in notices] == [None, now[0] + timedelta(minutes=2)]
    assert [n.id for n in sim.inventory("fleet").nodes] == [first.id, second.id]  # warned, still running
    now[0] += timedelta(minutes=2)
    assert [n.id for n in sim.inventory("fleet").nodes] == [second.id]


def test_concurrent_runs_never_lose_or_share_a_node(tmp_path: Path) -> None:
    state = tmp_path / "cloud.json"
    _sim(state)
    script = textwrap.dedent(
        f"""
        import sys
        from providers.base import CapacityType, LaunchSpec
        from providers.sim import SimProvider
        sim = SimProvider({str(state)!r})
        tags = {{"gpuplan-plan": "fleet"}}
        for k in range(15):
            sim.launch(LaunchSpec("{P5}", CapacityType.SPOT, 1, "p", tags, sys.argv[1] + str(k)))
        """
    )
    workers = [subprocess.Popen([sys.executable, "-c", script, name]) for name in ("a", "b", "c")]
    assert [w.wait(timeout=60) for w in workers] == [0, 0, 0]
    nodes = SimProvider(state).inventory("fleet").nodes
    assert len(nodes) == 45 and len({n.id for n in nodes}) == 45


def test_a_broken_state_file_is_an_input_error(tmp_path: Path) -> None:
    from models.errors import InputError

    state = tmp_path / "cloud.json"
    state.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="not a simulated cloud's state file"):
        SimProvider(state)
    state.write_text(json.dumps({"version": 99}), encoding="utf-8")
    with pytest.raises(InputError, match="version"):
        SimProvider(state)
