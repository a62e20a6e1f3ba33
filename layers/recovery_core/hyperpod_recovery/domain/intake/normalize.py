"""One translator per source into the internal RecoveryRequest (as node-termination-handler does:
one place per event source, with a real sample beside it in models/events.py and events/)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError

from hyperpod_recovery.domain.intake.reason_budget import within_reason_budget
from hyperpod_recovery.domain.nodes.ladder import recommended_repair
from hyperpod_recovery.errors import ForeignClusterEvent, InvalidRecoveryRequest
from hyperpod_recovery.models.common import NODE_ID_PATTERN, format_validation_error, matches, one_line
from hyperpod_recovery.models.events import (
    ALARM_EVENT_DETAIL_TYPE,
    HEALTH_EVENT_DETAIL_TYPE,
    CloudWatchAlarmEvent,
    HyperPodNodeHealthEvent,
    JobFailedEvent,
)
from hyperpod_recovery.models.job_events import JOB_EVENT_SOURCE, JOB_FAILED_DETAIL_TYPE
from hyperpod_recovery.models.requests import (
    TRIGGER_REASON_LIMIT,
    JobRecoveryRequest,
    ManualJobRecoveryRequest,
    ManualRecoveryRequest,
    RecoveryRequest,
    Trigger,
)

# Alarms opt in by name: hyperpod-recovery:<ClusterName>:... The colons cannot occur in a
# CloudFormation stack name, so none of the stack's own alarms (named <stack>-...) can ever match.
ALARM_NAME_PREFIX = "hyperpod-recovery:"
_INSTANCE_ID_IN_TEXT = re.compile(r"(?<![A-Za-z0-9])i-(?:[a-f0-9]{17}|[a-f0-9]{8})(?![A-Za-z0-9])")
# An event body larger than this is not an event from AWS or from our agent; refused before parsing.
MAX_EVENT_BYTES = 256 * 1024  # EventBridge's own event size limit
# Nor is one nested deeper than this (the deepest we read, an alarm's metric dimensions, is 7 levels).
# Checked after parsing, not left to the parser: how deep json.loads goes before a RecursionError
# depends on the Python version (3.11 refuses 1000 levels, the Lambda runtime's 3.13 parses them).
MAX_EVENT_NESTING = 32
# Events with the same source and reason this close together are one signal (a rack failing).
SAME_SIGNAL_SECONDS = 60


@dataclass(frozen=True)
class GuardedCluster:
    """The one cluster this stack guards."""

    name: str
    arn: str
    # Which jobs it runs: a job is a Slurm job id there, or (EKS) a job object's uid.
    orchestrator: Literal["slurm", "eks"] = "slurm"

    def owns(self, name_or_arn: str | None) -> bool:
        """The cluster's name, its ARN as configured, or its ARN in the other form (id or name)."""
        return name_or_arn is not None and name_or_arn in (self.name, self.arn, self.name_form_arn)

    @property
    def name_form_arn(self) -> str:
        return self.arn.split("cluster/", 1)[0] + "cluster/" + self.name

    @property
    def alarm_prefix(self) -> str:
        return f"{ALARM_NAME_PREFIX}{self.name}:"


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
    if not matches(NODE_ID_PATTERN, detail.InstanceId):
        raise InvalidRecoveryRequest(f"detail.InstanceId: {detail.InstanceId!r} is not a HyperPod node id")
    summary = detail.HealthSummary
    reason = summary.HealthStatusReason or "HyperPod reported the node Unhealthy"
    if summary.Recommendation:
        reason = f"{reason} Recommendation: {summary.Recommendation}"
    return Trigger(
        source="hyperpod_node_health",
        node_ids=[detail.InstanceId],
        reason=one_line(reason, TRIGGER_REASON_LIMIT),
        recommends=recommended_repair(reason),
        event_id=event.id,
        detected_at=_aware(event.time),
    )


def translate_alarm(event: CloudWatchAlarmEvent, guarded: GuardedCluster) -> Trigger | Ignored:
    detail = event.detail
    if detail.state.value != "ALARM":
        return Ignored(f"alarm state is {detail.state.value!r}, not 'ALARM'")
    dimensions = [q.metricStat.metric.dimensions for q in detail.configuration.metrics if q.metricStat]
    named_clusters = {d["ClusterName"] for d in dimensions if "ClusterName" in d}
    if not detail.alarmName.startswith(guarded.alarm_prefix) or {c for c in named_clusters if not guarded.owns(c)}:
        raise ForeignClusterEvent(
            f"alarm {detail.alarmName!r} does not name cluster {guarded.name!r} "
            f"(expected prefix {guarded.alarm_prefix!r} and no other ClusterName dimension)"
        )
    node_ids = {d["InstanceId"] for d in dimensions if "InstanceId" in d}
    if not node_ids:
        # Only the part after "hyperpod-recovery:<cluster>:" names the instance: a cluster whose own
        # name looks like an instance id must not be taken for one.
        node_ids = set(_INSTANCE_ID_IN_TEXT.findall(detail.alarmName.removeprefix(guarded.alarm_prefix)))
    if len(node_ids) != 1:
        raise InvalidRecoveryRequest(
            f"detail.configuration.metrics: alarm {detail.alarmName!r} must name exactly one instance "
            f"(InstanceId dimension or i-... after {guarded.alarm_prefix!r}), found {sorted(node_ids) or 'none'}"
        )
    node_id = node_ids.pop()
    if not matches(NODE_ID_PATTERN, node_id):
        raise InvalidRecoveryRequest(f"InstanceId: {node_id!r} is not a HyperPod node id")
    return Trigger(
        source="cloudwatch_alarm",
        node_ids=[node_id],
        reason=one_line(f"CloudWatch alarm {detail.alarmName}: {detail.state.reason}", TRIGGER_REASON_LIMIT),
        # Only the alarm's name opts in to a reboot (its reason text is CloudWatch's, not a recommendation).
        recommends=recommended_repair(detail.alarmName),
        event_id=event.id,
        detected_at=_aware(detail.state.timestamp),
    )


def translate_manual(request: ManualRecoveryRequest, now: datetime) -> RecoveryRequest:
    node_ids = sorted(set(request.node_ids))
    return RecoveryRequest(
        cluster=request.cluster,
        node_ids=node_ids,
        triggers=[Trigger(source="manual", node_ids=node_ids, reason=one_line(request.reason, TRIGGER_REASON_LIMIT), detected_at=now)],
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
        source="job_failed",
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
    if len(body.encode()) > MAX_EVENT_BYTES:
        raise InvalidRecoveryRequest(f"body: {len(body.encode())} bytes, more than an EventBridge event can hold ({MAX_EVENT_BYTES})")
    try:
        raw: Any = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidRecoveryRequest(f"body: not JSON ({exc.msg} at position {exc.pos})") from exc
    except RecursionError as exc:
        # Thousands of nested brackets: no event is shaped like that. A rejection, not a retry.
        raise InvalidRecoveryRequest("body: JSON nested too deeply to be an event") from exc
    if not isinstance(raw, dict):
        raise InvalidRecoveryRequest("body: expected an EventBridge event object")
    if _nested_deeper_than(raw, MAX_EVENT_NESTING):
        raise InvalidRecoveryRequest(f"body: JSON nested more than {MAX_EVENT_NESTING} levels deep, deeper than any event")
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
    except RecursionError as exc:
        raise InvalidRecoveryRequest("body: an event field is nested too deeply") from exc
    raise InvalidRecoveryRequest(f"source/detail-type: unsupported event {raw.get('source')!r} / {detail_type!r}")


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether parsed JSON has containers more than ``limit`` levels deep (iterative: no recursion)."""
    level: list[Any] = [value]  # the containers at one depth, starting with the event (depth 1)
    for _ in range(limit):
        children = (container.values() if isinstance(container, dict) else container for container in level)
        level = [child for group in children for child in group if isinstance(child, dict | list)]
        if not level:
            return False
    return True


def group_triggers(triggers: list[Trigger], cluster: str, max_nodes: int) -> list[RecoveryRequest]:
    """A batch of triggers -> requests of at most ``max_nodes`` nodes each, every request bounded.

    A rack failure arrives as many events within seconds; grouping them lets one execution
    replace many nodes in few BatchReplaceClusterNodes calls. Per node, one trigger per source is
    kept (the earliest; the others are counted in its ``events``), and the nodes' triggers that
    say the same thing within SAME_SIGNAL_SECONDS become one trigger naming all of them.
    """
    first: dict[tuple[str, str], Trigger] = {}  # (node, source) -> its earliest trigger
    for trigger in sorted(triggers, key=lambda t: (t.detected_at, t.node_ids)):
        for node in trigger.node_ids:
            key = (node, trigger.source)
            if key in first:
                first[key] = first[key].model_copy(update={"events": first[key].events + trigger.events})
            else:
                first[key] = trigger.model_copy(update={"node_ids": [node]})
    node_ids = sorted({node for node, _ in first})
    requests = []
    for start in range(0, len(node_ids), max_nodes):
        chunk = set(node_ids[start : start + max_nodes])
        merged = merge_triggers([t for (node, _), t in sorted(first.items()) if node in chunk])
        requests.append(fit_request(cluster, sorted(chunk), within_reason_budget(merged)))
    return requests


def fit_request(cluster: str, node_ids: list[str], triggers: list[Trigger]) -> RecoveryRequest:
    """The request, within MAX_REQUEST_BYTES whatever its events said: when many distinct signals
    would not fit, each source's signals become one trigger naming all its nodes (the earliest
    time, the first reason, how many others; a reboot only if every one of them asked for it)."""
    detected = min(t.detected_at for t in triggers)
    try:
        return RecoveryRequest(cluster=cluster, node_ids=node_ids, triggers=triggers, detected_at=detected)
    except ValidationError:
        pass
    collapsed = []
    for source in sorted({t.source for t in triggers}):
        group = [t for t in triggers if t.source == source]
        asked = {t.recommends for t in group}
        recommends = "replace" if "replace" in asked else "reboot" if asked == {"reboot"} else "check" if asked == {"check"} else None
        others = f" (and {len(group) - 1} other reasons)" if len(group) > 1 else ""
        collapsed.append(
            Trigger(
                source=source,
                node_ids=sorted({n for t in group for n in t.node_ids}),
                reason=group[0].reason[:200] + others,
                recommends=recommends,
                event_id=group[0].event_id,
                detected_at=min(t.detected_at for t in group),
                events=sum(t.events for t in group),
            )
        )
    return RecoveryRequest(cluster=cluster, node_ids=node_ids, triggers=collapsed, detected_at=detected)


def merge_triggers(triggers: list[Trigger]) -> list[Trigger]:
    """Triggers with the same source and reason, close in time, become one naming all their nodes."""
    merged: list[Trigger] = []
    for trigger in sorted(triggers, key=lambda t: (t.detected_at, t.node_ids)):
        same = next(
            (
                m
                for m in merged
                if (m.source, m.reason, m.recommends) == (trigger.source, trigger.reason, trigger.recommends)
                and (trigger.detected_at - m.detected_at).total_seconds() <= SAME_SIGNAL_SECONDS
            ),
            None,
        )
        if same is None:
            merged.append(trigger)
            continue
        index = merged.index(same)
        merged[index] = same.model_copy(
            update={"node_ids": sorted({*same.node_ids, *trigger.node_ids}), "events": same.events + trigger.events}
        )
    return merged


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
