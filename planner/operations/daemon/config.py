"""``daemon.yaml``: what the daemon plans, where it acts, how often, and whether it may act at all.

Validated like a scenario (``models.yamlfile.read_yaml``, pydantic with unknown keys refused), so a typo
fails ``gpuplan daemon --check`` naming the file and the field. Relative paths are relative to the config
file. An example:

```yaml
scenario: mixed-fleet.yaml          # what to (re)plan
provider: {cloud: sim}              # or aws / gcp / azure with settings: providers.yaml
apply: false                        # dry run: journal what it would do (the default)
database: sqlite:///daemon.db       # default: daemon.db beside this file; or postgresql+psycopg2://...
jobs:
  refresh_prices: {every_minutes: 60}
  replan: {every_hours: 24, price_change: 0.10}
  reconcile: {every_minutes: 5}
  watch_interruptions: {every_minutes: 0.5}   # AWS warns 2 min ahead; GCP and Azure about 30 s
  commitment_expiry: {every_hours: 24, warn_days: 30}
backoff: {first_minutes: 5, max_minutes: 60}   # after a failed run: 5, 10, 20, 40, 60, 60 ... minutes
disruption_budget: 50%              # the most of a pool's running nodes one reconcile terminates
block_max_usd: 60000                # with apply: true, buy the plan's Capacity Blocks, each up to this (USD)
checkpoint_hook: {command: ["/usr/local/bin/checkpoint", "{run}"]}
metrics: {host: 127.0.0.1, port: 9464}
history: {prometheus: "http://prometheus:9090", days: 7}   # the portal's measured use (optional)
```
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import Field, StrictBool, ValidationError, field_validator, model_validator

from models.documents import validation_error
from models.errors import InputError
from models.numbers import Range, StrictModel, parse_number
from models.yamlfile import read_yaml
from planner.operations.reconcile import DisruptionBudget
from planner.outputs.desired import MAX_LEAD_HOURS

__all__ = [
    "Backoff",
    "CheckpointHook",
    "DaemonConfig",
    "HistorySection",
    "JobSchedule",
    "check_database",
    "check_database_url",
    "check_extra",
    "load_config",
    "read_config",
]

#: The shortest interval of a job: 10 s (the interruption watch's 30 s default is well above; a cloud read
#: every second only earns throttling).
MIN_INTERVAL_SECONDS: Final = 10
#: The longest: 10,000 hours (about 14 months). A job meant to run only on triggers (a re-plan when prices
#: move) is given a very long interval; anything longer is a typo, and an unbounded one (``.inf``, 2**63)
#: overflows the scheduler's date arithmetic so the job never runs.
MAX_INTERVAL_HOURS: Final = 10_000
_MAX_INTERVAL_MINUTES: Final = MAX_INTERVAL_HOURS * 60
#: Paths, URLs and command words: long enough for any real one, short enough to be read in one line.
_MAX_TEXT: Final = 4096
#: The drivers the daemon's store is tested on (planner/operations/daemon/store.py).
DATABASE_DRIVERS: Final = ("sqlite", "sqlite+pysqlite", "postgresql", "postgresql+psycopg2")
#: How long --check waits for a database server to answer.
CONNECT_TIMEOUT_SECONDS: Final = 5


def _plain_path(value: Any) -> Any:
    """A path as text: not empty, no NUL byte (the OS refuses it), not longer than a path can be."""
    if isinstance(value, str | Path):
        text = str(value)
        if not text.strip():
            raise ValueError("must not be empty")
        if "\x00" in text:
            raise ValueError("must not contain a NUL byte")
        if len(text) > _MAX_TEXT:
            raise ValueError(f"is {len(text)} characters long; at most {_MAX_TEXT}")
    return value


class _Strict(StrictModel):
    """Unknown keys refused, numbers strict (models.numbers), paths plain."""


class ProviderSection(_Strict):
    cloud: Literal["sim", "aws", "gcp", "azure"] = "sim"
    settings: Path | None = Field(None, description="provider settings YAML (as provision --provider-config)")
    sim_state: Path | None = Field(
        None, description="the simulated cloud's state file (default beside the config)"
    )

    _paths = field_validator("settings", "sim_state", mode="before")(_plain_path)


class JobSchedule(_Strict):
    """How often a job runs (one of the units, coming to whole seconds from 10 s to 10,000 hours), and
    its own knobs."""

    every_minutes: float | None = Field(
        None, gt=0, le=_MAX_INTERVAL_MINUTES, json_schema_extra={"unit": "minutes"}
    )
    every_hours: float | None = Field(None, gt=0, le=MAX_INTERVAL_HOURS, json_schema_extra={"unit": "hours"})
    enabled: StrictBool = True

    @property
    def seconds(self) -> float:
        if self.every_minutes is not None:
            return self.every_minutes * 60
        if self.every_hours is None:  # the validator below makes it impossible
            raise ValueError("a job schedule without an interval")
        return self.every_hours * 3600

    @model_validator(mode="after")
    def _one_unit(self) -> JobSchedule:
        if (self.every_minutes is None) == (self.every_hours is None):
            raise ValueError("give every_minutes or every_hours (one of them)")
        seconds = self.seconds
        if abs(seconds - round(seconds)) > 1e-6:
            raise ValueError(
                f"the interval must come to whole seconds (0.5 minutes = 30 s), got {seconds:g} s"
            )
        if seconds < MIN_INTERVAL_SECONDS:
            raise ValueError(f"the interval must be at least {MIN_INTERVAL_SECONDS} s, got {seconds:g} s")
        return self


class ReplanSchedule(JobSchedule):
    price_change: float = Field(
        0.10, gt=0, le=10, description="re-plan early when a plan offering's spot price moves by this share"
    )


class ExpirySchedule(JobSchedule):
    warn_days: float = Field(
        30,
        gt=0,
        le=1100,
        description="warn this many days before a commitment ends (terms run 3 years at most)",
    )


class Jobs(_Strict):
    refresh_prices: JobSchedule = JobSchedule(every_minutes=60)
    replan: ReplanSchedule = ReplanSchedule(every_hours=24)
    reconcile: JobSchedule = JobSchedule(every_minutes=5)
    watch_interruptions: JobSchedule = JobSchedule(every_minutes=0.5)
    commitment_expiry: ExpirySchedule = ExpirySchedule(every_hours=24)


class Backoff(_Strict):
    """How long a job waits after failed runs: ``min(interval, first)`` after the first, doubling with each
    failure in a row, up to ``max(interval, max)``; the first success ends it. A short job (reconcile every
    5 minutes) so stops hammering a cloud that throttles or has no capacity, and a long one (replan daily)
    is tried again within minutes instead of a day later. Both at most a week: a longer wait is a daemon
    that has stopped without saying so."""

    first_minutes: float = Field(5, gt=0, le=7 * 24 * 60, json_schema_extra={"unit": "minutes"})
    max_minutes: float = Field(60, gt=0, le=7 * 24 * 60, json_schema_extra={"unit": "minutes"})

    def seconds(self, interval: float, failures: int) -> float:
        """The wait after ``failures`` (>= 1) failed runs in a row of a job run every ``interval`` s."""
        first = min(interval, self.first_minutes * 60)
        return min(max(interval, self.max_minutes * 60), first * 2 ** min(max(failures - 1, 0), 40))

    @model_validator(mode="after")
    def _ordered(self) -> Backoff:
        if self.first_minutes > self.max_minutes:
            raise ValueError(
                f"first_minutes ({self.first_minutes:g}) must not be more than "
                f"max_minutes ({self.max_minutes:g})"
            )
        return self


class CheckpointHook(_Strict):
    """Called for a training run whose nodes are interrupted, at once and at most until the notice runs
    out: a command (``{run}``, ``{node}`` and ``{deadline}``, an ISO time or empty, are replaced) or a
    webhook that gets a JSON POST (``run``, ``node``, ``event``, ``deadline``). A command's program is
    looked up when the config is loaded (:func:`load_config`): a hook that cannot run is found then, not
    at the first interruption, when the checkpoint it should have saved is lost."""

    command: list[str] | None = Field(None, min_length=1, max_length=64)
    webhook: str | None = Field(None, max_length=2048)
    timeout_seconds: float = Field(30, gt=0, le=3600, json_schema_extra={"unit": "seconds"})

    @field_validator("command")
    @classmethod
    def _words(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return value
        for word in value:
            if "\x00" in word or len(word) > _MAX_TEXT:
                raise ValueError(f"each word must be at most {_MAX_TEXT} characters, without a NUL byte")
        if not value[0].strip():
            raise ValueError("the program (the first word) must not be empty")
        if any(mark in value[0] for mark in ("{run}", "{node}", "{deadline}")):
            raise ValueError(
                "the program (the first word) cannot be a placeholder; pass {run} as an argument"
            )
        return value

    @field_validator("webhook")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise ValueError("the URL must not contain spaces or control characters")
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018  (raises ValueError on a port that is not a number in 0-65535)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a URL: {exc}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"must be an http:// or https:// URL with a host, got {value!r}")
        return value

    @model_validator(mode="after")
    def _one(self) -> CheckpointHook:
        if (self.command is None) == (self.webhook is None):
            raise ValueError("give command or webhook (one of them)")
        return self


class MetricsSection(_Strict):
    host: str = Field("127.0.0.1", min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.:\-\[\]]+$")
    port: int = Field(9464, ge=0, le=65535)
    enabled: StrictBool = True


class HistorySection(_Strict):
    """Where the portal reads what teams really use (issue 40, point 7): a Prometheus server read as
    ``gpuplan demand --prometheus`` reads it (credentials from GPUPLAN_PROMETHEUS_TOKEN or
    GPUPLAN_PROMETHEUS_USER/_PASSWORD, never from this file), its queries and mapping files, the days
    the team page shows, and how long a read is reused."""

    prometheus: str = Field(
        min_length=1, max_length=2048, pattern=r"^https?://\S+$", description="Prometheus HTTP API base URL"
    )
    mapping: Path | None = Field(
        None, description="series -> services and teams (as gpuplan demand --mapping)"
    )
    queries: Path | None = Field(None, description="PromQL overrides (as gpuplan demand --queries)")
    days: int = Field(
        7, ge=1, le=90, description="the days the team page shows", json_schema_extra={"unit": "d"}
    )
    cache_minutes: float = Field(
        5, ge=0, le=24 * 60, description="a read is reused this long", json_schema_extra={"unit": "minutes"}
    )
    timeout_seconds: float = Field(10, gt=0, le=600, json_schema_extra={"unit": "s"})
    retries: int = Field(1, ge=0, le=10, description="retries of a 5xx or 429 answer")

    _paths = field_validator("mapping", "queries", mode="before")(_plain_path)


def check_database_url(url: str) -> str:
    """``url`` parsed by SQLAlchemy and of a driver the store is tested on; ValueError saying what is
    wrong otherwise. SQLite needs a file (an in-memory database forgets the journal when the process
    ends, which is what the journal is for)."""
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError
    except ImportError:
        raise ValueError("reading a database URL needs SQLAlchemy: pip install 'gpuplan[daemon]'") from None
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise ValueError(
            f"not a database URL ({str(exc).splitlines()[0][:120]}); give sqlite:///path/daemon.db or "
            "postgresql+psycopg2://user:password@host:5432/database"
        ) from None
    if parsed.drivername not in DATABASE_DRIVERS:
        raise ValueError(
            f"the database must be SQLite or PostgreSQL through psycopg2 (sqlite:///..., "
            f"postgresql+psycopg2://...), got {parsed.drivername}://"
        )
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise ValueError(f"the port must be from 1 to 65535, got {parsed.port}")
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if (
            database in ("", ":memory:")
            or database.startswith("file::memory:")
            or parsed.query.get("mode") == "memory"
        ):
            raise ValueError("a SQLite database must be a file (sqlite:///path/daemon.db), not in memory")
    return url


class DaemonConfig(_Strict):
    scenario: Path
    provider: ProviderSection = ProviderSection()
    apply: StrictBool = False
    database: str | None = Field(
        None,
        max_length=_MAX_TEXT,
        description="SQLAlchemy URL, sqlite:///... or postgresql+psycopg2://...; "
        "default sqlite:///<daemon.db beside the config>",
    )
    plans: Path | None = Field(
        None, description="where plans are written (default: plans/ beside the config)"
    )
    lead_hours: float = Field(
        2.0,
        ge=0,
        le=MAX_LEAD_HOURS,
        description="gangs starting this soon are made ahead",
        json_schema_extra={"unit": "hours"},
    )
    launch_batch: int = Field(
        16, ge=1, le=1000, description="nodes per launch action (a pool's launch is split)"
    )
    capacity_only: bool = Field(
        False,
        description="make only placement groups and reservations, never launch or terminate a node: an "
        "autoscaler launches them (gpuplan karpenter writes its NodePools)",
    )
    disruption_budget: str = Field(
        "50%",
        description="the most of a pool's running nodes one reconcile terminates: a share (50%) or a number "
        "of nodes; a larger shrink waits for later cycles (each held-back shrink is an event)",
    )
    block_max_usd: float | None = Field(
        None,
        gt=0,
        le=1e9,
        description="the most one Capacity Block may cost upfront: with apply: true the daemon buys the "
        "blocks the plan holds its gangs in (tier capacity_block) within it; without it, it buys none and "
        "an event says what it would buy",
        json_schema_extra={"unit": "USD"},
    )
    plan_time_limit: float = Field(
        120.0,
        gt=0,
        le=24 * 3600,
        description="seconds each re-plan's solver may take",
        json_schema_extra={"unit": "s"},
    )
    jobs: Jobs = Jobs()
    backoff: Backoff = Backoff()
    checkpoint_hook: CheckpointHook | None = None
    metrics: MetricsSection = MetricsSection()
    history: HistorySection | None = None

    _paths = field_validator("scenario", "plans", mode="before")(_plain_path)

    @field_validator("database")
    @classmethod
    def _database(cls, value: str | None) -> str | None:
        return None if value is None else check_database_url(value)

    @field_validator("disruption_budget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        """``50%`` or ``3`` (a YAML number of nodes too), read as every other number is: ASCII digits,
        finite, in range (``DisruptionBudget.parse`` alone takes ``1_0`` and other scripts' digits)."""
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            return value  # pydantic's own error names the type
        text = value.strip()
        if text.endswith("%"):
            parse_number(text[:-1], Range(ge=0, le=100, unit="%"))
        else:
            parse_number(text, Range(ge=0, le=100_000, unit="nodes", whole=True))
        DisruptionBudget.parse(text)
        return text

    @property
    def budget(self) -> DisruptionBudget:
        return DisruptionBudget.parse(self.disruption_budget)

    #: the config file's directory, which relative paths are read from (set by load_config)
    base: Path = Field(Path("."), exclude=True)

    def path(self, value: Path) -> Path:
        return value if value.is_absolute() else self.base / value

    @property
    def scenario_path(self) -> Path:
        return self.path(self.scenario)

    @property
    def plans_dir(self) -> Path:
        return self.path(self.plans or Path("plans"))

    @property
    def database_url(self) -> str:
        return self.database or f"sqlite:///{self.path(Path('daemon.db'))}"

    @property
    def sim_state(self) -> Path:
        return self.path(self.provider.sim_state or Path("sim-cloud.json"))

    @property
    def settings_path(self) -> Path | None:
        return None if self.provider.settings is None else self.path(self.provider.settings)


def read_config(path: str | Path) -> DaemonConfig:
    """``path`` validated on its own (the fields, not the files and programs they name); InputError
    naming the file and field. What a fuzzer drives: no file is opened but ``path``."""
    path = Path(path)
    data = read_yaml(path, "daemon config")
    if not isinstance(data, dict):
        raise InputError(path, None, "must be a mapping (scenario:, provider:, jobs:, ...)")
    if "base" in data:
        raise InputError(path, "base", "Extra inputs are not permitted for schema gpuplan.daemon/v1")
    try:
        return DaemonConfig.model_validate({**data, "base": path.resolve().parent})
    except ValidationError as exc:
        raise validation_error(path, "gpuplan.daemon/v1", exc) from None


def load_config(path: str | Path) -> DaemonConfig:
    """``path`` validated, and what it names there: the scenario and settings files, the checkpoint hook's
    program (found and executable; a relative path with a slash is taken from the config's directory, as
    every path in the file). InputError naming the file and field for anything wrong."""
    path = Path(path)
    config = read_config(path)
    if not _is_file(config.scenario_path):
        raise InputError(path, "scenario", f"{config.scenario_path} is not a file")
    if config.settings_path is not None and not _is_file(config.settings_path):
        raise InputError(path, "provider.settings", f"{config.settings_path} is not a file")
    for field in ("mapping", "queries"):
        named = None if config.history is None else getattr(config.history, field)
        if named is not None and not _is_file(config.path(named)):
            raise InputError(path, f"history.{field}", f"{config.path(named)} is not a file")
    hook = config.checkpoint_hook
    if hook is not None and hook.command is not None:
        program = _program(path, config, hook.command[0])
        if program != hook.command[0]:
            hook = hook.model_copy(update={"command": [program, *hook.command[1:]]})
            config = config.model_copy(update={"checkpoint_hook": hook})
    return config


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; a name the system cannot even look up (too long, a loop) is not one."""
    try:
        return path.is_file()
    except OSError:
        return False


def _program(path: Path, config: DaemonConfig, word: str) -> str:
    """The hook's program as it will be run: a name looked up on PATH (kept as a name), a path made
    absolute from the config's directory; InputError when it is missing or not executable."""
    where = "checkpoint_hook.command"
    if os.sep not in word and (os.altsep is None or os.altsep not in word):
        if shutil.which(word) is None:
            raise InputError(path, where, f"{word!r} is not a program on PATH (or not executable)")
        return word
    program = config.path(Path(word))
    if not program.exists():
        raise InputError(path, where, f"{program} does not exist")
    if not program.is_file():
        raise InputError(path, where, f"{program} is not a file")
    if not os.access(program, os.X_OK):
        raise InputError(path, where, f"{program} is not executable (chmod +x)")
    return str(program)


#: What ``pip install 'gpuplan[daemon]'`` brings (pyproject.toml): the module each import name needs.
DAEMON_EXTRA: Final = {
    "apscheduler": "apscheduler",  # the schedule (planner/operations/daemon/scheduler.py)
    "sqlalchemy": "sqlalchemy",  # the state, journal and events (store.py)
    "prometheus_client": "prometheus-client",  # /metrics (metrics.py)
}


def check_extra(database_url: str | None = None) -> None:
    """InputError naming the ``[daemon]`` extra when a module the daemon runs on does not import.

    ``--check`` must fail where ``--once`` would: a config can be valid while the daemon's own libraries
    are missing (a plain ``pip install gpuplan``), and a PostgreSQL database needs psycopg2 besides.
    Each module is imported, not just looked up, so a broken install is caught too.
    """
    import importlib

    wanted = dict(DAEMON_EXTRA)
    if database_url is not None and database_url.startswith("postgresql"):
        wanted["psycopg2"] = "psycopg2-binary"  # the store's PostgreSQL driver
    missing = []
    for module, package in wanted.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    if missing:
        raise InputError(
            None,
            "daemon",
            f"needs {', '.join(missing)}, not installed: pip install 'gpuplan[daemon]' (the daemon's extra)",
        )


def check_database(path: str | Path, config: DaemonConfig) -> str:
    """Open the daemon's database the way the daemon will, and close it; what it is (``SQLite file
    .../daemon.db (new)``, ``PostgreSQL 15 at host:5432/db``) or InputError with what a user can act on:
    a wrong password, no such host, nothing listening, no such database or user, the driver missing, a
    SQLite directory that does not exist or a file that is not a database. Nothing is written: a SQLite
    file that does not exist yet is not made (the daemon makes it)."""
    from sqlalchemy.engine import make_url

    url = make_url(config.database_url)
    if url.get_backend_name() == "sqlite":
        return _check_sqlite(Path(path), Path(url.database or ""))
    return _check_postgresql(Path(path), config.database_url)


def _check_sqlite(path: Path, file: Path) -> str:
    import sqlite3

    where = "database"
    folder = file.parent if str(file.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(path, where, f"the SQLite file's directory {folder} does not exist")
    if not file.exists():
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(path, where, f"cannot create {file}: the directory {folder} is not writable")
        return f"SQLite file {file} (new)"
    if not file.is_file():
        raise InputError(path, where, f"{file} is not a file")
    try:
        connection = sqlite3.connect(
            f"{file.resolve().as_uri()}?mode=ro", uri=True, timeout=CONNECT_TIMEOUT_SECONDS
        )
        try:
            connection.execute("PRAGMA schema_version").fetchone()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise InputError(path, where, f"{file} cannot be opened as a SQLite database: {exc}") from None
    if not os.access(file, os.W_OK):
        raise InputError(path, where, f"{file} is read-only: the daemon writes its journal there")
    return f"SQLite file {file}"


def _check_postgresql(path: Path, url: str) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    where = "database"
    parsed = make_url(url)
    place = f"{parsed.host or 'the local socket'}" + (f":{parsed.port}" if parsed.port else "")
    try:
        engine = create_engine(url, connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS})
    except ImportError as exc:
        raise InputError(
            path,
            where,
            f"the PostgreSQL driver is missing ({exc.name or exc}): pip install 'gpuplan[daemon]'",
        ) from None
    try:
        with engine.connect() as connection:
            version = connection.execute(text("show server_version")).scalar()
    except DBAPIError as exc:
        raise InputError(path, where, _postgresql_problem(exc, parsed, place)) from None
    except SQLAlchemyError as exc:
        raise InputError(
            path, where, f"cannot connect to {place}: {_masked(str(exc), parsed.password)}"
        ) from None
    finally:
        engine.dispose()
    return f"PostgreSQL {str(version).split()[0]} at {place}/{parsed.database or ''}"


def _postgresql_problem(exc: Exception, parsed: Any, place: str) -> str:
    """The driver's refusal as something to do about it (the password never shown)."""
    orig = getattr(exc, "orig", None)
    message = str(orig if orig is not None else exc).strip()
    lowered = message.lower()
    user, database = parsed.username or "(none)", parsed.database or "(none)"
    if "password authentication failed" in lowered:
        return f"PostgreSQL at {place} refused the password of user {user!r}: wrong password"
    if "no password supplied" in lowered:
        return f"PostgreSQL at {place} wants a password for user {user!r}: put it in the URL (user:pw@host)"
    if "could not translate host name" in lowered or "name or service not known" in lowered:
        return f"no such host {parsed.host!r} (the name does not resolve)"
    if "connection refused" in lowered:
        return f"nothing answers at {place}: is PostgreSQL running there, on that port?"
    if "timeout expired" in lowered or "timed out" in lowered:
        return f"no answer from {place} within {CONNECT_TIMEOUT_SECONDS} s (a firewall, or the wrong host)"
    if "database" in lowered and "does not exist" in lowered:
        return f"PostgreSQL at {place} has no database {database!r} (create database {database})"
    if "role" in lowered and "does not exist" in lowered:
        return f"PostgreSQL at {place} has no user {user!r}"
    first = message.splitlines()[0] if message else type(exc).__name__
    return f"cannot connect to {place}: {_masked(first, parsed.password)}"


def _masked(text: str, password: str | None) -> str:
    return text.replace(password, "***") if password else text
