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

Placement rules: instances may not overlap in ``[start, start + memory_slices)`` and their compute slices
sum to at most 7 (``COMPUTE_SLICES``). ``max_instances`` is the largest homogeneous layout, i.e. the most
disjoint placements allowed by ``valid_starts`` and the compute budget. With these start slots the compute
budget never binds (no 1-slice 1g at slice 7), but it is still checked. ``valid_layouts`` and
``maximal_layouts`` enumerate what fits on one GPU; packing a demand onto GPUs (a solve) and writing the
mig-parted config are on the planner side, in ``planner.planning.mig.packing`` and
``planner.planning.mig.config``.

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

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from models import catalog

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

GPU_MEMORY_GB: dict[str, float] = {model: catalog.GPU_MEMORY_GB[model] for model in _NAMES}
"""Whole-GPU memory of each MIG-capable model (the 7g profile's size; one table, in models/catalog.py)."""


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


def replica_slice(
    gpu_model: str, memory_gb: float | None, compute_fraction: float | None = None
) -> MigProfile | None:
    """The MIG slice one replica runs in on ``gpu_model``: the smallest profile holding it, unless that
    is the whole GPU (a 7g slice) or none fits or the replica is sized in GPUs (``memory_gb`` None):
    then it takes whole GPUs. The planner's sets, baselines, realization and MIG section all ask this."""
    if memory_gb is None:
        return None
    profile = smallest_profile(gpu_model, memory_gb, compute_fraction)
    return profile if profile is not None and profile.compute_slices < COMPUTE_SLICES else None


def replicas_per_gpu(
    gpu_model: str, gpu_memory_gb: float, replica_memory_gb: float, compute_fraction: float | None = None
) -> float:
    """How many replicas needing ``replica_memory_gb`` one GPU holds (a fraction if a replica spans GPUs).

    MIG GPU with a fitting profile (memory, and ``compute_fraction`` of the SMs if given): that profile's
    ``max_instances`` (homogeneous layout, e.g. 7 x 1g.10gb on H100). Otherwise a whole GPU per replica if
    it fits (1.0), else ``1 / ceil(replica / gpu)`` (0.5 for a replica spanning two GPUs).
    """
    if not math.isfinite(gpu_memory_gb) or gpu_memory_gb <= 0:
        raise ValueError(f"gpu_memory_gb must be a finite number > 0, got {gpu_memory_gb!r}")
    if not math.isfinite(replica_memory_gb) or replica_memory_gb <= 0:
        raise ValueError(f"replica_memory_gb must be a finite number > 0, got {replica_memory_gb!r}")
    profile = smallest_profile(gpu_model, replica_memory_gb, compute_fraction)
    if profile is not None:
        return float(profile.max_instances)
    if replica_memory_gb <= gpu_memory_gb:
        return 1.0
    return 1.0 / math.ceil(replica_memory_gb / gpu_memory_gb)


def canonical_model(gpu_model: str) -> str:
    """Canonical name of a MIG-capable model (``"h100"`` -> ``"H100"``), so caches key on one spelling.

    Raises ``ValueError`` for models without MIG, since a layout question about them has no answer.
    """
    model = _CANONICAL.get(gpu_model.strip().lower())
    if model is None:
        raise ValueError(f"{gpu_model!r} has no MIG profiles (MIG models: {', '.join(MIG_PROFILES)})")
    return model


def profile_named(gpu_model: str, name: str) -> MigProfile:
    """The profile ``name`` of ``gpu_model``; ``ValueError`` naming both if the model has no such profile."""
    model = canonical_model(gpu_model)
    for p in MIG_PROFILES[model]:
        if p.name == name:
            return p
    valid = ", ".join(p.name for p in MIG_PROFILES[model])
    raise ValueError(f"{model} has no MIG profile {name!r} (valid: {valid})")


# GPU layouts (FACTS 4.2): which sets of GPU instances can coexist on one GPU. Every tabled model shares the
# geometry, so the counts are the same for all: 723 legal placement sets, 78 valid profile multisets (the
# empty one included), 28 maximal multisets. The tests recount them with an independent brute force.


@dataclass(frozen=True, slots=True)
class Placement:
    """One GPU instance on a GPU: which profile, at which memory slice it starts (nvidia-smi placement)."""

    profile: str
    """Profile name, e.g. ``"3g.40gb"``."""
    start: int
    """First memory slice; the instance occupies ``[start, start + memory_slices)``."""


@dataclass(frozen=True, slots=True)
class Layout:
    """A legal partition of one GPU: the instances and where they sit.

    Built by ``valid_layouts`` with one canonical placement per profile multiset; constructing one by hand
    checks the placement rules (valid start, no overlap, compute slices <= 7) so an illegal layout can
    never reach a mig-parted config.
    """

    gpu_model: str
    placements: tuple[Placement, ...]
    """Instances sorted by start slice."""

    def __post_init__(self) -> None:
        model = canonical_model(self.gpu_model)
        placements = tuple(sorted(self.placements, key=lambda pl: pl.start))
        object.__setattr__(self, "gpu_model", model)
        object.__setattr__(self, "placements", placements)
        free_from, compute = 0, 0
        for pl in placements:
            p = profile_named(model, pl.profile)
            if pl.start not in p.valid_starts:
                raise ValueError(f"{model} {p.name} cannot start at slice {pl.start} (only {p.valid_starts})")
            if pl.start < free_from:
                raise ValueError(f"{model} layout overlaps at memory slice {pl.start}: {placements}")
            free_from, compute = pl.start + p.memory_slices, compute + p.compute_slices
        if compute > COMPUTE_SLICES:
            raise ValueError(f"{model} layout uses {compute} > {COMPUTE_SLICES} compute slices: {placements}")

    @property
    def counts(self) -> dict[str, int]:
        """Profile name -> instances, in table order (smallest profile first); a fresh dict each call."""
        vector = self.count_vector
        return {p.name: n for p, n in zip(MIG_PROFILES[self.gpu_model], vector, strict=True) if n}

    @property
    def count_vector(self) -> tuple[int, ...]:
        """Instances per profile in ``MIG_PROFILES[gpu_model]`` order: the multiset, as a hashable key."""
        names = [p.name for p in MIG_PROFILES[self.gpu_model]]
        vector = [0] * len(names)
        for pl in self.placements:
            vector[names.index(pl.profile)] += 1
        return tuple(vector)

    @property
    def instances(self) -> int:
        """Number of GPU instances."""
        return len(self.placements)

    @property
    def compute_slices(self) -> int:
        """SM slices used, out of 7."""
        return sum(profile_named(self.gpu_model, pl.profile).compute_slices for pl in self.placements)

    @property
    def memory_slices(self) -> int:
        """Memory slices used, out of 8."""
        return sum(profile_named(self.gpu_model, pl.profile).memory_slices for pl in self.placements)


_Chosen = tuple[tuple[int, int], ...]
"""A placement set as (profile index, start) pairs, start ascending."""


def _placement_sets(model: str) -> list[_Chosen]:
    """Every legal set of (profile index, start), by a left-to-right scan over memory slices.

    At each slice the scan either leaves it free or starts an instance there, so every placement set is
    produced exactly once (the tests compare with an independent subset brute force).
    """
    profiles = MIG_PROFILES[model]
    out: list[_Chosen] = []

    def scan(pos: int, compute: int, chosen: _Chosen) -> None:
        if pos >= MEMORY_SLICES:
            out.append(chosen)
            return
        scan(pos + 1, compute, chosen)
        for k, p in enumerate(profiles):
            if pos in p.valid_starts and compute + p.compute_slices <= COMPUTE_SLICES:
                scan(pos + p.memory_slices, compute + p.compute_slices, (*chosen, (k, pos)))

    scan(0, 0, ())
    return out


def _canonical_key(model: str, chosen: _Chosen) -> tuple[int, _Chosen]:
    """Left-packing preference: lowest highest-used slice first, then larger profiles at lower slices."""
    profiles = MIG_PROFILES[model]
    end = max((start + profiles[k].memory_slices for k, start in chosen), default=0)
    return end, tuple((start, -k) for k, start in chosen)


@functools.cache
def _layouts(model: str) -> tuple[Layout, ...]:
    profiles = MIG_PROFILES[model]
    chosen_by: dict[tuple[int, ...], _Chosen] = {}
    for chosen in _placement_sets(model):
        vector = [0] * len(profiles)
        for k, _start in chosen:
            vector[k] += 1
        key = tuple(vector)
        if key not in chosen_by or _canonical_key(model, chosen) < _canonical_key(model, chosen_by[key]):
            chosen_by[key] = chosen
    layouts = [
        Layout(model, tuple(Placement(profiles[k].name, start) for k, start in chosen))
        for chosen in chosen_by.values()
    ]
    return tuple(sorted(layouts, key=lambda lay: (lay.instances, lay.count_vector)))


def valid_layouts(gpu_model: str) -> tuple[Layout, ...]:
    """Every profile multiset that fits on one GPU, each with one canonical (left-packed) placement.

    Includes the empty layout (first). Sorted by number of instances, then by ``count_vector``. Cached per
    model. Every tabled model has 78 valid multisets (77 non-empty; from 723 legal placement sets), 28 of
    them maximal (``maximal_layouts``); e.g. on H100, 3 x 2g.20gb + 1g.10gb and 4g.40gb + 3g.40gb.

    Canonical placement ("left-packed"): among the legal placements of a multiset, the one whose highest
    used memory slice is lowest, then the one with larger profiles at lower slices. mig-parted places
    instances itself; the canonical placement only proves the multiset fits.
    """
    return _layouts(canonical_model(gpu_model))


@functools.cache
def _maximal(model: str) -> tuple[Layout, ...]:
    layouts = _layouts(model)
    valid = {lay.count_vector for lay in layouts}
    n = len(MIG_PROFILES[model])

    def grown(vector: tuple[int, ...], k: int) -> tuple[int, ...]:
        return tuple(c + (i == k) for i, c in enumerate(vector))

    return tuple(lay for lay in layouts if not any(grown(lay.count_vector, k) in valid for k in range(n)))


def maximal_layouts(gpu_model: str) -> tuple[Layout, ...]:
    """Layouts whose multiset cannot take one more instance of any profile (in any placement).

    Valid multisets are closed under removing instances, so every layout is contained in a maximal one:
    these are the only patterns packing needs. Cached per model; same order as ``valid_layouts``.
    """
    return _maximal(canonical_model(gpu_model))


@functools.cache
def _by_vector(model: str) -> dict[tuple[int, ...], Layout]:
    return {lay.count_vector: lay for lay in _layouts(model)}


def layout_for(gpu_model: str, counts: Mapping[str, int]) -> Layout | None:
    """The canonical layout holding exactly ``counts`` (profile name -> instances), or ``None`` if they
    cannot share one GPU; ``ValueError`` for an unknown profile or a negative count.
    """
    model = canonical_model(gpu_model)
    names = [p.name for p in MIG_PROFILES[model]]
    vector = [0] * len(names)
    for name, n in counts.items():
        profile_named(model, name)
        if n < 0:
            raise ValueError(f"instance count for {name} must be >= 0, got {n}")
        vector[names.index(name)] += n
    return _by_vector(model).get(tuple(vector))
