"""Plan scenarios through the CLI and compare the plans with those of another checkout, timings aside.

Why: a change that should not alter behaviour (moving code, renaming modules) is checked by planning the
same inputs before and after and comparing the plan directories. Everything the planner decides must
be equal (commitments, placements, every allocation row, costs, bounds, notes); only what measures the
machine is dropped: ``created`` and every ``*seconds`` field of ``plan.json``, and figures in seconds
inside notes. Plans whose solver stages end before their time limits are expected to be identical; a
stage that stops at its limit makes the plan depend on the machine's speed (issue 39).

The planner runs as ``python -m planner.cli plan`` with the checkout as working directory and first on
``PYTHONPATH``, so one script compares any two checkouts that have that command (the layout of the code
may differ between them).

    python bench/plan_digest.py --repo /path/to/old -o old.json scenarios/training-heavy-lab.yaml
    python bench/plan_digest.py --repo . --against old.json scenarios/training-heavy-lab.yaml
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: a figure in seconds inside a note (``... 12.3 s``): measured, not decided
_SECONDS = re.compile(r"\d[\d,]*(\.\d+)? ?s\b")


def _normal(value: Any) -> Any:
    """``value`` (parsed plan.json) without what measures the machine."""
    if isinstance(value, dict):
        return {
            key: _normal(item)
            for key, item in value.items()
            if key != "created" and not key.endswith("seconds")
        }
    if isinstance(value, list):
        return [_normal(item) for item in value]
    if isinstance(value, str):
        return _SECONDS.sub("<s>", value)
    return value


def plan_once(repo: Path, scenario: Path, flags: list[str]) -> dict[str, Any]:
    """Plan ``scenario`` with ``repo``'s code; the normalized plan.json and allocations.csv rows."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "plan"
        env = {**os.environ, "PYTHONPATH": str(repo)}
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "planner.cli", "plan", str(scenario.resolve()), "-o", str(out), *flags],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(f"{scenario}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
        document = _normal(json.loads((out / "plan.json").read_text(encoding="utf-8")))
        with (out / "allocations.csv").open(encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
    digest = hashlib.sha256(json.dumps([document, rows], sort_keys=True).encode()).hexdigest()
    return {"plan": document, "allocations": rows, "digest": digest, "wall_seconds": round(seconds, 1)}


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    """Where ``new`` differs from ``old``: one line per differing leaf (at most a few per list)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(set(old) | set(new)):
            if key not in old or key not in new:
                found.append(f"{path}.{key}: only in {'new' if key in new else 'old'}")
            else:
                found += differences(old[key], new[key], f"{path}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{path}: {len(old)} items -> {len(new)}"]
        found = []
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            found += differences(a, b, f"{path}[{index}]")
        return found
    return [] if old == new else [f"{path}: {old!r} -> {new!r}"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="+", type=Path)
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout that plans (default: this)")
    parser.add_argument("--flags", default="", help="extra flags for gpuplan plan, one string")
    parser.add_argument("-o", "--output", type=Path, help="write the normalized plans here (JSON)")
    parser.add_argument("--against", type=Path, help="compare with plans written by -o")
    args = parser.parse_args()
    earlier = json.loads(args.against.read_text(encoding="utf-8")) if args.against else {}
    results: dict[str, Any] = {}
    changed = 0
    for scenario in args.scenarios:
        key = f"{scenario} {args.flags}".strip()
        result = plan_once(args.repo.resolve(), scenario, args.flags.split())
        results[key] = result
        total = result["plan"]["costs"]["total_usd"]
        line = f"{key}: ${total:,.2f}, digest {result['digest'][:12]}, {result['wall_seconds']} s"
        if key in earlier:
            found = differences(
                {"plan": earlier[key]["plan"], "allocations": earlier[key]["allocations"]},
                {"plan": result["plan"], "allocations": result["allocations"]},
            )
            line += ": identical" if not found else f": {len(found)} difference(s)"
            changed += bool(found)
            for difference in found[:20]:
                line += f"\n    {difference}"
        print(line, flush=True)
    if args.output:
        args.output.write_text(json.dumps(results, sort_keys=True) + "\n", encoding="utf-8")
    if changed:
        raise SystemExit(f"{changed} plan(s) differ")


if __name__ == "__main__":
    main()
