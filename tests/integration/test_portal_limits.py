"""What the portal takes and what it tells (issue 36): request bodies limited in size (configurable), every
list and string of a body bounded, numbers strict, a team's queue capped; ``X-Forwarded-For`` believed
only from the proxies named (in the app and in the server the command runs); no server path in any API
answer."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient
from test_portal_authz import EXPECTED
from test_portal_requests import PortalKit, csrf, job, make_portal

from planner.cli.portal import server_config
from planner.operations.portal.app import DEFAULT_MAX_BODY_BYTES
from planner.operations.portal.schemas import MAX_GPU_MODELS
from planner.operations.portal.security import LoginLimiter
from planner.operations.portal.service import MAX_QUEUED_PER_TEAM, without_paths


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> PortalKit:
    return make_portal(tmp_path_factory.mktemp("portal-limits"))


def test_a_body_over_the_limit_is_413_and_nothing_is_stored(kit: PortalKit) -> None:
    """The issue's 16 MB request (2,000,000 GPU models), scaled to just past the limit: refused whether
    its length is declared or it comes chunked, through the API and through the form."""
    ada = kit.api("ada")
    models = ["H100"] * (DEFAULT_MAX_BODY_BYTES // 7 + 1)
    body = json.dumps(job(gpu_models=models)).encode()
    assert len(body) > DEFAULT_MAX_BODY_BYTES
    headers = {"Content-Type": "application/json"}
    declared = ada.post("/api/v1/teams/research/requests", content=body, headers=headers)
    assert declared.status_code == 413, declared.text
    chunks = (body[k : k + 65536] for k in range(0, len(body), 65536))
    chunked = ada.post("/api/v1/teams/research/requests", content=chunks, headers=headers)
    assert chunked.status_code == 413, chunked.text
    browser = kit.client("ada")
    form = {"csrf_token": csrf(browser.get("/login").text), "name": "big", "nodes": "1", "hours": "2"}
    form["gpu_models"] = ",".join(models)
    assert browser.post("/teams/research/requests", data=form).status_code == 413
    assert kit.portal.store.requests() == []
    assert ada.post("/api/v1/teams/research/requests", json=job(name="fits")).status_code == 201


def test_the_body_limit_is_configurable(tmp_path: Path) -> None:
    kit = make_portal(tmp_path, max_body_bytes=400)
    ada = kit.api("ada")
    assert ada.post("/api/v1/teams/research/requests", json=job()).status_code == 201  # ~90 bytes
    long = job(name="x" * 180, project="p" * 200)
    assert ada.post("/api/v1/teams/research/requests", json=long).status_code == 413
    assert len(kit.portal.store.requests()) == 1


def test_every_list_and_string_a_caller_writes_is_bounded(kit: PortalKit) -> None:
    """In the OpenAPI document: every array of every request body has maxItems, every string maxLength
    (or an enum, a format or a pattern); and the bounds hold."""
    document = kit.api(None).get("/api/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    bodies = {
        ref["$ref"].split("/")[-1]
        for path in document["paths"].values()
        for operation in path.values()
        for ref in [
            operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
        ]
        if "$ref" in ref
    }
    assert {"RequestIn", "RequestPatch", "TeamIn"} <= bodies
    unbounded = []

    def walk(name: str, schema: dict[str, Any], seen: set[str]) -> None:
        if "$ref" in schema:
            target = schema["$ref"].split("/")[-1]
            if target not in seen:
                walk(target, schemas[target], seen | {target})
            return
        for option in schema.get("anyOf", []):
            walk(name, option, seen)
        kind = schema.get("type")
        if kind == "array":
            if "maxItems" not in schema:
                unbounded.append(name)
            walk(f"{name}[]", schema.get("items", {}), seen)
        if kind == "string" and not {"maxLength", "enum", "format", "pattern", "const"} & schema.keys():
            unbounded.append(name)
        for key, value in schema.get("properties", {}).items():
            walk(f"{name}.{key}", value, seen)

    for body in sorted(bodies):
        walk(body, schemas[body], {body})
    assert unbounded == []

    ada = kit.api("ada")
    too_many = ada.post(
        "/api/v1/teams/research/requests", json=job(gpu_models=["H100"] * (MAX_GPU_MODELS + 1))
    )
    assert too_many.status_code == 422 and too_many.json()[0]["field"] == "gpu_models"
    boolean = ada.post("/api/v1/teams/research/requests", json=job(nodes=True))
    assert boolean.status_code == 422 and boolean.json() == [
        {"field": "nodes", "message": "Value error, a boolean is not a number"}
    ]
    admin = kit.api("admin")
    classes = admin.put("/api/v1/admin/teams/research", json={"allowed_classes": ["low"] * 4})
    assert classes.status_code == 422 and classes.json()[0]["field"] == "allowed_classes"
    # the form's list goes through the same bound
    browser = kit.client("ada")
    form = {"csrf_token": csrf(browser.get("/login").text), "name": "many", "nodes": "1", "hours": "2"}
    form["gpu_models"] = ",".join(["H100"] * (MAX_GPU_MODELS + 1))
    page = browser.post("/teams/research/requests", data=form)
    assert page.status_code == 422 and f"at most {MAX_GPU_MODELS} GPU models" in page.text
    assert all(r.name != "many" for r in kit.portal.store.requests())


def test_a_teams_queue_is_capped(tmp_path: Path) -> None:
    kit = make_portal(tmp_path)
    spec = {"job": job(name="q")}
    for _ in range(MAX_QUEUED_PER_TEAM - 1):
        kit.portal.store.add_request("research", "q", spec, "normal", "ada")
    ada = kit.api("ada")
    assert ada.post("/api/v1/teams/research/requests", json=job(name="last")).status_code == 201
    full = ada.post("/api/v1/teams/research/requests", json=job(name="one-too-many"))
    assert full.status_code == 422
    assert full.json() == [
        {
            "field": None,
            "message": f"research has {MAX_QUEUED_PER_TEAM} queued requests, the most a team may have: "
            "cancel one first",
        }
    ]
    assert kit.api("grace").post("/api/v1/teams/vision/requests", json=job()).status_code == 201  # per team
    last = next(r for r in kit.portal.store.requests("research") if r.name == "last")
    assert ada.post(f"/api/v1/requests/{last.id}/cancel").status_code == 200
    assert ada.post("/api/v1/teams/research/requests", json=job(name="fits-again")).status_code == 201


def _wrong_logins(client: TestClient | httpx.Client, addresses: list[str]) -> list[int]:
    """One wrong sign-in per address, each claimed in X-Forwarded-For, each for another username."""
    codes = []
    for k, address in enumerate(addresses):
        page = client.get("/login")
        form = {"username": f"nobody{k}", "password": "wrong", "csrf_token": csrf(page.text)}
        codes.append(client.post("/login", data=form, headers={"X-Forwarded-For": address}).status_code)
    return codes


def test_forwarded_for_counts_only_from_a_named_proxy(tmp_path: Path) -> None:
    limits = {"per_user": 100, "per_client": 3, "window_seconds": 600}
    addresses = [f"203.0.113.{k}" for k in range(4)]
    # default: no proxy trusted; every attempt counts against the connection's own address
    plain = make_portal(tmp_path / "plain", limiter=LoginLimiter(**limits))  # type: ignore[arg-type]
    local = TestClient(plain.app, follow_redirects=False, client=("127.0.0.1", 40000))
    assert _wrong_logins(local, addresses) == [401, 401, 401, 429]
    # a named proxy: the client it names counts; an address not named is not believed
    proxied = make_portal(
        tmp_path / "proxied",
        limiter=LoginLimiter(**limits),  # type: ignore[arg-type]
        forwarded_allow_ips=["127.0.0.1"],
    )
    proxy = TestClient(proxied.app, follow_redirects=False, client=("127.0.0.1", 40000))
    assert _wrong_logins(proxy, addresses) == [401] * 4  # four clients behind one proxy
    assert _wrong_logins(proxy, ["198.51.100.7"] * 4) == [401, 401, 401, 429]  # one client, limited
    other = TestClient(proxied.app, follow_redirects=False, client=("192.0.2.50", 40000))
    assert _wrong_logins(other, addresses) == [401, 401, 401, 429]


def test_the_served_portal_does_not_believe_forwarded_for_by_default(tmp_path: Path) -> None:
    """The server the command runs (uvicorn with :func:`server_config`), on a real socket from 127.0.0.1:
    uvicorn's default would take X-Forwarded-For from 127.0.0.1 and give each attempt a new address."""
    import uvicorn

    limiter = LoginLimiter(per_user=100, per_client=3, window_seconds=600)
    kit = make_portal(tmp_path, limiter=limiter)
    config = server_config(kit.app, "127.0.0.1", 0)
    config.log_level = "warning"
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=False) as client:
            codes = _wrong_logins(client, [f"203.0.113.{k}" for k in range(4)])
        assert codes == [401, 401, 401, 429]
    finally:
        server.should_exit = True
        thread.join(10)


def test_no_server_path_in_any_api_answer(tmp_path: Path) -> None:
    """Every API GET as the admin (who sees most), a replan that works and one that fails, the audit log:
    the server's directories appear nowhere."""
    kit = make_portal(tmp_path)
    admin = kit.api("admin")
    made = admin.post("/api/v1/teams/research/requests", json=job())
    planned = admin.post("/api/v1/admin/replan")
    assert planned.json()["ok"] and planned.json()["plan"]
    answers = [made.text, planned.text]
    for method, path in EXPECTED:
        if method == "GET" and path.startswith("/api/v1/"):
            url = path.format(team="research", request_id=made.json()["id"])
            answer = admin.get(url)
            assert answer.status_code == 200, url
            answers.append(answer.text)
    kit.portal.config.scenario_path.write_text("name: [unclosed\n", encoding="utf-8")
    broken = admin.post("/api/v1/admin/replan")
    assert broken.status_code == 200 and broken.json()["ok"] is False
    assert "scenario.yaml" in broken.json()["message"]  # the file is named, not located
    answers += [broken.text, admin.get("/api/v1/admin/audit").text]
    for text in answers:
        for directory in {str(tmp_path), str(tmp_path.resolve()), "/tmp/"}:
            assert directory not in text, text[:500]


def test_without_paths_cuts_absolute_paths_only() -> None:
    assert without_paths("/srv/gpuplan/scenario.yaml: line 3: bad") == "scenario.yaml: line 3: bad"
    assert without_paths("in '/var/lib/x/plans/' now") == "in '(a directory)' now"
    assert (
        without_paths("sqlite:///var/db.sqlite and a/b/c and 1/2")
        == "sqlite:///var/db.sqlite and a/b/c and 1/2"
    )


def test_a_wrong_forwarded_allow_ips_exits_2_before_writing_anything(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from planner.cli import app as cli

    where = tmp_path / "demo"
    for value, problem in {
        "10.0.0.300": "'10.0.0.300' is not an IP address or network (or *)",
        "127.0.0.1,proxy.local": "'proxy.local' is not an IP address or network (or *)",
    }.items():
        answer = CliRunner().invoke(cli, ["portal", "--demo-dir", str(where), "--forwarded-allow-ips", value])
        assert answer.exit_code == 2, answer.output
        assert answer.output.strip().splitlines() == [f"error: --forwarded-allow-ips: {problem}"]
    assert not where.exists()
