"""openb bench: unallocated GPUs per placement policy on the openb variants, ours against the FGD paper's.

Run ``python bench/openb_bench.py [--variants default,cpu050] [--levels 100,110,120,130] [--seeds 3]
[--workers 2]`` from anywhere. The traces are ``openb_pod_list_<variant>.csv`` on
``openb_node_list_gpu_node.csv`` (1,213 nodes, 6,212 GPUs) from ``../shared/data/alibaba-openb-gpu-v2023``;
without them it says so and exits 0.

For each variant and seed 0..N-1 every policy of ``planner.simulate.openb`` replays the same arrival
sequence (the list shuffled, then sampled with replacement up to the top level; nothing departs), and the
unallocated GPUs (% of the capacity) are averaged over the seeds. Beside each figure: the paper's, the
mean of its published runs (``bench/data/fgd/analysis_allo_discrete.csv``, a trimmed copy of the
artifact's expected results, see ``bench/data/fgd/SOURCE.md``; 100 - allocated %), and ours - paper.
Paper policies: random = Random, dot-product = DotProd, clustering = GpuClustering, packing =
GpuPacking, best-fit = BestFit, workload-aware = FGD; first-fit is not one of the paper's. At the end:
the worst difference per policy over everything run (largest |ours - paper|, with its sign, variant
and level), and whether workload-aware is at or below the paper's FGD everywhere.

When both run, workload-aware is also checked against our own best-fit on the same arrivals at every
level from 50 % to the top level in steps of 1 (beside those asked for) where any policy strands GPUs
(fails a pod in some seed): the largest mean difference and where. A level where nothing failed leaves
capacity - arrived unallocated under every policy, so the two cannot differ there.

The paper's seeds (42-51: all ten for FGD, the first three for the other policies) are not ours (0..N-1):
the arrival orders differ, so a difference of a few tenths of a point is sampling, not a different
policy (one seed's spread is 0.08-0.10 point on the multigpu lists). Use ``--seeds 10`` to compare ten
against FGD's ten. ``--workers N`` replays N seeds at a time in separate processes (default 1).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: the repo's packages, not an installed copy
    sys.path.insert(0, str(ROOT))

from models.errors import InputError  # noqa: E402
from planner.simulate.openb import POLICIES, compare, load_nodes, load_pods  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "alibaba-openb-gpu-v2023"
NODES = DATA / "openb_node_list_gpu_node.csv"
PAPER = BENCH / "data" / "fgd" / "analysis_allo_discrete.csv"
# the 17 pod lists the paper evaluates (its experiments/run_scripts/generate_run_scripts.py FileList)
VARIANTS = (
    "default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare40", "gpushare60", "gpushare80",
    "gpushare100", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30",
    "multigpu40", "multigpu50",
)  # fmt: skip
LEVELS = (100.0, 110.0, 120.0, 130.0)
CHECK_FROM = 50.0  # the best-fit check covers 50 % up to the top level, every point
PAPER_POLICY = {
    "random": "01-Random",
    "dot-product": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "best-fit": "05-BestFit",
    "workload-aware": "06-FGD",
}
BENCH_POLICIES = ("random", "first-fit", "best-fit", "dot-product", "clustering", "packing", "workload-aware")


def load_paper(path: Path = PAPER) -> pd.DataFrame:
    """The paper's unallocated GPU % as (variant, sc_policy, level) -> mean over its seeds in the file."""
    frame = pd.read_csv(path)
    frame["variant"] = frame["workload"].str.removeprefix("openb_pod_list_")
    levels = [c for c in frame.columns if c.isdigit()]
    long = frame.melt(["variant", "sc_policy", "seed"], levels, var_name="level", value_name="allocated")
    long["level"] = long["level"].astype(float)
    long["unallocated"] = 100.0 - long["allocated"]
    return long.groupby(["variant", "sc_policy", "level"])["unallocated"].mean().to_frame()


def paper_figure(paper: pd.DataFrame, variant: str, policy: str, level: float) -> float:
    """The paper's figure, NaN where it has none (first-fit, a variant or level not in the copy)."""
    key = (variant, PAPER_POLICY.get(policy, ""), float(level))
    return float(paper.loc[key, "unallocated"]) if key in paper.index else float("nan")


def run_seed(
    variant: str, seed: int, levels: list[float], policies: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One seed's unallocated GPU % and failed pods per level (rows) and policy (columns)."""
    nodes, pods = load_nodes(NODES), load_pods(DATA / f"openb_pod_list_{variant}.csv")
    result = compare(nodes, pods, policies=policies, seed=seed, levels=levels)
    return result.table[policies], result.failed[policies]


def run_variant(
    variant: str, levels: list[float], seeds: int, policies: list[str], workers: int = 1
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our unallocated GPU % per level (rows) and policy (columns), mean of seeds 0..seeds-1, and the
    most failed pods of any seed per level and policy."""
    started = time.perf_counter()
    args = [(variant, seed, levels, policies) for seed in range(seeds)]
    if workers > 1:
        with ProcessPoolExecutor(min(workers, seeds)) as pool:
            results = list(pool.map(run_seed, *zip(*args, strict=True)))
    else:
        results = [run_seed(*a) for a in args]
    took = time.perf_counter() - started
    print(f"  {variant}: {seeds} seed(s) x {len(policies)} replays in {took:.1f} s", flush=True)
    tables = [table for table, _ in results]
    failed = pd.concat([f for _, f in results]).groupby(level=0).max()
    return sum(tables[1:], tables[0]) / seeds, failed


def report(variant: str, ours: pd.DataFrame, paper: pd.DataFrame) -> list[dict[str, object]]:
    """Print ours / paper / diff per level and policy; return the rows for the summary."""
    rows: list[dict[str, object]] = []
    cells: dict[str, list[str]] = {}
    for policy in ours.columns:
        cells[policy] = []
        for level, value in ours[policy].items():
            theirs = paper_figure(paper, variant, policy, float(level))
            diff = value - theirs
            rows.append(
                {
                    "variant": variant,
                    "policy": policy,
                    "level": level,
                    "ours": value,
                    "paper": theirs,
                    "diff": diff,
                }
            )
            cells[policy].append(
                f"{value:6.2f}" if np.isnan(theirs) else f"{value:6.2f} {theirs:6.2f} {diff:+5.2f}"
            )
    print(f"\n{variant}: unallocated GPUs, % of 6,212 (ours / paper / ours - paper)")
    width = max(len(c) for column in cells.values() for c in column)
    print("level  " + "  ".join(f"{p:>{width}s}" for p in cells))
    for i, level in enumerate(ours.index):
        print(f"{level:5g}  " + "  ".join(f"{cells[p][i]:>{width}s}" for p in cells))
    return rows


@dataclass(frozen=True)
class BestFitCheck:
    """workload-aware - best-fit (mean of the seeds) at one variant's closest level among those where a
    policy failed a pod in some seed (``level`` NaN where none did), and the first such level."""

    variant: str
    level: float
    diff: float
    first_failure: float


def best_fit_check(variant: str, ours: pd.DataFrame, failed: pd.DataFrame) -> BestFitCheck | None:
    """The variant's check; None unless both policies ran."""
    if not {"workload-aware", "best-fit"} <= set(ours.columns):
        return None
    stranding = failed.index[(failed > 0).any(axis=1)]
    if not len(stranding):
        return BestFitCheck(variant, float("nan"), float("nan"), float("nan"))
    diff = (ours["workload-aware"] - ours["best-fit"]).loc[stranding]
    return BestFitCheck(variant, float(diff.idxmax()), float(diff.max()), float(stranding.min()))


def print_best_fit_check(checks: list[BestFitCheck]) -> None:
    """One line per variant, then the verdict: is workload-aware ever above best-fit?"""
    if not checks:
        return
    print(
        "\nworkload-aware - best-fit, ours (mean of the seeds, points), the largest over the levels where a"
        " policy fails pods"
    )
    for c in checks:
        if np.isnan(c.level):
            print(f"  {c.variant:12s} no policy fails a pod at any level run")
            continue
        print(f"  {c.variant:12s} {c.diff:+6.3f} at {c.level:g} %   (pods fail from {c.first_failure:g} %)")
    checked = [c for c in checks if not np.isnan(c.level)]
    if checked:
        worst = max(checked, key=lambda c: c.diff)
        verdict = "never above best-fit" if worst.diff <= 0 else "ABOVE best-fit"
        print(
            f"  workload-aware: {verdict} (closest: {worst.diff:+.3f} at {worst.variant} {worst.level:g} %)"
        )


def summary(rows: list[dict[str, object]]) -> None:
    frame = pd.DataFrame(rows)
    compared = frame.dropna(subset=["paper"])
    print("\nWorst difference per policy (ours - paper, percentage points; over the variants and levels run)")
    for policy, group in compared.groupby("policy", sort=False):
        worst = group.loc[group["diff"].abs().idxmax()]
        print(
            f"  {policy:15s} {worst['diff']:+6.2f}  at {worst['variant']} {worst['level']:g} %"
            f"   (mean {group['diff'].mean():+5.2f} over {len(group)} points)"
        )
    missing = sorted(set(frame["variant"]) - set(compared["variant"]))
    if missing:
        print(f"  no paper figures for: {', '.join(missing)} (not in {PAPER.relative_to(ROOT)})")
    fgd = compared[compared["policy"] == "workload-aware"]
    if len(fgd):
        above = fgd[fgd["diff"] > 0]
        top = fgd.loc[fgd["diff"].idxmax()]
        most = f"{top['diff']:+.3f} at {top['variant']} {top['level']:g} %"
        verdict = (
            f"at or below the paper's FGD everywhere (closest: {most})"
            if above.empty
            else f"above it at {len(above)} points (most: {most})"
        )
        print(f"  workload-aware: {verdict}")


def _list(text: str, known: tuple[str, ...], what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in items if x not in known]
    if unknown or not items:
        raise ValueError(
            f"unknown {what} {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}"
        )
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated pod list variants")
    parser.add_argument("--levels", default=",".join(f"{x:g}" for x in LEVELS), help="arrival levels, %%")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1, averaged (default 3)")
    parser.add_argument("--policies", default=",".join(BENCH_POLICIES), help="comma-separated policies")
    parser.add_argument("--workers", type=int, default=1, help="seeds replayed at once, one process each")
    args = parser.parse_args(argv)
    if not NODES.exists():
        print(f"openb data not found in {DATA}. Skipped.")
        return 0
    try:
        variants = _list(args.variants, VARIANTS, "variant")
        policies = _list(args.policies, POLICIES, "policy")
        levels = [float(x) for x in args.levels.split(",") if x.strip()]
        if not levels:
            raise ValueError("no arrival levels given")
        top = max(levels)
        check = [float(x) for x in np.arange(CHECK_FROM, top + 1e-9, 1.0)]
        every = sorted(set(levels) | set(check))
        paper = load_paper()
        rows: list[dict[str, object]] = []
        checks: list[BestFitCheck] = []
        started = time.perf_counter()
        for i, variant in enumerate(variants, 1):
            print(
                f"[{i}/{len(variants)}] {variant} ({time.perf_counter() - started:.0f} s so far)", flush=True
            )
            ours, failed = run_variant(variant, every, max(1, args.seeds), policies, max(1, args.workers))
            rows += report(variant, ours.loc[levels], paper)
            found = best_fit_check(variant, ours, failed)
            if found is not None:
                checks.append(found)
        summary(rows)
        print_best_fit_check(checks)
    except (InputError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
