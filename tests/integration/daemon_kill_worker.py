"""The process the journal's kill test SIGKILLs: one reconcile cycle, journaled, on the simulated cloud.

``python tests/integration/daemon_kill_worker.py --db URL --sim STATE --plan PLAN_DIR --at TIME`` does what
the daemon does when it starts and reconciles: open the store, resume the journal (settling what a killed
predecessor left pending), prepare the plan's actions against the sim's inventory with ``launch_batch=1``
(a node per launch, so the apply takes many calls to kill in the middle of), and apply them journaled. It
prints one JSON line (what resume found and re-sent, what this run sent) and exits 1 if an action failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

from models.plan import Plan
from planner.operations.daemon.journal import apply_journaled, resume
from planner.operations.daemon.store import Store
from planner.operations.provision import prepare
from planner.outputs.desired import plan_id_of
from providers.sim import SimProvider


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--sim", required=True, type=Path)
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--at", required=True)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args(argv)

    at = datetime.fromisoformat(args.at.replace("Z", "+00:00"))
    plan = Plan.read(args.plan)
    plan_id = plan_id_of(plan.document)
    sim = SimProvider(args.sim)
    sim.configure(api_latency_seconds=args.latency, boot_seconds=0)
    with Store(args.db) as store:
        resumed = resume(store, sim, plan_id)
        run = prepare(plan, sim, at, launch_batch=1)
        cycle = store.begin_cycle("reconcile", plan_id, at)
        sent: list[int] = []
        results = apply_journaled(run, sim, store, cycle, on_result=lambda a, r: sent.append(a.id))
        outcome = Counter(r.status for r in results.values())
        store.finish_cycle(cycle, "failed" if outcome["failed"] else "done", dict(outcome))
    print(
        json.dumps(
            {
                "resumed": [
                    {"entry": r.entry.id, "outcome": r.outcome, "status": r.result.status} for r in resumed
                ],
                "actions": len(run.actions),
                "sent": len(sent),
                "outcome": dict(outcome),
            }
        ),
        flush=True,
    )
    return 1 if outcome["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
