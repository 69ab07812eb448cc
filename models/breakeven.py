"""``breakeven.json``: owning colocation nodes against the cloud (schema ``gpuplan.breakeven/v1``).

``models.tco.breakeven_data`` builds a :class:`BreakevenDocument` from an ownership case, ``gpuplan
breakeven`` adds the plans behind it and writes it, and the break-even report reads it. Money is USD;
``monthly`` is per node and per month, the curves are for all ``nodes`` from the purchase (month 0) to
the end of the depreciation life; utilizations are fractions, ``*_pct`` fields percent units.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final, Literal

from pydantic import ConfigDict, Field, model_validator

from models.documents import DocumentPart, read_json_document
from models.scenario import Colocation
from models.tiers import Tier

__all__ = [
    "SCHEMA",
    "BreakevenDocument",
    "Comparator",
    "Curves",
    "GridCell",
    "MonthlyOwnedCost",
    "PlanRef",
    "TornadoBar",
    "TornadoInput",
    "Totals",
]

SCHEMA: Final = "gpuplan.breakeven/v1"

#: The inputs the sensitivity moves one at a time (``models.tco.DEFAULT_TORNADO_RANGES``).
TornadoInput = Literal["utilization", "cloud_price_change", "power_price", "capex", "residual_value"]


class Comparator(DocumentPart):
    """The cloud node matching the owned one (same GPU model and count), cheapest on demand; its prices
    per node-hour. ``offering`` is None when the catalog has no such node."""

    offering: str | None
    on_demand_usd_h: float | None = None
    reserved_1y_usd_h: float | None = None
    reserved_3y_usd_h: float | None = None

    def prices(self) -> dict[Tier, float]:
        """The known prices by the tier they are paid on (the rows of the break-even grid)."""
        prices = {
            Tier.ON_DEMAND: self.on_demand_usd_h,
            Tier.RESERVED_1Y: self.reserved_1y_usd_h,
            Tier.RESERVED_3Y: self.reserved_3y_usd_h,
        }
        return {tier: float(price) for tier, price in prices.items() if price is not None}


class Curves(DocumentPart):
    """Cumulative cost of cloud only and of owning, at each month end (month 0 = the purchase)."""

    month: list[int] = Field(min_length=1)
    cloud_only_cumulative_usd: list[float]
    owned_cumulative_usd: list[float]

    @model_validator(mode="after")
    def _one_value_per_month(self) -> Curves:
        for name in ("cloud_only_cumulative_usd", "owned_cumulative_usd"):
            if len(getattr(self, name)) != len(self.month):
                raise ValueError(f"{name} has {len(getattr(self, name))} values for {len(self.month)} months")
        return self


class GridCell(DocumentPart):
    """One owned node against renting one cloud node at ``price`` for ``utilization`` of the month."""

    price: Tier
    usd_per_node_hour: float
    utilization: float
    months_to_break_even: float | None = Field(description="None: not within the depreciation life")
    npv_usd: float


class TornadoBar(DocumentPart):
    """NPV and break-even with one input at its low and at its high value, all else at the base."""

    name: TornadoInput
    title: str
    low_value: float
    high_value: float
    base_value: float
    low_label: str
    high_label: str
    base_label: str
    npv_low_usd: float
    npv_high_usd: float
    break_even_low: float | None
    break_even_high: float | None
    swing_usd: float = Field(description="|npv_high_usd - npv_low_usd|: the bars are sorted by it")


class MonthlyOwnedCost(DocumentPart):
    """One owned node's cost per month: capital recovery and opex (colo fee + support + energy)."""

    capital_usd: float
    colo_usd: float
    support_usd: float
    energy_usd: float = Field(description="at the owned nodes' utilization (idle power ignored)")
    opex_usd: float


class Totals(DocumentPart):
    """Over the depreciation life, all owned nodes; ``pv_*`` discounted at the cost of capital."""

    cloud_total_usd: float
    owned_total_usd: float
    savings_usd: float
    pv_cloud_usd: float
    pv_owned_usd: float
    capex_usd: float
    residual_usd: float


class PlanRef(DocumentPart):
    """A plan ``gpuplan breakeven`` made, in ``dir`` (relative to the breakeven directory)."""

    total_usd: float
    owned_nodes: int
    dir: str
    gap: float | None = Field(
        None, description="the plan's certified gap (plan.json solver.gap); None in files before issue 42"
    )


class BreakevenDocument(DocumentPart):
    """``breakeven.json``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    schema_: Literal["gpuplan.breakeven/v1"] = Field(SCHEMA, alias="schema")
    scenario: str
    nodes: int = Field(ge=0, description="owned nodes compared with the cloud")
    nodes_from: str = Field(description="plan, --nodes, or max_nodes (the optimal plan buys none)")
    months_to_break_even: float | None = Field(description="None: never within the depreciation life")
    npv_usd: float = Field(description="positive: owning saves money at the cost of capital")
    owned_usd_per_node_hour: float = Field(description="the price of the planner's owned tier")
    utilization: float = Field(ge=0, le=1, description="share of the owned nodes' usable hours used")
    cloud_price_change_pct_per_year: float
    comparator: Comparator
    curves: Curves
    grid: list[GridCell]
    tornado: list[TornadoBar]
    inputs: Colocation
    monthly: MonthlyOwnedCost
    totals: Totals
    plans: dict[str, PlanRef] = Field(
        default_factory=dict, description="the plans behind the numbers: cloud-only, owning, maybe optimal"
    )

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2) + "\n"

    @classmethod
    def read(cls, path: str | Path) -> BreakevenDocument:
        """breakeven.json, validated; InputError naming the file and the field for anything wrong."""
        return read_json_document(path, cls, SCHEMA, "gpuplan breakeven")
