"""Tests for planner/outputs/reports/plan.py: the reports read only the plan files and must reconcile.

Each test builds a typed plan (a ``PlanDocument`` and its allocations frame) by hand, so the expected
numbers are computed here from the same inputs, independently of the report code. Plans reach
``write_reports`` through ``Plan.write``, the contract's own writer, and are read back through
``Plan.read``: a file the contract rejects never reaches the report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

from models.errors import InputError
from models.plan import (
    ALLOCATION_COLUMNS,
    Baselines,
    Commitment,
    Costs,
    MigConfigUse,
    MigNodeLayout,
    MigPartedConfig,
    MigPool,
    MigScheduleEntry,
    MigSection,
    Peer,
    PeerCommitment,
    Plan,
    PlanDocument,
    PlanHorizon,
    PoolUtilization,
    ScenarioEcho,
    SolverReport,
    TeamSummary,
    TrainingPlacement,
    UnservedGuarantee,
    UnservedInference,
    UnservedTraining,
    Utilization,
)
from models.tiers import Term, Tier
from planner.outputs.reports.plan import render_html, render_markdown, write_reports

START = datetime(2027, 1, 1, tzinfo=UTC)
AWS_P5 = "aws:us-east-1:p5.48xlarge"
GCP_A3 = "gcp:us-central1:a3-highgpu-8g"
RATE = {Tier.ON_DEMAND: 98.32, Tier.SPOT: 31.17}  # $/node-hour
RESERVED_RATE = 61.25
COMMITTED_NODES = 2
N_CHARTS = 5  # four charts, and the purchase schedule's timeline (a plan with commitments)

PlanAndAlloc = tuple[PlanDocument, pd.DataFrame]


def _allocations(periods: int) -> pd.DataFrame:
    """Two teams: an inference service on reserved + on-demand, one spot run and a 52-run job."""
    rows: list[dict[str, Any]] = []

    def add(period: int, offering: str, tier: Tier, workload: str, kind: str, team: str, nodes: int) -> None:
        cost = 0.0 if tier.committed else nodes * RATE[tier]  # 1-hour periods; commitments are paid apart
        rows.append(
            {
                "period": period,
                "offering": offering,
                "tier": str(tier),
                "workload": workload,
                "kind": kind,
                "team": team,
                "nodes": nodes,
                "gpus": nodes * 8,
                "replicas": 4 * nodes if kind == "inference" else 0,
                "cost_usd": cost,
            }
        )

    for p in range(periods):
        # Reserved pool of 2 nodes: fully used except the last 8 hours of each day (1 node idle).
        add(p, AWS_P5, Tier.RESERVED_1Y, "chat-70b", "inference", "assistant", 1 if p % 24 >= 16 else 2)
        if p % 24 in range(10, 20):
            add(p, AWS_P5, Tier.ON_DEMAND, "chat-70b", "inference", "assistant", 1)
    for p in range(5, 25):
        add(p % periods, GCP_A3, Tier.SPOT, "pretrain-34b", "training", "research", 4)
    for run in range(52):
        tier = Tier.SPOT if run % 2 == 0 else Tier.ON_DEMAND
        add(run % periods, AWS_P5, tier, "finetune-weekly", "training", "research", 1)
    # two runs in one period on one offering and tier share a row (the contract's one row per key)
    frame = pd.DataFrame(rows, columns=ALLOCATION_COLUMNS)
    key = ["period", "offering", "tier", "workload", "kind", "team"]
    numbers = ["nodes", "gpus", "replicas", "cost_usd"]
    frame = frame.groupby(key, as_index=False, sort=False)[numbers].sum()
    return frame.assign(commitment=float("nan"))[ALLOCATION_COLUMNS]


def _costs(alloc: pd.DataFrame, periods: int) -> Costs:
    """Costs computed independently: reserved paid for every committed hour, the rest per node-hour."""
    reserved = COMMITTED_NODES * periods * RESERVED_RATE
    billed = alloc[alloc["tier"] != Tier.RESERVED_1Y].copy()
    billed["usd"] = billed["nodes"] * billed["tier"].map({str(k): v for k, v in RATE.items()})

    def by(column: str) -> dict[str, float]:
        return {str(k): float(v) for k, v in billed.groupby(column)["usd"].sum().items()}

    by_tier = {
        Tier.RESERVED_1Y: reserved,
        Tier.RESERVED_3Y: 0.0,
        **{Tier(k): v for k, v in by("tier").items()},
    }
    by_team = by("team")
    by_team["assistant"] = by_team.get("assistant", 0.0) + reserved
    billed["cloud"] = billed["offering"].str.split(":").str[0]
    by_cloud = by("cloud")
    by_cloud["aws"] = by_cloud.get("aws", 0.0) + reserved
    by_workload = by("workload")
    by_workload["chat-70b"] = by_workload.get("chat-70b", 0.0) + reserved
    total = sum(by_tier.values())
    return Costs(
        total_usd=total, by_tier=by_tier, by_team=by_team, by_cloud=by_cloud, by_workload=by_workload
    )


def _solver(**changes: Any) -> SolverReport:
    fields: dict[str, Any] = {
        "name": "HiGHS",
        "status": "optimal",
        "objective_usd": 98.0,
        "bound_usd": 98.0,
        "gap": 0.0,
        "seconds": 0.1,
        "aggregated_periods": 0,
        "model_periods": 2,
        "training_start_grid_hours": 1,
        "block_hours": 1,
        "method": "staged-milp",
        "build_seconds": 0.01,
        "penalty_usd": 0.0,
        "bound_method": "",
    }
    return SolverReport(**{**fields, **changes})


def _run(
    job: str,
    run: int,
    tier: Tier,
    start_period: int,
    *,
    team: str = "research",
    offering: str = AWS_P5,
    nodes: int = 1,
    periods: int = 1,
    fabric: str | None = "efa",
    checkpoint: float = 10.0,
    overhead: float = 0.0,
    cost: float = 0.0,
    gang_rate: float = 0.0,
    interruptions: float = 0.0,
    hours: float = 1.0,
) -> TrainingPlacement:
    """One training run held from ``start_period`` for ``periods`` 1-hour periods."""
    return TrainingPlacement(
        job=job,
        run=run,
        team=team,
        offering=offering,
        tier=tier,
        nodes=nodes,
        start_period=start_period,
        periods=periods,
        placement_group=f"pg-{job}-{run}",
        fabric=fabric,
        checkpoint_interval_minutes=checkpoint,
        expected_overhead=overhead,
        cost_usd=cost,
        start=START + timedelta(hours=start_period),
        end=START + timedelta(hours=start_period + periods),
        hours=hours,
        held_hours=periods,
        gang_interruptions_per_hour=gang_rate,
        expected_interruptions=interruptions,
    )


def _plan(periods: int = 48) -> tuple[PlanDocument, pd.DataFrame]:
    alloc = _allocations(periods)
    costs = _costs(alloc, periods)
    training = [
        _run(
            "pretrain-34b",
            0,
            Tier.SPOT,
            5,
            offering=GCP_A3,
            nodes=4,
            periods=20,
            fabric="tcpx",
            checkpoint=22.5,
            overhead=0.075,
            cost=4 * 20 * RATE[Tier.SPOT],
            gang_rate=0.0213,
            interruptions=0.39,
            hours=18.6,
        )
    ]
    for run in range(52):
        tier = Tier.SPOT if run % 2 == 0 else Tier.ON_DEMAND
        spot = {"overhead": 0.02, "gang_rate": 0.004, "interruptions": 0.004} if tier == Tier.SPOT else {}
        training.append(_run("finetune-weekly", run, tier, run % periods, cost=RATE[tier], **spot))
    total = costs.total_usd
    plan = PlanDocument(
        scenario="unit-fleet",
        description="Two teams <b>sharing</b> a fleet.",
        created=datetime(2026, 12, 15, 9, 30, tzinfo=UTC),
        horizon=PlanHorizon(start=START, hours=periods, period_hours=1, periods=periods),
        solver=_solver(
            objective_usd=total + 12.0,
            bound_usd=total - 40.0,
            gap=0.0042,
            seconds=3.7,
            aggregated_periods=20,
            model_periods=28,
            training_start_grid_hours=4,
            notes=["merged 20 periods of equal demand"],
        ),
        offerings={},
        commitments=[
            Commitment(
                offering=AWS_P5,
                term=Term.ONE_YEAR,
                nodes=COMMITTED_NODES,
                usd_per_node_hour=RESERVED_RATE,
                cost_in_horizon_usd=COMMITTED_NODES * periods * RESERVED_RATE,
                obligation_beyond_horizon_usd=1_000_000.0,
                name="p5-1y",
                start=START,
                end=START + timedelta(hours=8760),
            )
        ],
        training=training,
        unserved=[
            UnservedInference(
                workload="embed-small",
                team="assistant",
                replica_hours=120.0,
                periods=12,
                reason="no A100 capacity in allowed regions",
            ),
            UnservedTraining(
                workload="rlhf-8b",
                team="research",
                run=3,
                gpu_hours=640.0,
                reason="deadline before earliest start",
            ),
            UnservedGuarantee(
                workload="assistant", team="assistant", gpus=8.0, reason="guarantee above quota"
            ),
        ],
        costs=costs,
        baselines=Baselines(
            all_on_demand_usd=total * 1.8,
            greedy_usd=total * 1.25,
            notes=["greedy: cheapest tier first, no commitments"],
        ),
        utilization=Utilization(
            reserved_used_fraction=0.8333,
            pools={
                AWS_P5: PoolUtilization(
                    committed_nodes=2,
                    committed_node_hours=2.0 * periods,
                    used_node_hours=2.0 * periods * 0.8333,
                    used_fraction=0.8333,
                )
            },
        ),
        teams={
            "assistant": TeamSummary(
                guaranteed_gpus=16,
                burst_gpus=64,
                priority="production",
                peak_gpus=24,
                gpu_hours=900.0,
                cost_usd=costs.by_team["assistant"],
            ),
            "research": TeamSummary(
                guaranteed_gpus=0,
                burst_gpus=None,
                priority="batch",
                peak_gpus=40,
                gpu_hours=1056.0,
                cost_usd=costs.by_team["research"],
            ),
        },
        inputs=ScenarioEcho(
            name="unit-fleet",
            description="Two teams <b>sharing</b> a fleet.",
            max_spot_share=0.85,
            purchase={"terms": ["1y"]},
        ),
    )
    return plan, alloc


def _minimal_plan(**changes: Any) -> tuple[PlanDocument, pd.DataFrame]:
    """What the contract requires and nothing more: one on-demand node-hour, no commitments, teams,
    pools, notes, MIG or spot cap; one spot run on an offering without a fabric."""
    alloc = pd.DataFrame(
        [[0, AWS_P5, "on_demand", "chat-70b", "inference", "assistant", 1, 8, 4, 98.0, ""]],
        columns=ALLOCATION_COLUMNS,
    )
    fields: dict[str, Any] = {
        "scenario": "bare",
        "created": START,
        "horizon": PlanHorizon(start=START, hours=2, period_hours=1, periods=2),
        "solver": _solver(),
        "offerings": {},
        "commitments": [],
        "training": [_run("t", 0, Tier.SPOT, 1, team="r", fabric=None, checkpoint=0.0)],
        "unserved": [],
        "costs": Costs(
            total_usd=98.0,
            by_tier={Tier.ON_DEMAND: 98.0},
            by_team={"assistant": 98.0},
            by_cloud={"aws": 98.0},
            by_workload={"chat-70b": 98.0},
        ),
        "baselines": Baselines(all_on_demand_usd=98.0, greedy_usd=98.0),
        "utilization": Utilization(reserved_used_fraction=0.0),
        "teams": {},
        "inputs": ScenarioEcho(name="bare"),
    }
    return PlanDocument(**{**fields, **changes}), alloc


def _write(tmp_path: Path, plan: PlanDocument, alloc: pd.DataFrame) -> Path:
    Plan(plan, alloc).write(tmp_path)
    return tmp_path


def _usd(text: str) -> int:
    return int(text.replace("*", "").strip().replace("$", "").replace(",", ""))


def _md_table(md: str, heading: str) -> tuple[list[list[str]], list[str]]:
    """Parse the markdown table under ``heading``: (body rows, total row)."""
    section = md.split(heading, 1)[1]
    block: list[str] = []
    for ln in section.splitlines()[1:]:
        if ln.startswith("|"):
            block.append(ln)
        elif block:
            break
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in block[2:]]
    return rows[:-1], rows[-1]


@pytest.fixture
def plan_and_alloc() -> PlanAndAlloc:
    return _plan()


def test_write_reports_writes_both_files(tmp_path: Path, plan_and_alloc: PlanAndAlloc) -> None:
    plan_dir = _write(tmp_path, *plan_and_alloc)
    md_path, html_path = write_reports(str(plan_dir))
    assert md_path == plan_dir / "report.md" and html_path == plan_dir / "report.html"
    md = md_path.read_text(encoding="utf-8")
    assert md.startswith("# gpuplan report: unit-fleet")
    assert html_path.read_text(encoding="utf-8").lstrip().startswith("<!DOCTYPE html>")
    assert "generated by gpuplan" in md
    # Read back through the contract, the plan renders exactly as the in-memory one.
    assert md == render_markdown(*plan_and_alloc)


def test_headline_total_and_savings(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    total = plan.costs.total_usd
    for base in (plan.baselines.all_on_demand_usd, plan.baselines.greedy_usd):
        pct = (base - total) / base * 100
        assert f"saves ${round(base - total):,} ({pct:.1f}%)" in md
    assert f"Total cost: ${round(total):,}" in md
    assert "greedy: cheapest tier first, no commitments" in md
    assert "MORE" not in md


def test_header_shows_solver_and_explains_gap(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    assert "| horizon start | 2027-01-01T00:00:00Z |" in md
    assert "Created 2026-12-15T09:30:00Z · plan schema gpuplan.plan/v2" in md
    assert "| gap | 0.42% |" in md
    assert "| aggregated periods / model periods | 20 / 28 |" in md
    assert "every 4 h" in md and "| method | staged-milp |" in md
    assert "distance from the proven lower bound" in md
    assert f"cost less than ${round(plan.solver.bound_usd):,}" in md
    assert "simplification of the full horizon" in md  # 28 model periods for 48
    assert "- merged 20 periods of equal demand" in md
    assert "Two teams <b>sharing</b> a fleet." in md
    # A certified bound says it holds for the full problem instead.
    plan.solver.certified_bound_usd = plan.solver.bound_usd
    assert "no plan at all can cost less" in render_markdown(plan, alloc)


@pytest.mark.parametrize(
    ("heading", "key"),
    [
        ("### Cost by tier", "by_tier"),
        ("### Cost by team", "by_team"),
        ("### Cost by cloud", "by_cloud"),
        ("### Cost by workload", "by_workload"),
    ],
)
def test_cost_tables_sum_to_total(plan_and_alloc: PlanAndAlloc, heading: str, key: str) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    parts = {str(k): v for k, v in getattr(plan.costs, key).items()}
    rows, total_row = _md_table(md, heading)
    assert {r[0] for r in rows} == set(parts)
    assert total_row[0] == "**Total**"
    assert _usd(total_row[1]) == round(plan.costs.total_usd)
    assert sum(_usd(r[1]) for r in rows) == _usd(total_row[1])
    for name, cost, _share in rows:  # each row moves by at most $1 to make the sum exact
        assert abs(_usd(cost) - parts[name]) <= 1.0
    assert "Warning:" not in md


def test_tiers_in_tier_order_and_teams_table(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    rows, _ = _md_table(md, "### Cost by tier")
    assert [r[0] for r in rows] == ["reserved_3y", "reserved_1y", "on_demand", "spot"]
    teams, total = _md_table(md, "### Teams")
    assert teams[0][:4] == ["assistant", "production", "16", "64"]
    assert teams[1][:4] == ["research", "batch", "0", "—"]  # burst_gpus None: no burst limit
    assert _usd(total[6]) == round(plan.costs.total_usd) == sum(_usd(r[6]) for r in teams)


def test_parts_not_summing_to_total_shows_warning(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    plan.costs.by_tier[Tier.SPOT] += 250.0
    md = render_markdown(plan, alloc)
    assert "Warning: the tier rows sum to" in md
    assert f"plan total (costs.total_usd) is ${round(plan.costs.total_usd):,}" in md
    assert "Warning: the team rows" not in md  # only the broken breakdown is flagged
    html = render_html(plan, alloc)
    assert 'class="warn">Warning: the tier rows sum to' in html


def test_within_one_dollar_is_reconciled(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    plan.costs.by_tier[Tier.SPOT] += 0.6
    md = render_markdown(plan, alloc)
    assert "Warning:" not in md
    rows, total_row = _md_table(md, "### Cost by tier")
    assert _usd(total_row[1]) == round(plan.costs.total_usd) == sum(_usd(r[1]) for r in rows)


def test_commitments_and_utilization(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    cost = COMMITTED_NODES * 48 * RESERVED_RATE
    per_year = COMMITTED_NODES * 8760 * RESERVED_RATE
    row = (
        f"| 2027-01-01 | {AWS_P5} | 1y | 2 | 2028-01-01 | $61.25 | ${round(per_year):,} | 83.3% | "
        f"${round(cost):,} | $1,000,000 |"
    )
    assert row in md
    assert "The commitments bought also oblige $1,000,000 after the horizon ends." in md
    assert "Reserved capacity used: **83.3%**" in md
    # Coverage: reserved node-hours / all node-hours on that offering, from allocations.csv.
    on = alloc[alloc["offering"] == AWS_P5]
    coverage = on.loc[on["tier"] == Tier.RESERVED_1Y, "nodes"].sum() / on["nodes"].sum()
    section = md.split("## Purchase schedule", 1)[1].split("## Savings", 1)[0]
    assert f"{coverage * 100:.1f}%" in section
    idle_hours = 2.0 * 48 * (1 - 0.8333)
    assert f"${round(idle_hours * RESERVED_RATE):,}" in section  # idle cost at the commitment's rate
    assert "Note: the commitments cost" not in section  # they match the reserved tiers


def test_training_placements_and_repeated_job(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    # Duration = periods held * period_hours.
    assert (
        "| pretrain-34b | 0 | research | gcp:us-central1:a3-highgpu-8g | spot | 4 | 2027-01-01T05:00:00Z "
        "| 20 | pg-pretrain-34b-0 | tcpx | 22.5 | 7.5% |"
    ) in md
    summary, total = _md_table(md, "### Per job")
    assert sum(_usd(r[5]) for r in summary) == _usd(total[5]) == round(sum(t.cost_usd for t in plan.training))
    weekly = next(r for r in summary if r[0] == "finetune-weekly")
    assert weekly[2] == "52" and "on_demand ×26" in weekly[3] and "spot ×26" in weekly[3]
    assert _usd(weekly[5]) == round(26 * RATE[Tier.SPOT] + 26 * RATE[Tier.ON_DEMAND])
    main = md.split("## Appendix", 1)[0]
    assert "pg-finetune-weekly-51" not in main
    assert "pg-finetune-weekly-51" in md.split("## Appendix", 1)[1]
    html = render_html(plan, alloc)
    assert "<summary>All 52 runs of finetune-weekly</summary>" in html
    assert html.count("pg-finetune-weekly-") == 52


def test_start_column_is_the_placements_start(plan_and_alloc: PlanAndAlloc) -> None:
    """The contract's ``start`` (a required UTC time) is shown, not one derived from start_period."""
    plan, alloc = plan_and_alloc
    plan.training[0].start = datetime(2027, 1, 1, 6, tzinfo=UTC)
    assert "| 2027-01-01T06:00:00Z |" in render_markdown(plan, alloc)


def test_spot_risk_and_share(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    spot = md.split("## Spot risk", 1)[1].split("## Unserved", 1)[0]
    assert "| pretrain-34b | 0 | gcp:us-central1:a3-highgpu-8g | 4 | 0.0213 | 0.39 | 22.5 | 7.5% |" in spot
    assert "| finetune-weekly | 26 | 0.004 | 0.104 | 2.0% |" in spot
    training = alloc[alloc["kind"] == "training"]
    share = training.loc[training["tier"] == Tier.SPOT, "gpus"].sum() / training["gpus"].sum()
    assert f"({share * 100:.1f}%)" in spot
    assert "Spot share cap (inputs max_spot_share): 85.0%." in spot
    assert share <= 0.85 and "exceeds the cap" not in spot


def test_spot_share_over_cap_is_flagged(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    plan.inputs.max_spot_share = 0.1
    assert "exceeds the cap 10.0%" in render_markdown(plan, alloc)


def test_unserved_reasons(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    assert (
        "| embed-small | inference | assistant | — | 120 replica-h | no A100 capacity in allowed regions |"
        in md
    )
    assert "| rlhf-8b | training | research | 3 | 640 GPU-h | deadline before earliest start |" in md
    assert "| assistant | guarantee | assistant |" in md and "guarantee above quota" in md
    assert "3 workload items are unserved" in md
    assert "Everything is served." not in md
    plan.unserved = []
    assert "Everything is served." in render_markdown(plan, alloc)
    assert "Everything is served." in render_html(plan, alloc)


def _mig_section(pool: MigPool) -> MigSection:
    return MigSection(
        pools=[pool],
        gpus_saved_vs_whole_at_peak=13,
        gpu_hours_saved_vs_whole=450.0,
        config=MigPartedConfig.model_validate({"mig-configs": {}}),
        note="",
    )


def test_mig_section(plan_and_alloc: PlanAndAlloc) -> None:
    """Per pool: its configs, the hours some node carries one, and the nodes of each config at the peak
    with the layout of one node."""
    plan, alloc = plan_and_alloc
    assert "## MIG layouts" not in render_markdown(plan, alloc)
    figures = {
        "offering": AWS_P5, "gpu_model": "H100", "peak_period": 3,
        "peak_demand": {"1g.10gb": 14, "3g.40gb": 3}, "gpus_packed": 4, "gpus_per_service_layouts": 5,
        "gpus_whole_per_replica": 17, "gpus_planned": 4.0, "packed_gpu_hours": 150.0,
        "whole_gpu_hours": 600.0,
    }  # fmt: skip
    mixed = MigConfigUse(
        name="p5-1",
        node_layout=[
            MigNodeLayout(gpus=2, mig_devices={"1g.10gb": 7}),
            MigNodeLayout(gpus=2, mig_devices={"3g.40gb": 2}),
            MigNodeLayout(gpus=4, mig_devices=None),
        ],
        schedule=[MigScheduleEntry(periods=[(0, 10), (20, 24)], nodes=1)],
    )
    small = MigConfigUse(
        name="p5-2",
        node_layout=[
            MigNodeLayout(gpus=1, mig_devices={"1g.10gb": 7}),
            MigNodeLayout(gpus=7, mig_devices=None),
        ],
        schedule=[
            MigScheduleEntry(periods=[(2, 5)], nodes=2, spot_nodes=1),
            MigScheduleEntry(periods=[(10, 12)], nodes=1),
        ],
    )
    plan.mig = _mig_section(MigPool(**figures, configs=[mixed, small]))
    md = render_markdown(plan, alloc)
    section = md.split("## MIG layouts", 1)[1].split("## Unserved", 1)[0]
    assert "Slicing saves 13 GPUs at the pools' peaks and 450 GPU-hours" in section
    assert "2 node layouts cover every period's replicas" in section
    assert (
        f"| {AWS_P5} | 2 | 14 x 1g.10gb, 3 x 3g.40gb | 4 | 5 | 17 | 13 | 16 of 48 h | "
        "1 x p5-1 (2 GPUs: 7 x 1g.10gb; 2 GPUs: 2 x 3g.40gb; 4 GPUs: MIG off), "
        "2 x p5-2 (1 GPU: 7 x 1g.10gb; 7 GPUs: MIG off) |"
    ) in section  # periods 0-11 and 20-23 carry a config; at the peak (3) both do
    html = render_html(plan, alloc)
    assert '<h2 id="mig">MIG layouts</h2>' in html and '<a href="#mig">MIG</a>' in html

    # a plan written before schedules: its one config for the pool, as it was
    legacy = MigPool(**figures, config="p5-mixed", nodes_with_config=1, node_layout=mixed.node_layout)
    plan.mig = _mig_section(legacy)
    section = render_markdown(plan, alloc).split("## MIG layouts", 1)[1].split("## Unserved", 1)[0]
    assert (
        f"| {AWS_P5} | 1 | 14 x 1g.10gb, 3 x 3g.40gb | 4 | 5 | 17 | 13 | — | 1 x p5-mixed (2 GPUs: 7 x "
        "1g.10gb; 2 GPUs: 2 x 3g.40gb; 4 GPUs: MIG off) |"
    ) in section


def test_costing_more_than_a_baseline_is_said_honestly(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    total = plan.costs.total_usd
    plan.baselines.greedy_usd = base = total * 0.9
    md = render_markdown(plan, alloc)
    assert f"costs ${round(total - base):,} MORE (savings {(base - total) / base * 100:.1f}%)" in md
    assert "This plan costs more than the greedy baseline" in md
    assert "team guarantees keep 16 GPUs" in md
    idle_hours = 2.0 * 48 * (1 - 0.8333)
    assert f"commitments are paid whether used or not: ${round(idle_hours * RESERVED_RATE):,}" in md


def _with_peers(plan: PlanDocument, best_usd: float) -> None:
    """The plan's baselines as a plan with peers has them: the two references, a lookback peer."""
    b = plan.baselines
    b.peers = [
        Peer(name="all on-demand", policy="all_on_demand", total_usd=b.all_on_demand_usd, how="od how"),
        Peer(name="per-launch cheapest", policy="greedy", total_usd=b.greedy_usd, how="greedy how"),
        Peer(
            name="lookback 30 d, 3y",
            policy="lookback",
            usage="fleet",
            total_usd=best_usd,
            obligation_beyond_horizon_usd=1234.0,
            commitments=[
                PeerCommitment(offering="aws:us-east-1:p5.48xlarge", term=Term.THREE_YEARS, nodes=3)
            ],
            how="cloud recommendation over 30 d",
        ),
    ]
    b.best_peer = "lookback 30 d, 3y"


def test_headline_compares_with_the_best_peer_and_all_on_demand(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    total = plan.costs.total_usd
    best = total * 1.25
    _with_peers(plan, best)
    md = render_markdown(plan, alloc)
    section = md.split("## Savings")[1].split("## Costs")[0]
    saving = best - total
    assert (
        f"- vs best peer (lookback 30 d, 3y) (${round(best):,}): saves ${round(saving):,} (20.0%)." in section
    )
    assert "  How: cloud recommendation over 30 d." in section
    on_demand = plan.baselines.all_on_demand_usd
    pct = (on_demand - total) / on_demand * 100
    assert (
        f"- vs all on-demand (${round(on_demand):,}): saves ${round(on_demand - total):,} ({pct:.1f}%)."
        in section
    )
    assert "  How: od how." in section
    assert "vs greedy" not in section  # the two headline comparisons only; greedy is in the table
    row = next(line for line in section.splitlines() if line.startswith("| lookback 30 d, 3y (best) |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == [
        "lookback 30 d, 3y (best)",
        f"${round(best):,}",
        f"${round(saving):,} (20.0%)",
        "3 x aws:us-east-1:p5.48xlarge 3y",
        "$1,234",
        "one offering per service (a user can run it)",
    ]
    assert section.count("| per-launch cheapest |") == 1 and "MORE" not in section
    assert section.count("cheapest offering per period (a reference)") == 2  # all on-demand, per-launch
    assert "lookback 30 d, 3y (best)" in render_html(plan, alloc)


def test_costing_more_than_the_best_peer_says_why(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    total = plan.costs.total_usd
    _with_peers(plan, total * 0.8)
    md = render_markdown(plan, alloc)
    assert f"costs ${round(total * 0.2):,} MORE (savings -25.0%)" in md
    assert "This plan costs more than the best peer (lookback 30 d, 3y) baseline" in md
    assert "bills its committed nodes against every non-spot node" in md


def test_html_is_self_contained_with_one_plotly_copy(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    html = render_html(plan, alloc)
    lib = get_plotlyjs()
    assert html.count(lib[:400]) == 1
    assert html.count(lib[-400:]) == 1
    assert html.count('class="plotly-graph-div"') == N_CHARTS
    for div in ("purchase-schedule", "nodes-per-tier", "cost-by-tier", "cost-by-team", "gpus-per-team"):
        assert html.count(f'id="chart-{div}"') == 1
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE)
    assert not re.search(r"<link[^>]*href\s*=\s*[\"']?(https?:)?//", html, re.IGNORECASE)
    # Escaping: user text is shown, never injected.
    assert "Two teams &lt;b&gt;sharing&lt;/b&gt; a fleet." in html
    # Charts carry titles and axis units; the idle reserved series is there (1 node idle 8 h a day).
    assert "Node-hours per tier over time (per 1-hour period)" in html
    assert '"name":"reserved (idle)"' in html
    assert "cost in horizon (USD)" in html and "GPUs allocated" in html
    assert "<summary>Inputs (scenario echo)</summary>" in html
    # One page from base.html.j2: its shared CSS and the plan's own rules in one <style>.
    assert html.count("<style>") == 1 and "border-collapse: collapse" in html and ".headline {" in html


def test_numbers_are_right_aligned_in_html(plan_and_alloc: PlanAndAlloc) -> None:
    plan, alloc = plan_and_alloc
    html = render_html(plan, alloc)
    total = f"${round(plan.costs.total_usd):,}"
    assert f'<td class="num">{total}</td>' in html
    assert '<th class="num">cost</th>' in html


def test_scenario_echo_is_shown_as_the_file_has_it(tmp_path: Path) -> None:
    plan, alloc = _minimal_plan(inputs=ScenarioEcho(name="bare", horizon={"hours": 2}))
    md_path, _ = write_reports(_write(tmp_path, plan, alloc))
    echo = md_path.read_text(encoding="utf-8").split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(echo) == json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))["inputs"]


def test_a_plan_with_only_the_required_fields_renders(tmp_path: Path) -> None:
    """No commitments, teams, pools, notes, MIG or spot cap; optional fields (a fabric) are None."""
    plan, alloc = _minimal_plan()
    md_path, html_path = write_reports(_write(tmp_path, plan, alloc))
    md = md_path.read_text(encoding="utf-8")
    assert "Total cost: $98" in md and "Everything is served." in md
    assert "No new commitment is bought." in md and "### Teams" not in md and "Held already" not in md
    assert "No spot share cap in the plan inputs." in md
    assert (
        "| t | 0 | r | aws:us-east-1:p5.48xlarge | spot | 1 | 2027-01-01T01:00:00Z | 1 | pg-t-0 | — |" in md
    )
    assert "| how the lower bound was obtained |" not in md  # no bound method given
    # no commitment with a start and end: no purchase timeline
    assert html_path.read_text(encoding="utf-8").count('class="plotly-graph-div"') == N_CHARTS - 1


def test_a_plan_that_allocates_nothing_renders(tmp_path: Path) -> None:
    """A header-only allocations.csv (pandas reads its columns untyped), with a commitment whose pool
    runs nothing at all: every committed node is idle in every period."""
    plan, _ = _minimal_plan(
        commitments=[
            Commitment(
                offering=AWS_P5,
                term=Term.THREE_YEARS,
                nodes=1,
                usd_per_node_hour=40.0,
                cost_in_horizon_usd=80.0,
                obligation_beyond_horizon_usd=0.0,
            )
        ],
        training=[],
        costs=Costs(
            total_usd=80.0,
            by_tier={Tier.RESERVED_3Y: 80.0},
            by_team={"assistant": 80.0},
            by_cloud={"aws": 80.0},
            by_workload={"chat-70b": 80.0},
        ),
    )
    plan_dir = _write(tmp_path, plan, pd.DataFrame(columns=ALLOCATION_COLUMNS))
    assert (plan_dir / "allocations.csv").read_text(encoding="utf-8").strip() == ",".join(ALLOCATION_COLUMNS)
    md_path, html_path = write_reports(plan_dir)
    md = md_path.read_text(encoding="utf-8")
    assert "Total cost: $80" in md and "No training runs in this plan." in md
    assert "Training on spot: 0 of 0 training GPU-hours (—)" in md
    html = html_path.read_text(encoding="utf-8")
    # its commitment has no start and end (a plan written before they had them): no timeline
    assert html.count('class="plotly-graph-div"') == N_CHARTS - 1 and '"name":"reserved (idle)"' in html


def _plan_json(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    plan_dir = _write(tmp_path, *_plan())
    return plan_dir, json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        # What an older or simpler planner left out (the report used to show "—" for it) is now refused.
        (lambda d: d["costs"].pop("by_workload"), "plan.json: costs.by_workload: Field required"),
        (lambda d: d["solver"].pop("method"), "plan.json: solver.method: Field required"),
        (
            lambda d: d["training"][1].pop("gang_interruptions_per_hour"),
            "training.1.gang_interruptions_per_hour",
        ),
        (lambda d: d["training"][0].pop("start"), "plan.json: training.0.start: Field required"),
        (lambda d: d["unserved"][0].pop("team"), "plan.json: unserved.0.inference.team: Field required"),
        (lambda d: d.pop("teams"), "plan.json: teams: Field required"),
        # Wrong values and misspelt fields.
        (lambda d: d["commitments"][0].update(term="5y"), "plan.json: commitments.0.term: Input should be"),
        (
            lambda d: d["costs"].update(total_usd="a lot"),
            "plan.json: costs.total_usd: 'a lot' is not a number",
        ),
        (lambda d: d["baselines"].update(greedy=1.0), "plan.json: baselines.greedy: Extra inputs"),
        (
            lambda d: d.update(schema="gpuplan.plan/v0"),
            "this gpuplan reads schema 'gpuplan.plan/v2' or 'gpuplan.plan/v1'",
        ),
    ],
)
def test_the_contract_rejects_a_bad_plan_json(
    tmp_path: Path, break_it: Callable[[dict[str, Any]], Any], message: str
) -> None:
    plan_dir, data = _plan_json(tmp_path)
    break_it(data)
    (plan_dir / "plan.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(message)):
        write_reports(plan_dir)
    assert not (plan_dir / "report.md").exists()


def test_missing_or_broken_plan_files_raise_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"plan\.json: file not found \(run `gpuplan plan` first\)"):
        write_reports(tmp_path)
    (tmp_path / "plan.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match=r"plan\.json: line 1: not valid JSON"):
        write_reports(tmp_path)
    plan_dir, _ = _plan_json(tmp_path)
    (plan_dir / "allocations.csv").unlink()
    with pytest.raises(InputError, match=r"allocations\.csv: file not found"):
        write_reports(plan_dir)
    (plan_dir / "allocations.csv").write_text("period,offering\n0,x\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"allocations\.csv: missing columns: tier, workload"):
        write_reports(plan_dir)


def test_year_of_hourly_periods_is_light(tmp_path: Path) -> None:
    """A year of hourly periods: the page stays small (its time, target < 30 s: bench/output_bench.py)."""
    plan, alloc = _plan(8760)
    plan_dir = _write(tmp_path, plan, alloc)
    _, html_path = write_reports(plan_dir)
    size = html_path.stat().st_size
    html = html_path.read_text(encoding="utf-8")
    assert size < 6_000_000, size
    assert "daily mean of 1-hour periods" in html and "daily max of 1-hour periods" in html
    assert html.count('class="plotly-graph-div"') == N_CHARTS


def test_the_purchase_schedule_shows_what_is_held_when_it_expires_and_what_is_bought(
    plan_and_alloc: PlanAndAlloc,
) -> None:
    """A commitment held until hour 24 and its renewal from then: the held table, the expiry line that
    names the renewal, the purchase's row with its start and end, and the timeline chart in the html."""
    plan, alloc = plan_and_alloc
    renewal_start = START + timedelta(hours=24)
    held = plan.commitments[0].model_copy(
        update={"name": "ri-old", "existing": True, "start": START - timedelta(hours=8736),
                "end": renewal_start, "end_period": 24, "cost_in_horizon_usd": 2 * 24 * RESERVED_RATE,
                "obligation_beyond_horizon_usd": 0.0, "used_fraction": 0.9}
    )  # fmt: skip
    renewal = plan.commitments[0].model_copy(
        update={"name": "p5-renewal", "start": renewal_start, "end": renewal_start + timedelta(hours=8760),
                "start_period": 24, "cost_in_horizon_usd": 2 * 24 * RESERVED_RATE, "used_fraction": 0.8}
    )  # fmt: skip
    document = plan.model_copy(update={"commitments": [held, renewal]})
    md = render_markdown(document, alloc)
    section = md.split("## Purchase schedule", 1)[1].split("## Savings", 1)[0]
    assert "### Held already" in section and "| ri-old | aws:us-east-1:p5.48xlarge | 1y | 2 |" in section
    assert (
        "ri-old (2 x aws:us-east-1:p5.48xlarge) expires on 2027-01-02; the plan buys 2 x 1y from 2027-01-02."
        in section
    )
    assert f"| 2027-01-02 | {AWS_P5} | 1y | 2 | 2028-01-02 |" in section and "80.0%" in section
    html = render_html(document, alloc)
    timeline = html.split('id="chart-purchase-schedule"', 1)[1].split("</script>", 1)[0]
    assert (
        "held: 2 x aws:us-east-1:p5.48xlarge 1y" in timeline
        and "buy: 2 x aws:us-east-1:p5.48xlarge 1y" in timeline
    )
