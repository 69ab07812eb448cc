"""`gpuplan simulate`: replay job traces on a fleet under scheduling policies.

Same conventions as ``planner/cli/app.py`` (both use ``planner/cli/common.py``): exit 0 on success, 2 on bad
input (one line naming the file, the field and the problem; nothing written), 3 when the planner cannot
size the fleet. Results are written into a directory that appears whole or not at all.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from planner.cli.common import err, fail, progress_messages

simulate_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help, as every gpuplan command (planner/cli/app.py PLAIN_HELP)
    help="Replay job traces on a GPU fleet: naive, best-fit and workload-aware scheduling side by side.",
)
out = Console()

SCHEMA = "gpuplan.simulate/v1"
DEFAULT_POLICIES = "naive,best-fit,workload-aware"
NOTES = (
    "alloc %: GPUs allocated to jobs (GPUs a half-placed naive gang holds and small replicas rounded up to "
    "whole GPUs count); util %: GPUs jobs use; frag %: free GPUs on nodes that cannot host the first "
    "waiting request; waits: hours from arrival to first start (jobs still waiting count until the end); "
    "gangs split: multi-node jobs spread over leaf switches / started.\n"
)


def _policies(text: str, known: tuple[str, ...] | list[str]) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise InputError(None, "--policy", "give at least one policy")
    for name in names:
        if name not in known:
            raise InputError(None, "--policy", f"unknown policy {name!r}; choose from {', '.join(known)}")
    return list(dict.fromkeys(names))


def _progress_bar(quiet: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}[/]"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(), console=err, disable=quiet, transient=True,
    )  # fmt: skip


@simulate_app.command()
def philly(
    trace: Annotated[Path, typer.Option("--trace", help="philly.csv (timestamp,duration,num_gpus,cluster)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="directory to write")] = Path("simulation"),
    week_start: Annotated[
        str | None, typer.Option(help="first day to replay, YYYY-MM-DD (default: the busiest week)")
    ] = None,
    days: Annotated[int, typer.Option(help="days to replay and measure")] = 7,
    warmup_hours: Annotated[float, typer.Option(help="replayed before the week, not measured")] = 48.0,
    mixed: Annotated[
        bool, typer.Option("--mixed/--training-only", help="add diurnal inference services to the trace")
    ] = True,
    policy: Annotated[
        str | None,
        typer.Option(
            help="comma-separated: naive, kubernetes, best-fit, workload-aware (default: naive, best-fit, "
            "workload-aware; with --saturated all four)"
        ),
    ] = None,
    nodes: Annotated[
        int | None, typer.Option(help="fleet size in nodes (default: sized by the planner for the week)")
    ] = None,
    offering: Annotated[str, typer.Option(help="catalog offering of the fleet's nodes")] = (
        "aws:us-east-1:p5.48xlarge"
    ),
    catalog: Annotated[Path | None, typer.Option(help="catalog CSV (default: the embedded one)")] = None,
    nodes_per_leaf: Annotated[int, typer.Option(help="nodes under one leaf switch; 0 = no topology")] = 32,
    training_smoothing_hours: Annotated[
        int | None,
        typer.Option(help="sizing: training demand averaged over this many hours (default: the whole week)"),
    ] = None,
    split_after_hours: Annotated[
        float | None,
        typer.Option(help="workload-aware: a gang may spread over leaf switches after queueing this long"),
    ] = None,
    time_limit: Annotated[float, typer.Option(help="planner time limit, seconds")] = 60.0,
    saturated: Annotated[
        bool,
        typer.Option(
            "--saturated",
            help="throughput: the trace's jobs feed a backlog larger than the fleet (needs --nodes; "
            "training only); measures useful GPU-hours per day",
        ),
    ] = False,
    backlog: Annotated[float, typer.Option(help="--saturated: queue depth, x the fleet's GPUs")] = 2.0,
    cross_node_slowdown: Annotated[
        float | None,
        typer.Option(
            help="a job spread over more nodes than it needs runs this much slower (--saturated: 1.5)"
        ),
    ] = None,
    cross_leaf_slowdown: Annotated[
        float | None,
        typer.Option(
            help="a job over more leaf switches than it needs runs this much slower (--saturated: 1.1)"
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar or messages")] = False,
) -> None:
    """Replay a week of the Philly trace (optionally with inference services) on a planner-sized fleet.

    Writes DIR/results.json, DIR/results.md and DIR/timeline.csv (allocation over time per policy).
    With --saturated: the throughput of each policy on a backlog that never runs dry (results.md has the
    table and the ratio workload-aware / kubernetes).
    """
    from models.catalog import Catalog
    from planner.simulate.events import simulate
    from planner.simulate.fleet import Fleet
    from planner.simulate.philly import (
        DEFAULT_SERVICES,
        build_week,
        load_trace,
        markdown_table,
        quotas,
        size_fleet,
        summary_rows,
    )
    from planner.simulate.policies import POLICIES, make_policy

    say = progress_messages(quiet)

    try:
        if saturated:
            _saturated(
                trace, output, week_start, days, warmup_hours, policy, nodes, offering, catalog,
                nodes_per_leaf, backlog, cross_node_slowdown, cross_leaf_slowdown, quiet,
            )  # fmt: skip
            return
        names = _policies(policy or DEFAULT_POLICIES, list(POLICIES))
        for flag, value, low in (("--days", days, 1), ("--nodes-per-leaf", nodes_per_leaf, 0)):
            if value < low:
                raise InputError(None, flag, f"must be at least {low}, got {value}")
        if nodes is not None and nodes < 1:
            raise InputError(None, "--nodes", f"must be at least 1, got {nodes}")
        if time_limit <= 0:
            raise InputError(None, "--time-limit", f"must be positive, got {time_limit}")
        if split_after_hours is not None and not split_after_hours >= 0:
            raise InputError(None, "--split-after-hours", f"must be >= 0, got {split_after_hours}")
        start = _week_start(week_start)
        frame = load_trace(trace)
        leaf = nodes_per_leaf or None
        try:
            node_type = Catalog.load(catalog).get(offering)
        except KeyError as exc:
            raise InputError(catalog or "embedded catalog", "--offering", str(exc.args[0])) from None
        gpn, memory = node_type.gpus_per_node, node_type.gpu_memory_gb
        week = build_week(
            frame, start=start, days=days, warmup_hours=warmup_hours,
            services=DEFAULT_SERVICES if mixed else (), gpus_per_node=gpn, gpu_memory_gb=memory,
            source=str(trace),
        )  # fmt: skip
        say(
            f"week from {week.start:%Y-%m-%d}: {len(week.jobs):,} jobs replayed "
            f"({days} d + {warmup_hours:g} h warm-up)"
        )
        sizing = None
        if nodes is None:
            say(f"sizing the fleet with the planner on {offering}")
            sizing = size_fleet(
                week, offering, catalog_path=catalog, nodes_per_leaf=leaf, time_limit=time_limit,
                smoothing_hours=training_smoothing_hours,
            )  # fmt: skip
            fleet = sizing.fleet
            say(
                f"planner: {fleet.nodes} nodes x {fleet.gpus_per_node} {fleet.gpu_model} "
                f"({sizing.seconds:.1f} s)"
            )
        else:
            fleet = Fleet(nodes, gpn, node_type.gpu_model, nodes_per_leaf=leaf, gpu_memory_gb=memory)
        team_quotas = quotas(week, fleet)
        slowdown = _slowdown(cross_node_slowdown, cross_leaf_slowdown, 1.0, 1.0)
        results = []
        with _progress_bar(quiet) as bar:
            tasks: dict[str, TaskID] = {name: bar.add_task(name, total=1.0) for name in names}
            for name in names:
                options = {"split_after_hours": split_after_hours} if split_after_hours is not None else {}
                chosen_policy = make_policy(name, fleet, **(options if name == "workload-aware" else {}))
                results.append(
                    simulate(
                        week.jobs, fleet, chosen_policy, start=0.0, end=week.end,
                        measure_from=week.measure_from, quotas=team_quotas, slowdown=slowdown,
                        progress=lambda share, task=tasks[name]: bar.update(task, completed=share),
                    )
                )  # fmt: skip
        rows = summary_rows(results)
        data = {
            "schema": SCHEMA,
            "kind": "philly",
            "week": week.describe(),
            "fleet": fleet.describe(),
            "sizing": sizing.describe() if sizing is not None else {"rule": "--nodes given", "nodes": nodes},
            "quotas_gpus": {team: round(value, 2) for team, value in sorted(team_quotas.items())},
            "summary": rows,
            "results": [r.to_dict() for r in results],
        }
        title = f"Philly week from {week.start:%Y-%m-%d} ({'mixed' if mixed else 'training only'})"
        markdown = "\n".join(
            [
                f"# {title}\n",
                f"Fleet: {fleet.nodes} nodes x {fleet.gpus_per_node} {fleet.gpu_model} "
                f"({fleet.total_gpus} GPUs, {fleet.leaves} leaf switch(es)); "
                + (f"sized by the planner: {sizing.rule}.\n" if sizing else "given with --nodes.\n"),
                markdown_table(rows),
                NOTES,
            ]
        )
        with atomic_directory(output) as staging:
            (staging / "results.json").write_text(json.dumps(data, indent=2, default=_json) + "\n")
            (staging / "results.md").write_text(markdown, encoding="utf-8")
            frames = [r.timeline.assign(policy=r.policy) for r in results]
            import pandas as pd

            timeline = pd.concat(frames, ignore_index=True)
            timeline = timeline[["policy", *[c for c in timeline.columns if c != "policy"]]]
            timeline.to_csv(staging / "timeline.csv", index=False)
    except GpuplanError as error:
        raise fail(error) from None
    out.print(_rich_table(title, rows, fleet.total_gpus))
    out.print(f"written to {output}/ (results.json, results.md, timeline.csv)", highlight=False)


def _slowdown(
    cross_node: float | None, cross_leaf: float | None, node_default: float, leaf_default: float
) -> Any:
    """The placement slowdown from the flags (a flag not given: the default of the mode)."""
    from planner.simulate.fleet import Slowdown

    for flag, value in (("--cross-node-slowdown", cross_node), ("--cross-leaf-slowdown", cross_leaf)):
        if value is not None and not (math.isfinite(value) and value >= 1.0):
            raise InputError(None, flag, f"must be a factor >= 1, got {value}")
    return Slowdown(
        cross_node=node_default if cross_node is None else cross_node,
        cross_leaf=leaf_default if cross_leaf is None else cross_leaf,
    )


def _week_start(text: str | None) -> datetime | None:
    """``--week-start``: the first day of the replayed week (None: the busiest week)."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InputError(None, "--week-start", f"not a date (YYYY-MM-DD): {text!r}") from None


def _saturated(
    trace: Path, output: Path, week_start: str | None, days: int, warmup_hours: float, policy: str | None,
    nodes: int | None, offering: str, catalog: Path | None, nodes_per_leaf: int, backlog: float,
    cross_node: float | None, cross_leaf: float | None, quiet: bool,
) -> None:  # fmt: skip
    """``--saturated``: every policy on the same backlog feed; writes results.json, results.md, timeline.csv
    (the week mode's files)."""
    from models.catalog import Catalog
    from planner.simulate.fleet import Fleet
    from planner.simulate.philly import (
        DEFAULT_SLOWDOWN,
        THROUGHPUT_POLICIES,
        load_trace,
        replay_saturated,
        throughput_ratio,
        throughput_rows,
        throughput_table,
        trace_jobs,
    )
    from planner.simulate.policies import POLICIES

    names = _policies(policy or ",".join(THROUGHPUT_POLICIES), list(POLICIES))
    if nodes is None:
        raise InputError(
            None, "--nodes", "--saturated needs the fleet size (a backlog has no week to size for)"
        )
    if nodes < 1:
        raise InputError(None, "--nodes", f"must be at least 1, got {nodes}")
    if nodes_per_leaf < 0:
        raise InputError(None, "--nodes-per-leaf", f"must be at least 0, got {nodes_per_leaf}")
    slowdown = _slowdown(cross_node, cross_leaf, DEFAULT_SLOWDOWN.cross_node, DEFAULT_SLOWDOWN.cross_leaf)
    start = _week_start(week_start)
    try:
        node_type = Catalog.load(catalog).get(offering)
    except KeyError as exc:
        raise InputError(catalog or "embedded catalog", "--offering", str(exc.args[0])) from None
    frame = load_trace(trace)
    jobs = trace_jobs(frame, start, node_type.gpus_per_node)
    fleet = Fleet(
        nodes, node_type.gpus_per_node, node_type.gpu_model, nodes_per_leaf=nodes_per_leaf or None,
        gpu_memory_gb=node_type.gpu_memory_gb,
    )  # fmt: skip
    with _progress_bar(quiet) as bar:
        tasks = {name: bar.add_task(name, total=1.0) for name in names}
        results = replay_saturated(
            jobs, fleet, names, warmup_hours=warmup_hours, days=days, backlog_factor=backlog,
            slowdown=slowdown, progress=lambda name, share: bar.update(tasks[name], completed=share),
        )  # fmt: skip
    rows = throughput_rows(results)
    ratio = throughput_ratio(rows)
    title = f"Philly saturated: {len(jobs):,} jobs fed to {fleet.total_gpus} GPUs"
    ratio_line = (
        f"workload-aware / kubernetes useful GPU-hours per day: {ratio:.3f}\n" if ratio is not None else ""
    )
    markdown = "\n".join(
        [
            f"# {title}\n",
            f"Fleet: {fleet.nodes} nodes x {fleet.gpus_per_node} {fleet.gpu_model} ({fleet.leaves} leaf "
            f"switch(es)); warm-up {warmup_hours:g} h, window {days} d; backlog {backlog:g} x the fleet's "
            "GPUs; "
            f"slowdown cross-node {slowdown.cross_node:g}, cross-leaf {slowdown.cross_leaf:g}.\n",
            throughput_table(rows),
            ratio_line,
            "useful: work done in the window at full speed (a slowed job counts 1/factor of the GPU-hours it "
            "holds; GPUs a half-placed gang holds and work lost at a preemption count nothing); saturated: "
            "the queue was never empty in the window.\n",
        ]
    )
    data = {
        "schema": SCHEMA,
        "kind": "philly-saturated",
        "fleet": fleet.describe(),
        "window_hours": [warmup_hours, warmup_hours + 24.0 * days],
        "backlog_x_fleet_gpus": backlog,
        "slowdown": {"cross_node": slowdown.cross_node, "cross_leaf": slowdown.cross_leaf},
        "summary": rows,
        "ratio_workload_aware_over_kubernetes": ratio,
        "results": [r.to_dict() for r in results],
    }
    with atomic_directory(output) as staging:
        (staging / "results.json").write_text(json.dumps(data, indent=2, default=_json) + "\n")
        (staging / "results.md").write_text(markdown, encoding="utf-8")
        import pandas as pd

        timeline = pd.concat([r.timeline.assign(policy=r.policy) for r in results], ignore_index=True)
        timeline = timeline[["policy", *[c for c in timeline.columns if c != "policy"]]]
        timeline.to_csv(staging / "timeline.csv", index=False)
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    shown = (("policy", "policy"), ("useful_gpu_h_per_day", "useful GPU-h/d"), ("useful_pct", "useful%"),
             ("multi_gpu_pct", "multi%"), ("utilization_pct", "util%"), ("slowdown_loss_pct", "slow%"),
             ("saturated", "saturated"))  # fmt: skip
    for key, label in shown:
        table.add_column(label, justify="left" if key == "policy" else "right", no_wrap=True)
    for row in rows:
        table.add_row(*(str(row[key]) for key, _ in shown))
    out.print(table)
    if ratio is not None:
        out.print(f"workload-aware / kubernetes: {ratio:.3f}", highlight=False)
    out.print(f"written to {output}/ (results.json, results.md, timeline.csv)", highlight=False)


def _json(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


TERMINAL_COLUMNS = (
    ("policy", "policy"),
    ("allocation_pct", "alloc%"),
    ("utilization_pct", "util%"),
    ("fragmentation_pct", "frag%"),
    ("delay_mean_h", "wait"),
    ("delay_p95_h", "p95"),
    ("inference_delay_mean_h", "infer"),
    ("gang_delay_mean_h", "gang"),
    ("preemptions", "evict"),
    ("gangs_split", "split"),
)


def _rich_table(title: str, rows: list[dict[str, Any]], gpus: int) -> Table:
    """The headline columns (results.md has them all), narrow enough for an 80-column terminal."""
    table = Table(
        title=f"{title}, {gpus} GPUs",
        caption="waits in hours (mean, p95; inference and gang means); split = gangs over leaves / started",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        collapse_padding=True,
    )
    for key, label in TERMINAL_COLUMNS:
        table.add_column(label, justify="left" if key == "policy" else "right", no_wrap=True)
    for row in rows:
        cells = [
            f"{row[key]}/{row['gangs_started']}" if key == "gangs_split" else str(row[key])
            for key, _ in TERMINAL_COLUMNS
        ]
        table.add_row(*cells)
    return table


@simulate_app.command()
def openb(
    pods: Annotated[Path, typer.Option("--pods", help="openb pod list CSV (openb_pod_list_*.csv)")],
    nodes: Annotated[Path, typer.Option("--nodes", help="openb node list CSV (openb_node_list_*.csv)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="directory to write")] = Path("openb"),
    policy: Annotated[
        str,
        typer.Option(
            help="comma-separated: random, first-fit, best-fit, workload-aware, dot-product, clustering, "
            "packing"
        ),
    ] = "random,first-fit,best-fit,workload-aware",
    seed: Annotated[int, typer.Option(help="seed of the arrival order and of random tie-breaks")] = 0,
    levels: Annotated[str, typer.Option(help="arrival levels, % of GPU capacity: 50:100:5 or 50,75,100")] = (
        "50:100:5"
    ),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Replay the Alibaba openb GPU-sharing trace (packing, no departures): unallocated GPUs per policy.

    Writes DIR/openb.json and DIR/openb.md (planner/simulate/openb.py describes the method).
    """
    from planner.simulate.openb import POLICIES, compare, load_nodes, load_pods

    try:
        names = _policies(policy, list(POLICIES))
        steps = _levels(levels)
        cluster, pod_list = load_nodes(nodes), load_pods(pods)
        with _progress_bar(quiet) as bar:
            tasks = {name: bar.add_task(name, total=1.0) for name in names}
            try:
                comparison = compare(
                    cluster, pod_list, names, seed, steps,
                    progress=lambda name, done, total: bar.update(tasks[name], completed=done / (total or 1)),
                )  # fmt: skip
            except ValueError as exc:
                raise InputError(None, "--levels/--policy", str(exc)) from None
        table = comparison.table.reset_index()
        data = {
            "schema": SCHEMA,
            "kind": "openb",
            "pods": str(pods),
            "nodes": str(nodes),
            "capacity_gpus": cluster.capacity_gpus,
            "seed": seed,
            "unallocated_gpu_pct": json.loads(table.to_json(orient="records")),
            "failed_pods": json.loads(comparison.failed.reset_index().to_json(orient="records")),
            "seconds": {name: round(r.seconds, 3) for name, r in comparison.results.items()},
        }
        with atomic_directory(output) as staging:
            (staging / "openb.json").write_text(json.dumps(data, indent=2) + "\n")
            (staging / "openb.md").write_text(
                f"# openb: unallocated GPUs (% of {cluster.capacity_gpus}) by arrival level\n\n"
                + _markdown_frame(table),
                encoding="utf-8",
            )
    except GpuplanError as error:
        raise fail(error) from None
    shown, legend = _openb_table(table, cluster.capacity_gpus, seed)
    out.print(shown)
    out.print(legend, highlight=False)
    out.print(f"written to {output}/ (openb.json, openb.md)", highlight=False)


#: The openb table's columns in a terminal: short headers, so that all seven policies fit 80 columns with
#: nothing cut; the caption spells out each one shown (openb.md keeps the full names).
OPENB_HEADERS: dict[str, tuple[str, str]] = {
    "level_pct": ("level", "arrival level, % of GPU capacity"),
    "random": ("rand", "random"),
    "first-fit": ("ff", "first-fit"),
    "best-fit": ("bf", "best-fit"),
    "workload-aware": ("wa", "workload-aware"),
    "dot-product": ("dot", "dot-product"),
    "clustering": ("clu", "clustering"),
    "packing": ("pack", "packing"),
    "best_baseline": ("best", "the best of rand, ff and bf"),
    "reduction_pct": ("cut%", "how many fewer unallocated GPUs wa leaves than best, in %"),
}


def _openb_table(table: Any, capacity_gpus: int, seed: int) -> tuple[Table, str]:
    """Unallocated GPU % per arrival level (rows) and policy, and the legend of its headers: every policy
    fits an 80-column terminal."""
    shown = Table(
        title=f"openb: unallocated GPU % of {capacity_gpus} by arrival level (seed {seed})",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        collapse_padding=True,
    )
    columns = [str(c) for c in table.columns]
    for column in columns:
        shown.add_column(OPENB_HEADERS.get(column, (column, ""))[0], justify="right", no_wrap=True)
    for record in table.itertuples(index=False):
        level, *values = record
        shown.add_row(f"{level:g}", *(_cell(v) for v in values))
    legend = "; ".join(
        f"{OPENB_HEADERS[c][0]} = {OPENB_HEADERS[c][1]}" for c in columns if c in OPENB_HEADERS
    )
    return shown, legend + "."


def _markdown_frame(frame: Any) -> str:
    columns = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---:" for _ in columns) + "|"]
    for record in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in record) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.2f}"
    return str(value)


def _levels(text: str) -> list[float]:
    try:
        if ":" in text:
            start, stop, step = (float(x) for x in text.split(":"))
            if step <= 0:
                raise ValueError
            values = []
            value = start
            while value <= stop + step / 2:
                values.append(round(value, 6))
                value += step
            return values
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(
            None, "--levels", f"expected START:STOP:STEP or a comma list, got {text!r}"
        ) from None
