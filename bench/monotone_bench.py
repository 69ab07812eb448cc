"""Monotone in the options (issue 39 point 2): a quarterly purchase schedule against day-one purchases only.

Run ``python bench/monotone_bench.py [--time-limit S] [SCENARIO ...]`` from the repository's root (default:
``inference-heavy-saas`` and ``h100-shortage``, the two cases of the issue; 3-8 minutes a scenario on 2
cores). Each scenario is planned three times with ``gpuplan plan`` in a real subprocess:

1. day one: ``purchase.schedule: horizon`` (every purchase on the first day, a subset of the quarterly
   choices);
2. quarterly alone: the scenario as shipped (the search on its own);
3. quarterly from day one: ``--start-from`` the first plan (``planner/planning/optimize/seed.py``).

It prints each plan's cost as written (total plus any penalty for unserved demand), the quarterly plans'
excess over the day-one plan (positive: dearer with more options), and the CPU seconds of each run. The
third must never be dearer than the first; the second may be.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["inference-heavy-saas", "h100-shortage"]


def _plan(
    scenario: Path, out: Path, time_limit: float, start_from: Path | None = None
) -> tuple[float, float]:
    """Plan ``scenario`` into ``out`` with the CLI; its cost as written and the child's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "planner.cli", "plan", str(scenario), "-o", str(out), "-q",
               "--no-report", "--no-verify", "--time-limit", str(time_limit)]  # fmt: skip
    if start_from is not None:
        command += ["--start-from", str(start_from)]
    subprocess.run(command, cwd=ROOT, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    document = json.loads((out / "plan.json").read_text())
    paid = document["costs"]["total_usd"] + document["solver"]["penalty_usd"]
    return paid, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=DEFAULT)
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args()
    print(
        "| scenario | day one | quarterly alone | excess | quarterly from day one | excess | CPU s (3 runs) |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in args.scenarios:
        source = ROOT / "scenarios" / f"{name}.yaml"
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            data = yaml.safe_load(source.read_text())
            data.setdefault("purchase", {})["schedule"] = "horizon"
            day_one_file = source.parent / f".{name}-day-one.yaml"  # beside it: its relative paths hold
            day_one_file.write_text(yaml.safe_dump(data, sort_keys=False))
            try:
                day_one, cpu1 = _plan(day_one_file, work / "day-one", args.time_limit)
            finally:
                day_one_file.unlink()
            alone, cpu2 = _plan(source, work / "alone", args.time_limit)
            seeded, cpu3 = _plan(source, work / "seeded", args.time_limit, start_from=work / "day-one")
        print(
            f"| {name} | ${day_one:,.0f} | ${alone:,.0f} | {alone / day_one - 1:+.2%} | ${seeded:,.0f} | "
            f"{seeded / day_one - 1:+.2%} | {cpu1:.0f} / {cpu2:.0f} / {cpu3:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
