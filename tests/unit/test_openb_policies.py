"""The FGD paper's other baselines on the openb replay (planner/simulate/openb_scorers.py): each
policy's scores and choice on hand-made clusters against scores computed by hand from the artifact's
formulas, and a replay of a slice of the real trace under each (skipped when ../shared is absent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openb_kit import nodes_of, pods_of, preload

from planner.simulate.openb import (
    MILLI,
    ClusterState,
    load_nodes,
    load_pods,
    replay,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "alibaba-openb-gpu-v2023"
NEW = ("dot-product", "clustering", "packing")


def node(cpu: int = 64_000, gpu: int = 2) -> dict[str, Any]:
    return {"cpu_milli": cpu, "memory_mib": 262_144, "gpu": gpu, "model": "T4"}


def pod(gpus: int = 1, milli: int = MILLI, cpu: int = 4_000) -> dict[str, Any]:
    return {"cpu_milli": cpu, "memory_mib": 1_024, "num_gpu": gpus, "gpu_milli": milli, "gpu_spec": ""}


def state_of(policy: str, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> ClusterState:
    return ClusterState(nodes_of(*nodes), pods_of(*pods), policy)


def test_dot_product_picks_the_node_least_aligned_with_the_request() -> None:
    # node 0: 64 cores, 4 idle GPUs; node 1: 8 cores, 1 idle GPU. Pod: 4 cores, 1 GPU.
    state = state_of("dot-product", [node(64_000, 4), node(8_000, 1)], [pod(cpu=4_000)])
    # by hand, normalised by 128 cores and 8 GPUs: dot = cpu_left/128 * 4/128 + gpu_left/8 * 1/8
    dot0 = 0.5 * (4 / 128) + (4 / 8) * (1 / 8)  # 0.078125
    dot1 = (8 / 128) * (4 / 128) + (1 / 8) * (1 / 8)  # 0.017578125
    expected = [int(100 * (1 - dot0 / 2)), int(100 * (1 - dot1 / 2))]
    assert expected == [96, 99]
    assert state._scorer is not None
    assert state._scorer.score(state, 0).tolist() == expected
    assert state.choose(0).node == 1  # the higher score wins: the tighter node


def test_clustering_keeps_a_request_type_together() -> None:
    pods = [pod(1, 500), pod(1, MILLI), pod(1, 300), pod(1, MILLI)]
    state = state_of("clustering", [node(), node(), node()], pods)
    preload(state, 0, 0, 0)  # node 0 holds a share pod (1,500 milli left)
    preload(state, 1, 1, 0)  # node 1 holds a 1-GPU pod (1,000 milli left); node 2 is idle (2,000 left)
    fill = [25 * (8000 - left) // 8000 for left in (1500, 1000, 2000)]  # 20, 21, 18
    assert state._scorer is not None
    # a share pod: node 0 holds only its type (75 + f), node 1 only another (f), node 2 none (25 + f)
    assert state._scorer.score(state, 2).tolist() == [75 + fill[0], fill[1], 25 + fill[2]]
    assert state.choose(2).node == 0
    # a 1-GPU pod: node 1 holds only its type now
    assert state._scorer.score(state, 3).tolist() == [fill[0], 75 + fill[1], 25 + fill[2]]
    assert state.choose(3).node == 1
    preload(state, 3, 0, 1)  # node 0 now holds both types: 50 + f for either
    assert state._scorer.score(state, 2)[0] == 50 + 25 * (8000 - 500) // 8000


def test_packing_prefers_shared_gpus_then_used_nodes_then_idle_ones() -> None:
    pods = [pod(1, 700), pod(1, MILLI), pod(1, 200), pod(1, MILLI)]
    state = state_of("packing", [node(), node(), node()], pods)
    preload(state, 0, 1, 0)  # node 1: GPU 0 has 300 milli left
    preload(state, 1, 2, 0)  # node 2: GPU 0 taken whole, GPU 1 idle; node 0 idle
    assert state._scorer is not None
    # share of 200: node 0 idle -> max(33 - 2, 2); node 1 shares GPU 0 -> 100 - (300 * 100 // 1000) // 10;
    # node 2 has to use an idle GPU -> max(50 - 1, 33)
    assert state._scorer.score(state, 2).tolist() == [31, 97, 49]
    choice = state.choose(2)
    assert choice.node == 1 and choice.take.tolist() == [200, 0]  # onto the shared GPU
    # a whole GPU: nodes 1 and 2 both use one idle GPU of a used node (49), node 0 is idle (31)
    assert state._scorer.score(state, 3).tolist() == [31, 49, 49]
    assert {state.copy().choose(3).node for _ in range(40)} == {1, 2}  # equal scores: drawn at random


def test_the_share_goes_to_the_tightest_gpu_under_every_new_policy() -> None:
    for policy in NEW:
        state = state_of(policy, [node(gpu=3)], [pod(1, 400), pod(1, 100), pod(1, 300)])
        preload(state, 0, 0, 0)  # GPU 0: 600 left
        preload(state, 1, 0, 2)  # GPU 2: 900 left; GPU 1 idle
        assert state.choose(2).take.tolist() == [300, 0, 0], policy  # least left that fits: GPU 0


@pytest.mark.skipif(not (DATA / "openb_pod_list_default.csv").exists(), reason=f"openb data not in {DATA}")
@pytest.mark.parametrize("policy", NEW)
def test_replay_of_a_trace_slice(policy: str) -> None:
    nodes = load_nodes(DATA / "openb_node_list_gpu_node.csv")
    pods = load_pods(DATA / "openb_pod_list_default.csv")
    arrivals = np.arange(400)
    result = replay(nodes, pods, policy, levels=(1, 2), arrivals=arrivals)
    placed = result.nodes_of >= 0
    assert placed.all()  # 400 pods ask for well under 10 % of 6,212 GPUs: nothing may fail
    # resources: every node's placed requests fit its capacity, and the GPUs taken are what was asked
    asked = pods.num_gpu[arrivals] * pods.gpu_milli[arrivals]
    assert (result.takes.sum(axis=1) == asked).all()
    cpu = np.bincount(result.nodes_of, weights=pods.cpu_milli[arrivals], minlength=len(nodes))
    assert (cpu <= nodes.cpu_milli).all()
    for n in np.unique(result.nodes_of):
        per_gpu = result.takes[result.nodes_of == n].sum(axis=0)
        assert (per_gpu[: nodes.gpus[n]] <= MILLI).all() and not per_gpu[nodes.gpus[n] :].any()
    assert result.allocated_gpus[-1] == pytest.approx(asked.sum() / MILLI)
