"""A cloud API that does not answer: each adapter gives up after its timeout and raises Timeout, the error
that says the outcome is unknown (the daemon then reads the inventory rather than assume it failed).

The stand-in is a loopback socket that accepts connections and never answers, which is what a hung API
endpoint or a dropped reply looks like to the real SDK clients."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import boto3
import pytest

from providers.base import RetryPolicy, Timeout


@pytest.fixture
def silent() -> Iterator[str]:
    """http://127.0.0.1:PORT of a server that takes connections and never says a word."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as server:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_aws_read_timeout_is_timeout(aws_env: None, silent: str) -> None:
    from providers.aws import AwsSettings, open_provider

    settings = AwsSettings(endpoint_url=silent, timeout_seconds=0.3)
    provider = open_provider(settings, session=boto3.Session(region_name="us-east-1"), sleep=lambda s: None)
    began = time.monotonic()
    with pytest.raises(Timeout) as lost:
        provider.inventory("fleet")
    assert time.monotonic() - began < 10  # once, no SDK retries on top of ours
    assert lost.value.kind == "timeout" and lost.value.code == "ReadTimeoutError"


def test_gcp_read_timeout_is_timeout(silent: str) -> None:
    from providers.gcp import GcpSettings, open_provider

    settings = GcpSettings(
        project="p",
        zones={"us-central1": "us-central1-a"},
        api_endpoint=silent,
        credentials="anonymous",
        request_timeout_seconds=0.3,
        retry=RetryPolicy(attempts=2, base_seconds=0.01, cap_seconds=0.02),
    )
    provider = open_provider(settings, sleep=lambda s: None)
    began = time.monotonic()
    with pytest.raises(Timeout, match="no answer from the Compute API in time"):
        provider.inventory("fleet")
    assert time.monotonic() - began < 10


def test_azure_timeouts_are_timeout() -> None:
    from azure.core.exceptions import ServiceRequestTimeoutError, ServiceResponseTimeoutError

    from providers.azure import map_error

    lost = (ServiceResponseTimeoutError("read timed out"), ServiceRequestTimeoutError("connect timed out"))
    for exc in lost:
        mapped = map_error(exc, "virtual_machines.get")
        assert isinstance(mapped, Timeout) and mapped.operation == "virtual_machines.get"
