"""Which outcome reaches which channel (domain/messages/severity.py), for every outcome the code has; and
what the adapter really sends (adapters/notifier.py against moto's SNS and EventBridge and the template's
own rule pattern), through the sandbox's deployed stack too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import jsonschema
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from hyperpod_recovery.adapters.notifier import SnsNotifier
from hyperpod_recovery.domain.messages.notification import HEADLINES, notification
from hyperpod_recovery.domain.messages.severity import CHANNELS, INFORMING_OUTCOMES, PAGING_OUTCOMES, SEVERITIES, channels_of, severity_of
from hyperpod_recovery.errors import NotifierUnavailable
from hyperpod_recovery.models.records import JobFate
from hyperpod_recovery.vocabulary import OUTCOMES
from sandbox.aws import SandboxAWS
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from tests.conftest import EVENTS
from tests.contract.notifications_support import (
    ACCOUNT,
    CHATBOT_CUSTOM_NOTIFICATION,
    PAGERDUTY,
    PAGERDUTY_EVENT,
    REGION,
    SLACK,
    incident_record,
    message_attributes,
    resource_properties,
)

# --- severity routing ----------------------------------------------------------------------------
ROUTES = {  # outcome -> channels, for a record that is not a dry run and leaves no job without a copy
    "recovered": {"topic", "chat"},
    "duplicate": {"topic", "chat"},
    "rejected": {"topic", "chat"},
    "escalated": {"topic", "chat", "pager"},
    "capped": {"topic", "chat", "pager"},
    "stale": {"topic", "chat", "pager"},
    "aborted": {"topic", "chat", "pager"},
    "failed": {"topic", "chat", "pager"},
    "dry_run": {"topic"},
    "recovered_by_itself": {"topic", "chat"},
}


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_given_every_outcome_then_it_reaches_exactly_its_channels(outcome: str) -> None:
    assert set(channels_of(severity_of(incident_record(outcome), stack_dry_run=False))) == ROUTES[outcome]


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_given_a_dry_run_of_any_outcome_then_it_is_quiet_and_never_pages(outcome: str) -> None:
    assert severity_of(incident_record(outcome, dry_run=True), stack_dry_run=False) == "quiet"
    assert "pager" not in channels_of("quiet") and "chat" not in channels_of("quiet")


def test_given_the_routes_then_every_outcome_is_routed_and_pages_exactly_when_the_headline_asks_for_a_human() -> None:
    assert set(ROUTES) == set(OUTCOMES) == PAGING_OUTCOMES | INFORMING_OUTCOMES | {"dry_run"}
    for outcome in OUTCOMES:
        assert ("pager" in ROUTES[outcome]) is HEADLINES[outcome].startswith("ACTION NEEDED"), outcome


def test_given_a_recovery_that_left_a_job_without_a_copy_then_it_pages() -> None:
    orphan = JobFate(job="1001", name="pretrain", fate="not_resubmitted", reason="no verified checkpoint")
    assert severity_of(incident_record("recovered", fates=[orphan]), stack_dry_run=False) == "page"
    # (a recovery informs: its job runs again)
    running = JobFate(job="1001", name="pretrain", fate="resubmitted", copy_id="1002")
    assert severity_of(incident_record("recovered", fates=[running]), stack_dry_run=False) == "inform"


def test_given_a_severity_it_does_not_know_then_the_notifier_pages_rather_than_drop_it() -> None:
    assert set(SEVERITIES) == set(CHANNELS)
    assert channels_of("") == channels_of("page") and channels_of("urgent") == channels_of("page")


# --- the adapter, against moto's SNS and EventBridge and the template's own rule ------------------
@pytest.fixture
def channels() -> Iterator[dict[str, Any]]:
    with mock_aws():
        sns, sqs, events = (boto3.client(s, region_name=REGION) for s in ("sns", "sqs", "events"))

        def inbox(name: str) -> tuple[str, str]:
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

        queues = {}
        for name in ("topic", "chat"):
            arn = sns.create_topic(Name=name)["TopicArn"]
            url, queue_arn = inbox(f"{name}-inbox")
            sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
            queues[name] = (arn, url)
        # The template's PageRule, its pattern resolved, delivering to a queue in place of PagerDuty
        url, queue_arn = inbox("pager-inbox")
        pattern = resource_properties("PageRule", PAGERDUTY)["EventPattern"] | {"account": [ACCOUNT]}
        events.put_rule(Name="page", EventPattern=json.dumps(pattern))
        events.put_targets(Rule="page", Targets=[{"Id": "pager", "Arn": queue_arn}])
        queues["pager"] = ("", url)
        notifier = SnsNotifier(
            queues["topic"][0],
            sns=sns,
            chat_topic_arn=queues["chat"][0],
            pager_event_bus=f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default",
            events=events,
        )
        yield {"notifier": notifier, "queues": queues, "sqs": sqs}


def _received(channels: dict[str, Any]) -> dict[str, list[str]]:
    sqs = channels["sqs"]
    return {
        name: [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]
        for name, (_, url) in channels["queues"].items()
    }


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_given_every_outcome_when_the_notifier_publishes_then_each_channel_receives_it_or_not_by_its_route(
    channels: dict[str, Any], outcome: str
) -> None:
    record = incident_record(outcome, dry_run=outcome == "dry_run")
    subject, body = notification(record, "https://console.aws.amazon.com/states/x")
    channels["notifier"].publish(subject, body, message_attributes(record))
    received = _received(channels)
    assert {name for name, messages in received.items() if messages} == ROUTES[outcome]
    assert received["topic"] == [body]  # the e-mail text, unchanged
    for message in received["chat"]:
        jsonschema.validate(json.loads(message), CHATBOT_CUSTOM_NOTIFICATION)
    # And what the rule sends PagerDuty (its target's InputPath, which moto does not apply) is a valid body
    (target,) = resource_properties("PageRule", PAGERDUTY)["Targets"]
    assert target["InputPath"] == "$.detail.pagerduty"
    for message in received["pager"]:
        jsonschema.validate(json.loads(message)["detail"]["pagerduty"], PAGERDUTY_EVENT)


def test_given_no_channels_wired_when_an_escalation_is_published_then_only_the_topic_receives_it(channels: dict[str, Any]) -> None:
    topic_arn = channels["queues"]["topic"][0]
    notifier = SnsNotifier(topic_arn, sns=channels["notifier"].sns, events=channels["notifier"].events)
    record = incident_record("escalated")
    notifier.publish(*notification(record, "https://x"), message_attributes(record))
    received = _received(channels)
    assert len(received["topic"]) == 1 and not received["chat"] and not received["pager"]


TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:t"
REFUSED_INSIDE_A_200 = {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure", "ErrorMessage": "try again"}]}


def test_given_eventbridge_refuses_the_page_inside_a_200_then_it_is_counted_and_the_topic_still_gets_the_text() -> None:
    events, sns = boto3.client("events", region_name=REGION), boto3.client("sns", region_name=REGION)
    failed: list[str] = []
    notifier = SnsNotifier(TOPIC, sns=sns, pager_event_bus="default", events=events, on_failure=failed.append)
    with Stubber(events) as pager, Stubber(sns) as topic:
        # (Stubber checks each request against botocore's model)
        pager.add_response("put_events", REFUSED_INSIDE_A_200)
        topic.add_response("publish", {"MessageId": "m-1"})
        pager.add_response("put_events", REFUSED_INSIDE_A_200)  # tried once more: refused again
        notifier.publish("s", "b", {"outcome": "escalated", "cluster": "c", "severity": "page", "incident": "i"})
        topic.assert_no_pending_responses()
        pager.assert_no_pending_responses()
    assert failed == ["pager"]


def test_given_every_channel_refuses_then_the_notifier_raises_so_the_step_retries() -> None:
    events, sns = boto3.client("events", region_name=REGION), boto3.client("sns", region_name=REGION)
    notifier = SnsNotifier(TOPIC, sns=sns, pager_event_bus="default", events=events, on_failure=lambda channel: None)
    with Stubber(events) as pager, Stubber(sns) as topic:
        for _ in range(2):  # each tried once more
            pager.add_response("put_events", REFUSED_INSIDE_A_200)
            topic.add_client_error("publish", "Throttled", "Rate exceeded", http_status_code=400)
        with pytest.raises(NotifierUnavailable, match=r"pager: .*InternalFailure: try again; topic: .*Throttled"):
            notifier.publish("s", "b", {"outcome": "escalated", "cluster": "c", "severity": "page", "incident": "i"})


# --- through the sandbox's deployed stack (the real template, handlers and state machines) -----
@pytest.mark.parametrize(
    ("drill", "outcome", "in_chat", "paged"),
    [
        ("rejoin-deadline.json", "escalated", True, True),
        ("default.json", "recovered", True, False),
        ("dry-run.json", "dry_run", False, False),
    ],
)
def test_given_a_sandbox_stack_with_slack_and_pagerduty_when_a_drill_ends_then_each_channel_gets_it_by_severity(
    tmp_path: Path, drill: str, outcome: str, in_chat: bool, paged: bool
) -> None:
    # Given the stack deployed with a Slack channel and PagerDuty: queues watch the chat topic (in
    # Chatbot's place) and the page rule (beside its API destination)
    runner = DrillRunner(load_scenario(EVENTS / "drills" / drill), log_path=tmp_path / "lambda.log")
    chat: list[dict[str, Any]] = []
    pages: list[dict[str, Any]] = []

    @contextmanager
    def deployed_with_channels() -> Iterator[SandboxAWS]:
        with DrillRunner.deployed(runner, {**SLACK, **PAGERDUTY}) as aws:
            sns, sqs, events = aws.client("sns"), aws.client("sqs"), aws.client("events")

            def inbox(name: str) -> tuple[str, str]:
                url = sqs.create_queue(QueueName=name)["QueueUrl"]
                return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

            chat_url, chat_arn = inbox("chat-inbox")
            sns.subscribe(
                TopicArn=aws.resolver.refs["ChatTopic"], Protocol="sqs", Endpoint=chat_arn, Attributes={"RawMessageDelivery": "true"}
            )
            page_url, page_arn = inbox("page-inbox")
            events.put_targets(Rule="sandbox-PageRule", Targets=[{"Id": "observer", "Arn": page_arn}])
            yield aws
            for url, found in ((chat_url, chat), (page_url, pages)):
                found.extend(json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))

    runner.deployed = deployed_with_channels  # type: ignore[method-assign]
    # When the drill runs
    report = runner.run()
    # Then the incident ends as the drill says; chat has its text in Chatbot's schema, or nothing;
    # PagerDuty is sent one Events API v2 trigger for the incident, or nothing
    (incident,) = report["incidents"]
    assert incident["outcome"] == outcome
    assert bool(chat) is in_chat and bool(pages) is paged
    for message in chat:
        jsonschema.validate(message, CHATBOT_CUSTOM_NOTIFICATION)
        assert message["content"]["title"] == report["notifications"][0]["subject"]
    for page in pages:
        jsonschema.validate(page["detail"]["pagerduty"], PAGERDUTY_EVENT)
        assert page["detail"]["pagerduty"]["dedup_key"] == incident["id"]
