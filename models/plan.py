"""The plan: what the planner decided, in the files others rely on (``plan-contract.md``, schema v1).

``plan.json`` holds the decisions and totals; ``allocations.csv`` one row per (period, offering, tier,
workload). Money is USD, time hours, counts nodes. Totals reconcile by construction:
``costs.total_usd == sum(allocations.cost_usd) + sum(commitments.cost_in_horizon_usd)``; committed
(reserved) rows carry cost 0 because commitments are paid whether used or not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from models.errors import InputError

SCHEMA = "gpuplan.plan/v1"
ALLOCATION_COLUMNS = ["period", "offering", "tier", "workload", "kind", "team", "nodes", "gpus", "cost_usd"]
TIERS = ("reserved_1y", "reserved_3y", "on_demand", "spot")
#: Tiers paid for the whole horizon whether used or not (commitments and owned nodes): their allocation
#: rows cost 0, the commitment carries the cost.
COMMITTED_TIERS = ("owned", "reserved_3y", "reserved_1y")


@dataclass
class Plan:
    data: dict[str, Any]
    allocations: pd.DataFrame

    @property
    def total_usd(self) -> float:
        return float(self.data["costs"]["total_usd"])

    def write(self, directory: str | Path) -> None:
        """Write plan.json and allocations.csv into ``directory`` (which must exist)."""
        directory = Path(directory)
        (directory / "plan.json").write_text(json.dumps(self.data, indent=2, default=_json_default) + "\n")
        frame = self.allocations[ALLOCATION_COLUMNS]
        frame.to_csv(directory / "allocations.csv", index=False)  # full precision: rows must add up
        mig = self.data.get("mig")
        if mig and mig.get("config"):  # the NVIDIA GPU Operator / mig-parted format (FACTS 4.3)
            header = "# MIG layouts per node pool, written by gpuplan plan: label a pool's nodes\n"
            header += "# nvidia.com/mig.config=<name> to apply its layout.\n"
            text = yaml.safe_dump(mig["config"], sort_keys=False)
            (directory / "mig-config.yaml").write_text(header + text, encoding="utf-8")

    @classmethod
    def read(cls, directory: str | Path) -> Plan:
        directory = Path(directory)
        path = directory / "plan.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise InputError(path, None, "no plan.json here (run `gpuplan plan` first)") from None
        except json.JSONDecodeError as exc:
            raise InputError(path, f"line {exc.lineno}", f"not valid JSON: {exc.msg}") from None
        if data.get("schema") != SCHEMA:
            raise InputError(path, "schema", f"expected {SCHEMA!r}, found {data.get('schema')!r}")
        try:
            allocations = pd.read_csv(directory / "allocations.csv")
        except FileNotFoundError:
            raise InputError(directory / "allocations.csv", None, "file not found") from None
        return cls(data, allocations)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
