"""`gpuplan provision`: make a fleet match a plan, as `terraform plan` / `apply` do for infrastructure.

A dry run (the default) reads the provider's inventory, prints the actions that would make the fleet match
the plan at ``--at`` and writes them to ``actions.json`` (``--actions``; by default in ``<plan
dir>.provision/`` beside the plan, never into the plan directory it reads, so a dry run leaves the plan as
it was); ``--apply`` executes them. Commitment purchases are listed, never made. What an apply creates is
recorded in ``created.json`` beside the action list, so that a later run tells a create whose result is gone
(a gang or pool lost, a group or reservation deleted outside gpuplan) and sends it as a new attempt under a
token of its own, as the daemon's journal does.

Gangs the plan holds in an AWS Capacity Block (tier ``capacity_block``) are the one purchase provision
makes, and only with ``--apply`` and ``--block-max-usd`` (the most one block may cost upfront): from 8 weeks
before the run it lists the offers and buys the cheapest that holds the run, once (a block held for the run
is never bought again); without the cap it says what it would buy. The gang's nodes launch into the block
once it is active (``planner.operations.capacity_blocks``, ``planner.operations.reconcile``).
"""

from __future__ import annotations

import logging
import math
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from models.errors import GpuplanError, InputError
from models.wording import plural
from planner.cli.common import err, fail, out

if TYPE_CHECKING:
    from models.actions import Action, ActionResult
    from models.plan import Plan
    from planner.operations.provision import Provisioning
    from providers.base import Provider

__all__ = ["created_path", "default_actions_path", "parse_time", "provision"]

#: Loggers of the SDKs: warnings only (their INFO and DEBUG lines carry request details we do not need).
_QUIET_LOGGERS = ("botocore", "boto3", "urllib3", "azure", "google", "msal", "werkzeug")
_SIGNS = {
    "create-placement-group": "+",
    "create-reservation": "+",
    "launch": "+",
    "terminate": "-",
    "release-reservation": "-",
    "delete-placement-group": "-",
}


def provision(
    plan_dir: Annotated[Path, typer.Argument(help="plan directory written by gpuplan plan")],
    cloud: Annotated[
        str,
        typer.Option(help="provider: aws, gcp, azure, or sim (a simulated cloud kept in --sim-state)"),
    ] = "sim",
    at: Annotated[
        str | None,
        typer.Option(
            help="the time whose plan to provision, ISO 8601, UTC (default: now; before the horizon: "
            "its start)"
        ),
    ] = None,
    apply_: Annotated[bool, typer.Option("--apply", help="execute the actions (default: a dry run)")] = False,
    provider_config: Annotated[
        Path | None,
        typer.Option(help="provider settings YAML (sections aws:, gcp:, azure:; no credentials in it)"),
    ] = None,
    sim_state: Annotated[
        Path | None,
        typer.Option(
            help="state file of the simulated cloud (default: one per plan, "
            "$XDG_STATE_HOME/gpuplan/sim-cloud/PLAN_ID.json)"
        ),
    ] = None,
    lead_hours: Annotated[
        float, typer.Option(help="hours before a gang's start to create its placement group and reservation")
    ] = 2.0,
    retire_finished_runs: Annotated[
        bool,
        typer.Option(help="terminate the nodes of training runs whose planned window has ended"),
    ] = False,
    capacity_only: Annotated[
        bool,
        typer.Option(
            "--capacity-only",
            help="make only placement groups and reservations, never launch or terminate a node: an "
            "autoscaler launches them (gpuplan karpenter writes its NodePools)",
        ),
    ] = False,
    actions: Annotated[
        Path | None,
        typer.Option(
            help="where to write the action list (default: PLAN_DIR.provision/actions.json, beside the "
            "plan: the plan directory is never written)"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print actions.json instead of the table")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no log of each call on stderr")] = False,
    capacity_blocks: Annotated[
        bool,
        typer.Option(
            help="aws: list Capacity Blocks for ML for the plan's non-spot gangs of the next 8 weeks "
            "(listing buys nothing)"
        ),
    ] = False,
    buy_capacity_block: Annotated[
        str | None,
        typer.Option(help="aws: buy this listed Capacity Block (with --apply and --max-usd only)"),
    ] = None,
    max_usd: Annotated[
        float | None, typer.Option(help="the most a Capacity Block bought may cost upfront, USD")
    ] = None,
    block_max_usd: Annotated[
        float | None,
        typer.Option(
            help="aws: with --apply, buy the Capacity Blocks the plan holds its gangs in (tier "
            "capacity_block), each for at most this many USD upfront; without it nothing is bought"
        ),
    ] = None,
    disruption_budget: Annotated[
        str,
        typer.Option(
            help="the most of a pool's running nodes one run terminates: a share (50%) or a number of "
            "nodes; a larger shrink waits for later runs"
        ),
    ] = "50%",
    allow_shrink: Annotated[
        bool, typer.Option("--allow-shrink", help="terminate every surplus node now (no disruption budget)")
    ] = False,
) -> None:
    """Make the fleet match the plan: placement groups, reservations, launches and terminations.

    Dry run by default: prints the actions and writes actions.json. --apply executes them in order,
    logging each; a failed action stops only the actions that depend on it, and the exit code is 1 if
    any failed. A second apply right after the first has nothing to do ("0 actions"). Commitments the
    plan buys are listed as recommended purchases and never bought: that is a human's decision. The
    AWS Capacity Blocks the plan holds its gangs in are bought only with --apply and --block-max-usd N
    (each at most N upfront, once per run); without the cap provision says what it would buy.
    Exit codes: 0 done (or nothing to do), 1 some action failed, 2 bad input, 6 the provider could not
    be read (credentials, network, settings).
    """
    from models.plan import Plan
    from planner.operations.provision import CreateRecord, apply, prepare
    from planner.operations.reconcile import DisruptionBudget
    from planner.outputs.desired import lead_hours_problem
    from providers.config import load_provider_config, open_provider

    _configure_logging(quiet)
    try:
        if (problem := lead_hours_problem(lead_hours)) is not None:
            raise InputError(None, "--lead-hours", problem)
        if block_max_usd is not None and not (block_max_usd > 0 and math.isfinite(block_max_usd)):
            raise InputError(
                None, "--block-max-usd", f"must be a positive USD figure per block, got {block_max_usd:g}"
            )
        if buy_capacity_block is not None and (max_usd is None or not max_usd > 0):
            raise InputError(
                None, "--max-usd", "give the most the block may cost upfront (a positive USD figure)"
            )
        try:
            budget = None if allow_shrink else DisruptionBudget.parse(disruption_budget)
        except ValueError as exc:
            raise InputError(None, "--disruption-budget", str(exc)) from None
        if actions is not None and actions.name == "created.json":
            problem = "created.json is the record of what provision made: name the list otherwise"
            raise InputError(None, "--actions", problem)
        loaded = Plan.read(plan_dir)
        when, note = _when(at, loaded)
        config = load_provider_config(provider_config)
        state = sim_state if sim_state is not None or cloud.lower() != "sim" else _default_sim_state(loaded)
        provider = open_provider(cloud.lower(), config, config_path=provider_config, sim_state=state)
        run = prepare(
            loaded,
            provider,
            when,
            lead_hours=lead_hours,
            retire_finished_runs=retire_finished_runs,
            capacity_only=capacity_only,
            budget=budget,
        )
        # creates whose earlier attempt is gone go as the next attempt: shown in the dry run alike
        target = actions if actions is not None else default_actions_path(plan_dir)
        record = CreateRecord(created_path(target), cloud.lower())
        record.attempts(run, datetime.now(UTC))
        if apply_ and run.actions:
            record.save()  # a record that cannot be written stops the run before anything is made
    except GpuplanError as exc:  # a cloud error exits 6, bad input 2 (``fail``)
        raise fail(exc) from None
    if note:
        run.notes.insert(0, note)
    if not as_json:
        _print_actions(run, cloud.lower(), state, given=sim_state is not None)
    if apply_ and run.actions:

        def finished(action: Action, result: ActionResult) -> None:
            record.note(action, result, datetime.now(UTC))
            if not as_json:
                _print_result(action, result)

        try:
            apply(run, provider, on_result=finished)
        except GpuplanError as exc:  # the record could not be written: nothing more is sent
            _write(target, run)
            raise fail(exc) from None
    _write(target, run)
    if as_json:
        out.print_json(run.document().to_json())
    else:
        _print_summary(run, apply_, target)
    blocks_failed = _planned_blocks(
        loaded, provider, when, max_usd=block_max_usd, apply_=apply_, quiet=as_json
    )
    if capacity_blocks or buy_capacity_block is not None:
        blocks_failed |= _capacity_blocks(
            loaded, provider, when, buy=buy_capacity_block, max_usd=max_usd, apply_=apply_
        )
    if run.failed() or blocks_failed:
        raise typer.Exit(1)


def default_actions_path(plan_dir: Path) -> Path:
    """``PLAN_DIR.provision/actions.json``: beside the plan, never in it. A plan directory is the output of
    ``gpuplan plan`` (hashed, verified, maybe under version control); a dry run must leave it as it was."""
    named = plan_dir if plan_dir.name not in ("", ".", "..") else plan_dir.resolve()
    return named.with_name(f"{named.name}.provision") / "actions.json"


def created_path(actions: Path) -> Path:
    """``created.json`` beside the action list (by default ``PLAN_DIR.provision/``): the creates provision
    made for the plan. Where ``--actions`` sends the list (a plan directory whose parent cannot be
    written, a shared plan), the record goes too, so it is kept wherever provision may write."""
    return actions.with_name("created.json")


def _default_sim_state(plan: Plan) -> Path:
    """The simulated cloud's file for this plan: one per plan id, so plans never share a simulated account."""
    from planner.outputs.desired import plan_id_of
    from providers.sim import default_state_path

    return default_state_path(plan_id_of(plan.document))


def _planned_blocks(
    plan: Plan, provider: Provider, at: datetime, *, max_usd: float | None, apply_: bool, quiet: bool
) -> bool:
    """The Capacity Blocks the plan holds its gangs in: held, bought (only with --apply and
    --block-max-usd), or what would be bought and why not; True if something failed. Nothing is printed
    for a plan without such gangs or a cloud that sells no blocks (its gangs are held on demand)."""
    from models.tiers import Tier
    from planner.operations.capacity_blocks import buy_planned_blocks
    from providers.base import Capability, ProviderError, supports

    if not supports(provider, Capability.CAPACITY_BLOCKS) or not any(
        t.tier == Tier.CAPACITY_BLOCK for t in plan.document.training
    ):
        return False
    try:
        decisions = buy_planned_blocks(
            plan, provider, at, max_usd=max_usd, apply=apply_ and max_usd is not None
        )
    except ProviderError as exc:
        err.print(f"[bold red]FAILED[/] the plan's Capacity Blocks: {escape(str(exc))}", highlight=False)
        return True
    if not quiet and decisions:
        cap = f"cap ${max_usd:,.2f} per block" if max_usd is not None else "no cap: nothing is bought"
        mode = "apply" if apply_ else "dry run"
        out.print(f"the plan's Capacity Blocks ({mode}, {cap}):", highlight=False)
        for d in decisions:
            out.print(f"  {d.run}: {d.status}: {d.message}", highlight=False, markup=False)
    return any(d.failed for d in decisions)


def _capacity_blocks(
    plan: Plan, provider: Provider, at: datetime, *, buy: str | None, max_usd: float | None, apply_: bool
) -> bool:
    """List the Capacity Blocks the provider offers for the plan's coming non-spot gangs, and buy the one
    asked for (only with --apply, only under --max-usd); True if something failed."""
    from planner.operations.capacity_blocks import buy_block, list_blocks
    from providers.base import Capability, ProviderError, supports

    if not supports(provider, Capability.CAPACITY_BLOCKS):
        raise fail(
            InputError(
                None,
                "--capacity-blocks",
                f"only --cloud aws sells Capacity Blocks for ML, not {provider.cloud}",
            )
        )
    out.print(
        "capacity blocks for the plan's non-spot gangs (AWS Capacity Blocks for ML; listing buys nothing):",
        highlight=False,
    )
    try:
        listings = list_blocks(plan, provider, at)
        if not listings:
            out.print("  no non-spot multi-node gang of the plan starts in the next 8 weeks", highlight=False)
        for listing in listings:
            request = listing.request
            out.print(
                f"  {request.run}: {request.nodes} x {request.offering} for {request.hours} h, starting "
                f"{request.start_from:%Y-%m-%d %H:%M}Z to {request.start_to:%Y-%m-%d %H:%M}Z; on demand "
                f"the plan pays ${request.on_demand_usd:,.0f}",
                highlight=False,
            )
            if request.unsellable:
                out.print(f"    no block: {escape(request.unsellable)}", highlight=False)
            elif not listing.offers:
                out.print("    no block offered for these dates", highlight=False)
            for offer in listing.offers:
                saves = listing.saving_usd(offer)
                start = f"{offer.start:%Y-%m-%d %H:%M}Z" if offer.start else "?"
                out.print(
                    f"    {offer.id}: {offer.zone or ''} from {start}, {offer.hours} h, "
                    f"${offer.upfront_usd:,.2f} upfront ({'saves' if saves >= 0 else 'costs'} "
                    f"${abs(saves):,.0f} against on demand)",
                    highlight=False,
                )
        if buy is None:
            return False
        if not any(offer.id == buy for listing in listings for offer in listing.offers):
            raise fail(
                InputError(None, "--buy-capacity-block", f"{buy} is not among the blocks listed above")
            )
        assert max_usd is not None  # checked with the other inputs
        purchase = buy_block(plan, provider, listings, buy, max_usd=max_usd, apply=apply_)
        if purchase.reservation is None:
            out.print(
                f"dry run: would buy {buy} for ${purchase.offer.upfront_usd:,.2f} (cap ${max_usd:,.2f}) for "
                f"{purchase.run}; --apply buys it",
                highlight=False,
            )
            return False
        bought = purchase.reservation
        out.print(
            f"bought {buy} for {purchase.run}: capacity reservation {bought.id or bought.name}",
            highlight=False,
        )
        return False
    except ProviderError as exc:
        out.print(f"[bold red]FAILED[/] capacity blocks: {escape(str(exc))}", highlight=False)
        return True


def _configure_logging(quiet: bool) -> None:
    """gpuplan's own log lines on stderr (INFO, or warnings only with --quiet); the SDKs' warnings only."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("gpuplan")
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING if quiet else logging.INFO)
    root.propagate = False
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def _when(at: str | None, plan: Plan) -> tuple[datetime, str | None]:
    """``--at`` as a UTC time; now by default, and the horizon's start when now is before it."""
    start = plan.document.horizon.start.astimezone(UTC)
    if at is None or at.strip().lower() == "now":
        now = datetime.now(UTC)
        if now < start:
            return start, f"now ({now:%Y-%m-%d %H:%M}Z) is before the plan's horizon: provisioning its start"
        return now, None
    return parse_time(at), None


def parse_time(text: str) -> datetime:
    """``--at``'s value as a UTC time: ISO 8601, a date alone meaning its midnight, no zone meaning UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            None, "--at", f"not an ISO 8601 time: {text!r} (e.g. 2027-02-01T00:00:00Z or 2027-02-01)"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _money(value: float | None) -> str:
    if value is None:
        return ""
    return f"{'+' if value >= 0 else '-'}${abs(value):,.2f}"


def _print_actions(run: Provisioning, cloud: str, sim_state: Path | None, *, given: bool) -> None:
    desired = run.desired
    where = ""
    if cloud == "sim" and sim_state is not None:
        where = f" (state {sim_state})" if given else f" (a simulated cloud, state {sim_state})"
    out.print(
        f"gpuplan provision: plan {desired.plan_id} at {desired.at:%Y-%m-%dT%H:%M}Z "
        f"(period {desired.period}) on {cloud}{where}",
        highlight=False,
    )
    inventory = run.document().inventory
    out.print(
        f"inventory: {plural(inventory['nodes'], 'node')}, "
        f"{plural(inventory['placement_groups'], 'placement group')}, "
        f"{plural(inventory['reservations'], 'reservation')} tagged gpuplan-plan={desired.plan_id}",
        highlight=False,
    )
    for action in run.actions:
        cost = f" {_money(action.usd_per_hour)}/h" if action.usd_per_hour else ""
        after = f" (after {', '.join(f'#{d}' for d in action.depends_on)})" if action.depends_on else ""
        retry = f" ({action.retry_note()})" if action.attempt else ""
        out.print(
            f"  {_SIGNS[action.kind]} #{action.id} {action.describe()}{retry}{cost}{after}", highlight=False
        )
        out.print(f"      [dim]{escape(action.reason)}[/]", highlight=False)


def _print_result(action: Action, result: ActionResult) -> None:
    mark = {"done": "[green]done[/]", "failed": "[bold red]FAILED[/]", "skipped": "[yellow]skipped[/]"}
    detail = f": {escape(result.message)}" if result.message else ""
    retry = f" ({action.retry_note()})" if action.attempt else ""
    out.print(f"  #{action.id} {action.describe()}{retry} ... {mark[result.status]}{detail}", highlight=False)


def _print_summary(run: Provisioning, applied: bool, target: Path) -> None:
    kinds: dict[str, int] = {}
    for action in run.actions:
        kinds[action.kind] = kinds.get(action.kind, 0) + 1
    from models.actions import fleet_usd_per_hour

    delta = fleet_usd_per_hour(run.actions)
    if run.actions:
        parts = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
        retries = sum(1 for a in run.actions if a.attempt)
        again = (
            f"; {plural(retries, 'create')} as a new attempt (what the earlier attempt made is gone)"
            if retries
            else ""
        )
        out.print(
            f"{plural(len(run.actions), 'action')}: {parts} (fleet {_money(delta)}/h){again}", highlight=False
        )
    elif run.held_back:
        held = sum(h.held for h in run.held_back)
        out.print(
            f"0 actions now: {plural(held, 'termination')} held back by the disruption budget",
            highlight=False,
        )
    else:
        out.print(
            f"0 actions: the fleet matches the plan at {run.desired.at:%Y-%m-%dT%H:%M}Z", highlight=False
        )
    if run.desired.purchases:
        out.print(
            "recommended purchases (provision never buys a commitment: a 1- or 3-year obligation is a "
            "human's decision):",
            highlight=False,
        )
        for p in run.desired.purchases:
            when = f"{p.start:%Y-%m-%d}" if p.start else "now"
            due = "due now" if p.due else f"buy on {when}"
            out.print(
                f"  {p.nodes} x {p.offering} on {p.term} ({due}): ${p.cost_in_horizon_usd:,.0f} in the "
                f"horizon, ${p.obligation_beyond_horizon_usd:,.0f} after it",
                highlight=False,
            )
    for note in run.notes:
        out.print(f"note: {note}", highlight=False, markup=False)
    if applied and run.actions:
        done = sum(1 for r in run.results.values() if r.status == "done")
        failed, skipped = run.failed(), run.skipped()
        out.print(
            f"applied: {done} done, {len(failed)} failed, {len(skipped)} skipped; results in {target}",
            highlight=False,
        )
        for action in failed:
            out.print(
                f"  FAILED #{action.id}: {run.results[action.id].message}", highlight=False, markup=False
            )
        for action in skipped:
            out.print(
                f"  skipped #{action.id}: {run.results[action.id].message}", highlight=False, markup=False
            )
    elif run.actions:
        out.print(f"dry run: nothing was changed; --apply executes these actions. Written to {target}")
    else:
        out.print(f"written to {target}", highlight=False)


def _write(target: Path, run: Provisioning) -> None:
    """actions.json, replaced whole (a reader never sees half of it)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        staging.write_text(run.document().to_json(), encoding="utf-8")
        os.replace(staging, target)
    except OSError as exc:
        err.print(
            f"[bold red]error:[/] {target}: cannot write the action list: {exc.strerror}", highlight=False
        )
        raise typer.Exit(2) from None
