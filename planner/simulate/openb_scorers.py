"""The FGD paper's other baselines as node scorers of the openb replay: ``dot-product``, ``clustering``
and ``packing`` (:data:`OPENB_SCORERS`; higher is better, as Kubernetes score plugins).

The openb replay (``planner.simulate.openb``) places pods one by one on an empty cluster; besides its own
random / first-fit / best-fit / FGD it scores nodes with one of these. A scorer reads the replay's state
through :class:`ScorerState` (the pods asked, the nodes, what is left on each), so this module does not
import the replay and the replay imports it.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar, Protocol

import numpy as np

__all__ = [
    "OPENB_SCORERS",
    "DotProductScorer",
    "GpuClusteringScorer",
    "GpuPackingScorer",
    "NodeScorer",
    "ScorerState",
]


class _PodColumns(Protocol):
    @property
    def cpu_milli(self) -> np.ndarray: ...
    @property
    def num_gpu(self) -> np.ndarray: ...
    @property
    def gpu_milli(self) -> np.ndarray: ...


class _NodeColumns(Protocol):
    @property
    def gpus(self) -> np.ndarray: ...


class ScorerState(Protocol):
    """What a scorer reads of the replay: the pod list, the nodes, and the CPU (milli) and GPU milli left
    per node (``gpu_left``: nodes x GPUs)."""

    @property
    def pods(self) -> _PodColumns: ...
    @property
    def nodes(self) -> _NodeColumns: ...
    @property
    def cpu_left(self) -> np.ndarray: ...
    @property
    def gpu_left(self) -> np.ndarray: ...


# Source of the three scorers below: hkust-adsl/kubernetes-scheduler-simulator, the FGD paper's artifact
# (Weng et al., "Beware of Fragmentation", USENIX ATC'23). The paper's runs configure them as
# experiments/run_scripts/generate_run_scripts.py (commit 1ef99e4f44581af2eefadef540c0021cc755f133):
# DotProd with GPU selection "best", dimension "merge", normalisation "max"; GpuClustering and GpuPacking
# with the defaults of scripts/generate_config_and_run.py (commit 940fc9a13c22b43eeba267da7b6c9ff87e03481d):
# GPU selection "best" (a share pod goes to the fitting GPU with the least left, lowest index on ties,
# allocateGpuIdBasedOnBestFit in pkg/simulator/plugin/open_gpu_share.go; whole GPUs: the lowest-index
# idle ones). One score plugin is enabled (weight 1000), so the node with the highest score wins and
# equal scores are drawn at random, as the Kubernetes scheduler's selectHost does.
MAX_NODE_SCORE = 100  # k8s framework.MaxNodeScore
MAX_SPEC_CPU = 128_000  # pkg/type/open-gpu-share/utils/const.go MaxSpecCpu (milli-CPU)
MAX_SPEC_GPU = 8_000  # ... MaxSpecGpu (milli-GPU: 8 GPUs)
GPU_MILLI = 1_000
SHARE_TAG = "share-gpu"  # utils.GetGpuAffinityFromPodAnnotation: "share-gpu" or "<n>-gpu"


class NodeScorer:
    """A Kubernetes score plugin of the FGD artifact on the openb replay's state.

    ``score`` gives every node's integer score (0-100, higher is better) for ``pod``; the replay takes a
    highest one among the feasible nodes (random among equals) and then the tightest fitting GPU.
    ``placed`` is told of every placement (a scorer that remembers what runs where updates itself).
    """

    name: ClassVar[str] = ""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes

    def score(self, state: ScorerState, pod: int) -> np.ndarray:
        raise NotImplementedError

    def placed(self, state: ScorerState, pod: int, node: int) -> None:
        """Nothing to remember by default."""

    def copy(self) -> NodeScorer:
        return self


class DotProductScorer(NodeScorer):
    """DotProd (Tetris, SIGCOMM'14): the dot product of the pod's request and the node's free vector.

    As pkg/simulator/plugin/dot_product_score.go ``calculateDotProductScore`` (commit
    29a1e4c4c51130ae55bda03ea0c794d613a60295) with ``merge`` dimensions and ``max`` normalisation
    (pkg/utils/utils.go ``GenerateSchedulingMatchGroups``, pkg/type/resource.go
    ``ToVirtualNodeResourceList``): node = (CPU left / 128,000, GPU milli left on the node / 8,000),
    pod = (CPU / 128,000, GPU milli asked / 8,000); score = int(100 * (1 - dot / 2)). The artifact scores
    *the larger the dot product, the lower* (its comment), so the node whose free vector aligns least
    with the request, the one with least left in the pod's dimensions, wins: packing, not spreading.
    """

    name = "dot-product"

    def score(self, state: ScorerState, pod: int) -> np.ndarray:
        pods = state.pods
        pod_cpu = float(pods.cpu_milli[pod]) / MAX_SPEC_CPU
        pod_gpu = float(pods.num_gpu[pod] * pods.gpu_milli[pod]) / MAX_SPEC_GPU
        node_cpu = state.cpu_left.astype(np.float64) / MAX_SPEC_CPU
        node_gpu = state.gpu_left.sum(axis=1).astype(np.float64) / MAX_SPEC_GPU
        dot = node_cpu * pod_cpu + node_gpu * pod_gpu  # Go: innerProduct += a[i] * b[i], in order
        return np.trunc(MAX_NODE_SCORE * (1.0 - dot / 2.0)).astype(np.int64)


class GpuClusteringScorer(NodeScorer):
    """GpuClustering: keep pods of one GPU-request type together.

    As pkg/simulator/plugin/gpu_clustering_score.go (commit b6567da80ff3f5a9ec2e8843947643cf11479a5a).
    A pod's type ("affinity") is ``share-gpu`` (one GPU, under 1000 milli) or ``<n>-gpu`` (n whole
    GPUs); a node's affinities are the types of the GPU pods on it. With f = 25 * (8000 - the node's
    GPU milli left) // 8000 (fuller nodes first within a band), the score is 75 + f on a node holding
    only the pod's type, 50 + f on one holding it among others, 25 + f on a node with no GPU pod, f on a
    node holding only other types; a pod without GPUs scores 0 everywhere (random).
    """

    name = "clustering"

    def __init__(self, nodes: int) -> None:
        super().__init__(nodes)
        self.tags: list[Counter[str]] = [Counter() for _ in range(nodes)]

    @staticmethod
    def tag(num_gpu: int, gpu_milli: int) -> str | None:
        if num_gpu == 0:
            return None
        return SHARE_TAG if num_gpu == 1 and gpu_milli < GPU_MILLI else f"{num_gpu}-gpu"

    def score(self, state: ScorerState, pod: int) -> np.ndarray:
        tag = self.tag(int(state.pods.num_gpu[pod]), int(state.pods.gpu_milli[pod]))
        if tag is None:
            return np.zeros(self.nodes, dtype=np.int64)
        fill = MAX_NODE_SCORE // 4 * (MAX_SPEC_GPU - state.gpu_left.sum(axis=1)) // MAX_SPEC_GPU
        band = np.empty(self.nodes, dtype=np.int64)
        for node, tags in enumerate(self.tags):
            if tags[tag] > 0:
                band[node] = 3 if len(tags) == 1 else 2
            else:
                band[node] = 1 if not tags else 0
        return fill.astype(np.int64) + band * (MAX_NODE_SCORE // 4)

    def placed(self, state: ScorerState, pod: int, node: int) -> None:
        tag = self.tag(int(state.pods.num_gpu[pod]), int(state.pods.gpu_milli[pod]))
        if tag is not None:
            self.tags[node][tag] += 1

    def copy(self) -> GpuClusteringScorer:
        twin = GpuClusteringScorer(self.nodes)
        twin.tags = [Counter(t) for t in self.tags]
        return twin


class GpuPackingScorer(NodeScorer):
    """GpuPacking: shared GPUs first, then idle GPUs on used nodes, then idle nodes.

    As pkg/simulator/plugin/gpu_packing_score.go ``getPackingScore`` (commit
    29a1e4c4c51130ae55bda03ea0c794d613a60295), integer arithmetic as in Go. On a node whose GPUs are
    all idle: max(33 - idle GPUs, idle GPUs). Else the pod's GPUs are the fitting ones with least left
    first; if any of them is idle: max(50 - idle GPUs used, 33); else (a share on a partly used GPU):
    max(100 - (left * 100 // 1000) // 10, 50), left = that GPU's milli before placing. A pod without GPUs
    scores 0 everywhere (random).
    """

    name = "packing"

    def score(self, state: ScorerState, pod: int) -> np.ndarray:
        k, d = int(state.pods.num_gpu[pod]), int(state.pods.gpu_milli[pod])
        if k == 0:
            return np.zeros(self.nodes, dtype=np.int64)
        left = state.gpu_left
        idle = (left == GPU_MILLI).sum(axis=1)
        all_idle = idle == state.nodes.gpus
        case3 = np.maximum(MAX_NODE_SCORE // 3 - idle, idle)
        if d == GPU_MILLI:  # only idle GPUs fit a whole-GPU request: case 2 unless the node is idle
            rest = np.full(self.nodes, max(MAX_NODE_SCORE // 2 - k, MAX_NODE_SCORE // 3), dtype=np.int64)
        else:
            tight = np.where(left >= d, left, GPU_MILLI + 1).min(axis=1)  # the share's GPU: least left
            case1 = np.maximum(MAX_NODE_SCORE - (tight * 100 // GPU_MILLI) // 10, MAX_NODE_SCORE // 2)
            case2 = max(MAX_NODE_SCORE // 2 - 1, MAX_NODE_SCORE // 3)
            rest = np.where(tight == GPU_MILLI, case2, case1).astype(np.int64)
        return np.where(all_idle, case3, rest).astype(np.int64)


OPENB_SCORERS: dict[str, type[NodeScorer]] = {
    cls.name: cls for cls in (DotProductScorer, GpuClusteringScorer, GpuPackingScorer)
}
