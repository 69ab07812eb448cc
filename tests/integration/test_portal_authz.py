"""The authorization matrix: every route of the app x every role, with the status each must get.

The routes come from ``app.routes`` itself: a route without an entry in ``EXPECTED`` (or an entry for a
route that is gone) fails the test, so a new route cannot be added without deciding who may use it.
Roles: anonymous, the lead of team A (research), the lead of team B (vision), a platform admin. Team B's
lead must get 404 for every team A object (never a hint that it exists); anonymous pages redirect to the
sign-in page, anonymous API calls are 401. Each call that changes something acts on a fresh request,
token or user, so the calls do not depend on each other.

Then every route again for callers who must be treated as anonymous though they once were not: a team A
lead disabled by an admin (her session and API token from before), a session cookie copied before its
sign-out, and an expired API token of team A's lead. Each gets the anonymous column, route by route.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient
from starlette.routing import Route
from test_portal_requests import NOW, PASSWORD, PortalKit, csrf, job, make_portal

from planner.operations.portal.app import SESSION_COOKIE
from planner.operations.portal.security import hash_password, new_api_token

_SERIAL = itertools.count()
ROLES = ("anonymous", "ada", "grace", "admin")  # anonymous, lead of A, lead of B, admin
#: once signed in or holding a token, now anonymous: a disabled lead of A, a signed-out session of A's
#: lead (its cookie replayed), an expired token of A's lead
GONE = ("disabled", "signed-out", "expired-token")
TEAM_A = "research"

# (method, path): (status for anonymous, lead A, lead B, admin)
PAGE_A = (303, 200, 404, 200)  # a page of team A
FORM_A = (303, 303, 404, 303)  # a form POST on a team A object: done, back to the team page
API_A = (401, 200, 404, 200)
ADMIN_PAGE = (303, 403, 403, 200)
ADMIN_FORM = (303, 403, 403, 303)
EXPECTED: dict[tuple[str, str], tuple[int, int, int, int]] = {
    ("GET", "/api/v1/openapi.json"): (200, 200, 200, 200),
    ("GET", "/assets/plotly.min.js"): (200, 200, 200, 200),
    ("GET", "/assets/portal.css"): (200, 200, 200, 200),
    ("GET", "/favicon.ico"): (200, 200, 200, 200),
    ("GET", "/login"): (200, 200, 200, 200),
    ("POST", "/login"): (303, 303, 303, 303),  # team A's lead's credentials, from any client
    ("POST", "/logout"): (303, 303, 303, 303),
    ("GET", "/"): (303, 303, 303, 303),  # to sign-in, the team page, the admin page
    ("GET", "/teams/{team}"): PAGE_A,
    ("GET", "/teams/{team}/requests/new"): PAGE_A,
    ("POST", "/teams/{team}/requests"): FORM_A,
    ("GET", "/requests/{request_id}"): PAGE_A,
    ("POST", "/requests/{request_id}/priority"): FORM_A,
    ("POST", "/requests/{request_id}/move"): FORM_A,
    ("POST", "/requests/{request_id}/cancel"): FORM_A,
    ("GET", "/account"): (303, 200, 200, 200),
    ("POST", "/account/tokens"): (303, 303, 303, 303),
    ("POST", "/account/tokens/{token_id}/revoke"): (303, 303, 404, 404),  # a token of A's lead: theirs only
    ("POST", "/account/password"): (303, 422, 422, 422),  # a wrong current password: the page says so
    ("GET", "/admin"): ADMIN_PAGE,
    ("POST", "/admin/teams"): ADMIN_FORM,
    ("POST", "/admin/users"): ADMIN_FORM,
    ("POST", "/admin/users/{user_id}/disable"): ADMIN_FORM,  # a fresh user each call
    ("POST", "/admin/users/{user_id}/enable"): ADMIN_FORM,
    ("POST", "/admin/replan"): ADMIN_FORM,
    ("GET", "/admin/audit"): ADMIN_PAGE,
    ("GET", "/api/v1/me"): (401, 200, 200, 200),
    ("GET", "/api/v1/plan"): (401, 200, 200, 200),
    ("GET", "/api/v1/teams"): (401, 200, 200, 200),
    ("GET", "/api/v1/teams/{team}"): API_A,
    ("GET", "/api/v1/teams/{team}/requests"): API_A,
    ("POST", "/api/v1/teams/{team}/requests"): (401, 201, 404, 201),
    ("GET", "/api/v1/requests/{request_id}"): API_A,
    ("PATCH", "/api/v1/requests/{request_id}"): API_A,
    ("POST", "/api/v1/requests/{request_id}/cancel"): API_A,
    ("GET", "/api/v1/teams/{team}/usage"): API_A,
    ("GET", "/api/v1/teams/{team}/chargeback"): API_A,
    ("PUT", "/api/v1/admin/teams/{team}"): (401, 403, 403, 200),
    ("POST", "/api/v1/admin/replan"): (401, 403, 403, 200),
    ("GET", "/api/v1/admin/audit"): (401, 403, 403, 200),
}


def _walk(routes: list[Any], prefix: str = "") -> set[tuple[str, str]]:
    """(method, path) of every route, those of included routers too (FastAPI 0.16x keeps an included
    router as one entry of ``app.routes`` that wraps the router's own routes)."""
    found = set()
    for route in routes:
        if isinstance(route, Route):
            found |= {(m, prefix + route.path) for m in (route.methods or set()) - {"HEAD"}}
        elif hasattr(route, "original_router"):
            found |= _walk(route.original_router.routes, prefix + route.include_context.prefix)
        else:
            raise AssertionError(f"{type(route).__name__}: a mount or websocket the matrix does not know")
    return found


def _routes(kit: PortalKit) -> set[tuple[str, str]]:
    return _walk(list(kit.app.routes))


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> PortalKit:
    kit = make_portal(tmp_path_factory.mktemp("portal-authz"))
    kit.portal.store.add_user(
        "dora", hash_password(PASSWORD), is_admin=False, roles={TEAM_A: "lead"}, actor="tests"
    )
    return kit


def _fresh_request(kit: PortalKit) -> int:
    return kit.portal.store.add_request(TEAM_A, "matrix", {"job": job(name="matrix")}, "normal", "ada").id


def _fresh_token(kit: PortalKit) -> int:
    user = kit.portal.store.user("ada")
    assert user is not None
    _token, prefix, digest = new_api_token()
    return kit.portal.store.add_token(user, "matrix", prefix, digest).id


def _fresh_user(kit: PortalKit) -> int:
    name = f"fresh-{next(_SERIAL)}"
    return kit.portal.store.add_user(name, "x", is_admin=False, roles={}, actor="tests").id


def _call(kit: PortalKit, clients: dict[str, Any], role: str, method: str, path: str) -> int:
    user = None if role in ("anonymous", *GONE) else role
    is_api = path.startswith("/api/v1/") and path != "/api/v1/openapi.json"
    if path in ("/login", "/logout") and method == "POST":
        client = kit.client(user)  # its own session: signing in or out must not touch the shared ones
    else:
        client = clients[f"api:{role}"] if is_api else clients[role]
    params: dict[str, Any] = {"team": TEAM_A}
    if "{request_id}" in path:
        params["request_id"] = _fresh_request(kit)
    if "{token_id}" in path:
        params["token_id"] = _fresh_token(kit)
    if "{user_id}" in path:
        params["user_id"] = _fresh_user(kit)
    url = path.format(**params)
    if is_api:
        bodies = {
            ("POST", "/api/v1/teams/{team}/requests"): job(name="via-api"),
            ("PATCH", "/api/v1/requests/{request_id}"): {"move": 1},
            ("PUT", "/api/v1/admin/teams/{team}"): {"guaranteed_gpus": 0, "burst_gpus": 64},
        }
        body = bodies.get((method, path))
        return client.request(method, url, json=body).status_code
    if method == "GET":
        return client.get(url).status_code
    token = csrf(client.get("/login").text)
    forms: dict[str, dict[str, Any]] = {
        "/login": {"username": "ada", "password": "correct horse battery"},
        "/teams/{team}/requests": {"name": "via-form", "gpu_models": "H100", "nodes": "1", "hours": "4"},
        "/requests/{request_id}/priority": {"priority_class": "low"},
        "/requests/{request_id}/move": {"direction": "down"},
        "/account/tokens": {"name": "matrix"},
        "/account/password": {
            "current_password": "not the password",
            "new_password": "a new long password",
            "confirm_password": "a new long password",
        },
        "/admin/teams": {
            "name": TEAM_A,
            "guaranteed_gpus": "0",
            "burst_gpus": "64",
            "allowed_classes": "normal",
        },
        "/admin/users": {"username": f"user-{role}-{next(_SERIAL)}", "password": "a long password 1"},
    }
    return client.post(url, data={**forms.get(path, {}), "csrf_token": token}).status_code


def test_every_route_has_an_entry(kit: PortalKit) -> None:
    routes = _routes(kit)
    assert routes - EXPECTED.keys() == set(), "routes without an authorization entry: add them to EXPECTED"
    assert EXPECTED.keys() - routes == set(), "entries for routes that no longer exist"


def test_every_route_answers_every_role_as_expected(kit: PortalKit) -> None:
    clients = {role: kit.client(None if role == "anonymous" else role) for role in ROLES}
    clients.update({f"api:{role}": kit.api(None if role == "anonymous" else role) for role in ROLES})
    got = {}
    for method, path in sorted(_routes(kit)):
        got[(method, path)] = tuple(_call(kit, clients, role, method, path) for role in ROLES)
    wrong = {key: (got[key], EXPECTED[key]) for key in got if got[key] != EXPECTED[key]}
    assert wrong == {}, "(got, expected) per route, statuses for " + ", ".join(ROLES)


def _gone_clients(kit: PortalKit) -> dict[str, TestClient]:
    """Page and API clients of the :data:`GONE` callers, each made while it still worked."""
    dora_page, dora_api = kit.client("dora"), kit.api("dora")
    assert dora_page.get(f"/teams/{TEAM_A}").status_code == 200
    assert dora_api.get(f"/api/v1/teams/{TEAM_A}").status_code == 200
    dora = kit.portal.store.user("dora")
    assert dora is not None
    kit.portal.store.set_disabled(dora.id, True, "admin")

    ada = kit.client("ada")
    copied = ada.cookies[SESSION_COOKIE]
    assert ada.post("/logout", data={"csrf_token": csrf(ada.get("/account").text)}).status_code == 303
    replayed = TestClient(kit.app, follow_redirects=False)
    replayed.cookies.set(SESSION_COOKIE, copied)

    ada_user = kit.portal.store.user("ada")
    assert ada_user is not None
    token, prefix, digest = new_api_token()
    kit.portal.store.add_token(ada_user, "old", prefix, digest, expires=NOW - timedelta(seconds=1))
    expired = TestClient(kit.app, headers={"Authorization": f"Bearer {token}"}, follow_redirects=False)
    return {
        "disabled": dora_page,
        "api:disabled": dora_api,
        "signed-out": replayed,
        "api:signed-out": replayed,
        "expired-token": expired,
        "api:expired-token": expired,
    }


def test_disabled_users_ended_sessions_and_expired_tokens_are_anonymous(kit: PortalKit) -> None:
    """Route by route, each GONE caller gets exactly what an anonymous one gets: no page, no answer, no
    change (each of these was a team A lead's working session or token a moment before)."""
    clients = _gone_clients(kit)
    seen = {e.id for e in kit.portal.store.audit(limit=1000)}
    got = {}
    for method, path in sorted(_routes(kit)):
        got[(method, path)] = tuple(_call(kit, clients, role, method, path) for role in GONE)
    expected = {key: (EXPECTED[key][0],) * len(GONE) for key in got}
    wrong = {key: (got[key], expected[key]) for key in got if got[key] != expected[key]}
    assert wrong == {}, "(got, expected) per route, statuses for " + ", ".join(GONE)
    made = {e.action for e in kit.portal.store.audit(limit=1000) if e.id not in seen}
    assert made <= {"request.add", "token.add", "user.add"}, made  # the calls' fixtures only: no change


def test_team_b_sees_nothing_of_team_a_in_its_lists(kit: PortalKit) -> None:
    """Lists never carry another team's objects: a 200 that leaks is as bad as a page that does."""
    _fresh_request(kit)
    grace = kit.api("grace")
    assert [t["name"] for t in grace.get("/api/v1/teams").json()] == ["vision"]
    assert all(r["team"] == "vision" for r in grace.get("/api/v1/teams/vision/requests").json())
    page = kit.client("grace").get("/teams/vision").text
    assert "matrix" not in page and TEAM_A not in page.split("<main>")[1]
    assert grace.get("/api/v1/teams/nosuchteam").status_code == 404  # the same answer as team A's
    assert grace.get("/api/v1/requests/999999").status_code == 404


def test_a_member_may_look_but_not_change(tmp_path: Path) -> None:
    kit = make_portal(tmp_path)
    request_id = _fresh_request(kit)
    alan = kit.api("alan")  # member of research
    assert alan.get(f"/api/v1/requests/{request_id}").status_code == 200
    assert alan.post(f"/api/v1/requests/{request_id}/cancel").status_code == 403
    assert alan.post(f"/api/v1/teams/{TEAM_A}/requests", json=job()).status_code == 403
    assert kit.portal.store.request(request_id).status == "queued"  # type: ignore[union-attr]
