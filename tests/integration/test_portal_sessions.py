"""Portal sessions that really end (issue 36): sessions live in the portal's database, so sign-out, a
password change and an admin disabling the user end them for every copy of the cookie; sessions and API
tokens expire by the server's clock (tokens after 90 days by default, shown on the account page); the
shell's ``--set-password``, ``--disable-user`` and ``--enable-user``; a database from before these
columns existed gets them."""

from __future__ import annotations

import base64
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from test_portal_requests import NOW, PASSWORD, PortalKit, csrf, make_portal
from typer.testing import CliRunner

from planner.cli import app as cli
from planner.operations.portal.app import SESSION_COOKIE
from planner.operations.portal.security import LoginLimiter, new_api_token, token_digest
from planner.operations.portal.store import PortalStore

NEW_PASSWORD = "a brand new passphrase"


class Clock:
    """The portal's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def _sign_in(kit: PortalKit, username: str, password: str) -> tuple[int, TestClient]:
    client = TestClient(kit.app, follow_redirects=False)
    page = client.get("/login")
    answer = client.post(
        "/login", data={"username": username, "password": password, "csrf_token": csrf(page.text)}
    )
    return answer.status_code, client


def _replay(kit: PortalKit, cookie: str) -> TestClient:
    """A client holding a copy of a session cookie (as someone who captured it would)."""
    client = TestClient(kit.app, follow_redirects=False)
    client.cookies.set(SESSION_COOKIE, cookie)
    return client


def _change_password(client: TestClient, current: str, new: str, confirm: str | None = None) -> int:
    token = csrf(client.get("/account").text)
    form = {
        "current_password": current,
        "new_password": new,
        "confirm_password": new if confirm is None else confirm,
        "csrf_token": token,
    }
    return client.post("/account/password", data=form).status_code


def test_sign_out_ends_the_session_for_every_copy_of_the_cookie(tmp_path: Path) -> None:
    kit = make_portal(tmp_path)
    ada = kit.client("ada")
    copied = ada.cookies[SESSION_COOKIE]
    assert _replay(kit, copied).get("/account").status_code == 200  # the copy works while signed in
    assert ada.post("/logout", data={"csrf_token": csrf(ada.get("/account").text)}).status_code == 303
    thief = _replay(kit, copied)
    assert thief.get("/account").status_code == 303  # to the sign-in page
    assert thief.get("/api/v1/me").status_code == 401
    assert kit.portal.store.sessions(kit.portal.store.user("ada").id) == []  # type: ignore[union-attr]


def test_a_session_ends_by_the_servers_clock(tmp_path: Path) -> None:
    """The cookie's own signature is still good after 8 hours of the portal's clock; the session is not."""
    clock = Clock()
    kit = make_portal(tmp_path, clock=clock)
    ada = kit.client("ada")
    clock.now = NOW + timedelta(hours=8) - timedelta(seconds=1)
    assert ada.get("/account").status_code == 200
    clock.now = NOW + timedelta(hours=8)
    assert ada.get("/account").status_code == 303


def test_a_password_change_ends_every_other_session(tmp_path: Path) -> None:
    kit = make_portal(tmp_path)
    here, elsewhere = kit.client("ada"), kit.client("ada")
    copied = here.cookies[SESSION_COOKIE]
    # refused changes change nothing
    assert _change_password(here, PASSWORD, "short") == 422
    assert _change_password(here, PASSWORD, NEW_PASSWORD, "a different passphrase") == 422
    assert _change_password(here, PASSWORD, PASSWORD) == 422
    assert (
        "The current password is wrong"
        in here.post(
            "/account/password",
            data={
                "current_password": "not it at all",
                "new_password": NEW_PASSWORD,
                "confirm_password": NEW_PASSWORD,
                "csrf_token": csrf(here.get("/account").text),
            },
        ).text
    )
    assert elsewhere.get("/account").status_code == 200
    # the change
    assert _change_password(here, PASSWORD, NEW_PASSWORD) == 303
    page = here.get("/account")
    assert page.status_code == 200  # this browser stays signed in, on a new session
    assert "1 other session signed out" in page.text
    assert elsewhere.get("/account").status_code == 303
    assert _replay(kit, copied).get("/account").status_code == 303  # the old cookie of this browser too
    assert _sign_in(kit, "ada", PASSWORD)[0] == 401
    assert _sign_in(kit, "ada", NEW_PASSWORD)[0] == 303
    [entry] = [e for e in kit.portal.store.audit() if e.action == "user.password"]
    assert entry.actor == "ada" and entry.after == {"sessions_ended": 2}


def test_a_wrong_current_password_counts_as_a_failed_sign_in(tmp_path: Path) -> None:
    """A stolen session cannot try passwords faster than the sign-in page allows."""
    kit = make_portal(tmp_path, limiter=LoginLimiter(per_user=2, per_client=100, window_seconds=600))
    ada = kit.client("ada")
    assert [_change_password(ada, f"guess {k} long", NEW_PASSWORD) for k in range(2)] == [422, 422]
    assert _change_password(ada, PASSWORD, NEW_PASSWORD) == 429  # the right one, after the limit
    assert _sign_in(kit, "ada", NEW_PASSWORD)[0] == 429
    assert kit.portal.store.user("ada").password_hash != ""  # type: ignore[union-attr]


def test_an_admin_disabling_a_user_ends_her_sessions_and_tokens(tmp_path: Path) -> None:
    kit = make_portal(tmp_path)
    ada, ada_api = kit.client("ada"), kit.api("ada")
    assert ada_api.get("/api/v1/me").status_code == 200
    admin = kit.client("admin")
    ada_id = kit.portal.store.user("ada").id  # type: ignore[union-attr]
    token = csrf(admin.get("/admin").text)
    assert admin.post(f"/admin/users/{ada_id}/disable", data={"csrf_token": token}).status_code == 303
    assert ada.get("/teams/research").status_code == 303
    assert ada_api.get("/api/v1/me").status_code == 401
    assert ada_api.post("/api/v1/teams/research/requests", json={"name": "x"}).status_code == 401
    code, client = _sign_in(kit, "ada", PASSWORD)
    assert code == 403 and client.get("/account").status_code == 303
    assert re.search(r"<td>ada</td>.*?<td>disabled</td>", admin.get("/admin").text, re.S)
    # an admin cannot lock themselves out from the page
    admin_id = kit.portal.store.user("admin").id  # type: ignore[union-attr]
    admin.post(f"/admin/users/{admin_id}/disable", data={"csrf_token": token})
    assert not kit.portal.store.user("admin").disabled  # type: ignore[union-attr]
    assert admin.get("/admin").status_code == 200
    # enabled again: sign-in and the unexpired token work; the old session stays ended
    assert admin.post(f"/admin/users/{ada_id}/enable", data={"csrf_token": token}).status_code == 303
    assert ada.get("/teams/research").status_code == 303
    assert _sign_in(kit, "ada", PASSWORD)[0] == 303
    assert ada_api.get("/api/v1/me").status_code == 200
    actions = [(e.action, e.actor, e.object_id) for e in kit.portal.store.audit()]
    assert ("user.disable", "admin", "ada") in actions and ("user.enable", "admin", "ada") in actions


def test_api_tokens_expire_after_90_days_by_default_as_the_account_page_says(tmp_path: Path) -> None:
    clock = Clock()
    kit = make_portal(tmp_path, clock=clock)
    ada = kit.client("ada")
    answer = ada.post("/account/tokens", data={"name": "ci", "csrf_token": csrf(ada.get("/account").text)})
    assert answer.status_code == 303
    assert "gpl_" not in _cookie_payload(ada.cookies[SESSION_COOKIE])  # the new token is never in the cookie
    page = ada.get("/account").text
    token = page.split('id="new-token"')[1].split("<code>")[1].split("</code>")[0]
    ends = NOW + timedelta(days=90)
    assert f"{ends:%Y-%m-%d %H:%M}Z" in page.split('id="tokens"')[1]
    short = ada.post(
        "/account/tokens", data={"name": "week", "days": "7", "csrf_token": csrf(page)}
    ).status_code
    assert short == 303
    for days in ("0", "366", "true", "1e9"):
        bad = ada.post("/account/tokens", data={"name": "x", "days": days, "csrf_token": csrf(page)})
        assert bad.status_code == 422, days
    expiries = sorted(t.expires for t in kit.portal.store.tokens(kit.portal.store.user("ada").id))  # type: ignore[union-attr]
    assert expiries == [NOW + timedelta(days=7), ends]
    api = TestClient(kit.app, headers={"Authorization": f"Bearer {token}"})
    clock.now = ends - timedelta(seconds=1)
    assert api.get("/api/v1/me").status_code == 200
    clock.now = ends
    assert api.get("/api/v1/me").status_code == 401
    assert "(expired)" in kit.client("ada").get("/account").text


def _cookie_payload(cookie: str) -> str:
    data = cookie.strip('"').split(".")[0]
    return base64.b64decode(data + "=" * (-len(data) % 4)).decode("utf-8", "replace")


def test_the_shells_set_password_disable_and_enable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kit = make_portal(tmp_path / "demo")
    config = str(tmp_path / "demo" / "daemon.yaml")
    runner = CliRunner()
    ada = kit.client("ada")
    ada_api = kit.api("ada")

    answer = runner.invoke(cli, ["portal", "--config", config, "--disable-user", "ada"])
    assert answer.exit_code == 0, answer.output
    assert ada.get("/account").status_code == 303 and ada_api.get("/api/v1/me").status_code == 401
    assert _sign_in(kit, "ada", PASSWORD)[0] == 403
    assert runner.invoke(cli, ["portal", "--config", config, "--enable-user", "ada"]).exit_code == 0
    assert ada_api.get("/api/v1/me").status_code == 200

    again = kit.client("ada")
    monkeypatch.setenv("GPUPLAN_PORTAL_PASSWORD", NEW_PASSWORD)
    answer = runner.invoke(cli, ["portal", "--config", config, "--set-password", "ada"])
    assert answer.exit_code == 0, answer.output
    assert "1 session(s) ended" in answer.output
    assert again.get("/account").status_code == 303
    assert _sign_in(kit, "ada", NEW_PASSWORD)[0] == 303

    # wrong input: exit 2, one line naming the option and the problem, nothing changed
    monkeypatch.setenv("GPUPLAN_PORTAL_PASSWORD", "short")
    cases = {
        ("--set-password", "ada"): "password: A password needs at least 12 characters",
        ("--disable-user", "nobody"): "--disable-user: no user 'nobody'; users: ada, admin, alan, grace",
    }
    for args, message in cases.items():
        answer = runner.invoke(cli, ["portal", "--config", config, *args])
        assert answer.exit_code == 2, answer.output
        assert len(answer.output.strip().splitlines()) == 1 and message in answer.output, answer.output
    both = runner.invoke(cli, ["portal", "--config", config, "--disable-user", "ada", "--enable-user", "ada"])
    assert both.exit_code == 2 and "give one of" in both.output
    assert _sign_in(kit, "ada", NEW_PASSWORD)[0] == 303
    assert not kit.portal.store.user("ada").disabled  # type: ignore[union-attr]


def test_a_database_from_before_sessions_and_expiry_gets_its_columns(tmp_path: Path) -> None:
    """The portal's tables as the previous release made them: the new columns are added at start, a
    token made then ends 90 days after its creation, and its user is not disabled."""
    engine = create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    with engine.begin() as db:
        db.exec_driver_sql(
            "CREATE TABLE portal_users (id INTEGER PRIMARY KEY, username VARCHAR(80) UNIQUE, "
            "password_hash VARCHAR(255), is_admin BOOLEAN, created DATETIME)"
        )
        db.exec_driver_sql(
            "CREATE TABLE portal_tokens (id INTEGER PRIMARY KEY, "
            "user_id INTEGER REFERENCES portal_users(id), "
            "name VARCHAR(100), prefix VARCHAR(20), digest VARCHAR(64) UNIQUE, created DATETIME, "
            "last_used DATETIME, revoked BOOLEAN)"
        )
        db.execute(
            text("INSERT INTO portal_users VALUES (1, 'old', 'x', 0, :at)"), {"at": NOW - timedelta(days=400)}
        )
        for number, age in ((1, 100), (2, 10)):
            db.execute(
                text("INSERT INTO portal_tokens VALUES (:id, 1, 't', 'gpl_', :digest, :at, NULL, 0)"),
                {"id": number, "digest": token_digest(f"token-{number}"), "at": NOW - timedelta(days=age)},
            )
    store = PortalStore(engine, lambda: NOW)
    assert store.token_user(token_digest("token-1")) is None  # 100 days old: past its 90
    user = store.token_user(token_digest("token-2"))
    assert user is not None and user.username == "old" and not user.disabled
    assert [t.expires for t in store.tokens(1)] == [NOW - timedelta(days=10), NOW + timedelta(days=80)]
    PortalStore(engine, lambda: NOW)  # a second start finds the columns there
    _token, prefix, digest = new_api_token()
    assert store.add_token(user, "new", prefix, digest).expires == NOW + timedelta(days=90)
