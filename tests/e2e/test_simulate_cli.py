"""`gpuplan simulate` end to end through typer's CliRunner on ``simulate_app``: a tiny Philly trace replayed
under every policy (fleet given, and sized by the planner), the openb replay on tiny files, and bad input:
exit 2, one line naming the file or flag, nothing written.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner.cli.simulate import simulate_app

PHILLY = Path(__file__).resolve().parents[3] / "shared" / "data" / "philly-jobs-pollux" / "philly.csv"
HAS_OPENB = importlib.util.find_spec("planner.simulate.openb") is not None


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    rows = [
        ("2017-10-02 00:10:00", 3600.0, 1, "vc1"),
        ("2017-10-02 00:20:00", 7200.0, 8, "vc2"),
        ("2017-10-02 00:30:00", 5400.0, 16, "vc2"),
        ("2017-10-02 01:00:00", 1800.0, 2, "vc1"),
        ("2017-10-02 02:00:00", 600.0, 4, "vc1"),
        ("2017-10-02 03:00:00", 900.0, 1, "vc3"),
    ]
    frame = pd.DataFrame(rows, columns=["timestamp", "duration", "num_gpus", "cluster"])
    frame.insert(3, "gpu_time", frame["duration"] * frame["num_gpus"])
    path = tmp_path / "philly.csv"
    frame.to_csv(path, index=False)
    return path


def run(runner: CliRunner, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(simulate_app, list(args), catch_exceptions=False)


def test_philly_training_only_on_a_given_fleet(runner: CliRunner, trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "sim"
    result = run(
        runner, "philly", "--trace", str(trace), "--nodes", "2", "--days", "1", "--warmup-hours", "0",
        "--training-only", "-o", str(out), "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert data["schema"] == "gpuplan.simulate/v1"
    assert [r["policy"] for r in data["results"]] == ["naive", "best-fit", "workload-aware"]
    assert data["fleet"]["gpus"] == 16 and data["sizing"]["rule"] == "--nodes given"
    for row in data["summary"]:
        assert 0 <= row["utilization_pct"] <= row["allocation_pct"] <= 100
        assert row["completions"] == 6  # every job fits and finishes within the day
    assert data["week"]["jobs_in_week"] == {"training": 6}
    markdown = (out / "results.md").read_text()
    assert "| workload-aware |" in markdown and "alloc %" in markdown
    timeline = pd.read_csv(out / "timeline.csv")
    assert set(timeline["policy"]) == {"naive", "best-fit", "workload-aware"}
    assert (timeline["allocated_gpus"] <= 16 + 1e-9).all()
    assert "workload-aware" in result.output and "written to" in result.output


def test_philly_mixed_fleet_sized_by_the_planner(runner: CliRunner, trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "sim"
    result = run(
        runner, "philly", "--trace", str(trace), "--days", "1", "--warmup-hours", "0",
        "--policy", "naive,workload-aware", "-o", str(out), "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    sizing = data["sizing"]
    assert sizing["offering"] == "aws:us-east-1:p5.48xlarge"
    assert sizing["nodes"] == data["fleet"]["nodes"] >= 30  # the services alone need ~28 nodes at peak
    assert data["week"]["mixed"] and data["week"]["jobs_in_week"]["inference"] > 0
    assert "assistant" in data["quotas_gpus"] and "vc2" in data["quotas_gpus"]
    by_policy = {r["policy"]: r for r in data["results"]}
    assert by_policy["workload-aware"]["queue_delay_hours_by_kind"]["inference"]["mean_h"] == 0.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace", "missing.csv"], "missing.csv: file not found"),
        (["--policy", "fastest"], "--policy: unknown policy 'fastest'"),
        (["--nodes", "0"], "--nodes: must be at least 1"),
        (["--week-start", "yesterday"], "--week-start: not a date"),
        (["--week-start", "2019-01-01"], "--week-start: 2019-01-01 00:00 is outside the trace"),
        (["--offering", "aws:nowhere:p5"], "--offering: no offering 'aws:nowhere:p5'"),
        (["--days", "0"], "--days: must be at least 1"),
    ],
)
def test_philly_bad_input_exits_2_and_writes_nothing(
    runner: CliRunner, trace: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "sim"
    base = ["philly", "--trace", str(trace), "-o", str(out), "-q"]
    if "--trace" in args:
        base = ["philly", "-o", str(out), "-q"]
        args = ["--trace", str(tmp_path / args[1])]
    result = run(runner, *base, *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output
    assert not out.exists()


def test_philly_bad_trace_row_names_row_and_column(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-02 00:00:00,60,two,120,a\n")
    result = run(runner, "philly", "--trace", str(path), "--nodes", "1", "-o", str(tmp_path / "o"), "-q")
    assert result.exit_code == 2
    assert "bad.csv: row 2, column num_gpus: must be a whole number >= 1" in result.output


def test_philly_keeps_an_existing_directory_on_failure(
    runner: CliRunner, trace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sim"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = run(runner, "philly", "--trace", str(trace), "--policy", "nope", "-o", str(out), "-q")
    assert result.exit_code == 2
    assert (out / "keep.txt").read_text() == "mine"


@pytest.mark.skipif(not PHILLY.exists(), reason="Philly trace not in ../shared/data")
def test_philly_real_trace_one_day(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "sim"
    result = run(
        runner, "philly", "--trace", str(PHILLY), "--days", "1", "--warmup-hours", "12", "--training-only",
        "--policy", "naive,workload-aware", "-o", str(out), "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert data["week"]["week_start"].startswith("2017-")
    naive, aware = data["summary"]
    assert aware["delay_mean_h"] <= naive["delay_mean_h"]


# ---- openb ------------------------------------------------------------------------------------------------


@pytest.fixture
def openb_files(tmp_path: Path) -> tuple[Path, Path]:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,2,V100M16\nn2,64000,262144,4,V100M32\n"
    )
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        "p1,4000,8192,1,500\n"
        "p2,4000,8192,1,1000\n"
        "p3,8000,16384,2,1000\n"
        "p4,2000,4096,1,250\n"
    )
    return pods, nodes


@pytest.mark.skipif(not HAS_OPENB, reason="planner/simulate/openb.py not present")
def test_openb_writes_the_comparison(
    runner: CliRunner, openb_files: tuple[Path, Path], tmp_path: Path
) -> None:
    pods, nodes = openb_files
    out = tmp_path / "ob"
    result = run(
        runner, "openb", "--pods", str(pods), "--nodes", str(nodes), "--levels", "50:100:25",
        "-o", str(out), "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((out / "openb.json").read_text())
    assert data["capacity_gpus"] == 6
    assert [row["level_pct"] for row in data["unallocated_gpu_pct"]] == [50.0, 75.0, 100.0]
    assert "workload-aware" in data["unallocated_gpu_pct"][0]
    assert (out / "openb.md").read_text().startswith("# openb")


@pytest.mark.skipif(not HAS_OPENB, reason="planner/simulate/openb.py not present")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--levels", "a:b"], "--levels"),
        (["--policy", "fgd"], "--policy: unknown policy 'fgd'"),
    ],
)
def test_openb_bad_input_exits_2(
    runner: CliRunner, openb_files: tuple[Path, Path], tmp_path: Path, args: list[str], message: str
) -> None:
    pods, nodes = openb_files
    out = tmp_path / "ob"
    result = run(runner, "openb", "--pods", str(pods), "--nodes", str(nodes), "-o", str(out), "-q", *args)
    assert result.exit_code == 2 and message in result.output
    assert not out.exists()


@pytest.mark.skipif(not HAS_OPENB, reason="planner/simulate/openb.py not present")
def test_openb_missing_file_exits_2(
    runner: CliRunner, openb_files: tuple[Path, Path], tmp_path: Path
) -> None:
    _, nodes = openb_files
    result = run(runner, "openb", "--pods", str(tmp_path / "none.csv"), "--nodes", str(nodes), "-q")
    assert result.exit_code == 2 and "none.csv" in result.output and "file not found" in result.output


def test_philly_saturated_counts_the_trace_work_and_says_it_ran_dry(
    runner: CliRunner, trace: Path, tmp_path: Path
) -> None:
    """Six jobs cannot saturate 16 GPUs for a day: every policy completes all of them, so useful work is
    the trace's own GPU-hours (1x1 + 8x2 + 16x1.5 + 2x0.5 + 4x1/6 + 1x0.25 = 42.92 GPU-h in the day),
    and the run says it was not saturated. Without --nodes it is refused, nothing written."""
    out = tmp_path / "sat"
    result = run(
        runner, "philly", "--trace", str(trace), "--saturated", "--nodes", "2", "--days", "1",
        "--warmup-hours", "0", "-o", str(out), "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    work = 1 * 1 + 8 * 2 + 16 * 1.5 + 2 * 0.5 + 4 * (600 / 3600) + 1 * 0.25
    assert [row["policy"] for row in data["summary"]] == ["naive", "kubernetes", "best-fit", "workload-aware"]
    for row in data["summary"]:
        assert row["useful_gpu_h_per_day"] == pytest.approx(work, abs=0.05)
        assert row["completions"] == 6 and row["saturated"] is False
    assert data["ratio_workload_aware_over_kubernetes"] == pytest.approx(1.0)
    refused = run(runner, "philly", "--trace", str(trace), "--saturated", "-o", str(tmp_path / "no"), "-q")
    assert refused.exit_code == 2 and "--nodes" in refused.output
    assert not (tmp_path / "no").exists()


@pytest.mark.skipif(not HAS_OPENB, reason="planner/simulate/openb.py not present")
def test_openb_table_fits_80_columns_with_every_policy_named(
    runner: CliRunner, openb_files: tuple[Path, Path], tmp_path: Path
) -> None:
    """Issue 42: the table cut its own column names ("workload…", "best_bas…") in an 80-column terminal.
    Now every header is whole, every line fits, and the legend under the table names every column."""
    from planner.cli.simulate import OPENB_HEADERS
    from planner.simulate.openb import POLICIES

    pods, nodes = openb_files
    result = runner.invoke(
        simulate_app,
        ["openb", "--pods", str(pods), "--nodes", str(nodes), "--levels", "50:100:25",
         "-o", str(tmp_path / "ob"), "-q", "--policy", ",".join(POLICIES)],
        env={"COLUMNS": "80"}, terminal_width=80, catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "…" not in result.output
    assert max(len(line) for line in lines) <= 80
    columns = ["level_pct", *POLICIES, "best_baseline", "reduction_pct"]
    header = next(line for line in lines if line.split()[:1] == ["level"])
    assert header.split() == [OPENB_HEADERS[c][0] for c in columns]
    legend = " ".join(result.output.split("\n\n")[-1].split())  # the paragraph under the table
    for column in columns:
        short, meaning = OPENB_HEADERS[column]
        assert f"{short} = {meaning}" in legend
    assert all(policy in legend for policy in POLICIES)
