"""GCP flex-start as a training tier (issue 38 point 4): chosen by closed form exactly below its break-even,
never where the run's window cannot hold the start delay plus the run, never for a run over 7 days; the
certified bound stays below the plan; ``gpuplan verify`` re-bills it from the catalog.

One GCP offering (on demand C_OD, 1-year commitment C_1Y per node-hour, a flex-start rate F), one gang of N
nodes for h hours in a horizon of H hours (daily periods), nothing else. Without flex-start the cheapest way
to run it is, over the r of its nodes committed for the whole horizon,

    min_r  r * C_1Y * H + (N - r) * C_OD * h

and on flex-start it costs F * N * h (billed as it runs). The plan must take flex-start exactly when that is
cheaper and the window holds the delay (default 24 h) plus the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.catalog import Catalog
from models.errors import InputError
from models.flex_start import DEFAULT_FLEX_START_DELAY_HOURS, FLEX_START_MAX_RUN_HOURS, why_no_flex_start
from models.inputs import load_inputs
from models.plan import Plan
from models.scenario import parse
from models.tiers import Capacity, Tier
from planner.outputs.reports.plan import write_reports
from planner.planning.optimize import optimize
from planner.planning.problem.sets import build_sets
from planner.verify import verify

C_OD = 10.0
C_1Y = 6.0
H = 168
OFFERING = "gcp:us-central1:a3-highgpu-8g"


def _inputs(tmp_path: Path, kit, flex: float | None, *, nodes: int = 2, hours: int = 144, horizon: int = H,
            allowed: bool = True, delay: float | None = None) -> Path:  # fmt: skip
    tmp_path.mkdir(parents=True, exist_ok=True)
    row = kit.offering_row("gcp", "us-central1", "a3-highgpu-8g", fabric="tcpx", on_demand_usd_h=C_OD,
                           reserved_1y_usd_h=C_1Y, flex_start_usd_h=flex)  # fmt: skip
    kit.write_catalog_csv(tmp_path / "catalog.csv", [row])
    training = [{"name": "tune", "team": "t", "gpu_models": ["H100"], "gpus_per_node": 8, "nodes": nodes,
                 "hours": hours}]  # fmt: skip
    data = kit.scenario_dict(hours=horizon, period_hours=24, terms=["1y"], training=training)
    data["purchase"]["flex_start"] = allowed
    if delay is not None:
        data["purchase"]["flex_start_delay_hours"] = delay
    return kit.write_scenario_yaml(tmp_path / "scenario.yaml", data)


def _plan(path: Path, kit) -> Plan:
    inputs = load_inputs(path)
    return optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings())


def without_flex(nodes: int, hours: int, horizon: int = H) -> float:
    """The cheapest way to run the gang without flex-start, by brute force over the nodes committed."""
    return min(r * C_1Y * horizon + (nodes - r) * C_OD * hours for r in range(nodes + 1))


def test_the_rules_and_the_default_delay() -> None:
    assert FLEX_START_MAX_RUN_HOURS == 168 and DEFAULT_FLEX_START_DELAY_HOURS == 24.0
    assert why_no_flex_start("gcp", 168) is None
    assert "7 days" in (why_no_flex_start("gcp", 169) or "")
    assert "GCP" in (why_no_flex_start("aws", 24) or "")
    assert parse(
        {**_minimal_scenario(), "purchase": {"flex_start": True}}, Path("s.yaml")
    ).purchase.flex_start_delay_hours == 24.0  # fmt: skip
    with pytest.raises(InputError, match="flex_start_delay_hours"):
        parse({**_minimal_scenario(), "purchase": {"flex_start_delay_hours": -1}}, Path("s.yaml"))


def _minimal_scenario() -> dict:
    return {"name": "s", "horizon": {"start": "2027-01-04T00:00:00Z", "hours": 24}, "catalog": "catalog.csv",
            "teams": [{"name": "t"}]}  # fmt: skip


@pytest.mark.parametrize("side", [-1, 1])
def test_flex_start_is_chosen_exactly_below_the_break_even(tmp_path: Path, kit, side: int) -> None:
    """A 6-day run in a 7-day window (24 h delay + 144 h run = 168 h): the break-even rate is the cheapest
    plan without flex-start over the run's node-hours."""
    nodes, hours = 2, 144
    best = without_flex(nodes, hours)
    assert best == pytest.approx(2 * C_1Y * H)  # committing both nodes beats on demand (2,016 < 2,880)
    break_even = best / (nodes * hours)  # 7.0 per node-hour
    rate = break_even * (1 + side * 0.05)
    plan = _plan(_inputs(tmp_path, kit, rate, nodes=nodes, hours=hours), kit)
    doc = plan.document
    (placement,) = doc.training
    if side < 0:
        assert placement.tier == Tier.FLEX_START and placement.flex_start_delay_hours == 24.0
        assert placement.start_period == 1  # the window's start plus the 24 h delay, in daily periods
        assert doc.costs.total_usd == pytest.approx(rate * nodes * hours)
        assert doc.commitments == [] and placement.block_hours is None
        assert doc.costs.by_tier[Tier.FLEX_START] == pytest.approx(rate * nodes * hours)
        rows = plan.allocations[plan.allocations["tier"] == Tier.FLEX_START]
        assert len(rows) == 6 and rows["cost_usd"].sum() == pytest.approx(rate * nodes * hours)
    else:
        assert placement.tier == Tier.RESERVED_1Y and placement.flex_start_delay_hours is None
        assert doc.costs.total_usd == pytest.approx(best)
        assert Tier.FLEX_START not in doc.costs.by_tier
    # the certified bound counts flex-start exactly (its cost does not depend on the start): <= the plan
    assert doc.solver.bound_usd <= doc.costs.total_usd + 1e-6
    assert doc.solver.bound_usd == pytest.approx(doc.costs.total_usd, rel=1e-6)
    assert verify(load_inputs(tmp_path / "scenario.yaml"), plan).total == 0


def test_not_where_the_window_cannot_absorb_the_delay(tmp_path: Path, kit) -> None:
    """The same 6-day run with a 48 h delay: 48 + 144 > 168, so however cheap, no flex-start option; with a
    1 h delay it still starts a whole period late (the first daily period after hour 1)."""
    path = _inputs(tmp_path, kit, 0.5, delay=48)
    inputs = load_inputs(path)
    assert not any(o.tier == Capacity.FLEX for o in build_sets(inputs.scenario, inputs.catalog, None).options)
    plan = _plan(path, kit)
    assert [p.tier for p in plan.document.training] == [Tier.RESERVED_1Y]
    assert plan.document.costs.total_usd == pytest.approx(without_flex(2, 144))
    short = _inputs(tmp_path / "short", kit, 0.5, delay=1, hours=96)
    inputs = load_inputs(short)
    flex = [o for o in build_sets(inputs.scenario, inputs.catalog, None).options if o.tier == Capacity.FLEX]
    assert flex and min(o.start for o in flex) == 1
    assert all(o.tier != Capacity.FLEX for o in build_sets(
        load_inputs(_inputs(tmp_path / "off", kit, 0.5, allowed=False)).scenario, inputs.catalog, None
    ).options)  # fmt: skip


def test_never_for_a_run_over_seven_days(tmp_path: Path, kit) -> None:
    """An 8-day run in a 10-day window: flex-start VMs run at most 7 days, so the plan pays without them."""
    path = _inputs(tmp_path, kit, 0.5, hours=192, horizon=240)
    inputs = load_inputs(path)
    assert not any(o.tier == Capacity.FLEX for o in build_sets(inputs.scenario, inputs.catalog, None).options)
    plan = _plan(path, kit)
    assert Tier.FLEX_START not in {p.tier for p in plan.document.training}
    assert plan.document.costs.total_usd == pytest.approx(without_flex(2, 192, 240))


def test_verify_re_bills_flex_start_and_the_report_names_it(tmp_path: Path, kit) -> None:
    """verify's bill is rate x nodes x hours held from the catalog; a plan that understates it, starts it
    before the delay is over, names another delay, or was not allowed flex-start, is a violation."""
    rate = 4.0
    path = _inputs(tmp_path, kit, rate, hours=96)
    inputs = load_inputs(path)
    plan = _plan(path, kit)
    (placement,) = plan.document.training
    assert placement.tier == Tier.FLEX_START and verify(inputs, plan).total == 0
    out = tmp_path / "plan"
    out.mkdir()
    plan.write(out)
    markdown, _html = write_reports(out)
    section = markdown.read_text().split("### Flex-start", 1)[1].split("\n## ", 1)[0]
    assert f"| tune | 0 | {OFFERING} | 2 |" in section and "| 24 | 96 | $768 |" in section

    def corrupted(change) -> set[str]:
        document = json.loads((out / "plan.json").read_text())
        change(document["training"][0])
        bad = tmp_path / f"bad{len(list(tmp_path.iterdir()))}"
        bad.mkdir()
        (bad / "plan.json").write_text(json.dumps(document))
        (bad / "allocations.csv").write_text((out / "allocations.csv").read_text())
        return set(verify(inputs, Plan.read(bad, trusted=False)).counts)

    assert "flex-start-cost" in corrupted(lambda t: t.update(cost_usd=rate * 2 * 48))
    assert "flex-start-delay" in corrupted(lambda t: t.update(flex_start_delay_hours=1.0))
    assert "flex-start-delay" in corrupted(lambda t: t.update(start_period=0, start="2027-01-04T00:00:00Z"))
    # rows billed below the catalog's rate
    rows = (out / "allocations.csv").read_text().splitlines()
    column = rows[0].split(",").index("cost_usd")
    at = next(k for k, line in enumerate(rows) if ",flex_start," in line)
    cells = rows[at].split(",")
    cells[column] = str(float(cells[column]) / 2)
    rows[at] = ",".join(cells)
    cheap = tmp_path / "cheap"
    cheap.mkdir()
    (cheap / "plan.json").write_text((out / "plan.json").read_text())
    (cheap / "allocations.csv").write_text("\n".join(rows) + "\n")
    assert "cost-row" in verify(inputs, Plan.read(cheap, trusted=False)).counts
    forbidden = parse({**inputs.scenario.model_dump(mode="json"), "purchase": {"terms": ["1y"]}}, path)
    found = verify(inputs.__class__(forbidden, inputs.catalog, inputs.base_dir), plan)
    assert {"flex-start-unavailable", "tier-unavailable"} <= set(found.counts)


def test_the_hourly_method_places_flex_start_too(tmp_path: Path, kit) -> None:
    rate = 6.0  # below the 7.0 break-even of the 6-day run
    path = _inputs(tmp_path, kit, rate)
    inputs = load_inputs(path)
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings(method="hourly"))
    assert [p.tier for p in plan.document.training] == [Tier.FLEX_START]
    assert plan.document.costs.total_usd == pytest.approx(rate * 2 * 144)
    assert verify(inputs, plan).total == 0


def test_the_catalog_reads_a_flex_start_rate(tmp_path: Path, kit) -> None:
    kit.write_catalog_csv(tmp_path / "ok.csv", [kit.offering_row(flex_start_usd_h=4.7)])
    assert Catalog.load(tmp_path / "ok.csv").get("aws:us-east-1:p5.48xlarge").flex_start_usd_h == 4.7
    kit.write_catalog_csv(tmp_path / "bad.csv", [kit.offering_row(flex_start_usd_h=-1)])
    with pytest.raises(InputError, match="flex_start_usd_h"):
        Catalog.load(tmp_path / "bad.csv")


def test_provisioning_launches_the_planned_gang_on_flex_start(tmp_path: Path, kit) -> None:
    """plan -> desired state -> actions -> launch spec: the gang's VMs are asked for with its held hours
    as their run duration, and no reservation is made for it (flex-start VMs consume none); the GCP
    adapter turns that into provisioningModel FLEX_START (tests/integration/test_gcp_flex_start.py)."""
    from datetime import timedelta

    from planner.operations.provision import launch_spec
    from planner.operations.reconcile import ActionKind, reconcile
    from planner.outputs.desired import desired_state
    from providers.base import Inventory

    plan = _plan(_inputs(tmp_path, kit, 4.0, hours=96), kit)
    (placement,) = plan.document.training
    assert placement.tier == Tier.FLEX_START
    # its VMs are asked for the planned delay before its start (the wait the plan allowed for), not at it
    delay = timedelta(hours=placement.flex_start_delay_hours or 0)
    assert delay > timedelta(0)
    desired = desired_state(plan, placement.start - delay + timedelta(minutes=30), handles=lambda _o: True)
    (gang,) = desired.gangs
    assert gang.running
    assert gang.max_run_hours == 96 and not gang.reserve
    actions = reconcile(desired, Inventory())
    assert not any(a.kind is ActionKind.CREATE_RESERVATION for a in actions)
    (launch,) = [a for a in actions if a.kind is ActionKind.LAUNCH]
    assert launch.max_run_hours == 96 and launch.reservation is None
    assert launch_spec(launch, "p").max_run_hours == 96
