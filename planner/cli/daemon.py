"""`gpuplan daemon --config daemon.yaml`: run the daemon; ``--check`` validates only, ``--once`` runs
the jobs that are due once and exits (cron, CI, a first look)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from models.errors import GpuplanError
from planner.cli.common import fail, out

__all__ = ["daemon"]


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
            ran = running.tick(now)
            out.print(
                f"ran {', '.join(ran) or 'nothing (no job due)'} at {now:%Y-%m-%dT%H:%M}Z", highlight=False
            )
            return
        from planner.operations.daemon.scheduler import run_forever

        run_forever(running)
    except GpuplanError as exc:  # a cloud error exits 6, bad input 2 (``fail``)
        raise fail(exc) from None
