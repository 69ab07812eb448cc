"""``actions.json``: the actions ``gpuplan provision`` found between a plan and a fleet (contract v1).

``gpuplan provision`` writes it on every run: a dry run lists the actions, an apply adds each one's result.
The daemon's journal and users' tools read it through these models (``gpuplan schema actions`` prints its
JSON Schema; the committed copy is ``models/data/actions.schema.json``). An action names what it acts on
by the names gpuplan gives (pools, runs, placement groups, reservations: ``models.naming.safe_name``),
carries the client token a cloud dedupes its create by, and lists the actions it needs first.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from models.documents import read_json_document
from models.naming import client_token
from models.plan import UtcTime
from models.scenario import FALLBACKS, Fallback
from models.tiers import CapacityType

__all__ = [
    "ACTIONS_SCHEMA",
    "CREATED_SCHEMA",
    "Action",
    "ActionKind",
    "ActionPlan",
    "ActionResult",
    "Created",
    "CreatedLog",
    "RecommendedPurchase",
    "fleet_usd_per_hour",
    "read_actions",
    "read_created",
]

ACTIONS_SCHEMA: Final = "gpuplan.actions/v1"
CREATED_SCHEMA: Final = "gpuplan.created/v1"


class ActionKind(StrEnum):
    CREATE_PLACEMENT_GROUP = "create-placement-group"
    CREATE_RESERVATION = "create-reservation"
    LAUNCH = "launch"
    TERMINATE = "terminate"
    RELEASE_RESERVATION = "release-reservation"
    DELETE_PLACEMENT_GROUP = "delete-placement-group"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecommendedPurchase(_Frozen):
    """A commitment the plan buys: for a human to decide, never executed by provision."""

    name: str
    offering: str
    term: str
    nodes: int
    start: UtcTime | None
    end: UtcTime | None
    usd_per_node_hour: float
    cost_in_horizon_usd: float
    obligation_beyond_horizon_usd: float
    due: bool = Field(description="its start is at or before the time asked: buy it now")


class Action(_Frozen):
    """One step of the action list. ``id`` is its position (1-based); ``depends_on`` lists the ids that
    must have succeeded before it runs."""

    id: int
    kind: ActionKind
    target: str = Field(description="the pool or run (or the group / reservation) it acts on")
    offering: str | None = None
    capacity: CapacityType | None = None
    count: int = 0
    target_nodes: int | None = Field(None, description="launch: nodes the pool or gang has afterwards")
    node_ids: tuple[str, ...] = ()
    placement_group: str | None = None
    reservation: str | None = None
    run: str | None = None
    fabric: str | None = None
    max_run_hours: float | None = Field(
        None, description="launch: a GCP flex-start gang, its VMs' run duration (provisioning FLEX_START)"
    )
    token: str = ""
    stands_in: str | None = Field(
        None, description="launch: the pool whose short nodes this one's stand in for (a capacity fallback)"
    )
    depends_on: tuple[int, ...] = ()
    reason: str = ""
    usd_per_hour: float | None = Field(None, description="what it adds (+) or saves (-) per hour")
    ends: UtcTime | None = Field(
        None,
        description="create-reservation: when the reservation ends by itself (the run's planned end plus a "
        "margin), so none bills on after its run",
    )
    fallback: tuple[Fallback, ...] | None = Field(
        None,
        description="create-reservation and a gang's launch: what the gang may do when the reservation is "
        "refused, in order (the plan's training[].fallback); None: all of them (actions before it)",
    )
    attempt: int = Field(
        0,
        ge=0,
        description="how many earlier sends of this same intent made something that is gone since (a gang "
        "lost within its launch hour, a group deleted outside gpuplan): each attempt has its own token, so "
        "the cloud does not answer it with the first one's",
    )

    def retried(self, attempt: int) -> Action:
        """This action as attempt ``attempt`` (>= 1) of its intent: a token of its own, derived from the
        first attempt's, so every process numbering the attempts alike sends the same token."""
        if attempt < 1 or self.attempt:
            raise ValueError(f"retried() takes a first attempt and an attempt >= 1, got {attempt}")
        return self.model_copy(
            update={"attempt": attempt, "token": client_token(self.token, "attempt", attempt)}
        )

    def retry_note(self) -> str:
        """Why this action is sent again under a token of its own ("attempt 2: the first launch's nodes are
        gone"), or "" for a first attempt: the table says so, or a reader would take it for a duplicate."""
        if not self.attempt:
            return ""
        what = {
            ActionKind.LAUNCH: ("the first launch's nodes are", "the nodes of the {n} earlier launches are"),
            ActionKind.CREATE_PLACEMENT_GROUP: (
                "the placement group made first is",
                "the placement groups made {n} times before are",
            ),
            ActionKind.CREATE_RESERVATION: (
                "the reservation made first is",
                "the reservations made {n} times before are",
            ),
        }.get(self.kind, ("what the first attempt made is", "what the {n} earlier attempts made is"))
        gone = what[0] if self.attempt == 1 else what[1].format(n=self.attempt)
        return f"attempt {self.attempt + 1}: {gone} gone"

    @property
    def fallbacks(self) -> tuple[Fallback, ...]:
        """The fallbacks allowed, in order (all of them when the action does not say)."""
        return FALLBACKS if self.fallback is None else self.fallback

    def describe(self) -> str:
        """One line, as the action table prints it."""
        match self.kind:
            case ActionKind.CREATE_PLACEMENT_GROUP:
                return f"create placement group {self.target} ({self.fabric or 'no fabric'}) for {self.run}"
            case ActionKind.CREATE_RESERVATION:
                until = f" until {self.ends:%Y-%m-%d %H:%M}Z" if self.ends else ""
                # the default order is not repeated on every line; a narrower one is said
                allowed = self.fallbacks
                only = "" if allowed == FALLBACKS else f"; if refused: {', '.join(allowed) or 'nothing'}"
                return (
                    f"reserve {self.count} x {self.offering} for {self.run} in {self.placement_group}"
                    f"{until}{only}"
                )
            case ActionKind.LAUNCH:
                where = f" in {self.placement_group}" if self.placement_group else ""
                into = f" into reservation {self.reservation}" if self.reservation else ""
                return f"launch {self.count} x {self.offering} {self.capacity} for {self.target}{where}{into}"
            case ActionKind.TERMINATE:
                nodes = ", ".join(self.node_ids)
                what = f"{self.count} x {self.offering}" if self.offering else f"{self.count} nodes"
                return f"terminate {what} of {self.target}: {nodes}"
            case ActionKind.RELEASE_RESERVATION:
                return f"release reservation {self.target}"
            case ActionKind.DELETE_PLACEMENT_GROUP:
                return f"delete placement group {self.target}"
        raise AssertionError(self.kind)  # pragma: no cover


class ActionResult(_Frozen):
    status: Literal["done", "failed", "skipped"]
    error_kind: str | None = None
    message: str = ""
    made: tuple[str, ...] = Field((), description="ids of what the action created")


class ActionPlan(_Frozen):
    """``actions.json``: what provision would do (dry run) or did (``--apply``: each action's result)."""

    schema_: Literal["gpuplan.actions/v1"] = Field(ACTIONS_SCHEMA, alias="schema")
    plan_id: str
    provider: str
    at: UtcTime
    period: int
    applied: bool = False
    actions: tuple[Action, ...]
    results: dict[int, ActionResult] = Field(default_factory=dict)
    recommended_purchases: tuple[RecommendedPurchase, ...]
    notes: tuple[str, ...]
    inventory: dict[str, int] = Field(description="what the provider reported: nodes, groups, reservations")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, by_alias=True) + "\n"


class Created(_Frozen):
    """A create ``gpuplan provision --apply`` sent that came back done, under its client token: what a later
    run needs to tell whether what it made is gone (and so whether the same intent is a new attempt)."""

    kind: ActionKind
    target: str
    provider: str = Field(description="the --cloud it was made on (a record names nothing of the account)")
    attempt: int = Field(0, ge=0, description="the action's ``attempt``: 0 for the first")
    made: tuple[str, ...] = Field((), description="ids of what it created (node ids for a launch)")
    at: UtcTime = Field(description="when it came back done (UTC): an absence younger than that may be lag")


class CreatedLog(_Frozen):
    """``created.json`` beside ``actions.json``: every create provision made for a plan, by client token.

    ``actions.json`` is replaced on every run (a dry run too), so it cannot say what an earlier apply
    made; this record only grows, one entry per create that was done. Without the daemon's journal it is
    what numbers the attempts of an intent (``planner.operations.provision.next_attempt``)."""

    schema_: Literal["gpuplan.created/v1"] = Field(CREATED_SCHEMA, alias="schema")
    creates: dict[str, Created] = Field(default_factory=dict, description="client token -> the create")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, by_alias=True) + "\n"


def fleet_usd_per_hour(actions: Iterable[Action]) -> float:
    """What the actions change the fleet's bill by, USD per hour: the sum of every action's own
    ``usd_per_hour``, whatever its kind. A reservation bills from when it is made (a launch into it adds
    nothing), so a sum over launches and terminations alone missed it and printed "+$0.00/h" under a
    "+$880.64/h" reservation; summing every listed delta keeps the summary equal to the lines above it."""
    return sum((a.usd_per_hour or 0.0) for a in actions)


def read_actions(path: str | Path) -> ActionPlan:
    """``actions.json`` validated against the contract (InputError naming the field otherwise)."""
    return read_json_document(path, ActionPlan, ACTIONS_SCHEMA, made_by="gpuplan provision")


def read_created(path: str | Path) -> CreatedLog:
    """``created.json`` validated (InputError naming the file and field otherwise)."""
    return read_json_document(path, CreatedLog, CREATED_SCHEMA, made_by="gpuplan provision --apply")
