"""`gpuplan terraform`: a plan as one Terraform root module per cloud, for review in a pull request.

Each root (``DIR/aws``, ``DIR/gcp``, ``DIR/azure``, for the clouds the plan uses) instantiates its cloud's
hand-written module (``terraform/modules/<cloud>-gpu-pool``, copied into ``DIR/<cloud>/modules`` so the
root stands alone) once per pool of ``planner.outputs.pools``, from ``terraform.tfvars.json``:

- ``versions.tf``: Terraform and provider versions, pinned loosely;
- ``main.tf``: a header saying which plan and which moment (or the steady state) it holds, the provider
  blocks (no credentials: each provider finds its own), and the module instances (AWS: one per region,
  since an AWS provider is regional);
- ``variables.tf``: the plan's pools (typed) and the site settings a team fills in once (images,
  subnets, project, resource group, ...), listed in ``site.auto.tfvars.example``;
- ``outputs.tf``, ``terraform.tfvars.json`` (the pools, sorted) and a ``README.md`` of what it holds,
  with the commitment purchases the plan recommends as decisions (never Terraform resources);
- AWS, with ``interruption_queue``: ``interruptions.tf``, an SQS queue and its EventBridge rules per
  region (``terraform/modules/aws-interruption-queue``) for the adapter's ``interruption_queue_url``.

A gang's capacity reservation ends with the run: ``reservation_end`` is its planned end plus
``planner.outputs.desired.RESERVATION_MARGIN``, the margin ``gpuplan provision`` gives the reservations it
makes, so a root applied for a gang and never destroyed does not pay for the reservation forever (AWS: a
``limited`` reservation; GCP: ``delete_at_time``; Azure gangs hold no reservation).

The output is a pure function of the plan and the options: every map is sorted and nothing carries the
time of writing, so a second run writes the same bytes and a review diff shows only real changes.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from models.errors import InputError
from models.plan import Plan, PlanDocument
from planner.outputs.desired import DEFAULT_LEAD_HOURS, period_of, plan_id_of
from planner.outputs.pools import TerraformPool, at_time, clouds_of, steady_state

__all__ = ["CLOUD_ROOTS", "Moment", "modules_dir", "write_roots"]

AWS_PROVIDER: Final = ">= 5.74, < 7.0"  # efa-only interfaces
GOOGLE_PROVIDER: Final = ">= 6.44.0, < 8.0.0"  # a reservation's delete_at_time
AZURERM_PROVIDER: Final = ">= 5.0, < 6.0"
TERRAFORM_VERSION: Final = ">= 1.9"  # the modules' validations refer to other variables


@dataclass(frozen=True)
class Moment:
    """Which fleet the roots hold: the plan at ``at`` (gangs within ``lead_hours`` included), or the
    steady state when ``at`` is None. ``reserving``: the clouds whose capacity reservations can hold a
    gang in its placement group (the providers' ``Capability.GANG_RESERVATIONS``, as provision follows)."""

    at: datetime | None
    lead_hours: float = DEFAULT_LEAD_HOURS
    reserving: frozenset[str] = frozenset()

    def describe(self, plan: Plan) -> str:
        if self.at is None:
            return (
                "the steady state: per offering, on demand the larger of its most committed nodes and its "
                "most non-spot nodes in any period, on spot its most spot nodes; training gangs are left "
                "out (they come and go: gpuplan provision, or a root written --at their start)"
            )
        period = period_of(plan.document, self.at)
        return (
            f"the plan at {self.at:%Y-%m-%dT%H:%M}Z (period {period}): that period's pools, and the gangs "
            f"running then or starting within {self.lead_hours:g} h"
        )


def modules_dir() -> Path:
    """``terraform/modules``: the source checkout's, else the copy installed with the package."""
    source = Path(__file__).resolve().parents[2] / "terraform" / "modules"
    if source.is_dir():
        return source
    from importlib.util import find_spec

    spec = find_spec("gpuplan_terraform")  # a data-only (namespace) package: its folders are the locations
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        installed = Path(location) / "modules"
        if installed.is_dir():
            return installed
    raise InputError(None, None, "the Terraform modules are missing from this installation of gpuplan")


def write_roots(
    plan: Plan,
    output: Path,
    moment: Moment,
    clouds: Sequence[str] | None = None,
    *,
    interruption_queue: bool = False,
) -> list[Path]:
    """One root per cloud the plan uses (or of ``clouds``), written into ``output/<cloud>``; the roots.
    ``interruption_queue``: the AWS root also holds the interruption queue of each of its regions."""
    used = clouds_of(plan)
    wanted = list(clouds) if clouds is not None else used
    for cloud in wanted:
        if cloud not in CLOUD_ROOTS:
            raise InputError(None, "--cloud", f"unknown cloud {cloud!r}; valid: {', '.join(CLOUD_ROOTS)}")
    roots = []
    for cloud in wanted:
        pools = (
            steady_state(plan, cloud)
            if moment.at is None
            else at_time(plan, cloud, moment.at, moment.lead_hours, reserve_gangs=cloud in moment.reserving)
        )
        root = output / cloud
        root.mkdir(parents=True, exist_ok=True)
        CLOUD_ROOTS[cloud].write(root, plan, moment, pools)
        if interruption_queue and cloud == "aws":
            _write_interruption_queues(root, plan, pools)
        roots.append(root)
    return roots


# ----------------------------------------------------------------------------------------------------------
# HCL, written the way `terraform fmt` leaves it


def _string(value: str) -> str:
    return json.dumps(value)


def _attributes(pairs: Iterable[tuple[str, str]], indent: int) -> list[str]:
    """``key = value`` lines with the ``=`` aligned, as terraform fmt aligns consecutive attributes."""
    pairs = list(pairs)
    width = max((len(k) for k, _ in pairs), default=0)
    pad = " " * indent
    return [f"{pad}{key.ljust(width)} = {value}" for key, value in pairs]


def _comment(text: str, width: int = 100) -> list[str]:
    """``text`` as ``#`` lines of at most ``width`` characters."""
    lines, line = [], "#"
    for word in text.split():
        if len(line) + 1 + len(word) > width:
            lines.append(line)
            line = "#"
        line += " " + word
    lines.append(line)
    return lines


@dataclass(frozen=True)
class _Variable:
    name: str
    type: str
    description: str
    default: str | None = None  # an HCL expression; None: required


class CloudRoot:
    """What differs between the clouds' roots: the module, the pool fields, providers, site settings."""

    cloud: str = ""
    module: str = ""
    type_field: str = "instance_type"  # the pool field that holds the offering's instance type
    site: tuple[_Variable, ...] = ()
    provider_source: str = ""
    provider_version: str = ""
    provider_name: str = ""
    notes: tuple[str, ...] = ()  # what the README says of this cloud's roots in particular
    ends_reservations: bool = True  # the module takes reservation_end (Azure's gangs hold no reservation)

    def write(self, root: Path, plan: Plan, moment: Moment, pools: list[TerraformPool]) -> None:
        plan_id = plan_id_of(plan.document)
        _copy_module(root, self.module)
        files = {
            "versions.tf": self.versions(),
            "main.tf": self.main(plan, moment, pools),
            "variables.tf": self.variables(),
            "outputs.tf": self.outputs(pools),
            "terraform.tfvars.json": self.tfvars(plan_id, pools),
            "site.auto.tfvars.example": self.site_example(),
            "README.md": self.readme(plan, moment, pools),
        }
        for name, text in files.items():
            (root / name).write_text(text, encoding="utf-8")

    # -- the files ---------------------------------------------------------------------------------------

    def versions(self) -> str:
        lines = [
            "terraform {",
            f"  required_version = {_string(TERRAFORM_VERSION)}",
            "",
            "  required_providers {",
            f"    {self.provider_name} = {{",
            *_attributes(
                [("source", _string(self.provider_source)), ("version", _string(self.provider_version))], 6
            ),
            "    }",
            "  }",
            "}",
        ]
        return "\n".join(lines) + "\n"

    def header(self, plan: Plan, moment: Moment) -> list[str]:
        document = plan.document
        return [
            *_comment(
                f"Written by gpuplan terraform from the plan of scenario {document.scenario} (created "
                f"{document.created:%Y-%m-%dT%H:%M:%SZ}; plan id {plan_id_of(document)}). Re-run gpuplan "
                "terraform rather than editing: the next run writes these files again."
            ),
            "#",
            *_comment(f"It holds {moment.describe(plan)}."),
        ]

    def main(self, plan: Plan, moment: Moment, pools: list[TerraformPool]) -> str:
        raise NotImplementedError

    def module_arguments(self) -> list[tuple[str, str]]:
        """The module's arguments: the pool's (the same on every cloud), then the cloud's own."""
        return [
            ("name", "each.key"),
            ("plan_id", "var.plan_id"),
            ("pool", "each.value.pool"),
            ("run", "each.value.run"),
            ("on_demand_nodes", "each.value.on_demand_nodes"),
            ("spot_nodes", "each.value.spot_nodes"),
            ("fabric", "each.value.fabric"),
            ("reserved_nodes", "each.value.reserved_nodes"),
            ("placement_group_name", "each.value.placement_group"),
            ("reservation_name", "each.value.reservation"),
            *([("reservation_end", "each.value.reservation_end")] if self.ends_reservations else []),
            *self.cloud_arguments(),
        ]

    def cloud_arguments(self) -> list[tuple[str, str]]:
        raise NotImplementedError

    def pool_fields(self) -> list[tuple[str, str]]:
        return [
            ("pool", "string"),
            ("run", "optional(string)"),
            ("region", "string"),
            (self.type_field, "string"),
            ("on_demand_nodes", "number"),
            ("spot_nodes", "number"),
            ("fabric", "optional(string)"),
            ("reserved_nodes", "number"),
            ("placement_group", "optional(string)"),
            ("reservation", "optional(string)"),
            *([("reservation_end", "optional(string)")] if self.ends_reservations else []),
        ]

    def variables(self) -> str:
        fields = _attributes(self.pool_fields(), 4)
        blocks = [
            [
                'variable "plan_id" {',
                '  description = "The plan every resource is tagged with (gpuplan-plan)."',
                "  type        = string",
                "}",
            ],
            [
                'variable "pools" {',
                '  description = "The plan\'s pools: one module instance each (terraform.tfvars.json)."',
                "  type = map(object({",
                *fields,
                "  }))",
                "}",
            ],
        ]
        for variable in self.site:
            body = [("description", _string(variable.description)), ("type", variable.type)]
            if variable.default is not None:
                body.append(("default", variable.default))
            blocks.append([f'variable "{variable.name}" {{', *_attributes(body, 2), "}"])
        return "\n\n".join("\n".join(b) for b in blocks) + "\n"

    def outputs(self, pools: list[TerraformPool]) -> str:
        modules = self.module_names(pools)
        value = modules[0] if len(modules) == 1 else f"merge({', '.join(modules)})"
        lines = [
            'output "pools" {',
            '  description = "Each pool\'s module outputs: placement group, groups, reservation, nodes."',
            f"  value       = {value}",
            "}",
        ]
        return "\n".join(lines) + "\n"

    def module_names(self, pools: list[TerraformPool]) -> list[str]:
        return ["module.pools"]

    def tfvars(self, plan_id: str, pools: list[TerraformPool]) -> str:
        data = {
            "plan_id": plan_id,
            "pools": {
                p.key: {
                    "pool": p.pool,
                    "run": p.run,
                    "region": p.region,
                    self.type_field: p.instance_type,
                    "on_demand_nodes": p.on_demand_nodes,
                    "spot_nodes": p.spot_nodes,
                    "fabric": p.fabric,
                    "reserved_nodes": p.reserved_nodes,
                    "placement_group": p.placement_group,
                    "reservation": p.reservation,
                    **({"reservation_end": _rfc3339(p.reservation_end)} if self.ends_reservations else {}),
                }
                for p in sorted(pools, key=lambda p: p.key)
            },
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def site_example(self) -> str:
        lines = ["# Site settings for this root: copy to site.auto.tfvars and fill in (no credentials here)."]
        for variable in self.site:
            default = variable.default if variable.default is not None else "<required>"
            lines += ["", f"# {variable.description}", f"# {variable.name} = {default}"]
        return "\n".join(lines) + "\n"

    def readme(self, plan: Plan, moment: Moment, pools: list[TerraformPool]) -> str:
        document = plan.document
        lines = [
            f"# gpuplan: {document.scenario} on {self.cloud}",
            "",
            f"Written by `gpuplan terraform` from the plan of scenario `{document.scenario}` (created "
            f"{document.created:%Y-%m-%dT%H:%M:%SZ}). It holds {moment.describe(plan)}.",
            "",
            "| pool | offering | on demand | spot | gang | fabric | reserved | why |",
            "|---|---|---:|---:|---|---|---:|---|",
        ]
        for p in sorted(pools, key=lambda p: p.key):
            reserved = f"{p.reserved_nodes or ''}"
            if p.reserved_nodes and p.reservation_end is not None and self.ends_reservations:
                reserved += f" until {p.reservation_end.astimezone(UTC):%Y-%m-%d %H:%M}Z"
            lines.append(
                f"| `{p.key}` | {p.offering} | {p.on_demand_nodes} | {p.spot_nodes} | {p.run or ''} | "
                f"{p.fabric or ''} | {reserved} | {p.why} |"
            )
        if not pools:
            lines.append("| (none) | | | | | | | the plan holds no nodes on this cloud then |")
        purchases = [
            c for c in document.commitments if not c.existing and c.offering.split(":", 1)[0] == self.cloud
        ]
        lines += ["", *self.notes] if self.notes else []
        lines += [
            "",
            "## Commitments to buy (decisions, not resources)",
            "",
            "The plan buys these commitments; Terraform does not (a 1- or 3-year obligation is a decision "
            "for a person, made in the cloud's billing console or API):",
            "",
        ]
        if purchases:
            lines += [
                "| offering | term | nodes | from | cost in the horizon | owed after it |",
                "|---|---|---:|---|---:|---:|",
            ]
            for c in purchases:
                start = f"{c.start:%Y-%m-%d}" if c.start else ""
                lines.append(
                    f"| {c.offering} | {c.term} | {c.nodes} | {start} | ${c.cost_in_horizon_usd:,.0f} | "
                    f"${c.obligation_beyond_horizon_usd:,.0f} |"
                )
        else:
            lines.append("None on this cloud.")
        lines += _savings_plan_lines(document, self.cloud)
        lines += [
            "",
            "## Use",
            "",
            "```",
            "cp site.auto.tfvars.example site.auto.tfvars   # then fill in the site settings",
            "terraform init",
            "terraform plan",
            "```",
            "",
            "`terraform.tfvars.json` holds the pools; `modules/` the module they instantiate. Provider "
            "blocks carry no credentials: the provider finds its own. Hold a plan's fleet either with this "
            "root or with `gpuplan provision`, not both: they tag the same pools.",
        ]
        return "\n".join(lines) + "\n"


def _rfc3339(when: datetime | None) -> str | None:
    """``when`` as the modules' ``reservation_end`` takes it: RFC 3339 in UTC, to the second."""
    return None if when is None else f"{when.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def _copy_module(root: Path, module: str) -> None:
    """``terraform/modules/<module>`` copied into ``root/modules`` (its files; any old copy replaced)."""
    module_copy = root / "modules" / module
    if module_copy.exists():
        shutil.rmtree(module_copy)
    source = modules_dir() / module
    if not source.is_dir():
        raise InputError(None, None, f"the Terraform module {module} is missing from {modules_dir()}")
    module_copy.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if path.is_file():
            (module_copy / path.name).write_bytes(path.read_bytes())


INTERRUPTION_QUEUE_MODULE: Final = "aws-interruption-queue"


def _write_interruption_queues(root: Path, plan: Plan, pools: list[TerraformPool]) -> None:
    """``interruptions.tf``: per region of the AWS root, an SQS queue fed by EventBridge rules for EC2's
    spot interruption warnings, rebalance recommendations and state changes (EventBridge events are
    regional), and their URLs as an output, for the provider settings' ``interruption_queue_url``."""
    _copy_module(root, INTERRUPTION_QUEUE_MODULE)
    aws = _AWS_ROOT
    regions = aws.regions(pools)
    blocks = [
        _comment(
            "The interruption queues: EC2's spot interruption warnings, rebalance recommendations and "
            "state changes, sent by EventBridge rules to one SQS queue per region. Put the output "
            "interruption_queue_urls in the provider settings (aws.interruption_queue_url)."
        )
    ]
    for region in regions:
        alias = aws._alias(region)
        blocks.append(
            [
                f'module "interruptions_{alias}" {{',
                f"  source = {_string(f'./modules/{INTERRUPTION_QUEUE_MODULE}')}",
                "  providers = {",
                f"    aws = aws.{alias}",
                "  }",
                "",
                *_attributes(
                    [("name", 'substr("gpuplan-${var.plan_id}", 0, 60)'), ("plan_id", "var.plan_id")], 2
                ),
                "}",
            ]
        )
    urls = [(_string(r), f"module.interruptions_{aws._alias(r)}.queue_url") for r in regions]
    blocks.append(
        [
            'output "interruption_queue_urls" {',
            '  description = "The interruption queue of each region (aws.interruption_queue_url)."',
            "  value = {",
            *_attributes(urls, 4),
            "  }",
            "}",
        ]
    )
    text = "\n\n".join("\n".join(b) for b in blocks) + "\n"
    (root / "interruptions.tf").write_text(text, encoding="utf-8")


class _AwsRoot(CloudRoot):
    cloud = "aws"
    module = "aws-gpu-pool"
    type_field = "instance_type"
    provider_name = "aws"
    provider_source = "hashicorp/aws"
    provider_version = AWS_PROVIDER
    site = (
        _Variable("image_id", "map(string)", 'AMI id per region, e.g. { us-east-1 = "ami-0123..." }.'),
        _Variable(
            "subnet_ids", "map(list(string))", "Subnet ids per region; a gang uses the first (one AZ)."
        ),
        _Variable("security_group_ids", "list(string)", "Security groups of every node.", "[]"),
        _Variable("key_name", "string", "EC2 key pair of the nodes (null: none).", "null"),
    )

    @staticmethod
    def _alias(region: str) -> str:
        return region.replace("-", "_")

    def regions(self, pools: list[TerraformPool]) -> list[str]:
        return sorted({p.region for p in pools})

    def module_names(self, pools: list[TerraformPool]) -> list[str]:
        return [f"module.{self._alias(r)}" for r in self.regions(pools)] or ["{}"]

    def main(self, plan: Plan, moment: Moment, pools: list[TerraformPool]) -> str:
        blocks = [self.header(plan, moment)]
        for region in self.regions(pools):
            alias = self._alias(region)
            blocks.append(
                [
                    'provider "aws" {',
                    *_attributes([("alias", _string(alias)), ("region", _string(region))], 2),
                    "}",
                ]
            )
        for region in self.regions(pools):
            alias = self._alias(region)
            arguments = [
                ("source", _string(f"./modules/{self.module}")),
                (
                    "for_each",
                    f"{{ for name, pool in var.pools : name => pool if pool.region == {_string(region)} }}",
                ),
            ]
            blocks.append(
                [
                    f'module "{alias}" {{',
                    *_attributes(arguments, 2),
                    "  providers = {",
                    f"    aws = aws.{alias}",
                    "  }",
                    "",
                    *_attributes(self.module_arguments(), 2),
                    "}",
                ]
            )
        return "\n\n".join("\n".join(b) for b in blocks) + "\n"

    def cloud_arguments(self) -> list[tuple[str, str]]:
        return [
            ("instance_type", "each.value.instance_type"),
            ("image_id", "var.image_id[each.value.region]"),
            ("subnet_ids", "var.subnet_ids[each.value.region]"),
            ("security_group_ids", "var.security_group_ids"),
            ("key_name", "var.key_name"),
        ]


class _SingleModuleRoot(CloudRoot):
    """GCP and Azure: one provider for every region, so one module block over all pools."""

    provider_block: tuple[str, ...] = ()

    def main(self, plan: Plan, moment: Moment, pools: list[TerraformPool]) -> str:
        blocks = [self.header(plan, moment), list(self.provider_block)]
        arguments = [("source", _string(f"./modules/{self.module}")), ("for_each", "var.pools")]
        blocks.append(
            [
                'module "pools" {',
                *_attributes(arguments, 2),
                "",
                *_attributes(self.module_arguments(), 2),
                "}",
            ]
        )
        return "\n\n".join("\n".join(b) for b in blocks) + "\n"


class _GcpRoot(_SingleModuleRoot):
    cloud = "gcp"
    module = "gcp-gpu-pool"
    type_field = "machine_type"
    provider_name = "google"
    provider_source = "hashicorp/google"
    provider_version = GOOGLE_PROVIDER
    provider_block = ('provider "google" {', "  project = var.project", "}")
    site = (
        _Variable("project", "string", "The Google Cloud project of the fleet."),
        _Variable("zones", "map(string)", "Zone per region (a region not listed uses <region>-a).", "{}"),
        _Variable("network", "string", "VPC network of the primary NIC.", '"default"'),
        _Variable("subnetwork", "string", "Subnetwork of the primary NIC (null: the network's own).", "null"),
        _Variable(
            "gpudirect_networks",
            "list(object({ network = string, subnetwork = string }))",
            "The extra NICs of a3 gangs: 4 for GPUDirect-TCPX (a3-highgpu-8g), 8 for TCPXO (a3-megagpu-8g).",
            "[]",
        ),
        _Variable(
            "rdma_networks",
            "list(object({ network = string, subnetwork = string }))",
            "The 8 MRDMA NICs of A3 Ultra gangs (GPUDirect-RDMA), on a network with an RDMA profile.",
            "[]",
        ),
    )

    def cloud_arguments(self) -> list[tuple[str, str]]:
        return [
            ("project", "var.project"),
            ("region", "each.value.region"),
            ("zone", 'lookup(var.zones, each.value.region, "${each.value.region}-a")'),
            ("machine_type", "each.value.machine_type"),
            ("network", "var.network"),
            ("subnetwork", "var.subnetwork"),
            ("gpudirect_networks", "var.gpudirect_networks"),
            ("rdma_networks", "var.rdma_networks"),
        ]


class _AzureRoot(_SingleModuleRoot):
    cloud = "azure"
    notes = (
        "Gangs get no capacity reservation here: Azure does not let a scale set join a proximity placement "
        "group and a capacity reservation group at once (gpuplan provision does the same).",
    )
    ends_reservations = False  # no gang holds a reservation here, so none needs an end
    module = "azure-gpu-pool"
    type_field = "vm_size"
    provider_name = "azurerm"
    provider_source = "hashicorp/azurerm"
    provider_version = AZURERM_PROVIDER
    provider_block = (
        'provider "azurerm" {',
        "  subscription_id = var.subscription_id",
        "  features {}",
        "}",
    )
    site = (
        _Variable("subscription_id", "string", "The Azure subscription of the fleet (an id, not a secret)."),
        _Variable("resource_group_name", "string", "The resource group every resource goes in."),
        _Variable("subnet_id", "string", "Resource id of the subnet of every node."),
        _Variable("ssh_public_key", "string", "The public SSH key of the nodes' admin user."),
        _Variable("admin_username", "string", "The nodes' admin user.", '"gpuplan"'),
    )

    def cloud_arguments(self) -> list[tuple[str, str]]:
        return [
            ("resource_group_name", "var.resource_group_name"),
            ("location", "each.value.region"),
            ("vm_size", "each.value.vm_size"),
            ("subnet_id", "var.subnet_id"),
            ("ssh_public_key", "var.ssh_public_key"),
            ("admin_username", "var.admin_username"),
        ]


#: The root writer of each cloud.
_AWS_ROOT: Final = _AwsRoot()
CLOUD_ROOTS: Final[dict[str, CloudRoot]] = {"aws": _AWS_ROOT, "azure": _AzureRoot(), "gcp": _GcpRoot()}


def _savings_plan_lines(document: PlanDocument, cloud: str) -> list[str]:
    """The README's savings plans on ``cloud`` (issue 38): a commitment of dollars per hour that discounts
    on-demand nodes, bought in the billing console or API; no Terraform resource, and the pools above
    already hold the on-demand nodes it covers. Nothing for a plan without them (its README unchanged)."""
    plans = [sp for sp in document.savings_plans if any(o.split(":", 1)[0] == cloud for o in sp.rates)]
    if not plans:
        return []
    lines = [
        "",
        "## Savings plans (billing, not resources)",
        "",
        "A savings plan commits dollars per hour and discounts the on-demand nodes it covers, which the "
        "pools above launch as on demand. Terraform does not buy or hold it: it is bought in the cloud's "
        "billing console or Savings Plans API (GCP resource-based committed use: gcloud compute "
        "commitments create).",
        "",
        "| savings plan | kind | scope | term | $/h | from | until | held | cost in the horizon "
        "| owed after it |",
        "|---|---|---|---|---:|---|---|---|---:|---:|",
    ]
    for sp in plans:
        held = "yes" if sp.existing else "no: to buy"
        lines.append(
            f"| {sp.name} | {sp.kind} | {sp.scope} | {sp.term} | ${sp.usd_per_hour:,.2f} | "
            f"{sp.start:%Y-%m-%d} | {sp.end:%Y-%m-%d} | {held} | ${sp.cost_in_horizon_usd:,.0f} | "
            f"${sp.obligation_beyond_horizon_usd:,.0f} |"
        )
    return lines
