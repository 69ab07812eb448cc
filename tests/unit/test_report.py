"""Tests for planner/report.py: the reports read only the plan files and must reconcile.

Each test builds a plan directory by hand (plan.json + allocations.csv), so the expected numbers
are computed here from the same inputs, independently of the report code.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

from models.errors import InputError
from planner.report import render_html, render_markdown, write_reports

START = "2027-01-01T00:00:00Z"
AWS_P5 = "aws:us-east-1:p5.48xlarge"
GCP_A3 = "gcp:us-central1:a3-highgpu-8g"
RATE = {"on_demand": 98.32, "spot": 31.17}  # $/node-hour
RESERVED_RATE = 61.25
COMMITTED_NODES = 2
N_CHARTS = 4


def _allocations(periods: int) -> pd.DataFrame:
    """Two teams: an inference service on reserved + on-demand, one spot run and a 52-run job."""
    rows: list[dict[str, Any]] = []

    def add(period: int, offering: str, tier: str, workload: str, kind: str, team: str, nodes: int) -> None:
        rows.append(
            {
                "period": period,
                "offering": offering,
                "tier": tier,
                "workload": workload,
                "kind": kind,
                "team": team,
                "nodes": nodes,
                "gpus": nodes * 8,
            }
        )

    for p in range(periods):
        # Reserved pool of 2 nodes: fully used except the last 8 hours of each day (1 node idle).
        add(p, AWS_P5, "reserved_1y", "chat-70b", "inference", "assistant", 1 if p % 24 >= 16 else 2)
        if p % 24 in range(10, 20):
            add(p, AWS_P5, "on_demand", "chat-70b", "inference", "assistant", 1)
    for p in range(5, 25):
        add(p % periods, GCP_A3, "spot", "pretrain-34b", "training", "research", 4)
    for run in range(52):
        tier = "spot" if run % 2 == 0 else "on_demand"
        add(run % periods, AWS_P5, tier, "finetune-weekly", "training", "research", 1)
    return pd.DataFrame(rows)


def _costs(alloc: pd.DataFrame, periods: int) -> dict[str, Any]:
    """Costs computed independently: reserved paid for every committed hour, the rest per node-hour."""
    reserved = COMMITTED_NODES * periods * RESERVED_RATE
    billed = alloc[alloc["tier"] != "reserved_1y"].copy()
    billed["usd"] = billed["nodes"] * billed["tier"].map(RATE)
    by_tier = {
        "reserved_1y": reserved,
        "reserved_3y": 0.0,
        **{k: float(v) for k, v in billed.groupby("tier")["usd"].sum().items()},
    }
    by_team = {k: float(v) for k, v in billed.groupby("team")["usd"].sum().items()}
    by_team["assistant"] = by_team.get("assistant", 0.0) + reserved
    billed["cloud"] = billed["offering"].str.split(":").str[0]
    by_cloud = {k: float(v) for k, v in billed.groupby("cloud")["usd"].sum().items()}
    by_cloud["aws"] = by_cloud.get("aws", 0.0) + reserved
    total = sum(by_tier.values())
    return {"total_usd": total, "by_tier": by_tier, "by_team": by_team, "by_cloud": by_cloud}


def _plan(periods: int = 48) -> tuple[dict[str, Any], pd.DataFrame]:
    alloc = _allocations(periods)
    costs = _costs(alloc, periods)
    training = [
        {
            "job": "pretrain-34b",
            "run": 0,
            "team": "research",
            "offering": GCP_A3,
            "tier": "spot",
            "nodes": 4,
            "start_period": 5,
            "periods": 20,
            "placement_group": "pg-pretrain-34b-0",
            "fabric": "tcpx",
            "checkpoint_interval_minutes": 22.5,
            "expected_overhead": 0.075,
            "cost_usd": 4 * 20 * RATE["spot"],
            "gang_interruptions_per_hour": 0.0213,
            "expected_interruptions": 0.39,
            "hours": 18.6,
        }
    ]
    for run in range(52):
        tier = "spot" if run % 2 == 0 else "on_demand"
        on_spot = tier == "spot"
        training.append(
            {
                "job": "finetune-weekly",
                "run": run,
                "team": "research",
                "offering": AWS_P5,
                "tier": tier,
                "nodes": 1,
                "start_period": run % periods,
                "periods": 1,
                "placement_group": f"pg-finetune-weekly-{run}",
                "fabric": "efa",
                "checkpoint_interval_minutes": 10.0,
                "expected_overhead": 0.02 if on_spot else 0.0,
                "cost_usd": RATE[tier],
                "gang_interruptions_per_hour": 0.004 if on_spot else None,
                "expected_interruptions": 0.004 if on_spot else None,
            }
        )
    plan = {
        "schema": "gpuplan.plan/v1",
        "scenario": "unit-fleet",
        "created": "2026-12-15T09:30:00Z",
        "horizon": {"start": START, "hours": periods, "period_hours": 1, "periods": periods},
        "solver": {
            "name": "HiGHS",
            "status": "optimal",
            "objective_usd": costs["total_usd"] + 12.0,
            "bound_usd": costs["total_usd"] - 40.0,
            "gap": 0.0042,
            "seconds": 3.7,
            "aggregated_periods": 20,
            "method": "milp",
            "model_periods": 28,
            "training_start_grid_hours": 4,
            "notes": ["merged 20 periods of equal demand"],
        },
        "offerings": {},
        "commitments": [
            {
                "offering": AWS_P5,
                "term": "1y",
                "nodes": COMMITTED_NODES,
                "usd_per_node_hour": RESERVED_RATE,
                "cost_in_horizon_usd": COMMITTED_NODES * periods * RESERVED_RATE,
                "obligation_beyond_horizon_usd": 1_000_000.0,
            }
        ],
        "training": training,
        "unserved": [
            {
                "workload": "embed-small",
                "kind": "inference",
                "team": "assistant",
                "reason": "no A100 capacity in allowed regions",
                "replica_hours": 120.0,
            },
            {
                "workload": "rlhf-8b",
                "kind": "training",
                "team": "research",
                "run": 3,
                "reason": "deadline before earliest start",
                "gpu_hours": 640.0,
            },
        ],
        "costs": costs,
        "baselines": {
            "all_on_demand_usd": costs["total_usd"] * 1.8,
            "greedy_usd": costs["total_usd"] * 1.25,
            "notes": ["greedy: cheapest tier first, no commitments"],
        },
        "utilization": {
            "reserved_used_fraction": 0.8333,
            "pools": {
                AWS_P5: {
                    "committed_nodes": 2,
                    "committed_node_hours": 2.0 * periods,
                    "used_node_hours": 2.0 * periods * 0.8333,
                    "used_fraction": 0.8333,
                }
            },
        },
        "teams": {
            "assistant": {
                "guaranteed_gpus": 16,
                "burst_gpus": 64,
                "priority": "production",
                "peak_gpus": 24,
                "gpu_hours": 900.0,
                "cost_usd": costs["by_team"]["assistant"],
            },
            "research": {
                "guaranteed_gpus": 0,
                "burst_gpus": 256,
                "priority": "batch",
                "peak_gpus": 40,
                "gpu_hours": 1056.0,
                "cost_usd": costs["by_team"]["research"],
            },
        },
        "inputs": {
            "name": "unit-fleet",
            "description": "Two teams <b>sharing</b> a fleet.",
            "purchase": {"terms": ["1y"]},
            "max_spot_share": 0.85,
        },
    }
    return plan, alloc


def _write(tmp_path: Path, plan: dict[str, Any], alloc: pd.DataFrame) -> Path:
    (tmp_path / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    alloc.to_csv(tmp_path / "allocations.csv", index=False)
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
def plan_and_alloc() -> tuple[dict[str, Any], pd.DataFrame]:
    return _plan()


def test_write_reports_writes_both_files(tmp_path: Path, plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan_dir = _write(tmp_path, *plan_and_alloc)
    md_path, html_path = write_reports(str(plan_dir))
    assert md_path == plan_dir / "report.md" and html_path == plan_dir / "report.html"
    assert md_path.read_text(encoding="utf-8").startswith("# gpuplan report: unit-fleet")
    assert html_path.read_text(encoding="utf-8").lstrip().startswith("<!DOCTYPE html>")
    assert "generated by gpuplan" in md_path.read_text(encoding="utf-8")


def test_headline_total_and_savings(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    total = plan["costs"]["total_usd"]
    assert f"Total cost: ${round(total):,}" in md
    for key in ("all_on_demand_usd", "greedy_usd"):
        base = plan["baselines"][key]
        pct = (base - total) / base * 100
        assert f"saves ${round(base - total):,} ({pct:.1f}%)" in md
    assert "greedy: cheapest tier first, no commitments" in md
    assert "MORE" not in md


def test_header_shows_solver_and_explains_gap(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    assert "| gap | 0.42% |" in md
    assert "| aggregated periods / model periods | 20 / 28 |" in md
    assert "every 4 h" in md and "| method | milp |" in md
    assert "distance from the proven lower bound" in md
    assert f"cost less than ${round(plan['solver']['bound_usd']):,}" in md
    assert "- merged 20 periods of equal demand" in md
    assert "Two teams <b>sharing</b> a fleet." in md


@pytest.mark.parametrize(
    ("heading", "key"),
    [("### Cost by tier", "by_tier"), ("### Cost by team", "by_team"), ("### Cost by cloud", "by_cloud")],
)
def test_cost_tables_sum_to_total(plan_and_alloc: tuple[dict, pd.DataFrame], heading: str, key: str) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    rows, total_row = _md_table(md, heading)
    assert {r[0] for r in rows} == set(plan["costs"][key])
    assert total_row[0] == "**Total**"
    assert _usd(total_row[1]) == round(plan["costs"]["total_usd"])
    assert sum(_usd(r[1]) for r in rows) == _usd(total_row[1])
    for name, cost, _share in rows:  # each row moves by at most $1 to make the sum exact
        assert abs(_usd(cost) - plan["costs"][key][name]) <= 1.0
    assert "Warning:" not in md


def test_parts_not_summing_to_total_shows_warning(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    plan["costs"]["by_tier"]["spot"] += 250.0
    md = render_markdown(plan, alloc)
    assert "Warning: the tier rows sum to" in md
    assert f"plan total (costs.total_usd) is ${round(plan['costs']['total_usd']):,}" in md
    assert "Warning: the team rows" not in md  # only the broken breakdown is flagged
    html = render_html(plan, alloc)
    assert 'class="warn">Warning: the tier rows sum to' in html


def test_within_one_dollar_is_reconciled(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    plan["costs"]["by_tier"]["spot"] += 0.6
    md = render_markdown(plan, alloc)
    assert "Warning:" not in md
    rows, total_row = _md_table(md, "### Cost by tier")
    assert _usd(total_row[1]) == round(plan["costs"]["total_usd"]) == sum(_usd(r[1]) for r in rows)


def test_commitments_and_utilization(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    cost = COMMITTED_NODES * 48 * RESERVED_RATE
    assert f"| {AWS_P5} | 1y | 2 | $61.25 | ${round(cost):,} | $1,000,000 |" in md
    assert "Reserved capacity used: **83.3%**" in md
    # Coverage: reserved node-hours / all node-hours on that offering, from allocations.csv.
    on = alloc[alloc["offering"] == AWS_P5]
    coverage = on.loc[on["tier"] == "reserved_1y", "nodes"].sum() / on["nodes"].sum()
    assert f"{coverage * 100:.1f}%" in md.split("## Commitments", 1)[1].split("## Training", 1)[0]


def test_training_placements_and_repeated_job(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    # Start derived from horizon start + start_period * period_hours; duration = periods * period_hours.
    assert (
        "| pretrain-34b | 0 | research | gcp:us-central1:a3-highgpu-8g | spot | 4 | 2027-01-01T05:00:00Z "
        "| 20 | pg-pretrain-34b-0 | tcpx | 22.5 | 7.5% |"
    ) in md
    summary, total = _md_table(md, "### Per job")
    assert (
        sum(_usd(r[5]) for r in summary)
        == _usd(total[5])
        == round(sum(t["cost_usd"] for t in plan["training"]))
    )
    weekly = next(r for r in summary if r[0] == "finetune-weekly")
    assert weekly[2] == "52" and "on_demand ×26" in weekly[3] and "spot ×26" in weekly[3]
    assert _usd(weekly[5]) == round(26 * RATE["spot"] + 26 * RATE["on_demand"])
    main = md.split("## Appendix", 1)[0]
    assert "pg-finetune-weekly-51" not in main
    assert "pg-finetune-weekly-51" in md.split("## Appendix", 1)[1]
    html = render_html(plan, alloc)
    assert "<summary>All 52 runs of finetune-weekly</summary>" in html
    assert html.count("pg-finetune-weekly-") == 52


def test_explicit_start_field_wins(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    plan["training"][0]["start"] = "2027-01-01T06:00:00Z"
    assert "| 2027-01-01T06:00:00Z |" in render_markdown(plan, alloc)


def test_spot_risk_and_share(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    spot = md.split("## Spot risk", 1)[1].split("## Unserved", 1)[0]
    assert "| pretrain-34b | 0 | gcp:us-central1:a3-highgpu-8g | 4 | 0.0213 | 0.39 | 22.5 | 7.5% |" in spot
    assert "| finetune-weekly | 26 | 0.004 | 0.104 | 2.0% |" in spot
    training = alloc[alloc["kind"] == "training"]
    share = training.loc[training["tier"] == "spot", "gpus"].sum() / training["gpus"].sum()
    assert f"({share * 100:.1f}%)" in spot
    assert "Spot share cap (inputs max_spot_share): 85.0%." in spot
    assert share <= 0.85 and "exceeds the cap" not in spot


def test_spot_share_over_cap_is_flagged(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    plan["inputs"]["max_spot_share"] = 0.1
    assert "exceeds the cap 10.0%" in render_markdown(plan, alloc)


def test_unserved_reasons(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    md = render_markdown(plan, alloc)
    assert "no A100 capacity in allowed regions" in md and "120 replica-h" in md
    assert "deadline before earliest start" in md and "640 GPU-h" in md
    assert "Everything is served." not in md
    plan["unserved"] = []
    assert "Everything is served." in render_markdown(plan, alloc)
    assert "Everything is served." in render_html(plan, alloc)


def test_costing_more_than_a_baseline_is_said_honestly(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    total = plan["costs"]["total_usd"]
    plan["baselines"]["greedy_usd"] = total * 0.9
    md = render_markdown(plan, alloc)
    base = plan["baselines"]["greedy_usd"]
    assert f"costs ${round(total - base):,} MORE (savings {(base - total) / base * 100:.1f}%)" in md
    assert "This plan costs more than the greedy baseline" in md
    assert "team guarantees keep 16 GPUs" in md


def test_html_is_self_contained_with_one_plotly_copy(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    html = render_html(plan, alloc)
    lib = get_plotlyjs()
    assert html.count(lib[:400]) == 1
    assert html.count(lib[-400:]) == 1
    assert html.count('class="plotly-graph-div"') == N_CHARTS
    for div in ("nodes-per-tier", "cost-by-tier", "cost-by-team", "gpus-per-team"):
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


def test_numbers_are_right_aligned_in_html(plan_and_alloc: tuple[dict, pd.DataFrame]) -> None:
    plan, alloc = plan_and_alloc
    html = render_html(plan, alloc)
    total = f"${round(plan['costs']['total_usd']):,}"
    assert f'<td class="num">{total}</td>' in html
    assert '<th class="num">cost</th>' in html


def test_plan_without_optional_fields_renders(tmp_path: Path) -> None:
    """Contract v1 only: no teams, inputs, notes, pools, start/end, method, by_workload."""
    alloc = pd.DataFrame(
        [
            {
                "period": 0,
                "offering": AWS_P5,
                "tier": "on_demand",
                "workload": "chat-70b",
                "kind": "inference",
                "team": "assistant",
                "nodes": 1,
                "gpus": 8,
            }
        ]
    )
    plan = {
        "schema": "gpuplan.plan/v1",
        "scenario": "bare",
        "created": START,
        "horizon": {"start": START, "hours": 2, "period_hours": 1, "periods": 2},
        "solver": {
            "name": "HiGHS",
            "status": "optimal",
            "objective_usd": 98.0,
            "bound_usd": 98.0,
            "gap": 0.0,
            "seconds": 0.1,
            "aggregated_periods": 0,
        },
        "offerings": {},
        "commitments": [],
        "training": [
            {
                "job": "t",
                "run": 0,
                "team": "r",
                "offering": AWS_P5,
                "tier": "spot",
                "nodes": 1,
                "start_period": 1,
                "periods": 1,
                "placement_group": "pg",
                "fabric": "efa",
                "checkpoint_interval_minutes": 0.0,
                "expected_overhead": 0.0,
                "cost_usd": 0.0,
            }
        ],
        "unserved": [],
        "costs": {
            "total_usd": 98.0,
            "by_tier": {"on_demand": 98.0},
            "by_team": {"assistant": 98.0},
            "by_cloud": {"aws": 98.0},
        },
        "baselines": {"all_on_demand_usd": 98.0, "greedy_usd": 98.0},
        "utilization": {"reserved_used_fraction": 0.0},
    }
    md_path, html_path = write_reports(_write(tmp_path, plan, alloc))
    md = md_path.read_text(encoding="utf-8")
    assert "Total cost: $98" in md and "Everything is served." in md
    assert "No reserved capacity is committed." in md
    assert "No spot share cap in the plan inputs." in md
    assert "| t | 0 | r |" in md and "| — | — |" in md  # missing spot-risk fields shown as dashes
    assert html_path.read_text(encoding="utf-8").count('class="plotly-graph-div"') == N_CHARTS

    # Even an empty plan and an empty allocations frame render, without a traceback.
    assert "Total cost: —" in render_markdown({}, pd.DataFrame())
    assert render_html({}, pd.DataFrame()).count('class="plotly-graph-div"') == N_CHARTS


def test_missing_or_broken_plan_files_raise_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"plan\.json: not found"):
        write_reports(tmp_path)
    (tmp_path / "plan.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "allocations.csv").write_text("period,offering\n0,x\n", encoding="utf-8")
    with pytest.raises(InputError, match="invalid JSON"):
        write_reports(tmp_path)
    (tmp_path / "plan.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="missing column"):
        write_reports(tmp_path)


def test_year_of_hourly_periods_is_light(tmp_path: Path) -> None:
    """A year of hourly periods: the page stays small (its time, target < 30 s: bench/output_bench.py)."""
    periods = 8760
    plan, alloc = _plan(periods)
    plan = copy.deepcopy(plan)
    _, html_path = write_reports(_write(tmp_path, plan, alloc))
    size = html_path.stat().st_size
    html = html_path.read_text(encoding="utf-8")
    assert size < 6_000_000, size
    assert "daily mean of 1-hour periods" in html and "daily max of 1-hour periods" in html
    assert html.count('class="plotly-graph-div"') == N_CHARTS
