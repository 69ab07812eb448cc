"""Passwords, API tokens, CSRF tokens and login rate limiting.

- Passwords: argon2id through argon2-cffi's ``PasswordHasher`` (its defaults follow RFC 9106's second
  recommended option: 64 MiB, 3 iterations, 4 lanes); a hash made with older parameters is rehashed at
  the next successful login (``check_needs_rehash``).
- API tokens: 32 random bytes (``secrets.token_urlsafe``) shown once; the database keeps the SHA-256 of
  the token only. A 256-bit random secret cannot be guessed, so a slow hash adds nothing there (the
  argon2 cost is for low-entropy passwords); SHA-256 lets a request find its token by an indexed lookup.
- Sessions: a random 256-bit id (``new_session_id``) in the signed cookie; the database keeps its SHA-256
  (as for API tokens), so the session ends when its row goes, whatever copies of the cookie exist.
- CSRF: one random token per session, in the signed session cookie; every form POST carries it in a
  hidden field and it is compared in constant time (``hmac.compare_digest``). API writes authenticate
  with bearer tokens, which a browser never sends on its own, so they need no CSRF token.
- Login rate limiting: failed logins counted per username and per client address in a sliding window;
  past the limit a login is refused with 429 and ``Retry-After`` before the password is even checked.
  The counts live in the process (one portal process per database, as the README says).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

__all__ = [
    "TOKEN_PREFIX",
    "LoginLimiter",
    "hash_password",
    "new_api_token",
    "new_csrf_token",
    "new_session_id",
    "same_token",
    "token_digest",
    "verify_password",
]

TOKEN_PREFIX = "gpl_"
_HASHER = PasswordHasher()
#: A hash checked when the username is unknown, so an unknown name costs as long as a wrong password
#: (the response time does not tell which names exist).
_DUMMY_HASH = _HASHER.hash(secrets.token_hex(16))


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def verify_password(stored: str | None, password: str) -> tuple[bool, str | None]:
    """Whether ``password`` matches ``stored`` (None: unknown user, checked against a dummy hash), and a
    new hash to store when the parameters changed since it was made."""
    try:
        _HASHER.verify(stored or _DUMMY_HASH, password)
    except (VerificationError, InvalidHashError):
        return False, None
    if stored is None:
        return False, None
    return True, (_HASHER.hash(password) if _HASHER.check_needs_rehash(stored) else None)


def new_api_token() -> tuple[str, str, str]:
    """A new token: (the token, shown once; its display prefix; the digest stored)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, token[:10], token_digest(token)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def new_session_id() -> str:
    return secrets.token_urlsafe(32)


def same_token(expected: str | None, given: str | None) -> bool:
    """Constant-time comparison; a missing token on either side never matches."""
    if not expected or not given:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8"))


@dataclass
class LoginLimiter:
    """At most ``per_user`` failed logins per username and ``per_client`` per client address within
    ``window_seconds``; :meth:`retry_after` says how long a refused one must wait."""

    per_user: int = 5
    per_client: int = 20
    window_seconds: float = 900.0
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, deque[float]] = field(default_factory=lambda: defaultdict(deque))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _keys(self, username: str, client: str) -> list[tuple[str, int]]:
        return [(f"user:{username.casefold()}", self.per_user), (f"client:{client}", self.per_client)]

    def _prune(self, key: str, now: float) -> deque[float]:
        times = self._failures[key]
        while times and times[0] <= now - self.window_seconds:
            times.popleft()
        return times

    def retry_after(self, username: str, client: str) -> int:
        """Seconds until a login for ``username`` from ``client`` may be tried again (0: now)."""
        now = self.clock()
        wait = 0.0
        with self._lock:
            for key, limit in self._keys(username, client):
                times = self._prune(key, now)
                if len(times) >= limit:
                    wait = max(wait, times[-limit] + self.window_seconds - now)
        return int(wait) + 1 if wait > 0 else 0

    def failed(self, username: str, client: str) -> None:
        now = self.clock()
        with self._lock:
            for key, _limit in self._keys(username, client):
                self._prune(key, now).append(now)

    def succeeded(self, username: str) -> None:
        """A good password clears the username's failures (not the client's: one address trying many
        names stays limited)."""
        with self._lock:
            self._failures.pop(f"user:{username.casefold()}", None)
