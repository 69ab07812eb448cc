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
from models.overlay import PricingOverlay, apply_overlay, load_overlay
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
    prices: Path | None = None,
) -> Inputs:
    """Read and validate ``path``; apply its ``pricing:`` overlay, then the ``prices`` overlay file
    (``--prices``), then its ``adjust:`` list and ``variations``, in that order."""
    path = Path(path)
    scenario = scenario_io.load(path)
    catalog = load_catalog(scenario.catalog, path)
    catalog = _with_overlays(scenario, catalog, path, prices)
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


def _with_overlays(scenario: Scenario, catalog: Catalog, path: Path, prices: Path | None) -> Catalog:
    """The catalog with the scenario's ``pricing:`` and the ``--prices`` file applied (models/overlay.py)."""
    if isinstance(scenario.pricing, str):
        overlay_path = Path(scenario.pricing)
        if not overlay_path.is_absolute():
            overlay_path = path.parent / overlay_path
        catalog = _applied(catalog, load_overlay(overlay_path), str(overlay_path), overlay_path)
    elif scenario.pricing is not None:
        catalog = _applied(catalog, scenario.pricing, f"{path} pricing", path, "pricing.")
    if prices is not None:
        catalog = _applied(catalog, load_overlay(prices), str(prices), prices)
    return catalog


def _applied(catalog: Catalog, overlay: PricingOverlay, label: str, file: Path, where: str = "") -> Catalog:
    try:
        return apply_overlay(catalog, overlay, label, where)
    except InputError as error:  # name the file the overlay is in
        raise InputError(file, error.where, error.problem) from None
