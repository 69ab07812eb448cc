"""A cloud API that does not answer: each adapter gives up after its timeout and raises Timeout, the error
that says the outcome is unknown (the daemon then reads the inventory rather than assume it failed).

The stand-in is a loopback socket that accepts connections and never answers, which is what a hung API
endpoint or a dropped reply looks like to the real SDK clients."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import boto3
import pytest

from providers.base import RetryPolicy, Timeout


@pytest.fixture
def silent() -> Iterator[str]:
    """http://127.0.0.1:PORT of a server that takes connections and never says a word."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as server:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def _raised_within(seconds: float, call: Callable[[], object]) -> BaseException:
    """What ``call()`` raised, failing the test if it takes longer than ``seconds`` (a thread, so a call
    that hangs fails the test instead of hanging the suite)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # the test looks at it
            raised.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    began = time.monotonic()
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"no answer after {seconds} s: the timeout is not applied"
    assert raised, f"returned in {time.monotonic() - began:.1f} s without an error"
    return raised[0]


def test_aws_read_timeout_is_timeout(aws_env: None, silent: str) -> None:
    from providers.aws import AwsSettings, open_provider

    settings = AwsSettings(endpoint_url=silent, timeout_seconds=0.3)
    provider = open_provider(settings, session=boto3.Session(region_name="us-east-1"), sleep=lambda s: None)
    lost = _raised_within(10, lambda: provider.inventory("fleet"))  # once: no SDK retries on top of ours
    assert isinstance(lost, Timeout) and lost.code == "ReadTimeoutError"


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
    lost = _raised_within(10, lambda: provider.inventory("fleet"))
    assert isinstance(lost, Timeout) and "no answer from the Compute API in time" in str(lost)


def test_azure_timeouts_are_timeout() -> None:
    from azure.core.exceptions import ServiceRequestTimeoutError, ServiceResponseTimeoutError

    from providers.azure import map_error

    lost = (ServiceResponseTimeoutError("read timed out"), ServiceRequestTimeoutError("connect timed out"))
    for exc in lost:
        mapped = map_error(exc, "virtual_machines.get")
        assert isinstance(mapped, Timeout) and mapped.operation == "virtual_machines.get"
