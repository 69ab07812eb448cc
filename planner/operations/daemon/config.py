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
checkpoint_hook: {command: ["/usr/local/bin/checkpoint", "{run}"]}
metrics: {host: 127.0.0.1, port: 9464}
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from models.documents import validation_error
from models.errors import InputError
from models.yamlfile import read_yaml
from planner.operations.reconcile import DisruptionBudget

__all__ = ["Backoff", "CheckpointHook", "DaemonConfig", "JobSchedule", "load_config"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProviderSection(_Strict):
    cloud: Literal["sim", "aws", "gcp", "azure"] = "sim"
    settings: Path | None = Field(None, description="provider settings YAML (as provision --provider-config)")
    sim_state: Path | None = Field(
        None, description="the simulated cloud's state file (default beside the config)"
    )


class JobSchedule(_Strict):
    """How often a job runs (one of the units), and its own knobs."""

    every_minutes: float | None = Field(None, gt=0)
    every_hours: float | None = Field(None, gt=0)
    enabled: bool = True

    @property
    def seconds(self) -> float:
        if self.every_minutes is not None:
            return self.every_minutes * 60
        assert self.every_hours is not None
        return self.every_hours * 3600

    @model_validator(mode="after")
    def _one_unit(self) -> JobSchedule:
        if (self.every_minutes is None) == (self.every_hours is None):
            raise ValueError("give every_minutes or every_hours (one of them)")
        return self


class ReplanSchedule(JobSchedule):
    price_change: float = Field(
        0.10, gt=0, description="re-plan early when a plan offering's spot price moves by this share"
    )


class ExpirySchedule(JobSchedule):
    warn_days: float = Field(30, gt=0, description="warn this many days before a commitment ends")


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
    is tried again within minutes instead of a day later."""

    first_minutes: float = Field(5, gt=0)
    max_minutes: float = Field(60, gt=0)

    def seconds(self, interval: float, failures: int) -> float:
        """The wait after ``failures`` (>= 1) failed runs in a row of a job run every ``interval`` s."""
        first = min(interval, self.first_minutes * 60)
        return min(max(interval, self.max_minutes * 60), first * 2 ** min(max(failures - 1, 0), 40))


class CheckpointHook(_Strict):
    """Called for a training run whose nodes are interrupted, at once and at most until the notice runs
    out: a command (``{run}``, ``{node}`` and ``{deadline}``, an ISO time or empty, are replaced) or a
    webhook that gets a JSON POST (``run``, ``node``, ``event``, ``deadline``)."""

    command: list[str] | None = None
    webhook: str | None = Field(None, pattern=r"^https?://")
    timeout_seconds: float = Field(30, gt=0)

    @model_validator(mode="after")
    def _one(self) -> CheckpointHook:
        if (self.command is None) == (self.webhook is None):
            raise ValueError("give command or webhook (one of them)")
        return self


class MetricsSection(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(9464, ge=0, le=65535)
    enabled: bool = True


class DaemonConfig(_Strict):
    scenario: Path
    provider: ProviderSection = ProviderSection()
    apply: bool = False
    database: str | None = Field(
        None, description="SQLAlchemy URL; default sqlite:///<daemon.db beside the config>"
    )
    plans: Path | None = Field(
        None, description="where plans are written (default: plans/ beside the config)"
    )
    lead_hours: float = Field(2.0, ge=0)
    launch_batch: int = Field(16, ge=1, description="nodes per launch action (a pool's launch is split)")
    disruption_budget: str = Field(
        "50%",
        description="the most of a pool's running nodes one reconcile terminates: a share (50%) or a number "
        "of nodes; a larger shrink waits for later cycles (each held-back shrink is an event)",
    )
    plan_time_limit: float = Field(120.0, gt=0, description="seconds each re-plan's solver may take")
    jobs: Jobs = Jobs()
    backoff: Backoff = Backoff()
    checkpoint_hook: CheckpointHook | None = None
    metrics: MetricsSection = MetricsSection()

    @field_validator("disruption_budget")
    @classmethod
    def _budget(cls, value: str) -> str:
        DisruptionBudget.parse(value)  # ValueError saying what it takes
        return value

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


def load_config(path: str | Path) -> DaemonConfig:
    """``path`` validated; InputError naming the file and field for anything wrong, the scenario file
    missing included."""
    path = Path(path)
    data = read_yaml(path, "daemon config")
    if not isinstance(data, dict):
        raise InputError(path, None, "must be a mapping (scenario:, provider:, jobs:, ...)")
    try:
        config = DaemonConfig.model_validate({**data, "base": path.resolve().parent})
    except ValidationError as exc:
        raise validation_error(path, "gpuplan.daemon/v1", exc) from None
    if not config.scenario_path.is_file():
        raise InputError(path, "scenario", f"{config.scenario_path} is not a file")
    if config.settings_path is not None and not config.settings_path.is_file():
        raise InputError(path, "provider.settings", f"{config.settings_path} is not a file")
    return config
