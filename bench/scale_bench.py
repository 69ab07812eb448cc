"""Scale benchmark (issues 3 and 19): the straightforward full hourly MILP against the current method.

Run ``python bench/scale_bench.py [--sizes month-small,month,medium,large] [--quick]`` from anywhere.
``--quick`` is medium only (about 4.5 minutes); medium and large took 12 minutes on 2 cores (the large
full model hits the memory cap within about 2.5 minutes); the month sizes' exact solves add up to
``FULL_TIME_LIMIT`` each (month-small: 8-11 minutes to proven optimality).

The ``month-small`` size (``bench/gen.py``: 4 weeks of 4 h periods, AWS's 17 offerings, 6 services, 8
runs) is solved by (a) to proven optimality with every start on the period grid: that optimum splits
the method's certified gap into its *bound side* (optimum - certified bound) and its *plan side* (plan -
optimum). The ``month`` (30 offerings, 10 services, 15 runs) is tried the same way but is not proven
within 900 s; there and on the other sizes (a) brackets the optimum between its incumbent and its
bound, and the split is printed as the interval that leaves. On the exact sizes (c) narrows it: the
exact-start bound with every period its own cluster (``child_exact_reference``) and the plan its
integer solution makes.

For each size (scenarios from ``bench/gen.py``, written to a scratch directory with their capped
catalog, and loaded back exactly as ``gpuplan plan`` would load them):

(a) **full hourly model**: what a planner without the reductions would solve. One model slot per
    period (``ModelOptions(merge=False)``: no period merging, 1-period blocks), training starts on a
    1-period grid (still thinned to ``--full-max-starts`` per run, the product's default, else the
    placement binaries alone run into the millions), no dominance pruning (``prune=False``), whole
    on-demand/spot nodes everywhere (``integral_held=True``), built by ``create_model`` and solved by
    ``solve(problem, time_limit=T, gap=0.01)``. It runs in a spawned process that is killed above
    ``--rss-cap-gib`` or when it has not built within ``--build-grace`` seconds (or not returned
    ``--solve-grace`` seconds after ``T``): such a row reads "did not build/solve in time".
(b) **current method**: ``planner.planning.optimize.optimize`` with default ``SolveSettings`` (time limit
    ``--time-limit``), as the CLI runs it; its progress lines are echoed with timestamps, which is
    where the time goes.

Each measurement runs alone (the machine has 2 cores: running two at once would time contention),
in its own spawned process, so its peak RSS is its own. Peak RSS is ``ru_maxrss`` when the process
finishes, else the last ``VmHWM`` the parent read from ``/proc`` before killing it. Wall seconds are
timed in the child from loading the scenario (after imports) to the answer. "cost" is the model
objective in USD (including any penalty for unserved demand, shown apart), "bound" the proven lower
bound of the same run. The two rows' own bounds are for different models (the full one places
training on 1 h starts and holds capacity per hour; the current one on its start grid, holding
capacity per block), so the table adds an "hourly bound" column: for (a) its own bound, for (b) the
certified bound on the full hourly problem that ``optimize`` writes to ``plan.json``
(``certified_bound_usd``, issue 3 point 3), and a cross-check that (b)'s certificate does not exceed
(a)'s hourly-feasible cost. Figures on a shared 2-core box: +-30 %.
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for entry in (str(ROOT), str(BENCH)):  # the repo's packages and the bench modules, in the child too
    if entry not in sys.path:
        sys.path.insert(0, entry)

FULL_TIME_LIMIT = {"month-small": 900.0, "month": 900.0, "medium": 120.0, "large": 300.0}  # T for (a)
METHOD_TIME_LIMIT = 120.0  # SolveSettings' default: the current method as users run it
BUILD_GRACE = {"month-small": 120.0, "month": 120.0, "medium": 120.0, "large": 240.0}  # spawn -> (a) built
SOLVE_GRACE = 120.0  # after T: the CSR hand-off to HiGHS (~100 s for 8.6 M columns) and HiGHS's overshoot
RSS_CAP_GIB = 16.0  # of 24 GiB: leaves the rest of the machine (and other sessions) alive
FULL_GAP = 0.01
#: Sizes whose full model (a) is solved to proven optimality, with every start on the period grid (no
#: thinning): the reference that splits the method's gap into its bound side and its plan side (issue 19)
EXACT_SIZES = ("month-small", "month")
EXACT_GAP = 1e-6
ALL_STARTS = 100_000
POLL_SECONDS = 0.25
GiB = 2**30


# ---- child side (spawned processes) -------------------------------------------------------------------


def _quiet() -> None:
    """Send the child's fd 1 to /dev/null: HiGHS prints its banner from C++ even with output off."""
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GiB  # ru_maxrss: KiB on Linux


def _cpu_s() -> float:
    """CPU seconds of this process so far, user and system (HiGHS runs in its threads): on a loaded
    machine the wall seconds grow, the CPU seconds much less, and the plan not at all (issue 39)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_gib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / GiB


def estimated_columns(sets: Any) -> int:
    """Columns ``create_model`` will make from ``sets``, counted by its rules without building anything.

    Serving variables (one per service, eligible offering, tier and slot with demand), unserved-replica
    slacks, held-node counts, placements, commitments and run slacks: so a build that is killed for
    memory still says how big the model it was making is.
    """
    import numpy as np

    from models.tiers import Capacity

    positive = np.array([slot.demand for slot in sets.slots]).T > 0  # (services, slots)
    serve = slack = 0
    users: dict[tuple[Capacity, int], list[int]] = {}
    for i in range(len(sets.services)):
        slots_i = int(positive[i].sum())
        tiers = [(o, t) for (ii, o), ts in sets.serve_tiers.items() if ii == i for t in ts]
        serve += slots_i * len(tiers)
        slack += slots_i
        for o, tier in tiers:  # held nodes per (tier, offering, slot): NO beyond commitments, NS on spot
            users.setdefault((tier, o), []).append(i)
    held = sum(int(positive[members].any(axis=0).sum()) for members in users.values())
    commits = sum(len(terms) for terms in sets.terms.values())
    return serve + slack + held + len(sets.options) + commits + len(sets.runs)


def _reporting_errors(body: Callable[..., None]) -> Callable[..., None]:
    """Send an exception to the parent as an ``error`` message (a plan that fails is a result too)."""

    @functools.wraps(body)
    def wrapper(conn: Connection, *args: Any) -> None:
        try:
            body(conn, *args)
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))

    return wrapper


@_reporting_errors
def child_full_hourly(
    conn: Connection, scenario_path: str, time_limit: float, max_starts: int, gap: float = FULL_GAP
) -> None:
    """(a) Build and solve the unreduced hourly model; report each phase as it ends (the parent may kill)."""
    _quiet()

    from gen import load

    from planner.planning.optimize.build import create_model
    from planner.planning.problem.sets import full_sets
    from planner.solvers.solve import solve

    began = time.perf_counter()
    path = Path(scenario_path)
    scenario, catalog = load(path)
    sets = full_sets(scenario, catalog, path.parent, max_starts)
    conn.send(
        (
            "phase",
            {
                "phase": "sets",
                "slots": len(sets.slots),
                "options": len(sets.options),
                "estimate": estimated_columns(sets),
            },
        )
    )
    built = time.perf_counter()
    model = create_model(sets)
    variables = sum(
        len(group)
        for group in (
            model.commit, model.serve, model.held, model.place, model.unserved_run,
            model.unserved_replicas, model.guarantee, model.guarantee_short,
        )
    )  # fmt: skip
    integers = len(model.commit) + len(model.held) + len(model.place) + len(model.unserved_run)
    build_s = time.perf_counter() - built
    conn.send(
        (
            "phase",
            {
                "phase": "built",
                "variables": variables,
                "integers": integers,
                "rows": len(model.problem.constraints()),
                "build_s": build_s,
                "rss_gib": _rss_gib(),
            },
        )
    )
    result = solve(model.problem, time_limit=time_limit, gap=gap)
    penalty = math.nan
    if result.ok:
        penalty = sum(coef * (var.varValue or 0.0) for var, coef in getattr(model, "penalty_terms", []))
    conn.send(
        (
            "result",
            {
                "slots": len(sets.slots),
                "variables": variables,
                "rows": len(model.problem.constraints()),
                "build_s": build_s,
                "solve_s": result.seconds,
                "wall_s": time.perf_counter() - began,
                "status": result.termination.value,
                "objective": result.objective,
                "bound": result.bound,
                "gap": result.gap,
                "penalty": penalty,
                "peak_gib": _peak_gib(),
                "cpu_s": _cpu_s(),
            },
        )
    )


@_reporting_errors
def child_current(conn: Connection, scenario_path: str, time_limit: float, method: str = "auto") -> None:
    """(b) ``optimize`` with default settings but the time limit (and ``method``); its progress lines
    go to the parent."""
    _quiet()
    from gen import load

    from planner.planning.optimize import SolveSettings, optimize

    began = time.perf_counter()
    path = Path(scenario_path)
    scenario, catalog = load(path)
    plan = optimize(
        scenario,
        catalog,
        path.parent,
        SolveSettings(time_limit=time_limit, method=method),
        progress=lambda message: conn.send(("phase", {"phase": message})),
    )
    wall = time.perf_counter() - began
    solver = plan.document.solver.model_dump(mode="json")  # plain data for the parent process
    conn.send(
        (
            "result",
            {
                "slots": (
                    f"{solver['model_periods']}/{solver['stage2_model_periods']}"
                    if solver["stage2_model_periods"] is not None
                    else f"{solver['model_periods']} clusters"
                ),
                "method": solver["method"],
                "build_s": solver["build_seconds"],
                "solve_s": solver["seconds"],
                "wall_s": wall,
                "status": solver["status"],
                "objective": solver["objective_usd"],
                "bound": solver["bound_usd"],
                "gap": solver["gap"],
                "penalty": solver["penalty_usd"],
                "cost": plan.document.costs.total_usd,
                "unserved": len(plan.document.unserved),
                "hourly_bound": _or_nan(solver["certified_bound_usd"]),
                "hourly_gap": _or_nan(solver["certified_gap"]),
                "bound_method": solver["certified_bound_method"] or "",
                "stages": solver["stages"],
                "peak_gib": _peak_gib(),
                "cpu_s": _cpu_s(),
            },
        )
    )


@_reporting_errors
def child_exact_reference(conn: Connection, scenario_path: str, time_limit: float, incumbent: float) -> None:
    """(c) on the exact sizes: ``bound_exact.exact_bound`` with every period its own cluster, fixed against
    the cheapest plan known so far, and its integer solution dispatched as a plan (``exact_plan.py``).
    Its bound and that plan narrow the interval for the optimum that (a) leaves when it proves nothing."""
    _quiet()
    from gen import load

    from planner.planning.optimize.bound_exact import exact_bound
    from planner.planning.optimize.exact_plan import exact_candidate
    from planner.planning.problem.sets import build_sets

    began = time.perf_counter()
    path = Path(scenario_path)
    scenario, catalog = load(path)
    sets = build_sets(scenario, catalog, path.parent)
    every_period = max(1, sets.scenario.horizon.periods)
    found = exact_bound(sets, every_period, time_limit=time_limit, incumbent_usd=incumbent, threads=1)
    conn.send(("phase", {"phase": f"exact-start bound ${found.bound_usd:,.0f}: {found.integer_status}"}))
    candidate = None if found.decisions is None else exact_candidate(sets, found.decisions, lambda _m: None)
    conn.send(
        (
            "result",
            {
                "bound": found.bound_usd,
                "plan": math.nan if candidate is None else candidate.objective,
                "status": found.integer_status,
                "kept": found.columns_kept,
                "wall_s": time.perf_counter() - began,
                "peak_gib": _peak_gib(),
                "cpu_s": _cpu_s(),
            },
        )
    )


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


# ---- parent side ----------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a monitored child delivered: its result, or how far it got before it was stopped."""

    result: dict[str, Any] | None
    phases: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    killed: str = ""  # "", "memory", "time" or "crashed (exit N)"
    error: str = ""  # the exception the child reported instead of a result
    seconds: float = 0.0  # parent-side wall from spawn to the end (includes interpreter start and imports)
    peak_gib: float = 0.0  # VmHWM as last read by the parent

    @property
    def ending(self) -> str:
        if self.error:
            return f"failed ({self.error.split(':')[0]})"
        return f"killed ({self.killed})" if self.killed else "done"

    def last(self, key: str) -> Any:
        """The latest value of ``key`` in any phase message (for killed runs)."""
        for _, data in reversed(self.phases):
            if key in data:
                return data[key]
        return None


def _proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in GiB (empty once it is gone)."""
    values: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, amount, _unit = line.split()
                    values[key.rstrip(":")] = int(amount) * 1024 / GiB
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    return values


def run_monitored(
    target: Callable[..., None],
    args: tuple[Any, ...],
    first_deadline: float,
    after_build: float | None,
    rss_cap_gib: float,
    say: Callable[[str], None],
) -> Outcome:
    """Run ``target(conn, *args)`` in a spawned process, echo its phases, kill it past a limit.

    The child must finish within ``first_deadline`` seconds of its spawn, unless it reports a
    ``built`` phase: then it has ``after_build`` more seconds from that moment (the solve's own time
    limit plus grace). It is killed (SIGKILL, this one process) the first time its RSS exceeds
    ``rss_cap_gib``: a model that does not fit is an answer, not a reason to take the machine down.
    """
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=target, args=(sender, *args), daemon=True)
    began = time.perf_counter()
    process.start()
    sender.close()  # the child holds the only writer: EOF on the reader means it is gone
    outcome = Outcome(None)
    deadline = began + first_deadline
    while True:
        if receiver.poll(POLL_SECONDS):
            try:
                kind, data = receiver.recv()
            except EOFError:
                break
            now = time.perf_counter()
            if kind == "result":
                outcome.result = data
                break
            if kind == "error":
                outcome.error = data
                say(f"    [{now - began:6.1f} s] error: {data}")
                break
            outcome.phases.append((now - began, data))
            say("    " + _describe_phase(now - began, data))
            if data.get("phase") == "built" and after_build is not None:
                deadline = now + after_build
        memory = _proc_status(process.pid or 0)
        outcome.peak_gib = max(outcome.peak_gib, memory.get("VmHWM", 0.0))
        if memory.get("VmRSS", 0.0) > rss_cap_gib:
            outcome.killed = "memory"
        elif time.perf_counter() > deadline:
            outcome.killed = "time"
        elif not process.is_alive() and not receiver.poll():
            outcome.killed = f"crashed (exit {process.exitcode})"
        if outcome.killed:
            process.kill()
            break
    outcome.seconds = time.perf_counter() - began
    process.join(timeout=30)
    if process.is_alive():  # pragma: no cover - SIGKILL does not fail on Linux
        process.kill()
        process.join()
    if outcome.result is None and not (outcome.error or outcome.killed):  # gone without a word
        outcome.killed = f"crashed (exit {process.exitcode})"
    receiver.close()
    return outcome


def _describe_phase(at: float, data: dict[str, Any]) -> str:
    phase = data.get("phase", "")
    if phase == "sets":
        return (
            f"[{at:6.1f} s] sets: {data['slots']:,} slots, {data['options']:,} placement options; "
            f"the model will have ~{data['estimate']:,} variables"
        )
    if phase == "built":
        return (
            f"[{at:6.1f} s] built in {data['build_s']:.1f} s: {data['variables']:,} variables "
            f"({data['integers']:,} integer), {data['rows']:,} rows, RSS {data['rss_gib']:.1f} GiB"
        )
    return f"[{at:6.1f} s] {phase}"


# ---- the table ------------------------------------------------------------------------------------------

COLUMNS = (
    ("size", "size"),
    ("method", "method"),
    ("slots", "slots"),
    ("vars", "vars"),
    ("rows", "rows"),
    ("build", "build s"),
    ("solve", "solve s"),
    ("wall", "wall s"),
    ("cpu", "CPU s"),
    ("peak", "peak GiB"),
    ("status", "status"),
    ("cost", "cost $"),
    ("penalty", "of it unserved $"),
    ("bound", "bound $"),
    ("gap", "gap"),
    ("hourly_bound", "hourly bound $"),
    ("hourly_gap", "hourly gap"),
)


def _seconds(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _money(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:,.0f}"


def _gap(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3%}"


def full_row(size: str, outcome: Outcome, limit: float, rss_cap: float) -> dict[str, str]:
    """Row (a): a finished solve, a solve stopped at its limit, or a build that never finished."""
    row = {"size": size, "method": "(a) full hourly MILP", "peak": f"{outcome.peak_gib:.1f}"}
    built = next((data for _, data in outcome.phases if data.get("phase") == "built"), None)
    slots = outcome.last("slots")
    row["slots"] = f"{slots:,}" if slots else ""
    estimate = outcome.last("estimate")
    if estimate:
        row["vars"] = f"~{estimate:,}"
    if built:
        row |= {
            "vars": f"{built['variables']:,}",
            "rows": f"{built['rows']:,}",
            "build": _seconds(built["build_s"]),
        }
    result = outcome.result
    if result is None:
        if outcome.error:
            row |= {"wall": _seconds(outcome.seconds), "status": f"failed: {outcome.error}"}
            return row
        why = f"RSS > {rss_cap:.0f} GiB" if outcome.killed == "memory" else outcome.killed
        what = "did not solve in time" if built else "did not build in time"
        row |= {"wall": f">{_seconds(outcome.seconds)}", "status": f"{what} ({why}, killed)"}
        return row
    row |= {
        "solve": _seconds(result["solve_s"]),
        "wall": _seconds(result["wall_s"]),
        "cpu": _seconds(result["cpu_s"]),
        "peak": f"{max(result['peak_gib'], outcome.peak_gib):.1f}",
        "status": (
            f"stopped at limit ({limit:.0f} s)"
            + (", no incumbent" if result["status"] == "no_solution" else "")
            if result["status"] in ("time_limit", "no_solution")
            else result["status"]
        ),
        "cost": _money(result["objective"]),
        "penalty": _money(result["penalty"]),
        "bound": _money(result["bound"]),
        "gap": _gap(result["gap"]),
        "hourly_bound": _money(result["bound"]),  # this model is the hourly problem (see the footnote)
        "hourly_gap": _gap(result["gap"]),
    }
    return row


def current_row(size: str, outcome: Outcome, limit: float, method: str = "auto") -> dict[str, str]:
    """Row (b): the current method's plan, or why there is none."""
    chosen = outcome.result["method"] if outcome.result is not None else method
    row = {
        "size": size,
        "method": f"(b) optimize() {method}: {chosen} ({limit:.0f} s)",
        "peak": f"{outcome.peak_gib:.1f}",
    }
    result = outcome.result
    if result is None:
        if outcome.error:  # the parent's clock: includes interpreter start and imports (~1 s)
            row |= {"wall": _seconds(outcome.seconds), "status": "no plan (error below)"}
        else:
            row |= {"wall": f">{_seconds(outcome.seconds)}", "status": f"no plan (killed: {outcome.killed})"}
        return row
    return row | {
        "slots": result["slots"],
        "build": _seconds(result["build_s"]),
        "solve": _seconds(result["solve_s"]),
        "wall": _seconds(result["wall_s"]),
        "cpu": _seconds(result["cpu_s"]),
        "peak": f"{max(result['peak_gib'], outcome.peak_gib):.1f}",
        "status": result["status"],
        "cost": _money(result["objective"]),
        "penalty": _money(result["penalty"]),
        "bound": _money(result["bound"]),
        "gap": _gap(result["gap"]),
        "hourly_bound": _money(result["hourly_bound"]),
        "hourly_gap": _gap(result["hourly_gap"]),
    }


def cross_check(size: str, full: Outcome, current: Outcome) -> str | None:
    """(b)'s certified hourly bound may not exceed (a)'s cost: a cheap validity test of the certificate.

    (a)'s incumbent is a plan that is feasible hour by hour (exact hourly capacity accounting, starts
    from a subset of all hourly starts), so no valid lower bound on the hourly problem lies above it.
    The converse test does not hold: (a)'s bound is for its own start subset, which need not contain
    (b)'s starts. Tolerance: 1e-6 relative.
    """
    if full.result is None or current.result is None:
        return None
    bound, cost = current.result["hourly_bound"], full.result["objective"]
    if not (math.isfinite(bound) and math.isfinite(cost)):
        return None
    verdict = "OK" if bound <= cost * (1 + 1e-6) else "VIOLATED"
    return f"{size} cross-check: (b) hourly bound {bound:,.0f} <= (a) cost {cost:,.0f}: {verdict}"


def gap_split(size: str, full: Outcome, current: Outcome, reference: Outcome | None = None) -> str | None:
    """(b)'s certified gap split at the optimum: its bound side (optimum - bound) and plan side (plan -
    optimum), in % of the optimum, where (a) proved its optimum; otherwise the interval the best known
    bound (the larger of (a)'s and (b)'s) and the best known plan (the cheaper of the two) leave for the
    optimum, and so for each side.

    Both use the hourly problem's cost: (b)'s objective is that plan's cost hour by hour, its certified
    bound a bound on the same problem, and (a) is that problem on the period grid (its incumbent is
    hourly-feasible; its bound holds for its own start set, so it bounds the optimum only where (a)
    keeps every start, as on the exact sizes). ``reference`` (c), where it ran, adds its bound (valid:
    bound_exact.py) and its plan (hourly-feasible, dispatched like any) to the best known of each.
    """
    if current.result is None:
        return None
    plan, bound = current.result["objective"], current.result["hourly_bound"]
    if not all(math.isfinite(v) and v > 0 for v in (plan, bound)):
        return None
    low, high = bound, plan
    if full.result is not None:
        full_bound, full_cost = full.result["bound"], full.result["objective"]
        if not all(math.isfinite(v) and v > 0 for v in (full_bound, full_cost)):
            return None
        if full.result["status"] == "optimal" and (full_cost - full_bound) <= EXACT_GAP * 10 * full_cost:
            optimum = full_cost
            return (
                f"{size} gap split at the proven optimum ${optimum:,.0f}: plan {plan / optimum - 1:+.3%} "
                f"above it, certified bound {1 - bound / optimum:.3%} below it (certified gap "
                f"{1 - bound / plan:.3%})"
            )
        low = max(bound, full_bound) if size in EXACT_SIZES else bound
        high = min(plan, full_cost)
    if reference is not None and reference.result is not None:
        low = max(low, reference.result["bound"])
        if math.isfinite(reference.result["plan"]):
            high = min(high, reference.result["plan"])
    return (
        f"{size} gap split, optimum not proven, in [${low:,.0f}, ${high:,.0f}]: plan side "
        f"{plan / high - 1:.3%} to {plan / low - 1:.3%}, bound side {1 - bound / low:.3%} to "
        f"{1 - bound / high:.3%} of the optimum"
    )


def ratio_row(size: str, full: Outcome, current: Outcome) -> dict[str, str]:
    """Full / current wall time (a lower bound on the speed-up when the full model did not finish)
    and current / full cost (only when both have an incumbent)."""
    row = {"size": size, "method": "ratios (a)/(b) wall, (b)/(a) cost"}
    if current.result is None:
        return row
    if full.result is None:  # (a) never returned a plan: no time to compare with
        row["wall"] = f"(a) {full.ending}"
        row["cost"] = "(a) has no plan"
        return row
    finished = full.result["status"] == "optimal"
    full_wall = full.result["wall_s"]
    row["wall"] = f"{'>=' if not finished else ''}{full_wall / current.result['wall_s']:.1f}x"
    full_cost = full.result["objective"] if full.result is not None else math.nan
    if math.isfinite(full_cost) and full_cost > 0:
        row["cost"] = f"{current.result['objective'] / full_cost:.4f}x"
    else:
        row["cost"] = "(a) has no plan"
    return row


def render(rows: list[dict[str, str]]) -> str:
    """A plain-text table (copies cleanly into issues and chat)."""
    header = [title for _, title in COLUMNS]
    body = [[row.get(key, "") for key, _ in COLUMNS] for row in rows]
    widths = [max(len(line[k]) for line in [header, *body]) for k in range(len(header))]

    def line(cells: list[str]) -> str:
        left = [cell.ljust(width) for cell, width in zip(cells[:2], widths[:2], strict=True)]
        right = [cell.rjust(width) for cell, width in zip(cells[2:], widths[2:], strict=True)]
        return "  ".join(left + right).rstrip()

    out = [line(header), "-" * len(line(header))]
    previous = None
    for row, cells in zip(rows, body, strict=True):
        if previous is not None and row["size"] != previous:
            out.append("")
        previous = row["size"]
        out.append(line(cells))
    return "\n".join(out)


def _revision() -> str:
    """The commit measured, and whether the working tree differed from it (others edit planner/)."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "planner", "models")
    return f"{head}" + (" + uncommitted changes in planner/ or models/" if dirty else " (clean)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="month-small,month,medium,large",
        help="comma-separated sizes of bench/gen.py [%(default)s]",
    )
    parser.add_argument("--quick", action="store_true", help="medium only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--full-time-limit", type=float, help="T for (a); default 120 s medium, 300 s large")
    parser.add_argument("--time-limit", type=float, default=METHOD_TIME_LIMIT, help="for (b) [%(default)s]")
    parser.add_argument(
        "--build-grace", type=float, help="(a) killed unless built by then; default 120/240 s"
    )
    parser.add_argument("--solve-grace", type=float, default=SOLVE_GRACE, help="after T [%(default)s]")
    parser.add_argument("--rss-cap-gib", type=float, default=RSS_CAP_GIB, help="kill above [%(default)s]")
    parser.add_argument(
        "--full-max-starts", type=int, default=None, help="training starts per run in (a) [product default]"
    )
    parser.add_argument(
        "--methods", default="auto", help="comma-separated --method values for (b) [%(default)s]"
    )
    parser.add_argument("--skip-full", action="store_true", help="skip (a) (the straightforward model)")
    args = parser.parse_args(argv)

    from gen import SIZES, summary, write
    from plan_bench import machine

    from planner.planning.problem.sets import MAX_STARTS_PER_RUN

    sizes = ["medium"] if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    max_starts = args.full_max_starts or MAX_STARTS_PER_RUN
    started = time.perf_counter()

    def say(message: str) -> None:
        """Progress with the bench's clock; indented lines (child phases) carry their own."""
        stamp = "" if message.startswith(" ") else f"[{time.perf_counter() - started:6.1f} s] "
        print(stamp + message, flush=True)

    rows: list[dict[str, str]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpuplan-scale-") as scratch:
        for size in sizes:
            path = write(size, Path(scratch) / size, args.seed)
            say(f"{size}: {summary(path)}")
            limit = args.full_time_limit or FULL_TIME_LIMIT.get(size, 300.0)
            grace = args.build_grace or BUILD_GRACE.get(size, 240.0)
            if args.skip_full:
                full = Outcome(None, killed="skipped")
            else:
                exact = size in EXACT_SIZES
                starts, full_gap = (ALL_STARTS, EXACT_GAP) if exact else (max_starts, FULL_GAP)
                say(
                    f"{size}: (a) full hourly MILP, T = {limit:.0f} s, build grace {grace:.0f} s"
                    + (", every start, to proven optimality" if exact else "")
                )
                full = run_monitored(
                    child_full_hourly,
                    (str(path), limit, starts, full_gap),
                    grace,
                    limit + args.solve_grace,
                    args.rss_cap_gib,
                    say,
                )
                say(f"{size}: (a) {full.ending} after {full.seconds:.0f} s")
                rows.append(full_row(size, full, limit, args.rss_cap_gib))
            if full.error:
                notes.append(f"{size} (a) error: {full.error}")
            currents: list[Outcome] = []
            for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
                method_deadline = grace + 4 * args.time_limit  # generous: a run over it is a finding
                say(f"{size}: (b) optimize() --method {method}, time limit {args.time_limit:.0f} s")
                current = run_monitored(
                    child_current,
                    (str(path), args.time_limit, method),
                    method_deadline,
                    None,
                    args.rss_cap_gib,
                    say,
                )
                say(f"{size}: (b) {current.ending} after {current.seconds:.0f} s")
                currents.append(current)
                rows.append(current_row(size, current, args.time_limit, method))
                if not args.skip_full:
                    rows.append(ratio_row(size, full, current))
                check = cross_check(size, full, current)
                if check:
                    notes.append(check)
                if current.error:
                    notes.append(f"{size} (b) {method} error: {current.error}")
                if current.result is not None:
                    stages = ", ".join(
                        f"stage {st['stage']} {st.get('seconds', 0.0):.1f} s {st['status']}"
                        for st in current.result["stages"]
                    )
                    notes.append(
                        f"{size} (b) {method}: plan cost (no penalties) ${current.result['cost']:,.0f}; "
                        f"{current.result['unserved']} unserved item(s); {stages}"
                    )
            # (c) once per size, fixed against the cheapest plan any row found; then each (b)'s split
            planned = [c.result["objective"] for c in currents if c.result is not None]
            reference = None
            if size in EXACT_SIZES and planned:
                known = min([*planned, (full.result or {}).get("objective", math.inf)])
                say(f"{size}: (c) exact-start reference, every period its own cluster, {limit:.0f} s")
                reference = run_monitored(
                    child_exact_reference,
                    (str(path), limit, known),
                    grace + limit + args.solve_grace,
                    None,
                    args.rss_cap_gib,
                    say,
                )
                if reference.result is not None:
                    found = reference.result
                    notes.append(
                        f"{size} (c) exact-start reference: bound ${found['bound']:,.0f} "
                        f"({found['status']}, {found['kept']:,} columns kept), "
                        f"its plan ${found['plan']:,.0f}, {found['wall_s']:.0f} s"
                    )
            for current in currents:
                split = gap_split(size, full, current, reference)
                if split:
                    notes.append(split)
    print()
    print(render(rows))
    print()
    print("slots a/b = stage-1 / stage-2 model slots (staged) or the cluster model's clusters (hourly);")
    print("cost = objective incl. unserved penalties; bound/gap: (a) its own model's (the hourly one up to")
    print("start thinning), (b) plan.json bound_usd: the certified bound on the full hourly problem.")
    print("wall >=: (a) did not finish, so the speed-up is at least this.")
    for note in notes:
        print(note)
    print(f"(a) training starts thinned to <= {max_starts} per run; gap target {FULL_GAP:.0%}")
    print(f"code: {_revision()}")
    print(f"machine: {machine()}")
    print(f"bench wall time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
