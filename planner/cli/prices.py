"""`gpuplan catalog fetch`: a catalog from the clouds' own price APIs, each price with its source and date.

Reads AWS (Price List, Savings Plans rates, spot price history, instance types), GCP (Cloud Billing Catalog,
machine types) and Azure (Retail Prices API) through ``providers/pricing/``, and writes the catalog CSV
(format 2) and beside it the terms file (every commitment and per-zone spot price). A region that fails
does not stop the others: what was read is written, the failures are named, and the exit code is 6.
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from models.errors import GpuplanError, InputError
from planner.cli.common import EXIT_CLOUD, err, fail, out, progress_messages

if TYPE_CHECKING:
    from providers.pricing.common import FetchResult

__all__ = ["fetch"]

#: The optional dependencies each fetcher needs (pyproject's extras).
_EXTRA = {"aws": "aws", "gcp": "gcp", "azure": "azure"}
_ENDPOINT_NAMES = ("aws-pricing", "aws-savingsplans", "aws-ec2", "gcp-billing", "gcp-compute", "azure-prices")


def fetch(
    cloud: Annotated[
        list[str] | None, typer.Option(help="aws, gcp or azure (repeatable; default: the scenario's clouds)")
    ] = None,
    region: Annotated[
        list[str] | None,
        typer.Option(
            help="a region (repeatable); with several clouds write cloud:region, e.g. aws:us-east-1"
        ),
    ] = None,
    gpu: Annotated[
        list[str] | None, typer.Option(help="GPU model prefix, e.g. H100 (repeatable; default: all)")
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(
            help="take clouds, regions and GPU models from this scenario (its clouds: and gpu_models)"
        ),
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="the catalog CSV to write")] = Path(
        "catalog.csv"
    ),
    terms: Annotated[
        Path | None,
        typer.Option(
            help="where to write every commitment and zone spot price (default: <output>.terms.csv)"
        ),
    ] = None,
    spot_days: Annotated[int, typer.Option(help="days of AWS spot price history read per zone")] = 7,
    project: Annotated[
        str | None,
        typer.Option(
            help="GCP project to read machine types in (default: GOOGLE_CLOUD_PROJECT, then gcloud's)"
        ),
    ] = None,
    endpoint: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=URL: another address for one price API (a private mirror, a test stand-in); names: "
            + ", ".join(_ENDPOINT_NAMES)
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress messages")] = False,
) -> None:
    """Fetch on-demand, spot and commitment prices from the clouds' price APIs into a catalog CSV.

    Every price is written with its source (API, endpoint, offer or API version), when it was read, and
    whether it is quoted; a price an API does not have is written as unknown (the tier is not planned),
    never as zero. Credentials: AWS pricing:GetProducts, savingsplans:DescribeSavingsPlansOfferingRates,
    ec2:DescribeSpotPriceHistory and ec2:DescribeInstanceTypes; GCP read access to the Cloud Billing
    Catalog and compute.machineTypes.list; Azure none (the Retail Prices API is public). docs/prices.md.

    Exit 0: every region read; 6: a cloud or region failed (the others are written, the failures named);
    2: bad arguments.
    """
    from models.catalog import write_catalog
    from models.priceterms import terms_path_for, write_terms
    from providers.pricing.common import FetchRequest

    say = progress_messages(quiet)
    try:
        wanted = _wanted(cloud or [], region or [], gpu or [], scenario)
        endpoints = _endpoints(endpoint or [])
        if not 1 <= spot_days <= 90:
            raise InputError(None, "--spot-days", f"must be 1 to 90 days, got {spot_days}")
        if output.exists() and output.is_dir():
            raise InputError(output, None, "is a directory: give the catalog CSV file to write")
    except GpuplanError as error:
        raise fail(error) from None
    now = datetime.now(UTC).replace(microsecond=0)
    results: list[FetchResult] = []
    failures: list[str] = []
    for name, (regions, gpus) in wanted.items():
        request = FetchRequest(
            regions=regions, gpus=gpus, now=now, endpoints=endpoints, spot_days=spot_days, project=project
        )
        say(f"{name}: fetching {', '.join(regions)}" + (f" ({', '.join(gpus)})" if gpus else ""))
        try:
            module = importlib.import_module(f"providers.pricing.{name}")
            result: FetchResult = module.fetch(request, say)
        except ModuleNotFoundError as missing:
            failures.append(
                f"{name}: {missing.name} is not installed (pip install 'gpuplan[{_EXTRA[name]}]')"
            )
            continue
        except GpuplanError as error:
            failures.append(f"{name}: {error}")
            continue
        results.append(result)
        failures.extend(f"{name} {where}: {why}" for where, why in result.failed_regions.items())
    offerings = [o for r in results for o in r.offerings]
    for result in results:
        for warning in result.warnings:
            err.print(f"[yellow]warning:[/] {result.cloud}: {warning}", highlight=False)
    if offerings:
        terms_path = terms or terms_path_for(output)
        write_catalog(offerings, output)
        write_terms([t for r in results for t in r.terms], terms_path)
        _summary(results, output, terms_path)
    for failure in failures:
        err.print(f"[red]failed:[/] {failure}", highlight=False)
    if failures:
        if not offerings:
            err.print("nothing written: no region could be read", highlight=False)
        raise typer.Exit(EXIT_CLOUD)


def _wanted(
    clouds: list[str], regions: list[str], gpus: list[str], scenario: Path | None
) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """cloud -> (regions, GPU prefixes), from the flags and the scenario; InputError when a cloud has none."""
    from models.catalog import CLOUDS, Catalog

    names = [c.strip().lower() for c in clouds]
    for name in names:
        if name not in CLOUDS:
            raise InputError(None, "--cloud", f"unknown cloud {name!r}; valid: {', '.join(CLOUDS)}")
    by_cloud: dict[str, list[str]] = {}
    models = [g.strip() for g in gpus if g.strip()]
    if scenario is not None:
        from models.scenario import load

        loaded = load(scenario)
        for name, scope in loaded.clouds.items():
            if not names or name in names:
                by_cloud.setdefault(name, []).extend(scope.regions or [])
        if not models:
            models = sorted(
                {m for s in loaded.inference for m in s.gpu_models or []}
                | {m for t in loaded.training for m in t.gpu_models or []}
            )
    for name in names:
        by_cloud.setdefault(name, [])
    if not by_cloud:
        raise InputError(None, "--cloud", "name a cloud (--cloud aws) or a scenario (--scenario)")
    for text in regions:
        cloud_name, _, place = text.rpartition(":")
        if cloud_name:
            if cloud_name not in by_cloud:
                raise InputError(
                    None, "--region", f"{text!r} names {cloud_name!r}, not one of the clouds fetched"
                )
            by_cloud[cloud_name].append(place)
        elif len(by_cloud) > 1:
            raise InputError(
                None, "--region", f"{text!r}: with several clouds write cloud:region (aws:{text})"
            )
        else:
            next(iter(by_cloud.values())).append(text)
    for name, listed in by_cloud.items():
        if not listed:  # the regions gpuplan plans in today: the embedded catalog's
            listed.extend(sorted({o.region for o in Catalog.load(None) if o.cloud == name}))
    return {name: (tuple(dict.fromkeys(listed)), tuple(models)) for name, listed in by_cloud.items()}


def _endpoints(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        name, sep, url = pair.partition("=")
        if not sep or name not in _ENDPOINT_NAMES or not url.startswith(("http://", "https://")):
            raise InputError(
                None, "--endpoint", f"{pair!r}: write NAME=URL with NAME one of {', '.join(_ENDPOINT_NAMES)}"
            )
        found[name] = url
    return found


def _summary(results: list[FetchResult], output: Path, terms_path: Path) -> None:
    from models.catalog import Catalog

    written = Catalog.load(output)
    counts = written.provenance_counts()
    said = ", ".join(f"{n} {basis}" for basis, n in counts.items() if n)
    terms = sum(len(r.terms) for r in results)
    out.print(f"wrote {output}: {len(written)} offerings; prices {said}", highlight=False)
    out.print(f"wrote {terms_path}: {terms} commitment and zone spot prices", highlight=False)
    for warning in written.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
