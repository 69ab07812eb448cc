"""How a savings plan bills, written once: a commitment of dollars per hour, not of nodes.

AWS Savings Plans (Compute and EC2 Instance) and Azure savings plans for compute are bought as a committed
spend per hour for one or three years. Each hour (AWS Savings Plans User Guide, "How Savings Plans apply to
your AWS usage", https://docs.aws.amazon.com/savingsplans/latest/userguide/sp-applying.html):

1. node commitments (Reserved Instances, reservations, committed use) apply first
   (:mod:`models.billing`); what runs on demand after them is the usage a savings plan may cover;
2. EC2 Instance Savings Plans apply before Compute Savings Plans (:data:`APPLY_ORDER`);
3. within a plan, the usage with the **highest savings percentage** over its on-demand rate is covered
   first (equal percentages: the lower savings-plan rate first), each node-hour at that usage's own
   savings-plan rate, until the hour's commitment is spent; a node-hour may be covered in part;
4. what is left is paid on demand; the commitment is paid every hour of its term, spent or not.

:func:`bill_hours` applies that rule to hourly usage (every hour at once, with numpy): it is the rule
``gpuplan verify`` re-bills a plan by, and what every model's savings-plan rows must agree with. A plan
covers only the offerings it has a rate for (an EC2 Instance plan: one family in one region; a Compute
plan: every family and region; Azure's: the VM sizes it lists).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, TypeVar

import numpy as np

from models.tiers import TERM_TIER, Term

if TYPE_CHECKING:
    from models.catalog import Offering
    from models.priceterms import PriceTerm

K = TypeVar("K")

__all__ = [
    "APPLY_ORDER",
    "UPFRONT_SHARE",
    "RateGroup",
    "SavingsPlan",
    "SavingsPlanBill",
    "bill_hours",
    "budget_row",
    "cover_row",
    "coverage_order",
    "plan_groups",
    "rate_groups",
    "resource_groups",
]

PlanKind = Literal["savings-plan-ec2-instance", "savings-plan-compute", "savings-plan", "committed-use"]
#: The order the kinds apply in each hour: EC2 Instance plans first, then Compute (AWS); Azure's plans
#: apply after reservations, as one kind; GCP's resource-based committed use (:func:`resource_groups`) is
#: the only kind on its offerings.
APPLY_ORDER: Final[dict[str, int]] = {
    "savings-plan-ec2-instance": 0,
    "savings-plan-compute": 1,
    "savings-plan": 1,
    "committed-use": 0,
}

#: The share of a savings plan's whole commitment (USD per hour x the term's hours) paid at purchase, per
#: payment option; the rest is charged hour by hour. AWS: "All Upfront" pays the whole commitment at
#: purchase, "Partial Upfront" half of it, "No Upfront" none (AWS Savings Plans User Guide, "Payment
#: options", https://docs.aws.amazon.com/savingsplans/latest/userguide/what-is-savings-plan.html#sp-payment-options).
#: Each option has its own rates per instance type (DescribeSavingsPlansOfferingRates), lower the more is
#: paid upfront. Azure's savings plan costs the same paid monthly or upfront; GCP's committed use is monthly.
UPFRONT_SHARE: Final[dict[str, float]] = {
    "": 0.0,
    "no-upfront": 0.0,
    "partial-upfront": 0.5,
    "all-upfront": 1.0,
}


@dataclass(frozen=True)
class SavingsPlan:
    """A savings plan as held or bought: ``usd_per_hour`` committed from hour ``start`` to ``end`` (hours of
    the series billed, end exclusive), and its rate per node-hour for each offering it covers."""

    name: str
    kind: PlanKind
    usd_per_hour: float
    rates: Mapping[str, float]
    start: int = 0
    end: int | None = None

    def __post_init__(self) -> None:
        if not self.usd_per_hour >= 0:
            raise ValueError(
                f"{self.name}: the commitment must be >= 0 USD per hour, got {self.usd_per_hour}"
            )
        if any(not rate > 0 for rate in self.rates.values()):
            raise ValueError(f"{self.name}: savings-plan rates must be above 0")


@dataclass
class SavingsPlanBill:
    """What the steps cost under the plans: per offering the nodes each plan covered and those left on
    demand (arrays over the steps), and the totals in USD."""

    covered: dict[tuple[str, str], np.ndarray] = field(
        default_factory=dict
    )  # (plan, offering) -> nodes per step
    on_demand: dict[str, np.ndarray] = field(
        default_factory=dict
    )  # offering -> nodes left on demand per step
    commitment_usd: float = 0.0  # every plan's commitment over its hours in the series, spent or not
    on_demand_usd: float = 0.0  # what was left, at the on-demand rates
    unspent_usd: float = 0.0  # of the commitments, what covered nothing

    @property
    def total_usd(self) -> float:
        return self.commitment_usd + self.on_demand_usd


def coverage_order(plan: SavingsPlan, on_demand_usd_h: Mapping[str, float]) -> list[str]:
    """The offerings ``plan`` covers, in the order it covers them: highest savings percentage first, then the
    lower savings-plan rate; an offering whose rate is not below its on-demand rate is never covered first
    by choice, but a plan covers it at its rate all the same (AWS applies plans to all eligible usage)."""
    eligible = [o for o in plan.rates if o in on_demand_usd_h and on_demand_usd_h[o] > 0]
    return sorted(eligible, key=lambda o: (-(1 - plan.rates[o] / on_demand_usd_h[o]), plan.rates[o], o))


def bill_hours(
    usage: Mapping[str, np.ndarray],
    on_demand_usd_h: Mapping[str, float],
    plans: Sequence[SavingsPlan],
    hours_per_step: float = 1.0,
) -> SavingsPlanBill:
    """Bill ``usage`` (offering -> the nodes node commitments left on demand in each step of
    ``hours_per_step`` hours, one array entry per step) under ``plans`` by the rule of the module docstring.

    A step's commitment is ``usd_per_hour x hours_per_step`` and covers a node for the step at ``rate x
    hours_per_step``; the nodes run the whole step, so a step bills as its hours would one by one."""
    steps = max((len(series) for series in usage.values()), default=0)
    left = {o: np.asarray(series, dtype=float).copy() for o, series in usage.items()}
    bill = SavingsPlanBill()
    for plan in sorted(plans, key=lambda p: (APPLY_ORDER[p.kind], p.name)):
        active = np.zeros(steps, dtype=bool)
        active[plan.start : steps if plan.end is None else min(plan.end, steps)] = True
        budget = np.where(active, plan.usd_per_hour * hours_per_step, 0.0)
        bill.commitment_usd += float(budget.sum())
        for offering in coverage_order(plan, on_demand_usd_h):
            if offering not in left:
                continue
            rate = plan.rates[offering] * hours_per_step  # a node-hour's share of the step's commitment
            covered = np.minimum(left[offering], budget / rate)
            left[offering] -= covered
            budget -= covered * rate
            bill.covered[(plan.name, offering)] = covered
        bill.unspent_usd += float(np.clip(budget, 0.0, None).sum())
    for offering, remaining in left.items():
        bill.on_demand[offering] = remaining
        bill.on_demand_usd += float(remaining.sum()) * on_demand_usd_h.get(offering, 0.0) * hours_per_step
    return bill


# ---- the rate groups and the linear form the models use ---------------------------------------------------


@dataclass(frozen=True)
class RateGroup:
    """Savings plans that cover the same offerings at the same rates: one kind, one term, one scope (a
    Compute plan: every offering it prices; an EC2 Instance plan: one instance family in one region; an
    Azure plan: every VM size it prices). Plans of one group bought at different steps apply as one plan
    with their budgets added (same rates, same order), so a model needs one covering per group, not per
    purchase."""

    kind: PlanKind
    term_years: int
    scope: str
    rates: Mapping[str, float]
    #: Resource-based committed use: the price of one GPU committed (with its vCPUs and memory), USD per
    #: hour; amounts are whole GPUs. None for savings plans (any amount, in $0.001 steps).
    unit_usd_per_hour: float | None = None
    #: How its plans are paid (:data:`UPFRONT_SHARE`): each payment option has its own rates, so plans of
    #: one kind, term and scope paid differently are groups of their own.
    payment: str = "no-upfront"

    @property
    def name(self) -> str:
        paid = "" if self.payment in ("no-upfront", "") else f" {self.payment}"
        return f"{self.kind} {self.term_years}y {self.scope}{paid}"

    @property
    def key(self) -> tuple[str, int, str, str]:
        """What names it among a catalog's groups: kind, term, scope and payment option."""
        return (self.kind, self.term_years, self.scope, self.payment or "no-upfront")

    @property
    def upfront_share(self) -> float:
        """The share of its plans' whole commitment paid at purchase (:data:`UPFRONT_SHARE`)."""
        return UPFRONT_SHARE[self.payment]


def rate_groups(terms: Iterable[PriceTerm]) -> list[RateGroup]:
    """The rate groups of a catalog's terms file: its savings-plan terms, grouped by kind, term, scope and
    payment option (each option has its own rates; the hourly rate is the plan's rate, the upfront part is
    a share of the buyer's commitment, :data:`UPFRONT_SHARE`); an EC2 Instance plan's scope is the family
    (``p5`` of ``p5.48xlarge``) and region of the offering, as AWS sells it."""
    grouped: dict[tuple[str, int, str, str], dict[str, float]] = {}
    for term in terms:
        if term.kind not in APPLY_ORDER or not term.term_years:
            continue
        if term.kind == "committed-use":  # per machine in the terms file; grouped by resource_groups
            continue
        scope = term.kind.removeprefix("savings-plan-") if term.kind != "savings-plan" else "azure"
        if term.kind == "savings-plan-ec2-instance":
            _cloud, region, instance_type = term.offering.split(":", 2)
            scope = f"ec2-instance {instance_type.split('.', 1)[0]} {region}"
        payment = term.payment or "no-upfront"
        rates = grouped.setdefault((term.kind, term.term_years, scope, payment), {})
        rates[term.offering] = min(term.usd_h, rates.get(term.offering, term.usd_h))
    return [
        RateGroup(kind=kind, term_years=years, scope=scope, rates=rates, payment=payment)  # type: ignore[arg-type]
        for (kind, years, scope, payment), rates in sorted(grouped.items())
    ]


def resource_groups(offerings: Iterable[Offering], years: Iterable[int] = (1, 3)) -> list[RateGroup]:
    """GCP resource-based committed use (issue 38, point 3): GCP sells commitments for GPU machine series as
    resources (GPUs of one model in one region, with the vCPUs and memory that go with them), not per
    machine type, so every machine type with that GPU in that region draws on one commitment. One group
    per GPU model, region and term (scope ``gcp-resource MODEL REGION``), each machine type at its
    committed-use price per node (the catalog's 1y/3y price, assembled from the GPU, vCPU and memory
    commitment SKUs: https://cloud.google.com/compute/docs/instances/committed-use-discounts-overview).
    Those prices are proportional to the GPUs (a2-highgpu-8g is 8 x a2-highgpu-1g), so a budget of G x
    the price of one GPU covers G GPUs of any of them; one GPU's price is the lowest per GPU in the group."""
    grouped: dict[tuple[int, str], dict[str, float]] = {}
    unit: dict[tuple[int, str], float] = {}
    for offering in offerings:
        if offering.cloud != "gcp":
            continue
        for term_years in years:
            price = offering.price(TERM_TIER[Term.ONE_YEAR if term_years == 1 else Term.THREE_YEARS])
            if price is None or price <= 0:
                continue
            key = (term_years, f"gcp-resource {offering.gpu_model} {offering.region}")
            grouped.setdefault(key, {})[offering.id] = price
            per_gpu = price / offering.gpus_per_node
            unit[key] = min(per_gpu, unit.get(key, per_gpu))
    return [
        RateGroup(kind="committed-use", term_years=term_years, scope=scope, rates=rates,
                  unit_usd_per_hour=unit[(term_years, scope)])
        for (term_years, scope), rates in sorted(grouped.items())
    ]  # fmt: skip


def plan_groups(terms: Iterable[PriceTerm], offerings: Iterable[Offering]) -> list[RateGroup]:
    """Every dollar-per-hour commitment a catalog prices: its savings plans (:func:`rate_groups`, from the
    terms file) and GCP's resource-based committed use (:func:`resource_groups`, from its offerings)."""
    return [*rate_groups(terms), *resource_groups(offerings)]


def cover_row(covers: Sequence[K], on_demand: K) -> list[tuple[K, float]]:
    """One offering in one period: the nodes the groups cover are nodes paid on demand otherwise,
    ``sum_g Z[g] - NO <= 0`` (the row's upper bound is 0)."""
    return [*((key, 1.0) for key in covers), (on_demand, -1.0)]


def budget_row(covers: Sequence[tuple[K, float]], budgets: Sequence[K]) -> list[tuple[K, float]]:
    """One group in one period: what its coverings spend at their rates is at most what its plans active
    then commit, ``sum_o rate[o] Z[o] - sum_k S[k] <= held budget`` (the row's upper bound: the plans held,
    in USD per hour). Priced in the objective at ``-c_od`` per covered node-hour (a bound) or slightly less
    (a plan, so that spare budget never makes on-demand nodes look free), this is a relaxation of
    :func:`bill_hours`: equal with one group active, never dearer with several (the rule's order can cost
    more than the best split; ``gpuplan verify`` re-bills by the rule)."""
    return [*covers, *((key, -1.0) for key in budgets)]
