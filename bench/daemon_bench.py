"""Daemon bench: reconcile of a 500-node fleet on the simulated cloud, and one replan + reconcile cycle.

Run ``python bench/daemon_bench.py [--nodes 500] [--no-cycle]`` from anywhere. Printed:

* a fleet of ``--nodes`` nodes (pools of 20 on spot and on demand across offerings, and two 16-node
  gangs) reconciled from nothing on ``providers/sim.py`` (no API latency, no boot delay) with every action
  journaled in SQLite (``planner/operations/daemon/journal.py``): actions, seconds, actions per second, nodes
  per second, peak Python memory (tracemalloc) and the process's peak RSS; then the second reconcile, which
  has nothing to do;
* one daemon cycle on ``scenarios/mixed-fleet.yaml``: the replan (the planner, default settings) and the
  reconcile at the plan's first gang hour, each timed (``--no-cycle`` skips it).

Single process on a shared 2-core machine: +-30 % on times.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: the repo's packages, not an installed copy
    sys.path.insert(0, str(ROOT))

from models.naming import pool_name  # noqa: E402
from models.tiers import CapacityType  # noqa: E402
from planner.operations.daemon.journal import apply_journaled  # noqa: E402
from planner.operations.daemon.store import Store  # noqa: E402
from planner.operations.provision import Provisioning  # noqa: E402
from planner.operations.reconcile import reconcile  # noqa: E402
from planner.outputs.desired import DesiredGang, DesiredPool, DesiredState  # noqa: E402
from providers.sim import SimProvider  # noqa: E402

AT = datetime(2027, 2, 1, tzinfo=UTC)
OFFERINGS = [f"aws:us-east-{r}:p{k}.48xlarge" for r in (1, 2) for k in range(1, 7)]


def fleet(nodes: int) -> DesiredState:
    """Pools of 20 nodes, alternating spot and on demand over the offerings, plus two 16-node gangs."""
    gangs = [
        DesiredGang(
            run=f"train-{i}",
            job="train",
            run_index=i,
            team="research",
            offering=OFFERINGS[i],
            capacity=CapacityType.ON_DEMAND,
            nodes=16,
            placement_group=f"pg-train-{i}",
            fabric="efa",
            start=AT,
            end=AT + timedelta(days=2),
            running=True,
            reserve=True,
        )
        for i in range(2)
    ]
    pools, left, k = [], nodes - 32, 0
    while left > 0:
        offering = OFFERINGS[k % len(OFFERINGS)]
        capacity = CapacityType.SPOT if (k // len(OFFERINGS)) % 2 else CapacityType.ON_DEMAND
        count = min(20, left)
        pools.append(
            DesiredPool(
                pool=pool_name(offering, capacity),
                offering=offering,
                capacity=capacity,
                nodes=count,
                node_hours=count,
            )
        )
        left -= count
        k += 1
    return DesiredState(
        plan_id="bench-fleet", at=AT, period=0, pools=tuple(pools), gangs=tuple(gangs), ended_runs=(),
        purchases=(), notes=(), prices={},
    )  # fmt: skip


def reconcile_bench(nodes: int, work: Path) -> None:
    cloud = SimProvider(work / "sim.json", sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    store = Store(f"sqlite:///{work / 'daemon.db'}")
    desired = fleet(nodes)
    tracemalloc.start()
    began = time.perf_counter()
    inventory = cloud.inventory(desired.plan_id)
    actions = reconcile(desired, inventory, launch_batch=16)
    run = Provisioning("sim", desired, inventory, actions, [])
    cycle = store.begin_cycle("reconcile", desired.plan_id, AT)
    apply_journaled(run, cloud, store, cycle)
    seconds = time.perf_counter() - began
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    made = len(cloud.inventory(desired.plan_id).nodes)
    failed = len(run.failed())
    print(f"reconcile of a {nodes}-node fleet from nothing on sim, journaled in SQLite:")
    print(
        f"  {len(actions)} actions ({failed} failed), {made} nodes in {seconds:.2f} s: "
        f"{len(actions) / seconds:.1f} actions/s, {made / seconds:.0f} nodes/s; "
        f"peak Python memory {peak / 2**20:.1f} MiB, "
        f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    began = time.perf_counter()
    again = reconcile(desired, cloud.inventory(desired.plan_id), launch_batch=16)
    print(f"  the second reconcile: {len(again)} actions in {time.perf_counter() - began:.2f} s")


def cycle_bench(work: Path) -> None:
    import yaml

    from planner.operations.daemon.config import load_config
    from planner.operations.daemon.daemon import Daemon

    config_path = work / "daemon.yaml"
    data = {
        "scenario": str(ROOT / "scenarios" / "mixed-fleet.yaml"),
        "provider": {"cloud": "sim", "sim_state": str(work / "cycle-sim.json")},
        "apply": True,
        "database": f"sqlite:///{work / 'cycle.db'}",
        "metrics": {"enabled": False},
    }
    config_path.write_text(yaml.safe_dump(data), encoding="utf-8")
    config = load_config(config_path)
    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    daemon = Daemon(config, provider=cloud)
    start = datetime(2027, 1, 1, tzinfo=UTC)
    began = time.perf_counter()
    daemon.replan(start)
    planned = time.perf_counter() - began
    plan = daemon.current_plan()
    assert plan is not None
    gang = next(t for t in plan.document.training if t.nodes > 1)
    at = gang.start + timedelta(hours=1)
    began = time.perf_counter()
    run = daemon.reconcile(at)
    reconciled = time.perf_counter() - began
    assert run is not None
    nodes = len(cloud.inventory(run.desired.plan_id).nodes)
    print("one daemon cycle on scenarios/mixed-fleet.yaml (sim, SQLite):")
    print(
        f"  replan {planned:.1f} s (${plan.document.costs.total_usd:,.0f}); reconcile at "
        f"{at:%Y-%m-%d %H:%M}Z: {len(run.actions)} actions, {nodes} nodes in {reconciled:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--no-cycle", action="store_true", help="skip the replan + reconcile cycle")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        reconcile_bench(args.nodes, Path(work))
        if not args.no_cycle:
            cycle_bench(Path(work))


if __name__ == "__main__":
    main()
