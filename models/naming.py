"""How gpuplan names and tags what it makes in a cloud: written once, for provision, the daemon and the
Terraform roots alike.

A resource is gpuplan's when it carries ``gpuplan-plan = <plan id>``; the pool and the run it serves are
tags too, never guessed from names. Names are :func:`safe_name` (every cloud's resource-name and
label-value rules at once), and client tokens are derived from what identifies an intent, so a retried
request creates nothing twice.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from models.tiers import CapacityType

__all__ = [
    "BY_PROVISION",
    "BY_TERRAFORM",
    "LABEL_CAPACITY",
    "SPOT_TAINT",
    "TAG_MANAGED_BY",
    "TAG_PLAN",
    "TAG_POOL",
    "TAG_RUN",
    "TAG_STANDS_IN",
    "client_token",
    "managed_by_terraform",
    "managed_tags",
    "parse_offering",
    "pool_name",
    "safe_name",
]

TAG_PLAN = "gpuplan-plan"
TAG_POOL = "gpuplan-pool"
TAG_RUN = "gpuplan-run"
#: On fallback nodes: the pool whose short nodes they stand in for (the daemon's capacity fallback).
TAG_STANDS_IN = "gpuplan-stands-in"
#: Who manages a resource: ``provision`` (gpuplan provision and the daemon) or ``terraform`` (a root that
#: ``gpuplan terraform`` wrote). Provision counts Terraform's nodes toward their pools but never
#: terminates, releases or deletes what Terraform manages; a resource without the tag is provision's.
TAG_MANAGED_BY = "gpuplan-managed-by"
BY_PROVISION = "provision"
BY_TERRAFORM = "terraform"

#: The Kubernetes node label that says how a node is paid for (``reserved``, ``owned``, ``on-demand``,
#: ``spot``): the Kueue export's flavors select on it and the Karpenter export's NodePools set it.
LABEL_CAPACITY = "gpuplan.io/capacity-type"
#: The taint gpuplan's spot nodes carry (both exports spell it from here, so they cannot drift apart).
SPOT_TAINT: dict[str, str] = {"key": LABEL_CAPACITY, "value": "spot", "effect": "NoSchedule"}


def managed_by_terraform(tags: Mapping[str, str]) -> bool:
    """Whether a resource with ``tags`` is a Terraform root's, which provision must leave alone."""
    return tags.get(TAG_MANAGED_BY) == BY_TERRAFORM


def parse_offering(offering: str) -> tuple[str, str, str]:
    """``cloud:region:instance_type`` -> its three parts (ValueError if it is not one)."""
    parts = offering.split(":")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"not an offering id (cloud:region:instance_type): {offering!r}")
    return parts[0], parts[1], parts[2]


_UNSAFE = re.compile(r"[^a-z0-9-]+")


def safe_name(text: str, limit: int = 63) -> str:
    """A name every cloud accepts as a resource name and a label value: lower-case letters, digits and
    ``-``, starting with a letter, at most ``limit`` characters (GCP's 63). Long names keep a hash of the
    whole so two long names never collide."""
    slug = _UNSAFE.sub("-", text.lower()).strip("-") or "x"
    if not slug[0].isalpha():
        slug = "g-" + slug
    if len(slug) <= limit:
        return slug
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return slug[: limit - 9].rstrip("-") + "-" + digest


def pool_name(offering: str, capacity: CapacityType) -> str:
    """The pool of ``offering``'s nodes bought on ``capacity``: ``aws-us-east-1-p5-48xlarge-spot``."""
    return safe_name(f"{offering}-{capacity.value}")


def managed_tags(
    plan_id: str, *, pool: str | None = None, run: str | None = None, stands_in: str | None = None
) -> dict[str, str]:
    """The tags (labels) that make a resource provision's; values are :func:`safe_name` so GCP accepts
    them."""
    tags = {TAG_PLAN: safe_name(plan_id), TAG_MANAGED_BY: BY_PROVISION}
    if pool is not None:
        tags[TAG_POOL] = pool
    if run is not None:
        tags[TAG_RUN] = run
    if stands_in is not None:
        tags[TAG_STANDS_IN] = stands_in
    return tags


def client_token(*parts: object) -> str:
    """A deterministic client token from what identifies an intent (plan id, pool, period, target):
    32 hex characters, within AWS's 64 and usable as GCP's requestId once formatted as a UUID."""
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:32]
