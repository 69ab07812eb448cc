"""A throwaway PostgreSQL server for the daemon's tests, started from the machine's binaries.

``postgres_server()`` is a generator for a session fixture: it makes a data directory in a temporary
folder, starts ``postgres`` on 127.0.0.1 and a free port (its socket inside that folder), creates the
``gpuplan`` database, yields a :class:`PostgresServer` (its URL, and ``stop``/``start`` for the tests of a
database that goes away), then stops the server and deletes the folder. Where ``initdb``/``pg_ctl`` are
missing, or the server does not start, it calls ``pytest.skip`` with the reason. The recipe is
``shared/reference/CLOUD-TESTING.md`` section 6: initdb refuses to run as root, so as root the commands
run as the ``postgres`` user.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

__all__ = ["PostgresServer", "postgres_server"]

_INITDB = ("--no-sync", "-E", "UTF8")
_CREATE_DB = ("-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", "create database gpuplan")


def _free_port() -> int:
    """A port nothing listens on now (there is no port 0 for postgres: bind one, read it, close it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    folder: Path
    port: int
    as_user: list[str]  # the prefix that runs a command as the server's owner ([] when not root)
    pg_ctl: str = "pg_ctl"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://gpuplan@127.0.0.1:{self.port}/gpuplan"

    def _pg_ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        command = [*self.as_user, self.pg_ctl, "-D", str(self.folder / "data"), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder / 'sock'} -c fsync=off "
            "-c full_page_writes=off -c synchronous_commit=off"
        )
        done = self._pg_ctl("-l", str(self.folder / "log"), "-w", "-t", "30", "-o", options, "start")
        if done.returncode != 0:
            log = (
                (self.folder / "log").read_text(errors="replace")[-2000:]
                if (self.folder / "log").exists()
                else ""
            )
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()} {log}")

    def stop(self) -> None:
        self._pg_ctl("-m", "fast", "-w", "-t", "30", "stop")


def _binary(name: str) -> str | None:
    """``name`` on PATH, else in Debian's versioned folder (``/usr/lib/postgresql/N/bin``, the newest N),
    where the server package puts initdb and pg_ctl without linking them onto PATH."""
    found = shutil.which(name)
    if found is not None:
        return found
    folders = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version(p.parent.name))
    for folder in reversed(folders):
        if (folder / name).is_file():
            return str(folder / name)
    return None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def postgres_server() -> Iterator[PostgresServer]:
    """Yield a running server (see the module docstring); stop and delete it afterwards."""
    binaries = {b: _binary(b) for b in ("initdb", "pg_ctl", "psql")}
    missing = [b for b, path in binaries.items() if path is None]
    if missing:
        pytest.skip(f"PostgreSQL binaries missing ({', '.join(missing)}): the PostgreSQL runs are skipped")
    initdb, pg_ctl, psql = (str(binaries[b]) for b in ("initdb", "pg_ctl", "psql"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: initdb cannot run as root")
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user for initdb to run as")
        as_user = ["runuser", "-u", "postgres", "--"]
    folder = Path(tempfile.mkdtemp(prefix="gpuplan-pg-"))
    server = PostgresServer(folder, _free_port(), as_user, pg_ctl)
    started = False
    try:
        (folder / "sock").mkdir()
        if as_user:
            shutil.chown(folder, "postgres", "postgres")
            shutil.chown(folder / "sock", "postgres", "postgres")
        made = subprocess.run(
            [*as_user, initdb, "-D", str(folder / "data"), "-A", "trust", "-U", "gpuplan", *_INITDB],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if made.returncode != 0:
            pytest.skip(f"initdb failed: {made.stderr.strip()[-500:]}")
        try:
            server.start()
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"PostgreSQL did not start: {exc}"[:800])
        started = True
        created = subprocess.run(
            [psql, "-h", str(folder / "sock"), "-p", str(server.port), "-U", "gpuplan", *_CREATE_DB],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if created.returncode != 0:
            pytest.skip(f"could not create the gpuplan database: {created.stderr.strip()}")
        yield server
    finally:
        if started:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def fresh_database(server: PostgresServer) -> str:
    """A database of its own on the shared server (tests reuse plan ids and tokens)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server.url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f"create database {name}"))
    finally:
        admin.dispose()
    return server.url.rsplit("/", 1)[0] + "/" + name
