"""Hand-made openb clusters for the openb tests (test_openb, test_openb_fgd, test_openb_policies): node and
pod lists from row dicts, and a pod put on a chosen GPU whatever the policy would do."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from planner.simulate.openb import ClusterState, Nodes, Placement, Pods, nodes_from_frame, pods_from_frame


def nodes_of(*rows: dict[str, Any]) -> Nodes:
    return nodes_from_frame(pd.DataFrame(rows))


def pods_of(*rows: dict[str, Any]) -> Pods:
    return pods_from_frame(pd.DataFrame(rows))


def preload(state: ClusterState, pod_index: int, node_index: int, gpu: int) -> None:
    """Put a pod of at most one GPU (a share or a whole one) on GPU ``gpu`` of node ``node_index``: a
    hand-made start state."""
    take = np.zeros(state.gpu_left.shape[1], dtype=np.int64)
    take[gpu] = state.pods.num_gpu[pod_index] * state.pods.gpu_milli[pod_index]
    state.place(pod_index, Placement(node_index, take))
