"""Deterministic plans (issue 39 point 1): cost and seconds of the same plan idle and beside CPU burners.

Run ``python bench/determinism_bench.py [--time-limit S] [--burners N] [SCENARIO ...]`` from the
repository's root (default: the README example ``scenarios/mixed-fleet.yaml`` and two more shipped
scenarios at the default ``--time-limit`` 120; about 4-6 minutes a scenario on 2 cores).

Each scenario is planned twice with ``gpuplan plan`` in a real subprocess: once as the machine is, once
beside ``--burners`` processes running ``while True: pass`` (and with another ``PYTHONHASHSEED``). It
prints, per run, the plan's cost, certified gap, wall seconds and the child's CPU seconds, and whether the
two plan.json files are the same once the measured fields are blanked (``created``, ``*seconds``, seconds
inside notes; ``tests/e2e/test_deterministic_plans.py``), and the loaded/idle wall ratio. The CPU
seconds are what ``planner/solvers/work.py``'s constants are fitted to: they stay near the nominal
budget however loaded the machine is, the wall seconds do not.

The machine is shared (other sessions run on its 2 cores): the "idle" run is "as the machine is", and
its load average is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:  # the end-to-end test's blanking, shared
    sys.path.insert(0, str(ROOT / "tests"))

from measured import blanked  # noqa: E402

DEFAULT = ["mixed-fleet", "h100-shortage", "spot-price-shock"]


def plan(scenario: Path, out: Path, time_limit: float, hash_seed: str) -> dict[str, Any]:
    """One ``gpuplan plan`` run: its plan.json and the run's wall and CPU seconds."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "planner.cli",
        "plan",
        str(scenario),
        "-o",
        str(out),
        "-q",
        "--no-report",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(
        [*command, "--time-limit", str(time_limit)], env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{scenario.name}: gpuplan plan failed: {done.stderr.strip()}")
    document = json.loads((out / "plan.json").read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"document": document, "wall": wall, "cpu": cpu}


def line(label: str, run: dict[str, Any], load: float) -> str:
    solver = run["document"]["solver"]
    cost = run["document"]["costs"]["total_usd"]
    cut = [note for note in solver["notes"] if "wall-clock limit" in note]
    return (
        f"  {label:<8} ${cost:>13,.2f}  gap {solver['gap']:6.2%}  wall {run['wall']:6.1f} s  "
        f"cpu {run['cpu']:6.1f} s  load {load:4.1f}" + ("  SAFETY NET CUT" if cut else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", default=DEFAULT)
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--burners", type=int, default=2)
    args = parser.parse_args()
    print(
        f"determinism bench: --time-limit {args.time_limit:g}, {args.burners} burners, {os.cpu_count()} cores"
    )
    for name in args.scenarios:
        scenario = Path(name) if name.endswith(".yaml") else ROOT / "scenarios" / f"{name}.yaml"
        with tempfile.TemporaryDirectory(prefix="gpuplan-determinism-") as tmp:
            idle_load = os.getloadavg()[0]
            idle = plan(scenario, Path(tmp) / "idle", args.time_limit, "1")
            burners = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)
            ]
            try:
                time.sleep(1.0)
                loaded_load = os.getloadavg()[0]
                loaded = plan(scenario, Path(tmp) / "loaded", args.time_limit, "2")
            finally:
                for burner in burners:
                    burner.kill()
                    burner.wait()
        same = blanked(idle["document"]) == blanked(loaded["document"])
        print(f"{scenario.stem}:")
        print(line("idle", idle, idle_load))
        print(line("loaded", loaded, loaded_load))
        ratio = loaded["wall"] / idle["wall"]
        print(f"  same plan.json: {'yes' if same else 'NO'}; loaded/idle wall {ratio:.2f}x")


if __name__ == "__main__":
    main()
