"""`gpuplan demand`: a fleet's demand read from its own history (Prometheus, an OpenCost export or a
usage CSV) into hourly demand per service, the training runs seen, and what was read from where
(planner/history/; docs/demand.md).

Bad input (a flag, the mapping or queries file, a query that returns nothing, an unreadable file) exits 2
with one line; a server that cannot be read (unreachable, 4xx, 5xx after retries, not the API) exits 6
with one line naming the URL without credentials and the query. Nothing is written then: ``-o DIR``
appears whole or not at all.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.markup import escape
from rich.table import Table

from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from planner.cli.common import err, fail, out, progress_messages

if TYPE_CHECKING:
    from planner.history.outlook import Outlook

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
    horizon: Annotated[
        str, typer.Option(help="how far to forecast past the history's last hour: 365d, 26w, 14d")
    ] = "365d",
    quantiles: Annotated[
        str, typer.Option(help="the forecast's quantiles, ascending, each inside (0, 1)")
    ] = "0.1,0.5,0.9",
    paths: Annotated[int, typer.Option(min=1, max=10_000, help="sampled futures per service")] = 100,
    seed: Annotated[int, typer.Option(min=0, help="seed of the sampled futures (same seed, same files)")] = 0,
    futures: Annotated[
        int,
        typer.Option(
            min=0, max=50, help="sampled paths written as futures.yaml for gpuplan futures (0: none)"
        ),
    ] = 10,
    backtest: Annotated[
        str | None,
        typer.Option(
            help="hold out the history's last 30d (or 14d, ...) and report the forecast's error on it"
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress messages")] = False,
) -> None:
    """Read a fleet's GPU demand from its history: hourly demand per service and the training runs seen.

    From Prometheus (kube-state-metrics GPU requests, DCGM utilization, Kueue pending workloads), an
    OpenCost allocation export or a usage CSV. Writes DIR/history/<service>.csv, DIR/history/runs.csv and
    DIR/history.json (what was read from where, gaps and how they were filled, warnings); then forecasts
    each service --horizon ahead: DIR/forecast/<service>/p50.csv (and each quantile), DIR/paths/ (sampled
    futures), DIR/scenario.yaml (plan it at once; lines marked REVIEW are defaults), DIR/futures.yaml (the
    first --futures sampled paths, for gpuplan futures) and DIR/demand.md and DIR/demand.html; --backtest
    30d adds the forecast's error on the last 30 days."""
    from planner.history.draft import write_scenario
    from planner.history.mapping import load_mapping
    from planner.history.outlook import Settings, check_step, default_workers, outlook
    from planner.history.page import page_document
    from planner.history.prometheus import PrometheusClient, auth_from_env
    from planner.history.queries import load_queries
    from planner.history.read import read_prometheus, window
    from planner.history.sources import read_opencost_history, read_usage_history
    from planner.outputs.reports.demand import render_demand_html, render_demand_md

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
        check_step(step_length)
        ahead = _duration(horizon, "--horizon", timedelta(hours=1), timedelta(days=5 * 365))
        held = (
            None
            if backtest is None
            else _duration(backtest, "--backtest", timedelta(hours=1), timedelta(days=5 * 366))
        )
        levels = _quantiles(quantiles)
        mapped = load_mapping(mapping)
        if prometheus is not None:
            since_length = _duration(since, "--since", step_length, timedelta(days=5 * 366))
            client = PrometheusClient(
                prometheus, auth=auth_from_env(), timeout=timeout, retries=retries, progress=say
            )
            span = window(since_length, step_length, _until(until))
            history = read_prometheus(client, config, mapped, span, say)
        elif opencost is not None:
            history = read_opencost_history(opencost, mapped, step_length, say, config.gang_labels)
        else:
            assert usage is not None
            history = read_usage_history(usage, mapped, step_length, say)
        settings = Settings(
            hours=_whole_hours(ahead, "--horizon"),
            quantiles=levels,
            paths=paths,
            seed=seed,
            backtest_hours=None if held is None else _whole_hours(held, "--backtest"),
            workers=default_workers(len(history.services)),
            futures=futures,
        )
        future = outlook(history, settings, say)
        document = page_document(history, future)
        # everything is computed before DIR is staged: it appears whole or not at all
        with atomic_directory(output) as staging:
            history.write(staging)
            future.write(staging)
            write_scenario(history, future, staging)
            _add_forecast(staging / "history.json", future.as_json())
            (staging / "demand.md").write_text(render_demand_md(document), encoding="utf-8")
            (staging / "demand.html").write_text(render_demand_html(document), encoding="utf-8")
    except GpuplanError as exc:
        raise fail(exc) from None
    for warning in history.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    if settings.backtest_hours is not None:
        out.print(_backtest_table(future))
    steps = len(history.index)
    out.print(
        f"wrote {output}/: {len(history.services)} services over {steps} steps, {len(history.runs)} "
        f"training runs, {len(history.warnings)} warnings (history.json); forecast {settings.hours} h "
        f"ahead from {document['forecast_start']}; scenario.yaml (review the lines marked REVIEW), "
        "demand.html",
        highlight=False,
    )


def _quantiles(text: str) -> tuple[float, ...]:
    """``0.1,0.5,0.9``: ascending, distinct, inside (0, 1), holding 0.5 (the scenario's P50)."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(None, "--quantiles", f"{text!r} is not a list of numbers (0.1,0.5,0.9)") from None
    if not values or any(not 0.0 < q < 1.0 for q in values):
        raise InputError(None, "--quantiles", f"{text!r}: each must be strictly between 0 and 1")
    if any(b <= a for a, b in itertools.pairwise(values)):
        raise InputError(
            None, "--quantiles", f"{text!r} is not ascending: give them low to high (0.1,0.5,0.9)"
        )
    if 0.5 not in values:
        raise InputError(None, "--quantiles", f"{text!r} lacks 0.5: the scenario plans on the P50")
    return tuple(values)


def _whole_hours(value: timedelta, flag: str) -> int:
    hours = value / timedelta(hours=1)
    if hours != int(hours):
        raise InputError(None, flag, f"{value} is not a whole number of hours")
    return int(hours)


def _add_forecast(path: Path, forecast: dict[str, object]) -> None:
    """history.json gains the forecast's part (and the backtest's) beside what was read."""
    import json

    document = json.loads(path.read_text(encoding="utf-8"))
    document["forecast"] = forecast
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _backtest_table(future: Outlook) -> Table:
    """Per service the P50's MAPE and MASE and the band's coverage on the held-out hours, beside the
    seasonal-naive baseline's."""
    table = Table(title=f"backtest: last {future.settings.backtest_hours} h held out", title_justify="left")
    for column in ("service", "model", "MAPE", "MASE", "P10-P90 coverage", "naive MASE", "naive coverage"):
        table.add_column(
            column,
            justify="left" if column in ("service", "model") else "right",
            overflow="fold",  # the model's name whole (MSTL(24,168)+ETS(A,A,N)), on two lines if need be
        )
    for name, item in sorted(future.services.items()):
        result = item.backtest
        if result is None:
            continue
        m, b = result.model, result.baseline
        table.add_row(
            name,
            result.forecast.model,
            "—" if m.mape is None else f"{m.mape:.1f} %",
            "—" if m.mase is None else f"{m.mase:.2f}",
            f"{m.coverage * 100:.0f} %",
            "—" if b.mase is None else f"{b.mase:.2f}",
            f"{b.coverage * 100:.0f} %",
        )
    return table
