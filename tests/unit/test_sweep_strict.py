"""Sweep files and ``--vary`` flags read strictly (issue 36): bounded lists, strict numbers in every
change, one InputError naming the file and the entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from models.errors import InputError
from planner.planning.whatif import MAX_CHANGES, MAX_VARIANTS, load_sweep, sweep_variants, variants_from_flags

SWEEP = Path("sweep.yaml")


def _variants(count: int, changes: int = 1) -> dict[str, Any]:
    return {"variants": [{"name": f"v{k}", "vary": [f"demand=x1.{k}"] * changes} for k in range(count)]}


REFUSED: dict[str, tuple[Any, str, str]] = {
    "too many variants": (_variants(MAX_VARIANTS + 1), "variants", f"at most {MAX_VARIANTS} in one sweep"),
    "too many changes": (_variants(1, MAX_CHANGES + 1), "variants[0].vary", f"at most {MAX_CHANGES} in one"),
    "a name too long": ({"variants": [{"name": "x" * 101, "vary": []}]}, "variants[0].name", "at most 100"),
    "an overflowing change": (
        {"variants": [{"name": "shock", "vary": ["spot_interruptions=+1e308%"]}]},
        "variants[0].vary[0]",
        "beyond any change gpuplan plans with",
    ),
    "other digits": (
        {"variants": [{"name": "s", "vary": ["demand=x1e٣"]}]},
        "variants[0].vary[0]",
        "not a number",
    ),
    "a number as a change": (
        {"variants": [{"name": "s", "vary": [1.5]}]},
        "variants[0].vary[0]",
        "expected a string",
    ),
    "a boolean as a name": (
        {"variants": [{"name": True, "vary": []}]},
        "variants[0].name",
        "expected a string",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_hostile_sweep_is_one_clean_error(case: str) -> None:
    data, where, problem = REFUSED[case]
    with pytest.raises(InputError) as caught:
        sweep_variants(SWEEP, data)
    error = caught.value
    assert error.file == "sweep.yaml" and error.where == where and problem in error.problem, str(error)


def test_a_sweep_file_on_disk_is_read_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("variants:\n  - name: shock\n    vary: [spot_price=x1_000]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"sweep\.yaml: variants\[0\]\.vary\[0\]: cannot read"):
        load_sweep(path)


def test_the_flags_are_bounded_too() -> None:
    with pytest.raises(InputError, match=f"at most {MAX_VARIANTS} in one whatif"):
        variants_from_flags(["demand=x1.1"] * (MAX_VARIANTS + 1))
    with pytest.raises(InputError, match=rf"--vary\[0\]: {MAX_CHANGES + 1} changes"):
        variants_from_flags([" ".join(["demand=x1.1"] * (MAX_CHANGES + 1))])


def test_a_plain_sweep_still_reads() -> None:
    variants = sweep_variants(SWEEP, _variants(3, 2))
    assert [v.name for v in variants] == ["v0", "v1", "v2"] and len(variants[2].variations()) == 2
