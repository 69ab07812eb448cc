"""The JSON API's bodies and responses (``/api/v1``): pydantic models, so the OpenAPI document states them.

A request body carries the training job's fields under the names scenario files use (``nodes``,
``gpus_per_node``, ``checkpoint.write_minutes`` ...); their ranges and cross-field rules are checked by the
scenario model itself (``planner.operations.portal.queue.validate_request``), so an out-of-range value gets
the message a scenario file would, as a 422 naming the field.

What a caller writes is read strictly (``models.numbers.StrictModel``: a boolean is not a number, numbers
finite) and bounded: every string and every list has a maximum length, so no body can make a stored
request, a page or a replan large (the app's body limit caps the whole body as well).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import BaseModel, Field, StringConstraints

from models.numbers import StrictModel

__all__ = [
    "MAX_GPU_MODELS",
    "AuditOut",
    "ChargebackOut",
    "CheckpointIn",
    "FieldProblem",
    "MeOut",
    "PlanStatusOut",
    "ReplanOut",
    "RequestIn",
    "RequestOut",
    "RequestPatch",
    "TeamIn",
    "TeamOut",
    "UsageOut",
]

#: :data:`planner.operations.portal.store.PRIORITY_CLASSES` as a type (a test checks that the two agree)
PriorityClass = Literal["high", "normal", "low"]
#: The most GPU models one request may name (the catalogs know a few dozen; prefixes cover families).
MAX_GPU_MODELS: Final = 32
_NAME_CHARS: Final = 200
GpuModel = Annotated[str, StringConstraints(max_length=64)]


class _Body(StrictModel):
    """A body a caller writes: unknown fields refused, numbers strict (``StrictModel``)."""


class CheckpointIn(_Body):
    write_minutes: float = Field(description="time to write one checkpoint")
    restart_minutes: float = Field(description="time from an interruption until training resumes")


class RequestIn(_Body):
    """A training request: one run of a gang, as a scenario's ``training:`` entry."""

    name: str = Field(
        description="the request's name (printable, at most 180 characters)", max_length=_NAME_CHARS
    )
    project: str | None = Field(
        None, description="what chargeback splits the team's cost by", max_length=_NAME_CHARS
    )
    nodes: int = Field(description="nodes in the gang")
    gpus_per_node: int = Field(8, description="GPUs of each node")
    gpu_models: list[GpuModel] = Field(
        description=f"GPU models it may run on (prefixes: A100); 1 to {MAX_GPU_MODELS}",
        max_length=MAX_GPU_MODELS,
    )
    hours: float = Field(description="run time of an uninterrupted gang")
    earliest_start: datetime | None = Field(None, description="default: the next whole hour")
    deadline: datetime | None = None
    fabric: Literal["required", "preferred", "none"] | None = Field(
        None, description="multi-node GPU network; default: required when nodes > 1"
    )
    preemptible: bool = Field(False, description="may run on spot, checkpointing")
    checkpoint: CheckpointIn | None = Field(
        None, description="checkpoint write and restart times; the plan picks the interval from them"
    )
    priority_class: PriorityClass = Field("normal", description="one of the team's allowed classes")


class RequestPatch(_Body):
    priority_class: PriorityClass | None = None
    move: int = Field(0, ge=-1000, le=1000, description="places to move within its class (negative: forward)")


class RequestOut(BaseModel):
    id: int
    team: str
    name: str
    job_name: str = Field(description="its training job's name in the plan")
    priority_class: str
    position: int | None = Field(description="place in the team's queue (1 = first); None when cancelled")
    status: str = Field(description="queued or cancelled: what the team asked")
    state: Literal["queued", "planned", "running", "done", "unserved", "cancelled"]
    detail: str
    start: datetime | None = None
    end: datetime | None = None
    offering: str | None = None
    tier: str | None = None
    placement_group: str | None = None
    checkpoint_interval_minutes: float | None = None
    expected_cost_usd: float | None = None
    cost_is_estimate: bool = Field(description="true: on demand on the cheapest offering, not yet planned")
    submitted_by: str
    created: datetime
    spec: dict[str, object]


class FieldProblem(BaseModel):
    field: str | None
    message: str


def _default_classes() -> list[PriorityClass]:
    return ["normal", "low"]


class TeamIn(_Body):
    guaranteed_gpus: int = 0
    burst_gpus: int | None = None
    priority: Literal["production", "standard", "batch"] = "standard"
    allowed_classes: list[PriorityClass] = Field(default_factory=_default_classes, min_length=1, max_length=3)


class TeamOut(BaseModel):
    name: str
    guaranteed_gpus: int
    burst_gpus: int | None
    priority: str
    allowed_classes: list[str]
    role: str | None = Field(description="your role in the team (lead, member; None for an admin)")


class MeOut(BaseModel):
    username: str
    is_admin: bool
    roles: dict[str, str]


class PlanStatusOut(BaseModel):
    plan: str | None = Field(description="the current plan's name (None: no plan yet); never a server path")
    last_replan: datetime | None
    next_replan: datetime | None = Field(description="when the daemon's replan is next due")
    total_usd: float | None
    solver_status: str | None


class UsagePoint(BaseModel):
    start: datetime
    gpus: float


class UsageOut(BaseModel):
    team: str
    guaranteed_gpus: int
    burst_gpus: int | None
    period_hours: int
    points: list[UsagePoint] = Field(description="planned GPUs of the team in each period")
    gpu_hours: float


class ChargebackRow(BaseModel):
    project: str
    tier: str
    gpu_hours: float
    cost_usd: float
    idle_usd: float


class ChargebackOut(BaseModel):
    team: str
    month: str | None
    months: list[str]
    idle_rule: str
    total_usd: float
    rows: list[ChargebackRow]


class AuditOut(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    object_type: str
    object_id: str
    team: str | None
    before: dict[str, object] | None
    after: dict[str, object] | None


class ReplanOut(BaseModel):
    ok: bool
    message: str
    plan: str | None = Field(description="the new plan's name; never a server path")
