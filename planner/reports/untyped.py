"""TRANSITIONAL: readers of untyped report dicts, for ``whatif.py`` and ``breakeven.py`` only.

The plan report takes the typed :class:`models.plan.PlanDocument` and has no use for these. The what-if
and break-even pages still read plain dicts (their conversion to typed documents is under way) and
import ``_num`` and ``_unserved`` from ``planner.reports.plan``, which re-exports them from here.
Delete this module, and that re-export, once nothing imports them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from planner.reports.kit import DASH, Table, fmt_num

__all__: list[str] = []


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _str(value: Any) -> str:
    return DASH if value is None or value == "" else str(value)


def _unserved(plan: Mapping[str, Any]) -> Table | None:
    """The unserved-demand table of a dict with an ``unserved`` list (what-if variants' partial items)."""
    raw = plan.get("unserved")
    items = [u if isinstance(u, dict) else {} for u in (raw if isinstance(raw, list) else [])]
    if not items:
        return None
    table = Table(
        ["workload", "kind", "team", "run", "unserved", "reason"], [False, False, False, True, True, False]
    )
    for u in items:
        if _num(u.get("gpu_hours")) is not None:
            amount = f"{fmt_num(u.get('gpu_hours'), 1)} GPU-h"
        elif _num(u.get("replica_hours")) is not None:
            amount = f"{fmt_num(u.get('replica_hours'), 1)} replica-h"
        else:
            amount = DASH
        run = fmt_num(u.get("run")) if u.get("run") is not None else DASH
        table.rows.append(
            [
                _str(u.get("workload")),
                _str(u.get("kind")),
                _str(u.get("team")),
                run,
                amount,
                _str(u.get("reason")),
            ]
        )
    return table
