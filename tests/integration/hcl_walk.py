"""Reading Terraform files in tests: parse with python-hcl2 and list the resource attribute paths used.

:func:`attribute_paths` turns every ``resource`` (and ``data``) block of a file into ``(type, path)`` pairs:
``("aws_launch_template", "network_interfaces.interface_type")``. Nested blocks add a segment, ``dynamic
"x" { content { ... } }`` counts as block ``x``, and meta-arguments (``count``, ``for_each``,
``depends_on``, ``lifecycle``, ``provider``) are left out. :func:`check_allowed` compares them with an
allow-list (``{type: {path, ...}}``) written from the provider's documentation, and names what is not
in it, so a misspelt attribute or a block in the wrong place fails the test with its path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import hcl2

__all__ = ["attribute_paths", "blocks", "check_allowed", "load"]

META = {"count", "for_each", "depends_on", "lifecycle", "provider", "__is_block__", "__comments__"}


def load(path: Path) -> dict[str, Any]:
    """``path`` parsed, strings without their quotes (a syntax error raises lark's UnexpectedToken)."""
    with path.open(encoding="utf-8") as handle:
        options = hcl2.SerializationOptions(strip_string_quotes=True)
        data: dict[str, Any] = hcl2.load(handle, serialization_options=options)
    return data


def blocks(document: Mapping[str, Any], kind: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(type, name, body)`` of every ``kind`` block (``resource``, ``data``) of a parsed file;
    ``(name, "", body)`` for one-label blocks (``variable``, ``output``, ``module``)."""
    for entry in document.get(kind, []):
        for first, value in entry.items():
            if not isinstance(value, dict):
                continue
            inner = [v for k, v in value.items() if k != "__is_block__" and isinstance(v, dict)]
            if inner and all(v.get("__is_block__") for v in inner) and kind in ("resource", "data"):
                for name, body in value.items():
                    if name != "__is_block__":
                        yield first, name, body
            else:
                yield first, "", value


def _paths(body: Mapping[str, Any], prefix: str) -> Iterator[str]:
    for key, value in body.items():
        if key in META:
            continue
        if key == "dynamic":
            for entry in value:
                for name, spec in entry.items():
                    for content in spec.get("content", []):
                        yield f"{prefix}{name}"
                        yield from _paths(content, f"{prefix}{name}.")
            continue
        if (
            isinstance(value, list)
            and value
            and all(isinstance(v, dict) and v.get("__is_block__") for v in value)
        ):
            yield f"{prefix}{key}"
            for block in value:
                yield from _paths(block, f"{prefix}{key}.")
            continue
        yield f"{prefix}{key}"


def attribute_paths(
    files: Iterable[Path], kinds: tuple[str, ...] = ("resource", "data")
) -> set[tuple[str, str]]:
    """Every ``(type, attribute path)`` the resource and data blocks of ``files`` use (data blocks as
    ``data.TYPE``)."""
    found: set[tuple[str, str]] = set()
    for path in files:
        document = load(path)
        for kind in kinds:
            for type_, _name, body in blocks(document, kind):
                label = type_ if kind == "resource" else f"data.{type_}"
                found.add((label, ""))
                found.update((label, p) for p in _paths(body, ""))
    return found


def check_allowed(found: set[tuple[str, str]], allowed: Mapping[str, set[str]]) -> list[str]:
    """What ``found`` uses that ``allowed`` does not list: unknown types, then unknown paths."""
    problems = sorted(f"unknown resource type {t}" for t, p in found if p == "" and t not in allowed)
    problems += sorted(
        f"{t}: unknown attribute {p}" for t, p in found if p and t in allowed and p not in allowed[t]
    )
    return problems
