"""What ``gpuplan verify`` found: violations grouped by a stable kind code, each kind with its count and
its first few examples (a broken plan can break one rule in every one of 8,760 periods; a report that
listed them all would hide the other kinds).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, Field

__all__ = ["KINDS", "Findings", "KindSummary", "VerifyReport", "Violation"]

#: Every violation kind, in the order reports list them, with what it means. Codes are stable: scripts
#: and tests match on them.
KINDS: dict[str, str] = {
    # the files
    "plan-header": "plan.json's scenario name or horizon differ from the scenario",
    "missing-replicas-column": "allocations.csv has no integer replicas column (a plan written before it)",
    "row-identity": "a row with an unknown workload, a wrong kind or team, an unknown tier, a period "
    "outside the horizon, negative or missing numbers, or a duplicate (period, offering, tier, workload, "
    "commitment)",
    "unknown-offering": "a row, commitment or training run on an offering the scenario may not buy",
    "gpus-column": "a row's gpus differ from nodes x the offering's GPUs per node",
    "tier-unavailable": "a row or commitment on a tier its offering does not sell (or the scenario does "
    "not allow)",
    "tier-uncommitted": "a row on a committed tier (reserved_1y/3y, owned) with no commitment of that term "
    "on its offering",
    # inference
    "ineligible-offering": "work on an offering it cannot use: GPU model not among its gpu_models, more "
    "GPUs per replica or per gang node than the node has, a replica that fits no MIG slice or GPU",
    "spot-latency": "a latency-critical service on spot",
    "fractional-replicas": "an inference row whose replicas are not a whole number >= 0",
    "demand": "a service has fewer replicas than its demand in a period, and it is not listed unserved",
    "unserved-understated": "a service listed unserved misses more replica-hours than listed",
    # billing and capacity
    "fractional-nodes": "the non-spot (or spot) nodes of an offering in a period are not a whole number",
    "billing-committed-first": "committed rows do not sum to min(N, C) or on-demand rows to max(0, N - C) "
    "(N held non-spot nodes, C committed nodes): commitments cover first, on-demand only the excess",
    "owned-before-delivery": "work on owned nodes in a period where none is delivered or held yet",
    "max-nodes": "held nodes (non-spot + spot + idle committed) or commitments above the offering's "
    "max_nodes",
    "packing": "the period's work does not fit on the whole nodes held: gangs on whole nodes, whole-GPU "
    "replicas on one node, MIG slices in legal layouts",
    "mig-config": "the MIG configs plan.json schedules for a pool in a period (mig-config.yaml's layouts) "
    "do not hold its MIG replicas, are not legal layouts of every GPU, are on more nodes than the plan "
    "holds, leave too few MIG-off GPUs for its whole-GPU replicas, or mig-config.yaml is missing or "
    "differs from plan.json",
    # money
    "cost-row": "a row's cost_usd differs from nodes x the tier's price x period hours (0 on committed "
    "tiers)",
    "commitment-rate": "a commitment's usd_per_node_hour differs from the catalog's rate for its term (a "
    "held one: the rate the scenario gives, else the catalog's; a capacity reservation: on demand)",
    "commitment-cost": "a commitment's cost_in_horizon_usd differs from nodes x rate x its hours inside the "
    "horizon",
    "payment": "a purchase's payment option (partial, all upfront) not sold by the catalog for its term, or "
    "its upfront_usd or hourly_usd other than the catalog's (a held one: paid by the hour); a savings plan's "
    "upfront_usd other than its payment's share of its whole commitment",
    "upfront-cap": "upfront fees of the purchases starting in one calendar month or quarter above "
    "purchase.max_upfront_usd",
    "cash-month": "costs.cash_by_month differs from its months re-counted: rows and commitments charged to "
    "their hours (amortized), fees in the month a purchase starts, hourly charges as they run",
    "existing-commitment": "a commitment the scenario holds is missing from the plan or differs from it "
    "(offering, term, nodes, start, end), or one marked existing that the scenario does not hold",
    "commitment-start": "a purchase that does not start at a purchase step (purchase.schedule, or where a "
    "held commitment ends) or does not last its term",
    "commitment-window": "a commitment's start_period/end_period differ from the periods its start and end "
    "times give (owned purchases: from delivery)",
    "commitment-row": "a row on a committed tier that names no commitment of its offering and tier serving "
    "in its period (or a row on another tier that names one), or a commitment carrying more nodes in a "
    "period than it has",
    "obligation": "a commitment's obligation_beyond_horizon_usd differs from nodes x rate x the term's "
    "hours after the horizon",
    "existing-savings-plan": "a savings plan the scenario holds is missing from plan.json or differs from "
    "it (kind, term, usd_per_hour, start, end, periods), or one listed that the scenario does not hold",
    "savings-plan-purchase": "a savings plan bought by the plan of a kind or term the scenario does not buy "
    "(purchase.savings_plans, purchase.terms), at rates other than the catalog's, not starting at a purchase "
    "step or not lasting its term",
    "savings-plan-cost": "a savings plan's cost_in_horizon_usd or obligation differs from usd_per_hour x "
    "its hours inside (after) the horizon",
    "savings-plan-row": "a savings_plan row that names no savings plan (held or bought) active in its period "
    "with a rate for its offering",
    "savings-plan-coverage": "a savings plan's rows in a period differ from what the billing rule covers of "
    "the whole on-demand nodes (EC2 Instance plans first, highest savings first)",
    "savings-plan-budget": "a savings plan's rows use more than its commitment in a period, at its rates",
    "cost-total": "costs.total_usd differs from the rows' cost plus the commitments' cost in the horizon",
    "cost-by-tier": "costs.by_tier differs from the rows and commitments recomputed per tier",
    "cost-by-cloud": "costs.by_cloud differs from the rows and commitments recomputed per cloud",
    "cost-breakdown": "costs.by_team or costs.by_workload do not sum to the total",
    # training
    "unknown-run": "a training placement of a run the scenario does not have, or a run placed twice",
    "fabric": "a gang that needs a multi-node fabric on an offering without one",
    "gang-size": "a gang's nodes differ from the job's nodes (in plan.json or in a period's rows)",
    "gang-split": "a gang's rows on another offering than its placement, or spot and non-spot mixed",
    "window": "a run placed (partly) outside its window (earliest_start .. deadline)",
    "duration": "a run held for fewer hours than the job needs (on spot: its expected wall hours)",
    "spot-not-preemptible": "a job that is not preemptible on spot",
    "training-rows": "training rows in periods where the run is not placed, or missing where it is",
    "training-cost": "a run's cost_usd differs from the cost of its rows (runs of one job that overlap in "
    "time: their costs together against their rows)",
    "block-unavailable": "a gang in a Capacity Block where none may be bought: the scenario does not allow "
    "them (purchase.capacity_blocks), the offering sells none, over 64 instances or longer than 182 days",
    "block-fee": "a Capacity Block's cost or hours differ from the catalog rate x instances x the shortest "
    "duration EC2 sells that holds the run",
    "block-rows": "capacity_block rows that do not add up to the blocks' fees, or that are not training",
    "flex-start-unavailable": "a gang on flex-start where it may not run: the scenario does not allow it "
    "(purchase.flex_start), the offering is not GCP or has no flex_start_usd_h, or the run is over 7 days",
    "flex-start-delay": "a flex-start gang starting before its window's start plus the planned start delay "
    "(purchase.flex_start_delay_hours), or naming another delay than the scenario's",
    "flex-start-cost": "a flex-start gang's cost_usd differs from the catalog's flex_start_usd_h x nodes x "
    "hours held, or flex_start rows that are not training",
    "spot-share": "spot training GPU-hours above purchase.max_spot_share of the served training GPU-hours",
    "unserved-unlisted": "a training run neither placed nor listed in unserved[]",
    # teams
    "burst": "a team uses more GPUs in a period than its burst_gpus",
    "guarantee": "committed GPUs the team can use cannot back its guaranteed_gpus (each committed GPU backs "
    "one team), and the shortfall is not listed unserved",
}


class Violation(BaseModel):
    """One broken rule, where it was found (the fields that apply)."""

    kind: str
    message: str
    period: int | None = None
    offering: str | None = None
    workload: str | None = None


class KindSummary(BaseModel):
    kind: str
    description: str
    count: int
    examples: list[Violation]


class VerifyReport(BaseModel):
    """What ``gpuplan verify --json`` prints."""

    plan: str
    scenario: str
    ok: bool
    violations: int = Field(description="violations found, all kinds")
    kinds: list[KindSummary]
    seconds: float

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2) + "\n"


class Findings:
    """Collects violations: every one is counted, the first ``examples`` of each kind are kept."""

    def __init__(self, examples: int = 20) -> None:
        self.examples = examples
        self.counts: Counter[str] = Counter()
        self.items: dict[str, list[Violation]] = {}

    def add(self, kind: str, message: str, **where: int | str | None) -> None:
        """One violation; ``where``: its ``period``, ``offering`` and ``workload``, as they apply."""
        self.add_many(kind, 1, [Violation.model_validate({"kind": kind, "message": message, **where})])

    def add_many(self, kind: str, count: int, examples: Iterable[Violation]) -> None:
        """``count`` violations of ``kind``; ``examples`` may be lazy, only the first few are taken."""
        if kind not in KINDS:
            raise ValueError(f"unknown violation kind {kind!r}")
        if count <= 0:
            return
        self.counts[kind] += count
        kept = self.items.setdefault(kind, [])
        for example in examples:
            if len(kept) >= self.examples:
                break
            kept.append(example)

    @property
    def ok(self) -> bool:
        return not self.counts

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def kinds(self) -> list[str]:
        """Kinds found, in the order of :data:`KINDS`."""
        return [kind for kind in KINDS if self.counts[kind]]

    def summary(self) -> list[KindSummary]:
        return [
            KindSummary(
                kind=kind, description=KINDS[kind], count=self.counts[kind], examples=self.items[kind]
            )
            for kind in self.kinds
        ]
