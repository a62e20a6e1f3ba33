"""Bytes on the wire (issue 46): every channel's payload, as the notifier hands it to the SDK, keeps to
that channel's limit as the service counts it, and still parses; and one channel that fails costs
the others nothing.

The limits and the ways of counting are this file's own, from each service's documentation (not
read from the code they check):

- SNS Publish: the message and every attribute's name, type and value, in UTF-8 bytes, at most
  262,144 ("256 KB in size (262,144 bytes, not 262,144 characters)"; MessageAttributeValue: "All parts
  of the message attribute, including name, type, and value, are included"). The subject is counted
  too (the reference is silent) and is printable ASCII of at most 100 characters.
- EventBridge PutEvents: Source, DetailType, Detail and each Resources entry in UTF-8 bytes, Time 14
  bytes if set, "less than 256KB" (Calculating Amazon EventBridge PutEvents event entry size).
- The PagerDuty API destination: the body EventBridge posts (PageRule's InputPath $.detail.pagerduty)
  with the connection's routing_key (32 characters), at most 64 KB (issue 46). EventBridge documents
  no JSON writer, so the body is counted as the costliest usual one would write it.
- Chat: the custom notification's description, at most 3,000 characters (a Slack section), counted
  as UTF-16 units after Slack's mrkdwn escapes (&amp; &lt; &gt;).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import pytest
from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_recovery.adapters.notifier import SnsNotifier
from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.messages.notification import notification
from hyperpod_recovery.domain.messages.severity import severity_of
from hyperpod_recovery.domain.messages.wire import put_events_entry_size
from hyperpod_recovery.errors import NotifierUnavailable
from hyperpod_recovery.metric_names import NOTIFICATION_FAILURES
from hyperpod_recovery.models.records import IncidentRecord
from sandbox.aws import load_handler
from sandbox.report import parse_emf
from tests.contract import test_message_bounds
from tests.contract.notifications_support import CHATBOT_CUSTOM_NOTIFICATION, PAGERDUTY_EVENT, RESOURCES
from tests.fakes import fake_dependencies
from tests.unit.test_dry_run_gate import _record_step

SNS_MESSAGE_BYTES = 262_144
SNS_SUBJECT_CHARACTERS = 100
PUT_EVENTS_ENTRY_BYTES = 256 * 1024  # an entry must be less than this
API_DESTINATION_BODY_BYTES = 64 * 1024
ROUTING_KEY = "R" * 32  # "This is the 32 character Integration Key"
SLACK_SECTION_CHARACTERS = 3_000

TOPIC, CHAT = "arn:aws:sns:us-west-2:123456789012:notifications", "arn:aws:sns:us-west-2:123456789012:chat"
BUS = "arn:aws:events:us-west-2:123456789012:event-bus/default"
STACK = "hpr-prod"
SHOW = "hyperpod-recovery incidents show"
ESCALATION = {"outcome": "escalated", "cluster": "llm-train", "severity": "page", "incident": "hpr-i-0a1b2c-20261126T0900"}


# --- what each service counts ----------------------------------------------------------------
def sns_counted(call: dict[str, Any]) -> int:
    """A Publish as SNS counts it; ``encode`` (strict) fails on anything that is not valid UTF-8."""
    attributes = sum(
        len(name.encode("utf-8")) + len(value["DataType"].encode("utf-8")) + len(value["StringValue"].encode("utf-8"))
        for name, value in call["MessageAttributes"].items()
    )
    return len(call["Message"].encode("utf-8")) + len(call["Subject"].encode("utf-8")) + attributes


def put_events_counted(entry: dict[str, Any]) -> int:
    """EventBridge's getSize(PutEventsRequestEntry), from its user guide."""
    size = 14 if entry.get("Time") is not None else 0
    size += len(entry["Source"].encode("utf-8")) + len(entry["DetailType"].encode("utf-8"))
    size += len(entry["Detail"].encode("utf-8")) if entry.get("Detail") is not None else 0
    return size + sum(len(r.encode("utf-8")) for r in entry.get("Resources") or [])


def api_destination_counted(body: dict[str, Any]) -> int:
    """The posted body at its largest: every non-ASCII character escaped (an emoji as two escapes),
    ``<>&`` escaped as Go's encoder does, ``/`` as ``\\/``, spaces after separators, and the routing key."""
    text = json.dumps({**body, "routing_key": ROUTING_KEY}, ensure_ascii=True)
    for character, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("/", "\\/")):
        text = text.replace(character, escape)
    return len(text.encode("utf-8"))


def slack_counted(text: str) -> int:
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return len(escaped.encode("utf-16-le")) // 2


def subject_ok(subject: str) -> bool:
    return 0 < len(subject) <= SNS_SUBJECT_CHARACTERS and all(32 <= ord(c) < 127 for c in subject) and not subject.startswith(" ")


# --- the SDK clients, as the notifier calls them ---------------------------------------------
@dataclass
class Sns:
    failing: dict[str, Exception] = field(default_factory=dict)
    published: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def publish(self, **call: Any) -> dict[str, str]:
        if call["TopicArn"] in self.failing:
            raise self.failing[call["TopicArn"]]
        self.published.setdefault(call["TopicArn"], []).append(call)
        return {"MessageId": "m-1"}


@dataclass
class Events:
    failing: Exception | None = None
    refused: bool = False
    entries: list[dict[str, Any]] = field(default_factory=list)

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if self.failing is not None:
            raise self.failing
        if self.refused:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure", "ErrorMessage": "try again"}]}
        self.entries.extend(Entries)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e-1"}]}


def _notifier(sns: Sns, events: Events, *, chat: bool = True, pager: bool = True, failed: list[str] | None = None) -> SnsNotifier:
    return SnsNotifier(
        TOPIC,
        sns=sns,
        chat_topic_arn=CHAT if chat else "",
        pager_event_bus=BUS if pager else "",
        events=events,
        deployment=Deployment(stack=STACK),
        on_failure=(failed if failed is not None else []).append,
    )


# --- texts at their worst -------------------------------------------------------------------------
NASTY = [
    '"',
    "\\",
    "\\u00e9",
    "\x00",
    "\x01",
    "\x1f",
    "\x7f",
    "\u2028",
    "é",
    "中",
    "\U0001f600",
    "\U0001f469\u200d\U0001f4bb",
    "```",
    "<",
    ">",
    "&",
    "/",
]
# (lone surrogates included: a Slurm job's name read from JSON can carry one)
ANY_CHARACTER = st.characters(exclude_categories=())
LONG_NAME = st.text(alphabet="abcdefghij-_.0123456789é😀", min_size=200, max_size=1200)
PIECES = st.one_of(st.sampled_from(NASTY), st.text(ANY_CHARACTER, max_size=40), LONG_NAME)
LINES = st.lists(st.lists(PIECES, max_size=10).map("".join), min_size=1, max_size=8).map("\n".join)
MOST_CHARACTERS = 400_000


@st.composite
def bodies(draw: st.DrawFn) -> str:
    """A text of any characters, up to 400,000 of them; or a storm's list of thousands of nodes with long names."""
    if draw(st.booleans()):
        return (draw(LINES) * draw(st.integers(1, 3_000)))[:MOST_CHARACTERS]
    name = draw(LONG_NAME)
    nodes = [f"{name}-{n}" for n in range(draw(st.integers(1_000, 4_000)))]
    return "WHAT FAILED\n" + "\n".join(f"  {node}: {draw(st.sampled_from(NASTY))}" for node in nodes)[:MOST_CHARACTERS]


INCIDENT = st.from_regex(r"hpr-[a-z0-9-]{1,60}", fullmatch=True)
ATTRIBUTES = st.fixed_dictionaries(
    {
        "outcome": st.sampled_from(["escalated", "failed", "capped"]),
        "cluster": st.text(ANY_CHARACTER, min_size=1, max_size=63),
        "severity": st.just("page"),
        "incident": INCIDENT,
    },
    optional={"workflow": st.sampled_from(["node", "job"])},
)
SUBJECTS = st.text(ANY_CHARACTER, max_size=300)
WIRE = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- every channel, any text --------------------------------------------------------------------
@WIRE
@given(subject=SUBJECTS, body=bodies(), attributes=ATTRIBUTES)
def test_given_any_text_then_the_topic_message_as_published_keeps_to_snss_limit_in_bytes(
    subject: str, body: str, attributes: dict[str, str]
) -> None:
    sns = Sns()
    _notifier(sns, Events(), chat=False, pager=False).publish(subject, body, attributes)
    (call,) = sns.published[TOPIC]
    assert sns_counted(call) <= SNS_MESSAGE_BYTES and subject_ok(call["Subject"])
    # And a text cut to fit says so, and where the whole record is
    if len(call["Message"]) < len(body):
        assert f"{SHOW} {attributes['incident']} --stack {STACK}" in call["Message"].rsplit("\n", 1)[-1]


@WIRE
@given(subject=SUBJECTS, body=bodies(), attributes=ATTRIBUTES)
def test_given_any_text_then_the_chat_copy_keeps_to_a_slack_section_and_snss_limit_and_parses(
    subject: str, body: str, attributes: dict[str, str]
) -> None:
    sns = Sns()
    _notifier(sns, Events(), pager=False).publish(subject, body, attributes)
    (call,) = sns.published[CHAT]
    assert sns_counted(call) <= SNS_MESSAGE_BYTES
    message = json.loads(call["Message"])
    jsonschema.validate(message, CHATBOT_CUSTOM_NOTIFICATION)
    description = message["content"]["description"]
    assert slack_counted(description) <= SLACK_SECTION_CHARACTERS
    # (one code block: a fence in the text cannot close it early)
    assert description.startswith("```\n") and description.endswith("\n```") and description.count("```") == 2
    if len(description) < len(body):
        assert f"{SHOW} {attributes['incident']} --stack {STACK}" in description


@WIRE
@given(subject=SUBJECTS, body=bodies(), attributes=ATTRIBUTES)
def test_given_any_text_then_the_page_keeps_to_the_entry_and_the_api_destination_body_limits_and_parses(
    subject: str, body: str, attributes: dict[str, str]
) -> None:
    events = Events()
    _notifier(Sns(), events, chat=False).publish(subject, body, attributes)
    (entry,) = events.entries
    assert put_events_counted(entry) < PUT_EVENTS_ENTRY_BYTES
    page = json.loads(entry["Detail"])["pagerduty"]
    jsonschema.validate(page, PAGERDUTY_EVENT)
    assert api_destination_counted(page) <= API_DESTINATION_BODY_BYTES
    message = page["payload"]["custom_details"]["message"]
    if len(message) < len(body):
        assert f"{SHOW} {attributes['incident']} --stack {STACK}" in message.rsplit("\n", 1)[-1]


@pytest.mark.parametrize("fill", ["x", "é", "<&>", "\U0001f600", '"\\'])
def test_given_a_text_without_line_ends_then_the_page_is_cut_to_within_a_few_bytes_of_the_body_limit(fill: str) -> None:
    # Given a page's text of one unbroken line, far past the body limit
    events = Events()
    _notifier(Sns(), events, chat=False).publish("s", fill * 200_000, {"severity": "page", "incident": "hpr-1", "cluster": "c"})
    page = json.loads(events.entries[0]["Detail"])["pagerduty"]
    # Then the body EventBridge posts, routing key included, is as large as the limit allows, and no larger
    assert API_DESTINATION_BODY_BYTES - 64 <= api_destination_counted(page) <= API_DESTINATION_BODY_BYTES


@given(
    source=st.text(ANY_CHARACTER.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), max_size=60),
    detail=st.text(ANY_CHARACTER.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), max_size=300),
    resources=st.lists(st.text(max_size=80), max_size=4),
    timed=st.booleans(),
)
def test_given_any_entry_then_its_size_is_the_one_eventbridge_documents(
    source: str, detail: str, resources: list[str], timed: bool
) -> None:
    entry: dict[str, Any] = {"Source": source, "DetailType": source[::-1], "Detail": detail, "Resources": resources}
    if timed:
        entry["Time"] = "2026-11-28T09:00:00Z"
    assert put_events_entry_size(entry) == put_events_counted(entry)


def test_given_a_lone_surrogate_in_a_name_then_every_channel_is_sent_valid_utf8() -> None:
    # Given a Slurm job's name read from JSON with half an emoji in it
    sns, events = Sns(), Events()
    _notifier(sns, events).publish("job \ud83d", "job train-\ud83d failed", ESCALATION | {"cluster": "c\udfff"})
    # Then each channel was sent (the SDK would refuse text it cannot encode), in valid UTF-8
    (topic,), (chat,), (entry,) = sns.published[TOPIC], sns.published[CHAT], events.entries
    for text in (topic["Message"], chat["Message"], entry["Detail"], topic["MessageAttributes"]["cluster"]["StringValue"]):
        text.encode("utf-8")


def test_given_a_text_cut_to_fit_then_it_ends_at_a_line_when_one_is_near_and_keeps_every_character_before_it() -> None:
    # Given a page's text of 2,000 lines of 60 characters with an escape-heavy character in each
    body = "\n".join(f'{n:05d} ip-10-0-{n % 250}-1 "é" \\ 😀 ' + "x" * 30 for n in range(2_000))
    events = Events()
    _notifier(Sns(), events, chat=False).publish("s", body, {"severity": "page", "incident": "hpr-1", "cluster": "c"})
    message = json.loads(events.entries[0]["Detail"])["pagerduty"]["payload"]["custom_details"]["message"]
    kept, note = message.split("\n... ", 1)
    # Then what is kept is the text's beginning, whole lines of it, and the note counts what is not
    assert body.startswith(kept + "\n") and note.startswith(f"{len(body) - len(kept):,} more characters cut here")


# --- the largest escalation, before/after figures ---------------------------------------------------
def _largest_escalation(fill: str) -> IncidentRecord:
    """test_message_bounds' largest incident (100 named nodes, 100 jobs, every text at its longest),
    of a 2,048-node job (the rest counted, not named), its texts in one character."""
    long = fill * 2000
    original, test_message_bounds.LONG = test_message_bounds.LONG, long
    try:
        record = test_message_bounds._largest("slurm")
    finally:
        test_message_bounds.LONG = original
    return record.model_copy(update={"nodes_omitted": 2048 - len(record.nodes)})


@pytest.mark.parametrize("fill", ["x", "é", "\U0001f600"], ids=["ascii", "accented", "emoji"])
def test_the_largest_escalations_page_fits_every_channel(fill: str) -> None:
    # Given the largest escalation's text, in one of three characters
    record = _largest_escalation(fill)
    subject, body = notification(record, "https://console/" + "e" * 300, deployment=Deployment(stack=STACK))
    attributes = {
        "outcome": record.outcome,
        "cluster": record.cluster,
        "severity": severity_of(record, stack_dry_run=False),
        "incident": record.incident_id,
    }
    sns, events = Sns(), Events()
    # When it is published to the three channels
    _notifier(sns, events).publish(subject, body, attributes)
    (topic,), (chat,), (entry,) = sns.published[TOPIC], sns.published[CHAT], events.entries
    page = json.loads(entry["Detail"])["pagerduty"]
    figures = {
        "text (UTF-8 bytes)": len(body.encode()),
        "topic Publish": sns_counted(topic),
        "chat Publish": sns_counted(chat),
        "chat description (Slack characters)": slack_counted(json.loads(chat["Message"])["content"]["description"]),
        "PutEvents entry": put_events_counted(entry),
        "API destination body (at its largest)": api_destination_counted(page),
    }
    print(f"{fill!a}: " + json.dumps(figures))
    # Then each keeps to its channel's limit
    assert figures["topic Publish"] <= SNS_MESSAGE_BYTES and figures["chat Publish"] <= SNS_MESSAGE_BYTES
    assert figures["chat description (Slack characters)"] <= SLACK_SECTION_CHARACTERS
    assert figures["PutEvents entry"] < PUT_EVENTS_ENTRY_BYTES
    assert figures["API destination body (at its largest)"] <= API_DESTINATION_BODY_BYTES


# --- one channel failing ---------------------------------------------------------------------------
def _client_error(operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation
    )


FAILURES = {
    "client error": lambda operation: _client_error(operation),
    "read timeout": lambda operation: ReadTimeoutError(endpoint_url="https://example.amazonaws.com/"),
    "connect timeout": lambda operation: ConnectTimeoutError(endpoint_url="https://example.amazonaws.com/"),
    "unreachable": lambda operation: EndpointConnectionError(endpoint_url="https://example.amazonaws.com/"),
}


def _failing(channel: str, failure: str) -> tuple[Sns, Events]:
    if channel == "pager":
        return Sns(), Events(refused=True) if failure == "refused inside a 200" else Events(failing=FAILURES[failure]("PutEvents"))
    return Sns(failing={TOPIC if channel == "topic" else CHAT: FAILURES[failure]("Publish")}), Events()


ROWS = [(c, f) for c in ("pager", "topic", "chat") for f in FAILURES] + [("pager", "refused inside a 200")]


@pytest.mark.parametrize(("channel", "failure"), ROWS)
def test_given_one_channel_failing_then_the_others_are_sent_and_only_its_failure_is_counted_and_logged(
    channel: str, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given the three channels wired, one of them failing
    sns, events = _failing(channel, failure)
    failed: list[str] = []
    # When an escalation is published
    _notifier(sns, events, failed=failed).publish("[hyperpod-recovery] llm-train: ESCALATED", "text", ESCALATION)
    # Then the other two got it, the failing one is counted once, and nothing was raised
    sent = {"topic": TOPIC in sns.published, "chat": CHAT in sns.published, "pager": bool(events.entries)}
    assert sent == {c: c != channel for c in ("topic", "chat", "pager")}
    assert failed == [channel]
    # And one log line names the channel and its error
    (line,) = [r for r in caplog.records if hasattr(r, "channel")]
    assert (line.levelname, line.channel, line.incident) == ("WARNING", channel, ESCALATION["incident"])  # type: ignore[attr-defined]
    assert line.error  # type: ignore[attr-defined]


def test_given_the_page_failing_when_record_outcome_runs_then_the_step_succeeds_and_emits_the_pager_failure_metric(
    lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the stack's Record Outcome with the three channels wired, PutEvents timing out
    deps = fake_dependencies()
    sns, events = Sns(), Events(failing=ReadTimeoutError(endpoint_url="https://events.us-west-2.amazonaws.com/"))
    deps.notifier = SnsNotifier(TOPIC, sns=sns, chat_topic_arn=CHAT, pager_event_bus=BUS, events=events)  # its own metric
    # When an escalation is recorded
    result = load_handler("functions/record_outcome/")(_record_step(False), lambda_context, deps=deps)
    # Then the step answers (the workflow goes on to its end), its page effect is done (no rerun
    # sends the topic and chat again), and the e-mail and chat have the text
    assert result["outcome"] == "escalated"
    effect = deps.ledger.effect_of("inc-1", "notification")
    assert effect is not None and effect.done
    assert len(sns.published[TOPIC]) == len(sns.published[CHAT]) == 1
    # And CloudWatch reads one PagesFailed for the cluster
    emitted = parse_emf(capsys.readouterr().out)
    assert emitted[NOTIFICATION_FAILURES["pager"]]["values"] == [1.0]
    assert not {NOTIFICATION_FAILURES["topic"], NOTIFICATION_FAILURES["chat"]} & set(emitted)


def test_given_the_only_channel_failing_then_nobody_was_told_and_the_step_fails_to_be_retried() -> None:
    # Given a quiet notification (a dry run: the topic alone) and the topic throttled
    failed: list[str] = []
    notifier = _notifier(Sns(failing={TOPIC: _client_error("Publish")}), Events(), failed=failed)
    # Then the publish raises the error Record Outcome's Retry names (nothing went out: a retry duplicates nothing)
    with pytest.raises(NotifierUnavailable, match="topic: NotifierUnavailable: SNS publish"):
        notifier.publish("s", "b", {**ESCALATION, "severity": "quiet"})
    assert failed == ["topic"]


def test_given_the_undelivered_notifications_alarm_then_it_adds_up_every_channels_failures() -> None:
    alarm = RESOURCES["UndeliveredNotificationsAlarm"]["Properties"]
    stats = {q["Id"]: q["MetricStat"]["Metric"]["MetricName"] for q in alarm["Metrics"] if "MetricStat" in q}
    assert set(stats.values()) == set(NOTIFICATION_FAILURES.values())
    (total,) = [q for q in alarm["Metrics"] if q.get("ReturnData")]
    assert set(re.findall(r"\w+", total["Expression"])) - {"SUM"} == set(stats)
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["TreatMissingData"]) == (
        1,
        "GreaterThanOrEqualToThreshold",
        "notBreaching",
    )
