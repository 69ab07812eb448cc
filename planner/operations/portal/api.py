"""The JSON API under ``/api/v1`` (for scripts: ``Authorization: Bearer <token>`` from the account page).

Every route checks its caller (``auth.py``): another team's team, request, use or cost is a 404. A body
that the scenario rules reject is a 422 with ``[{field, message}]`` in the scenario file's words. No answer
carries a server path (the plan is named, not located; messages have their paths cut to file names).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from models.errors import InputError
from planner.operations.portal.auth import (
    ApiUser,
    ApiWriter,
    ObjectId,
    managed_request,
    managed_team,
    portal_of,
    require_admin,
    visible_request,
    visible_team,
)
from planner.operations.portal.schemas import (
    AuditOut,
    ChargebackOut,
    ChargebackRow,
    FieldProblem,
    MeOut,
    PlanStatusOut,
    ReplanOut,
    RequestIn,
    RequestOut,
    RequestPatch,
    TeamIn,
    TeamOut,
    UsageOut,
    UsagePoint,
)
from planner.operations.portal.service import Portal, QueueEntry, without_paths
from planner.operations.portal.store import TeamRow, UserRow

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["portal"])

_PROBLEM: dict[int | str, dict[str, Any]] = {
    422: {"model": list[FieldProblem], "description": "the request breaks a scenario rule"}
}


def problem(error: InputError) -> JSONResponse:
    return JSONResponse([{"field": error.where, "message": without_paths(error.problem)}], status_code=422)


def request_out(entry: QueueEntry) -> RequestOut:
    row, state = entry.row, entry.state
    return RequestOut(
        id=row.id, team=row.team, name=row.name, job_name=row.job_name, priority_class=row.priority_class,
        position=entry.position, status=row.status, state=state.state, detail=without_paths(state.detail),
        start=state.start, end=state.end, offering=state.offering, tier=state.tier,
        placement_group=state.placement_group, checkpoint_interval_minutes=state.checkpoint_interval_minutes,
        expected_cost_usd=state.cost_usd, cost_is_estimate=state.cost_is_estimate,
        submitted_by=row.submitted_by, created=row.created, spec=row.spec.get("job", {}),
    )  # fmt: skip


def team_out(team: TeamRow, user: UserRow) -> TeamOut:
    return TeamOut(**team.record(), role=user.roles.get(team.name))


@router.get("/me")
def me(request: Request, user: ApiUser) -> MeOut:
    return MeOut(username=user.username, is_admin=user.is_admin, roles=user.roles)


@router.get("/plan")
def plan_status(request: Request, user: ApiUser) -> PlanStatusOut:
    """When the plan last ran and when the next replan is due (what every page's header says)."""
    portal = portal_of(request)
    plan = portal.plan()
    return PlanStatusOut(
        plan=None if plan is None else portal.plan_name(),
        last_replan=portal.last_replan(),
        next_replan=portal.next_replan(),
        total_usd=None if plan is None or not user.is_admin else plan.total_usd,
        solver_status=None if plan is None else str(plan.document.solver.status),
    )


@router.get("/teams")
def teams(request: Request, user: ApiUser) -> list[TeamOut]:
    return [team_out(t, user) for t in portal_of(request).store.teams() if user.sees(t.name)]


@router.get("/teams/{team}")
def team(request: Request, team: str, user: ApiUser) -> TeamOut:
    return team_out(visible_team(portal_of(request), user, team), user)


@router.get("/teams/{team}/requests")
def team_requests(request: Request, team: str, user: ApiUser) -> list[RequestOut]:
    portal = portal_of(request)
    visible_team(portal, user, team)
    return [request_out(e) for e in portal.queue(team)]


@router.post("/teams/{team}/requests", status_code=201, responses=_PROBLEM)
def submit(request: Request, team: str, body: RequestIn, user: ApiWriter) -> Any:
    portal = portal_of(request)
    found = managed_team(portal, user, team)
    fields = body.model_dump(mode="json", exclude={"priority_class"}, exclude_none=True)
    try:
        row = portal.submit(user, found, fields, body.priority_class)
    except InputError as error:
        return problem(error)
    return JSONResponse(request_out(portal.entry(row)).model_dump(mode="json"), status_code=201)


@router.get("/requests/{request_id}")
def get_request(request: Request, request_id: ObjectId, user: ApiUser) -> RequestOut:
    portal = portal_of(request)
    return request_out(portal.entry(visible_request(portal, user, request_id)))


@router.patch("/requests/{request_id}", responses={**_PROBLEM, 200: {"model": RequestOut}})
def patch_request(request: Request, request_id: ObjectId, body: RequestPatch, user: ApiWriter) -> Any:
    portal = portal_of(request)
    row = managed_request(portal, user, request_id)
    try:
        row = portal.change(user, row, priority_class=body.priority_class, move=body.move)
    except InputError as error:
        return problem(error)
    return request_out(portal.entry(row))


@router.post("/requests/{request_id}/cancel")
def cancel_request(request: Request, request_id: ObjectId, user: ApiWriter) -> RequestOut:
    portal = portal_of(request)
    row = portal.cancel(user, managed_request(portal, user, request_id))
    return request_out(portal.entry(row))


@router.get("/teams/{team}/usage")
def usage(request: Request, team: str, user: ApiUser) -> UsageOut:
    portal = portal_of(request)
    found = visible_team(portal, user, team)
    points, gpu_hours, period_hours = portal.usage(found)
    return UsageOut(
        team=team, guaranteed_gpus=found.guaranteed_gpus, burst_gpus=found.burst_gpus,
        period_hours=period_hours, points=[UsagePoint(start=t, gpus=g) for t, g in points],
        gpu_hours=gpu_hours,
    )  # fmt: skip


@router.get("/teams/{team}/chargeback")
def chargeback(
    request: Request,
    team: str,
    user: ApiUser,
    month: Annotated[
        str | None, Query(pattern=r"^\d{4}-\d{2}$", description="YYYY-MM (default: now)")
    ] = None,
) -> ChargebackOut:
    portal = portal_of(request)
    visible_team(portal, user, team)
    months = portal.months()
    chosen = month or portal.default_month()
    if month is not None and month not in months:
        raise HTTPException(404, f"month {month} is outside the plan ({', '.join(months) or 'no plan'})")
    rows, total, rule = portal.chargeback(team, chosen)
    return ChargebackOut(
        team=team, month=chosen, months=months, idle_rule=rule, total_usd=total,
        rows=[ChargebackRow(**r) for r in rows],
    )  # fmt: skip


@router.put("/admin/teams/{team}")
def put_team(request: Request, team: str, body: TeamIn, user: ApiWriter) -> Any:
    require_admin(user)
    portal: Portal = portal_of(request)
    try:
        row = portal.put_team(user, team, body.model_dump())
    except InputError as error:
        return problem(error)
    return team_out(row, user)


@router.post("/admin/replan")
def replan(request: Request, user: ApiWriter) -> ReplanOut:
    require_admin(user)
    result = portal_of(request).replan(user.username)
    return ReplanOut(ok=result.ok, message=result.message, plan=result.plan)


@router.get("/admin/audit")
def audit(
    request: Request, user: ApiUser, limit: Annotated[int, Query(ge=1, le=1000)] = 200
) -> list[AuditOut]:
    require_admin(user)
    return [
        AuditOut(**{**vars(e), "before": _public(e.before), "after": _public(e.after)})
        for e in portal_of(request).store.audit(limit=limit)
    ]


def _public(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """An audit entry's values with server paths cut (entries written before plans were named had
    the plan's directory)."""
    if data is None:
        return None
    return {k: without_paths(v) if isinstance(v, str) else v for k, v in data.items()}
