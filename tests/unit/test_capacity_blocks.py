"""AWS Capacity Blocks as a training tier (issue 38 point 4): the sold durations, the break-even against
on-demand plus a reservation by closed form, the sold-duration rounding, the 64-instance limit, and
``gpuplan verify``'s re-bill against an independent calculation.

One offering (on demand C_OD, 1-year reservation C_1Y per node-hour, a block rate B), one gang of N nodes
for h hours in a horizon of H hours, nothing else. Without blocks the cheapest way to run it is, over the
r of its nodes reserved for the whole horizon,

    min_r  r * C_1Y * H + (N - r) * C_OD * h

(brute force below), and a block costs B * N * sold(h), sold(h) the shortest duration EC2 sells that holds
h hours. The plan must take the block exactly when that is cheaper: B below the break-even
``min_r(...) / (N * sold(h))``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.capacity_blocks import (
    CAPACITY_BLOCK_DAYS,
    CAPACITY_BLOCK_MAX_NODES,
    block_duration_hours,
    block_fee_usd,
    why_no_block,
)
from models.catalog import Catalog
from models.errors import InputError
from models.inputs import load_inputs
from models.plan import Plan
from models.scenario import parse
from models.tiers import Capacity, Tier
from planner.outputs.reports.plan import write_reports
from planner.planning.optimize import optimize
from planner.planning.problem.sets import build_sets
from planner.verify import verify
from planner.verify.blocks import block_bills
from planner.verify.context import Context

C_OD = 10.0
C_1Y = 6.0
H = 168
OFFERING = "aws:us-east-1:p5.48xlarge"


def _inputs(tmp_path: Path, kit, block: float | None, *, nodes: int = 2, hours: int = 120, horizon: int = H,
            blocks: bool = True) -> Path:  # fmt: skip
    tmp_path.mkdir(parents=True, exist_ok=True)
    row = kit.offering_row(on_demand_usd_h=C_OD, reserved_1y_usd_h=C_1Y, capacity_block_usd_h=block)
    kit.write_catalog_csv(tmp_path / "catalog.csv", [row])
    training = [{"name": "pre", "team": "t", "gpu_models": ["H100"], "gpus_per_node": 8, "nodes": nodes,
                 "hours": hours}]  # fmt: skip
    # daily periods: the runs are whole days, and the solves (and their certified bounds) stay small
    data = kit.scenario_dict(hours=horizon, period_hours=24, terms=["1y"], training=training)
    data["purchase"]["capacity_blocks"] = blocks
    return kit.write_scenario_yaml(tmp_path / "scenario.yaml", data)


def _plan(path: Path, kit) -> Plan:
    inputs = load_inputs(path)
    return optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings())


def without_blocks(nodes: int, hours: int, horizon: int = H) -> float:
    """The cheapest way to run the gang without a block, by brute force over the nodes reserved."""
    return min(r * C_1Y * horizon + (nodes - r) * C_OD * hours for r in range(nodes + 1))


def test_durations_and_sizes_as_ec2_sells_them() -> None:
    assert CAPACITY_BLOCK_DAYS[:14] == tuple(range(1, 15)) and CAPACITY_BLOCK_DAYS[-1] == 182
    assert block_duration_hours(120) == 120  # 5 days
    assert block_duration_hours(121) == 144  # rounded up to 6 days
    assert block_duration_hours(14 * 24 + 1) == 21 * 24  # beyond 14 days: weeks
    assert block_duration_hours(720) == 840  # 30 days: 35 days sold
    assert block_duration_hours(182 * 24) == 182 * 24 and block_duration_hours(182 * 24 + 1) is None
    assert why_no_block(CAPACITY_BLOCK_MAX_NODES, 24) is None
    assert "64" in (why_no_block(CAPACITY_BLOCK_MAX_NODES + 1, 24) or "")
    assert block_fee_usd(31.46, 4, 720) == pytest.approx(31.46 * 4 * 840)
    with pytest.raises(ValueError, match="64"):
        block_fee_usd(31.46, 65, 24)
    # provisioning uses the same rules, not a copy of them
    from planner.operations import capacity_blocks

    assert capacity_blocks.block_duration_hours is block_duration_hours
    assert capacity_blocks.why_no_block is why_no_block  # the unsellable reasons too (block_requests)


@pytest.mark.parametrize("side", [-1, 1])
def test_a_block_is_chosen_exactly_below_the_break_even(tmp_path: Path, kit, side: int) -> None:
    """A 5-day run: the break-even rate is the cheapest plan without blocks over the block's hours."""
    nodes, hours = 2, 120
    best = without_blocks(nodes, hours)
    assert best == pytest.approx(2 * C_1Y * H)  # reserving both nodes beats on-demand here (2,016 < 2,400)
    break_even = best / (nodes * block_duration_hours(hours))  # 8.4 per instance-hour
    rate = break_even * (1 + side * 0.05)
    plan = _plan(_inputs(tmp_path, kit, rate, nodes=nodes, hours=hours), kit)
    doc = plan.document
    (placement,) = doc.training
    if side < 0:
        assert placement.tier == Tier.CAPACITY_BLOCK and placement.block_hours == 120
        assert doc.costs.total_usd == pytest.approx(rate * nodes * 120)
        assert doc.commitments == []
        assert doc.costs.by_tier[Tier.CAPACITY_BLOCK] == pytest.approx(rate * nodes * 120)
    else:
        assert placement.tier == Tier.RESERVED_1Y and placement.block_hours is None
        assert doc.costs.total_usd == pytest.approx(best)
        assert Tier.CAPACITY_BLOCK not in doc.costs.by_tier
    # the certified bound counts the block exactly: it stays below (here at) the plan's cost
    assert doc.solver.bound_usd <= doc.costs.total_usd + 1e-6
    assert doc.solver.bound_usd == pytest.approx(doc.costs.total_usd, rel=1e-6)


def test_no_block_unless_the_scenario_opts_in(tmp_path: Path, kit) -> None:
    plan = _plan(_inputs(tmp_path, kit, 1.0, blocks=False), kit)
    assert [p.tier for p in plan.document.training] == [Tier.RESERVED_1Y]
    assert plan.document.costs.total_usd == pytest.approx(without_blocks(2, 120))


def test_a_720_hour_run_pays_for_840_hours(tmp_path: Path, kit) -> None:
    """30 days of work buy the 35-day block (EC2 sells weeks beyond 14 days), and the plan pays all of it;
    cash: the fee upfront in the month the block starts."""
    rate, nodes, horizon = 4.0, 2, 744
    plan = _plan(_inputs(tmp_path, kit, rate, nodes=nodes, hours=720, horizon=horizon), kit)
    doc = plan.document
    (placement,) = doc.training
    fee = rate * nodes * 840
    assert fee < without_blocks(nodes, 720, horizon)  # so the block is the optimum
    assert placement.tier == Tier.CAPACITY_BLOCK and placement.block_hours == 840
    assert placement.cost_usd == pytest.approx(fee) and doc.costs.total_usd == pytest.approx(fee)
    rows = plan.allocations[plan.allocations["tier"] == Tier.CAPACITY_BLOCK]
    assert len(rows) == 30 and rows["cost_usd"].sum() == pytest.approx(fee)  # 30 daily periods
    out = tmp_path / "plan"
    out.mkdir()
    plan.write(out)
    markdown, _html = write_reports(out)  # the report lists the block: 720 h run, 840 h sold, its fee
    section = markdown.read_text().split("### Capacity Blocks", 1)[1].split("\n## ", 1)[0]
    assert "| pre | 0 | aws:us-east-1:p5.48xlarge | 2 |" in section and "| 720 | 840 | $6,720 |" in section
    months = doc.costs.cash_by_month or []
    assert sum(m.upfront_usd for m in months) == pytest.approx(fee)
    start_month = placement.start.strftime("%Y-%m")
    assert next(m for m in months if m.month == start_month).upfront_usd == pytest.approx(fee)
    assert sum(m.recurring_usd for m in months) == pytest.approx(0.0, abs=1e-6)


def test_more_than_64_nodes_is_never_a_block(tmp_path: Path, kit) -> None:
    """However cheap the block, a gang of 65 nodes has no block option, and the plan pays without one."""
    path = _inputs(tmp_path, kit, 0.5, nodes=65, hours=24, horizon=48)  # two days, a one-day run
    inputs = load_inputs(path)
    sets = build_sets(inputs.scenario, inputs.catalog, inputs.base_dir)
    assert sets.options and not any(o.tier == Capacity.BLOCK for o in sets.options)
    small = _inputs(tmp_path / "small", kit, 0.5, nodes=64, hours=24, horizon=48)
    inputs = load_inputs(small)
    assert any(o.tier == Capacity.BLOCK for o in build_sets(inputs.scenario, inputs.catalog, None).options)
    plan = _plan(path, kit)
    assert [p.tier for p in plan.document.training] == [Tier.ON_DEMAND]
    assert plan.document.costs.total_usd == pytest.approx(without_blocks(65, 24, 48))


def test_verify_re_bills_the_block_independently(tmp_path: Path, kit) -> None:
    """verify's fee is rate x nodes x sold hours from the catalog; a plan that understates the fee, or a
    block the scenario did not allow, is a violation."""
    rate, nodes = 5.5, 3
    path = _inputs(tmp_path, kit, rate, nodes=nodes, hours=100)  # 100 h: held 5 daily periods, a 5-day block
    inputs = load_inputs(path)
    plan = _plan(path, kit)
    (bill,) = block_bills(Context(inputs.scenario, inputs.catalog, inputs.base_dir, plan))
    assert (bill.hours, bill.fee_usd) == (120, pytest.approx(5.5 * 3 * 120))
    assert verify(inputs, plan).total == 0

    out = tmp_path / "plan"
    out.mkdir()
    plan.write(out)
    document = json.loads((out / "plan.json").read_text())
    document["training"][0]["cost_usd"] = 5.5 * 3 * 100  # billed for the hours run, not the block's
    (out / "plan.json").write_text(json.dumps(document))
    assert "block-fee" in verify(inputs, Plan.read(out, trusted=False)).counts
    # rows that do not carry the fee: a block billed for less than it costs
    rows = (out / "allocations.csv").read_text().splitlines()
    cheap = list(rows)
    at = next(k for k, line in enumerate(cheap) if ",capacity_block," in line)
    cells = cheap[at].split(",")
    column = rows[0].split(",").index("cost_usd")
    cells[column] = str(float(cells[column]) / 2)
    cheap[at] = ",".join(cells)
    (out / "allocations.csv").write_text("\n".join(cheap) + "\n")
    document["training"][0]["cost_usd"] = 5.5 * 3 * 120
    (out / "plan.json").write_text(json.dumps(document))
    assert "block-rows" in verify(inputs, Plan.read(out, trusted=False)).counts

    forbidden = parse({**inputs.scenario.model_dump(mode="json"), "purchase": {"terms": ["1y"]}}, path)
    found = verify(inputs.__class__(forbidden, inputs.catalog, inputs.base_dir), plan)
    assert {"block-unavailable", "tier-unavailable"} <= set(found.counts)


def test_the_catalog_reads_a_block_rate_and_refuses_a_unit_mix_up(tmp_path: Path, kit) -> None:
    kit.write_catalog_csv(tmp_path / "ok.csv", [kit.offering_row(capacity_block_usd_h=8.25)])
    assert Catalog.load(tmp_path / "ok.csv").get(OFFERING).capacity_block_usd_h == 8.25
    kit.write_catalog_csv(tmp_path / "bad.csv", [kit.offering_row(capacity_block_usd_h=8.25 * 720)])
    with pytest.raises(InputError, match="capacity_block_usd_h"):
        Catalog.load(tmp_path / "bad.csv")
    embedded = Catalog.load()
    p5 = embedded.get(OFFERING)
    assert p5.capacity_block_usd_h is not None and p5.price_provenance(Tier.CAPACITY_BLOCK).basis == "quoted"


def test_the_hourly_method_buys_the_block_too(tmp_path: Path, kit) -> None:
    """The hourly method (schedule, dispatch, local search) places a gang in a block as the staged one does,
    and the plan it writes keeps every rule."""
    rate = 8.0  # below the 8.4 break-even of the 5-day run
    path = _inputs(tmp_path, kit, rate)
    inputs = load_inputs(path)
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings(method="hourly"))
    assert plan.document.solver.method == "hourly-decomposition"
    assert [p.tier for p in plan.document.training] == [Tier.CAPACITY_BLOCK]
    assert plan.document.costs.total_usd == pytest.approx(rate * 2 * 120)
    assert verify(inputs, plan).total == 0
