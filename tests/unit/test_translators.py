"""One translator per source into the internal RecoveryRequest (domain/intake/normalize.py)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.intake.execution_names import incident_id_for
from hyperpod_recovery.domain.intake.normalize import (
    MAX_EVENT_NESTING,
    TRIGGER_REASON_LIMIT,
    GuardedCluster,
    Ignored,
    group_triggers,
    parse_intake_event,
    translate_manual,
)
from hyperpod_recovery.errors import ForeignClusterEvent, InvalidRecoveryRequest
from hyperpod_recovery.models.requests import ManualRecoveryRequest, Trigger
from tests.conftest import load_event

GUARDED = GuardedCluster(name="llm-train", arn="arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6")
T0 = datetime(2026, 3, 14, 9, 21, 7, tzinfo=UTC)


def _trigger(node: str, at: datetime = T0) -> Trigger:
    return Trigger(source="hyperpod_node_health", node_ids=[node], reason="r", detected_at=at)


def test_unhealthy_health_event_becomes_a_trigger_for_its_instance() -> None:
    # Given the AWS-documented Unhealthy node health event
    body = json.dumps(load_event("hyperpod/node_health_unhealthy.json"))
    # When intake translates it
    trigger = parse_intake_event(body, GUARDED)
    # Then it names the instance, the fault and the recommendation, at the event's time
    assert isinstance(trigger, Trigger)
    assert trigger.node_ids == ["i-0391f86fa0fe0d465"]
    assert trigger.source == "hyperpod_node_health"
    assert "NvidiaErrorTerminate" in trigger.reason and "Please Replace the Faulty Node." in trigger.reason
    assert trigger.detected_at == T0
    assert trigger.event_id == "7c1f0e2a-3b7d-4c0e-9a51-2f9e0d9b1c11"


def test_healthy_transition_needs_no_action() -> None:
    result = parse_intake_event(json.dumps(load_event("hyperpod/node_health_healthy.json")), GUARDED)
    assert isinstance(result, Ignored) and "Healthy" in result.reason


def test_event_for_another_cluster_is_refused() -> None:
    with pytest.raises(ForeignClusterEvent, match="other-team-cluster"):
        parse_intake_event(json.dumps(load_event("hyperpod/node_health_foreign_cluster.json")), GUARDED)


def test_cluster_may_be_named_by_arn_alone() -> None:
    # Given an event whose ClusterName differs (renamed console display) but whose ARN is ours
    event = load_event("hyperpod/node_health_unhealthy.json")
    event["detail"]["ClusterName"] = "renamed"
    # Then it is still ours
    assert isinstance(parse_intake_event(json.dumps(event), GUARDED), Trigger)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda e: e["detail"].pop("InstanceId"), "detail.InstanceId"),
        (lambda e: e["detail"].__setitem__("InstanceId", "ip-10-1-0-7"), "detail.InstanceId"),
        (lambda e: e["detail"].pop("HealthSummary"), "detail.HealthSummary"),
        (lambda e: e.pop("account"), "account"),
        (lambda e: e.__setitem__("detail-type", "Something Else"), "detail-type"),
    ],
)
def test_malformed_health_event_is_invalid_and_names_the_field(mutate, field) -> None:  # type: ignore[no-untyped-def]
    event = copy.deepcopy(load_event("hyperpod/node_health_unhealthy.json"))
    mutate(event)
    with pytest.raises(InvalidRecoveryRequest, match=field):
        parse_intake_event(json.dumps(event), GUARDED)


@pytest.mark.parametrize("body", ["not json", "[1, 2]", "null", '{"source": "aws.ec2"}'])
def test_body_that_is_not_a_supported_event_is_invalid(body: str) -> None:
    with pytest.raises(InvalidRecoveryRequest):
        parse_intake_event(body, GUARDED)


def test_alarm_names_its_instance_through_the_instance_dimension() -> None:
    trigger = parse_intake_event(json.dumps(load_event("cloudwatch/alarm_state_change_alarm.json")), GUARDED)
    assert isinstance(trigger, Trigger)
    assert trigger.source == "cloudwatch_alarm" and trigger.node_ids == ["i-0391f86fa0fe0d465"]
    assert trigger.detected_at == datetime(2026, 3, 14, 9, 22, 40, 125000, tzinfo=UTC)


def test_alarm_without_dimension_falls_back_to_the_instance_id_in_its_name() -> None:
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["configuration"]["metrics"] = []
    trigger = parse_intake_event(json.dumps(event), GUARDED)
    assert isinstance(trigger, Trigger) and trigger.node_ids == ["i-0391f86fa0fe0d465"]


def test_alarm_returning_to_ok_needs_no_action() -> None:
    assert isinstance(parse_intake_event(json.dumps(load_event("cloudwatch/alarm_state_change_ok.json")), GUARDED), Ignored)


def test_alarm_not_opted_in_by_name_is_foreign() -> None:
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["alarmName"] = "gpu-xid-i-0391f86fa0fe0d465"
    with pytest.raises(ForeignClusterEvent, match="hyperpod-recovery:llm-train:"):
        parse_intake_event(json.dumps(event), GUARDED)


def test_alarm_whose_dimension_names_another_cluster_is_foreign() -> None:
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["configuration"]["metrics"][0]["metricStat"]["metric"]["dimensions"]["ClusterName"] = "other"
    with pytest.raises(ForeignClusterEvent):
        parse_intake_event(json.dumps(event), GUARDED)


def test_alarm_naming_no_instance_is_invalid() -> None:
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["alarmName"] = "hyperpod-recovery:llm-train:cluster-wide"
    event["detail"]["configuration"]["metrics"][0]["metricStat"]["metric"]["dimensions"].pop("InstanceId")
    with pytest.raises(InvalidRecoveryRequest, match="exactly one instance"):
        parse_intake_event(json.dumps(event), GUARDED)


def test_manual_request_becomes_one_trigger_for_its_distinct_nodes() -> None:
    request = ManualRecoveryRequest(cluster="llm-train", node_ids=["i-0a7e3c9d1b5f24680", "i-0391f86fa0fe0d465", "i-0391f86fa0fe0d465"])
    result = translate_manual(request, T0)
    assert result.node_ids == ["i-0391f86fa0fe0d465", "i-0a7e3c9d1b5f24680"]
    assert [(t.source, t.node_ids) for t in result.triggers] == [("manual", ["i-0391f86fa0fe0d465", "i-0a7e3c9d1b5f24680"])]
    assert result.dry_run is None  # the stack's default decides


def test_rack_failure_is_grouped_into_requests_of_bounded_size() -> None:
    # Given 64 nodes failing within seconds, each reported twice
    triggers = [_trigger(f"i-{n:017x}", T0 + timedelta(seconds=n % 5)) for n in range(64) for _ in range(2)]
    # When grouped with at most 25 nodes per request
    requests = group_triggers(triggers, "llm-train", max_nodes=25)
    # Then every node is in exactly one request, and duplicates stay with their node
    assert [len(r.node_ids) for r in requests] == [25, 25, 14]
    assert sorted(n for r in requests for n in r.node_ids) == sorted({n for t in triggers for n in t.node_ids})
    # And each node's duplicate is counted, not repeated: one trigger per node and source, the same
    # signal at the same moment naming all its nodes
    assert all(sum(t.events for t in r.triggers) == 2 * len(r.node_ids) for r in requests)
    assert all(sorted(n for t in r.triggers for n in t.node_ids) == r.node_ids for r in requests)
    assert all(len(r.triggers) <= 5 for r in requests)
    assert requests[0].detected_at == T0


def test_incident_id_is_the_same_for_the_same_nodes_in_the_same_episode() -> None:
    first = group_triggers([_trigger("i-0391f86fa0fe0d465", T0)], "llm-train", 100)[0]
    again = group_triggers([_trigger("i-0391f86fa0fe0d465", T0 + timedelta(seconds=100))], "llm-train", 100)[0]
    later = group_triggers([_trigger("i-0391f86fa0fe0d465", T0 + timedelta(minutes=30))], "llm-train", 100)[0]
    assert incident_id_for(first, 600) == incident_id_for(again, 600) == "hpr-i-0391f86fa0fe0d465-20260314T0920"
    assert incident_id_for(later, 600) != incident_id_for(first, 600)


def test_multi_node_incident_id_is_a_valid_execution_name() -> None:
    request = group_triggers([_trigger(f"i-{n:017x}") for n in range(30)], "llm-train", 100)[0]
    name = incident_id_for(request, 600)
    assert name.startswith("hpr-30n-") and len(name) <= 80
    assert all(c.isalnum() or c == "-" for c in name)


# --- input edges: the whole class, not one example ------------------------------------------------
_HEX = "0123456789abcdef"
cluster_names = st.from_regex(r"\A[a-zA-Z0-9](-?[a-zA-Z0-9]){0,30}\Z") | st.builds(
    lambda a, b: f"train-i-{a}-{b}", st.text(_HEX, min_size=8, max_size=8), st.text(_HEX, min_size=1, max_size=6)
)
instance_ids = st.builds(lambda h: f"i-{h}", st.text(_HEX, min_size=17, max_size=17)) | st.builds(
    lambda h: f"i-{h}", st.text(_HEX, min_size=8, max_size=8)
)


@settings(max_examples=200, deadline=None)
@given(cluster=cluster_names, node=instance_ids, middle=st.sampled_from(["", "xid-", "gpu-errors-", "reboot-"]))
def test_an_alarm_names_its_instance_after_the_cluster_prefix_never_inside_the_cluster_name(cluster: str, node: str, middle: str) -> None:
    # Given an alarm without dimensions, for a cluster whose own name may look like an instance id
    guarded = GuardedCluster(name=cluster, arn="arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6")
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["alarmName"] = f"hyperpod-recovery:{cluster}:{middle}{node}"
    event["detail"]["configuration"]["metrics"] = []
    # When intake translates it
    trigger = parse_intake_event(json.dumps(event), guarded)
    # Then the instance is the one after the prefix
    assert isinstance(trigger, Trigger) and trigger.node_ids == [node]


def test_a_cluster_named_like_an_instance_is_not_taken_for_the_instance() -> None:
    guarded = GuardedCluster(name="team-i-deadbeef", arn=GUARDED.arn)
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["alarmName"] = "hyperpod-recovery:team-i-deadbeef:xid-i-0391f86fa0fe0d465"
    event["detail"]["configuration"]["metrics"] = []
    trigger = parse_intake_event(json.dumps(event), guarded)
    assert isinstance(trigger, Trigger) and trigger.node_ids == ["i-0391f86fa0fe0d465"]


@pytest.mark.parametrize("depth", [1_000, 10_000, 100_000])
@pytest.mark.parametrize("bracket", ["[]", "{}"])
def test_deeply_nested_json_is_a_rejection_with_a_reason_not_a_crash(depth: int, bracket: str) -> None:
    opening, closing = bracket
    body = (opening if opening == "[" else '{"a":') * depth + "1" + closing * depth
    if len(body.encode()) > 256 * 1024:
        with pytest.raises(InvalidRecoveryRequest, match="bytes"):
            parse_intake_event(body, GUARDED)
        return
    with pytest.raises(InvalidRecoveryRequest, match=r"nested|expected an EventBridge event"):
        parse_intake_event(body, GUARDED)


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(min_value=MAX_EVENT_NESTING + 1, max_value=3_000), shape=st.sampled_from(["[]", "{}"]))
def test_an_event_nested_past_the_limit_is_refused_for_its_nesting_on_every_python(depth: int, shape: str) -> None:
    # Given a real health event with one field nested past the limit (however deep json.loads can go:
    # 3.11 gives up near 1000 levels, the Lambda runtime's 3.13 does not)
    event = load_event("hyperpod/node_health_unhealthy.json")
    opening, closing = ("[", "]") if shape == "[]" else ('{"a":', "}")
    body = json.dumps(event).replace('"Tags": {}', '"Tags": ' + opening * depth + "1" + closing * depth)
    # When it arrives, Then it is refused, and the reason says why
    with pytest.raises(InvalidRecoveryRequest, match="nested"):
        parse_intake_event(body, GUARDED)


def test_an_event_nested_up_to_the_limit_is_read() -> None:
    # Given a real health event carrying an extra field nested exactly to the limit (the event itself
    # is 1 level, the field's containers the rest)
    event = load_event("hyperpod/node_health_unhealthy.json")
    event["detail"]["Extra"] = json.loads("[" * (MAX_EVENT_NESTING - 2) + "1" + "]" * (MAX_EVENT_NESTING - 2))
    # When it arrives, Then it is read as the health event it is
    assert isinstance(parse_intake_event(json.dumps(event), GUARDED), Trigger)


def test_a_deeply_nested_field_of_a_real_event_is_a_rejection() -> None:
    event = load_event("hyperpod/node_health_unhealthy.json")
    body = json.dumps(event).replace('"Tags": {}', '"Tags": ' + '{"a":' * 5000 + "1" + "}" * 5000)
    with pytest.raises(InvalidRecoveryRequest):
        parse_intake_event(body, GUARDED)


@settings(max_examples=100, deadline=None)
@given(reason=st.text(min_size=1, max_size=3000))
def test_any_health_reason_becomes_one_printable_line_of_bounded_length(reason: str) -> None:
    # Given a health event whose reason text carries anything (NUL, newlines, escapes, 3000 characters)
    event = load_event("hyperpod/node_health_unhealthy.json")
    event["detail"]["HealthSummary"]["HealthStatusReason"] = reason
    trigger = parse_intake_event(json.dumps(event), GUARDED)
    # Then the trigger's reason is safe to hand to Slurm: no control character, bounded
    assert isinstance(trigger, Trigger)
    assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in trigger.reason) and len(trigger.reason) <= TRIGGER_REASON_LIMIT
