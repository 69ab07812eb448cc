"""Output bench: the time of what ``gpuplan plan`` does besides the solve, against its targets.

Run ``python bench/output_bench.py [--plan-dir DIR]`` from anywhere (about 30 s on 2 cores).

Printed, each with its target (the unit tests check what these steps produce, not how long they take):

* MIG packing (``planner.planning.mig.packing.pack``, called for many (offering, period) demand vectors while
  mig-config.yaml is written): 200 random H100 demands of 5 profiles, 0-50 instances each, the
  memo cleared first. Target: < 2.0 s for the 200 (~0.5 ms each).
* The reports of a year of hourly periods (``planner.outputs.reports.plan.write_reports``):
  ``scenarios/mixed-fleet.yaml`` (8,760 one-hour periods) is planned with default settings, then
  report.md and report.html are written.
  Targets: < 30 s, report.html < 6 MB. ``--plan-dir`` takes a directory that ``gpuplan plan`` already
  wrote instead (nothing is planned).
* Reading a scenario (``models.yamlfile.read_yaml``, which also checks repeated keys and keeps line
  numbers) against plain ``yaml.safe_load`` of ``scenarios/mixed-fleet.yaml``, best of 5, with libyaml
  where PyYAML has it and with the pure-Python parser. Target: < 2x safe_load + 10 ms.

Single process (the machine has 2 cores shared with other work): +-30 % on times.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: the repo's packages, not an installed copy
    sys.path.insert(0, str(ROOT))

EXAMPLE = ROOT / "scenarios" / "mixed-fleet.yaml"
PACK_DEMANDS = 200
PACK_TARGET_S = 2.0
REPORT_TARGET_S = 30.0
REPORT_TARGET_BYTES = 6_000_000


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def bench_pack() -> None:
    from models.mig import MIG_PROFILES
    from planner.planning.mig import packing as mig_packing

    rng = random.Random(5)
    names = [p.name for p in MIG_PROFILES["H100"]]
    demands = [{name: rng.randint(0, 50) for name in rng.sample(names, 5)} for _ in range(PACK_DEMANDS)]
    mig_packing.pack("H100", {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1})  # imports and per-model caches
    mig_packing._pack.cache_clear()
    began = time.perf_counter()
    for demand in demands:
        mig_packing.pack("H100", demand)
    seconds = time.perf_counter() - began
    print(
        f"MIG packing: {PACK_DEMANDS} random H100 demands in {seconds:.3f} s "
        f"({seconds / PACK_DEMANDS * 1000:.2f} ms each); target < {PACK_TARGET_S:g} s: "
        f"{_verdict(seconds < PACK_TARGET_S)}"
    )


def bench_yaml() -> None:
    import yaml

    from models import yamlfile

    def best(read: Callable[[], object]) -> float:
        times = []
        for _ in range(5):
            began = time.perf_counter()
            read()
            times.append(time.perf_counter() - began)
        return min(times)

    loaders = [("libyaml", yamlfile._Loader)] if yaml.__with_libyaml__ else []
    loaders.append(("pure Python", yamlfile._PyLoader))
    default = yamlfile._Loader
    try:
        for name, loader in loaders:
            yamlfile._Loader = loader
            ours = best(lambda: yamlfile.read_yaml(EXAMPLE))
            plain = best(lambda: yaml.safe_load(EXAMPLE.read_text(encoding="utf-8")))
            target = 2 * plain + 0.01
            print(
                f"scenario YAML ({name}): read_yaml {ours * 1000:.1f} ms, safe_load {plain * 1000:.1f} ms "
                f"({ours / plain:.2f}x); target < {target * 1000:.1f} ms: {_verdict(ours < target)}"
            )
    finally:
        yamlfile._Loader = default


def bench_report(plan_dir: Path | None) -> None:
    from planner.outputs.reports.plan import write_reports

    scratch = Path(tempfile.mkdtemp(prefix="gpuplan-output-bench-"))
    try:
        if plan_dir is None:
            from models.inputs import load_inputs
            from planner.planning.optimize import optimize

            inputs = load_inputs(EXAMPLE)
            began = time.perf_counter()
            result = optimize(inputs.scenario, inputs.catalog, inputs.base_dir)
            planned = time.perf_counter() - began
            print(f"planned {EXAMPLE.relative_to(ROOT)} in {planned:.1f} s (not a target)")
            result.write(scratch)
        else:
            for name in ("plan.json", "allocations.csv"):
                shutil.copy(plan_dir / name, scratch / name)
        rows = sum(1 for _ in (scratch / "allocations.csv").open(encoding="utf-8")) - 1  # less the header
        began = time.perf_counter()
        _, html_path = write_reports(scratch)
        seconds = time.perf_counter() - began
        size = html_path.stat().st_size
        print(
            f"reports ({rows:,} allocation rows): {seconds:.2f} s, report.html {size / 1e6:.2f} MB; "
            f"targets < {REPORT_TARGET_S:g} s: {_verdict(seconds < REPORT_TARGET_S)}, "
            f"< {REPORT_TARGET_BYTES / 1e6:g} MB: {_verdict(size < REPORT_TARGET_BYTES)}"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan-dir", type=Path, default=None, help="time the reports of this plan directory")
    args = parser.parse_args(argv)
    bench_pack()
    bench_yaml()
    bench_report(args.plan_dir)


if __name__ == "__main__":
    main()
