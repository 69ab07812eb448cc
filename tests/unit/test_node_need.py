"""Whole nodes in the hourly plan's commitment tuning (``node_need.py``, ``PeriodModel(rounding=True)``):
each period's LP buys the whole nodes a group of services needs beyond its commitments, never more than
the period's whole-node optimum, and its subgradient in the commitments says when one more pays. Every
figure against a closed form."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from planner.planning.optimize.commitments import tune_commitments
from planner.planning.optimize.dispatch import Occupancy, PeriodModel
from planner.planning.optimize.node_need import node_needs
from planner.planning.problem.sets import build_sets
from tests.unit.test_rounding_cuts import HOURS, OD, _shared_node_case

COMMITTED = 6.0  # USD per node-hour on 3y


def _two_services(kit, directory: Path, seed: int):
    """test_rounding_cuts' two services on one 8-GPU offering (4 and 2 GPUs a replica, random hourly
    demand), on demand and on 3y: an hour's replicas take exactly ``ceil((4 a + 2 b) / 8)`` whole nodes."""
    scenario, catalog, big, small = _shared_node_case(kit, directory, seed, committed=COMMITTED)
    return build_sets(scenario, catalog, directory), (4 * big + 2 * small) / 8


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_period_buys_whole_on_demand_nodes_beyond_the_commitments(
    kit, tmp_path: Path, seed: int
) -> None:
    """Per period, with R committed and a gang of n nodes on the same offering beside the services: the
    LP with rounding rows is ``$10 * max(0, ceil(need) + n - R)`` (the whole-node optimum), the plain LP
    ``$10 * max(0, need + n - R)``, and the subgradient in R is -$10 while nodes are bought on demand."""
    sets, need = _two_services(kit, tmp_path, seed)
    assert [g.services for g in node_needs(sets)] == [(0, 1)]
    assert node_needs(sets)[0].nodes(sets.demand).tolist() == np.ceil(need - 1e-9).tolist()
    rng = np.random.default_rng(seed)
    occupancy = Occupancy.empty(len(sets.offerings), len(sets.scenario.teams), HOURS)
    gang = rng.integers(0, 3, HOURS).astype(float)  # whole nodes held by non-spot training each hour
    occupancy.non_spot[0] = gang
    (column,) = sets.new_columns
    whole_cases = 0
    for committed_nodes in range(4):
        committed = sets.committed({column: committed_nodes})
        rounded = PeriodModel(sets, committed, every_pool=True, rounding=True)
        plain = PeriodModel(sets, committed, every_pool=True)
        for t in range(HOURS):
            whole = max(0.0, math.ceil(need[t] - 1e-9) + gang[t] - committed_nodes)
            assert rounded.lp_at(t, occupancy) == pytest.approx(OD * whole, abs=1e-7), (committed_nodes, t)
            slope = rounded.commitment_gradient()[0]
            if whole >= 1:  # one more committed node saves a whole on-demand node-hour
                assert slope == pytest.approx(-OD), (committed_nodes, t)
            elif math.ceil(need[t] - 1e-9) + gang[t] < committed_nodes:  # idle commitments: no saving
                assert slope == pytest.approx(0.0, abs=1e-9), (committed_nodes, t)
            fractional = max(0.0, need[t] + gang[t] - committed_nodes)
            assert plain.lp_at(t, occupancy) == pytest.approx(OD * fractional, abs=1e-7)
            whole_cases += whole > fractional + 1e-9
    assert whole_cases > 10  # the rows changed something in these draws


def test_tuning_commits_for_the_whole_nodes_of_the_peaks(kit, tmp_path: Path) -> None:
    """Tuned from no commitments, the cost is the closed-form best over R of ``$6 * 48 * R`` plus every
    hour's whole on-demand nodes beyond R: the tuning sees whole nodes, not the hours' fractions."""
    sets, need = _two_services(kit, tmp_path, 3)
    occupancy = Occupancy.empty(len(sets.offerings), len(sets.scenario.teams), HOURS)
    whole = np.ceil(need - 1e-9)

    def cost(r: int) -> float:
        return COMMITTED * HOURS * r + OD * float(np.maximum(whole - r, 0).sum())

    best = min(range(12), key=cost)
    tuned = tune_commitments(sets, {}, occupancy, None)
    assert tuned.cost_before == pytest.approx(cost(0))
    assert tuned.cost_after == pytest.approx(cost(best))
    assert sum(tuned.commitments.values()) == best
