"""The purchase vocabulary, in one place: tiers a node is paid on, commitment terms, and the model's
capacity kinds. Every module spells these through this file, never as bare strings or integers.

- :class:`Tier` is what a plan's rows and costs say a node-hour was paid on (``plan.json``,
  ``allocations.csv``); ``owned`` is the colocation tier (own servers, amortized).
- :class:`Term` is how long a commitment binds: ``1y`` and ``3y`` cloud commitments, ``owned``
  servers for their depreciation life, and a capacity ``reservation`` until the end date it was
  made with (scenarios enter these as existing commitments; the plan never buys one).
- :class:`Capacity` is what the planning model decides between for a node: non-spot, spot, or (a
  training gang only) an AWS Capacity Block bought for the run or GCP flex-start VMs (issue 38). Non-spot
  nodes of an offering are billed the way clouds bill them: its committed nodes (1y, 3y and owned
  together) cover any non-spot node of that offering running in that hour, inference or training,
  and only the nodes beyond them are paid on demand.

All three are ``StrEnum``: a member *is* its string (``Tier.SPOT == "spot"``), so values read from
JSON or CSV compare equal to members and the files stay as the contract spells them.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CLOUD_TERMS",
    "COMMITTED_TIERS",
    "HOURS_PER_MONTH",
    "HOURS_PER_YEAR",
    "OWN_NODE_TIERS",
    "PREPAID_TIERS",
    "TERM_TIER",
    "TIER_ORDER",
    "Capacity",
    "CapacityType",
    "Term",
    "Tier",
]

HOURS_PER_YEAR = 8760
#: A billing month as the clouds count it (8,760 h / 12); the unit of monthly charts and of
#: depreciation lives.
HOURS_PER_MONTH = 730.0


class Tier(StrEnum):
    """What a node-hour is paid on."""

    RESERVED_1Y = "reserved_1y"
    RESERVED_3Y = "reserved_3y"
    OWNED = "owned"
    CAPACITY_RESERVATION = "capacity_reservation"
    SAVINGS_PLAN = "savings_plan"
    CAPACITY_BLOCK = "capacity_block"
    FLEX_START = "flex_start"
    ON_DEMAND = "on_demand"
    SPOT = "spot"

    @property
    def committed(self) -> bool:
        """Committed *nodes*, paid for the whole term whether used or not (its allocation rows cost 0).
        Not a savings plan: its rows cost 0 too, but it commits dollars per hour, not nodes
        (:data:`PREPAID_TIERS`)."""
        return self in COMMITTED_TIERS

    @property
    def prepaid(self) -> bool:
        """Paid by a commitment whether used or not, nodes or dollars per hour: its rows cost 0."""
        return self in PREPAID_TIERS


class Term(StrEnum):
    """How long a commitment binds."""

    ONE_YEAR = "1y"
    THREE_YEARS = "3y"
    OWNED = "owned"
    RESERVATION = "reservation"

    @property
    def tier(self) -> Tier:
        return TERM_TIER[self]

    @property
    def years(self) -> int | None:
        """Years of a cloud commitment; None for owned servers (their life is the colocation's) and
        capacity reservations (they end when they were made to)."""
        return {Term.ONE_YEAR: 1, Term.THREE_YEARS: 3}.get(self)


class Capacity(StrEnum):
    """The planning model's choice for a node: non-spot (committed first, on demand beyond), spot, a
    Capacity Block (training gangs only: its nodes are the block's, paid upfront for its sold hours) or GCP
    flex-start (training gangs only: VMs Dynamic Workload Scheduler grants after a start delay, at most 7
    days, paid per hour at the flex-start rate: ``models/flex_start.py``)."""

    NON_SPOT = "non_spot"
    SPOT = "spot"
    BLOCK = "capacity_block"
    FLEX = "flex_start"

    @property
    def own_cost(self) -> bool:
        """Priced on its own, not through an offering's pool of committed and on-demand nodes: spot
        nodes, and a Capacity Block (a training gang's reservation, paid upfront, outside the offering's
        capacity limit: ``models/capacity_blocks.py``)."""
        return self != Capacity.NON_SPOT

    @property
    def own_nodes(self) -> bool:
        """Nodes of their own, outside the offering's pool of committed and on-demand nodes and its
        ``max_nodes``: a Capacity Block's (a reservation bought for the gang) and flex-start VMs (granted by
        Dynamic Workload Scheduler from its own capacity, on the preemptible quota). One rule for both, so
        every layer that leaves block nodes out of the pool leaves flex-start nodes out too."""
        return self in (Capacity.BLOCK, Capacity.FLEX)

    @property
    def tier(self) -> Tier:
        """The plan's tier of an own-cost kind (spot, capacity_block, flex_start); a non-spot node's tier
        depends on the commitments covering it (the billing rule), so it has none here."""
        if self == Capacity.NON_SPOT:
            raise ValueError("a non-spot node's tier depends on the commitments that cover it")
        return Tier(self.value)


class CapacityType(StrEnum):
    """How a node is bought from the cloud (Karpenter's capacity type), which provisioning acts on; not
    :class:`Capacity`, the planning model's non-spot / spot. Reserved and committed tiers are billing
    constructs over on-demand nodes (RIs, savings plans, CUDs and Azure reservations discount on-demand
    usage), so they launch ``on-demand``; a capacity reservation is a separate resource nodes launch into."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"


TERM_TIER: dict[Term, Tier] = {
    Term.ONE_YEAR: Tier.RESERVED_1Y,
    Term.THREE_YEARS: Tier.RESERVED_3Y,
    Term.OWNED: Tier.OWNED,
    Term.RESERVATION: Tier.CAPACITY_RESERVATION,
}
#: The terms a scenario may buy from a cloud (``purchase.terms``); owned servers come with its
#: ``colocation`` section instead.
CLOUD_TERMS: tuple[Term, ...] = (Term.ONE_YEAR, Term.THREE_YEARS)
#: Tiers paid for their whole window whether used or not: commitments, capacity reservations and
#: owned nodes.
COMMITTED_TIERS: tuple[Tier, ...] = (
    Tier.OWNED,
    Tier.RESERVED_3Y,
    Tier.RESERVED_1Y,
    Tier.CAPACITY_RESERVATION,
)
#: Tiers whose allocation rows cost 0 because a commitment pays for them: the node commitments and
#: savings plans (a commitment of dollars per hour that covers on-demand nodes at its rates each hour,
#: ``models/savingsplans.py``). Savings plans are not in :data:`COMMITTED_TIERS`: every user of that
#: (committed nodes per offering, the billing rule, pools, chargeback of node commitments) counts nodes.
PREPAID_TIERS: tuple[Tier, ...] = (*COMMITTED_TIERS, Tier.SAVINGS_PLAN)
#: The order tiers are shown in (cheapest commitment first, spot last).
TIER_ORDER: tuple[Tier, ...] = (
    Tier.OWNED, Tier.RESERVED_3Y, Tier.RESERVED_1Y, Tier.CAPACITY_RESERVATION, Tier.SAVINGS_PLAN,
    Tier.CAPACITY_BLOCK, Tier.FLEX_START, Tier.ON_DEMAND, Tier.SPOT,
)  # fmt: skip
#: Tiers whose nodes are their own (:attr:`Capacity.own_nodes`): never in an offering's pool, never covered
#: by its commitments or savings plans.
OWN_NODE_TIERS: tuple[Tier, ...] = (Tier.CAPACITY_BLOCK, Tier.FLEX_START)
