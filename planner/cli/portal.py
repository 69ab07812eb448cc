"""`gpuplan portal [--config daemon.yaml] [--host 127.0.0.1 --port 8080]`: the self-service portal, served
by uvicorn. Without ``--config`` it runs the embedded demo (``planner/operations/portal/demo``). FastAPI,
uvicorn and argon2 are the ``portal`` extra, imported only here when the command runs.

Users are managed from the shell too (``--add-user``, ``--set-password``, ``--disable-user``,
``--enable-user``: each does its one change and exits), so an admin locked out, or a user to cut off at
once, needs no browser.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

if TYPE_CHECKING:
    import uvicorn

    from planner.operations.daemon.config import DaemonConfig
    from planner.operations.portal.store import PortalStore

import typer

from models.errors import GpuplanError, InputError
from planner.cli.common import fail, out

__all__ = ["portal"]

SECRET_ENV = "GPUPLAN_PORTAL_SECRET"
PASSWORD_ENV = "GPUPLAN_PORTAL_PASSWORD"
#: --max-body-kb's range: a request is ~2 KB; more than 10 MB is never a form or a training request
MAX_BODY_KB = 10 * 1024


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
    set_password: Annotated[
        str | None,
        typer.Option(
            help=f"set this user's password (from ${PASSWORD_ENV} or a prompt), signing them out "
            "everywhere, then exit"
        ),
    ] = None,
    disable_user: Annotated[
        str | None,
        typer.Option(
            help="disable this user (sessions end at once, API tokens stop, sign-in refused), then exit"
        ),
    ] = None,
    enable_user: Annotated[str | None, typer.Option(help="enable a disabled user again, then exit")] = None,
    max_body_kb: Annotated[
        int, typer.Option(min=1, max=MAX_BODY_KB, help="largest request body in KiB (larger: 413)")
    ] = 256,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="comma-separated addresses or networks of the proxies whose X-Forwarded-For names the "
            "client (for the sign-in limits); default none: the connection's address counts"
        ),
    ] = None,
) -> None:
    """Serve the self-service portal: team leads submit training requests and see their queue, plan, GPU
    use and chargeback; admins manage teams, users and replans.

    Shares the daemon's database (--config's database:). The session secret is $GPUPLAN_PORTAL_SECRET or
    one generated and kept in the database; sessions are kept in the database and end at sign-out, a
    password change or the user's disabling. Behind a TLS proxy: --https-only and
    --forwarded-allow-ips PROXY. Without --config: the embedded demo with two teams, its logins printed.
    """
    _require_the_extra()
    from datetime import UTC, datetime

    from planner.operations.daemon.config import load_config

    try:
        proxies = _proxies(forwarded_allow_ips)
        chosen = [a for a in (add_user, set_password, disable_user, enable_user) if a is not None]
        if len(chosen) > 1:
            raise InputError(
                None, "--add-user", "give one of --add-user, --set-password, --disable-user, --enable-user"
            )
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
        if set_password is not None:
            _set_password(loaded, set_password)
            return
        if disable_user is not None or enable_user is not None:
            _set_disabled(loaded, disable_user or enable_user or "", disable_user is not None)
            return
        from planner.operations.portal.app import create_app

        app = create_app(
            loaded,
            secret=os.environ.get(SECRET_ENV) or None,
            https_only=https_only,
            max_body_bytes=max_body_kb * 1024,
            forwarded_allow_ips=proxies,
        )
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

    uvicorn.Server(server_config(app, host, port)).run()


def server_config(app: Any, host: str, port: int) -> uvicorn.Config:
    """uvicorn's settings for the portal. Its own proxy headers are off: by default uvicorn believes
    ``X-Forwarded-For`` from 127.0.0.1, so any local client (or everyone behind one local TLS proxy)
    would pick the address the sign-in limits count; the app trusts only ``--forwarded-allow-ips``."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level="info", access_log=False, proxy_headers=False)


def _proxies(value: str | None) -> list[str] | None:
    """--forwarded-allow-ips as a list of addresses or networks (``*``: any), each checked."""
    if value is None or not value.strip():
        return None
    import ipaddress

    proxies = [part.strip() for part in value.split(",") if part.strip()]
    if len(proxies) > 100:
        raise InputError(None, "--forwarded-allow-ips", f"at most 100 proxies, got {len(proxies)}")
    for part in proxies:
        if part == "*":
            continue
        try:
            ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise InputError(
                None, "--forwarded-allow-ips", f"{part!r} is not an IP address or network (or *)"
            ) from None
    return proxies


def _password() -> str:
    from planner.operations.portal.pages import password_problem

    password = os.environ.get(PASSWORD_ENV) or typer.prompt(
        "password", hide_input=True, confirmation_prompt=True
    )
    problem = password_problem(password)
    if problem:
        raise InputError(None, "password", problem)
    return password


def _store(config: DaemonConfig) -> PortalStore:
    from planner.operations.portal.app import create_app

    store: PortalStore = create_app(config).state.portal.store  # its tables, the scenario's teams at first
    return store


def _user_id(store: PortalStore, username: str, option: str) -> int:
    user = store.user(username)
    if user is None:
        known = ", ".join(u.username for u in store.users()[:20])
        raise InputError(None, option, f"no user {username!r}; users: {known or 'none yet'}")
    return user.id


def _set_password(config: DaemonConfig, username: str) -> None:
    from planner.operations.portal.security import hash_password

    store = _store(config)
    user_id = _user_id(store, username, "--set-password")
    ended = store.change_password(user_id, hash_password(_password()), "gpuplan-cli")
    out.print(f"password of {username} set; {ended} session(s) ended", highlight=False)


def _set_disabled(config: DaemonConfig, username: str, disabled: bool) -> None:
    store = _store(config)
    option = "--disable-user" if disabled else "--enable-user"
    user_id = _user_id(store, username, option)
    store.set_disabled(user_id, disabled, "gpuplan-cli")
    what = "disabled: signed out everywhere, its API tokens stopped" if disabled else "enabled"
    out.print(f"{username} {what}", highlight=False)


def _add_user(config: DaemonConfig, username: str, teams: list[str], admin: bool) -> None:
    from planner.operations.errors import NameTaken
    from planner.operations.portal.security import hash_password
    from planner.operations.portal.store import ROLES

    password = _password()
    store = _store(config)
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
    for module in ("fastapi", "uvicorn", "argon2", "python_multipart", "itsdangerous", "sqlalchemy"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise fail(InputError(None, "portal", f"needs {', '.join(missing)}: pip install 'gpuplan[portal]'"))
    import inspect

    from fastapi import FastAPI

    if "max_body_size" not in inspect.signature(FastAPI.__init__).parameters:
        raise fail(
            InputError(None, "portal", "needs a FastAPI with request body limits: pip install -U fastapi")
        )
