"""Fuzz every input kind at scale (issue 36 point 6): 20,000 cases by default, the counts per kind.

    python bench/fuzz_bench.py [--cases 20000] [--seed N]

Prints, per input kind: cases, clean one-line errors, accepted, cases known to be wrong, wrong ones
accepted, tracebacks; then the first failures with their mutations. Exit 1 when any traceback or
wrongly accepted case is found. The generators are ``tests/input_fuzz.py``'s, as CI runs them.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from input_fuzz import KINDS, Workspace, generate, run_case, tally  # noqa: E402
from provision_plans import mixed_fleet_week  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000, help="cases in all, split evenly over the kinds")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**9)
    per_kind = max(1, args.cases // len(KINDS))
    scratch = Path(tempfile.mkdtemp(prefix="gpuplan-fuzz-"))
    try:
        plan_dir = mixed_fleet_week("aws", scratch / "week")
        workspace = Workspace(scratch / "cases", plan_dir)
        outcomes = []
        print(f"seed {seed}, {per_kind} cases per kind, {len(KINDS)} kinds")
        for kind in KINDS:
            started = time.perf_counter()
            for case in generate(kind, seed, per_kind, workspace):
                outcomes.append(run_case(case, workspace.scratch, len(outcomes)))
            print(f"  {kind:16} {time.perf_counter() - started:7.1f} s", flush=True)
        table = tally(outcomes)
        columns = ("cases", "clean", "accepted", "wrong", "wrong-accepted", "traceback")
        print(f"\n| {'input':16} | " + " | ".join(f"{c:>14}" for c in columns) + " |")
        print(f"|{'-' * 18}|" + "|".join("-" * 16 for _ in columns) + "|")
        total = {c: 0 for c in columns}
        for kind in KINDS:
            row = table.get(kind, {})
            print(f"| {kind:16} | " + " | ".join(f"{row.get(c, 0):>14}" for c in columns) + " |")
            for c in columns:
                total[c] += row.get(c, 0)
        print(f"| {'all':16} | " + " | ".join(f"{total[c]:>14}" for c in columns) + " |")
        bad = [o for o in outcomes if o.result in ("traceback", "wrong-accepted")]
        for outcome in bad[:10]:
            last = outcome.detail.strip().splitlines()[-1] if outcome.detail.strip() else ""
            print(f"  {outcome.case.kind} {outcome.result}: {outcome.case.what} {last}")
        return 1 if bad else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
