"""Effective throughput in the replay (planner/simulate): useful GPU-hours counted by hand on tiny fleets,
the slowdown of a badly placed job, the Kubernetes-default policy (LeastAllocated, pods one by one, no gang
admission) and the saturated regime (a backlog that never runs dry).

Times are hours. Every case says in its docstring what must happen and why; expected figures are worked
out by hand from the job list, not taken from a run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.simulate import Fleet, Job, KubernetesPolicy, Simulator, make_policy
from planner.simulate.events import Backlog
from planner.simulate.fleet import Alloc, ClusterState, Slowdown
from planner.simulate.philly import (
    load_trace,
    replay_saturated,
    throughput_ratio,
    throughput_rows,
    trace_jobs,
)


def replay(jobs: list[Job], fleet: Fleet, policy: str, **options) -> Simulator:
    """Run with invariant checks after every instant; the simulator keeps each job's run."""
    policy_options = options.pop("policy_options", {})
    sim = Simulator(jobs, fleet, make_policy(policy, fleet, **policy_options), check=True, **options)
    sim.result = sim.run()  # type: ignore[attr-defined]
    return sim


def finished(sim: Simulator) -> dict[str, float | None]:
    return {run.job.id: run.finished for run in sim.runs}


# ---- useful GPU-hours and the slowdown of a split gang --------------------------------------------------

SPLIT = Slowdown(cross_node=2.0, cross_leaf=1.5)


def split_case() -> tuple[Fleet, list[Job]]:
    """4 nodes of 8 GPUs, 2 per leaf switch (nodes 0-1, 2-3). ``a`` (8 GPUs, 20 h) takes node 0; gang ``g``
    (2 x 8 GPUs, 10 h) arrives next. First-fit and best-fit put it on nodes 1 and 2: two leaves where
    one would do, so it runs 1.5x slower and ends at 15. Workload-aware keeps it under leaf 1 (2, 3):
    ends at 10."""
    fleet = Fleet(nodes=4, nodes_per_leaf=2)
    return fleet, [Job("a", "t", 0, 20, 8), Job("g", "t", 0, 10, 16, nodes=2)]


@pytest.mark.parametrize(("policy", "g_end"), [("naive", 15.0), ("best-fit", 15.0), ("workload-aware", 10.0)])
def test_split_gang_runs_slower_and_counts_at_full_speed(policy: str, g_end: float) -> None:
    """Window [0, 30). Useful work is each job's GPU-hours at full speed: a 8 x 20 = 160, g 16 x 10 = 160,
    whatever the placement; a slowed g holds 16 x 15 = 240 GPU-hours of which 80 are lost to the slowdown."""
    fleet, jobs = split_case()
    sim = replay(jobs, fleet, policy, start=0.0, end=30.0, slowdown=SPLIT)
    assert finished(sim) == {"a": 20.0, "g": g_end}
    result = sim.result
    assert result.useful_gpu_hours == pytest.approx(320.0)
    assert result.completed_gpu_hours == pytest.approx(320.0)
    assert result.slowdown_gpu_hours == pytest.approx(16 * g_end - 160.0)
    assert result.slowed_starts == (1 if g_end > 10 else 0)
    assert result.throughput_per_day == pytest.approx(320.0 / (30.0 / 24.0))


@pytest.mark.parametrize(
    ("policy", "useful", "completed"),
    [("naive", 56 + 16 * 7 / 1.5, 0.0), ("workload-aware", 56 + 16 * 5, 160.0)],
)
def test_window_counts_only_the_work_inside_it(policy: str, useful: float, completed: float) -> None:
    """Window [5, 12): ``a`` runs all of it (8 x 7 = 56). The slowed g (naive, runs 0-15 at 1/1.5) does
    16 x 7 / 1.5 inside it and has not completed by 12; the one-leaf g (workload-aware, 0-10) does
    16 x 5 and completes inside it (its 160 GPU-hours count as completed)."""
    fleet, jobs = split_case()
    sim = replay(jobs, fleet, policy, start=0.0, end=12.0, measure_from=5.0, slowdown=SPLIT)
    assert sim.result.useful_gpu_hours == pytest.approx(useful)
    assert sim.result.completed_gpu_hours == pytest.approx(completed)


def test_cross_node_slowdown_when_pods_spread_over_nodes() -> None:
    """Kubernetes launching a job as pods of 4 GPUs: an 8-GPU job (6 h) on two empty 8-GPU nodes. The first
    pod goes to either node; the second scores (8 - 4) * 100 // 8 = 50 on the empty node against 0 on
    the half-full one, so it spreads over both: cross-node, 2x slower, ends at 12. As one pod of 8 (the
    default shape) it stays on one node and ends at 6."""
    fleet = Fleet(nodes=2, nodes_per_leaf=None)
    jobs = [Job("j", "t", 0, 6, 8)]
    spread = replay(jobs, fleet, "kubernetes", slowdown=SPLIT, policy_options={"pod_gpus": 4})
    assert finished(spread) == {"j": 12.0}
    assert spread.result.useful_gpu_hours == pytest.approx(48.0)
    whole = replay(jobs, fleet, "kubernetes", slowdown=SPLIT)
    assert finished(whole) == {"j": 6.0}


def test_preempted_work_since_the_checkpoint_does_not_count() -> None:
    """One node. Batch ``p`` (8 GPUs, 10 h, checkpoints every hour) runs from 0; production ``q`` (8 GPUs,
    2 h) arrives at 2.5 and evicts it: 2 h were saved, 0.5 h (4 GPU-hours) lost. q runs 2.5-4.5, p resumes
    with 8 h left and ends at 12.5. GPUs were busy 100 GPU-hours; useful = 100 - 4 = 96."""
    fleet = Fleet(nodes=1)
    jobs = [
        Job("p", "t", 0, 10, 8, priority="batch", preemptible=True, checkpoint_hours=1.0),
        Job("q", "t", 2.5, 2, 8, priority="production"),
    ]
    sim = replay(jobs, fleet, "workload-aware", start=0.0, end=20.0)
    assert finished(sim) == {"p": 12.5, "q": 4.5}
    assert sim.result.lost_gpu_hours == pytest.approx(4.0)
    assert sim.result.useful_gpu_hours == pytest.approx(96.0)


# ---- the Kubernetes-default policy ----------------------------------------------------------------------


def state_with_free(fleet: Fleet, free: list[int]) -> ClusterState:
    state = ClusterState(fleet)
    for node, left in enumerate(free):
        if left < fleet.gpus_per_node:
            state.take_whole(Alloc(), node, fleet.gpus_per_node - left)
    return state


def least_allocated(free: int, gpus: int, per_node: int = 8) -> int:
    """The NodeResourcesFit LeastAllocated score, computed from the Kubernetes formula: per resource
    (capacity - requested) * 100 / capacity in integers, cpu and memory of weight 1 averaged; both
    resources in proportion to GPUs, so both scores are the same."""
    cpu_capacity, cpu_per_gpu = 192_000, 24_000  # millicores: a p5-like node, a GPU's share of it
    cpu = (cpu_capacity - (per_node - free + gpus) * cpu_per_gpu) * 100 // cpu_capacity
    memory_capacity = 2048 * 2**30
    memory = (
        (memory_capacity - (per_node - free + gpus) * memory_capacity // per_node) * 100 // memory_capacity
    )
    return (cpu * 1 + memory * 1) // 2


def test_least_allocated_picks_the_emptiest_node() -> None:
    """Free GPUs [2, 6, 4]: a 2-GPU pod scores 0, 50 and 25 and goes to node 1 (best-fit would take
    node 0, the tightest); a 3-GPU pod cannot use node 0 and scores 37 vs 12: node 1 again."""
    fleet = Fleet(nodes=3)
    state = state_with_free(fleet, [2, 6, 4])
    policy = KubernetesPolicy(fleet)
    assert (
        [policy.score(f, 2) for f in (2, 6, 4)] == [least_allocated(f, 2) for f in (2, 6, 4)] == [0, 50, 25]
    )
    assert policy.place_pod(state, 2) == 1
    assert policy.place_pod(state, 3) == 1
    assert make_policy("best-fit", fleet).place_pod(state, 2) == 0
    assert policy.place_pod(state, 7) is None


def test_equal_scores_are_drawn_at_random() -> None:
    """Two empty nodes score alike: the choice is a seeded draw (selectHost), so over seeds both come up."""
    fleet = Fleet(nodes=2)
    chosen = {KubernetesPolicy(fleet, seed=seed).place_pod(ClusterState(fleet), 1) for seed in range(20)}
    assert chosen == {0, 1}


def test_only_the_first_feasible_nodes_are_scored_on_big_clusters() -> None:
    """200 nodes: kube-scheduler scores max(100, 200 x (50 - 200 // 125) %) = 100 feasible nodes, from a
    start that rotates. Node 150 is the only empty node (the others have 4 free): the first pod, searching
    nodes 0-99, cannot see it; the second searches from 100 and takes it."""
    fleet = Fleet(nodes=200)
    free = [4] * 200
    free[150] = 8
    state = state_with_free(fleet, free)
    policy = KubernetesPolicy(fleet)
    first = policy.place_pod(state, 1)
    assert first is not None and first < 100
    state.take_whole(Alloc(), first, 1)
    assert policy.place_pod(state, 1) == 150


def test_kubernetes_gangs_hold_gpus_half_placed_and_do_not_block_the_queue() -> None:
    """3 nodes of 8. At 0: ``a`` (4 GPUs) and ``s`` (8 GPUs) run 10 h (LeastAllocated: on two different
    nodes). At 1, gang ``b`` (2 x 8, 5 h) places one pod on the empty node and holds it; at 2, gang
    ``c`` (2 x 4, 3 h) is not blocked behind b: its first pod takes the 4 GPUs left next to ``a`` and
    holds them too. From 2 to 10 every GPU is allocated and only a and s (12) are used. At 10 b's second
    pod takes s's node (b: 10-15) and c's second pod lands next to its first (same node, so c is not
    spread): 10-13. Naive stops at b (head of line): c holds nothing and waits until b ends."""
    fleet = Fleet(nodes=3)
    jobs = [
        Job("a", "t", 0, 10, 4),
        Job("s", "t", 0, 10, 8),
        Job("b", "t", 1, 5, 16, nodes=2),
        Job("c", "t", 2, 3, 8, nodes=2),
    ]
    sim = replay(jobs, fleet, "kubernetes", slowdown=SPLIT)
    assert finished(sim) == {"a": 10.0, "s": 10.0, "b": 15.0, "c": 13.0}
    timeline = sim.result.timeline
    at = timeline[timeline["hour"] == 2.0].iloc[-1]
    assert (at["allocated_gpus"], at["used_gpus"]) == (24.0, 12.0)
    at = timeline[timeline["hour"] == 1.0].iloc[-1]
    assert (at["allocated_gpus"], at["used_gpus"]) == (20.0, 12.0)

    naive = replay(jobs, fleet, "naive", slowdown=SPLIT)
    row = naive.result.timeline
    at = row[row["hour"] == 2.0].iloc[-1]
    assert (at["allocated_gpus"], at["used_gpus"]) == (20.0, 12.0)
    naive_ends = finished(naive)
    assert naive_ends["b"] == 15.0 and naive_ends["c"] is not None and naive_ends["c"] >= 15.0 + 3.0


# ---- the saturated regime -------------------------------------------------------------------------------


def test_backlog_keeps_the_fleet_busy_and_the_queue_non_empty() -> None:
    """One node of 8, 200 one-GPU jobs of 1 h fed by a backlog of 16 GPUs: at every instant of the window
    [2, 6) something waits, all 8 GPUs work, so useful = 8 x 4 = 32 GPU-hours, for every policy; the
    jobs start in the order given."""
    fleet = Fleet(nodes=1)
    jobs = [Job(f"j{i:03d}", "t", 0, 1, 1) for i in range(200)]
    for policy in ("naive", "kubernetes", "best-fit", "workload-aware"):
        sim = replay(
            jobs, fleet, policy, start=0.0, end=6.0, measure_from=2.0, backlog=Backlog(gpus=16, jobs=8)
        )
        result = sim.result
        assert result.empty_queue_hours == 0.0, policy
        window = result.timeline[(result.timeline["hour"] >= 2.0) & (result.timeline["hour"] < 6.0)]
        assert (window["queued"] > 0).all(), policy
        assert result.useful_gpu_hours == pytest.approx(32.0), policy
        started = [
            run.job.id
            for run in sorted(
                sim.runs, key=lambda r: (99.0 if r.first_start is None else r.first_start, r.seq)
            )
        ]
        assert started[:48] == [f"j{i:03d}" for i in range(48)], policy


def test_a_feed_that_runs_dry_is_not_saturated() -> None:
    """12 one-GPU jobs of 1 h on 8 GPUs: after hour 1, 4 run and nothing waits; the window [0, 3) has
    2 hours with an empty queue."""
    fleet = Fleet(nodes=1)
    jobs = [Job(f"j{i}", "t", 0, 1, 1) for i in range(12)]
    result = replay(jobs, fleet, "kubernetes", start=0.0, end=3.0, backlog=Backlog(gpus=16, jobs=8)).result
    assert result.empty_queue_hours == pytest.approx(2.0)
    assert result.useful_gpu_hours == pytest.approx(12.0)


def test_saturated_philly_replay_on_a_tiny_trace(tmp_path: Path) -> None:
    """The trace feed: submission order from the start day, then the jobs before it. Four one-GPU jobs of
    2 h a day on 8 GPUs cannot keep it busy unless all are queued at once. A backlog of 8 one-GPU jobs:
    8 run from 0 to 2 while 8 wait, so the window [1, 2) is saturated and fully used (8 GPU-hours);
    after 2 the feed is dry."""
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for day in range(4):
        for hour in range(4):
            lines.append(f"2017-10-0{day + 1} {hour + 1:02d}:00:00,7200,1,7200,vc{day}")
    path = tmp_path / "philly.csv"
    path.write_text("\n".join(lines) + "\n")
    trace = load_trace(path)
    from datetime import datetime

    jobs = trace_jobs(trace, start=datetime(2017, 10, 3))
    assert [j.team for j in jobs[:4]] == ["vc2"] * 4 and jobs[8].team == "vc0" and len(jobs) == 16
    fleet = Fleet(nodes=1)
    results = replay_saturated(
        jobs, fleet, ("kubernetes", "workload-aware"), warmup_hours=1.0, days=1 / 24, backlog_factor=1.0
    )
    rows = throughput_rows(results)
    assert [row["useful_gpu_h_per_day"] for row in rows] == [pytest.approx(8.0 * 24)] * 2
    assert all(row["saturated"] for row in rows)
    assert throughput_ratio(rows) == pytest.approx(1.0)
