"""Schemathesis over the portal's OpenAPI document, against the ASGI app with a team lead's API token:
every operation, a bounded number of generated requests each (valid and invalid bodies, odd path and query
values); none may be a server error, and every answer with a documented schema must match it."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error, response_schema_conformance  # noqa: E402
from test_portal_requests import PortalKit, job, make_portal  # noqa: E402


@pytest.fixture(scope="module")
def fuzz_kit(tmp_path_factory: pytest.TempPathFactory) -> PortalKit:
    kit = make_portal(tmp_path_factory.mktemp("portal-fuzz"))
    answer = kit.api("ada").post("/api/v1/teams/research/requests", json=job(name="seed"))
    assert answer.status_code == 201  # an object for the generated ids to find now and then
    return kit


def test_api_has_no_server_errors(fuzz_kit: PortalKit) -> None:
    """Each operation's strategy driven by hypothesis here (schemathesis' pytest fixture loader does not
    work with this pytest), with the lead's token on every call."""
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", fuzz_kit.app)
    headers = {"Authorization": f"Bearer {fuzz_kit.token('ada')}"}  # a lead: admin routes answer 403 fast
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    seen: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=10,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            case.call_and_validate(headers=headers, checks=[not_a_server_error, response_schema_conformance])
            seen.append(case.operation.label)

        check()
    assert {o.label for o in operations} == set(seen)  # every operation was called
