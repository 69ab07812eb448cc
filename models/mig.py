"""Multi-Instance GPU (MIG) profiles, so small inference replicas can be packed several to a GPU.

Sources (FACTS.md section 4): NVIDIA MIG User Guide v580, "Supported MIG profiles", Tables 6-9
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html), and
``NVIDIA/mig-parted`` ``deployments/systemd/config-default.yaml`` (HEAD bd7160f4) for the H100 NVL names.

Geometry shared by A100, H100, H100 NVL, H200 and B200: 8 memory slices (each 1/8 of memory and bandwidth)
and 7 SM (compute) slices; at most 7 GPU instances. A profile ``<g>g.<N>gb`` takes ``g`` compute slices and
a fixed number of memory slices, and may only start at certain memory-slice indices (``nvidia-smi mig
-lgipp``, guide section on placements; FACTS 4.2):

=====================  =============  ===============  ============
profile class          memory slices  valid starts     max per GPU
=====================  =============  ===============  ============
1g (1 memory slice)    1              0..6             7
1g (2 memory slices)   2              0, 2, 4, 6       4
2g                     2              0, 2, 4          3
3g                     4              0, 4             2
4g                     4              0                1
7g                     8              0                1
=====================  =============  ===============  ============

Placement rules for the later packing work: instances may not overlap in ``[start, start + memory_slices)``
and their compute slices sum to at most 7 (``COMPUTE_SLICES``). ``max_instances`` is the largest
homogeneous layout, i.e. the most disjoint placements allowed by ``valid_starts`` and the compute budget.

Choices made here:

* Canonical GPU names: ``A100-40GB``, ``A100-80GB``, ``H100`` (the 80 GB SXM/PCIe part), ``H100-NVL`` (94 GB;
  same table as the H100 SXM 94 GB), ``H200`` (141 GB), ``B200`` (180 GB). Lookup is case-insensitive.
  Every other model (A10G, L4, L40S, ...) has no MIG.
* ``memory_gb`` is the nominal size in the profile name (``1g.10gb`` -> 10). The usable memory can be a
  little lower, so callers keep their own headroom (e.g. vLLM's ``gpu_memory_utilization``, FACTS 6).
* The ``+me`` (media extension) variants are left out: they have the same slices as the plain 1g profile,
  only one is allowed per GPU, and the planner has no use for NVDEC/JPEG/OFA.
* GH200 (H100-96GB), A30, B300 and RTX PRO 6000 are not tabled yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MEMORY_SLICES = 8
"""Memory slices per GPU (each ~1/8 of the memory and bandwidth)."""
COMPUTE_SLICES = 7
"""SM slices per GPU in MIG mode; also the most instances a GPU holds."""


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of one GPU model, with what packing needs: slices and legal start slots."""

    name: str
    """NVIDIA profile name, e.g. ``"1g.10gb"``; stable across drivers (profile IDs are not)."""
    gpu_model: str
    """Canonical GPU model name, e.g. ``"H100"``."""
    compute_slices: int
    """SM slices (the ``g`` in the name), out of 7."""
    memory_slices: int
    """Memory slices, out of 8; also the placement width."""
    memory_gb: float
    """Nominal memory in GB, as in the profile name."""
    max_instances: int
    """Most instances of this profile on one GPU (homogeneous layout)."""
    valid_starts: tuple[int, ...]
    """Memory-slice indices where an instance of this profile may start."""

    @property
    def compute_fraction(self) -> float:
        """Share of the GPU's SMs (g / 7)."""
        return self.compute_slices / COMPUTE_SLICES

    @property
    def memory_fraction(self) -> float:
        """Share of the GPU's memory and memory bandwidth (slices / 8)."""
        return self.memory_slices / MEMORY_SLICES


# (compute slices, memory slices, max instances, valid starts) per profile class, smallest first.
_GEOMETRY: tuple[tuple[int, int, int, tuple[int, ...]], ...] = (
    (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
    (1, 2, 4, (0, 2, 4, 6)),
    (2, 2, 3, (0, 2, 4)),
    (3, 4, 2, (0, 4)),
    (4, 4, 1, (0,)),
    (7, 8, 1, (0,)),
)

# Profile names per GPU model, in the order of _GEOMETRY (guide Tables 6-9; mig-parted for H100 NVL).
_NAMES: dict[str, tuple[str, ...]] = {
    "A100-40GB": ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100-80GB": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-NVL": ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    "H200": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "B200": ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
}

GPU_MEMORY_GB: dict[str, float] = {
    "A100-40GB": 40.0,
    "A100-80GB": 80.0,
    "H100": 80.0,
    "H100-NVL": 94.0,
    "H200": 141.0,
    "B200": 180.0,
}
"""Whole-GPU memory of each MIG-capable model (the 7g profile's size)."""


def _build_profiles() -> dict[str, tuple[MigProfile, ...]]:
    profiles: dict[str, tuple[MigProfile, ...]] = {}
    for model, names in _NAMES.items():
        rows = []
        for name, (compute, memory, max_instances, starts) in zip(names, _GEOMETRY, strict=True):
            memory_gb = float(name.split(".")[1].removesuffix("gb"))
            rows.append(MigProfile(name, model, compute, memory, memory_gb, max_instances, starts))
        profiles[model] = tuple(rows)
    return profiles


MIG_PROFILES: dict[str, tuple[MigProfile, ...]] = _build_profiles()
"""Canonical GPU model -> its MIG profiles, smallest first (by memory slices, then compute slices)."""

_CANONICAL = {model.lower(): model for model in MIG_PROFILES}


def _profiles(gpu_model: str) -> tuple[MigProfile, ...]:
    return MIG_PROFILES.get(_CANONICAL.get(gpu_model.strip().lower(), ""), ())


def supports_mig(gpu_model: str) -> bool:
    """Whether the model can be partitioned with MIG (A10G, L4, L40S and unknown models cannot)."""
    return bool(_profiles(gpu_model))


def smallest_profile(
    gpu_model: str, memory_gb: float, compute_fraction: float | None = None
) -> MigProfile | None:
    """Smallest profile holding ``memory_gb`` (and ``compute_fraction`` of the SMs, if given).

    "Smallest" is fewest memory slices, then fewest compute slices, so the leftover GPU stays as large as
    possible. ``None`` if the GPU has no MIG or no profile is big enough.
    """
    if not math.isfinite(memory_gb) or memory_gb < 0:
        raise ValueError(f"memory_gb must be a finite number >= 0, got {memory_gb!r}")
    if compute_fraction is not None and not 0.0 <= compute_fraction <= 1.0:
        raise ValueError(f"compute_fraction must be in [0, 1], got {compute_fraction!r}")
    candidates = [
        p
        for p in _profiles(gpu_model)
        if p.memory_gb >= memory_gb
        # compare g/7 >= f as g >= 7f with a little slack so f = 3/7 admits 3g despite rounding
        and (compute_fraction is None or p.compute_slices >= compute_fraction * COMPUTE_SLICES - 1e-9)
    ]
    return min(candidates, key=lambda p: (p.memory_slices, p.compute_slices), default=None)


def replicas_per_gpu(gpu_model: str, gpu_memory_gb: float, replica_memory_gb: float) -> float:
    """How many replicas needing ``replica_memory_gb`` one GPU holds (a fraction if a replica spans GPUs).

    MIG GPU with a fitting profile: that profile's ``max_instances`` (homogeneous layout, e.g. 7 x 1g.10gb
    on H100). Otherwise a whole GPU per replica if it fits (1.0), else ``1 / ceil(replica / gpu)`` (0.5 for a
    replica spanning two GPUs).
    """
    if not math.isfinite(gpu_memory_gb) or gpu_memory_gb <= 0:
        raise ValueError(f"gpu_memory_gb must be a finite number > 0, got {gpu_memory_gb!r}")
    if not math.isfinite(replica_memory_gb) or replica_memory_gb <= 0:
        raise ValueError(f"replica_memory_gb must be a finite number > 0, got {replica_memory_gb!r}")
    profile = smallest_profile(gpu_model, replica_memory_gb)
    if profile is not None:
        return float(profile.max_instances)
    if replica_memory_gb <= gpu_memory_gb:
        return 1.0
    return 1.0 / math.ceil(replica_memory_gb / gpu_memory_gb)
