"""The demand page's content as plain data (dicts, lists, strings, floats): what was read and from where,
the gaps and how they were filled, per service its history and forecast band, the model and why, the
training rates, the backtest's figures, the scenario's defaults to review.

Why plain data: the page is rendered by ``planner/outputs/reports/demand.py`` with the other reports'
templates and kit, and outputs and history are one layer that may not import each other
(``[tool.importlinter]``); the CLI, above both, hands this document from one to the other.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner.history.draft import DEFAULT_CLOUDS, INFERENCE_GPUS, TRAINING_GPUS
from planner.history.outlook import Outlook, q_label
from planner.history.result import History

__all__ = ["page_document"]


def _stamp(when: Any) -> str:
    return pd.Timestamp(when).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def page_document(history: History, future: Outlook) -> dict[str, Any]:
    """Everything the page shows (module docstring); JSON-able."""
    p = history.provenance
    qs = future.settings.quantiles
    services = future.page_services()
    training = [
        {
            "team": team,
            "runs_seen": len(t.runs),
            "skipped": t.skipped,
            "rates": [
                {
                    "size_class": r.size_class,
                    "runs": r.runs,
                    "rate": r.rate_per_month,
                    "ci": (r.ci_low, r.ci_high),
                    "law": r.law,
                }
                for r in t.rates
            ],
            "scenario_runs": len(t.chosen_runs),
        }
        for team, t in sorted(future.training.items())
    ]
    return {
        "title": f"Demand from history: {p.location}",
        "source": {
            "kind": p.source,
            "location": p.location,
            "start": _stamp(p.start),
            "end": _stamp(p.end),
            "step": str(p.step),
            "requests": p.requests,
            "read_at": _stamp(p.read_at),
            "queries": dict(sorted(p.queries.items())),
        },
        "gaps": [g.text() for g in p.gaps],
        "warnings": list(history.warnings),
        "runs_seen": len(history.runs),
        "forecast_start": _stamp(future.start),
        "hours": future.hours,
        "quantiles": [q_label(q) for q in qs],
        "paths": future.settings.paths,
        "seed": future.settings.seed,
        "backtest_hours": future.settings.backtest_hours,
        "services": services,
        "training": training,
        "defaults": {
            "clouds": {cloud: list(regions) for cloud, regions in DEFAULT_CLOUDS.items()},
            "inference_gpus": list(INFERENCE_GPUS),
            "training_gpus": list(TRAINING_GPUS),
            "assumed_sizes": [s["name"] for s in services if s["assumed"]],
        },
    }
