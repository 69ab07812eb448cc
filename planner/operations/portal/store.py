"""The portal's tables, in the daemon's database: teams, users and their team roles, signed-in sessions,
API tokens, training requests, settings (the generated session secret), and the audit log of every change.

SQLAlchemy 2 on the engine of the daemon's :class:`planner.operations.daemon.store.Store` (SQLite in WAL mode
or PostgreSQL by URL), with table names prefixed ``portal_`` so they sit beside the daemon's ``gpuplan_``
tables. As in the daemon's store, every method is one short transaction and returns plain values (no session
outlives a call). Every change writes its audit row in the same transaction as the change, so there is no
change without its record.

Sessions live here, not in the cookie: the cookie carries a random session id, the table its SHA-256, so
signing out, a password change and an admin disabling the user end a session for good (a copied cookie
is worth nothing after that), and a read of the database gives no live session. A database made before
sessions, token expiry and disabled users existed gets the new columns at start (:func:`_add_columns`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    delete,
    inspect,
    select,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from planner.operations.errors import NameTaken

__all__ = [
    "PRIORITY_CLASSES",
    "ROLES",
    "AuditEntry",
    "PortalStore",
    "RequestRow",
    "SessionRow",
    "TeamRow",
    "TokenRow",
    "UserRow",
]

T = TypeVar("T")

#: Priority classes a request may have, highest first: the queue orders a team's requests by class, then
#: by their place in the class (submission order until a lead moves one).
PRIORITY_CLASSES: Final = ("high", "normal", "low")
#: A user's role in a team: a lead submits and manages the team's requests; a member only looks.
ROLES: Final = ("lead", "member")
REQUEST_STATUSES: Final = ("queued", "cancelled")
#: An API token made without an expiry (and one made before tokens had one: from its creation) ends after
#: this many days; a user picks 1 to MAX_TOKEN_DAYS.
DEFAULT_TOKEN_DAYS: Final = 90
MAX_TOKEN_DAYS: Final = 365


class _Base(DeclarativeBase):
    pass


class _Team(_Base):
    __tablename__ = "portal_teams"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    guaranteed_gpus: Mapped[int] = mapped_column(Integer, default=0)
    burst_gpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    priority: Mapped[str] = mapped_column(String(20), default="standard")
    allowed_classes: Mapped[list[str]] = mapped_column(JSON)


class _User(_Base):
    __tablename__ = "portal_users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(80), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)


class _Session(_Base):
    __tablename__ = "portal_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("portal_users.id"), index=True)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    #: a secret shown once on the next page (a new API token): here, not in the readable cookie
    note: Mapped[str | None] = mapped_column(Text, nullable=True)


class _Membership(_Base):
    __tablename__ = "portal_memberships"
    __table_args__ = (UniqueConstraint("user_id", "team", name="portal_membership_user_team"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("portal_users.id"), index=True)
    team: Mapped[str] = mapped_column(ForeignKey("portal_teams.name"), index=True)
    role: Mapped[str] = mapped_column(String(20))


class _Token(_Base):
    __tablename__ = "portal_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("portal_users.id"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(20))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_used: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    expires: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class _Request(_Base):
    __tablename__ = "portal_requests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    team: Mapped[str] = mapped_column(ForeignKey("portal_teams.name"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    priority_class: Mapped[str] = mapped_column(String(20))
    seq: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20), index=True)
    submitted_by: Mapped[str] = mapped_column(String(80))
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    feed_error: Mapped[str | None] = mapped_column(Text, nullable=True)


class _Setting(_Base):
    __tablename__ = "portal_settings"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class _Audit(_Base):
    __tablename__ = "portal_audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    actor: Mapped[str] = mapped_column(String(80))
    action: Mapped[str] = mapped_column(String(60))
    object_type: Mapped[str] = mapped_column(String(40))
    object_id: Mapped[str] = mapped_column(String(200))
    team: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


# ----------------------------------------------------------------------------------------------------------
# plain values


@dataclass(frozen=True)
class TeamRow:
    name: str
    guaranteed_gpus: int
    burst_gpus: int | None
    priority: str
    allowed_classes: tuple[str, ...]

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "guaranteed_gpus": self.guaranteed_gpus,
            "burst_gpus": self.burst_gpus,
            "priority": self.priority,
            "allowed_classes": list(self.allowed_classes),
        }


@dataclass(frozen=True)
class UserRow:
    id: int
    username: str
    password_hash: str
    is_admin: bool
    roles: dict[str, str]  # team -> role
    disabled: bool = False

    def leads(self, team: str) -> bool:
        return self.roles.get(team) == "lead"

    def sees(self, team: str) -> bool:
        return self.is_admin or team in self.roles

    def manages(self, team: str) -> bool:
        return self.is_admin or self.leads(team)


@dataclass(frozen=True)
class TokenRow:
    id: int
    user_id: int
    name: str
    prefix: str
    created: datetime
    last_used: datetime | None
    revoked: bool
    expires: datetime

    def expired(self, now: datetime) -> bool:
        return now >= self.expires


@dataclass(frozen=True)
class SessionRow:
    """A signed-in session as its user sees it (never its id: only the cookie holds that)."""

    id: int
    created: datetime
    expires: datetime


@dataclass(frozen=True)
class RequestRow:
    id: int
    team: str
    name: str
    spec: dict[str, Any]
    priority_class: str
    seq: int
    status: str
    submitted_by: str
    created: datetime
    updated: datetime
    feed_error: str | None

    @property
    def job_name(self) -> str:
        """The training job's name in the scenario the replan solves: unique by the request's id."""
        return f"{self.name}-r{self.id}"

    def record(self) -> dict[str, Any]:
        return {
            "team": self.team,
            "name": self.name,
            "spec": self.spec,
            "priority_class": self.priority_class,
            "seq": self.seq,
            "status": self.status,
        }


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime
    actor: str
    action: str
    object_type: str
    object_id: str
    team: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _team(row: _Team) -> TeamRow:
    return TeamRow(row.name, row.guaranteed_gpus, row.burst_gpus, row.priority, tuple(row.allowed_classes))


def _request(row: _Request) -> RequestRow:
    return RequestRow(
        id=row.id,
        team=row.team,
        name=row.name,
        spec=dict(row.spec),
        priority_class=row.priority_class,
        seq=row.seq,
        status=row.status,
        submitted_by=row.submitted_by,
        created=_utc(row.created),
        updated=_utc(row.updated),
        feed_error=row.feed_error,
    )


def _token_expires(row: _Token) -> datetime:
    """Its expiry; a token made before tokens had one ends ``DEFAULT_TOKEN_DAYS`` after its creation."""
    if row.expires is not None:
        return _utc(row.expires)
    return _utc(row.created) + timedelta(days=DEFAULT_TOKEN_DAYS)


def _token(row: _Token) -> TokenRow:
    return TokenRow(
        row.id, row.user_id, row.name, row.prefix, _utc(row.created),
        None if row.last_used is None else _utc(row.last_used), row.revoked, _token_expires(row),
    )  # fmt: skip


#: Columns added after the first release of these tables: (table, column, SQL type and default). A
#: database made before them gets them at start; ``create_all`` only makes missing tables.
_LATER_COLUMNS: Final = (
    ("portal_users", "disabled", "BOOLEAN NOT NULL DEFAULT FALSE"),
    ("portal_tokens", "expires", "TIMESTAMP WITH TIME ZONE"),
)


def _add_columns(engine: Engine) -> None:
    """``ALTER TABLE ... ADD COLUMN`` for each of :data:`_LATER_COLUMNS` the database lacks (SQLite and
    PostgreSQL both take this form; SQLite stores the type name as it is)."""
    found = inspect(engine)
    missing = [
        (table, column, kind)
        for table, column, kind in _LATER_COLUMNS
        if column not in {c["name"] for c in found.get_columns(table)}
    ]
    if not missing:
        return
    with engine.begin() as db:
        for table, column, kind in missing:
            db.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def _class_rank(name: str) -> int:
    return PRIORITY_CLASSES.index(name) if name in PRIORITY_CLASSES else len(PRIORITY_CLASSES)


class PortalStore:
    """The portal's tables on ``engine`` (created when missing). ``clock`` stamps rows and audit entries."""

    def __init__(self, engine: Engine, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.engine = engine
        self._clock = clock
        _Base.metadata.create_all(engine)
        _add_columns(engine)

    def now(self) -> datetime:
        return self._clock()

    def _run(self, body: Callable[[Session], T]) -> T:
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            return body(session)

    def _audit(
        self,
        session: Session,
        actor: str,
        action: str,
        object_type: str,
        object_id: str,
        team: str | None,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
    ) -> None:
        session.add(
            _Audit(
                at=self._clock(),
                actor=actor,
                action=action,
                object_type=object_type,
                object_id=object_id,
                team=team,
                before=before,
                after=after,
            )
        )

    # -- settings ------------------------------------------------------------------------------------------

    def setting(self, key: str, make: Callable[[], str]) -> str:
        """The setting ``key``, made by ``make`` and stored on first use (the first writer wins)."""

        def body(session: Session) -> str:
            row = session.get(_Setting, key)
            if row is None:
                row = _Setting(key=key, value=make())
                session.add(row)
            return row.value

        try:
            return self._run(body)
        except IntegrityError:  # another process stored it first
            return self._run(body)

    # -- teams ---------------------------------------------------------------------------------------------

    def teams(self) -> list[TeamRow]:
        return self._run(lambda s: [_team(r) for r in s.scalars(select(_Team).order_by(_Team.name))])

    def team(self, name: str) -> TeamRow | None:
        def body(session: Session) -> TeamRow | None:
            row = session.get(_Team, name)
            return None if row is None else _team(row)

        return self._run(body)

    def put_team(self, team: TeamRow, actor: str) -> TeamRow:
        """Create or update a team (its guarantee, burst, planner priority and allowed classes)."""

        def body(session: Session) -> TeamRow:
            row = session.get(_Team, team.name)
            before = None if row is None else _team(row).record()
            if row is None:
                row = _Team(name=team.name)
                session.add(row)
            row.guaranteed_gpus, row.burst_gpus = team.guaranteed_gpus, team.burst_gpus
            row.priority, row.allowed_classes = team.priority, list(team.allowed_classes)
            self._audit(session, actor, "team.put", "team", team.name, team.name, before, team.record())
            return team

        return self._run(body)

    # -- users ---------------------------------------------------------------------------------------------

    def _user(self, session: Session, row: _User) -> UserRow:
        roles = {
            m.team: m.role for m in session.scalars(select(_Membership).where(_Membership.user_id == row.id))
        }
        return UserRow(row.id, row.username, row.password_hash, row.is_admin, roles, bool(row.disabled))

    def user(self, username: str) -> UserRow | None:
        def body(session: Session) -> UserRow | None:
            row = session.scalars(select(_User).where(_User.username == username)).one_or_none()
            return None if row is None else self._user(session, row)

        return self._run(body)

    def user_by_id(self, user_id: int) -> UserRow | None:
        def body(session: Session) -> UserRow | None:
            row = session.get(_User, user_id)
            return None if row is None else self._user(session, row)

        return self._run(body)

    def users(self) -> list[UserRow]:
        return self._run(
            lambda s: [self._user(s, r) for r in s.scalars(select(_User).order_by(_User.username))]
        )

    def add_user(
        self, username: str, password_hash: str, *, is_admin: bool, roles: dict[str, str], actor: str
    ) -> UserRow:
        """A new user with ``roles`` (team -> lead/member); NameTaken if the name is taken."""

        def body(session: Session) -> UserRow:
            if session.scalars(select(_User).where(_User.username == username)).first() is not None:
                raise NameTaken(f"user {username!r} exists")
            row = _User(
                username=username, password_hash=password_hash, is_admin=is_admin, created=self._clock()
            )
            session.add(row)
            session.flush()
            for team, role in roles.items():
                session.add(_Membership(user_id=row.id, team=team, role=role))
            after = {"username": username, "is_admin": is_admin, "roles": roles}  # never the hash
            self._audit(session, actor, "user.add", "user", username, None, None, after)
            return UserRow(row.id, username, password_hash, is_admin, dict(roles))

        return self._run(body)

    def change_password(self, user_id: int, password_hash: str, actor: str) -> int:
        """A new password (by the user or an admin): every session of the user ends (a session someone
        else holds must not outlive the password it was opened with). The number of sessions ended."""

        def body(session: Session) -> int:
            row = session.get(_User, user_id)
            if row is None:
                return 0
            row.password_hash = password_hash
            ended = self._end_sessions(session, user_id)
            self._audit(
                session, actor, "user.password", "user", row.username, None, None, {"sessions_ended": ended}
            )
            return ended

        return self._run(body)

    def set_disabled(self, user_id: int, disabled: bool, actor: str) -> bool:
        """Disable (every session ends, every token stops working, sign-in refused) or enable a user;
        False when there is no such user. Tokens stay revoked-or-not as they were: enabling brings back
        the user's unexpired tokens, never a session."""

        def body(session: Session) -> bool:
            row = session.get(_User, user_id)
            if row is None:
                return False
            before = {"disabled": bool(row.disabled)}
            row.disabled = disabled
            ended = self._end_sessions(session, user_id) if disabled else 0
            if before["disabled"] != disabled:
                action = "user.disable" if disabled else "user.enable"
                after = {"disabled": disabled, "sessions_ended": ended}
                self._audit(session, actor, action, "user", row.username, None, before, after)
            return True

        return self._run(body)

    # -- sessions ------------------------------------------------------------------------------------------

    def start_session(self, user_id: int, digest: str, seconds: int) -> SessionRow:
        """A new session of ``user_id`` with id digest ``digest``, ending ``seconds`` from now. Sessions
        past their end are deleted here (so the table holds live sessions only, give or take)."""

        def body(session: Session) -> SessionRow:
            now = self._clock()
            session.execute(delete(_Session).where(_Session.expires <= now))
            row = _Session(
                digest=digest, user_id=user_id, created=now, expires=now + timedelta(seconds=seconds)
            )
            session.add(row)
            session.flush()
            return SessionRow(row.id, _utc(row.created), _utc(row.expires))

        return self._run(body)

    def session_user(self, digest: str) -> UserRow | None:
        """The user of the live session ``digest``: None when it ended, expired, or its user is disabled."""

        def body(session: Session) -> UserRow | None:
            row = session.scalars(select(_Session).where(_Session.digest == digest)).one_or_none()
            if row is None or self._clock() >= _utc(row.expires):
                return None
            user = session.get(_User, row.user_id)
            return None if user is None or user.disabled else self._user(session, user)

        return self._run(body)

    def end_session(self, digest: str) -> None:
        self._run(lambda s: s.execute(delete(_Session).where(_Session.digest == digest)))

    def end_sessions(self, user_id: int) -> int:
        """End every session of ``user_id`` (sign out everywhere); how many there were."""
        return self._run(lambda s: self._end_sessions(s, user_id))

    def _end_sessions(self, session: Session, user_id: int) -> int:
        rows = list(session.scalars(select(_Session).where(_Session.user_id == user_id)))
        for row in rows:
            session.delete(row)
        return len(rows)

    def sessions(self, user_id: int) -> list[SessionRow]:
        """The user's live sessions, oldest first."""

        def body(session: Session) -> list[SessionRow]:
            now = self._clock()
            query = select(_Session).where(_Session.user_id == user_id).order_by(_Session.id)
            rows = [SessionRow(r.id, _utc(r.created), _utc(r.expires)) for r in session.scalars(query)]
            return [r for r in rows if now < r.expires]

        return self._run(body)

    def put_note(self, digest: str, note: str | None) -> None:
        """A secret for session ``digest`` to show once (:meth:`take_note`)."""

        def body(session: Session) -> None:
            row = session.scalars(select(_Session).where(_Session.digest == digest)).one_or_none()
            if row is not None:
                row.note = note

        self._run(body)

    def take_note(self, digest: str) -> str | None:
        """The session's note, removed as it is read."""

        def body(session: Session) -> str | None:
            row = session.scalars(select(_Session).where(_Session.digest == digest)).one_or_none()
            if row is None:
                return None
            note, row.note = row.note, None
            return note

        return self._run(body)

    def set_password_hash(self, user_id: int, password_hash: str) -> None:
        """A rehash on login (argon2 parameters raised): not a change the audit log needs."""

        def body(session: Session) -> None:
            row = session.get(_User, user_id)
            if row is not None:
                row.password_hash = password_hash

        self._run(body)

    # -- tokens --------------------------------------------------------------------------------------------

    def add_token(
        self,
        user: UserRow,
        name: str,
        prefix: str,
        digest: str,
        *,
        days: int = DEFAULT_TOKEN_DAYS,
        expires: datetime | None = None,
    ) -> TokenRow:
        """A token of ``user`` ending ``days`` from now (or at ``expires``)."""

        def body(session: Session) -> TokenRow:
            now = self._clock()
            ends = expires if expires is not None else now + timedelta(days=days)
            row = _Token(user_id=user.id, name=name, prefix=prefix, digest=digest, created=now, expires=ends)
            session.add(row)
            session.flush()
            self._audit(
                session, user.username, "token.add", "token", str(row.id), None, None,
                {"name": name, "prefix": prefix, "expires": ends.isoformat()},
            )  # fmt: skip
            return _token(row)

        return self._run(body)

    def tokens(self, user_id: int) -> list[TokenRow]:
        return self._run(
            lambda s: [_token(r) for r in s.scalars(select(_Token).where(_Token.user_id == user_id))]
        )

    def token_user(self, digest: str) -> UserRow | None:
        """The user of the live token with ``digest`` (not revoked, not expired, its user not disabled);
        marks it used."""

        def body(session: Session) -> UserRow | None:
            row = session.scalars(select(_Token).where(_Token.digest == digest)).one_or_none()
            now = self._clock()
            if row is None or row.revoked or now >= _token_expires(row):
                return None
            user = session.get(_User, row.user_id)
            if user is None or user.disabled:
                return None
            row.last_used = now
            return self._user(session, user)

        return self._run(body)

    def revoke_token(self, user: UserRow, token_id: int) -> bool:
        """Revoke the user's own token ``token_id``; False when it is not theirs (or does not exist)."""

        def body(session: Session) -> bool:
            row = session.get(_Token, token_id)
            if row is None or row.user_id != user.id:
                return False
            before = {"name": row.name, "revoked": row.revoked}
            row.revoked = True
            self._audit(
                session, user.username, "token.revoke", "token", str(token_id), None, before,
                {"name": row.name, "revoked": True},
            )  # fmt: skip
            return True

        return self._run(body)

    # -- requests ------------------------------------------------------------------------------------------

    def add_request(
        self, team: str, name: str, spec: dict[str, Any], priority_class: str, actor: str
    ) -> RequestRow:
        def body(session: Session) -> RequestRow:
            now = self._clock()
            last = session.scalars(select(_Request.seq).order_by(_Request.seq.desc()).limit(1)).first()
            row = _Request(
                team=team, name=name, spec=spec, priority_class=priority_class, seq=(last or 0) + 1,
                status="queued", submitted_by=actor, created=now, updated=now,
            )  # fmt: skip
            session.add(row)
            session.flush()
            made = _request(row)
            self._audit(session, actor, "request.add", "request", str(row.id), team, None, made.record())
            return made

        return self._run(body)

    def request(self, request_id: int) -> RequestRow | None:
        def body(session: Session) -> RequestRow | None:
            row = session.get(_Request, request_id)
            return None if row is None else _request(row)

        return self._run(body)

    def requests(self, team: str | None = None, *, status: str | None = None) -> list[RequestRow]:
        """Requests in queue order: by team, priority class (highest first), then place in the class."""

        def body(session: Session) -> list[RequestRow]:
            query = select(_Request)
            if team is not None:
                query = query.where(_Request.team == team)
            if status is not None:
                query = query.where(_Request.status == status)
            rows = [_request(r) for r in session.scalars(query)]
            return sorted(rows, key=lambda r: (r.team, _class_rank(r.priority_class), r.seq, r.id))

        return self._run(body)

    def update_request(
        self,
        request_id: int,
        actor: str,
        *,
        priority_class: str | None = None,
        move: int = 0,
        cancel: bool = False,
    ) -> RequestRow | None:
        """Change a request's class, move it ``move`` places within its class among the team's queued
        requests (negative: towards the front), or cancel it; None when it does not exist."""

        def body(session: Session) -> RequestRow | None:
            row = session.get(_Request, request_id)
            if row is None:
                return None
            before = _request(row).record()
            if priority_class is not None and priority_class != row.priority_class:
                row.priority_class = priority_class
                # joins its new class at the end of it, as a new submission there would
                last = session.scalars(select(_Request.seq).order_by(_Request.seq.desc()).limit(1)).first()
                row.seq = (last or 0) + 1
            if move:
                peers = sorted(
                    session.scalars(
                        select(_Request).where(
                            _Request.team == row.team,
                            _Request.status == "queued",
                            _Request.priority_class == row.priority_class,
                        )
                    ),
                    key=lambda r: (r.seq, r.id),
                )
                at = peers.index(row)
                to = max(0, min(len(peers) - 1, at + move))
                if to != at:
                    seqs = [r.seq for r in peers]
                    moved = peers.pop(at)
                    peers.insert(to, moved)
                    for peer, seq in zip(peers, seqs, strict=True):
                        peer.seq = seq
            if cancel:
                row.status = "cancelled"
            row.updated = self._clock()
            after = _request(row).record()
            if after != before:
                action = "request.cancel" if cancel else "request.update"
                self._audit(session, actor, action, "request", str(row.id), row.team, before, after)
            return _request(row)

        return self._run(body)

    def set_feed_errors(self, errors: dict[int, str | None]) -> None:
        """What the last replan's feed said of each request (None: taken into the plan)."""

        def body(session: Session) -> None:
            for request_id, error in errors.items():
                row = session.get(_Request, request_id)
                if row is not None:
                    row.feed_error = error

        self._run(body)

    # -- audit ---------------------------------------------------------------------------------------------

    def record(self, actor: str, action: str, object_type: str, object_id: str, **data: Any) -> None:
        """An audited event that changes no portal row (a replan triggered)."""
        self._run(lambda s: self._audit(s, actor, action, object_type, object_id, None, None, data or None))

    def audit(self, *, team: str | None = None, limit: int = 200) -> list[AuditEntry]:
        """The newest ``limit`` entries, newest first."""

        def body(session: Session) -> list[AuditEntry]:
            query = select(_Audit).order_by(_Audit.id.desc()).limit(limit)
            if team is not None:
                query = query.where(_Audit.team == team)
            return [
                AuditEntry(
                    r.id, _utc(r.at), r.actor, r.action, r.object_type, r.object_id, r.team, r.before, r.after
                )
                for r in session.scalars(query)
            ]

        return self._run(body)
