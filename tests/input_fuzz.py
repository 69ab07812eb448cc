"""Hostile inputs of every kind gpuplan reads, and what became of each (issue 36 point 6).

One seeded generator per input kind: scenario YAML, demand CSV, catalog CSV, ``--vary`` strings, sweep
files, daemon.yaml, provider settings YAML, usage CSV, OpenCost JSON and plan directories. Each case is a
valid base input with one mutation, the way a careless script or a hostile user gets it wrong: a value of
the wrong type, non-finite or absurd, a number in other digits or with separators, a boolean for a
number, a field misspelt, a name the plan does not have, a row duplicated or cut. A case the generator
*knows* is wrong (``Case.wrong``: a mutation no valid input can hold, such as NaN, a boolean where a
number goes or an unknown key) must be refused; any case may be refused, never with a traceback.

Each case is read by what the commands use (the reader functions, and the CLI in process where the
command is the reader), and classed:

- ``clean``: refused with a GpuplanError of one line (the file, the row or field, the problem);
- ``accepted``: read without complaint (right for an unmarked case);
- ``wrong-accepted``: a case marked wrong was read without complaint (a failure);
- ``traceback``: any other exception, or an error of several lines (a failure).

``tests/unit/test_fuzz_every_input.py`` runs a few hundred per kind in CI (the seed printed on failure);
``bench/fuzz_bench.py`` runs 20,000 and prints the counts per kind.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import random
import shutil
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import yaml

from models.errors import GpuplanError

__all__ = [
    "KINDS",
    "Case",
    "Outcome",
    "Workspace",
    "classify",
    "generate",
    "key_paths",
    "run_case",
    "value_at",
]

ROOT: Final = Path(__file__).resolve().parents[1]

#: Values no number field of any input can hold: each makes a case wrong when it replaces a number.
WRONG_NUMBERS: Final[tuple[Any, ...]] = (
    float("nan"), float("inf"), float("-inf"), True, False, "١٦", "１６", "1_000", "nan", "inf", "1e999",
)  # fmt: skip
#: Cells no numeric CSV column can hold.
WRONG_CELLS: Final[tuple[str, ...]] = (
    "nan",
    "NaN",
    "inf",
    "-inf",
    "TRUE",
    "false",
    "١٦",
    "1_000",
    "1e999",
    "0x10",
)
#: Values that may or may not be right where they land: only "no traceback" is asked of them.
ANY_VALUES: Final[tuple[Any, ...]] = (
    None, 0, -1, -0.5, 1e30, -1e30, 2**63, 0.1, "", " ", "\t", "x\x00y", "\u202e", "mars-1", "H10O",
    "1y", "spot", "2027-13-45", "2019-01-01T00:00:00Z", [], [""], [None], {}, [[[]]], "a" * 300,
)  # fmt: skip
ANY_CELLS: Final[tuple[str, ...]] = ("", " ", "-1", "0", "1e30", "x", "2019-01-01", "\x00", "9" * 40, "a,b")


@dataclass(frozen=True)
class Case:
    """One input to read: its files (name -> text, written into a fresh directory) and the reader."""

    kind: str
    what: str  # the mutation, for a failure's message
    wrong: bool  # the generator knows no valid input holds this: it must be refused
    files: dict[str, str]
    read: Callable[[Path], object]


@dataclass(frozen=True)
class Outcome:
    case: Case
    result: str  # clean, accepted, wrong-accepted, traceback
    detail: str = ""


def classify(case: Case, directory: Path) -> Outcome:
    """Write ``case``'s files into ``directory`` and read them; what came of it."""
    for name, text in case.files.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    try:
        case.read(directory)
    except GpuplanError as error:
        message = str(error)
        if "\n" in message.strip() or not message.strip():
            return Outcome(case, "traceback", f"an error of {message.count(chr(10)) + 1} lines: {message!r}")
        return Outcome(case, "clean", message)
    except SystemExit as exit_:  # a CLI reader: its exit code says it all
        code = exit_.code if isinstance(exit_.code, int) else 1
        if code == 0:
            return Outcome(case, "wrong-accepted" if case.wrong else "accepted")
        return Outcome(case, "clean" if code == 2 else "traceback", f"exit {code}")
    except Exception:
        return Outcome(case, "traceback", traceback.format_exc(limit=6))
    return Outcome(case, "wrong-accepted" if case.wrong else "accepted")


def run_case(case: Case, scratch: Path, index: int) -> Outcome:
    directory = scratch / f"{case.kind}-{index}"
    directory.mkdir(parents=True)
    try:
        return classify(case, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# ----------------------------------------------------------------------------------------------------------
# mutations of parsed documents (YAML, JSON) and of CSV text


def key_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a parsed YAML or JSON tree (containers and leaves)."""
    found: list[tuple[Any, ...]] = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += key_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += key_paths(value, (*prefix, index))
    return found


def value_at(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(node: Any, path: tuple[Any, ...], value: Any) -> None:
    value_at(node, path[:-1])[path[-1]] = value


def mutate_document(
    rng: random.Random,
    base: Any,
    *,
    strict_keys: bool = True,
    skip: Callable[[tuple[Any, ...]], bool] | None = None,
) -> tuple[Any, str, bool]:
    """``base`` with one mutation; what it was and whether it is certainly wrong. A number replaced by a
    :data:`WRONG_NUMBERS` value is wrong; an unknown key added to a mapping is wrong where the reader
    refuses unknown keys (``strict_keys``); anything else is only asked not to crash the reader."""
    doc = copy.deepcopy(base)
    paths = [p for p in key_paths(doc) if skip is None or not skip(p)]
    path = rng.choice(paths)
    current = value_at(doc, path)
    roll = rng.random()
    if isinstance(current, int | float) and not isinstance(current, bool) and roll < 0.6:
        value = rng.choice(WRONG_NUMBERS)
        _set(doc, path, value)
        return doc, f"{_dotted(path)} = {value!r}", True
    if isinstance(current, dict) and roll < 0.8 and strict_keys:
        key = rng.choice(["bogus", "replicaz", "Team", "gpus_", "__class__"])
        if key not in current:
            current[key] = 1
            return doc, f"{_dotted(path)} gains the unknown key {key!r}", True
    if roll < 0.9 and isinstance(value_at(doc, path[:-1]), dict):
        del value_at(doc, path[:-1])[path[-1]]
        return doc, f"{_dotted(path)} deleted", False
    value = rng.choice(ANY_VALUES)
    _set(doc, path, value)
    return doc, f"{_dotted(path)} = {value!r}", False


def _dotted(path: tuple[Any, ...]) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path) or "(root)"


def mutate_csv(
    rng: random.Random, text: str, numeric: set[str], *, names: dict[str, set[str]] | None = None
) -> tuple[str, str, bool]:
    """CSV ``text`` with one mutation. A :data:`WRONG_CELLS` value in a ``numeric`` column is wrong; a
    name column (``names``: column -> the names the reader knows) given a name it does not know is wrong;
    a duplicated row, a cut row or any other cell only must not crash the reader."""
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    roll = rng.random()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if roll < 0.1 and body:
        r = rng.randrange(len(body))
        body.insert(r, list(body[r]))
        writer.writerows([header, *body])
        return out.getvalue(), f"row {r + 2} twice", False
    if roll < 0.15 and body:
        r = rng.randrange(len(body))
        body[r] = body[r][: rng.randrange(len(body[r]))]
        writer.writerows([header, *body])
        return out.getvalue(), f"row {r + 2} cut", False
    r = rng.randrange(len(body))
    columns = [c for c in range(len(header)) if c < len(body[r])]
    c = rng.choice(columns)
    column = header[c]
    wrong = False
    if column in numeric and roll < 0.7:
        value, wrong = rng.choice(WRONG_CELLS), True
    elif names and column in names and roll < 0.85:
        value = rng.choice(["nobody", "ghost-team", "aws:mars-1:p9.huge", "free_lunch"])
        wrong = value not in names[column]
    else:
        value = rng.choice(ANY_CELLS)
    body[r][c] = value
    writer.writerows([header, *body])
    return out.getvalue(), f"row {r + 2}, column {column} = {value!r}", wrong


# ----------------------------------------------------------------------------------------------------------
# the kinds


@dataclass
class Workspace:
    """What the generators build on: a scratch directory and a planned week (a plan directory)."""

    scratch: Path
    plan_dir: Path
    _cache: dict[str, Any] = field(default_factory=dict)

    def plan_files(self) -> dict[str, str]:
        if "plan" not in self._cache:
            self._cache["plan"] = {
                p.name: p.read_text(encoding="utf-8") for p in sorted(self.plan_dir.iterdir()) if p.is_file()
            }
        return dict(self._cache["plan"])

    def book(self) -> Any:
        if "book" not in self._cache:
            from models.chargeback import Book

            self._cache["book"] = Book.from_plan(self.plan())
        return self._cache["book"]

    def plan(self) -> Any:
        if "plan_obj" not in self._cache:
            from models.plan import Plan

            self._cache["plan_obj"] = Plan.read(self.plan_dir)
        return self._cache["plan_obj"]


def _scenarios() -> dict[str, Any]:
    return {
        p.name: yaml.safe_load(p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "scenarios").glob("*.yaml"))
    }


_SCENARIOS: dict[str, Any] = {}


def _validate(path: Path, variations: list[str] | None = None) -> None:
    """What ``gpuplan validate`` reads (and what ``plan`` reads first): the scenario, its catalog, its
    demand series, its runs and the pre-solve checks; ``variations`` as ``--vary`` gives them."""
    from models.inputs import load_inputs
    from models.variation import parse_all
    from models.workloads import service_demand, training_runs
    from planner.planning.problem.checks import check_inputs

    inputs = load_inputs(path, parse_all(variations or [], "--vary"))
    for service in inputs.scenario.inference:
        service_demand(inputs.scenario, service, path.parent)
    training_runs(inputs.scenario)
    check_inputs(inputs.scenario, inputs.catalog)


def scenario_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    if not _SCENARIOS:
        _SCENARIOS.update(_scenarios())
    while True:
        name = rng.choice(sorted(_SCENARIOS))
        doc, what, wrong = mutate_document(rng, _SCENARIOS[name])
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True) if not isinstance(doc, str) else doc
        yield Case("scenario", f"{name}: {what}", wrong, {"s.yaml": text}, lambda d: _validate(d / "s.yaml"))


_DEMAND: Final = "hour,replicas\n" + "".join(f"{h},{10 + (h * 7) % 13}\n" for h in range(0, 168, 6))


def demand_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    if not _SCENARIOS:
        _SCENARIOS.update(_scenarios())
    base = copy.deepcopy(_SCENARIOS["mixed-fleet.yaml"])
    base["inference"][0]["replicas"] = {"csv": "demand.csv"}
    scenario = yaml.safe_dump(base, sort_keys=False)
    while True:
        text, what, wrong = mutate_csv(rng, _DEMAND, {"hour", "replicas"})
        files = {"s.yaml": scenario, "demand.csv": text}
        yield Case("demand_csv", what, wrong, files, lambda d: _validate(d / "s.yaml"))


def catalog_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    from models.catalog import EMBEDDED_CATALOG_PATH

    text = EMBEDDED_CATALOG_PATH.read_text(encoding="utf-8")
    header = next(csv.reader(io.StringIO(text)))
    numeric = {c for c in header if c.endswith(("_usd_h", "_gb", "_gbps", "_per_node", "_per_hour"))}
    numeric |= {c for c in header if c in ("gpus_per_node", "gpu_memory_gb", "vcpus", "memory_gb")}
    while True:
        mutated, what, wrong = mutate_csv(rng, text, numeric)

        def read(d: Path) -> None:
            from models.catalog import Catalog

            Catalog.load(d / "catalog.csv")

        yield Case("catalog_csv", what, wrong, {"catalog.csv": mutated}, read)


_VARY_BASES: Final = (
    "demand=x1.3", "spot_price=+50%", "capacity:H100=-50%", "colocation.max_nodes=16", "on_demand_price=x0.9",
    "spot_interruptions=+20%", "demand:chat-70b=x2",
)  # fmt: skip


def vary_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    if not _SCENARIOS:
        _SCENARIOS.update(_scenarios())
    scenario = yaml.safe_dump(_SCENARIOS["mixed-fleet.yaml"], sort_keys=False)
    while True:
        base = rng.choice(_VARY_BASES)
        key, _, value = base.partition("=")
        roll = rng.random()
        if roll < 0.5:
            number = rng.choice(["nan", "inf", "1e308", "1e999", "١٦", "1_000", "true", "-inf"])
            op = value[0] if value[0] in "x+-" else ""
            text, wrong = f"{key}={op}{number}{'%' if value.endswith('%') else ''}", number != "1e308"
        elif roll < 0.8:
            cut = rng.randrange(len(base) + 1)
            text, wrong = (
                base[:cut] + rng.choice(["", "=", "%", "x", ":", " ", "\x00", "é"]) + base[cut:],
                False,
            )
        else:
            text, wrong = (
                rng.choice(["", "=", "demand", "=x2", "nonsense=1", "demand=x", "demand==x2"]),
                False,
            )
        yield Case(
            "vary", repr(text), wrong, {"s.yaml": scenario}, lambda d, t=text: _validate(d / "s.yaml", [t])
        )


def sweep_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    base = {"variants": [{"name": "base", "vary": []}, {"name": "spot up", "vary": ["spot_price=+50%"]},
                         {"name": "demand up", "vary": ["demand=x1.3", "capacity:H100=-50%"]}]}  # fmt: skip
    while True:
        doc, what, wrong = mutate_document(rng, base)

        def read(d: Path) -> None:
            from planner.planning.whatif import load_sweep

            load_sweep(d / "sweep.yaml")

        yield Case("sweep", what, wrong, {"sweep.yaml": yaml.safe_dump(doc, allow_unicode=True)}, read)


def daemon_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    if not _SCENARIOS:
        _SCENARIOS.update(_scenarios())
    scenario = yaml.safe_dump(_SCENARIOS["mixed-fleet.yaml"], sort_keys=False)
    base = {
        "scenario": "s.yaml",
        "provider": {"cloud": "sim", "sim_state": "sim.json"},
        "apply": False,
        "database": "sqlite:///daemon.db",
        "jobs": {
            "refresh_prices": {"every_minutes": 60},
            "replan": {"every_hours": 24, "price_change": 0.1},
            "reconcile": {"every_minutes": 5},
            "watch_interruptions": {"every_minutes": 0.5},
            "commitment_expiry": {"every_hours": 24, "warn_days": 30},
        },
        "backoff": {"first_minutes": 5, "max_minutes": 60},
        "lead_hours": 2,
        "metrics": {"host": "127.0.0.1", "port": 9464, "enabled": False},
    }
    while True:
        doc, what, wrong = mutate_document(rng, base)

        def read(d: Path) -> None:
            from planner.operations.daemon.config import load_config

            load_config(d / "daemon.yaml")

        files = {"daemon.yaml": yaml.safe_dump(doc, allow_unicode=True), "s.yaml": scenario}
        yield Case("daemon_config", what, wrong, files, read)


_PROVIDERS: Final = {
    "aws": {"image_id": "ami-0123456789abcdef0", "subnets": {"us-east-1": ["subnet-0a1b2c3d"]}},
    "gcp": {"project": "fleet-project", "zones": {"us-central1": "us-central1-a"}},
    "azure": {
        "subscription_id": "00000000-0000-0000-0000-000000000000",
        "resource_group": "gpu-fleet",
        "subnet_id": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/net/providers/"
        "Microsoft.Network/virtualNetworks/v/subnets/gpu",
        "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 gpuplan@test",
    },
}


def provider_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    while True:
        doc, what, wrong = mutate_document(rng, _PROVIDERS)

        def read(d: Path) -> None:
            from providers.config import load_provider_config

            load_provider_config(d / "providers.yaml")  # every section, as the commands read it

        yield Case(
            "provider_config", what, wrong, {"providers.yaml": yaml.safe_dump(doc, allow_unicode=True)}, read
        )


def _chargeback(ws: Workspace, kind: str, name: str) -> Callable[[Path], None]:
    """What ``gpuplan chargeback --usage/--opencost`` reads and computes, up to the files it writes."""

    def read(d: Path) -> None:
        from models.chargeback import IdleRule
        from models.usage import charge_usage, from_opencost, read_usage

        book = ws.book()
        path = d / name
        rows = read_usage(path, book) if kind == "usage" else from_opencost(path, book, None)
        charge_usage(book, rows, IdleRule.GUARANTEES, path, None)

    return read


def _usage_base(ws: Workspace) -> tuple[str, dict[str, set[str]]]:
    plan = ws.plan()
    rows = plan.allocations
    doc = plan.document
    start = doc.horizon.start
    echoed = doc.inputs.model_dump(mode="json").get("teams") or []
    teams = sorted({str(t["name"]) for t in echoed}) or sorted(set(rows.team))
    lines = ["team,project,namespace,start,end,gpus,offering,tier"]
    used = rows[(rows.nodes > 0) & (rows.tier != "owned")].head(6)
    for i, row in enumerate(used.itertuples()):
        team = row.team if row.team in teams else teams[0]
        end = start + timedelta(hours=3 + i)
        lines.append(
            f"{team},p{i},ns{i},{start.isoformat()},{end.isoformat()},{1 + i % 4},{row.offering},{row.tier}"
        )
    names = {"team": set(teams), "offering": set(rows.offering), "tier": set(rows.tier)}
    return "\n".join(lines) + "\n", names


def usage_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    text, names = _usage_base(ws)
    read = _chargeback(ws, "usage", "usage.csv")
    while True:
        mutated, what, wrong = mutate_csv(rng, text, {"gpus"}, names=names)
        yield Case("usage_csv", what, wrong, {"usage.csv": mutated}, read)


def opencost_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    text, _ = _usage_base(ws)
    records = list(csv.DictReader(io.StringIO(text)))
    allocations = {}
    for i, r in enumerate(records):
        allocations[f"pod-{i}"] = {
            "name": f"pod-{i}",
            "start": r["start"],
            "end": r["end"],
            "gpuHours": float(r["gpus"]) * 3,
            "properties": {
                "namespace": r["namespace"],
                "labels": {
                    "team": r["team"],
                    "gpuplan.io/offering": r["offering"],
                    "gpuplan.io/tier": r["tier"],
                },
            },
        }
    base = {"code": 200, "data": [allocations]}
    read = _chargeback(ws, "opencost", "opencost.json")
    while True:
        doc, what, wrong = mutate_document(rng, base, strict_keys=False)
        yield Case("opencost_json", what, wrong, {"opencost.json": json.dumps(doc)}, read)


def plan_dir_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    files = ws.plan_files()
    document = json.loads(files["plan.json"])
    allocations = files["allocations.csv"]
    header = next(csv.reader(io.StringIO(allocations)))
    numeric = {"period", "nodes", "gpus", "cost_usd"} & set(header)

    def read(d: Path) -> None:
        from models.plan import Plan

        Plan.read(d)
        commands_on(d)  # what Plan.read accepts, every command that reads a plan must take or refuse cleanly

    while True:
        if rng.random() < 0.5:  # plan.json may gain fields in later versions: an unknown key is no error
            # (the MIG section echoes mig-parted's own config, which gpuplan writes but does not read back)
            doc, what, wrong = mutate_document(rng, document, strict_keys=False, skip=_mig_parted)
            yield Case("plan_dir", f"plan.json {what}", wrong,
                       {**files, "plan.json": json.dumps(doc)}, read)  # fmt: skip
        else:
            text, what, wrong = mutate_csv(rng, allocations, numeric)
            yield Case("plan_dir", f"allocations.csv {what}", wrong, {**files, "allocations.csv": text}, read)


#: The commands that read a plan directory, run on every fuzzed directory ``Plan.read`` accepts: a name
#: the plan check misses crashes one of them (``mig.pools[].offering`` once crashed ``gpuplan k8s``).
PLAN_COMMANDS = ("report", "k8s", "terraform", "chargeback", "karpenter")


def commands_on(d: Path) -> None:
    """Run :data:`PLAN_COMMANDS` on the plan directory ``d`` in this process. A command's traceback is
    raised as it is; its exit 2 (a clean refusal) as ``SystemExit(2)``, any other failing exit as its code,
    so :func:`classify` counts them as the readers' own outcomes."""
    from typer.testing import CliRunner

    from planner.cli.app import app

    runner = CliRunner()
    for name in PLAN_COMMANDS:
        args = [name, str(d)] if name == "report" else [name, str(d), "-o", str(d / f"out-{name}")]
        result = runner.invoke(app, args)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        if result.exit_code != 0:
            raise SystemExit(result.exit_code)


def _mig_parted(path: tuple[Any, ...]) -> bool:
    return path[:2] == ("mig", "config")


#: Input kind -> its generator (an endless stream of cases).
_OVERLAY: Final = {
    "discounts": [
        {
            "cloud": "aws",
            "percent": 8,
            "tiers": ["on_demand", "reserved_3y"],
            "note": "EDP",
            "as_of": "2026-01-15",
        },
        {"cloud": "gcp", "percent": 12.5},
    ],
    "rates": [
        {"offering": "aws:us-east-2:p5.48xlarge", "tier": "reserved_3y", "usd_h": 21.1, "note": "PPA"},
        {"offering": "azure:eastus:Standard_ND96isr_H100_v5", "tier": "on_demand", "usd_h": 90},
    ],
}


def overlay_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    """A pricing overlay (``--prices``) applied to the embedded catalog, as plan and validate do."""
    while True:
        doc, what, wrong = mutate_document(rng, _OVERLAY)

        def read(d: Path) -> None:
            from models.catalog import Catalog
            from models.overlay import apply_overlay, load_overlay

            apply_overlay(Catalog.load(None), load_overlay(d / "prices.yaml"), "prices.yaml")

        yield Case(
            "pricing_overlay", what, wrong, {"prices.yaml": yaml.safe_dump(doc, allow_unicode=True)}, read
        )


_TERMS: Final = "\n".join(
    [
        "offering,kind,term_years,offering_class,payment,usd_h,upfront_usd,effective_usd_h,zone,source,as_of",
        "aws:us-east-1:p5.48xlarge,reserved-instance,1,standard,partial-upfront,17.3376,151888.0,34.6764,,"
        "AWS Price List,2026-12-01T00:00:00Z",
        "aws:us-east-1:p5.48xlarge,savings-plan-ec2-instance,3,,no-upfront,23.77728,0,23.77728,,"
        "Savings Plans rates,2026-12-01T00:00:00Z",
        "aws:us-east-1:p5.48xlarge,spot-zone,,,,18.2,0,18.2,us-east-1a,DescribeSpotPriceHistory,2026-12-01T00:00:00Z",
        "gcp:us-central1:a3-highgpu-8g,committed-use,3,resource-based,no-upfront,38.56849,0,38.56849,,"
        "Cloud Billing Catalog,2026-12-01T00:00:00Z",
        "",
    ]
)


def terms_cases(rng: random.Random, ws: Workspace) -> Iterator[Case]:
    """The terms file a fetch writes beside its catalog, read back."""
    numeric = {"usd_h", "upfront_usd", "effective_usd_h"}
    while True:
        mutated, what, wrong = mutate_csv(rng, _TERMS, numeric)

        def read(d: Path) -> None:
            from models.priceterms import read_terms

            read_terms(d / "catalog.terms.csv")

        yield Case("terms_csv", what, wrong, {"catalog.terms.csv": mutated}, read)


KINDS: Final[dict[str, Callable[[random.Random, Workspace], Iterator[Case]]]] = {
    "scenario": scenario_cases,
    "demand_csv": demand_cases,
    "catalog_csv": catalog_cases,
    "vary": vary_cases,
    "sweep": sweep_cases,
    "daemon_config": daemon_cases,
    "provider_config": provider_cases,
    "usage_csv": usage_cases,
    "opencost_json": opencost_cases,
    "plan_dir": plan_dir_cases,
    "pricing_overlay": overlay_cases,
    "terms_csv": terms_cases,
}


def generate(kind: str, seed: int, count: int, ws: Workspace) -> Iterator[Case]:
    """``count`` cases of ``kind`` from ``seed`` (the same seed, the same cases)."""
    rng = random.Random(f"{kind}:{seed}")
    stream = KINDS[kind](rng, ws)
    for _ in range(count):
        yield next(stream)


def tally(outcomes: list[Outcome]) -> dict[str, Counter[str]]:
    """Per kind: how many cases, and how many of each result."""
    table: dict[str, Counter[str]] = {}
    for outcome in outcomes:
        row = table.setdefault(outcome.case.kind, Counter())
        row["cases"] += 1
        row[outcome.result] += 1
        row["wrong"] += outcome.case.wrong
    return table
