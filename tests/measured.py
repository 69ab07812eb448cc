"""What a run measures rather than decides, blanked so two plan.json files can be compared for equality
(issue 39: the same plan on an idle and a loaded machine): ``created``, every ``*seconds`` field, and the
seconds written inside notes ("stopped after 12.3 s"). Shared by tests/e2e/test_deterministic_plans.py and
bench/determinism_bench.py."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["blanked"]

_SECONDS_IN_TEXT = re.compile(r"\d+(?:\.\d+)? s\b")


def blanked(value: Any) -> Any:
    """``value`` with the measured fields blanked (module docstring)."""
    if isinstance(value, dict):
        return {
            key: "<measured>" if key == "created" or key.endswith("seconds") else blanked(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [blanked(item) for item in value]
    if isinstance(value, str):
        return _SECONDS_IN_TEXT.sub("<s>", value)
    return value
