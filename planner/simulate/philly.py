"""A week of the Microsoft Philly trace as simulator jobs, optionally mixed with inference services, on a
fleet the planner sizes.

Why: the planner says how many nodes to hold; replaying a real week on that fleet shows how much of it
each scheduling policy actually keeps busy, and how long jobs wait.

Rules (each is a choice, stated so results can be read):

* Input: ``philly.csv`` as processed by the Pollux authors (``timestamp,duration,num_gpus,gpu_time,
  cluster``; duration in seconds). Times are read as UTC.
* Week: the busiest ``days``-long window starting at a midnight (most GPU-hours submitted), unless a
  start is given. A trace shorter than that is replayed from its first midnight.
* Warm-up: the replay starts ``warmup_hours`` before the week with the jobs submitted since then, plus
  the jobs submitted earlier that would still be running then (with their remaining run time), so the
  week does not start on an empty fleet. Warm-up jobs are left out of the queueing statistics.
* Jobs: 1-8 GPUs run on one node; more run as a gang of ``ceil(n / 8)`` nodes with ``n / nodes`` GPUs
  each (every Philly size above 8 divides evenly). Teams are the trace's virtual clusters (``cluster``).
  Philly has no priorities, so: single-GPU jobs are batch and preemptible (mostly exploratory runs and
  sweeps; Jeon et al., ATC'19), checkpointing every 30 minutes; multi-GPU jobs are standard and never
  preempted.
* Mixed week: :data:`DEFAULT_SERVICES` on top, diurnal replica counts from the planner's own demand
  profile (``models.workloads.hourly_demand``), production priority, long-running: a replica runs from
  the hour demand needs it until the hour it does not (``Job.end_by``). Small replicas (memory-sized)
  fit a MIG slice; a replica's GPU need is its memory share of the GPU.
* Quotas (fair share): each service team is guaranteed its peak GPUs with MIG packing; the training
  teams share the rest of the fleet in proportion to their GPU-hours in the replay.
* Fleet sizing: a scenario built in memory for the week (horizon = the week, hourly periods, no
  commitments, one offering), whose inference services are the services above (hourly replicas,
  MIG-aware) and whose training is one service of 1-GPU replicas: the trace's GPU load with every job
  started at arrival, averaged over the whole week by default (``smoothing_hours``): training can
  queue, inference cannot, so training is sized at its mean and the queue absorbs its peaks. The fleet
  is the plan's peak nodes. On the busiest week that fleet is a little tight (queues form at training
  peaks); a 24 h average sizes a roomier fleet (see bench/sim_bench.py for both).
* Saturated regime (:func:`replay_saturated`, throughput): the trace's jobs in submission order from the
  week start (then the ones before it) feed a backlog that keeps the queue at least
  ``backlog_factor`` x the fleet's GPUs deep (and at least one job per node), so the fleet never runs
  out of work; after ``warmup_hours`` the window measures useful GPU-hours per day (work at full
  speed; ``planner.simulate.events``). No quotas (one pool; Philly's teams would only reorder it).
* Placement and speed (:data:`DEFAULT_SLOWDOWN`, ``fleet.Slowdown``): the trace's durations are read as
  run times at the best placement. A job spread over more nodes than it needs runs
  ``cross_node`` times slower, a job over more leaf switches than it needs ``cross_leaf`` times
  slower (both: the product). The figures are ASSUMPTIONS within what was published, not measured
  here: Jeon et al. (ATC'19, the Philly paper, section 4) found that jobs whose GPUs were spread over
  more servers ran with lower GPU utilization and longer, and that intra-server locality matters most;
  Tiresias (Gu et al., NSDI'19, section 2) and Themis (Mahajan et al., NSDI'20) measured that
  sensitivity varies by model, from near none (ResNet-style, small tensors) to a large slowdown
  (VGG-style, large tensors) when a job is spread over machines. On H100 nodes the gap is NVLink4 /
  NVSwitch (900 GB/s per GPU, FACTS.md [U]) against 3,200 Gb/s EFA per node, 50 GB/s per GPU (FACTS.md
  [V]): an all-reduce that leaves the node has about a 1/18 of the bandwidth, which a job hides only
  as far as it overlaps communication with compute. Hence 1.5 for cross-node (a middle value: half
  the job's time more) and 1.1 for cross-leaf (rail-optimised fabrics are close to non-blocking
  across the spine; oversubscribed ones are worse). Both are parameters; the bench also runs 1.0
  (placement does not matter) to separate scheduling from topology.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from models.mig import replicas_per_gpu
from planner.simulate.events import Backlog, SimResult, simulate
from planner.simulate.fleet import Fleet, Job, Slowdown

COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
GPUS_PER_NODE = 8
DEFAULT_OFFERING = "aws:us-east-1:p5.48xlarge"
DEFAULT_NODES_PER_LEAF = 32  # ASSUMPTION: one rail-optimized scalable unit of 32 nodes per leaf group
DEFAULT_SLOWDOWN = Slowdown(cross_node=1.5, cross_leaf=1.1)  # ASSUMPTION: see the module docstring
THROUGHPUT_POLICIES = ("naive", "kubernetes", "best-fit", "workload-aware")


@dataclass(frozen=True, slots=True)
class Service:
    """An inference service: diurnal replicas (the planner's ``diurnal`` profile), one size per replica."""

    name: str
    team: str
    base: float
    peak: float
    peak_hour_utc: float = 17.0
    weekend_factor: float = 0.7
    gpus_per_replica: int | None = None
    gpu_memory_gb: float | None = None


DEFAULT_SERVICES: tuple[Service, ...] = (
    Service("chat-70b", "assistant", base=30, peak=80, gpus_per_replica=2),
    Service("vision", "assistant", base=20, peak=50, gpus_per_replica=1),
    Service("chat-8b", "assistant", base=40, peak=120, gpu_memory_gb=18),  # 1g.20gb on H100: 4 per GPU
    Service("embed", "search", base=56, peak=112, peak_hour_utc=14, gpu_memory_gb=9),  # 1g.10gb: 7 per GPU
    Service("rerank", "search", base=10, peak=30, peak_hour_utc=14, gpu_memory_gb=35),  # 3g.40gb: 2 per GPU
)
"""The mixed week's inference (about a quarter of the fleet at peak with MIG packing)."""


@dataclass
class Week:
    """Jobs in hours from ``origin`` (the warm-up start); the measured week is [measure_from, end)."""

    origin: datetime
    start: datetime
    days: int
    jobs: list[Job]
    services: tuple[Service, ...]
    training_load: np.ndarray  # GPUs busy per hour of the week if every job started at arrival
    team_gpu_hours: dict[str, float]  # training teams, over the replay
    trace: str

    @property
    def measure_from(self) -> float:
        return (self.start - self.origin).total_seconds() / 3600.0

    @property
    def end(self) -> float:
        return self.measure_from + 24.0 * self.days

    @property
    def mixed(self) -> bool:
        return bool(self.services)

    def describe(self) -> dict[str, Any]:
        kinds = pd.Series([j.kind for j in self.jobs if j.counted]).value_counts().to_dict()
        return {
            "trace": self.trace,
            "week_start": self.start.isoformat(),
            "days": self.days,
            "warmup_hours": self.measure_from,
            "mixed": self.mixed,
            "jobs_in_week": {str(k): int(v) for k, v in kinds.items()},
            "jobs_replayed": len(self.jobs),
            "training_load_gpus": {
                "mean": round(float(self.training_load.mean()), 1) if self.training_load.size else 0.0,
                "peak": round(float(self.training_load.max()), 1) if self.training_load.size else 0.0,
            },
            "services": [s.name for s in self.services],
        }


# ---- the trace ----------------------------------------------------------------------------------------


def load_trace(path: str | Path) -> pd.DataFrame:
    """Read and check ``philly.csv``: one row per job, times as UTC; InputError names row and column."""
    path = Path(path)
    try:
        frame = pd.read_csv(path, dtype={"cluster": str})
    except FileNotFoundError:
        raise InputError(path, None, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, None, "is a directory, not a CSV file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"not a readable CSV: {str(exc).strip()}") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(path, "header", f"missing column(s) {', '.join(missing)}; need {', '.join(COLUMNS)}")
    if frame.empty:
        raise InputError(path, None, "no jobs in the trace")
    stamps = pd.to_datetime(frame["timestamp"], errors="coerce", utc=True)
    duration = pd.to_numeric(frame["duration"], errors="coerce")
    gpus = pd.to_numeric(frame["num_gpus"], errors="coerce")
    checks = (
        (stamps.isna(), "timestamp", "not a valid time (YYYY-MM-DD HH:MM:SS)"),
        (duration.isna() | (duration < 0) | ~np.isfinite(duration), "duration", "must be seconds >= 0"),
        (gpus.isna() | (gpus < 1) | (gpus % 1 != 0), "num_gpus", "must be a whole number >= 1"),
        (frame["cluster"].isna(), "cluster", "is empty"),
    )
    for bad, column, problem in checks:
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0]) + 2  # spreadsheet row: the header is row 1
            raise InputError(path, f"row {row}, column {column}", problem)
    out = pd.DataFrame(
        {
            "row": np.arange(len(frame)) + 2,
            "submit": stamps,
            "hours": duration.to_numpy(dtype=float) / 3600.0,
            "gpus": gpus.to_numpy(dtype=np.int64),
            "team": frame["cluster"].astype(str).str.strip(),
        }
    )
    return out


def busiest_start(trace: pd.DataFrame, days: int = 7) -> datetime:
    """The midnight that starts the ``days`` with the most GPU-hours submitted (trace must cover them)."""
    first = trace["submit"].min().floor("D")
    last = trace["submit"].max()
    gpu_hours = (trace["hours"] * trace["gpus"]).to_numpy()
    day = ((trace["submit"] - first).dt.total_seconds() // 86400).astype(int).to_numpy()
    per_day = np.bincount(day, weights=gpu_hours)
    full_days = int((last - first).total_seconds() // 86400)  # days that end before the last submission
    if full_days < days:
        return first.to_pydatetime()
    sums = np.convolve(per_day[:full_days], np.ones(days), mode="valid")
    best = int(np.argmax(sums))
    return (first + pd.Timedelta(days=best)).to_pydatetime()


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def build_week(
    trace: pd.DataFrame,
    *,
    start: datetime | None = None,
    days: int = 7,
    warmup_hours: float = 48.0,
    services: Sequence[Service] = (),
    gpus_per_node: int = GPUS_PER_NODE,
    gpu_memory_gb: float = 80.0,
    source: str = "philly.csv",
) -> Week:
    """The jobs of one week (plus warm-up), with ``services`` replicas on top if given."""
    if days < 1:
        raise InputError(None, "--days", f"must be at least 1, got {days}")
    if warmup_hours < 0:
        raise InputError(None, "--warmup-hours", f"must be >= 0, got {warmup_hours}")
    week_start = _as_utc(start) if start is not None else busiest_start(trace, days)
    first, last = trace["submit"].min(), trace["submit"].max()
    if not first.floor("D") <= pd.Timestamp(week_start) <= last:
        raise InputError(
            None,
            "--week-start",
            f"{week_start:%Y-%m-%d %H:%M} is outside the trace ({first:%Y-%m-%d} .. {last})",
        )
    origin = week_start - timedelta(hours=warmup_hours)
    week_end = week_start + timedelta(days=days)
    submit = ((trace["submit"] - pd.Timestamp(origin)).dt.total_seconds() / 3600.0).to_numpy()
    hours, gpus = trace["hours"].to_numpy(), trace["gpus"].to_numpy()
    horizon = (week_end - origin).total_seconds() / 3600.0
    keep = (submit < horizon) & (submit + hours > 0)
    jobs: list[Job] = []
    for row, at, run, n, team in zip(
        trace["row"].to_numpy()[keep], submit[keep], hours[keep], gpus[keep], trace["team"].to_numpy()[keep],
        strict=True,
    ):  # fmt: skip
        nodes = max(1, math.ceil(n / gpus_per_node))
        if n % nodes:
            raise InputError(
                source, f"row {row}, column num_gpus", f"{n} GPUs do not split over {nodes} nodes"
            )
        arrival, remaining = (at, run) if at >= 0 else (0.0, run + at)  # earlier jobs: what is left of them
        single = n == 1
        jobs.append(
            Job(
                id=f"philly-{row}",
                team=str(team),
                arrival=float(arrival),
                duration=float(remaining),
                gpus=float(n),
                nodes=nodes,
                priority="batch" if single else "standard",
                kind="training",
                preemptible=single,
                counted=at >= warmup_hours,
            )
        )
    training_load = gpu_load(jobs, warmup_hours, warmup_hours + 24.0 * days)
    team_hours: dict[str, float] = {}
    for job in jobs:
        team_hours[job.team] = team_hours.get(job.team, 0.0) + job.gpus * job.duration
    jobs += service_jobs(services, origin, horizon, warmup_hours, gpu_memory_gb)
    return Week(origin, week_start, days, jobs, tuple(services), training_load, team_hours, source)


def gpu_load(jobs: Sequence[Job], begin: float, end: float) -> np.ndarray:
    """Mean GPUs busy in each hour of [begin, end) if every job ran from its arrival (no queueing)."""
    hours = round(end - begin)
    load = np.zeros(hours + 1)
    for job in jobs:
        a, e = job.arrival - begin, job.arrival + job.duration - begin
        a, e = max(a, 0.0), min(e, float(hours))
        if e <= a:
            continue
        ia, ie = int(a), int(e)
        if ia == ie:
            load[ia] += job.gpus * (e - a)
            continue
        load[ia] += job.gpus * (ia + 1 - a)
        load[ia + 1 : ie] += job.gpus
        load[ie] += job.gpus * (e - ie)
    return load[:hours]


def service_replicas(service: Service, origin: datetime, hours: int) -> np.ndarray:
    """Whole replicas wanted in each hour from ``origin``: the planner's diurnal profile, rounded up."""
    from models.scenario import DiurnalProfile, Horizon
    from models.workloads import hourly_demand, per_period_max

    horizon = Horizon(start=origin, hours=hours, period_hours=1)
    profile = DiurnalProfile(
        profile="diurnal",
        base=service.base,
        peak=service.peak,
        peak_hour_utc=service.peak_hour_utc,
        weekend_factor=service.weekend_factor,
    )
    return per_period_max(hourly_demand(profile, horizon), 1)


def service_jobs(
    services: Sequence[Service], origin: datetime, horizon: float, counted_from: float, gpu_memory_gb: float
) -> list[Job]:
    """Replica ``i`` of a service runs while demand is above ``i`` replicas: one job per such stretch."""
    hours = math.ceil(horizon)
    jobs: list[Job] = []
    for service in services:
        replicas = service_replicas(service, origin, hours)
        if service.gpus_per_replica is not None:
            gpus, memory = float(service.gpus_per_replica), None
        else:
            assert service.gpu_memory_gb is not None
            memory = service.gpu_memory_gb
            gpus = (
                min(1.0, memory / gpu_memory_gb)
                if memory <= gpu_memory_gb
                else float(math.ceil(memory / gpu_memory_gb))
            )
        for index in range(int(replicas.max(initial=0))):
            active = np.concatenate([[False], replicas > index, [False]])
            edges = np.flatnonzero(np.diff(active.astype(np.int8)))
            for begin, stop in zip(edges[::2], edges[1::2], strict=True):
                jobs.append(
                    Job(
                        id=f"{service.name}/{index}@{begin}",
                        team=service.team,
                        arrival=float(begin),
                        duration=float(stop - begin),
                        gpus=gpus,
                        priority="production",
                        kind="inference",
                        gpu_memory_gb=memory,
                        end_by=float(min(stop, horizon)),
                        counted=begin >= counted_from,
                    )
                )
    return jobs


# ---- fleet and quotas ---------------------------------------------------------------------------------


def service_peak_gpus(service: Service, week: Week, gpu_model: str, gpu_memory_gb: float) -> float:
    """GPUs the service needs at its peak hour when small replicas share GPUs by MIG (or whole GPUs)."""
    peak = float(service_replicas(service, week.origin, math.ceil(week.end)).max(initial=0))
    if service.gpus_per_replica is not None:
        return peak * service.gpus_per_replica
    assert service.gpu_memory_gb is not None
    return peak / replicas_per_gpu(gpu_model, gpu_memory_gb, service.gpu_memory_gb)


def quotas(week: Week, fleet: Fleet) -> dict[str, float]:
    """Guaranteed GPUs per team: service teams their peak, training teams the rest by GPU-hours."""
    out: dict[str, float] = {}
    for service in week.services:
        out[service.team] = out.get(service.team, 0.0) + service_peak_gpus(
            service, week, fleet.gpu_model, fleet.memory_gb
        )
    rest = max(0.0, fleet.total_gpus - sum(out.values()))
    total = sum(week.team_gpu_hours.values())
    for team, hours in sorted(week.team_gpu_hours.items()):
        out[team] = out.get(team, 0.0) + (rest * hours / total if total > 0 else 0.0)
    return out


@dataclass
class Sizing:
    """What the planner chose: the fleet and how it got there."""

    fleet: Fleet
    offering: str
    peak_nodes: int
    total_usd: float | None
    seconds: float
    rule: str
    solver: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {
            "offering": self.offering,
            "nodes": self.fleet.nodes,
            "peak_nodes_in_plan": self.peak_nodes,
            "plan_total_usd": self.total_usd,
            "planner_seconds": round(self.seconds, 2),
            "rule": self.rule,
            "solver": self.solver,
        }


def sizing_rule(smoothing_hours: int) -> str:
    return (
        "nodes = the plan's peak nodes over the week; inference services at their hourly replicas "
        f"(MIG-aware), training as 1-GPU replicas at the {smoothing_hours} h centred mean of its "
        "no-queueing GPU load; hourly periods, no commitments, one offering"
    )


def size_fleet(
    week: Week,
    offering_id: str = DEFAULT_OFFERING,
    *,
    catalog_path: str | Path | None = None,
    nodes_per_leaf: int | None = DEFAULT_NODES_PER_LEAF,
    time_limit: float = 60.0,
    smoothing_hours: int | None = None,
    say: Callable[[str], None] | None = None,
) -> Sizing:
    """Plan the week's demand on one offering with ``planner.planning.optimize`` and take its peak nodes."""
    import time

    from models.catalog import Catalog
    from models.scenario import parse
    from planner.planning.optimize import SolveSettings, optimize

    catalog = Catalog.load(catalog_path)
    try:
        offering = catalog.get(offering_id)
    except KeyError as exc:
        raise InputError(catalog_path or "embedded catalog", "--offering", str(exc.args[0])) from None
    hours = 24 * week.days
    teams = sorted({s.team for s in week.services} | {"training"})
    inference: list[dict[str, Any]] = []
    for service in week.services:
        size = (
            {"gpus_per_replica": service.gpus_per_replica}
            if service.gpus_per_replica is not None
            else {"gpu_memory_gb": service.gpu_memory_gb}
        )
        inference.append(
            {
                "name": service.name,
                "team": service.team,
                **size,
                "gpu_models": [offering.gpu_model],
                "latency_critical": True,
                "replicas": {
                    "profile": "diurnal",
                    "base": service.base,
                    "peak": service.peak,
                    "peak_hour_utc": service.peak_hour_utc,
                    "weekend_factor": service.weekend_factor,
                },
            }
        )
    window = hours if smoothing_hours is None else smoothing_hours
    if window < 1:
        raise InputError(None, "--training-smoothing-hours", f"must be at least 1, got {window}")
    smooth = pd.Series(week.training_load).rolling(window, center=True, min_periods=1).mean().to_numpy()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpuplan-sim-") as tmp:
        series = Path(tmp) / "training.csv"
        pd.DataFrame({"hour": np.arange(hours), "replicas": np.round(smooth[:hours], 3)}).to_csv(
            series, index=False
        )
        if smooth.max(initial=0) > 0:
            inference.append(
                {
                    "name": "training",
                    "team": "training",
                    "gpus_per_replica": 1,
                    "gpu_models": [offering.gpu_model],
                    "latency_critical": False,
                    "replicas": {"csv": series.name},
                }
            )
        scenario = parse(
            {
                "name": f"philly-week-{week.start:%Y%m%d}",
                "horizon": {"start": week.start, "hours": hours, "period_hours": 1},
                "catalog": "embedded",
                "clouds": {offering.cloud: {"regions": [offering.region]}},
                "purchase": {"terms": [], "max_spot_share": 0.0},
                "teams": [{"name": t} for t in teams],
                "inference": inference,
            },
            "philly sizing scenario",
        )
        plan = optimize(
            scenario,
            Catalog([offering], source=f"{catalog.source} ({offering_id})"),
            Path(tmp),
            SolveSettings(time_limit=time_limit, certify=False, method="staged"),
            progress=say,
        )
    seconds = time.perf_counter() - began
    allocations = plan.allocations
    per_period = allocations.groupby("period")["nodes"].sum() if len(allocations) else pd.Series([0.0])
    peak = max(1, math.ceil(float(per_period.max()) - 1e-6))
    fleet = Fleet(
        nodes=peak,
        gpus_per_node=offering.gpus_per_node,
        gpu_model=offering.gpu_model,
        nodes_per_leaf=nodes_per_leaf,
        gpu_memory_gb=offering.gpu_memory_gb,
    )
    solver = plan.document.solver.model_dump(include={"method", "status", "gap"})
    return Sizing(fleet, offering_id, peak, plan.total_usd, seconds, sizing_rule(window), solver)


# ---- one replay, several policies ---------------------------------------------------------------------


def replay_week(
    week: Week,
    fleet: Fleet,
    policies: Sequence[str],
    progress: Callable[[str, float], None] | None = None,
) -> list[SimResult]:
    """Each policy replays the same week on the same fleet (quotas from :func:`quotas`)."""
    team_quotas = quotas(week, fleet)
    results = []
    for name in policies:
        report = (lambda share, name=name: progress(name, share)) if progress else None
        results.append(
            simulate(
                week.jobs,
                fleet,
                name,
                start=0.0,
                end=week.end,
                measure_from=week.measure_from,
                quotas=team_quotas,
                progress=report,
            )
        )
    return results


def summary_rows(results: Sequence[SimResult]) -> list[dict[str, Any]]:
    """One row per policy: the figures the CLI table, results.md and the benchmark print."""
    rows = []
    for result in results:
        overall = result.overall_delay
        inference = result.delay_by_kind.get("inference", {})
        training = result.delay_by_kind.get("training", {})
        rows.append(
            {
                "policy": result.policy,
                "allocation_pct": round(result.allocation_pct, 1),
                "utilization_pct": round(result.utilization_pct, 1),
                "fragmentation_pct": round(result.fragmentation_pct, 1),
                "delay_mean_h": round(overall.get("mean_h", 0.0), 2),
                "delay_p95_h": round(overall.get("p95_h", 0.0), 2),
                "training_delay_mean_h": round(training.get("mean_h", 0.0), 2),
                "inference_delay_mean_h": round(inference.get("mean_h", 0.0), 2),
                "gang_delay_mean_h": round(result.delay_by_kind.get("gang", {}).get("mean_h", 0.0), 2),
                "waiting_at_end": overall.get("waiting_at_end", 0),
                "completions": result.completions,
                "preemptions": result.preemptions,
                "gangs_split": result.gangs_split,
                "gangs_started": result.gangs_started,
                "expired_replicas": result.expired_replicas,
                "events": result.events,
                "wall_s": round(result.wall_seconds, 2),
                "events_per_s": round(result.events_per_second),
            }
        )
    return rows


TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("policy", "policy"),
    ("allocation_pct", "alloc %"),
    ("utilization_pct", "util %"),
    ("fragmentation_pct", "frag %"),
    ("delay_mean_h", "wait mean h"),
    ("delay_p95_h", "wait p95 h"),
    ("training_delay_mean_h", "train wait h"),
    ("inference_delay_mean_h", "infer wait h"),
    ("gang_delay_mean_h", "gang wait h"),
    ("waiting_at_end", "waiting at end"),
    ("completions", "completions"),
    ("preemptions", "preemptions"),
    ("gangs_split", "gangs split"),
    ("events_per_s", "events/s"),
    ("wall_s", "wall s"),
)


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]] = TABLE_COLUMNS) -> str:
    """Markdown of ``rows`` in ``columns`` (key, label); gangs split is shown as split/started."""
    header = "| " + " | ".join(label for _, label in columns) + " |"
    rule = "|" + "|".join("---" if key == "policy" else "---:" for key, _ in columns) + "|"
    lines = [header, rule]
    for row in rows:
        cells = [
            f"{row[key]}/{row['gangs_started']}" if key == "gangs_split" else str(row[key])
            for key, _ in columns
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---- the saturated regime: throughput -----------------------------------------------------------------


def trace_jobs(
    trace: pd.DataFrame, start: datetime | None = None, gpus_per_node: int = GPUS_PER_NODE
) -> list[Job]:
    """Every job of the trace as a simulator job, in submission order from ``start`` (default: the
    busiest week's first day), then the jobs submitted before it; the rules of :func:`build_week`."""
    begin = pd.Timestamp(_as_utc(start) if start is not None else busiest_start(trace, 7))
    ordered = trace.assign(_late=trace["submit"] < begin).sort_values(
        ["_late", "submit", "row"], kind="stable"
    )
    jobs = []
    for row, hours, n, team in zip(
        ordered["row"].to_numpy(), ordered["hours"].to_numpy(), ordered["gpus"].to_numpy(),
        ordered["team"].to_numpy(), strict=True,
    ):  # fmt: skip
        nodes = max(1, math.ceil(n / gpus_per_node))
        if n % nodes:
            raise InputError(None, f"row {row}, column num_gpus", f"{n} GPUs do not split over {nodes} nodes")
        single = n == 1
        jobs.append(
            Job(
                id=f"philly-{row}",
                team=str(team),
                arrival=0.0,
                duration=float(hours),
                gpus=float(n),
                nodes=nodes,
                priority="batch" if single else "standard",
                preemptible=single,
            )
        )
    return jobs


def replay_saturated(
    jobs: Sequence[Job],
    fleet: Fleet,
    policies: Sequence[str] = THROUGHPUT_POLICIES,
    *,
    warmup_hours: float = 48.0,
    days: float = 7.0,
    backlog_factor: float = 2.0,
    slowdown: Slowdown = DEFAULT_SLOWDOWN,
    policy_options: dict[str, dict[str, Any]] | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> list[SimResult]:
    """Each policy on the same fleet with the same backlog feed; the window is [warm-up, warm-up + days)."""
    if days <= 0:
        raise InputError(None, "--days", f"must be positive, got {days}")
    if warmup_hours < 0:
        raise InputError(None, "--warmup-hours", f"must be >= 0, got {warmup_hours}")
    if not (math.isfinite(backlog_factor) and backlog_factor > 0):
        raise InputError(
            None, "--backlog", f"must be a positive multiple of the fleet's GPUs, got {backlog_factor}"
        )
    from planner.simulate.policies import make_policy

    backlog = Backlog(gpus=backlog_factor * fleet.total_gpus, jobs=fleet.nodes)
    results = []
    for name in policies:
        report = (lambda share, name=name: progress(name, share)) if progress else None
        policy = make_policy(name, fleet, **(policy_options or {}).get(name, {}))
        results.append(
            simulate(
                jobs, fleet, policy, start=0.0, end=warmup_hours + 24.0 * days, measure_from=warmup_hours,
                slowdown=slowdown, backlog=backlog, progress=report,
            )
        )  # fmt: skip
    return results


def throughput_rows(results: Sequence[SimResult]) -> list[dict[str, Any]]:
    """One row per policy: useful GPU-hours per day and what went into it (bench and CLI print these)."""
    rows = []
    for result in results:
        capacity = result.fleet.total_gpus * 24.0
        rows.append(
            {
                "policy": result.policy,
                "gpus": result.fleet.total_gpus,
                "useful_gpu_h_per_day": round(result.throughput_per_day, 1),
                "useful_pct": round(100.0 * result.throughput_per_day / capacity, 1),
                "multi_gpu_pct": round(100.0 * result.useful_multi_gpu_hours / result.useful_gpu_hours, 1)
                if result.useful_gpu_hours
                else 0.0,
                "completed_gpu_h_per_day": round(result.completed_gpu_hours / result.days, 1)
                if result.days
                else 0.0,
                "allocation_pct": round(result.allocation_pct, 1),
                "utilization_pct": round(result.utilization_pct, 1),
                "slowdown_loss_pct": round(100.0 * result.slowdown_gpu_hours / (capacity * result.days), 1)
                if result.days
                else 0.0,
                "slowed_starts": result.slowed_starts,
                "gangs_split": result.gangs_split,
                "gangs_started": result.gangs_started,
                "completions": result.completions,
                "saturated": result.empty_queue_hours == 0.0,
                "wall_s": round(result.wall_seconds, 2),
            }
        )
    return rows


THROUGHPUT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("policy", "policy"),
    ("gpus", "GPUs"),
    ("useful_gpu_h_per_day", "useful GPU-h/day"),
    ("useful_pct", "useful %"),
    ("multi_gpu_pct", "multi-GPU work %"),
    ("completed_gpu_h_per_day", "completed GPU-h/day"),
    ("allocation_pct", "alloc %"),
    ("utilization_pct", "util %"),
    ("slowdown_loss_pct", "slowdown loss %"),
    ("slowed_starts", "slowed starts"),
    ("gangs_split", "gangs split"),
    ("saturated", "saturated"),
    ("wall_s", "wall s"),
)


def throughput_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown of the saturated regime's rows."""
    return markdown_table(rows, THROUGHPUT_COLUMNS)


def throughput_ratio(
    rows: Sequence[dict[str, Any]], over: str = "workload-aware", under: str = "kubernetes"
) -> float | None:
    """``over``'s useful GPU-hours per day divided by ``under``'s (None if either is missing or zero)."""
    by = {row["policy"]: row["useful_gpu_h_per_day"] for row in rows}
    if over not in by or not by.get(under):
        return None
    return by[over] / by[under]
