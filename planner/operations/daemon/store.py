"""The daemon's state in SQL: cycles, the action journal, the price overlay, small facts and events.

SQLAlchemy 2 models on SQLite by default (a file beside the config; WAL and a busy timeout, so the CLI or
a test can read it while the daemon writes) or PostgreSQL by URL (teams that run the daemon highly
available). Every method is one short transaction in its own ``Session``: a killed process loses at most
the operation it was in, and :meth:`Store.journal` commits an action's intent *before* the action is sent,
which is what makes a crash resumable (``planner.operations.daemon.journal``).

A database that is briefly unavailable (``OperationalError``: SQLite locked past its busy timeout, a
PostgreSQL server restarting) is retried a bounded number of times with exponential backoff, then
:class:`StoreUnavailable` names the URL with its password masked.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    select,
    update,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from models.actions import Action, ActionResult
from planner.operations.daemon.logs import mask_url  # the one masking rule for URLs
from planner.operations.errors import StoreUnavailable
from providers.base import SpotPrice

__all__ = [
    "Cycle",
    "Event",
    "JournalEntry",
    "RetryPolicy",
    "Store",
    "action_key",
    "mask_url",
]

log = logging.getLogger("gpuplan.daemon.store")

T = TypeVar("T")

#: A key longer than this (a terminate of many nodes) keeps a hash of its node ids instead of the ids:
#: an index entry must stay small on every database (PostgreSQL's btree limit is ~2.7 kB).
_KEY_LIMIT: Final = 255
CYCLE_STATUSES: Final = ("running", "done", "failed", "crashed")
ENTRY_STATUSES: Final = ("pending", "done", "failed", "skipped")


def action_key(action: Action) -> str:
    """The idempotency key of an action: its client token (what the cloud dedupes by), or for the
    token-less ones (terminate, release, delete) ``kind:target:sorted node ids``, so the same intent
    maps to the same key in every cycle and process."""
    if action.token:
        return action.token
    ids = ",".join(sorted(action.node_ids))
    key = f"{action.kind}:{action.target}:{ids}"
    if len(key) > _KEY_LIMIT:
        digest = hashlib.sha256(ids.encode()).hexdigest()[:32]
        key = f"{action.kind}:{action.target[:150]}:{len(action.node_ids)}:{digest}"
    return key


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of an unavailable database: ``attempts`` in all, waits doubling from ``base``."""

    attempts: int = 5
    base_seconds: float = 0.1
    cap_seconds: float = 2.0

    def delay(self, attempt: int) -> float:
        return min(self.cap_seconds, self.base_seconds * 2**attempt)


# ----------------------------------------------------------------------------------------------------------
# tables


class _Base(DeclarativeBase):
    pass


class _CycleRow(_Base):
    __tablename__ = "gpuplan_cycles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(40))
    plan_id: Mapped[str] = mapped_column(String(120), index=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    status: Mapped[str] = mapped_column(String(20), index=True)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class _JournalRow(_Base):
    __tablename__ = "gpuplan_journal"
    __table_args__ = (UniqueConstraint("plan_id", "key", name="gpuplan_journal_plan_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cycle_id: Mapped[int] = mapped_column(Integer, index=True)
    plan_id: Mapped[str] = mapped_column(String(120))
    action_id: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(40))
    target: Mapped[str] = mapped_column(String(200))
    key: Mapped[str] = mapped_column(String(_KEY_LIMIT))
    action: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20), index=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class _PriceRow(_Base):
    __tablename__ = "gpuplan_prices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    offering: Mapped[str] = mapped_column(String(200), index=True)
    usd_per_hour: Mapped[float] = mapped_column(Float)
    zone: Mapped[str | None] = mapped_column(String(80), nullable=True)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class _StateRow(_Base):
    __tablename__ = "gpuplan_state"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON, nullable=True)
    updated: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class _EventRow(_Base):
    __tablename__ = "gpuplan_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    kind: Mapped[str] = mapped_column(String(60), index=True)
    message: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


# ----------------------------------------------------------------------------------------------------------
# what the store returns (plain values: no session outlives a method)


@dataclass(frozen=True)
class Cycle:
    id: int
    kind: str
    plan_id: str
    at: datetime
    started: datetime
    finished: datetime | None
    status: str
    summary: dict[str, Any] | None


@dataclass(frozen=True)
class JournalEntry:
    """One journaled action: what was asked (``action``), its key, and what came of it."""

    id: int
    cycle_id: int
    plan_id: str
    action_id: int
    kind: str
    target: str
    key: str
    action: Action
    status: str
    result: ActionResult | None
    created: datetime
    updated: datetime


@dataclass(frozen=True)
class Event:
    id: int
    at: datetime
    kind: str
    message: str
    data: dict[str, Any] | None


def _utc(value: datetime) -> datetime:
    """SQLite hands datetimes back naive; every time the store keeps is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _maybe_utc(value: datetime | None) -> datetime | None:
    return None if value is None else _utc(value)


def _cycle(row: _CycleRow) -> Cycle:
    return Cycle(
        id=row.id,
        kind=row.kind,
        plan_id=row.plan_id,
        at=_utc(row.at),
        started=_utc(row.started),
        finished=_maybe_utc(row.finished),
        status=row.status,
        summary=row.summary,
    )


def _entry(row: _JournalRow) -> JournalEntry:
    return JournalEntry(
        id=row.id,
        cycle_id=row.cycle_id,
        plan_id=row.plan_id,
        action_id=row.action_id,
        kind=row.kind,
        target=row.target,
        key=row.key,
        action=Action.model_validate(row.action),
        status=row.status,
        result=None if row.result is None else ActionResult.model_validate(row.result),
        created=_utc(row.created),
        updated=_utc(row.updated),
    )


def _now() -> datetime:
    return datetime.now(UTC)


# ----------------------------------------------------------------------------------------------------------
# the store


class Store:
    """The daemon's database at ``url`` (``sqlite:///path`` or ``postgresql+psycopg2://...``); the tables
    are created on open. ``sleep`` and ``retry`` bound the waits for a database that is briefly down;
    ``busy_timeout_seconds`` is how long SQLite itself waits for another process's write lock first."""

    def __init__(
        self,
        url: str,
        *,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], datetime] = _now,
        busy_timeout_seconds: float = 5.0,
    ) -> None:
        self.url = url
        self.masked_url = mask_url(url)
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self.engine = _engine(url, busy_timeout_seconds)
        self._run(lambda session: _Base.metadata.create_all(session.connection()))

    def now(self) -> datetime:
        """The store's clock: the time it stamps entries with (what their ages are measured against)."""
        return _utc(self._clock())

    def close(self) -> None:
        """Release the connections (a test's server can then stop cleanly)."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------------
    # retries

    def _run(self, body: Callable[[Session], T]) -> T:
        """``body`` in one transaction, committed; an OperationalError rolls it back and the whole
        transaction is tried again (each is short and idempotent as a unit), at most ``attempts`` times."""
        last: OperationalError | None = None
        for attempt in range(self._retry.attempts):
            try:
                with Session(self.engine, expire_on_commit=False) as session, session.begin():
                    return body(session)
            except OperationalError as exc:
                last = exc
                if attempt < self._retry.attempts - 1:
                    wait = self._retry.delay(attempt)
                    log.warning(
                        "database %s unavailable (%s); retry %d in %.2f s",
                        self.masked_url,
                        _reason(exc, self.url),
                        attempt + 1,
                        wait,
                    )
                    self._sleep(wait)
        assert last is not None
        raise StoreUnavailable(
            f"the daemon's database {self.masked_url} is unavailable after {self._retry.attempts} attempts: "
            f"{_reason(last, self.url)}"
        ) from None

    # ------------------------------------------------------------------------------------------------------
    # cycles

    def begin_cycle(self, kind: str, plan_id: str, at: datetime) -> int:
        """A cycle (reconcile, replan, ...) starts: it is ``running`` until finished, so a process killed
        in it leaves a row :meth:`mark_crashed_cycles` finds."""

        def body(session: Session) -> int:
            row = _CycleRow(
                kind=kind, plan_id=plan_id, at=_utc(at), started=self._clock(), status="running", summary=None
            )
            session.add(row)
            session.flush()
            return row.id

        return self._run(body)

    def finish_cycle(self, cycle_id: int, status: str, summary: dict[str, Any] | None = None) -> None:
        if status not in CYCLE_STATUSES:
            raise ValueError(f"cycle status {status!r}; valid: {', '.join(CYCLE_STATUSES)}")
        self._run(
            lambda session: session.execute(
                update(_CycleRow)
                .where(_CycleRow.id == cycle_id)
                .values(status=status, finished=self._clock(), summary=summary)
            )
        )

    def mark_crashed_cycles(self) -> int:
        """Cycles still ``running`` when the daemon starts were left by a killed process: ``crashed``.
        Their number."""

        def body(session: Session) -> int:
            rows = session.scalars(select(_CycleRow).where(_CycleRow.status == "running")).all()
            for row in rows:
                row.status = "crashed"
                row.finished = self._clock()
            return len(rows)

        return self._run(body)

    def cycles(self, kind: str | None = None) -> list[Cycle]:
        def body(session: Session) -> list[Cycle]:
            query = select(_CycleRow).order_by(_CycleRow.id)
            if kind is not None:
                query = query.where(_CycleRow.kind == kind)
            return [_cycle(r) for r in session.scalars(query)]

        return self._run(body)

    # ------------------------------------------------------------------------------------------------------
    # the journal

    def journal(self, cycle_id: int, plan_id: str, action: Action) -> JournalEntry | None:
        """Record the intent to send ``action`` (``pending``) and commit before returning: a crash after
        this leaves a trace to resume from. None when its key is journaled ``done`` already (the same
        intent must not be sent again). A key journaled ``failed`` or ``skipped`` is taken up again as
        ``pending`` in this cycle; one still ``pending`` (in doubt) is returned as it is: sending it again
        with its key is safe, the cloud dedupes by the token."""
        key = action_key(action)
        document = action.model_dump(mode="json")

        def body(session: Session) -> JournalEntry | None:
            row = session.scalars(
                select(_JournalRow).where(_JournalRow.plan_id == plan_id, _JournalRow.key == key)
            ).one_or_none()
            now = self._clock()
            if row is None:
                row = _JournalRow(
                    cycle_id=cycle_id,
                    plan_id=plan_id,
                    action_id=action.id,
                    kind=str(action.kind),
                    target=action.target[:200],
                    key=key,
                    action=document,
                    status="pending",
                    result=None,
                    created=now,
                    updated=now,
                )
                session.add(row)
                session.flush()
            elif row.status == "done":
                return None
            elif row.status in ("failed", "skipped"):
                row.cycle_id, row.action_id, row.action = cycle_id, action.id, document
                row.status, row.result, row.updated = "pending", None, now
            return _entry(row)

        for _ in range(2):  # a concurrent insert of the same key: read it back and decide again
            try:
                return self._run(body)
            except IntegrityError:
                continue
        raise StoreUnavailable(f"journal key {key} of {plan_id} kept clashing in {self.masked_url}")

    def finish(self, entry_id: int, result: ActionResult) -> None:
        """What came of a journaled action: its status becomes the result's (done, failed, skipped)."""
        self._run(
            lambda session: session.execute(
                update(_JournalRow)
                .where(_JournalRow.id == entry_id)
                .values(status=result.status, result=result.model_dump(mode="json"), updated=self._clock())
            )
        )

    def entry(self, plan_id: str, key: str) -> JournalEntry | None:
        """The entry of ``key`` in ``plan_id``'s journal, if any."""

        def body(session: Session) -> JournalEntry | None:
            row = session.scalars(
                select(_JournalRow).where(_JournalRow.plan_id == plan_id, _JournalRow.key == key)
            ).one_or_none()
            return None if row is None else _entry(row)

        return self._run(body)

    def done_entries(self, plan_id: str, keys: Iterable[str]) -> dict[str, JournalEntry]:
        """Key -> entry for those of ``keys`` journaled ``done``: what an apply must not send again."""
        wanted = list(dict.fromkeys(keys))

        def body(session: Session) -> dict[str, JournalEntry]:
            found: dict[str, JournalEntry] = {}
            for start in range(0, len(wanted), 500):  # bounded IN lists
                chunk = wanted[start : start + 500]
                query = select(_JournalRow).where(
                    _JournalRow.plan_id == plan_id, _JournalRow.status == "done", _JournalRow.key.in_(chunk)
                )
                found.update({r.key: _entry(r) for r in session.scalars(query)})
            return found

        return self._run(body)

    def pending(self, plan_id: str) -> list[JournalEntry]:
        """Entries journaled but never finished: sent or not, a crash came between (oldest first)."""
        return self.entries(plan_id, status="pending")

    def entries(self, plan_id: str | None = None, *, status: str | None = None) -> list[JournalEntry]:
        def body(session: Session) -> list[JournalEntry]:
            query = select(_JournalRow).order_by(_JournalRow.id)
            if plan_id is not None:
                query = query.where(_JournalRow.plan_id == plan_id)
            if status is not None:
                query = query.where(_JournalRow.status == status)
            return [_entry(r) for r in session.scalars(query)]

        return self._run(body)

    def count_entries(self, status: str | None = None) -> int:
        """How many entries (of a status): cheap enough to poll."""

        def body(session: Session) -> int:
            query = select(func.count()).select_from(_JournalRow)
            if status is not None:
                query = query.where(_JournalRow.status == status)
            return int(session.scalar(query) or 0)

        return self._run(body)

    # ------------------------------------------------------------------------------------------------------
    # prices

    def record_prices(self, prices: Iterable[SpotPrice]) -> int:
        """Append the spot prices ``refresh_prices`` read (the overlay keeps their history); how many."""
        rows = [
            _PriceRow(offering=p.offering, usd_per_hour=p.usd_per_hour, zone=p.zone, seen_at=_utc(p.at))
            for p in prices
        ]

        def body(session: Session) -> int:
            session.add_all(rows)
            return len(rows)

        return self._run(body)

    def latest_prices(self) -> dict[str, tuple[float, datetime]]:
        """Offering -> (USD per node-hour, when it was seen) of its newest price (any zone; the lowest of
        the newest time when several zones share it): the overlay a replan reads, with its age."""

        def body(session: Session) -> dict[str, tuple[float, datetime]]:
            newest = (
                select(_PriceRow.offering, func.max(_PriceRow.seen_at).label("seen"))
                .group_by(_PriceRow.offering)
                .subquery()
            )
            query = select(_PriceRow.offering, _PriceRow.usd_per_hour, _PriceRow.seen_at).join(
                newest, (_PriceRow.offering == newest.c.offering) & (_PriceRow.seen_at == newest.c.seen)
            )
            found: dict[str, tuple[float, datetime]] = {}
            for offering, usd, seen in session.execute(query):
                if offering not in found or usd < found[offering][0]:
                    found[offering] = (float(usd), _utc(seen))
            return found

        return self._run(body)

    # ------------------------------------------------------------------------------------------------------
    # state

    def get_state(self, key: str, default: Any = None) -> Any:
        """A small fact the daemon keeps between cycles (current plan dir, last replan, inputs digest)."""

        def body(session: Session) -> Any:
            row = session.get(_StateRow, key)
            return default if row is None else row.value

        return self._run(body)

    def set_state(self, key: str, value: Any) -> None:
        """Set ``key`` to ``value`` (any JSON value)."""

        def body(session: Session) -> None:
            row = session.get(_StateRow, key)
            if row is None:
                session.add(_StateRow(key=key, value=value, updated=self._clock()))
            else:
                row.value, row.updated = value, self._clock()

        self._run(body)

    # ------------------------------------------------------------------------------------------------------
    # events

    def record_event(
        self, kind: str, message: str, *, at: datetime | None = None, data: dict[str, Any] | None = None
    ) -> int:
        """Something worth keeping beside the logs (an interruption seen, a warning, a resume); its id."""

        def body(session: Session) -> int:
            row = _EventRow(at=_utc(at or self._clock()), kind=kind, message=message, data=data)
            session.add(row)
            session.flush()
            return row.id

        return self._run(body)

    def events(self, kind: str | None = None, *, limit: int | None = None) -> list[Event]:
        """Events oldest first (the newest ``limit`` of them when given)."""

        def body(session: Session) -> list[Event]:
            query = select(_EventRow).order_by(_EventRow.id.desc())
            if kind is not None:
                query = query.where(_EventRow.kind == kind)
            if limit is not None:
                query = query.limit(limit)
            rows = list(session.scalars(query))
            return [Event(r.id, _utc(r.at), r.kind, r.message, r.data) for r in reversed(rows)]

        return self._run(body)


def _engine(url: str, busy_timeout_seconds: float) -> Engine:
    """An engine for ``url``. SQLite: WAL (readers never wait for the writer) and a busy timeout (a
    writer waits that long for another's lock before it is an OperationalError, which ``_run`` retries).
    PostgreSQL: connections checked before use, so a restarted server costs a reconnect, not an error."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": busy_timeout_seconds})
        busy_ms = int(busy_timeout_seconds * 1000)

        @event.listens_for(engine, "connect")
        def _pragmas(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            try:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            finally:
                cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, connect_args=_connect_args(parsed.get_backend_name()))


def _connect_args(backend: str) -> dict[str, Any]:
    return {"connect_timeout": 5} if backend == "postgresql" else {}


def _reason(exc: OperationalError, url: str) -> str:
    """The driver's first line of ``exc``, with the URL's password masked should the driver echo it."""
    text = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else type(exc).__name__
    try:
        password = make_url(url).password
    except Exception:
        password = None
    if password:
        text = text.replace(str(password), "***")
    return text
