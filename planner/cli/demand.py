"""`gpuplan demand`: a fleet's demand read from its own history (Prometheus, an OpenCost export or a
usage CSV) into hourly demand per service, the training runs seen, and what was read from where
(planner/history/; docs/demand.md).

Bad input (a flag, the mapping or queries file, a query that returns nothing, an unreadable file) exits 2
with one line; a server that cannot be read (unreachable, 4xx, 5xx after retries, not the API) exits 6
with one line naming the URL without credentials and the query. Nothing is written then: ``-o DIR``
appears whole or not at all.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Final

import typer
from rich.markup import escape

from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from planner.cli.common import err, fail, out, progress_messages

__all__ = ["demand"]

_DURATION: Final = re.compile(r"([1-9][0-9]{0,5})([smhdw])")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _duration(text: str, flag: str, lowest: timedelta, highest: timedelta) -> timedelta:
    """``90d``, ``1h``, ``2w`` as a timedelta inside [lowest, highest]; InputError naming the flag."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise InputError(None, flag, f"{text!r} is not a duration (a number and s, m, h, d or w: 90d, 1h)")
    value = timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})
    if not lowest <= value <= highest:
        raise InputError(None, flag, f"{text} is outside {lowest} to {highest}")
    return value


def _until(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(
            None, "--until", f"{text!r} is not a time (ISO 8601: 2027-03-01T00:00:00Z)"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def demand(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="directory to write (appears whole or not at all)")
    ] = None,
    prometheus: Annotated[
        str | None,
        typer.Option(
            help="Prometheus HTTP API base URL (self-hosted, Google or Amazon Managed Prometheus); "
            "credentials from GPUPLAN_PROMETHEUS_TOKEN or GPUPLAN_PROMETHEUS_USER/_PASSWORD"
        ),
    ] = None,
    opencost: Annotated[
        Path | None, typer.Option(help="an OpenCost /allocation JSON export, instead of Prometheus")
    ] = None,
    usage: Annotated[
        Path | None, typer.Option(help="a usage CSV (gpuplan chargeback's format), instead of Prometheus")
    ] = None,
    since: Annotated[str, typer.Option(help="how far back to read from Prometheus: 90d, 12w, 36h")] = "90d",
    step: Annotated[str, typer.Option(help="the series' step: 1h (what the planner's periods use)")] = "1h",
    until: Annotated[
        str | None, typer.Option(help="the last step read, ISO 8601 (default: now, floored to the step)")
    ] = None,
    mapping: Annotated[
        Path | None,
        typer.Option(help="YAML: series -> services (default: each namespace a team and a service)"),
    ] = None,
    queries: Annotated[
        Path | None, typer.Option(help="YAML: PromQL and label names overriding the defaults")
    ] = None,
    show_queries: Annotated[
        bool, typer.Option("--show-queries", help="print the PromQL each series is read with, and stop")
    ] = False,
    retries: Annotated[int, typer.Option(min=0, max=10, help="retries of a 5xx or 429 answer")] = 3,
    timeout: Annotated[float, typer.Option(min=1, max=600, help="seconds per request")] = 60.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress messages")] = False,
) -> None:
    """Read a fleet's GPU demand from its history: hourly demand per service and the training runs seen.

    From Prometheus (kube-state-metrics GPU requests, DCGM utilization, Kueue pending workloads), an
    OpenCost allocation export or a usage CSV. Writes DIR/history/<service>.csv, DIR/history/runs.csv and
    DIR/history.json (what was read from where, gaps and how they were filled, warnings)."""
    from planner.history.mapping import load_mapping
    from planner.history.prometheus import PrometheusClient, auth_from_env
    from planner.history.queries import load_queries
    from planner.history.read import read_prometheus, window
    from planner.history.sources import read_opencost_history, read_usage_history

    say = progress_messages(quiet)
    try:
        config = load_queries(queries)
        if show_queries:
            for role, text in config.all().items():
                marker = " (from --queries)" if role in config.queries else ""
                out.print(f"# {role}{marker}\n{text}\n", highlight=False, markup=False, soft_wrap=True)
            return
        given = [
            name
            for name, v in (("--prometheus", prometheus), ("--opencost", opencost), ("--usage", usage))
            if v
        ]
        if len(given) != 1:
            problem = "give one source: --prometheus URL, --opencost FILE or --usage FILE"
            raise InputError(None, given[1] if len(given) > 1 else "--prometheus", problem)
        if output is None:
            raise InputError(None, "--output", "give the directory to write (-o DIR)")
        step_length = _duration(step, "--step", timedelta(minutes=1), timedelta(days=1))
        mapped = load_mapping(mapping)
        if prometheus is not None:
            since_length = _duration(since, "--since", step_length, timedelta(days=5 * 366))
            client = PrometheusClient(
                prometheus, auth=auth_from_env(), timeout=timeout, retries=retries, progress=say
            )
            span = window(since_length, step_length, _until(until))
            history = read_prometheus(client, config, mapped, span, say)
        elif opencost is not None:
            history = read_opencost_history(opencost, mapped, step_length, say)
        else:
            assert usage is not None
            history = read_usage_history(usage, mapped, step_length, say)
        # ---- issue 40, points 2 and 3 plug in here: the forecast (planner/history/forecast.py) takes
        # `history` (planner.history.result.History) and the scenario writer and the page write beside
        # the history files, inside the same staging directory so that DIR appears whole. ----
        with atomic_directory(output) as staging:
            history.write(staging)
    except GpuplanError as exc:
        raise fail(exc) from None
    for warning in history.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    steps = len(history.index)
    out.print(
        f"wrote {output}/: {len(history.services)} services over {steps} steps, {len(history.runs)} "
        f"training runs, {len(history.warnings)} warnings (history.json)",
        highlight=False,
    )
