"""The exact-start bound never averages a gang's certain hours with hours it may leave idle
(``sets.split_by_certain_training``, issue 39 point 6): a slot's equal-demand periods split where a run
holds some of them at any start and may not hold the others. Checked against a closed form and the full
problem solved exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import planner.planning.optimize.bound_exact as bound_exact
from planner.planning.optimize.bound_exact import exact_bound
from planner.planning.problem.sets import ModelOptions, build_sets, split_by_certain_training
from tests.unit.test_bound_exact import START, _full_optimum, _load, _stamp

OD, COMMITTED = 10.0, 7.0  # USD per node-hour: on demand, 3y


def _gang_most_of_the_day(kit: Any, directory: Path, hours: int = 24) -> tuple[Any, Any]:
    """One node of flat inference all day and a 3-node gang for 20 of the day's 24 hours, on one 8-GPU
    offering ($10 on demand, $7 on a 3y term). Any start (hour 0 to 4) holds the gang over hours 4-20; of
    the eight hours outside those it holds four.

    The optimum commits 4 nodes ($7 x 4 x 24 = $672): with 3, 20 on-demand hours ($704). Averaging the
    day as one slot (its demand is flat) makes the gang 2.5 nodes all day: 3 committed plus half a node
    on demand, $624. With the 16 certain hours apart (4 nodes there) and the 8 others averaged (2.5):
    3 committed, 16 on-demand hours, $664."""
    training = [{"name": "gang", "team": "t", "nodes": 3, "gpus_per_node": 8, "gpu_models": ["H100"],
                 "hours": 20.0, "earliest_start": START, "deadline": _stamp(24)}]  # fmt: skip
    inference = [{"name": "svc", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
                  "latency_critical": True, "replicas": {"profile": "flat", "base": 1}}]  # fmt: skip
    rows = [kit.offering_row(on_demand_usd_h=OD, reserved_3y_usd_h=COMMITTED)]
    data = kit.scenario_dict(hours=hours, terms=["3y"], inference=inference, training=training)
    return _load(kit, directory, data, rows)


def test_slots_split_where_a_run_is_certain(kit, tmp_path: Path) -> None:
    """The split slots partition the periods, keep each period's demand, and never mix the hours every
    start holds (4-19) with the others; the planning model's slots (one for the flat day) stay as they
    were, and the split is the same on every call."""
    scenario, catalog = _gang_most_of_the_day(kit, tmp_path)
    sets = build_sets(scenario, catalog, tmp_path)
    assert len(sets.slots) == 1
    split = split_by_certain_training(sets)
    assert sorted(np.concatenate([slot.periods for slot in split.slots]).tolist()) == list(range(24))
    assert {tuple(sorted(slot.periods.tolist())) for slot in split.slots} == {
        tuple(range(4, 20)),
        (0, 1, 2, 3, 20, 21, 22, 23),
    }
    for s, slot in enumerate(split.slots):
        assert (split.slot_of_period[slot.periods] == s).all()
        assert slot.demand == sets.slots[0].demand and slot.hours == len(slot.periods)
    assert len({slot.certain for slot in split.slots}) == 2
    assert split_by_certain_training(sets).slot_of_period.tolist() == split.slot_of_period.tolist()
    # every period its own slot already: nothing splits, and the sets come back as they were
    unmerged = build_sets(scenario, catalog, tmp_path, ModelOptions(merge=False))
    assert split_by_certain_training(unmerged) is unmerged


def test_the_exact_start_bound_keeps_the_certain_hours_apart(kit, tmp_path: Path, monkeypatch) -> None:
    """The exact-start bound is the closed form with the certain hours apart ($664), below the full
    problem's exact optimum ($672, also the closed form); without the split it averaged the day ($624)."""
    scenario, catalog = _gang_most_of_the_day(kit, tmp_path)
    optimum = _full_optimum(scenario, catalog, tmp_path)
    assert optimum == pytest.approx(COMMITTED * 4 * 24)
    sets = build_sets(scenario, catalog, tmp_path)
    tight = exact_bound(sets, None, gap=1e-9, time_limit=60).bound_usd
    assert tight == pytest.approx(COMMITTED * 3 * 24 + OD * 16, rel=1e-7)
    assert tight <= optimum
    monkeypatch.setattr(bound_exact, "split_by_certain_training", lambda sets: sets)
    averaged = exact_bound(sets, None, gap=1e-9, time_limit=60).bound_usd
    assert averaged == pytest.approx(COMMITTED * 3 * 24 + OD * 0.5 * 24, rel=1e-7)
