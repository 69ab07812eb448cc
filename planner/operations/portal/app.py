"""``create_app(config)``: the portal as a FastAPI app, on the daemon's database. No globals: everything the
routes need hangs off ``app.state`` (``portal``, ``limiter``), so tests build as many apps as they like.

The session cookie is Starlette's ``SessionMiddleware``: signed with itsdangerous (HMAC-SHA1 over a
timestamped payload; the signature is checked on every request, the payload is not secret and holds only
a random session id, the CSRF token and flash messages), HttpOnly, ``SameSite=lax`` (a cross-site POST
carries no session), ``Secure`` with ``https_only``, expiring after ``max_age``. Whether the id is a
signed-in session is the database's to say (``portal_sessions``, see ``auth.py``): a signed cookie alone
cannot be ended, a row can. The signing secret is given (``GPUPLAN_PORTAL_SECRET``) or generated once and
kept in the database (``portal_settings``); it is never logged.

Request bodies are limited to ``max_body_bytes`` (FastAPI's own limit: a declared Content-Length over it
is refused before any byte is read, a chunked body as soon as it passes it; 413). The client address the
sign-in limits count by is the connection's, unless the connection comes from a proxy named in
``forwarded_allow_ips`` (uvicorn's ``ProxyHeadersMiddleware``, then ``X-Forwarded-For`` is believed);
the command serves with uvicorn's own proxy headers off, so nothing else rewrites it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.middleware.sessions import SessionMiddleware

from planner.operations.daemon.config import DaemonConfig
from planner.operations.errors import LoginRequired
from planner.operations.portal.auth import portal_of
from planner.operations.portal.security import LoginLimiter
from planner.operations.portal.service import Portal
from planner.operations.portal.store import PRIORITY_CLASSES, PortalStore, TeamRow

__all__ = ["DEFAULT_MAX_BODY_BYTES", "SESSION_COOKIE", "create_app", "seed_teams"]

log = logging.getLogger("gpuplan.portal")

SESSION_COOKIE = "gpuplan_portal"
#: The largest request body by default: a training request is well under 2 KB, a form a little more.
DEFAULT_MAX_BODY_BYTES = 256 * 1024
_SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    # plotly's inline chart scripts and styles need 'unsafe-inline'; nothing loads from elsewhere
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"
    ),
}


def seed_teams(portal: Portal) -> None:
    """The scenario's teams into the portal's table when it has none yet (first start): the admin edits
    them from there; the replan reads the portal's settings over the scenario's."""
    if portal.store.teams():
        return
    for team in portal.inputs().scenario.teams:
        allowed = PRIORITY_CLASSES if team.priority == "production" else PRIORITY_CLASSES[1:]
        portal.store.put_team(
            TeamRow(team.name, team.guaranteed_gpus, team.burst_gpus, team.priority, tuple(allowed)),
            "gpuplan",
        )


def create_app(
    config: DaemonConfig,
    *,
    secret: str | None = None,
    https_only: bool = False,
    max_age_seconds: int = 8 * 3600,
    clock: Callable[[], datetime] | None = None,
    planner: Callable[..., Path] | None = None,
    limiter: LoginLimiter | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    forwarded_allow_ips: list[str] | None = None,
) -> FastAPI:
    """The portal for the daemon configured by ``config``. ``secret`` signs the session cookies (default:
    generated once, kept in the database); ``max_age_seconds`` is a session's lifetime; ``clock`` and
    ``planner`` (the daemon's ``plan_scenario`` by default) are for tests; ``limiter`` sets the login
    limits; ``max_body_bytes`` the largest request body; ``forwarded_allow_ips`` the proxies (addresses or
    networks, ``*`` for any) whose ``X-Forwarded-For`` names the client (none by default)."""
    from planner.operations.daemon.store import Store

    daemon_store = Store(config.database_url)
    store = PortalStore(daemon_store.engine) if clock is None else PortalStore(daemon_store.engine, clock)
    kwargs: dict[str, Any] = {} if clock is None else {"clock": clock}
    portal = Portal(config, daemon_store, store, planner=planner, **kwargs)
    seed_teams(portal)
    key = secret or store.setting("session_secret", lambda: secrets.token_urlsafe(48))

    from planner.operations.portal import api, pages

    app = FastAPI(
        title="gpuplan portal",
        version="1",
        description="Team leads' training requests, queue, plan, use and cost; admins' teams and replans.",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # the Swagger UI loads from a CDN; the OpenAPI document is the reference
        redoc_url=None,
        max_body_size=max_body_bytes,
    )
    if (
        getattr(app, "max_body_size", None) != max_body_bytes
    ):  # an older FastAPI takes it as **extra, silently
        raise RuntimeError(
            "the portal needs FastAPI's request body limit (max_body_size): pip install -U fastapi"
        )
    app.state.portal = portal
    app.state.limiter = limiter or LoginLimiter()
    app.state.session_seconds = max_age_seconds
    app.add_middleware(
        SessionMiddleware,
        secret_key=key,
        session_cookie=SESSION_COOKIE,
        max_age=max_age_seconds,
        same_site="lax",
        https_only=https_only,
    )

    @app.middleware("http")
    async def _headers(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response: Response = await call_next(request)
        for name, value in _SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    if forwarded_allow_ips:
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=list(forwarded_allow_ips))

    @app.exception_handler(LoginRequired)
    async def _login(request: Request, exc: LoginRequired) -> Response:
        return RedirectResponse(f"/login?next={exc.next_path}", status_code=303)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        return _error_page(request, exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        problems = [
            {"field": ".".join(str(p) for p in e["loc"][1:]) or None, "message": e["msg"]}
            for e in exc.errors()
        ]
        if request.url.path.startswith("/api/"):
            return JSONResponse(problems, status_code=422)
        text = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
        return _error_page(request, 422, text)

    app.include_router(api.router)
    app.include_router(pages.router)
    return app


def _error_page(request: Request, status: int, detail: str) -> HTMLResponse:
    from planner.operations.portal.pages import render

    portal_of(request)  # the app's portal exists (render reads it)
    titles = {403: "Not allowed", 404: "Not found", 422: "Not valid", 401: "Sign in"}
    return render(
        request, "error.html.j2", status_code=status, title=titles.get(status, "Error"), detail=detail
    )
