"""From a plan to the actions that make a fleet match it: the desired state at a time, minus what is there.

Pure: no cloud calls. ``planner.outputs.desired.desired_state`` reads what the plan asks at an instant;
:func:`reconcile` compares it with a provider's :class:`~providers.base.Inventory` and returns the
ordered, minimal action list that ``gpuplan provision`` prints (dry run) or executes (``--apply``). A
gang's capacity reservation is billed at the on-demand rate from its creation, which the action table
says.

Rules the action list keeps:

- order: placement groups, then reservations, then launches, then terminations, then clean-up of what
  finished runs left; each action lists the actions it depends on (a launch into a placement group
  depends on the group's creation), so a failed action only stops the ones that need it;
- launch before terminate when replacing: a pool's terminations depend on the launches of the same
  offering, so a failed replacement never leaves the fleet short;
- never terminate a node that runs a gang: a run's nodes are left alone, even after its planned end
  (the note says so; ``retire_finished_runs`` terminates those of runs that ended). One exception, all
  or nothing: a gang that lost nodes is topped up by a launch that carries its running nodes
  (``node_ids``), and if the top-up fails provision terminates them in the same action (a gang short of
  nodes trains nothing and bills for all it holds). That is not a shrink the plan asks for, so the
  disruption budget does not hold it back; Terraform-managed nodes are never among them;
- a disruption budget per pool (:class:`DisruptionBudget`, as Karpenter's NodePool
  ``disruption.budgets``): one reconcile terminates at most that many of a pool's running nodes (half, by
  default, rounded up); the rest of a larger shrink waits for later cycles (:class:`HeldBack` says what
  was held), so a plan that suddenly wants far fewer nodes (a doubtful one, or a real cut) cannot empty a
  pool at once. Failed nodes, nodes already replaced (at risk), the daemon's stand-in nodes once their
  pool is back, and finished runs are outside it;
- deterministic client tokens from plan id + target + period + the counts, so re-running an apply
  creates nothing twice (and a second run of a finished apply finds nothing to do);
- what a Terraform root manages (``gpuplan-managed-by: terraform``) is counted toward its pool or gang
  but never terminated, released or deleted: a pool it holds beyond the plan is a note, to change in
  the root (``terraform_notes``);
- a gang's reservation and its launch carry the plan's ``fallback`` for it (what it may do when the
  reservation is refused: another zone, no reservation, a Capacity Block); provision and the adapters
  obey it;
- commitment purchases are never actions: they are *recommended purchases*, with their cost, for a human
  to decide (buying a three-year obligation is not a provisioning step);
- a gang the plan holds in a Capacity Block (``DesiredGang.block``) gets no reservation: its launch goes
  into the block bought for its run (``planner.operations.capacity_blocks.buy_planned_blocks``) once that
  block is active, and only into a block that is the run's (tagged with it, of its offering, holding all
  its nodes); until then the gang waits and :func:`block_notes` says why. A Capacity Block is never
  released (it is paid upfront and EC2 cannot cancel it).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from models.actions import Action, ActionKind
from models.naming import TAG_STANDS_IN, client_token, managed_by_terraform, safe_name
from models.numbers import strict_float
from models.tiers import CapacityType
from models.wording import plural
from planner.outputs.desired import RESERVATION_MARGIN, DesiredGang, DesiredState, reservation_name
from providers.base import CapacityReservation, Inventory, Node

__all__ = [
    "DEFAULT_BUDGET",
    "RESERVATION_MARGIN",
    "DisruptionBudget",
    "HeldBack",
    "block_notes",
    "leftover_notes",
    "reconcile",
    "run_block",
    "terraform_notes",
]


@dataclass(frozen=True)
class DisruptionBudget:
    """How many of a pool's running nodes one reconcile may terminate: ``share`` of them, rounded up (a
    pool of 3 at 50 % may lose 2), or ``nodes`` at most; both given, the smaller. ``None``: no limit
    (``gpuplan provision --allow-shrink``)."""

    share: float | None = 0.5
    nodes: int | None = None

    def __post_init__(self) -> None:
        if self.share is not None and not 0 <= self.share <= 1:
            raise ValueError(f"a disruption budget's share is from 0 to 1, got {self.share}")
        if self.nodes is not None and self.nodes < 0:
            raise ValueError(f"a disruption budget's nodes are at least 0, got {self.nodes}")

    def allowed(self, running: int) -> int:
        """Terminations allowed in a pool of ``running`` nodes."""
        limits = [running]
        if self.share is not None:
            limits.append(math.ceil(self.share * running - 1e-9))
        if self.nodes is not None:
            limits.append(self.nodes)
        return max(0, min(limits))

    @classmethod
    def parse(cls, text: str) -> DisruptionBudget:
        """``50%`` (a share of the pool's nodes) or ``3`` (nodes); ValueError saying what it takes."""
        value = text.strip()
        try:
            if value.endswith("%"):
                return cls(share=strict_float(value[:-1]) / 100, nodes=None)
            nodes = strict_float(value)
            if not nodes.is_integer():
                raise ValueError(f"{value!r} is not a whole number of nodes")
            return cls(share=None, nodes=int(nodes))
        except ValueError as exc:
            wanted = "a share of the pool's nodes (50%) or a number of nodes (3)"
            raise ValueError(f"{text!r} is not a disruption budget ({exc}); give {wanted}") from None


#: Half a pool's running nodes per reconcile, rounded up.
DEFAULT_BUDGET: Final = DisruptionBudget()


@dataclass(frozen=True)
class HeldBack:
    """A pool's terminations the disruption budget kept for later cycles."""

    pool: str
    offering: str
    running: int
    surplus: int  # the terminations the plan asks for now
    allowed: int  # what the budget allowed this cycle

    @property
    def held(self) -> int:
        return self.surplus - self.allowed

    def describe(self) -> str:
        return (
            f"{self.pool}: {self.held} of {self.surplus} terminations held back by the disruption budget "
            f"({self.allowed} of {self.running} running nodes may go in one cycle); later cycles, or "
            "--allow-shrink, do the rest"
        )


class _Builder:
    """Collects actions in the order they must run, numbering them."""

    def __init__(self, desired: DesiredState) -> None:
        self.desired = desired
        self.actions: list[Action] = []

    def add(self, kind: ActionKind, target: str, **fields: object) -> Action:
        action = Action(id=len(self.actions) + 1, kind=kind, target=target, **fields)
        self.actions.append(action)
        return action

    def price(self, offering: str, capacity: CapacityType) -> float | None:
        rate = self.desired.prices.get(offering, {}).get(str(capacity))
        return rate or None


def _per_hour(rate: float | None, nodes: int) -> float | None:
    return None if rate is None else rate * nodes


def reconcile(
    desired: DesiredState,
    inventory: Inventory,
    *,
    retire_finished_runs: bool = False,
    launch_batch: int | None = None,
    at_risk: frozenset[str] = frozenset(),
    budget: DisruptionBudget | None = DEFAULT_BUDGET,
    held_back: list[HeldBack] | None = None,
) -> list[Action]:
    """The ordered, minimal actions that turn ``inventory`` into ``desired`` (see the module docstring).

    ``launch_batch`` splits a pool's launch into actions of at most that many nodes (a cloud's request
    limits, and a journal that records progress batch by batch); a gang is never split: all or nothing.
    ``at_risk``: ids of pool nodes the cloud may soon reclaim (a spot rebalance recommendation). They do
    not count toward their pool, so replacements launch now, and they are let go once the pool's other
    nodes are running and enough: capacity is replaced before it is lost, as an autoscaling group's
    capacity rebalancing does. (A gang's node is not replaced alone: its run's checkpoint hook is
    called.) ``budget`` limits each pool's terminations (None: no limit); what it holds back is appended
    to ``held_back`` when given."""
    build = _Builder(desired)
    plan_id, period = desired.plan_id, desired.period
    live = inventory.live_nodes()
    groups = {g.name for g in inventory.placement_groups}
    reservations = {r.name: r for r in inventory.reservations}
    # a run's reservation: the one provision made (by name) or any other tagged with the run, such as a
    # Capacity Block bought for it (provision --buy-capacity-block)
    run_reservation = {r.run: r.name for r in sorted(inventory.reservations, key=lambda r: r.name) if r.run}
    for name, found in reservations.items():
        if found.run and name == safe_name(f"res-{found.run}"):
            run_reservation[found.run] = name
    for gang in desired.gangs:  # a block gang launches into its own active block, or not at all
        if gang.block:
            run_reservation.pop(gang.run, None)
            if (block := run_block(gang, inventory)) is not None and block.state == "active":
                run_reservation[gang.run] = block.id or block.name
    by_run: dict[str, list[Node]] = defaultdict(list)
    by_pool: dict[str, list[Node]] = defaultdict(list)
    for node in live:
        (by_run[node.run] if node.run else by_pool[node.pool]).append(node)

    group_action: dict[str, int] = {}
    for gang in desired.gangs:
        if gang.placement_group and gang.placement_group not in groups:
            made = build.add(
                ActionKind.CREATE_PLACEMENT_GROUP,
                gang.placement_group,
                offering=gang.offering,
                count=gang.nodes,
                run=gang.run,
                fabric=gang.fabric,
                token=client_token(plan_id, "placement-group", gang.placement_group),
                reason=f"{gang.run} ({plural(gang.nodes, 'node')}) starts {gang.start:%Y-%m-%d %H:%M}Z",
            )
            group_action[gang.run] = made.id
    reservation_action: dict[str, int] = {}
    for gang in desired.gangs:
        have = len(by_run.get(gang.run, []))
        name = reservation_name(gang)
        if gang.reserve and gang.run not in run_reservation and have < gang.nodes:
            made = build.add(
                ActionKind.CREATE_RESERVATION,
                name,
                offering=gang.offering,
                capacity=CapacityType.ON_DEMAND,
                count=gang.nodes,
                run=gang.run,
                placement_group=gang.placement_group,
                token=client_token(plan_id, "reservation", name, gang.nodes),
                depends_on=_ids(group_action.get(gang.run)),
                reason=f"holds {plural(gang.nodes, 'node')} for {gang.run}, billed at on demand until its "
                "nodes use it",
                usd_per_hour=_per_hour(build.price(gang.offering, CapacityType.ON_DEMAND), gang.nodes),
                ends=gang.end + RESERVATION_MARGIN,
                fallback=gang.fallback,
            )
            reservation_action[gang.run] = made.id

    launches_of: dict[str, list[int]] = defaultdict(list)
    for gang in desired.gangs:
        have = len(by_run.get(gang.run, []))
        if not gang.running or have >= gang.nodes:
            continue
        if gang.block and gang.run not in run_reservation:
            continue  # it waits for its block (block_notes says why): never on demand instead
        held = run_reservation.get(gang.run)
        if held is None and gang.run in reservation_action:
            held = reservation_name(gang)
        reserved = held is not None and gang.capacity is CapacityType.ON_DEMAND
        count = gang.nodes - have
        # a top-up carries the gang's running nodes: if it fails, provision terminates them with what it
        # made (a gang short of nodes trains nothing and bills for all it holds); Terraform's stay
        survivors = tuple(sorted(n.id for n in by_run[gang.run] if not managed_by_terraform(n.tags)))
        until = f"{gang.end:%Y-%m-%d %H:%M}Z"
        reason = f"{gang.run} runs until {until} on {plural(gang.nodes, 'node')}; {have} running"
        if gang.block:
            reason += f"; into its Capacity Block {held} (market type capacity-block, paid upfront)"
        if survivors:
            reason += (
                f"; if this top-up fails, its {plural(len(survivors), 'running node')} are terminated too (a "
                "gang is all or nothing)"
            )
        made = build.add(
            ActionKind.LAUNCH,
            gang.run,
            offering=gang.offering,
            capacity=gang.capacity,
            count=count,
            target_nodes=gang.nodes,
            run=gang.run,
            placement_group=gang.placement_group,
            reservation=held if reserved else None,
            fabric=gang.fabric,
            max_run_hours=gang.max_run_hours,
            fallback=gang.fallback if reserved else None,
            token=client_token(
                plan_id, "launch", gang.run, period, have, gang.nodes, _members(by_run[gang.run])
            ),
            node_ids=survivors,
            depends_on=_ids(group_action.get(gang.run), reservation_action.get(gang.run)),
            reason=reason,
            # nodes launched into a reservation add nothing: the reservation is billed already
            usd_per_hour=None if reserved else _per_hour(build.price(gang.offering, gang.capacity), count),
        )
        launches_of[gang.offering].append(made.id)

    wanted = {p.pool: p for p in desired.pools}
    for pool in desired.pools:
        have = sum(1 for n in by_pool.get(pool.pool, []) if n.id not in at_risk)
        start = have
        while start < pool.nodes:  # in batches of at most launch_batch nodes, each its own intent
            count = min(pool.nodes - start, launch_batch or pool.nodes)
            made = build.add(
                ActionKind.LAUNCH,
                pool.pool,
                offering=pool.offering,
                capacity=pool.capacity,
                count=count,
                target_nodes=start + count,
                token=client_token(
                    plan_id, "launch", pool.pool, period, start, start + count, _members(by_pool[pool.pool])
                ),
                reason=f"the plan holds {plural(pool.nodes, 'node')} in period {period}; {have} running",
                usd_per_hour=_per_hour(build.price(pool.offering, pool.capacity), count),
            )
            launches_of[pool.offering].append(made.id)
            start += count

    for name in sorted(by_pool):
        nodes = by_pool[name]
        want = wanted[name].nodes if name in wanted else 0
        safe = [n for n in nodes if n.id not in at_risk]
        mine = [n for n in safe if not managed_by_terraform(n.tags)]  # Terraform's count, never go
        over = min(len(safe) - want, len(mine))
        surplus = _to_terminate(mine, over) if over > 0 else []
        # the budget holds back the pool's own nodes; stand-ins (the daemon's fallback nodes) go as soon
        # as the pool they stood in for has its own again: they were never the plan's
        own = [n for n in surplus if not n.tags.get(TAG_STANDS_IN)]
        if budget is not None and len(own) > budget.allowed(len(nodes)):
            allowed = budget.allowed(len(nodes))
            if held_back is not None:
                held_back.append(HeldBack(name, nodes[0].offering, len(nodes), len(own), allowed))
            kept = {n.id for n in own[allowed:]}
            surplus = [n for n in surplus if n.id not in kept]
        replaced = sum(1 for n in safe if n.state == "running") >= want
        risky = (
            sorted(
                (n for n in nodes if n.id in at_risk and not managed_by_terraform(n.tags)), key=lambda n: n.id
            )
            if replaced
            else []
        )
        surplus += risky
        if not surplus:
            continue
        offering = surplus[0].offering
        # fallback nodes go once the pool they stand in for has its own: after its launches succeed
        stood_for = sorted(
            {n.tags[TAG_STANDS_IN] for n in surplus if n.tags.get(TAG_STANDS_IN)} & set(wanted)
        )
        waits_on = {
            *launches_of.get(offering, ()),
            *(i for p in stood_for for i in launches_of[wanted[p].offering]),
        }
        reason = f"the plan holds {plural(want, 'node')} in period {period}; {len(nodes)} running"
        if name not in wanted:
            reason = f"the plan holds no nodes in this pool in period {period}; {len(nodes)} running"
        if risky:
            reason += f"; {len(risky)} at risk of reclaim replaced"
        build.add(
            ActionKind.TERMINATE,
            name,
            offering=offering,
            capacity=surplus[0].capacity,
            count=len(surplus),
            node_ids=tuple(n.id for n in surplus),
            depends_on=tuple(sorted(waits_on)),
            reason=reason,
            usd_per_hour=_per_hour(build.price(offering, surplus[0].capacity), -len(surplus)),
        )

    failed = sorted(
        (n for n in inventory.failed_nodes() if not managed_by_terraform(n.tags)), key=lambda n: n.id
    )
    if failed:
        build.add(
            ActionKind.TERMINATE,
            "failed nodes",
            count=len(failed),
            node_ids=tuple(n.id for n in failed),
            reason="the cloud reports them failed: they serve nothing (replacements are launched above)",
        )

    active = {g.run for g in desired.gangs}
    ended = set(desired.ended_runs)
    if retire_finished_runs:
        for run in sorted(set(by_run) - active):
            nodes = sorted((n for n in by_run[run] if not managed_by_terraform(n.tags)), key=lambda n: n.id)
            if not nodes:
                continue
            build.add(
                ActionKind.TERMINATE,
                run,
                offering=nodes[0].offering,
                capacity=nodes[0].capacity,
                count=len(nodes),
                node_ids=tuple(n.id for n in nodes),
                run=run,
                reason="its run ended in the plan (--retire-finished-runs)",
                usd_per_hour=_per_hour(build.price(nodes[0].offering, nodes[0].capacity), -len(nodes)),
            )
            by_run.pop(run)
    for reservation in sorted(inventory.reservations, key=lambda r: r.name):
        if (
            (reservation.run in active and reservation.run is not None)
            or managed_by_terraform(reservation.tags)
            or reservation.block  # paid upfront, not cancellable: it ends by itself
        ):
            continue
        build.add(
            ActionKind.RELEASE_RESERVATION,
            reservation.name,
            offering=reservation.offering,
            count=reservation.nodes,
            run=reservation.run,
            reason="its run ended" if reservation.run in ended else "no gang of the plan needs it now",
            usd_per_hour=_per_hour(
                build.price(reservation.offering, CapacityType.ON_DEMAND), -reservation.nodes
            ),
        )
    for group in sorted(inventory.placement_groups, key=lambda g: g.name):
        if group.run in active or by_run.get(group.run or "", []) or managed_by_terraform(group.tags):
            continue
        build.add(
            ActionKind.DELETE_PLACEMENT_GROUP,
            group.name,
            run=group.run,
            reason="its run ended and no node is left in it"
            if group.run in ended
            else "no gang of the plan needs it now",
        )
    return build.actions


def run_block(gang: DesiredGang, inventory: Inventory) -> CapacityReservation | None:
    """The Capacity Block held for ``gang``'s run: a block tagged with the run, of the gang's offering,
    holding all its nodes (a doubtful one, another run's or too small, is never used); the active one
    first."""
    mine = [
        r
        for r in inventory.reservations
        if r.block and r.run == gang.run and r.offering == gang.offering and r.nodes >= gang.nodes
    ]
    return min(mine, key=lambda r: (r.state != "active", r.id or r.name), default=None)


def block_notes(desired: DesiredState, inventory: Inventory) -> list[str]:
    """Why each running gang the plan holds in a Capacity Block is not launched: its block is not active
    yet, or none is held for it (provision buys it ahead with ``--apply --block-max-usd``)."""
    notes = []
    have = {n.run for n in inventory.live_nodes() if n.run}
    for gang in desired.gangs:
        if not gang.block or not gang.running or gang.run in have:
            continue
        block = run_block(gang, inventory)
        if block is not None and block.state == "active":
            continue
        if block is not None:
            starts = f", active from {block.starts:%Y-%m-%d %H:%M}Z" if block.starts else ""
            notes.append(
                f"{gang.run} waits for its Capacity Block {block.id or block.name} ({block.state}{starts}): "
                "its nodes launch into the block once it is active"
            )
            continue
        others = [r for r in inventory.reservations if r.block and r.run == gang.run]
        why = (
            f"; {', '.join(r.id or r.name for r in others)} tagged with the run is not its offering or "
            f"holds fewer than {gang.nodes} nodes, so it is not used"
            if others
            else ""
        )
        notes.append(
            f"{gang.run} waits: the plan holds it in a Capacity Block and none is held for it{why} (gpuplan "
            "provision --apply --block-max-usd N buys it up to 8 weeks ahead); it is not launched on demand"
        )
    return notes


def terraform_notes(desired: DesiredState, inventory: Inventory) -> list[str]:
    """Pools where a Terraform root holds more nodes than the plan: provision leaves them (they are the
    root's to change), and says so."""
    wanted = {p.pool: p.nodes for p in desired.pools}
    theirs: dict[str, int] = defaultdict(int)
    for node in inventory.live_nodes():
        if not node.run and managed_by_terraform(node.tags):
            theirs[node.pool] += 1
    return [
        f"{pool}: a Terraform root holds {count} nodes, {count - wanted.get(pool, 0)} more than the plan "
        "(provision never terminates what Terraform manages: apply a root written for this plan)"
        for pool, count in sorted(theirs.items())
        if count > wanted.get(pool, 0)
    ]


def leftover_notes(desired: DesiredState, inventory: Inventory) -> list[str]:
    """What reconcile leaves running on purpose: the nodes of runs that are not active now."""
    active = {g.run for g in desired.gangs}
    runs: dict[str, int] = defaultdict(int)
    for node in inventory.live_nodes():
        if node.run and node.run not in active:
            runs[node.run] += 1
    return [
        f"{run}: {count} nodes of a run the plan does not hold now keep running (provision never "
        "terminates a gang; end the job, or use --retire-finished-runs)"
        for run, count in sorted(runs.items())
    ]


def _members(nodes: Sequence[Node]) -> str:
    """Which nodes a pool (or gang) holds, in a launch's token: after a node is interrupted and gone, the
    launch that replaces it is a new intent (the old token would be replayed, creating nothing), while a
    repeat of the same launch from the same inventory is the same one."""
    return client_token(*sorted(n.id for n in nodes)) if nodes else ""


def _ids(*ids: int | None) -> tuple[int, ...]:
    return tuple(i for i in ids if i is not None)


_STATE_ORDER: Final = {"pending": 0, "provisioning": 0, "staging": 0}


def _to_terminate(nodes: Sequence[Node], count: int) -> list[Node]:
    """Which ``count`` nodes of a pool to let go: not-yet-running ones first, then the newest (the oldest
    have warm caches and loaded models), ties by id so the choice is deterministic."""

    def key(node: Node) -> tuple[int, float, str]:
        launched = node.launched.timestamp() if node.launched is not None else 0.0
        return (_STATE_ORDER.get(node.state, 1), -launched, node.id)

    return sorted(nodes, key=key)[:count]
