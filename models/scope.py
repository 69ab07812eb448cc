"""Which offerings a scenario may buy: the catalog's offerings in the clouds and regions it allows, plus
its own servers (``colocation:``, priced by ``models.tco``). The planner's sets and ``gpuplan verify``
both start from this list, so they can never disagree on what was for sale.
"""

from __future__ import annotations

from models.catalog import Catalog, Offering
from models.scenario import Scenario
from models.tco import owned_offering

__all__ = ["scenario_offerings"]


def scenario_offerings(scenario: Scenario, catalog: Catalog) -> list[Offering]:
    """In catalog order, then the scenario's own servers if it has any."""
    result = []
    for offering in catalog:
        scope = scenario.clouds.get(offering.cloud)  # type: ignore[call-overload]
        if scope is None or (scope.regions is not None and offering.region not in scope.regions):
            continue
        result.append(offering)
    if scenario.colocation is not None:
        result.append(owned_offering(scenario.colocation))
    return result
