"""terraform/modules/aws-gpu-pool: parsed and checked against the allow-list always; with the terraform
binary and the local hashicorp/aws mirror also validated, formatted and tested on a mock provider (the
apply against moto's server runs on a generated root: tests/integration/test_terraform_roots.py).

Without the binary (``shutil.which("terraform")``) or the mirror folder the terraform tests skip with the
reason. Every ``terraform`` here runs offline: ``init`` takes ``-plugin-dir`` (the mirror) and runs with
``TF_CLI_CONFIG_FILE`` unset, since the image's variable names a file that does not exist.
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
from terraform_allowlist_aws import ALLOWED, PROVIDER_VERSION

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "terraform" / "modules" / "aws-gpu-pool"
TERRAFORM = shutil.which("terraform")
MIRROR = Path("/opt/tf-plugins")
AWS_IN_MIRROR = MIRROR / "registry.terraform.io" / "hashicorp" / "aws" / PROVIDER_VERSION

needs_terraform = pytest.mark.skipif(
    TERRAFORM is None or not AWS_IN_MIRROR.is_dir(),
    reason=f"needs the terraform binary on PATH and hashicorp/aws {PROVIDER_VERSION} in {MIRROR}",
)

# The module's interface: name -> HCL type (python-hcl2 spells a type as an expression)
COMMON_VARIABLES = {
    "name": "string",
    "plan_id": "string",
    "pool": "string",
    "run": "string",
    "on_demand_nodes": "number",
    "spot_nodes": "number",
    "fabric": "string",
    "reserved_nodes": "number",
    "reservation_end": "string",
    "tags": "map(string)",
}
AWS_VARIABLES = {
    "instance_type": "string",
    "image_id": "string",
    "subnet_ids": "list(string)",
    "security_group_ids": "list(string)",
    "key_name": "string",
}
OUTPUTS = {
    "placement_group_id",
    "placement_group_name",
    "group_ids",
    "autoscaling_group_name",
    "capacity_reservation_id",
    "node_counts",
}
AMI = "ami-0a1b2c3d4e5f60718"


def module_tf_files() -> list[Path]:
    return sorted(MODULE.glob("*.tf"))


def variables() -> dict[str, dict[str, Any]]:
    return {name: body for name, _, body in blocks(load(MODULE / "variables.tf"), "variable")}


def hcl_type(body: dict[str, Any]) -> str:
    """A variable's type as written (``${list(string)}`` -> ``list(string)``)."""
    text = str(body.get("type", ""))
    return text[2:-1] if text.startswith("${") and text.endswith("}") else text


# ---------------------------------------------------------------------------------------------------------
# Without terraform: parse, allow-list, interface
# ---------------------------------------------------------------------------------------------------------


def test_module_has_the_community_layout_and_every_file_parses() -> None:
    names = {p.name for p in MODULE.iterdir() if p.is_file()}
    assert {"versions.tf", "variables.tf", "main.tf", "outputs.tf", "README.md"} <= names
    for path in [*module_tf_files(), *MODULE.glob("tests/*.tftest.hcl")]:
        assert load(path), f"{path.name} parsed to nothing"


def test_module_attribute_paths_pass_the_allow_list() -> None:
    found = attribute_paths(module_tf_files())
    assert check_allowed(found, ALLOWED) == []
    # the walk really reached the nested blocks the variants depend on
    assert {
        ("aws_placement_group", "strategy"),
        ("aws_launch_template", "network_interfaces.interface_type"),
        ("aws_launch_template", "network_interfaces.network_card_index"),
        ("aws_launch_template", "placement.group_name"),
        ("aws_launch_template", "capacity_reservation_specification.capacity_reservation_target"),
        ("aws_launch_template", "tag_specifications.resource_type"),
        ("aws_autoscaling_group", "mixed_instances_policy.instances_distribution.spot_allocation_strategy"),
        ("aws_autoscaling_group", "mixed_instances_policy.launch_template.launch_template_specification"),
        ("aws_autoscaling_group", "placement_group"),
        ("aws_autoscaling_group", "tag.propagate_at_launch"),
        ("aws_ec2_capacity_reservation", "placement_group_arn"),
        ("aws_ec2_capacity_reservation", "instance_match_criteria"),
        ("data.aws_ec2_instance_type", "instance_type"),
        ("data.aws_subnet", "id"),
    } <= found


def test_allow_list_names_a_misspelt_attribute_a_misplaced_block_and_an_unknown_type(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.tf"
    bad.write_text(
        """resource "aws_launch_template" "x" {
  image_id = "ami-0a1b2c3d"
  network_interfaces {
    interface_typ = "efa"
  }
}

resource "aws_autoscaling_group" "x" {
  min_size = 1
  max_size = 1
  instances_distribution {
    spot_allocation_strategy = "price-capacity-optimized"
  }
}

resource "aws_placement_groups" "x" {
  name = "x"
}
""",
        encoding="utf-8",
    )
    assert check_allowed(attribute_paths([bad]), ALLOWED) == [
        "unknown resource type aws_placement_groups",
        "aws_autoscaling_group: unknown attribute instances_distribution",
        "aws_autoscaling_group: unknown attribute instances_distribution.spot_allocation_strategy",
        "aws_launch_template: unknown attribute network_interfaces.interface_typ",
    ]


def test_variables_are_typed_described_and_validated() -> None:
    found = variables()
    expected = COMMON_VARIABLES | AWS_VARIABLES
    assert {name: hcl_type(found[name]) for name in expected if name in found} == expected
    for name, body in found.items():
        assert hcl_type(body), f"variable {name} has no type"
        assert str(body.get("description", "")).strip(), f"variable {name} has no description"
        assert body.get("validation"), f"variable {name} has no validation block"
        for rule in body["validation"]:
            assert rule.get("condition") and rule.get("error_message"), f"variable {name}: empty rule"
    # defaults of the optional inputs (a pool passes only what it has)
    defaults = {name: found[name].get("default", "required") for name in expected}
    assert defaults == {
        "name": "required",
        "plan_id": "required",
        "pool": "required",
        "run": None,
        "on_demand_nodes": 0,
        "spot_nodes": 0,
        "fabric": None,
        "reserved_nodes": 0,
        "reservation_end": None,  # no end unless the root gives one
        "tags": {},
        "instance_type": "required",
        "image_id": "required",
        "subnet_ids": "required",
        "security_group_ids": [],
        "key_name": None,
    }
    # the gang rule refers to the other count and to run; the name rule is the one of the brief
    gang_rules = " ".join(str(rule["condition"]) for rule in found["spot_nodes"]["validation"])
    assert "var.run" in gang_rules and "var.on_demand_nodes" in gang_rules
    assert "^[a-z][a-z0-9-]{0,40}$" in str(found["name"]["validation"][0]["condition"])


def test_outputs_are_described() -> None:
    found = {name: body for name, _, body in blocks(load(MODULE / "outputs.tf"), "output")}
    assert set(found) >= OUTPUTS
    for name, body in found.items():
        assert str(body.get("description", "")).strip(), f"output {name} has no description"


def test_versions_pin_loosely_and_the_module_has_no_provider_block_or_credentials() -> None:
    versions = load(MODULE / "versions.tf")["terraform"][0]
    assert versions["required_version"].startswith(">= 1.")
    aws = versions["required_providers"][0]["aws"]
    assert aws == {"source": "hashicorp/aws", "version": ">= 5.74, < 7.0"}  # efa-only came in 5.74
    for path in module_tf_files():
        document = load(path)
        assert "provider" not in document, f"{path.name} configures a provider"
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"access_key|secret_key|AKIA[0-9A-Z]{16}|token\s*=", text), path.name


def test_readme_lists_every_input_and_output() -> None:
    readme = (MODULE / "README.md").read_text(encoding="utf-8")
    outputs = {name for name, _, _ in blocks(load(MODULE / "outputs.tf"), "output")}
    missing = sorted(n for n in [*variables(), *outputs] if f"`{n}`" not in readme)
    assert missing == [], f"README.md does not list {missing}"
    assert re.search(r'```hcl\n(?s:.*?)source\s+= "', readme) and "for_each" in readme, (
        "README.md has no example"
    )


# ---------------------------------------------------------------------------------------------------------
# With terraform and the mirror
# ---------------------------------------------------------------------------------------------------------


def terraform(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``terraform ARGS`` in ``cwd``, offline and non-interactive; fails the test on a non-zero exit."""
    assert TERRAFORM is not None
    env = {k: v for k, v in os.environ.items() if k != "TF_CLI_CONFIG_FILE"}
    env |= {"TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1", "TF_INPUT": "0"}
    command = [TERRAFORM, *args]
    if args[0] == "init":
        command += ["-backend=false", "-input=false", f"-plugin-dir={MIRROR}"]
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return result


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (
        f"{result.args[1:]} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    )
    return result


def copy_module(into: Path) -> Path:
    target = into / "modules" / "aws-gpu-pool"
    shutil.copytree(MODULE, target, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"))
    return target


# Three pools the way the generated root calls the module; formatted as terraform fmt writes it.
THREE_POOLS = f"""terraform {{
  required_version = ">= 1.9"

  required_providers {{
    aws = {{
      source  = "hashicorp/aws"
      version = "{PROVIDER_VERSION}"
    }}
  }}
}}

provider "aws" {{
  region = "us-east-1"
}}

locals {{
  subnets = ["subnet-0a0a0a0a", "subnet-0b0b0b0b"]
}}

module "mixed" {{
  source = "./modules/aws-gpu-pool"

  name            = "plan1-inference"
  plan_id         = "plan1"
  pool            = "inference"
  instance_type   = "g6e.12xlarge"
  image_id        = "{AMI}"
  subnet_ids      = local.subnets
  on_demand_nodes = 2
  spot_nodes      = 6
  tags            = {{ team = "ml" }}
}}

module "gang" {{
  source = "./modules/aws-gpu-pool"

  name               = "plan1-pretrain"
  plan_id            = "plan1"
  pool               = "pretrain"
  run                = "llama-pretrain"
  fabric             = "efa"
  instance_type      = "p5.48xlarge"
  image_id           = "{AMI}"
  subnet_ids         = local.subnets
  security_group_ids = ["sg-0a0a0a0a"]
  on_demand_nodes    = 16
  reserved_nodes     = 16
}}

module "on_demand" {{
  source = "./modules/aws-gpu-pool"

  name            = "plan1-batch"
  plan_id         = "plan1"
  pool            = "batch"
  instance_type   = "g5.48xlarge"
  image_id        = "{AMI}"
  subnet_ids      = local.subnets
  on_demand_nodes = 4
}}

output "groups" {{
  value = {{
    mixed     = module.mixed.group_ids
    gang      = module.gang.group_ids
    on_demand = module.on_demand.group_ids
  }}
}}
"""


@pytest.fixture(scope="module")
def three_pool_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root instantiating the module as a mixed pool, an EFA gang with a reservation and an on-demand
    pool, initialised from the mirror."""
    root = tmp_path_factory.mktemp("three-pools")
    copy_module(root)
    (root / "main.tf").write_text(THREE_POOLS, encoding="utf-8")
    ok(terraform("init", cwd=root))
    return root


@needs_terraform
def test_module_is_terraform_fmt_clean() -> None:
    ok(terraform("fmt", "-check", "-recursive", "-diff", str(MODULE), cwd=REPO))


@needs_terraform
def test_three_pool_root_validates_and_is_formatted(three_pool_root: Path) -> None:
    lock = (three_pool_root / ".terraform.lock.hcl").read_text(encoding="utf-8")
    assert f'version     = "{PROVIDER_VERSION}"' in lock
    assert "Success" in ok(terraform("validate", "-no-color", cwd=three_pool_root)).stdout
    ok(terraform("fmt", "-check", "-diff", cwd=three_pool_root))


def schema_paths(block: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for name in block.get("attributes", {}):
        yield f"{prefix}{name}"
    for name, nested in block.get("block_types", {}).items():
        yield f"{prefix}{name}"
        yield from schema_paths(nested["block"], f"{prefix}{name}.")


@needs_terraform
def test_allowlist_paths_exist_in_the_provider_schema(three_pool_root: Path) -> None:
    result = ok(terraform("providers", "schema", "-json", cwd=three_pool_root))
    schema = json.loads(result.stdout)["provider_schemas"]["registry.terraform.io/hashicorp/aws"]
    unknown = []
    for label, paths in ALLOWED.items():
        kind, type_ = (
            ("data_source_schemas", label[5:]) if label.startswith("data.") else ("resource_schemas", label)
        )
        if type_ not in schema[kind]:
            unknown.append(f"{label}: not in hashicorp/aws {PROVIDER_VERSION}")
            continue
        known = set(schema_paths(schema[kind][type_]["block"]))
        unknown += sorted(f"{label}: {p}" for p in paths - known)
    assert unknown == []


BAD_CALL = """module "bad" {
  source = "./modules/aws-gpu-pool"

  name            = "Bad_Name"
  plan_id         = "plan1"
  pool            = "x"
  fabric          = "tcpxo"
  instance_type   = "p5.48xlarge"
  image_id        = "img-1234"
  subnet_ids      = []
  on_demand_nodes = 1.5
  reservation_end = "2027-01-05 18:00"
  tags            = { "aws:owner" = "me" }
}
"""


@needs_terraform
def test_validation_blocks_reject_wrong_values(tmp_path: Path) -> None:
    copy_module(tmp_path)
    (tmp_path / "main.tf").write_text(BAD_CALL, encoding="utf-8")
    ok(terraform("init", cwd=tmp_path))
    result = terraform("validate", "-no-color", cwd=tmp_path)
    assert result.returncode != 0
    text = " ".join(result.stderr.split())
    for message in [
        "name must start with a lower-case letter",
        'On AWS fabric must be null or "efa"',
        "image_id must be an AMI id",
        "subnet_ids must name at least one subnet",
        "on_demand_nodes must be a whole number",
        'Tag keys starting with "aws:" are reserved',
        "reservation_end must be null or an RFC 3339 time in UTC",
    ]:
        assert message in text, f"no {message!r} in:\n{result.stderr}"


EFA_TYPES = """resource "aws_launch_template" "efa" {
  name = "efa-types"

  network_interfaces {
    network_card_index = 0
    device_index       = 0
    interface_type     = "efa"
  }

  network_interfaces {
    network_card_index = 1
    device_index       = 1
    interface_type     = "efa-only"
  }

  network_interfaces {
    network_card_index = 2
    device_index       = 1
    interface_type     = "efa-onl"
  }
}
"""


@needs_terraform
def test_the_mirrored_provider_takes_efa_only_interfaces(tmp_path: Path) -> None:
    """The module's conditional interface_type is unknown to validate; written out, the provider's own
    check accepts "efa" and "efa-only" and names the one value it refuses (so the check really ran)."""
    (tmp_path / "main.tf").write_text(EFA_TYPES, encoding="utf-8")
    ok(terraform("init", cwd=tmp_path))
    result = terraform("validate", "-no-color", cwd=tmp_path)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        'Error: expected network_interfaces.2.interface_type to be one of ["efa" "efa-only" "interface"], '
        "got efa-onl"
    ], result.stderr


@needs_terraform
def test_terraform_test_of_the_variants_on_a_mock_provider(tmp_path: Path) -> None:
    """tests/variants.tftest.hcl: the mixed pool, the EFA gang with its reservation, the on-demand pool,
    and the two rules that only plan can check (a gang with both kinds, EFA on a type without it)."""
    module = copy_module(tmp_path)
    ok(terraform("init", cwd=module))
    result = ok(terraform("test", "-no-color", cwd=module, timeout=300))
    assert re.search(r"Success! (\d+) passed, 0 failed", result.stdout), result.stdout
    runs = len(re.findall(r'^run "', (module / "tests" / "variants.tftest.hcl").read_text(), re.M))
    assert f"Success! {runs} passed, 0 failed" in result.stdout


# Apply and destroy against moto run on a generated root (tests/integration/test_terraform_roots.py):
# the same module, instantiated the way gpuplan terraform does it, with its mixed-instances policy checked.


# ---------------------------------------------------------------------------------------------------------
# The interruption queue: gpuplan terraform --interruption-queue (issue 35 point 7)
# ---------------------------------------------------------------------------------------------------------

QUEUE_MODULE = REPO / "terraform" / "modules" / "aws-interruption-queue"


@pytest.fixture(scope="module")
def queue_root(week_plan: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from datetime import timedelta

    from typer.testing import CliRunner

    from models.plan import Plan
    from planner.cli import app

    plan_dir = week_plan("aws")
    gang = next(t for t in Plan.read(plan_dir).document.training if t.nodes > 1)
    at = f"{gang.start + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}"
    out = tmp_path_factory.mktemp("queue-root") / "roots"
    result = CliRunner().invoke(
        app,
        ["terraform", str(plan_dir), "-o", str(out), "--at", at, "--interruption-queue"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return out / "aws"


def test_the_queue_root_has_a_queue_rules_targets_and_a_send_policy_per_region(queue_root: Path) -> None:
    files = sorted(queue_root.rglob("*.tf"))
    found = attribute_paths(files)
    assert check_allowed(found, ALLOWED) == []
    assert {
        ("aws_sqs_queue", "name"),
        ("aws_sqs_queue_policy", "policy"),
        ("aws_cloudwatch_event_rule", "event_pattern"),
        ("aws_cloudwatch_event_target", "arn"),
    } <= found
    main = (QUEUE_MODULE / "main.tf").read_text(encoding="utf-8")
    for detail_type in (
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
    ):
        assert f'"detail-type" = ["{detail_type}"]' in main  # what providers/aws.py _parse_event reads
    assert '"events.amazonaws.com"' in main and '"sqs:SendMessage"' in main
    regions = {
        p["region"] for p in json.loads((queue_root / "terraform.tfvars.json").read_text())["pools"].values()
    }
    calls = {name: body for name, _, body in blocks(load(queue_root / "interruptions.tf"), "module")}
    assert set(calls) == {f"interruptions_{r.replace('-', '_')}" for r in regions}
    declared = {name for name, _, _ in blocks(load(QUEUE_MODULE / "variables.tf"), "variable")}
    for body in calls.values():
        assert {k for k in body if k not in {"source", "providers", "__is_block__"}} <= declared
    outputs = {name for name, _, _ in blocks(load(queue_root / "interruptions.tf"), "output")}
    assert outputs == {"interruption_queue_urls"}


@needs_terraform
def test_the_queue_module_and_root_validate_with_the_real_provider(queue_root: Path, tmp_path: Path) -> None:
    ok(terraform("fmt", "-check", "-recursive", "-diff", str(QUEUE_MODULE), cwd=REPO))
    root = tmp_path / "aws"
    shutil.copytree(queue_root, root)
    ok(terraform("init", cwd=root))
    assert "Success" in ok(terraform("validate", "-no-color", cwd=root)).stdout
    ok(terraform("fmt", "-check", "-recursive", "-diff", cwd=root))
