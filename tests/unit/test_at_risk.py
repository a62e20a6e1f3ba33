"""At-risk signals: each source read by the convention (the alert manager's documented JSON
template, a CloudWatch alarm's SNS message and its EventBridge state change), refused with why when
it cannot be read, judged into one verdict per episode on moto's DynamoDB, an enforced one starting
its planned swap (hps-<verdict_id>) or failing closed, and each verdict's outcome settled later."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.stepfunctions import StepFunctions
from hyperpod_recovery.domain.at_risk.alertmanager import parse_alertmanager
from hyperpod_recovery.domain.at_risk.cloudwatch import parse_alarm_notification, parse_alarm_state_change
from hyperpod_recovery.domain.at_risk.judge import MIN_OUTCOMES, failure_chance
from hyperpod_recovery.domain.at_risk.kubernetes import condition_reports, event_reports
from hyperpod_recovery.domain.at_risk.outcomes import NodeFailure, settle, signal_stats
from hyperpod_recovery.domain.at_risk.settings import DEFAULTS, parse_signal_settings
from hyperpod_recovery.domain.at_risk.signals import UnreadableSignal
from hyperpod_recovery.domain.intake.execution_names import NAME_LIMIT, planned_swap_execution_name
from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
from hyperpod_recovery.errors import ConfigurationError
from hyperpod_recovery.models.at_risk import AtRiskRecord, PlannedSwapRequest, SignalScore
from hyperpod_recovery.models.cluster import ClusterNode
from hyperpod_recovery.models.planned_swap import SwapRecord
from hyperpod_recovery.models.records import IncidentRecord, NodeFate
from hyperpod_recovery.steps.at_risk import AtRiskPorts, at_risk
from hyperpod_recovery.steps.at_risk_tick import tick
from sandbox.at_risk import alarm_message, alertmanager_message, sns_event
from tests.conftest import EVENTS

FIXTURES = EVENTS.parent / "tests" / "fixtures" / "at_risk"

CLUSTER = "llm-train"
NODE = "i-0123456789abcdef0"
STARTS = datetime(2026, 11, 29, 8, 55, tzinfo=UTC)
NOW = STARTS + timedelta(minutes=5)
LIMITS = EventAgeLimits(max_age_seconds=3600, max_skew_seconds=300)
HOST = "ip-10-2-0-7.ec2.internal"
TOPIC = "arn:aws:sns:us-west-2:123456789012:at-risk"
KEYS = {
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
        {"AttributeName": "cluster", "AttributeType": "S"},
        {"AttributeName": "recorded_at", "AttributeType": "S"},
    ],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": "IncidentsByCluster",
            "KeySchema": [{"AttributeName": "cluster", "KeyType": "HASH"}, {"AttributeName": "recorded_at", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "ALL"},
        }
    ],
    "BillingMode": "PAY_PER_REQUEST",
}


@dataclass
class Swaps:
    """The planned swap port: what was asked to start."""

    started: list[PlannedSwapRequest] = field(default_factory=list)

    def start_planned_swap(self, request: PlannedSwapRequest) -> str:
        self.started.append(request)
        return "started"


class Nodes:
    def __init__(self, *nodes: ClusterNode) -> None:
        self.nodes, self.listed = list(nodes), 0

    def list_nodes(self, instance_group: str | None = None) -> list[ClusterNode]:
        self.listed += 1
        return self.nodes


@pytest.fixture
def ledger() -> Iterator[DynamoLedger]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(TableName="ledger", **KEYS)
        yield DynamoLedger("ledger", dynamodb=dynamodb)


def ports(ledger: DynamoLedger, signals: str = "", now: datetime = NOW, swaps: Any = None, nodes: Any = None) -> AtRiskPorts:
    return AtRiskPorts(
        ledger=ledger,
        cluster=nodes or Nodes(ClusterNode(node_id=NODE, instance_group="workers", status="Running", private_dns_hostname=HOST)),
        swaps=swaps if swaps is not None else Swaps(),
        settings=parse_signal_settings(signals),
        cluster_name=CLUSTER,
        orchestrator="slurm",
        limits=LIMITS,
        now=now,
    )


def alert(signal: str = "row_remap_pending") -> str:
    return alertmanager_message(signal=signal, instance_id=NODE, hostname="ip-10-2-0-7", starts_at=STARTS, cluster=CLUSTER)


def deliver(message: str, attributes: dict[str, str] | None = None, message_id: str = "m-1") -> dict[str, Any]:
    event = sns_event(message, topic_arn=TOPIC, message_id=message_id, at=NOW)
    event["Records"][0]["Sns"]["MessageAttributes"] = {k: {"Type": "String", "Value": v} for k, v in (attributes or {}).items()}
    return event


# --- the alert manager's JSON template ---------------------------------------------------------------
def test_given_the_documented_templates_output_when_read_then_it_names_the_signal_the_node_and_the_alerts_start() -> None:
    # Given the message the documented sns.default.message template renders (startsAt in Go's format)
    message = (FIXTURES / "alertmanager_at_risk.json").read_text()
    # When it is read
    reports, skipped = parse_alertmanager(message, {})
    # Then the firing alert that follows the convention is one report; the resolved one is not
    (report,) = reports
    assert (report.signal, report.source, report.instance_id) == ("row_remap_pending", "alertmanager", "i-0a1b2c3d4e5f60718")
    assert report.episode_at == datetime(2026, 11, 29, 8, 55, 12, 345678, tzinfo=UTC)
    assert skipped == {"resolved": 1, "not_ours": 1}


def test_given_the_default_plain_text_body_when_read_then_it_is_refused_naming_the_json_template() -> None:
    with pytest.raises(UnreadableSignal, match=r"sns\.default\.message"):
        parse_alertmanager("Alerts Firing:\nLabels:\n - alertname = RowRemapPending\n", {})


def test_given_a_body_sns_truncated_when_read_then_it_is_refused_not_read_in_part() -> None:
    with pytest.raises(UnreadableSignal, match="truncated"):
        parse_alertmanager(alert(), {"truncated": "true"})


def test_given_an_alert_naming_only_a_hostname_then_the_report_carries_the_short_hostname() -> None:
    body = json.loads(alert())
    del body["alerts"][0]["labels"]["instance_id"]
    body["alerts"][0]["labels"]["Hostname"] = "ip-10-2-0-7.ec2.internal"
    (report,), _ = parse_alertmanager(json.dumps(body), {})
    assert (report.instance_id, report.hostname) == (None, "ip-10-2-0-7")


@given(st.text(max_size=200))
def test_given_any_text_when_read_as_an_alert_message_then_it_is_reports_or_a_refusal_never_another_error(text: str) -> None:
    with contextlib.suppress(UnreadableSignal):
        parse_alertmanager(text, {})


# --- CloudWatch alarms --------------------------------------------------------------------------------
def test_given_an_at_risk_alarms_sns_message_when_read_then_its_name_says_the_signal_and_its_dimension_the_node() -> None:
    report = parse_alarm_notification(alarm_message(signal="thermal", instance_id=NODE, changed_at=STARTS, cluster=CLUSTER))
    assert report is not None
    said = (report.signal, report.source, report.instance_id, report.cluster, report.episode_at)
    assert said == ("thermal", "cloudwatch_alarm", NODE, CLUSTER, STARTS)


def test_given_an_alarm_back_to_ok_or_another_alarm_then_it_is_no_signal() -> None:
    body = json.loads(alarm_message(signal="thermal", instance_id=NODE, changed_at=STARTS, cluster=CLUSTER))
    assert parse_alarm_notification(json.dumps(body | {"NewStateValue": "OK"})) is None
    assert parse_alarm_notification(json.dumps(body | {"AlarmName": "my-other-alarm"})) is None


def test_given_eventbridges_alarm_state_change_when_read_then_the_node_is_its_metrics_dimension() -> None:
    event = json.loads((EVENTS / "cloudwatch" / "alarm_state_change_alarm.json").read_text())
    event["detail"]["alarmName"] = f"hyperpod-at-risk:xid_warning:{NODE}"
    report = parse_alarm_state_change(event)
    assert report is not None and report.signal == "xid_warning" and report.instance_id is not None


# --- settings -----------------------------------------------------------------------------------------
def test_given_no_setting_then_every_signal_is_observed_with_its_default() -> None:
    settings = parse_signal_settings("")
    assert settings.of("row_remap_failure") == DEFAULTS["row_remap_failure"]
    assert settings.of("some_user_signal").mode == "observe"


def test_given_entries_then_each_sets_its_signal_and_star_sets_the_rest() -> None:
    settings = parse_signal_settings("row_remap_failure=enforce:0.9:3d, *=off")
    failure = settings.of("row_remap_failure")
    assert (failure.mode, failure.prior, failure.horizon_seconds) == ("enforce", 0.9, 3 * 86400)
    assert settings.of("some_user_signal").mode == "off"


@pytest.mark.parametrize(
    "text", ["thermal=watch", "thermal=enforce:1.5", "thermal=enforce:0.5:120d", "thermal=observe,thermal=enforce", "Thermal=observe"]
)
def test_given_a_malformed_entry_then_it_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="AtRiskSignals"):
        parse_signal_settings(text)


def test_given_fewer_outcomes_than_needed_then_the_chance_is_the_prior_and_then_the_measured_precision() -> None:
    setting = DEFAULTS["thermal"]
    assert failure_chance(setting, SignalScore(failed=5, not_failed=MIN_OUTCOMES - 6))[0] == setting.prior
    chance, said = failure_chance(setting, SignalScore(failed=5, not_failed=MIN_OUTCOMES - 5))
    assert chance == 5 / MIN_OUTCOMES and said.startswith("measured")


# --- the step: recorded once per episode -------------------------------------------------------------
def test_given_the_same_alert_twice_then_one_verdict_is_kept_with_its_evidence_redacted(ledger: DynamoLedger) -> None:
    body = json.loads(alert())
    body["alerts"][0]["annotations"]["runbook"] = "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345' https://x"
    message = json.dumps(body)
    first = at_risk(deliver(message, message_id="m-1"), ports(ledger))
    second = at_risk(deliver(message, message_id="m-2"), ports(ledger, now=NOW + timedelta(hours=4)))
    assert (first["recorded"], second.get("recorded", 0), second["same_episode"]) == (1, 0, 1)
    (record,) = ledger.at_risk_records(CLUSTER)
    assert record.verdict.observed_at == NOW and record.verdict.node == "ip-10-2-0-7"
    assert "abcdefghijklmnopqrstuvwxyz012345" not in record.verdict.evidence and "[REDACTED:" in record.verdict.evidence


def test_given_a_plain_text_message_then_it_is_counted_refused_and_nothing_is_kept(ledger: DynamoLedger) -> None:
    counts = at_risk(deliver("Alerts Firing: RowRemapPending on ip-10-2-0-7"), ports(ledger))
    assert counts["refused"] == 1 and ledger.at_risk_records(CLUSTER) == []


def test_given_an_alert_for_another_cluster_then_it_is_not_kept(ledger: DynamoLedger) -> None:
    message = alertmanager_message(signal="thermal", instance_id=NODE, hostname=None, starts_at=STARTS, cluster="other")
    assert at_risk(deliver(message), ports(ledger))["foreign"] == 1


def test_given_a_hostname_the_cluster_does_not_have_then_no_verdict_is_kept(ledger: DynamoLedger) -> None:
    body = json.loads(alert())
    del body["alerts"][0]["labels"]["instance_id"]
    body["alerts"][0]["labels"]["Hostname"] = "ip-10-9-9-9"
    assert at_risk(deliver(json.dumps(body)), ports(ledger))["unknown_node"] == 1


def test_given_an_observed_signal_then_no_swap_is_started(ledger: DynamoLedger) -> None:
    swaps = Swaps()
    at_risk(deliver(alert()), ports(ledger, swaps=swaps))
    assert swaps.started == [] and ledger.at_risk_records(CLUSTER)[0].execution is None


def test_given_an_enforced_signal_then_its_swap_starts_named_by_the_verdict_and_again_on_a_repeat(ledger: DynamoLedger) -> None:
    swaps = Swaps()
    at_risk(deliver(alert()), ports(ledger, "row_remap_pending=enforce", swaps=swaps))
    at_risk(deliver(alert(), message_id="m-2"), ports(ledger, "row_remap_pending=enforce", swaps=swaps, now=NOW + timedelta(minutes=1)))
    (record,) = ledger.at_risk_records(CLUSTER)
    assert record.execution == f"hps-{record.verdict.verdict_id}"
    # (a repeat asks again with the kept verdict: Step Functions' name makes it one execution)
    assert [r.verdict for r in swaps.started] == [record.verdict, record.verdict]


def test_given_an_enforced_signal_and_no_planned_swap_state_machine_then_it_fails_closed(ledger: DynamoLedger) -> None:
    swaps = StepFunctions({"node": "arn:node", "job": "arn:job", "planned_swap": ""}, stepfunctions=object())
    with pytest.raises(ConfigurationError, match="PLANNED_SWAP_STATE_MACHINE_ARN"):
        at_risk(deliver(alert()), ports(ledger, "row_remap_pending=enforce", swaps=swaps))


def test_given_a_long_verdict_id_then_the_execution_name_fits_step_functions_and_stays_distinct() -> None:
    one, two = (planned_swap_execution_name(f"{'s' * 48}-{NODE}-{n}") for n in (1795942500, 1795942501))
    assert len(one) <= NAME_LIMIT and one != two and one.startswith("hps-")


# --- outcomes, precision and recall -------------------------------------------------------------------
def kept(ledger: DynamoLedger, signal: str = "row_remap_pending") -> AtRiskRecord:
    at_risk(deliver(alert(signal)), ports(ledger))
    return next(r for r in ledger.at_risk_records(CLUSTER) if r.verdict.signal == signal)


def tick_at(given: AtRiskPorts) -> dict[str, int]:
    tick(given)
    return dict(given.counts)


def incident(at: datetime, node: str = NODE, incident_id: str = "hpr-1") -> IncidentRecord:
    return IncidentRecord(
        incident_id=incident_id, cluster=CLUSTER, outcome="recovered", dry_run=False, trigger=["hyperpod_node_health"],
        nodes=[node], summary="replaced", detected_at=at, recorded_at=at + timedelta(minutes=10),
    )  # fmt: skip


def test_given_a_failure_of_the_node_within_the_horizon_when_the_tick_runs_then_the_verdict_failed_with_its_incident(
    ledger: DynamoLedger,
) -> None:
    record = kept(ledger)
    ledger.save_incident(incident(NOW + timedelta(hours=2)))
    counts = tick_at(ports(ledger, now=NOW + timedelta(hours=3)))
    (settled,) = ledger.at_risk_records(CLUSTER)
    assert (counts["outcome_failed"], settled.outcome, settled.incident) == (1, "failed", "hpr-1")
    assert ledger.at_risk_score(CLUSTER, record.verdict.signal) == SignalScore(failed=1)


def test_given_no_failure_until_the_horizon_passed_then_the_verdict_did_not_fail(ledger: DynamoLedger) -> None:
    record = kept(ledger)
    tick_at(ports(ledger, now=NOW + timedelta(days=6)))
    assert ledger.at_risk_records(CLUSTER)[0].outcome == "pending"
    horizon_end = record.verdict.observed_at + timedelta(seconds=record.verdict.horizon_seconds)
    tick_at(ports(ledger, now=horizon_end))
    assert ledger.at_risk_records(CLUSTER)[0].outcome == "not_failed"


def test_given_a_planned_swap_took_the_node_then_the_outcome_is_swapped_and_counts_in_neither_measure() -> None:
    record = AtRiskRecord.model_validate_json((FIXTURES / "at_risk_record.json").read_text())
    swapped = record.model_copy(update={"execution": f"hps-{record.verdict.verdict_id}"})
    later = record.verdict.observed_at + timedelta(days=30)
    moved = SwapRecord(swap_id=swapped.execution or "", cluster=CLUSTER, outcome="moved", summary="moved", recorded_at=later)
    assert settle(swapped, [], later, moved).outcome == "swapped"  # type: ignore[union-attr]
    (stats,) = signal_stats([settle(swapped, [], later, moved)], [], later)  # type: ignore[list-item]
    assert (stats.swapped, stats.precision, stats.recall) == (1, None, None)


def test_given_failures_some_preceded_by_a_verdict_then_recall_is_the_share_a_verdict_preceded() -> None:
    record = AtRiskRecord.model_validate_json((FIXTURES / "at_risk_record.json").read_text())
    at = record.verdict.observed_at
    failures = [NodeFailure(record.verdict.instance_id, at + timedelta(hours=1), "hpr-1"), NodeFailure("i-0fedcba9876543210", at, "hpr-2")]
    (stats,) = signal_stats([record], failures, at + timedelta(hours=2))
    assert (stats.failed, stats.precision, stats.caught, stats.failures, stats.recall) == (1, 1.0, 1, 2, 0.5)


# --- EKS: node conditions and events ------------------------------------------------------------------
WARNING = {"type": "NvidiaXidWarning", "status": "True", "reason": "XID94", "message": "Xid 94"}
WARNING["lastTransitionTime"] = "2026-11-29T08:55:00Z"


def node(health: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-29T08:00:00Z"}
    return {
        "metadata": {"name": f"hyperpod-{NODE}", "labels": {"sagemaker.amazonaws.com/node-health-status": health}},
        "spec": {"providerID": f"aws:///us-west-2a/{NODE}"},
        "status": {"conditions": [ready, *conditions]},
    }


def test_given_a_fault_condition_on_a_schedulable_node_then_it_is_a_signal_of_its_named_fault_at_its_transition() -> None:
    (report,) = condition_reports([node("Schedulable", WARNING)])
    assert (report.signal, report.source, report.instance_id, report.episode_at) == ("xid_warning", "eks_node_condition", NODE, STARTS)


def test_given_a_node_hyperpod_marked_for_repair_or_only_kubernetes_own_conditions_then_no_signal() -> None:
    assert condition_reports([node("UnschedulablePendingReplacement", WARNING)]) == []
    assert condition_reports([node("Schedulable", WARNING | {"type": "MemoryPressure"}, WARNING | {"status": "False"})]) == []


def test_given_node_events_then_only_warnings_of_the_no_repair_taxonomy_are_signals() -> None:
    def event(reason: str, kind: str = "Warning") -> dict[str, Any]:
        return {"involvedObject": {"kind": "Node", "name": "n1"}, "type": kind, "reason": reason, "firstTimestamp": "2026-11-29T08:55:00Z"}

    reports = event_reports([event("NvidiaXID94Warning"), event("NvidiaThermalError", "Normal"), event("NodeNotReady")], {"n1": NODE})
    assert [(r.signal, r.instance_id, r.episode_at) for r in reports] == [("xid_warning", NODE, STARTS)]


class Kube:
    """The nodes' API as At Risk's tick reads it: one node with a standing warning-only condition."""

    def list_nodes(self) -> list[dict[str, Any]]:
        return [node("Schedulable", WARNING)]

    def list_node_events(self) -> list[dict[str, Any]]:
        return []


def test_given_a_standing_condition_at_every_tick_then_one_verdict_and_the_later_ticks_write_nothing(ledger: DynamoLedger) -> None:
    first, later = ports(ledger), ports(ledger, now=NOW + timedelta(hours=1))
    first.kube = later.kube = Kube()  # type: ignore[assignment]
    tick(first)
    tick(later)
    assert (first.counts["recorded"], later.counts["recorded"], later.counts["standing"]) == (1, 0, 1)
    (record,) = ledger.at_risk_records(CLUSTER)
    assert record.verdict.observed_at == NOW and record.verdict.source == "eks_node_condition"


# --- the ledger's node history ---------------------------------------------------------------------------
def test_given_an_incident_gave_a_node_back_to_service_then_the_tick_keeps_a_node_history_verdict_naming_its_failures(
    ledger: DynamoLedger,
) -> None:
    back = incident(NOW - timedelta(minutes=30), incident_id="hpr-2").model_copy(
        update={"node_fates": [NodeFate(node="ip-10-2-0-7", instance=NODE, fate="in_service")]}
    )
    ledger.save_incident(incident(NOW - timedelta(days=3)))
    ledger.save_incident(back)
    counts = tick_at(ports(ledger))
    (record,) = ledger.at_risk_records(CLUSTER)
    assert counts["node_history_recorded"] == 1 and record.verdict.source == "ledger_history"
    assert "hpr-1" in record.verdict.evidence and "returned_by=hpr-2" in record.verdict.evidence
    assert tick_at(ports(ledger, now=NOW + timedelta(minutes=15))).get("recorded", 0) == 0  # (read since the last tick)


def test_given_an_alarm_notification_through_sns_then_its_verdict_is_kept_as_the_alarms(ledger: DynamoLedger) -> None:
    counts = at_risk(deliver(alarm_message(signal="thermal", instance_id=NODE, changed_at=STARTS, cluster=CLUSTER)), ports(ledger))
    (record,) = ledger.at_risk_records(CLUSTER)
    assert counts["thermal_recorded"] == 1 and (record.verdict.source, record.episode_at) == ("cloudwatch_alarm", STARTS)


def test_given_an_alert_whose_annotation_names_alarmname_then_it_is_still_read_as_an_alert(ledger: DynamoLedger) -> None:
    body = json.loads(alert())
    body["alerts"][0]["annotations"]["runbook"] = 'see "AlarmName" in the alarm'
    at_risk(deliver(json.dumps(body)), ports(ledger))
    assert ledger.at_risk_records(CLUSTER)[0].verdict.source == "alertmanager"


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_*=:.,0123456789 dhm", max_size=60))
def test_given_any_setting_text_then_it_parses_to_valid_settings_or_is_refused_naming_the_parameter(text: str) -> None:
    try:
        settings = parse_signal_settings(text)
    except ValueError as exc:
        assert "AtRiskSignals" in str(exc)
        return
    for setting in settings.table.values():
        assert setting.mode in ("observe", "enforce", "off") and 0 <= setting.prior <= 1 and 60 <= setting.horizon_seconds <= 90 * 86400
