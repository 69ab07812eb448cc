"""The typed plan contract (models/plan.py): plan.json is written and read through it, its JSON Schema is
committed and cannot drift, plans written before the contract was typed still load, and every wrong
plan.json fails on reading with a message naming the file, the field and the schema version."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from models.errors import InputError
from models.plan import SCHEMA, Plan, PlanDocument, UnservedTraining
from models.schemas import DOCUMENTS, committed_path, json_schema, render
from models.tiers import Term, Tier
from planner.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"
#: plan.json of scenarios/colocation-decision.yaml written by gpuplan at commit e142793, before the
#: contract was typed (allocations.csv cut to its first 40 rows)
OLD_PLAN = DATA / "plan-v1-e142793"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_committed_schema_matches_the_models(document: str) -> None:
    committed = committed_path(document).read_text(encoding="utf-8")
    assert committed == render(document), (
        f"{committed_path(document).name} is out of date: run `python -m models.schemas` and commit it"
    )


@pytest.mark.parametrize("document", DOCUMENTS)
def test_schema_command_prints_the_schema(document: str) -> None:
    result = CliRunner().invoke(app, ["schema", document])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == json_schema(document)


def test_schema_command_rejects_an_unknown_document() -> None:
    result = CliRunner().invoke(app, ["schema", "plans"])
    assert result.exit_code == 2
    assert "unknown document 'plans'" in result.output


def test_plan_schema_describes_every_part() -> None:
    schema = json_schema("plan")
    assert schema["$id"] == SCHEMA
    assert schema["additionalProperties"] is False
    for part in ("commitments", "training", "unserved", "costs", "baselines", "utilization", "teams", "mig",
                 "solver", "horizon", "offerings", "inputs"):  # fmt: skip
        assert part in schema["properties"], part
    assert set(schema["$defs"]["Commitment"]["properties"]["term"]["$ref"].split("/")[-1:]) == {"Term"}
    assert schema["$defs"]["Term"]["enum"] == [t.value for t in Term]
    assert schema["$defs"]["Tier"]["enum"] == [t.value for t in Tier]


def test_a_plan_written_before_the_typed_contract_still_loads() -> None:
    plan = Plan.read(OLD_PLAN)
    doc = plan.document
    assert doc.costs.total_usd == pytest.approx(2316410.1460462133, rel=1e-12)
    assert doc.solver.bound_usd == pytest.approx(2141684.3213965045, rel=1e-12)
    assert [(c.offering, c.term, c.nodes) for c in doc.commitments] == [
        ("owned:ashburn-colo:8xH100", "owned", 13)
    ]
    assert doc.commitments[0].term is Term.OWNED and doc.commitments[0].term.tier is Tier.OWNED
    assert doc.horizon.start.isoformat() == "2027-01-01T00:00:00+00:00"
    assert len(plan.allocations) == 40
    # and reads back what it writes, value for value (absent optional fields come back empty)
    original = json.loads((OLD_PLAN / "plan.json").read_text())
    again = json.loads(doc.to_json())
    assert _same_but_nulls(original, again)


def _same_but_nulls(original: object, again: object) -> bool:
    """Equal, except that fields absent in ``original`` may come back empty in ``again``: null, an empty
    list or map, or the false, zero or empty default of a field added since (``existing``, ``name``,
    ``tiers``)."""
    if isinstance(original, dict) and isinstance(again, dict):
        extra = set(again) - set(original)
        # payment: a v1 commitment is paid by the hour (schema v2's default)
        return all(again[k] in (None, [], {}, False, 0, "", "no-upfront") for k in extra) and all(
            k in again and _same_but_nulls(v, again[k]) for k, v in original.items()
        )
    if isinstance(original, list) and isinstance(again, list):
        pairs = zip(original, again, strict=True) if len(original) == len(again) else ()
        return len(original) == len(again) and all(_same_but_nulls(a, b) for a, b in pairs)
    return original == again


def test_write_then_read_is_the_same_document(tmp_path: Path) -> None:
    """The same document, recording (on disk and in memory) the allocations.csv written with it."""
    plan = Plan.read(OLD_PLAN)
    assert plan.document.allocations_file is None  # written before plans recorded it
    plan.write(tmp_path)
    again = Plan.read(tmp_path)
    recorded = again.document.allocations_file
    assert recorded is not None and recorded.rows == len(plan.allocations) == 40
    assert recorded.sha256 == hashlib.sha256((tmp_path / "allocations.csv").read_bytes()).hexdigest()
    assert again.document == plan.document
    assert again.document.model_dump() == plan.document.model_dump()


def _corrupt(tmp_path: Path, change) -> Path:
    target = tmp_path / "plan"
    shutil.copytree(OLD_PLAN, target)
    data = json.loads((target / "plan.json").read_text())
    result = change(data)
    (target / "plan.json").write_text(json.dumps(data if result is None else result))
    return target


def _message(directory: Path) -> str:
    with pytest.raises(InputError) as caught:
        Plan.read(directory)
    return str(caught.value)


#: plan.json's mig block as gpuplan wrote it before schedules: one config per pool, for the peak
LEGACY_MIG = {
    "pools": [
        {
            "offering": "aws:us-east-1:p5.48xlarge", "gpu_model": "H100",
            "config": "aws-us-east-1-p5.48xlarge", "peak_period": 0, "peak_demand": {"1g.10gb": 40},
            "gpus_packed": 6, "gpus_per_service_layouts": 6,
            "gpus_whole_per_replica": 40, "gpus_planned": 5.7, "nodes_with_config": 1,
            "node_layout": [
                {"gpus": 5, "mig_devices": {"1g.10gb": 7}}, {"gpus": 1, "mig_devices": {"1g.10gb": 5}},
            ],
            "packed_gpu_hours": 40742.0, "whole_gpu_hours": 272114.0,
        }
    ],
    "gpus_saved_vs_whole_at_peak": 34,
    "gpu_hours_saved_vs_whole": 231372.0,
    "config": {"version": "v1", "mig-configs": {"aws-us-east-1-p5.48xlarge": [
        {"devices": [0, 1, 2, 3, 4], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [5], "mig-enabled": True, "mig-devices": {"1g.10gb": 5}},
        {"devices": [6, 7], "mig-enabled": False, "mig-devices": None},
    ]}},
    "note": "",
}  # fmt: skip


def test_a_mig_block_written_before_schedules_still_reads(tmp_path: Path) -> None:
    """The pool's one config (config, nodes_with_config, node_layout) reads, deprecated: it is not
    written again, and the pool has no schedule (configs empty)."""
    plan = Plan.read(_corrupt(tmp_path, lambda d: d.update(mig=LEGACY_MIG)))
    assert plan.document.mig is not None
    (pool,) = plan.document.mig.pools
    assert pool.config == "aws-us-east-1-p5.48xlarge" and pool.nodes_with_config == 1 and pool.configs == []
    assert pool.node_layout is not None and pool.node_layout[1].mig_devices == {"1g.10gb": 5}
    written = json.loads(plan.document.to_json())["mig"]["pools"][0]
    assert not {"config", "nodes_with_config", "node_layout"} & set(written) and written["configs"] == []
    schema = json_schema("plan")["$defs"]["MigPool"]["properties"]
    assert "configs" in schema and "config" not in schema  # the contract documents the schedule only


def test_a_newer_or_foreign_schema_is_named(tmp_path: Path) -> None:
    message = _message(_corrupt(tmp_path, lambda d: d.update(schema="gpuplan.plan/v3")))
    assert "plan.json: schema:" in message
    assert "reads schema 'gpuplan.plan/v2' or 'gpuplan.plan/v1', the file says 'gpuplan.plan/v3'" in message


@pytest.mark.parametrize(
    ("change", "where", "problem"),
    [
        (lambda d: d["costs"].pop("total_usd") and None, "costs.total_usd", "Field required"),
        (lambda d: d["commitments"][0].update(term="5y"), "commitments.0.term", "Input should be"),
        (lambda d: d["commitments"][0].update(nodes="many"), "commitments.0.nodes", "'many' is not a number"),
        (lambda d: d["training"].append({"job": "x"}), "training.", "Field required"),
        (lambda d: d["costs"]["by_tier"].update(reserved_5y=1.0), "costs.by_tier", "Input should be"),
        (lambda d: d["solver"].update(colour="blue"), "solver.colour", "Extra inputs are not permitted"),
        (
            lambda d: d["unserved"].append({"kind": "magic", "workload": "w"}),
            "unserved.0",
            "does not match any of the expected tags",
        ),
    ],
)
def test_a_wrong_field_is_named_with_the_schema(tmp_path: Path, change, where: str, problem: str) -> None:
    message = _message(_corrupt(tmp_path, change))
    assert f"plan.json: {where}" in message
    assert problem in message
    assert "gpuplan.plan/v1" in message  # the schema the (v1) file says it follows


def test_plan_json_that_is_not_an_object(tmp_path: Path) -> None:
    message = _message(_corrupt(tmp_path, lambda d: [d]))
    assert "expected a JSON object, found an array" in message


def test_plan_json_that_is_binary_or_missing(tmp_path: Path) -> None:
    target = tmp_path / "plan"
    shutil.copytree(OLD_PLAN, target)
    (target / "plan.json").write_bytes(b"\xff\xfe\x00binary")
    assert "not a text file" in _message(target)
    (target / "plan.json").unlink()
    assert "file not found (run `gpuplan plan` first)" in _message(target)


def test_allocations_with_missing_columns(tmp_path: Path) -> None:
    target = tmp_path / "plan"
    shutil.copytree(OLD_PLAN, target)
    (target / "allocations.csv").write_text("period,offering\n0,x\n")
    assert "allocations.csv: missing columns: tier, workload" in _message(target)


def test_unserved_is_a_tagged_union() -> None:
    item = PlanDocument.model_validate(
        {**json.loads((OLD_PLAN / "plan.json").read_text()),
         "unserved": [{"kind": "training", "workload": "j", "team": "t", "run": 0, "gpu_hours": 8.0,
                       "reason": "no room"}]}
    ).unserved[0]  # fmt: skip
    assert isinstance(item, UnservedTraining) and item.gpu_hours == 8.0


def test_gpuplan_report_renders_a_plan_written_before_the_typed_contract(tmp_path: Path) -> None:
    target = tmp_path / "old"
    shutil.copytree(OLD_PLAN, target)
    result = CliRunner().invoke(app, ["report", str(target)])
    assert result.exit_code == 0, result.output
    markdown = (target / "report.md").read_text(encoding="utf-8")
    assert "**Total cost: $2,316,410**" in markdown
    assert "owned:ashburn-colo:8xH100" in markdown
    assert (target / "report.html").stat().st_size > 100_000  # plotly.js inline: a self-contained page
