"""What the pages and the API share: the portal's state (stores, clock, replan), the current plan and the
scenario as read (cached by file), each request's queue position and state, a team's planned use and its
chargeback. No HTTP here: ``pages.py`` and ``api.py`` call these and check who may see what.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from models.plan import Plan
from planner.operations.portal.queue import JOB_FIELDS, RequestState, apply_teams, request_state
from planner.operations.portal.store import PortalStore, RequestRow, TeamRow, UserRow

if TYPE_CHECKING:
    from models.inputs import Inputs
    from planner.operations.daemon.config import DaemonConfig
    from planner.operations.daemon.daemon import Daemon
    from planner.operations.daemon.store import Store
    from planner.operations.portal.measured import Measured, MeasuredSource

__all__ = ["MAX_QUEUED_PER_TEAM", "Portal", "QueueEntry", "ReplanResult", "without_paths"]

log = logging.getLogger("gpuplan.portal")

#: Queued requests one team may have at once: the replan solves every one, so a script in a loop must
#: not make it slow for everyone (cancelled and finished requests do not count).
MAX_QUEUED_PER_TEAM = 200
#: An absolute path in a message (``/srv/gpuplan/plans/x/plan.json``), not one inside a URL
#: (``sqlite:///...``): its directories are the server's business, its last part names the file.
_ABSOLUTE_PATH = re.compile(r"(?<![\w:/.])/(?:[^\s/'\"]+/)+([^\s/'\"]*)")


def without_paths(text: str) -> str:
    """``text`` with each absolute path cut to its last part: what the portal says to its users names
    files, never where the server keeps them."""
    return _ABSOLUTE_PATH.sub(lambda m: m.group(1) or "(a directory)", text)


@dataclass(frozen=True)
class QueueEntry:
    row: RequestRow
    position: int | None
    state: RequestState


@dataclass(frozen=True)
class ReplanResult:
    """A replan's outcome for its caller: the message without server paths, the new plan's name."""

    ok: bool
    message: str
    plan: str | None


class _NoCloud:
    """The portal's daemon only replans and reads schedules: it never touches a cloud, so it gets no
    provider (any call on it would be a bug, and fails loudly)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"the portal does not call the cloud ({name})")


@dataclass
class Portal:
    """One portal: the daemon's config and store, the portal's tables, and the clock (tests set it)."""

    config: DaemonConfig
    daemon_store: Store
    store: PortalStore
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    planner: Callable[..., Path] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _replan_lock: threading.Lock = field(default_factory=threading.Lock)
    _plan: tuple[tuple[str, int], Plan] | None = None
    _inputs: tuple[int, Inputs] | None = None
    _daemon: Daemon | None = None
    _charge: dict[tuple[tuple[str, int], str | None], Any] = field(default_factory=dict)
    _measured: MeasuredSource | None = None

    # -- the daemon's side ---------------------------------------------------------------------------------

    @property
    def daemon(self) -> Daemon:
        from planner.operations.daemon.daemon import Daemon
        from planner.operations.portal.queue import feed_scenario
        from providers.base import Provider

        if self._daemon is None:
            kwargs: dict[str, Any] = {
                "provider": cast(Provider, _NoCloud()),
                "store": self.daemon_store,
                "feeds": [feed_scenario],
            }
            if self.planner is not None:
                kwargs["planner"] = self.planner
            self._daemon = Daemon(self.config, **kwargs)
        return self._daemon

    def plan(self) -> Plan | None:
        """The plan the daemon's store names, read again only when plan.json changed; None before the
        first replan (or when the directory is gone: the page says there is no plan)."""
        where = self.daemon_store.get_state("plan_dir")
        if where is None:
            return None
        document = Path(where) / "plan.json"
        if not document.is_file():
            return None
        key = (str(where), document.stat().st_mtime_ns)
        with self._lock:
            if self._plan is None or self._plan[0] != key:
                self._plan = (key, Plan.read(Path(where)))
            return self._plan[1]

    def plan_key(self) -> tuple[str, int] | None:
        return None if self._plan is None else self._plan[0]

    def inputs(self) -> Inputs:
        """The daemon's scenario and catalog, read again when the scenario file changed."""
        from models.inputs import load_inputs

        path = self.config.scenario_path
        stamp = path.stat().st_mtime_ns
        with self._lock:
            if self._inputs is None or self._inputs[0] != stamp:
                self._inputs = (stamp, load_inputs(path))
            return self._inputs[1]

    def last_replan(self) -> datetime | None:
        value = self.daemon_store.get_state("last_replan")
        return None if value is None else datetime.fromisoformat(value)

    def next_replan(self) -> datetime | None:
        """When the daemon's replan job is next due (None: at once, it never ran)."""
        return self.daemon.next_run("replan")

    def replan(self, actor: str) -> ReplanResult:
        """Plan again now, through the daemon's own replan job (the portal's requests fed in by the
        hook in ``plan_scenario``), recorded in the audit log. One at a time."""
        with self._replan_lock:
            now = self.clock()
            daemon = self.daemon
            before = self.daemon_store.get_state("last_replan")
            daemon.run("replan", now)  # a failure is recorded (an event, the backoff), never raised
        count, _at = daemon.failures("replan")
        after = self.daemon_store.get_state("last_replan")
        if count or after == before:
            failed = self.daemon_store.events("job-failed", limit=1)
            message = failed[-1].message if failed else "the replan did not run"
            self.store.record(actor, "replan", "plan", "replan", ok=False, message=message)
            return ReplanResult(False, without_paths(message), None)
        self.store.record(actor, "replan", "plan", "replan", ok=True, plan=self.plan_name())
        return ReplanResult(True, f"planned at {now:%Y-%m-%d %H:%M}Z", self.plan_name())

    def plan_name(self) -> str | None:
        """The current plan's name (its directory's last part), None before the first replan."""
        where = self.daemon_store.get_state("plan_dir")
        return None if where is None else Path(where).name

    # -- queues --------------------------------------------------------------------------------------------

    def queue(self, team: str) -> list[QueueEntry]:
        """The team's requests in queue order: open ones (queued, planned, running, unserved) numbered
        from 1, then done and cancelled ones without a position."""
        plan = self.plan()
        now = self.clock()
        entries = [(row, request_state(row, plan, now)) for row in self.store.requests(team)]
        open_ = [e for e in entries if e[1].state not in ("done", "cancelled")]
        closed = [e for e in entries if e[1].state in ("done", "cancelled")]
        return [
            *(QueueEntry(row, k + 1, state) for k, (row, state) in enumerate(open_)),
            *(QueueEntry(row, None, state) for row, state in closed),
        ]

    def entry(self, row: RequestRow) -> QueueEntry:
        return next(e for e in self.queue(row.team) if e.row.id == row.id)

    # -- use and cost --------------------------------------------------------------------------------------

    def usage(self, team: TeamRow) -> tuple[list[tuple[datetime, float]], float, int]:
        """The team's planned GPUs per period (every period of the horizon), its GPU-hours, period hours."""
        plan = self.plan()
        if plan is None:
            return [], 0.0, 1
        horizon = plan.document.horizon
        frame = plan.allocations
        mine = frame[frame["team"] == team.name]
        by_period = mine.groupby("period")["gpus"].sum()
        points = [
            (horizon.start + timedelta(hours=k * horizon.period_hours), float(by_period.get(k, 0.0)))
            for k in range(horizon.periods)
        ]
        return points, float(mine["gpus"].sum()) * horizon.period_hours, horizon.period_hours

    def measured(self, team: str) -> Measured | str | None:
        """``team``'s measured use from the config's ``history:`` source (None without one; a line of text
        when it cannot be read): planner/operations/portal/measured.py."""
        if self.config.history is None:
            return None
        from planner.operations.portal.measured import MeasuredSource

        with self._lock:
            if self._measured is None:
                self._measured = MeasuredSource(self.config)
        found = self._measured.for_team(team)
        return without_paths(found) if isinstance(found, str) else found

    def months(self) -> list[str]:
        plan = self.plan()
        if plan is None:
            return []
        from models.chargeback import month_of

        h = plan.document.horizon
        seen: dict[str, None] = {}
        for k in range(0, h.hours, 24):
            seen[month_of(h.start + timedelta(hours=k))] = None
        seen[month_of(h.start + timedelta(hours=h.hours - 1))] = None
        return list(seen)

    def default_month(self) -> str | None:
        from models.chargeback import month_of

        months = self.months()
        now = month_of(self.clock())
        return now if now in months else (months[0] if months else None)

    def chargeback(self, team: str, month: str | None) -> tuple[list[dict[str, Any]], float, str]:
        """The team's chargeback rows for ``month`` (project, tier, GPU-hours, cost, idle share) by
        ``models.chargeback`` with the ``guarantees`` idle rule, their total, and the rule's name."""
        from models.chargeback import IdleRule, charge_plan

        plan = self.plan()
        key = self.plan_key()
        if plan is None or key is None:
            return [], 0.0, str(IdleRule.GUARANTEES)
        with self._lock:
            if (key, month) not in self._charge:
                self._charge[(key, month)] = charge_plan(plan, IdleRule.GUARANTEES, month)
            result = self._charge[(key, month)]
        rows = result.rows[result.rows["team"] == team]
        grouped = rows.groupby(["project", "tier"], as_index=False)[
            ["gpu_hours", "cost_usd", "idle_usd"]
        ].sum()
        records = [
            {
                "project": str(r.project),
                "tier": str(r.tier),
                "gpu_hours": float(r.gpu_hours),
                "cost_usd": float(r.cost_usd),
                "idle_usd": float(r.idle_usd),
            }
            for r in grouped.itertuples()
        ]
        return records, float(rows["cost_usd"].sum()), str(IdleRule.GUARANTEES)

    # -- changes -------------------------------------------------------------------------------------------

    def submit(self, user: UserRow, team: TeamRow, fields: dict[str, Any], priority_class: str) -> RequestRow:
        """A new request of ``team`` (validated as its training job; InputError naming the field)."""
        from models.errors import InputError
        from planner.operations.portal.queue import default_start, estimate_usd, validate_request
        from planner.operations.portal.schemas import MAX_GPU_MODELS

        models = fields.get("gpu_models")
        if (
            isinstance(models, list) and len(models) > MAX_GPU_MODELS
        ):  # the form's list: the schema bounds the API's
            raise InputError(None, "gpu_models", f"at most {MAX_GPU_MODELS} GPU models, got {len(models)}")
        queued = len(self.store.requests(team.name, status="queued"))
        if queued >= MAX_QUEUED_PER_TEAM:
            raise InputError(
                None, None,
                f"{team.name} has {queued} queued requests, the most a team may have: cancel one first",
            )  # fmt: skip
        if priority_class not in team.allowed_classes:
            allowed = ", ".join(team.allowed_classes)
            raise InputError(
                None, "priority_class", f"{priority_class!r} is not allowed for {team.name}: {allowed}"
            )
        inputs = self.inputs()
        scenario = apply_teams(inputs.scenario, self.store.teams())
        fields = dict(fields)
        if fields.get("earliest_start") in (None, ""):
            fields["earliest_start"] = default_start(scenario, self.clock()).isoformat()
        job = validate_request(scenario, inputs.catalog, team.name, fields)
        spec = {
            "job": job.model_dump(mode="json", include=set(JOB_FIELDS), exclude_none=True),
            "estimate_usd": estimate_usd(scenario, inputs.catalog, job),
        }
        return self.store.add_request(team.name, job.name, spec, priority_class, user.username)

    def change(
        self, user: UserRow, row: RequestRow, *, priority_class: str | None = None, move: int = 0
    ) -> RequestRow:
        """A new priority class (one the team may use) or place in the queue; InputError otherwise."""
        from models.errors import InputError

        if row.status != "queued":
            raise InputError(None, None, f"request {row.id} is {row.status}: nothing to change")
        team = self.store.team(row.team)
        if priority_class is not None and (team is None or priority_class not in team.allowed_classes):
            allowed = ", ".join(team.allowed_classes if team else ())
            raise InputError(
                None, "priority_class", f"{priority_class!r} is not allowed for {row.team}: {allowed}"
            )
        changed = self.store.update_request(row.id, user.username, priority_class=priority_class, move=move)
        assert changed is not None
        return changed

    def cancel(self, user: UserRow, row: RequestRow) -> RequestRow:
        changed = self.store.update_request(row.id, user.username, cancel=True)
        assert changed is not None
        return changed

    def put_team(self, user: UserRow, name: str, data: dict[str, Any]) -> TeamRow:
        """Create or update team ``name``: checked as a scenario's ``teams:`` entry (same messages)."""
        from models.errors import InputError
        from models.scenario import parse
        from planner.operations.portal.store import PRIORITY_CLASSES

        team = {
            k: data[k] for k in ("guaranteed_gpus", "burst_gpus", "priority") if data.get(k) not in (None, "")
        }
        horizon = self.inputs().scenario.horizon.model_dump(mode="json")
        try:
            checked = parse({"name": "portal", "horizon": horizon, "teams": [{"name": name, **team}]}).teams[
                0
            ]
        except InputError as error:
            where = (error.where or "").removeprefix("teams[0]").lstrip(".") or None
            raise InputError(None, where, error.problem) from None
        classes = tuple(c for c in PRIORITY_CLASSES if c in (data.get("allowed_classes") or ()))
        if not classes:
            raise InputError(None, "allowed_classes", f"give at least one of {', '.join(PRIORITY_CLASSES)}")
        row = TeamRow(name, checked.guaranteed_gpus, checked.burst_gpus, checked.priority, classes)
        return self.store.put_team(row, user.username)
