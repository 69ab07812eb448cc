"""What the checks compare a plan against, re-derived from the scenario and catalog alone (``models.*``):
the offerings the scenario may buy (its own servers as the domain defines them: ``models.tco``),
how a replica of a service occupies a node of an offering, committed nodes per period, demand and runs,
and the allocation rows read into typed columns.

Nothing here comes from ``planner/planning/optimize`` or ``planner/planning/mig``: a checker that shared
the optimizer's derivations would share its bugs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from models.catalog import Catalog, Offering
from models.mig import COMPUTE_SLICES, MEMORY_SLICES, MIG_PROFILES, canonical_model, smallest_profile
from models.plan import Commitment, Plan
from models.savingsplans import RateGroup, SavingsPlan, plan_groups
from models.scenario import SAVINGS_PLAN_TERM_KIND, InferenceService, Scenario, TrainingJob
from models.scope import scenario_offerings
from models.tiers import COMMITTED_TIERS, HOURS_PER_MONTH, HOURS_PER_YEAR, OWN_NODE_TIERS, Term, Tier
from models.workloads import TrainingRun, service_demand, training_runs

__all__ = ["BLOCK", "EPS", "Context", "Shape", "close", "replica_shape", "term_hours"]

EPS = 1e-6
SPOT = "spot"
HELD = "held"  # every non-spot tier: committed and on-demand nodes of an offering are billed together
BLOCK = "block"  # a gang on nodes of its own (a Capacity Block, flex-start VMs): outside the offering's pool


def close(a: float, b: float, rel: float = 1e-6, abs_: float = 1e-6) -> bool:
    """Money and node counts read back from CSV agree to float noise."""
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def term_hours(scenario: Scenario, term: Term) -> float:
    """How long a commitment binds: 1 or 3 years, an owned node its depreciation life."""
    years = term.years
    if years is not None:
        return float(years * HOURS_PER_YEAR)
    colocation = scenario.colocation
    return colocation.depreciation_months * HOURS_PER_MONTH if colocation else 0.0


@dataclass(frozen=True, slots=True)
class Shape:
    """How one replica occupies a node: ``gpus`` whole GPUs on one node, or one MIG slice (``profile``,
    the index into ``models.mig.MIG_PROFILES[gpu_model]``)."""

    gpus: int = 0
    profile: int | None = None

    def per_node(self, offering: Offering) -> float:
        """Replicas one node holds with this shape alone (homogeneous): only to estimate replicas of a plan
        written without the column."""
        if self.profile is None:
            return float(offering.gpus_per_node // self.gpus)
        profile = MIG_PROFILES[canonical_model(offering.gpu_model)][self.profile]
        return float(offering.gpus_per_node * profile.max_instances)


def replica_shape(service: InferenceService, offering: Offering) -> Shape | None:
    """The replica -> node rule of ``models/mig.py``; None where the offering cannot serve the service.

    Whole-GPU services take ``gpus_per_replica`` GPUs of one node. A memory-sized replica takes the
    smallest MIG profile holding its memory (and compute share); the full-GPU profile (7g) is a whole
    GPU. Without a fitting profile it takes one GPU if its memory fits, else enough GPUs of one node.
    """
    if not offering.matches_gpu(service.gpu_models):
        return None
    if service.gpus_per_replica is not None:
        gpus = service.gpus_per_replica
    else:
        assert service.gpu_memory_gb is not None  # the scenario validator gives exactly one size
        profile = smallest_profile(offering.gpu_model, service.gpu_memory_gb, service.gpu_compute_share)
        if profile is not None:
            if profile.memory_slices < MEMORY_SLICES or profile.compute_slices < COMPUTE_SLICES:
                return Shape(profile=MIG_PROFILES[canonical_model(offering.gpu_model)].index(profile))
            gpus = 1
        else:
            gpus = max(1, math.ceil(service.gpu_memory_gb / offering.gpu_memory_gb - 1e-9))
    return Shape(gpus=gpus) if gpus <= offering.gpus_per_node else None


@dataclass
class Context:
    """A plan and the inputs it is checked against."""

    scenario: Scenario
    catalog: Catalog
    base_dir: Path
    plan: Plan
    offerings: dict[str, Offering] = field(init=False)

    def __post_init__(self) -> None:
        self.offerings = {o.id: o for o in scenario_offerings(self.scenario, self.catalog)}

    @property
    def p(self) -> int:
        return self.scenario.horizon.period_hours

    @property
    def periods(self) -> int:
        return self.scenario.horizon.periods

    @cached_property
    def services(self) -> dict[str, InferenceService]:
        return {s.name: s for s in self.scenario.inference}

    @cached_property
    def jobs(self) -> dict[str, TrainingJob]:
        return {j.name: j for j in self.scenario.training}

    @cached_property
    def runs(self) -> dict[tuple[str, int], TrainingRun]:
        return {(r.job.name, r.run): r for r in training_runs(self.scenario)}

    @cached_property
    def demand(self) -> dict[str, np.ndarray]:
        """Replicas wanted per period, per service (``models/workloads.py``)."""
        return {s.name: service_demand(self.scenario, s, self.base_dir) for s in self.scenario.inference}

    def available_period(self, offering: Offering) -> int:
        """First period an offering's nodes can run anything (owned nodes wait for their lead time)."""
        return math.ceil(offering.available_from_hour / self.p - 1e-9)

    def window(self, c: Commitment) -> tuple[int, int]:
        """Periods [first, end) a commitment's nodes serve in, from its start and end times: the whole
        periods inside them, owned purchases from their delivery on (a plan without times: the
        horizon)."""
        horizon = self.scenario.horizon
        first, end = 0, self.periods
        if c.start is not None:
            first = max(0, math.ceil(horizon.hour_of(c.start) / self.p - 1e-9))
        if c.end is not None:
            end = min(self.periods, math.floor(horizon.hour_of(c.end) / self.p + 1e-9))
        offering = self.offerings.get(c.offering)
        if c.term == Term.OWNED and not c.existing and offering is not None:
            first = max(first, self.available_period(offering))
        return first, max(first, end)

    @cached_property
    def committed(self) -> dict[str, np.ndarray]:
        """Offering id -> committed nodes per period (each commitment inside its window)."""
        result: dict[str, np.ndarray] = {}
        for c in self.plan.document.commitments:
            nodes = np.zeros(self.periods)
            first, end = self.window(c)
            nodes[first:end] = float(c.nodes)
            result[c.offering] = result.get(c.offering, np.zeros(self.periods)) + nodes
        return result

    @cached_property
    def committed_terms(self) -> dict[str, set[Tier]]:
        """Offering id -> the committed tiers bought on it."""
        result: dict[str, set[Tier]] = {}
        for c in self.plan.document.commitments:
            result.setdefault(c.offering, set()).add(c.term.tier)
        return result

    @cached_property
    def rows(self) -> pd.DataFrame:
        """allocations.csv with typed columns and what the checks key on: ``capacity`` (held or spot),
        ``committed`` (a committed tier), the offering's GPUs per node (NaN: unknown offering)."""
        frame = self.plan.allocations.copy()
        for column in ("period", "nodes", "gpus", "replicas", "cost_usd"):
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
        for column in ("offering", "tier", "workload", "kind", "team"):
            frame[column] = frame[column].astype(str)
        frame["commitment"] = frame["commitment"].astype(object).fillna("").astype(str)  # NaN: none named
        frame["capacity"] = np.select(
            [frame["tier"] == Tier.SPOT, frame["tier"].isin(OWN_NODE_TIERS)], [SPOT, BLOCK], HELD
        )
        frame["committed"] = frame["tier"].isin([str(t) for t in COMMITTED_TIERS])
        gpn = {oid: float(o.gpus_per_node) for oid, o in self.offerings.items()}
        frame["gpn"] = frame["offering"].map(gpn).astype(float)
        return frame.reset_index(drop=True)


def held_savings_plans(ctx: Context) -> list[SavingsPlan]:
    """The scenario's held savings plans as the rule bills them: rates from the catalog's terms file (for
    the scenario's offerings), start and end as the whole periods inside their term."""
    groups: dict[tuple[str, int, str, str], RateGroup] = {
        g.key: g for g in plan_groups(ctx.catalog.terms, ctx.offerings.values())
    }
    horizon = ctx.scenario.horizon
    result = []
    for held in ctx.scenario.savings_plans:
        kind = SAVINGS_PLAN_TERM_KIND[held.kind]
        group = groups.get((kind, held.term.years or 0, held.scope, held.payment))
        rates = {o: r for o, r in (group.rates if group else {}).items() if o in ctx.offerings}
        first = max(0, math.ceil(horizon.hour_of(held.start) / ctx.p - 1e-9))
        end = min(ctx.periods, math.floor(horizon.hour_of(held.ends) / ctx.p + 1e-9))
        result.append(SavingsPlan(held.name, kind, held.usd_per_hour, rates, first, max(first, end)))  # type: ignore[arg-type]
    return result
