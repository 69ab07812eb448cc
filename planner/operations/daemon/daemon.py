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
- ``reconcile``: ``gpuplan provision`` against the current plan, journaled (``journal.py``); the
  Capacity Blocks the plan holds its gangs in are bought first, from 8 weeks ahead (before the horizon
  too), only with ``apply: true`` and ``block_max_usd`` (each a ``capacity-block-bought`` event; an offer
  over the cap, or none bought for want of a cap, an event once per run and offer); pending
  actions of a crashed run are resumed first; with ``apply: false`` nothing is sent or journaled: the
  actions go into the cycle's summary as a dry run. A gang whose placement group fails cycle after
  cycle is a ``gang-blocked`` event from the second cycle on, with the count (the summary's ``blocked``).
  A spot pool the cloud cannot fill falls back to
  on-demand nodes of the same offering; the spot pool's surplus terminations wait on its spot launches,
  so the fallback stays until spot is back.
- ``watch_interruptions``: new spot interruption and rebalance notices are recorded, the checkpoint hook
  is called for an affected run, and a reconcile runs at once, so capacity is replaced within the cycle:
  an interrupted node's pool is short and is refilled; a pool node with a rebalance recommendation is at
  risk, so its replacement launches now and it is let go once the pool runs without it.
- ``commitment_expiry``: a warning ``warn_days`` before a commitment ends, with what the plan buys in
  its place, and one before the plan's horizon ends (past it, reconcile fails saying so: plan again).

A job that fails (it raised, or a reconcile left actions failed: :class:`CycleFailed`) is logged, counted
and recorded as an event, and waits before its next run (``backoff`` in the config: the wait doubles with
each failure in a row, the first success ends it). Nothing a job does can stop the daemon: a database
that stays down fails the job, and the next tick tries again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from models.actions import Action, ActionKind, ActionResult
from models.catalog import Catalog
from models.errors import GpuplanError
from models.naming import TAG_STANDS_IN, client_token, pool_name
from models.plan import Plan
from models.scenario import Scenario
from models.tiers import CapacityType
from planner.operations.daemon.config import DaemonConfig
from planner.operations.errors import CycleFailed
from planner.operations.provision import Provisioning, prepare
from planner.outputs.desired import plan_id_of
from providers.base import Capability, InsufficientCapacity, Provider, supports

__all__ = ["JOBS", "Daemon", "ScenarioFeed", "changed_inputs", "input_files", "inputs_digests"]

log = logging.getLogger("gpuplan.daemon")

#: Interruption notices remembered as seen (the newest).
_SEEN_KEPT: Final = 2000
_NOT_RUN: Final = ActionResult(status="skipped", message="not run (a dry run)")
_SLACK: Final = timedelta(seconds=1)
#: A scenario feed adds work that arrived outside the scenario file (the portal's queued training
#: requests) to the scenario a replan plans; the layer above wires it in (``planner/cli/daemon.py``,
#: ``planner/operations/portal/service.py``), so the daemon never imports what feeds it.
ScenarioFeed = Callable[[DaemonConfig, Scenario, Catalog], Scenario]
#: The store's state key of the gangs whose placement group failed in the last cycles in a row.
_BLOCKED_KEY: Final = "blocked_gangs"
#: The store's state key of the last Capacity Block decision recorded per run (events are not repeated).
_BLOCKS_KEY: Final = "capacity_block_events"
#: The store's state key of the input files' digests (:func:`inputs_digests`).
DIGESTS_KEY: Final = "inputs_digests"
#: The jobs, in the order a tick runs the ones that are due.
JOBS: Final = ("refresh_prices", "replan", "reconcile", "watch_interruptions", "commitment_expiry")


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _wall_clock() -> datetime:
    return datetime.now(UTC)


class Daemon:
    """One daemon: its config, store, provider and metrics. The store and metrics come from
    ``planner.operations.daemon.store`` / ``metrics``; tests may hand in their own provider (a
    SimProvider)."""

    def __init__(
        self,
        config: DaemonConfig,
        *,
        provider: Provider | None = None,
        store: Any = None,
        metrics: Any = None,
        planner: Callable[[DaemonConfig, Plan | None, datetime, dict[str, float]], Path] | None = None,
        feeds: Sequence[ScenarioFeed] = (),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        from planner.operations.daemon.metrics import DaemonMetrics
        from planner.operations.daemon.store import Store
        from providers.config import load_provider_config, open_provider

        self.config = config
        # one clock for the daemon: the hook's timing against a notice's deadline and the store's stamps
        # (the journal's settle time) agree; the wall clock, or in a test the clock of the cloud's stand-in
        self._clock = clock or _wall_clock
        self.store = store if store is not None else Store(config.database_url, clock=self._clock)
        self.metrics = metrics if metrics is not None else DaemonMetrics()
        if provider is None:
            settings = load_provider_config(config.settings_path)
            provider = open_provider(
                config.provider.cloud, settings, config_path=config.settings_path, sim_state=config.sim_state
            )
        self.provider = provider
        # a re-plan can take minutes: its stages are logged as they go (issue 42: silent for two minutes)
        self._planner = planner or functools.partial(
            plan_scenario, feeds=tuple(feeds), progress=_replan_progress
        )
        self._plan: tuple[tuple[str, int], Plan] | None = None  # the plan as read, by directory and mtime
        # failed runs in a row and the last one's time, per job: kept here too, so the backoff holds while
        # the database that also stores them is down
        self._failures: dict[str, tuple[int, datetime | None]] = {}

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
        """Run every job that is due at ``now``; the jobs run. A database that is down ends the tick (the
        next one tries again): the daemon never stops on it."""
        from planner.operations.errors import StoreUnavailable

        ran = []
        for name in JOBS:
            if not getattr(self.config.jobs, name).enabled:
                continue
            try:
                due = self.due(name, now)
            except StoreUnavailable as exc:
                log.error("tick at %s: %s", f"{_utc(now):%Y-%m-%dT%H:%M}Z", exc)
                break
            if due:
                self.run(name, now)
                ran.append(name)
        return ran

    def failures(self, name: str) -> tuple[int, datetime | None]:
        """Failed runs of job ``name`` in a row, and when the last one was (0, None after a success)."""
        if name not in self._failures:
            count = int(self.store.get_state(f"failures:{name}") or 0)
            last = self.store.get_state(f"last_attempt:{name}")
            self._failures[name] = (count, datetime.fromisoformat(last)) if count and last else (0, None)
        return self._failures[name]

    def next_run(self, name: str) -> datetime | None:
        """When job ``name`` is next due: its interval after its last success, or after failures its
        backoff after the last failed run; None when it never ran (due at once)."""
        schedule = getattr(self.config.jobs, name)
        count, failed_at = self.failures(name)
        if count and failed_at is not None:
            return failed_at + timedelta(seconds=self.config.backoff.seconds(schedule.seconds, count))
        last = self.store.get_state(f"last_run:{name}")
        return None if last is None else datetime.fromisoformat(last) + timedelta(seconds=schedule.seconds)

    def due(self, name: str, now: datetime) -> bool:
        """Whether job ``name`` should run at ``now`` (a second of slack: a scheduler firing on the
        interval is never a hair early)."""
        at = self.next_run(name)
        return at is None or _utc(now) >= at - _SLACK

    def run(self, name: str, now: datetime) -> Any:
        """Run job ``name`` at ``now``, timed and counted; a failure is logged, counted, recorded with its
        next try, and never raised (the daemon keeps running and tries again after its backoff)."""
        now = _utc(now)
        job = getattr(self, name)
        try:
            with self.metrics.job(name):
                result = job(now)
        except Exception as exc:
            self._failed(name, now, exc)
            return None
        self._succeeded(name, now)
        return result

    def _failed(self, name: str, now: datetime, exc: Exception) -> None:
        from planner.operations.errors import StoreUnavailable

        try:
            before = self.failures(name)[0]
        except StoreUnavailable:
            before = self._failures.get(name, (0, None))[0]
        count = before + 1
        self._failures[name] = (count, now)
        wait = self.config.backoff.seconds(getattr(self.config.jobs, name).seconds, count)
        retry = now + timedelta(seconds=wait)
        what = f"{name} failed ({count} in a row): {type(exc).__name__}: {exc}"
        what += f"; next try {retry:%Y-%m-%dT%H:%M}Z"
        if isinstance(exc, GpuplanError):  # an error it says itself (cloud, input, store): no traceback
            log.error(what)
        else:
            log.exception(what)
        try:
            self.store.set_state(f"failures:{name}", count)
            self.store.set_state(f"last_attempt:{name}", now.isoformat())
            data = {
                "job": name,
                "failures": count,
                "retry_at": retry.isoformat(),
                "error": type(exc).__name__,
            }
            self.store.record_event("job-failed", what, at=now, data=data)
        except StoreUnavailable as down:
            log.error("%s not recorded: %s", name, down)

    def _succeeded(self, name: str, now: datetime) -> None:
        from planner.operations.errors import StoreUnavailable

        try:
            count = self.failures(name)[0]
            self.store.set_state(f"last_run:{name}", now.isoformat())
            if count:
                self._failures[name] = (0, None)
                self.store.set_state(f"failures:{name}", 0)
                self.store.record_event("job-recovered", f"{name} ran after {count} failed runs", at=now)
                log.info("%s recovered after %d failed runs", name, count)
        except StoreUnavailable as down:  # it ran; unrecorded, it runs again at the next tick
            log.error("%s ran but was not recorded: %s", name, down)

    # -- jobs --------------------------------------------------------------------------------------------

    def refresh_prices(self, now: datetime) -> int:
        plan = self.current_plan()
        if plan is None:
            return 0
        if supports(self.provider, Capability.SPOT_PRICES):
            prices = self.provider.spot_prices(sorted(plan.document.offerings))
        else:  # GCP's Compute API has no prices: the catalog's stand, and a replan can still be due
            cloud = self.provider.cloud
            log.info("%s publishes no spot prices through its API: the catalog's are kept", cloud)
            prices = []
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
        digests = inputs_digests(self.config.scenario_path)
        reasons = []
        changed: list[str] = []
        if plan is None:
            reasons.append("no plan yet")
        else:
            changed = changed_inputs(self.store.get_state(DIGESTS_KEY), digests)
            if changed:
                reasons.append(f"the scenario's inputs changed: {', '.join(changed)}")
            moved = _moved_prices(plan, live, self.config.jobs.replan.price_change)
            if moved:
                reasons.append(f"spot prices moved: {', '.join(moved)}")
            if scheduled:
                reasons.append("scheduled")
        if not reasons:
            if plan is not None and not isinstance(self.store.get_state(DIGESTS_KEY), dict):
                self.store.set_state(DIGESTS_KEY, digests)  # a store from before per-file digests
            return None
        log.info("re-planning: %s (time limit %g s)", "; ".join(reasons), self.config.plan_time_limit)
        plan_dir = self._planner(self.config, plan, now, live)
        self.store.set_state("plan_dir", str(plan_dir))
        self.store.set_state(DIGESTS_KEY, digests)
        self.store.set_state("last_replan", now.isoformat())
        # a plan made now is the scheduled one too: the replan job waits its interval from here, rather
        # than planning the same inputs again in the same tick (issue 42: --once planned twice)
        self.store.set_state("last_run:replan", now.isoformat())
        data = {"plan_dir": str(plan_dir), "reasons": reasons, "changed_inputs": changed}
        self.store.record_event("replan", "; ".join(reasons), at=now, data=data)
        new = self.current_plan()
        assert new is not None
        self.metrics.plan_cost(new.document.costs.total_usd / new.document.horizon.hours)
        return plan_dir

    def reconcile(self, now: datetime) -> Provisioning | None:
        from planner.operations.daemon.journal import apply_journaled, resume

        plan = self.current_plan()
        if plan is None:
            self.replan(now)
            plan = self.current_plan()
        if plan is None:
            return None
        plan_id = plan_id_of(plan.document)
        self._buy_blocks(plan, now)
        start = plan.document.horizon.start
        if now < start:  # nothing to hold before the plan starts (provision --at can build it ahead)
            log.info("the plan starts %s: nothing to reconcile yet", f"{start:%Y-%m-%dT%H:%M}Z")
            return None
        if self.config.apply:
            for resumed in resume(self.store, self.provider, plan_id):
                log.info("resumed %s", resumed)
        at_risk = frozenset(self.store.get_state("at_risk") or [])
        run = prepare(
            plan,
            self.provider,
            now,
            lead_hours=self.config.lead_hours,
            launch_batch=self.config.launch_batch,
            at_risk=at_risk,
            budget=self.config.budget,
            capacity_only=self.config.capacity_only,
        )
        cycle = self.store.begin_cycle("reconcile", plan_id, now)
        for held in run.held_back:  # a shrink larger than the budget: the rest waits for later cycles
            data = {
                "pool": held.pool,
                "surplus": held.surplus,
                "allowed": held.allowed,
                "running": held.running,
            }
            self.store.record_event("disruption-budget", held.describe(), at=now, data=data)
        fallback = _Fallback()
        if self.config.apply and run.actions:
            apply_journaled(run, self.provider, self.store, cycle, on_result=self._count)
            fallback = self._fall_back(plan, run, cycle)
        unresolved = _unresolved(run, fallback)
        if at_risk:  # forget the nodes that are gone: replaced and let go now, or reclaimed before
            live = {n.id for n in run.inventory.live_nodes()}
            gone = {
                i
                for a in run.actions
                if a.kind is ActionKind.TERMINATE and run.results.get(a.id, _NOT_RUN).status == "done"
                for i in a.node_ids
            }
            self.store.set_state("at_risk", sorted((at_risk & live) - gone))
        shortfall: Counter[str] = Counter()
        for action in unresolved:
            if action.kind is ActionKind.LAUNCH:
                shortfall[action.run or action.target] += _short(run, action, fallback.covered)
        blocked = self._blocked_gangs(run, now) if self.config.apply else {}
        summary = {
            "applied": self.config.apply,
            "actions": [a.describe() for a in run.actions],
            "failed": [run.results[a.id].message for a in run.failed()],
            "shortfall": dict(shortfall),
            "blocked": blocked,
        }
        self.store.finish_cycle(cycle, "failed" if unresolved else "done", summary)
        self._pool_metrics(run)
        self._commitment_metrics(plan, run, now)
        self.metrics.shortfall(shortfall)
        if shortfall:
            short = ", ".join(f"{pool} {nodes}" for pool, nodes in sorted(shortfall.items()))
            log.warning("shortfall after fallbacks: %s nodes", short)
            self.store.record_event("shortfall", f"nodes short: {short}", at=now, data=dict(shortfall))
        if unresolved:
            kinds = Counter(run.results[a.id].error_kind or run.results[a.id].status for a in unresolved)
            raise CycleFailed(
                f"{len(unresolved)} of {len(run.actions)} actions failed or were skipped "
                f"({', '.join(f'{k} x{n}' for k, n in sorted(kinds.items()))})"
                + (f"; nodes short: {short}" if shortfall else "")
                + "".join(
                    f"; gang {gang} blocked for {cycles} cycles" for gang, cycles in sorted(blocked.items())
                ),
                dict(shortfall),
            )
        return run

    def _buy_blocks(self, plan: Plan, now: datetime) -> None:
        """The plan's Capacity Blocks (``planner.operations.capacity_blocks.buy_planned_blocks``), bought
        only with ``apply`` and ``block_max_usd``. A purchase is an event; so is an offer over the cap, a
        block not bought for want of a cap, and a refusal, once per run and offer (not every cycle). A
        failure here never stops the cycle: the gang waits for its block, and the next cycle tries again."""
        from models.tiers import Tier
        from planner.operations.capacity_blocks import buy_planned_blocks
        from providers.base import ProviderError

        if not supports(self.provider, Capability.CAPACITY_BLOCKS) or not any(
            t.tier == Tier.CAPACITY_BLOCK for t in plan.document.training
        ):
            return
        cap = self.config.block_max_usd
        try:
            decisions = buy_planned_blocks(
                plan, self.provider, now, max_usd=cap, apply=self.config.apply and cap is not None
            )
        except ProviderError as exc:
            log.warning("capacity blocks not read: %s", exc)
            self.store.record_event("capacity-block-failed", f"capacity blocks not read: {exc}", at=now)
            return
        said: dict[str, str] = self.store.get_state(_BLOCKS_KEY) or {}
        kinds = {
            "bought": "capacity-block-bought",
            "over-cap": "capacity-block-over-cap",
            "would-buy": "capacity-block-not-bought",
            "failed": "capacity-block-failed",
        }
        for d in decisions:
            kind = kinds.get(d.status)
            key = f"{d.status}:{d.offer.id if d.offer else ''}"
            if kind is None or (said.get(d.run) == key and d.status != "bought"):
                continue
            said[d.run] = key
            data = {
                "run": d.run,
                "status": d.status,
                "offer": d.offer.id if d.offer else None,
                "upfront_usd": d.offer.upfront_usd if d.offer else None,
                "max_usd": cap,
                "plan_fee_usd": d.plan_fee_usd,
                "reservation": (d.reservation.id or d.reservation.name) if d.reservation else None,
            }
            self.store.record_event(kind, f"{d.run}: {d.message}", at=now, data=data)
        self.store.set_state(_BLOCKS_KEY, said)

    def _blocked_gangs(self, run: Provisioning, now: datetime) -> dict[str, int]:
        """Gangs whose placement group failed in this cycle and the cycles before it in a row: run ->
        cycles. A gang never launches outside its group (it would train slowly), so its launch is skipped
        every cycle; from the second cycle in a row a ``gang-blocked`` event says so, with the count, so a
        group the cloud keeps refusing is seen rather than retried silently forever."""
        failed = {
            a.run: run.results[a.id]
            for a in run.actions
            if a.kind is ActionKind.CREATE_PLACEMENT_GROUP
            and a.run
            and run.results.get(a.id, _NOT_RUN).status == "failed"
        }
        before: dict[str, int] = self.store.get_state(_BLOCKED_KEY) or {}
        counts = {gang: before.get(gang, 0) + 1 for gang in sorted(failed)}
        self.store.set_state(_BLOCKED_KEY, counts)
        for gang, cycles in counts.items():
            if cycles < 2:
                continue
            result = failed[gang]
            message = (
                f"gang {gang} blocked for {cycles} cycles: its placement group failed each time "
                f"({result.error_kind}: {result.message}); it does not launch outside its group"
            )
            log.warning("%s", message)
            data = {"run": gang, "cycles": cycles, "error": result.error_kind}
            self.store.record_event("gang-blocked", message, at=now, data=data)
        return {gang: cycles for gang, cycles in counts.items() if cycles >= 2}

    def watch_interruptions(self, now: datetime) -> list[str]:
        """New notices (``node:kind``) recorded, the checkpoint hook called for an affected run, and a
        reconcile at once, so capacity is replaced within this cycle: a pool node noticed is at risk (its
        replacement launches now, it goes once the pool runs without it), a node already taken leaves its
        pool or gang short. A gang's node that a warning gives time (EC2's two minutes) still runs and is
        not replaced alone (its gang would have a node too many); its deadline is kept, and the first
        watch after it reconciles again, so the gang is made whole then rather than at the next scheduled
        reconcile."""
        plan = self.current_plan()
        if plan is None:
            return []
        seen = set(self.store.get_state("seen_interruptions") or [])
        at_risk = set(self.store.get_state("at_risk") or [])
        # gang nodes a notice gave time, by the deadline the cloud takes them at
        reclaims: dict[str, str] = dict(self.store.get_state("reclaims") or {})
        fresh = []
        checkpointed: set[str] = set()
        for notice in self.provider.interruptions(plan_id_of(plan.document)):
            key = f"{notice.node_id}:{notice.kind}"
            if key in seen:
                continue
            seen.add(key)
            fresh.append(key)
            self.metrics.interruption(notice.kind)
            data = {
                "node": notice.node_id,
                "pool": notice.pool,
                "run": notice.run,
                "kind": notice.kind,
                "deadline": notice.deadline.isoformat() if notice.deadline else None,
            }
            self.store.record_event("interruption", f"{notice.kind} of {notice.node_id}", at=now, data=data)
            if notice.run and self.config.checkpoint_hook is not None and notice.run not in checkpointed:
                checkpointed.add(notice.run)  # one checkpoint per run, however many of its nodes go
                self._checkpoint(notice.run, notice.node_id, notice.deadline)
            if notice.run is None:
                # a pool node the cloud takes (or may soon): its replacement launches in this cycle, and
                # it goes once the pool runs without it
                at_risk.add(notice.node_id)
            elif notice.deadline is not None and _utc(notice.deadline) > now:
                reclaims[notice.node_id] = _utc(notice.deadline).isoformat()
        due = sorted(n for n, d in reclaims.items() if datetime.fromisoformat(d) <= now)
        for node in due:
            del reclaims[node]
        if due:
            log.info("the notice of %s ran out: reconciling for its gang", ", ".join(due))
        # the newest notices are enough to tell a new one from one seen already (a reclaimed node's id
        # never comes back), and the state stays small over months
        kept = [*[k for k in self.store.get_state("seen_interruptions") or [] if k in seen], *fresh]
        self.store.set_state("seen_interruptions", kept[-_SEEN_KEPT:])
        self.store.set_state("at_risk", sorted(at_risk))
        self.store.set_state("reclaims", reclaims)
        if (fresh or due) and self.config.apply:
            self.run("reconcile", now)  # replace the capacity within this cycle (a failure is its own)
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
        horizon = plan.document.horizon
        end = horizon.start + timedelta(hours=horizon.hours)
        if now <= end <= now + warn:
            days = (end - now).total_seconds() / 86400
            message = (
                f"the plan's horizon ends {end:%Y-%m-%d %H:%M}Z, in {days:.0f} days: past it the daemon "
                f"has no plan to hold; move the scenario's horizon on (replan)"
            )
            log.warning(message)
            self.store.record_event("horizon-end", message, at=now, data={"end": end.isoformat()})
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

    def _fall_back(self, plan: Plan, run: Provisioning, cycle: int) -> _Fallback:
        """Pool launches the cloud could not fill (insufficient capacity) get nodes elsewhere, in the order
        the plan allows: the nodes already standing in for the pool count first (a stock-out that lasts
        is not made up twice), then :func:`fallback_options` one after the other while nodes are short.
        Every fallback node carries ``gpuplan-stands-in: <pool>``, so the reconcile lets it go only
        once the pool has its own nodes again. Gangs are not moved: a short gang is a shortfall."""
        from planner.operations.daemon.journal import apply_journaled

        result = _Fallback()
        standing = Counter(
            n.tags[TAG_STANDS_IN] for n in run.inventory.live_nodes() if n.tags.get(TAG_STANDS_IN)
        )
        short: dict[int, int] = {}
        options: dict[int, list[tuple[str, CapacityType]]] = {}
        for action in run.failed():
            made = run.results[action.id]
            if (
                action.kind is ActionKind.LAUNCH
                and action.run is None
                and action.stands_in is None
                and made.error_kind == InsufficientCapacity.kind
                and action.offering is not None
                and action.capacity is not None
            ):
                missing = action.count - len(made.made)
                held = min(missing, standing[action.target])  # standing in already, from an earlier cycle
                standing[action.target] -= held
                result.covered[action.id] = held
                if missing > held:
                    short[action.id] = missing - held
                    options[action.id] = fallback_options(plan, action.offering, action.capacity)
        originals = {a.id: a for a in run.actions}
        while short:
            round_: list[Action] = []
            for original_id, missing in sorted(short.items()):
                if not options[original_id]:
                    continue
                offering, capacity = options[original_id].pop(0)
                original = originals[original_id]
                fallback = Action(
                    id=len(run.actions) + len(round_) + 1,
                    kind=ActionKind.LAUNCH,
                    target=pool_name(offering, capacity),
                    offering=offering,
                    capacity=capacity,
                    count=missing,
                    token=client_token(original.token, "fallback", offering, str(capacity)),
                    stands_in=original.target,
                    reason=f"{original.target} is short {missing} nodes: {capacity} {offering} instead",
                )
                result.stands_in[fallback.id] = original_id
                round_.append(fallback)
            if not round_:
                break
            log.warning("capacity fallback: %s", "; ".join(a.describe() for a in round_))
            extra = Provisioning(run.provider, run.desired, run.inventory, round_, [])
            apply_journaled(extra, self.provider, self.store, cycle, on_result=self._count)
            run.actions.extend(round_)
            run.results.update(extra.results)
            for action in round_:
                original_id = result.stands_in[action.id]
                got = len(run.results[action.id].made)
                result.covered[original_id] += got
                short[original_id] -= got
                if short[original_id] <= 0 or not options[original_id]:
                    del short[original_id]
        return result

    def _commitment_metrics(self, plan: Plan, run: Provisioning, now: datetime) -> None:
        """Each commitment's use, planned beside actual; a warning (log and event ``reservation-idle``, once
        while it lasts) for a reservation paid idle while on-demand nodes of its offering run outside it."""
        from planner.operations.daemon.commitment_use import commitment_use, idle_reservations

        used = commitment_use(plan.document, plan.allocations, run.inventory, now)
        self.metrics.commitment_use({u.name: (u.planned, u.actual) for u in used})
        idle = idle_reservations(run.inventory)
        self.metrics.idle_reservations({r.name: r.held - r.running_in_it for r in idle})
        known = set(self.store.get_state("idle_reservations") or [])
        for reservation in idle:
            if reservation.name in known:
                continue
            log.warning("%s", reservation.describe())
            data = {
                "reservation": reservation.name,
                "offering": reservation.offering,
                "held": reservation.held,
                "running_in_it": reservation.running_in_it,
                "on_demand_outside": reservation.on_demand_outside,
            }
            self.store.record_event("reservation-idle", reservation.describe(), at=now, data=data)
        self.store.set_state("idle_reservations", sorted(r.name for r in idle))

    def _pool_metrics(self, run: Provisioning) -> None:
        live = run.inventory.live_nodes()
        for pool in run.desired.pools:
            actual = sum(1 for n in live if n.pool == pool.pool and n.run is None)
            self.metrics.pool_nodes(pool.pool, str(pool.capacity), pool.nodes, actual)

    def _checkpoint(self, run: str, node: str, deadline: datetime | None) -> None:
        """Call the checkpoint hook for ``run`` at once, bounded by the time the notice leaves (a hook
        still running when the cloud takes the node saved nothing), and record when it finished against
        the deadline (event ``checkpoint``). A notice seen after its deadline (a control plane read late,
        a watch that ran late) still calls the hook, with a second to do what it can, and is recorded as
        not in time: it never passes for a checkpoint that beat the cloud."""
        hook = self.config.checkpoint_hook
        assert hook is not None
        called = self._clock()
        timeout = hook.timeout_seconds
        if deadline is not None:
            timeout = max(1.0, min(timeout, (deadline - called).total_seconds()))
        until = deadline.isoformat() if deadline is not None else ""
        error = ""
        try:
            if hook.command is not None:
                parts = {"{run}": run, "{node}": node, "{deadline}": until}
                command = [_fill(part, parts) for part in hook.command]
                subprocess.run(command, check=True, timeout=timeout, capture_output=True)
            elif hook.webhook is not None:
                document = {"run": run, "node": node, "event": "interruption", "deadline": until or None}
                body = json.dumps(document).encode()
                request = urllib.request.Request(hook.webhook, body, {"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=timeout):
                    pass
            log.info("checkpoint hook called for %s (node %s)", run, node)
        except (OSError, subprocess.SubprocessError) as exc:
            error = str(exc)
            log.warning("checkpoint hook for %s failed: %s", run, exc)
        finished = self._clock()
        in_time = error == "" and (deadline is None or finished <= deadline)
        left = ""
        if deadline is not None:
            margin = (deadline - finished).total_seconds()
            left = (
                f" {margin:.0f} s before the notice ran out"
                if margin >= 0
                else f" {-margin:.0f} s after the notice ran out"
            )
        if deadline is not None and called > deadline:
            log.warning(
                "checkpoint hook for %s called %.0f s after the notice ran out (deadline %s)",
                run,
                (called - deadline).total_seconds(),
                until,
            )
        self.store.record_event(
            "checkpoint",
            f"{run}: checkpoint hook {'done' if in_time else 'NOT done in time'}{left}",
            at=finished,
            data={
                "run": run,
                "node": node,
                "called": called.isoformat(),
                "finished": finished.isoformat(),
                "deadline": until or None,
                "in_time": in_time,
                "error": error or None,
            },
        )


@dataclass
class _Fallback:
    """What a cycle's capacity fallback did: launch id -> nodes made up for it (by nodes standing in
    already and by this cycle's fallbacks), and each fallback launch's id -> the launch it stands in for."""

    covered: Counter[int] = field(default_factory=Counter)
    stands_in: dict[int, int] = field(default_factory=dict)


def fallback_options(plan: Plan, offering: str, capacity: CapacityType) -> list[tuple[str, CapacityType]]:
    """Where the nodes of a pool on (``offering``, ``capacity``) may go when the cloud has none, cheapest
    first by the plan's prices: the plan's other offerings of the same cloud, GPU model and node shape
    (so every workload the pool serves fits them); for a spot pool, their spot capacity and on-demand
    capacity of the offering itself too. On-demand pools never fall back to spot: they may serve
    latency-critical inference, which the plan keeps off spot."""
    offerings = plan.document.offerings
    record = offerings[offering]
    cloud = offering.split(":", 1)[0]
    alike = [
        o
        for o, r in sorted(offerings.items())
        if o != offering
        and o.split(":", 1)[0] == cloud
        and r.gpu_model == record.gpu_model
        and r.gpus_per_node == record.gpus_per_node
    ]
    priced: list[tuple[float, str, CapacityType]] = []
    for o in [offering, *alike]:
        r = offerings[o]
        if capacity is CapacityType.SPOT and o != offering and r.spot_usd_h:
            priced.append((r.spot_usd_h, o, CapacityType.SPOT))
        if (capacity is CapacityType.SPOT or o != offering) and r.on_demand_usd_h:
            priced.append((r.on_demand_usd_h, o, CapacityType.ON_DEMAND))
    return [(o, c) for _usd, o, c in sorted(priced, key=lambda item: (item[0], item[1], str(item[2])))]


def _unresolved(run: Provisioning, fallback: _Fallback) -> list[Action]:
    """The actions that leave the fleet off the plan: failed ones not made up by the fallback, and the
    ones skipped because such a one failed. A fallback's own failure is its launch's (counted there); an
    action that waits on a launch the fallback made up (the stand-ins' terminate) is not a failure: it
    runs once the pool's own capacity is back."""
    bad: set[int] = set()
    for action in run.actions:
        outcome = run.results.get(action.id)
        if outcome is None or action.id in fallback.stands_in:
            continue
        if outcome.status == "failed":
            if action.kind is ActionKind.CREATE_RESERVATION and _launched_without(run, action):
                continue  # its gang runs without it (provision's fallback): nothing is short
            if action.kind is not ActionKind.LAUNCH or _short(run, action, fallback.covered):
                bad.add(action.id)
        elif outcome.status == "skipped" and any(d in bad for d in action.depends_on):
            bad.add(action.id)
    return [a for a in run.actions if a.id in bad]


def _fill(text: str, values: Mapping[str, str]) -> str:
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def _launched_without(run: Provisioning, reservation: Action) -> bool:
    """Whether every launch that needed ``reservation`` ran without it when it failed."""
    needing = [a for a in run.actions if reservation.id in a.depends_on and a.kind is ActionKind.LAUNCH]
    return bool(needing) and all(run.results.get(a.id, _NOT_RUN).status == "done" for a in needing)


def _short(run: Provisioning, action: Action, covered: Mapping[int, int]) -> int:
    """Nodes a failed or skipped launch left short, after what its fallback made (0: fully made up)."""
    result = run.results[action.id]
    return max(0, action.count - len(result.made) - covered.get(action.id, 0))


def _moved_prices(plan: Plan, live: dict[str, float], share: float) -> list[str]:
    """Plan offerings whose live spot price differs from the planned one by more than ``share``."""
    moved = []
    for offering, record in sorted(plan.document.offerings.items()):
        planned = record.spot_usd_h
        if planned and offering in live and abs(live[offering] - planned) > share * planned:
            moved.append(f"{offering} {planned:.2f} -> {live[offering]:.2f}")
    return moved


def input_files(scenario: Path) -> list[Path]:
    """The files a plan of ``scenario`` reads: the scenario, its catalog CSV, its pricing overlay and its
    demand CSVs; not every CSV beside it (issue 42: the daemon's own plans/ written there read as changed
    inputs, and an untouched scenario was planned again). A scenario that does not load is only itself:
    its bytes changed, and the re-plan says what is wrong with it."""
    from models import scenario as scenario_io
    from models.scenario import CsvSeries

    try:
        loaded = scenario_io.load(scenario)
    except GpuplanError:
        return [scenario]
    named = []
    if loaded.catalog != "embedded":
        named.append(loaded.catalog)
    if isinstance(loaded.pricing, str):
        named.append(loaded.pricing)
    named += [s.replicas.csv for s in loaded.inference if isinstance(s.replicas, CsvSeries)]
    files = [scenario]
    for name in named:
        path = Path(name)
        files.append(path if path.is_absolute() else scenario.parent / path)
    return files


def inputs_digests(scenario: Path) -> dict[str, str]:
    """SHA-256 of each of :func:`input_files`, by its path relative to the scenario's directory (else
    absolute); ``missing`` for one that cannot be read (the re-plan then says why)."""
    digests = {}
    for path in input_files(scenario):
        try:
            name = str(path.relative_to(scenario.parent))
        except ValueError:
            name = str(path)
        try:
            digests[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digests[name] = "missing"
    return digests


def changed_inputs(before: Any, now: Mapping[str, str]) -> list[str]:
    """The input files whose digest differs from ``before`` (a file added or dropped counts), sorted;
    none when ``before`` is not a digest map (a store from before per-file digests: nothing to compare)."""
    if not isinstance(before, dict):
        return []
    return sorted(name for name in {*before, *now} if before.get(name) != now.get(name))


def _replan_progress(message: str) -> None:
    """A re-plan's progress (the planner's stage messages) as log lines."""
    log.info("re-plan: %s", message)


def plan_scenario(
    config: DaemonConfig,
    previous: Plan | None,
    now: datetime,
    live: dict[str, float],
    *,
    feeds: Sequence[ScenarioFeed] = (),
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Plan the scenario again: the live spot prices applied (``spot_price:OFFERING=x<live/catalog>``),
    what each of ``feeds`` adds (the portal's queued requests), and every commitment the previous plan
    bought by ``now`` held fixed; the new plan directory."""
    from models.files import atomic_directory
    from models.held import bought_commitments, bought_savings_plans
    from models.inputs import load_inputs
    from models.variation import parse_all
    from planner.planning.optimize import SolveSettings, optimize

    base = load_inputs(config.scenario_path)
    catalog = {o.id: o for o in base.catalog}
    changes = []
    for offering, usd in sorted(live.items()):
        listed = catalog[offering].spot_usd_h if offering in catalog else None
        if listed:
            changes.append(f"spot_price:{offering}=x{usd / listed:.6f}")
    inputs = load_inputs(config.scenario_path, parse_all(changes, "live spot prices")) if changes else base
    scenario = inputs.scenario
    for feed in feeds:  # the portal's queued requests (issue 18)
        scenario = feed(config, scenario, inputs.catalog)
    if previous is not None:  # what the previous plan bought and has started: held from now on
        bought = bought_commitments(previous, by=now)
        if bought:
            scenario = scenario.model_copy(update={"commitments": [*scenario.commitments, *bought]})
        plans = bought_savings_plans(previous, by=now)
        if plans:
            scenario = scenario.model_copy(update={"savings_plans": [*scenario.savings_plans, *plans]})
    settings = SolveSettings(time_limit=config.plan_time_limit)
    plan = optimize(scenario, inputs.catalog, inputs.base_dir, settings, progress)
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
