"""Training runs from the file sources of ``gpuplan demand`` (issue 40 point 1): an OpenCost export's job
labels and a usage CSV's ``job`` column group pods into gangs as the Prometheus runs are grouped, the
gangs' GPUs leave the services, runs.csv and scenario.yaml's training jobs come from them; a file
without a job says which label or column it looked for; chargeback charges the same with or without
the job and node columns.

The fleet written here, over two days from 2027-03-01T00:00Z: ``chat`` (namespace ml) holds 2 GPUs
throughout; ``pretrain`` (namespace research, a batch/v1 Job) two 8-GPU pods on two nodes from 05:00 to
11:30; ``finetune`` (a JobSet, whose pods also carry their child Job's ``job-name``) two 4-GPU pods on
one node from 20:00 to 04:00 the next day. The OpenCost export has two daily windows, so the pods
across midnight appear in both (one pod, one node: 8 GPUs, not 16).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from cli_output import assert_input_error
from test_chargeback import P5, book
from typer.testing import CliRunner

from models.chargeback import IdleRule
from models.usage import charge_usage, from_opencost, read_usage
from planner.cli.app import app
from planner.history.mapping import Mapping
from planner.history.queries import DEFAULT_GANG_LABELS
from planner.history.sources import read_opencost_history, read_usage_history

DAY1, DAY2 = "2027-03-01", "2027-03-02"
#: The runs as runs.csv must list them (the columns compared).
EXPECTED = [
    {"name": "pretrain", "namespace": "research", "team": "research", "start": f"{DAY1}T05:00:00Z",
     "end": f"{DAY1}T11:30:00Z", "hours": 6.5, "nodes": 2, "gpus_per_node": 8.0, "pods": 2,
     "truncated": False},
    {"name": "finetune", "namespace": "research", "team": "research", "start": f"{DAY1}T20:00:00Z",
     "end": f"{DAY2}T04:00:00Z", "hours": 8.0, "nodes": 1, "gpus_per_node": 8.0, "pods": 2,
     "truncated": False},
]  # fmt: skip
#: (nodes, GPUs per node, hours) of the runs: every training job of scenario.yaml is one of them.
SHAPES = {(2, 8, 6.5), (1, 8, 8.0)}
FAST = ["--horizon", "7d", "--paths", "20", "--futures", "0", "-q"]


def _pod(
    ns: str, project: str, start: str, end: str, gpus: float, node: str, pod: str, job: dict[str, str]
) -> dict[str, object]:
    hours = (pd.Timestamp(end) - pd.Timestamp(start)).total_seconds() / 3600
    labels = {"team": "assist" if ns == "ml" else "research", "project": project, **job}
    return {
        "start": start,
        "end": end,
        "gpuHours": gpus * hours,
        "properties": {"namespace": ns, "node": node, "pod": pod, "labels": labels},
    }


def opencost_export(tmp_path: Path, *, jobs: bool = True) -> Path:
    """The fleet (module docstring) as an OpenCost /allocation?aggregate=pod&step=1d export."""
    pretrain = {"batch.kubernetes.io/job-name": "pretrain", "job-name": "pretrain"} if jobs else {}
    finetune = {"jobset.sigs.k8s.io/jobset-name": "finetune", "job-name": "finetune-w-0"} if jobs else {}
    day1, day2 = f"{DAY1}T00:00:00Z", f"{DAY2}T00:00:00Z"
    first = {
        "ml/chat-0": _pod("ml", "chat", day1, day2, 2, "node-s", "chat-0", {}),
        "research/pretrain-0": _pod("research", "pretrain", f"{DAY1}T05:00:00Z", f"{DAY1}T11:30:00Z", 8,
                                    "node-a", "pretrain-0", pretrain),
        "research/pretrain-1": _pod("research", "pretrain", f"{DAY1}T05:00:00Z", f"{DAY1}T11:30:00Z", 8,
                                    "node-b", "pretrain-1", pretrain),
        "research/finetune-0": _pod("research", "finetune", f"{DAY1}T20:00:00Z", day2, 4, "node-c",
                                    "finetune-0", finetune),
        "research/finetune-1": _pod("research", "finetune", f"{DAY1}T20:00:00Z", day2, 4, "node-c",
                                    "finetune-1", finetune),
        "__idle__": {"gpuHours": 5.0},
    }  # fmt: skip
    second = {
        "ml/chat-0": _pod("ml", "chat", day2, f"{DAY2}T23:00:00Z", 2, "node-s", "chat-0", {}),
        "research/finetune-0": _pod("research", "finetune", day2, f"{DAY2}T04:00:00Z", 4, "node-c",
                                    "finetune-0", finetune),
        "research/finetune-1": _pod("research", "finetune", day2, f"{DAY2}T04:00:00Z", 4, "node-c",
                                    "finetune-1", finetune),
    }  # fmt: skip
    path = tmp_path / "opencost.json"
    path.write_text(json.dumps({"code": 200, "data": [first, second]}), encoding="utf-8")
    return path


def usage_csv(tmp_path: Path, *, jobs: bool = True) -> Path:
    """The fleet (module docstring) as a usage CSV with the job and node columns (one row a pod)."""
    r, d1, d2 = "research", DAY1, DAY2
    rows = [
        ("assist", "chat", "ml", f"{d1}T00:00:00Z", f"{d2}T23:00:00Z", 2, "", "node-s"),
        (r, "pretrain", r, f"{d1}T05:00:00Z", f"{d1}T11:30:00Z", 8, "pretrain", "node-a"),
        (r, "pretrain", r, f"{d1}T05:00:00Z", f"{d1}T11:30:00Z", 8, "pretrain", "node-b"),
        (r, "finetune", r, f"{d1}T20:00:00Z", f"{d2}T04:00:00Z", 4, "finetune", "node-c"),
        (r, "finetune", r, f"{d1}T20:00:00Z", f"{d2}T04:00:00Z", 4, "finetune", "node-c"),
    ]  # fmt: skip
    header = "team,project,namespace,start,end,gpus,offering,tier" + (",job,node" if jobs else "")
    lines = [header]
    for team, project, ns, start, end, gpus, job, node in rows:
        cells = [team, project, ns, start, end, str(gpus), P5, "on_demand"]
        lines.append(",".join(cells + ([job, node] if jobs else [])))
    path = tmp_path / "usage.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _runs_csv(out: Path) -> list[dict[str, object]]:
    frame = pd.read_csv(out / "history" / "runs.csv")
    return [
        {str(k): (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
        for r in frame.to_dict("records")
    ]


@pytest.mark.parametrize("source", ["--opencost", "--usage"])
def test_demand_from_a_file_writes_its_gangs_as_runs_and_training_jobs(tmp_path: Path, source: str) -> None:
    path = opencost_export(tmp_path) if source == "--opencost" else usage_csv(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["demand", source, str(path), "-o", str(out), *FAST])
    assert result.exit_code == 0, result.output
    assert sorted(_runs_csv(out), key=lambda r: str(r["start"])) == EXPECTED
    assert "no training runs" not in result.output
    history = json.loads((out / "history.json").read_text(encoding="utf-8"))
    assert history["runs"] == 2
    # the gangs' GPUs are runs, not services: chat is the only service, 2 GPUs at every hour
    assert sorted(history["services"]) == ["chat"]
    assert set(pd.read_csv(out / "history" / "chat.csv")["gpus"]) == {2.0}
    scenario = yaml.safe_load((out / "scenario.yaml").read_text(encoding="utf-8"))
    jobs = scenario.get("training") or []
    assert jobs, "the median sampled future of two runs a day holds runs in a week"
    assert {(j["nodes"], j["gpus_per_node"], float(j["hours"])) for j in jobs} <= SHAPES
    assert {j["team"] for j in jobs} == {"research"}
    assert {"research", "assist"} <= {t["name"] for t in scenario["teams"]}


def test_the_opencost_job_is_the_first_gang_label_and_spans_are_exact(tmp_path: Path) -> None:
    history = read_opencost_history(opencost_export(tmp_path), Mapping(), pd.Timedelta(hours=1))
    runs = {r.name: r for r in history.runs}
    assert sorted(runs) == ["finetune", "pretrain"]  # the JobSet's name, not its child Job's
    assert (runs["pretrain"].nodes, runs["pretrain"].gpus_per_node) == (2, 8.0)  # two nodes
    assert (runs["finetune"].nodes, runs["finetune"].gpus_per_node) == (1, 8.0)  # one node, two pods
    assert runs["pretrain"].hours == 6.5 and runs["finetune"].hours == 8.0
    # the labels looked for are the Prometheus gang labels, Kubernetes' current Job label among them
    assert "batch.kubernetes.io/job-name" in DEFAULT_GANG_LABELS


def test_a_job_name_used_again_later_is_a_second_run(tmp_path: Path) -> None:
    path = usage_csv(tmp_path)
    again = f"research,pretrain,research,{DAY2}T10:00:00Z,{DAY2}T12:00:00Z,8,{P5},on_demand,pretrain,node-a\n"
    path.write_text(path.read_text(encoding="utf-8") + again, encoding="utf-8")
    history = read_usage_history(path, Mapping(), pd.Timedelta(hours=1))
    pretrain = [(r.start.hour, r.nodes, r.hours) for r in history.runs if r.name == "pretrain"]
    assert pretrain == [(5, 2, 6.5), (10, 1, 2.0)]


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            "opencost",
            "no pod carries a job label (properties.labels: " + ", ".join(DEFAULT_GANG_LABELS) + ")",
        ),
        ("usage", "no row has a job (the usage CSV's job column)"),
    ],
)
def test_a_file_without_jobs_warns_which_label_or_column_it_looked_for(
    tmp_path: Path, source: str, said: str
) -> None:
    hour = pd.Timedelta(hours=1)
    if source == "opencost":
        history = read_opencost_history(opencost_export(tmp_path, jobs=False), Mapping(), hour)
    else:
        history = read_usage_history(usage_csv(tmp_path, jobs=False), Mapping(), hour)
    assert history.runs == ()
    assert sorted(history.services) == ["chat", "finetune", "pretrain"]  # every pod is service demand
    assert [w for w in history.warnings if "training runs" in w] == [
        f"{source}: no training runs were read: {said}; their GPUs are in the services"
    ]


def test_chargeback_reads_and_charges_the_same_with_or_without_jobs(tmp_path: Path) -> None:
    plan = book()  # teams prod and research, P5 on demand
    charged = []
    for jobs in (True, False):
        (tmp_path / str(jobs)).mkdir()
        path = usage_csv(tmp_path / str(jobs), jobs=jobs)
        path.write_text(path.read_text(encoding="utf-8").replace("\nassist,", "\nprod,"), encoding="utf-8")
        charged.append(charge_usage(plan, read_usage(path, plan), IdleRule.GUARANTEES, path))
    pd.testing.assert_frame_equal(charged[0].rows, charged[1].rows)
    assert charged[0].total_usd == charged[1].total_usd > 0
    # chargeback's OpenCost reading passes no job labels: its rows carry none
    rows = from_opencost(opencost_export(tmp_path), None, P5)
    assert {(r.job, r.node, r.pod) for r in rows} == {("", "", "")}


@pytest.mark.parametrize(
    ("change", "where", "problem"),
    [
        (("properties", "node", 5), "data[0].research/pretrain-0.properties.node", "must be a string"),
        (("properties", "labels", "batch.kubernetes.io/job-name", ["x"]),
         "data[0].research/pretrain-0.properties.labels.batch.kubernetes.io/job-name", "must be a string"),
        (("properties", "pod", "pre\u202etrain"), "data[0].research/pretrain-0, properties.pod",
         "control, formatting or separator character"),
    ],
)  # fmt: skip
def test_a_bad_job_node_or_pod_is_one_line_and_nothing_is_written(
    tmp_path: Path, change: tuple[object, ...], where: str, problem: str
) -> None:
    path = opencost_export(tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    holder = data["data"][0]["research/pretrain-0"]
    *keys, last, value = change
    for key in keys:
        holder = holder[key]
    holder[last] = value
    path.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["demand", "--opencost", str(path), "-o", str(out), *FAST])
    assert_input_error(result, where, problem)
    assert not out.exists()
    # chargeback reads no job, node or pod: the same file is still charged there
    assert len(from_opencost(path, None, P5)) == 8  # 5 + 3 allocations with GPUs


def test_a_bad_job_cell_names_its_row_and_column(tmp_path: Path) -> None:
    path = usage_csv(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace(",pretrain,node-b", ",pre\u202etrain,node-b"))
    result = CliRunner().invoke(app, ["demand", "--usage", str(path), "-o", str(tmp_path / "out"), *FAST])
    assert_input_error(result, "row 4, column job", "control, formatting or separator character")


def test_queries_gang_labels_choose_the_job_label_of_an_opencost_export(tmp_path: Path) -> None:
    """--queries' gang_labels apply to an OpenCost export too: with only job-name, the JobSet's child Job
    names the fine-tune run (finetune-w-0), not the JobSet."""
    queries = tmp_path / "queries.yaml"
    queries.write_text("gang_labels: [job-name]\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["demand", "--opencost", str(opencost_export(tmp_path)), "--queries", str(queries), "-o", str(out)]
    result = CliRunner().invoke(app, [*args, *FAST])
    assert result.exit_code == 0, result.output
    assert sorted(str(r["name"]) for r in _runs_csv(out)) == ["finetune-w-0", "pretrain"]
