"""`gpuplan daemon --config daemon.yaml`: run the daemon; ``--check`` validates only, ``--once`` runs
the jobs that are due once and exits (cron, CI, a first look)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from models.errors import GpuplanError
from planner.cli.common import fail, out

if TYPE_CHECKING:
    from datetime import datetime

    from models.plan import Plan
    from planner.operations.daemon.daemon import Daemon

__all__ = ["daemon", "once_summary"]


def daemon(
    config: Annotated[
        Path,
        typer.Option("--config", "-c", help="daemon config YAML (see planner/operations/daemon/config.py)"),
    ],
    check: Annotated[
        bool, typer.Option("--check", help="validate the config and its inputs, then exit")
    ] = False,
    apply_: Annotated[
        bool,
        typer.Option(
            "--apply", help="act on the cloud (default: the config's apply:, which defaults to a dry run)"
        ),
    ] = False,
    once: Annotated[bool, typer.Option("--once", help="run the jobs due now once, then exit")] = False,
    at: Annotated[
        str | None, typer.Option(help="with --once: the time to run at, ISO 8601 UTC (default now)")
    ] = None,
) -> None:
    """Re-plan on a schedule and when prices or inputs move, and reconcile the fleet with the plan.

    Dry run unless --apply (or apply: true in the config): it then journals what it would do. Every action
    is journaled before it is sent, so a killed daemon resumes without sending anything twice. Metrics on
    http://HOST:PORT/metrics, health on /healthz; logs are JSON lines on stderr with secrets masked.
    """
    from datetime import UTC, datetime

    from models.inputs import load_inputs
    from planner.cli.provision import parse_time
    from planner.operations.daemon.config import check_database, check_extra, load_config
    from providers.config import load_provider_config

    try:
        loaded = load_config(config)  # the hook's program found and executable too
        if apply_:
            loaded = loaded.model_copy(update={"apply": True})
        load_inputs(loaded.scenario_path)  # the scenario reads and validates, as gpuplan validate does
        load_provider_config(loaded.settings_path)  # every section, the clouds not in use too
        check_extra(loaded.database_url)  # the [daemon] extra imports: --check fails where --once would
        # the database opens (or its SQLite directory takes the file): a wrong password is one line now,
        # not six retries and a failed first job; --check and a run check the same things
        database = check_database(config, loaded)
        if check:
            out.print(
                f"{config}: valid; plans {loaded.scenario_path} on {loaded.provider.cloud}, "
                f"{'applies' if loaded.apply else 'dry run'}, state in {database}",
                highlight=False,
            )
            return
        from planner.operations.daemon.daemon import Daemon
        from planner.operations.daemon.logs import configure_json_logging
        from planner.operations.portal.queue import feed_scenario

        configure_json_logging()
        running = Daemon(loaded, feeds=[feed_scenario])  # a portal's queued requests, when it has tables
        if once:
            now = parse_time(at) if at is not None else datetime.now(UTC)
            before = running.current_plan()
            ran = running.tick(now)
            out.print(
                f"ran {', '.join(ran) or 'nothing (no job due)'} at {now:%Y-%m-%dT%H:%M}Z", highlight=False
            )
            for line in once_summary(running, before, now):
                out.print(line, highlight=False)
            return
        from planner.operations.daemon.scheduler import run_forever

        run_forever(running)
    except GpuplanError as exc:  # a cloud error exits 6, bad input 2 (``fail``)
        raise fail(exc) from None


def once_summary(running: Daemon, before: Plan | None, now: datetime) -> list[str]:
    """What a ``--once`` run did, for the terminal (issue 42: it printed only which jobs ran): the plan's
    cost and whether and why it was re-planned, what the plan would buy, the reconcile's actions (done, or
    what a dry run would do), and any job that failed. Read back from the store, where the jobs wrote it."""
    from planner.cli.plan import buy_lines

    store = running.store
    at = now.timestamp()
    lines = []
    for event in store.events("replan"):
        if abs(event.at.timestamp() - at) < 1:
            lines.append(f"re-planned: {event.message}")
    plan = running.current_plan()
    if plan is None:
        lines.append("no plan yet")
        return lines
    doc = plan.document
    hours = doc.horizon.hours
    cost = f"plan {doc.scenario}: ${doc.costs.total_usd:,.0f} over the {hours} h horizon"
    cost += f" (${doc.costs.total_usd / hours:,.2f}/h)"
    if before is not None and before is not plan:
        was = before.document.costs.total_usd
        cost += f"; the plan before: ${was:,.0f} ({doc.costs.total_usd - was:+,.0f})"
    lines.append(cost)
    buys = buy_lines(doc)
    if buys:
        lines.append("it would buy (a commitment is a human's decision: the daemon never buys one):")
        lines += [f"  {line}" for line in buys]
    else:
        lines.append("it would buy no commitment (on-demand and spot)")
    cycles = [c for c in store.cycles("reconcile") if abs(c.at.timestamp() - at) < 1]
    if cycles and cycles[-1].summary is not None:
        summary = cycles[-1].summary
        actions = summary.get("actions") or []
        verb = "did" if summary.get("applied") else "would do (dry run: --apply acts)"
        if actions:
            lines.append(f"reconcile {verb} {len(actions)} action(s):")
            lines += [f"  {action}" for action in actions]
        else:
            lines.append("reconcile: the fleet matches the plan, no action")
        lines += [f"  failed: {message}" for message in summary.get("failed") or []]
    else:
        lines.append("reconcile: did not run at this time")
    for event in store.events("job-failed"):
        if abs(event.at.timestamp() - at) < 1:
            lines.append(f"failed: {event.message}")
    return lines
