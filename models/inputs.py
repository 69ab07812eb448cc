"""A scenario file read into what the planner needs: the scenario, its catalog, its directory.

Every command reads its inputs here, so a scenario's ``adjust:`` list (``models/variation.py``) is applied
the same way by ``plan``, ``validate``, ``whatif`` and ``breakeven``, and extra what-if changes apply on top.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from models import scenario as scenario_io
from models.catalog import Catalog
from models.errors import InputError
from models.scenario import Scenario
from models.variation import Variation, apply_variations, parse_all


@dataclass(frozen=True)
class Inputs:
    scenario: Scenario
    catalog: Catalog
    base_dir: Path  # where relative paths in the scenario (catalog, demand CSVs) are resolved


def load_catalog(reference: str, scenario_path: Path) -> Catalog:
    """``embedded`` or a catalog CSV path relative to the scenario file."""
    if reference == "embedded":
        return Catalog.load(None)
    if not reference.strip():
        raise InputError(scenario_path, "catalog", "empty: give 'embedded' or the path of a catalog CSV")
    path = Path(reference)
    if not path.is_absolute():
        path = scenario_path.parent / path
    return Catalog.load(path)


def load_inputs(
    path: str | Path,
    variations: Iterable[Variation] = (),
    reference_nodes: Mapping[str, float] | None = None,
) -> Inputs:
    """Read and validate ``path``, then apply its ``adjust:`` list and ``variations``, in that order."""
    path = Path(path)
    scenario = scenario_io.load(path)
    catalog = load_catalog(scenario.catalog, path)
    try:
        own = parse_all(scenario.adjust, "adjust")
    except InputError as error:
        raise InputError(path, error.where, error.problem) from None
    try:
        if own:
            scenario, catalog = apply_variations(scenario, catalog, own, reference_nodes, where="adjust")
        variations = list(variations)
        if variations:
            scenario, catalog = apply_variations(scenario, catalog, variations, reference_nodes)
    except InputError as error:
        raise InputError(path, error.where, error.problem) from None
    return Inputs(scenario, catalog, path.parent)
