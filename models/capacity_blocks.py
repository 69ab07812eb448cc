"""Reservations of fixed duration bought for a training gang, as each cloud sells them: AWS Capacity Blocks
for ML and GCP calendar-mode future reservations (Dynamic Workload Scheduler). One rule set by cloud
(:class:`FixedReservation`): the durations sold, the most instances, how far ahead, the fee.

One file for the rules, so the planner (a block as a training tier, ``planner/planning/problem/sets.py``),
``gpuplan verify`` (the block re-billed) and provisioning (``planner/operations/capacity_blocks.py``, the
offers listed and bought) agree on what a block is. EC2 sells durations of 1 to 14 days in 1-day steps,
then 7-day steps up to 182 days, at most 64 instances per block (256 across an account's blocks), paid
upfront when bought, not cancellable (EC2 User Guide, "Capacity Blocks for ML",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html, and "Find and purchase
Capacity Blocks", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html; API
reference DescribeCapacityBlockOfferings ``CapacityDurationHours``). The fee of an offer is its
"effective instance hourly rate" times instances times the block's hours
(https://aws.amazon.com/ec2/capacityblocks/pricing/); the catalog holds that rate per offering
(``capacity_block_usd_h``), an estimate until an offer is listed.

GCP calendar mode: a future reservation for a fixed duration of 1 to 90 whole days, requested ahead for a
chosen start (availability shown up to 120 days ahead), not modifiable nor cancellable, its VMs deleted at
its end (https://cloud.google.com/compute/docs/instances/create-future-reservations-calendar-mode,
https://docs.cloud.google.com/tpu/docs/calendar-mode-reservation); the requested capacity is paid from the
reservation's start whatever the use (https://docs.cloud.google.com/compute/docs/hpc/reserve-capacity-account-team).
Its VMs are reservation-bound, priced as Dynamic Workload Scheduler prices them ("a discount up to 53%",
https://docs.cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig): the catalog's
``capacity_block_usd_h`` of a GCP offering is that rate (assumed 0.47 x on-demand, as flex-start's). No
per-request instance limit was found in Google's pages, so none is applied here. gpuplan counts its fee at
the reservation's start as a block's (cash: conservative, Google bills it as the reservation runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

__all__ = [
    "CAPACITY_BLOCK_ACCOUNT_MAX_NODES",
    "CAPACITY_BLOCK_AHEAD",
    "CAPACITY_BLOCK_DAYS",
    "CAPACITY_BLOCK_MAX_NODES",
    "CAPACITY_BLOCK_UNIT_HOURS",
    "FIXED_RESERVATIONS",
    "GCP_CALENDAR_DAYS",
    "FixedReservation",
    "block_duration_hours",
    "block_fee_usd",
    "why_no_block",
]

#: How far ahead EC2 sells Capacity Blocks (8 weeks), and the unit of their durations (whole days).
CAPACITY_BLOCK_AHEAD = timedelta(weeks=8)
CAPACITY_BLOCK_UNIT_HOURS = 24
#: The durations EC2 sells, in days: 1-14 in 1-day steps, then 21, 28, ... 182 in 7-day steps.
CAPACITY_BLOCK_DAYS: tuple[int, ...] = (*range(1, 15), *range(21, 183, 7))
#: The most instances one Capacity Block holds.
CAPACITY_BLOCK_MAX_NODES = 64
#: The most instances an account holds across its Capacity Blocks (EC2 User Guide, "Capacity Blocks for ML").
CAPACITY_BLOCK_ACCOUNT_MAX_NODES = 256


#: The durations GCP sells in calendar mode, in days: 1 to 90.
GCP_CALENDAR_DAYS: tuple[int, ...] = tuple(range(1, 91))


@dataclass(frozen=True, slots=True)
class FixedReservation:
    """A reservation of fixed duration a cloud sells for a gang: ``days`` it may last, at most ``max_nodes``
    instances (None: no limit known), bought up to ``ahead`` before it starts; its fee is a rate per
    instance-hour times instances times the sold hours, whatever the use."""

    cloud: str
    name: str
    days: tuple[int, ...]
    max_nodes: int | None
    ahead: timedelta
    limit_note: str = ""

    def duration_hours(self, hours: float) -> int | None:
        """The shortest duration sold that covers ``hours``, in hours; None when longer than the longest."""
        days = max(hours, 1e-9) / CAPACITY_BLOCK_UNIT_HOURS - 1e-9
        return next((sold * CAPACITY_BLOCK_UNIT_HOURS for sold in self.days if sold >= days), None)

    def why_not(self, nodes: int, hours: float) -> str | None:
        """Why no single reservation holds a gang of ``nodes`` for ``hours`` (None: one does)."""
        if self.max_nodes is not None and nodes > self.max_nodes:
            return f"{nodes} nodes: a {self.name} holds at most {self.max_nodes} instances{self.limit_note}"
        if self.duration_hours(hours) is None:
            return f"{hours:g} h: longer than the longest {self.name} ({self.days[-1]} days)"
        return None


#: AWS Capacity Blocks and GCP calendar-mode reservations, by cloud.
FIXED_RESERVATIONS: dict[str, FixedReservation] = {
    "aws": FixedReservation(
        "aws", "Capacity Block", CAPACITY_BLOCK_DAYS, CAPACITY_BLOCK_MAX_NODES, CAPACITY_BLOCK_AHEAD,
        f" (and an account at most {CAPACITY_BLOCK_ACCOUNT_MAX_NODES} across its blocks)",
    ),
    "gcp": FixedReservation("gcp", "calendar-mode reservation", GCP_CALENDAR_DAYS, None, timedelta(days=120)),
}  # fmt: skip


def _rules(cloud: str) -> FixedReservation:
    found = FIXED_RESERVATIONS.get(cloud)
    if found is None:
        raise ValueError(f"{cloud} sells no reservation of fixed duration for a gang")
    return found


def block_duration_hours(hours: float, cloud: str = "aws") -> int | None:
    """The shortest duration ``cloud`` sells that covers ``hours``, in hours (AWS: 720 h, 30 days: 840 h, 35
    days); None when the run is longer than the longest (AWS 182 days, GCP 90)."""
    return _rules(cloud).duration_hours(hours)


def why_no_block(nodes: int, hours: float, cloud: str = "aws") -> str | None:
    """Why no single block (``cloud``'s reservation of fixed duration) holds a gang of ``nodes`` for
    ``hours`` (None: one does)."""
    return _rules(cloud).why_not(nodes, hours)


def block_fee_usd(rate_usd_h: float, nodes: int, hours: float, cloud: str = "aws") -> float:
    """The fee of the block a gang of ``nodes`` running ``hours`` needs: the rate per instance-hour times
    instances times the sold duration covering ``hours``. ValueError where no single block holds the gang
    (:func:`why_no_block`): callers check first."""
    why = why_no_block(nodes, hours, cloud)
    sold = block_duration_hours(hours, cloud)
    if why is not None or sold is None:
        raise ValueError(why or "no duration sold covers the run")
    return rate_usd_h * nodes * sold
