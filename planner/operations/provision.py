"""Provision a plan: read the fleet, reconcile it with the plan, and (only when asked) act.

:func:`prepare` asks the provider for its inventory and returns the action list of
``planner.operations.reconcile``, with the launches the account's quotas cannot take refused before
anything is made (``planner.operations.quotas``); :func:`apply` executes it in order. A failed action
does not stop the run: the actions that depend on it are skipped, every other one still runs, and each
result says what happened, so a summary can name the pool that is short and why. Two exceptions keep
gangs from harm: a gang whose reservation failed launches without it (and, when the cloud has no
capacity for that either, its result names the Capacity Blocks offered), each step only where the plan's
``fallback`` for the run allows it (a refused step is skipped and named), and a gang launch that failed
after making part of its nodes terminates them (all or nothing). :func:`next_attempt` is the one rule, for
provision's :class:`CreateRecord` and the daemon's journal alike, that sends a create again under a token
of its own once what its earlier attempt made is gone. Every call is logged
(``gpuplan.provision``) with names and counts only: nothing from the provider's settings or the
environment is ever put in a message.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from models.actions import Action, ActionKind, ActionPlan, ActionResult, Created, CreatedLog, read_created
from models.capacity_blocks import CAPACITY_BLOCK_MAX_NODES, block_duration_hours
from models.errors import InputError
from models.naming import managed_by_terraform, managed_tags, pool_name, safe_name
from models.plan import Plan
from models.scenario import FALLBACKS
from models.wording import plural
from planner.operations.quotas import check_quotas, quota_keys
from planner.operations.reconcile import (
    DEFAULT_BUDGET,
    DisruptionBudget,
    HeldBack,
    block_notes,
    leftover_notes,
    reconcile,
    terraform_notes,
)
from planner.outputs.desired import DEFAULT_LEAD_HOURS, DesiredState, desired_state, region_of
from providers.base import (
    GONE_STATES,
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
    "CREATES",
    "SETTLE",
    "CreateRecord",
    "DoneCreate",
    "Provisioning",
    "apply",
    "capacity_actions",
    "launch_spec",
    "next_attempt",
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

#: How long after a create came back done its absence from the inventory may still be the cloud's read
#: lag (EC2's describe calls are eventually consistent for seconds after a create:
#: https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html); past it, an absent result is
#: gone and the intent is sent as a new attempt.
SETTLE: Final = timedelta(minutes=2)

#: The actions that create something under a client token, and so have attempts (a terminate, release or
#: delete names what it acts on, so it never repeats).
CREATES: Final = (ActionKind.LAUNCH, ActionKind.CREATE_PLACEMENT_GROUP, ActionKind.CREATE_RESERVATION)


@dataclass(frozen=True)
class DoneCreate:
    """A create sent earlier under some token and done: what :func:`next_attempt` needs of it, whether it
    comes from the daemon's journal or from provision's :class:`CreateRecord`."""

    kind: ActionKind
    made: tuple[str, ...]
    #: when it came back done
    at: datetime

    def gone(self, inventory: Inventory, now: datetime) -> bool:
        """Whether what it made is gone: a launch none of whose nodes is live (seen going, or absent past
        :data:`SETTLE`), or a group or reservation absent past it (reconcile asks for one only when the
        inventory lacks it)."""
        if self.kind is ActionKind.LAUNCH:
            made = set(self.made)
            if made & {n.id for n in inventory.live_nodes()}:
                return False
            if made & {n.id for n in inventory.nodes}:  # listed, terminated or going: certainly gone
                return True
        return now - self.at >= SETTLE


def next_attempt(
    action: Action, done: Callable[[str], DoneCreate | None], inventory: Inventory, now: datetime
) -> Action:
    """``action`` as the attempt to send now: the first whose done result is still in effect (sent again
    under its token, which the cloud dedupes), or the first not done under its token. ``done(token)`` is
    the create done earlier under ``token``, if any.

    A client token comes from the intent (plan, target, period, counts): after a whole gang or pool is
    lost, or a group or reservation deleted outside gpuplan, the same intent is asked for again, and EC2
    (ClientToken) and Compute Engine (requestId) answer its first token with the first create, made
    nothing. Each attempt has a token of its own (``Action.retried``), derived from the first one, so the
    daemon and provision, numbering the attempts alike, send the same one."""
    if action.kind not in CREATES or not action.token or action.attempt:
        return action
    current, attempt = action, 0
    while (sent := done(current.token)) is not None:
        if not sent.gone(inventory, now):
            return current
        attempt += 1
        current = action.retried(attempt)
        log.warning(
            "#%d %s: what attempt %d made is gone; sending attempt %d with a new token",
            action.id,
            action.describe(),
            attempt,
            attempt + 1,
        )
    return current


class CreateRecord:
    """The creates ``gpuplan provision --apply`` made for a plan, kept in ``created.json`` beside it
    (``models.actions.CreatedLog``): what numbers the attempts of an intent when no daemon journals them.

    Each create that comes back done is recorded under its token at once and the file replaced whole
    (written to a temporary file, then renamed), so a run killed part way keeps what it made and a reader
    never sees half a file. It only grows, one entry per create made (the plan's horizon bounds it)."""

    def __init__(self, path: Path, provider: str) -> None:
        self.path = path
        self.provider = provider
        self._log = read_created(path) if path.exists() else CreatedLog()

    def done(self, token: str) -> DoneCreate | None:
        """The create made on this provider under ``token``, if one was."""
        made = self._log.creates.get(token)
        if made is None or made.provider != self.provider:
            return None
        return DoneCreate(made.kind, made.made, made.at)

    def attempts(self, run: Provisioning, now: datetime) -> None:
        """``run``'s creates as the attempts to send now (:func:`next_attempt`), in place."""
        run.actions[:] = [next_attempt(a, self.done, run.inventory, now) for a in run.actions]

    def save(self) -> None:
        """Write the record as it is: before an apply, so a place it cannot be written is found before
        anything is made (InputError naming it)."""
        self._write()

    def note(self, action: Action, result: ActionResult, now: datetime) -> None:
        """Record ``action`` if it is a create that came back done, and write the file."""
        if result.status != "done" or action.kind not in CREATES or not action.token:
            return
        entry = Created(
            kind=action.kind,
            target=action.target,
            provider=self.provider,
            attempt=action.attempt,
            made=result.made,
            at=now,
        )
        self._log = self._log.model_copy(update={"creates": {**self._log.creates, action.token: entry}})
        self._write()

    def _write(self) -> None:
        staging = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            staging.write_text(self._log.to_json(), encoding="utf-8")
            os.replace(staging, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                staging.unlink(missing_ok=True)
            raise InputError(
                self.path, None, f"cannot write the record of what provision made: {exc.strerror or exc}"
            ) from None


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
        blocks=supports(provider, Capability.CAPACITY_BLOCKS),
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
    notes = [
        *desired.notes,
        *(h.describe() for h in held_back),
        *terraform_notes(desired, inventory),
        *block_notes(desired, inventory),
    ]
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
    """Send one action; its result. A gang is all or nothing: nodes a failed gang launch made anyway are
    terminated in the same action, and so are the running nodes of a gang it was topping up
    (``action.node_ids``, as reconcile listed them: never Terraform's). A pool keeps what it got, and
    says how short it is."""
    try:
        made = _execute(action, provider, plan_id, nodes, groups, reservations)
    except ProviderError as exc:
        kept = tuple(n.id for n in exc.launched)
        message = _failure(action, exc)
        if action.kind is ActionKind.LAUNCH and action.run is not None:
            survivors = [
                nodes[i] for i in action.node_ids if i in nodes and nodes[i].state not in GONE_STATES
            ]
            if kept or survivors:
                held = _own_reservation(action, reservations) if survivors else None
                message += _undo_partial_gang(action, exc, provider, survivors, held)
                kept = ()
        result = ActionResult(status="failed", error_kind=exc.kind, message=message, made=kept)
        log.warning("#%d failed: %s", action.id, result.message)
        return result
    except Exception as exc:  # a bug in an adapter: record it, keep going, report it loudly
        log.exception("#%d failed unexpectedly", action.id)
        return ActionResult(status="failed", error_kind="internal", message=f"{type(exc).__name__}: {exc}")
    return ActionResult(status="done", made=tuple(made))


def _undo_partial_gang(
    action: Action,
    exc: ProviderError,
    provider: Provider,
    survivors: list[Node] | None = None,
    reservation: CapacityReservation | None = None,
) -> str:
    """Terminate the nodes a failed gang launch made and, for a top-up, the gang's ``survivors`` (and
    release its ``reservation``): a gang short of nodes trains nothing and bills for all it holds (11 of
    16 p5 on demand: about $605 an hour; an ODCR bills its unused part at the same rate, so the survivors
    alone would save nothing), and a top-up retried every cycle would keep them billing for nothing. One
    terminate call for the nodes; what the summary adds to the failure."""
    made = list(exc.launched)
    kept = list(survivors or [])
    parts = []
    if made:
        parts.append(f"the {len(made)} nodes it made anyway")
    if kept:
        parts.append(f"the gang's {plural(len(kept), 'running node')} ({', '.join(n.id for n in kept)})")
    what = " and ".join(parts)
    try:
        provider.terminate([*made, *kept])
    except ProviderError as undo:
        log.error("#%d: %s could not be terminated: %s", action.id, what, undo)
        ids = ", ".join(n.id for n in [*made, *kept])
        return f"; {what} could NOT be terminated ({undo.kind}: {undo}): {ids}"
    log.warning("#%d: terminated %s (a gang is all or nothing)", action.id, what)
    message = f"; {what} were terminated (a gang is all or nothing)"
    if not kept:
        return message
    if reservation is not None:
        try:
            provider.release_reservation(reservation)
        except ProviderError as undo:
            log.error("#%d: reservation %s could not be released: %s", action.id, reservation.name, undo)
            return message + (
                f"; its reservation {reservation.name} could NOT be released ({undo.kind}: {undo}) and bills "
                "on at on demand"
            )
        log.warning("#%d: released reservation %s of the short gang", action.id, reservation.name)
        message += f", and its reservation {reservation.name} was released"
    whole = action.target_nodes or len(kept) + action.count
    return message + (
        f": nothing of gang {action.run} runs or bills now; a later cycle launches all "
        f"{plural(whole, 'node')} together"
    )


def _own_reservation(
    action: Action, reservations: dict[str, CapacityReservation]
) -> CapacityReservation | None:
    """The reservation a gang's top-up launched into, when provision made it (its name, and not a
    Terraform root's); None for none, or for capacity bought otherwise (a Capacity Block is paid for
    whether used or not)."""
    if action.reservation is None or action.run is None or action.offering is None:
        return None
    if action.reservation != safe_name(f"res-{action.run}"):
        return None
    found = reservations.get(action.reservation)
    if found is None:  # made in this same apply: found by its name, as every adapter's release can
        return CapacityReservation(
            action.reservation, action.offering, action.target_nodes or action.count, run=action.run
        )
    return None if managed_by_terraform(found.tags) else found


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
        max_run_hours=action.max_run_hours,
    )


def _failure(action: Action, exc: ProviderError) -> str:
    """What failed, in the words the summary uses: a short pool says which pool and by how many nodes."""
    if action.kind is ActionKind.LAUNCH:
        what = "gang" if action.run else "pool"
        short = action.count - len(exc.launched)
        return f"{what} {action.target} is short {plural(short, 'node')} ({exc.kind}): {exc}"
    return f"{exc.kind}: {exc}"
