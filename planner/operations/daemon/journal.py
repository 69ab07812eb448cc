"""Crash-safe apply: every action journaled before it is sent, and resumed after a crash by looking.

:func:`apply_journaled` is ``planner.operations.provision.apply`` with the journal around each action: the
entry is written ``pending`` and committed just before the call, and finished with its result just after, so a
process killed at any point leaves either nothing (the action was not sent), a ``pending`` entry (sent or not:
in doubt), or a finished one. An action whose key is journaled ``done`` is not sent again while what it
made is in effect; once that is gone (a gang or pool lost within its launch hour, a placement group or
reservation deleted outside gpuplan), reconcile asks for the same intent again and it is sent as its next
*attempt* (``Action.retried``): a token of its own, so the cloud makes it anew instead of answering with
the first attempt's (EC2 ClientToken, Compute Engine requestId).

:func:`resume` settles the in-doubt entries before each reconcile that applies: it looks each one's
resources up in the provider's inventory (by the tags, names and counts the action gave them) and marks
it done when they are there; only when they are not is that one action sent again, with its same client
token, which the cloud dedupes by. Nothing is ever re-sent blindly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from models.actions import Action, ActionKind, ActionResult
from models.naming import pool_name
from planner.operations.daemon.store import JournalEntry, Store, action_key
from planner.operations.provision import SETTLE, DoneCreate, Provisioning, apply, next_attempt
from planner.outputs.desired import DesiredState
from providers.base import Inventory, Provider

__all__ = ["SETTLE", "Resumed", "apply_journaled", "resume"]

log = logging.getLogger("gpuplan.daemon.journal")


def apply_journaled(
    run: Provisioning,
    provider: Provider,
    store: Store,
    cycle_id: int,
    *,
    on_result: Callable[[Action, ActionResult], None] | None = None,
) -> dict[int, ActionResult]:
    """Execute ``run.actions`` as :func:`planner.operations.provision.apply` does, journaled; the result of
    each.

    An action whose key is ``done`` in the journal keeps that earlier result and is not sent (nor given
    to ``on_result``: nothing happened to it in this cycle); the actions that depend on it see it done.
    An action skipped because one it needs failed is journaled ``skipped``. If the store cannot be
    written before an action, the exception stops the apply there: nothing is ever sent unjournaled."""
    plan_id = run.desired.plan_id
    run.actions[:] = [_attempt(a, store, plan_id, run.inventory) for a in run.actions]
    keys = {a.id: action_key(a) for a in run.actions}
    done = store.done_entries(plan_id, keys.values())
    earlier: dict[int, ActionResult] = {}
    for action in run.actions:
        entry = done.get(keys[action.id])
        if entry is not None:
            earlier[action.id] = entry.result or ActionResult(status="done", message="journaled done")
    todo = [a for a in run.actions if a.id not in earlier]
    if earlier:
        log.info(
            "%d of %d actions are journaled done already: not sent again", len(earlier), len(run.actions)
        )
    # the ids are kept: the actions left out are in ``results`` already, so dependencies on them hold
    part = Provisioning(
        run.provider, run.desired, run.inventory, todo, run.notes, results=dict(earlier), refused=run.refused
    )
    entries: dict[int, JournalEntry] = {}

    def before(action: Action) -> None:
        entry = store.journal(cycle_id, plan_id, action)
        if entry is None:  # done by another process since the check above: the token dedupes it
            log.warning(
                "#%d %s was journaled done meanwhile; sent with its token", action.id, keys[action.id]
            )
            return
        entries[action.id] = entry

    def finished(action: Action, result: ActionResult) -> None:
        entry = entries.get(action.id)
        if entry is None and result.status == "skipped":
            entry = store.journal(cycle_id, plan_id, action)
        if entry is not None:
            store.finish(entry.id, result)
        if on_result is not None:
            on_result(action, result)

    apply(part, provider, on_result=finished, before=before)
    run.results.update(part.results)
    return {a.id: run.results[a.id] for a in run.actions if a.id in run.results}


def _attempt(action: Action, store: Store, plan_id: str, inventory: Inventory) -> Action:
    """``action`` as the attempt to send now, by the rule provision without the daemon follows too
    (``planner.operations.provision.next_attempt``), over the creates the journal holds done."""

    def done(key: str) -> DoneCreate | None:
        entry = store.done_entries(plan_id, [key]).get(key)
        if entry is None:
            return None
        made = entry.result.made if entry.result is not None else ()
        return DoneCreate(ActionKind(entry.kind), made, entry.updated)

    return next_attempt(action, done, inventory, store.now())


@dataclass(frozen=True)
class Resumed:
    """What resume did with one pending entry: ``found`` its resources (marked done without a call) or
    ``re-sent`` it with its token; ``result`` is what the journal now holds."""

    entry: JournalEntry
    outcome: Literal["found", "re-sent"]
    result: ActionResult
    detail: str = ""


def resume(store: Store, provider: Provider, plan_id: str) -> list[Resumed]:
    """Settle the journal of ``plan_id`` after a crash (run it when the daemon starts, before a cycle):
    cycles left running are marked crashed, and every pending entry is found in the inventory or sent
    again with its same token. What was found and what was re-sent, oldest entry first."""
    crashed = store.mark_crashed_cycles()
    pending = store.pending(plan_id)
    if crashed or pending:
        log.info("resuming %s: %d crashed cycles, %d pending actions", plan_id, crashed, len(pending))
    report: list[Resumed] = []
    inventory = provider.inventory(plan_id) if pending else Inventory()
    for entry in pending:
        found, detail = _found(entry.action, inventory)
        if found:
            result = ActionResult(status="done", message=f"found on resume: {detail}")
            store.finish(entry.id, result)
            report.append(Resumed(entry, "found", result, detail))
            log.info("journal #%d %s: %s", entry.id, entry.kind, detail)
            continue
        result = _resend(entry, provider, inventory, plan_id)
        store.finish(entry.id, result)
        inventory = provider.inventory(plan_id)  # what the re-send made counts for the next entry
        report.append(Resumed(entry, "re-sent", result, detail))
        log.info("journal #%d %s re-sent with its token: %s", entry.id, entry.kind, result.status)
    if crashed or report:
        settled = sum(r.outcome == "found" for r in report)
        store.record_event(
            "resume",
            f"{plan_id}: {crashed} crashed cycles; {settled} pending actions found done, "
            f"{len(report) - settled} re-sent",
            data={
                "plan_id": plan_id,
                "crashed_cycles": crashed,
                "entries": [
                    {"id": r.entry.id, "outcome": r.outcome, "status": r.result.status} for r in report
                ],
            },
        )
    return report


def _found(action: Action, inventory: Inventory) -> tuple[bool, str]:
    """Whether ``action``'s effect is in ``inventory`` already, and what was seen."""
    live = inventory.live_nodes()
    match action.kind:
        case ActionKind.LAUNCH:
            if action.run:
                have = sum(1 for n in live if n.run == action.run)
                what = f"gang {action.run}"
            else:
                assert action.offering is not None and action.capacity is not None
                pool = pool_name(action.offering, action.capacity)
                have = sum(1 for n in live if n.pool == pool and not n.run)
                what = f"pool {pool}"
            target = action.target_nodes if action.target_nodes is not None else action.count
            return have >= target, f"{what} holds {have} live nodes of the {target} the launch makes"
        case ActionKind.CREATE_PLACEMENT_GROUP:
            there = any(g.name == action.target for g in inventory.placement_groups)
            return there, f"placement group {action.target} {'exists' if there else 'is missing'}"
        case ActionKind.CREATE_RESERVATION:
            there = any(r.name == action.target for r in inventory.reservations)
            return there, f"reservation {action.target} {'exists' if there else 'is missing'}"
        case ActionKind.TERMINATE:
            left = sorted({n.id for n in live} & set(action.node_ids))
            return not left, f"{len(left)} of its {len(action.node_ids)} nodes are live"
        case ActionKind.RELEASE_RESERVATION:
            there = any(r.name == action.target for r in inventory.reservations)
            return not there, f"reservation {action.target} {'is still there' if there else 'is gone'}"
        case ActionKind.DELETE_PLACEMENT_GROUP:
            there = any(g.name == action.target for g in inventory.placement_groups)
            return not there, f"placement group {action.target} {'is still there' if there else 'is gone'}"
    raise AssertionError(action.kind)  # pragma: no cover


def _resend(entry: JournalEntry, provider: Provider, inventory: Inventory, plan_id: str) -> ActionResult:
    """Send ``entry``'s one action again, its token unchanged, through ``apply`` (same error mapping).
    Its dependencies were met when it was first sent, so they are not checked again; a terminate asks
    only for the nodes still live (the others are gone, which is what it wanted)."""
    action = entry.action.model_copy(update={"depends_on": ()})
    if action.kind is ActionKind.TERMINATE:
        live = {n.id for n in inventory.live_nodes()}
        ids = tuple(i for i in action.node_ids if i in live)
        action = action.model_copy(update={"node_ids": ids, "count": len(ids)})
    desired = DesiredState(
        plan_id=plan_id,
        at=datetime.now(UTC),
        period=0,
        pools=(),
        gangs=(),
        ended_runs=(),
        purchases=(),
        notes=(),
    )
    single = Provisioning(provider.cloud, desired, inventory, [action], [])
    return apply(single, provider)[action.id]
