"""The portal in a real browser (Playwright driving Debian's Chromium, as the report tests do; skipped with
the reason where either is missing). uvicorn serves the app on a free loopback port in a thread.

A team lead signs in, submits a training request, sees it queued with its position, changes its priority;
an admin triggers a replan from the admin page; the lead then sees the plan's start (the one plan.json
says), the charts drawn, and signs out. The other team's lead gets 404 on the request's page and on its
API object. Screenshots of the main pages go under the test's tmp dir (their paths printed).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from browser import LAUNCH_ARGS, chromium_path

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

pytestmark = pytest.mark.slow  # a replan (~2 s) and a browser session (~15 s)

PASSWORD = "correct horse battery"
CHARTS_DRAWN = """() => { const divs = [...document.querySelectorAll('.plotly-graph-div')];
  return divs.length > 0 && divs.every(d => d.querySelector('svg.main-svg') !== null); }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    from planner.operations.daemon.config import load_config
    from planner.operations.portal.app import create_app
    from planner.operations.portal.demo import prepare_demo
    from planner.operations.portal.security import hash_password

    config = load_config(prepare_demo(tmp_path / "demo", datetime.now(UTC)))
    app = create_app(config)
    hashed = hash_password(PASSWORD)
    store = app.state.portal.store
    store.add_user("admin", hashed, is_admin=True, roles={}, actor="tests")
    store.add_user("ada", hashed, is_admin=False, roles={"research": "lead"}, actor="tests")
    store.add_user("grace", hashed, is_admin=False, roles={"vision": "lead"}, actor="tests")
    port = _free_port()
    running = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not running.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", app
    running.should_exit = True
    thread.join(timeout=10)


def test_a_lead_submits_reprioritizes_sees_the_plan_and_another_lead_sees_nothing(
    server: tuple[str, Any], tmp_path: Path
) -> None:
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError as exc:
        pytest.skip(f"browser test needs the playwright package (pip install '.[test]'): {exc}")
    chromium = chromium_path()
    if chromium is None:
        pytest.skip("browser test needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    base, app = server
    # CI runs tests on every core: a request's validation or a page may take seconds on a busy machine
    expect.set_options(timeout=30_000)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    problems: list[str] = []
    outside: list[str] = []

    def shot(page: Any, name: str) -> None:
        path = shots / f"{name}.png"
        # the viewport only: a full-page shot resizes the page for a moment, and a click right after it
        # can miss its button (seen under load)
        page.screenshot(path=str(path))
        print(f"screenshot: {path}")

    def context(browser: Any) -> Any:
        made = browser.new_context(service_workers="block", viewport={"width": 1280, "height": 1500})
        made.set_default_timeout(30_000)
        made.route(lambda url: not url.startswith(base), lambda route: route.abort("internetdisconnected"))
        made.on("request", lambda r: outside.append(r.url) if not r.url.startswith(base) else None)
        return made

    def sign_in(page: Any, username: str) -> None:
        page.on("pageerror", lambda e: problems.append(f"{username}: {e}"))
        page.on("console", lambda m: problems.append(f"{username}: {m.text}") if m.type == "error" else None)
        page.goto(f"{base}/teams/research")  # not signed in: to the sign-in page, then back here
        expect(page).to_have_url(f"{base}/login?next=/teams/research")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), headless=True, args=LAUNCH_ARGS)
        try:
            lead = context(browser).new_page()
            lead.goto(f"{base}/login")
            shot(lead, "login")
            sign_in(lead, "ada")
            expect(lead).to_have_url(f"{base}/teams/research")
            # submit a request
            lead.click("#new-request")
            lead.fill("input[name=name]", "llm-sft")
            lead.fill("input[name=gpu_models]", "H100")
            lead.fill("input[name=nodes]", "2")
            lead.fill("input[name=hours]", "6")
            lead.check("input[name=preemptible]")
            lead.fill("input[name=write_minutes]", "2")
            lead.fill("input[name=restart_minutes]", "5")
            shot(lead, "new-request")
            lead.click("#request-form button[type=submit]")
            expect(lead).to_have_url(f"{base}/teams/research")
            expect(lead.locator(".flash")).to_contain_text("#1 in research's queue")
            row = lead.locator("#queue tbody tr").first
            expect(row.locator(".position")).to_have_text("1")
            expect(row).to_have_attribute("data-state", "queued")
            expect(row.locator(".priority")).to_have_text("normal")
            request_id = int(row.get_attribute("data-request") or 0)
            shot(lead, "team-queued")
            # change its priority
            row.locator("select[name=priority_class]").select_option("low")
            row.locator("form[action$='/priority'] button").click()
            expect(lead.locator(".flash")).to_contain_text("priority low")
            expect(lead.locator("#queue tbody tr").first.locator(".priority")).to_have_text("low")
            # an admin plans again, from the admin page
            admin = context(browser).new_page()
            admin.goto(f"{base}/login")
            admin.fill("input[name=username]", "admin")
            admin.fill("input[name=password]", PASSWORD)
            admin.click("button[type=submit]")
            expect(admin).to_have_url(f"{base}/admin")
            admin.click("#replan")
            expect(admin.locator(".flash")).to_contain_text("Replan: planned at", timeout=60_000)
            shot(admin, "admin")
            # the lead sees the plan's start, the charts, and signs out
            lead.reload()
            row = lead.locator("#queue tbody tr").first
            expect(row).to_have_attribute("data-state", "planned")
            plan_dir = Path(app.state.portal.daemon_store.get_state("plan_dir"))
            plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
            [placed] = [p for p in plan["training"] if p["job"] == f"llm-sft-r{request_id}"]
            start = datetime.fromisoformat(placed["start"])
            expect(row.locator(".start")).to_have_text(f"{start:%Y-%m-%d %H:%M}Z")
            expect(lead.locator("#plan-status")).to_contain_text("next replan due")
            lead.wait_for_function(CHARTS_DRAWN, timeout=30_000)
            assert lead.locator(".plotly-graph-div").count() == 2  # GPU use and chargeback
            assert lead.locator("#chart-usage svg.main-svg").count() >= 1
            shot(lead, "team-planned")
            lead.goto(f"{base}/requests/{request_id}")
            expect(lead.locator("#state")).to_contain_text("planned: starts")
            expect(lead.locator("#position")).to_have_text("1")
            shot(lead, "request")
            lead.click("#logout")
            expect(lead).to_have_url(f"{base}/login")
            lead.goto(f"{base}/teams/research")
            expect(lead).to_have_url(f"{base}/login?next=/teams/research")
            # the other team's lead: 404 on the page and on the API object
            other = context(browser).new_page()
            other.goto(f"{base}/login")
            other.fill("input[name=username]", "grace")
            other.fill("input[name=password]", PASSWORD)
            other.click("button[type=submit]")
            expect(other).to_have_url(f"{base}/teams/vision")
            answer = other.goto(f"{base}/requests/{request_id}")
            assert answer is not None and answer.status == 404
            expect(other.locator("h1")).to_have_text("Not found")
            assert "llm-sft" not in other.content()
            api = other.request.get(f"{base}/api/v1/requests/{request_id}")
            assert api.status == 404 and "llm-sft" not in api.text()
            team = other.goto(f"{base}/teams/research")
            assert team is not None and team.status == 404
            shot(other, "other-team-404")
        finally:
            browser.close()
    assert problems == []
    assert outside == [], "the portal's pages must work offline"
