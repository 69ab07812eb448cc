"""Numbers a user gives, read one strict way: finite, ASCII digits, a boolean is not a number, in range.

Every input that carries numbers (a scenario, a catalog or demand CSV cell, a usage row, a config file,
a plan directory) reads them through here, so the same value gets the same answer and the same words
everywhere. Python's ``float()`` and pydantic's lax mode accept more than a number a person types:
``True`` (as 1), ``"1_000"``, ``"١٦"`` (Arabic-Indic digits), ``"nan"`` and ``"inf"``; a value like that in
a capacity plan is a typo or an attack, never what was meant, so it is refused naming the value.

- :class:`Range`: a documented range (bounds, unit, whole numbers only) with the message for a value
  outside it;
- :func:`parse_number`: one text cell (CSV) as a number inside a range;
- :func:`checked_number`: one value of a pydantic numeric field, and :class:`StrictModel`, the base
  whose every int/float field is checked so (bounds from the field's ``ge``/``gt``/``le``/``lt``).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any, Final

import annotated_types
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

__all__ = [
    "Range",
    "StrictModel",
    "checked_in_range",
    "checked_number",
    "field_range",
    "number_text",
    "numeric_kind",
    "parse_number",
    "strict_float",
]

#: A decimal number as a person writes it: ASCII digits, an optional sign, point and exponent. No
#: underscores, no other scripts' digits, no ``nan``/``inf`` words.
_NUMBER: Final = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)

_BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off"})


def number_text(value: float) -> str:
    """``10000``, ``0.5``, ``1e+30``: a bound or a value as a message shows it."""
    try:
        number = float(value)
    except OverflowError:
        return "a number too large to write"
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return f"{number:g}"


@dataclass(frozen=True, slots=True)
class Range:
    """The documented range of a numeric input: bounds (``ge``/``gt`` below, ``le``/``lt`` above), the
    unit named in messages, and whether only whole numbers are allowed (counts)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    unit: str = ""
    whole: bool = False

    def describe(self) -> str:
        """The range in words for descriptions and docs: ``a whole number, 1 to 64 GPUs``."""
        unit = f" {self.unit}" if self.unit else ""
        low, low_open = (self.ge, False) if self.gt is None else (self.gt, True)
        if self.whole and low_open and low is not None and float(low).is_integer():
            low, low_open = low + 1, False  # counts: "1 to 10000", not "greater than 0 and at most 10000"
        high, high_open = (self.le, False) if self.lt is None else (self.lt, True)
        if low is not None and high is not None and not low_open and not high_open:
            text = f"{number_text(low)} to {number_text(high)}{unit}"
        else:
            parts = []
            if low is not None:
                parts.append(f"{'greater than' if low_open else 'at least'} {number_text(low)}")
            if high is not None:
                parts.append(f"{'less than' if high_open else 'at most'} {number_text(high)}")
            text = " and ".join(parts) + unit
        return f"a whole number, {text}" if self.whole else text

    def problem(self, value: float) -> str | None:
        """Why a finite ``value`` is outside the range, or None when it is inside."""
        unit = f" {self.unit}" if self.unit else ""
        got = f", got {number_text(value)}"
        if self.whole and isinstance(value, float) and not value.is_integer():
            return f"must be a whole number{got}"
        if self.ge is not None and value < self.ge:
            return f"must be at least {number_text(self.ge)}{got}"
        if self.gt is not None and value <= self.gt:
            return f"must be greater than {number_text(self.gt)}{got}"
        if self.le is not None and value > self.le:
            return f"must be at most {number_text(self.le)}{unit}{got}"
        if self.lt is not None and value >= self.lt:
            return f"must be less than {number_text(self.lt)}{unit}{got}"
        return None


def parse_number(raw: str, allowed: Range) -> float:
    """One CSV cell read as a number inside ``allowed``.

    Raises:
        ValueError: the cell is not a number in ASCII digits (a word, a boolean such as ``TRUE``,
            ``1_000``, other scripts' digits), is not finite (``inf``, ``nan``) or is outside the range;
            the message says which, quoting the cell.
    """
    value = strict_float(raw)
    problem = allowed.problem(value)
    if problem:
        raise ValueError(problem)
    return value


def strict_float(text: str) -> float:
    """``text`` as a float when it is a decimal number in ASCII digits; ValueError saying what it is
    otherwise (a boolean word, a non-finite word, other digits, not a number)."""
    stripped = text.strip()
    if stripped.lower() in _BOOLEAN_WORDS:
        raise ValueError(f"a boolean is not a number, got {stripped!r}")
    if stripped.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise ValueError(f"must be a finite number, got {stripped!r}")
    if not _NUMBER.fullmatch(stripped):
        if stripped and all(ch.isdigit() or ch in "+-.eE_" for ch in stripped):
            raise ValueError(f"{stripped!r} is not a number in plain digits (0-9, no separators)")
        raise ValueError(f"{stripped!r} is not a number")
    value = float(stripped)
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {stripped!r}")
    return value


def numeric_kind(annotation: Any) -> type | None:
    """``int`` or ``float`` for a numeric field (``int | None`` too), None for anything else."""
    if annotation in (int, float):
        return annotation
    args = [arg for arg in getattr(annotation, "__args__", ()) if arg is not type(None)]
    return args[0] if len(args) == 1 and args[0] in (int, float) else None


def field_range(field: FieldInfo, whole: bool) -> Range:
    """The :class:`Range` of a pydantic field: its ``ge``/``gt``/``le``/``lt`` and ``unit`` (schema extra)."""
    bounds: dict[str, Any] = {}
    for item in field.metadata:
        for name in ("ge", "gt", "le", "lt"):
            if isinstance(item, getattr(annotated_types, name.capitalize())):
                bounds[name] = getattr(item, name)
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return Range(**bounds, whole=whole, unit=str(extra.get("unit", "")))


def checked_number(value: Any, kind: type, field: FieldInfo) -> Any:
    """One value of an int (``kind``) or float field: not a boolean, a number (a string only in ASCII
    digits: YAML 1.1 reads ``1e30`` as a string), finite, whole for an int, inside the field's bounds.
    A value of another type is returned as it is (pydantic's own error names it)."""
    return checked_in_range(value, kind, field_range(field, whole=kind is int))


def checked_in_range(value: Any, kind: type, allowed: Range) -> Any:
    """One value read as an int or float (``kind``) inside ``allowed``, as :func:`checked_number` reads a
    field's: for numbers that live outside a pydantic field (a dataclass's, a mapping's)."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, str):
        number: int | float = strict_float(value)
    elif isinstance(value, int | float):
        number = value
    else:
        return value
    if isinstance(number, float) and not math.isfinite(number):
        raise ValueError("must be a finite number")
    problem = allowed.problem(number)
    if problem:
        raise ValueError(problem)
    return int(number) if kind is int else number


class StrictModel(BaseModel):
    """A model for what users write: unknown fields refused, frozen, and every int/float field read by
    :func:`checked_number` (not a boolean, finite, whole for an int, inside the field's bounds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_in_range(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return value
        numeric = _numeric_field(cls, info.field_name or "")
        return value if numeric is None else checked_in_range(value, *numeric)


@functools.cache
def _numeric_field(model: type[BaseModel], name: str) -> tuple[type, Range] | None:
    """A model field's kind (int or float) and range, worked out once per model and field (a model read
    many times, such as a usage row, checks each value in microseconds, not in a field lookup)."""
    field = model.model_fields.get(name)
    kind = None if field is None else numeric_kind(field.annotation)
    if field is None or kind is None:
        return None
    return kind, field_range(field, whole=kind is int)
