"""MIG layouts, packing and mig-parted configs (FACTS.md 4.2/4.3) against independent brute forces.

Layouts: every subset of the (profile, start) pairs of a model (7 + 4 + 3 + 2 + 1 + 1 = 18 pairs) is tried
with itertools; a subset is legal when its memory ranges do not overlap and its compute slices sum to at
most 7. Projected to profile multisets, these must be exactly ``valid_layouts``.

Packing: the fewest GPUs for a small demand is found by trying k = 0, 1, 2, ... and searching
recursively for a split of the demand into k multisets from the brute-force set (valid multisets are
closed under removing instances, so "at least the demand" and "exactly the demand" need the same k).
"""

from __future__ import annotations

import functools
import itertools
import math
import pickle
import random
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

import planner.planning.mig.packing as mig_packing
from models.mig import (
    COMPUTE_SLICES,
    MEMORY_SLICES,
    MIG_PROFILES,
    Layout,
    MigProfile,
    Placement,
    layout_for,
    maximal_layouts,
    smallest_profile,
    valid_layouts,
)
from planner.planning.mig.config import config_name, mig_parted_config, with_suffix
from planner.planning.mig.packing import Packing, pack, pack_lower_bound

MODELS = sorted(MIG_PROFILES)

Vector = tuple[int, ...]


def _names(model: str) -> list[str]:
    return [p.name for p in MIG_PROFILES[model]]


@functools.cache
def _brute_force(model: str) -> tuple[int, int, dict[Vector, list[tuple[tuple[str, int], ...]]]]:
    """(legal placement sets, sets legal by memory alone, multiset -> every legal placement of it)."""
    profiles = MIG_PROFILES[model]
    pairs = [(k, start) for k, p in enumerate(profiles) for start in p.valid_starts]
    assert len(pairs) == 18
    legal = memory_legal = 0
    multisets: dict[Vector, list[tuple[tuple[str, int], ...]]] = {}
    for r in range(len(pairs) + 1):
        for subset in itertools.combinations(pairs, r):
            slices: list[int] = []
            for k, start in subset:
                slices.extend(range(start, start + profiles[k].memory_slices))
            if len(slices) != len(set(slices)) or max(slices, default=0) >= MEMORY_SLICES:
                continue
            memory_legal += 1
            if sum(profiles[k].compute_slices for k, _ in subset) > COMPUTE_SLICES:
                continue
            legal += 1
            vector = [0] * len(profiles)
            for k, _ in subset:
                vector[k] += 1
            placed = tuple((profiles[k].name, start) for k, start in subset)
            multisets.setdefault(tuple(vector), []).append(placed)
    return legal, memory_legal, multisets


def _vector(model: str, counts: dict[str, int]) -> Vector:
    return tuple(counts.get(name, 0) for name in _names(model))


def _grow(vector: Vector, k: int) -> Vector:
    return tuple(c + (i == k) for i, c in enumerate(vector))


# --- layouts ---------------------------------------------------------------------------------------------


def test_valid_starts_match_facts_4_2() -> None:
    # FACTS 4.2 table, by (compute slices, memory slices): valid starts
    expected = {
        (1, 1): (0, 1, 2, 3, 4, 5, 6),
        (1, 2): (0, 2, 4, 6),
        (2, 2): (0, 2, 4),
        (3, 4): (0, 4),
        (4, 4): (0,),
        (7, 8): (0,),
    }
    for model in MODELS:
        assert {(p.compute_slices, p.memory_slices): p.valid_starts for p in MIG_PROFILES[model]} == expected


@pytest.mark.parametrize("model", MODELS)
def test_valid_layouts_equal_brute_force(model: str) -> None:
    legal, memory_legal, multisets = _brute_force(model)
    layouts = valid_layouts(model)
    vectors = [lay.count_vector for lay in layouts]
    assert len(vectors) == len(set(vectors)), "one layout per multiset"
    assert set(vectors) == set(multisets)
    assert (legal, len(layouts), len(maximal_layouts(model))) == (723, 78, 28)  # the docstring's counts
    # with these start slots the compute budget never binds: non-overlap alone already caps it at 7
    assert memory_legal == legal
    assert layouts[0].placements == ()  # the empty layout is included, first
    for lay in layouts:
        assert lay.gpu_model == model
        assert lay.counts == {n: c for n, c in zip(_names(model), lay.count_vector, strict=True) if c}
        assert [pl.start for pl in lay.placements] == sorted(pl.start for pl in lay.placements)
        placed = tuple((pl.profile, pl.start) for pl in lay.placements)
        assert sorted(placed) in [sorted(p) for p in multisets[lay.count_vector]]
        profiles = {p.name: p for p in MIG_PROFILES[model]}
        assert lay.compute_slices == sum(profiles[pl.profile].compute_slices for pl in lay.placements)
        assert lay.memory_slices == sum(profiles[pl.profile].memory_slices for pl in lay.placements)
        assert lay.instances == sum(lay.count_vector)

        # left-packed: the highest used slice is as low as any legal placement of the multiset allows
        def end(placed: tuple[tuple[str, int], ...], profiles: dict[str, MigProfile] = profiles) -> int:
            return max((s + profiles[n].memory_slices for n, s in placed), default=0)

        assert end(placed) == min(end(p) for p in multisets[lay.count_vector])


@pytest.mark.parametrize("model", MODELS)
def test_maximal_layouts_equal_brute_force(model: str) -> None:
    _legal, _memory_legal, multisets = _brute_force(model)
    n = len(MIG_PROFILES[model])
    expected = {v for v in multisets if not any(_grow(v, k) in multisets for k in range(n))}
    maximal = maximal_layouts(model)
    assert {lay.count_vector for lay in maximal} == expected
    assert set(maximal) <= set(valid_layouts(model))
    # every valid multiset sits inside some maximal one, so maximal layouts suffice as patterns
    for v in multisets:
        assert any(all(a <= b for a, b in zip(v, m, strict=True)) for m in expected)


# Known layouts (FACTS 4.2), by profile index: 0 = 1g (1 slice), 1 = 1g (2 slices), 2 = 2g, 3 = 3g,
# 4 = 4g, 5 = 7g.
VALID = {
    "7 x 1g": (7, 0, 0, 0, 0, 0),
    "3 x 2g + 1g": (1, 0, 3, 0, 0, 0),
    "2 x 3g": (0, 0, 0, 2, 0, 0),
    "3g + 4g": (0, 0, 0, 1, 1, 0),
    "4g + 2g + 1g": (1, 0, 1, 0, 1, 0),
    "4g + 3 x 1g": (3, 0, 0, 0, 1, 0),
    "3g + 2g + 2 x 1g (all-balanced)": (2, 0, 1, 1, 0, 0),
    "3g@4 + 2 x 2g": (0, 0, 2, 1, 0, 0),
    "4 x 1g 2-slice": (0, 4, 0, 0, 0, 0),
    "7g": (0, 0, 0, 0, 0, 1),
}
INVALID = {
    "8 x 1g": (8, 0, 0, 0, 0, 0),
    "2 x 4g": (0, 0, 0, 0, 2, 0),
    "4 x 2g": (0, 0, 4, 0, 0, 0),
    "7g + 1g": (1, 0, 0, 0, 0, 1),
    "3 x 3g": (0, 0, 0, 3, 0, 0),
    "5 x 1g 2-slice": (0, 5, 0, 0, 0, 0),
    "4g + 3g + 1g": (1, 0, 0, 1, 1, 0),
}


@pytest.mark.parametrize("model", MODELS)
def test_known_layouts(model: str) -> None:
    names = _names(model)
    for label, vector in VALID.items():
        layout = layout_for(model, dict(zip(names, vector, strict=True)))
        assert layout is not None, label
        assert layout.count_vector == vector
    for label, vector in INVALID.items():
        assert layout_for(model, dict(zip(names, vector, strict=True))) is None, label


def test_mig_parted_all_balanced_is_valid() -> None:
    # FACTS 4.3, config-default.yaml "all-balanced"
    balanced = {
        "A100-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        "A100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        "H100": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        "H100-NVL": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
        "H200": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
        "B200": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
    }
    for model, counts in balanced.items():
        layout = layout_for(model, counts)
        assert layout is not None and layout.counts == counts
        assert (layout.compute_slices, layout.memory_slices) == (7, 8)
        # 3g must sit at slice 4 so the two 1g fit beside the 2g
        assert [(pl.profile, pl.start) for pl in layout.placements][-1] == (_names(model)[3], 4)


def test_canonical_placements_are_left_packed() -> None:
    def placed(counts: dict[str, int]) -> list[tuple[str, int]]:
        layout = layout_for("H100", counts)
        assert layout is not None
        return [(pl.profile, pl.start) for pl in layout.placements]

    assert placed({"3g.40gb": 1, "1g.10gb": 1}) == [("3g.40gb", 0), ("1g.10gb", 4)]
    assert placed({"4g.40gb": 1, "3g.40gb": 1}) == [("4g.40gb", 0), ("3g.40gb", 4)]
    assert placed({"2g.20gb": 3, "1g.10gb": 1}) == [
        ("2g.20gb", 0),
        ("2g.20gb", 2),
        ("2g.20gb", 4),
        ("1g.10gb", 6),
    ]
    assert placed({"1g.10gb": 1}) == [("1g.10gb", 0)]
    assert placed({}) == []


def test_layout_checks_the_rules() -> None:
    ok = Layout("h100", (Placement("3g.40gb", 4), Placement("4g.40gb", 0)))
    assert ok.gpu_model == "H100"
    assert [pl.start for pl in ok.placements] == [0, 4]
    assert ok == layout_for("H100", {"4g.40gb": 1, "3g.40gb": 1})
    with pytest.raises(ValueError, match="cannot start"):
        Layout("H100", (Placement("4g.40gb", 4),))
    with pytest.raises(ValueError, match="overlaps"):
        Layout("H100", (Placement("3g.40gb", 0), Placement("2g.20gb", 2)))
    with pytest.raises(ValueError, match=r"1g\.5gb"):
        Layout("H100", (Placement("1g.5gb", 0),))
    with pytest.raises(ValueError, match="no MIG"):
        Layout("L4", ())


def test_caches_and_lookups() -> None:
    assert valid_layouts("h100") is valid_layouts("H100")
    assert maximal_layouts(" H100 ") is maximal_layouts("H100")
    with pytest.raises(ValueError, match="no MIG"):
        valid_layouts("A10G")
    with pytest.raises(ValueError, match=r"2g\.5gb"):
        layout_for("H100", {"2g.5gb": 1})
    with pytest.raises(ValueError, match=">= 0"):
        layout_for("H100", {"1g.10gb": -1})
    assert smallest_profile("H100", 16.0).name == "1g.20gb"  # type: ignore[union-attr]


# --- packing ---------------------------------------------------------------------------------------------


def _brute_force_gpus(model: str, demand: Vector) -> int:
    """Smallest k such that ``demand`` splits into k valid multisets (brute-force set)."""
    valid = list(_brute_force(model)[2])

    @functools.cache
    def splits(rest: Vector, k: int) -> bool:
        if not any(rest):
            return True
        if k == 0:
            return False
        first = next(i for i, c in enumerate(rest) if c)  # some GPU holds this instance: try it first
        for v in valid:
            fits = v[first] and all(a <= b for a, b in zip(v, rest, strict=True))
            if fits and splits(tuple(b - a for a, b in zip(v, rest, strict=True)), k - 1):
                return True
        return False

    k = 0
    while not splits(demand, k):
        k += 1
    return k


def _check_packing(model: str, demand: dict[str, int], result: Packing) -> None:
    valid = set(valid_layouts(model))
    assert result.gpus == sum(n for _, n in result.patterns)
    assert all(n >= 1 and layout in maximal_layouts(model) for layout, n in result.patterns)
    held: Counter[str] = Counter()
    for layout, n in result.patterns:
        for name, c in layout.counts.items():
            held[name] += n * c
    for name in _names(model):
        assert held[name] - demand.get(name, 0) == result.surplus.get(name, 0) >= 0
    exact: Counter[str] = Counter()
    for layout, n in result.exact_patterns():
        assert layout in valid and n >= 1
        for name, c in layout.counts.items():
            exact[name] += n * c
    assert sum(n for _, n in result.exact_patterns()) == result.gpus
    assert exact == Counter({k: v for k, v in demand.items() if v})
    assert pack_lower_bound(model, demand) <= result.gpus
    homogeneous = sum(
        math.ceil(d / p.max_instances) for p in MIG_PROFILES[model] if (d := demand.get(p.name, 0))
    )
    assert result.gpus <= homogeneous


def _small_demands(model: str, cases: int, seed: int) -> list[dict[str, int]]:
    rng = random.Random(seed)
    names = _names(model)
    out = []
    for _ in range(cases):
        total = rng.randint(1, 8)
        picks = rng.sample(names, rng.randint(1, 4))
        counts = Counter(rng.choice(picks) for _ in range(total))
        out.append(dict(counts))
    return out


@pytest.fixture
def milp_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Force the branch and bound (no greedy shortcut, no LP rounding) and bypass the memo, so the MILP
    itself is tested; yields a one-element list counting the solver calls.
    """
    calls = [0]
    solve = mig_packing._solve_milp

    def branch_and_bound(*args: Any, **kwargs: Any) -> list[int]:
        calls[0] += 1
        return solve(*args, **{**kwargs, "rounding": False})

    def no_shortcut(columns: Any, need: list[int], weights: Any) -> list[int]:
        return [max(need) + 1] * len(columns)  # never meets the volume bound: the MILP decides

    monkeypatch.setattr(mig_packing, "_solve_milp", branch_and_bound)
    monkeypatch.setattr(mig_packing, "_greedy", no_shortcut)
    mig_packing._pack.cache_clear()
    yield calls
    mig_packing._pack.cache_clear()


@pytest.mark.parametrize("model", MODELS)
def test_pack_equals_brute_force(model: str) -> None:
    for demand in _small_demands(model, 50, seed=MODELS.index(model)):
        result = pack(model, demand)
        assert result.gpus == _brute_force_gpus(model, _vector(model, demand)), demand
        _check_packing(model, demand, result)


@pytest.mark.parametrize("model", MODELS)
def test_pack_milp_path_equals_brute_force(model: str, milp_only: list[int]) -> None:
    for demand in _small_demands(model, 50, seed=100 + MODELS.index(model)):
        result = pack(model, demand)
        assert result.gpus == _brute_force_gpus(model, _vector(model, demand)), demand
        _check_packing(model, demand, result)
    assert milp_only[0] >= 10  # the rest are closed forms (one profile, or bound met by homogeneous)


def test_lp_rounding_matches_milp_on_larger_demands(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    cases = []
    for _ in range(60):
        model = rng.choice(MODELS)
        names = rng.sample(_names(model), rng.randint(2, 6))
        cases.append((model, {name: rng.randint(0, 50) for name in names}))
    mig_packing._pack.cache_clear()
    fast = [pack(model, demand) for model, demand in cases]
    for (model, demand), result in zip(cases, fast, strict=True):
        _check_packing(model, demand, result)
    monkeypatch.setattr(
        mig_packing, "_solve_milp", functools.partial(mig_packing._solve_milp, rounding=False)
    )
    mig_packing._pack.cache_clear()
    exact = [pack(model, demand).gpus for model, demand in cases]
    mig_packing._pack.cache_clear()
    assert [r.gpus for r in fast] == exact


@pytest.mark.parametrize(
    ("demand", "gpus"),
    [
        ({"1g.10gb": 7}, 1),
        ({"3g.40gb": 1, "4g.40gb": 1}, 1),
        ({"3g.40gb": 3}, 2),
        ({"2g.20gb": 3, "1g.10gb": 1}, 1),
        ({"1g.10gb": 8}, 2),
        ({"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, 1),
        ({"4g.40gb": 2, "3g.40gb": 2}, 2),
        ({"7g.80gb": 3, "1g.10gb": 1}, 4),
        ({"1g.20gb": 4, "1g.10gb": 3}, 2),  # 1g.20gb x4 fills all memory
        ({}, 0),
        ({"2g.20gb": 0}, 0),
    ],
)
def test_pack_hand_cases(demand: dict[str, int], gpus: int) -> None:
    result = pack("H100", demand)
    assert result.gpus == gpus
    _check_packing("H100", demand, result)


def test_pack_single_profile_closed_form() -> None:
    for model in MODELS:
        for p in MIG_PROFILES[model]:
            for d in (1, p.max_instances, p.max_instances + 1, 50):
                result = pack(model, {p.name: d})
                assert result.gpus == math.ceil(d / p.max_instances)
                assert len(result.patterns) == 1
                assert result.patterns[0][0].counts[p.name] == p.max_instances


def test_pack_memo_and_errors() -> None:
    a = pack("H100", {"1g.10gb": 3, "3g.40gb": 2})
    assert pack("h100", {"3g.40gb": 2, "1g.10gb": 3, "2g.20gb": 0}) is a
    assert dict(a.demand) == {"1g.10gb": 3, "3g.40gb": 2}
    surplus = a.surplus
    a.surplus["1g.10gb"] = 99  # a copy: the memoized result stays intact
    assert pack("H100", {"1g.10gb": 3, "3g.40gb": 2}).surplus == surplus
    assert pickle.loads(pickle.dumps(a)) == a  # the planner may ship results between processes
    with pytest.raises(ValueError, match=r"1g\.5gb"):
        pack("H100", {"1g.5gb": 1})
    with pytest.raises(ValueError, match="no MIG"):
        pack("L40S", {"1g.10gb": 1})
    with pytest.raises(ValueError, match=">= 0"):
        pack("H100", {"1g.10gb": -1})
    with pytest.raises(ValueError, match="integer"):
        pack("H100", {"1g.10gb": 1.5})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="integer"):
        pack("H100", {"1g.10gb": True})


def test_pack_lower_bound() -> None:
    assert pack_lower_bound("H100", {}) == 0
    assert pack_lower_bound("H100", {"1g.10gb": 8}) == 2  # 7 per GPU
    assert pack_lower_bound("H100", {"3g.40gb": 1, "4g.40gb": 1}) == 1
    assert pack_lower_bound("H100", {"2g.20gb": 4, "1g.20gb": 2}) == 2  # 12 memory slices
    assert pack_lower_bound("H100", {"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}) == 2  # 8 compute slices


def test_pack_many_random_demands() -> None:
    """200 random 5-profile demands, as the planner packs them (bench/output_bench.py times this)."""
    rng = random.Random(5)
    names = _names("H100")
    demands = [{name: rng.randint(0, 50) for name in rng.sample(names, 5)} for _ in range(200)]
    mig_packing._pack.cache_clear()
    for demand in demands:
        _check_packing("H100", demand, pack("H100", demand))  # covers the demand, >= the lower bound


# --- mig-parted config -----------------------------------------------------------------------------------

LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


def test_mig_parted_config_from_a_packing() -> None:
    result = pack("H100", {"1g.10gb": 9, "2g.20gb": 4, "3g.40gb": 3, "4g.40gb": 1})
    node: list[tuple[Layout | None, int]] = list(result.patterns)
    assert sum(n for _, n in node) <= 8
    h200 = layout_for("H200", {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1})
    empty = layout_for("H200", {})
    assert h200 is not None and empty is not None
    pools: dict[str, list[tuple[Layout | None, int]]] = {
        config_name("H100 inference / us-east-1"): node,
        "h200-mixed": [(h200, 2), (None, 1), (empty, 1), (h200, 3)],
    }
    doc = mig_parted_config(pools)
    assert yaml.safe_load(yaml.safe_dump(doc, sort_keys=False)) == doc
    assert doc["version"] == "v1"
    assert set(doc["mig-configs"]) == set(pools)
    for name, entries in doc["mig-configs"].items():
        assert LABEL.match(name)
        devices = [d for e in entries for d in e["devices"]]
        assert sorted(devices) == list(range(8)) and len(devices) == len(set(devices))
        for entry in entries:
            assert set(entry) <= {"devices", "mig-enabled", "mig-devices"}
            assert isinstance(entry["mig-enabled"], bool)
            assert ("mig-devices" in entry) == entry["mig-enabled"]
        # per GPU, the mig-devices equal the layout given for that index
        per_gpu = [layout for layout, n in pools[name] for _ in range(n)]
        for entry in entries:
            for d in entry["devices"]:
                layout = per_gpu[d] if d < len(per_gpu) else None
                if layout is None:
                    assert entry["mig-enabled"] is False
                else:
                    assert entry["mig-devices"] == layout.counts
    h100 = doc["mig-configs"]["H100-inference-us-east-1"]
    assert h100[-1] == {"devices": list(range(result.gpus, 8)), "mig-enabled": False}
    assert doc["mig-configs"]["h200-mixed"][2] == {"devices": [3], "mig-enabled": True, "mig-devices": {}}
    assert doc["mig-configs"]["h200-mixed"][1] == {"devices": [2], "mig-enabled": False}


def test_mig_parted_config_errors() -> None:
    lay = layout_for("H100", {"1g.10gb": 7})
    other = layout_for("A100-40GB", {"1g.5gb": 7})
    assert lay is not None and other is not None
    assert mig_parted_config({"p": [(lay, 4)]}, gpus_per_node=4)["mig-configs"]["p"] == [
        {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}
    ]
    with pytest.raises(ValueError, match="more than 8"):
        mig_parted_config({"p": [(lay, 5), (lay, 4)]})
    with pytest.raises(ValueError, match="label"):
        mig_parted_config({"bad name": [(lay, 1)]})
    with pytest.raises(ValueError, match="mixes"):
        mig_parted_config({"p": [(lay, 1), (other, 1)]})
    with pytest.raises(ValueError, match=">= 0"):
        mig_parted_config({"p": [(lay, -1)]})


def test_mig_parted_config_per_node_size_and_all_disabled() -> None:
    """Configs of nodes with different GPU counts in one document: each lists exactly its node's GPUs;
    ``all-disabled`` (mig-parted's stock name) turns MIG off on every GPU of any node."""
    lay = layout_for("H100", {"1g.10gb": 7})
    assert lay is not None
    doc = mig_parted_config(
        {"one": [(lay, 1)], "eight": [(lay, 2)]}, {"one": 1, "eight": 8}, all_disabled=True
    )
    assert doc["mig-configs"]["one"] == [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    assert doc["mig-configs"]["eight"][-1] == {"devices": list(range(2, 8)), "mig-enabled": False}
    assert doc["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    with pytest.raises(ValueError, match="more than 1"):
        mig_parted_config({"one": [(lay, 2)]}, {"one": 1})
    with pytest.raises(ValueError, match="reserved"):
        mig_parted_config({"all-disabled": [(lay, 1)]}, all_disabled=True)


def test_a_suffix_survives_a_long_name() -> None:
    assert with_suffix("aws-us-east-1-p5.48xlarge", "-2") == "aws-us-east-1-p5.48xlarge-2"
    long = with_suffix("a" * 70, "-12")
    assert long == "a" * 60 + "-12" and LABEL.match(long)


def test_config_name() -> None:
    assert config_name("H100 inference / us-east-1") == "H100-inference-us-east-1"
    assert config_name("--all-1g.10gb--") == "all-1g.10gb"
    assert config_name("_x_") == "x"
    assert config_name("ok_name.v1") == "ok_name.v1"
    long = config_name("a" * 62 + "-" + "b" * 10)
    assert long == "a" * 62 and len(long) <= 63
    with pytest.raises(ValueError):
        config_name("---")
    with pytest.raises(ValueError):
        config_name("")
    rng = random.Random(9)
    alphabet = "aZ09-_.:/ é\t"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 90)))
        try:
            name = config_name(text)
        except ValueError:
            assert not re.search(r"[A-Za-z0-9]", text)
            continue
        assert LABEL.match(name), (text, name)
        assert config_name(name) == name
