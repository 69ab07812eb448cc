"""The embedded demo: ``gpuplan portal`` with no ``--config`` copies this folder's daemon config and
scenario into a state directory (``$XDG_STATE_HOME/gpuplan/portal-demo``, else
``~/.local/state/gpuplan/portal-demo``), sets the scenario's horizon to start today, creates the demo's
users with random passwords (kept in ``demo-logins.txt``, mode 0600) and plans once, so a newcomer can
sign in and submit a request at once.
"""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import yaml

__all__ = ["demo_dir", "prepare_demo", "seed_users"]

LOGINS = "demo-logins.txt"


def demo_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gpuplan" / "portal-demo"


def _data(name: str) -> str:
    return resources.files("planner.operations.portal.demo").joinpath(name).read_text(encoding="utf-8")


def prepare_demo(directory: Path, now: datetime) -> Path:
    """The demo's daemon.yaml in ``directory`` (made on first use; the scenario's horizon moved to start
    on ``now``'s day when it would end within two days); its path."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    config = directory / "daemon.yaml"
    if not config.is_file():
        config.write_text(_data("daemon.yaml"), encoding="utf-8")
    scenario = directory / "scenario.yaml"
    data = yaml.safe_load(
        scenario.read_text(encoding="utf-8") if scenario.is_file() else _data("scenario.yaml")
    )
    start = datetime.fromisoformat(str(data["horizon"]["start"]).replace("Z", "+00:00"))
    end = start + timedelta(hours=int(data["horizon"]["hours"]))
    if not scenario.is_file() or end < now + timedelta(days=2):
        today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        data["horizon"]["start"] = today.strftime("%Y-%m-%dT%H:%M:%SZ")
        scenario.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return config


def seed_users(store: object, directory: Path) -> list[tuple[str, str, str]]:
    """The demo's users (``users.yaml``), created once with random passwords; (username, password, what
    they are) of each, read back from ``demo-logins.txt`` on later starts."""
    from planner.operations.portal.security import hash_password
    from planner.operations.portal.store import PortalStore

    assert isinstance(store, PortalStore)
    logins = directory / LOGINS
    users = yaml.safe_load(_data("users.yaml"))["users"]
    if not logins.is_file():
        lines = []
        for user in users:
            if store.user(user["username"]) is not None:
                continue
            password = secrets.token_urlsafe(12)
            store.add_user(
                user["username"], hash_password(password), is_admin=bool(user.get("is_admin")),
                roles=dict(user.get("roles") or {}), actor="gpuplan-demo",
            )  # fmt: skip
            lines.append(f"{user['username']}\t{password}")
        logins.touch(mode=0o600)
        logins.write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = {}
    for line in logins.read_text(encoding="utf-8").splitlines():
        name, _, password = line.partition("\t")
        if name:
            found[name] = password
    described = []
    for user in users:
        if user["username"] in found:
            roles = ", ".join(f"{role} of {team}" for team, role in (user.get("roles") or {}).items())
            described.append(
                (user["username"], found[user["username"]], "admin" if user.get("is_admin") else roles)
            )
    return described
