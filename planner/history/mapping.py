"""Which gpuplan workload a measured series is: by namespace, team label and workload label.

Without a mapping file each namespace is a team and a service, which is what ``gpuplan k8s`` sets up (one
namespace per team, named ``safe_name(prefix + team)``: planner/outputs/k8s.py), so a first run needs
nothing but the URL. Pods that carry the workload label (default ``gpuplan.io/workload``) are that
service, and a team label (default ``gpuplan.io/team``) names the team.

A mapping file (``--mapping m.yaml``) names the services; unknown keys are refused::

    namespace_prefix: ""          # what gpuplan k8s --namespace-prefix was (stripped to get a team)
    services:
      - service: chat             # the scenario's inference[].name
        team: research            # the scenario's team
        namespace: research       # match: any of namespace, team_label, workload_label (all given must match)
        workload_label: chat
        gpus_per_replica: 1       # optional: demand in replicas = GPUs / this

The first rule that matches a series wins. With a file, a series no rule matches is left out and a
warning names its namespace: demand that is silently dropped would make the plan short.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from models.errors import InputError
from models.naming import safe_name
from models.yamlfile import read_yaml

__all__ = ["Mapping", "Rule", "SeriesKey", "Target", "load_mapping"]

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$"


@dataclass(frozen=True, order=True)
class SeriesKey:
    """What identifies a measured series: its namespace and the team and workload pod labels ('' when
    the pods carry none)."""

    namespace: str
    team_label: str = ""
    workload_label: str = ""


@dataclass(frozen=True)
class Target:
    """The gpuplan workload a series is demand of."""

    service: str
    team: str
    gpus_per_replica: float | None = None


class Rule(BaseModel):
    """One line of the mapping file: a match (every field given must equal the series') and a target."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    service: str = Field(pattern=_NAME)
    team: str = Field(pattern=_NAME)
    namespace: str | None = None
    team_label: str | None = None
    workload_label: str | None = None
    gpus_per_replica: float | None = Field(None, gt=0, le=1024)

    @model_validator(mode="after")
    def _matches_something(self) -> Rule:
        if self.namespace is None and self.team_label is None and self.workload_label is None:
            raise ValueError("give at least one of namespace, team_label, workload_label to match")
        return self

    def matches(self, key: SeriesKey) -> bool:
        return (
            (self.namespace is None or self.namespace == key.namespace)
            and (self.team_label is None or self.team_label == key.team_label)
            and (self.workload_label is None or self.workload_label == key.workload_label)
        )


class Mapping(BaseModel):
    """The mapping file, or the default (no rules: every namespace a team and a service)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace_prefix: str = ""
    services: tuple[Rule, ...] = ()

    @property
    def is_default(self) -> bool:
        return not self.services

    def target(self, key: SeriesKey) -> Target | None:
        """The workload ``key`` is demand of; None when a mapping file has no rule for it."""
        for rule in self.services:
            if rule.matches(key):
                return Target(rule.service, rule.team, rule.gpus_per_replica)
        if self.services:
            return None
        team = key.team_label or key.namespace.removeprefix(self.namespace_prefix) or key.namespace
        return Target(safe_name(key.workload_label or key.namespace), safe_name(team))


def load_mapping(path: Path | None) -> Mapping:
    """The mapping file at ``path`` (None: the default); InputError naming the field otherwise."""
    if path is None:
        return Mapping()
    data = read_yaml(path)
    try:
        mapping = Mapping.model_validate(data if data is not None else {})
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or None
        raise InputError(path, where, str(problem["msg"]).removeprefix("Value error, ")) from None
    if not mapping.services:
        raise InputError(path, "services", "no services: list at least one (or leave out --mapping)")
    return mapping
