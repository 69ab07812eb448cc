"""``--vary`` strings read strictly (issue 36): ``spot_interruptions=+1e308%`` was an OverflowError; every
hostile change is now one InputError naming the change, and a variant stays a catalog gpuplan reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.errors import InputError
from models.inputs import Inputs, load_inputs
from models.variation import apply_variations, parse_variation

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.fixture(scope="module")
def inputs() -> Inputs:
    return load_inputs(SCENARIOS / "spot-price-shock.yaml")


REFUSED = {
    "spot_interruptions=+1e308%": "beyond any change gpuplan plans with",
    "demand=x1e308": "beyond any change",
    "capacity=1e308": "beyond any change",
    "spot_interruptions=x1e400": "must be a finite number",
    "price=x1_0": "cannot read",
    "demand=x١٫٣": "cannot read",
    "demand=x1e٣": "is not a number",
    "demand=xnan": "cannot read",
    "spot_price=x1000": "spot_usd_h of",
    "spot_interruptions=+1e6%": "must be at most 1 per node-hour",
    "spot_interruptions=2": "must be at most 1 per node-hour",
    "capacity=20000": "must be at most 10000 nodes",
    "colocation.max_nodes=50000": "colocation.max_nodes must be at most 10000",
}


@pytest.mark.parametrize("text", sorted(REFUSED))
def test_a_hostile_change_is_one_clean_error(inputs: Inputs, text: str) -> None:
    with pytest.raises(InputError) as caught:
        apply_variations(inputs.scenario, inputs.catalog, [parse_variation(text, "--vary[0]")])
    message = str(caught.value)
    assert message.startswith("--vary[0]: ") and REFUSED[text] in message, message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["spot_price=x2", "price=-100%", "spot_interruptions=0.5", "capacity=16"])
def test_a_plausible_shock_still_applies(inputs: Inputs, text: str) -> None:
    _, catalog = apply_variations(inputs.scenario, inputs.catalog, [parse_variation(text)])
    assert len(catalog) == len(inputs.catalog)
