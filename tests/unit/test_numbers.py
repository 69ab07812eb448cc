"""One strict reading of numbers (issue 36 point 1): what Python's float() and pydantic's lax mode take
but a person never means (booleans, digit separators, other scripts' digits, non-finite words) is refused,
in text cells and in model fields alike, naming the value."""

from __future__ import annotations

import pytest
from pydantic import Field, ValidationError

from models.numbers import Range, StrictModel, parse_number, strict_float


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("1_000", "not a number in plain digits"),
        ("١٦", "not a number in plain digits"),  # Arabic-Indic 16: float() reads it
        ("１６", "not a number in plain digits"),  # fullwidth digits
        ("TRUE", "a boolean is not a number"),
        ("nan", "must be a finite number"),
        ("-inf", "must be a finite number"),
        ("1e999", "must be a finite number"),
        ("0x10", "is not a number"),
        ("", "is not a number"),
    ],
)
def test_what_float_reads_but_a_person_never_means_is_refused(text: str, words: str) -> None:
    float(text) if text not in ("TRUE", "0x10", "") else None  # Python itself reads the others
    with pytest.raises(ValueError, match=words):
        strict_float(text)


@pytest.mark.parametrize(("text", "value"), [("16", 16.0), (" -0.5 ", -0.5), ("1e3", 1000.0), (".5", 0.5)])
def test_plain_numbers_are_read(text: str, value: float) -> None:
    assert strict_float(text) == value
    assert parse_number(text, Range()) == value


class Sample(StrictModel):
    gpus: int = Field(ge=0, le=64)
    usd: float = Field(ge=0)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("gpus", True, "a boolean is not a number"),
        ("gpus", "١٦", "not a number in plain digits"),
        ("gpus", 65, "must be at most 64"),
        ("gpus", 1.5, "must be a whole number"),
        ("usd", float("nan"), "must be a finite number"),
        ("usd", "inf", "must be a finite number"),
        ("usd", -1, "must be at least 0"),
    ],
)
def test_model_fields_read_numbers_the_same_way(field: str, value: object, words: str) -> None:
    good = {"gpus": 8, "usd": 1.0}
    with pytest.raises(ValidationError, match=words):
        Sample.model_validate({**good, field: value})
    assert Sample.model_validate({**good, "gpus": "16"}).gpus == 16
