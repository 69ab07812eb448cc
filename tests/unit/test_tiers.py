"""The purchase vocabulary (``models/tiers.py``) and what the optimizer derives from it."""

from __future__ import annotations

import dataclasses

import pytest

from models import tco, workloads
from models.catalog import PRICE_FIELD, TIERS, Offering
from models.tiers import (
    CLOUD_TERMS,
    COMMITTED_TIERS,
    HOURS_PER_MONTH,
    HOURS_PER_YEAR,
    OWN_NODE_TIERS,
    PREPAID_TIERS,
    TERM_TIER,
    TIER_ORDER,
    Capacity,
    Term,
    Tier,
)
from planner.planning.optimize.build import VAR_CODE
from planner.planning.optimize.dispatch import CODE_CAPACITY, NON_SPOT_CODE, SPOT_CODE, TIER_CODE


def test_members_are_the_strings_the_files_use() -> None:
    assert [tier.value for tier in Tier] == [
        "reserved_1y", "reserved_3y", "owned", "capacity_reservation", "savings_plan", "capacity_block",
        "flex_start", "on_demand", "spot",
    ]  # fmt: skip
    assert [term.value for term in Term] == ["1y", "3y", "owned", "reservation"]
    assert [kind.value for kind in Capacity] == ["non_spot", "spot", "capacity_block", "flex_start"]
    # a Capacity Block and flex-start are priced on their own (a fee, hours at their rate), as spot is;
    # non-spot nodes through their pool. Blocks' and flex-start nodes are their own: outside the pool
    assert [kind.own_cost for kind in Capacity] == [False, True, True, True]
    assert [kind.own_nodes for kind in Capacity] == [False, False, True, True]
    assert [kind.tier for kind in Capacity if kind.own_cost] == [
        Tier.SPOT,
        Tier.CAPACITY_BLOCK,
        Tier.FLEX_START,
    ]
    assert tuple(kind.tier for kind in Capacity if kind.own_nodes) == OWN_NODE_TIERS
    with pytest.raises(ValueError, match="commitments"):
        _ = Capacity.NON_SPOT.tier
    assert Tier.SPOT == "spot" and {"spot": 1}[Tier.SPOT] == 1  # a member is its string
    assert all(TERM_TIER[term] is term.tier for term in Term)
    assert CLOUD_TERMS == (Term.ONE_YEAR, Term.THREE_YEARS)
    assert set(COMMITTED_TIERS) == {TERM_TIER[term] for term in Term}
    assert sorted(TIER_ORDER) == sorted(Tier)
    # a savings plan commits dollars per hour, not nodes: prepaid, never among the committed node tiers
    assert Tier.SAVINGS_PLAN not in COMMITTED_TIERS and Tier.SAVINGS_PLAN in PREPAID_TIERS
    assert set(PREPAID_TIERS) == {*COMMITTED_TIERS, Tier.SAVINGS_PLAN}
    assert Tier.SAVINGS_PLAN.prepaid and not Tier.SAVINGS_PLAN.committed and not Tier.ON_DEMAND.prepaid


def test_variable_letters_and_array_codes_are_fixed() -> None:
    """PuLP hands HiGHS its columns sorted by name: these letters fix every name and the column order."""
    assert VAR_CODE == {Capacity.NON_SPOT: "n", Capacity.SPOT: "s", Capacity.BLOCK: "b", Capacity.FLEX: "f"}
    assert TIER_CODE == {Capacity.NON_SPOT: 0, Capacity.SPOT: 1}
    assert CODE_CAPACITY == (Capacity.NON_SPOT, Capacity.SPOT)
    assert NON_SPOT_CODE == 0 and SPOT_CODE == 1


def test_one_month_and_one_year() -> None:
    assert tco.HOURS_PER_MONTH is HOURS_PER_MONTH and workloads.HOURS_PER_MONTH is HOURS_PER_MONTH
    assert HOURS_PER_MONTH * 12 == HOURS_PER_YEAR == 8760


def test_every_tier_has_its_price_field() -> None:
    fields = {field.name for field in dataclasses.fields(Offering)}
    # a capacity reservation has no catalog price of its own: it is held at its rate, by default on demand
    # nor a savings plan: its rates are per offering and plan, in the catalog's terms file
    assert (
        set(PRICE_FIELD) == set(Tier) - {Tier.CAPACITY_RESERVATION, Tier.SAVINGS_PLAN}
        and set(PRICE_FIELD.values()) <= fields
    )
    assert set(TIERS) == set(Tier) - {Tier.OWNED, Tier.CAPACITY_RESERVATION, Tier.SAVINGS_PLAN}
