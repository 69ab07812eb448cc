"""Planner benchmark: real staged solves, model sizes, and the fast build against the textbook build.

Run ``python bench/plan_bench.py [--quick] [--seed N]`` from anywhere (about 9 minutes on 2 cores;
``--quick`` skips the two 120 s solves of the unreduced models, about 4 minutes).

Scenarios: (a) ``scenarios/mixed-fleet.yaml``, the reference example (a year at 1 h periods) and
(b) the generated medium scenario (``bench/gen.py``: a quarter at 4 h periods, 30 offerings,
20 services, 30 training jobs). For each:

1. ``planner.planning.optimize.optimize`` with default settings, as ``gpuplan plan`` runs it: build, solver
   and wall seconds, status, gap, the plan's cost;
2. the stage-1 model built by ``create_model`` (fast) and by ``bench/naive_build.py`` (textbook
   PuLP) from the same planning sets: build seconds and memory, and the naive/fast ratios;
3. the same for the model *without* dominance pruning and period merging (one slot per period),
   the model a planner without ``sets.py``'s reductions would face, and its stage-1 solve with a
   120 s limit next to the reduced model's.

Equivalence is checked, not assumed: every naive model is compared with the fast one row by row and
term by term (``naive_build.compare``), and on the example both stage-1 models are solved with
``gap=1e-6`` and their objectives must agree to 1e-6 relative.

Every measurement runs in its own spawned process, so its peak RSS (``ru_maxrss``) is its own and
no measurement inherits another's heap or garbage-collector state. "+MiB" is the peak minus the RSS
just before the build (or the solve): what the step itself costs, without the ~200 MiB of
interpreter and imports every process carries. The machine has 2 cores and others may use them:
treat seconds as +-30 %, ratios as the more reliable figures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for entry in (str(ROOT), str(BENCH)):  # the repo's packages and the bench modules, in the child too
    if entry not in sys.path:
        sys.path.insert(0, entry)

EXAMPLE = ROOT / "scenarios" / "mixed-fleet.yaml"
UNREDUCED_TIME_LIMIT = 120.0
EQUIVALENCE_GAP = 1e-6
MiB = 1024.0  # ru_maxrss is in KiB on Linux


# ---- child-side helpers (run in the spawned process) --------------------------------------------------


def _rss_mib() -> float:
    """Current resident set (not the peak), to subtract the interpreter's share from a peak."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MiB


def _quiet() -> None:
    """Send the child's fd 1 to /dev/null: HiGHS prints its banner from C++ even with output off."""
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)


def _scenario(key: str, seed: int) -> tuple[Any, Path | None]:
    from models.scenario import load, parse

    if key == "example":
        return load(EXAMPLE), EXAMPLE.parent
    from gen import medium_scenario

    return parse(medium_scenario(seed)), None


def _sets(key: str, seed: int, reduced: bool) -> Any:
    from models.catalog import Catalog
    from planner.planning.problem.sets import build_sets

    scenario, base = _scenario(key, seed)
    if reduced:
        return build_sets(scenario, Catalog.load(None), base)
    from naive_build import unreduced_sets

    return unreduced_sets(scenario, Catalog.load(None), base)


def case_optimize(key: str, seed: int) -> dict[str, Any]:
    """The product's staged solve with default settings, timed like the CLI would see it."""
    _quiet()
    from models.catalog import Catalog
    from planner.planning.optimize import optimize

    scenario, base = _scenario(key, seed)
    catalog = Catalog.load(None)
    before = _rss_mib()
    began = time.perf_counter()
    plan = optimize(scenario, catalog, base)
    wall = time.perf_counter() - began
    solver = plan.document.solver.model_dump(mode="json")  # plain data for the parent process
    return {
        "build_s": solver["build_seconds"],
        "solve_s": solver["seconds"],
        "wall_s": wall,
        "status": solver["status"],
        "method": solver["method"],
        "gap": solver["gap"],
        "cost": plan.document.costs.total_usd,
        "slots": solver["model_periods"],
        "stage2_slots": solver["stage2_model_periods"],
        "stages": solver["stages"],
        "peak_mib": _peak_mib(),
        "delta_mib": _peak_mib() - before,
    }


def case_build(key: str, seed: int, reduced: bool, style: str, check: str = "none") -> dict[str, Any]:
    """Build the stage-1 model once in ``style`` ("fast" or "naive"); measure, then optionally check.

    ``check`` (naive only): "structure" compares it with the fast model term by term; "solve" also
    solves both with gap 1e-6. Checks run after the figures are taken, so they do not inflate them.
    """
    _quiet()
    from planner.planning.optimize.build import create_model

    sets = _sets(key, seed, reduced)
    before = _rss_mib()
    began = time.perf_counter()
    if style == "fast":
        problem = create_model(sets).problem
    else:
        from naive_build import create_model_naive

        problem = create_model_naive(sets).problem
    build = time.perf_counter() - began
    result: dict[str, Any] = {
        "build_s": build,
        "peak_mib": _peak_mib(),
        "delta_mib": _peak_mib() - before,
        "slots": len(sets.slots),
        "options": len(sets.options),
        "offerings": len(sets.offerings),
        "runs": len(sets.runs),
        "variables": len(problem.variables()),
        "rows": len(problem.constraints()),
    }
    if check != "none":
        from naive_build import compare

        fast = create_model(sets).problem
        differences = compare(fast, problem)
        result["differences"] = differences[:5]
        result["difference_count"] = len(differences)
        if check == "solve":
            from planner.solvers.solve import solve

            solved_fast = solve(fast, gap=EQUIVALENCE_GAP)
            solved_naive = solve(problem, gap=EQUIVALENCE_GAP)
            result["objective_fast"] = solved_fast.objective
            result["objective_naive"] = solved_naive.objective
            result["equivalence_solve_s"] = (solved_fast.seconds, solved_naive.seconds)
    return result


def case_stage1_solve(key: str, seed: int, reduced: bool, time_limit: float) -> dict[str, Any]:
    """Stage 1 alone (default gap) with a time limit: what the size reductions buy at solve time."""
    _quiet()
    from planner.planning.optimize.build import create_model
    from planner.solvers.solve import solve

    sets = _sets(key, seed, reduced)
    problem = create_model(sets).problem
    before = _rss_mib()
    result = solve(problem, time_limit=time_limit)
    return {
        "solve_s": result.seconds,
        "status": result.termination.value,
        "objective": result.objective,
        "bound": result.bound,
        "gap": result.gap,
        "peak_mib": _peak_mib(),
        "delta_mib": _peak_mib() - before,
    }


# ---- parent side ----------------------------------------------------------------------------------------


def run_isolated(function: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Run ``function(*args)`` in a fresh spawned process (its own peak RSS, its own heap)."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args).result()


@dataclass
class Row:
    """One line of the final table; empty cells stay blank."""

    case: str
    cells: dict[str, str] = field(default_factory=dict)


COLUMNS = (
    ("slots", "slots"),
    ("options", "options"),
    ("variables", "vars"),
    ("rows", "rows"),
    ("build", "build s"),
    ("solve", "solve s"),
    ("wall", "total s"),
    ("status", "status"),
    ("gap", "gap"),
    ("cost", "cost / obj $"),
    ("peak", "peak MiB"),
    ("delta", "+MiB"),
)


def _seconds(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _money(value: float) -> str:
    return "-" if value != value else f"{value:,.0f}"  # NaN: no solution


def render(rows: list[Row]) -> str:
    """A plain-text table (copies cleanly into issues and chat, unlike box drawing)."""
    header = ["case", *(title for _, title in COLUMNS)]
    body = [[row.case, *(row.cells.get(key, "") for key, _ in COLUMNS)] for row in rows]
    widths = [max(len(line[k]) for line in [header, *body]) for k in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "-" * len(line(header))
    out = [line(header), rule]
    for row, cells in zip(rows, body, strict=True):
        if row.case.startswith("=="):
            out.append(rule if out[-1] != rule else "")
            out.append(row.case)
            continue
        out.append(line(cells))
    return "\n".join(line for line in out if line)


def machine() -> str:
    """What the figures were measured on."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), "")
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import highspy  # the module constants: a Highs() instance would print its banner

    highs = ".".join(
        str(getattr(highspy, f"HIGHS_VERSION_{part}", "?")) for part in ("MAJOR", "MINOR", "PATCH")
    )
    return (
        f"nproc {len(os.sched_getaffinity(0))} ({cpu or platform.processor()}), {memory:.0f} GiB RAM, "
        f"Python {platform.python_version()}, highspy {metadata.version('highspy')} (HiGHS {highs}), "
        f"PuLP {metadata.version('pulp')}, numpy {metadata.version('numpy')}, {platform.platform()}"
    )


def _size_cells(result: dict[str, Any]) -> dict[str, str]:
    return {
        "slots": str(result["slots"]),
        "options": str(result["options"]),
        "variables": f"{result['variables']:,}",
        "rows": f"{result['rows']:,}",
    }


def _build_row(name: str, result: dict[str, Any]) -> Row:
    return Row(
        name,
        {
            **_size_cells(result),
            "build": _seconds(result["build_s"]),
            "peak": f"{result['peak_mib']:.0f}",
            "delta": f"{result['delta_mib']:.0f}",
        },
    )


def _ratio_row(name: str, naive: dict[str, Any], fast: dict[str, Any]) -> Row:
    return Row(
        name,
        {
            "build": f"{naive['build_s'] / fast['build_s']:.2f}x",
            "peak": f"{naive['peak_mib'] / fast['peak_mib']:.2f}x",
            "delta": f"{naive['delta_mib'] / max(fast['delta_mib'], 1e-9):.2f}x",
        },
    )


def _solve_row(name: str, result: dict[str, Any], limit: float | None = None) -> Row:
    status = result["status"]
    if limit is not None and status in ("time_limit", "no_solution"):
        status = f"stopped at limit ({limit:.0f} s)" + (", no solution" if status == "no_solution" else "")
    gap = result["gap"]
    return Row(
        name,
        {
            "solve": _seconds(result["solve_s"]),
            "status": status,
            "gap": "-" if gap == float("inf") else f"{gap:.3%}",
            "cost": _money(result["objective"]),
            "peak": f"{result['peak_mib']:.0f}",
            "delta": f"{result['delta_mib']:.0f}",
        },
    )


def bench_scenario(key: str, label: str, seed: int, quick: bool, say: Callable[[str], None]) -> list[Row]:
    """Every measurement of one scenario, each in its own process, as table rows."""
    rows = [Row(f"== {label}")]
    say(f"{key}: optimize (default settings)")
    plan = run_isolated(case_optimize, key, seed)
    stage1 = plan["stages"][0]
    say(f"  {plan['status']}, gap {plan['gap']:.3%}, {plan['wall_s']:.1f} s wall")

    say(f"{key}: stage-1 model, fast and naive builds")
    fast = run_isolated(case_build, key, seed, True, "fast")
    naive = run_isolated(case_build, key, seed, True, "naive", "solve" if key == "example" else "structure")
    _check(key, "reduced", naive, say)

    rows.append(
        Row(
            f"optimize(), default settings ({plan['method']})",
            {
                "slots": f"{plan['slots']}/{plan['stage2_slots'] or '-'}",
                "options": str(fast["options"]),
                "variables": f"{fast['variables']:,}",
                "rows": f"{fast['rows']:,}",
                "build": _seconds(plan["build_s"]),
                "solve": _seconds(plan["solve_s"]),
                "wall": _seconds(plan["wall_s"]),
                "status": plan["status"],
                "gap": f"{plan['gap']:.3%}",
                "cost": _money(plan["cost"]),
                "peak": f"{plan['peak_mib']:.0f}",
                "delta": f"{plan['delta_mib']:.0f}",
            },
        )
    )
    for stage in plan["stages"]:
        rows.append(
            Row(
                f"  stage {stage['stage']}",
                {
                    "solve": _seconds(stage["seconds"]),
                    "status": stage["status"],
                    "gap": f"{_stage_gap(stage):.3%}",
                    "cost": _money(_stage_objective(stage)),
                },
            )
        )
    rows.append(_build_row("stage-1 model, fast build", fast))
    rows.append(_build_row("stage-1 model, naive build", naive))
    rows.append(_ratio_row("  naive / fast", naive, fast))

    say(f"{key}: unreduced model (no pruning, no merging), fast and naive builds")
    ufast = run_isolated(case_build, key, seed, False, "fast")
    unaive = run_isolated(case_build, key, seed, False, "naive", "structure")
    _check(key, "unreduced", unaive, say)
    rows.append(_build_row("unreduced model, fast build", ufast))
    rows.append(_build_row("unreduced model, naive build", unaive))
    rows.append(_ratio_row("  naive / fast", unaive, ufast))
    rows.append(_ratio_row("  unreduced / reduced, naive", unaive, naive))
    rows.append(
        Row(
            "  unreduced / reduced, size",
            {
                "slots": f"{ufast['slots'] / fast['slots']:.1f}x",
                "options": f"{ufast['options'] / fast['options']:.1f}x",
                "variables": f"{ufast['variables'] / fast['variables']:.1f}x",
                "rows": f"{ufast['rows'] / fast['rows']:.1f}x",
            },
        )
    )
    rows.append(
        _solve_row(
            "stage-1 solve, reduced (in optimize)",
            {
                "solve_s": stage1["seconds"],
                "status": stage1["status"],
                "objective": _stage_objective(stage1),
                "gap": _stage_gap(stage1),
                "peak_mib": plan["peak_mib"],
                "delta_mib": plan["delta_mib"],
            },
        )
    )
    rows[-1].cells["peak"] = rows[-1].cells["delta"] = ""  # optimize's peak covers all stages: see above
    if quick:
        rows.append(Row("stage-1 solve, unreduced", {"status": "skipped (--quick)"}))
    else:
        say(f"{key}: stage-1 solve of the unreduced model ({UNREDUCED_TIME_LIMIT:.0f} s limit)")
        solved = run_isolated(case_stage1_solve, key, seed, False, UNREDUCED_TIME_LIMIT)
        say(f"  {solved['status']} after {solved['solve_s']:.1f} s")
        rows.append(_solve_row("stage-1 solve, unreduced", solved, UNREDUCED_TIME_LIMIT))
        change = (solved["objective"] - _stage_objective(stage1)) / _stage_objective(stage1)
        stopped = " (unreduced stopped at the limit: its incumbent, not its optimum)"
        REDUCTIONS.append(
            f"{key} stage 1, unreduced vs reduced: objective {_money(solved['objective'])} vs "
            f"{_money(_stage_objective(stage1))} ({change:+.3%}), bound {_money(solved['bound'])} vs "
            f"{_money(stage1['bound_usd'])}" + (stopped if solved["status"] != "optimal" else "")
        )
    return rows


def _stage_objective(stage: dict[str, Any]) -> float:
    """A stage's incumbent: its plan's cost, or (an hourly-method stage that made no plan) the cluster
    model's value."""
    value = stage.get("objective_usd")
    return float(value if value is not None else stage["cluster_objective_usd"])


def _stage_gap(stage: dict[str, Any]) -> float:
    """A stage's own gap: its incumbent against the bound HiGHS proved for that stage's model."""
    objective = _stage_objective(stage)
    return max(0.0, objective - stage["bound_usd"]) / max(abs(objective), 1e-9)


def _check(key: str, which: str, naive: dict[str, Any], say: Callable[[str], None]) -> None:
    """Stop the bench if the naive model is not the fast one: its figures would compare nothing."""
    if naive["difference_count"]:
        raise AssertionError(f"{key} {which}: naive and fast models differ: {naive['differences']}")
    say(f"  {which}: naive model == fast model (same variables, bounds, rows, coefficients, objective)")
    if "objective_fast" in naive:
        fast_obj, naive_obj = naive["objective_fast"], naive["objective_naive"]
        relative = abs(fast_obj - naive_obj) / max(abs(fast_obj), 1e-9)
        seconds = naive["equivalence_solve_s"]
        say(
            f"  stage-1 solved with gap {EQUIVALENCE_GAP:g}: fast ${fast_obj:,.4f} ({seconds[0]:.1f} s), "
            f"naive ${naive_obj:,.4f} ({seconds[1]:.1f} s), relative difference {relative:.2e}"
        )
        assert relative <= 1e-6, f"objectives differ by {relative:.2e} relative"
        EQUIVALENCE.append(
            f"{key} stage 1 solved at gap {EQUIVALENCE_GAP:g}: fast {fast_obj:,.4f}, naive {naive_obj:,.4f}, "
            f"relative difference {relative:.1e} (<= 1e-6: OK)"
        )
    EQUIVALENCE.append(f"{key} {which}: naive model identical to the fast one, term by term")


EQUIVALENCE: list[str] = []  # naive model == fast model (printed under the table)
REDUCTIONS: list[str] = []  # the unreduced model's stage-1 result next to the reduced one's
LEGEND = """\
optimize(): vars/rows are stage 1's; slots a/b = stage-1 / stage-2 model slots; gap against the stage-1
bound (the plan's certificate). stages and solves: gap against that solver run's own bound.
peak MiB: the process's peak RSS; +MiB: peak minus the RSS just before the build / solve.
unreduced: no dominance pruning (offerings, tiers, training starts) and one model slot per period."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 120 s solves of the unreduced models")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated medium scenario")
    args = parser.parse_args(argv)
    began = time.perf_counter()

    def say(message: str) -> None:
        print(f"[{time.perf_counter() - began:6.1f} s] {message}", flush=True)

    import tempfile

    from gen import medium_scenario, summary, write_scenario

    with tempfile.TemporaryDirectory(prefix="gpuplan-bench-") as tmp:  # summary() reads a scenario file
        say(summary(write_scenario(medium_scenario(args.seed), Path(tmp) / "scenario.yaml", args.seed)))
    rows = bench_scenario("example", f"(a) {EXAMPLE.relative_to(ROOT)}", args.seed, args.quick, say)
    medium = f"(b) generated medium (bench/gen.py, seed {args.seed})"
    rows += bench_scenario("medium", medium, args.seed, args.quick, say)
    print()
    print(render(rows))
    print()
    print(LEGEND)
    for line in EQUIVALENCE:
        print(f"equivalence: {line}")
    for line in REDUCTIONS:
        print(f"reductions: {line}")
    print(f"machine: {machine()}")
    print(f"bench wall time: {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
