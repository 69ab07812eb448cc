"""gpuplan verify (planner/verify/): a real plan it accepts, and hand-corrupted copies of it, each breaking
one rule, that it rejects with exactly that violation kind.

The base plan is the planner's own output on a small scenario chosen so today's planner is integral and
billing-consistent: whole-GPU chat replicas fill two committed nodes exactly, a MIG-sized service fills a
committed one-GPU node, ft runs on spot. Under the billing rule the commitment covers any non-spot node of
its offering first, so where chat shares A with a non-spot gang (pretrain, probe) both are split
proportionally between reserved_1y and on_demand. Corruptions that change what is paid re-price the rows
and re-total ``costs``; those that move, cut or drop a gang move all its tier rows together and re-bill
(:meth:`Edit.rebill`), so only the rule they break is broken.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from models.catalog import Catalog
from models.inputs import load_inputs
from models.plan import (
    ALLOCATION_COLUMNS,
    MigConfigUse,
    MigNodeLayout,
    Plan,
    PlanDocument,
    UnservedInference,
    UnservedTraining,
)
from models.tiers import COMMITTED_TIERS, TERM_TIER, Tier
from planner.verify import KINDS, verify, verify_directory
from planner.verify.packing import fits, mig_gpus
from planner.verify.teams import max_flow

A = "aws:us-east-1:p5.48xlarge"  # 8 x H100, EFA: chat's commitments, gangs, spot
B = "aws:us-east-1:p5.nofab"  # 8 x H100 without a fabric, dearer: unused by the planner
M = "aws:us-east-1:a100.1x"  # 1 x A100-80GB, max_nodes 2: the MIG-sized service
DATA = Path(__file__).resolve().parents[1] / "data"


def _scenario(kit: SimpleNamespace, directory: Path) -> Path:
    kit.write_catalog_csv(
        directory / "catalog.csv",
        [
            kit.offering_row(
                instance_type="p5.48xlarge",
                on_demand_usd_h=10.0,
                spot_usd_h=4.0,
                reserved_1y_usd_h=6.0,
                reserved_3y_usd_h=7.0,
                spot_interruptions_per_hour=0.01,
            ),
            kit.offering_row(
                instance_type="p5.nofab", fabric="none", on_demand_usd_h=12.0, reserved_1y_usd_h=9.0
            ),
            kit.offering_row(
                instance_type="a100.1x",
                gpu_model="A100-80GB",
                gpus_per_node=1,
                gpu_memory_gb=80,
                fabric="none",
                on_demand_usd_h=2.0,
                reserved_1y_usd_h=1.0,
                max_nodes=2,
            ),
        ],
    )
    flat = lambda n: {"profile": "flat", "base": n}  # noqa: E731
    data = kit.scenario_dict(
        hours=24,
        terms=["1y", "3y"],
        max_spot_share=0.5,
        teams=[{"name": "serving", "guaranteed_gpus": 16}, {"name": "research", "burst_gpus": 24}],
        inference=[
            {
                "name": "chat",
                "team": "serving",
                "gpus_per_replica": 2,
                "gpu_models": ["H100"],
                "replicas": flat(8),
            },
            {
                "name": "embed",
                "team": "serving",
                "gpu_memory_gb": 9,
                "gpu_models": ["A100-80GB"],
                "latency_critical": False,
                "replicas": flat(7),
            },  # 1g.10gb: 7 per GPU
            {
                "name": "eval",
                "team": "research",
                "gpus_per_replica": 8,
                "gpu_models": ["H100"],
                "latency_critical": False,
                "replicas": flat(0),
            },
        ],
        training=[
            {
                "name": "pretrain",
                "team": "research",
                "nodes": 2,
                "gpu_models": ["H100"],
                "hours": 4,
                "earliest_start": "2027-01-04T02:00:00Z",
                "deadline": "2027-01-04T20:00:00Z",
            },
            {
                "name": "ft",
                "team": "research",
                "nodes": 1,
                "gpu_models": ["H100"],
                "hours": 3,
                "preemptible": True,
                "fabric": "none",
            },
            {
                "name": "probe",
                "team": "research",
                "nodes": 1,
                "gpu_models": ["H100"],
                "hours": 1,
                "fabric": "none",
            },
        ],
    )
    return kit.write_scenario_yaml(directory / "scenario.yaml", data)


@pytest.fixture(scope="module")
def base(kit: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The planner's plan of the small scenario, written to a directory, with what corruptions need."""
    from planner.planning.optimize import optimize

    directory = tmp_path_factory.mktemp("verify-base")
    scenario = _scenario(kit, directory)
    inputs = load_inputs(scenario)
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings())
    plan.write(directory)
    read = Plan.read(directory)
    placements = {t.job: t for t in read.document.training}
    assert Tier.SPOT in {p.tier for p in placements.values()}, "the base has a spot gang"
    assert (read.allocations["tier"] == Tier.ON_DEMAND).any(), "and rows on demand"
    pretrain = read.allocations[read.allocations["workload"] == "pretrain"]
    assert placements["pretrain"].tier.committed and set(pretrain["tier"]) == {"reserved_1y", "on_demand"}
    return SimpleNamespace(
        scenario=scenario, directory=directory, inputs=inputs, plan=read, placements=placements,
        catalog=Catalog.load(directory / "catalog.csv"),
    )  # fmt: skip


def test_the_base_plan_is_accepted(base: SimpleNamespace) -> None:
    findings = verify(base.inputs, base.plan)
    assert findings.ok, [(k.kind, k.examples[:2]) for k in findings.summary()]
    rows = base.plan.allocations
    assert (rows["tier"] == Tier.SPOT).any() and rows["tier"].isin(COMMITTED_TIERS).any()
    assert (rows["replicas"] > 0).sum() >= 48  # chat and embed every hour: integer replicas, checked


# ---- corruptions: helpers -------------------------------------------------------------------------------


class Edit:
    """A copy of the base plan to corrupt: the document, its rows, and re-pricing helpers."""

    def __init__(self, base: SimpleNamespace) -> None:
        self.doc: PlanDocument = base.plan.document.model_copy(deep=True)
        self.rows: pd.DataFrame = base.plan.allocations.copy()
        self.catalog: Catalog = base.catalog
        self.placements = {t.job: t for t in self.doc.training}
        self.drop_replicas = False
        self.after_write: Callable[[Path], None] | None = None  # a change to the files written

    def row(self, period: int, offering: str, tier: str, workload: str) -> Any:
        """The index of one row (asserting it is there)."""
        r = self.rows
        match = r[
            (r["period"] == period)
            & (r["offering"] == offering)
            & (r["tier"] == tier)
            & (r["workload"] == workload)
        ]
        assert len(match) == 1, (period, offering, tier, workload)
        return match.index[0]

    def add(
        self, period: int, offering: str, tier: str, workload: str, nodes: float, replicas: float = 0
    ) -> None:
        kind = "training" if workload in ("pretrain", "ft", "probe") else "inference"
        team = "serving" if workload in ("chat", "embed") else "research"
        row = {"period": period, "offering": offering, "tier": tier, "workload": workload, "kind": kind,
               "team": team, "nodes": nodes, "gpus": 0.0, "replicas": replicas, "cost_usd": 0.0,
               "commitment": self.commitment_of(offering) if Tier(tier).committed else ""}  # fmt: skip
        self.rows = pd.concat([self.rows, pd.DataFrame([row])], ignore_index=True)
        self.reprice()

    def commitment_of(self, offering: str) -> str:
        """The name of the commitment on ``offering`` (one per offering in these tests; "" if none)."""
        return next((c.name for c in self.doc.commitments if c.offering == offering), "")

    def reprice(self) -> None:
        """GPUs and cost of every row from the catalog (committed rows cost 0), same-key rows merged."""
        self.rows["commitment"] = [
            self.commitment_of(o) if Tier(t).committed else ""
            for o, t in zip(self.rows["offering"], self.rows["tier"], strict=True)
        ]
        key = ["period", "offering", "tier", "workload", "kind", "team", "commitment"]
        self.rows = self.rows.groupby(key, as_index=False)[["nodes", "gpus", "replicas", "cost_usd"]].sum()
        offerings = {o.id: o for o in self.catalog}
        gpn = self.rows["offering"].map(lambda o: offerings[o].gpus_per_node if o in offerings else 8)
        self.rows["gpus"] = self.rows["nodes"] * gpn
        price = [
            0.0 if Tier(t).committed or o not in offerings else (offerings[o].price(t) or 0.0)
            for o, t in zip(self.rows["offering"], self.rows["tier"], strict=True)
        ]
        self.rows["cost_usd"] = self.rows["nodes"] * price

    def retotal(self) -> None:
        """``costs`` and each run's ``cost_usd`` recomputed from the rows and commitments as they now are."""
        rows, commitments = self.rows, self.doc.commitments
        by_period = rows.groupby(["workload", "period"])["cost_usd"].sum()
        self.doc.training = [
            t.model_copy(update={"cost_usd": float(sum(
                by_period.get((t.job, p), 0.0) for p in range(t.start_period, t.start_period + t.periods)
            ))})
            for t in self.doc.training
        ]  # fmt: skip
        by_tier = {tier: 0.0 for tier in self.doc.costs.by_tier}
        for tier, value in rows.groupby("tier")["cost_usd"].sum().items():
            by_tier[Tier(str(tier))] = by_tier.get(Tier(str(tier)), 0.0) + float(value)
        for c in commitments:
            by_tier[TERM_TIER[c.term]] += c.cost_in_horizon_usd
        total = sum(by_tier.values())
        old = self.doc.costs
        scale = total / old.total_usd
        self.doc.costs = old.model_copy(
            update={
                "total_usd": total, "by_tier": by_tier, "by_cloud": {"aws": total},
                "by_team": {k: v * scale for k, v in old.by_team.items()},
                "by_workload": {k: v * scale for k, v in old.by_workload.items()},
            }
        )  # fmt: skip
        self.recash()

    def recash(self) -> None:
        """``costs.cash_by_month`` as the planner counts it from the rows and commitments as they now are."""
        from planner.planning.monthly import cash_by_month

        cash = cash_by_month(Plan(self.doc, self.rows))
        self.doc.costs = self.doc.costs.model_copy(update={"cash_by_month": cash})

    def rebill(self) -> None:
        """The billing rule re-applied to the non-spot rows of every (period, offering): its commitments
        cover the first nodes, each workload's rows split between the committed tier and on_demand in
        proportion (replicas rounded), only the excess on demand; non-spot gangs' tier and
        committed_fraction follow their rows. Then re-priced and re-totalled."""
        committed: dict[str, tuple[Tier, float]] = {}
        for c in self.doc.commitments:
            tier, nodes = committed.get(c.offering, (TERM_TIER[c.term], 0.0))
            assert tier == TERM_TIER[c.term], "one committed tier per offering in these tests"
            committed[c.offering] = (tier, nodes + c.nodes)
        rows = self.rows
        spot = rows[rows["tier"] == Tier.SPOT]
        held = rows[rows["tier"] != Tier.SPOT]
        out = []
        for (period, offering), group in held.groupby(["period", "offering"]):
            tier, c = committed.get(str(offering), (Tier.ON_DEMAND, 0.0))
            n = float(group["nodes"].sum())
            share = min(n, c) / n if n > 0 else 0.0
            key = ["workload", "kind", "team"]
            for (workload, kind, team), mine in group.groupby(key):
                nodes, replicas = float(mine["nodes"].sum()), float(mine["replicas"].sum())
                on_commitment = round(replicas * share)
                for t, part, r in (
                    (tier, nodes * share, on_commitment),
                    (Tier.ON_DEMAND, nodes * (1 - share), replicas - on_commitment),
                ):
                    if part > 1e-9:
                        out.append({"period": period, "offering": offering, "tier": str(t),
                                    "workload": workload, "kind": kind, "team": team, "nodes": part,
                                    "gpus": 0.0, "replicas": r, "cost_usd": 0.0,
                                    "commitment": self.commitment_of(str(offering))
                                    if Tier(t).committed else ""})  # fmt: skip
        self.rows = pd.concat([spot, pd.DataFrame(out)], ignore_index=True)
        self.reprice()
        training = []
        for t in self.doc.training:
            mine = self.rows[self.rows["workload"] == t.job]
            if t.tier != Tier.SPOT and len(mine):
                on = mine["tier"].isin([str(x) for x in COMMITTED_TIERS])
                fraction = float(mine.loc[on, "nodes"].sum() / mine["nodes"].sum())
                tier = Tier(str(mine.loc[on, "tier"].iloc[0])) if fraction >= 0.5 else Tier.ON_DEMAND
                t = t.model_copy(update={"tier": tier, "committed_fraction": fraction,
                                         "cost_usd": float(mine["cost_usd"].sum())})  # fmt: skip
            training.append(t)
        self.doc.training = training
        self.retotal()

    def move_training(
        self, job: str, shift: int = 0, offering: str | None = None, periods: int | None = None
    ) -> None:
        """Placement and all rows of ``job`` (every tier) moved in time / to another offering / cut to
        ``periods``, then re-billed: still billing-consistent, only the moved gang's own rule broken."""
        p = self.placements[job]
        mine = self.rows["workload"] == job
        self.rows.loc[mine, "period"] += shift
        if offering is not None:
            self.rows.loc[mine, "offering"] = offering
        new = p.model_copy(update={"start_period": p.start_period + shift, "offering": offering or p.offering,
                                   "periods": periods or p.periods})  # fmt: skip
        if periods is not None:
            self.rows = self.rows[~mine | (self.rows["period"] < new.start_period + periods)]
        self.doc.training = [new if t.job == job else t for t in self.doc.training]
        self.rebill()

    def drop_training(self, job: str) -> None:
        self.rows = self.rows[self.rows["workload"] != job]
        self.doc.training = [t for t in self.doc.training if t.job != job]
        self.rebill()

    def chat_on_commitment(self, period: int) -> None:
        """chat wholly on its two committed nodes in ``period`` (what a freed pool node allows)."""
        r = self.rows
        self.rows = r[~((r["period"] == period) & (r["workload"] == "chat"))]
        self.add(period, A, "reserved_1y", "chat", 2, 8)

    def write(self, directory: Path) -> Path:
        directory.mkdir(exist_ok=True)
        Plan(self.doc, self.rows.reset_index(drop=True)).write(directory)
        if self.drop_replicas:
            frame = pd.read_csv(directory / "allocations.csv").drop(columns=["replicas"])
            frame.to_csv(directory / "allocations.csv", index=False)
        if self.after_write is not None:
            self.after_write(directory)
        return directory

    def mig_config(self) -> MigConfigUse:
        """The one MIG config of the base plan: embed's 7 x 1g.10gb on M's one GPU, every period."""
        assert self.doc.mig is not None
        (pool,) = self.doc.mig.pools
        (config,) = pool.configs
        return config

    def mig_layout(self, counts: dict[str, int]) -> None:
        """The MIG config's GPU re-laid as ``counts``, in plan.json and so in mig-config.yaml."""
        config = self.mig_config()
        config.node_layout = [MigNodeLayout(gpus=1, mig_devices=counts)]
        assert self.doc.mig is not None
        (group,) = self.doc.mig.config.mig_configs[config.name]
        group.mig_devices = counts


def _set(e: Edit, index: Any, **values: Any) -> None:
    for column, value in values.items():
        e.rows.loc[index, column] = value


def _commitment(e: Edit, offering: str, **update: Any) -> None:
    e.doc.commitments = [
        c.model_copy(update=update) if c.offering == offering else c for c in e.doc.commitments
    ]


# ---- corruptions: one per kind ---------------------------------------------------------------------------


def _demand(e: Edit) -> None:
    _set(e, e.row(0, A, "reserved_1y", "chat"), replicas=4)


def _understated(e: Edit) -> None:
    _set(e, e.row(0, A, "reserved_1y", "chat"), replicas=3)  # 2 replica-hours short, 1 listed
    e.doc.unserved = [
        UnservedInference(workload="chat", team="serving", replica_hours=1, periods=1, reason="x")
    ]


def _fractional_replicas(e: Edit) -> None:
    _set(e, e.row(0, M, "reserved_1y", "embed"), replicas=7.5)


def _packing(e: Edit) -> None:
    _set(e, e.row(0, A, "reserved_1y", "chat"), replicas=10)  # 20 GPUs on two 8-GPU nodes


def _spot_latency(e: Edit) -> None:
    e.add(0, A, "spot", "chat", 1, 4)
    e.retotal()


def _ineligible(e: Edit) -> None:
    e.add(0, M, "on_demand", "chat", 1)  # 2 GPUs per replica on a 1-GPU node
    e.retotal()


def _fabric(e: Edit) -> None:
    e.move_training("pretrain", offering=B)


def _window(e: Edit) -> None:
    e.move_training("pretrain", shift=-e.placements["pretrain"].start_period)  # before earliest_start


def _gang_split(e: Edit) -> None:
    """pretrain's on-demand node of its first period moved to another offering: still 2 nodes, each
    offering billed right (A: chat and pretrain's committed node, N=3 over C=2; B: one on demand)."""
    start = e.placements["pretrain"].start_period
    _set(e, e.row(start, A, "on_demand", "pretrain"), offering=B)
    e.reprice()
    e.retotal()


def _gang_size(e: Edit) -> None:
    e.doc.training = [t.model_copy(update={"nodes": 3}) if t.job == "pretrain" else t for t in e.doc.training]


def _max_nodes(e: Edit) -> None:
    e.add(0, M, "on_demand", "embed", 2)  # 3 nodes held, max_nodes 2
    e.retotal()


def _burst(e: Edit) -> None:
    e.add(e.placements["pretrain"].start_period, A, "on_demand", "eval", 2, 2)  # research: 32 GPUs, burst 24
    e.retotal()


def _guarantee(e: Edit) -> None:
    """chat and probe off the commitment, the commitment dropped: nothing backs serving's 16 GPUs."""
    e.rows.loc[(e.rows["offering"] == A) & e.rows["tier"].isin(["reserved_1y"]), "tier"] = "on_demand"
    e.doc.commitments = [c for c in e.doc.commitments if c.offering != A]
    e.doc.training = [
        t.model_copy(update={"tier": Tier.ON_DEMAND}) if t.tier.committed else t for t in e.doc.training
    ]
    e.reprice()
    e.retotal()


def _committed_first(e: Edit) -> None:
    _set(e, e.row(1, A, "reserved_1y", "chat"), nodes=1, replicas=4)  # period 1: chat alone on A
    e.add(1, A, "on_demand", "chat", 1, 4)  # on demand while a committed node idles
    e.retotal()


def _fractional_nodes(e: Edit) -> None:
    e.add(0, M, "on_demand", "embed", 0.5)
    e.retotal()


def _cost_row(e: Edit) -> None:
    index = e.row(e.placements["pretrain"].start_period, A, "on_demand", "pretrain")
    _set(e, index, cost_usd=2 * e.rows.loc[index, "cost_usd"])
    e.retotal()


def _training_cost(e: Edit) -> None:
    """pretrain's run says it costs $10 less than its rows (the rows, totals and all else unchanged)."""
    run = e.placements["pretrain"]
    assert run.cost_usd > 10
    e.doc.training = [t.model_copy(update={"cost_usd": t.cost_usd - 10}) if t.job == "pretrain" else t
                      for t in e.doc.training]  # fmt: skip


def _costs(**change: float) -> Callable[[Edit], None]:
    def apply(e: Edit) -> None:
        costs = e.doc.costs
        if "total" in change:
            e.doc.costs = costs.model_copy(update={"total_usd": costs.total_usd + change["total"]})
        if "tier" in change:
            by_tier = dict(costs.by_tier)
            by_tier[Tier.ON_DEMAND] += change["tier"]
            by_tier[Tier.SPOT] -= change["tier"]
            e.doc.costs = costs.model_copy(update={"by_tier": by_tier})
        if "cloud" in change:
            e.doc.costs = costs.model_copy(
                update={"by_cloud": {"aws": costs.by_cloud["aws"] + change["cloud"]}}
            )
        if "team" in change:
            by_team = {**costs.by_team, "serving": costs.by_team["serving"] + change["team"]}
            e.doc.costs = costs.model_copy(update={"by_team": by_team})

    return apply


def _rate(e: Edit) -> None:
    _commitment(
        e,
        A,
        usd_per_node_hour=6.5,
        cost_in_horizon_usd=2 * 6.5 * 24,
        obligation_beyond_horizon_usd=2 * 6.5 * 8736,
    )
    e.retotal()


def _commitment_cost(e: Edit) -> None:
    c = next(c for c in e.doc.commitments if c.offering == A)
    _commitment(e, A, cost_in_horizon_usd=c.cost_in_horizon_usd + 10)
    e.retotal()


def _obligation(e: Edit) -> None:
    c = next(c for c in e.doc.commitments if c.offering == A)
    _commitment(e, A, obligation_beyond_horizon_usd=c.obligation_beyond_horizon_usd / 2)


def _existing_commitment(e: Edit) -> None:
    """A purchase marked as held already: the scenario holds no such commitment."""
    c = next(c for c in e.doc.commitments if c.offering == A)
    _commitment(e, A, existing=True)
    assert c.name


def _commitment_start(e: Edit) -> None:
    """An extra purchase (no nodes, so it costs and covers nothing) starting 5 h in: not a purchase step."""
    c = next(c for c in e.doc.commitments if c.offering == A)
    start = e.doc.horizon.start + timedelta(hours=5)
    extra = c.model_copy(
        update={"name": "extra", "nodes": 0, "start": start, "end": start + timedelta(hours=8760),
                "start_period": 5, "end_period": 24, "cost_in_horizon_usd": 0.0,
                "obligation_beyond_horizon_usd": 0.0, "used_node_hours": 0.0}
    )  # fmt: skip
    e.doc.commitments = [*e.doc.commitments, extra]


def _commitment_window(e: Edit) -> None:
    _commitment(e, A, start_period=3)


def _commitment_row(e: Edit) -> None:
    committed = e.rows["tier"].isin([str(t) for t in COMMITTED_TIERS])
    first = e.rows.index[committed][0]
    e.rows.loc[first, "commitment"] = "no-such-commitment"


def _spot_share(e: Edit) -> None:
    e.drop_training("pretrain")  # listed unserved: ft's spot GPU-hours are now 75% of what is served
    e.doc.unserved = [UnservedTraining(workload="pretrain", team="research", run=0, gpu_hours=64, reason="x")]


def _unserved_unlisted(e: Edit) -> None:
    e.drop_training("ft")


def _spot_not_preemptible(e: Edit) -> None:
    probe = e.placements["probe"]
    e.rows = e.rows[e.rows["workload"] != "probe"]
    for period in (probe.start_period, probe.start_period + 1):  # 2 periods: its expected wall hours on spot
        e.add(period, A, "spot", "probe", 1)
        e.chat_on_commitment(period)
    new = probe.model_copy(update={"tier": Tier.SPOT, "periods": 2})
    e.doc.training = [new if t.job == "probe" else t for t in e.doc.training]
    e.retotal()


def _duration(e: Edit) -> None:
    e.move_training("pretrain", periods=3)


def _training_rows(e: Edit) -> None:
    """pretrain's rows (committed and on-demand) gone from its first period, chat re-billed onto the
    freed commitment."""
    start = e.placements["pretrain"].start_period
    r = e.rows
    e.rows = r[~((r["workload"] == "pretrain") & (r["period"] == start))]
    e.rebill()


def _row_identity(e: Edit) -> None:
    e.add(0, A, "on_demand", "ghost", 0)


def _unknown_offering(e: Edit) -> None:
    e.add(0, "aws:us-west-2:p5.48xlarge", "on_demand", "chat", 0)


def _gpus_column(e: Edit) -> None:
    _set(e, e.row(0, A, "reserved_1y", "chat"), gpus=17)


def _tier_unavailable(e: Edit) -> None:
    e.add(0, M, "spot", "embed", 0)  # the A100 offering sells no spot


def _tier_uncommitted(e: Edit) -> None:
    _set(e, e.row(0, A, "reserved_1y", "chat"), tier="reserved_3y")  # only 1y is bought


def _header(e: Edit) -> None:
    e.doc.scenario = "another-scenario"


def _missing_replicas(e: Edit) -> None:
    e.drop_replicas = True


def _unknown_run(e: Edit) -> None:
    e.doc.training = [*e.doc.training, e.placements["ft"]]  # placed twice


def _mig_instances(e: Edit) -> None:
    e.mig_layout({"1g.10gb": 6})  # a legal layout, one instance short of embed's 7 replicas


def _mig_too_few_nodes(e: Edit) -> None:
    """The config scheduled in the first 12 periods only: embed's replicas have no slices after."""
    (entry,) = e.mig_config().schedule
    entry.periods = [(0, 12)]


def _mig_too_many_nodes(e: Edit) -> None:
    (entry,) = e.mig_config().schedule
    entry.nodes = 2  # M holds one node (its commitment) every period


def _mig_on_spot_nodes(e: Edit) -> None:
    (entry,) = e.mig_config().schedule
    entry.spot_nodes = 1  # embed's rows are non-spot; M holds no spot node


def _mig_illegal_layout(e: Edit) -> None:
    e.mig_layout({"1g.10gb": 8})  # 7 at most per GPU


def _mig_yaml_differs(e: Edit) -> None:
    """plan.json as planned; the mig-config.yaml a GPU Operator would apply one instance short."""

    def change(directory: Path) -> None:
        path = directory / "mig-config.yaml"
        path.write_text(path.read_text().replace("1g.10gb: 7", "1g.10gb: 6"))

    e.after_write = change


def _mig_yaml_missing(e: Edit) -> None:
    e.after_write = lambda directory: (directory / "mig-config.yaml").unlink()


def _mig_devices_twice(e: Edit) -> None:
    assert e.doc.mig is not None
    name = e.mig_config().name
    (group,) = e.doc.mig.config.mig_configs[name]
    group.devices = [0, 0]  # the one GPU listed twice


MIG_CORRUPTIONS: dict[str, tuple[Callable[[Edit], None], str]] = {
    "instances": (_mig_instances, "hold [6, 0, 0, 0, 0, 0] instances"),
    "too-few-nodes": (_mig_too_few_nodes, "hold [0, 0, 0, 0, 0, 0] instances"),
    "too-many-nodes": (_mig_too_many_nodes, "2 non-spot nodes scheduled a MIG config; the plan holds 1"),
    "on-spot-nodes": (
        _mig_on_spot_nodes,
        "non-spot MIG replicas [7, 0, 0, 0, 0, 0] but the configs scheduled hold [0, 0, 0, 0, 0, 0]",
    ),  # and, further on, 1 spot node where the plan holds 0
    "illegal-layout": (_mig_illegal_layout, "is not a legal A100-80GB MIG layout"),
    "yaml-differs": (_mig_yaml_differs, "mig-config.yaml differs from plan.json"),
    "yaml-missing": (_mig_yaml_missing, "has no mig-config.yaml"),
    "devices-twice": (_mig_devices_twice, "are not each of the node's 1 GPUs once"),
}


CORRUPTIONS: dict[str, Callable[[Edit], None]] = {
    "demand": _demand,
    "unserved-understated": _understated,
    "fractional-replicas": _fractional_replicas,
    "packing": _packing,
    "spot-latency": _spot_latency,
    "ineligible-offering": _ineligible,
    "fabric": _fabric,
    "window": _window,
    "gang-split": _gang_split,
    "gang-size": _gang_size,
    "max-nodes": _max_nodes,
    "burst": _burst,
    "guarantee": _guarantee,
    "billing-committed-first": _committed_first,
    "fractional-nodes": _fractional_nodes,
    "cost-row": _cost_row,
    "cost-total": _costs(total=100.0),
    "cost-by-tier": _costs(tier=5.0),
    "cost-by-cloud": _costs(cloud=100.0),
    "cost-breakdown": _costs(team=100.0),
    "commitment-rate": _rate,
    "commitment-cost": _commitment_cost,
    "obligation": _obligation,
    "existing-commitment": _existing_commitment,
    "commitment-start": _commitment_start,
    "commitment-window": _commitment_window,
    "commitment-row": _commitment_row,
    "spot-share": _spot_share,
    "unserved-unlisted": _unserved_unlisted,
    "spot-not-preemptible": _spot_not_preemptible,
    "duration": _duration,
    "training-rows": _training_rows,
    "training-cost": _training_cost,
    "row-identity": _row_identity,
    "unknown-offering": _unknown_offering,
    "gpus-column": _gpus_column,
    "tier-unavailable": _tier_unavailable,
    "tier-uncommitted": _tier_uncommitted,
    "plan-header": _header,
    "missing-replicas-column": _missing_replicas,
    "unknown-run": _unknown_run,
    "mig-config": _mig_instances,
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_a_corrupted_plan_is_rejected_with_exactly_its_kind(
    base: SimpleNamespace, tmp_path: Path, kind: str
) -> None:
    edit = Edit(base)
    CORRUPTIONS[kind](edit)
    report = verify_directory(base.scenario, edit.write(tmp_path))
    found = {group.kind: group for group in report.kinds}
    assert set(found) == {kind}, {k: [e.message for e in g.examples[:2]] for k, g in found.items()}
    assert not report.ok and report.violations >= 1


@pytest.mark.parametrize("name", list(MIG_CORRUPTIONS))
def test_a_mig_config_that_does_not_hold_the_replicas_is_rejected(
    base: SimpleNamespace, tmp_path: Path, name: str
) -> None:
    """The MIG configs, their schedule and mig-config.yaml corrupted one way each: only mig-config."""
    corrupt, message = MIG_CORRUPTIONS[name]
    edit = Edit(base)
    corrupt(edit)
    report = verify_directory(base.scenario, edit.write(tmp_path))
    found = {group.kind: group for group in report.kinds}
    assert set(found) == {"mig-config"}, {k: [e.message for e in g.examples[:2]] for k, g in found.items()}
    assert any(message in e.message for e in found["mig-config"].examples), found["mig-config"].examples


def test_the_mig_check_counts_every_period_it_misses(base: SimpleNamespace, tmp_path: Path) -> None:
    edit = Edit(base)
    _mig_too_few_nodes(edit)
    report = verify_directory(base.scenario, edit.write(tmp_path))
    (group,) = report.kinds
    assert group.count == 12 and [e.period for e in group.examples[:2]] == [12, 13]
    assert group.examples[0].offering == M


#: Kinds only a plan with a savings plan can break; the base scenario has none, so their corruptions are in
#: test_savings_plan_plan.py (held plans: the test_verify_finds_* tests there, one per kind) and
#: test_savings_plan_buy.py (bought plans: savings-plan-purchase).
#: payment options and cash (issue 38): their corruptions are in test_payment_options.py
PAYMENT_KINDS = {"payment", "upfront-cap", "cash-month"}
# Capacity Blocks: their corruptions are in test_capacity_blocks.py (a plan that buys one)
BLOCK_KINDS = {"block-fee", "block-rows", "block-unavailable"}
# GCP flex-start: their corruptions are in test_flex_start.py (a plan that places a gang on flex-start)
FLEX_KINDS = {"flex-start-unavailable", "flex-start-delay", "flex-start-cost"}
SAVINGS_PLAN_KINDS = {
    "existing-savings-plan", "savings-plan-cost", "savings-plan-row", "savings-plan-coverage",
    "savings-plan-budget", "savings-plan-purchase",
}  # fmt: skip


def test_every_kind_has_a_corruption_except_owned_delivery() -> None:
    """One corrupted plan per violation kind (owned nodes, which the base scenario has not, have their own
    test below; savings plans theirs in test_savings_plan_plan.py)."""
    assert set(KINDS) - set(CORRUPTIONS) == {
        "owned-before-delivery", *SAVINGS_PLAN_KINDS, *PAYMENT_KINDS, *BLOCK_KINDS, *FLEX_KINDS,
    }  # fmt: skip


# ---- owned nodes, old plans --------------------------------------------------------------------------


def test_work_on_owned_nodes_before_delivery_is_reported(
    base: SimpleNamespace, kit: SimpleNamespace, tmp_path: Path
) -> None:
    """The same scenario with own servers arriving after 7.3 h: one owned node bought, and chat moved
    onto it in hour 1 (where chat is alone on its two reserved nodes). Before delivery the node is not
    committed capacity yet, so the billing rule breaks too (its rows are committed while C = 0)."""
    import yaml

    from models.scenario import Colocation
    from models.tco import owned_usd_per_node_hour
    from models.tiers import Term

    data = yaml.safe_load(base.scenario.read_text())
    data["colocation"] = {"site": "colo", "max_nodes": 4, "lead_time_months": 0.01}
    scenario = kit.write_scenario_yaml(tmp_path / "owned.yaml", data)
    (tmp_path / "catalog.csv").write_bytes((base.directory / "catalog.csv").read_bytes())
    rate = owned_usd_per_node_hour(Colocation.model_validate(data["colocation"]))
    e = Edit(base)
    e.doc.commitments = [
        *e.doc.commitments,
        e.doc.commitments[0].model_copy(
            update={
                "offering": "owned:colo:8xH100",
                "term": Term.OWNED,
                "nodes": 1,
                "usd_per_node_hour": rate,
                "cost_in_horizon_usd": rate * 24,
                "obligation_beyond_horizon_usd": rate * (36 * 730 - 24),
                "name": "owned:colo:8xH100/owned",
                "start": e.doc.horizon.start,
                "end": e.doc.horizon.start + timedelta(hours=36 * 730),
                "start_period": 8,  # delivered after 7.3 h
                "end_period": 24,
            }
        ),
    ]
    _set(e, e.row(1, A, "reserved_1y", "chat"), nodes=1, replicas=4)
    e.add(1, "owned:colo:8xH100", "owned", "chat", 1, 4)
    e.retotal()
    e.doc.costs = e.doc.costs.model_copy(
        update={"by_cloud": {"aws": e.doc.costs.total_usd - rate * 24, "owned": rate * 24}}
    )
    report = verify_directory(scenario, e.write(tmp_path / "plan"))
    # the owned row also names a commitment that does not serve yet in hour 1
    expected = {"owned-before-delivery", "billing-committed-first", "commitment-row"}
    assert {group.kind for group in report.kinds} == expected


def test_an_old_plan_without_replicas_still_reads() -> None:
    """Written before the column existed: it loads, replicas NaN (verify: missing-replicas-column)."""
    plan = Plan.read(DATA / "plan-v1-e142793")
    assert set(plan.allocations.columns) == set(ALLOCATION_COLUMNS)
    assert plan.allocations["replicas"].isna().all() and len(plan.allocations) > 0


# ---- the exact searches ----------------------------------------------------------------------------------


def test_whole_gpu_packing_is_exact_where_first_fit_decreasing_is_not() -> None:
    """4+3+3+2+2+2 GPUs: first-fit decreasing needs 3 nodes of 8, {4,2,2} + {3,3,2} is 2."""
    assert fits(8, "H100", 2, ((2, 3), (3, 2), (4, 1)), ())
    assert not fits(8, "H100", 1, ((2, 3), (3, 2), (4, 1)), ())
    assert not fits(8, "H100", 2, ((3, 5),), ())  # 15 GPUs, but only two 3-GPU replicas per node


def test_mig_slices_need_legal_layouts_not_just_free_slices() -> None:
    """2 x 4g.40gb + 3 x 2g.20gb: 14 of 16 memory and 14 of 14 compute slices on two GPUs, but a 4g.40gb
    leaves room for one 2g.20gb only (a 2g may not start at slice 6): three GPUs. Mixed layouts also beat
    one profile per GPU: 3g.40gb + 2 x 2g.20gb share one GPU."""
    from models.mig import layout_for

    order = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")

    def vector(**counts: int) -> tuple[int, ...]:
        return tuple(counts.get("p" + name.replace(".", "_"), 0) for name in order)

    assert mig_gpus("H100", vector(p4g_40gb=2, p2g_20gb=3)) == 3
    assert layout_for("H100", {"3g.40gb": 1, "2g.20gb": 2}) is not None
    assert mig_gpus("H100", vector(p3g_40gb=1, p2g_20gb=2)) == 1
    assert mig_gpus("H100", vector(p1g_10gb=15)) == 3  # 7 per GPU
    # with whole-GPU replicas on the same node: 6 GPUs of 2-GPU replicas + 3 MIG GPUs > 8
    assert not fits(8, "H100", 1, ((2, 3),), vector(p4g_40gb=2, p2g_20gb=3))
    assert fits(8, "H100", 1, ((2, 3),), vector(p4g_40gb=1, p2g_20gb=1))


def test_max_flow_finds_that_one_gpu_backs_one_team() -> None:
    edges = {
        "s": {"a": 10.0, "b": 10.0},
        "a": {"x": float("inf")},
        "b": {"x": float("inf"), "y": float("inf")},
        "x": {"t": 12.0},
        "y": {"t": 5.0},
    }
    assert max_flow(edges, "s", "t") == pytest.approx(17.0)


def test_verify_shares_no_code_with_the_optimizer() -> None:
    """planner/verify/ imports models.*, models.inputs and itself only (no planner.planning.optimize,
    planner.planning.mig,
    no solver): a checker that shared the planner's derivations would share its bugs."""
    import ast

    root = Path(__file__).resolve().parents[2] / "planner" / "verify"
    imported = set()
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
    ours = {m for m in imported if m.split(".")[0] in ("planner", "models", "providers")}
    assert ours, "found the imports"
    assert all(m.startswith(("models", "planner.verify")) or m == "models.inputs" for m in ours), ours
    assert not {m for m in imported if m.split(".")[0] in ("pulp", "highspy", "scipy")}
