"""One translator per source into the internal RecoveryRequest (as node-termination-handler does:
one place per event source, with a real sample beside it in models/events.py and events/)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from hyperpod_recovery.errors import ForeignClusterEvent, InvalidRecoveryRequest
from hyperpod_recovery.models.common import NODE_ID_PATTERN, format_validation_error
from hyperpod_recovery.models.events import (
    ALARM_EVENT_DETAIL_TYPE,
    HEALTH_EVENT_DETAIL_TYPE,
    CloudWatchAlarmEvent,
    HyperPodNodeHealthEvent,
    JobFailedEvent,
)
from hyperpod_recovery.models.job_events import JOB_EVENT_SOURCE, JOB_FAILED_DETAIL_TYPE
from hyperpod_recovery.models.requests import (
    JobRecoveryRequest,
    ManualJobRecoveryRequest,
    ManualRecoveryRequest,
    RecoveryRequest,
    Trigger,
)

ALARM_NAME_PREFIX = "hyperpod-recovery-"
_INSTANCE_ID_IN_TEXT = re.compile(r"i-[a-f0-9]{17}\b|i-[a-f0-9]{8}\b")
_NODE_ID = re.compile(NODE_ID_PATTERN)


@dataclass(frozen=True)
class GuardedCluster:
    """The one cluster this stack guards."""

    name: str
    arn: str

    def owns(self, name_or_arn: str | None) -> bool:
        return name_or_arn in (self.name, self.arn)

    @property
    def alarm_prefix(self) -> str:
        return f"{ALARM_NAME_PREFIX}{self.name}-"


@dataclass(frozen=True)
class Ignored:
    """A well-formed event that needs no action (a Healthy transition, an OK alarm)."""

    reason: str


def translate_node_health(event: HyperPodNodeHealthEvent, guarded: GuardedCluster) -> Trigger | Ignored:
    detail = event.detail
    if not (guarded.owns(detail.ClusterName) or guarded.owns(detail.ClusterArn)):
        raise ForeignClusterEvent(f"cluster {detail.ClusterName!r} is not guarded by this stack ({guarded.name!r})")
    status = detail.HealthSummary.HealthStatus
    if status != "Unhealthy":
        return Ignored(f"HealthStatus is {status!r}, not 'Unhealthy'")
    if not _NODE_ID.match(detail.InstanceId):
        raise InvalidRecoveryRequest(f"detail.InstanceId: {detail.InstanceId!r} is not a HyperPod node id")
    summary = detail.HealthSummary
    reason = summary.HealthStatusReason or "HyperPod reported the node Unhealthy"
    if summary.Recommendation:
        reason = f"{reason} Recommendation: {summary.Recommendation}"
    return Trigger(
        source="hyperpod_node_health",
        node_id=detail.InstanceId,
        reason=reason[:2048],
        event_id=event.id,
        detected_at=_aware(event.time),
    )


def translate_alarm(event: CloudWatchAlarmEvent, guarded: GuardedCluster) -> Trigger | Ignored:
    detail = event.detail
    if detail.state.value != "ALARM":
        return Ignored(f"alarm state is {detail.state.value!r}, not 'ALARM'")
    dimensions = [q.metricStat.metric.dimensions for q in detail.configuration.metrics if q.metricStat]
    named_clusters = {d["ClusterName"] for d in dimensions if "ClusterName" in d}
    if not detail.alarmName.startswith(guarded.alarm_prefix) or (named_clusters - {guarded.name, guarded.arn}):
        raise ForeignClusterEvent(
            f"alarm {detail.alarmName!r} does not name cluster {guarded.name!r} "
            f"(expected prefix {guarded.alarm_prefix!r} and no other ClusterName dimension)"
        )
    node_ids = {d["InstanceId"] for d in dimensions if "InstanceId" in d}
    if not node_ids:
        node_ids = set(_INSTANCE_ID_IN_TEXT.findall(detail.alarmName))
    if len(node_ids) != 1:
        raise InvalidRecoveryRequest(
            f"detail.configuration.metrics: alarm {detail.alarmName!r} must name exactly one instance "
            f"(InstanceId dimension or i-... in the name), found {sorted(node_ids) or 'none'}"
        )
    node_id = node_ids.pop()
    if not _NODE_ID.match(node_id):
        raise InvalidRecoveryRequest(f"InstanceId: {node_id!r} is not a HyperPod node id")
    return Trigger(
        source="cloudwatch_alarm",
        node_id=node_id,
        reason=f"CloudWatch alarm {detail.alarmName}: {detail.state.reason}"[:2048],
        event_id=event.id,
        detected_at=_aware(detail.state.timestamp),
    )


def translate_manual(request: ManualRecoveryRequest, now: datetime) -> RecoveryRequest:
    node_ids = sorted(set(request.node_ids))
    return RecoveryRequest(
        cluster=request.cluster,
        node_ids=node_ids,
        triggers=[Trigger(source="manual", node_id=n, reason=request.reason, detected_at=now) for n in node_ids],
        dry_run=request.dry_run,
        detected_at=now,
    )


def translate_job_failed(event: JobFailedEvent, guarded: GuardedCluster) -> JobRecoveryRequest:
    """The controller agent's "job failed" event -> a JobRecovery request."""
    detail = event.detail
    if not guarded.owns(detail.cluster_name):
        raise ForeignClusterEvent(f"job event from cluster {detail.cluster_name!r} is not for this stack ({guarded.name!r})")
    reason = f"job {detail.job_id} ({detail.name}) ended {detail.state}: {detail.reason or 'no reason'}, exit code {detail.exit_code}"
    if detail.signal:
        reason += f", signal {detail.signal}"
    return JobRecoveryRequest(
        cluster=guarded.name,
        job_id=detail.job_id,
        source="slurm_job_failed",
        reason=reason,
        event_id=event.id,
        detected_at=_aware(detail.ended_at),
        failure=detail,
    )


def translate_manual_job(request: ManualJobRecoveryRequest, now: datetime) -> JobRecoveryRequest:
    return JobRecoveryRequest(
        cluster=request.cluster, job_id=request.job_id, source="manual", reason=request.reason, detected_at=now, dry_run=request.dry_run
    )


def parse_intake_event(body: str, guarded: GuardedCluster) -> Trigger | JobRecoveryRequest | Ignored:
    """An SQS message body from the intake queue (an EventBridge event) -> a node trigger or a job request.

    Raises InvalidRecoveryRequest for anything that will never parse (sent to the DLQ) and
    ForeignClusterEvent for another cluster's event (dropped and counted).
    """
    try:
        raw: Any = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidRecoveryRequest(f"body: not JSON ({exc.msg} at position {exc.pos})") from exc
    if not isinstance(raw, dict):
        raise InvalidRecoveryRequest("body: expected an EventBridge event object")
    detail_type = raw.get("detail-type")
    try:
        if raw.get("source") == "aws.sagemaker" and detail_type == HEALTH_EVENT_DETAIL_TYPE:
            return translate_node_health(HyperPodNodeHealthEvent.model_validate(raw), guarded)
        if raw.get("source") == "aws.cloudwatch" and detail_type == ALARM_EVENT_DETAIL_TYPE:
            return translate_alarm(CloudWatchAlarmEvent.model_validate(raw), guarded)
        if raw.get("source") == JOB_EVENT_SOURCE and detail_type == JOB_FAILED_DETAIL_TYPE:
            return translate_job_failed(JobFailedEvent.model_validate(raw), guarded)
    except ValidationError as exc:
        raise InvalidRecoveryRequest(format_validation_error(exc)) from exc
    raise InvalidRecoveryRequest(f"source/detail-type: unsupported event {raw.get('source')!r} / {detail_type!r}")


def group_triggers(triggers: list[Trigger], cluster: str, max_nodes: int) -> list[RecoveryRequest]:
    """A batch of triggers -> requests of at most ``max_nodes`` nodes each.

    A rack failure arrives as many events within seconds; grouping them lets one execution
    replace many nodes in few BatchReplaceClusterNodes calls.
    """
    by_node: dict[str, list[Trigger]] = {}
    for trigger in sorted(triggers, key=lambda t: (t.detected_at, t.node_id)):
        by_node.setdefault(trigger.node_id, []).append(trigger)
    node_ids = sorted(by_node)
    requests = []
    for start in range(0, len(node_ids), max_nodes):
        chunk = node_ids[start : start + max_nodes]
        chunk_triggers = [t for n in chunk for t in by_node[n]]
        requests.append(
            RecoveryRequest(
                cluster=cluster,
                node_ids=chunk,
                triggers=chunk_triggers,
                detected_at=min(t.detected_at for t in chunk_triggers),
            )
        )
    return requests


def incident_id_for(request: RecoveryRequest, episode_window_seconds: int) -> str:
    """Deterministic execution name: the same nodes in the same fault episode give the same name,
    so a duplicate event cannot start a second execution (Step Functions refuses the name)."""
    episode_start = int(request.detected_at.timestamp()) // episode_window_seconds * episode_window_seconds
    stamp = datetime.fromtimestamp(episode_start, UTC).strftime("%Y%m%dT%H%M")
    if len(request.node_ids) == 1:
        return f"hpr-{request.node_ids[0]}-{stamp}"
    digest = hashlib.sha256("|".join([request.cluster, *request.node_ids]).encode()).hexdigest()[:10]
    return f"hpr-{len(request.node_ids)}n-{digest}-{stamp}"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
