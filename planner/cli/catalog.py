"""`gpuplan catalog`: the offerings of a catalog and their prices per tier, filtered."""

from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from models.errors import GpuplanError, InputError
from models.wording import plural
from planner.cli.common import err, fail, out

if TYPE_CHECKING:
    from models.catalog import Catalog, Offering

__all__ = ["catalog"]


def catalog(
    ctx: typer.Context,
    gpu: Annotated[list[str] | None, typer.Option(help="GPU model prefix, e.g. H100 (repeatable)")] = None,
    cloud: Annotated[list[str] | None, typer.Option(help="aws, gcp or azure (repeatable)")] = None,
    region: Annotated[list[str] | None, typer.Option(help="region name (repeatable)")] = None,
    fabric: Annotated[bool, typer.Option("--fabric", help="only offerings with a multi-node fabric")] = False,
    file: Annotated[
        Path | None, typer.Option("--catalog", help="a catalog CSV instead of the embedded one")
    ] = None,
    csv: Annotated[bool, typer.Option("--csv", help="print CSV instead of a table")] = False,
    provenance: Annotated[
        bool,
        typer.Option(
            "--provenance", help="where each price comes from: quoted, assumed, its source and date"
        ),
    ] = False,
) -> None:
    """List GPU offerings and their prices per tier ($ per node-hour); `gpuplan catalog fetch` reads them
    from the clouds' price APIs.

    Filters combine: an offering is listed when it matches every filter given (any of a repeated one).
    A filter that matches nothing is an error (exit 2) naming it, with the close matches.
    """
    if ctx.invoked_subcommand is not None:
        return
    from models.catalog import Catalog

    try:
        loaded = Catalog.load(file)
        rows = _select_offerings(loaded, gpu or [], cloud or [], region or [], fabric)
    except GpuplanError as error:
        raise fail(error) from None
    for warning in loaded.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if csv:  # the catalog format itself: edit it into a catalog of your own
        from models.catalog import catalog_csv

        sys.stdout.write(catalog_csv(rows))
        return
    if provenance:
        _print_provenance(rows, file)
        return
    table = Table(title=f"{plural(len(rows), 'offering')} ({'embedded' if file is None else file})")
    for column, justify in (
        ("cloud", "left"), ("region", "left"), ("instance type", "left"), ("GPUs", "right"),
        ("fabric", "left"), ("on-demand", "right"), ("spot", "right"), ("1y", "right"), ("3y", "right"),
        ("$/GPU-h OD", "right"),
    ):  # fmt: skip
        table.add_column(column, justify=justify)  # type: ignore[arg-type]

    def money(value: float | None) -> str:
        return "-" if value is None else f"{value:,.2f}"

    for o in sorted(rows, key=lambda o: (o.gpu_model, o.cloud, o.region, o.instance_type)):
        table.add_row(
            o.cloud, o.region, o.instance_type, f"{o.gpus_per_node}x {o.gpu_model}", o.fabric,
            money(o.on_demand_usd_h), money(o.spot_usd_h), money(o.reserved_1y_usd_h),
            money(o.reserved_3y_usd_h), money((o.on_demand_usd_h or math.nan) / o.gpus_per_node),
        )  # fmt: skip
    if not out.is_terminal:
        out.width = max(out.width, 140)  # piped or captured: do not squeeze the table to 80 columns
    out.print(table)


def _print_provenance(rows: list[Offering], file: Path | None) -> None:
    """One line per price: the offering, the tier, the price, quoted or assumed, its date and source."""
    from models.catalog import TIER_COLUMN

    table = Table(
        title=f"where the prices of {plural(len(rows), 'offering')} come from "
        f"({'embedded' if file is None else file})"
    )
    for column in ("offering", "tier", "$/node-h", "basis", "as of", "source"):
        table.add_column(column, overflow="fold")
    counts: dict[str, int] = {}
    for o in sorted(rows, key=lambda o: (o.cloud, o.region, o.instance_type)):
        for tier in TIER_COLUMN:
            price, said = o.price(tier), o.price_provenance(tier)
            if price is None and said.basis != "unknown":
                continue
            counts[said.basis] = counts.get(said.basis, 0) + 1
            table.add_row(
                o.id, tier.value, "-" if price is None else f"{price:,.4f}", said.basis,
                "" if said.as_of is None else f"{said.as_of:%Y-%m-%d}", said.source,
            )  # fmt: skip
    if not out.is_terminal:
        out.width = max(out.width, 200)
    out.print(table)
    out.print(", ".join(f"{n} {basis}" for basis, n in counts.items()), highlight=False)


#: What a cloud is called besides the name gpuplan gives it (for the hint of an unknown ``--cloud``).
_CLOUD_NAMES = {"amazon": "aws", "ec2": "aws", "google": "gcp", "gce": "gcp", "microsoft": "azure"}


def _select_offerings(
    loaded: Catalog, gpus: list[str], clouds: list[str], regions: list[str], fabric: bool
) -> list[Offering]:
    """The offerings of ``loaded`` that ``gpuplan catalog``'s filters select.

    InputError (exit 2) when a filter cannot match: an unknown cloud, a GPU model, cloud or region the
    catalog does not have (with the close matches), or filters that each match but not together (the
    first filter that empties the selection, with what the others leave)."""
    from models.catalog import CLOUDS

    source = "the embedded catalog" if loaded.source == "embedded" else loaded.source
    offerings = list(loaded)
    for flag, values in (("--gpu", gpus), ("--cloud", clouds), ("--region", regions)):
        if any(not value.strip() for value in values):
            raise InputError(None, flag, "empty value")
    for name in clouds:
        if name.strip().lower() not in CLOUDS:
            alias = _CLOUD_NAMES.get(name.strip().lower())
            hint = f" (did you mean {alias!r}?)" if alias else _close_matches(name.strip().lower(), CLOUDS)
            raise InputError(None, "--cloud", f"unknown cloud {name!r}{hint}; valid: {', '.join(CLOUDS)}")
    models = sorted({o.gpu_model for o in offerings})
    for pattern in gpus:
        if not any(o.matches_gpu([pattern]) for o in offerings):
            hint = _close_matches(pattern.strip(), models)
            raise InputError(
                None,
                "--gpu",
                f"no GPU model in {source} starts with {pattern!r}{hint}; its models: {', '.join(models)}",
            )
    present = sorted({o.cloud for o in offerings})
    for name in clouds:
        if name.strip().lower() not in present:
            problem = f"{source} has no {name.strip().lower()} offering; its clouds: {', '.join(present)}"
            raise InputError(None, "--cloud", problem)
    known = sorted({o.region for o in offerings})
    for name in regions:
        if name not in known:
            hint = _close_matches(name, known) or f"; its regions: {', '.join(known)}"
            raise InputError(None, "--region", f"no region {name!r} in {source}{hint}")
    if fabric and not any(o.has_fabric for o in offerings):
        raise InputError(None, "--fabric", f"no offering in {source} has a multi-node fabric")

    wanted_clouds = {c.strip().lower() for c in clouds}
    steps: list[tuple[str, list[str], Callable[[Offering], bool]]] = [
        ("--gpu", gpus, lambda o: o.matches_gpu(gpus)),
        ("--cloud", clouds, lambda o: o.cloud in wanted_clouds),
        ("--region", regions, lambda o: o.region in regions),
        ("--fabric", ["--fabric"] if fabric else [], lambda o: o.has_fabric),
    ]
    applied: list[str] = []
    selected = offerings
    for flag, values, keep in steps:
        if not values:
            continue
        narrowed = [o for o in selected if keep(o)]
        given = " ".join(f"{flag} {v}" for v in values) if flag != "--fabric" else flag
        if not narrowed:
            before = f"no offering matching {' '.join(applied)}"
            if flag == "--cloud":
                clouds_left = ", ".join(sorted({o.cloud for o in selected}))
                problem = f"{before} is on {given}; the clouds that have them: {clouds_left}"
            elif flag == "--region":
                names = sorted({o.region for o in selected})
                hint = _close_matches(regions[0], names)
                problem = f"{before} is in {given}{hint}; their regions: {', '.join(names)}"
            else:
                problem = f"{before} has a multi-node fabric"
            raise InputError(None, flag, problem)
        applied.append(given)
        selected = narrowed
    return selected


def _close_matches(value: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'H100'?)`` for the choices close to ``value`` (case-insensitive), else ``""``."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(value.lower(), list(by_lower), n=3, cutoff=0.5)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(by_lower[c]) for c in close) + "?)"
