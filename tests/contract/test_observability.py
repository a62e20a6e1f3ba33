"""The dashboard and alarms in template.yaml read exactly the metrics the handlers emit
(metric_names.py), every alarm reaches the notification topic, and the runbook's escalation table
and the notification's next steps name the same errors."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from hyperpod_recovery import errors, metric_names
from hyperpod_recovery.domain.messages.advice import ERROR_MEANING as NEXT_STEPS
from sandbox.template import Resolver, load_template
from tests.conftest import ROOT

TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES = TEMPLATE["Resources"]
ALARMS = {name: r["Properties"] for name, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
OUR_DIMENSIONS = {"cluster", "service"}


def _resolver() -> Resolver:
    resolver = Resolver(TEMPLATE, {"ClusterName": "llm-train", "ClusterArn": "arn:aws:sagemaker:us-west-2:1:cluster/x"}, pseudo={})
    resolver.pseudo = {"AWS::Region": "us-west-2", "AWS::StackName": "hpr", "AWS::AccountId": "1", "AWS::Partition": "aws"}
    for logical, resource in RESOURCES.items():
        resolver.refs[logical] = f"ref:{logical}"
        resolver.attrs[(logical, "Arn")] = f"arn:{logical}"
        if resource["Type"] == "AWS::SQS::Queue":
            resolver.attrs[(logical, "QueueName")] = f"queue-{logical}"
    return resolver


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    body = _resolver().resolve(RESOURCES["Dashboard"]["Properties"]["DashboardBody"])
    return json.loads(body)


def _dashboard_metrics(dashboard: dict[str, Any]) -> list[list[Any]]:
    return [m for w in dashboard["widgets"] if w["type"] == "metric" for m in w["properties"]["metrics"]]


def _alarm_metrics(alarm: dict[str, Any]) -> list[dict[str, Any]]:
    if "MetricName" in alarm:
        return [{"Namespace": alarm["Namespace"], "MetricName": alarm["MetricName"], "Dimensions": alarm.get("Dimensions", [])}]
    return [q["MetricStat"]["Metric"] for q in alarm["Metrics"] if "MetricStat" in q]


def test_given_the_dashboard_body_when_resolved_then_it_is_json_whose_metrics_the_handlers_emit(dashboard: dict[str, Any]) -> None:
    ours = [m for m in _dashboard_metrics(dashboard) if m[0] == "HyperPodRecovery"]
    names = {m[1] for m in ours}
    assert names <= metric_names.ALL, f"dashboard reads metrics nobody emits: {sorted(names - metric_names.ALL)}"
    # Every metric we emit is on the dashboard: an emitted figure nobody can see is a wasted one.
    assert names >= metric_names.ALL, f"emitted but not on the dashboard: {sorted(metric_names.ALL - names)}"
    for metric in ours:
        dimensions = {metric[i] for i in range(2, len(metric) - 1, 2) if isinstance(metric[i], str)}
        assert dimensions == OUR_DIMENSIONS, metric  # Powertools publishes cluster + service; anything else reads nothing


def test_given_the_alarm_widget_then_it_shows_every_alarm(dashboard: dict[str, Any]) -> None:
    # (an alarm of one orchestrator only, FindFailedJobsErrorsAlarm on EKS, or of an optional channel,
    # PagerDutyDeadLetterAlarm, or of the hang detector, deployed with it, has a Condition: a dashboard
    # body, one Sub string, cannot name a resource that may not exist; its own alarm pages)
    widget = next(w for w in dashboard["widgets"] if w["type"] == "alarm")
    always = {name for name in ALARMS if "Condition" not in RESOURCES[name]}
    assert set(widget["properties"]["alarms"]) == {f"arn:{name}" for name in always}
    assert always != set(ALARMS) and {RESOURCES[n]["Condition"] for n in set(ALARMS) - always} == {"IsEks", "HasPagerDuty", "DetectsHangs"}


@pytest.mark.parametrize(
    ("alarm", "namespace", "metric"),
    [
        ("IntakeDeadLetterAlarm", "AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("CommandDeadLetterAlarm", "AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("CommandQueueBacklogAlarm", "AWS/SQS", "ApproximateAgeOfOldestMessage"),
        ("ReconcileDeadLetterAlarm", "AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("BreakerOpenAlarm", "HyperPodRecovery", metric_names.BREAKER_OPEN),
        ("RecoveryTimeAlarm", "HyperPodRecovery", metric_names.TIME_TO_RECOVER),
    ],
)
def test_given_each_operator_alarm_then_it_watches_its_metric_and_pages_the_topic(alarm: str, namespace: str, metric: str) -> None:
    properties = ALARMS[alarm]
    assert any(m["Namespace"] == namespace and m["MetricName"] == metric for m in _alarm_metrics(properties))
    # (and to the chat topic when chat is wired: tests/contract/test_notifications.py)
    assert properties["AlarmActions"][0] == {"Ref": "NotificationTopic"}
    assert len(str(_resolver().resolve(properties["AlarmDescription"]))) > 80  # says what it means and what to do


def test_given_every_alarm_then_its_own_metrics_carry_our_dimensions_and_names() -> None:
    for name, alarm in ALARMS.items():
        for metric in _alarm_metrics(alarm):
            if metric["Namespace"] == "HyperPodRecovery":
                assert metric["MetricName"] in metric_names.ALL, name
                assert {d["Name"] for d in metric["Dimensions"]} == OUR_DIMENSIONS, name


def test_every_end_of_both_workflows_reaches_reconcile_and_its_failures_page() -> None:
    """Executions that end without recording (stopped, timed out, crashed) are recorded and notified
    by Reconcile Execution; the one end nobody is told about is a reconcile that failed past its
    retries, which is what the alarm watches (no metric-math alarm over Step Functions' counts)."""
    rule = RESOURCES["ExecutionEndedRule"]["Properties"]
    assert rule["EventPattern"]["detail"]["status"] == ["FAILED", "TIMED_OUT", "ABORTED"]
    machines = [m["Fn::Sub"].rsplit(":stateMachine:", 1)[-1] for m in rule["EventPattern"]["detail"]["stateMachineArn"]]
    assert machines == ["${ClusterName}-node-recovery", "${ClusterName}-job-recovery"]
    assert rule["Targets"] == [{"Id": "reconcile", "Arn": {"Fn::GetAtt": ["ReconcileQueue", "Arn"]}}]
    redrive = RESOURCES["ReconcileQueue"]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["ReconcileDeadLetterQueue", "Arn"]}
    watched = ALARMS["ReconcileDeadLetterAlarm"]["Dimensions"][0]["Value"]
    assert watched == {"Fn::GetAtt": ["ReconcileDeadLetterQueue", "QueueName"]}
    # And no alarm adds up more metrics than CloudWatch allows in one alarm (10)
    assert all(len(a.get("Metrics", [])) <= 10 for a in ALARMS.values())


def _defined_metric_names() -> set[str]:
    """Every name metric_names.py defines (a constant, or the values of a table of them), but ALL."""
    names: set[str] = set()
    for key, value in vars(metric_names).items():
        if key.startswith("_") or key == "ALL" or not key.isupper():
            continue
        if isinstance(value, str):
            names.add(value)
        elif isinstance(value, dict):
            names |= {v for v in value.values() if isinstance(v, str)}
        elif isinstance(value, tuple | list | set | frozenset):
            names |= {v for v in value if isinstance(v, str)}
    return names


def test_given_every_metric_name_defined_then_all_holds_it_and_so_the_dashboard_shows_it() -> None:
    # (a table of names defined but left out of ALL is emitted and never seen: the EKS poller's were)
    assert _defined_metric_names() - metric_names.ALL == set()


def test_no_handler_names_a_metric_outside_metric_names() -> None:
    literal = re.compile(r"add_metric\(name=\"")
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "functions").glob("*/app.py") if literal.search(p.read_text())]
    assert offenders == []


def test_the_safety_gauges_are_reported_on_a_schedule() -> None:
    function = RESOURCES["ReportSafetyStateFunction"]["Properties"]
    (event,) = function["Events"].values()
    assert event == {"Type": "Schedule", "Properties": {"Schedule": "rate(5 minutes)", "Description": event["Properties"]["Description"]}}


def _runbook_escalation_errors() -> set[str]:
    text = (ROOT / "docs" / "runbook.md").read_text()
    section = text.split("## Escalations", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            names |= set(re.findall(r"`([A-Za-z.]+)`", row.split("|")[1]))
    return names


def test_every_escalation_in_the_runbook_has_a_next_step_in_the_notification_and_back() -> None:
    runbook = _runbook_escalation_errors()
    generic = {
        "NodeNotFound",
        "ControllerUnavailable",
        "InvalidCommand",
        "HyperPodApiError",
        "ClusterNotFound",
        "LedgerError",
        "ConfigurationError",
    }
    assert set(NEXT_STEPS) == runbook - generic
    known = {name for name in dir(errors) if not name.startswith("_")} | {"States.Timeout", "States.HeartbeatTimeout"}
    assert set(NEXT_STEPS) <= known
