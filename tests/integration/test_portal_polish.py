"""The portal's polish (issue 42): a favicon served and linked on every page, a GPU chart from zero."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from test_portal_requests import PortalKit, make_portal

from planner.operations.portal.charts import usage_chart


@pytest.fixture
def kit(tmp_path: Path) -> PortalKit:
    return make_portal(tmp_path)


def test_the_favicon_is_served_and_every_page_links_it(kit: PortalKit) -> None:
    anonymous = kit.client()
    icon = anonymous.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.text.startswith("<svg")
    admin = kit.client("admin")
    for client, path in (
        (anonymous, "/login"),
        (admin, "/teams/research"),
        (admin, "/account"),
        (admin, "/admin"),
    ):
        page = client.get(path)
        assert page.status_code == 200, path
        assert '<link rel="icon" href="/favicon.ico"' in page.text, path


def test_the_gpu_chart_starts_at_zero() -> None:
    points = [(datetime(2027, 1, 1, h, tzinfo=UTC), 40.0 + h) for h in range(6)]
    html = str(usage_chart("research", points, guaranteed=40, burst=48))
    assert '"rangemode":"tozero"' in html.replace(" ", "")
