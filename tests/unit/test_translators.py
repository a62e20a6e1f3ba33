"""One translator per source into the internal RecoveryRequest (domain/normalize.py)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import pytest

from hyperpod_recovery.domain.normalize import (
    GuardedCluster,
    Ignored,
    group_triggers,
    incident_id_for,
    parse_intake_event,
    translate_manual,
)
from hyperpod_recovery.errors import ForeignClusterEvent, InvalidRecoveryRequest
from hyperpod_recovery.models.requests import ManualRecoveryRequest, Trigger
from tests.conftest import load_event

GUARDED = GuardedCluster(name="llm-train", arn="arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6")
T0 = datetime(2026, 3, 14, 9, 21, 7, tzinfo=UTC)


def _trigger(node: str, at: datetime = T0) -> Trigger:
    return Trigger(source="hyperpod_node_health", node_id=node, reason="r", detected_at=at)


def test_unhealthy_health_event_becomes_a_trigger_for_its_instance() -> None:
    # Given the AWS-documented Unhealthy node health event
    body = json.dumps(load_event("hyperpod/node_health_unhealthy.json"))
    # When intake translates it
    trigger = parse_intake_event(body, GUARDED)
    # Then it names the instance, the fault and the recommendation, at the event's time
    assert isinstance(trigger, Trigger)
    assert trigger.node_id == "i-0391f86fa0fe0d465"
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
    assert trigger.source == "cloudwatch_alarm" and trigger.node_id == "i-0391f86fa0fe0d465"
    assert trigger.detected_at == datetime(2026, 3, 14, 9, 22, 40, 125000, tzinfo=UTC)


def test_alarm_without_dimension_falls_back_to_the_instance_id_in_its_name() -> None:
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["configuration"]["metrics"] = []
    trigger = parse_intake_event(json.dumps(event), GUARDED)
    assert isinstance(trigger, Trigger) and trigger.node_id == "i-0391f86fa0fe0d465"


def test_alarm_returning_to_ok_needs_no_action() -> None:
    assert isinstance(parse_intake_event(json.dumps(load_event("cloudwatch/alarm_state_change_ok.json")), GUARDED), Ignored)


def test_alarm_not_opted_in_by_name_is_foreign() -> None:
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["alarmName"] = "gpu-xid-i-0391f86fa0fe0d465"
    with pytest.raises(ForeignClusterEvent, match="hyperpod-recovery-llm-train-"):
        parse_intake_event(json.dumps(event), GUARDED)


def test_alarm_whose_dimension_names_another_cluster_is_foreign() -> None:
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["configuration"]["metrics"][0]["metricStat"]["metric"]["dimensions"]["ClusterName"] = "other"
    with pytest.raises(ForeignClusterEvent):
        parse_intake_event(json.dumps(event), GUARDED)


def test_alarm_naming_no_instance_is_invalid() -> None:
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["alarmName"] = "hyperpod-recovery-llm-train-cluster-wide"
    event["detail"]["configuration"]["metrics"][0]["metricStat"]["metric"]["dimensions"].pop("InstanceId")
    with pytest.raises(InvalidRecoveryRequest, match="exactly one instance"):
        parse_intake_event(json.dumps(event), GUARDED)


def test_manual_request_becomes_one_trigger_per_distinct_node() -> None:
    request = ManualRecoveryRequest(cluster="llm-train", node_ids=["i-0a7e3c9d1b5f24680", "i-0391f86fa0fe0d465", "i-0391f86fa0fe0d465"])
    result = translate_manual(request, T0)
    assert result.node_ids == ["i-0391f86fa0fe0d465", "i-0a7e3c9d1b5f24680"]
    assert [t.source for t in result.triggers] == ["manual", "manual"]
    assert result.dry_run is None  # the stack's default decides


def test_rack_failure_is_grouped_into_requests_of_bounded_size() -> None:
    # Given 64 nodes failing within seconds, each reported twice
    triggers = [_trigger(f"i-{n:017x}", T0 + timedelta(seconds=n % 5)) for n in range(64) for _ in range(2)]
    # When grouped with at most 25 nodes per request
    requests = group_triggers(triggers, "llm-train", max_nodes=25)
    # Then every node is in exactly one request, and duplicates stay with their node
    assert [len(r.node_ids) for r in requests] == [25, 25, 14]
    assert sorted(n for r in requests for n in r.node_ids) == sorted({t.node_id for t in triggers})
    assert all(len(r.triggers) == 2 * len(r.node_ids) for r in requests)
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
