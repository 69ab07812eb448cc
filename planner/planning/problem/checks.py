"""What a scenario asks of its catalog, checked before any solve: names that exist, work that can run.

The fields of a scenario are validated where they are read (``models/scenario.py``); what they mean
against the catalog in use is checked here, once, by ``gpuplan validate`` and at the start of every
plan (``planner.planning.optimize.optimize``), so the two always agree: whatever ``validate`` accepts,
``plan``
plans.

Errors (``InputError``, exit 2, naming the field): a region, cloud or GPU model the catalog does not
have (with the closest names it does have), a commitment held on an offering the scenario cannot use,
a service or a training job that no offering in the allowed clouds and regions can run, a training
window shorter than its run, a team guarantee that nothing the team could use can back. None of these
can be what the user meant, and each would otherwise be a silently smaller or dearer plan.

Warnings (printed by both commands, and written into ``plan.json``'s ``warnings``): what a user may
mean, typically in a what-if, whose effect the plan then shows in ``unserved`` with its reason: a gang
larger than every eligible offering's ``max_nodes``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Sequence

from models.catalog import Catalog, Offering
from models.errors import InputError
from models.scenario import InferenceService, Scenario, TrainingJob
from models.scope import scenario_offerings
from models.tiers import TERM_TIER
from models.workloads import training_runs
from planner.planning.problem.purchases import held_columns, savings_plan_groups
from planner.planning.problem.sets import (
    replicas_per_node,
    runs_gang,
    why_no_offering,
    why_no_service_offering,
)

__all__ = ["check_inputs"]


def check_inputs(scenario: Scenario, catalog: Catalog) -> list[str]:
    """Raise InputError for the first problem of the module docstring; return the warnings."""
    offerings = scenario_offerings(scenario, catalog)
    _check_scope(scenario, catalog, offerings)
    _check_gpu_models(scenario, catalog)
    held_columns(scenario, offerings, catalog)  # held commitments: offerings in scope, a rate, max_nodes
    warnings: list[str] = list(catalog.warnings)  # implausible but possible prices: said in the plan too
    _groups, _held, buyable = savings_plan_groups(scenario, catalog, offerings)
    if scenario.purchase.savings_plans and not buyable:
        kinds = ", ".join(scenario.purchase.savings_plans)
        terms = ", ".join(str(term) for term in scenario.purchase.terms) or "none"
        warnings.append(
            f"purchase.savings_plans ({kinds}): the catalog has no savings-plan rates on the terms bought "
            f"({terms}) for the scenario's offerings, so none can be bought; savings-plan rates come from "
            "the catalog's terms file (gpuplan catalog fetch writes it)"
        )
    for i, service in enumerate(scenario.inference):
        if not any(replicas_per_node(service, o) > 0 for o in offerings):
            raise InputError(None, f"inference[{i}]", f"{service.name}: {why_no_service_offering(service)}")
    p = scenario.horizon.period_hours
    runs = training_runs(scenario)
    for k, job in enumerate(scenario.training):
        eligible = [o for o in offerings if runs_gang(o, job)]
        if not eligible:
            raise InputError(None, f"training[{k}]", f"{job.name}: {why_no_offering(job, offerings)}")
        needed = math.ceil(job.hours / p - 1e-9)
        for run in (r for r in runs if r.job is job):
            if run.window_periods() < needed:
                where = "deadline" if job.deadline or job.earliest_start else "hours"
                raise InputError(
                    None,
                    f"training[{k}].{where}",
                    f"{job.name}: the window of run {run.run} ({run.window_periods() * p:g} h in whole {p} h "
                    f"periods, {run.window_start_hour:g}-{run.window_end_hour:g} h into the horizon) is "
                    f"shorter than the run ({job.hours:g} h)",
                )
        roomy = [o for o in eligible if o.max_nodes is None or o.max_nodes >= job.nodes]
        if not roomy:
            most = max(o.max_nodes or 0 for o in eligible)
            warnings.append(
                f"training[{k}] {job.name}: a gang of {job.nodes} nodes, but every eligible offering allows "
                f"at most {most} (max_nodes): it will be unserved"
            )
    _check_guarantees(scenario, offerings)
    return warnings


def _check_scope(scenario: Scenario, catalog: Catalog, offerings: list[Offering]) -> None:
    """Every region asked for exists in the catalog for its cloud, a cloud named explicitly has offerings,
    and some offering is allowed at all."""
    by_cloud: dict[str, set[str]] = {}
    for offering in catalog:
        by_cloud.setdefault(offering.cloud, set()).add(offering.region)
    explicit = "clouds" in scenario.model_fields_set  # the default names every cloud, in any catalog
    for cloud, scope in scenario.clouds.items():
        regions = by_cloud.get(cloud, set())
        if not regions and (explicit or scope.regions):
            raise InputError(
                None, f"clouds.{cloud}", f"the catalog ({catalog.source}) has no {cloud} offering"
            )
        for r, region in enumerate(scope.regions or []):
            if region not in regions:
                raise InputError(
                    None,
                    f"clouds.{cloud}.regions[{r}]",
                    f"{region!r} is not a {cloud} region of the catalog{_close(region, regions)}",
                )
    if not offerings:
        raise InputError(None, "clouds", "no offering of the catalog is in the allowed clouds and regions")


def _check_gpu_models(scenario: Scenario, catalog: Catalog) -> None:
    """Every GPU-model pattern of a workload matches a model the catalog (or the scenario's own servers)
    has: a typo must not quietly leave a service unserved."""
    models = {o.gpu_model for o in catalog}
    if scenario.colocation is not None:
        models.add(scenario.colocation.gpu_model)
    sections: tuple[tuple[str, Sequence[InferenceService | TrainingJob]], ...] = (
        ("inference", scenario.inference),
        ("training", scenario.training),
    )
    for section, workloads in sections:
        for k, workload in enumerate(workloads):
            for m, pattern in enumerate(workload.gpu_models):
                if not any(model.upper().startswith(pattern.strip().upper()) for model in models):
                    raise InputError(
                        None,
                        f"{section}[{k}].gpu_models[{m}]",
                        f"no GPU model of the catalog matches {pattern!r}{_close(pattern, models)}",
                    )


def _check_guarantees(scenario: Scenario, offerings: list[Offering]) -> None:
    """A guaranteed GPU is a committed GPU (``build.guarantee_rows``): the team's workloads must have an
    offering that can be committed (a term the scenario buys and the offering prices, owned servers, or
    a commitment held on it)."""
    held = {c.offering for c in scenario.commitments}
    for t, team in enumerate(scenario.teams):
        if team.guaranteed_gpus <= 0:
            continue
        patterns = [m for w in scenario.workloads if w.team == team.name for m in w.gpu_models]
        usable = [o for o in offerings if patterns and o.matches_gpu(patterns)]
        committable = [
            o
            for o in usable
            if o.owned
            or o.id in held
            or any(o.price(TERM_TIER[term]) is not None for term in scenario.purchase.terms)
        ]
        if not committable:
            why = (
                "the team has no workload"
                if not patterns
                else "no offering its workloads could use can be committed (purchase.terms, colocation or "
                "a held commitment)"
            )
            raise InputError(
                None,
                f"teams[{t}].guaranteed_gpus",
                f"{team.name}: {team.guaranteed_gpus} guaranteed GPUs cannot be backed: {why}",
            )


def _close(name: str, known: Iterable[str]) -> str:
    """ "; did you mean ...?" with the closest known names, else the known names (a short list)."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return f"; did you mean {' or '.join(repr(c) for c in close)}?"
    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    return f"; it has: {shown}"
