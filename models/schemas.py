"""JSON Schemas of the documents users and tools exchange with gpuplan: ``plan.json``, the scenario and
``actions.json``.

Generated from the pydantic models (``models/plan.py``, ``models/scenario.py``, ``models/actions.py``),
so they cannot disagree
with what gpuplan writes and reads. Committed copies ship in ``models/data/*.schema.json``; a test fails
when a model changes without its copy (regenerate with ``python -m models.schemas``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from models.plan import SCHEMA as PLAN_SCHEMA
from models.plan import plan_json_schema
from models.scenario import Scenario

__all__ = ["DOCUMENTS", "committed_path", "json_schema"]

DOCUMENTS = ("plan", "scenario", "actions")
_DATA = Path(__file__).parent / "data"


def json_schema(document: str) -> dict[str, Any]:
    """The JSON Schema of ``plan`` (plan.json), ``scenario`` (a scenario file) or ``actions``
    (actions.json of gpuplan provision)."""
    if document == "plan":
        return plan_json_schema()
    if document == "scenario":
        schema = Scenario.model_json_schema(mode="validation")
        schema["$id"] = "gpuplan.scenario/v1"
        schema["title"] = "gpuplan scenario"
        return schema
    if document == "actions":
        from models.actions import ACTIONS_SCHEMA, ActionPlan

        schema = ActionPlan.model_json_schema(by_alias=True, mode="serialization")
        schema["$id"] = ACTIONS_SCHEMA
        schema["title"] = "gpuplan actions.json"
        return schema
    raise ValueError(f"unknown document {document!r}; choose one of {', '.join(DOCUMENTS)}")


def committed_path(document: str) -> Path:
    return _DATA / f"{document}.schema.json"


def render(document: str) -> str:
    return json.dumps(json_schema(document), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":  # regenerate the committed copies
    for name in DOCUMENTS:
        committed_path(name).write_text(render(name), encoding="utf-8")
        print(f"wrote {committed_path(name)} ({PLAN_SCHEMA if name == 'plan' else name})")
