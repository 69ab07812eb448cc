"""GCP calendar-mode reservations as a training tier (issue 38 point 4): the same option kind as an AWS
Capacity Block (``Capacity.BLOCK``, tier ``capacity_block``) under GCP's rules, 1 to 90 whole days.

One GCP offering (on demand C_OD, 1-year commitment C_1Y per node-hour, a calendar rate B), one gang of N
nodes for h hours in a horizon of H hours, nothing else. Without a reservation the cheapest way to run it
is ``min_r r * C_1Y * H + (N - r) * C_OD * h`` (r nodes committed, h the hours its whole periods hold),
and a calendar-mode reservation costs B * N * days(h) * 24, days(h) the whole days that hold h hours.
The plan must take it exactly when cheaper.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.capacity_blocks import FIXED_RESERVATIONS, GCP_CALENDAR_DAYS, block_duration_hours, why_no_block
from models.catalog import Catalog
from models.inputs import load_inputs
from models.plan import Plan
from models.scenario import parse
from models.tiers import Capacity, Tier
from planner.planning.optimize import optimize
from planner.planning.problem.sets import build_sets
from planner.verify import verify
from planner.verify.blocks import block_bills
from planner.verify.context import Context

C_OD = 10.0
C_1Y = 6.0
H = 168


def _inputs(tmp_path: Path, kit, rate: float | None, *, nodes: int = 2, hours: int = 100, horizon: int = H,
            calendar: bool = True, aws_blocks: bool = False) -> Path:  # fmt: skip
    tmp_path.mkdir(parents=True, exist_ok=True)
    row = kit.offering_row("gcp", "us-central1", "a3-highgpu-8g", fabric="tcpx", on_demand_usd_h=C_OD,
                           reserved_1y_usd_h=C_1Y, capacity_block_usd_h=rate)  # fmt: skip
    kit.write_catalog_csv(tmp_path / "catalog.csv", [row])
    training = [{"name": "pre", "team": "t", "gpu_models": ["H100"], "gpus_per_node": 8, "nodes": nodes,
                 "hours": hours}]  # fmt: skip
    data = kit.scenario_dict(hours=horizon, period_hours=24, terms=["1y"], training=training)
    data["purchase"]["calendar_mode"] = calendar
    data["purchase"]["capacity_blocks"] = aws_blocks
    return kit.write_scenario_yaml(tmp_path / "scenario.yaml", data)


def _plan(path: Path, kit) -> Plan:
    inputs = load_inputs(path)
    return optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings())


def without_reservation(nodes: int, hours: int, horizon: int = H) -> float:
    return min(r * C_1Y * horizon + (nodes - r) * C_OD * hours for r in range(nodes + 1))


def test_gcp_sells_whole_days_up_to_90_without_the_aws_week_steps() -> None:
    assert tuple(range(1, 91)) == GCP_CALENDAR_DAYS
    assert block_duration_hours(15 * 24, "gcp") == 15 * 24  # AWS sells 21 days for the same run
    assert block_duration_hours(15 * 24) == 21 * 24
    assert block_duration_hours(90 * 24, "gcp") == 90 * 24
    assert block_duration_hours(90 * 24 + 1, "gcp") is None
    assert why_no_block(65, 24, "gcp") is None  # no per-request instance limit applied on GCP
    assert "90 days" in (why_no_block(2, 91 * 24, "gcp") or "")
    assert FIXED_RESERVATIONS["gcp"].name == "calendar-mode reservation"
    with pytest.raises(ValueError, match="azure"):
        block_duration_hours(24, "azure")
    embedded = Catalog.load().get("gcp:us-central1:a3-highgpu-8g")
    assert embedded.capacity_block_usd_h == pytest.approx(0.47 * (embedded.on_demand_usd_h or 0), rel=1e-4)
    assert embedded.price_provenance(Tier.CAPACITY_BLOCK).basis == "assumed"


@pytest.mark.parametrize("side", [-1, 1])
def test_calendar_reservation_chosen_exactly_below_the_break_even(tmp_path: Path, kit, side: int) -> None:
    """A 100 h run held 5 daily periods (120 h): 5 days reserved. Break-even: the best plan without it
    (2,016: both nodes committed, below 2,400 on demand) over N x 120 h."""
    nodes, hours = 2, 100
    best = without_reservation(nodes, 120)
    assert best == pytest.approx(2 * C_1Y * H)
    rate = best / (nodes * 120) * (1 + side * 0.05)
    plan = _plan(_inputs(tmp_path, kit, rate, nodes=nodes, hours=hours), kit)
    doc = plan.document
    (placement,) = doc.training
    if side < 0:
        assert placement.tier == Tier.CAPACITY_BLOCK and placement.block_hours == 120
        assert doc.costs.total_usd == pytest.approx(rate * nodes * 120)
    else:
        assert placement.tier == Tier.RESERVED_1Y and placement.block_hours is None
        assert doc.costs.total_usd == pytest.approx(best)
    assert doc.solver.bound_usd <= doc.costs.total_usd + 1e-6
    assert verify(load_inputs(tmp_path / "scenario.yaml"), plan).total == 0


def test_only_with_calendar_mode_and_never_over_90_days(tmp_path: Path, kit) -> None:
    """The AWS flag does not buy GCP reservations; a 91-day run has none however cheap."""
    path = _inputs(tmp_path, kit, 0.5, calendar=False, aws_blocks=True)
    inputs = load_inputs(path)
    options = build_sets(inputs.scenario, inputs.catalog, None).options
    assert options and not any(o.tier == Capacity.BLOCK for o in options)
    long = load_inputs(_inputs(tmp_path / "long", kit, 0.5, hours=91 * 24, horizon=92 * 24))
    assert not any(o.tier == Capacity.BLOCK for o in build_sets(long.scenario, long.catalog, None).options)
    fits = load_inputs(_inputs(tmp_path / "fits", kit, 0.5, hours=90 * 24, horizon=92 * 24))
    assert any(o.tier == Capacity.BLOCK for o in build_sets(fits.scenario, fits.catalog, None).options)


def test_verify_re_bills_the_calendar_reservation(tmp_path: Path, kit) -> None:
    rate, nodes = 5.5, 3
    path = _inputs(tmp_path, kit, rate, nodes=nodes, hours=15 * 24, horizon=20 * 24)
    inputs = load_inputs(path)
    plan = _plan(path, kit)
    (bill,) = block_bills(Context(inputs.scenario, inputs.catalog, inputs.base_dir, plan))
    assert (bill.hours, bill.fee_usd) == (360, pytest.approx(5.5 * 3 * 360))  # 15 days, not AWS's 21
    assert verify(inputs, plan).total == 0
    out = tmp_path / "plan"
    out.mkdir()
    plan.write(out)
    document = json.loads((out / "plan.json").read_text())
    document["training"][0]["block_hours"] = 21 * 24  # as EC2 would sell it
    document["training"][0]["cost_usd"] = 5.5 * 3 * 21 * 24
    (out / "plan.json").write_text(json.dumps(document))
    assert "block-fee" in verify(inputs, Plan.read(out, trusted=False)).counts
    forbidden = parse({**inputs.scenario.model_dump(mode="json"), "purchase": {"terms": ["1y"]}}, path)
    found = verify(inputs.__class__(forbidden, inputs.catalog, inputs.base_dir), plan)
    assert {"block-unavailable", "tier-unavailable"} <= set(found.counts)
