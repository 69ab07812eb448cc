"""Every command's inputs other than the scenario file (issue 13, point 4): a broken or foreign plan
directory for ``gpuplan report`` and ``gpuplan verify``, ``gpuplan catalog`` filters that match nothing,
``gpuplan whatif --vary`` values out of range and sweep files with wrong content.

Each is an input error: exit 2 and one line naming the file and the field (or row and column, or the
flag), never a traceback, never exit 0 with an empty or silently wrong result. Plan directories are
copies of the old plan fixture (``OLD_PLAN``, scenario ``colocation-decision-2027``) with one thing broken.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_output import assert_input_error
from typer.testing import CliRunner

from models.catalog import Catalog
from models.errors import InputError
from models.plan import Plan
from models.scenario import parse
from models.variation import apply_variations, parse_all
from planner.cli import app
from planner.planning.whatif import check_variants, load_sweep, plan_variants, variants_from_flags

ROOT = Path(__file__).resolve().parents[2]
OLD_PLAN = Path(__file__).resolve().parents[1] / "data" / "plan-v1-e142793"
PLAN_SCENARIO = "colocation-decision-2027"  # plan.json's scenario in OLD_PLAN
HEADER = "period,offering,tier,workload,kind,team,nodes,gpus,cost_usd"  # OLD_PLAN's allocations.csv
ROW = "0,owned:ashburn-colo:8xH100,owned,chat-70b,inference,serving,7.0,56.0,0.0"  # its first row


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# ---- gpuplan report / verify on a broken or foreign plan directory ---------------------------------


def _plan_dir(tmp_path: Path) -> Path:
    target = tmp_path / "plan"
    shutil.copytree(OLD_PLAN, target)
    return target


def _json(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    """Rewrite plan.json with ``change`` applied (its result replaces the document when not None)."""

    def apply(plan_dir: Path) -> None:
        data = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
        result = change(data)
        (plan_dir / "plan.json").write_text(json.dumps(data if result is None else result), encoding="utf-8")

    return apply


def _write(name: str, content: str | bytes) -> Callable[[Path], None]:
    def apply(plan_dir: Path) -> None:
        path = plan_dir / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")

    return apply


def _rows(*rows: str, header: str = HEADER) -> Callable[[Path], None]:
    """allocations.csv with ``rows`` first, then the fixture's other rows."""

    def apply(plan_dir: Path) -> None:
        path = plan_dir / "allocations.csv"
        rest = path.read_text(encoding="utf-8").splitlines()[2:]
        path.write_text("\n".join([header, *rows, *rest]) + "\n", encoding="utf-8")

    return apply


def _remove(name: str, then: str | None = None) -> Callable[[Path], None]:
    def apply(plan_dir: Path) -> None:
        (plan_dir / name).unlink()
        if then == "dir":
            (plan_dir / name).mkdir()

    return apply


def _pop(section: str) -> Callable[[dict[str, Any]], None]:
    return lambda data: data.pop(section) and None


#: (id, how the directory is broken, what the one line must name)
BROKEN_PLAN_DIRS: list[tuple[str, Callable[[Path], None], tuple[str, ...]]] = [
    # plan.json
    ("plan.json is a list", _json(lambda d: [d]), ("plan.json", "expected a JSON object, found an array")),
    ("plan.json is null", _write("plan.json", "null"), ("plan.json", "found null")),
    ("plan.json is binary", _write("plan.json", b"\xff\xfe\x00\x01binary"), ("plan.json", "not a text file")),
    ("plan.json is empty", _write("plan.json", ""), ("plan.json", "empty file")),
    ("plan.json is not JSON", _write("plan.json", "{not json"), ("plan.json: line 1", "not valid JSON")),
    (
        "another tool's JSON",
        _write("plan.json", json.dumps({"name": "left-pad", "version": "1.3.0", "dependencies": {}})),
        ("plan.json: schema", "no schema field", "not a file `gpuplan plan` writes"),
    ),
    (
        "another schema",
        _json(lambda d: d.update(schema="gpuplan.whatif/v1")),
        ("plan.json: schema", "whatif"),
    ),
    ("no costs", _json(_pop("costs")), ("plan.json: costs", "Field required")),
    ("no baselines", _json(_pop("baselines")), ("plan.json: baselines", "Field required")),
    ("no horizon", _json(_pop("horizon")), ("plan.json: horizon", "Field required")),
    ("no solver", _json(_pop("solver")), ("plan.json: solver", "Field required")),
    (
        "total cost NaN",
        _json(lambda d: d["costs"].update(total_usd=float("nan"))),
        ("plan.json: costs.total_usd", "nan is not a finite number"),
    ),
    (
        "a tier's cost infinite",
        _json(lambda d: d["costs"]["by_tier"].update(owned=float("inf"))),
        ("plan.json: costs.by_tier.owned", "inf is not a finite number"),
    ),
    (
        "a commitment's rate infinite",
        _json(lambda d: d["commitments"][0].update(usd_per_node_hour=float("-inf"))),
        ("plan.json: commitments.0.usd_per_node_hour", "not a finite number"),
    ),
    (
        "horizon of no periods",
        _json(lambda d: d["horizon"].update(periods=0)),
        ("plan.json: horizon.periods", "must be at least 1"),
    ),
    (
        "horizon hours not periods x period_hours",
        _json(lambda d: d["horizon"].update(period_hours=2)),
        ("plan.json: horizon", "is not periods (8760) x period_hours (2)"),
    ),
    ("plan.json is a directory", _remove("plan.json", then="dir"), ("plan.json", "is a directory")),
    # allocations.csv
    ("allocations.csv missing", _remove("allocations.csv"), ("allocations.csv", "file not found")),
    ("allocations.csv a directory", _remove("allocations.csv", "dir"), ("allocations.csv", "is a directory")),
    ("allocations.csv empty", _write("allocations.csv", ""), ("allocations.csv: row 1", "empty file")),
    (
        "allocations.csv binary",
        _write("allocations.csv", b"\x00\x01\xff\xfe\x00\x02"),
        ("allocations.csv", "not a text file"),
    ),
    (
        "another tool's CSV",
        _write("allocations.csv", "date,amount\n2027-01-01,12.5\n"),
        ("allocations.csv", "missing columns: period, offering, tier"),
    ),
    (
        "a column twice",
        _rows(ROW + ",7.0", header=HEADER + ",nodes"),
        ("allocations.csv: row 1, column nodes", "appears twice"),
    ),
    (
        "text where a number goes",
        _rows(ROW.replace(",7.0,", ",seven,")),
        ("allocations.csv: row 2, column nodes", "'seven' is not a number"),
    ),
    (
        "NaN nodes",
        _rows(ROW, ROW.replace(",7.0,", ",nan,")),
        ("allocations.csv: row 3, column nodes", "no value (empty or NaN)"),
    ),
    ("empty nodes", _rows(ROW.replace(",7.0,", ",,")), ("row 2, column nodes", "no value")),
    (
        "infinite cost",
        _rows(ROW.removesuffix(",0.0") + ",inf"),
        ("allocations.csv: row 2, column cost_usd", "inf is not a finite number"),
    ),
    (
        "negative nodes",
        _rows(ROW.replace(",7.0,", ",-7.0,")),
        ("allocations.csv: row 2, column nodes", "must be >= 0, got -7"),
    ),
    (
        "period after the horizon",
        _rows("8760" + ROW[1:]),
        ("allocations.csv: row 2, column period", "period 8760 is outside the horizon", "(0 to 8759)"),
    ),
    ("negative period", _rows("-1" + ROW[1:]), ("row 2, column period", "must be >= 0, got -1")),
    ("fractional period", _rows("0.5" + ROW[1:]), ("row 2, column period", "whole period index, got 0.5")),
    (
        "unknown tier",
        _rows(ROW.replace(",owned,", ",gold,")),
        ("allocations.csv: row 2, column tier", "unknown tier 'gold'"),
    ),
    (
        "unknown kind",
        _rows(ROW.replace(",inference,", ",batch,")),
        ("row 2, column kind", "unknown kind 'batch'"),
    ),
    ("no workload", _rows(ROW.replace(",chat-70b,", ",,")), ("row 2, column workload", "no value")),
    (
        "a row longer than the header",
        _rows(ROW, ROW + ",1,2"),
        ("allocations.csv: row 3", "11 cells but the header has 9"),
    ),
    (
        "first row longer than the header",
        _rows(ROW + ",1"),
        ("allocations.csv: row 2", "10 cells but the header has 9"),
    ),
    (
        "only a header, but costs to explain",
        _write("allocations.csv", HEADER + "\n"),
        ("allocations.csv", "no rows, but plan.json's costs.total_usd ($2,316,410)", "missing"),
    ),
]


@pytest.mark.parametrize(
    ("case", "break_it", "needles"), BROKEN_PLAN_DIRS, ids=[c[0] for c in BROKEN_PLAN_DIRS]
)
def test_report_of_a_broken_plan_directory(
    runner: CliRunner, tmp_path: Path, case: str, break_it: Callable[[Path], None], needles: tuple[str, ...]
) -> None:
    plan_dir = _plan_dir(tmp_path)
    break_it(plan_dir)
    assert_input_error(runner.invoke(app, ["report", str(plan_dir)]), *needles)
    assert not (plan_dir / "report.md").exists() and not (plan_dir / "report.html").exists()


@pytest.fixture
def scenario_of_the_plan(tmp_path: Path, kit) -> Path:
    """A scenario named as OLD_PLAN's (verify reads the plan directory only for a plan of its scenario)."""
    kit.write_catalog_csv(tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=50.0)])
    return kit.write_scenario_yaml(
        tmp_path / "scenario.yaml", kit.scenario_dict(hours=24, name=PLAN_SCENARIO)
    )


@pytest.mark.parametrize(
    ("case", "break_it", "needles"),
    [c for c in BROKEN_PLAN_DIRS if c[0] != "only a header, but costs to explain"],  # verify: a violation
    ids=[c[0] for c in BROKEN_PLAN_DIRS if c[0] != "only a header, but costs to explain"],
)
def test_verify_of_a_broken_plan_directory(
    runner: CliRunner,
    tmp_path: Path,
    scenario_of_the_plan: Path,
    case: str,
    break_it: Callable[[Path], None],
    needles: tuple[str, ...],
) -> None:
    plan_dir = _plan_dir(tmp_path)
    break_it(plan_dir)
    assert_input_error(runner.invoke(app, ["verify", str(scenario_of_the_plan), str(plan_dir)]), *needles)


def test_a_plan_directory_that_is_a_file_or_missing(
    runner: CliRunner, tmp_path: Path, scenario_of_the_plan: Path
) -> None:
    plan_json = _plan_dir(tmp_path) / "plan.json"
    for command in (["report"], ["verify", str(scenario_of_the_plan)]):
        line = assert_input_error(runner.invoke(app, [*command, str(plan_json)]), "plan.json", "is a file")
        assert f"give the directory that holds it ({plan_json.parent})" in line
        other = tmp_path / "notes.txt"
        other.write_text("hello", encoding="utf-8")
        assert_input_error(runner.invoke(app, [*command, str(other)]), "notes.txt", "not a plan directory")
        missing = tmp_path / "nowhere"
        assert_input_error(
            runner.invoke(app, [*command, str(missing)]), "nowhere/plan.json", "file not found"
        )


def test_verify_of_a_plan_made_from_another_scenario(runner: CliRunner, tmp_path: Path, kit) -> None:
    """It used to report a plan-header violation and then crash on the offerings the scenario lacks."""
    kit.write_catalog_csv(tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=50.0)])
    other = kit.write_scenario_yaml(tmp_path / "other.yaml", kit.scenario_dict(hours=24, name="other-2027"))
    result = runner.invoke(app, ["verify", str(other), str(_plan_dir(tmp_path))])
    assert_input_error(
        result, "plan.json: scenario", f"made from scenario {PLAN_SCENARIO!r}, not 'other-2027'", "other.yaml"
    )


def test_a_plan_read_back_keeps_its_types_and_row_numbers(tmp_path: Path) -> None:
    """What a spreadsheet may do to the file (a BOM, a blank line, spaces around numbers) still reads,
    typed; a problem after a blank line names the row a spreadsheet shows."""
    plan_dir = _plan_dir(tmp_path)
    text = (plan_dir / "allocations.csv").read_text(encoding="utf-8").splitlines()
    (plan_dir / "allocations.csv").write_text(
        "\ufeff" + "\n".join([text[0], text[1].replace(",7.0,", ", 7.0,"), "", *text[2:]]) + "\n",
        encoding="utf-8",
    )
    plan = Plan.read(plan_dir)
    assert len(plan.allocations) == 40
    assert str(plan.allocations["period"].dtype) == "int64" and plan.allocations["nodes"].iloc[0] == 7.0
    assert plan.allocations["nodes"].dtype.kind == "f" and plan.allocations["replicas"].isna().all()
    lines = (plan_dir / "allocations.csv").read_text(encoding="utf-8").splitlines()
    lines[4] = lines[4].replace(",owned,", ",spot_ish,")  # the 3rd data row, after the blank line
    (plan_dir / "allocations.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        Plan.read(plan_dir)
    assert caught.value.where == "row 5, column tier"


# ---- gpuplan catalog filters that match nothing -----------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--gpu", "Z999"], ("--gpu", "no GPU model in the embedded catalog starts with 'Z999'", "H100")),
        (["--gpu", "H1OO"], ("--gpu", "(did you mean 'H100'?)")),
        (["--gpu", "H100", "--gpu", "Z9"], ("--gpu", "'Z9'")),  # one typo among good ones is still a typo
        (
            ["--cloud", "amazon"],
            ("--cloud", "unknown cloud 'amazon' (did you mean 'aws'?)", "aws, gcp, azure"),
        ),
        (["--cloud", "oracle"], ("--cloud", "unknown cloud 'oracle'; valid: aws, gcp, azure")),
        (["--cloud", "azur"], ("--cloud", "did you mean 'azure'")),
        (
            ["--region", "us-east-3"],
            ("--region", "no region 'us-east-3' in the embedded catalog", "'us-east-1'"),
        ),
        (["--region", "mars"], ("--region", "no region 'mars'", "its regions:", "us-east-1")),
        (["--gpu", ""], ("--gpu", "empty value")),
    ],
)
def test_catalog_filter_matching_nothing_in_the_embedded_catalog(
    runner: CliRunner, args: list[str], needles: tuple[str, ...]
) -> None:
    assert_input_error(runner.invoke(app, ["catalog", *args]), *needles)


@pytest.fixture
def small_catalog(tmp_path: Path, kit) -> Path:
    """aws H100 with EFA in us-east-1; gcp A100 without a fabric in us-central1."""
    return kit.write_catalog_csv(
        tmp_path / "catalog.csv",
        [
            kit.offering_row(on_demand_usd_h=50.0),
            kit.offering_row(
                "gcp", "us-central1", "a2-highgpu-8g", gpu_model="A100-40GB", gpu_memory_gb=40, fabric="none"
            ),
        ],
    )


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--gpu", "L4"], ("--gpu", "starts with 'L4'", "its models: A100-40GB, H100")),
        (["--cloud", "azure"], ("--cloud", "has no azure offering; its clouds: aws, gcp")),
        (["--region", "us-east1"], ("--region", "no region 'us-east1'", "did you mean 'us-east-1'")),
        (
            ["--gpu", "H100", "--cloud", "gcp"],
            ("--cloud", "no offering matching --gpu H100 is on --cloud gcp; the clouds that have them: aws"),
        ),
        (
            ["--gpu", "A100", "--region", "us-east-1"],
            (
                "--region",
                "no offering matching --gpu A100 is in --region us-east-1",
                "their regions: us-central1",
            ),
        ),
        (
            ["--gpu", "A100", "--fabric"],
            ("--fabric", "no offering matching --gpu A100 has a multi-node fabric"),
        ),
    ],
)
def test_catalog_filters_matching_nothing_in_a_user_catalog(
    runner: CliRunner, small_catalog: Path, args: list[str], needles: tuple[str, ...]
) -> None:
    line = assert_input_error(
        runner.invoke(app, ["catalog", "--catalog", str(small_catalog), *args]), *needles
    )
    if args[0] == "--gpu" and len(args) == 2:
        assert str(small_catalog) in line  # names the catalog the models are listed from


def test_catalog_filters_that_match_still_list(runner: CliRunner, small_catalog: Path) -> None:
    result = runner.invoke(
        app, ["catalog", "--catalog", str(small_catalog), "--gpu", "h100", "--cloud", "AWS", "--region",
              "us-east-1", "--fabric", "--csv"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith("aws,us-east-1,p5.48xlarge,H100")
    only_fabric = runner.invoke(app, ["catalog", "--catalog", str(small_catalog), "--fabric", "--csv"])
    assert only_fabric.exit_code == 0 and len(only_fabric.stdout.splitlines()) == 2


# ---- gpuplan whatif --vary values out of range ------------------------------------------------------


@pytest.fixture
def whatif_scenario(tmp_path: Path, kit) -> Path:
    """A service growing 2% a month, a training job, owned nodes possible (colocation)."""
    kit.write_catalog_csv(
        tmp_path / "catalog.csv",
        [kit.offering_row(on_demand_usd_h=50.0, spot_usd_h=20.0, reserved_1y_usd_h=30.0, max_nodes=8)],
    )
    data = kit.scenario_dict(
        hours=48,
        name="whatif-inputs",
        inference=[
            {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
             "replicas": {"profile": "flat", "base": 2, "monthly_growth": 0.02}},
        ],
        training=[{"name": "ft", "team": "t", "nodes": 1, "gpu_models": ["H100"], "hours": 10}],
    )  # fmt: skip
    data["colocation"] = {"max_nodes": 4}
    return kit.write_scenario_yaml(tmp_path / "scenario.yaml", data)


VARY_OUT_OF_RANGE = [
    ("colocation.max_nodes=-4", "colocation.max_nodes is a whole number >= 0 (0: no owned nodes), got -4"),
    ("colocation.max_nodes=2.5", "colocation.max_nodes is a whole number >= 0"),
    ("colocation.existing_nodes=-1", "colocation.existing_nodes is a whole number >= 0"),
    ("colocation.depreciation_months=x0", "colocation.depreciation_months: must be greater than 0, got 0"),
    ("colocation.pue=0.5", "the changed scenario is not valid: colocation.pue"),
    ("colocation.residual_value_pct=+500%", "colocation.residual_value_pct: must be at most 100 %, got 180"),
    ("colocation.max_nodes=x1e308", "is beyond any change gpuplan plans with (at most 1000000 either way)"),
    ("capacity=-4", "capacity is a number of nodes (a whole number >= 0), got -4"),
    ("capacity=2.5", "capacity is a number of nodes"),
    ("capacity:H100=x1e308", "is beyond any change gpuplan plans with (at most 1000000 either way)"),
    ("price=x1e308", "is beyond any change gpuplan plans with (at most 1000000 either way)"),
    ("spot_price:aws=x1e308", "is beyond any change gpuplan plans with (at most 1000000 either way)"),
    ("spot_interruptions=-0.5", "spot interruptions per node-hour must be >= 0, got -0.5"),
    (
        "spot_interruptions=x1e308 spot_interruptions=x1e308",
        "is beyond any change gpuplan plans with (at most 1000000 either way)",
    ),
    ("max_spot_share=1.5", "max_spot_share is a share of training GPU-hours, from 0 to 1, got 1.5"),
    ("max_spot_share=-0.1", "from 0 to 1, got -0.1"),
    ("demand=x0", "the changed scenario is not valid: inference[0].scale: must be greater than 0, got 0"),
    ("demand=x1e308", "is beyond any change gpuplan plans with (at most 1000000 either way)"),
    ("demand=x1e200 demand=x1e200", "is beyond any change gpuplan plans with (at most 1000000 either way)"),
    ("growth=-1", "monthly growth must be > -1"),
    ("growth=-0.6 growth=x2", "the changed scenario is not valid: inference[0].replicas.monthly_growth"),
    ("training_hours=0", "training hours must be > 0, got 0"),
    ("training_hours=x1e308", "is beyond any change gpuplan plans with (at most 1000000 either way)"),
]


BEYOND = "is beyond any change gpuplan plans with (at most 1000000 either way)"


@pytest.mark.parametrize(("change", "problem"), VARY_OUT_OF_RANGE, ids=[c[0] for c in VARY_OUT_OF_RANGE])
def test_whatif_vary_out_of_range_is_an_input_error(
    runner: CliRunner, tmp_path: Path, whatif_scenario: Path, change: str, problem: str
) -> None:
    out = tmp_path / "wi"
    result = runner.invoke(app, ["whatif", str(whatif_scenario), "-o", str(out), "-q", "--vary", change])
    line = assert_input_error(result, "--vary[0]: ", problem)
    assert repr(change.split()[-1]) in line  # the change itself, quoted
    assert not out.exists()


def test_whatif_names_the_vary_flag_at_fault(
    runner: CliRunner, tmp_path: Path, whatif_scenario: Path
) -> None:
    out = tmp_path / "wi"
    args = ["whatif", str(whatif_scenario), "-o", str(out), "-q", "--vary", "demand=x2", "--vary"]
    assert_input_error(runner.invoke(app, [*args, "demand=x1.1 capacity=-1"]), "--vary[1]: 'capacity=-1'")
    assert_input_error(runner.invoke(app, [*args, " "]), "--vary[1]", "no change given")
    assert_input_error(runner.invoke(app, [*args, "demand=x2"]), "two variants are named 'demand=x2'",
                       "--vary[0] and --vary[1]")  # fmt: skip
    assert not out.exists()


def test_the_change_that_makes_a_scenario_invalid_is_the_one_named(kit) -> None:
    scenario = parse(kit.scenario_dict(hours=24, inference=[], training=[]))
    catalog = Catalog([])
    changes = parse_all(["max_spot_share=0.5", "colocation.max_nodes=4", "colocation.pue=x0.5"])
    with pytest.raises(InputError) as caught:
        apply_variations(scenario, catalog, changes)
    assert caught.value.where == "--vary[2]"
    assert "'colocation.pue=x0.5': the changed scenario is not valid: colocation.pue" in caught.value.problem
    varied, _ = apply_variations(
        scenario, catalog, parse_all(["colocation.max_nodes=4", "colocation.max_nodes=0"])
    )
    assert varied.colocation is None  # 0 owned nodes: the cloud-only fleet, as before


def test_growth_that_overflows_over_the_horizon_is_named(kit) -> None:
    """A growth factor beyond any change gpuplan plans with is named (1e308 would overflow over a year)."""
    service = {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
               "replicas": {"profile": "diurnal", "base": 1, "peak": 3, "monthly_growth": 0.02}}  # fmt: skip
    scenario = parse(kit.scenario_dict(hours=8760, inference=[service]))
    with pytest.raises(InputError) as caught:
        apply_variations(scenario, Catalog([]), parse_all(["demand=x1.5", "growth=x1e308"]))
    assert caught.value.where == "--vary[1]"
    assert f"'growth=x1e308': 1e+308 {BEYOND}" in caught.value.problem


# ---- sweep files ------------------------------------------------------------------------------------

SWEEPS = [
    ("empty", "", None, "found nothing (an empty file)"),
    (
        "a string",
        "spot_price=+50%\n",
        None,
        "expected variants: [{name: ..., vary: [...]}, ...], found a string",
    ),
    ("no variants", "description: shocks\n", "variants", "missing"),
    ("empty variants", "variants: []\n", "variants", "no variants"),
    ("variants null", "variants:\n", "variants", "expected a list, found null"),
    (
        "unknown key",
        "variant:\n  - {name: a, vary: [demand=x2]}\n",
        "variant",
        "unknown key (did you mean 'variants'?)",
    ),
    (
        "unknown variant key",
        "variants:\n  - {name: a, changes: [demand=x2]}\n",
        "variants[0].changes",
        "unknown key; a variant has name and vary",
    ),
    ("no name", "variants:\n  - {vary: [demand=x2]}\n", "variants[0].name", "every variant needs a name"),
    ("blank name", "variants:\n  - {name: ' ', vary: [demand=x2]}\n", "variants[0].name", "cannot be blank"),
    (
        "number name",
        "variants:\n  - {name: 2027, vary: [demand=x2]}\n",
        "variants[0].name",
        "found a number (2027)",
    ),
    (
        "entry a string",
        "variants:\n  - demand=x2\n",
        "variants[0]",
        "expected a variant {name: ..., vary: [...]}",
    ),
    ("vary a string", "variants:\n  - {name: a, vary: demand=x2}\n", "variants[0].vary", "expected a list"),
    ("vary a number", "variants:\n  - {name: a, vary: [1.5]}\n", "variants[0].vary[0]", "expected a string"),
    (
        "vary a mapping",
        "variants:\n  - name: a\n    vary: [max_spot_share: 0.3]\n",
        "variants[0].vary[0]",
        "write a change as one string: 'max_spot_share=0.3'",
    ),
    (
        "duplicate names",
        "variants:\n  - {name: a, vary: [demand=x2]}\n  - {name: b, vary: [demand=x3]}\n"
        "  - {name: a, vary: [demand=x4]}\n",
        "variants[2].name",
        "'a' is already the name of variants[0]",
    ),
    (
        "names alike",
        "variants:\n  - {name: a b, vary: [demand=x2]}\n  - {name: a_b, vary: [demand=x3]}\n",
        "variants[1].name",
        "would both be written to variants/a_b/",
    ),
    (
        "two bases",
        "variants:\n  - {name: today}\n  - {name: again, vary: []}\n",
        "variants[1].vary",
        "no changes, as variants[0] ('today'): only one variant can be the base",
    ),
    (
        "a bad change",
        "variants:\n  - {name: a, vary: [demand=x2]}\n  - {name: b, vary: [demand=x2, demnd=x3]}\n",
        "variants[1].vary[1]",
        "'demnd=x3': unknown key 'demnd'",
    ),
    (
        "a change out of range",
        "- {name: a, vary: [colocation.max_nodes=-4]}\n",
        "variants[0].vary[0]",
        "colocation.max_nodes is a whole number >= 0",
    ),
]


@pytest.mark.parametrize(("case", "text", "where", "problem"), SWEEPS, ids=[c[0] for c in SWEEPS])
def test_a_sweep_file_with_wrong_content(
    tmp_path: Path, case: str, text: str, where: str | None, problem: str
) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_sweep(path)
    assert (caught.value.file, caught.value.where) == (str(path), where)
    assert problem in caught.value.problem


def test_a_sweep_that_is_right_reads(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "description: shocks\nvariants:\n  - {name: today}\n"
        "  - {name: spot shock, vary: [spot_price=+50%]}\n",
        encoding="utf-8",
    )
    variants = load_sweep(path)
    assert [(v.name, v.changes) for v in variants] == [("today", []), ("spot shock", ["spot_price=+50%"])]
    assert [v.where for v in variants[1].variations()] == ["variants[1].vary[0]"]
    assert plan_variants(variants, variants_from_flags(["demand=x2"]))[0].name == "today"  # the base


def test_whatif_with_a_bad_sweep_names_the_sweep_file(
    runner: CliRunner, tmp_path: Path, whatif_scenario: Path
) -> None:
    sweep = tmp_path / "sweep.yaml"
    out = tmp_path / "wi"
    args = ["whatif", str(whatif_scenario), "-o", str(out), "-q", "--sweep", str(sweep)]
    sweep.write_text("variants:\n  - {name: shock, vary: [spot_price=+50%, typo=x2]}\n", encoding="utf-8")
    assert_input_error(runner.invoke(app, args), "sweep.yaml: variants[0].vary[1]: 'typo=x2'")
    # valid on its own, invalid on this scenario: the sweep's entry, and the scenario it was applied to
    sweep.write_text("variants:\n  - {name: dear colo, vary: [colocation.pue=0.5]}\n", encoding="utf-8")
    line = assert_input_error(
        runner.invoke(app, args), "sweep.yaml: variants[0].vary[0]: 'colocation.pue=0.5'"
    )
    assert f"(on {whatif_scenario})" in line
    sweep.write_text("variants:\n  - {name: demand=x2, vary: [demand=x3]}\n", encoding="utf-8")
    assert_input_error(runner.invoke(app, [*args, "--vary", "demand=x2"]),
                       "two variants are named 'demand=x2'", "variants[0] of", "and --vary[0]")  # fmt: skip
    assert not out.exists()


def test_check_variants_names_a_flag_change_with_the_scenario(whatif_scenario: Path) -> None:
    with pytest.raises(InputError) as caught:
        check_variants(whatif_scenario, plan_variants([], variants_from_flags(["colocation.pue=0.5"])))
    assert (caught.value.file, caught.value.where) == (str(whatif_scenario), "--vary[0]")


def test_verify_of_a_plan_on_offerings_its_scenario_no_longer_sells(runner: CliRunner, tmp_path: Path):
    """The plan's scenario without its colocation section: the owned commitments are on an offering the
    scenario cannot buy. verify reports them as violations (exit 1) instead of crashing."""
    import yaml

    data = yaml.safe_load((ROOT / "scenarios" / "colocation-decision.yaml").read_text(encoding="utf-8"))
    data.pop("colocation")
    scenario = tmp_path / "no-colo.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    result = runner.invoke(app, ["verify", str(scenario), str(_plan_dir(tmp_path))])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "unknown-offering" in result.output
