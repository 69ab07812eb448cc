"""The server-rendered pages (Jinja templates in ``planner/operations/portal/templates``): sign-in, a team's
queue, use and cost, a request, the account (API tokens with their expiry, the password), and the admin
pages (teams, users: add, disable, enable). Every form POST checks the
session's CSRF token; every route checks who is asking (``auth.py``) before it reads anything.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated, Any
from urllib.parse import quote

import jinja2
from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from models.errors import InputError
from planner.operations.errors import NameTaken
from planner.operations.portal.auth import (
    ObjectId,
    PageUser,
    check_csrf,
    csrf_token,
    managed_request,
    managed_team,
    portal_of,
    require_admin,
    session_digest,
    sign_in,
    sign_out,
    visible_request,
    visible_team,
)
from planner.operations.portal.charts import chargeback_chart, measured_chart, usage_chart
from planner.operations.portal.security import hash_password, new_api_token, verify_password
from planner.operations.portal.store import (
    DEFAULT_TOKEN_DAYS,
    MAX_TOKEN_DAYS,
    PRIORITY_CLASSES,
    ROLES,
    UserRow,
)
from planner.outputs.reports.kit import fmt_usd

__all__ = ["MIN_PASSWORD", "render", "router"]

#: The shortest password a user may set (the admin's add-user form and the CLI say the same).
MIN_PASSWORD = 12
#: Token lifetimes the account page offers (days); the form takes any whole number 1 to MAX_TOKEN_DAYS.
TOKEN_DAYS = (7, 30, DEFAULT_TOKEN_DAYS, 180, MAX_TOKEN_DAYS)

router = APIRouter(include_in_schema=False)
Csrf = Annotated[None, Depends(check_csrf)]

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("planner.operations.portal", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["usd"] = fmt_usd
_ENV.filters["when"] = lambda t: "—" if t is None else f"{t:%Y-%m-%d %H:%M}Z"


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    portal = portal_of(request)
    user: UserRow | None = context.pop("user", None)
    flashes = request.session.pop("flash", [])
    html = _ENV.get_template(template).render(
        user=user,
        csrf=csrf_token(request),
        flashes=flashes,
        last_replan=portal.last_replan() if user else None,
        next_replan=portal.next_replan() if user else None,
        classes=PRIORITY_CLASSES,
        **context,
    )
    return HTMLResponse(html, status_code=status_code, headers={"Cache-Control": "no-store"})


def flash(request: Request, message: str) -> None:
    request.session["flash"] = [*request.session.get("flash", []), message]


def see_other(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


# -- assets (public) ---------------------------------------------------------------------------------------


@router.get("/assets/plotly.min.js")
def plotly_js() -> Response:
    """plotly.js from the installed plotly package: the charts need no internet."""
    from plotly.offline import get_plotlyjs

    return Response(
        get_plotlyjs(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
    )


@router.get("/assets/portal.css")
def portal_css() -> Response:
    static = resources.files("planner.operations.portal").joinpath("static")
    css = static.joinpath("portal.css").read_text(encoding="utf-8")
    return Response(css, media_type="text/css", headers={"Cache-Control": "public, max-age=3600"})


#: The portal's icon, inline: a GPU board in the portal's blue. Browsers ask for /favicon.ico on every page
#: (a 404 per page in the logs otherwise); every page links it too (base.html.j2).
FAVICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    '<rect x="1" y="4" width="14" height="8" rx="1" fill="#1f4e79"/>'
    '<rect x="4" y="6" width="5" height="4" fill="#9fc5e8"/>'
    '<path d="M3 12v2M6 12v2M9 12v2M12 12v2" stroke="#1f4e79"/></svg>'
)


@router.get("/favicon.ico")
def favicon() -> Response:
    """The icon as SVG (every current browser takes an SVG icon, whatever the path is called)."""
    return Response(
        FAVICON_SVG, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"}
    )


# -- sign in -----------------------------------------------------------------------------------------------


@router.get("/")
def home(request: Request, user: PageUser) -> Response:
    if user.is_admin:
        return see_other("/admin")
    teams = sorted(user.roles)
    if teams:
        return see_other(f"/teams/{quote(teams[0], safe='')}")
    return render(request, "empty.html.j2", user=user)


@router.get("/login")
def login_page(request: Request, next: str = "/") -> HTMLResponse:
    return render(request, "login.html.j2", next=_safe_next(next), error=None)


def _safe_next(value: str) -> str:
    """Only a path on this site (never ``//host`` or a URL): no open redirect."""
    return value if value.startswith("/") and not value.startswith("//") and "\\" not in value else "/"


@router.post("/login")
def login(
    request: Request,
    _csrf: Csrf,
    username: Annotated[str, Form(max_length=80)],
    password: Annotated[str, Form(max_length=1024)],
    next: Annotated[str, Form()] = "/",
) -> Response:
    portal = portal_of(request)
    limiter = request.app.state.limiter
    client = _client(request)
    wait = limiter.retry_after(username, client)
    if wait:
        response = render(
            request, "login.html.j2", status_code=429, next=_safe_next(next),
            error=f"Too many failed sign-ins: try again in {wait} s.",
        )  # fmt: skip
        response.headers["Retry-After"] = str(wait)
        return response
    user = portal.store.user(username)
    ok, rehash = verify_password(None if user is None else user.password_hash, password)
    if not ok or user is None:
        limiter.failed(username, client)
        return render(
            request,
            "login.html.j2",
            status_code=401,
            next=_safe_next(next),
            error="Wrong username or password.",
        )
    limiter.succeeded(username)
    if user.disabled:  # said only to whoever knows the password
        return render(
            request, "login.html.j2", status_code=403, next=_safe_next(next),
            error="This account is disabled: ask a platform admin.",
        )  # fmt: skip
    if rehash:
        portal.store.set_password_hash(user.id, rehash)
    sign_in(request, user)  # a fresh session (and CSRF token) on sign-in: no fixation
    return see_other(_safe_next(next))


@router.post("/logout")
def logout(request: Request, _csrf: Csrf) -> Response:
    sign_out(request)
    return see_other("/login")


# -- a team ------------------------------------------------------------------------------------------------


@router.get("/teams/{team}")
def team_page(request: Request, team: str, user: PageUser, month: str | None = None) -> HTMLResponse:
    portal = portal_of(request)
    found = visible_team(portal, user, team)
    queue = portal.queue(team)
    points, gpu_hours, _p = portal.usage(found)
    months = portal.months()
    chosen = month if month in months else portal.default_month()
    rows, total, rule = portal.chargeback(team, chosen)
    plan = portal.plan()
    measured = portal.measured(team)
    chart = None
    if measured is not None and not isinstance(measured, str) and measured.times:
        first, last = measured.times[0], measured.times[-1]
        overlap = [p for p in points if first <= p[0] <= last]
        chart = measured_chart(measured, found.guaranteed_gpus, found.burst_gpus, overlap)
    return render(
        request,
        "team.html.j2",
        measured=measured,
        measured_chart=chart,
        user=user,
        team=found,
        queue=queue,
        manages=user.manages(team),
        plan=plan,
        gpu_hours=gpu_hours,
        usage_chart=usage_chart(team, points, found.guaranteed_gpus, found.burst_gpus) if points else None,
        months=months,
        month=chosen,
        charge_rows=rows,
        charge_total=total,
        idle_rule=rule,
        charge_chart=chargeback_chart(team, chosen, rows) if rows else None,
    )


@router.get("/teams/{team}/requests/new")
def new_request_page(request: Request, team: str, user: PageUser) -> HTMLResponse:
    found = managed_team(portal_of(request), user, team)
    return render(request, "request_new.html.j2", user=user, team=found, form={}, error=None)


def _form_fields(form: dict[str, str]) -> dict[str, Any]:
    """The form's text fields as a scenario training entry; empty fields are absent (their defaults)."""
    fields: dict[str, Any] = {}
    for key in ("name", "project", "nodes", "gpus_per_node", "hours", "earliest_start", "deadline", "fabric"):
        value = form.get(key, "").strip()
        if value:
            fields[key] = value
    models = [m.strip() for m in form.get("gpu_models", "").split(",") if m.strip()]
    fields["gpu_models"] = models
    fields["preemptible"] = form.get("preemptible") == "on"
    write, restart = form.get("write_minutes", "").strip(), form.get("restart_minutes", "").strip()
    if write or restart:
        fields["checkpoint"] = {"write_minutes": write or None, "restart_minutes": restart or None}
    for key in (
        "earliest_start",
        "deadline",
    ):  # <input type=datetime-local> has no zone: UTC, as the page says
        if key in fields and len(fields[key]) == 16:
            fields[key] += ":00Z"
    return fields


@router.post("/teams/{team}/requests")
async def submit_request(request: Request, team: str, user: PageUser, _csrf: Csrf) -> Response:
    portal = portal_of(request)
    found = managed_team(portal, user, team)
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    priority = form.get("priority_class", "normal")
    try:
        row = portal.submit(user, found, _form_fields(form), priority)
    except InputError as error:
        message = f"{error.where}: {error.problem}" if error.where else error.problem
        return render(
            request, "request_new.html.j2", status_code=422, user=user, team=found, form=form, error=message
        )
    flash(request, f"Request {row.name} submitted: #{portal.entry(row).position} in {team}'s queue.")
    return see_other(f"/teams/{quote(team, safe='')}")


@router.get("/requests/{request_id}")
def request_page(request: Request, request_id: ObjectId, user: PageUser) -> HTMLResponse:
    portal = portal_of(request)
    row = visible_request(portal, user, request_id)
    team = portal.store.team(row.team)
    return render(
        request,
        "request.html.j2",
        user=user,
        entry=portal.entry(row),
        team=team,
        manages=user.manages(row.team),
    )


def _back(row_team: str) -> RedirectResponse:
    return see_other(f"/teams/{quote(row_team, safe='')}")


@router.post("/requests/{request_id}/priority")
def change_priority(
    request: Request,
    request_id: ObjectId,
    user: PageUser,
    _csrf: Csrf,
    priority_class: Annotated[str, Form()],
) -> Response:
    portal = portal_of(request)
    row = managed_request(portal, user, request_id)
    try:
        portal.change(user, row, priority_class=priority_class)
        flash(request, f"{row.name}: priority {priority_class}.")
    except InputError as error:
        flash(request, f"{row.name}: {error.problem}")
    return _back(row.team)


@router.post("/requests/{request_id}/move")
def move_request(
    request: Request, request_id: ObjectId, user: PageUser, _csrf: Csrf, direction: Annotated[str, Form()]
) -> Response:
    portal = portal_of(request)
    row = managed_request(portal, user, request_id)
    if direction not in ("up", "down"):
        raise HTTPException(422, "direction is up or down")
    try:
        portal.change(user, row, move=-1 if direction == "up" else 1)
    except InputError as error:
        flash(request, f"{row.name}: {error.problem}")
    return _back(row.team)


@router.post("/requests/{request_id}/cancel")
def cancel_request(request: Request, request_id: ObjectId, user: PageUser, _csrf: Csrf) -> Response:
    portal = portal_of(request)
    row = managed_request(portal, user, request_id)
    portal.cancel(user, row)
    flash(request, f"{row.name} cancelled.")
    return _back(row.team)


# -- account -----------------------------------------------------------------------------------------------


def _account(
    request: Request, user: UserRow, *, status_code: int = 200, error: str | None = None
) -> HTMLResponse:
    store = portal_of(request).store
    digest = session_digest(request)
    shown = None if digest is None else store.take_note(digest)
    return render(
        request, "account.html.j2", status_code=status_code, user=user, tokens=store.tokens(user.id),
        new_token=shown, now=store.now(), token_days=TOKEN_DAYS, default_days=DEFAULT_TOKEN_DAYS,
        max_days=MAX_TOKEN_DAYS, sessions=len(store.sessions(user.id)), min_password=MIN_PASSWORD,
        error=error,
    )  # fmt: skip


@router.get("/account")
def account_page(request: Request, user: PageUser) -> HTMLResponse:
    return _account(request, user)


@router.post("/account/tokens")
def create_token(
    request: Request,
    user: PageUser,
    _csrf: Csrf,
    name: Annotated[str, Form(min_length=1, max_length=100)],
    days: Annotated[int, Form(ge=1, le=MAX_TOKEN_DAYS)] = DEFAULT_TOKEN_DAYS,
) -> Response:
    token, prefix, digest = new_api_token()
    store = portal_of(request).store
    store.add_token(user, name, prefix, digest, days=days)
    session = session_digest(request)
    if session is not None:  # shown once, on the next page; kept in the session's row, not the cookie
        store.put_note(session, token)
    return see_other("/account")


@router.post("/account/password")
def change_password(
    request: Request,
    user: PageUser,
    _csrf: Csrf,
    current_password: Annotated[str, Form(max_length=1024)],
    new_password: Annotated[str, Form(max_length=1024)],
    confirm_password: Annotated[str, Form(max_length=1024)],
) -> Response:
    """A new password: every session of the user ends (any other browser, any copied cookie); this
    browser gets a fresh one. A wrong current password counts as a failed sign-in (the same limits)."""
    portal = portal_of(request)
    limiter = request.app.state.limiter
    client = _client(request)
    wait = limiter.retry_after(user.username, client)
    if wait:
        response = _account(
            request, user, status_code=429, error=f"Too many failed attempts: try again in {wait} s."
        )
        response.headers["Retry-After"] = str(wait)
        return response
    ok, _rehash = verify_password(user.password_hash, current_password)
    if not ok:
        limiter.failed(user.username, client)
        return _account(request, user, status_code=422, error="The current password is wrong.")
    problem = password_problem(new_password, confirm_password)
    if problem is None and new_password == current_password:
        problem = "The new password is the current one."
    if problem:
        return _account(request, user, status_code=422, error=problem)
    ended = portal.store.change_password(user.id, hash_password(new_password), user.username)
    sign_in(request, user)
    others = ended - 1
    flash(request, f"Password changed; {others} other session{'s' if others != 1 else ''} signed out.")
    return see_other("/account")


def password_problem(password: str, confirm: str | None = None) -> str | None:
    """Why ``password`` may not be set (None: it may)."""
    if len(password) < MIN_PASSWORD:
        return f"A password needs at least {MIN_PASSWORD} characters."
    if confirm is not None and password != confirm:
        return "The new password and its confirmation differ."
    return None


@router.post("/account/tokens/{token_id}/revoke")
def revoke_token(request: Request, token_id: ObjectId, user: PageUser, _csrf: Csrf) -> Response:
    if not portal_of(request).store.revoke_token(user, token_id):
        raise HTTPException(404, "token not found")
    flash(request, "Token revoked.")
    return see_other("/account")


# -- admin -------------------------------------------------------------------------------------------------


@router.get("/admin")
def admin_page(request: Request, user: PageUser) -> HTMLResponse:
    require_admin(user)
    portal = portal_of(request)
    teams = portal.store.teams()
    counts = {t.name: sum(1 for e in portal.queue(t.name) if e.position is not None) for t in teams}
    return render(
        request, "admin.html.j2", user=user, teams=teams, users=portal.store.users(), counts=counts,
        roles=ROLES, plan=portal.plan(),
    )  # fmt: skip


@router.post("/admin/teams")
async def admin_team(request: Request, user: PageUser, _csrf: Csrf) -> Response:
    require_admin(user)
    form = await request.form()
    data = {
        "guaranteed_gpus": form.get("guaranteed_gpus") or 0,
        "burst_gpus": form.get("burst_gpus") or None,
        "priority": form.get("priority") or "standard",
        "allowed_classes": [c for c in form.getlist("allowed_classes") if isinstance(c, str)],
    }
    name = str(form.get("name") or "")
    try:
        portal_of(request).put_team(user, name, data)
        flash(request, f"Team {name} saved.")
    except InputError as error:
        flash(request, f"Team {name}: {error.where + ': ' if error.where else ''}{error.problem}")
    return see_other("/admin")


@router.post("/admin/users")
async def admin_user(request: Request, user: PageUser, _csrf: Csrf) -> Response:
    require_admin(user)
    portal = portal_of(request)
    form = await request.form()
    username = str(form.get("username") or "").strip()
    password = str(form.get("password") or "")
    team, role = str(form.get("team") or ""), str(form.get("role") or "lead")
    if not username or len(username) > 80 or password_problem(password):
        flash(request, f"A user needs a name (at most 80 characters) and a password of {MIN_PASSWORD}+.")
        return see_other("/admin")
    if team and (portal.store.team(team) is None or role not in ROLES):
        flash(request, f"No team {team!r} (or role {role!r}).")
        return see_other("/admin")
    try:
        portal.store.add_user(
            username, hash_password(password), is_admin=form.get("is_admin") == "on",
            roles={team: role} if team else {}, actor=user.username,
        )  # fmt: skip
        flash(request, f"User {username} added.")
    except NameTaken as exc:
        flash(request, str(exc))
    return see_other("/admin")


def _set_disabled(request: Request, admin: UserRow, user_id: int, disabled: bool) -> Response:
    store = portal_of(request).store
    target = store.user_by_id(user_id)
    if target is None:
        raise HTTPException(404, "user not found")
    if disabled and target.id == admin.id:
        flash(request, "You cannot disable yourself (another admin can, or gpuplan portal --disable-user).")
        return see_other("/admin")
    store.set_disabled(target.id, disabled, admin.username)
    flash(request, f"User {target.username} {'disabled: signed out everywhere' if disabled else 'enabled'}.")
    return see_other("/admin")


@router.post("/admin/users/{user_id}/disable")
def admin_disable_user(request: Request, user_id: ObjectId, user: PageUser, _csrf: Csrf) -> Response:
    """Disable a user: their sessions end at once, their tokens stop working, sign-in is refused."""
    require_admin(user)
    return _set_disabled(request, user, user_id, True)


@router.post("/admin/users/{user_id}/enable")
def admin_enable_user(request: Request, user_id: ObjectId, user: PageUser, _csrf: Csrf) -> Response:
    require_admin(user)
    return _set_disabled(request, user, user_id, False)


@router.post("/admin/replan")
def admin_replan(request: Request, user: PageUser, _csrf: Csrf) -> Response:
    require_admin(user)
    result = portal_of(request).replan(user.username)
    flash(request, f"Replan: {result.message}")
    return see_other("/admin")


@router.get("/admin/audit")
def audit_page(request: Request, user: PageUser) -> HTMLResponse:
    require_admin(user)
    return render(request, "audit.html.j2", user=user, entries=portal_of(request).store.audit())
