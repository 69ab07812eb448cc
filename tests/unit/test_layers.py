"""The house in layers: the import contracts of pyproject.toml hold, and errors live one place per layer.

The contracts (``[tool.importlinter]``: cli -> operations -> outputs | verify | simulate -> planning ->
solvers | providers -> models, the sub-layers inside planning, optimize, operations, outputs and cli,
only operations talking to providers, and no import cycle at any depth) are checked by import-linter
itself, as ``.ci/run`` runs it; a synthetic tree shows the same kind of contract catching an upward import
and a cycle, so a contract that silently checked nothing would be noticed. The errors: every public
exception class of models/, planner/ and providers/ is defined in the errors module of its layer, and no
two share a name.
"""

from __future__ import annotations

import ast
import builtins
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("models", "planner", "providers")
ERROR_MODULES = {
    "models/errors.py",  # the root of every error, and the domain's
    "providers/errors.py",  # a cloud's
    "planner/operations/errors.py",  # the daemon's and the portal's
    "planner/history/errors.py",  # a history source (gpuplan demand's Prometheus) that could not be read
}
BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def _lint(root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [
        sys.executable,
        "-c",
        "from importlinter.cli import lint_imports_command; lint_imports_command()",
    ]
    return subprocess.run(
        [*command, "--no-cache", "--config", str(config)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_layer_contracts_hold() -> None:
    done = _lint(ROOT, ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
    assert done.stdout.count("KEPT") >= 8  # every contract of pyproject.toml was checked


def test_a_contract_of_the_same_kind_catches_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    """app.cli -> app.planning is allowed; app.planning.a -> app.cli is upward, and a <-> b is a cycle."""
    files = {
        "app/__init__.py": "",
        "app/cli/__init__.py": "",
        "app/cli/main.py": "import app.planning.a\n",
        "app/planning/__init__.py": "",
        "app/planning/a.py": "import app.cli.main\nimport app.planning.b\n",
        "app/planning/b.py": "import app.planning.a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    config = tmp_path / "contracts.toml"
    config.write_text(
        textwrap.dedent(
            """
            [tool.importlinter]
            root_packages = ["app"]

            [[tool.importlinter.contracts]]
            id = "layers"
            name = "layers"
            type = "layers"
            layers = ["app.cli", "app.planning"]

            [[tool.importlinter.contracts]]
            id = "acyclic"
            name = "acyclic"
            type = "acyclic_siblings"
            ancestors = ["app"]
            """
        ),
        encoding="utf-8",
    )
    done = _lint(tmp_path, config)
    assert done.returncode != 0
    assert "app.planning.a -> app.cli.main" in done.stdout
    assert "2 broken" in done.stdout


def _classes() -> list[tuple[str, ast.ClassDef]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [
                (str(path.relative_to(ROOT)), node)
                for node in ast.walk(tree)
                if isinstance(node, ast.ClassDef)
            ]
    return found


def _exception_classes() -> list[tuple[str, str]]:
    """(module path, class name) of every class that derives from an exception, ours or Python's."""
    classes = _classes()
    bases = {
        (path, node.name): {
            base.id if isinstance(base, ast.Name) else base.attr
            for base in node.bases
            if isinstance(base, ast.Name | ast.Attribute)
        }
        for path, node in classes
    }
    exceptions = set(BUILTIN_EXCEPTIONS)
    found: set[tuple[str, str]] = set()
    while True:
        more = {key for key, names in bases.items() if names & exceptions} - found
        if not more:
            return sorted(found)
        found |= more
        exceptions |= {name for _path, name in more}


def test_errors_live_in_the_errors_module_of_their_layer() -> None:
    exceptions = _exception_classes()
    assert len(exceptions) >= 15  # the scan sees them (ProviderError and its tree alone are 12)
    public = [(path, name) for path, name in exceptions if not name.startswith("_")]
    misplaced = [f"{path}: {name}" for path, name in public if path not in ERROR_MODULES]
    assert misplaced == []


def test_no_two_error_classes_share_a_name() -> None:
    names = [name for _path, name in _exception_classes()]
    assert sorted({name for name in names if names.count(name) > 1}) == []


@pytest.mark.parametrize("module", sorted(ERROR_MODULES))
def test_each_errors_module_draws_its_tree(module: str) -> None:
    """The tree of the module's classes is in its docstring (as httpx's ``_exceptions.py``)."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    defined = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    assert defined
    assert [name for name in defined if name not in doc] == []
