"""HyperPod's own hang detectors, read (pure: no boto3, no os.environ). docs/decisions.md
2026-11-27 (issue 32) holds the sources; what they do not document is marked ASSUMPTION here, and
no destructive action rests on it: every imported rule is observe-only.

Slurm, HyperPod's hung job detection: an agent on each node, turned on per job (HYPERPOD_HANG_RULES),
writes an event to CloudWatch Logs and can cancel the job. Documented (the Ray on HyperPod page,
sagemaker-hyperpod-ray-hung-job-detection): log group ``/aws/sagemaker/Clusters/<cluster-name>/<cluster-id>``,
log stream ``SageMakerHangJobDetectionEvents/<instance-group-name>/<instance-id>``, "Search for
HANG_DETECTED", and "Each detection event includes the job ID, the evidence that triggered the
detection, and the action taken (notify or cancel)". The event's field names are not documented.

We read it through a CloudWatch Logs subscription to a Lambda function, whose payload IS documented
(CloudWatch Logs, "Subscription filters with AWS Lambda"): ``{"awslogs": {"data": <base64 of a gzip of
JSON>}}``, the JSON holding ``messageType`` (DATA_MESSAGE, or CONTROL_MESSAGE when CloudWatch Logs
checks the destination), ``owner``, ``logGroup``, ``logStream``, ``subscriptionFilters`` and
``logEvents[]`` of ``{id, timestamp (ms), message}``.

EKS, the HyperPod training operator (HyperPodPyTorchJob): its log monitoring rules
(``logMonitoringConfiguration``) evaluate to HANGING or SLOW (documented, sagemaker-eks-operator-usage),
and the operator restarts the job itself. How the job's status says so is not documented: the
HyperPod elastic agent reports the fault with the reason ``LogHang_<rule>`` or ``LogSlow_<rule>``
(hyperpod_elastic_agent, set_agent_state_fault), and the operator's conditions carry a fault's reason
in their message ("The fault of reason NodeFault was remediated in 94283 milliseconds.").
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN
from hyperpod_recovery.redact import redact

if TYPE_CHECKING:
    from hyperpod_recovery.models.hangs import HangRule, HangVerdict

# --- the subscription payload (documented) ---------------------------------------------------------
DATA_MESSAGE = "DATA_MESSAGE"
CONTROL_MESSAGE = "CONTROL_MESSAGE"
# A PutLogEvents batch is at most 1 MiB: a payload that inflates past this is not CloudWatch Logs'.
MAX_DECODED_BYTES = 4 * 1024 * 1024

# --- HyperPod's hang events (documented names) -----------------------------------------------------
HANG_MARKER = "HANG_DETECTED"
HANG_STREAM_PREFIX = "SageMakerHangJobDetectionEvents/"
HANG_ACTIONS = frozenset({"notify", "cancel"})
# ASSUMPTION: the event's field names. The page says an event "includes the job ID, the evidence
# ... and the action taken"; these spellings of those three (and of a rule's name) are our guesses,
# matched without regard to case, '_' or '-', at most MAX_DEPTH objects deep.
JOB_KEYS = ("jobid", "slurmjobid", "job")
ACTION_KEYS = ("action", "actiontaken")
EVIDENCE_KEYS = ("evidence", "reason", "details", "detail", "message")
RULE_KEYS = ("rule", "rulename")
MAX_DEPTH = 3
# ASSUMPTION: an event that is not JSON says ``job_id=1234`` / ``action: cancel`` in its text.
TEXT_JOB = re.compile(r"job[_ -]?id[\"']?\s*[=:]\s*[\"']?([0-9]{1,10}(?:_[0-9]{1,10})?)\b", re.IGNORECASE)
TEXT_ACTION = re.compile(r"action[_ -]?(?:taken)?[\"']?\s*[=:]\s*[\"']?(notify|cancel)\b", re.IGNORECASE)
# Every node of a job runs the agent, so one hang may be told by each node, and (ASSUMPTION) again
# while it lasts: a job's detections within this of one already kept are the same episode.
EPISODE_WINDOW = timedelta(hours=1)
EVIDENCE_LIMIT = 1024

# --- the training operator's faults (ASSUMPTION: where they appear) --------------------------------
OPERATOR_REASON = re.compile(r"^(LogHang|LogSlow)_(.{1,256})$", re.DOTALL)
OPERATOR_MESSAGE = re.compile(r"fault of reason (LogHang|LogSlow)_(.{1,256}?) was remediated")
OPERATOR_TOKEN = re.compile(r"\b(LogHang|LogSlow)_([A-Za-z0-9][A-Za-z0-9_.\-]{0,255})")
OPERATOR_RULES: dict[str, HangRule] = {"LogHang": "hpto_hang", "LogSlow": "hpto_slow"}


class UnreadablePayload(ValueError):
    """The subscription's envelope could not be read (the whole batch)."""


class UnreadableHangEvent(ValueError):
    """One log event is not a hang event we can name a job from (that event only)."""


@dataclass(frozen=True)
class LogEvent:
    id: str
    at: datetime
    message: str


@dataclass(frozen=True)
class LogBatch:
    message_type: str
    log_group: str
    log_stream: str
    events: tuple[LogEvent, ...]


def decode_subscription(event: Any) -> LogBatch:
    """The documented payload CloudWatch Logs hands a subscribed Lambda function; UnreadablePayload
    when it is not one (never another exception)."""
    data = event.get("awslogs", {}).get("data") if isinstance(event, Mapping) and isinstance(event.get("awslogs"), Mapping) else None
    if not isinstance(data, str):
        raise UnreadablePayload("no awslogs.data string")
    try:
        packed = base64.b64decode(data, validate=True)
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip
        raw = inflater.decompress(packed, MAX_DECODED_BYTES)
        if inflater.unconsumed_tail:
            raise UnreadablePayload(f"inflates past {MAX_DECODED_BYTES} bytes")
        document = json.loads(raw.decode("utf-8"))
    except (binascii.Error, zlib.error, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UnreadablePayload(f"not base64 of gzipped JSON: {type(exc).__name__}") from exc
    if not isinstance(document, dict):
        raise UnreadablePayload("the decoded payload is not a JSON object")
    message_type, group, stream = document.get("messageType"), document.get("logGroup"), document.get("logStream")
    raw_events = document.get("logEvents")
    if not (isinstance(message_type, str) and isinstance(group, str) and isinstance(stream, str) and isinstance(raw_events, list)):
        raise UnreadablePayload("messageType, logGroup, logStream or logEvents missing")
    return LogBatch(message_type, group, stream, tuple(_log_events(raw_events)))


def _log_events(raw_events: list[Any]) -> Iterable[LogEvent]:
    for raw in raw_events:
        if not isinstance(raw, dict):
            continue
        timestamp, message = raw.get("timestamp"), raw.get("message")
        if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not isinstance(message, str):
            # (an event without its time or text is still counted: an empty message is unparsable)
            yield LogEvent(str(raw.get("id", ""))[:64], datetime.fromtimestamp(0, UTC), "")
            continue
        try:
            at = datetime.fromtimestamp(timestamp / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            at = datetime.fromtimestamp(0, UTC)
        yield LogEvent(str(raw.get("id", ""))[:64], at, message)


# --- one Slurm hang event --------------------------------------------------------------------------
@dataclass(frozen=True)
class HangDetection:
    """What one HyperPod hang event says: the job, when, what HyperPod did, and why."""

    job: str
    at: datetime
    action: str  # notify | cancel | "" (the event did not say, or said something else)
    evidence: str
    rule: str
    instance_group: str
    instance_id: str
    stream: str


def is_hang_stream(stream: str) -> bool:
    return stream.startswith(HANG_STREAM_PREFIX)


def parse_hang_event(message: str, stream: str, at: datetime) -> HangDetection:
    """One log event of a hang stream; UnreadableHangEvent when it names no job (never another
    exception, whatever the text)."""
    if HANG_MARKER not in message:
        raise UnreadableHangEvent(f"no {HANG_MARKER}")
    if at.timestamp() <= 0:
        raise UnreadableHangEvent("the log event has no time")
    _, group, instance = [*stream.split("/", 2), "", ""][:3]
    try:
        document = json.loads(message)
    except (ValueError, RecursionError):
        document = None
    if isinstance(document, dict):
        job = _found(document, JOB_KEYS)
        action = _found(document, ACTION_KEYS)
        evidence = _found(document, EVIDENCE_KEYS)
        rule = _found(document, RULE_KEYS)
    else:
        job_match, action_match = TEXT_JOB.search(message), TEXT_ACTION.search(message)
        job = job_match.group(1) if job_match else None
        action = action_match.group(1) if action_match else None
        evidence, rule = message, None
    job_text = str(job).strip() if isinstance(job, (str, int)) and not isinstance(job, bool) else ""
    if not re.fullmatch(SLURM_JOB_ID_PATTERN, job_text):
        raise UnreadableHangEvent("no Slurm job id in the event")
    action_text = str(action).strip().lower() if isinstance(action, str) else ""
    return HangDetection(
        job=job_text,
        at=at.replace(microsecond=0),
        action=action_text if action_text in HANG_ACTIONS else "",
        evidence=_text(evidence),
        rule=_text(rule)[:256],
        instance_group=group[:64],
        instance_id=instance[:64],
        stream=stream[:512],
    )


def _key(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def _found(document: dict[str, Any], keys: Sequence[str]) -> Any:
    """The value of the first of ``keys`` (in their order of preference) found in ``document`` or an
    object it holds, the shallowest first."""
    for key in keys:
        found = _found_key(document, key, 0)
        if found is not None:
            return found
    return None


def _found_key(document: dict[str, Any], key: str, depth: int) -> Any:
    for name, value in document.items():
        if isinstance(name, str) and _key(name) == key and value not in (None, ""):
            return value
    if depth + 1 >= MAX_DEPTH:
        return None
    for value in document.values():
        if isinstance(value, dict):
            found = _found_key(value, key, depth + 1)
            if found is not None:
                return found
    return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    # One line of printable characters: a terminal shows it as it is (no escape sequence gets through).
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    text = redact(text)  # (before the cut: a cut first could keep a secret's start, no longer its shape)
    return text if len(text) <= EVIDENCE_LIMIT else text[: EVIDENCE_LIMIT - 1] + "…"


def new_episodes(detections: Sequence[HangDetection], kept: Sequence[HangVerdict], rule: HangRule) -> tuple[list[HangDetection], int]:
    """The detections that start an episode of their job (the earliest of each), and how many
    others fold into one: an episode kept already, or an earlier detection of the batch, within
    EPISODE_WINDOW before it."""
    starts: dict[str, list[datetime]] = {}
    for verdict in kept:
        if verdict.rule == rule:
            starts.setdefault(verdict.job, []).append(verdict.episode_at)
    new: list[HangDetection] = []
    folded = 0
    for detection in sorted(detections, key=lambda d: (d.at, d.job)):
        earlier = starts.setdefault(detection.job, [])
        if any(abs(detection.at - start) <= EPISODE_WINDOW for start in earlier):
            folded += 1
            continue
        earlier.append(detection.at)
        new.append(detection)
    return new, folded


# --- the training operator's HANGING and SLOW faults -----------------------------------------------
@dataclass(frozen=True)
class OperatorFault:
    """A log monitoring rule of a HyperPodPyTorchJob that evaluated to HANGING or SLOW."""

    rule: HangRule  # hpto_hang | hpto_slow
    detector_rule: str
    at: datetime
    condition: str
    evidence: str


def operator_faults(job: Mapping[str, Any]) -> tuple[list[OperatorFault], int]:
    """The job's log monitoring faults its status shows, and how many conditions named one but
    could not be read (no time to name its episode). Never raises, whatever the object.

    ASSUMPTION (undocumented): the reason ``LogHang_<rule>`` / ``LogSlow_<rule>`` appears in a
    ``status.conditions[]`` item, as its ``reason``, or in its ``message`` ("The fault of reason
    LogHang_<rule> was remediated in … milliseconds."); its ``lastTransitionTime`` (else
    ``lastUpdateTime``) names the episode."""
    status = job.get("status") if isinstance(job, Mapping) else None
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(conditions, list):
        return [], 0
    faults: list[OperatorFault] = []
    unreadable = 0
    for condition in conditions:
        if not isinstance(condition, Mapping):
            continue
        named = _operator_reason(condition)
        if named is None:
            continue
        kind, detector_rule = named
        at = _time(condition.get("lastTransitionTime")) or _time(condition.get("lastUpdateTime"))
        if at is None:
            unreadable += 1
            continue
        message = condition.get("message")
        faults.append(
            OperatorFault(
                rule=OPERATOR_RULES[kind],
                detector_rule=_text(detector_rule)[:256],
                at=at,
                condition=str(condition.get("type") or "")[:64],
                evidence=_text(message if isinstance(message, str) else ""),
            )
        )
    return faults, unreadable


def _operator_reason(condition: Mapping[str, Any]) -> tuple[Literal["LogHang", "LogSlow"], str] | None:
    reason, message = condition.get("reason"), condition.get("message")
    found = OPERATOR_REASON.match(reason) if isinstance(reason, str) else None
    if found is None and isinstance(message, str):
        found = OPERATOR_MESSAGE.search(message) or OPERATOR_TOKEN.search(message)
    if found is None or not found.group(2).strip():
        return None
    return ("LogHang" if found.group(1) == "LogHang" else "LogSlow"), found.group(2)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC).replace(microsecond=0)
