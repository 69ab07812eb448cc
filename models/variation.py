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
Every problem raises :class:`~models.errors.InputError` naming the change where it was written
(``--vary[0]``, ``adjust[2]``, a sweep's ``variants[1].vary[0]``) and what is wrong: a target that matches
nothing, a value set out of its range (``capacity=-4``, ``max_spot_share=1.5``, ``colocation.max_nodes=2.5``),
a number that is not plain ASCII digits or beyond :data:`MAX_CHANGE` (``+1e308%``), a change that makes a
number infinite or leaves an offering outside the catalog's ranges (a price of $10,000 per node-hour or
more, more than one spot interruption per node-hour, more than 10,000 nodes), or one after which the
scenario or an offering is no longer valid (both are validated again).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import ValidationError

from models.catalog import (
    CLOUDS,
    COLUMN_RANGES,
    MAX_NODES,
    OWNED_CLOUD,
    PRICE_FIELD,
    Catalog,
    Offering,
)
from models.errors import InputError
from models.numbers import Range, number_text, strict_float
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

#: The largest number a change may carry (x1e6, +1e6 %, a value of 1e6): far beyond any shock a plan
#: is asked about, and small enough that no product of a few changes overflows a float.
MAX_CHANGE: float = 1e6
#: What a changed offering's numbers must stay within: the catalog's own ranges (a price may drop to 0,
#: a free tier in a what-if; it may not reach the catalog's cap), so a variant is a catalog gpuplan reads.
_OFFERING_RANGES: dict[str, Range] = {
    **{field: Range(ge=0, lt=COLUMN_RANGES[field].lt, unit=COLUMN_RANGES[field].unit)
       for field in ("on_demand_usd_h", "spot_usd_h", "reserved_1y_usd_h", "reserved_3y_usd_h")},
    "spot_interruptions_per_hour": COLUMN_RANGES["spot_interruptions_per_hour"],
    "max_nodes": Range(ge=0, le=MAX_NODES, unit="nodes", whole=True),
}  # fmt: skip

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
    where: str = "--vary"  # where it was written (``--vary[0]``, ``adjust[2]``): errors name it

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

    def error(self, problem: str) -> InputError:
        """``--vary[0]: 'capacity=-4': <problem>``."""
        return InputError(None, self.where, f"{self.label!r}: {problem}")


def parse_variation(text: str, where: str = "--vary") -> Variation:
    """``"spot_price:aws=+50%"`` -> Variation; InputError naming ``where`` when it is not understood."""
    schedule = _SCHEDULE.match(text)
    if schedule:
        word = schedule["word"].lower()
        if word not in SCHEDULES:
            raise InputError(None, where, f"{text!r}: schedule is one of {', '.join(SCHEDULES)}")
        return Variation("schedule", None, "=", float(SCHEDULES.index(word)), text, word, where)
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
        value = strict_float(number)
    except ValueError as exc:
        why = str(exc) if "finite" in str(exc) else f"{number!r} is not a number"
        raise InputError(None, where, f"{text!r}: {why}") from None
    if abs(value) > MAX_CHANGE:
        raise InputError(
            None,
            where,
            f"{text!r}: {number_text(value)} is beyond any change gpuplan plans with "
            f"(at most {number_text(MAX_CHANGE)} either way)",
        )
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
    if op == "=":
        problem = _set_value_problem(key, value)
        if problem:
            raise InputError(None, where, f"{text!r}: {problem}")
    return Variation(key, target, op, value, text, where=where)


#: Colocation fields that count (nodes, GPUs, months): a value set must be whole, a factor is rounded.
_WHOLE_COLOCATION_FIELDS = tuple(name for name, f in Colocation.model_fields.items() if f.annotation is int)


def _set_value_problem(key: str, value: float) -> str | None:
    """What is wrong with setting ``key`` to ``value`` whatever the scenario (None: nothing); the rest is
    checked when the changed scenario is validated again."""
    if key == "capacity" and not (value >= 0 and value.is_integer()):
        return f"capacity is a number of nodes (a whole number >= 0), got {value:g}"
    if key == "spot_interruptions" and value < 0:
        return f"spot interruptions per node-hour must be >= 0, got {value:g}"
    if key == "training_hours" and value <= 0:
        return f"training hours must be > 0, got {value:g}"
    if key == "growth" and value <= -1:
        return f"monthly growth must be > -1 (a shrink of less than 100% a month), got {value:g}"
    if key == "max_spot_share" and not 0 <= value <= 1:
        return f"max_spot_share is a share of training GPU-hours, from 0 to 1, got {value:g}"
    field = key.removeprefix("colocation.")
    if field in _WHOLE_COLOCATION_FIELDS and not (value >= 0 and value.is_integer()):
        zero = " (0: no owned nodes)" if field == "max_nodes" else ""
        return f"colocation.{field} is a whole number >= 0{zero}, got {value:g}"
    return None


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

    Errors name the change they come from (its ``where``: ``--vary[1]``, ``adjust[0]``); ``where`` names
    the origin of changes that do not say (a :class:`Variation` made in code).
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
    data, offerings = _changed(scenario, catalog, variations, reference_nodes)
    try:
        varied = parse(data)
    except InputError as error:
        problem = f"the changed scenario is not valid: {error.where}: {error.problem}"
        culprit = _first_invalid(scenario, catalog, variations, reference_nodes)
        raise (culprit.error(problem) if culprit else InputError(None, "--vary", problem)) from None
    return varied, catalog.with_offerings(offerings)


def _changed(
    scenario: Scenario,
    catalog: Catalog,
    variations: list[Variation],
    reference_nodes: Mapping[str, float] | None,
) -> tuple[dict[str, Any], list[Offering]]:
    """The scenario's data and the offerings with ``variations`` applied, not validated yet."""
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
    # a field the user left out stays left out, unless a change wrote to it: a default written back
    # would read as set (``clouds`` set explicitly must name clouds the catalog has)
    untouched = scenario.model_dump(mode="python", exclude={"adjust"})
    for name in list(data):
        if name not in scenario.model_fields_set and data[name] == untouched[name]:
            del data[name]
    return data, offerings


def _first_invalid(
    scenario: Scenario,
    catalog: Catalog,
    variations: list[Variation],
    reference_nodes: Mapping[str, float] | None,
) -> Variation | None:
    """The change after which the scenario is no longer valid (to name it in the error)."""
    for count in range(1, len(variations) + 1):
        data, _ = _changed(scenario, catalog, variations[:count], reference_nodes)
        try:
            parse(data)
        except InputError:
            return variations[count - 1]
    return None


def _finite(variation: Variation, what: str, value: float) -> float:
    """``value``, the new value of ``what``; an error naming the change when it is NaN or infinite."""
    if not math.isfinite(value):
        raise variation.error(f"makes {what} {value:g}, not a finite number")
    return value


def _matches_workload(item: Mapping[str, Any], target: str | None) -> bool:
    return target is None or item["name"] == target or item["team"] == target


def _vary_workloads(data: dict[str, Any], variation: Variation) -> None:
    section = "training" if variation.key == "training_hours" else "inference"
    chosen = [item for item in data[section] if _matches_workload(item, variation.target)]
    if not chosen:
        raise variation.error(f"no {section} workload or team named {variation.target!r}")
    if variation.key == "growth" and not any("monthly_growth" in item["replicas"] for item in chosen):
        names = ", ".join(item["name"] for item in chosen)
        raise variation.error(
            f"{names} follow a CSV series, which has no monthly growth to change (scale it with demand=x...)"
        )
    months = data["horizon"]["hours"] / 730.0  # growth compounds per 730 h (models/workloads.py)
    for item in chosen:
        name = f"{section} {item['name']!r}"
        if variation.key == "demand":
            scale = variation.factor(item.get("scale", 1.0))
            item["scale"] = _finite(variation, f"the scale of {name}", scale)
        elif variation.key == "training_hours":
            item["hours"] = _finite(variation, f"the hours of {name}", variation.factor(item["hours"]))
        elif "monthly_growth" in item["replicas"]:  # growth; a CSV series has no growth to change
            growth = variation.factor(item["replicas"]["monthly_growth"])
            item["replicas"]["monthly_growth"] = _finite(variation, f"the monthly growth of {name}", growth)
        _check_peak(variation, name, item, months)


def _check_peak(variation: Variation, name: str, item: Mapping[str, Any], months: float) -> None:
    """The most replicas a changed service asks for over the horizon must be a finite number."""
    replicas = item.get("replicas")
    if not isinstance(replicas, Mapping) or "csv" in replicas:
        return  # training, or a CSV series: its numbers are read (and checked) when planning
    growth = replicas.get("monthly_growth", 0.0)
    peak = max(replicas.get("base", 0.0), replicas.get("peak", 0.0)) * item.get("scale", 1.0)
    try:
        most = peak * max(1.0, (1.0 + growth) ** months) if growth > -1 else peak
    except OverflowError:
        most = math.inf
    if not math.isfinite(most):
        raise variation.error(f"makes the replicas of {name} grow to {most:g} over the horizon")


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
        raise variation.error(f"no offering matches {variation.target!r}")
    changed = []
    update: dict[str, Any]  # Offering fields: prices, an interruption rate or a node limit
    for offering in offerings:
        if offering not in hits:
            changed.append(offering)
            continue
        if variation.key in PRICE_TIERS:
            prices = {tier: offering.price(tier) for tier in PRICE_TIERS[variation.key]}
            update = {
                PRICE_FIELD[tier]: None
                if price is None
                else _finite(variation, f"the {tier} price of {offering.id}", variation.factor(price))
                for tier, price in prices.items()
            }
        elif variation.key == "spot_interruptions":
            rate = variation.factor(offering.spot_interruptions_per_hour)
            what = f"the spot interruptions of {offering.id}"
            update = {"spot_interruptions_per_hour": _finite(variation, what, rate)}
        else:
            update = {"max_nodes": _capacity(offering, variation, reference_nodes)}
        for field, value in update.items():
            problem = None if value is None else _OFFERING_RANGES[field].problem(value)
            if problem:
                raise variation.error(f"makes {field} of {offering.id} {number_text(value)}: it {problem}")
        try:
            changed.append(dataclasses.replace(offering, **update))
        except ValueError as exc:  # the offering's own checks (Offering.__post_init__)
            raise variation.error(f"the changed offering is not valid: {exc}") from None
    return changed


def _capacity(offering: Offering, variation: Variation, reference: Mapping[str, float] | None) -> int:
    if variation.op == "=":
        return int(variation.value)  # a whole number >= 0 (parse_variation)
    current: float | None = offering.max_nodes
    if current is None:
        if reference is None:
            raise variation.error(
                f"{offering.id} has no capacity limit to scale; give a node count "
                f"(capacity:{variation.target or 'H100'}=16), or use gpuplan whatif, which scales the nodes "
                "the base plan holds"
            )
        current = reference.get(offering.id, 0.0)
    nodes = _finite(variation, f"the capacity of {offering.id}", variation.factor(float(current)))
    return max(0, math.floor(nodes + 1e-9))


def _vary_colocation(data: dict[str, Any], variation: Variation) -> None:
    field = variation.key.split(".", 1)[1]
    section = data.get("colocation")
    if field == "max_nodes" and variation.op == "=" and variation.value == 0:
        data["colocation"] = None  # no owned nodes: the cloud-only fleet
        return
    if section is None:
        if field != "max_nodes" or variation.op != "=":
            raise variation.error(
                "the scenario has no colocation section; add one, or start with "
                "colocation.max_nodes=N (the documented defaults for the rest)"
            )
        try:
            data["colocation"] = Colocation(max_nodes=int(variation.value)).model_dump()
        except ValidationError as exc:
            problem = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            raise variation.error(f"colocation.max_nodes {problem}") from None
        return
    current = section.get(field)
    if isinstance(current, str) or (current is None and variation.op != "="):
        raise variation.error(f"colocation.{field} is not a number to change")
    value = _finite(variation, f"colocation.{field}", variation.factor(float(current or 0.0)))
    section[field] = round(value) if field in _WHOLE_COLOCATION_FIELDS else value
