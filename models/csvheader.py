"""The header row of a user CSV, checked once for every CSV gpuplan reads (catalogs, demand series): no
column twice, no unknown column (with the closest known name), no required column missing; each error
names the file, ``row 1`` and the column, as a spreadsheet shows them."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from pathlib import Path

from models.errors import InputError

__all__ = ["checked_header"]


def checked_header(
    path: Path, raw: Sequence[str], known: Sequence[str], required: Collection[str], what: str
) -> list[str]:
    """``raw`` stripped, or InputError; ``what`` says which columns a file of this kind has."""
    header = [name.strip() for name in raw]
    for position, name in enumerate(header):
        if name in header[:position]:
            raise InputError(path, f"row 1, column {name}", "column appears twice in the header")
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(path, f"row 1, column {name or '<empty>'}", f"unknown column{hint}; {what}")
    for name in known:
        if name in required and name not in header:
            raise InputError(path, f"row 1, column {name}", "required column is missing from the header")
    return header
