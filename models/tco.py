"""The economics of owning GPU nodes in a colocation site, against renting the same work in the cloud.

Pure functions (numpy, no solver), so the planner's "owned" tier price, the break-even report and
the tests all use one set of formulas. Conventions:

* a month is ``HOURS_PER_MONTH`` = 730 hours (8760 / 12, ``models.tiers``), the figure cloud price
  sheets use;
* a yearly percentage ``pct`` becomes the monthly rate ``i = (1 + pct/100) ** (1/12) - 1``, so
  twelve months compound to exactly the quoted yearly rate;
* month ``m`` is the interval ``(m - 1, m]``; month 0 is the purchase instant (capex is paid then),
  month ``L`` = ``depreciation_months`` is the last one (the residual value is received then).

``evaluate`` compares two cash-flow paths month by month: the fleet on cloud only, and the fleet
with ``nodes`` owned servers plus the cloud for the rest. Break-even is where the cumulative
curves cross; NPV discounts the monthly differences at the cost of capital.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from models.breakeven import (
    BreakevenDocument,
    Comparator,
    Curves,
    GridCell,
    MonthlyOwnedCost,
    TornadoBar,
    Totals,
)
from models.catalog import GPU_MEMORY_GB, OWNED_CLOUD, Offering
from models.scenario import Colocation
from models.tiers import HOURS_PER_MONTH, Tier

__all__ = [
    "DEFAULT_TORNADO_RANGES",
    "GRID_UTILIZATIONS",
    "OwnershipCase",
    "OwnershipResult",
    "TornadoBar",
    "break_even_grid",
    "breakeven_data",
    "capital_usd_per_month",
    "evaluate",
    "monthly_rate",
    "monthly_split",
    "opex_usd_per_month",
    "owned_offering",
    "owned_usd_per_node_hour",
    "tornado",
    "unit_case",
]

GRID_UTILIZATIONS = (1.0, 0.8, 0.6, 0.4)

#: One-at-a-time ranges of ``tornado``; each pair is (low, high) in the unit the name says.
DEFAULT_TORNADO_RANGES: dict[str, tuple[float, float]] = {
    "utilization": (-0.2, 0.2),  # added to the base utilization, result clipped to [0.05, 1]
    "cloud_price_change": (-20.0, 10.0),  # % per year, replaces the case's value
    "power_price": (0.5, 1.5),  # multiplies power_usd_per_kwh
    "capex": (0.8, 1.2),  # multiplies capex_per_node_usd (support and residual follow: % of capex)
    "residual_value": (0.0, 50.0),  # % of capex, replaces residual_value_pct
}
_TORNADO_TITLES = {
    "utilization": "utilization",
    "cloud_price_change": "cloud price change per year",
    "power_price": "power price",
    "capex": "capex per node",
    "residual_value": "residual value",
}
UTILIZATION_CLIP = (0.05, 1.0)


# --------------------------------------------------------------------------------------------
# Monthly cost of one node
# --------------------------------------------------------------------------------------------


def monthly_rate(pct_per_year: float) -> float:
    """The monthly rate that compounds to ``pct_per_year`` over twelve months."""
    return (1.0 + pct_per_year / 100.0) ** (1.0 / 12.0) - 1.0


def capital_usd_per_month(colo: Colocation) -> float:
    """The level monthly payment that recovers capex over the depreciation life at the cost of capital.

    Why an annuity and not capex / months: money tied up in hardware has a cost, and the node is
    worth ``residual_value_pct`` of capex at the end, so only the present value of the rest must be
    recovered: ``(capex - R/(1+i)**n) * i / (1 - (1+i)**-n)``; ``(capex - R) / n`` when ``i`` is 0.
    """
    n = colo.depreciation_months
    capex = colo.capex_per_node_usd
    residual = colo.residual_value_pct / 100.0 * capex
    i = monthly_rate(colo.cost_of_capital_pct_per_year)
    if i == 0.0:
        return (capex - residual) / n
    return (capex - residual / (1.0 + i) ** n) * i / (1.0 - (1.0 + i) ** -n)


def monthly_split(colo: Colocation, utilization: float = 1.0) -> dict[str, float]:
    """Per-node monthly opex by component (colo fee, support, energy) and their total.

    Energy is charged for the share ``utilization`` of the month only: idle power is ignored
    (an idle H100 node draws far less than its 10.2 kW maximum), so at low utilization this is
    slightly optimistic for owning; at ``utilization=1`` it is the conservative full-power figure.
    """
    colo_fee = colo.power_kw_per_node * colo.colo_usd_per_kw_month
    support = colo.support_pct_per_year / 100.0 * colo.capex_per_node_usd / 12.0
    energy = colo.power_kw_per_node * colo.pue * HOURS_PER_MONTH * colo.power_usd_per_kwh * utilization
    return {
        "colo_usd": colo_fee,
        "support_usd": support,
        "energy_usd": energy,
        "opex_usd": colo_fee + support + energy,
    }


def opex_usd_per_month(colo: Colocation, utilization: float = 1.0) -> float:
    """Colo fee + support + energy for one node in one month (idle power ignored: see ``monthly_split``)."""
    return monthly_split(colo, utilization)["opex_usd"]


def owned_usd_per_node_hour(colo: Colocation) -> float:
    """The price of the planner's "owned" tier: capital recovery plus full-power opex per node-hour.

    Full power (utilization 1) keeps the MILP conservative: it never sees a node cheaper than it is.
    """
    return (capital_usd_per_month(colo) + opex_usd_per_month(colo, 1.0)) / HOURS_PER_MONTH


# --------------------------------------------------------------------------------------------
# Owning N nodes against the cloud, month by month
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OwnershipCase:
    """Owning ``nodes`` servers against the fleet's cloud bill, over the planned horizon.

    ``cloud_only_usd`` is the monthly cloud cost of the whole fleet with no owned node and
    ``cloud_with_owned_usd`` the monthly cloud cost of the rest of the fleet while owning ``nodes``
    (same length, one value per planned month, e.g. 12). Their difference is what owning avoids.
    ``utilization`` is the share of owned node-hours that run work (it sets the energy bill).
    """

    colo: Colocation
    nodes: int
    cloud_only_usd: Sequence[float]
    cloud_with_owned_usd: Sequence[float]
    utilization: float = 1.0
    cloud_price_change_pct_per_year: float = 0.0

    def __post_init__(self) -> None:
        if int(self.nodes) != self.nodes or self.nodes < 0:
            raise ValueError(f"nodes must be a whole number >= 0, got {self.nodes!r}")
        only = tuple(float(x) for x in self.cloud_only_usd)
        rest = tuple(float(x) for x in self.cloud_with_owned_usd)
        if not only or len(only) != len(rest):
            raise ValueError(
                f"cloud_only_usd ({len(only)} months) and cloud_with_owned_usd ({len(rest)} months) "
                "must be non-empty and of equal length"
            )
        if not all(math.isfinite(x) for x in (*only, *rest)):
            raise ValueError("monthly cloud costs must be finite numbers")
        if not 0.0 <= self.utilization <= 1.0:
            raise ValueError(f"utilization must be within 0..1, got {self.utilization!r}")
        if self.cloud_price_change_pct_per_year <= -100.0:
            raise ValueError("cloud_price_change_pct_per_year must be above -100")
        object.__setattr__(self, "nodes", int(self.nodes))
        object.__setattr__(self, "cloud_only_usd", only)
        object.__setattr__(self, "cloud_with_owned_usd", rest)


@dataclass(frozen=True)
class OwnershipResult:
    """Both cumulative cost paths over the depreciation life, where they cross, and the NPV.

    Undiscounted totals are over months 0..L (capex and residual included); ``pv_*`` are the same
    paths discounted at the cost of capital, so ``npv_usd = pv_cloud_usd - pv_owned_usd``.
    """

    months: tuple[int, ...]
    cloud_cumulative_usd: tuple[float, ...]
    owned_cumulative_usd: tuple[float, ...]
    months_to_break_even: float | None
    npv_usd: float
    cloud_total_usd: float
    owned_total_usd: float
    savings_usd: float
    pv_cloud_usd: float
    pv_owned_usd: float
    capex_usd: float
    residual_usd: float
    opex_usd_per_month: float  # all owned nodes, at the case's utilization
    capital_usd_per_month: float  # all owned nodes: the level payment of capital_usd_per_month
    monthly_rate: float


def _monthly_cloud(series: Sequence[float], months: int, growth_pct: float) -> np.ndarray:
    """Months 1..L of a horizon series: repeated cyclically, times (1+g)**year for year (m-1)//12.

    Why (m-1)//12: months 1-12 are the first year at today's prices, months 13-24 the second year
    after one yearly price change, and so on (the same year boundaries as the cyclic repeat of a
    12-month horizon).
    """
    m = np.arange(1, months + 1)
    base = np.asarray(series, dtype=float)[(m - 1) % len(series)]
    return base * (1.0 + growth_pct / 100.0) ** ((m - 1) // 12)


def _crossing(diff: np.ndarray, residual: float) -> float | None:
    """First time the owned cumulative cost is <= the cloud's; ``diff`` is owned - cloud by month.

    Inside a month both bills accrue evenly, so the crossing is interpolated linearly. The residual
    value is a lump received at the END of the last month, not spread over it: when only the
    residual brings the owned curve down, the crossing is exactly the last month.
    """
    spread = diff.copy()
    spread[-1] += residual  # the last month as it accrues, before the hardware is sold
    hits = np.flatnonzero(spread <= 0.0)
    if hits.size == 0:
        return float(len(diff) - 1) if diff[-1] <= 0.0 else None
    k = int(hits[0])
    if k == 0:
        return 0.0
    before, after = float(spread[k - 1]), float(spread[k])
    return (k - 1) + before / (before - after)


def evaluate(case: OwnershipCase) -> OwnershipResult:
    """Cumulative cost of cloud-only against owning ``case.nodes``, their crossing and the NPV.

    Owned path in month m: capex at m = 0; the cloud-only bill while m <= lead time (the nodes are
    not usable yet; a fractional lead splits its month proportionally), afterwards the rest of the
    fleet's cloud bill plus the nodes' opex; the residual value is a negative cost in month L.
    """
    colo = case.colo
    last = colo.depreciation_months
    i = monthly_rate(colo.cost_of_capital_pct_per_year)
    capex = case.nodes * colo.capex_per_node_usd
    residual = capex * colo.residual_value_pct / 100.0
    opex = case.nodes * opex_usd_per_month(colo, case.utilization)

    cloud = _monthly_cloud(case.cloud_only_usd, last, case.cloud_price_change_pct_per_year)
    rest = _monthly_cloud(case.cloud_with_owned_usd, last, case.cloud_price_change_pct_per_year)
    m = np.arange(1, last + 1)
    waiting = np.clip(colo.lead_time_months - (m - 1), 0.0, 1.0)  # share of month m before delivery
    owned = waiting * cloud + (1.0 - waiting) * (rest + opex)
    owned[-1] -= residual

    cloud_flows = np.concatenate(([0.0], cloud))
    owned_flows = np.concatenate(([capex], owned))
    cloud_cum = np.cumsum(cloud_flows)
    owned_cum = np.cumsum(owned_flows)
    discount = (1.0 + i) ** -np.arange(last + 1)
    pv_cloud = float(cloud_flows @ discount)
    pv_owned = float(owned_flows @ discount)
    return OwnershipResult(
        months=tuple(range(last + 1)),
        cloud_cumulative_usd=tuple(float(x) for x in cloud_cum),
        owned_cumulative_usd=tuple(float(x) for x in owned_cum),
        months_to_break_even=_crossing(owned_cum - cloud_cum, residual),
        npv_usd=pv_cloud - pv_owned,
        cloud_total_usd=float(cloud_cum[-1]),
        owned_total_usd=float(owned_cum[-1]),
        savings_usd=float(cloud_cum[-1] - owned_cum[-1]),
        pv_cloud_usd=pv_cloud,
        pv_owned_usd=pv_owned,
        capex_usd=capex,
        residual_usd=residual,
        opex_usd_per_month=opex,
        capital_usd_per_month=case.nodes * capital_usd_per_month(colo),
        monthly_rate=i,
    )


def unit_case(colo: Colocation, cloud_usd_per_node_hour: float, utilization: float) -> OwnershipCase:
    """One owned node against renting one cloud node for the same ``utilization * 730`` hours a month."""
    rent = utilization * HOURS_PER_MONTH * cloud_usd_per_node_hour
    return OwnershipCase(
        colo=colo,
        nodes=1,
        cloud_only_usd=[rent] * 12,
        cloud_with_owned_usd=[0.0] * 12,
        utilization=utilization,
    )


# --------------------------------------------------------------------------------------------
# Sensitivity: tornado and the break-even grid
# --------------------------------------------------------------------------------------------


def _with_utilization(case: OwnershipCase, u: float) -> OwnershipCase:
    """The case at utilization ``u``: the avoided cloud cost scales with u/u_base, energy with u."""
    ratio = u / case.utilization if case.utilization > 0 else 1.0
    only = [
        rest + (full - rest) * ratio
        for full, rest in zip(case.cloud_only_usd, case.cloud_with_owned_usd, strict=True)
    ]
    return OwnershipCase(
        colo=case.colo,
        nodes=case.nodes,
        cloud_only_usd=only,
        cloud_with_owned_usd=case.cloud_with_owned_usd,
        utilization=u,
        cloud_price_change_pct_per_year=case.cloud_price_change_pct_per_year,
    )


def _with_colo(case: OwnershipCase, **update: float) -> OwnershipCase:
    return OwnershipCase(
        colo=case.colo.model_copy(update=update),
        nodes=case.nodes,
        cloud_only_usd=case.cloud_only_usd,
        cloud_with_owned_usd=case.cloud_with_owned_usd,
        utilization=case.utilization,
        cloud_price_change_pct_per_year=case.cloud_price_change_pct_per_year,
    )


def _with_growth(case: OwnershipCase, pct: float) -> OwnershipCase:
    return OwnershipCase(
        colo=case.colo,
        nodes=case.nodes,
        cloud_only_usd=case.cloud_only_usd,
        cloud_with_owned_usd=case.cloud_with_owned_usd,
        utilization=case.utilization,
        cloud_price_change_pct_per_year=pct,
    )


def _signed_pct(pct: float) -> str:
    value = round(pct, 1)  # 0.6 - 0.2 is 0.39999..., which must still read 40%
    return f"{value:+.0f}%/yr" if value.is_integer() else f"{value:+.1f}%/yr"


def _pct(pct: float) -> str:
    value = round(pct, 1)
    return f"{value:.0f}%" if value.is_integer() else f"{value:.1f}%"


def _usd(x: float, cents: bool = False) -> str:
    return f"${x:,.2f}" if cents else f"${x:,.0f}"


def tornado(case: OwnershipCase, ranges: Mapping[str, tuple[float, float]] | None = None) -> list[TornadoBar]:
    """NPV and break-even with each input moved alone to its low and high value, widest swing first.

    ``ranges`` overrides entries of ``DEFAULT_TORNADO_RANGES`` (same names and units). Why one at a
    time: a CFO asks "which assumption must I get right?"; the longest bar answers it.
    """
    chosen = dict(DEFAULT_TORNADO_RANGES)
    for name, pair in (ranges or {}).items():
        if name not in chosen:
            raise ValueError(f"unknown tornado input {name!r}; known: {', '.join(chosen)}")
        chosen[name] = (float(pair[0]), float(pair[1]))
    colo = case.colo
    lo_clip, hi_clip = UTILIZATION_CLIP

    def variants(name: str, low: float, high: float) -> tuple[list[float], list[str], list[OwnershipCase]]:
        """(low, high, base) values, their labels and the (low, high) cases."""
        if name == "utilization":
            u0 = case.utilization
            values = [min(max(u0 + low, lo_clip), hi_clip), min(max(u0 + high, lo_clip), hi_clip), u0]
            return values, [_pct(v * 100) for v in values], [_with_utilization(case, v) for v in values[:2]]
        if name == "cloud_price_change":
            values = [low, high, case.cloud_price_change_pct_per_year]
            return values, [_signed_pct(v) for v in values], [_with_growth(case, v) for v in values[:2]]
        if name == "power_price":
            values = [colo.power_usd_per_kwh * f for f in (low, high, 1.0)]
            cases = [_with_colo(case, power_usd_per_kwh=v) for v in values[:2]]
            return values, [f"${v:,.3f}/kWh" for v in values], cases
        if name == "capex":
            values = [colo.capex_per_node_usd * f for f in (low, high, 1.0)]
            cases = [_with_colo(case, capex_per_node_usd=v) for v in values[:2]]
            return values, [_usd(v) for v in values], cases
        values = [low, high, colo.residual_value_pct]  # residual_value
        cases = [_with_colo(case, residual_value_pct=v) for v in values[:2]]
        return values, [_pct(v) for v in values], cases

    bars = []
    for name, (low, high) in chosen.items():
        values, labels, cases = variants(name, low, high)
        lo, hi = evaluate(cases[0]), evaluate(cases[1])
        bars.append(
            TornadoBar(
                name=name,
                title=_TORNADO_TITLES[name],
                low_value=values[0],
                high_value=values[1],
                base_value=values[2],
                low_label=labels[0],
                high_label=labels[1],
                base_label=labels[2],
                npv_low_usd=lo.npv_usd,
                npv_high_usd=hi.npv_usd,
                break_even_low=lo.months_to_break_even,
                break_even_high=hi.months_to_break_even,
                swing_usd=abs(hi.npv_usd - lo.npv_usd),
            )
        )
    return sorted(bars, key=lambda b: -b.swing_usd)


def break_even_grid(
    colo: Colocation, prices: Mapping[Tier, float], utilizations: Sequence[float] = GRID_UTILIZATIONS
) -> list[GridCell]:
    """Months to break even of one node for each cloud price (by its tier) x utilization (``unit_case``).

    Why: quoted "12-18 months" break-evens hide which price they compare against (on-demand or
    committed) and what utilization they assume; the grid shows how far both move the answer.
    """
    cells = []
    for tier, price in prices.items():
        for u in utilizations:
            result = evaluate(unit_case(colo, price, u))
            cells.append(
                GridCell(
                    price=tier,
                    usd_per_node_hour=float(price),
                    utilization=float(u),
                    months_to_break_even=result.months_to_break_even,
                    npv_usd=result.npv_usd,
                )
            )
    return cells


# --------------------------------------------------------------------------------------------
# breakeven.json
# --------------------------------------------------------------------------------------------


def breakeven_data(
    case: OwnershipCase,
    *,
    scenario: str,
    nodes_from: str,
    comparator: Comparator,
    result: OwnershipResult | None = None,
    utilizations: Sequence[float] = GRID_UTILIZATIONS,
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> BreakevenDocument:
    """The ``gpuplan.breakeven/v1`` document (``models/breakeven.py``) that the break-even report renders.

    ``comparator`` names the cloud offering and its hourly prices; prices it does not have are left out
    of the grid. Money per month in ``monthly`` is per node; curves are for all ``nodes``.
    """
    result = result if result is not None else evaluate(case)
    colo = case.colo
    return BreakevenDocument(
        scenario=scenario,
        nodes=case.nodes,
        nodes_from=nodes_from,
        months_to_break_even=result.months_to_break_even,
        npv_usd=result.npv_usd,
        owned_usd_per_node_hour=owned_usd_per_node_hour(colo),
        utilization=case.utilization,
        cloud_price_change_pct_per_year=case.cloud_price_change_pct_per_year,
        comparator=comparator,
        curves=Curves(
            month=list(result.months),
            cloud_only_cumulative_usd=[round(x, 2) for x in result.cloud_cumulative_usd],
            owned_cumulative_usd=[round(x, 2) for x in result.owned_cumulative_usd],
        ),
        grid=break_even_grid(colo, comparator.prices(), utilizations),
        tornado=tornado(case, ranges),
        inputs=colo,
        monthly=MonthlyOwnedCost(
            capital_usd=capital_usd_per_month(colo), **monthly_split(colo, case.utilization)
        ),
        totals=Totals.model_validate(result, from_attributes=True),  # the result's fields of that name
    )


def owned_offering(colocation: Colocation) -> Offering:
    """The scenario's own servers as an offering bought only on the ``owned`` term: no on-demand or
    spot price, the amortized cost per node-hour (``models/tco.py``), usable after the lead time
    (``available_from_hour``). The planner's sets and ``gpuplan verify`` both take it from here."""
    memory = colocation.gpu_memory_gb or GPU_MEMORY_GB[colocation.gpu_model]
    return Offering(
        cloud=OWNED_CLOUD,
        region=colocation.site,
        instance_type=f"{colocation.gpus_per_node}x{colocation.gpu_model}",
        gpu_model=colocation.gpu_model,
        gpus_per_node=colocation.gpus_per_node,
        gpu_memory_gb=memory,
        fabric=colocation.fabric,
        fabric_gbps=colocation.fabric_gbps,
        on_demand_usd_h=None,
        spot_usd_h=None,
        reserved_1y_usd_h=None,
        reserved_3y_usd_h=None,
        spot_interruptions_per_hour=0.0,
        max_nodes=colocation.max_nodes,
        source="scenario colocation section; price = capital recovery + colo, support and energy per 730 h",
        owned_usd_h=owned_usd_per_node_hour(colocation),
        available_from_hour=colocation.lead_time_months * HOURS_PER_MONTH,
    )
