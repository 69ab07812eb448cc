"""Interruptions as EC2 sends them (issue 35 point 7, AWS): spot interruption warnings, rebalance
recommendations and state changes from an EventBridge rule to an SQS queue, read as Karpenter's
interruption controller reads its queue. moto's SQS on the real client; the message bodies are EC2's
EventBridge events in the shapes of the EC2 User Guide (``aws_stand_in.ec2_event``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from aws_stand_in import Ec2StandIn, ec2_event, make_vpc
from moto import mock_aws

from models.naming import managed_tags, pool_name
from providers.aws import AwsProvider, AwsSettings, open_provider
from providers.base import CapacityType, LaunchSpec, Node

REGION = "us-east-1"
G6E = f"aws:{REGION}:g6e.xlarge"
PLAN = "queue-plan"
T0 = datetime(2027, 2, 3, 4, 5, 6, tzinfo=UTC)
WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE = "EC2 Instance State-change Notification"


@dataclass
class Queue:
    provider: AwsProvider
    stand_in: Ec2StandIn
    sqs: Any  # a client without hooks
    url: str
    session: Any

    def send(self, *bodies: str) -> None:
        for body in bodies:
            self.sqs.send_message(QueueUrl=self.url, MessageBody=body)

    def counts(self) -> tuple[int, int]:
        """(visible, in flight) messages of the queue."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        got = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=names)["Attributes"]
        return int(got[names[0]]), int(got[names[1]])

    def reopen(self, **settings: Any) -> AwsProvider:
        """A new provider on the same queue: the daemon after a restart, with no memory of its reads."""
        return open_provider(self.provider.settings.model_copy(update=settings), session=self.session)


@pytest.fixture
def queue(aws_env: None) -> Iterator[Queue]:
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        vpc = make_vpc(session)
        stand_in = Ec2StandIn()
        stand_in.install(session)
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="gpuplan-interruptions")["QueueUrl"]
        settings = AwsSettings(
            image_id=vpc.image_id,
            subnets={REGION: vpc.subnets},
            interruption_queue_url=url,
            interruption_wait_seconds=0,
        )
        yield Queue(
            open_provider(settings, session=session, sleep=lambda s: None), stand_in, sqs, url, session
        )


def _pool(provider: AwsProvider, capacity: CapacityType, count: int) -> list[Node]:
    pool = pool_name(G6E, capacity)
    return provider.launch(
        LaunchSpec(G6E, capacity, count, pool, managed_tags(PLAN, pool=pool), f"t-{capacity}")
    )


def test_warnings_rebalances_and_reclaims_of_our_nodes_with_deadlines_then_deleted_at_the_next_read(
    queue: Queue,
) -> None:
    warned, reclaimed = _pool(queue.provider, CapacityType.SPOT, 2)
    (own,) = _pool(queue.provider, CapacityType.ON_DEMAND, 1)
    ec2 = boto3.client("ec2", region_name=REGION)
    other = ec2.run_instances(
        ImageId="ami-0a1b2c3d4e5f60718", InstanceType="g6e.xlarge", MinCount=1, MaxCount=1
    )
    stranger = other["Instances"][0]["InstanceId"]

    def reclaim(parsed: dict[str, Any]) -> None:  # EC2's record of a spot reclaim on the instance
        for res in parsed["Reservations"]:
            for inst in res["Instances"]:
                if inst["InstanceId"] == reclaimed.id:
                    inst["State"] = {"Code": 32, "Name": "shutting-down"}
                    inst["StateReason"] = {"Code": "Server.SpotInstanceTermination", "Message": "reclaimed"}

    queue.stand_in.rewrites["DescribeInstances"] = reclaim
    queue.send(
        ec2_event(WARNING, warned.id, T0, **{"instance-action": "terminate"}),
        ec2_event(REBALANCE, reclaimed.id, T0 - timedelta(minutes=9)),
        ec2_event(STATE, reclaimed.id, T0 + timedelta(minutes=1), state="shutting-down"),
        ec2_event(STATE, own.id, T0, state="terminated"),  # an on-demand node gpuplan ended: no notice
        ec2_event(WARNING, stranger, T0, **{"instance-action": "terminate"}),  # not our plan's
        ec2_event(
            WARNING, warned.id, T0, region="eu-west-1", **{"instance-action": "stop"}
        ),  # not our region
        "this is not json",
        ec2_event("AWS API Call via CloudTrail", warned.id, T0),
        '{"source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning", "detail": {}}',
    )
    found = queue.provider.interruptions(PLAN)
    assert sorted((i.node_id, i.kind, i.at, i.deadline, i.pool) for i in found) == sorted(
        [
            (warned.id, "interruption", T0, T0 + timedelta(minutes=2), warned.pool),  # two minutes' notice
            (reclaimed.id, "rebalance", T0 - timedelta(minutes=9), None, reclaimed.pool),
            (
                reclaimed.id,
                "interruption",
                T0 + timedelta(minutes=1),
                T0 + timedelta(minutes=1),
                reclaimed.pool,
            ),
        ]
    )
    # the three garbled or unknown messages are gone at once; the six events wait for the next read
    assert queue.counts() == (0, 6)
    receives = queue.stand_in.calls("ReceiveMessage")
    assert receives[0]["MaxNumberOfMessages"] == 10 and receives[0]["WaitTimeSeconds"] == 0
    assert {r["VisibilityTimeout"] for r in receives} == {300}

    assert queue.provider.interruptions(PLAN) == []  # the caller recorded them: deleted now
    assert queue.counts() == (0, 0)
    (deleted,) = queue.stand_in.calls("DeleteMessageBatch")[-1:]
    assert len(deleted["Entries"]) == 6


def test_a_crash_before_the_next_read_gets_the_notices_again(queue: Queue) -> None:
    (node,) = _pool(queue.provider, CapacityType.SPOT, 1)
    queue.send(ec2_event(WARNING, node.id, T0, **{"instance-action": "terminate"}))
    hasty = queue.reopen(interruption_visibility_seconds=1)
    first = hasty.interruptions(PLAN)
    assert [(i.node_id, i.kind) for i in first] == [(node.id, "interruption")]
    time.sleep(1.2)  # the daemon died before its next read: the message shows again
    again = queue.reopen()
    assert again.interruptions(PLAN) == first  # a repeat, which the caller drops
    assert again.interruptions(PLAN) == [] and queue.counts() == (0, 0)


def test_a_full_queue_is_read_ten_at_a_time_up_to_the_cap(queue: Queue) -> None:
    (node,) = _pool(queue.provider, CapacityType.SPOT, 1)
    queue.send(*(ec2_event(REBALANCE, node.id, T0 + timedelta(seconds=s)) for s in range(25)))
    capped = queue.reopen(interruption_max_messages=20)
    (first,) = capped.interruptions(PLAN)
    assert (first.kind, first.at) == ("rebalance", T0)  # one notice per node and kind: the earliest
    sizes = [r["MaxNumberOfMessages"] for r in queue.stand_in.calls("ReceiveMessage")]
    assert sizes == [10, 10] and queue.counts() == (5, 20)
    (rest,) = capped.interruptions(PLAN)
    assert rest.at == T0 + timedelta(seconds=20) and queue.counts() == (0, 5)


def test_without_a_queue_the_ec2_api_is_polled_and_no_queue_is_read(queue: Queue) -> None:
    bare = queue.reopen(interruption_queue_url=None)
    _pool(bare, CapacityType.SPOT, 1)
    assert bare.interruptions(PLAN) == []
    assert queue.stand_in.calls("DescribeSpotInstanceRequests") and not queue.stand_in.calls("ReceiveMessage")
