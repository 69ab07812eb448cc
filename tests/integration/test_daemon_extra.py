"""`gpuplan daemon --check` fails where `--once` would without the `[daemon]` extra (issue 42).

A config can be valid while the daemon's own libraries are missing (a plain ``pip install gpuplan``):
``--check`` said "valid" and ``--once`` then failed. Now both import the extra's modules first and name
the extra to install. A missing module is simulated the way Python's import system honours: a
``sys.modules`` entry of ``None`` makes ``import`` raise ImportError (no subprocess, no second venv).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from daemon_days import daemon_config
from typer.testing import CliRunner

from models.errors import InputError
from planner.cli import app
from planner.operations.daemon.config import DAEMON_EXTRA, check_extra


@pytest.mark.parametrize("module", sorted(DAEMON_EXTRA))
def test_a_missing_module_of_the_extra_is_named_with_the_extra(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_extra("sqlite:///daemon.db")  # all installed here: nothing to say
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(InputError) as caught:
        check_extra("sqlite:///daemon.db")
    assert DAEMON_EXTRA[module] in str(caught.value) and "gpuplan[daemon]" in str(caught.value)


def test_postgresql_needs_its_driver_and_sqlite_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    check_extra("sqlite:///daemon.db")
    with pytest.raises(InputError, match="psycopg2-binary"):
        check_extra("postgresql+psycopg2://u@127.0.0.1:5432/gpuplan")


def test_check_says_valid_only_with_the_extra(
    scenario: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = daemon_config(tmp_path, scenario)
    result = CliRunner().invoke(app, ["daemon", "--config", str(config), "--check"])
    assert result.exit_code == 0 and "valid" in result.output, result.output
    monkeypatch.setitem(sys.modules, "apscheduler", None)
    result = CliRunner().invoke(app, ["daemon", "--config", str(config), "--check"])
    assert result.exit_code == 2, result.output
    assert "valid" not in result.output and "pip install 'gpuplan[daemon]'" in result.output
