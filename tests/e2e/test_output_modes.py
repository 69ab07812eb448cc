"""Output directories are readable as the user's umask allows, like anything ``mkdir`` makes.

``gpuplan plan``, ``whatif``, ``breakeven`` and the simulator write through
``models.files.atomic_directory``: a staging sibling renamed into place. The staging directory
used to come from ``tempfile.mkdtemp`` (mode 0700), so a teammate or a web server could not open
report.html. Now the plan directory is 0755 under umask 022 (0750 under 027), as are its files (0644).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from models.files import atomic_directory
from planner.cli import app


def _umask(mask: int) -> Iterator[int]:
    previous = os.umask(mask)
    try:
        yield mask
    finally:
        os.umask(previous)


@pytest.fixture
def umask_022() -> Iterator[int]:
    yield from _umask(0o022)


@pytest.fixture
def umask_027() -> Iterator[int]:
    yield from _umask(0o027)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_plan_directory_under_umask_022_is_0755_and_its_report_0644(
    tmp_path: Path, kit, umask_022: int
) -> None:
    kit.write_catalog_csv(tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=10.0, spot_usd_h=4.0)])
    kit.write_demand_csv(tmp_path / "demand.csv", [2, 3, 4, 3] * 6)
    scenario = kit.scenario_dict(
        hours=24,
        name="modes",
        inference=[
            {
                "name": "chat",
                "team": "t",
                "gpus_per_replica": 8,
                "gpu_models": ["H100"],
                "latency_critical": True,
                "replicas": {"csv": "demand.csv"},
            }
        ],
    )
    path = kit.write_scenario_yaml(tmp_path / "scenario.yaml", scenario)
    out = tmp_path / "plans" / "modes"
    result = CliRunner().invoke(app, ["plan", str(path), "-o", str(out), "-q", "--no-verify"])
    assert result.exit_code == 0, result.output
    assert _mode(out) == 0o755
    assert _mode(out / "report.html") == 0o644
    for inside in out.rglob("*"):
        assert _mode(inside) == (0o755 if inside.is_dir() else 0o644), inside
    assert _mode(out.parent) == 0o755


def test_atomic_directory_follows_the_umask_also_when_it_replaces_a_directory(
    tmp_path: Path, umask_027: int
) -> None:
    target = tmp_path / "whatif"
    for _ in range(2):  # created, then replaced (the second run of a what-if into the same directory)
        with atomic_directory(target) as staging:
            assert staging.parent == tmp_path and staging.name.startswith(".whatif.tmp-")
            (staging / "variants" / "base").mkdir(parents=True)
            (staging / "variants" / "base" / "plan.json").write_text("{}")
            (staging / "whatif.json").write_text("{}")
        assert _mode(target) == 0o750
        assert _mode(target / "variants" / "base") == 0o750
        assert _mode(target / "whatif.json") == 0o640
        assert _mode(target / "variants" / "base" / "plan.json") == 0o640
        assert [p.name for p in tmp_path.iterdir()] == ["whatif"], "staging or backup left behind"


def test_a_failed_write_leaves_no_directory(tmp_path: Path, umask_022: int) -> None:
    target = tmp_path / "breakeven"
    with pytest.raises(RuntimeError), atomic_directory(target) as staging:
        (staging / "breakeven.json").write_text("{}")
        raise RuntimeError("solver crashed")
    assert list(tmp_path.iterdir()) == []
