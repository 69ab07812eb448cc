"""Counts agree with their nouns: no "1 training jobs", "1 services", "1 nodes" (issue 42, point 4)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from models.wording import plural
from planner.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "scenarios" / "mixed-fleet.yaml"


def test_plural() -> None:
    assert plural(1, "node") == "1 node"
    assert plural(0, "node") == "0 nodes"
    assert plural(16, "training job") == "16 training jobs"
    assert plural(1.0, "run") == "1 run"
    assert plural(2.5, "hour") == "2.5 hours"
    assert plural(2, "leaf switch", "leaf switches") == "2 leaf switches"
    assert plural(1234567, "job", thousands=True) == "1,234,567 jobs"


def test_validate_says_one_of_each_in_the_singular(tmp_path: Path) -> None:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    team = data["teams"][0]
    data["teams"] = [team]
    data["inference"] = [dict(data["inference"][0], team=team["name"])]
    pretrain = next(job for job in data["training"] if job["name"] == "pretrain-34b")
    data["training"] = [dict(pretrain, team=team["name"])]
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(path)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "(1 service, 1 training job / 1 run, 1 team," in result.output, result.output
