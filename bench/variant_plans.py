"""A variant of a scenario planned by the CLI in its own process, as a user runs it.

The benches that compare variants of one scenario (Capacity Blocks or not, flex-start or not, payment options,
savings plans against reservations) write the changed scenario beside the others, run ``gpuplan plan`` on it
and read the plan it wrote; one function, so each bench says only what it changes and what it reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class VariantPlan:
    """What one variant's ``gpuplan plan`` wrote (``directory``, its plan.json as ``document``) and the
    seconds the whole process took (reading, planning, writing)."""

    directory: Path
    document: dict[str, Any]
    seconds: float


def plan_variant(
    data: dict[str, Any],
    out: Path,
    name: str,
    *,
    stem: str,
    time_limit: float,
    flags: Sequence[str] = ("--no-report",),
) -> VariantPlan:
    """Write ``data`` as ``out/<stem>-<name>.yaml``, plan it into ``out/<name>/`` with ``--time-limit`` and
    ``flags``, and read the plan; a failed plan raises ``CalledProcessError`` (its output captured)."""
    scenario = out / f"{stem}-{name}.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    directory = out / name
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "planner.cli", "plan", str(scenario), "-o", str(directory),
         "--time-limit", str(time_limit), *flags],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    document = json.loads((directory / "plan.json").read_text())
    return VariantPlan(directory, document, seconds)
