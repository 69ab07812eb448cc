"""The trace replay (planner/simulate): hand-made traces whose outcome under each policy is known, invariants
on random traces, and the Philly reader, week builder and fleet sizing.

Times are hours. Every hand-made case says in its docstring what must happen and why.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from planner.simulate import Fleet, Job, Simulator, WorkloadAwarePolicy, make_policy, simulate
from planner.simulate.philly import (
    DEFAULT_SERVICES,
    Service,
    build_week,
    busiest_start,
    gpu_load,
    load_trace,
    quotas,
    service_jobs,
    size_fleet,
)

POLICIES = ("naive", "best-fit", "workload-aware")
PHILLY = Path(__file__).resolve().parents[3] / "shared" / "data" / "philly-jobs-pollux" / "philly.csv"


def replay(jobs: list[Job], fleet: Fleet, policy: str, **options) -> Simulator:
    """Run with invariant checks after every instant; return the simulator to inspect each job."""
    sim = Simulator(jobs, fleet, make_policy(policy, fleet), check=True, **options)
    sim.result = sim.run()  # type: ignore[attr-defined]
    return sim


def starts(sim: Simulator) -> dict[str, float | None]:
    return {run.job.id: run.first_start for run in sim.runs}


# ---- hand-made traces -----------------------------------------------------------------------------------


def test_head_of_line_blocking_versus_backfill() -> None:
    """Two 8-GPU nodes. ``a`` holds node 0 for 10 h; gang ``b`` (2 x 8) arrives at 1 and cannot start before
    10; ``c`` (4 GPUs, 3 h) arrives at 2. FIFO makes ``c`` wait behind ``b`` until 15; backfill starts it at
    once, since it ends (5) before ``b``'s reserved start (10). ``b`` starts at 10 either way."""
    fleet = Fleet(nodes=2)
    jobs = [Job("a", "t", 0, 10, 8), Job("b", "t", 1, 5, 16, nodes=2), Job("c", "t", 2, 3, 4)]
    for policy, c_start in (("naive", 15.0), ("best-fit", 15.0), ("workload-aware", 2.0)):
        sim = replay(jobs, fleet, policy)
        assert starts(sim) == {"a": 0.0, "b": 10.0, "c": c_start}, policy
        assert sim.result.completions == 3


def test_backfill_never_delays_the_reserved_gang() -> None:
    """As above, but ``c`` runs 20 h: starting it now on node 1 would delay ``b`` past 10, so backfill
    must not start it there; it waits and starts after ``b`` (at 15)."""
    fleet = Fleet(nodes=2)
    jobs = [Job("a", "t", 0, 10, 8), Job("b", "t", 1, 5, 16, nodes=2), Job("c", "t", 2, 20, 4)]
    sim = replay(jobs, fleet, "workload-aware")
    assert starts(sim) == {"a": 0.0, "b": 10.0, "c": 15.0}


def test_gang_all_or_nothing_holds_no_gpus_naive_holds_half_a_gang() -> None:
    """Between 1 and 10 the naive policy has placed one pod of ``b`` on node 1 and holds it (allocated, not
    used); the workload-aware policy admits ``b`` whole at 10 and holds nothing before."""
    fleet = Fleet(nodes=2)
    jobs = [Job("a", "t", 0, 10, 8), Job("b", "t", 1, 5, 16, nodes=2)]
    for policy, held in (("naive", 8.0), ("workload-aware", 0.0)):
        sim = replay(jobs, fleet, policy)
        timeline = sim.result.timeline
        row = timeline[timeline["hour"] == 1.0].iloc[-1]
        assert row["allocated_gpus"] == 8.0 + held, policy
        assert row["used_gpus"] == 8.0, policy
    naive = replay(jobs, fleet, "naive").result
    aware = replay(jobs, fleet, "workload-aware").result
    # over 15 h: naive allocates 8*10 + 8*9 (held) + 16*5 = 232 GPU-h, uses 160
    assert naive.allocation_pct == pytest.approx(232 / (15 * 16) * 100)
    assert naive.utilization_pct == pytest.approx(160 / (15 * 16) * 100)
    assert aware.allocation_pct == aware.utilization_pct == pytest.approx(160 / (15 * 16) * 100)


def test_gang_kept_under_one_leaf() -> None:
    """Four nodes, two per leaf. ``a`` (4 GPUs) on node 0, ``b`` and ``c`` (8 GPUs) on nodes 1 and 2; the
    2 x 4 gang ``g`` arriving at 1 fits now only across leaves (node 0 in leaf 0, node 3 in leaf 1).
    Naive places it so (split); workload-aware waits until ``b`` ends at 5 and places it in leaf 0;
    allowed to spread at once (``split_after_hours=0``) it starts at 1, split."""
    fleet = Fleet(nodes=4, nodes_per_leaf=2)
    jobs = [
        Job("a", "t", 0, 20, 4),
        Job("b", "t", 0, 5, 8),
        Job("c", "t", 0, 20, 8),
        Job("g", "t", 1, 2, 8, nodes=2),
    ]
    naive = replay(jobs, fleet, "naive")
    assert starts(naive)["g"] == 1.0 and naive.result.gangs_split == 1
    aware = replay(jobs, fleet, "workload-aware")
    assert starts(aware)["g"] == 5.0
    assert aware.result.gangs_started == 1 and aware.result.gangs_split == 0
    gang = next(r for r in aware.runs if r.job.id == "g")
    assert gang.finished == 7.0
    eager = Simulator(jobs, fleet, WorkloadAwarePolicy(fleet, split_after_hours=0.0), check=True).run()
    assert eager.gangs_split == 1


def test_gang_larger_than_a_leaf_may_spread() -> None:
    """A gang wider than a leaf can never sit under one: it must start (split), not wait forever."""
    fleet = Fleet(nodes=4, nodes_per_leaf=2)
    sim = replay([Job("g", "t", 0, 1, 24, nodes=3)], fleet, "workload-aware")
    assert starts(sim)["g"] == 0.0 and sim.result.gangs_split == 1


def test_production_preempts_batch_from_its_last_checkpoint() -> None:
    """One node full of eight 1-GPU batch jobs (10 h, checkpoint every 0.5 h). A production replica arrives at
    1.25 h: workload-aware evicts one batch job (0.25 h of work lost since its 1.0 h checkpoint), the
    replica runs 1.25-3.25, the batch job restarts then with 9 h left and ends at 12.25. Naive does not
    preempt: the replica waits until 10."""
    fleet = Fleet(nodes=1)
    batch = [Job(f"b{i}", "lab", 0, 10, 1, priority="batch", preemptible=True) for i in range(8)]
    serve = Job("web", "prod", 1.25, 2, 1, priority="production", kind="inference")
    aware = replay([*batch, serve], fleet, "workload-aware")
    assert aware.result.preemptions == 1
    assert aware.result.lost_gpu_hours == pytest.approx(0.25)
    assert starts(aware)["web"] == 1.25
    finished = sorted(r.finished for r in aware.runs if r.job.id.startswith("b"))
    assert finished == pytest.approx([10.0] * 7 + [12.25])
    naive = replay([*batch, serve], fleet, "naive")
    assert naive.result.preemptions == 0 and starts(naive)["web"] == 10.0


def test_standard_work_is_never_preempted() -> None:
    fleet = Fleet(nodes=1)
    jobs = [
        Job("s", "lab", 0, 10, 8, priority="standard"),
        Job("web", "prod", 1, 2, 1, priority="production", kind="inference"),
    ]
    sim = replay(jobs, fleet, "workload-aware")
    assert sim.result.preemptions == 0 and starts(sim)["web"] == 10.0


def test_fair_share_puts_teams_under_quota_first() -> None:
    """Team A runs 8 GPUs (quota 4); A2 (A) arrives at 1, B1 (B, quota 4, using nothing) at 2. When 4 GPUs
    free up at 5, B1 goes first although A2 arrived earlier; without quotas, arrival order decides."""
    fleet = Fleet(nodes=1)
    jobs = [
        Job("A-long", "A", 0, 10, 4),
        Job("A-short", "A", 0, 5, 4),
        Job("A2", "A", 1, 1, 4),
        Job("B1", "B", 2, 8, 4),
    ]
    fair = replay(jobs, fleet, "workload-aware", quotas={"A": 4, "B": 4})
    assert starts(fair)["B1"] == 5.0 and starts(fair)["A2"] == 10.0
    plain = replay(jobs, fleet, "workload-aware")
    assert starts(plain)["A2"] == 5.0


def test_production_goes_before_earlier_standard_work() -> None:
    fleet = Fleet(nodes=1)
    jobs = [
        Job("s0", "lab", 0, 4, 8),
        Job("s1", "lab", 1, 4, 8),
        Job("web", "prod", 2, 1, 8, priority="production", kind="inference"),
    ]
    aware = replay(jobs, fleet, "workload-aware")
    assert starts(aware)["web"] == 4.0 and starts(aware)["s1"] == 5.0
    naive = replay(jobs, fleet, "naive")
    assert starts(naive)["s1"] == 4.0 and starts(naive)["web"] == 8.0


def small(i: int, memory: float = 9.0, arrival: float = 0.0) -> Job:
    return Job(
        f"r{i}",
        "svc",
        arrival,
        1.0,
        memory / 80,
        gpu_memory_gb=memory,
        priority="production",
        kind="inference",
    )


def test_mig_packs_seven_small_replicas_on_one_gpu() -> None:
    """Seven 9 GB replicas on one H100: seven 1g.10gb MIG slices run at once under workload-aware; naive
    rounds each up to the whole GPU and runs them one after another."""
    fleet = Fleet(nodes=1, gpus_per_node=1, gpu_model="H100")
    jobs = [small(i) for i in range(7)]
    aware = replay(jobs, fleet, "workload-aware")
    assert all(s == 0.0 for s in starts(aware).values())
    assert aware.result.allocation_pct == pytest.approx(100.0)  # 7 of 7 compute slices
    assert aware.result.utilization_pct == pytest.approx(7 * 9 / 80 * 100)
    naive = replay(jobs, fleet, "naive")
    assert sorted(starts(naive).values()) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert naive.result.utilization_pct == pytest.approx(9 / 80 * 100)  # one replica on a whole GPU
    eighth = replay([*jobs, small(7)], fleet, "workload-aware")
    assert starts(eighth)["r7"] == 1.0  # an eighth does not fit: 7 compute slices per GPU


def test_mig_mixed_profiles_respect_slice_geometry() -> None:
    """A 35 GB replica takes 3g.40gb. Placed at memory slice 4 (not 0) it leaves slices 0-3 for four
    1g.10gb instances (1g may not start at slice 7): 3 + 4 = 7 compute slices, a full GPU. Nothing
    overlaps (check=True) and allocation never exceeds the GPU."""
    fleet = Fleet(nodes=1, gpus_per_node=1, gpu_model="H100")
    jobs = [small(0, 35.0), *(small(i, 9.0) for i in range(1, 8))]
    sim = replay(jobs, fleet, "workload-aware")
    at_zero = sum(1 for s in starts(sim).values() if s == 0.0)
    assert at_zero == 5  # 3g.40gb + four 1g.10gb: 3 + 4 = 7 compute slices, 4 + 4 memory slices
    assert sim.result.timeline["allocated_gpus"].max() <= 1.0 + 1e-9


def test_gpu_shares_on_a_gpu_without_mig() -> None:
    """L40S has no MIG: small requests share a GPU by fraction (four 0.25 shares fit, a fifth waits)."""
    fleet = Fleet(nodes=1, gpus_per_node=1, gpu_model="L40S", gpu_memory_gb=48)
    jobs = [Job(f"s{i}", "svc", 0, 1, 0.25, kind="inference") for i in range(5)]
    sim = replay(jobs, fleet, "workload-aware")
    assert sorted(starts(sim).values()) == [0.0, 0.0, 0.0, 0.0, 1.0]


def test_small_jobs_avoid_breaking_up_free_nodes() -> None:
    """Node 0 is free, node 1 has 4 GPUs busy until 10. The fragmentation-aware score puts a 1-GPU job on
    node 1, keeping node 0 whole for the 8-GPU job that follows; first-fit breaks up node 0 and the 8-GPU
    job waits until node 1 empties at 10."""
    fleet = Fleet(nodes=2)
    jobs = [
        Job("pad", "t", 0, 0.5, 8),  # takes node 0 for half an hour so that x lands on node 1
        Job("x", "t", 0, 10, 4),
        Job("one", "t", 1, 10, 1),
        Job("eight", "t", 2, 1, 8),
    ]
    assert starts(replay(jobs, fleet, "workload-aware"))["eight"] == 2.0
    assert starts(replay(jobs, fleet, "naive"))["eight"] == 10.0


def test_expired_replicas_leave_the_queue() -> None:
    """A replica whose demand window passes while it waits is dropped (not run late) and counted."""
    fleet = Fleet(nodes=1, gpus_per_node=1)
    jobs = [
        Job("busy", "t", 0, 5, 1),
        Job("late", "svc", 1, 2, 1, kind="inference", end_by=3.0),
    ]
    sim = replay(jobs, fleet, "naive", end=10.0)
    assert sim.result.expired_replicas == 1 and starts(sim)["late"] is None


def test_a_job_that_can_never_fit_is_rejected_not_queued() -> None:
    fleet = Fleet(nodes=1)
    sim = replay([Job("huge", "t", 0, 1, 16, nodes=2), Job("ok", "t", 1, 1, 1)], fleet, "naive")
    assert sim.result.rejected == 1 and starts(sim)["ok"] == 1.0


def test_job_validation() -> None:
    with pytest.raises(ValueError, match="priority"):
        Job("x", "t", 0, 1, 1, priority="urgent")
    with pytest.raises(ValueError, match="split evenly"):
        Job("x", "t", 0, 1, 12, nodes=5)
    with pytest.raises(ValueError, match="fraction"):
        Job("x", "t", 0, 1, 0.5, nodes=2)
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("fastest", Fleet(nodes=1))


# ---- invariants on random traces ------------------------------------------------------------------------


def random_jobs(seed: int, count: int = 300) -> list[Job]:
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        kind = rng.random()
        arrival = rng.uniform(0, 48)
        if kind < 0.2:  # small inference replica
            memory = rng.choice([9.0, 18.0, 35.0])
            jobs.append(
                Job(
                    f"i{i}", rng.choice(["web", "search"]), arrival, rng.uniform(0.5, 6), memory / 80,
                    gpu_memory_gb=memory, priority="production", kind="inference",
                )
            )  # fmt: skip
        elif kind < 0.3:  # gang
            nodes = rng.choice([2, 3])
            jobs.append(Job(f"g{i}", rng.choice("ab"), arrival, rng.uniform(1, 10), 8 * nodes, nodes=nodes))
        else:
            gpus = rng.choice([1, 1, 1, 2, 4, 8])
            batch = gpus == 1
            jobs.append(
                Job(
                    f"j{i}", rng.choice("abc"), arrival, rng.expovariate(1 / 3), gpus,
                    priority="batch" if batch else "standard", preemptible=batch,
                )
            )  # fmt: skip
    return jobs


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("policy", POLICIES)
def test_random_trace_invariants(seed: int, policy: str) -> None:
    """Never over-allocated (checked after every instant), every job done exactly once (its last run
    whole), waits >= 0, utilization <= allocation <= 100 %, and the timeline consistent with the totals."""
    jobs = random_jobs(seed)
    fleet = Fleet(nodes=6, nodes_per_leaf=3)
    sim = replay(jobs, fleet, policy, quotas={"a": 12, "b": 12, "c": 12, "web": 6, "search": 6})
    result = sim.result
    assert result.rejected == 0
    assert all(run.finished is not None and run.started is None for run in sim.runs)
    assert all(run.first_start is not None and run.first_start >= run.job.arrival for run in sim.runs)
    assert result.completions == len(jobs)
    assert not sim.running and not sim.queue
    assert sim.state.allocated == pytest.approx(0.0, abs=1e-9)
    assert sum(sim.state.free) == fleet.total_gpus
    assert 0 <= result.utilization_pct <= result.allocation_pct + 1e-9 <= 100 + 1e-6
    timeline = result.timeline
    assert (timeline["allocated_gpus"] <= fleet.total_gpus + 1e-9).all()
    assert (timeline["used_gpus"] <= timeline["allocated_gpus"] + 1e-9).all()
    assert (timeline["fragmented_gpus"] >= -1e-9).all()
    # time-weighted use = the work done (plus work lost to preemption and rerun)
    work = sum(j.gpus * j.duration for j in jobs)
    span = result.window[1] - result.window[0]
    used = result.utilization_pct / 100 * span * fleet.total_gpus
    assert used == pytest.approx(work + result.lost_gpu_hours, rel=1e-6)
    if policy != "workload-aware":
        assert result.preemptions == 0
    else:
        assert result.gangs_split == 0  # every gang here fits one leaf of 3 nodes


def test_workload_aware_beats_naive_on_random_mixed_trace() -> None:
    """Not a proof, a sanity check on the story: less waiting and more useful work per allocated GPU."""
    jobs = random_jobs(7, 400)
    fleet = Fleet(nodes=5, nodes_per_leaf=5)
    naive = simulate(jobs, fleet, "naive", end=60.0)
    aware = simulate(jobs, fleet, "workload-aware", end=60.0)
    assert aware.overall_delay["mean_h"] < naive.overall_delay["mean_h"]
    assert aware.utilization_pct / aware.allocation_pct > naive.utilization_pct / naive.allocation_pct


def test_measure_window_and_warmup_jobs() -> None:
    """Metrics cover [measure_from, end): a fleet fully busy only before the window measures 0 %; jobs
    marked counted=False stay out of the queueing statistics."""
    fleet = Fleet(nodes=1)
    jobs = [Job("warm", "t", 0, 5, 8, counted=False), Job("w", "t", 6, 2, 8)]
    result = simulate(jobs, fleet, "naive", start=0, end=10, measure_from=5)
    assert result.allocation_pct == pytest.approx(2 * 8 / (5 * 8) * 100)
    assert result.overall_delay["jobs"] == 1


# ---- Philly ---------------------------------------------------------------------------------------------


def write_trace(path: Path, rows: list[tuple[str, float, int, str]]) -> Path:
    frame = pd.DataFrame(rows, columns=["timestamp", "duration", "num_gpus", "cluster"])
    frame["gpu_time"] = frame["duration"] * frame["num_gpus"]
    frame[["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]].to_csv(path, index=False)
    return path


@pytest.fixture
def tiny_trace(tmp_path: Path) -> Path:
    rows = [
        ("2017-10-01 23:00:00", 7200.0, 1, "vc1"),  # before the warm-up start... still running at 00:00
        ("2017-10-02 01:00:00", 3600.0, 1, "vc1"),
        ("2017-10-02 02:00:00", 1800.0, 4, "vc2"),
        ("2017-10-02 03:00:00", 36000.0, 16, "vc2"),
        ("2017-10-02 04:00:00", 600.0, 12, "vc1"),
        ("2017-10-03 05:00:00", 600.0, 2, "vc1"),
    ]
    return write_trace(tmp_path / "philly.csv", rows)


def test_load_trace_and_week(tiny_trace: Path) -> None:
    trace = load_trace(tiny_trace)
    assert list(trace["row"]) == [2, 3, 4, 5, 6, 7]
    week = build_week(trace, start=pd.Timestamp("2017-10-02").to_pydatetime(), days=1, warmup_hours=0)
    by_id = {j.id: j for j in week.jobs}
    # the job submitted before the replay starts enters at 0 with its remaining hour, not counted
    assert by_id["philly-2"].arrival == 0.0 and by_id["philly-2"].duration == pytest.approx(1.0)
    assert not by_id["philly-2"].counted
    assert by_id["philly-3"].priority == "batch" and by_id["philly-3"].preemptible
    assert by_id["philly-4"].priority == "standard" and by_id["philly-4"].nodes == 1
    assert (by_id["philly-5"].nodes, by_id["philly-5"].per_node) == (2, 8)
    assert (by_id["philly-6"].nodes, by_id["philly-6"].per_node) == (2, 6)
    assert "philly-7" not in by_id  # the day after the window
    assert week.measure_from == 0.0 and week.end == 24.0
    assert week.training_load[0] == pytest.approx(1.0)  # philly-2 busy for the whole first hour


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ("timestamp,duration,num_gpus\n2017-10-02 01:00:00,1,1\n", "header"),
        (
            "timestamp,duration,num_gpus,cluster\n2017-10-02 01:00:00,1,1,a\nnot-a-date,1,1,a\n",
            "row 3, column timestamp",
        ),
        ("timestamp,duration,num_gpus,cluster\n2017-10-02 01:00:00,-5,1,a\n", "row 2, column duration"),
        ("timestamp,duration,num_gpus,cluster\n2017-10-02 01:00:00,5,0.5,a\n", "row 2, column num_gpus"),
    ],
)
def test_load_trace_errors_name_row_and_column(tmp_path: Path, content: str, where: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(InputError) as info:
        load_trace(path)
    assert info.value.where == where and str(path) in str(info.value)


def test_load_trace_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_trace(tmp_path / "none.csv")


def test_week_outside_trace_is_an_input_error(tiny_trace: Path) -> None:
    with pytest.raises(InputError, match="outside the trace"):
        build_week(load_trace(tiny_trace), start=pd.Timestamp("2018-01-01").to_pydatetime())


def test_busiest_start_picks_the_heaviest_days(tmp_path: Path) -> None:
    rows = [(f"2017-10-{d:02d} 10:00:00", 3600.0, 8 if d in (5, 6) else 1, "v") for d in range(1, 12)]
    trace = load_trace(write_trace(tmp_path / "t.csv", rows))
    assert busiest_start(trace, 2) == pd.Timestamp("2017-10-05", tz="UTC")


def test_gpu_load_integrates_partial_hours() -> None:
    jobs = [Job("a", "t", 0.5, 2.0, 4)]
    assert list(gpu_load(jobs, 0, 4)) == pytest.approx([2.0, 4.0, 2.0, 0.0])


def test_service_replicas_follow_the_diurnal_profile() -> None:
    service = Service("s", "svc", base=2, peak=4, gpu_memory_gb=9)
    origin = pd.Timestamp("2017-10-02", tz="UTC").to_pydatetime()
    jobs = service_jobs([service], origin, 48.0, 0.0, 80.0)
    assert all(j.priority == "production" and j.kind == "inference" for j in jobs)
    assert all(j.gpus == pytest.approx(9 / 80) for j in jobs)
    # replicas 0 and 1 run the whole 48 h; replicas 2 and 3 come and go each day
    assert sum(1 for j in jobs if j.duration == 48.0) == 2
    hours = np.arange(48) + 0.5
    running = [sum(1 for j in jobs if j.arrival <= h < j.end_by) for h in hours]
    assert min(running) == 2 and max(running) == 4


def test_quotas_give_services_their_peak_and_split_the_rest(tiny_trace: Path) -> None:
    week = build_week(
        load_trace(tiny_trace), start=pd.Timestamp("2017-10-02").to_pydatetime(), days=1, warmup_hours=0,
        services=[Service("s", "svc", base=7, peak=14, gpu_memory_gb=9)],
    )  # fmt: skip
    fleet = Fleet(nodes=4)
    shares = quotas(week, fleet)
    assert shares["svc"] == pytest.approx(2.0)  # 14 replicas of 1g.10gb, 7 per GPU
    assert sum(shares.values()) == pytest.approx(fleet.total_gpus)


def test_planner_sizes_the_fleet(tiny_trace: Path) -> None:
    """The planner's fleet covers the week's mean training load plus inference at its peak."""
    week = build_week(
        load_trace(tiny_trace), start=pd.Timestamp("2017-10-02").to_pydatetime(), days=1, warmup_hours=0,
        services=[Service("s", "svc", base=7, peak=14, gpu_memory_gb=9)],
    )  # fmt: skip
    sizing = size_fleet(week, time_limit=30)
    mean_training = float(week.training_load.mean())
    assert sizing.fleet.nodes >= math.ceil((mean_training + 2) / 8 - 1e-9)
    assert sizing.fleet.gpu_model == "H100" and sizing.fleet.gpus_per_node == 8
    assert sizing.peak_nodes == sizing.fleet.nodes and "mean" in sizing.rule
    hourly = size_fleet(week, time_limit=30, smoothing_hours=1)
    assert hourly.fleet.nodes >= sizing.fleet.nodes  # sizing at every hour's load needs at least as much


@pytest.mark.skipif(not PHILLY.exists(), reason="Philly trace not in ../shared/data")
def test_real_trace_busiest_week() -> None:
    trace = load_trace(PHILLY)
    assert len(trace) == 82_247
    assert busiest_start(trace) == pd.Timestamp("2017-10-22", tz="UTC")
    week = build_week(trace, services=DEFAULT_SERVICES)
    assert sum(1 for j in week.jobs if j.counted and j.kind == "training") == 9_931
