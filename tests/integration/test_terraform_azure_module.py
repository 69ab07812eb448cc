"""terraform/modules/azure-gpu-pool: the HCL parses, its resources use only attribute paths the azurerm
documentation lists (terraform_allowlist_azure.py), its variables are typed, described and validated, and,
where the ``terraform`` binary is on the PATH, ``fmt -check`` passes and Terraform itself evaluates the
variables' validations and the module's decisions (``locals.tf``) for each kind of pool.

There is no azurerm provider offline, so ``terraform validate`` cannot run on the module. The terraform
tests below copy only ``variables.tf`` and ``locals.tf`` (which refer to variables alone) into a scratch
root with no provider: they need the binary but no provider mirror, so they skip only when the binary is
missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hcl_walk import attribute_paths, blocks, check_allowed, load
from terraform_allowlist_azure import ALLOWED

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "terraform" / "modules" / "azure-gpu-pool"
TF_FILES = sorted(MODULE.glob("*.tf"))
TERRAFORM = shutil.which("terraform")
needs_terraform = pytest.mark.skipif(TERRAFORM is None, reason="no terraform binary on the PATH")

COMMON = {
    "name",
    "placement_group_name",
    "reservation_name",
    "plan_id",
    "pool",
    "run",
    "on_demand_nodes",
    "spot_nodes",
    "fabric",
    "reserved_nodes",
    "tags",
}
AZURE = {
    "resource_group_name",
    "location",
    "vm_size",
    "subnet_id",
    "admin_username",
    "ssh_public_key",
    "source_image",
    "zones",
    "os_disk_storage_account_type",
    "os_disk_size_gb",
    "accelerated_networking",
}
UNVALIDATED = {"accelerated_networking"}  # a bool: no wrong value
RESOURCES = {
    "azurerm_proximity_placement_group",
    "azurerm_linux_virtual_machine_scale_set",
    "azurerm_capacity_reservation_group",
    "azurerm_capacity_reservation",
}
SUBNET = "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes"
ND = "Standard_ND96isr_H100_v5"
BASE: dict[str, Any] = {
    "name": "pool-a",
    "plan_id": "mixed-fleet",
    "pool": "azure-eastus-nd-h100",
    "resource_group_name": "gpuplan",
    "location": "eastus",
    "vm_size": ND,
    "subnet_id": SUBNET,
    "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIgpuplantest gpuplan@test",
}


def variables() -> dict[str, dict[str, Any]]:
    return {name: body for name, _, body in blocks(load(MODULE / "variables.tf"), "variable")}


def resource(type_: str) -> dict[str, Any]:
    (body,) = [b for t, _, b in blocks(load(MODULE / "main.tf"), "resource") if t == type_]
    return body


# -- parsing and the allow-list -------------------------------------------------------------------------


def test_module_has_the_conventional_files_and_each_parses() -> None:
    names = {p.name for p in MODULE.iterdir()}
    assert {"versions.tf", "variables.tf", "main.tf", "outputs.tf", "README.md"} <= names
    for path in TF_FILES:
        assert isinstance(load(path), dict), path


def test_resources_use_only_documented_attribute_paths() -> None:
    found = attribute_paths(TF_FILES)
    assert check_allowed(found, ALLOWED) == []
    assert {t for t, p in found if p == ""} == RESOURCES
    # the paths the brief names are really there (a deleted attribute would pass the allow-list)
    vmss = {p for t, p in found if t == "azurerm_linux_virtual_machine_scale_set"}
    assert {
        "instances",
        "sku",
        "priority",
        "eviction_policy",
        "max_bid_price",
        "proximity_placement_group_id",
        "single_placement_group",
        "capacity_reservation_group_id",
        "upgrade_mode",
        "overprovision",
        "network_interface.ip_configuration.subnet_id",
        "tags",
    } <= vmss
    assert ("azurerm_proximity_placement_group", "allowed_vm_sizes") in found
    assert {
        ("azurerm_capacity_reservation", "sku.name"),
        ("azurerm_capacity_reservation", "sku.capacity"),
    } <= found


def test_a_misspelt_attribute_or_type_is_caught(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tf"
    bad.write_text(
        'resource "azurerm_linux_virtual_machine_scale_set" "x" {\n'
        '  name          = "x"\n'
        "  max_bid       = -1\n"  # max_bid_price
        "  network_interface {\n"
        '    name = "nic"\n'
        "    ip_configuration {\n"
        '      subnet = "s"\n'  # subnet_id
        "    }\n"
        "  }\n"
        '  admin_password = "hunter2"\n'  # documented, but no credentials in these modules
        "}\n"
        'resource "azurerm_proximity_group" "y" {\n'  # azurerm_proximity_placement_group
        '  name = "y"\n'
        "}\n",
        encoding="utf-8",
    )
    assert check_allowed(attribute_paths([bad]), ALLOWED) == [
        "unknown resource type azurerm_proximity_group",
        "azurerm_linux_virtual_machine_scale_set: unknown attribute admin_password",
        "azurerm_linux_virtual_machine_scale_set: unknown attribute max_bid",
        "azurerm_linux_virtual_machine_scale_set: unknown attribute "
        "network_interface.ip_configuration.subnet",
    ]


def test_each_allow_list_entry_names_its_documentation_page_and_commit() -> None:
    text = (Path(__file__).parent / "terraform_allowlist_azure.py").read_text(encoding="utf-8")
    for type_ in ALLOWED:
        page = type_.removeprefix("azurerm_")
        pattern = rf"# website/docs/r/{page}\.html\.markdown @ [0-9a-f]{{40}}\n\s+\"{type_}\""
        assert re.search(pattern, text), type_


# -- the module's shape ---------------------------------------------------------------------------------


def test_variables_are_typed_described_and_validated() -> None:
    found = variables()
    assert set(found) == COMMON | AZURE
    for name, body in found.items():
        assert body.get("type"), name
        assert len(body.get("description", "")) > 10, name
        if name not in UNVALIDATED:
            assert body.get("validation"), f"{name} has no validation block"
        for rule in body.get("validation", []):
            assert rule["condition"] and rule["error_message"], name
    assert not found["ssh_public_key"].get("sensitive")  # a public key; the module takes no password
    defaults = {n: b["default"] for n, b in found.items() if "default" in b}
    assert defaults["run"] is None and defaults["fabric"] is None and defaults["zones"] == []
    assert defaults["on_demand_nodes"] == defaults["spot_nodes"] == defaults["reserved_nodes"] == 0
    assert defaults["admin_username"] == "gpuplan" and defaults["tags"] == {}
    assert defaults["source_image"]["offer"] == "ubuntu-hpc"


def test_outputs_are_described_and_cover_the_interface() -> None:
    outputs = {name: body for name, _, body in blocks(load(MODULE / "outputs.tf"), "output")}
    assert {
        "proximity_placement_group_id",
        "scale_set_ids",
        "on_demand_scale_set_id",
        "spot_scale_set_id",
        "capacity_reservation_id",
        "node_counts",
    } <= set(outputs)
    for name, body in outputs.items():
        assert len(body.get("description", "")) > 10, name


#: When the azurerm provider's schema got each attribute the module sets that came late (the
#: hashicorp/terraform-provider-azurerm changelogs: CHANGELOG-v3.md, the 5.0 upgrade guide; PR numbers).
#: 4.x's scale set called the first one ``network_interface.enable_accelerated_networking`` (renamed in
#: 5.0.0 by #32779; checked in the provider's source at the v4.60.0 and v5.0.0 tags).
VMSS = "azurerm_linux_virtual_machine_scale_set"
FIRST_RELEASE: dict[tuple[str, str], tuple[int, int, int]] = {
    (VMSS, "network_interface.accelerated_networking_enabled"): (5, 0, 0),
    ("azurerm_proximity_placement_group", "allowed_vm_sizes"): (3, 38, 0),  # #19675
    ("azurerm_proximity_placement_group", "zone"): (3, 38, 0),  # #19675
    (VMSS, "capacity_reservation_group_id"): (3, 14, 0),  # #17530
    ("azurerm_capacity_reservation_group", ""): (3, 10, 0),  # new resource, #16464
    ("azurerm_capacity_reservation", ""): (3, 10, 0),  # new resource, #16464
}


def test_versions_pin_azurerm_from_the_first_release_with_every_attribute_to_the_next_major() -> None:
    (terraform,) = load(MODULE / "versions.tf")["terraform"]
    assert terraform["required_version"] == ">= 1.9"
    (providers,) = terraform["required_providers"]
    assert providers["azurerm"]["source"] == "hashicorp/azurerm"
    # the table is about what the module uses: each attribute is really there
    assert set(FIRST_RELEASE) <= attribute_paths(TF_FILES)
    first = max(FIRST_RELEASE.values())
    assert first == (5, 0, 0)
    lower = ".".join(map(str, first[:2]))
    assert providers["azurerm"]["version"] == f">= {lower}, < {first[0] + 1}.0"
    # the module never names the 4.x spelling, which 5.x refuses
    assert not [p for _, p in attribute_paths(TF_FILES) if p.endswith("enable_accelerated_networking")]
    text = "\n".join(p.read_text(encoding="utf-8") for p in TF_FILES)
    assert "PR #32779" in (MODULE / "versions.tf").read_text(encoding="utf-8")  # the why, beside the pin
    for path in TF_FILES:
        assert "provider" not in load(path), path
    lowered = text.lower()
    for word in ("admin_password", "client_secret", "subscription_id", "access_key"):
        assert word not in lowered


def test_scale_set_settings_of_every_kind() -> None:
    vmss = resource("azurerm_linux_virtual_machine_scale_set")
    assert vmss["for_each"] == "${local.scale_sets}"
    assert vmss["upgrade_mode"] == "Manual" and vmss["overprovision"] is False
    assert vmss["disable_password_authentication"] is True
    assert vmss["sku"] == "${var.vm_size}" and vmss["instances"] == "${each.value.instances}"
    assert vmss["depends_on"] == ["${azurerm_capacity_reservation.this}"]
    # each kind's decisions (locals.tf, evaluated by the terraform tests below) reach the scale set
    for attribute in ("priority", "eviction_policy", "max_bid_price", "single_placement_group", "zones"):
        assert vmss[attribute] == f"${{each.value.{attribute}}}", attribute
    assert vmss["proximity_placement_group_id"].startswith("${each.value.placement_group ?")
    assert vmss["capacity_reservation_group_id"].startswith("${each.value.reservation ?")
    ppg = resource("azurerm_proximity_placement_group")
    assert ppg["count"] == "${local.gang ? 1 : 0}" and ppg["allowed_vm_sizes"] == ["${var.vm_size}"]
    for type_ in RESOURCES - {"azurerm_proximity_placement_group"}:
        assert "local.reserved" in resource(type_).get("count", "local.reserved"), type_
    for type_ in RESOURCES:
        assert resource(type_)["tags"] == "${local.tags}", type_


def test_readme_lists_every_input_and_output() -> None:
    readme = (MODULE / "README.md").read_text(encoding="utf-8")
    outputs = {name for name, _, _ in blocks(load(MODULE / "outputs.tf"), "output")}
    for name in set(variables()) | outputs:
        assert f"| `{name}` |" in readme, name


# -- with the terraform binary --------------------------------------------------------------------------


def terraform(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CLI_CONFIG_FILE"}  # it names a missing file
    env |= {"TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"}
    assert TERRAFORM is not None
    return subprocess.run(
        [TERRAFORM, *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=60
    )


@needs_terraform
def test_terraform_fmt_check() -> None:
    done = terraform(MODULE, "fmt", "-check", "-recursive", "-no-color")
    assert done.returncode == 0, f"not in terraform fmt style: {done.stdout}{done.stderr}"


@pytest.fixture(scope="module")
def decisions_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A provider-less root made of the module's variables.tf and locals.tf, initialised."""
    if TERRAFORM is None:
        pytest.skip("no terraform binary on the PATH")
    root = tmp_path_factory.mktemp("azure-decisions")
    for name in ("variables.tf", "locals.tf"):
        shutil.copy(MODULE / name, root / name)
    done = terraform(root, "init", "-backend=false", "-input=false", "-no-color")
    assert done.returncode == 0, done.stderr
    yield root


def decide(root: Path, **over: Any) -> dict[str, Any]:
    """local.scale_sets and local.tags as Terraform evaluates them for BASE + over."""
    (root / "case.tfvars.json").write_text(json.dumps(BASE | over), encoding="utf-8")
    expr = "jsonencode({scale_sets = local.scale_sets, tags = local.tags, gang = local.gang})"
    done = terraform(root, "console", "-no-color", "-var-file=case.tfvars.json", stdin=expr + "\n")
    assert done.returncode == 0 and "Error" not in done.stderr, done.stderr
    decided: dict[str, Any] = json.loads(json.loads(done.stdout.strip()))
    return decided


def rejected(root: Path, **over: Any) -> str:
    """The validation errors ``terraform plan`` reports for BASE + over ("" when it accepts them)."""
    (root / "case.tfvars.json").write_text(json.dumps(BASE | over), encoding="utf-8")
    done = terraform(root, "plan", "-no-color", "-input=false", "-var-file=case.tfvars.json")
    return "" if done.returncode == 0 else " ".join(done.stderr.split())


@needs_terraform
def test_spot_pool_is_one_spot_scale_set(decisions_root: Path) -> None:
    got = decide(decisions_root, spot_nodes=3, zones=["1", "2"])
    assert got["scale_sets"] == {
        "spot": {
            "name": "pool-a-spot",
            "instances": 3,
            "priority": "Spot",
            "eviction_policy": "Delete",
            "max_bid_price": -1,
            "placement_group": False,
            "reservation": False,
            "single_placement_group": False,
            "zones": ["1", "2"],
        }
    }
    assert got["tags"] == {
        "gpuplan-plan": "mixed-fleet",
        "gpuplan-pool": "azure-eastus-nd-h100",
        "gpuplan-managed-by": "terraform",
    }


@needs_terraform
def test_mixed_reserved_pool_is_two_scale_sets_and_on_demand_launches_into_the_reservation(
    decisions_root: Path,
) -> None:
    got = decide(decisions_root, on_demand_nodes=2, spot_nodes=5, reserved_nodes=2, zones=["2", "3"])
    sets = got["scale_sets"]
    assert set(sets) == {"on-demand", "spot"}
    od, spot = sets["on-demand"], sets["spot"]
    assert (od["priority"], od["instances"], od["eviction_policy"], od["max_bid_price"]) == (
        "Regular",
        2,
        None,
        None,
    )
    assert od["reservation"] is True and od["single_placement_group"] is False and od["zones"] == ["2"]
    assert (spot["priority"], spot["instances"], spot["reservation"], spot["zones"]) == (
        "Spot",
        5,
        False,
        ["2", "3"],
    )


@needs_terraform
def test_on_demand_only_pool_has_no_spot_scale_set(decisions_root: Path) -> None:
    got = decide(decisions_root, on_demand_nodes=4)
    assert list(got["scale_sets"]) == ["on-demand"]
    assert got["scale_sets"]["on-demand"]["zones"] == [] and got["gang"] is False


@needs_terraform
def test_infiniband_gang_is_one_scale_set_in_the_placement_group(decisions_root: Path) -> None:
    got = decide(
        decisions_root,
        run="llm-pretrain",
        fabric="infiniband",
        spot_nodes=8,
        zones=["3", "1"],
        tags={"team": "ml"},
    )
    assert got["gang"] is True
    (kind,) = got["scale_sets"]
    gang = got["scale_sets"][kind]
    assert kind == "spot" and gang["instances"] == 8 and gang["priority"] == "Spot"
    assert (
        gang["placement_group"] is True and gang["single_placement_group"] is True and gang["zones"] == ["3"]
    )
    assert got["tags"] == {
        "team": "ml",
        "gpuplan-plan": "mixed-fleet",
        "gpuplan-pool": "azure-eastus-nd-h100",
        "gpuplan-managed-by": "terraform",
        "gpuplan-run": "llm-pretrain",
    }


@needs_terraform
def test_gpuplan_tags_win_over_extra_tags(decisions_root: Path) -> None:
    got = decide(decisions_root, on_demand_nodes=1, tags={"gpuplan-pool": "other", "cost-center": "42"})
    assert got["tags"] == {
        "cost-center": "42",
        "gpuplan-plan": "mixed-fleet",
        "gpuplan-pool": "azure-eastus-nd-h100",
        "gpuplan-managed-by": "terraform",
    }


@needs_terraform
@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"name": "Pool_A"}, "name must start with a lower-case letter"),
        ({"name": "p" * 42}, "name must start with a lower-case letter"),
        ({"on_demand_nodes": -1}, "on_demand_nodes must be a whole number"),
        ({"spot_nodes": 1.5}, "spot_nodes must be a whole number"),
        (
            {"run": "r", "on_demand_nodes": 2, "spot_nodes": 2},
            "A gang (run set) is all spot or all on-demand",
        ),
        ({"run": "r", "on_demand_nodes": 101}, "at most 100 nodes per kind"),
        ({"fabric": "efa", "on_demand_nodes": 1}, 'fabric must be null or "infiniband"'),
        ({"fabric": "infiniband", "vm_size": "Standard_NC24ads_A100_v4"}, "needs an RDMA ND size"),
        (
            {"reserved_nodes": 2, "run": "r", "on_demand_nodes": 2},
            "a capacity reservation cannot serve a gang",
        ),
        ({"reserved_nodes": 2, "fabric": "infiniband", "on_demand_nodes": 2}, "cannot serve a gang"),
        ({"reserved_nodes": 0.5}, "reserved_nodes must be a whole number"),
        ({"zones": ["4"]}, "zones must be distinct values"),
        ({"zones": ["1", "1"]}, "zones must be distinct values"),
        ({"subnet_id": "subnet-123"}, "subnet_id must be a subnet's ARM id"),
        ({"ssh_public_key": "hunter2"}, "ssh_public_key must be an OpenSSH public key"),
        ({"admin_username": "root"}, "admin_username must be a Linux user name"),
        ({"vm_size": "nd96"}, "vm_size must be an Azure size name"),
        ({"tags": {f"k{i}": "v" for i in range(47)}}, "at most 46 extra tags"),
    ],
)
def test_validation_rejects(decisions_root: Path, over: dict[str, Any], message: str) -> None:
    assert message in rejected(decisions_root, **over)


@needs_terraform
def test_validation_accepts_a_plain_and_a_gang_pool(decisions_root: Path) -> None:
    # the rejections above are not a root that rejects everything
    assert rejected(decisions_root, on_demand_nodes=2, spot_nodes=2, reserved_nodes=1, zones=["1"]) == ""
    assert rejected(decisions_root, run="r", fabric="infiniband", on_demand_nodes=100) == ""
