"""The same scenario, options and version give the same plan.json on an idle and on a loaded machine
(issue 39 point 1): one plan run twice as real subprocesses, the second beside two CPU-burning processes
and with another PYTHONHASHSEED, at a time limit short enough that the work quotas cut the stages (so a
clock-based budget would stop them elsewhere).

Ignored, because they are measured, not decided: keys named ``created`` (the timestamp) or ending in
``seconds`` (``seconds``, ``build_seconds``, ``certified_bound_seconds``, ``dispatch_seconds``), and the
measured seconds inside solver notes ("..., 0.4 s)"). Everything else (commitments, placements, costs,
bounds, statuses, notes) must be equal byte for byte once those are blanked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from measured import blanked

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "mixed-fleet.yaml"
# nominal seconds: the cluster MILP's share of it is far below what it needs to finish, so its quota cuts it
TIME_LIMIT = "12"

pytestmark = pytest.mark.slow


def plan(out: Path, hash_seed: str, cores: set[int] | None = None) -> tuple[dict[str, Any], pd.DataFrame]:
    """``cores``: the CPUs the plan may run on (None: all), so its worker threads (``solvers/ahead.py``)."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "planner.cli",
        "plan",
        str(SCENARIO),
        "-o",
        str(out),
        "-q",
        "--no-report",
    ]
    done = subprocess.run(
        [*command, "--time-limit", TIME_LIMIT],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        preexec_fn=None if cores is None else (lambda: os.sched_setaffinity(0, cores)),
    )
    assert done.returncode == 0, done.stderr
    return json.loads((out / "plan.json").read_text()), pd.read_csv(out / "allocations.csv")


def test_the_same_plan_idle_and_beside_two_cpu_burners(tmp_path: Path) -> None:
    idle, idle_rows = plan(tmp_path / "idle", "1")
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded, loaded_rows = plan(tmp_path / "loaded", "2")
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    # the quotas did cut: a stage stopped by its counted work, not by the clock or by finishing
    stages = idle["solver"]["stages"]
    assert [stage["stopped_by"] for stage in stages] == [None, "work"]
    # the safety net did not fire on either run (it would say so, and the plans could differ)
    for document in (idle, loaded):
        assert not any("wall-clock limit" in note for note in document["solver"]["notes"])
    assert blanked(loaded) == blanked(idle)
    pd.testing.assert_frame_equal(loaded_rows, idle_rows)


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs two cores"
)
def test_the_same_plan_on_one_core_and_on_two(tmp_path: Path) -> None:
    """The period MILPs solved ahead in worker threads and the finer bound solved beside the plan's stages
    (``solvers/ahead.py``: one thread per core the process may use) leave the plan as one thread makes it."""
    one_core = {min(os.sched_getaffinity(0))}
    single, single_rows = plan(tmp_path / "one", "1", one_core)
    both, both_rows = plan(tmp_path / "two", "1")
    assert blanked(both) == blanked(single)
    pd.testing.assert_frame_equal(both_rows, single_rows)
