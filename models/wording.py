"""Numbers as people read them: counts in words (``1 node``, ``2 nodes``) and money in cents.

Every message that prints a count with its noun goes through :func:`plural`, so none says "1 nodes" or
"1 training jobs" (issue 42). English only; the irregular plurals gpuplan prints are given by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["cents_adding_up", "plural"]


def plural(n: float, noun: str, plural: str | None = None, *, thousands: bool = False) -> str:
    """``n`` and ``noun`` agreeing: the singular for exactly 1, else ``plural`` (default ``noun + "s"``;
    for a multi-word noun the last word takes the ``s``). ``thousands`` writes ``1,234``."""
    whole = float(n).is_integer()
    number = f"{int(n):{',' if thousands else ''}}" if whole else f"{n:{',' if thousands else ''}g}"
    return f"{number} {noun if n == 1 else plural or noun + 's'}"


def cents_adding_up(values: Iterable[float]) -> np.ndarray:
    """Dollar amounts rounded to cents so that they still add up: each is within a cent of its value, and
    every run of consecutive amounts sums to its rounded total (the cumulative sums are rounded, then
    differenced). Rounding each row alone lets a column of rows drift cents from the total it reconciles
    to; raw floats (``31374.60974999999``) are not money a reader can check."""
    # Python's round is correctly rounded (0.025, stored a hair above, is 0.03); numpy's scales by 100 first
    # and rounds the tie it makes to even (0.02), a cent off the total a reader re-adds
    running = np.array([round(float(total), 2) for total in np.cumsum(np.asarray(list(values), dtype=float))])
    return np.round(np.diff(running, prepend=0.0), 2)
