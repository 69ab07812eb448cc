"""Where independent plans are solved: in this process, in a local process pool, or on a Dask cluster.

``gpuplan whatif`` (its variants) and ``gpuplan breakeven`` (its cloud-only, optimal and owning plans)
hand this module a list of :class:`PlanJob` and get back, per job, a :class:`~models.plan.Plan` or a
:class:`Failure`, as each one finishes (for the progress display) and in the order given (for the
output). The job carries what planning needs, already read and varied on this machine: the scenario, its
catalog, the solve settings and the demand series files it references (their bytes, so a worker on
another machine needs none of the user's files). The plan comes back as an object and the caller writes
it, so the files are made by the same code on this machine whatever ran the solve: a cluster run and a
local run write the same bytes apart from timing fields (``created``, ``solver.seconds``).

Engines (``--cluster``):
  * none (the default): today's behaviour, no extra dependency: one variant in this process, several in
    a ``spawn`` process pool of ``--workers`` (one per core), each solver on one thread;
  * ``local``: a Dask ``LocalCluster`` of ``--workers`` worker processes on the loopback interface, one
    thread each, no dashboard;
  * an address (``tcp://host:8786``): an existing Dask scheduler; its workers must have gpuplan (the same
    version) installed, since the job names ``planner.planning.sweeps.solve_job``, and run one thread per
    worker process (``dask worker ADDRESS --nthreads 1``): HiGHS runs one solve per process at a time.
    ``--workers`` then caps the variants in flight at once.

Why Dask distributed and not Ray: pure-Python wheels (no object store daemon, no extra binary); a
``LocalCluster`` of processes starts in about a second here; ``Client(address, timeout=...)`` attaches to a
running scheduler with a connect timeout; futures with ``as_completed`` report each variant as it ends;
an exception in one task is carried back on its own future while the others run on. Ray would bring a
~100 MB wheel with a native raylet and plasma store to start and manage for what are a handful of
independent, minutes-long tasks. (https://distributed.dask.org/en/stable/client.html,
https://distributed.dask.org/en/stable/api.html#distributed.as_completed)

What is sent to a worker: the :class:`PlanJob` only (scenario, catalog, settings, demand series bytes).
No environment variable, credential or file path of this machine beyond those the scenario itself names
(the worker's own environment is whatever its machine gives it; a LocalCluster's processes inherit this
one's, as any child process, but nothing crosses the wire). A series given by an absolute path is not
shipped: it must exist at that path on the workers.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from models.errors import GpuplanError, InputError, SolverError
from models.scenario import CsvSeries

if TYPE_CHECKING:
    from models.catalog import Catalog
    from models.plan import Plan
    from models.scenario import Scenario
    from planner.planning.optimize import SolveSettings

__all__ = [
    "CONNECT_TIMEOUT_S",
    "LOCAL",
    "Engine",
    "Failure",
    "PlanJob",
    "make_job",
    "open_engine",
    "solve_job",
]

#: ``--cluster local``: a LocalCluster started (and stopped) by the command.
LOCAL = "local"
#: Seconds to wait for a scheduler at ``--cluster ADDRESS`` before giving up with an error.
CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class PlanJob:
    """One plan to solve, self-contained: nothing in it refers to this machine's files except absolute
    series paths the scenario names. ``series`` maps a demand CSV's path, relative to the scenario's
    directory (``base_dir``), to its bytes; ``up`` is how many ``..`` those paths climb at most."""

    label: str
    scenario: Scenario
    catalog: Catalog
    settings: SolveSettings
    base_dir: str
    series: dict[str, bytes] = field(default_factory=dict)
    up: int = 0
    fleet: Plan | None = None  # given: no search, this plan's fleet billed here (optimize/seed.py)


@dataclass(frozen=True)
class Failure:
    """Why a job has no plan: ``input`` (an InputError: bad data, exit 2 when fatal), ``solver`` (no
    plan, exit 3) or ``engine`` (the worker died or the cluster lost the task). Fields, not the exception:
    an InputError does not survive pickling (its constructor takes three arguments)."""

    kind: Literal["input", "solver", "engine"]
    message: str
    file: str | None = None
    where: str | None = None
    problem: str | None = None

    @classmethod
    def of(cls, error: GpuplanError) -> Failure:
        if isinstance(error, InputError):
            return cls("input", str(error), error.file, error.where, error.problem)
        return cls("solver", str(error))

    def error(self) -> GpuplanError:
        """The error to raise where a failure is fatal (breakeven needs all its plans)."""
        if self.kind == "input" and self.problem is not None:
            return InputError(self.file, self.where, self.problem)
        return SolverError(self.message)


def make_job(
    label: str,
    scenario: Scenario,
    catalog: Catalog,
    base_dir: Path,
    settings: SolveSettings,
    fleet: Plan | None = None,
) -> PlanJob:
    """A job with the demand series the scenario reads relative to ``base_dir``, as bytes. A missing or
    unreadable file is left out: the worker reports it as the planner does (``demand series not
    found``), naming the scenario's own path. ``fleet``: bill that plan's fleet instead of searching."""
    series: dict[str, bytes] = {}
    up = 0
    for service in scenario.inference:
        spec = service.replicas
        if not isinstance(spec, CsvSeries) or Path(spec.csv).is_absolute():
            continue
        key = posixpath.normpath(Path(spec.csv).as_posix())
        try:
            series[key] = (base_dir / spec.csv).read_bytes()
        except OSError:
            continue
        up = max(up, _climb(key))
    return PlanJob(label, scenario, catalog, settings, str(base_dir), series, up, fleet)


def _climb(relative: str) -> int:
    """How many directories above its start a normalized relative path reaches (``../../a.csv``: 2)."""
    parts = relative.split("/")
    return next((i for i, part in enumerate(parts) if part != ".."), len(parts))


def solve_job(job: PlanJob, ship_series: bool = False) -> Plan | Failure:
    """Plan one job (in a worker: this process, a pool process or a Dask worker). A GpuplanError becomes
    a :class:`Failure` saying why, not a crash. With ``ship_series`` the demand series are read from the
    job's bytes, laid out under a temporary directory as they are under the scenario's, so a worker on
    another machine needs none of the user's files; messages name the scenario's directory, not it."""
    if not ship_series:
        try:
            return _plan(job, Path(job.base_dir))
        except GpuplanError as error:
            return Failure.of(error)
    with tempfile.TemporaryDirectory(prefix="gpuplan-job-") as tmp:
        base = Path(tmp, *(["d"] * job.up))  # deep enough for ../ paths to land inside tmp
        base.mkdir(parents=True, exist_ok=True)
        for relative, content in job.series.items():
            target = Path(os.path.normpath(base / relative))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        try:
            return _plan(job, base)
        except GpuplanError as error:
            failure = Failure.of(error)
            here = str(base)
            return Failure(
                failure.kind,
                failure.message.replace(here, job.base_dir),
                failure.file.replace(here, job.base_dir) if failure.file else None,
                failure.where,
                failure.problem.replace(here, job.base_dir) if failure.problem else None,
            )


def _plan(job: PlanJob, base_dir: Path) -> Plan:
    """The job's plan: the planner's search, or with a fleet that fleet billed (``seed.rebilled_plan``)."""
    from planner.planning.optimize import optimize
    from planner.planning.optimize.seed import rebilled_plan

    if job.fleet is not None:
        return rebilled_plan(job.scenario, job.catalog, base_dir, job.fleet, job.settings)
    return optimize(job.scenario, job.catalog, base_dir, job.settings)


class Engine(Protocol):
    """Solves jobs; ``run`` calls ``done(index, outcome)`` as each finishes and returns the outcomes in
    the order of ``jobs``."""

    name: str

    def run(
        self, jobs: Sequence[PlanJob], done: Callable[[int, Plan | Failure], None] | None = None
    ) -> list[Plan | Failure]: ...


def _one_thread(job: PlanJob) -> PlanJob:
    return replace(job, settings=replace(job.settings, threads=1))


class InProcess:
    """One job after the other in this process, with the caller's settings: HiGHS refuses a thread count
    other than the one its scheduler started with in this process (status 'error')."""

    name = "this process"

    def run(
        self, jobs: Sequence[PlanJob], done: Callable[[int, Plan | Failure], None] | None = None
    ) -> list[Plan | Failure]:
        outcomes: list[Plan | Failure] = []
        for index, job in enumerate(jobs):
            outcomes.append(solve_job(job))
            if done:
                done(index, outcomes[-1])
        return outcomes


@dataclass
class ProcessPool:
    """A process per job, ``workers`` at once, each solver on one thread; a single job runs in this
    process (no pool to start for it)."""

    workers: int
    name: str = "local processes"

    def run(
        self, jobs: Sequence[PlanJob], done: Callable[[int, Plan | Failure], None] | None = None
    ) -> list[Plan | Failure]:
        if self.workers <= 1 or len(jobs) <= 1:
            return InProcess().run(jobs, done)
        import multiprocessing

        results: dict[int, Plan | Failure] = {}
        # spawn, not fork: a forked child inherits HiGHS's thread pool from a parent that already solved
        # (the base variant, or a test process) and fails with status 'error'
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(self.workers, len(jobs)), mp_context=spawn) as pool:
            futures = {pool.submit(solve_job, _one_thread(job)): i for i, job in enumerate(jobs)}
            for future in as_completed(futures):
                index = futures[future]
                results[index] = future.result()
                if done:
                    done(index, results[index])
        return [results[i] for i in range(len(jobs))]


@dataclass
class DaskEngine:
    """Jobs as Dask futures on ``client``'s cluster, at most ``limit`` in flight (None: all at once).
    An exception a task raises (a bug, a worker that died: ``KilledWorker``) fails that job only."""

    client: Any  # distributed.Client
    limit: int | None
    name: str = "a Dask cluster"

    def run(
        self, jobs: Sequence[PlanJob], done: Callable[[int, Plan | Failure], None] | None = None
    ) -> list[Plan | Failure]:
        from distributed import as_completed as dask_completed

        results: dict[int, Plan | Failure] = {}
        queue = list(enumerate(jobs))
        in_flight: dict[Any, int] = {}

        def submit() -> Any:
            index, job = queue.pop(0)
            future = self.client.submit(solve_job, _one_thread(job), True, pure=False, key=_key(job, index))
            in_flight[future.key] = index
            return future

        first = len(queue) if self.limit is None else min(self.limit, len(queue))
        pending = dask_completed([submit() for _ in range(first)])
        for future in pending:
            index = in_flight.pop(future.key)
            try:
                outcome: Plan | Failure = future.result()
            except Exception as exc:  # carried back from the worker: this job fails, the others go on
                outcome = Failure("engine", f"the cluster could not plan it: {type(exc).__name__}: {exc}")
            finally:
                future.release()
            results[index] = outcome
            if done:
                done(index, outcome)
            if queue:
                pending.add(submit())
        return [results[i] for i in range(len(jobs))]


def _key(job: PlanJob, index: int) -> str:
    """A task key the dashboard shows: the job's label, unique per run."""
    import uuid

    label = "".join(c if c.isalnum() else "_" for c in job.label)[:40]
    return f"gpuplan-{index}-{label}-{uuid.uuid4().hex[:8]}"


@contextmanager
def open_engine(cluster: str | None, workers: int | None, jobs: int) -> Iterator[Engine]:
    """The engine for ``--cluster`` / ``--workers`` (module docstring), closed on exit. ``jobs`` sizes a
    local cluster (no more workers than jobs). An unreachable scheduler is an InputError on
    ``--cluster`` after :data:`CONNECT_TIMEOUT_S`."""
    if workers is not None and workers < 1:
        raise InputError(None, "--workers", f"must be at least 1, got {workers}")
    count = max(1, min(workers or os.cpu_count() or 1, jobs))
    if cluster is None:
        yield ProcessPool(count)
        return
    cluster = cluster.strip()
    if not cluster:
        raise InputError(None, "--cluster", "empty: give 'local' or a scheduler address (tcp://host:8786)")
    try:
        import distributed
    except ImportError:
        raise InputError(
            None, "--cluster", "needs Dask distributed: pip install 'gpuplan[distributed]'"
        ) from None
    if cluster == LOCAL:
        with (
            distributed.LocalCluster(
                n_workers=count,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                worker_dashboard_address=None,
                silence_logs=40,  # logging.ERROR: a worker's start-up chatter is not the user's business
                # the scheduler's HTTP routes (health, metrics) start even without a dashboard: on a free
                # loopback port, not 8787 of every interface
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            ) as local,
            distributed.Client(local) as client,
        ):
            yield DaskEngine(client, None, f"a local Dask cluster of {count} workers")
        return
    try:
        client = distributed.Client(cluster, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(
            None,
            "--cluster",
            f"no Dask scheduler answered at {cluster!r} within {CONNECT_TIMEOUT_S:g} s ({exc}); start one "
            "(dask scheduler; dask worker ADDRESS --nthreads 1) or use --cluster local",
        ) from None
    try:
        yield DaskEngine(client, workers, f"the Dask cluster at {cluster}")
    finally:
        client.close()
