"""MIG profile tables (FACTS.md 4.1/4.2) and the replica-fitting helpers."""

from __future__ import annotations

import math

import pytest

from models.mig import (
    COMPUTE_SLICES,
    GPU_MEMORY_GB,
    MEMORY_SLICES,
    MIG_PROFILES,
    MigProfile,
    replicas_per_gpu,
    smallest_profile,
    supports_mig,
)

CANONICAL = {"A100-40GB", "A100-80GB", "H100", "H100-NVL", "H200", "B200"}


def _max_disjoint(profile: MigProfile) -> int:
    """Most non-overlapping placements [start, start + memory_slices) among the valid starts (greedy)."""
    count, free_from = 0, 0
    for start in sorted(profile.valid_starts):
        if start >= free_from:
            count, free_from = count + 1, start + profile.memory_slices
    return count


def test_tabled_models() -> None:
    assert set(MIG_PROFILES) == CANONICAL
    assert set(GPU_MEMORY_GB) == CANONICAL


@pytest.mark.parametrize("model", sorted(CANONICAL))
def test_table_sanity(model: str) -> None:
    profiles = MIG_PROFILES[model]
    per_slice = GPU_MEMORY_GB[model] / MEMORY_SLICES
    assert [p.memory_slices for p in profiles] == sorted(p.memory_slices for p in profiles)
    assert profiles == tuple(sorted(profiles, key=lambda p: (p.memory_slices, p.compute_slices)))
    assert len({p.name for p in profiles}) == len(profiles)
    for p in profiles:
        assert p.gpu_model == model
        assert p.name.startswith(f"{p.compute_slices}g.")
        assert p.name == f"{p.compute_slices}g.{p.memory_gb:g}gb"
        # nominal sizes are the slice share rounded in NVIDIA's names (e.g. 94/8 = 11.75 -> 12)
        assert p.memory_gb == pytest.approx(p.memory_slices * per_slice, abs=1.0)
        assert 1 <= p.compute_slices <= COMPUTE_SLICES
        assert 1 <= p.memory_slices <= MEMORY_SLICES
        assert all(s >= 0 and s + p.memory_slices <= MEMORY_SLICES for s in p.valid_starts)
        assert p.max_instances == min(_max_disjoint(p), COMPUTE_SLICES // p.compute_slices)
        assert p.max_instances * p.compute_slices <= COMPUTE_SLICES
        assert p.max_instances * p.memory_slices <= MEMORY_SLICES
    whole = profiles[-1]
    assert (whole.compute_slices, whole.memory_slices, whole.memory_gb) == (7, 8, GPU_MEMORY_GB[model])
    assert [p.max_instances for p in profiles] == [7, 4, 3, 2, 1, 1]


def test_profile_names_match_the_guide() -> None:
    names = {model: [p.name for p in profiles] for model, profiles in MIG_PROFILES.items()}
    assert names["H100"] == ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    assert names["A100-40GB"] == ["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]
    assert names["H100-NVL"][0] == "1g.12gb"
    assert names["H200"][-1] == "7g.141gb"
    assert names["B200"][:2] == ["1g.23gb", "1g.45gb"]
    p = MIG_PROFILES["H100"][1]
    assert (p.compute_fraction, p.memory_fraction) == (pytest.approx(1 / 7), 0.25)


def test_supports_mig() -> None:
    for model in CANONICAL:
        assert supports_mig(model)
    assert supports_mig("h100")
    for model in ("A10G", "L4", "L40S", "T4", ""):
        assert not supports_mig(model)


@pytest.mark.parametrize(
    ("model", "memory_gb", "expected"),
    [
        ("H100", 9.0, "1g.10gb"),
        ("H100", 10.0, "1g.10gb"),
        ("H100", 16.0, "1g.20gb"),  # FACTS 6: Llama-3.1-8B BF16
        ("H100", 21.0, "3g.40gb"),
        ("H100", 70.0, "7g.80gb"),
        ("H100", 90.0, None),
        # 1g.10gb and 2g.10gb both take 2 memory slices; fewer compute slices wins.
        ("A100-40GB", 9.0, "1g.10gb"),
        ("A100-40GB", 4.0, "1g.5gb"),
        ("H200", 9.0, "1g.18gb"),  # FACTS 6: Llama-3.1-8B FP8
        ("H200", 130.0, "7g.141gb"),
        ("H100-NVL", 46.0, "3g.47gb"),
        ("B200", 40.0, "1g.45gb"),
        ("L4", 9.0, None),
        ("A10G", 1.0, None),
    ],
)
def test_smallest_profile(model: str, memory_gb: float, expected: str | None) -> None:
    profile = smallest_profile(model, memory_gb)
    assert (profile.name if profile else None) == expected


def test_smallest_profile_a100_40gb_tie_break() -> None:
    profile = smallest_profile("A100-40GB", 9.0)
    assert profile is not None
    assert (profile.compute_slices, profile.memory_slices, profile.max_instances) == (1, 2, 4)


def test_smallest_profile_with_compute_fraction() -> None:
    assert smallest_profile("H100", 9.0, compute_fraction=0.2).name == "2g.20gb"  # type: ignore[union-attr]
    assert smallest_profile("H100", 9.0, compute_fraction=3 / 7).name == "3g.40gb"  # type: ignore[union-attr]
    assert smallest_profile("H100", 9.0, compute_fraction=0.5).name == "4g.40gb"  # type: ignore[union-attr]
    assert smallest_profile("H100", 9.0, compute_fraction=1.0).name == "7g.80gb"  # type: ignore[union-attr]
    assert smallest_profile("H100", 50.0, compute_fraction=0.1).name == "7g.80gb"  # type: ignore[union-attr]
    assert smallest_profile("L40S", 9.0, compute_fraction=0.1) is None


@pytest.mark.parametrize(
    ("model", "gpu_gb", "replica_gb", "expected"),
    [
        ("H100", 80.0, 9.0, 7.0),
        ("H100", 80.0, 16.0, 4.0),
        ("H100", 80.0, 30.0, 2.0),
        ("H100", 80.0, 70.0, 1.0),
        ("H100", 80.0, 90.0, 0.5),
        ("H100", 80.0, 200.0, 1 / 3),
        ("A100-40GB", 40.0, 9.0, 4.0),
        ("L4", 24.0, 9.0, 1.0),
        ("L4", 24.0, 24.0, 1.0),
        ("L4", 24.0, 60.0, 1 / 3),
        ("L40S", 48.0, 60.0, 0.5),
    ],
)
def test_replicas_per_gpu(model: str, gpu_gb: float, replica_gb: float, expected: float) -> None:
    assert replicas_per_gpu(model, gpu_gb, replica_gb) == pytest.approx(expected, rel=1e-12)


def test_invalid_inputs() -> None:
    with pytest.raises(ValueError, match="memory_gb"):
        smallest_profile("H100", -1.0)
    with pytest.raises(ValueError, match="compute_fraction"):
        smallest_profile("H100", 1.0, compute_fraction=1.5)
    with pytest.raises(ValueError, match="replica_memory_gb"):
        replicas_per_gpu("L4", 24.0, 0.0)
    with pytest.raises(ValueError, match="gpu_memory_gb"):
        replicas_per_gpu("L4", math.nan, 1.0)
