"""The futures file's ``own_plans`` setting (issue 41): how the futures' own plans are made, decided once,
and the settings it gives them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from models.errors import InputError
from models.futures import FULL_OWN_PLANS, load_futures
from models.plan import FuturesOutcome
from planner.planning.futures import QUICK_TIME_LIMIT, own_plan_settings
from planner.planning.optimize import SolveSettings


def _file(tmp: Path, count: int, **extra: object) -> Path:
    data = {"futures": [{"name": f"f{i}", "vary": [f"demand=x{1 + i / 100}"]} for i in range(count)], **extra}
    path = tmp / "futures.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_auto_plans_in_full_up_to_the_threshold_and_quick_beyond(tmp_path: Path) -> None:
    spec = load_futures(_file(tmp_path, 3))
    assert spec.own_plans == "auto"
    assert spec.own_plans_method(FULL_OWN_PLANS) == "full"
    assert spec.own_plans_method(FULL_OWN_PLANS + 1) == "quick"


@pytest.mark.parametrize("asked", ["full", "quick"])
def test_an_explicit_choice_holds_whatever_the_count(tmp_path: Path, asked: str) -> None:
    spec = load_futures(_file(tmp_path, 3, own_plans=asked))
    assert {spec.own_plans_method(n) for n in (1, FULL_OWN_PLANS + 20)} == {asked}


def test_an_unknown_method_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = _file(tmp_path, 2, own_plans="fast")
    with pytest.raises(InputError) as caught:
        load_futures(path)
    assert "own_plans" in str(caught.value) and "futures.yaml" in str(caught.value)


@pytest.mark.parametrize(
    ("limit", "quick_limit"), [(30.0, QUICK_TIME_LIMIT), (4.0, 4.0), (None, QUICK_TIME_LIMIT)]
)
def test_own_plans_are_lean_and_quick_caps_the_search(limit: float | None, quick_limit: float) -> None:
    """Lean always; quick also rounds whole replicas only and caps the search (a lower limit stands)."""
    given = SolveSettings(time_limit=limit, gap=0.01)
    full = own_plan_settings(given, "full")
    assert full == replace(given, lean=True)
    quick = own_plan_settings(given, "quick")
    assert quick == replace(given, lean=True, realize_seconds=0.0, time_limit=quick_limit)


@pytest.mark.parametrize("file", ["../futures.json", "/etc/passwd", "futures/../../x.json", ""])
def test_plan_json_names_its_futures_file_inside_the_plan_directory(file: str) -> None:
    """plan.json's and whatif.json's ``futures.file`` is read by the reports: never a path outside."""
    figures = {
        "futures": 3, "chosen": "x", "expected_usd": 1.0, "expected_horizon_usd": 1.0,
        "expected_tail_usd": 0.0, "p10_usd": 1.0, "p50_usd": 1.0, "p90_usd": 1.0, "worst_future": "a",
        "worst_usd": 1.0,
        "point_forecast_expected_usd": 1.0, "vss_usd": 0.0, "evpi_usd": 0.0, "bound_usd": 0.0,
    }  # fmt: skip
    assert FuturesOutcome(file="futures/futures.json", **figures).file == "futures/futures.json"
    with pytest.raises(ValidationError):
        FuturesOutcome(file=file, **figures)
