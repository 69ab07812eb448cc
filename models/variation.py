"""What-if changes to a scenario and its catalog: ``demand=x1.3``, ``spot_price=+50%``, ``capacity:H100=16``.

One small grammar serves ``gpuplan whatif --vary``, sweep files and a scenario's own ``adjust:`` list, so a
"spot-price shock" reads the same wherever it is written::

    KEY[:TARGET]=VALUE      VALUE is x1.3 (times), +50% / -20% (relative) or 16 (set)

=====================  ==================================  ============================================
key                    target (optional)                   effect
=====================  ==================================  ============================================
demand                 a service or team name              multiplies replicas (``inference[].scale``)
growth                 a service or team name              multiplies ``monthly_growth`` (or sets it)
training_hours         a training job or team name         multiplies the run time of training jobs
price                  a cloud, GPU model or offering id   every rented tier (on-demand, spot, 1y, 3y)
on_demand_price        same                                on-demand only
spot_price             same                                spot only
reserved_price         same                                1y and 3y commitments
spot_interruptions     same                                expected spot interruptions per node-hour
capacity               same                                ``max_nodes`` of each matching offering
max_spot_share         (none)                              sets ``purchase.max_spot_share``
schedule               (none)                              sets ``purchase.schedule``: horizon,
                                                           quarterly or monthly (a word, not a number)
colocation.FIELD       (none)                              a field of the ``colocation`` section
=====================  ==================================  ============================================

``capacity`` with a relative value needs a reference for unlimited offerings: ``reference_nodes`` (the
peak nodes of each offering in a base plan, which ``gpuplan whatif`` supplies), so "-50%" means "half of
what the unconstrained plan would hold". An absolute value (``capacity:H100=16``) needs none.
Every problem raises :class:`~models.errors.InputError` naming the change and what is wrong.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from models.catalog import CLOUDS, OWNED_CLOUD, PRICE_FIELD, Catalog, Offering
from models.errors import InputError
from models.scenario import Colocation, PurchaseSchedule, Scenario, parse
from models.tiers import Tier

#: The tiers each price key changes (owned nodes are priced from the colocation section instead).
PRICE_TIERS: dict[str, tuple[Tier, ...]] = {
    "price": (Tier.ON_DEMAND, Tier.SPOT, Tier.RESERVED_1Y, Tier.RESERVED_3Y),
    "on_demand_price": (Tier.ON_DEMAND,),
    "spot_price": (Tier.SPOT,),
    "reserved_price": (Tier.RESERVED_1Y, Tier.RESERVED_3Y),
}
WORKLOAD_KEYS = ("demand", "growth", "training_hours")
OFFERING_KEYS = (*PRICE_TIERS, "spot_interruptions", "capacity")
KEYS = (*WORKLOAD_KEYS, *OFFERING_KEYS, "max_spot_share", "schedule", "colocation.FIELD")
#: The words ``schedule=`` takes (``models.scenario.PurchaseSchedule``).
SCHEDULES: tuple[str, ...] = get_args(PurchaseSchedule)
_SCHEDULE = re.compile(r"^\s*schedule\s*=\s*(?P<word>[a-z]+)\s*$", re.IGNORECASE)

_PATTERN = re.compile(
    r"^\s*(?P<key>[a-z_.]+)(?::(?P<target>[^=]+))?\s*=\s*(?P<value>[x*]?\s*[-+]?[0-9.]+(?:e-?\d+)?\s*%?)\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Variation:
    """One parsed change. ``op`` is ``x`` (multiply), ``%`` (relative change) or ``=`` (set)."""

    key: str
    target: str | None
    op: str
    value: float
    text: str
    word: str | None = None  # ``schedule=``: the schedule's name

    def factor(self, current: float) -> float:
        """The new value of a quantity that is ``current`` now."""
        if self.op == "x":
            return current * self.value
        if self.op == "%":
            return current * (1.0 + self.value / 100.0)
        return self.value

    @property
    def label(self) -> str:
        return self.text.strip()


def parse_variation(text: str, where: str = "--vary") -> Variation:
    """``"spot_price:aws=+50%"`` -> Variation; InputError naming ``where`` when it is not understood."""
    schedule = _SCHEDULE.match(text)
    if schedule:
        word = schedule["word"].lower()
        if word not in SCHEDULES:
            raise InputError(None, where, f"{text!r}: schedule is one of {', '.join(SCHEDULES)}")
        return Variation("schedule", None, "=", float(SCHEDULES.index(word)), text, word)
    match = _PATTERN.match(text)
    if not match:
        raise InputError(
            None, where, f"cannot read {text!r}; expected KEY[:TARGET]=VALUE with VALUE like x1.3, +50% or 16"
        )
    key = match["key"].lower()
    target = match["target"].strip() if match["target"] else None
    raw = match["value"].replace(" ", "")
    if raw[0] in "x*":
        op, number = "x", raw[1:]
    elif raw.endswith("%"):
        op, number = "%", raw[:-1]
    else:
        op, number = "=", raw
    try:
        value = float(number)
    except ValueError:
        raise InputError(None, where, f"{text!r}: {number!r} is not a number") from None
    if not math.isfinite(value):
        raise InputError(None, where, f"{text!r}: the value must be finite")
    if key.startswith("colocation."):
        field = key.split(".", 1)[1]
        if field not in Colocation.model_fields:
            raise InputError(
                None,
                where,
                f"{text!r}: colocation has no field {field!r}; fields: " + ", ".join(Colocation.model_fields),
            )
    elif key not in KEYS:
        raise InputError(None, where, f"{text!r}: unknown key {key!r}; keys: {', '.join(KEYS)}")
    if op == "x" and value < 0:
        raise InputError(None, where, f"{text!r}: a factor must be >= 0")
    if op == "%" and value < -100:
        raise InputError(None, where, f"{text!r}: a change below -100% would make it negative")
    if key in (*WORKLOAD_KEYS[:1], *PRICE_TIERS) and op == "=":
        raise InputError(
            None, where, f"{text!r}: {key} takes a factor (x1.3) or a change (+30%), not a value"
        )
    if key == "max_spot_share" and (op != "=" or target):
        raise InputError(None, where, f"{text!r}: write max_spot_share=0.3 (a value, no target)")
    return Variation(key, target, op, value, text)


def parse_all(texts: Iterable[str], where: str = "--vary") -> list[Variation]:
    return [parse_variation(text, f"{where}[{k}]") for k, text in enumerate(texts)]


def apply_variations(
    scenario: Scenario,
    catalog: Catalog,
    variations: Iterable[Variation],
    reference_nodes: Mapping[str, float] | None = None,
    where: str = "--vary",
) -> tuple[Scenario, Catalog]:
    """The scenario and catalog with every change applied, in order (the result is validated again).

    ``where`` names the changes' origin in errors (``--vary``, or ``adjust`` for a scenario's own list).
    """
    try:
        return _apply(scenario, catalog, list(variations), reference_nodes)
    except InputError as error:
        raise InputError(
            error.file, where if error.where == "--vary" else error.where, error.problem
        ) from None


def _apply(
    scenario: Scenario,
    catalog: Catalog,
    variations: list[Variation],
    reference_nodes: Mapping[str, float] | None,
) -> tuple[Scenario, Catalog]:
    data = scenario.model_dump(mode="python", exclude={"adjust"})
    offerings = list(catalog.offerings)
    for variation in variations:
        if variation.key in WORKLOAD_KEYS:
            _vary_workloads(data, variation)
        elif variation.key in OFFERING_KEYS:
            offerings = _vary_offerings(offerings, variation, reference_nodes)
        elif variation.key == "max_spot_share":
            data["purchase"]["max_spot_share"] = variation.value
        elif variation.key == "schedule":
            data["purchase"]["schedule"] = variation.word
        else:
            _vary_colocation(data, variation)
    try:
        varied = parse(data)
    except InputError as error:
        raise InputError(
            None, "--vary", f"the changed scenario is not valid: {error.where}: {error.problem}"
        ) from None
    return varied, Catalog(offerings, source=catalog.source)


def _matches_workload(item: Mapping[str, Any], target: str | None) -> bool:
    return target is None or item["name"] == target or item["team"] == target


def _vary_workloads(data: dict[str, Any], variation: Variation) -> None:
    section = "training" if variation.key == "training_hours" else "inference"
    chosen = [item for item in data[section] if _matches_workload(item, variation.target)]
    if not chosen:
        raise InputError(
            None, "--vary", f"{variation.label!r}: no {section} workload or team named {variation.target!r}"
        )
    for item in chosen:
        if variation.key == "demand":
            item["scale"] = variation.factor(item.get("scale", 1.0))
        elif variation.key == "training_hours":
            item["hours"] = variation.factor(item["hours"])
        elif "monthly_growth" in item["replicas"]:  # growth; a CSV series has no growth to change
            item["replicas"]["monthly_growth"] = variation.factor(item["replicas"]["monthly_growth"])


def _matches_offering(offering: Offering, target: str | None) -> bool:
    if target is None:
        return True
    lowered = target.lower()
    if lowered in CLOUDS or lowered == OWNED_CLOUD:
        return offering.cloud == lowered
    if target.count(":") == 2:
        return offering.id == target
    return offering.matches_gpu([target])


def _vary_offerings(
    offerings: list[Offering], variation: Variation, reference_nodes: Mapping[str, float] | None
) -> list[Offering]:
    hits = [o for o in offerings if _matches_offering(o, variation.target)]
    if not hits:
        raise InputError(None, "--vary", f"{variation.label!r}: no offering matches {variation.target!r}")
    changed = []
    update: dict[str, Any]  # Offering fields: prices, an interruption rate or a node limit
    for offering in offerings:
        if offering not in hits:
            changed.append(offering)
            continue
        if variation.key in PRICE_TIERS:
            prices = {tier: offering.price(tier) for tier in PRICE_TIERS[variation.key]}
            update = {
                PRICE_FIELD[tier]: None if price is None else variation.factor(price)
                for tier, price in prices.items()
            }
        elif variation.key == "spot_interruptions":
            update = {"spot_interruptions_per_hour": variation.factor(offering.spot_interruptions_per_hour)}
        else:
            update = {"max_nodes": _capacity(offering, variation, reference_nodes)}
        changed.append(dataclasses.replace(offering, **update))
    return changed


def _capacity(offering: Offering, variation: Variation, reference: Mapping[str, float] | None) -> int:
    if variation.op == "=":
        return max(0, math.floor(variation.value))
    current: float | None = offering.max_nodes
    if current is None:
        if reference is None:
            raise InputError(
                None,
                "--vary",
                f"{variation.label!r}: {offering.id} has no capacity limit to scale; give a node count "
                f"(capacity:{variation.target or 'H100'}=16), or use gpuplan whatif, which scales the nodes "
                "the base plan holds",
            )
        current = reference.get(offering.id, 0.0)
    return max(0, math.floor(variation.factor(float(current)) + 1e-9))


def _vary_colocation(data: dict[str, Any], variation: Variation) -> None:
    field = variation.key.split(".", 1)[1]
    section = data.get("colocation")
    if field == "max_nodes" and variation.op == "=" and variation.value < 1:
        data["colocation"] = None  # no owned nodes: the cloud-only fleet
        return
    if section is None:
        if field != "max_nodes" or variation.op != "=":
            raise InputError(
                None,
                "--vary",
                f"{variation.label!r}: the scenario has no colocation section; add one, or start with "
                "colocation.max_nodes=N (the documented defaults for the rest)",
            )
        data["colocation"] = Colocation(max_nodes=int(variation.value)).model_dump()
        return
    current = section.get(field)
    if isinstance(current, str) or (current is None and variation.op != "="):
        raise InputError(None, "--vary", f"{variation.label!r}: colocation.{field} is not a number to change")
    value = variation.factor(float(current or 0.0))
    section[field] = round(value) if field in ("max_nodes", "depreciation_months", "gpus_per_node") else value
