"""The portal's training requests (issue 18): validated with the scenario's own rules and messages, queued
by priority class then submission, fed to the daemon's replan (queued ones only), and given their state
by the plan, checked against plan.json read directly; the team's chargeback against allocations.csv.

Also the kit the other portal tests import (``from test_portal_requests import make_portal``): the
embedded demo in a temporary directory, on a fixed clock, with known users.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("fastapi")
pytest.importorskip("argon2")

from fastapi import FastAPI
from fastapi.testclient import TestClient

from models.errors import InputError
from models.scenario import load
from planner.operations.daemon.config import load_config
from planner.operations.portal.app import create_app
from planner.operations.portal.demo import prepare_demo
from planner.operations.portal.security import LoginLimiter, hash_password, new_api_token
from planner.operations.portal.service import Portal

NOW = datetime(2027, 3, 1, 6, 0, tzinfo=UTC)
#: the demo's users (planner/operations/portal/demo/users.yaml), with passwords of the tests' own
USERS: dict[str, tuple[bool, dict[str, str]]] = {
    "admin": (True, {}),
    "ada": (False, {"research": "lead"}),
    "grace": (False, {"vision": "lead"}),
    "alan": (False, {"research": "member"}),
}
PASSWORD = "correct horse battery"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class PortalKit:
    app: FastAPI
    directory: Path
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def portal(self) -> Portal:
        portal: Portal = self.app.state.portal
        return portal

    def client(self, username: str | None = None) -> TestClient:
        """A browser-like client signed in as ``username`` (None: anonymous, with a CSRF token)."""
        client = TestClient(self.app, follow_redirects=False)
        page = client.get("/login")
        if username is not None:
            answer = client.post(
                "/login", data={"username": username, "password": PASSWORD, "csrf_token": csrf(page.text)}
            )
            assert answer.status_code == 303, answer.text
        return client

    def token(self, username: str) -> str:
        if username not in self.tokens:
            user = self.portal.store.user(username)
            assert user is not None
            token, prefix, digest = new_api_token()
            self.portal.store.add_token(user, "tests", prefix, digest)
            self.tokens[username] = token
        return self.tokens[username]

    def api(self, username: str | None) -> TestClient:
        headers = {} if username is None else {"Authorization": f"Bearer {self.token(username)}"}
        return TestClient(self.app, headers=headers, follow_redirects=False)


def csrf(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "no CSRF token on the page"
    return found.group(1)


def make_portal(
    directory: Path,
    *,
    limiter: LoginLimiter | None = None,
    clock: Callable[[], datetime] = lambda: NOW,
    **app_options: Any,
) -> PortalKit:
    config = load_config(prepare_demo(directory, NOW))
    app = create_app(config, secret="test-secret-" + "x" * 40, clock=clock, limiter=limiter, **app_options)
    store = app.state.portal.store
    hashed = hash_password(PASSWORD)
    for name, (is_admin, roles) in USERS.items():
        store.add_user(name, hashed, is_admin=is_admin, roles=roles, actor="tests")
    return PortalKit(app, directory)


def job(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "sft", "nodes": 1, "gpus_per_node": 8, "gpu_models": ["H100"], "hours": 6}
    return {**base, **fields}


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A portal with requests of both teams (one cancelled, one too big for its team), replanned once."""
    kit = make_portal(tmp_path_factory.mktemp("portal-requests"))
    ada, grace = kit.api("ada"), kit.api("grace")
    made = {}
    for name, body in {
        "first": job(name="first", preemptible=True, checkpoint={"write_minutes": 2, "restart_minutes": 5}),
        "second": job(name="second", nodes=2, fabric="required"),
        "dropped": job(name="dropped"),
    }.items():
        answer = ada.post("/api/v1/teams/research/requests", json=body)
        assert answer.status_code == 201, answer.text
        made[name] = answer.json()
    big = grace.post("/api/v1/teams/vision/requests", json=job(name="huge", nodes=8))  # 64 GPUs > burst 32
    assert big.status_code == 201, big.text
    made["huge"] = big.json()
    assert ada.post(f"/api/v1/requests/{made['dropped']['id']}/cancel").status_code == 200
    result = kit.api("admin").post("/api/v1/admin/replan")
    assert result.status_code == 200 and result.json()["ok"], result.text
    plan_dir = Path(kit.portal.daemon_store.get_state("plan_dir"))  # type: ignore[arg-type]
    assert result.json()["plan"] == plan_dir.name  # named, never located
    return {"kit": kit, "made": made, "plan_dir": plan_dir}


def test_bad_requests_get_the_scenario_files_messages(tmp_path: Path) -> None:
    """Each bad request is answered (422, the field named) with exactly what `gpuplan validate` says of the
    same job in the same scenario file: the scenario's rules are the request's."""
    kit = make_portal(tmp_path / "portal")
    ada = kit.api("ada")
    scenario = yaml.safe_load((tmp_path / "portal" / "scenario.yaml").read_text(encoding="utf-8"))
    cases = {
        "nodes": job(nodes=0),
        "hours": job(hours=-1),
        "gpu_models": job(gpu_models=["Z900"]),
        "earliest_start": job(earliest_start="2031-01-01T00:00:00Z"),
        "deadline": job(earliest_start="2027-03-02T00:00:00Z", deadline="2027-03-02T03:00:00Z"),
        "checkpoint.write_minutes": job(
            preemptible=True, checkpoint={"write_minutes": -2, "restart_minutes": 1}
        ),
    }
    for field_name, body in cases.items():
        answer = ada.post("/api/v1/teams/research/requests", json=body)
        assert answer.status_code == 422, (field_name, answer.text)
        [problem] = answer.json()
        assert problem["field"] == field_name
        # the same job in the scenario file, read and checked as `gpuplan validate` does
        entry = {k: v for k, v in {**body, "team": "research"}.items()}
        path = tmp_path / f"bad-{field_name}.yaml"
        path.write_text(yaml.safe_dump({**scenario, "training": [entry]}), encoding="utf-8")
        with pytest.raises(InputError) as caught:
            from models.inputs import load_inputs
            from planner.planning.problem.checks import check_inputs

            inputs = load_inputs(path)
            check_inputs(inputs.scenario, inputs.catalog)
        assert caught.value.where == f"training[0].{field_name}"
        assert caught.value.problem == problem["message"]
    assert kit.portal.store.requests() == []  # nothing bad was queued


def test_a_lead_cannot_use_a_class_the_team_may_not(tmp_path: Path) -> None:
    kit = make_portal(tmp_path)
    research = kit.portal.store.team("research")
    assert research is not None and "high" not in research.allowed_classes  # a standard team: normal, low
    answer = kit.api("ada").post("/api/v1/teams/research/requests", json={**job(), "priority_class": "high"})
    assert answer.status_code == 422 and answer.json()[0]["field"] == "priority_class"
    made = kit.api("ada").post("/api/v1/teams/research/requests", json=job()).json()
    patch = kit.api("ada").patch(f"/api/v1/requests/{made['id']}", json={"priority_class": "high"})
    assert patch.status_code == 422
    assert kit.portal.store.request(made["id"]).priority_class == "normal"  # type: ignore[union-attr]


def test_queue_order_is_priority_then_submission_and_moves_stay_in_class(tmp_path: Path) -> None:
    kit = make_portal(tmp_path)
    ada = kit.api("ada")
    ids = {}
    for name, cls in [("a", "normal"), ("b", "low"), ("c", "normal"), ("d", "normal"), ("e", "low")]:
        body = {**job(name=name), "priority_class": cls}
        ids[name] = ada.post("/api/v1/teams/research/requests", json=body).json()["id"]

    def order() -> list[str]:
        queue = ada.get("/api/v1/teams/research/requests").json()
        assert [r["position"] for r in queue] == list(range(1, len(queue) + 1))
        return [r["name"] for r in queue]

    assert order() == ["a", "c", "d", "b", "e"]  # normal before low, each in submission order
    assert ada.patch(f"/api/v1/requests/{ids['d']}", json={"move": -1}).status_code == 200
    assert order() == ["a", "d", "c", "b", "e"]
    ada.patch(f"/api/v1/requests/{ids['d']}", json={"move": -5})  # past the front: first of its class
    assert order() == ["d", "a", "c", "b", "e"]
    ada.patch(f"/api/v1/requests/{ids['b']}", json={"move": -3})  # never ahead of a higher class
    assert order() == ["d", "a", "c", "b", "e"]
    ada.patch(f"/api/v1/requests/{ids['a']}", json={"priority_class": "low"})  # joins the end of low
    assert order() == ["d", "c", "b", "e", "a"]
    ada.post(f"/api/v1/requests/{ids['c']}/cancel")
    queue = ada.get("/api/v1/teams/research/requests").json()
    assert [(r["name"], r["position"]) for r in queue] == [
        ("d", 1),
        ("b", 2),
        ("e", 3),
        ("a", 4),
        ("c", None),
    ]


def test_the_replan_takes_queued_requests_not_cancelled_ones(planned: dict[str, Any]) -> None:
    plan = yaml.safe_load((planned["plan_dir"] / "plan.json").read_text(encoding="utf-8"))  # JSON is YAML
    made = planned["made"]
    jobs = {j["name"]: j for j in plan["inputs"]["training"]}
    for name in ("first", "second", "huge"):
        assert made[name]["job_name"] in jobs
        assert jobs[made[name]["job_name"]]["team"] == made[name]["team"]
    assert made["dropped"]["job_name"] not in jobs
    first = jobs[made["first"]["job_name"]]
    assert first["nodes"] == 1 and first["preemptible"] is True and first["checkpoint"]["write_minutes"] == 2
    assert jobs[made["second"]["job_name"]]["fabric"] == "required"
    assert "baseline-finetune" in jobs  # the scenario's own work is still planned


def test_request_state_comes_from_the_plan(planned: dict[str, Any]) -> None:
    kit, made = planned["kit"], planned["made"]
    plan = yaml.safe_load((planned["plan_dir"] / "plan.json").read_text(encoding="utf-8"))
    placed = {p["job"]: p for p in plan["training"]}
    for name in ("first", "second"):
        state = kit.api("ada").get(f"/api/v1/requests/{made[name]['id']}").json()
        p = placed[made[name]["job_name"]]
        assert state["state"] == "planned"  # the clock is at the horizon's sixth hour, before any start
        assert datetime.fromisoformat(state["start"]) == datetime.fromisoformat(p["start"])
        assert datetime.fromisoformat(state["start"]) >= NOW  # no earliest start given: from the next hour
        assert (state["offering"], state["tier"], state["placement_group"]) == (
            p["offering"], p["tier"], p["placement_group"],
        )  # fmt: skip
        assert state["expected_cost_usd"] == pytest.approx(plan["costs"]["by_workload"][p["job"]])
        assert state["cost_is_estimate"] is False
    huge = kit.api("grace").get(f"/api/v1/requests/{made['huge']['id']}").json()
    reasons = [u["reason"] for u in plan["unserved"] if u["workload"] == made["huge"]["job_name"]]
    assert huge["state"] == "unserved" and reasons and huge["detail"] == f"unserved: {reasons[0]}"
    dropped = kit.api("ada").get(f"/api/v1/requests/{made['dropped']['id']}").json()
    assert dropped["state"] == "cancelled" and dropped["position"] is None
    # a request made after the plan is queued, with an on-demand estimate: nodes x hours x cheapest price
    later = kit.api("ada").post("/api/v1/teams/research/requests", json=job(name="later", nodes=2, hours=3))
    assert later.json()["state"] == "queued" and later.json()["cost_is_estimate"] is True
    catalog_prices = [
        o.on_demand_usd_h
        for o in kit.portal.inputs().catalog
        if o.cloud == "aws" and o.region == "us-east-1" and o.gpu_model == "H100" and o.gpus_per_node == 8
        and o.fabric and o.on_demand_usd_h
    ]  # fmt: skip
    assert later.json()["expected_cost_usd"] == pytest.approx(min(catalog_prices) * 2 * 3)


def test_team_chargeback_reconciles_with_allocations(planned: dict[str, Any]) -> None:
    """No commitments in the demo: a team's month is the sum of its allocations.csv rows in the month."""
    import pandas as pd

    kit = planned["kit"]
    frame = pd.read_csv(planned["plan_dir"] / "allocations.csv")
    for team in ("research", "vision"):
        lead = "ada" if team == "research" else "grace"
        answer = kit.api(lead).get(f"/api/v1/teams/{team}/chargeback", params={"month": "2027-03"}).json()
        expected = frame.loc[frame["team"] == team, "cost_usd"].sum()  # the horizon is inside March
        assert answer["total_usd"] == pytest.approx(expected, abs=0.01)
        assert sum(r["cost_usd"] for r in answer["rows"]) == pytest.approx(expected, abs=0.01)
        usage = kit.api(lead).get(f"/api/v1/teams/{team}/usage").json()
        assert usage["gpu_hours"] == pytest.approx(frame.loc[frame["team"] == team, "gpus"].sum())
        assert len(usage["points"]) == 336


def test_every_change_is_audited_with_before_and_after(planned: dict[str, Any]) -> None:
    kit, made = planned["kit"], planned["made"]
    entries = kit.api("admin").get("/api/v1/admin/audit").json()
    cancel = [e for e in entries if e["action"] == "request.cancel"]
    assert len(cancel) == 1 and cancel[0]["actor"] == "ada" and cancel[0]["team"] == "research"
    assert cancel[0]["object_id"] == str(made["dropped"]["id"])
    assert cancel[0]["before"]["status"] == "queued" and cancel[0]["after"]["status"] == "cancelled"
    adds = {e["object_id"] for e in entries if e["action"] == "request.add"}
    assert {str(made[n]["id"]) for n in ("first", "second", "dropped", "huge")} <= adds
    assert any(e["action"] == "replan" and e["actor"] == "admin" for e in entries)
    users = [e for e in entries if e["action"] == "user.add"]
    assert users and all("hash" not in str(e["after"]) and "argon2" not in str(e["after"]) for e in users)


def test_the_scenario_file_is_untouched_by_requests(planned: dict[str, Any]) -> None:
    """Requests live in the database: the daemon's scenario file keeps its own training only."""
    scenario = load(planned["kit"].portal.config.scenario_path)
    assert [j.name for j in scenario.training] == ["baseline-finetune"]
