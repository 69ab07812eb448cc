"""Provision a plan: read the fleet, reconcile it with the plan, and (only when asked) act.

:func:`prepare` asks the provider for its inventory and returns the action list of
``planner.operations.reconcile``;
:func:`apply` executes it in order. A failed action does not stop the run: the actions that depend on it
are skipped, every other one still runs, and each result says what happened, so a summary can name the
pool that is short and why. Every call is logged (``gpuplan.provision``) with names and counts only:
nothing from the provider's settings or the environment is ever put in a message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from models.actions import Action, ActionKind, ActionPlan, ActionResult
from models.naming import managed_tags, pool_name
from models.plan import Plan
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
    "Provisioning",
    "apply",
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
) -> Provisioning:
    """The desired state at ``at``, the provider's inventory, and the actions between them (nothing done);
    ``at_risk`` nodes are replaced before they go, and each pool loses at most ``budget`` of its nodes
    (``planner.operations.reconcile.reconcile``; None: no limit)."""
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
    if not retire_finished_runs:
        notes += leftover_notes(desired, inventory)
    for held in held_back:
        log.warning("disruption budget: %s", held.describe())
    return Provisioning(provider.cloud, desired, inventory, actions, notes, held_back=held_back)


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
    for action in run.actions:
        blocking = [d for d in action.depends_on if run.results.get(d, _PENDING).status != "done"]
        if blocking:
            needs = ", ".join(f"#{d}" for d in blocking)
            result = ActionResult(status="skipped", message=f"needs {needs}, which did not succeed")
        else:
            log.info("#%d %s", action.id, action.describe())
            if before is not None:
                before(action)
            try:
                made = _execute(action, provider, plan_id, nodes, groups, reservations)
            except ProviderError as exc:
                kept = tuple(n.id for n in exc.launched)  # a pool that got part of its nodes keeps them
                message = _failure(action, exc)
                result = ActionResult(status="failed", error_kind=exc.kind, message=message, made=kept)
                log.warning("#%d failed: %s", action.id, result.message)
            except Exception as exc:  # a bug in an adapter: record it, keep going, report it loudly
                log.exception("#%d failed unexpectedly", action.id)
                message = f"{type(exc).__name__}: {exc}"
                result = ActionResult(status="failed", error_kind="internal", message=message)
            else:
                result = ActionResult(status="done", made=tuple(made))
        run.results[action.id] = result
        if on_result is not None:
            on_result(action, result)
    return run.results


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
        return f"{what} {action.target} is short {short} nodes ({exc.kind}): {exc}"
    return f"{exc.kind}: {exc}"
