"""The notifier's channels against the clock: one slow channel never costs the others their turn, a
channel that failed for a passing reason gets one more try, and a publish with every channel at its
worst ends within its budget (so the function returns, and its failure metrics reach CloudWatch).

The clock is a counter the fake clients move: each attempt costs what it would at its worst."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from hyperpod_recovery.adapters.notifier import ATTEMPT_WORST_SECONDS, SEND_BUDGET_SECONDS, SnsNotifier
from hyperpod_recovery.domain.messages.advice import Deployment
from tests.contract.test_notification_bytes import BUS, CHAT, ESCALATION, STACK, TOPIC


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Channels:
    """SNS and EventBridge as the notifier calls them: each channel answers from its own script of
    outcomes (an exception to raise, or None to take the message), the last one repeating."""

    clock: Clock
    scripts: dict[str, list[Exception | None]]
    attempts: dict[str, int] = field(default_factory=dict)
    delivered: dict[str, int] = field(default_factory=dict)

    def _answer(self, channel: str) -> None:
        self.clock.now += ATTEMPT_WORST_SECONDS  # every attempt at its worst: it ran to its timeouts
        script = self.scripts.get(channel, [None])
        outcome = script[min(self.attempts.get(channel, 0), len(script) - 1)]
        self.attempts[channel] = self.attempts.get(channel, 0) + 1
        if outcome is not None:
            raise outcome
        self.delivered[channel] = self.delivered.get(channel, 0) + 1

    def publish(self, **call: Any) -> dict[str, str]:
        self._answer("topic" if call["TopicArn"] == TOPIC else "chat")
        return {"MessageId": "m-1"}

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self._answer("pager")
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e-1"}]}


def _timeout() -> Exception:
    return ReadTimeoutError(endpoint_url="https://sns.us-west-2.amazonaws.com/")


def _refused(code: str) -> Exception:
    return ClientError({"Error": {"Code": code, "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "Publish")


def _publish(scripts: dict[str, list[Exception | None]]) -> tuple[Channels, Clock, list[str]]:
    clock = Clock()
    channels = Channels(clock, scripts)
    failed: list[str] = []
    notifier = SnsNotifier(
        TOPIC,
        sns=channels,
        chat_topic_arn=CHAT,
        pager_event_bus=BUS,
        events=channels,
        deployment=Deployment(stack=STACK),
        on_failure=failed.append,
        monotonic=clock,
    )
    try:
        notifier.publish("[hyperpod-recovery] llm-train: ESCALATED", "text", ESCALATION)
    except Exception as exc:  # every channel failed: the step's Retry takes it (tested elsewhere)
        assert type(exc).__name__ == "NotifierUnavailable"
    return channels, clock, failed


@pytest.mark.parametrize("channel", ["pager", "topic", "chat"])
def test_given_a_channel_failing_once_for_a_passing_reason_then_its_second_try_delivers_it(channel: str) -> None:
    channels, _, failed = _publish({channel: [_timeout(), None]})
    assert channels.delivered == {"pager": 1, "topic": 1, "chat": 1}
    assert channels.attempts[channel] == 2 and failed == []


@pytest.mark.parametrize("code", ["AuthorizationError", "InvalidParameter", "AccessDeniedException"])
def test_given_a_channel_refused_for_a_reason_that_will_not_pass_then_it_is_not_tried_again(code: str) -> None:
    channels, _, failed = _publish({"topic": [_refused(code), None]})
    assert channels.attempts["topic"] == 1 and failed == ["topic"]


@pytest.mark.parametrize("code", ["Throttled", "Throttling", "InternalError"])
def test_given_a_channel_throttled_or_failing_inside_aws_then_it_is_tried_again(code: str) -> None:
    refused = ClientError(
        {"Error": {"Code": code, "Message": "later"}, "ResponseMetadata": {"HTTPStatusCode": 500 if code == "InternalError" else 400}},
        "Publish",
    )
    channels, _, failed = _publish({"chat": [refused, None]})
    assert channels.attempts["chat"] == 2 and channels.delivered["chat"] == 1 and failed == []


def test_given_every_channel_at_its_worst_then_each_is_tried_and_the_publish_ends_within_its_budget() -> None:
    # Given no channel answering until its timeouts, every time
    channels, clock, failed = _publish({c: [_timeout()] for c in ("pager", "topic", "chat")})
    # Then each got its first try, the retries stopped at the budget, and all three are counted as failed
    assert all(channels.attempts[c] >= 1 for c in ("pager", "topic", "chat"))
    assert clock.now <= SEND_BUDGET_SECONDS
    assert sorted(failed) == ["chat", "pager", "topic"]


def test_given_the_first_channel_hanging_then_the_later_ones_are_still_sent() -> None:
    # Given the page (sent first) hanging on both its tries
    channels, clock, failed = _publish({"pager": [_timeout()]})
    # Then the topic and the chat went out all the same, and the publish stayed within its budget
    assert channels.delivered == {"topic": 1, "chat": 1}
    assert failed == ["pager"] and clock.now <= SEND_BUDGET_SECONDS
