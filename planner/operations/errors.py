"""The errors of the operations layer: the daemon, its store and the portal, in one place.

    GpuplanError (models.errors)
     ├── CycleFailed        a reconcile ran to its end but left actions failed: the fleet is not at the plan
     ├── StoreUnavailable   the daemon's database could not be reached after the bounded retries
     └── NameTaken          a portal name that must be unique (a team, a user) is taken
    Exception
     └── LoginRequired      a portal page needs a signed-in user: answered with a redirect to /login

A cloud's errors are ``providers.errors``; the domain's (bad input, no plan) ``models.errors``.
"""

from __future__ import annotations

from models.errors import GpuplanError

__all__ = ["CycleFailed", "LoginRequired", "NameTaken", "StoreUnavailable"]


class CycleFailed(GpuplanError):
    """A reconcile that ran to its end but left actions failed (after its fallbacks): the fleet is not at
    the plan. It counts as a failed run of the job, so the daemon backs off and reports."""

    def __init__(self, message: str, shortfall: dict[str, int]) -> None:
        super().__init__(message)
        self.shortfall = shortfall


class StoreUnavailable(GpuplanError):
    """The daemon's database could not be reached after the bounded retries (the URL, password masked)."""


class NameTaken(GpuplanError):
    """A name that must be unique is taken (a team, a user)."""


class LoginRequired(Exception):
    """A page needs a signed-in user: answered with a redirect to /login (``app.py``)."""

    def __init__(self, next_path: str) -> None:
        self.next_path = next_path
