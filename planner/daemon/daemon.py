"""The daemon: its five jobs, run by APScheduler in production and by :meth:`Daemon.tick` in tests.

Each job is a method taking the time it runs at (``now``), so a test drives simulated days by calling
``tick(now)`` with its own clock, and production runs the same methods from APScheduler interval jobs
(``run``: SQLAlchemy job store in the daemon's database, one instance of a job at a time, misfires
coalesced).

- ``refresh_prices``: the provider's live spot prices of the plan's offerings into the store, with age.
- ``replan``: on its schedule, and (checked after each price refresh) when a plan offering's live spot
  price has moved by more than ``price_change`` since the plan, or the scenario's inputs changed: the
  scenario planned again with the live spot prices and every commitment already bought held fixed (a
  re-plan never un-buys one).
- ``reconcile``: ``gpuplan provision`` against the current plan, journaled (``journal.py``); pending
  actions of a crashed run are resumed first; with ``apply: false`` the actions are only journaled as a
  dry run. A spot pool the cloud cannot fill falls back to on-demand nodes of the same offering; the spot
  pool's surplus terminations wait on its spot launches, so the fallback stays until spot is back.
- ``watch_interruptions``: new spot interruption and rebalance notices are recorded, the checkpoint hook
  is called for an affected run, and a reconcile runs at once, so capacity is replaced within the cycle.
- ``commitment_expiry``: a warning ``warn_days`` before a commitment ends, with what the plan buys in
  its place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from models.actions import Action, ActionKind, ActionResult
from models.plan import Plan
from models.tiers import CapacityType
from planner.daemon.config import DaemonConfig
from planner.provision import Provisioning, prepare
from planner.reconcile import plan_id_of
from providers.base import InsufficientCapacity, Provider, client_token, pool_name

__all__ = ["JOBS", "Daemon"]

log = logging.getLogger("gpuplan.daemon")

#: Interruption notices remembered as seen (the newest).
_SEEN_KEPT: Final = 2000
#: The jobs, in the order a tick runs the ones that are due.
JOBS: Final = ("refresh_prices", "replan", "reconcile", "watch_interruptions", "commitment_expiry")


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


class Daemon:
    """One daemon: its config, store, provider and metrics. The store and metrics come from
    ``planner.daemon.store`` / ``metrics``; tests may hand in their own provider (a SimProvider)."""

    def __init__(
        self,
        config: DaemonConfig,
        *,
        provider: Provider | None = None,
        store: Any = None,
        metrics: Any = None,
        planner: Callable[[DaemonConfig, Plan | None, datetime, dict[str, float]], Path] | None = None,
    ) -> None:
        from planner.daemon.metrics import DaemonMetrics
        from planner.daemon.store import Store
        from providers.config import load_provider_config, open_provider

        self.config = config
        self.store = store if store is not None else Store(config.database_url)
        self.metrics = metrics if metrics is not None else DaemonMetrics()
        if provider is None:
            settings = load_provider_config(config.settings_path)
            provider = open_provider(
                config.provider.cloud, settings, config_path=config.settings_path, sim_state=config.sim_state
            )
        self.provider = provider
        self._planner = planner or plan_scenario
        self._plan: tuple[tuple[str, int], Plan] | None = None  # the plan as read, by directory and mtime

    # -- state -------------------------------------------------------------------------------------------

    def current_plan(self) -> Plan | None:
        """The plan the store names, read again only when it changed (another directory, or plan.json
        rewritten): every job asks for it, one every minute, and a year's allocations.csv is megabytes."""
        where = self.store.get_state("plan_dir")
        if where is None:
            return None
        document = Path(where) / "plan.json"
        key = (where, document.stat().st_mtime_ns if document.is_file() else -1)  # missing: Plan.read says so
        if self._plan is None or self._plan[0] != key or key[1] == -1:
            self._plan = (key, Plan.read(Path(where)))
        return self._plan[1]

    def tick(self, now: datetime) -> list[str]:
        """Run every job that is due at ``now`` (its interval passed since its last run); the jobs run."""
        ran = []
        for name in JOBS:
            schedule = getattr(self.config.jobs, name)
            if not schedule.enabled:
                continue
            last = self.store.get_state(f"last_run:{name}")
            if last is None or _utc(now) - datetime.fromisoformat(last) >= timedelta(
                seconds=schedule.seconds
            ):
                self.run(name, now)
                ran.append(name)
        return ran

    def run(self, name: str, now: datetime) -> Any:
        """Run job ``name`` at ``now``, timed and counted; a failure is logged and counted, never raised
        (the daemon keeps running and tries again at the next run)."""
        job = getattr(self, name)
        try:
            with self.metrics.job(name):
                result = job(_utc(now))
        except Exception as exc:
            log.exception("job %s failed: %s", name, exc)
            self.store.record_event("job-failed", f"{name}: {type(exc).__name__}: {exc}", at=_utc(now))
            return None
        self.store.set_state(f"last_run:{name}", _utc(now).isoformat())
        return result

    # -- jobs --------------------------------------------------------------------------------------------

    def refresh_prices(self, now: datetime) -> int:
        plan = self.current_plan()
        if plan is None:
            return 0
        prices = self.provider.spot_prices(sorted(plan.document.offerings))
        self.store.record_prices(prices)
        if prices:
            newest = max(_utc(p.at) for p in prices)
            self.metrics.price_age(max(0.0, (now - newest).total_seconds()))
        log.info("refreshed %d spot prices", len(prices))
        self.replan(now, scheduled=False)  # only if the prices (or the inputs) moved
        return len(prices)

    def replan(self, now: datetime, *, scheduled: bool = True) -> Path | None:
        """A new plan when it is the scheduled replan, when none exists, or when prices or inputs moved
        (``scheduled=False``: only then); None when nothing called for one."""
        plan = self.current_plan()
        live = {o: usd for o, (usd, _seen) in self.store.latest_prices().items()}
        digest = inputs_digest(self.config.scenario_path)
        reasons = []
        if plan is None:
            reasons.append("no plan yet")
        else:
            if digest != self.store.get_state("inputs_digest"):
                reasons.append("the scenario's inputs changed")
            moved = _moved_prices(plan, live, self.config.jobs.replan.price_change)
            if moved:
                reasons.append(f"spot prices moved: {', '.join(moved)}")
            if scheduled:
                reasons.append("scheduled")
        if not reasons:
            return None
        log.info("re-planning: %s", "; ".join(reasons))
        plan_dir = self._planner(self.config, plan, now, live)
        self.store.set_state("plan_dir", str(plan_dir))
        self.store.set_state("inputs_digest", digest)
        self.store.set_state("last_replan", now.isoformat())
        self.store.record_event("replan", "; ".join(reasons), at=now, data={"plan_dir": str(plan_dir)})
        new = self.current_plan()
        assert new is not None
        self.metrics.plan_cost(new.document.costs.total_usd / new.document.horizon.hours)
        return plan_dir

    def reconcile(self, now: datetime) -> Provisioning | None:
        from planner.daemon.journal import apply_journaled, resume

        plan = self.current_plan()
        if plan is None:
            self.replan(now)
            plan = self.current_plan()
        if plan is None:
            return None
        plan_id = plan_id_of(plan.document)
        start = plan.document.horizon.start
        if now < start:  # nothing to hold before the plan starts (provision --at can build it ahead)
            log.info("the plan starts %s: nothing to reconcile yet", f"{start:%Y-%m-%dT%H:%M}Z")
            return None
        if self.config.apply:
            for resumed in resume(self.store, self.provider, plan_id):
                log.info("resumed %s", resumed)
        run = prepare(
            plan, self.provider, now, lead_hours=self.config.lead_hours, launch_batch=self.config.launch_batch
        )
        cycle = self.store.begin_cycle("reconcile", plan_id, now)
        if self.config.apply and run.actions:
            apply_journaled(run, self.provider, self.store, cycle, on_result=self._count)
            self._fall_back(run, cycle)
        summary = {
            "applied": self.config.apply,
            "actions": [a.describe() for a in run.actions],
            "failed": [run.results[a.id].message for a in run.failed()],
        }
        self.store.finish_cycle(cycle, "done" if not run.failed() else "failed", summary)
        self._pool_metrics(run)
        return run

    def watch_interruptions(self, now: datetime) -> list[str]:
        plan = self.current_plan()
        if plan is None:
            return []
        seen = set(self.store.get_state("seen_interruptions") or [])
        fresh = []
        for notice in self.provider.interruptions(plan_id_of(plan.document)):
            key = f"{notice.node_id}:{notice.kind}"
            if key in seen:
                continue
            seen.add(key)
            fresh.append(key)
            self.metrics.interruption(notice.kind)
            data = {"node": notice.node_id, "pool": notice.pool, "run": notice.run, "kind": notice.kind}
            self.store.record_event("interruption", f"{notice.kind} of {notice.node_id}", at=now, data=data)
            if notice.run and self.config.checkpoint_hook is not None:
                self._checkpoint(notice.run, notice.node_id)
        # the newest notices are enough to tell a new one from one seen already (a reclaimed node's id
        # never comes back), and the state stays small over months
        kept = [*[k for k in self.store.get_state("seen_interruptions") or [] if k in seen], *fresh]
        self.store.set_state("seen_interruptions", kept[-_SEEN_KEPT:])
        if fresh and self.config.apply:
            self.reconcile(now)  # replace the capacity within this cycle
        return fresh

    def commitment_expiry(self, now: datetime) -> list[str]:
        plan = self.current_plan()
        if plan is None:
            return []
        warn = timedelta(days=self.config.jobs.commitment_expiry.warn_days)
        warnings = []
        for commitment in plan.document.commitments:
            if commitment.end is None or not now <= commitment.end <= now + warn:
                continue
            days = (commitment.end - now).total_seconds() / 86400
            self.metrics.commitment_expiry(commitment.name or commitment.offering, days)
            after = [
                c
                for c in plan.document.commitments
                if c.offering == commitment.offering and c.start is not None and c.start >= commitment.end
            ]
            instead = (
                ", ".join(f"{c.nodes} x {c.term} from {c.start:%Y-%m-%d}" for c in after)
                if after
                else "nothing: the plan lets it lapse"
            )
            message = (
                f"{commitment.name or commitment.offering} ({commitment.nodes} x {commitment.offering}, "
                f"{commitment.term}) ends {commitment.end:%Y-%m-%d}, in {days:.0f} days; the plan buys "
                f"{instead}"
            )
            log.warning(message)
            self.store.record_event(
                "commitment-expiry", message, at=now, data={"commitment": commitment.name}
            )
            warnings.append(message)
        return warnings

    def health(self) -> dict[str, Any]:
        """/healthz: ``ok`` while every enabled job has run within three of its intervals, else
        ``degraded``, with each job's last run and its age."""
        now = datetime.now(UTC)
        jobs: dict[str, Any] = {}
        status = "ok"
        for name in JOBS:
            schedule = getattr(self.config.jobs, name)
            if not schedule.enabled:
                continue
            last = self.store.get_state(f"last_run:{name}")
            age = None if last is None else (now - datetime.fromisoformat(last)).total_seconds()
            if age is None or age > 3 * schedule.seconds:
                status = "degraded"
            jobs[name] = {"last_success": last, "age_seconds": age}
        return {"status": status, "jobs": jobs, "apply": self.config.apply}

    # -- helpers -----------------------------------------------------------------------------------------

    def _count(self, action: Action, result: ActionResult) -> None:
        self.metrics.action(str(action.kind), result.status)

    def _fall_back(self, run: Provisioning, cycle: int) -> None:
        """Spot pools the cloud could not fill get on-demand nodes of the same offering instead."""
        from planner.daemon.journal import apply_journaled

        fallbacks: list[Action] = []
        for action in run.failed():
            result = run.results[action.id]
            if (
                action.kind is ActionKind.LAUNCH
                and action.capacity is CapacityType.SPOT
                and action.run is None
                and result.error_kind == InsufficientCapacity.kind
                and action.offering is not None
            ):
                short = action.count - len(result.made)
                pool = pool_name(action.offering, CapacityType.ON_DEMAND)
                fallbacks.append(
                    Action(
                        id=len(run.actions) + len(fallbacks) + 1,
                        kind=ActionKind.LAUNCH,
                        target=pool,
                        offering=action.offering,
                        capacity=CapacityType.ON_DEMAND,
                        count=short,
                        token=client_token(action.token, "fallback-on-demand"),
                        reason=f"{action.target} is short {short} spot nodes: on demand in their place",
                    )
                )
        if not fallbacks:
            return
        log.warning("falling back to on demand for %d spot launches", len(fallbacks))
        extra = Provisioning(run.provider, run.desired, run.inventory, fallbacks, [])
        apply_journaled(extra, self.provider, self.store, cycle, on_result=self._count)
        run.actions.extend(fallbacks)
        run.results.update(extra.results)

    def _pool_metrics(self, run: Provisioning) -> None:
        live = run.inventory.live_nodes()
        for pool in run.desired.pools:
            actual = sum(1 for n in live if n.pool == pool.pool and n.run is None)
            self.metrics.pool_nodes(pool.pool, str(pool.capacity), pool.nodes, actual)

    def _checkpoint(self, run: str, node: str) -> None:
        hook = self.config.checkpoint_hook
        assert hook is not None
        try:
            if hook.command is not None:
                command = [part.replace("{run}", run).replace("{node}", node) for part in hook.command]
                subprocess.run(command, check=True, timeout=hook.timeout_seconds, capture_output=True)
            elif hook.webhook is not None:
                body = json.dumps({"run": run, "node": node, "event": "interruption"}).encode()
                request = urllib.request.Request(hook.webhook, body, {"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=hook.timeout_seconds):
                    pass
            log.info("checkpoint hook called for %s (node %s)", run, node)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("checkpoint hook for %s failed: %s", run, exc)


def _moved_prices(plan: Plan, live: dict[str, float], share: float) -> list[str]:
    """Plan offerings whose live spot price differs from the planned one by more than ``share``."""
    moved = []
    for offering, record in sorted(plan.document.offerings.items()):
        planned = record.spot_usd_h
        if planned and offering in live and abs(live[offering] - planned) > share * planned:
            moved.append(f"{offering} {planned:.2f} -> {live[offering]:.2f}")
    return moved


def inputs_digest(scenario: Path) -> str:
    """A digest of the scenario file and the files beside it that it may read (demand CSVs, a catalog):
    when it changes, the inputs changed."""
    digest = hashlib.sha256(scenario.read_bytes())
    for path in sorted(scenario.parent.rglob("*.csv")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def plan_scenario(config: DaemonConfig, previous: Plan | None, now: datetime, live: dict[str, float]) -> Path:
    """Plan the scenario again: the live spot prices applied (``spot_price:OFFERING=x<live/catalog>``)
    and every commitment the previous plan bought by ``now`` held fixed; the new plan directory."""
    from models.scenario import ExistingCommitment
    from models.variation import parse_all
    from planner.cli_common import atomic_directory
    from planner.inputs import load_inputs
    from planner.optimize import SolveSettings, optimize

    base = load_inputs(config.scenario_path)
    catalog = {o.id: o for o in base.catalog}
    changes = []
    for offering, usd in sorted(live.items()):
        listed = catalog[offering].spot_usd_h if offering in catalog else None
        if listed:
            changes.append(f"spot_price:{offering}=x{usd / listed:.6f}")
    inputs = load_inputs(config.scenario_path, parse_all(changes, "live spot prices")) if changes else base
    scenario = inputs.scenario
    if previous is not None:
        bought = [
            ExistingCommitment(
                offering=c.offering,
                term=c.term,
                nodes=c.nodes,
                start=c.start,
                usd_per_node_hour=c.usd_per_node_hour,
            )
            for c in previous.document.commitments
            if not c.existing and c.start is not None and c.start <= now and c.term != "owned"
        ]
        if bought:
            scenario = scenario.model_copy(update={"commitments": [*scenario.commitments, *bought]})
    settings = SolveSettings(time_limit=config.plan_time_limit)
    plan = optimize(scenario, inputs.catalog, inputs.base_dir, settings)
    target = config.plans_dir / f"plan-{now:%Y%m%dT%H%M%SZ}"
    with atomic_directory(target) as staging:
        plan.write(staging)
        (staging / "replan.json").write_text(
            json.dumps(
                {"at": now.isoformat(), "live_prices": changes, "held_fixed": bool(previous)}, indent=2
            )
            + "\n",
            encoding="utf-8",
        )
    return target
