"""Every module of models/, planner/ and providers/ imports alone, as the first module of a fresh
interpreter.

An import cycle only shows when a module of the cycle is the first one imported (``import
planner.planning.baselines`` used to fail while ``import planner.planning.optimize`` worked), so no project
module may be loaded before the one under test. The modules are found by walking the package directories, so a
new module is checked without touching this file.

A fresh ``python -c "import X"`` per module spends almost all its time importing numpy, pandas, PuLP
and friends (~0.5 s each, ~50 modules). So the modules are checked in a few batches: each batch is a
fresh interpreter (``subprocess.run([sys.executable, "-c", RUNNER])``, PYTHONPATH the repo root) that
imports only those third-party libraries, then forks one child per module; a child starts with no
module of models/, planner/ or providers/ loaded (it checks) and imports its one module. Where
``os.fork`` does not exist, each module gets its own ``python -c "import X"`` instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("models", "planner", "providers")
BATCHES = 2
# third-party libraries the modules import at the top: loaded once per batch, before any fork; a library
# missing here is simply imported by the child
PRELOAD = (
    "numpy", "pandas", "pulp", "highspy", "pydantic", "yaml", "typer", "rich.console", "rich.table",
    "rich.progress", "jinja2", "markupsafe",
)  # fmt: skip

# argv: a JSON list of module names. Prints a JSON object: module -> None (imported) or its error.
RUNNER = r"""
import importlib, json, os, sys, traceback

packages, preload, names = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])

def ours(module):
    return module.split(".")[0] in packages

for library in preload:
    try:
        importlib.import_module(library)
    except ImportError:
        pass
loaded = sorted(m for m in sys.modules if ours(m))
if loaded:
    sys.exit(f"a preloaded library imported project modules: {loaded}")
sys.stdout.flush()
results = {}
for name in names:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        code, message = 0, b""
        try:
            importlib.import_module(name)
        except BaseException as exc:
            code = 1
            message = "".join(traceback.format_exception_only(type(exc), exc)).strip().encode()
        os.write(write, message)
        os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(child, 0)
    ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    results[name] = None if ok else (b"".join(chunks).decode(errors="replace") or f"status {status}")
print(json.dumps(results))
"""


def discover() -> list[str]:
    """Dotted names of every module and package under ``PACKAGES`` (``__init__.py`` -> the package)."""
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names.append(".".join(parts))
    return names


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _batch(names: list[str]) -> dict[str, str | None]:
    done = _python("-c", RUNNER, json.dumps(PACKAGES), json.dumps(PRELOAD), json.dumps(names))
    assert done.returncode == 0, f"the import runner failed:\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _alone(name: str) -> dict[str, str | None]:
    done = _python("-c", f"import {name}")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return {name: None if done.returncode == 0 else (lines[-1] if lines else f"exit {done.returncode}")}


def test_discovery_finds_the_packages_and_their_modules() -> None:
    names = discover()
    assert len(names) == len(set(names))
    for expected in ("models", "models.mig", "planner", "planner.planning.optimize",
                     "planner.planning.problem.sets", "planner.planning.mig.packing", "planner.cli.simulate",
                     "providers"):  # fmt: skip
        assert expected in names


def test_every_module_imports_alone() -> None:
    names = discover()
    if hasattr(os, "fork"):
        jobs, run = [names[k::BATCHES] for k in range(BATCHES)], _batch
    else:  # pragma: no cover - no fork (Windows): one interpreter per module
        jobs, run = names, _alone  # type: ignore[assignment]
    errors: dict[str, str | None] = {}
    with ThreadPoolExecutor(max_workers=BATCHES) as pool:
        for result in pool.map(run, jobs):
            errors.update(result)
    assert sorted(errors) == sorted(names)
    failed = {name: error for name, error in errors.items() if error is not None}
    assert not failed, f"{len(failed)} of {len(names)} modules do not import alone:\n" + "\n".join(
        f"  {name}: {error}" for name, error in sorted(failed.items())
    )
