"""The futures file's ``own_plans`` setting (issue 41): how the futures' own plans are made, decided once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from models.errors import InputError
from models.futures import FULL_OWN_PLANS, load_futures


def _file(tmp: Path, count: int, **extra: object) -> Path:
    data = {"futures": [{"name": f"f{i}", "vary": [f"demand=x{1 + i / 100}"]} for i in range(count)], **extra}
    path = tmp / "futures.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_auto_plans_in_full_up_to_the_threshold_and_quick_beyond(tmp_path: Path) -> None:
    spec = load_futures(_file(tmp_path, 3))
    assert spec.own_plans == "auto"
    assert spec.own_plans_method(FULL_OWN_PLANS) == "full"
    assert spec.own_plans_method(FULL_OWN_PLANS + 1) == "quick"


@pytest.mark.parametrize("asked", ["full", "quick"])
def test_an_explicit_choice_holds_whatever_the_count(tmp_path: Path, asked: str) -> None:
    spec = load_futures(_file(tmp_path, 3, own_plans=asked))
    assert {spec.own_plans_method(n) for n in (1, FULL_OWN_PLANS + 20)} == {asked}


def test_an_unknown_method_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = _file(tmp_path, 2, own_plans="fast")
    with pytest.raises(InputError) as caught:
        load_futures(path)
    assert "own_plans" in str(caught.value) and "futures.yaml" in str(caught.value)
