"""At-risk signals delivered as they reach the stack in AWS (docs/runbook.md "At-risk signals"):
an Alertmanager alert rendered by the documented JSON template (``sns.default.message``) or a
CloudWatch alarm's action message, each handed by SNS to At Risk (template.yaml AtRiskFunction) in
the event SNS gives a subscribed function. ``deliver_at_risk_signal`` is the hook a drill's fault
(kind ``at_risk``) and the fleet runner call; the scheduled tick (AtRiskTickFunction) is ``at_risk_tick``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, Literal

from sandbox.aws import REGION
from sandbox.hyperpod import ACCOUNT

AT_RISK_FUNCTION = "AtRiskFunction"
AT_RISK_TICK_FUNCTION = "AtRiskTickFunction"
Via = Literal["alertmanager", "cloudwatch_alarm", "eks_node_event", "eks_node_condition"]
# What each of our signals watches (../shared/reference/at-risk-signals.md: the DCGM fields), for the
# alert's expression and annotations as a user's rule would write them.
DCGM_FIELDS = {
    "row_remap_pending": "DCGM_FI_DEV_ROW_REMAP_PENDING",
    "row_remap_failure": "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "recovery_action": "DCGM_FI_DEV_GPU_RECOVERY_ACTION",
    "xid_warning": "DCGM_FI_DEV_XID_ERRORS",
    "ecc_sbe_rate": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "pcie_replay_rate": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "nvlink_errors": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "thermal": "DCGM_FI_DEV_GPU_TEMP",
}


def go_time(moment: datetime) -> str:
    """Go's time.Time String(), as the documented template renders {{ $alerts.StartsAt }}."""
    return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond * 1000:09d} +0000 UTC"


def alertmanager_message(*, signal: str, instance_id: str, hostname: str | None, starts_at: datetime, cluster: str) -> str:
    """The alert manager's message for one firing alert, as the documented JSON template writes it."""
    field = DCGM_FIELDS.get(signal, "DCGM_FI_DEV_XID_ERRORS")
    labels = {
        "alertname": f"GpuAtRisk_{signal}",
        "hyperpod_cluster": cluster,
        "hyperpod_recovery_signal": signal,
        "instance_id": instance_id,
        **({"Hostname": hostname} if hostname else {}),
        "gpu": "3",
        "severity": "warning",
    }
    annotations = {"summary": f"{field} on {hostname or instance_id} GPU 3", "description": f"{field} > 0 for 5m"}
    alert = {
        "status": "firing",
        "labels": dict(sorted(labels.items())),
        "annotations": dict(sorted(annotations.items())),
        "startsAt": go_time(starts_at),
        "endsAt": "0001-01-01 00:00:00 +0000 UTC",
        "generatorURL": f"https://aps-workspaces.{REGION}.amazonaws.com/workspaces/ws-sandbox/graph",
        "fingerprint": f"{abs(hash((signal, instance_id))) % (1 << 64):016x}",
    }
    return json.dumps({"receiver": "hyperpod-recovery", "status": "firing", "alerts": [alert]})


def alarm_message(*, signal: str, instance_id: str, changed_at: datetime, cluster: str) -> str:
    """A CloudWatch alarm action's SNS message for an at-risk alarm moving into ALARM."""
    name = f"hyperpod-at-risk:{signal}:{instance_id}"
    return json.dumps(
        {
            "AlarmName": name,
            "AlarmDescription": f"{signal} on {instance_id}",
            "AWSAccountId": ACCOUNT,
            "NewStateValue": "ALARM",
            "NewStateReason": (
                "Threshold Crossed: 1 out of the last 1 datapoints [92.0 (29/11/26 09:00:00)] was greater than the threshold (85.0)."
            ),
            "StateChangeTime": f"{changed_at:%Y-%m-%dT%H:%M:%S}.{changed_at.microsecond // 1000:03d}+0000",
            "Region": "US East (N. Virginia)",
            "AlarmArn": f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{name}",
            "OldStateValue": "OK",
            "Trigger": {
                "MetricName": "node_gpu_temperature",
                "Namespace": "ContainerInsights",
                "StatisticType": "Statistic",
                "Statistic": "MAXIMUM",
                "Unit": None,
                "Dimensions": [{"value": cluster, "name": "ClusterName"}, {"value": instance_id, "name": "InstanceId"}],
                "Period": 60,
                "EvaluationPeriods": 1,
                "ComparisonOperator": "GreaterThanThreshold",
                "Threshold": 85.0,
            },
        }
    )


def sns_event(message: str, *, topic_arn: str, message_id: str, at: datetime) -> dict[str, Any]:
    """The event SNS hands a subscribed function for one message (Lambda developer guide, SNS)."""
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": f"{topic_arn}:{message_id}",
                "Sns": {
                    "Type": "Notification",
                    "MessageId": message_id,
                    "TopicArn": topic_arn,
                    "Subject": None,
                    "Message": message,
                    "Timestamp": f"{at:%Y-%m-%dT%H:%M:%S}.{at.microsecond // 1000:03d}Z",
                    "SignatureVersion": "1",
                    "MessageAttributes": {},
                },
            }
        ]
    }


def deliver_at_risk_signal(
    aws: Any, *, cluster: str, instance_id: str, hostname: str | None, signal: str, via: Via, at: datetime, repeat: int = 0
) -> list[dict[str, Any]]:
    """The hook: one signal as SNS delivers it to At Risk (``repeat`` more times, as Alertmanager's
    repeat_interval and SNS's at-least-once delivery do); each invocation's answer (its counts)."""
    if via == "alertmanager":
        message = alertmanager_message(signal=signal, instance_id=instance_id, hostname=hostname, starts_at=at, cluster=cluster)
    elif via == "cloudwatch_alarm":
        message = alarm_message(signal=signal, instance_id=instance_id, changed_at=at, cluster=cluster)
    else:
        raise ValueError(f"via {via!r} is not an SNS delivery (EKS node events and conditions: the Kubernetes fake)")
    topic = aws.resolver.refs["AtRiskTopic"]
    answers = []
    for n in range(repeat + 1):
        event = sns_event(
            message, topic_arn=topic, message_id=f"{signal}-{instance_id}-{int(at.timestamp())}-{n}", at=at + timedelta(seconds=n)
        )
        with aws.api_calls.counting():
            response = aws.client("lambda").invoke(FunctionName=AT_RISK_FUNCTION, Payload=json.dumps(event).encode())
        answers.append(json.loads(response["Payload"].read()))
    return answers


def at_risk_tick(aws: Any, at: datetime) -> dict[str, Any]:
    """One tick of At Risk's schedule (EventBridge's Scheduled Event)."""
    event = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "time": f"{at:%Y-%m-%dT%H:%M:%SZ}", "detail": {}}
    with aws.api_calls.counting():
        response = aws.client("lambda").invoke(FunctionName=AT_RISK_TICK_FUNCTION, Payload=json.dumps(event).encode())
    answer: dict[str, Any] = json.loads(response["Payload"].read())
    return answer
