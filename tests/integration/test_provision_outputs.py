"""Where `gpuplan provision` writes, and what its summary adds up (issue 42, point 3 and a contradiction).

- ``actions.json`` goes where ``--actions`` says, by default to ``PLAN_DIR.provision/`` beside the plan:
  a dry run leaves the plan directory it reads exactly as it was (same files, same mtimes).
- The simulated cloud's default state file is one per plan (``sim-cloud/<plan id>.json``): what one
  plan's apply made is not in another plan's simulated account.
- The summary's ``fleet +$X/h`` is the sum of the deltas the action lines list, reservations included
  (it summed launches and terminations only, so a reservation's ``+$880.64/h`` summed to ``+$0.00/h``).

The plan is the mixed-fleet week on AWS, planned once per session (``week_plan`` in tests/conftest.py).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from models.actions import ActionPlan
from planner.cli import app

# the pretraining gang starts 2027-02-05 00:00Z: an hour before it, its reservation is made ahead
BEFORE_GANG = "2027-02-04T23:00:00Z"


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    return result.exit_code, result.output


def _snapshot(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_mtime_ns for p in sorted(directory.rglob("*"))}


@pytest.fixture
def plan_dir(week_plan: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the simulated cloud's default files
    return Path(shutil.copytree(week_plan("aws"), tmp_path / "plan"))


def test_a_dry_run_leaves_the_plan_directory_as_it_was(plan_dir: Path) -> None:
    before = _snapshot(plan_dir)
    code, output = _run(["provision", str(plan_dir), "--at", BEFORE_GANG])
    assert code == 0, output
    assert _snapshot(plan_dir) == before
    written = plan_dir.with_name("plan.provision") / "actions.json"
    assert ActionPlan.model_validate_json(written.read_text(encoding="utf-8")).actions
    assert str(written) in output.replace("\n", "")


def test_actions_go_where_the_flag_says(plan_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "mine.json"
    code, output = _run(["provision", str(plan_dir), "--at", BEFORE_GANG, "--actions", str(target)])
    assert code == 0, output
    assert target.is_file() and not plan_dir.with_name("plan.provision").exists()


def _nodes_in(state: Path) -> int:
    return len(json.loads(state.read_text(encoding="utf-8")).get("nodes", {}))


def test_two_plans_do_not_share_a_simulated_cloud(plan_dir: Path, tmp_path: Path) -> None:
    other = Path(shutil.copytree(plan_dir, tmp_path / "other"))
    document = json.loads((other / "plan.json").read_text(encoding="utf-8"))
    document["scenario"] = "another-team-trial"  # the plan id every resource is tagged with
    (other / "plan.json").write_text(json.dumps(document), encoding="utf-8")

    code, output = _run(["provision", str(plan_dir), "--at", BEFORE_GANG, "--apply", "-q"])
    assert code == 0, output
    code, output = _run(["provision", str(other), "--at", BEFORE_GANG, "-q"])
    assert code == 0, output

    states = tmp_path / "state" / "gpuplan" / "sim-cloud"
    mine, theirs = states / "mixed-fleet-week-aws.json", states / "another-team-trial.json"
    assert f"state {theirs}" in output.replace("\n", "")
    assert _nodes_in(mine) > 0  # the first plan's apply made its nodes in its own account
    assert _nodes_in(theirs) == 0  # and the second plan's account has none of them


_DELTA = re.compile(r"^\s+\+ #\d+ .* ([+-])\$([\d,]+\.\d\d)/h", re.MULTILINE)
_FLEET = re.compile(r"\(fleet ([+-])\$([\d,]+\.\d\d)/h\)")


def _usd(sign: str, amount: str) -> float:
    return (-1 if sign == "-" else 1) * float(amount.replace(",", ""))


def test_the_summary_is_the_sum_of_the_listed_deltas(plan_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "actions.json"
    code, output = _run(["provision", str(plan_dir), "--at", BEFORE_GANG, "--actions", str(target)])
    assert code == 0, output
    text = output.replace("\n      ", " ")  # rich may wrap a long action line
    listed = [_usd(*m) for m in _DELTA.findall(text)]
    document = ActionPlan.model_validate_json(target.read_text(encoding="utf-8"))
    assert any(a.kind == "create-reservation" and a.usd_per_hour for a in document.actions)
    assert len(listed) == sum(1 for a in document.actions if a.usd_per_hour)
    summary = _FLEET.search(output)
    assert summary is not None, output
    assert _usd(*summary.groups()) == pytest.approx(sum(listed), abs=0.011)
    assert _usd(*summary.groups()) == pytest.approx(
        sum(a.usd_per_hour or 0 for a in document.actions), abs=0.006
    )


def test_the_default_beside_a_plan_given_as_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.cli.provision import default_actions_path

    (tmp_path / "myplan").mkdir()
    monkeypatch.chdir(tmp_path / "myplan")
    assert default_actions_path(Path(".")) == tmp_path / "myplan.provision" / "actions.json"
    assert default_actions_path(Path("plan/")) == Path("plan.provision") / "actions.json"
