"""Reading the JSON documents gpuplan writes (whatif.json, breakeven.json) back through their models.

A document on disk is validated against the pydantic model of the schema this gpuplan writes; anything
wrong (empty, not JSON, not an object, another tool's JSON or another schema, a missing or misspelt
field, a wrong type) is an :class:`InputError` naming the file and the field, never a traceback or a
page of dashes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from models.errors import InputError

__all__ = ["DocumentPart", "read_json_document", "validation_error"]

M = TypeVar("M", bound=BaseModel)


class DocumentPart(BaseModel):
    """A part of a document gpuplan writes: unknown fields are rejected (a misspelt field fails on
    reading) and assignments are validated (the planner fills some parts in after building them)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def validation_error(path: str | Path | None, schema: str, exc: ValidationError) -> InputError:
    """The first problem of ``exc`` as an InputError: ``FILE: variants.1.total_usd: <message>``."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or None
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return InputError(path, where, f"{first['msg']} for schema {schema}{more}")


def read_json_document(path: str | Path, model: type[M], schema: str | tuple[str, ...], made_by: str) -> M:
    """``path`` validated as ``model`` (schema ``schema``, or any of them: the first is the one written);
    ``made_by`` is the command that writes it."""
    schemas = (schema,) if isinstance(schema, str) else schema
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        if not text.strip():
            raise InputError(path, None, f"empty file (run `{made_by}` again)")
        data = json.loads(text)
    except FileNotFoundError:
        raise InputError(path, None, f"file not found (run `{made_by}` first)") from None
    except IsADirectoryError:
        raise InputError(path, None, "is a directory, not a JSON file") from None
    except NotADirectoryError:
        raise InputError(path.parent, None, f"is a file, not a directory holding {path.name}") from None
    except PermissionError:
        raise InputError(path, None, "cannot read: permission denied") from None
    except OSError as exc:  # a name too long, an I/O error
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(path, None, "not a text file (gpuplan writes UTF-8 JSON)") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"line {exc.lineno}", f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise InputError(path, None, f"expected a JSON object, found {_json_kind(data)}")
    if data.get("schema") not in schemas:
        why = (
            f" (run `{made_by}` again with this version)"
            if "schema" in data
            else f": it has no schema field, so it is not a file `{made_by}` writes (another tool's JSON?)"
        )
        raise InputError(
            path,
            "schema",
            f"this gpuplan reads schema {' or '.join(repr(s) for s in schemas)}, the file says "
            f"{data.get('schema')!r}{why}",
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(path, str(data["schema"]), exc) from None


def _json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words: ``an array``, ``a string``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "a number"
