"""Counts in words: ``1 node``, ``2 nodes``, ``1 training job``.

Every message that prints a count with its noun goes through :func:`plural`, so none says "1 nodes" or
"1 training jobs" (issue 42). English only; the irregular plurals gpuplan prints are given by the caller.
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: float, noun: str, plural: str | None = None, *, thousands: bool = False) -> str:
    """``n`` and ``noun`` agreeing: the singular for exactly 1, else ``plural`` (default ``noun + "s"``;
    for a multi-word noun the last word takes the ``s``). ``thousands`` writes ``1,234``."""
    whole = float(n).is_integer()
    number = f"{int(n):{',' if thousands else ''}}" if whole else f"{n:{',' if thousands else ''}g}"
    return f"{number} {noun if n == 1 else plural or noun + 's'}"
