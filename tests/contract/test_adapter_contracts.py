"""Each port's fake and real adapter meet the same expectations: here the checkpoint store (against
moto's S3), the Slurm agent's command queue, the notifier and the dead letters. The ledger, the cluster
and Step Functions have their own files (test_ledger_contract.py, test_cluster_contract.py,
test_step_functions_contract.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore
from hyperpod_recovery.adapters.notifier import SnsNotifier
from hyperpod_recovery.adapters.slurm_agent import SlurmAgentOrchestrator
from hyperpod_recovery.adapters.sqs import DeadLetterQueue, SqsQueue
from hyperpod_recovery.adapters.stepfunctions import StepFunctions
from hyperpod_recovery.domain.checkpoints.discovery import list_all
from hyperpod_recovery.errors import (
    CheckpointUnreadable,
    CheckpointWriteConflict,
    ControllerChannelError,
    QueueUnavailable,
)
from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply, DrainResult, JobsOnNodes
from tests.contract import adapter_support
from tests.contract.adapter_support import REGION, modeled_errors
from tests.fakes import T0, FakeCheckpointStore

# The shared fixtures, where pytest finds them: by name in this module.
aws = adapter_support.aws


# --- checkpoints --------------------------------------------------------------------------
@pytest.fixture(params=["fake", "s3"])
def store(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Callable[[str, bytes], None]]]:
    """(store, put(key, body)) for bucket 'ckpt-bucket'."""
    if request.param == "fake":
        fake = FakeCheckpointStore()
        yield fake, lambda key, body: fake.put_object("ckpt-bucket", key, body)
        return
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="ckpt-bucket", CreateBucketConfiguration={"LocationConstraint": REGION})
        yield S3CheckpointStore(s3=s3), lambda key, body: s3.put_object(Bucket="ckpt-bucket", Key=key, Body=body)


def test_checkpoint_store_reads_objects_and_sizes(store: tuple[Any, Any]) -> None:
    reader, put = store
    put("run/step-1/manifest.json", b"{}")
    put("run/empty", b"")
    assert reader.get("ckpt-bucket", "run/step-1/manifest.json", 1024) == b"{}"
    assert reader.get("ckpt-bucket", "run/step-1/manifest.json", 1) == b"{"
    assert reader.get("ckpt-bucket", "run/empty", 1024) == b""
    assert reader.get("ckpt-bucket", "run/step-9/manifest.json", 1024) is None
    assert (reader.size("ckpt-bucket", "run/step-1/manifest.json"), reader.size("ckpt-bucket", "run/nope")) == (2, None)


def test_checkpoint_store_lists_like_list_objects_v2(store: tuple[Any, Any]) -> None:
    reader, put = store
    for key in ("run/step-1/a.pt", "run/step-1/manifest.json", "run/step-2/a.pt", "run/notes.txt", "run/step-3/b"):
        put(key, b"12345")
    # A delimiter rolls keys up into folders; objects and folders each come in key order
    page = reader.list("ckpt-bucket", "run/", delimiter="/")
    assert (page.objects, page.folders, page.truncated) == ([("run/notes.txt", 5)], ["run/step-1/", "run/step-2/", "run/step-3/"], False)
    # StartAfter a folder's name (no slash) includes that folder; MaxKeys counts folders too
    page = reader.list("ckpt-bucket", "run/step-", delimiter="/", start_after="run/step-2", max_keys=1)
    assert (page.folders, page.truncated) == (["run/step-2/"], True)
    page = reader.list("ckpt-bucket", "run/step-", delimiter="/", token=page.next_token, max_keys=1)
    assert (page.folders, page.truncated) == (["run/step-3/"], False)
    # Without a delimiter: every key with its size, from StartAfter on
    page = reader.list("ckpt-bucket", "run/step-", start_after="run/step-1/a.pt")
    assert [key for key, _ in page.objects] == ["run/step-1/manifest.json", "run/step-2/a.pt", "run/step-3/b"]


def test_checkpoint_store_pages_through_many_folders(store: tuple[Any, Any]) -> None:
    reader, put = store
    for step in range(1050):
        put(f"run/step-{step:09d}/manifest.json", b"{}")
    pages = list(list_all(reader, "ckpt-bucket", "run/", delimiter="/"))
    folders = [f for page in pages for f in page.folders]
    assert (len(pages), len(folders), folders[-1]) == (2, 1050, "run/step-000001049/")


def test_checkpoint_store_conditional_puts(store: tuple[Any, Any]) -> None:
    writer, _ = store
    writer.put("ckpt-bucket", "run/latest", b"1", if_none_match=True)
    with pytest.raises(CheckpointWriteConflict):
        writer.put("ckpt-bucket", "run/latest", b"2", if_none_match=True)
    body, etag = writer.get_with_etag("ckpt-bucket", "run/latest", 100)
    writer.put("ckpt-bucket", "run/latest", b"3", if_match=etag)
    with pytest.raises(CheckpointWriteConflict):  # the ETag we read is no longer current
        writer.put("ckpt-bucket", "run/latest", b"4", if_match=etag)
    with pytest.raises(CheckpointWriteConflict):  # the object went away since we read it
        writer.put("ckpt-bucket", "run/missing", b"5", if_match=etag)
    assert (body, writer.get("ckpt-bucket", "run/latest", 100)) == (b"1", b"3")


def test_checkpoint_store_hashes_whole_objects(store: tuple[Any, Any]) -> None:
    writer, put = store
    put("run/a", b"abc")
    assert writer.sha256("ckpt-bucket", "run/a") == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert writer.sha256("ckpt-bucket", "run/none") is None


def test_checkpoint_store_translates_a_missing_bucket(aws: None) -> None:
    reader = S3CheckpointStore(s3=boto3.client("s3", region_name=REGION))
    with pytest.raises(CheckpointUnreadable, match="NoSuchBucket"):
        reader.list("no-such-bucket", "run/")
    with pytest.raises(CheckpointUnreadable, match="NoSuchBucket"):
        reader.get("no-such-bucket", "run/latest", 10)


# --- the other channels -------------------------------------------------------------------
def _envelope() -> CommandEnvelope:
    return CommandEnvelope(
        command_id="inc:jobs",
        incident_id="inc",
        execution_name="inc",
        task_token="tok",
        requested_at=datetime(2026, 3, 14, tzinfo=UTC),
        command=JobsOnNodes(nodes=["ip-10-1-0-7"]),
    )


def test_the_slurm_orchestrator_puts_a_typed_command_on_the_agents_queue(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="commands")["QueueUrl"]
    envelope = _envelope()
    SlurmAgentOrchestrator(SqsQueue(url, sqs=sqs), StepFunctions()).dispatch(envelope)
    message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"][0]
    assert CommandEnvelope.model_validate_json(message["Body"]) == envelope
    assert message["MessageAttributes"]["command"]["StringValue"] == "jobs_on_nodes"
    assert message["MessageAttributes"]["incident"]["StringValue"] == "inc"


# Every documented SendTaskSuccess error, and the generic ones AWS sends any call (not in the model).
@pytest.mark.parametrize("answer_error", [*modeled_errors("SendTaskSuccess"), "ThrottlingException", "AccessDeniedException"])
def test_the_slurm_orchestrator_names_its_failures_as_the_state_machines_retry_them(aws: None, answer_error: str) -> None:
    # Given a command queue that does not exist, and Step Functions refusing an answer (moto accepts
    # any token, so its refusals are stubbed with SendTaskSuccess's documented error codes)
    sqs = boto3.client("sqs", region_name=REGION)
    sfn = boto3.client("stepfunctions", region_name=REGION)
    orchestrator = SlurmAgentOrchestrator(
        SqsQueue(f"https://sqs.{REGION}.amazonaws.com/123456789012/gone", sqs=sqs), StepFunctions(stepfunctions=sfn)
    )
    # When a command is dispatched, or a task answered, Then each is ControllerChannelError (never a botocore error)
    with pytest.raises(ControllerChannelError, match="could not queue jobs_on_nodes for inc"):
        orchestrator.dispatch(_envelope())
    reply: CommandReply[Any] = CommandReply(
        command_id="inc:drain", type="drain_nodes", requested_at=T0, started_at=T0, completed_at=T0, result=DrainResult(drained=[])
    )
    with Stubber(sfn) as stub, pytest.raises(ControllerChannelError, match=f"could not answer task for inc:drain.*{answer_error}"):
        stub.add_client_error("send_task_success", answer_error, "no", http_status_code=400)
        orchestrator.answer("token", reply)


def test_notifier_publishes_with_an_outcome_attribute(aws: None) -> None:
    sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
    topic = sns.create_topic(Name="t")["TopicArn"]
    url = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"],
    )
    SnsNotifier(topic, sns=sns).publish("subject", "body", {"outcome": "escalated"})
    delivered = json.loads(sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"])
    assert delivered["Subject"] == "subject" and delivered["MessageAttributes"]["outcome"]["Value"] == "escalated"


def test_dead_letters_keep_the_body_and_the_reason(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    DeadLetterQueue(SqsQueue(url, sqs=sqs)).send("{bad", "body: not JSON", "m-1")
    message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"][0]
    assert message["Body"] == "{bad" and message["MessageAttributes"]["rejection_reason"]["StringValue"] == "body: not JSON"
    assert message["MessageAttributes"]["original_message_id"]["StringValue"] == "m-1"


def test_a_queue_that_does_not_take_the_message_is_queue_unavailable(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    with pytest.raises(QueueUnavailable, match="SendMessage"):
        DeadLetterQueue(SqsQueue(f"https://sqs.{REGION}.amazonaws.com/123456789012/gone", sqs=sqs)).send("{bad", "", "")


def test_checkpoint_store_reads_an_empty_object_that_s3_refuses_to_range() -> None:
    # S3 answers 416 InvalidRange to a ranged GET of a zero-byte object (moto does not); the store retries whole.
    from io import BytesIO

    from botocore.response import StreamingBody

    s3 = boto3.client("s3", region_name=REGION)
    stubber = Stubber(s3)
    stubber.add_client_error("get_object", service_error_code="InvalidRange", http_status_code=416)
    stubber.add_response("get_object", {"Body": StreamingBody(BytesIO(b""), 0), "ETag": '"e"'}, {"Bucket": "b", "Key": "k"})
    with stubber:
        assert S3CheckpointStore(s3=s3).get_with_etag("b", "k", 100) == (b"", '"e"')
