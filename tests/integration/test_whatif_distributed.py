"""What-if and break-even on Dask (``planner/planning/sweeps.py``): a local cluster of two worker processes
gives the same files as the in-process run, reports each variant as it ends, keeps a failed variant as a
row with its error, and an unreachable scheduler is a quick, clear error.

The scenario is small enough to price by hand: one H100 offering at $10/node-hour, on demand only; a
service of one node per replica whose demand CSV (one directory up from the scenario, so shipping it to a
worker has to keep its relative place) asks 1, 2, 3, 4 replicas for 6 h each; a 4 h one-node training run.
"""

from __future__ import annotations

import json
import math
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import cloudpickle
import pandas as pd
import pytest
from typer.testing import CliRunner

distributed = pytest.importorskip("distributed")

from models.inputs import load_inputs  # noqa: E402
from models.plan import Plan  # noqa: E402
from models.whatif import FailedVariant, SolvedVariant  # noqa: E402
from planner.cli import app  # noqa: E402
from planner.planning.optimize import SolveSettings  # noqa: E402
from planner.planning.sweeps import DaskEngine, Failure, make_job, solve_job  # noqa: E402
from planner.planning.whatif import plan_variants, run_whatif, variants_from_flags  # noqa: E402

PRICE = 10.0
DEMAND = [1 + hour // 6 for hour in range(24)]  # replicas per hour; one replica fills one 8-GPU node
TRAINING_HOURS = 4
INFERENCE_USD = PRICE * sum(DEMAND)  # 600
BASE_USD = INFERENCE_USD + PRICE * TRAINING_HOURS  # 640: nothing to commit, nothing cheaper than on demand
# x100 the training run's hours: 400 h in a 24 h horizon, which the planner's input check refuses (in
# the worker: the change itself is valid, so the sweep is not refused up front)
VARY = ["on_demand_price=+10%", "demand=x2", "training_hours=x100"]
TIMING = {"created", "seconds"}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, kit: Any) -> Path:
    root = tmp_path_factory.mktemp("dist")
    (root / "scenarios").mkdir()
    (root / "series").mkdir()
    kit.write_catalog_csv(root / "catalog.csv", [kit.offering_row(on_demand_usd_h=PRICE)])
    kit.write_demand_csv(root / "series" / "demand.csv", DEMAND)
    data = kit.scenario_dict(
        hours=24,
        catalog="../catalog.csv",
        inference=[{"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
                    "replicas": {"csv": "../series/demand.csv"}}],
        training=[{"name": "ft", "team": "t", "nodes": 1, "gpus_per_node": 8, "gpu_models": ["H100"],
                   "hours": TRAINING_HOURS}],
    )  # fmt: skip
    data["clouds"] = {"aws": {"regions": ["us-east-1"]}}
    return kit.write_scenario_yaml(root / "scenarios" / "scenario.yaml", data)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two worker processes of one thread on the loopback interface, no dashboard: a real scheduler the
    command reaches by its address, as it would a remote one."""
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=40,
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},  # its HTTP routes: loopback, a free port
    ) as local:
        yield local


def _untimed(value: Any) -> Any:
    """A JSON document without its timing fields (``created``, ``seconds``, ``*_seconds``) and with the
    seconds a solver note quotes (``..., 0.1 s``) blanked."""
    if isinstance(value, dict):
        return {
            k: _untimed(v) for k, v in value.items() if k not in TIMING and not str(k).endswith("_seconds")
        }
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"\b\d+(\.\d+)? s\b", "<t> s", value)
    return value


def _same_files(a: Path, b: Path) -> None:
    """Every file of ``a`` is in ``b`` and the other way round; JSON equal apart from timing, the rest
    byte for byte."""
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for name in files_a:
        if name.suffix == ".json":
            left, right = (json.loads((side / name).read_text()) for side in (a, b))
            assert _untimed(left) == _untimed(right), name
        else:
            assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_cluster_run_writes_what_the_in_process_run_writes(
    scenario: Path, cluster: Any, tmp_path: Path
) -> None:
    runner = CliRunner()
    args = ["whatif", str(scenario), "-q", "--no-report", *(x for v in VARY for x in ("--vary", v))]
    here = runner.invoke(app, [*args, "-o", str(tmp_path / "here"), "--workers", "1"])
    there = runner.invoke(app, [*args, "-o", str(tmp_path / "there"), "--cluster", cluster.scheduler_address])
    # one variant failed, the others were planned: written, and exit 3 as for any failed variant
    assert here.exit_code == there.exit_code == 3, (here.output, there.output)
    _same_files(tmp_path / "here", tmp_path / "there")

    data = json.loads((tmp_path / "there" / "whatif.json").read_text())
    rows = {row["name"]: row for row in data["variants"]}
    assert list(rows) == ["base", *VARY]  # the order given, not the order they finished in
    assert rows["base"]["total_usd"] == pytest.approx(BASE_USD, rel=1e-9)
    assert rows["on_demand_price=+10%"]["total_usd"] == pytest.approx(1.1 * BASE_USD, rel=1e-9)
    assert rows["demand=x2"]["total_usd"] == pytest.approx(2 * INFERENCE_USD + PRICE * TRAINING_HOURS)
    failed = rows["training_hours=x100"]
    assert failed["status"] == "failed" and "training[0].hours" in failed["error"]
    assert "shorter than the run (400 h)" in failed["error"]
    # the summary names the failed variant and the start of its error
    line = next(line for line in there.output.splitlines() if "training_hours=x100" in line)
    assert "failed" in line and "training[0].hours" in line
    assert "1 variant(s) failed" in there.output


def test_progress_reports_each_variant_as_it_ends(scenario: Path, cluster: Any, tmp_path: Path) -> None:
    """A relative capacity change plans the base first (its peak is the reference), so the base is the
    first variant reported; then each other one once, the failed one included."""
    variants = plan_variants([], variants_from_flags(["capacity:H100=-50%", "training_hours=x100"]))
    seen: list[SolvedVariant | FailedVariant] = []
    settings = SolveSettings(time_limit=30)
    document = run_whatif(scenario, variants, tmp_path, settings, 2, seen.append, cluster.scheduler_address)
    assert seen[0].name == "base"
    assert sorted(row.name for row in seen) == sorted(v.name for v in variants)
    assert [row.name for row in document.variants] == [v.name for v in variants]
    assert isinstance(document.variants[2], FailedVariant)
    # the capped variant holds at most half (rounded down) the nodes the base held at its peak
    solved = [row for row in document.variants if isinstance(row, SolvedVariant)]
    base, capped = (Plan.read(tmp_path / row.plan_dir).allocations for row in solved)
    peak = base.groupby("period")["nodes"].sum().max()
    assert peak >= max(DEMAND)
    assert capped.groupby("period")["nodes"].sum().max() <= math.floor(peak * 0.5) + 1e-9
    assert solved[1].unserved  # so the hours that want more replicas are short, and it says so


def test_a_task_that_raises_fails_alone(scenario: Path, cluster: Any) -> None:
    """An exception in a worker (not a GpuplanError: a bug, a lost worker) fails that job only."""
    inputs = load_inputs(scenario)
    good = make_job("good", inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=30))
    broken = replace(good, label="broken", scenario=None)
    with distributed.Client(cluster) as client:
        outcomes = DaskEngine(client, 1).run([broken, good])
    assert isinstance(outcomes[0], Failure) and outcomes[0].kind == "engine"
    assert "AttributeError" in outcomes[0].message
    assert isinstance(outcomes[1], Plan) and outcomes[1].total_usd == pytest.approx(BASE_USD, rel=1e-9)


def test_job_carries_its_series_and_no_environment(
    scenario: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job is what a remote worker gets: the demand series travel in it (the planner reads them even
    once the file is gone), and nothing of this process's environment does."""
    monkeypatch.setenv("GPUPLAN_TEST_SECRET", "s3cr3t-7f1c")
    copy = tmp_path / "inputs"
    (copy / "scenarios").mkdir(parents=True)
    (copy / "series").mkdir()
    for name in ("catalog.csv", "series/demand.csv", "scenarios/scenario.yaml"):
        (copy / name).write_bytes((scenario.parent.parent / name).read_bytes())
    inputs = load_inputs(copy / "scenarios" / "scenario.yaml")
    job = make_job("base", inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=30))
    assert b"s3cr3t-7f1c" not in cloudpickle.dumps(job)
    assert set(job.series) == {"../series/demand.csv"} and job.up == 1
    (copy / "series" / "demand.csv").unlink()
    shipped = solve_job(job, ship_series=True)
    assert isinstance(shipped, Plan) and shipped.total_usd == pytest.approx(BASE_USD, rel=1e-9)
    local = solve_job(job)  # reading the scenario's own files: the series is gone
    assert isinstance(local, Failure) and local.kind == "input" and "demand series not found" in local.message


def test_unreachable_scheduler_is_a_quick_clear_error(scenario: Path, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on (bound, then released)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "wi"
    began = time.monotonic()
    result = CliRunner().invoke(
        app, ["whatif", str(scenario), "-q", "-o", str(out), "--vary", "demand=x2", "--cluster",
              f"tcp://127.0.0.1:{port}"],
    )  # fmt: skip
    assert time.monotonic() - began < 10
    assert result.exit_code == 2, result.output
    assert "--cluster" in result.output and f"127.0.0.1:{port}" in result.output
    assert not out.exists()


def test_breakeven_on_a_local_cluster_writes_what_the_in_process_run_writes(
    scenario: Path, tmp_path: Path
) -> None:
    """``--cluster local`` starts its own cluster; cloud-only and owning one node (``--nodes``) are
    independent plans and solve at once there."""
    runner = CliRunner()
    args = ["breakeven", str(scenario), "-q", "--nodes", "1", "--time-limit", "30"]
    here = runner.invoke(app, [*args, "-o", str(tmp_path / "here")])
    there = runner.invoke(app, [*args, "-o", str(tmp_path / "there"), "--cluster", "local", "--workers", "2"])
    assert here.exit_code == there.exit_code == 0, (here.output, there.output)
    _same_files(tmp_path / "here", tmp_path / "there")
    data = json.loads((tmp_path / "there" / "breakeven.json").read_text())
    assert list(data["plans"]) == ["cloud-only", "owning"]
    assert data["plans"]["cloud-only"]["total_usd"] == pytest.approx(BASE_USD, rel=1e-9)
    owning = pd.read_csv(tmp_path / "there" / "plans" / "owning" / "allocations.csv")
    # the sunk node (priced ~0) runs in every hour that has any demand: all 24 of them
    assert owning.loc[owning["tier"] == "owned", "period"].nunique() == 24


def test_futures_on_the_cluster_choose_and_price_as_in_process(cluster: Any, tmp_path: Path) -> None:
    """``gpuplan futures --cluster``: the futures' own plans and the chosen purchases' plan in each future
    (its fleet billed, a job of its own) solved on the workers; futures.json as the in-process run's."""
    from tests.integration.test_futures import SKEWED, _futures
    from tests.integration.test_futures import _scenario as newsvendor

    scenario = newsvendor(tmp_path)
    futures = _futures(tmp_path, SKEWED)
    runner = CliRunner()
    args = ["futures", str(scenario), str(futures), "-q", "--time-limit", "10"]
    here = runner.invoke(app, [*args, "-o", str(tmp_path / "here"), "--workers", "1"])
    there = runner.invoke(app, [*args, "-o", str(tmp_path / "there"), "--cluster", cluster.scheduler_address])
    assert here.exit_code == there.exit_code == 0, (here.output, there.output)
    left, right = (json.loads((tmp_path / side / "futures.json").read_text()) for side in ("here", "there"))
    assert _untimed(left) == _untimed(right)
    assert left["chosen"] == "futures master" and left["master"] is not None
    for name, _weight, _x in SKEWED:
        plans = [Plan.read(tmp_path / side / "chosen" / name) for side in ("here", "there")]
        assert plans[0].document.costs.total_usd == pytest.approx(plans[1].document.costs.total_usd, abs=0.01)
