"""A plan's purchases as a scenario holds them: the commitments and savings plans a plan bought, written as
``commitments:`` and ``savings_plans:`` entries, so another plan can take them as given.

Two users: the daemon re-plans holding what the previous plan bought by now (the cloud has sold it), and a
plan over demand futures (``planner/planning/futures.py``) prices one set of purchases (a plan's, or a
peer's: plan.json ``baselines.peers[].savings_plans``) on each future by planning that future with the
purchases held and nothing more for sale.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from models.plan import PeerSavingsPlan, Plan, SavingsPlanCommitment
from models.scenario import (
    SAVINGS_PLAN_TERM_KIND,
    SCOPED_KINDS,
    ExistingCommitment,
    HeldSavingsPlan,
    Scenario,
)
from models.tiers import Term

__all__ = ["bought_commitments", "bought_savings_plans", "held_savings_plan", "holding_only"]


def bought_commitments(plan: Plan, by: datetime | None = None) -> list[ExistingCommitment]:
    """The commitments ``plan`` bought (starting by ``by``, if given) as held ones, at the rate it priced
    them; owned nodes are not a cloud commitment and are left out."""
    return [
        ExistingCommitment(
            offering=c.offering,
            term=c.term,
            nodes=c.nodes,
            start=c.start,
            usd_per_node_hour=c.usd_per_node_hour,
        )
        for c in plan.document.commitments
        if not c.existing and c.start is not None and c.term != Term.OWNED and (by is None or c.start <= by)
    ]


def bought_savings_plans(plan: Plan, by: datetime | None = None) -> list[HeldSavingsPlan]:
    """The savings plans ``plan`` bought (starting by ``by``, if given) as held ones."""
    return [
        held_savings_plan(p)
        for p in plan.document.savings_plans
        if not p.existing and (by is None or p.start <= by)
    ]


def held_savings_plan(
    bought: SavingsPlanCommitment | PeerSavingsPlan, name: str | None = None
) -> HeldSavingsPlan:
    """A savings plan a plan (or one of its peers) bought, as the scenario holds one (``savings_plans:``):
    its kind, term, amount and start, and for a scoped plan the family (or GPU model) and region of its
    scope; named ``name``, else as the plan named it."""
    kind = {value: key for key, value in SAVINGS_PLAN_TERM_KIND.items()}[bought.kind]
    scoped = kind in SCOPED_KINDS
    _word, family, region = bought.scope.split(" ") if scoped else ("", None, None)
    if name is None:
        name = bought.name if isinstance(bought, SavingsPlanCommitment) else f"peer {kind} {bought.term}"
    return HeldSavingsPlan(
        name=name, kind=kind, term=bought.term, usd_per_hour=bought.usd_per_hour, start=bought.start,
        family=family, region=region,
    )  # fmt: skip


def holding_only(
    scenario: Scenario, commitments: Sequence[ExistingCommitment], plans: Sequence[HeldSavingsPlan]
) -> Scenario:
    """``scenario`` holding ``commitments`` and ``plans`` besides its own, with nothing more for sale (no
    terms, no savings plans): what the fleet pays for one set of purchases whatever else it meets."""
    purchase = scenario.purchase.model_copy(update={"terms": [], "savings_plans": []})
    return scenario.model_copy(
        update={
            "commitments": [*scenario.commitments, *commitments],
            "savings_plans": [*scenario.savings_plans, *plans],
            "purchase": purchase,
        }
    )
