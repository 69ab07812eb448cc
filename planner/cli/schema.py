"""`gpuplan schema`: the JSON Schemas of the documents gpuplan reads and writes."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from models.errors import InputError
from planner.cli.common import fail

__all__ = ["schema"]


def schema(
    document: Annotated[
        str, typer.Argument(help="plan (plan.json), scenario (the YAML input) or actions (actions.json)")
    ],
) -> None:
    """Print the JSON Schema of plan.json, a scenario file or actions.json (for editors, validators, tools).

    The same schemas ship in the package (models/data/*.schema.json).
    """
    from models.schemas import DOCUMENTS, json_schema

    if document not in DOCUMENTS:
        problem = f"unknown document {document!r}; choose {', '.join(DOCUMENTS)}"
        raise fail(InputError(None, "schema", problem))
    typer.echo(json.dumps(json_schema(document), indent=2))
