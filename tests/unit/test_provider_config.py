"""The provider settings file read strictly (issue 36): every section present is validated, the clouds not
in use too; what a launch needs is required; numbers strict, lists bounded; one InputError naming the file
and ``cloud.field``. No SDK is needed to validate a section."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.errors import InputError
from providers.config import load_provider_config, open_provider

AWS = {"image_id": "ami-0a1b2c3d4e5f60718", "subnets": {"us-east-1": ["subnet-0a1b2c3d"]}}
GCP = {"project": "fleet-project", "zones": {"us-central1": "us-central1-a"}}
AZURE = {
    "subscription_id": "00000000-0000-0000-0000-000000000001",
    "resource_group": "gpu-fleet",
    "subnet_id": "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/net/providers/"
    "Microsoft.Network/virtualNetworks/v/subnets/gpu",
    "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 ops@example",
}


def _file(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "providers.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_all_three_sections_read(tmp_path: Path) -> None:
    assert set(load_provider_config(_file(tmp_path, {"aws": AWS, "gcp": GCP, "azure": AZURE}))) == {
        "aws",
        "gcp",
        "azure",
    }


@pytest.mark.parametrize(
    ("data", "where", "words"),
    [
        ({"aws": {}}, "aws", "missing image_id (one AMI id, or region -> AMI id) and subnets"),
        ({"aws": None}, "aws", "missing image_id"),
        ({"aws": {**AWS, "subnets": {}}}, "aws.subnets", "missing subnets"),
        ({"aws": {**AWS, "subnets": {"us-east-1": []}}}, "aws.subnets.us-east-1", "at least 1"),
        ({"aws": {**AWS, "subnets": {"us-east-1": ["vpc-1"]}}}, "aws.subnets", "not a subnet id"),
        ({"aws": {**AWS, "subnets": {"us-east-1": ["subnet-0a1b2c3d"] * 2}}}, "aws.subnets", "twice"),
        ({"aws": {**AWS, "subnets": {"US East": ["subnet-0a1b2c3d"]}}}, "aws.subnets", "not a region"),
        (
            {"aws": {**AWS, "subnets": {f"us-east-{i}": ["subnet-0a1b2c3d"] for i in range(65)}}},
            "aws.subnets",
            "at most 64",
        ),
        ({"aws": {**AWS, "image_id": "ubuntu"}}, "aws.image_id", "not an AMI id"),
        ({"aws": {**AWS, "image_id": {"us-west-2": "ami-0a1b2c3d"}}}, "aws", "no AMI for us-east-1"),
        (
            {"aws": {**AWS, "security_group_ids": ["sg-0a1b2c3d"] * 17}},
            "aws.security_group_ids",
            "at most 16",
        ),
        ({"aws": {**AWS, "timeout_seconds": float("nan")}}, "aws.timeout_seconds", "finite"),
        ({"aws": {**AWS, "timeout_seconds": True}}, "aws.timeout_seconds", "boolean"),
        (
            {"aws": {**AWS, "interruption_max_messages": "1_000"}},
            "aws.interruption_max_messages",
            "plain digits",
        ),
        ({"aws": {**AWS, "retry": {"attempts": True}}}, "aws.retry", "attempts: a boolean is not a number"),
        ({"aws": {**AWS, "retry": {"attempts": 2**63}}}, "aws.retry", "attempts: must be at most 20"),
        ({"aws": {**AWS, "retry": {"cap_seconds": float("inf")}}}, "aws.retry", "finite"),
        ({"aws": {**AWS, "retry": {"tries": 3}}}, "aws.retry", "tries: unknown"),
        ({"aws": {**AWS, "profile": ""}}, "aws.profile", "at least 1 character"),
        ({"aws": {**AWS, "subnet_ids": {}}}, "aws.subnet_ids", "Extra inputs"),
        ({"gcp": {}}, "gcp.project", "missing project"),
        (
            {"gcp": {**GCP, "zones": {"us-central1": "europe-west4-a"}}},
            "gcp.zones",
            "not a zone of us-central1",
        ),
        ({"gcp": {**GCP, "boot_disk_gb": 1e400}}, "gcp.boot_disk_gb", "finite"),
        ({"gcp": {**GCP, "boot_disk_gb": 10**9}}, "gcp.boot_disk_gb", "at most 65536"),
        ({"gcp": {**GCP, "poll_seconds": 0}}, "gcp.poll_seconds", "greater than 0"),
        (
            {"gcp": {**GCP, "gpudirect_networks": [{"network": "n", "subnetwork": "s"}] * 9}},
            "gcp.gpudirect_networks",
            "at most 8",
        ),
        ({"gcp": {**GCP, "credentials": "anonymous"}}, "gcp", "api_endpoint"),
        (
            {"azure": {"subscription_id": AZURE["subscription_id"], "resource_group": "g"}},
            "azure",
            "missing subnet_id",
        ),
        ({"azure": {**AZURE, "subscription_id": "my-sub"}}, "azure.subscription_id", "not a subscription id"),
        ({"azure": {**AZURE, "subnet_id": "/x"}}, "azure.subnet_id", "ARM id"),
        (
            {"azure": {**AZURE, "ssh_public_key": "hunter2"}},
            "azure.ssh_public_key",
            "not an OpenSSH public key",
        ),
        ({"azure": {**AZURE, "conflict_retries": 2.5}}, "azure.conflict_retries", "whole number"),
        (
            {"azure": {**AZURE, "polling_interval_seconds": "٥"}},
            "azure.polling_interval_seconds",
            "plain digits",
        ),
        ({"aws": {**AWS, "interruption_queue_url": "1_000"}}, "aws.interruption_queue_url", "URL"),
        ({"gcp": {**GCP, "project": "My Project"}}, "gcp.project", "not a project id"),
        # a section of a cloud not in use is read as strictly as the one in use
        ({"aws": AWS, "gcp": {"project": "p", "zone": "us-central1-a"}}, "gcp.zone", "Extra inputs"),
        ({"aws": AWS, "azure": {}}, "azure", "missing subscription_id"),
        ({"aws": AWS, "oci": {}}, "oci", "unknown section"),
        ({"aws": [1, 2]}, "aws", "must be a mapping"),
    ],
)  # fmt: skip
def test_a_wrong_section_is_one_line_naming_the_field(
    tmp_path: Path, data: dict[str, Any], where: str, words: str
) -> None:
    path = _file(tmp_path, data)
    with pytest.raises(InputError) as caught:
        load_provider_config(path)
    error = caught.value
    assert error.file == str(path) and error.where == where, str(error)
    assert words in error.problem and "\n" not in str(error), str(error)


def test_a_file_without_the_section_of_the_cloud_in_use_is_refused(tmp_path: Path) -> None:
    path = _file(tmp_path, {"gcp": GCP})
    with pytest.raises(InputError, match=r"providers.yaml: aws: no aws: section for the cloud in use"):
        open_provider("aws", load_provider_config(path), config_path=path)


def test_sections_validate_without_any_cloud_sdk(tmp_path: Path) -> None:
    """The settings classes import no SDK: a machine with none of them installed checks the whole file."""
    path = _file(tmp_path, {"aws": AWS, "gcp": GCP, "azure": {**AZURE, "subnet_id": "/x"}})
    code = (
        "import sys\n"
        "for name in ('boto3', 'botocore', 'google', 'google.cloud', 'google.auth', 'azure',\n"
        "             'azure.identity'):\n"
        "    sys.modules[name] = None\n"
        "from pathlib import Path\n"
        "from models.errors import InputError\n"
        "from providers.config import load_provider_config\n"
        "try:\n"
        f"    load_provider_config(Path({str(path)!r}))\n"
        "except InputError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "azure.subnet_id" in done.stdout and "ARM id" in done.stdout
