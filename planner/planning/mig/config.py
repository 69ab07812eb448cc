"""The NVIDIA mig-parted / GPU Operator config that creates a plan's MIG layouts (FACTS.md 4.3).

A node picks its config with the label ``nvidia.com/mig.config=<name>``, so names go through
``config_name``. The layouts come from ``planner.planning.mig.packing`` and
``planner.planning.mig.schedule``; this module
only writes them down. ``ALL_DISABLED`` is mig-parted's own name for "MIG off on every GPU".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from models.mig import Layout

ALL_DISABLED = "all-disabled"
"""The config of nodes without MIG (mig-parted's stock name, ``devices: all``)."""

_LABEL_OK = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


def config_name(text: str) -> str:
    """``text`` made into a valid Kubernetes label value, since nodes select a config by label.

    Runs of other characters become ``-``; leading/trailing ``-``, ``_`` and ``.`` are dropped; the result
    is cut to 63 characters. ``ValueError`` if nothing alphanumeric is left.
    """
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")
    name = name[:63].rstrip("-_.")
    if not name:
        raise ValueError(f"cannot make a config name out of {text!r}")
    return name


def with_suffix(name: str, suffix: str) -> str:
    """``name`` + ``suffix`` (e.g. ``-2``) as a valid label value: the name is cut, never the suffix."""
    return config_name(name[: 63 - len(suffix)].rstrip("-_.") + suffix)


def mig_parted_config(
    pools: Mapping[str, Sequence[tuple[Layout | None, int]]],
    gpus_per_node: int | Mapping[str, int] = 8,
    all_disabled: bool = False,
) -> dict[str, Any]:
    """The mig-parted / GPU Operator ``mig-configs`` document, one entry per named config.

    ``pools`` maps a config name (a valid label value, see ``config_name``) to the layout of ONE node, as
    (layout, number of GPUs) pairs: GPU indices are handed out in order from 0, so ``[(a, 5), (b, 3)]``
    gives devices 0-4 layout ``a`` and 5-7 layout ``b``. ``None`` as a layout, and every index past the
    listed GPUs up to the node's GPUs (``gpus_per_node``: one count, or one per config name), means MIG
    disabled (whole GPU). An empty layout enables MIG with no instances. All layouts of a config must be
    of one GPU model. ``all_disabled`` adds ``ALL_DISABLED`` (every GPU MIG off), so a node that carried
    a config can be switched back with this document alone.

    ``ValueError`` for an invalid or reserved name, more GPUs than the node has, a negative count or
    mixed models. The result is plain data for ``yaml.safe_dump``.
    """
    configs: dict[str, list[dict[str, Any]]] = {}
    for name, groups in pools.items():
        if not _LABEL_OK.match(name):
            raise ValueError(f"config name {name!r} is not a valid label value; use config_name()")
        if all_disabled and name == ALL_DISABLED:
            raise ValueError(f"config name {name!r} is reserved for the all-MIG-off config")
        node_gpus = gpus_per_node if isinstance(gpus_per_node, int) else gpus_per_node[name]
        if node_gpus < 1:
            raise ValueError(f"gpus_per_node must be >= 1, got {node_gpus}")
        models = {layout.gpu_model for layout, _ in groups if layout is not None}
        if len(models) > 1:
            raise ValueError(f"config {name!r} mixes GPU models {sorted(models)}")
        entries: list[dict[str, Any]] = []
        index = 0
        for layout, n in groups:
            if n < 0:
                raise ValueError(f"config {name!r}: GPU count must be >= 0, got {n}")
            if n == 0:
                continue
            if index + n > node_gpus:
                raise ValueError(f"config {name!r} lays out more than {node_gpus} GPUs")
            devices = list(range(index, index + n))
            index += n
            if layout is None:
                entries.append({"devices": devices, "mig-enabled": False})
            else:
                entries.append({"devices": devices, "mig-enabled": True, "mig-devices": layout.counts})
        if index < node_gpus:
            entries.append({"devices": list(range(index, node_gpus)), "mig-enabled": False})
        configs[name] = entries
    if all_disabled:
        configs[ALL_DISABLED] = [{"devices": "all", "mig-enabled": False}]
    return {"version": "v1", "mig-configs": configs}
