"""Who is asking, and may they: the FastAPI dependencies every route goes through.

- A page user comes from the session: the signed cookie carries a random session id (``sid``) and the
  portal's ``portal_sessions`` table says whether that session is live (not signed out, not past its end,
  its user not disabled, no password change since); a page that needs one sends an anonymous visitor to
  ``/login`` (303). A disabled user, an ended session and an expired or revoked token are anonymous.
  An API caller presents ``Authorization: Bearer <token>``; API reads also accept the session (a
  browser's fetch), API writes only the bearer token (not CSRF-prone: a browser never adds it on its
  own). Anonymous API calls get 401.
- Every form POST checks the session's CSRF token (:func:`check_csrf`: 403 when missing or wrong).
- Objects of a team the caller is not in are 404, as if they did not exist (no leak of existence);
  admins see all. A member (not a lead) who tries to change the team's requests gets 403; a non-admin on
  an admin route gets 403 (the admin pages' existence is no secret).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request

from planner.operations.errors import LoginRequired
from planner.operations.portal.security import new_csrf_token, new_session_id, same_token, token_digest
from planner.operations.portal.service import Portal
from planner.operations.portal.store import RequestRow, TeamRow, UserRow

__all__ = [
    "ApiUser",
    "ApiWriter",
    "ObjectId",
    "PageUser",
    "check_csrf",
    "csrf_token",
    "managed_request",
    "managed_team",
    "portal_of",
    "session_digest",
    "sign_in",
    "sign_out",
    "visible_request",
    "visible_team",
]


def portal_of(request: Request) -> Portal:
    portal: Portal = request.app.state.portal
    return portal


def csrf_token(request: Request) -> str:
    """The session's CSRF token, made on first use."""
    token = request.session.get("csrf")
    if not isinstance(token, str) or not token:
        token = new_csrf_token()
        request.session["csrf"] = token
    return token


async def check_csrf(request: Request) -> None:
    form = await request.form()
    given = form.get("csrf_token")
    if not same_token(request.session.get("csrf"), given if isinstance(given, str) else None):
        raise HTTPException(403, "CSRF token missing or wrong: reload the page and try again")


def session_digest(request: Request) -> str | None:
    """The stored digest of the cookie's session id (None: no signed-in session in the cookie)."""
    sid = request.session.get("sid")
    return token_digest(sid) if isinstance(sid, str) and sid else None


def _session_user(request: Request) -> UserRow | None:
    digest = session_digest(request)
    return None if digest is None else portal_of(request).store.session_user(digest)


def sign_in(request: Request, user: UserRow) -> None:
    """A fresh session for ``user``: a new id (and CSRF token) in the cookie, its digest in the table,
    ending after the app's session lifetime. The old cookie's session, if any, ends (no fixation)."""
    sign_out(request)
    sid = new_session_id()
    portal_of(request).store.start_session(user.id, token_digest(sid), request.app.state.session_seconds)
    request.session["sid"] = sid
    csrf_token(request)


def sign_out(request: Request) -> None:
    """End the cookie's session in the table (a copy of the cookie is no session after this) and clear
    the cookie."""
    digest = session_digest(request)
    if digest is not None:
        portal_of(request).store.end_session(digest)
    request.session.clear()


def _bearer_user(request: Request) -> UserRow | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return portal_of(request).store.token_user(token_digest(token.strip()))


def _unauthorized() -> HTTPException:
    return HTTPException(
        401, "sign in: an API token (Authorization: Bearer ...)", {"WWW-Authenticate": "Bearer"}
    )


def page_user(request: Request) -> UserRow:
    user = _session_user(request)
    if user is None:
        raise LoginRequired(request.url.path)
    return user


def api_user(request: Request) -> UserRow:
    user = _bearer_user(request) if "authorization" in request.headers else _session_user(request)
    if user is None:
        raise _unauthorized()
    return user


def api_writer(request: Request) -> UserRow:
    user = _bearer_user(request)
    if user is None:
        raise _unauthorized()
    return user


#: An id in the path: the tables' ids are 32-bit integers on PostgreSQL (and 64-bit on SQLite); a larger
#: number is no object's, answered 422 before any query.
ObjectId = Annotated[int, Path(ge=1, le=2**31 - 1)]
PageUser = Annotated[UserRow, Depends(page_user)]
ApiUser = Annotated[UserRow, Depends(api_user)]
ApiWriter = Annotated[UserRow, Depends(api_writer)]


def not_found(what: str) -> HTTPException:
    return HTTPException(404, f"{what} not found")


def visible_team(portal: Portal, user: UserRow, name: str) -> TeamRow:
    team = portal.store.team(name)
    if team is None or not user.sees(name):
        raise not_found("team")
    return team


def managed_team(portal: Portal, user: UserRow, name: str) -> TeamRow:
    team = visible_team(portal, user, name)
    if not user.manages(name):
        raise HTTPException(403, "only the team's leads change its requests")
    return team


def visible_request(portal: Portal, user: UserRow, request_id: int) -> RequestRow:
    row = portal.store.request(request_id)
    if row is None or not user.sees(row.team):
        raise not_found("request")
    return row


def managed_request(portal: Portal, user: UserRow, request_id: int) -> RequestRow:
    row = visible_request(portal, user, request_id)
    if not user.manages(row.team):
        raise HTTPException(403, "only the team's leads change its requests")
    return row


def require_admin(user: UserRow) -> None:
    if not user.is_admin:
        raise HTTPException(403, "platform admins only")
