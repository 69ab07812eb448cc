"""The portal's team page shows what the team really used (issue 40, point 7), read from the real
Prometheus of prometheus_stand_in.py named by the daemon config's ``history:`` section: its allocated GPUs
(its services' pods and its gangs), its namespaces' DCGM utilization and its Kueue pending workloads over
the last days, gaps as gaps, beside its guarantee and burst limit; another team's series never shown, the
authorization unchanged; a server that cannot be read is one line on the page."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("fastapi")

from prometheus_stand_in import GANGS, PrometheusServer
from test_portal_requests import NOW, PortalKit, make_portal

from planner.operations.daemon.config import load_config
from planner.operations.portal.demo import prepare_demo
from planner.operations.portal.measured import Measured

pytestmark = pytest.mark.xdist_group("prometheus")
#: the stand-in's namespaces as the demo's teams: chat and research are research's, search is vision's
MAPPING = """services:
  - {service: chat, team: research, namespace: chat}
  - {service: research, team: research, namespace: research}
  - {service: search, team: vision, namespace: search}
"""


def portal_reading(directory: Path, url: str, **history: object) -> PortalKit:
    config = prepare_demo(directory, NOW)
    (directory / "mapping.yaml").write_text(MAPPING)
    data = yaml.safe_load(config.read_text())
    data["history"] = {"prometheus": url, "mapping": "mapping.yaml", "days": 7, **history}
    config.write_text(yaml.safe_dump(data))
    return make_portal(directory)


def expected(prom: PrometheusServer, measured: Measured, values: np.ndarray) -> list[float | None]:
    """The written values at the measured hours; None where the monitoring saw nothing (the stand-in's
    outage, and the hours after its last)."""
    fleet = prom.fleet
    shown: list[float | None] = []
    for t in measured.times:
        h = int((t - fleet.start).total_seconds() // 3600)
        shown.append(None if h >= len(values) or np.isnan(values[h]) else float(values[h]))
    return shown


def gangs(prom: PrometheusServer) -> np.ndarray:
    held = np.zeros(len(prom.fleet.pending))
    for _label, _name, first, last, nodes, per_node, gpus in GANGS:
        held[first : last + 1] += nodes * per_node * gpus
    return held


def test_a_team_sees_its_own_measured_use_and_no_other_teams(prom: PrometheusServer, tmp_path: Path) -> None:
    kit = portal_reading(tmp_path, prom.url)
    research = kit.portal.measured("research")
    assert isinstance(research, Measured), research
    assert len(research.times) == 7 * 24
    assert research.services == ["chat", "research"] and research.namespaces == ["chat", "research"]
    fleet = prom.fleet
    allocated = fleet.gpus["chat"] + fleet.gpus["research"] + gangs(prom)
    assert research.allocated == pytest.approx(expected(prom, research, allocated))
    assert None in research.allocated and research.allocated[-1] is None  # the outage; hours past the data
    assert list(research.utilization) == ["chat"]
    utilization = np.where(np.isnan(fleet.gpus["chat"]), np.nan, fleet.utilization)
    assert research.utilization["chat"] == pytest.approx(expected(prom, research, utilization))
    pending = np.where(np.isnan(fleet.gpus["chat"]), np.nan, fleet.pending)
    assert research.pending == {"research": pytest.approx(expected(prom, research, pending))}
    vision = kit.portal.measured("vision")
    assert isinstance(vision, Measured)
    assert vision.services == ["search"] and not vision.utilization and not vision.pending
    assert vision.allocated == pytest.approx(expected(prom, vision, fleet.gpus["search"]))

    page = kit.client("ada").get("/teams/research")
    assert page.status_code == 200
    assert 'id="chart-measured"' in page.text and "allocated GPUs (measured)" in page.text
    assert "DCGM utilization % (chat)" in page.text and "pending workloads (research)" in page.text
    assert "burst limit" in page.text and prom.url in page.text
    theirs = kit.client("grace").get("/teams/vision")
    assert theirs.status_code == 200 and 'id="chart-measured"' in theirs.text
    section = theirs.text[theirs.text.index('id="measured"') :]
    for other in ("chat", "DCGM utilization", "pending workloads (research)", "services research"):
        assert other not in section, other
    assert kit.client("grace").get("/teams/research").status_code == 404  # the authorization unchanged


def test_a_server_that_cannot_be_read_is_one_line_on_the_page(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kit = portal_reading(tmp_path, f"http://127.0.0.1:{port}", retries=0, timeout_seconds=2)
    page = kit.client("ada").get("/teams/research")
    assert page.status_code == 200
    assert 'id="measured-error"' in page.text and "measured use unavailable:" in page.text
    assert f"http://127.0.0.1:{port}" in page.text and 'id="chart-measured"' not in page.text
    plain = make_portal(tmp_path / "plain")  # no history: section: the page as before
    assert plain.portal.measured("research") is None
    assert 'id="measured"' not in plain.client("ada").get("/teams/research").text


def test_the_history_section_is_checked(tmp_path: Path) -> None:
    from models.errors import InputError

    config = prepare_demo(tmp_path, NOW)
    data = yaml.safe_load(config.read_text())
    data["history"] = {"prometheus": "ftp://x", "days": 7}
    config.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=r"history\.prometheus"):
        load_config(config)
    data["history"] = {"prometheus": "http://x:9090", "mapping": "missing.yaml"}
    config.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=r"history\.mapping"):
        load_config(config)
