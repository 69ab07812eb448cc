"""Tests for models/tco.py: every figure against a hand calculation written out here.

Default inputs (models.scenario.Colocation, FACTS.md section 5): capex C = $335,000, 10.2 kW, PUE 1.5,
$0.09/kWh, $200/kW-month, support 10%/yr, 36 months, residual 30%, cost of capital 8%/yr.

Hand figures used throughout:
    i      = 1.08 ** (1/12) - 1                    = 0.0064340301  (monthly rate)
    (1+i)^36 = 1.08 ** 3                           = 1.259712
    a36    = (1 - 1.08**-3) / i                    = 32.0433313887 (annuity factor, 36 months)
    R      = 30% x 335,000                         = 100,500;  R / 1.259712 = 79,780.1402
    capital = (335,000 - 79,780.1402) / a36        = 7,964.8354 per month
    colo   = 10.2 kW x $200                        = 2,040.00
    support = 10% x 335,000 / 12                   = 2,791.6667
    energy = 10.2 x 1.5 x 730 h x $0.09            = 1,005.21   (x utilization)
    opex   = 2,040 + 2,791.6667 + 1,005.21         = 5,836.8767
    p5.48xlarge on-demand $55.04 x 730 h           = 40,179.20 per month
"""

from __future__ import annotations

import math

import pytest

from models.breakeven import Comparator
from models.scenario import Colocation
from models.tco import (
    DEFAULT_TORNADO_RANGES,
    OwnershipCase,
    break_even_grid,
    breakeven_data,
    capital_usd_per_month,
    evaluate,
    monthly_rate,
    monthly_split,
    opex_usd_per_month,
    owned_usd_per_node_hour,
    tornado,
    unit_case,
)
from models.tiers import HOURS_PER_MONTH, Tier

RATE = 0.00643403011000343
A36 = 32.04333138871812
V36 = 1 / 1.259712  # discount factor of month 36
CAPEX = 335_000.0
RESIDUAL = 100_500.0
CAPITAL = (CAPEX - RESIDUAL * V36) / A36  # 7,964.8354
COLO_FEE, SUPPORT, ENERGY = 2040.0, 335_000 * 0.10 / 12, 1005.21
OPEX = COLO_FEE + SUPPORT + ENERGY  # 5,836.8767
ON_DEMAND, RESERVED_1Y, RESERVED_3Y = 55.04, 33.024, 22.016
RENT = ON_DEMAND * 730  # 40,179.20


def colo(**overrides: float) -> Colocation:
    return Colocation(max_nodes=8, **overrides)


def free_opex(**overrides: float) -> Colocation:
    """A node with no running cost, so cash flows are just capex, cloud and residual."""
    return colo(power_usd_per_kwh=0.0, colo_usd_per_kw_month=0.0, support_pct_per_year=0.0, **overrides)


def flat_case(c: Colocation, cloud: float, rest: float = 0.0, **kw: float) -> OwnershipCase:
    return OwnershipCase(colo=c, nodes=1, cloud_only_usd=[cloud] * 12, cloud_with_owned_usd=[rest] * 12, **kw)


# --------------------------------------------------------------------------------------------
# Monthly cost of a node
# --------------------------------------------------------------------------------------------


def test_hand_constants() -> None:
    assert HOURS_PER_MONTH == 730
    assert monthly_rate(8.0) == pytest.approx(RATE, rel=1e-12)
    growth, annuity = (1 + RATE) ** 36, (1 - (1 + RATE) ** -36) / RATE
    assert growth == pytest.approx(1.259712, rel=1e-12)
    assert annuity == pytest.approx(A36, rel=1e-12)
    assert monthly_rate(0.0) == 0.0


def test_capital_is_the_level_annuity_net_of_residual() -> None:
    assert capital_usd_per_month(colo()) == pytest.approx(7964.8354, abs=1e-3)
    assert capital_usd_per_month(colo()) == pytest.approx(CAPITAL, rel=1e-10)
    # i / (1 - (1+i)^-n) is 1 / a36: the same payment written as in the docstring.
    assert capital_usd_per_month(colo()) == pytest.approx(
        (CAPEX - RESIDUAL * V36) * RATE / (1 - V36), rel=1e-10
    )
    # No residual: capex / a36 = 335,000 / 32.0433314 = 10,454.5934.
    assert capital_usd_per_month(colo(residual_value_pct=0)) == pytest.approx(10454.5934, abs=1e-3)


def test_capital_at_zero_cost_of_capital_is_straight_line() -> None:
    # (335,000 - 100,500) / 36 = 6,513.8889
    assert capital_usd_per_month(colo(cost_of_capital_pct_per_year=0)) == pytest.approx(6513.8889, abs=1e-4)


def test_opex_parts_and_utilization() -> None:
    split = monthly_split(colo())
    assert split["colo_usd"] == pytest.approx(2040.0)
    assert split["support_usd"] == pytest.approx(2791.6667, abs=1e-4)
    assert split["energy_usd"] == pytest.approx(1005.21)  # 15.3 kW at the facility x 730 h x $0.09
    assert opex_usd_per_month(colo()) == pytest.approx(5836.8767, abs=1e-4)
    # Energy scales with utilization, idle power ignored: at 50% it is 502.605.
    assert opex_usd_per_month(colo(), 0.5) == pytest.approx(2040 + 2791.6667 + 502.605, abs=1e-4)


def test_owned_price_per_node_hour() -> None:
    # (7,964.8354 + 5,836.8767) / 730 = 18.9065 $/node-hour, opex at full power.
    assert owned_usd_per_node_hour(colo()) == pytest.approx(18.9065, abs=1e-4)
    assert owned_usd_per_node_hour(colo()) == pytest.approx((CAPITAL + OPEX) / 730, rel=1e-12)


# --------------------------------------------------------------------------------------------
# evaluate: break-even and NPV
# --------------------------------------------------------------------------------------------


def test_default_unit_case_against_p5_on_demand() -> None:
    """The FACTS 5 worked example with this repo's defaults.

    Break-even = C / (rent - opex) = 335,000 / (40,179.20 - 5,836.8767) = 335,000 / 34,342.3233
               = 9.7547 months.
    NPV = -C + (rent - opex) x a36 + R / 1.259712
        = -335,000 + 34,342.3233 x 32.0433314 + 79,780.1402 = $845,222.59.
    """
    result = evaluate(unit_case(colo(), ON_DEMAND, 1.0))
    assert result.months_to_break_even == pytest.approx(335_000 / (40_179.2 - 5836.8767), rel=1e-7)
    assert result.months_to_break_even == pytest.approx(9.7547, abs=1e-4)
    assert result.npv_usd == pytest.approx(-CAPEX + (RENT - OPEX) * A36 + RESIDUAL * V36, rel=1e-10)
    assert result.npv_usd == pytest.approx(845_222.59, abs=0.01)
    assert result.months == tuple(range(37))
    assert result.cloud_cumulative_usd[0] == 0.0
    assert result.owned_cumulative_usd[0] == CAPEX
    assert result.cloud_cumulative_usd[36] == pytest.approx(36 * RENT)
    assert result.owned_cumulative_usd[36] == pytest.approx(CAPEX + 36 * OPEX - RESIDUAL)
    assert result.savings_usd == pytest.approx(36 * (RENT - OPEX) + RESIDUAL - CAPEX)
    assert result.npv_usd == pytest.approx(result.pv_cloud_usd - result.pv_owned_usd)


def test_npv_at_the_owned_tier_price_is_zero() -> None:
    """Renting at exactly (capital + opex)/730 for 730 h a month is the annuity that recovers the node."""
    c = colo()
    result = evaluate(unit_case(c, owned_usd_per_node_hour(c), 1.0))
    assert result.npv_usd == pytest.approx(0.0, abs=1e-6)


def test_npv_of_constant_stream_is_the_annuity_factor() -> None:
    # No opex, no residual: NPV = -C + S x a36; S = 20,000 gives -335,000 + 640,866.63 = 305,866.63.
    result = evaluate(flat_case(free_opex(residual_value_pct=0), 20_000.0))
    assert result.npv_usd == pytest.approx(-CAPEX + 20_000 * A36, rel=1e-10)
    assert result.npv_usd == pytest.approx(305_866.63, abs=0.01)
    assert result.months_to_break_even == pytest.approx(335_000 / 20_000)  # 16.75


def test_break_even_is_capex_over_monthly_saving_with_rest_of_fleet() -> None:
    """Two nodes; the rest of the fleet's bill cancels: saving = 60,000 - 10,000 - 2 x opex."""
    c = colo()
    case = OwnershipCase(c, nodes=2, cloud_only_usd=[60_000.0] * 12, cloud_with_owned_usd=[10_000.0] * 12)
    result = evaluate(case)
    saving = 50_000 - 2 * OPEX  # 38,326.2467
    assert result.months_to_break_even == pytest.approx(2 * CAPEX / saving, rel=1e-9)  # 17.4814
    assert result.npv_usd == pytest.approx(-2 * CAPEX + saving * A36 + 2 * RESIDUAL * V36, rel=1e-10)
    assert result.opex_usd_per_month == pytest.approx(2 * OPEX)
    assert result.capital_usd_per_month == pytest.approx(2 * CAPITAL)


@pytest.mark.parametrize("lead", [1.0, 3.0, 2.5])
def test_lead_time_shifts_break_even_by_exactly_the_lead(lead: float) -> None:
    base = evaluate(unit_case(colo(), ON_DEMAND, 1.0)).months_to_break_even
    shifted = evaluate(unit_case(colo(lead_time_months=lead), ON_DEMAND, 1.0))
    assert shifted.months_to_break_even == pytest.approx(lead + base, rel=1e-9)
    # Before delivery owning pays the cloud bill on top of the capex: the gap stays at C.
    whole = math.floor(lead)
    gap = shifted.owned_cumulative_usd[whole] - shifted.cloud_cumulative_usd[whole]
    assert gap == pytest.approx(CAPEX)
    # A fractional lead splits its month: month 3 of lead 2.5 is half cloud, half opex.
    if lead == 2.5:
        month3 = shifted.owned_cumulative_usd[3] - shifted.owned_cumulative_usd[2]
        assert month3 == pytest.approx(0.5 * RENT + 0.5 * OPEX)


def test_cyclic_extension_and_yearly_price_change() -> None:
    """A 3-month horizon [100, 200, 300] over a 24-month life, cloud prices +10%/yr.

    Months 1-12 repeat the horizon 4 times at today's prices: 4 x 600 = 2,400.
    Months 13-24 are the second year, x 1.1: 2,640. Month 13 is horizon month 0 again: 110.
    """
    c = free_opex(depreciation_months=24, residual_value_pct=0)
    case = OwnershipCase(c, 1, [100.0, 200.0, 300.0], [10.0, 20.0, 30.0], cloud_price_change_pct_per_year=10)
    result = evaluate(case)
    cloud = result.cloud_cumulative_usd
    assert [cloud[m] - cloud[m - 1] for m in (1, 2, 3, 4, 12)] == pytest.approx([100, 200, 300, 100, 300])
    assert cloud[12] == pytest.approx(2400.0)
    assert cloud[13] - cloud[12] == pytest.approx(110.0)
    assert cloud[24] == pytest.approx(2400.0 + 2640.0)
    owned = result.owned_cumulative_usd
    assert owned[24] - owned[0] == pytest.approx(240.0 + 264.0)  # the rest of the fleet, same rules


def test_twelve_month_horizon_repeats_yearly() -> None:
    c = free_opex(depreciation_months=36)
    months = [float(1000 * (k + 1)) for k in range(12)]  # 1,000 .. 12,000, sum 78,000
    result = evaluate(OwnershipCase(c, 1, months, [0.0] * 12, cloud_price_change_pct_per_year=-20))
    cloud = result.cloud_cumulative_usd
    assert cloud[12] == pytest.approx(78_000)
    assert cloud[24] == pytest.approx(78_000 * (1 + 0.8))
    assert cloud[36] == pytest.approx(78_000 * (1 + 0.8 + 0.64))
    assert cloud[14] - cloud[13] == pytest.approx(2000 * 0.8)


def test_residual_is_received_in_the_last_month() -> None:
    c = colo()
    result = evaluate(unit_case(c, ON_DEMAND, 1.0))
    owned = result.owned_cumulative_usd
    assert owned[36] - owned[35] == pytest.approx(OPEX - RESIDUAL)
    assert owned[35] - owned[34] == pytest.approx(OPEX)


def test_crossing_only_through_the_residual_is_exactly_the_last_month() -> None:
    """No opex, C = 100,000, residual 30%, saving 7,000 a month for 12 months.

    12 x 7,000 = 84,000 < 100,000 before the sale; + 30,000 at month 12 = 114,000: break-even 12.0.
    NPV at 0% = 114,000 - 100,000 = 14,000.
    """
    c = free_opex(capex_per_node_usd=100_000, depreciation_months=12, cost_of_capital_pct_per_year=0)
    result = evaluate(flat_case(c, 7_000.0))
    assert result.months_to_break_even == 12.0
    assert result.npv_usd == pytest.approx(14_000.0)


def test_zero_cost_of_capital_npv_is_undiscounted_savings() -> None:
    c = colo(cost_of_capital_pct_per_year=0)
    result = evaluate(unit_case(c, ON_DEMAND, 1.0))
    # 36 x 34,342.3233 + 100,500 - 335,000 = 1,001,823.64
    assert result.npv_usd == pytest.approx(36 * (RENT - OPEX) + RESIDUAL - CAPEX, rel=1e-12)
    assert result.npv_usd == pytest.approx(result.savings_usd)
    assert result.npv_usd == pytest.approx(1_001_823.64, abs=0.01)


def test_never_breaks_even_returns_none() -> None:
    """Renting for $10,000 a month: saving 10,000 - 5,836.88 = 4,163.12, 36 x that + R = 250,372 < C."""
    result = evaluate(flat_case(colo(), 10_000.0))
    assert result.months_to_break_even is None
    assert result.npv_usd == pytest.approx(-CAPEX + (10_000 - OPEX) * A36 + RESIDUAL * V36)
    assert result.npv_usd < 0


def test_zero_nodes_changes_nothing() -> None:
    result = evaluate(OwnershipCase(colo(), 0, [5000.0] * 12, [5000.0] * 12))
    assert result.npv_usd == pytest.approx(0.0)
    assert result.owned_cumulative_usd == pytest.approx(result.cloud_cumulative_usd)


def test_case_validation() -> None:
    with pytest.raises(ValueError, match="equal length"):
        OwnershipCase(colo(), 1, [1.0] * 12, [0.0] * 11)
    with pytest.raises(ValueError, match="nodes"):
        OwnershipCase(colo(), -1, [1.0], [0.0])
    with pytest.raises(ValueError, match="utilization"):
        OwnershipCase(colo(), 1, [1.0], [0.0], utilization=1.5)


# --------------------------------------------------------------------------------------------
# Sensitivity
# --------------------------------------------------------------------------------------------


def test_tornado_bars_against_hand_calculations() -> None:
    case = unit_case(colo(), ON_DEMAND, 0.8)
    base = evaluate(case)
    bars = {b.name: b for b in tornado(case)}
    assert set(bars) == set(DEFAULT_TORNADO_RANGES)

    # Utilization 0.6 / 1.0: the same as the unit cases at those utilizations.
    u = bars["utilization"]
    assert (u.low_value, u.high_value, u.low_label, u.high_label) == (pytest.approx(0.6), 1.0, "60%", "100%")
    assert u.npv_low_usd == pytest.approx(evaluate(unit_case(colo(), ON_DEMAND, 0.6)).npv_usd)
    assert u.npv_high_usd == pytest.approx(evaluate(unit_case(colo(), ON_DEMAND, 1.0)).npv_usd)

    # Capex x0.8: C falls 67,000, support 558.33/month, residual 20,100 (received at month 36).
    c = bars["capex"]
    assert (c.low_label, c.high_label) == ("$268,000", "$402,000")
    assert c.npv_low_usd - base.npv_usd == pytest.approx(67_000 + 558.3333 * A36 - 20_100 * V36, abs=0.01)
    assert c.break_even_low == pytest.approx(268_000 / (0.8 * RENT - (2040 + 2233.3333 + 0.8 * ENERGY)))

    # Residual 0% / 50%: only the month-36 receipt moves, by -30% / +20% of C.
    r = bars["residual_value"]
    assert r.npv_low_usd - base.npv_usd == pytest.approx(-RESIDUAL * V36)
    assert r.npv_high_usd - base.npv_usd == pytest.approx(67_000 * V36)
    assert r.break_even_low == r.break_even_high == pytest.approx(base.months_to_break_even)

    # Power x0.5 / x1.5: energy 0.8 x 1,005.21 = 804.168 a month moves by -/+ 402.084.
    p = bars["power_price"]
    assert (p.low_label, p.high_label) == ("$0.045/kWh", "$0.135/kWh")
    assert p.npv_low_usd - base.npv_usd == pytest.approx(402.084 * A36, abs=1e-3)
    assert p.npv_high_usd - base.npv_usd == pytest.approx(-402.084 * A36, abs=1e-3)

    # Cloud -20%/yr: year 2 at 0.8, year 3 at 0.64 of today's rent (32,143.36 a month at u = 0.8).
    g = bars["cloud_price_change"]
    assert (g.low_label, g.high_label) == ("-20%/yr", "+10%/yr")
    year = sum((1 + RATE) ** -m for m in range(13, 25))
    year3 = sum((1 + RATE) ** -m for m in range(25, 37))
    rent = 0.8 * RENT
    assert g.npv_low_usd - base.npv_usd == pytest.approx(-rent * (0.2 * year + 0.36 * year3), rel=1e-9)
    assert g.npv_high_usd - base.npv_usd == pytest.approx(rent * (0.1 * year + 0.21 * year3), rel=1e-9)


def test_tornado_is_sorted_by_swing_and_base_lies_between() -> None:
    case = unit_case(colo(), ON_DEMAND, 0.8)
    base = evaluate(case)
    bars = tornado(case)
    swings = [abs(b.npv_high_usd - b.npv_low_usd) for b in bars]
    assert swings == sorted(swings, reverse=True)
    assert [b.name for b in bars][:2] == ["utilization", "cloud_price_change"]
    for bar in bars:  # every input here moves NPV monotonically
        lo, hi = sorted((bar.npv_low_usd, bar.npv_high_usd))
        assert lo <= base.npv_usd <= hi, bar.name
        assert min(bar.low_value, bar.high_value) <= bar.base_value <= max(bar.low_value, bar.high_value)
        kind = [bar.break_even_low, bar.break_even_high]
        if None not in kind:
            assert min(kind) <= base.months_to_break_even <= max(kind), bar.name


def test_tornado_utilization_scales_only_the_avoided_cloud_cost() -> None:
    """Fleet bill 60,000, 10,000 with the node: the avoided 50,000 at u = 0.5 becomes 70,000 at 0.7."""
    c = colo()
    case = OwnershipCase(c, 1, [60_000.0] * 12, [10_000.0] * 12, utilization=0.5)
    bar = next(b for b in tornado(case) if b.name == "utilization")
    expected = OwnershipCase(c, 1, [80_000.0] * 12, [10_000.0] * 12, utilization=0.7)
    assert bar.high_value == pytest.approx(0.7)
    assert bar.npv_high_usd == pytest.approx(evaluate(expected).npv_usd)


def test_tornado_ranges_override_and_clip() -> None:
    case = unit_case(colo(), ON_DEMAND, 0.1)
    bar = next(b for b in tornado(case, {"utilization": (-0.5, 0.5)}) if b.name == "utilization")
    assert (bar.low_value, bar.high_value) == (0.05, pytest.approx(0.6))  # clipped to [0.05, 1]
    with pytest.raises(ValueError, match="unknown tornado input"):
        tornado(case, {"discount": (1.0, 2.0)})


def test_break_even_grid_default_figures() -> None:
    """Months to break even of one default node, C / (u x 730 x price - opex(u)).

    opex(u) = 2,040 + 2,791.67 + 1,005.21 u. Cells where that exceeds 36 months but the residual
    value (100,500 at month 36) closes the gap read exactly 36.0; the rest never break even.

        price ($/h)        100%    80%    60%    40%
        on-demand 55.04    9.75   12.64  17.94  30.91
        1y reserved 33.024 18.34  24.54  36.0   never
        3y reserved 22.016 32.73  36.0   never  never
    """
    prices = {"on_demand": ON_DEMAND, "reserved_1y": RESERVED_1Y, "reserved_3y": RESERVED_3Y}
    grid = break_even_grid(colo(), prices)
    got = {(row.price, row.utilization): row.months_to_break_even for row in grid}
    assert len(grid) == 12

    def closed_form(price: float, u: float) -> float:
        return CAPEX / (u * 730 * price - (COLO_FEE + SUPPORT + ENERGY * u))

    expected = {
        ("on_demand", 1.0): 9.75,
        ("on_demand", 0.8): 12.64,
        ("on_demand", 0.6): 17.94,
        ("on_demand", 0.4): 30.91,
        ("reserved_1y", 1.0): 18.34,
        ("reserved_1y", 0.8): 24.54,
        ("reserved_3y", 1.0): 32.73,
    }
    for (name, u), months in expected.items():
        assert got[(name, u)] == pytest.approx(closed_form(prices[name], u), rel=1e-9)
        assert round(got[(name, u)], 2) == months
    assert got[("reserved_1y", 0.6)] == 36.0  # 37.1 months before the sale
    assert got[("reserved_3y", 0.8)] == 36.0
    assert got[("reserved_1y", 0.4)] is None
    assert got[("reserved_3y", 0.6)] is None
    assert got[("reserved_3y", 0.4)] is None


def test_breakeven_data_shape() -> None:
    case = unit_case(colo(), ON_DEMAND, 1.0)
    comparator = Comparator(
        offering="aws:us-east-1:p5.48xlarge",
        on_demand_usd_h=ON_DEMAND,
        reserved_1y_usd_h=RESERVED_1Y,
        reserved_3y_usd_h=None,
    )
    data = breakeven_data(case, scenario="s", nodes_from="--nodes", comparator=comparator)
    assert data.schema_ == "gpuplan.breakeven/v1"
    assert data.months_to_break_even == pytest.approx(9.7547, abs=1e-4)
    assert data.npv_usd == pytest.approx(845_222.59, abs=0.01)
    assert data.owned_usd_per_node_hour == pytest.approx(18.9065, abs=1e-4)
    assert len(data.curves.month) == len(data.curves.owned_cumulative_usd) == 37
    assert {row.price for row in data.grid} == {Tier.ON_DEMAND, Tier.RESERVED_1Y}  # None left out
    assert data.monthly.capital_usd == pytest.approx(CAPITAL)
    assert data.monthly.opex_usd == pytest.approx(OPEX)
    assert data.inputs.capex_per_node_usd == CAPEX
    bar = data.tornado[0]
    assert bar.swing_usd == pytest.approx(abs(bar.npv_high_usd - bar.npv_low_usd))
    assert data.plans == {}  # gpuplan breakeven adds the plans it made
