"""Provision a plan: read the fleet, reconcile it with the plan, and (only when asked) act.

:func:`prepare` asks the provider for its inventory and returns the action list of
``planner.operations.reconcile``, with the launches the account's quotas cannot take refused before
anything is made (``planner.operations.quotas``); :func:`apply` executes it in order. A failed action
does not stop the run: the actions that depend on it are skipped, every other one still runs, and each
result says what happened, so a summary can name the pool that is short and why. Two exceptions keep
gangs from harm: a gang whose reservation failed launches without it (and, when the cloud has no
capacity for that either, its result names the Capacity Blocks offered), each step only where the plan's
``fallback`` for the run allows it (a refused step is skipped and named), and a gang launch that failed
after making part of its nodes terminates them (all or nothing). Every call is logged
(``gpuplan.provision``) with names and counts only: nothing from the provider's settings or the
environment is ever put in a message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final

from models.actions import Action, ActionKind, ActionPlan, ActionResult
from models.naming import managed_tags, pool_name
from models.plan import Plan
from models.scenario import FALLBACKS
from models.wording import plural
from planner.operations.capacity_blocks import CAPACITY_BLOCK_MAX_NODES, block_duration_hours
from planner.operations.quotas import check_quotas, quota_keys
from planner.operations.reconcile import (
    DEFAULT_BUDGET,
    DisruptionBudget,
    HeldBack,
    leftover_notes,
    reconcile,
    terraform_notes,
)
from planner.outputs.desired import DEFAULT_LEAD_HOURS, DesiredState, desired_state, region_of
from providers.base import (
    Capability,
    CapacityReservation,
    CapacityType,
    Inventory,
    LaunchSpec,
    Node,
    PlacementGroup,
    PlacementGroupSpec,
    Provider,
    ProviderError,
    ReservationSpec,
    supports,
)

__all__ = [
    "CAPACITY_KINDS",
    "Provisioning",
    "apply",
    "capacity_actions",
    "launch_spec",
    "placement_group_spec",
    "prepare",
    "reservation_spec",
]

log = logging.getLogger("gpuplan.provision")


@dataclass
class Provisioning:
    """One run of provision: what the plan asks, what the provider has, and the actions between them."""

    provider: str
    desired: DesiredState
    inventory: Inventory
    actions: list[Action]
    notes: list[str]
    results: dict[int, ActionResult] = field(default_factory=dict)
    #: pools whose terminations the disruption budget kept for later cycles
    held_back: list[HeldBack] = field(default_factory=list)
    #: actions not to send, and why (a launch beyond a quota of the account: ``planner.operations.quotas``)
    refused: dict[int, str] = field(default_factory=dict)

    @property
    def applied(self) -> bool:
        return bool(self.results)

    def failed(self) -> list[Action]:
        return [a for a in self.actions if self.results.get(a.id, _PENDING).status == "failed"]

    def skipped(self) -> list[Action]:
        return [a for a in self.actions if self.results.get(a.id, _PENDING).status == "skipped"]

    def document(self) -> ActionPlan:
        inventory = self.inventory
        return ActionPlan(
            plan_id=self.desired.plan_id,
            provider=self.provider,
            at=self.desired.at,
            period=self.desired.period,
            applied=self.applied,
            actions=tuple(self.actions),
            results=self.results,
            recommended_purchases=self.desired.purchases,
            notes=tuple(self.notes),
            inventory={
                "nodes": len(inventory.live_nodes()),
                "placement_groups": len(inventory.placement_groups),
                "reservations": len(inventory.reservations),
            },
        )


_PENDING = ActionResult(status="skipped", message="not run")


def prepare(
    plan: Plan,
    provider: Provider,
    at: datetime,
    *,
    lead_hours: float = DEFAULT_LEAD_HOURS,
    retire_finished_runs: bool = False,
    launch_batch: int | None = None,
    at_risk: frozenset[str] = frozenset(),
    budget: DisruptionBudget | None = DEFAULT_BUDGET,
    capacity_only: bool = False,
) -> Provisioning:
    """The desired state at ``at``, the provider's inventory, and the actions between them (nothing done);
    ``at_risk`` nodes are replaced before they go, and each pool loses at most ``budget`` of its nodes
    (``planner.operations.reconcile.reconcile``; None: no limit). The account's quotas are read for the
    launches, and those that exceed one are refused before anything is created
    (``planner.operations.quotas``). ``capacity_only``: placement groups and reservations only, no node
    launched or terminated (an autoscaler launches them: ``gpuplan karpenter``)."""
    desired = desired_state(
        plan,
        at,
        handles=provider.handles,
        lead_hours=lead_hours,
        reserve_gangs=supports(provider, Capability.GANG_RESERVATIONS),
    )
    log.info("reading the inventory of %s on %s", desired.plan_id, provider.cloud)
    inventory = provider.inventory(desired.plan_id)
    held_back: list[HeldBack] = []
    actions = reconcile(
        desired,
        inventory,
        retire_finished_runs=retire_finished_runs,
        launch_batch=launch_batch,
        at_risk=at_risk,
        budget=budget,
        held_back=held_back,
    )
    notes = [*desired.notes, *(h.describe() for h in held_back), *terraform_notes(desired, inventory)]
    if capacity_only:
        actions, left = capacity_actions(actions)
        if left:
            notes.append(
                f"capacity only: {left} node launch(es) and termination(s) left to the autoscaler "
                "(gpuplan karpenter writes its NodePools)"
            )
    if not retire_finished_runs:
        notes += leftover_notes(desired, inventory)
    for held in held_back:
        log.warning("disruption budget: %s", held.describe())
    refused: dict[int, str] = {}
    if keys := quota_keys(actions):
        try:
            checked = check_quotas(actions, provider.quotas(keys))
        except ProviderError as exc:  # reading quotas may need a permission launching does not
            notes.append(f"quotas not checked before launch ({exc.kind}: {exc})")
            log.warning("quotas not checked: %s", exc)
        else:
            refused = checked.refused
            for shortfall in checked.shortfalls:
                notes.append(shortfall.describe())
                log.warning("%s", shortfall.describe())
    return Provisioning(
        provider.cloud, desired, inventory, actions, notes, held_back=held_back, refused=refused
    )


#: What ``capacity_only`` keeps: the capacity an autoscaler launches into, never a node.
CAPACITY_KINDS: Final = frozenset(
    {
        ActionKind.CREATE_PLACEMENT_GROUP,
        ActionKind.CREATE_RESERVATION,
        ActionKind.RELEASE_RESERVATION,
        ActionKind.DELETE_PLACEMENT_GROUP,
    }
)


def capacity_actions(actions: list[Action]) -> tuple[list[Action], int]:
    """The placement-group and reservation actions of ``actions``, numbered again from 1 (an action's id is
    its position) with their dependencies on kept actions only; and how many node actions were left out."""
    kept = [a for a in actions if a.kind in CAPACITY_KINDS]
    renumber = {a.id: i for i, a in enumerate(kept, start=1)}
    numbered = [
        a.model_copy(
            update={
                "id": renumber[a.id],
                "depends_on": tuple(renumber[d] for d in a.depends_on if d in renumber),
            }
        )
        for a in kept
    ]
    return numbered, len(actions) - len(kept)


def apply(
    run: Provisioning,
    provider: Provider,
    *,
    on_result: Callable[[Action, ActionResult], None] | None = None,
    before: Callable[[Action], None] | None = None,
) -> dict[int, ActionResult]:
    """Execute ``run.actions`` in order; the result of each (also stored in ``run.results``).

    ``before(action)`` runs just before an action is sent (not for one skipped): a journal records the
    intent there, so a crash between the call and its result leaves a trace to resume from."""
    nodes = {n.id: n for n in run.inventory.nodes}
    groups = {g.name: g for g in run.inventory.placement_groups}
    reservations = {r.name: r for r in run.inventory.reservations}
    plan_id = run.desired.plan_id
    by_id = {a.id: a for a in run.actions}
    for action in run.actions:
        blocking = [d for d in action.depends_on if run.results.get(d, _PENDING).status != "done"]
        refused = run.refused.get(action.id)
        fallback = _without_reservation(action, blocking, by_id, run.results)
        if refused is not None:
            result = ActionResult(status="failed", error_kind="quota-exceeded", message=refused)
            log.warning("#%d not sent: %s", action.id, refused)
        elif blocking and fallback is None:
            needs = ", ".join(f"#{d}" for d in blocking)
            message = f"needs {needs}, which did not succeed"
            if (refused_by := _refused_reservation(action, blocking, by_id, run.results)) is not None:
                message += _waits_for_reservation(action, refused_by, run.results[refused_by.id], provider)
            result = ActionResult(status="skipped", message=message)
        else:
            sent, why = fallback if fallback is not None else (action, "")
            log.info("#%d %s%s", action.id, sent.describe(), f" ({why})" if why else "")
            if before is not None:
                before(sent)
            result = _attempt(sent, provider, plan_id, nodes, groups, reservations)
            if why:
                result = _fell_back(result, why, sent, provider, by_id, blocking)
        run.results[action.id] = result
        if on_result is not None:
            on_result(action, result)
    return run.results


def _attempt(
    action: Action,
    provider: Provider,
    plan_id: str,
    nodes: dict[str, Node],
    groups: dict[str, PlacementGroup],
    reservations: dict[str, CapacityReservation],
) -> ActionResult:
    """Send one action; its result. A gang is all or nothing: nodes a failed gang launch made anyway
    are terminated in the same action (a pool keeps what it got, and says how short it is)."""
    try:
        made = _execute(action, provider, plan_id, nodes, groups, reservations)
    except ProviderError as exc:
        kept = tuple(n.id for n in exc.launched)
        message = _failure(action, exc)
        if kept and action.kind is ActionKind.LAUNCH and action.run is not None:
            message += _undo_partial_gang(action, exc, provider)
            kept = ()
        result = ActionResult(status="failed", error_kind=exc.kind, message=message, made=kept)
        log.warning("#%d failed: %s", action.id, result.message)
        return result
    except Exception as exc:  # a bug in an adapter: record it, keep going, report it loudly
        log.exception("#%d failed unexpectedly", action.id)
        return ActionResult(status="failed", error_kind="internal", message=f"{type(exc).__name__}: {exc}")
    return ActionResult(status="done", made=tuple(made))


def _undo_partial_gang(action: Action, exc: ProviderError, provider: Provider) -> str:
    """Terminate the nodes a failed gang launch made: a gang short of nodes trains nothing and bills
    for all it holds (5 of 16 p5 on demand: about $275 an hour). What the summary adds to the failure."""
    made = list(exc.launched)
    try:
        provider.terminate(made)
    except ProviderError as undo:
        log.error(
            "#%d: the %d nodes the failed gang made could not be terminated: %s", action.id, len(made), undo
        )
        ids = ", ".join(n.id for n in made)
        return f"; its {len(made)} nodes made anyway could NOT be terminated ({undo.kind}: {undo}): {ids}"
    log.warning(
        "#%d: terminated the %d nodes the failed gang launch made (all or nothing)", action.id, len(made)
    )
    return f"; the {len(made)} nodes it made anyway were terminated (a gang is all or nothing)"


def _refused_reservation(
    action: Action, blocking: list[int], by_id: dict[int, Action], results: dict[int, ActionResult]
) -> Action | None:
    """The failed reservation that is a gang launch's only unmet need (the cloud could not hold the gang
    in any zone it tried, or in any the plan allowed), or None."""
    if action.kind is not ActionKind.LAUNCH or not action.run or not action.reservation or not blocking:
        return None
    needs = [by_id[d] for d in blocking if d in by_id]
    if len(needs) != len(blocking) or any(
        n.kind is not ActionKind.CREATE_RESERVATION or results.get(n.id, _PENDING).status != "failed"
        for n in needs
    ):
        return None
    return needs[0]


def _without_reservation(
    action: Action, blocking: list[int], by_id: dict[int, Action], results: dict[int, ActionResult]
) -> tuple[Action, str] | None:
    """A gang launch whose only unmet need is its reservation, which failed, where the plan allows the
    gang to launch without one (``no-reservation`` in its fallback): the same launch without the
    reservation, and why. None otherwise (it waits, skipped, as every action whose need failed)."""
    refused = _refused_reservation(action, blocking, by_id, results)
    if refused is None or "no-reservation" not in action.fallbacks:
        return None
    failure = results[refused.id]
    sent = action.model_copy(
        update={"reservation": None, "depends_on": tuple(d for d in action.depends_on if d not in blocking)}
    )
    why = f"fallback: reservation {action.reservation} failed ({failure.error_kind}); launched without it"
    return sent, why


def _plan_refuses(action: Action) -> str:
    """The fallbacks the plan refuses the gang, in words ("" when it allows all)."""
    refused = [step for step in FALLBACKS if step not in action.fallbacks]
    return f" (the plan's fallback refuses {', '.join(refused)})" if refused else ""


def _waits_for_reservation(
    action: Action, reservation: Action, failure: ActionResult, provider: Provider
) -> str:
    """Why a gang whose reservation failed was not launched without it (the plan refuses that), and the
    step of the order after it: the Capacity Blocks offered, where the plan allows them."""
    message = (
        f": reservation {reservation.target} failed ({failure.error_kind}: {failure.message}); "
        f"no launch without it{_plan_refuses(action)}, the gang waits for its reservation"
    )
    blocks = "capacity-block" in action.fallbacks and supports(provider, Capability.CAPACITY_BLOCKS)
    if blocks and failure.error_kind == "insufficient-capacity":
        message += "; " + _block_offers(action, provider, [reservation])
    return message


def _fell_back(
    result: ActionResult,
    why: str,
    sent: Action,
    provider: Provider,
    by_id: dict[int, Action],
    blocking: list[int],
) -> ActionResult:
    """The result of a launch sent without its failed reservation, saying so. If the cloud has no
    capacity for it on demand either, the last step of the order is named: the Capacity Blocks the
    cloud offers for the gang (listing buys nothing; buying one stays a person's decision)."""
    if result.status == "done":
        running = f"{why}; {plural(len(result.made), 'node')} running{_plan_refuses(sent)}"
        return result.model_copy(update={"message": running})
    message = f"{why}, which failed too: {result.message}"
    if result.error_kind == "insufficient-capacity" and supports(provider, Capability.CAPACITY_BLOCKS):
        if "capacity-block" in sent.fallbacks:
            message += "; " + _block_offers(sent, provider, [by_id[d] for d in blocking])
        else:
            message += "; no Capacity Block listed"
    return result.model_copy(update={"message": message + _plan_refuses(sent)})


def _block_offers(action: Action, provider: Provider, needs: list[Action]) -> str:
    """The Capacity Blocks offered for ``action``'s gang from now to its reservation's end, in words."""
    assert action.offering is not None
    gang = f"{action.count} x {action.offering}"
    if action.count > CAPACITY_BLOCK_MAX_NODES:
        return f"no Capacity Block holds {gang} (at most {CAPACITY_BLOCK_MAX_NODES} instances per block)"
    ends = next((n.ends for n in needs if n.ends is not None), None)
    now = datetime.now(UTC)
    hours = block_duration_hours((ends - now).total_seconds() / 3600 if ends is not None else 24)
    if hours is None:
        return f"no Capacity Block is sold for {gang} until {ends:%Y-%m-%d %H:%M}Z (182 days at most)"
    try:
        offers = provider.capacity_block_offerings(
            action.offering, action.count, hours, now, now + timedelta(days=7)
        )
    except ProviderError as exc:
        return f"Capacity Blocks could not be listed ({exc.kind}: {exc})"
    if not offers:
        return f"no Capacity Block of {gang} for {hours} h is offered in the next 7 days"
    best = min(offers, key=lambda o: (o.start or now, o.upfront_usd))
    start = f"{best.start:%Y-%m-%d %H:%M}Z" if best.start else "now"
    return (
        f"{len(offers)} Capacity Blocks offered, the first {best.id} from {start} for {best.hours} h at "
        f"${best.upfront_usd:,.0f} upfront (buy one: gpuplan provision --buy-capacity-block ID --max-usd N)"
    )


def _execute(
    action: Action,
    provider: Provider,
    plan_id: str,
    nodes: dict[str, Node],
    groups: dict[str, PlacementGroup],
    reservations: dict[str, CapacityReservation],
) -> list[str]:
    match action.kind:
        case ActionKind.CREATE_PLACEMENT_GROUP:
            assert action.offering is not None
            spec = placement_group_spec(action, plan_id)
            return [provider.ensure_placement_group(spec).name]
        case ActionKind.CREATE_RESERVATION:
            return [provider.ensure_reservation(reservation_spec(action, plan_id)).name]
        case ActionKind.LAUNCH:
            made = provider.launch(launch_spec(action, plan_id))
            return [n.id for n in made]
        case ActionKind.TERMINATE:
            provider.terminate([nodes[i] for i in action.node_ids])
            return []
        case ActionKind.RELEASE_RESERVATION:
            provider.release_reservation(reservations[action.target])
            return []
        case ActionKind.DELETE_PLACEMENT_GROUP:
            provider.delete_placement_group(groups[action.target])
            return []
    raise AssertionError(action.kind)  # pragma: no cover


def placement_group_spec(action: Action, plan_id: str) -> PlacementGroupSpec:
    """What a create-placement-group action asks of the provider."""
    assert action.offering is not None
    return PlacementGroupSpec(
        name=action.target,
        region=region_of(action.offering),
        offering=action.offering,
        nodes=action.count,
        fabric=action.fabric,
        tags=managed_tags(plan_id, run=action.run),
        token=action.token,
    )


def reservation_spec(action: Action, plan_id: str) -> ReservationSpec:
    """What a create-reservation action asks of the provider."""
    assert action.offering is not None
    pool = pool_name(action.offering, CapacityType.ON_DEMAND)
    return ReservationSpec(
        name=action.target,
        offering=action.offering,
        nodes=action.count,
        placement_group=action.placement_group,
        tags=managed_tags(plan_id, pool=pool, run=action.run),
        token=action.token,
        ends=action.ends,
        other_zones="other-zone" in action.fallbacks,
    )


def launch_spec(action: Action, plan_id: str) -> LaunchSpec:
    """What a launch action asks of the provider: its nodes tagged so the next inventory finds them."""
    assert action.offering is not None and action.capacity is not None
    pool = pool_name(action.offering, action.capacity)
    return LaunchSpec(
        offering=action.offering,
        capacity=action.capacity,
        count=action.count,
        pool=pool,
        tags=managed_tags(plan_id, pool=pool, run=action.run, stands_in=action.stands_in),
        token=action.token,
        run=action.run,
        placement_group=action.placement_group,
        reservation=action.reservation,
        fabric=action.fabric,
        target=action.target_nodes,
    )


def _failure(action: Action, exc: ProviderError) -> str:
    """What failed, in the words the summary uses: a short pool says which pool and by how many nodes."""
    if action.kind is ActionKind.LAUNCH:
        what = "gang" if action.run else "pool"
        short = action.count - len(exc.launched)
        return f"{what} {action.target} is short {plural(short, 'node')} ({exc.kind}): {exc}"
    return f"{exc.kind}: {exc}"
