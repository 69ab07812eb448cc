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
from openb_kit import nodes_of, pods_of, preload

from planner.simulate.openb import (
    EXACT_SCORES_MULTI_GPU_SHARE,
    MILLI,
    NODE_LIMITED_SHARE,
    RESERVE_POINTS,
    ClusterState,
    Placement,
    multi_gpu_share,
    node_limited_types,
)


def node(cpu: int = 64_000, gpu: int = 1) -> dict[str, Any]:
    return {"cpu_milli": cpu, "memory_mib": 262_144, "gpu": gpu, "model": "T4"}


def pod(gpus: int = 1, milli: int = MILLI, cpu: int = 1_000) -> dict[str, Any]:
    return {"cpu_milli": cpu, "memory_mib": 1_024, "num_gpu": gpus, "gpu_milli": milli, "gpu_spec": ""}


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
    8-core node, so it wins every time; the kube-scheduler would draw between the two. (The workload is
    this one whole-GPU pod: no share majority, so best-fit's measure alone decides.)"""
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


def test_equal_scores_pack_a_share_pod_by_gpu_when_share_pods_are_the_majority() -> None:
    """Node 0: GPUs [1, 1] free, 8 cores; node 1: GPUs [0, 1] free (a whole-GPU pod on GPU 0), 63 cores.
    A 0.5-GPU pod (1 core) scores 50 on both for either workload below, by hand:

    * workload of 0.5-GPU pods only (a share majority): no GPU is left below 0.5 before or after on
      either node, fragmentation 0 -> 0, score int(100 * sigmoid(0)) = 50 on both;
    * workload 2/3 whole-GPU pods, 1/3 0.5-GPU pods (a minority): node 0 [0.5, 1] keeps an idle GPU,
      the whole type cannot use the 0.5: 2/3 * 0.5 = 0.333 GPU; node 1 [0, 0.5] has no idle GPU, all
      0.5 idle is fragment for it: 0.333 too; both increase by 0.333: int(100 * sigmoid(-0.333)) = 41.

    Best-fit's measure (0.5 * CPU left / 64 cores + 0.5 * GPU left / 2 GPUs, after placing): node 0
    0.5 * 7/64 + 0.5 * 1.5/2 = 0.430, node 1 0.5 * 62/64 + 0.5 * 0.5/2 = 0.609: best-fit takes node 0.
    With a share majority the least GPU left goes first: node 1 (1 GPU left against 2)."""
    nodes = nodes_of(node(cpu=8_000, gpu=2), node(cpu=64_000, gpu=2))
    pods = pods_of(pod(), pod(milli=500))
    expected = {"majority": (50, 1), "minority": (41, 0)}
    workloads = {"majority": pods_of(pod(milli=500)), "minority": pods_of(pod(), pod(), pod(milli=500))}
    assert sigmoid_score(0.0) == 50 and sigmoid_score(1 / 3) == 41
    for name, workload in workloads.items():
        state = ClusterState(nodes, pods, "workload-aware", workload=workload)
        state.place(0, Placement(1, np.array([MILLI, 0])))
        assert state.gpu_left.tolist() == [[1000, 1000], [0, 1000]]
        score, node_index = expected[name]
        assert state.fgd_score(1).tolist() == [score, score], name
        choice = state.choose(1)
        assert choice is not None and choice.node == node_index, name


def test_equal_scores_send_a_whole_gpu_pod_to_the_least_cpu_when_share_pods_are_the_majority() -> None:
    """Node 0: 4 idle GPUs, 8 cores; node 1: 1 idle GPU, 16 cores. A 1-GPU pod (1 core) leaves no
    partial GPU anywhere and every type still runs (>= 7 cores left): fragmentation 0 -> 0, score 50
    on both. Best-fit's measure (CPU over 16 cores, GPU over 4 GPUs): node 0 0.5 * 7/16 + 0.5 * 3/4 =
    0.594, node 1 0.5 * 15/16 + 0 = 0.469: best-fit takes node 1. With 3 of 4 workload GPU pods sharing
    (0.5 GPU), the least CPU left goes first: node 0 (7 cores against 15)."""
    nodes = nodes_of(node(cpu=8_000, gpu=4), node(cpu=16_000, gpu=1))
    pods = pods_of(pod())
    majority = pods_of(pod(milli=500), pod(milli=500), pod(milli=500), pod())
    minority = pods_of(pod(milli=500), pod(), pod())
    for workload, node_index in ((majority, 0), (minority, 1)):
        state = ClusterState(nodes, pods, "workload-aware", workload=workload)
        assert state.fgd_score(0).tolist() == [50, 50]
        choice = state.choose(0)
        assert choice is not None and choice.node == node_index
        assert choice.take.tolist() == [1000, 0, 0, 0]  # the lowest idle GPU (columns past 1 GPU: none)


def test_a_whole_gpu_pod_leaves_a_scarce_model_to_the_pods_limited_to_it() -> None:
    """Node 0: one G3 GPU; node 1: eight G2 GPUs. Workload of 10 one-GPU pods: 5 any model, 2 G3-only,
    3 G2-only (p = 0.5, 0.2, 0.3). Model pressure (GPUs of model-limited pods over the model's GPUs):
    G3 2 / 1 = 2.0, G2 3 / 8 = 0.375.

    A 1-GPU pod of any model, by hand: on node 0 the idle G3 GPU is fragment for the G2-only type
    only (0.3 * 1 GPU) and nothing is left after: decrease 0.3, score int(100 * sigmoid(0.3)) = 57; on
    node 1 the eight G2 GPUs are fragment for the G3-only type (0.2 * 8 = 1.6), 0.2 * 7 = 1.4 after:
    decrease 0.2, score 54. The artifact's FGD takes the last G3 GPU, which the G3-only pods need.
    With 5 points per unit of pressure: node 0 57 - 10 = 47, node 1 54 - 1.875 = 52.1: node 1 wins.

    A 0.5-GPU pod is not moved: node 0 [0.5] leaves 0.5 GPU unusable by every type (0.5, from 0.3):
    increase 0.2, score 45; node 1 [0.5, 1 x 7]: 0.5 * 0.5 (the any type cannot use the half) + 0.2 *
    7.5 + 0.3 * 0.5 = 1.9, from 1.6: increase 0.3, score 42. It goes to node 0 by FGD's score alone."""
    g3, g2 = node(cpu=64_000, gpu=1), node(cpu=96_000, gpu=8)
    g3["model"], g2["model"] = "G3", "G2"
    nodes = nodes_of(g3, g2)
    any_model, g3_only, g2_only = pod(), {**pod(), "gpu_spec": "G3"}, {**pod(), "gpu_spec": "G2"}
    workload = pods_of(*[any_model] * 5, *[g3_only] * 2, *[g2_only] * 3)
    pods = pods_of(any_model, pod(milli=500))
    assert [sigmoid_score(x) for x in (-0.3, -0.2, 0.2, 0.3)] == [57, 54, 45, 42]
    state = ClusterState(nodes, pods, "workload-aware", workload=workload)
    assert state.fgd_score(0).tolist() == [57, 54]  # the artifact's score is unchanged
    assert state.fgd_score(1).tolist() == [45, 42]
    whole, share = state.choose(0), state.choose(1)
    assert whole is not None and whole.node == 1
    assert share is not None and share.node == 0
    # the same cluster and pod with no model-limited types in the workload: FGD's choice, node 0
    plain = ClusterState(nodes, pods, "workload-aware", workload=pods_of(*[any_model] * 5, pod(milli=500)))
    assert plain.choose(0) is not None and plain.choose(0).node == 0  # type: ignore[union-attr]


def machine(model: str, gpus: int, cpu: int, memory: int) -> dict[str, Any]:
    return {"cpu_milli": cpu, "memory_mib": memory, "gpu": gpus, "model": model}


G3 = machine("G3", 8, 128_000, 786_432)  # openb's 39 G3 nodes: the only ones with 120 cores to give
G2 = machine("G2", 8, 96_000, 393_216)
T4 = machine("T4", 2, 104_000, 524_288)


def sized(gpus: int, cpu: int, memory: int = 1_024, milli: int = MILLI, spec: str = "") -> dict[str, Any]:
    return {"cpu_milli": cpu, "memory_mib": memory, "num_gpu": gpus, "gpu_milli": milli, "gpu_spec": spec}


def test_node_limited_types_by_hand() -> None:
    """Two G3 nodes, four G2, two T4. Whole-GPU types naming no model, by hand:
    - 8 GPUs, 120 cores: 6 nodes have 8 GPUs, only the 2 G3 have 120 cores: 2 < 6 / 2, limited;
    - 8 GPUs, 100 cores and 500 GB: G3 only again, limited; 2 GPUs, 110 cores: G3 only of 8, limited;
    - 2 GPUs, 100 cores, 400 GB: G3 and T4 fit, 4 of 8 nodes: not fewer than half, not limited;
    - 1 GPU, 1 core: every node.
    Never limited here: a share pod, a model-limited pod (model_pressure's), a CPU-only pod."""
    nodes = nodes_of(G3, G3, G2, G2, G2, G2, T4, T4)
    assert NODE_LIMITED_SHARE == 0.5
    workload = pods_of(
        sized(8, 120_000, 737_280),
        sized(8, 100_000, 500_000),
        sized(2, 110_000),
        sized(2, 100_000, 400_000),
        sized(1, 1_000),
        sized(1, 120_000, milli=500),
        sized(8, 120_000, spec="G3"),
        sized(0, 120_000, milli=0),
    )
    expected = [[100_000, 500_000, 8], [110_000, 1_024, 2], [120_000, 737_280, 8]]
    assert node_limited_types(nodes, workload).tolist() == expected
    assert node_limited_types(nodes, pods_of(sized(1, 1_000))).shape == (0, 3)


def test_the_reserve_is_short_when_its_other_nodes_hold_fewer_gpus_than_the_big_pods_still_ask() -> None:
    """Three G3 and four G2 nodes; two 8-GPU pods asking 120 cores (B, 16 GPUs; only G3 fits, 3 of 7).
    At first the reserve is the three G3 (24 idle GPUs): without any one of them 16 remain, as many as
    B asks, so none is short and nothing pays. A CPU-only pod asking 20 cores on node 2 takes it out of
    the reserve (108 cores do not take B, though its 8 GPUs are idle): the other G3 are now short (8 <
    16), and any pod that would leave them unable to take B pays 10 points there, except B itself.
    Once one B holds node 1, the last G3 is short for the other B (0 < 8)."""
    nodes = nodes_of(G3, G3, G3, G2, G2, G2, G2)
    big, one = sized(8, 120_000, 737_280), sized(1, 1_000)
    workload = pods_of(big, big, *[one] * 6)
    pods = pods_of(one, big, sized(1, 1_000, milli=500), sized(0, 20_000, milli=0))
    state = ClusterState(nodes, pods, workload=workload)
    assert RESERVE_POINTS == 10
    assert state.reserve_short().tolist() == [False] * 7
    assert state.reserve_cost(0).tolist() == [0] * 7
    state.place(3, Placement(2, np.zeros(8, dtype=np.int64)))
    assert state.reserve_placed == 0  # a CPU-only pod is not what the reserve is for
    assert state.reserve_short().tolist() == [True, True] + [False] * 5
    assert state.reserve_cost(0).tolist() == [10, 10, 0, 0, 0, 0, 0]
    assert state.reserve_cost(2).tolist() == [10, 10, 0, 0, 0, 0, 0]  # a share pod takes a whole GPU there
    assert state.reserve_cost(1).tolist() == [0] * 7  # B itself
    state.place(1, Placement(1, np.array([MILLI] * 8)))
    assert state.reserve_placed == 8
    assert state.reserve_short().tolist() == [True] + [False] * 6
    assert state.reserve_cost(0).tolist() == [10] + [0] * 6


def test_a_share_pod_pays_for_the_reserve_only_where_it_takes_an_idle_gpu() -> None:
    """Two G3 nodes, four G2; three 4-GPU pods asking 120 cores (12 GPUs; G3 only). Node 0: 3 GPUs
    taken, GPU 3 half taken, 4 idle; node 1: 4 taken, 4 idle. Both take a 4-GPU pod and each is short
    (4 idle elsewhere < 12). A half-GPU pod on node 0 goes on GPU 3 (on an idle one the 4-GPU type
    could no longer run there: FGD's own choice), so node 0 stays in the reserve and costs nothing; on
    node 1 it must take an idle GPU and pays. A 1-GPU pod pays on both."""
    nodes = nodes_of(G3, G3, G2, G2, G2, G2)
    one, half, big4 = sized(1, 1_000), sized(1, 1_000, milli=500), sized(4, 120_000)
    workload = pods_of(*[big4] * 3, *[one] * 4, *[half] * 4)
    state = ClusterState(nodes, pods_of(one, half, big4), workload=workload)
    for gpu in range(3):
        preload(state, 0, 0, gpu)
    preload(state, 1, 0, 3)
    for gpu in range(4):
        preload(state, 0, 1, gpu)
    assert state.reserve_short().tolist() == [True, True, False, False, False, False]
    assert state.reserve_cost(1).tolist() == [0, 10, 0, 0, 0, 0]
    choice = state.choose(1)
    assert choice is not None and choice.node == 0 and choice.take.tolist() == [0, 0, 0, 500, 0, 0, 0, 0]
    assert state.reserve_cost(0).tolist() == [10, 10, 0, 0, 0, 0]


def test_a_whole_gpu_pod_leaves_the_g3_nodes_to_the_pods_only_they_fit_while_the_reserve_is_short() -> None:
    """Node 0 and node 2 G3 (8 idle GPUs, 128 cores), node 1 G2 with 4 GPUs taken, four G2 full.
    Workload: 2 one-GPU pods (A), 6 four-GPU pods (C), 2 eight-GPU pods asking 120 cores (B): p = 0.2,
    0.6, 0.2. B fits only the G3 (2 of 7 nodes with 8 GPUs) and asks 16 GPUs.

    An A pod, by hand (GPUs of fragment): on a G3 nothing is fragment before; after, 7 idle GPUs no
    longer take B: +0.2 * 7 = 1.4, score int(100 * sigmoid(-1.4)) = 19. On node 1 B never runs (92
    cores): 0.2 * 4 = 0.8 before; after, 3 idle GPUs take no C either: 0.6 * 3 + 0.2 * 3 = 2.4, +1.6,
    score 16. The artifact's FGD breaks a G3 (19 > 16): C's share of the pods outweighs B's, not its
    share of the GPUs. The reserve (16 idle GPUs) is short for B (8 without either G3 < 16): 19 - 10 =
    9, and A goes to node 1. With a third G3 (and two more full G2) the reserve holds B without any
    one G3 (16 >= 16): FGD's choice, a G3."""
    one, four, filler = sized(1, 1_000), sized(4, 4_000), sized(8, 1_000)
    workload = pods_of(*[one] * 2, *[four] * 6, *[sized(8, 120_000, 737_280)] * 2)
    assert [sigmoid_score(x) for x in (1.4, 1.6)] == [19, 16]
    for extra, expected in ((0, {1}), (1, {0, 2, 3})):
        g3s = [G3] * extra
        nodes = nodes_of(G3, G2, G3, *g3s, *[G2] * (4 + 2 * extra))
        state = ClusterState(nodes, pods_of(one, four, filler), "workload-aware", workload=workload)
        state.place(1, Placement(1, np.array([MILLI] * 4 + [0] * 4)))
        for n in range(3 + extra, len(nodes)):
            state.place(2, Placement(n, np.array([MILLI] * 8)))
        assert state.fragmentation()[:3].round(9).tolist() == [0.0, 0.8, 0.0]
        assert state.fgd_score(0)[: 3 + extra].tolist() == [19, 16, 19] + [19] * extra  # the artifact's
        assert bool(state.reserve_short().any()) is (extra == 0)
        choice = state.choose(0)
        assert choice is not None and choice.node in expected


def test_multi_gpu_share_is_the_demand_of_pods_with_two_or_more_gpus() -> None:
    """A 2-GPU pod (2,000 milli), a 1-GPU pod (1,000) and two 0.5-GPU pods (1,000): 2,000 / 4,000."""
    assert multi_gpu_share(pods_of(pod(gpus=2), pod(), pod(milli=500), pod(milli=500))) == 0.5
    assert multi_gpu_share(pods_of(pod(), pod(milli=500))) == 0.0
    assert multi_gpu_share(pods_of(pod(gpus=0, milli=0))) == 0.0  # no GPU demand at all
    assert EXACT_SCORES_MULTI_GPU_SHARE == 0.25


def test_share_pods_follow_the_exact_change_where_multi_gpu_pods_ask_most_gpus() -> None:
    """Two 4-GPU nodes, GPU 0 of node 0 with 0.11 free, of node 1 with 0.12 (64 and 8 cores). Workload:
    half 2-GPU pods (A), half 0.1-GPU pods (B); multi-GPU share 2,000 / 2,100 = 0.95. A 0.05-GPU pod on
    GPU 0, by hand (milli): node 0 110 -> 60, A's fragment (idle milli on partial GPUs, it still runs
    on the 3 idle GPUs) -0.5 * 50, B's (GPUs below 100) +0.5 * 60: +5; node 1 120 -> 70: -25 + 35 = +10.
    On an idle GPU instead A's fragment grows by 0.5 * 950: worse on both. The integer scores tie:
    int(100 * sigmoid(-0.005)) = int(100 * sigmoid(-0.01)) = 49; B is half the GPU pods, not a share
    majority, so best-fit's measure breaks the tie: node 1 (7 of 8 cores left against 63 of 64). The
    exact change takes node 0 (+5 against +10)."""
    nodes = nodes_of(node(cpu=64_000, gpu=4), node(cpu=8_000, gpu=4))
    pods = pods_of(pod(milli=890), pod(milli=880), pod(milli=50))
    workload = pods_of(pod(gpus=2), pod(milli=100))
    assert multi_gpu_share(workload) > EXACT_SCORES_MULTI_GPU_SHARE
    assert sigmoid_score(0.005) == sigmoid_score(0.01) == 49
    for exact, expected in ((None, 0), (True, 0), (False, 1)):
        state = ClusterState(nodes, pods, "workload-aware", workload=workload, exact_scores=exact)
        assert state.exact_scores is (exact is not False)
        preload(state, 0, 0, gpu=0)
        preload(state, 1, 1, gpu=0)
        assert state.fragmentation_increase(2).round(6).tolist() == [0.005, 0.01]
        assert state.fgd_score(2).tolist() == [49, 49]  # the artifact's score, whichever rule places
        choice = state.choose(2)
        assert choice is not None and choice.node == expected and choice.take.tolist() == [50, 0, 0, 0]
