"""Chargeback: who pays for what, at effective rates. The one place that splits a commitment's cost over
the workloads that used it, for ``plan.json``'s ``costs.by_team`` and for ``gpuplan chargeback``.

The rule (:func:`amortize`), for one commitment over one window (the horizon for ``plan.json``, a
calendar month for chargeback): the window's cost ``c`` of the commitment is paid whether used or not;
of its ``H`` committed node-hours, workloads used ``u_k`` (``U = sum u_k``). A used hour costs
``c / max(H, U)`` (the commitment's rate at full use); the cost of the idle hours, ``c - U c / H``, is
charged by the :class:`IdleRule`:

- ``usage``: shared by use, so every user pays ``c u_k / U`` (one effective rate per used hour);
- ``guarantees``: to the teams whose guarantees the commitment backs (a team with guaranteed GPUs whose
  workloads can run on its GPU model: the backing rule of ``planner/planning/optimize/build.py``, constraint
  16), in proportion to their guaranteed GPUs; a commitment that backs no guarantee is shared by use.

A window nobody used is charged to the backers, else to every team that holds a guarantee, else to all
teams equally. Owned nodes and capacity reservations are commitments too (paid for their window).

A savings plan (issue 38: a commitment of dollars per hour, ``models/savingsplans.py``) is amortized by
the same rule in dollars rather than node-hours: in a month its cost ``c`` is its commitment then, its
"capacity" is that same commitment, and a user "used" the dollars it spent covering that user's nodes
(covered node-hours x the plan's rate for the offering). So each team pays the dollars the plan spent on
it, and the unspent commitment is idle cost charged by the :class:`IdleRule`; under ``guarantees`` its
backers are the teams whose guarantee any offering it covers could back (a Compute plan covers many).

Everything else is paid as used: on-demand and spot node-hours at their prices. A MIG slice counts as
the fraction of a GPU its compute slices are (``g/7``: ``models/mig.py``), so a 1g.10gb replica-hour on
an H100 is 1/7 GPU-hour. A spot training run in a plan holds its nodes for its work plus the expected
overhead of interruptions (``models/preemption.py``: checkpoint writes, lost work, restarts), so its
effective price per GPU-hour of work is the spot price times ``1 + expected_overhead``
(``usd_per_work_gpu_hour``).

Months are calendar months in UTC (what cloud bills and finance use), not the 730-hour months of
``planner/planning/monthly.py``'s cost curves. Every total reconciles: the rows sum to the plan's cost
(``costs.total_usd``; with ``month``, the plan's rows and commitments in that month) or, for usage, to
the bill computed from the same rates (:attr:`Chargeback.expected_total_usd`).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import cache
from typing import Any, Final, TypeVar, cast

import numpy as np
import pandas as pd

from models.billing import row_rate
from models.catalog import gpu_model_matches
from models.mig import COMPUTE_SLICES, profile_named, replica_slice, supports_mig
from models.tiers import PREPAID_TIERS, Tier

__all__ = [
    "CHARGEBACK_COLUMNS",
    "IDLE_PROJECT",
    "SCHEMA",
    "WINDOW_COLUMNS",
    "Book",
    "Chargeback",
    "CommitmentWindow",
    "IdleRule",
    "Share",
    "amortize",
    "charge",
    "charge_plan",
    "mig_gpu_fraction",
    "month_of",
    "month_span",
]

SCHEMA: Final = "gpuplan.chargeback/v1"
#: The project of a team's row that carries idle committed capacity charged to it (``guarantees`` rule).
IDLE_PROJECT: Final = "(idle capacity)"
CHARGEBACK_COLUMNS: Final = (
    "month", "team", "project", "tier", "gpu_hours", "work_gpu_hours", "cost_usd", "idle_usd",
    "usd_per_gpu_hour", "usd_per_work_gpu_hour", "list_usd",
)  # fmt: skip

K = TypeVar("K", bound=Hashable)
_MONTH: Final = re.compile(r"[0-9]{4}-[0-9]{2}", re.ASCII)


class IdleRule(StrEnum):
    """Who pays for committed hours nobody used (the module docstring states both rules)."""

    GUARANTEES = "guarantees"
    USAGE = "usage"


@dataclass(frozen=True, slots=True)
class Share:
    """What one payer is charged of a commitment's window: ``usd`` in all, of which ``idle_usd`` for
    hours nobody used."""

    usd: float
    idle_usd: float


def amortize(
    cost: float,
    used: Mapping[K, float],
    capacity: float,
    rule: IdleRule,
    backers: Mapping[K, float],
    fallback: Mapping[K, float] | None = None,
) -> dict[K, Share]:
    """THE chargeback rule for one commitment over one window (module docstring).

    ``used``: hours each user used of it (any unit, the same as ``capacity``, its committed hours in
    the window); ``backers``: payer -> weight (guaranteed GPUs) of the teams whose guarantees it
    backs; ``fallback``: who pays a window nobody used when nothing backs it (default: nobody, and the
    cost is dropped: callers pass one). The shares sum to ``cost``.
    """
    total = sum(used.values())
    if total <= 0:
        payers = backers if sum(backers.values()) > 0 else (fallback or {})
        weight = sum(payers.values())
        return {key: Share(cost * w / weight, cost * w / weight) for key, w in payers.items() if w > 0}
    rate = cost / max(capacity, total)
    weight = sum(backers.values())
    if rule is IdleRule.USAGE or weight <= 0:
        # cost * u / total: the same expression plan.json's costs.by_team has always used
        return {key: Share(cost * u / total, cost * u / total - rate * u) for key, u in used.items()}
    idle = cost - rate * total
    shares = {key: Share(rate * u, 0.0) for key, u in used.items()}
    for key, w in backers.items():
        part = idle * w / weight
        before = shares.get(key, Share(0.0, 0.0))
        shares[key] = Share(before.usd + part, before.idle_usd + part)
    return shares


def mig_gpu_fraction(gpu_model: str, profile: str) -> float:
    """The share of a GPU one MIG slice is, by its compute slices (``3g.40gb`` on an H100: 3/7);
    ValueError naming the valid profiles for an unknown one."""
    return profile_named(gpu_model, profile).compute_slices / COMPUTE_SLICES


def month_of(when: datetime) -> str:
    """The calendar month (UTC) of a time: ``2027-03``."""
    return when.astimezone(UTC).strftime("%Y-%m")


@cache  # a usage file of many rows asks for the same few months again and again
def month_span(month: str) -> tuple[datetime, datetime]:
    """[first hour, first hour of the next month) of ``YYYY-MM``; ValueError if it is not one."""
    try:
        if not _MONTH.fullmatch(month):  # strptime alone takes 2027-3 and other scripts' digits
            raise ValueError(month)
        first = datetime.strptime(month, "%Y-%m").replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"{month!r} is not a month; give YYYY-MM, e.g. 2027-03") from None
    after = (first + timedelta(days=32)).replace(day=1)
    return first, after


# ---- what chargeback reads from a plan -------------------------------------------------------------


@dataclass(frozen=True)
class OfferingRates:
    """An offering as chargeback prices it: per node-hour, and its GPUs."""

    gpu_model: str
    gpus_per_node: int
    on_demand_usd_h: float | None
    spot_usd_h: float | None

    def usd_per_gpu_hour(self, tier: Tier) -> float:
        """Pay-as-you-go price of one GPU-hour on ``tier`` (0 for committed tiers: paid by window)."""
        return row_rate(tier, self.on_demand_usd_h, self.spot_usd_h) / self.gpus_per_node

    @property
    def list_usd_per_gpu_hour(self) -> float:
        """The on-demand list price of a GPU-hour: what a list-price tool (OpenCost) charges."""
        return (self.on_demand_usd_h or 0.0) / self.gpus_per_node


@dataclass(frozen=True)
class CommitmentWindow:
    """One commitment in one month: its cost then and its committed node-hours.

    A savings plan's window (``tier`` savings_plan) counts dollars, not node-hours: ``node_hours`` is its
    commitment in the month (USD), its users' use the dollars it spent on them; ``offering`` is its scope
    and ``covers`` the offerings it has rates for (who backs it under the ``guarantees`` rule)."""

    commitment: str
    offering: str
    tier: Tier
    month: str
    cost_usd: float
    node_hours: float
    covers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Book:
    """What chargeback needs from a plan directory: its horizon, prices, commitments, and teams.

    ``team_models``: the GPU models a team's workloads may use (which commitments back its guarantee);
    ``projects``: workload -> project (the scenario's ``project``, default the workload's name);
    ``mig_memory``: MIG-sized service -> (memory GB, compute share) of a replica."""

    scenario: str
    start: datetime
    period_hours: int
    periods: int
    offerings: dict[str, OfferingRates]
    commitments: list[Any]  # models.plan.Commitment (kept loose: this module does not read plan files)
    guarantees: dict[str, int]
    team_models: dict[str, list[str]]
    projects: dict[str, str]
    mig_memory: dict[str, tuple[float, float | None]]
    teams: list[str]
    total_usd: float
    savings_plans: list[Any] = field(default_factory=list)  # models.plan.SavingsPlanCommitment

    @classmethod
    def from_plan(cls, plan: Any) -> Book:
        """From a :class:`models.plan.Plan` (its plan.json, with the scenario echo in ``inputs``)."""
        return cls.from_document(plan.document)

    @classmethod
    def from_document(cls, doc: Any) -> Book:
        """From a :class:`models.plan.PlanDocument` alone: what backs whose guarantee needs no rows."""
        echo = doc.inputs.model_dump(mode="json")
        workloads = [*echo.get("inference", []), *echo.get("training", [])]
        models: dict[str, list[str]] = defaultdict(list)
        for w in workloads:
            models[w["team"]].extend(w.get("gpu_models") or [])
        mig = {
            w["name"]: (float(w["gpu_memory_gb"]), w.get("gpu_compute_share"))
            for w in echo.get("inference", [])
            if w.get("gpu_memory_gb") is not None
        }
        return cls(
            scenario=doc.scenario,
            start=doc.horizon.start,
            period_hours=doc.horizon.period_hours,
            periods=doc.horizon.periods,
            offerings={
                oid: OfferingRates(o.gpu_model, o.gpus_per_node, o.on_demand_usd_h, o.spot_usd_h)
                for oid, o in doc.offerings.items()
            },
            commitments=list(doc.commitments),
            guarantees={name: t.guaranteed_gpus for name, t in doc.teams.items()},
            team_models=dict(models),
            projects={w["name"]: w.get("project") or w["name"] for w in workloads},
            mig_memory=mig,
            teams=list(doc.teams),
            total_usd=doc.costs.total_usd,
            savings_plans=list(getattr(doc, "savings_plans", None) or []),
        )

    def period_start(self, period: int) -> datetime:
        return self.start + timedelta(hours=period * self.period_hours)

    @property
    def end(self) -> datetime:
        """The end of the plan's horizon (the first instant after it)."""
        return self.period_start(self.periods)

    def commitment_span(self, commitment: Any) -> tuple[datetime, datetime]:
        """[start, end) of a commitment inside the horizon (plans before start/end: its periods)."""
        end_period = self.periods if commitment.end_period is None else commitment.end_period
        return self.period_start(commitment.start_period), self.period_start(end_period)

    def backers(self, offering: str) -> dict[str, float]:
        """Team -> guaranteed GPUs of the teams whose guarantee a commitment on ``offering`` backs."""
        return self.backers_of((offering,))

    def backers_of(self, offerings: Sequence[str]) -> dict[str, float]:
        """Team -> guaranteed GPUs of the teams whose guarantee a commitment on any of ``offerings`` backs
        (those the plan knows: a savings plan's rates may name offerings the plan never used)."""
        models = {self.offerings[o].gpu_model for o in offerings if o in self.offerings}
        return {
            team: float(gpus)
            for team, gpus in self.guarantees.items()
            if gpus > 0 and any(gpu_model_matches(m, self.team_models.get(team, [])) for m in models)
        }

    def window_backers(self, window: CommitmentWindow) -> dict[str, float]:
        """Who a window's idle hours (or dollars) go to under the ``guarantees`` rule."""
        return self.backers_of(window.covers) if window.covers else self.backers(window.offering)

    def savings_plan_rates(self) -> dict[tuple[str, str], float]:
        """(savings plan, offering) -> the plan's rate for it, USD per node-hour."""
        return {(sp.name, o): float(rate) for sp in self.savings_plans for o, rate in sp.rates.items()}

    def fallback(self) -> dict[str, float]:
        """Who pays a window nobody used and nothing backs: the guarantee holders, else every team."""
        holders = {team: float(g) for team, g in self.guarantees.items() if g > 0}
        return holders or dict.fromkeys(self.teams, 1.0)


# ---- the chargeback ----------------------------------------------------------------------------------

#: Columns of the usage frame :func:`charge` takes (one row per use; ``commitment`` empty off commitments).
USE_COLUMNS: Final = (
    "month", "team", "project", "tier", "offering", "commitment", "gpu_hours", "work_gpu_hours",
    "node_hours", "cost_usd",
)  # fmt: skip


#: Columns of :attr:`Chargeback.windows`: each commitment's use and idle share per month.
WINDOW_COLUMNS: Final = (
    "month", "commitment", "offering", "tier", "cost_usd", "node_hours", "used_node_hours",
    "used_fraction", "idle_usd", "usd_per_used_gpu_hour",
)  # fmt: skip


@dataclass
class Chargeback:
    """The result: ``rows`` (one per month, team, project, tier), the windows' idle share, and the total
    it must reconcile with."""

    rows: pd.DataFrame
    windows: pd.DataFrame
    rates: pd.DataFrame
    expected_total_usd: float
    idle_rule: IdleRule
    source: str
    notes: list[str] = field(default_factory=list)

    @property
    def total_usd(self) -> float:
        return float(self.rows["cost_usd"].sum()) if len(self.rows) else 0.0


def charge(
    book: Book,
    use: pd.DataFrame,
    windows: Sequence[CommitmentWindow],
    rule: IdleRule,
    expected_total_usd: float,
    source: str,
) -> Chargeback:
    """Charge ``use`` (:data:`USE_COLUMNS`) and the commitments' ``windows``: pay-as-you-go rows at
    their cost, each window split by :func:`amortize` over the node-hours its users used in the month."""
    keys = ["month", "team", "project", "tier"]
    sums: dict[tuple[str, str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])
    list_rate = use["offering"].map(lambda o: book.offerings[o].list_usd_per_gpu_hour).astype(float)
    use = use.assign(list_usd=use["gpu_hours"].to_numpy(float) * list_rate.to_numpy(float))
    grouped = use.groupby(keys, sort=False)[["gpu_hours", "work_gpu_hours", "cost_usd", "list_usd"]].sum()
    for key, values in grouped.iterrows():
        month, team, project, tier = (str(k) for k in cast(tuple[Any, ...], key))
        entry = sums[(month, team, project, tier)]
        entry[0] += float(values["gpu_hours"])
        entry[1] += float(values["work_gpu_hours"])
        entry[2] += float(values["cost_usd"])
        entry[4] += float(values["list_usd"])
    on_commitment = _with_units(book, use[use["commitment"] != ""])
    used = on_commitment.groupby(["commitment", "month", "team", "project"])["units"].sum()
    used_by_window: dict[tuple[str, str], dict[tuple[str, str], float]] = defaultdict(dict)
    for index, hours in used.items():
        name, month, team, project = (str(k) for k in cast(tuple[Any, ...], index))
        used_by_window[(name, month)][(team, project)] = float(hours)
    window_rows = []
    fallback = {(team, IDLE_PROJECT): w for team, w in book.fallback().items()}
    for window in windows:
        mine = used_by_window.get((window.commitment, window.month), {})
        backers = {(team, IDLE_PROJECT): w for team, w in book.window_backers(window).items()}
        shares = amortize(window.cost_usd, mine, window.node_hours, rule, backers, fallback)
        idle = 0.0
        for (team, project), share in shares.items():
            entry = sums[(window.month, team, project, str(window.tier))]
            entry[2] += share.usd
            entry[3] += share.idle_usd
            idle += share.idle_usd
        used_hours = sum(mine.values())
        window_rows.append(
            {
                "month": window.month,
                "commitment": window.commitment,
                "offering": window.offering,
                "tier": str(window.tier),
                "cost_usd": window.cost_usd,
                "node_hours": window.node_hours,
                "used_node_hours": used_hours,
                "used_fraction": used_hours / window.node_hours if window.node_hours > 0 else 0.0,
                "idle_usd": idle,
                "usd_per_used_gpu_hour": _usd_per_used_gpu_hour(book, window, used_hours, on_commitment),
            }
        )
    records = []
    for (month, team, project, tier), (gpu_h, work_h, usd, idle_usd, list_usd) in sums.items():
        records.append(
            {
                "month": month,
                "team": team,
                "project": project,
                "tier": tier,
                "gpu_hours": gpu_h,
                "work_gpu_hours": work_h,
                "cost_usd": usd,
                "idle_usd": idle_usd,
                "usd_per_gpu_hour": usd / gpu_h if gpu_h > 0 else math.nan,
                "usd_per_work_gpu_hour": usd / work_h if work_h > 0 else math.nan,
                "list_usd": list_usd,
            }
        )
    rows = pd.DataFrame(records, columns=list(CHARGEBACK_COLUMNS))
    rows = rows.sort_values(keys, kind="stable").reset_index(drop=True)
    return Chargeback(
        rows=rows,
        # columns named: a plan without commitments has no windows, and callers still read the columns
        windows=pd.DataFrame(window_rows, columns=list(WINDOW_COLUMNS)),
        rates=_rates(book, use, window_rows),
        expected_total_usd=expected_total_usd,
        idle_rule=rule,
        source=source,
    )


def _with_units(book: Book, use: pd.DataFrame) -> pd.DataFrame:
    """``use`` with ``units``: what each row used of its commitment, in the commitment's own unit (node-hours
    of a node commitment; a savings plan's dollars: covered node-hours x its rate for the offering)."""
    rates = book.savings_plan_rates()
    units = use["node_hours"].to_numpy(float).copy()
    plan_rows = (use["tier"] == str(Tier.SAVINGS_PLAN)).to_numpy()
    if plan_rows.any():
        pairs = zip(use["commitment"][plan_rows], use["offering"][plan_rows], strict=True)
        units[plan_rows] *= np.array([rates[(str(c), str(o))] for c, o in pairs], dtype=float)
    return use.assign(units=units)


def _usd_per_used_gpu_hour(book: Book, window: CommitmentWindow, used: float, use: pd.DataFrame) -> float:
    """A window's cost over the GPU-hours its users ran on it (NaN if none)."""
    if used <= 0:
        return math.nan
    if window.tier is not Tier.SAVINGS_PLAN:
        return window.cost_usd / (used * book.offerings[window.offering].gpus_per_node)
    mine = use[(use["commitment"] == window.commitment) & (use["month"] == window.month)]
    gpu_hours = float(mine["gpu_hours"].sum())
    return window.cost_usd / gpu_hours if gpu_hours > 0 else math.nan


def _rates(book: Book, use: pd.DataFrame, windows: list[dict[str, Any]]) -> pd.DataFrame:
    """Unit rates per month, offering and tier: the list (on-demand) price of a GPU-hour, and what a
    GPU-hour used there effectively cost (a commitment's window cost over its used GPU-hours; spot per
    GPU-hour of work)."""
    records = []
    paid = use[use["commitment"] == ""]
    for (month, offering, tier), part in paid.groupby(["month", "offering", "tier"]):
        rates = book.offerings[str(offering)]
        work = float(part["work_gpu_hours"].sum())
        records.append(
            {
                "month": str(month),
                "offering": str(offering),
                "tier": str(tier),
                "list_usd_per_gpu_hour": rates.list_usd_per_gpu_hour,
                "price_usd_per_gpu_hour": rates.usd_per_gpu_hour(Tier(str(tier))),
                "effective_usd_per_gpu_hour": float(part["cost_usd"].sum()) / work if work > 0 else math.nan,
            }
        )
    by_key: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    records.extend(_savings_plan_rates(book, use, windows))
    for w in windows:
        if w["tier"] == Tier.SAVINGS_PLAN:
            continue
        entry = by_key[(w["month"], w["offering"], w["tier"])]
        entry[0] += w["cost_usd"]
        entry[1] += w["used_node_hours"] * book.offerings[w["offering"]].gpus_per_node
    for (month, offering, tier), (cost, gpu_hours) in by_key.items():
        rates = book.offerings[offering]
        committed = [c for c in book.commitments if c.offering == offering and str(c.term.tier) == tier]
        price = committed[0].usd_per_node_hour / rates.gpus_per_node if committed else math.nan
        records.append(
            {
                "month": month,
                "offering": offering,
                "tier": tier,
                "list_usd_per_gpu_hour": rates.list_usd_per_gpu_hour,
                "price_usd_per_gpu_hour": price,
                "effective_usd_per_gpu_hour": cost / gpu_hours if gpu_hours > 0 else math.nan,
            }
        )
    columns = [
        "month", "offering", "tier", "list_usd_per_gpu_hour", "price_usd_per_gpu_hour",
        "effective_usd_per_gpu_hour",
    ]  # fmt: skip
    return (
        pd.DataFrame(records, columns=columns)
        .sort_values(["month", "offering", "tier"])
        .reset_index(drop=True)
    )


def _savings_plan_rates(book: Book, use: pd.DataFrame, windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per month and offering a savings plan covered: its rate per GPU-hour, and what a covered GPU-hour
    effectively cost (the rate, times the month's commitment over what it spent: its idle dollars carried
    by the dollars spent)."""
    rates = book.savings_plan_rates()
    covered = use[(use["tier"] == str(Tier.SAVINGS_PLAN)) & (use["commitment"] != "")]
    spent = {(w["commitment"], w["month"]): (w["cost_usd"], w["used_node_hours"]) for w in windows
             if w["tier"] == Tier.SAVINGS_PLAN}  # fmt: skip
    records = []
    summed = covered.groupby(["month", "commitment", "offering"])["gpu_hours"].sum()
    for key, gpu_hours in summed.items():
        month, name, offering = (str(k) for k in cast(tuple[Any, ...], key))
        rate = rates[(str(name), str(offering))] / book.offerings[str(offering)].gpus_per_node
        cost, dollars = spent.get((str(name), str(month)), (0.0, 0.0))
        effective = rate * cost / dollars if dollars > 0 and gpu_hours > 0 else math.nan
        records.append(
            {
                "month": str(month),
                "offering": str(offering),
                "tier": str(Tier.SAVINGS_PLAN),
                "list_usd_per_gpu_hour": book.offerings[str(offering)].list_usd_per_gpu_hour,
                "price_usd_per_gpu_hour": rate,
                "effective_usd_per_gpu_hour": effective,
            }
        )
    return records


# ---- from a plan (the forecast) ----------------------------------------------------------------------


def charged_gpus(book: Book, rows: pd.DataFrame) -> np.ndarray:
    """Each allocation row's GPUs as chargeback counts them: whole GPUs held, except a MIG service's
    replicas, which count as the GPU fraction of their slice (compute slices / 7). One definition, so
    the plan's team GPU-hours and peaks agree with chargeback's (issue 42)."""
    gpus = rows["gpus"].to_numpy(float).copy()
    for name, (memory, share) in book.mig_memory.items():
        mask = (rows["workload"] == name).to_numpy()
        if not mask.any():
            continue
        for offering in set(rows.loc[mask, "offering"]):
            model = book.offerings[str(offering)].gpu_model
            profile = replica_slice(model, memory, share) if supports_mig(model) else None
            if profile is None:
                continue
            here = mask & (rows["offering"] == offering).to_numpy() & rows["replicas"].notna().to_numpy()
            gpus[here] = rows["replicas"].to_numpy(float)[here] * profile.compute_slices / COMPUTE_SLICES
    return gpus


def charge_plan(plan: Any, rule: IdleRule, month: str | None = None) -> Chargeback:
    """The chargeback of a plan's own forecast (``allocations.csv`` and ``commitments``), in calendar
    months; ``month`` keeps one. A commitment's cost is spread over its periods evenly (as
    ``cost_in_horizon_usd`` is its periods at its rate), so the months add up to the plan's total."""
    book = Book.from_plan(plan)
    alloc = plan.allocations
    p = book.period_hours
    period_month = np.array([month_of(book.period_start(k)) for k in range(book.periods)])
    rows = alloc.reset_index(drop=True)
    months = period_month[rows["period"].to_numpy(np.int64)] if len(rows) else np.array([], dtype=str)
    gpu_hours = charged_gpus(book, rows) * p
    work = gpu_hours.copy()
    # spot training: GPU-hours of work are the held hours less the expected preemption overhead
    for run in plan.document.training:
        if run.tier != Tier.SPOT:
            continue
        period = rows["period"].to_numpy(np.int64)
        mask = (
            (rows["workload"] == run.job).to_numpy()
            & (rows["tier"] == Tier.SPOT).to_numpy()
            & (period >= run.start_period)
            & (period < run.start_period + run.periods)
        )
        work[mask] = gpu_hours[mask] / (1.0 + run.expected_overhead)
    use = pd.DataFrame(
        {
            "month": months,
            "team": rows["team"].astype(str).to_numpy(),
            "project": [book.projects.get(str(w), str(w)) for w in rows["workload"].tolist()],
            "tier": rows["tier"].astype(str).to_numpy(),
            "offering": rows["offering"].astype(str).to_numpy(),
            # an all-empty column reads as floats: NaN is "no commitment", any value its name
            "commitment": [("" if pd.isna(c) else str(c)) for c in rows["commitment"].tolist()]
            if "commitment" in rows
            else "",
            "gpu_hours": gpu_hours,
            "work_gpu_hours": work,
            "node_hours": rows["nodes"].to_numpy(float) * p,
            "cost_usd": rows["cost_usd"].to_numpy(float),
        }
    )
    committed = use["tier"].isin([str(t) for t in PREPAID_TIERS])
    use.loc[~committed, "commitment"] = ""
    windows: list[CommitmentWindow] = []
    for c in plan.document.commitments:
        end = book.periods if c.end_period is None else c.end_period
        if c.cost_in_horizon_usd > 0 and end <= c.start_period < book.periods:
            # a term that ends inside the period it starts in (its hours are fewer than a period's) is
            # still paid: charged in that period's month, or the months would not add up to the plan
            end = c.start_period + 1
        span = period_month[c.start_period : end]
        if not len(span):
            continue
        labels, counts = np.unique(span, return_counts=True)
        for label, count in zip(labels, counts, strict=True):
            windows.append(
                CommitmentWindow(
                    commitment=c.name,
                    offering=c.offering,
                    tier=c.term.tier,
                    month=str(label),
                    cost_usd=c.cost_in_horizon_usd * float(count) / len(span),
                    node_hours=c.nodes * float(count) * p,
                )
            )
    windows.extend(_savings_plan_windows(plan.document.savings_plans, period_month))
    expected = book.total_usd
    notes = []
    if month is not None:
        use = use[use["month"] == month]
        windows = [w for w in windows if w.month == month]
        expected = float(use["cost_usd"].sum()) + sum(w.cost_usd for w in windows)
        notes.append(f"month {month}: the plan's rows in the month and its commitments' cost then")
    result = charge(book, use, windows, rule, expected, "plan")
    result.notes.extend(notes)
    return result


def _savings_plan_windows(plans: Sequence[Any], period_month: np.ndarray) -> list[CommitmentWindow]:
    """Each savings plan's windows, one per calendar month of its periods in the horizon: its cost there
    spread over its periods evenly (``cost_in_horizon_usd`` is its hours at its rate), counted in dollars."""
    windows = []
    for sp in plans:
        span = period_month[sp.start_period : sp.end_period]
        if not len(span):
            continue
        labels, counts = np.unique(span, return_counts=True)
        for label, count in zip(labels, counts, strict=True):
            cost = sp.cost_in_horizon_usd * float(count) / len(span)
            windows.append(
                CommitmentWindow(
                    commitment=sp.name,
                    offering=sp.scope,
                    tier=Tier.SAVINGS_PLAN,
                    month=str(label),
                    cost_usd=cost,
                    node_hours=cost,
                    covers=tuple(sorted(sp.rates)),
                )
            )
    return windows
