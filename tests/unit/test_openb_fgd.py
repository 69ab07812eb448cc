"""workload-aware (FGD) on the openb replay: the artifact's integer node score and our tie-breaks, on
hand-made clusters with every fragmentation and score worked out by hand in the comments.

The artifact (hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/plugin/fgd_score.go) scores a
node int(100 * sigmoid((frag before - frag after) / 1000)); we keep that integer, then break equal
scores by the tightest GPU inside the node and the best-fit node across nodes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from planner.simulate.openb import (
    MILLI,
    ClusterState,
    Nodes,
    Placement,
    Pods,
    nodes_from_frame,
    pods_from_frame,
)


def node(cpu: int = 64_000, gpu: int = 1) -> dict[str, Any]:
    return {"cpu_milli": cpu, "memory_mib": 262_144, "gpu": gpu, "model": "T4"}


def pod(gpus: int = 1, milli: int = MILLI, cpu: int = 1_000) -> dict[str, Any]:
    return {"cpu_milli": cpu, "memory_mib": 1_024, "num_gpu": gpus, "gpu_milli": milli, "gpu_spec": ""}


def nodes_of(*rows: dict[str, Any]) -> Nodes:
    return nodes_from_frame(pd.DataFrame(rows))


def pods_of(*rows: dict[str, Any]) -> Pods:
    return pods_from_frame(pd.DataFrame(rows))


def preload(state: ClusterState, pod_index: int, node_index: int, gpu: int) -> None:
    """Put a share pod on a given GPU, whatever the policy would do (a hand-made start state)."""
    take = np.zeros(state.gpu_left.shape[1], dtype=np.int64)
    take[gpu] = state.pods.gpu_milli[pod_index]
    state.place(pod_index, Placement(node_index, take))


def sigmoid_score(increase_gpus: float) -> int:
    """int(100 / (1 + e^increase)): the artifact's score of a placement that raises frag by that much."""
    return int(100.0 / (1.0 + math.exp(increase_gpus)))


def test_fgd_score_of_a_share_pod_on_two_nodes_by_hand() -> None:
    """Workload: half 1-GPU pods, half 0.5-GPU pods. Node 0 has GPUs [0.5, 1.0] free, node 1 [1, 1].

    Fragmentation (milli) = sum over types of p * idle milli that type cannot use:
    node 0: the 1-GPU type fits (one idle GPU) and cannot use the 0.5 left: 0.5 * 500 = 250; the
    0.5 type can use both GPUs: 0. Node 1: 0. A 0.5-GPU pod then gives:
    node 0 GPU 0 -> [0, 1.0]: 0, change -0.25 GPU, score int(100 * sigmoid(0.25)) = 56;
    node 0 GPU 1 -> [0.5, 0.5]: no idle GPU for the 1-GPU type, 0.5 * 1000 = 500, change +0.25: 43;
    node 1 any GPU -> [0.5, 1.0]: 250, change +0.25: 43.
    """
    nodes = nodes_of(node(gpu=2), node(gpu=2))
    pods = pods_of(pod(milli=500), pod(milli=500))
    state = ClusterState(nodes, pods, "workload-aware", workload=pods_of(pod(), pod(milli=500)))
    preload(state, 0, 0, gpu=0)
    assert state.gpu_left[:, :2].tolist() == [[500, 1000], [1000, 1000]]
    assert state.fragmentation().tolist() == [0.25, 0.0]
    assert sigmoid_score(-0.25) == 56 and sigmoid_score(0.25) == 43
    assert state.fgd_score(1).tolist() == [56, 43]
    assert state.fragmentation_increase(1).tolist() == [-0.25, 0.25]
    choice = state.choose(1)
    assert choice is not None and choice.node == 0 and choice.take.tolist() == [500, 0]


def test_equal_gpu_scores_go_to_the_tightest_gpu_not_the_first() -> None:
    """Workload of 1-GPU pods only; GPUs with 0.9 and 0.7 free. No idle GPU, so all 1.6 GPU is
    fragment; a 0.2 pod on either leaves 1.4: change -0.2 on both, score int(100 * sigmoid(0.2)) = 54
    on both. The artifact takes the first such GPU (GPU 0); we take the tighter GPU 1 (0.7 free),
    which keeps the 0.9 GPU whole for a larger share pod."""
    nodes = nodes_of(node(gpu=2))
    pods = pods_of(pod(milli=100), pod(milli=300), pod(milli=200))
    state = ClusterState(nodes, pods, "workload-aware", workload=pods_of(pod(), pod()))
    preload(state, 0, 0, gpu=0)
    preload(state, 1, 0, gpu=1)
    assert state.gpu_left[0].tolist() == [900, 700]
    assert state.fragmentation_increase(2).tolist() == [-0.2]
    assert state.fgd_score(2).tolist() == [sigmoid_score(-0.2)] == [54]
    choice = state.choose(2)
    assert choice is not None and choice.take.tolist() == [0, 200]


def test_equal_node_scores_go_to_the_best_fit_node() -> None:
    """Two one-GPU nodes, idle; a 1-GPU pod on either leaves no fragment (change 0, score 50 on both).
    Best-fit's measure (0.5 * CPU left + 0.5 * GPU left, each over the largest node's) is lower on the
    8-core node, so it wins every time; the kube-scheduler would draw between the two."""
    nodes = nodes_of(node(cpu=64_000), node(cpu=8_000))
    pods = pods_of(pod())
    state = ClusterState(nodes, pods, "workload-aware", seed=3)
    assert state.fgd_score(0).tolist() == [50, 50]
    picks = {state.copy().choose(0).node for _ in range(20)}  # type: ignore[union-attr]
    assert picks == {1}


def test_a_node_where_the_pod_does_not_fit_scores_minus_one() -> None:
    nodes = nodes_of(node(gpu=1), node(gpu=1, cpu=500))  # node 1 lacks the pod's 1,000 milli-CPU
    state = ClusterState(nodes, pods_of(pod(milli=400)), "workload-aware")
    assert state.fgd_score(0)[1] == -1
    assert state.fgd_score(0)[0] >= 0
    assert np.isinf(state.fragmentation_increase(0)[1]) and MILLI == 1000
