"""Private prices on top of a catalog: an enterprise discount per cloud, negotiated rates per offering.

Large buyers do not pay list prices: AWS's Enterprise Discount Program and private pricing addenda, Google's
and Microsoft's negotiated agreements take a percentage off, or set a rate for one instance type and term.
A pricing overlay (``--prices overlay.yaml``, or a scenario's ``pricing:``) says so once, and every price it
changes is marked ``negotiated`` in the catalog, with the overlay's note as its source, so the plan and the
report say which figures are the user's own::

    discounts:                       # percent off the catalog's prices of a cloud
      - cloud: aws
        percent: 8
        tiers: [on_demand, reserved_1y, reserved_3y]   # default: every tier
        note: EDP 2026-2028
    rates:                           # a negotiated price per node-hour, net of any discount
      - offering: aws:us-east-2:p5.48xlarge
        tier: reserved_3y
        usd_h: 21.10
        as_of: 2026-11-02
        note: private pricing addendum

A rate replaces the catalog's price (a discount does not apply on top of it: a negotiated rate is net);
a discount multiplies every other price of its cloud and tiers. An offering or tier the catalog does not
have is an error naming it, never ignored.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from models.catalog import CLOUDS, TIER_COLUMN, Catalog, Cloud, Offering, PriceProvenance
from models.errors import InputError
from models.numbers import StrictModel
from models.tiers import Tier

__all__ = ["Discount", "NegotiatedRate", "PricingOverlay", "apply_overlay", "load_overlay", "parse_overlay"]

TierName = Literal["on_demand", "spot", "reserved_1y", "reserved_3y"]
_TIER_OF: dict[str, Tier] = {prefix: tier for tier, prefix in TIER_COLUMN.items()}
Note = Annotated[str, Field(max_length=500, description="what the price is: the agreement, its date")]


def _every_tier() -> list[TierName]:
    return ["on_demand", "spot", "reserved_1y", "reserved_3y"]


class Discount(StrictModel):
    """A percentage off every catalog price of one cloud (an EDP, a negotiated agreement)."""

    cloud: Cloud
    percent: float = Field(gt=0, lt=100, description="percent off the catalog price: above 0, below 100")
    tiers: list[TierName] = Field(
        default_factory=_every_tier,
        min_length=1,
        max_length=4,
        description="the tiers it applies to",
    )
    note: Note = ""
    as_of: dt.date | None = Field(None, description="when the agreement was signed or last checked")


class NegotiatedRate(StrictModel):
    """One offering's price on one tier, as negotiated (net: no discount applies on top)."""

    offering: str = Field(max_length=200, description="offering id cloud:region:instance_type")
    tier: TierName
    usd_h: float = Field(gt=0, lt=10_000, description="USD per node-hour: above 0, below 10000")
    note: Note = ""
    as_of: dt.date | None = Field(None, description="when the rate was agreed or quoted")


class PricingOverlay(StrictModel):
    """The user's own prices: discounts per cloud, negotiated rates per offering and tier."""

    discounts: list[Discount] = Field(default_factory=list, max_length=len(CLOUDS) * 4)
    rates: list[NegotiatedRate] = Field(default_factory=list, max_length=100_000)


def load_overlay(path: Path) -> PricingOverlay:
    """A pricing overlay YAML file, strictly read (unknown keys, bad numbers: an InputError naming them)."""
    from models.yamlfile import read_yaml

    data = read_yaml(path, "pricing overlay")
    if data is None:
        raise InputError(path, None, "empty file: a pricing overlay has discounts:, rates: or both")
    return parse_overlay(data, path, "")


def parse_overlay(data: object, file: Path | None, where: str) -> PricingOverlay:
    """``data`` (YAML data) as an overlay; errors name ``file``, and the field under ``where``."""
    try:
        return PricingOverlay.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        at = f"{where}.{path}" if where and path else where or path or None
        raise InputError(file, at, first["msg"]) from None


def apply_overlay(catalog: Catalog, overlay: PricingOverlay, label: str, where: str = "") -> Catalog:
    """``catalog`` with the overlay's rates and discounts, each changed price marked ``negotiated`` with the
    overlay's note and ``label`` (the file, or the scenario's ``pricing:``) as its source. Errors name the
    entry (``rates[2].offering``) under ``where`` (``pricing.`` for a scenario's own overlay)."""
    by_id = {o.id: o for o in catalog}
    for index, rate in enumerate(overlay.rates):
        if rate.offering not in by_id:
            try:
                catalog.get(rate.offering)
            except KeyError as missing:
                raise InputError(None, f"{where}rates[{index}].offering", str(missing).strip('"')) from None
    changed: dict[str, Offering] = {}
    negotiated: set[tuple[str, Tier]] = set()
    for index, rate in enumerate(overlay.rates):
        tier = _TIER_OF[rate.tier]
        offering = changed.get(rate.offering, by_id[rate.offering])
        if offering.price(tier) is None and tier != Tier.ON_DEMAND:
            raise InputError(
                None,
                f"{where}rates[{index}].tier",
                f"{rate.offering} has no {rate.tier} price in the catalog: a negotiated rate changes a price "
                "the cloud sells (add the tier to your catalog CSV to plan one it does not)",
            )
        source = _source(label, rate.note, f"negotiated rate ${rate.usd_h:,.4g} per node-hour")
        changed[rate.offering] = offering.with_price(tier, rate.usd_h, _negotiated(tier, source, rate.as_of))
        negotiated.add((rate.offering, tier))
    for index, discount in enumerate(overlay.discounts):
        matching = [o for o in catalog if o.cloud == discount.cloud]
        if not matching:
            raise InputError(
                None, f"{where}discounts[{index}].cloud", f"the catalog has no {discount.cloud} offering"
            )
        factor = 1 - discount.percent / 100
        for original in matching:
            offering = changed.get(original.id, original)
            for name in discount.tiers:
                tier = _TIER_OF[name]
                price = offering.price(tier)
                if price is None or (offering.id, tier) in negotiated:
                    continue
                was = offering.price_provenance(tier)
                source = _source(
                    label, discount.note, f"{was.basis} {was.source} less {discount.percent:g} %"
                )
                offering = offering.with_price(
                    tier, price * factor, _negotiated(tier, source, discount.as_of)
                )
            changed[original.id] = offering
    return catalog.with_offerings((changed.get(o.id, o) for o in catalog), overlay=label)


def _negotiated(tier: Tier, source: str, as_of: dt.date | None) -> PriceProvenance:
    moment = None if as_of is None else dt.datetime.combine(as_of, dt.time(), tzinfo=dt.UTC)
    return PriceProvenance(tier=tier.value, basis="negotiated", source=source, as_of=moment)


def _source(label: str, note: str, what: str) -> str:
    return f"{label}: {note + ': ' if note else ''}{what}"
