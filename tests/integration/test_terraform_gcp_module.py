"""terraform/modules/gcp-gpu-pool: parsed with python-hcl2 and held to the google provider's documentation.

There is no google provider in the local mirror, so ``terraform validate`` cannot run on this module.
What is checked instead:

- every ``.tf`` parses, uses only the five google resource types of the module and only attribute paths
  of the hand-written allow-list (``terraform_allowlist_gcp.ALLOWED``, from the provider's doc pages);
  a misspelt attribute in a scratch file is caught (the check can fail);
- every variable is typed and described, every variable a caller can get wrong has a ``validation``
  block, every output is described, provider versions are pinned loosely and the module holds no
  provider block and no credentials;
- with the ``terraform`` binary: ``fmt -check``, and the module's ``variables.tf`` + ``locals.tf`` (which
  refer to no resource, so they need no provider) applied with a probe output in a scratch root: the
  validations reject wrong pools with their messages, and each variant (spot / on-demand / mixed,
  gang, fabric, reservation) comes out as the groups, instances, NICs and scheduling it should.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hcl_walk import attribute_paths, blocks, check_allowed, load
from terraform_allowlist_gcp import ALLOWED

MODULE = Path(__file__).resolve().parents[2] / "terraform" / "modules" / "gcp-gpu-pool"
TF_FILES = sorted(MODULE.glob("*.tf"))
TERRAFORM = shutil.which("terraform")

RESOURCE_TYPES = {
    "google_compute_resource_policy",
    "google_compute_instance_template",
    "google_compute_instance_group_manager",
    "google_compute_instance",
    "google_compute_reservation",
}
COMMON_VARIABLES = {
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
    "reservation_end",
    "labels",
}
GCP_VARIABLES = {
    "project",
    "region",
    "zone",
    "machine_type",
    "image",
    "boot_disk_gb",
    "boot_disk_type",
    "network",
    "subnetwork",
    "gpudirect_networks",
    "rdma_networks",
}
# subnetwork is free (null or any name); every other input has a wrong value GCP would reject later.
VALIDATED = COMMON_VARIABLES | (GCP_VARIABLES - {"subnetwork"})
OUTPUTS = {
    "placement_policy_id",
    "placement_policy_name",
    "reservation_id",
    "reservation_name",
    "instance_template_ids",
    "instance_group_manager_ids",
    "instance_ids",
    "node_counts",
}

needs_terraform = pytest.mark.skipif(
    TERRAFORM is None,
    reason="no terraform binary on PATH (fmt and the variables/locals evaluation need it; no provider)",
)


def _variables() -> dict[str, dict[str, Any]]:
    return {name: body for name, _, body in blocks(load(MODULE / "variables.tf"), "variable")}


def _resources() -> dict[tuple[str, str], dict[str, Any]]:
    return {(type_, name): body for type_, name, body in blocks(load(MODULE / "main.tf"), "resource")}


# --------------------------------------------------------------------------------------------------
# Parsing and the allow-list
# --------------------------------------------------------------------------------------------------


def test_module_has_the_community_layout() -> None:
    names = {p.name for p in MODULE.iterdir()}
    assert {"versions.tf", "variables.tf", "main.tf", "outputs.tf", "README.md"} <= names
    readme = (MODULE / "README.md").read_text(encoding="utf-8")
    for heading in ("## Inputs", "## Outputs", "## Example"):
        assert heading in readme
    # Every variable and output appears in the README's tables.
    for name in set(_variables()) | OUTPUTS:
        assert f"`{name}`" in readme, name


@pytest.mark.parametrize("path", TF_FILES, ids=lambda p: p.name)
def test_every_file_parses(path: Path) -> None:
    assert isinstance(load(path), dict)


def test_resource_types_and_attribute_paths_are_in_the_allow_list() -> None:
    found = attribute_paths(TF_FILES)
    assert {t for t, p in found if p == ""} == RESOURCE_TYPES
    assert check_allowed(found, ALLOWED) == []


def test_allow_list_catches_a_misspelt_attribute(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tf"
    bad.write_text(
        """
resource "google_compute_instance_template" "t" {
  machine_type = "a3-highgpu-8g"
  scheduling {
    provisioning_modle = "SPOT"
  }
  dynamic "network_interface" {
    for_each = []
    content {
      nictype = "GVNIC"
    }
  }
}

resource "google_compute_resource_policy" "p" {
  name = "p"
  group_placement_policy {
    colocation = "COLLOCATED"
  }
}

resource "google_compute_instance_groups_manager" "m" {
  name = "m"
}
""",
        encoding="utf-8",
    )
    problems = check_allowed(attribute_paths([bad]), ALLOWED)
    assert problems == [
        "unknown resource type google_compute_instance_groups_manager",
        "google_compute_instance_template: unknown attribute network_interface.nictype",
        "google_compute_instance_template: unknown attribute scheduling.provisioning_modle",
        "google_compute_resource_policy: unknown attribute group_placement_policy.colocation",
    ]


def test_a_block_in_the_wrong_resource_is_caught(tmp_path: Path) -> None:
    # group_placement_policy belongs to the resource policy, not to the instance.
    bad = tmp_path / "wrong.tf"
    bad.write_text(
        'resource "google_compute_instance" "i" {\n  group_placement_policy {\n    vm_count = 2\n  }\n}\n',
        encoding="utf-8",
    )
    assert check_allowed(attribute_paths([bad]), ALLOWED) == [
        "google_compute_instance: unknown attribute group_placement_policy",
        "google_compute_instance: unknown attribute group_placement_policy.vm_count",
    ]


# --------------------------------------------------------------------------------------------------
# Interface: variables, outputs, versions
# --------------------------------------------------------------------------------------------------


def test_variables_are_the_interface_typed_and_described() -> None:
    variables = _variables()
    assert set(variables) == COMMON_VARIABLES | GCP_VARIABLES
    for name, body in variables.items():
        assert body.get("type"), f"{name} has no type"
        assert str(body.get("description", "")).strip(), f"{name} has no description"


def test_variables_that_can_be_wrong_are_validated() -> None:
    variables = _variables()
    validated = {name for name, body in variables.items() if body.get("validation")}
    assert validated == VALIDATED
    for name in validated:
        for rule in variables[name]["validation"]:
            assert rule.get("condition") and rule.get("error_message"), name


def test_defaults_of_the_interface() -> None:
    variables = _variables()
    defaults = {name: body["default"] for name, body in variables.items() if "default" in body}
    assert {name for name in variables if name not in defaults} == {
        "name",
        "plan_id",
        "pool",
        "project",
        "region",
        "zone",
        "machine_type",
    }
    assert defaults["run"] is None and defaults["fabric"] is None and defaults["subnetwork"] is None
    assert defaults["on_demand_nodes"] == defaults["spot_nodes"] == defaults["reserved_nodes"] == 0
    assert defaults["reservation_end"] is None  # no end unless the root gives one
    assert defaults["labels"] == {}
    assert defaults["gpudirect_networks"] == defaults["rdma_networks"] == []
    assert defaults["boot_disk_gb"] == 200 and defaults["boot_disk_type"] is None  # per machine type
    assert defaults["network"] == "default"
    assert "deeplearning-platform-release" in defaults["image"]


def test_outputs_are_described() -> None:
    outputs = {name: body for name, _, body in blocks(load(MODULE / "outputs.tf"), "output")}
    assert set(outputs) >= OUTPUTS
    for name, body in outputs.items():
        assert str(body.get("description", "")).strip(), f"{name} has no description"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.strip().split("."))


def _allows(constraint: str, version: str) -> bool:
    """Whether a Terraform version constraint of ``>=``/``<``/``<=``/``>`` terms allows ``version``."""
    checks = {
        ">=": lambda a, b: a >= b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        "<": lambda a, b: a < b,
    }
    for term in constraint.split(","):
        op = next(o for o in (">=", "<=", ">", "<") if term.strip().startswith(o))
        if not checks[op](_version(version), _version(term.strip()[len(op) :])):
            return False
    return True


def test_google_provider_pin_starts_at_the_first_release_with_delete_at_time() -> None:
    """google_compute_reservation takes delete_at_time from hashicorp/google 6.44.0 on (its CHANGELOG.md,
    6.44.0 of July 16, 2025, pull request 23561); before it, nic_type = "MRDMA" (A3 Ultra / A4 RDMA NICs)
    needed 6.19.0 (6.18.1 validates nic_type against GVNIC, VIRTIO_NET and IDPF only; commit 6710afaf).
    7.0.0 broke nothing the module uses; 8.x is untested."""
    (terraform,) = load(MODULE / "versions.tf")["terraform"]
    constraint = terraform["required_providers"][0]["google"]["version"]
    assert "MRDMA" in (MODULE / "locals.tf").read_text(encoding="utf-8")
    assert "delete_at_time" in (MODULE / "main.tf").read_text(encoding="utf-8")  # why the floor is 6.44
    assert not _allows(constraint, "6.19.0") and not _allows(constraint, "6.43.0")
    assert _allows(constraint, "6.44.0") and _allows(constraint, "6.49.2") and _allows(constraint, "7.45.0")
    assert not _allows(constraint, "8.0.0")


def test_versions_pinned_loosely_no_provider_block_no_credentials() -> None:
    (terraform,) = load(MODULE / "versions.tf")["terraform"]
    assert terraform["required_version"].startswith(">=")
    (providers,) = terraform["required_providers"]
    google = providers["google"]
    assert google["source"] == "hashicorp/google"
    assert ">=" in google["version"] and "<" in google["version"].replace("<=", "")
    for path in TF_FILES:
        document = load(path)
        assert "provider" not in document, path.name
        text = path.read_text(encoding="utf-8").lower()
        for word in ("credentials", "access_token", "private_key"):
            assert word not in text, f"{path.name} mentions {word}"


# --------------------------------------------------------------------------------------------------
# Wiring that the allow-list cannot see (values, not paths)
# --------------------------------------------------------------------------------------------------


def test_scheduling_per_kind() -> None:
    (locals_,) = load(MODULE / "locals.tf")["locals"]
    assert locals_["scheduling"]["spot"] == {
        "provisioning_model": "SPOT",
        "preemptible": True,
        "automatic_restart": False,
        "on_host_maintenance": "TERMINATE",
        "instance_termination_action": "DELETE",
    }
    standard = locals_["scheduling"]["standard"]
    assert standard["provisioning_model"] == "STANDARD" and standard["on_host_maintenance"] == "TERMINATE"
    resources = _resources()
    for key in (("google_compute_instance_template", "this"), ("google_compute_instance", "gang")):
        (scheduling,) = resources[key]["scheduling"]
        fields = set(scheduling) - {"__is_block__"}
        assert fields == set(locals_["scheduling"]["spot"]), key
        assert all("local.scheduling[" in scheduling[f] for f in fields), key


def test_boot_disks_take_the_type_chosen_per_machine_type() -> None:
    resources = _resources()
    (disk,) = resources[("google_compute_instance_template", "this")]["disk"]
    assert disk["disk_type"] == "${local.boot_disk_type}"
    (boot,) = resources[("google_compute_instance", "gang")]["boot_disk"]
    assert boot["initialize_params"][0]["type"] == "${local.boot_disk_type}"


def test_placement_reservation_and_nics() -> None:
    resources = _resources()
    (policy,) = resources[("google_compute_resource_policy", "placement")]["group_placement_policy"]
    assert policy["collocation"] == "COLLOCATED" and policy["vm_count"] == "${local.gang_nodes}"
    reservation = resources[("google_compute_reservation", "this")]
    assert reservation["specific_reservation_required"] is True
    (specific,) = reservation["specific_reservation"]
    assert specific["count"] == "${var.reserved_nodes}"
    assert specific["instance_properties"][0]["machine_type"] == "${var.machine_type}"
    assert reservation["delete_at_time"] == "${var.reservation_end}"  # Compute Engine deletes it then
    gang = resources[("google_compute_instance", "gang")]
    assert gang["count"] == "${local.gang_nodes}"
    assert "google_compute_resource_policy.placement[0].self_link" in gang["resource_policies"]
    mig = resources[("google_compute_instance_group_manager", "this")]
    assert mig["target_size"] == "${each.value.size}" and mig["zone"] == "${var.zone}"
    for key in (("google_compute_instance_template", "this"), ("google_compute_instance", "gang")):
        body = resources[key]
        (primary,) = body["network_interface"]
        assert primary["nic_type"] == "GVNIC"
        (extra,) = body["dynamic"][0]["network_interface"]["content"]
        assert extra["nic_type"] == "${network_interface.value.nic_type}"
        (affinity,) = body["dynamic"][1]["reservation_affinity"]["content"]
        assert affinity["type"] == "SPECIFIC_RESERVATION"
        assert affinity["specific_reservation"][0]["key"] == "compute.googleapis.com/reservation-name"


# --------------------------------------------------------------------------------------------------
# With the terraform binary
# --------------------------------------------------------------------------------------------------


def _env(tmp_path: Path) -> dict[str, str]:
    cli_config = tmp_path / "terraformrc"
    cli_config.write_text("", encoding="utf-8")
    env = dict(os.environ)
    env.update(CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1", TF_CLI_CONFIG_FILE=str(cli_config))
    return env


def _terraform(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert TERRAFORM is not None
    return subprocess.run(
        [TERRAFORM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


@needs_terraform
def test_terraform_fmt_check(tmp_path: Path) -> None:
    result = _terraform(
        ["fmt", "-check", "-recursive", "-diff", "-no-color", str(MODULE)], MODULE, _env(tmp_path)
    )
    assert result.returncode == 0, result.stdout + result.stderr


PROBE = """
output "probe" {
  value = {
    groups         = local.groups
    gang_instances = local.gang_instances
    placement      = local.placement
    gang_nodes     = local.gang_nodes
    reservation    = local.reservation
    extra_nics     = local.extra_nics
    labels         = local.labels
    scheduling     = local.scheduling
    boot_disk_type = local.boot_disk_type
  }
}
"""

BASE: dict[str, Any] = {
    "name": "h100-train",
    "plan_id": "Plan.2026-12",
    "pool": "gcp/a3-highgpu-8g",
    "project": "gpuplan-test",
    "region": "us-central1",
    "zone": "us-central1-a",
    "machine_type": "a3-highgpu-8g",
}


def _nets(n: int, stem: str) -> list[dict[str, str]]:
    return [{"network": f"{stem}-net-{i}", "subnetwork": f"{stem}-sub-{i}"} for i in range(n)]


@pytest.fixture
def probe_root(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A scratch root of the module's variables.tf and locals.tf plus an output of the locals."""
    root = tmp_path / "root"
    root.mkdir()
    for name in ("variables.tf", "locals.tf"):
        shutil.copy(MODULE / name, root / name)
    (root / "probe.tf").write_text(PROBE, encoding="utf-8")
    env = _env(tmp_path)
    result = _terraform(["init", "-backend=false", "-input=false", "-no-color"], root, env)
    assert result.returncode == 0, result.stdout + result.stderr
    return root, env


def _evaluate(probe_root: tuple[Path, dict[str, str]], tfvars: dict[str, Any]) -> dict[str, Any]:
    root, env = probe_root
    (root / "pool.tfvars.json").write_text(json.dumps({**BASE, **tfvars}), encoding="utf-8")
    applied = _terraform(
        ["apply", "-auto-approve", "-input=false", "-no-color", "-var-file=pool.tfvars.json"], root, env
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    shown = _terraform(["output", "-json", "probe"], root, env)
    assert shown.returncode == 0, shown.stderr
    probe: dict[str, Any] = json.loads(shown.stdout)
    return probe


@needs_terraform
def test_mixed_pool_with_reservation_gets_a_group_per_kind(probe_root: tuple[Path, dict[str, str]]) -> None:
    probe = _evaluate(probe_root, {"on_demand_nodes": 5, "spot_nodes": 3, "reserved_nodes": 2})
    assert probe["groups"] == {
        "reserved": {"size": 2, "scheduling": "standard", "reserved": True},
        "ondemand": {"size": 3, "scheduling": "standard", "reserved": False},
        "spot": {"size": 3, "scheduling": "spot", "reserved": False},
    }
    assert probe["gang_instances"] == [] and probe["placement"] is False and probe["reservation"] is True
    assert probe["extra_nics"] == []
    # Label values made GCP-safe; no gpuplan-run outside a gang.
    assert probe["labels"] == {
        "gpuplan-plan": "plan-2026-12",
        "gpuplan-pool": "gcp-a3-highgpu-8g",
        "gpuplan-managed-by": "terraform",
    }


@needs_terraform
def test_spot_only_pool_has_one_spot_group(probe_root: tuple[Path, dict[str, str]]) -> None:
    probe = _evaluate(probe_root, {"spot_nodes": 4})
    assert probe["groups"] == {"spot": {"size": 4, "scheduling": "spot", "reserved": False}}
    assert probe["reservation"] is False
    assert probe["scheduling"]["spot"]["provisioning_model"] == "SPOT"


@needs_terraform
def test_on_demand_tcpx_gang_in_placement_and_reservation(probe_root: tuple[Path, dict[str, str]]) -> None:
    probe = _evaluate(
        probe_root,
        {
            "run": "llama-70b",
            "on_demand_nodes": 4,
            "reserved_nodes": 2,
            "fabric": "tcpx",
            "gpudirect_networks": _nets(4, "gpu"),
            "labels": {"team": "ml", "gpuplan-pool": "overridden"},
            "reservation_end": "2027-01-05T18:00:00Z",  # a gang's end as the roots pass it: accepted
        },
    )
    assert probe["groups"] == {} and probe["placement"] is True and probe["gang_nodes"] == 4
    assert [(i["name"], i["scheduling"], i["reserved"]) for i in probe["gang_instances"]] == [
        ("h100-train-00", "standard", True),
        ("h100-train-01", "standard", True),
        ("h100-train-02", "standard", False),
        ("h100-train-03", "standard", False),
    ]
    assert [n["nic_type"] for n in probe["extra_nics"]] == ["GVNIC"] * 4
    assert probe["extra_nics"][0] == {"network": "gpu-net-0", "subnetwork": "gpu-sub-0", "nic_type": "GVNIC"}
    assert probe["labels"] == {
        "team": "ml",
        "gpuplan-plan": "plan-2026-12",
        "gpuplan-pool": "gcp-a3-highgpu-8g",
        "gpuplan-run": "llama-70b",
        "gpuplan-managed-by": "terraform",
    }


@needs_terraform
def test_spot_gang_never_targets_the_reservation(probe_root: tuple[Path, dict[str, str]]) -> None:
    probe = _evaluate(
        probe_root,
        {
            "run": "r1",
            "spot_nodes": 2,
            "reserved_nodes": 2,
            "machine_type": "a3-megagpu-8g",
            "fabric": "tcpxo",
            "gpudirect_networks": _nets(8, "gpu"),
        },
    )
    assert [(i["scheduling"], i["reserved"]) for i in probe["gang_instances"]] == [("spot", False)] * 2
    assert len(probe["extra_nics"]) == 8 and probe["placement"] is True


@needs_terraform
def test_infiniband_gang_has_mrdma_nics_after_the_host_nics(probe_root: tuple[Path, dict[str, str]]) -> None:
    probe = _evaluate(
        probe_root,
        {
            "run": "r2",
            "on_demand_nodes": 2,
            "machine_type": "a3-ultragpu-8g",
            "boot_disk_type": "hyperdisk-balanced",
            "fabric": "infiniband",
            "gpudirect_networks": _nets(1, "host"),
            "rdma_networks": _nets(8, "rdma"),
        },
    )
    assert [n["nic_type"] for n in probe["extra_nics"]] == ["GVNIC"] + ["MRDMA"] * 8
    assert probe["extra_nics"][1]["subnetwork"] == "rdma-sub-0"


@needs_terraform
@pytest.mark.parametrize(
    ("machine_type", "expected"),
    [
        ("a3-ultragpu-8g", "hyperdisk-balanced"),
        ("a4-highgpu-8g", "hyperdisk-balanced"),
        ("a3-highgpu-8g", "pd-balanced"),
    ],
)
def test_boot_disk_type_follows_the_machine_type(
    probe_root: tuple[Path, dict[str, str]], machine_type: str, expected: str
) -> None:
    """A3 Ultra and A4 take Hyperdisk only (Compute Engine's accelerator-optimized machine family page)."""
    probe = _evaluate(probe_root, {"machine_type": machine_type, "spot_nodes": 1})
    assert probe["boot_disk_type"] == expected


@needs_terraform
def test_gang_of_one_has_no_placement_policy(probe_root: tuple[Path, dict[str, str]]) -> None:
    probe = _evaluate(probe_root, {"run": "solo", "on_demand_nodes": 1})
    assert probe["gang_nodes"] == 1 and probe["placement"] is False and probe["groups"] == {}


REJECTED = [
    ({"run": "r", "on_demand_nodes": 2, "spot_nodes": 1}, "either all spot or all on-demand"),
    ({"fabric": "efa"}, "is AWS only"),
    ({"fabric": "tcpx", "gpudirect_networks": _nets(3, "g")}, "4 networks for tcpx"),
    ({"fabric": "tcpxo", "gpudirect_networks": _nets(8, "g")}, "tcpxo a3-megagpu-8g"),
    ({"fabric": "infiniband", "machine_type": "a3-ultragpu-8g", "rdma_networks": _nets(7, "r")}, "exactly 8"),
    ({"rdma_networks": _nets(8, "r")}, "none otherwise"),
    ({"gpudirect_networks": _nets(1, "g")}, "none without a fabric"),
    ({"name": "H100_pool"}, "name must match"),
    ({"name": "p" * 42}, "name must match"),
    ({"on_demand_nodes": 1.5}, "whole number"),
    ({"spot_nodes": -1}, "whole number"),
    ({"reserved_nodes": 0.5}, "whole number"),
    ({"zone": "europe-west4-a"}, "lie in region"),
    ({"boot_disk_type": "pd-ssd"}, "a3 machine types boot from"),
    ({"machine_type": "a3-ultragpu-8g", "boot_disk_type": "pd-balanced"}, "take Hyperdisk only"),
    ({"machine_type": "a4-highgpu-8g", "boot_disk_type": "pd-ssd"}, "take Hyperdisk only"),
    ({"labels": {"Team": "ml"}}, "GCP label rules"),
    ({"project": "x"}, "GCP project id"),
    ({"reservation_end": "2027-01-05T18:00:00+02:00"}, "RFC 3339 time in UTC"),
    ({"reservation_end": "2027-13-05T18:00:00Z"}, "RFC 3339 time in UTC"),
]


@needs_terraform
@pytest.mark.parametrize(("tfvars", "message"), REJECTED, ids=[m for _, m in REJECTED])
def test_validation_rejects(
    probe_root: tuple[Path, dict[str, str]], tfvars: dict[str, Any], message: str
) -> None:
    root, env = probe_root
    (root / "pool.tfvars.json").write_text(json.dumps({**BASE, **tfvars}), encoding="utf-8")
    result = _terraform(["plan", "-input=false", "-no-color", "-var-file=pool.tfvars.json"], root, env)
    assert result.returncode != 0
    assert "Invalid value for variable" in result.stderr
    assert message in " ".join(result.stderr.split()), result.stderr
