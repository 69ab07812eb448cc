"""The portal's security rules (issue 18, item 4): CSRF on every form, login rate limiting, argon2 password
hashes, API tokens hashed at rest and shown once, the session cookie's flags, no secret in the logs."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from sqlalchemy import text
from test_portal_authz import EXPECTED
from test_portal_requests import PASSWORD, PortalKit, csrf, job, make_portal

from planner.operations.portal.app import SESSION_COOKIE
from planner.operations.portal.security import LoginLimiter


@pytest.fixture
def kit(tmp_path: Path) -> PortalKit:
    return make_portal(tmp_path)


def test_every_form_post_needs_the_sessions_csrf_token(kit: PortalKit) -> None:
    """Each page POST route, signed in as the admin (who may use them all): no token or another session's
    token is 403 and changes nothing."""
    admin, other = kit.client("admin"), kit.client("ada")
    wrong = csrf(other.get("/account").text)  # a real token, of another session
    request_id = kit.portal.store.add_request("research", "x", {"job": job(name="x")}, "normal", "ada").id
    posts = [p for (m, p) in EXPECTED if m == "POST" and not p.startswith("/api/")]
    assert len(posts) >= 10
    grace_id = kit.portal.store.user("grace").id  # type: ignore[union-attr]
    before = len(kit.portal.store.audit())
    for path in posts:
        url = path.format(team="research", request_id=request_id, token_id=1, user_id=grace_id)
        assert admin.post(url, data={"name": "n"}).status_code == 403, path
        assert admin.post(url, data={"name": "n", "csrf_token": wrong}).status_code == 403, path
        assert admin.post(url, data={"name": "n", "csrf_token": ""}).status_code == 403, path
    assert len(kit.portal.store.audit()) == before  # nothing changed
    assert not kit.portal.store.user("grace").disabled  # type: ignore[union-attr]
    assert kit.portal.store.request(request_id).status == "queued"  # type: ignore[union-attr]
    # and the right token works
    token = csrf(admin.get("/account").text)
    assert admin.post(f"/requests/{request_id}/cancel", data={"csrf_token": token}).status_code == 303
    assert kit.portal.store.request(request_id).status == "cancelled"  # type: ignore[union-attr]


def test_a_session_cookie_cannot_write_through_the_api(kit: PortalKit) -> None:
    """API writes take bearer tokens only: a browser session (which a cross-site page could ride) is 401."""
    browser = kit.client("ada")
    assert browser.get("/api/v1/me").status_code == 200  # reads may use the session
    assert browser.post("/api/v1/teams/research/requests", json=job()).status_code == 401
    assert kit.portal.store.requests() == []


def _login(kit: PortalKit, client_host: str, username: str, password: str) -> int:
    from fastapi.testclient import TestClient

    client = TestClient(kit.app, follow_redirects=False, client=(client_host, 50000))
    page = client.get("/login")
    answer = client.post(
        "/login", data={"username": username, "password": password, "csrf_token": csrf(page.text)}
    )
    if answer.status_code == 429:
        assert int(answer.headers["Retry-After"]) > 0
        assert "Too many failed sign-ins" in answer.text
    return answer.status_code


def test_login_rate_limit_per_username_and_per_client(tmp_path: Path) -> None:
    now = [1000.0]
    limiter = LoginLimiter(per_user=3, per_client=5, window_seconds=60, clock=lambda: now[0])
    kit = make_portal(tmp_path, limiter=limiter)
    # per username: 3 wrong passwords from 3 addresses, then even the right one is refused
    assert [_login(kit, f"10.0.0.{k}", "ada", "wrong password") for k in range(3)] == [401, 401, 401]
    assert _login(kit, "10.0.0.9", "ada", PASSWORD) == 429
    assert _login(kit, "10.0.0.9", "grace", PASSWORD) == 303  # another user is not limited by it
    now[0] += 61  # the window passes
    assert _login(kit, "10.0.0.9", "ada", PASSWORD) == 303
    # per client: one address trying many names
    codes = [_login(kit, "10.0.1.1", f"nobody{k}", "guess") for k in range(6)]
    assert codes == [401] * 5 + [429]
    assert _login(kit, "10.0.1.1", "grace", PASSWORD) == 429  # that address waits, whoever it claims
    assert _login(kit, "10.0.1.2", "grace", PASSWORD) == 303


def test_passwords_and_tokens_are_stored_hashed_and_tokens_shown_once(kit: PortalKit) -> None:
    with kit.portal.store.engine.connect() as db:
        hashes = [row[0] for row in db.execute(text("select password_hash from portal_users"))]
    assert hashes and all(h.startswith("$argon2id$") and PASSWORD not in h for h in hashes)
    ada = kit.client("ada")
    token = csrf(ada.get("/account").text)
    assert ada.post("/account/tokens", data={"name": "ci", "csrf_token": token}).status_code == 303
    page = ada.get("/account").text
    shown = page.split('id="new-token"')[1].split("<code>")[1].split("</code>")[0]
    assert shown.startswith("gpl_") and len(shown) > 40
    assert shown not in ada.get("/account").text  # once only
    with kit.portal.store.engine.connect() as db:
        stored = [tuple(r) for r in db.execute(text("select digest, prefix from portal_tokens"))]
    assert stored == [(hashlib.sha256(shown.encode()).hexdigest(), shown[:10])]
    api = kit.api(None)
    assert api.get("/api/v1/me", headers={"Authorization": f"Bearer {shown}"}).json()["username"] == "ada"
    assert api.get("/api/v1/me", headers={"Authorization": f"Bearer {shown}x"}).status_code == 401
    token_id = kit.portal.store.tokens(kit.portal.store.user("ada").id)[0].id  # type: ignore[union-attr]
    ada.post(f"/account/tokens/{token_id}/revoke", data={"csrf_token": csrf(ada.get("/account").text)})
    assert api.get("/api/v1/me", headers={"Authorization": f"Bearer {shown}"}).status_code == 401


def test_session_cookie_is_signed_httponly_samesite(tmp_path: Path) -> None:
    for https_only in (False, True):
        kit = make_portal(tmp_path / str(https_only), https_only=https_only)
        from fastapi.testclient import TestClient

        client = TestClient(kit.app, follow_redirects=False, base_url="https://testserver")
        page = client.get("/login")
        answer = client.post(
            "/login", data={"username": "ada", "password": PASSWORD, "csrf_token": csrf(page.text)}
        )
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith(f"{SESSION_COOKIE}=")
        flags = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
        assert {"httponly", "samesite", "path", "max-age"} <= flags
        assert "samesite=lax" in cookie.lower()
        assert ("secure" in flags) is https_only
        # a tampered cookie is no session
        value = client.cookies[SESSION_COOKIE]
        client.cookies.set(SESSION_COOKIE, value[:-3] + ("AAA" if not value.endswith("AAA") else "BBB"))
        assert client.get("/account").status_code == 303


def test_no_secret_in_the_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Signing in, a token made and used, a replan: the logs carry no password, token or session secret."""
    caplog.set_level(logging.DEBUG)
    from planner.operations.daemon.config import load_config
    from planner.operations.portal.app import create_app
    from planner.operations.portal.demo import prepare_demo

    config = load_config(prepare_demo(tmp_path / "gen", __import__("test_portal_requests").NOW))
    app = create_app(config)  # the secret generated and stored
    with app.state.portal.store.engine.connect() as db:
        secret = db.execute(
            text("select value from portal_settings where key = 'session_secret'")
        ).scalar_one()
    assert len(secret) >= 48
    kit = make_portal(tmp_path / "kit")
    ada = kit.client("ada")
    ada.post("/account/tokens", data={"name": "t", "csrf_token": csrf(ada.get("/account").text)})
    token = ada.get("/account").text.split('id="new-token"')[1].split("<code>")[1].split("</code>")[0]
    kit.api(None).get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert kit.api("admin").post("/api/v1/admin/replan").json()["ok"]
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    for value in (PASSWORD, token, secret, "test-secret-"):
        assert value not in logged
