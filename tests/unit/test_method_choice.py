"""``--method auto`` (``run.hourly_by_size``): the hourly method for big scenarios, by model size or by
training placement options, measured on the shipped scenarios (docs/method.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.inputs import load_inputs
from planner.planning.optimize.run import HOURLY_ABOVE, HOURLY_OPTIONS_ABOVE, hourly_by_size
from planner.planning.problem.sets import build_sets

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.mark.parametrize(
    ("name", "hourly"),
    [
        ("mixed-fleet", True),  # 253 placement options, 1,908 slots x services
        ("h100-shortage", True),  # 449 options
        ("training-heavy-lab", True),  # 314 options, 327 slots x services
        ("growth-year", True),  # 13,356 slots x services, 211 options
        ("colocation-decision", False),  # 142 options, 1,736 slots x services
        ("capacity-blocks", False),
    ],
)
def test_auto_takes_the_hourly_method_by_size_or_by_placement_options(name: str, hourly: bool) -> None:
    inputs = load_inputs(SCENARIOS / f"{name}.yaml")
    sets = build_sets(inputs.scenario, inputs.catalog, inputs.base_dir)
    size = len(sets.slots) * max(1, len(sets.services))
    assert hourly_by_size(sets) is hourly
    if name in ("mixed-fleet", "training-heavy-lab"):  # small models: the options alone decide
        assert size <= HOURLY_ABOVE and len(sets.options) > HOURLY_OPTIONS_ABOVE
