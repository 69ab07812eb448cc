"""`gpuplan portal [--config daemon.yaml] [--host 127.0.0.1 --port 8080]`: the self-service portal, served
by uvicorn. Without ``--config`` it runs the embedded demo (``planner/operations/portal/demo``). FastAPI,
uvicorn
and argon2 are the ``portal`` extra, imported only here when the command runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from models.errors import GpuplanError, InputError
from planner.cli.common import fail, out

__all__ = ["portal"]

SECRET_ENV = "GPUPLAN_PORTAL_SECRET"
PASSWORD_ENV = "GPUPLAN_PORTAL_PASSWORD"


def portal(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="the daemon's config YAML (default: the embedded demo)"),
    ] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port to listen on")] = 8080,
    https_only: Annotated[
        bool, typer.Option("--https-only", help="session cookies only over HTTPS (behind a TLS proxy)")
    ] = False,
    demo_dir: Annotated[
        Path | None,
        typer.Option(help="the demo's state directory (default $XDG_STATE_HOME/gpuplan/portal-demo)"),
    ] = None,
    add_user: Annotated[
        str | None,
        typer.Option(help=f"add this user (password from ${PASSWORD_ENV} or a prompt), then exit"),
    ] = None,
    team: Annotated[
        list[str] | None, typer.Option(help="with --add-user: TEAM or TEAM=member (lead by default)")
    ] = None,
    admin: Annotated[bool, typer.Option("--admin", help="with --add-user: a platform admin")] = False,
) -> None:
    """Serve the self-service portal: team leads submit training requests and see their queue, plan, GPU
    use and chargeback; admins manage teams, users and replans.

    Shares the daemon's database (--config's database:). The session secret is $GPUPLAN_PORTAL_SECRET or
    one generated and kept in the database. Without --config: the embedded demo with two teams, its logins
    printed.
    """
    _require_the_extra()
    from datetime import UTC, datetime

    from planner.operations.daemon.config import load_config

    try:
        demo = config is None
        if config is None:
            from planner.operations.portal.demo import demo_dir as default_dir
            from planner.operations.portal.demo import prepare_demo

            where = demo_dir or default_dir()
            config = prepare_demo(where, datetime.now(UTC))
        loaded = load_config(config)
        if add_user is not None:
            _add_user(loaded, add_user, team or [], admin)
            return
        from planner.operations.portal.app import create_app

        app = create_app(loaded, secret=os.environ.get(SECRET_ENV) or None, https_only=https_only)
        portal_state = app.state.portal
        if demo:
            from planner.operations.portal.demo import seed_users

            logins = seed_users(portal_state.store, config.parent)
            if portal_state.plan() is None:
                out.print("planning the demo scenario once ...", highlight=False)
                result = portal_state.replan("gpuplan-demo")
                out.print(f"  {result.message}", highlight=False)
        url = f"http://{host if ':' not in host else f'[{host}]'}:{port}/"
        out.print(
            f"gpuplan portal on {url} (database {portal_state.daemon_store.masked_url})", highlight=False
        )
        if demo:
            out.print(f"demo state in {config.parent}; sign in as:", highlight=False)
            for name, password, what in logins:
                out.print(f"  {name:8} {password}   ({what})", highlight=False)
        if host not in ("127.0.0.1", "localhost", "::1") and not https_only:
            out.print(
                "warning: listening beyond loopback without --https-only (use a TLS proxy)", highlight=False
            )
    except GpuplanError as exc:
        raise fail(exc) from None
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)


def _add_user(config: object, username: str, teams: list[str], admin: bool) -> None:
    from planner.operations.daemon.config import DaemonConfig
    from planner.operations.errors import NameTaken
    from planner.operations.portal.app import create_app
    from planner.operations.portal.security import hash_password
    from planner.operations.portal.store import ROLES

    assert isinstance(config, DaemonConfig)
    password = os.environ.get(PASSWORD_ENV) or typer.prompt(
        "password", hide_input=True, confirmation_prompt=True
    )
    if len(password) < 12:
        raise InputError(None, "password", "at least 12 characters")
    store = create_app(config).state.portal.store  # its tables, and the scenario's teams on first use
    roles = {}
    for entry in teams:
        name, _, role = entry.partition("=")
        if store.team(name) is None:
            raise InputError(
                None, "--team", f"no team {name!r}; teams: {', '.join(t.name for t in store.teams())}"
            )
        if (role or "lead") not in ROLES:
            raise InputError(None, "--team", f"role {role!r}; roles: {', '.join(ROLES)}")
        roles[name] = role or "lead"
    try:
        store.add_user(username, hash_password(password), is_admin=admin, roles=roles, actor="gpuplan-cli")
    except NameTaken as exc:
        raise InputError(None, "--add-user", str(exc)) from None
    out.print(f"added {username}", highlight=False)


def _require_the_extra() -> None:
    import importlib

    missing = []
    for module in ("fastapi", "uvicorn", "argon2", "multipart", "itsdangerous", "sqlalchemy"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise fail(InputError(None, "portal", f"needs {', '.join(missing)}: pip install 'gpuplan[portal]'"))
