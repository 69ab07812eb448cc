"""Training requests: validated as scenario training jobs, fed to the replan, and given their state by the
current plan.

- Validation (:func:`validate_request`): a request is the training job it will be in the scenario, so it
  is checked by the same code and messages as a scenario file: the fields by ``models.scenario.parse``
  (a scenario of the team and the request, so the cross-field rules apply too: a window inside the
  horizon, a deadline after the earliest start) and what it asks of the catalog by
  ``planner.planning.problem.checks.check_inputs`` (GPU models that exist, an offering that runs the gang, a
  window no shorter than the run). The field paths of ``training[N].x`` come back as ``x``.
- The feed (:func:`with_requests`, called from the daemon's ``plan_scenario``): every queued request
  (not cancelled ones) becomes a ``TrainingJob`` of its team named ``<name>-r<id>``, and the portal's team
  settings (guaranteed and burst GPUs, planner priority) replace the scenario's. A request that no
  longer validates (the scenario changed under it) is left out, its reason kept for the portal to show.
- State (:func:`request_state`): from the plan the store names: planned (start, offering, tier,
  placement group), running or done by the clock, unserved with the plan's reason; queued while no plan
  has taken it in yet; cancelled.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from models.errors import InputError
from models.plan import Plan, UnservedTraining
from models.scenario import Scenario, Team, TrainingJob, parse

if TYPE_CHECKING:
    from models.catalog import Catalog
    from planner.operations.daemon.config import DaemonConfig
    from planner.operations.portal.store import PortalStore, RequestRow

__all__ = [
    "JOB_FIELDS",
    "RequestState",
    "apply_teams",
    "estimate_usd",
    "request_state",
    "validate_request",
    "with_requests",
]

log = logging.getLogger("gpuplan.portal")

#: The training job fields a request sets (the rest of TrainingJob keeps its default: no repeat).
JOB_FIELDS: Final = (
    "name", "project", "nodes", "gpus_per_node", "gpu_models", "hours", "earliest_start", "deadline",
    "fabric", "preemptible", "checkpoint",
)  # fmt: skip
#: ``-r<id>`` is appended to a request's name in the plan, so its name leaves room for it.
MAX_REQUEST_NAME: Final = 180
_TRAINING_PATH = re.compile(r"^training\[(\d+)\]\.?")

State = Literal["queued", "planned", "running", "done", "unserved", "cancelled"]


def _job_data(team: str, name: str, fields: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in fields.items() if k in JOB_FIELDS and v is not None}
    data["name"], data["team"] = name, team
    return data


def apply_teams(scenario: Scenario, teams: list[Any]) -> Scenario:
    """The scenario with the portal's teams (``TeamRow``s): their settings over the scenario's, new ones
    added."""
    mine = {t.name: t for t in teams}
    merged = [
        Team(
            name=t.name, guaranteed_gpus=mine[t.name].guaranteed_gpus, burst_gpus=mine[t.name].burst_gpus,
            priority=mine[t.name].priority,
        )
        if t.name in mine
        else t
        for t in scenario.teams
    ]  # fmt: skip
    known = {t.name for t in scenario.teams}
    merged += [
        Team(name=t.name, guaranteed_gpus=t.guaranteed_gpus, burst_gpus=t.burst_gpus, priority=t.priority)
        for t in teams
        if t.name not in known
    ]
    return scenario.model_copy(update={"teams": merged})


def validate_request(
    scenario: Scenario, catalog: Catalog, team: str, fields: dict[str, Any], *, job_name: str | None = None
) -> TrainingJob:
    """The request ``fields`` as the training job of ``team`` it will be (named ``job_name``, default its
    own name); InputError with the request's field (``nodes``, ``checkpoint.write_minutes``) otherwise."""
    from planner.planning.problem.checks import check_inputs

    name = fields.get("name")
    if isinstance(name, str) and len(name) > MAX_REQUEST_NAME:
        raise InputError(None, "name", f"is {len(name)} characters long; at most {MAX_REQUEST_NAME}")
    data = _job_data(team, job_name or str(name or ""), fields)
    if job_name is None and name is None:
        data.pop("name")
    teams = [t for t in scenario.teams if t.name == team] or [Team(name=team)]
    document = {
        "name": scenario.name,
        "horizon": scenario.horizon.model_dump(mode="json"),
        "teams": [t.model_dump(mode="json") for t in teams],
        "training": [data],
    }
    try:
        job = parse(document).training[0]
    except InputError as error:
        raise _request_error(error, index=0) from None
    try:
        check_inputs(scenario.model_copy(update={"training": [*scenario.training, job]}), catalog)
    except InputError as error:
        raise _request_error(error, index=len(scenario.training)) from None
    return job


def _request_error(error: InputError, index: int) -> InputError:
    where = error.where or ""
    match = _TRAINING_PATH.match(where)
    if match and int(match.group(1)) == index:
        field = where[match.end() :] or None
        return InputError(None, field, error.problem)
    if where.startswith("horizon") or where.startswith("teams"):
        return InputError(None, None, error.problem)
    return InputError(None, where or None, error.problem)


def estimate_usd(scenario: Scenario, catalog: Catalog, job: TrainingJob) -> float | None:
    """What the run costs on demand on the cheapest offering that can run it: a first figure, before a
    plan prices it (the plan may do better with commitments or spot)."""
    from models.scope import scenario_offerings
    from planner.planning.problem.sets import runs_gang

    prices = [
        o.on_demand_usd_h
        for o in scenario_offerings(scenario, catalog)
        if runs_gang(o, job) and o.on_demand_usd_h is not None and math.isfinite(o.on_demand_usd_h)
    ]
    return None if not prices else min(prices) * job.nodes * job.hours


def with_requests(scenario: Scenario, catalog: Catalog, store: PortalStore) -> Scenario:
    """``scenario`` with the portal's team settings and every queued request as a training job; each
    request's feed error (None when it was taken in) is recorded in the store."""
    scenario = apply_teams(scenario, store.teams())
    jobs: list[TrainingJob] = []
    errors: dict[int, str | None] = {}
    taken = {w.name for w in scenario.workloads}
    for row in store.requests(status="queued"):
        job_fields = {"project": row.name, **row.spec.get("job", {})}  # chargeback by the request's name
        try:
            if row.job_name in taken:
                raise InputError(None, "name", f"{row.job_name} is the name of a workload in the scenario")
            job = validate_request(scenario, catalog, row.team, job_fields, job_name=row.job_name)
        except InputError as error:
            errors[row.id] = error.format()
            log.warning("portal request %d left out of the plan: %s", row.id, error.format())
            continue
        jobs.append(job)
        taken.add(job.name)
        errors[row.id] = None
    store.set_feed_errors(errors)
    return scenario.model_copy(update={"training": [*scenario.training, *jobs]})


def feed_scenario(config: DaemonConfig, scenario: Scenario, catalog: Catalog) -> Scenario:
    """The daemon's hook: ``scenario`` with the portal's requests when the daemon's database has the
    portal's tables, else unchanged (a daemon run without a portal)."""
    from sqlalchemy import inspect

    from planner.operations.daemon.store import Store

    store = Store(config.database_url)
    try:
        if not inspect(store.engine).has_table("portal_requests"):
            return scenario
        from planner.operations.portal.store import PortalStore

        return with_requests(scenario, catalog, PortalStore(store.engine))
    finally:
        store.close()


@dataclass(frozen=True)
class RequestState:
    """Where a request stands: its state and, once planned, where and when it runs and what it costs."""

    state: State
    detail: str
    start: datetime | None = None
    end: datetime | None = None
    offering: str | None = None
    tier: str | None = None
    placement_group: str | None = None
    nodes: int | None = None
    checkpoint_interval_minutes: float | None = None
    cost_usd: float | None = None
    cost_is_estimate: bool = True


def _in_plan(plan: Plan, job_name: str) -> bool:
    echo = plan.document.inputs.model_dump()
    return any(isinstance(j, dict) and j.get("name") == job_name for j in echo.get("training") or [])


def request_state(row: RequestRow, plan: Plan | None, now: datetime) -> RequestState:
    """The state of ``row`` in ``plan`` at ``now`` (see the module docstring)."""
    estimate = row.spec.get("estimate_usd")
    if row.status == "cancelled":
        return RequestState("cancelled", "cancelled", cost_usd=None)
    if row.feed_error:
        return RequestState("unserved", f"left out of the plan: {row.feed_error}", cost_usd=estimate)
    if plan is None or not _in_plan(plan, row.job_name):
        why = "no plan yet" if plan is None else "submitted after the current plan"
        return RequestState("queued", f"queued: waiting for the next replan ({why})", cost_usd=estimate)
    placements = [p for p in plan.document.training if p.job == row.job_name]
    if placements:
        p = min(placements, key=lambda x: x.run)
        cost = plan.document.costs.by_workload.get(row.job_name, p.cost_usd)
        state: State = "done" if p.end <= now else "running" if p.start <= now else "planned"
        detail = {
            "planned": f"planned: starts {p.start:%Y-%m-%d %H:%M}Z",
            "running": f"running since {p.start:%Y-%m-%d %H:%M}Z, until {p.end:%Y-%m-%d %H:%M}Z",
            "done": f"done at {p.end:%Y-%m-%d %H:%M}Z",
        }[state]
        return RequestState(
            state, detail, start=p.start, end=p.end, offering=p.offering, tier=str(p.tier),
            placement_group=p.placement_group, nodes=p.nodes,
            checkpoint_interval_minutes=p.checkpoint_interval_minutes, cost_usd=cost, cost_is_estimate=False,
        )  # fmt: skip
    reasons = [
        u.reason
        for u in plan.document.unserved
        if isinstance(u, UnservedTraining) and u.workload == row.job_name
    ]
    reason = reasons[0] if reasons else "the plan has no placement for it"
    return RequestState("unserved", f"unserved: {reason}", cost_usd=estimate)


def default_start(scenario: Scenario, now: datetime) -> datetime:
    """A request without an earliest start may start from the next whole hour (or the horizon's start)."""
    hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return max(hour, scenario.horizon.start)
