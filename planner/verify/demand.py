"""Inference demand: every period, each service's replicas (all its rows) cover its demand
(``models/workloads.py``), unless the plan lists the service unserved, and then the replica-hours it
misses stay within what it lists.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.plan import UnservedInference
from planner.verify.context import EPS, Context
from planner.verify.findings import Findings, Violation

__all__ = ["check_demand"]


def check_demand(ctx: Context, findings: Findings, rows: pd.DataFrame) -> None:
    inference = rows[rows["kind"] == "inference"]
    served = inference.groupby(["workload", "period"])["replicas"].sum()
    listed: dict[str, float] = {}
    for item in ctx.plan.document.unserved:
        if isinstance(item, UnservedInference):
            listed[item.workload] = listed.get(item.workload, 0.0) + item.replica_hours
    for name, demand in ctx.demand.items():
        have = np.zeros(ctx.periods)
        if name in served.index.get_level_values(0):
            mine = served.loc[name]
            have[mine.index.to_numpy(dtype=np.int64)] = mine.to_numpy()
        short = np.maximum(0.0, demand - have)
        short[short <= EPS] = 0.0
        missing = np.flatnonzero(short)
        if not len(missing):
            continue
        if name not in listed:
            findings.add_many(
                "demand",
                len(missing),
                (
                    Violation(
                        kind="demand",
                        message=f"{name}: {have[t]:g} replicas for a demand of {demand[t]} "
                        "(not listed unserved)",
                        period=int(t),
                        workload=name,
                    )
                    for t in missing
                ),
            )
            continue
        replica_hours = float(short.sum() * ctx.p)
        if replica_hours > listed[name] * (1 + 1e-6) + EPS:
            findings.add(
                "unserved-understated",
                f"{name} misses {replica_hours:,.1f} replica-hours in {len(missing)} periods; "
                f"unserved[] lists {listed[name]:,.1f}",
                workload=name,
            )
