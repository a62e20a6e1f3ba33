"""HyperPod's own hang detectors, imported as verdicts: the CloudWatch Logs subscription payload
(documented: a contract), HyperPod's Slurm hang events (undocumented fields: read defensively, never
raising for a batch), each kept once per job and episode on moto's DynamoDB, and the training
operator's HANGING / SLOW faults seen by the EKS poller, recorded and left to the operator."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parser.models import CloudWatchLogsModel
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from hyperpod_recovery.adapters.eks_training_jobs import EksTrainingJobs
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.hangs.imported import (
    EPISODE_WINDOW,
    UnreadableHangEvent,
    UnreadablePayload,
    decode_subscription,
    operator_faults,
    parse_hang_event,
)
from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
from hyperpod_recovery.domain.intake.normalize import GuardedCluster
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.steps.find_failed_jobs import find_failed_jobs
from hyperpod_recovery.steps.import_hyperpod_hangs import OPERATOR_ACTION, Teller, import_hyperpod_hangs
from sandbox.kube import FakeKube
from tests.conftest import EVENTS
from tests.fakes import FakeNotifier, FakeWorkflows

SAMPLE = EVENTS / "cloudwatch-logs" / "hyperpod_hang_subscription.json"
CLUSTER = "llm-train"
STREAM = "SageMakerHangJobDetectionEvents/worker-group-1/i-0123456789abcdef0"
DETECTED = datetime(2026, 11, 27, 9, 40, tzinfo=UTC)
NOW = DETECTED + timedelta(minutes=2)
# MaxEventAgeSeconds and MaxClockSkewSeconds as template.yaml sets them by default.
LIMITS = EventAgeLimits(max_age_seconds=3600, max_skew_seconds=300)
KEYS = {
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
    "BillingMode": "PAY_PER_REQUEST",
}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)


def payload(document: Any) -> dict[str, Any]:
    """A subscription's Lambda event, as CloudWatch Logs builds it: base64 of a gzip of the JSON."""
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()}}


def batch(*messages: str, at: datetime = DETECTED, stream: str = STREAM, message_type: str = "DATA_MESSAGE") -> dict[str, Any]:
    return payload(
        {
            "messageType": message_type,
            "owner": "123456789012",
            "logGroup": f"/aws/sagemaker/Clusters/{CLUSTER}/a1b2c3d4e5f6",
            "logStream": stream,
            "subscriptionFilters": ["hang"],
            "logEvents": [{"id": str(i), "timestamp": int(at.timestamp() * 1000) + i, "message": m} for i, m in enumerate(messages)],
        }
    )


def hang(job: str = "1001", action: str = "cancel") -> str:
    return json.dumps({"event": "HANG_DETECTED", "job_id": job, "action": action, "evidence": "no step for 10 minutes"})


@pytest.fixture
def ledger() -> Iterator[DynamoLedger]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(TableName="ledger", **KEYS)
        yield DynamoLedger("ledger", dynamodb=dynamodb)


def run(ledger: DynamoLedger, event: Any, now: datetime = NOW, mode: str = "observe") -> dict[str, int]:
    teller = Teller(FakeNotifier())
    counts = import_hyperpod_hangs(event=event, ledger=ledger, teller=teller, cluster=CLUSTER, mode=mode, limits=LIMITS, now=now)  # type: ignore[arg-type]
    return {k: v for k, v in counts.items() if k != "verdict_noticed"}  # (the notices: tests/unit/test_verdict_notice.py)


# --- the subscription payload: the documented contract ----------------------------------------------
def test_given_the_sample_payload_when_decoded_then_it_agrees_with_powertools_model_of_the_documented_contract() -> None:
    # Given the sample Lambda event of a CloudWatch Logs subscription
    event = json.loads(SAMPLE.read_text())
    # When we decode it, and Powertools' CloudWatchLogsModel decodes it
    ours = decode_subscription(event)
    theirs = CloudWatchLogsModel.model_validate(event).awslogs.decoded_data
    # Then both read the same group, stream and events (ids, times to the millisecond, text)
    assert (ours.message_type, ours.log_group, ours.log_stream) == (theirs.messageType, theirs.logGroup, theirs.logStream)
    assert [(e.id, e.at, e.message) for e in ours.events] == [(e.id, e.timestamp, e.message) for e in theirs.logEvents]


def test_given_the_sample_payload_then_each_event_names_its_job_and_what_hyperpod_did() -> None:
    decoded = decode_subscription(json.loads(SAMPLE.read_text()))
    first, second = (parse_hang_event(e.message, decoded.log_stream, e.at) for e in decoded.events)
    assert (first.job, first.action, first.rule, first.instance_group, first.instance_id) == (
        "1001",
        "cancel",
        "default",
        "worker-group-1",
        "i-0123456789abcdef0",
    )
    assert first.evidence.startswith("no new log line matching the training-step pattern")
    assert (second.job, second.action) == ("1002", "notify")


@pytest.mark.parametrize(
    "event",
    [
        None,
        {},
        {"awslogs": {}},
        {"awslogs": {"data": "not base64!"}},
        {"awslogs": {"data": base64.b64encode(b"plain").decode()}},
        payload([1, 2]),
    ],
)
def test_given_an_envelope_that_is_not_a_subscriptions_when_decoded_then_it_is_unreadable(event: Any) -> None:
    with pytest.raises(UnreadablePayload):
        decode_subscription(event)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_given_any_bytes_as_the_data_when_decoded_then_only_unreadable_is_raised(data: bytes) -> None:
    for event in (
        {"awslogs": {"data": base64.b64encode(data).decode()}},
        {"awslogs": {"data": base64.b64encode(gzip.compress(data)).decode()}},
    ):
        with contextlib.suppress(UnreadablePayload):
            decode_subscription(event)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_given_any_json_as_the_decoded_document_when_decoded_then_only_unreadable_is_raised(document: Any) -> None:
    with contextlib.suppress(UnreadablePayload):
        decode_subscription(payload(document))


@settings(max_examples=300, deadline=None)
@given(JSON, st.text(max_size=80))
def test_given_any_json_or_text_as_a_hang_event_when_parsed_then_only_unreadable_is_raised(document: Any, text: str) -> None:
    for message in (json.dumps(document), f"HANG_DETECTED {json.dumps(document)}", text, f"HANG_DETECTED {text}"):
        try:
            detection = parse_hang_event(message, STREAM, DETECTED)
        except UnreadableHangEvent:
            continue
        assert detection.job and detection.action in {"", "notify", "cancel"} and len(detection.evidence) <= 1024


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_given_any_json_as_a_job_when_its_operator_faults_are_read_then_nothing_is_raised(status: Any) -> None:
    faults, unreadable = operator_faults({"status": status})
    faults2, unreadable2 = operator_faults({"status": {"conditions": status}})
    assert unreadable >= 0 and unreadable2 >= 0 and all(f.rule in {"hpto_hang", "hpto_slow"} for f in faults + faults2)


@pytest.mark.parametrize(
    "message",
    [
        json.dumps({"event": "HANG_DETECTED", "action": "cancel"}),  # no job
        json.dumps({"event": "HANG_DETECTED", "job_id": "../etc"}),  # not a Slurm job id
        json.dumps({"event": "HEARTBEAT", "job_id": "1001"}),  # not the marker
        "HANG_DETECTED but nothing else",
    ],
)
def test_given_an_event_that_names_no_job_when_parsed_then_it_is_unreadable(message: str) -> None:
    with pytest.raises(UnreadableHangEvent):
        parse_hang_event(message, STREAM, DETECTED)


def test_given_the_job_and_action_nested_in_the_event_then_they_are_found() -> None:
    message = json.dumps({"type": "HANG_DETECTED", "detail": {"JobId": 1003, "ActionTaken": "Cancel", "Evidence": {"gpu_util": 0}}})
    detection = parse_hang_event(message, STREAM, DETECTED)
    assert (detection.job, detection.action, detection.evidence) == ("1003", "cancel", '{"gpu_util": 0}')


class MemoryLedger:
    """The two ledger calls the import makes, in memory (for hypothesis, which runs a test many times)."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str, datetime], RecordedVerdict] = {}

    def verdicts(self, cluster: str, since: datetime | None = None) -> list[RecordedVerdict]:
        return [v for v in self.kept.values() if since is None or v.verdict.episode_at >= since]

    def record_verdict(self, recorded: RecordedVerdict) -> bool:
        key = (recorded.verdict.rule, recorded.verdict.job, recorded.verdict.episode_at)
        if key in self.kept:
            return False
        self.kept[key] = recorded
        return True


MESSAGES = st.one_of(
    st.text(max_size=60),
    st.builds(lambda d: "HANG_DETECTED " + json.dumps(d), JSON),
    st.builds(
        lambda job, action: hang(job, action), st.from_regex(r"[0-9]{1,10}", fullmatch=True), st.sampled_from(["cancel", "notify", "x"])
    ),
)
LOG_EVENTS = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(max_size=8), "timestamp": st.integers(min_value=-(2**40), max_value=2**44) | JSON, "message": MESSAGES | JSON}
    ),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(LOG_EVENTS, st.sampled_from([STREAM, "other", ""]), st.sampled_from(["DATA_MESSAGE", "CONTROL_MESSAGE", "?"]))
def test_given_any_batch_when_imported_then_it_never_raises_and_each_kept_verdict_names_a_job_once(
    events: list[dict[str, Any]], stream: str, message_type: str
) -> None:
    ledger = MemoryLedger()
    document = {
        "messageType": message_type,
        "owner": "1",
        "logGroup": "g",
        "logStream": stream,
        "subscriptionFilters": [],
        "logEvents": events,
    }
    notifier = FakeNotifier()
    counts = import_hyperpod_hangs(
        event=payload(document), ledger=ledger, teller=Teller(notifier), cluster=CLUSTER, mode="observe", limits=LIMITS, now=NOW
    )
    # (one notice per kept verdict, counted beside it)
    assert counts.get("verdict_noticed", 0) == len(notifier.published) == len(ledger.kept)
    counts = {k: v for k, v in counts.items() if k != "verdict_noticed"}
    assert sum(counts.values()) <= max(len(events), 1)
    assert counts.get("hyperpod_hang_recorded", 0) == len(ledger.kept)
    # (one batch: a job's verdicts are episodes more than EPISODE_WINDOW apart; one, unless the batch spans longer)
    for job in {v.verdict.job for v in ledger.kept.values()}:
        starts = sorted(v.verdict.episode_at for v in ledger.kept.values() if v.verdict.job == job)
        assert all(later - earlier > EPISODE_WINDOW for earlier, later in pairwise(starts))


# --- the Slurm step, on moto's DynamoDB ---------------------------------------------------------------
def test_given_a_batch_delivered_three_times_then_one_verdict_per_job_is_kept_saying_what_hyperpod_did(ledger) -> None:
    # Given the sample batch (job 1001 cancelled, job 1002 notified), delivered three times
    event = json.loads(SAMPLE.read_text())
    counts = [run(ledger, event) for _ in range(3)]
    # Then the first delivery keeps two verdicts; the others fold into them
    assert counts[0] == {"hyperpod_hang_recorded": 2}
    assert counts[1] == counts[2] == {"same_episode": 2}
    kept = {v.verdict.job: v for v in ledger.verdicts(CLUSTER)}
    assert set(kept) == {"1001", "1002"}
    cancelled = kept["1001"]
    assert cancelled.verdict.rule == "hyperpod_hang" and cancelled.verdict.mode == "observe" and cancelled.execution is None
    assert cancelled.action == (
        "observed: HyperPod's hung job detection cancelled the job (action cancel); nothing touched (rule hyperpod_hang is observe-only)"
    )
    assert cancelled.verdict.imported is not None and cancelled.verdict.imported.taken == "cancel"
    assert cancelled.verdict.imported.where == "SageMakerHangJobDetectionEvents/worker-group-1/i-0123456789abcdef0"
    assert cancelled.verdict.episode_at == datetime(2026, 11, 27, 9, 40, tzinfo=UTC)
    assert "only reported it (action notify)" in kept["1002"].action


def test_given_each_node_of_the_job_reporting_the_hang_then_it_is_one_episode_and_a_later_hang_another(ledger) -> None:
    # Given node 1 reports job 1001 hung, then node 2 five minutes later (another stream, another batch)
    run(ledger, batch(hang()))
    second = run(ledger, batch(hang(), at=DETECTED + timedelta(minutes=5), stream=STREAM[:-1] + "1"))
    # Then the second is the same episode
    assert second == {"same_episode": 1} and len(ledger.verdicts(CLUSTER)) == 1
    # When the job hangs again after the window (requeued, hung again)
    later = DETECTED + EPISODE_WINDOW + timedelta(minutes=10)
    third = run(ledger, batch(hang(), at=later), now=later)
    # Then that is a new episode, kept as its own verdict
    assert third == {"hyperpod_hang_recorded": 1}
    assert [v.verdict.episode_at for v in ledger.verdicts(CLUSTER)] == [DETECTED, later]


def test_given_unreadable_events_among_readable_ones_then_they_are_counted_and_the_others_kept(ledger) -> None:
    counts = run(ledger, batch("HANG_DETECTED garbled", hang("1004"), json.dumps({"event": "HANG_DETECTED", "job_id": ["x"]})))
    assert counts == {"unparsable": 2, "hyperpod_hang_recorded": 1}
    assert [v.verdict.job for v in ledger.verdicts(CLUSTER)] == ["1004"]


@pytest.mark.parametrize(
    ("event", "counted"),
    [
        (batch(hang(), message_type="CONTROL_MESSAGE"), {"control": 1}),
        (batch(hang(), stream="i-0123456789abcdef0/slurmd"), {"other_stream": 1}),
        ({"awslogs": {"data": "%%%"}}, {"unreadable_batch": 1}),
    ],
)
def test_given_a_batch_that_holds_no_hang_event_then_it_is_counted_and_nothing_is_kept(ledger, event: Any, counted: dict[str, int]) -> None:
    assert run(ledger, event) == counted and ledger.verdicts(CLUSTER) == []


def test_given_the_mode_off_then_nothing_is_read_or_kept(ledger) -> None:
    assert run(ledger, batch(hang()), mode="off") == {"off": 1} and ledger.verdicts(CLUSTER) == []


# --- the EKS poller: the training operator's HANGING and SLOW faults ----------------------------------
AT = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
GUARDED = GuardedCluster(name=CLUSTER, arn="arn:aws:sagemaker:us-west-2:123456789012:cluster/a1b2c3d4e5f6", orchestrator="eks")
A = "hyperpod-i-0123456789abcdef0"


def hpto_cluster(clock: list[datetime]) -> FakeKube:
    fake = FakeKube(now=lambda: clock[0])
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_job("HyperPodPyTorchJob", "team-a", "llama", nodes=[A])
    return fake


def poll(fake: FakeKube, ledger: DynamoLedger, workflows: FakeWorkflows, at: datetime) -> dict[str, int]:
    counts = find_failed_jobs(
        jobs=EksTrainingJobs(fake),
        workflows=workflows,
        ledger=ledger,
        guarded=GUARDED,
        teller=Teller(FakeNotifier()),
        max_age_seconds=3600,
        max_skew_seconds=300,
        now=at,
        remaining_ms=lambda: 30_000,
    )
    return {k: v for k, v in counts.items() if k != "verdict_noticed"}  # (the notices: tests/unit/test_verdict_notice.py)


def test_given_the_operator_restarted_a_hanging_job_when_polled_thrice_then_one_verdict_and_no_recovery(ledger) -> None:
    # Given the training operator restarted job team-a/llama for its JobHangingDetection rule
    clock = [AT]
    fake = hpto_cluster(clock)
    fake.operator_reports_fault(
        "HyperPodPyTorchJob",
        "team-a",
        "llama",
        reason="LogHang_JobHangingDetection",
        message="The fault of reason LogHang_JobHangingDetection was remediated in 5120 milliseconds.",
    )
    workflows = FakeWorkflows()
    # When three polls, a minute apart, see it
    counts = [poll(fake, ledger, workflows, AT + timedelta(minutes=m)) for m in range(3)]
    # Then one verdict of rule hpto_hang is kept, the job left to the operator: no recovery started
    assert [c.get("hpto_hang_recorded", 0) for c in counts] == [1, 0, 0] and workflows.started == {}
    (kept,) = ledger.verdicts(CLUSTER)
    assert (kept.verdict.rule, kept.verdict.mode, kept.verdict.job, kept.action) == (
        "hpto_hang",
        "observe",
        "team-a/llama",
        OPERATOR_ACTION,
    )
    assert kept.verdict.episode_at == AT and kept.verdict.imported is not None
    assert (kept.verdict.imported.detector_rule, kept.verdict.imported.taken) == ("JobHangingDetection", "restarted")
    assert "rule JobHangingDetection evaluated to HANGING" in kept.verdict.summary


def test_given_a_slow_fault_later_then_it_is_another_episode_of_rule_hpto_slow(ledger) -> None:
    clock = [AT]
    fake = hpto_cluster(clock)
    fake.operator_reports_fault("HyperPodPyTorchJob", "team-a", "llama", reason="LogHang_JobHangingDetection", message="hang")
    poll(fake, ledger, FakeWorkflows(), AT)
    # When, ten minutes later, its LowThroughputDetection rule reports SLOW (named in the message only)
    clock[0] = AT + timedelta(minutes=10)
    fake.operator_reports_fault(
        "HyperPodPyTorchJob",
        "team-a",
        "llama",
        reason="Remediated",
        message="The fault of reason LogSlow_LowThroughputDetection was remediated in 3 milliseconds.",
    )
    counts = poll(fake, ledger, FakeWorkflows(), clock[0])
    # Then it is kept as its own verdict, of rule hpto_slow, beside the earlier hang's
    assert counts.get("hpto_slow_recorded") == 1
    assert [(v.verdict.rule, v.verdict.imported.detector_rule if v.verdict.imported else "") for v in ledger.verdicts(CLUSTER)] == [
        ("hpto_hang", "JobHangingDetection"),
        ("hpto_slow", "LowThroughputDetection"),
    ]


def test_given_a_job_without_log_monitoring_faults_or_a_fault_without_a_time_then_nothing_is_kept(ledger) -> None:
    clock = [AT]
    fake = hpto_cluster(clock)
    assert poll(fake, ledger, FakeWorkflows(), AT).get("hpto_hang_recorded", 0) == 0
    job = fake.jobs[("HyperPodPyTorchJob", "team-a", "llama")]
    job["status"]["conditions"].append({"type": "Running", "status": "True", "reason": "LogHang_X"})  # (no time: no episode)
    counts = poll(fake, ledger, FakeWorkflows(), AT)
    assert counts.get("operator_faults_unreadable") == 1 and ledger.verdicts(CLUSTER) == []


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"reason": "LogHang_GPU Error", "message": "m"}, ("hpto_hang", "GPU Error")),
        ({"reason": "LogSlow_TFLOPs", "message": ""}, ("hpto_slow", "TFLOPs")),
        ({"reason": "NodeFault", "message": "The fault of reason NodeFault was remediated in 94283 milliseconds."}, None),
        ({"reason": "LogFault_OOM", "message": "faultOnMatch"}, None),
        ({"reason": "Restarting", "message": "restarting for LogHang_JobHangingDetection"}, ("hpto_hang", "JobHangingDetection")),
    ],
)
def test_which_conditions_are_the_operators_hanging_or_slow_verdicts(condition: dict[str, str], expected: tuple[str, str] | None) -> None:
    faults, _ = operator_faults({"status": {"conditions": [condition | {"type": "Running", "lastTransitionTime": "2026-11-27T09:00:00Z"}]}})
    assert [(f.rule, f.detector_rule) for f in faults] == ([expected] if expected else [])


def test_given_a_fault_older_than_the_event_age_then_it_is_not_written_again_at_every_poll(ledger) -> None:
    # Given a fault the operator reported two hours before the poll (the poller's max age: one hour)
    clock = [AT]
    fake = hpto_cluster(clock)
    fake.operator_reports_fault("HyperPodPyTorchJob", "team-a", "llama", reason="LogHang_JobHangingDetection", message="hang")
    # When polled
    counts = poll(fake, ledger, FakeWorkflows(), AT + timedelta(hours=2))
    # Then it is counted stale and nothing is written
    assert counts.get("operator_faults_stale") == 1 and ledger.verdicts(CLUSTER) == []


def test_given_a_rule_name_or_evidence_with_control_characters_then_they_never_reach_a_terminal() -> None:
    faults, _ = operator_faults(
        {
            "status": {
                "conditions": [
                    {
                        "type": "Running",
                        "reason": "LogHang_bad\x1b[2Jrule",
                        "message": "a\nb\x07c",
                        "lastTransitionTime": "2026-11-27T09:00:00Z",
                    }
                ]
            }
        }
    )
    (fault,) = faults
    assert (fault.detector_rule, fault.evidence) == ("bad [2Jrule", "a b c")
    detection = parse_hang_event(
        json.dumps({"m": "HANG_DETECTED", "job_id": "7", "rule": "r\x1bx", "evidence": "e\r\n1"}), STREAM, DETECTED
    )
    assert (detection.rule, detection.evidence) == ("r x", "e 1")


# --- the same age and future limits as every other event (issue 47, item 2) ----------------------------
OLD = LIMITS.max_age_seconds
AHEAD = LIMITS.max_skew_seconds


def test_given_a_hang_event_13_days_old_then_it_is_counted_stale_and_no_verdict_is_kept(ledger) -> None:
    counts = run(ledger, batch(hang(), at=NOW - timedelta(days=13)))
    assert counts == {"stale": 1} and ledger.verdicts(CLUSTER) == []


def test_given_a_hang_event_dated_in_the_future_then_it_is_counted_and_the_real_detection_is_kept(ledger) -> None:
    # Given a node whose clock is 40 minutes ahead reporting job 1001 hung
    future = run(ledger, batch(hang(), at=NOW + timedelta(minutes=40)))
    # When the real detection arrives from a node with a right clock
    real = run(ledger, batch(hang(), at=DETECTED))
    # Then the future one was counted, not kept, and the real one is a verdict of its own (not folded into it)
    assert future == {"future": 1} and real == {"hyperpod_hang_recorded": 1}
    assert [v.verdict.episode_at for v in ledger.verdicts(CLUSTER)] == [DETECTED]


@pytest.mark.parametrize("at", [NOW - timedelta(seconds=OLD), NOW + timedelta(seconds=AHEAD)])
def test_given_a_hang_event_just_within_the_limits_then_it_is_kept(ledger, at: datetime) -> None:
    assert run(ledger, batch(hang(), at=at)) == {"hyperpod_hang_recorded": 1}


def test_given_an_operator_fault_dated_in_the_future_then_it_is_counted_and_not_kept(ledger) -> None:
    # Given the operator's condition stamped an hour ahead of the poll (a wrong clock)
    clock = [AT + timedelta(hours=1)]
    fake = hpto_cluster(clock)
    fake.operator_reports_fault("HyperPodPyTorchJob", "team-a", "llama", reason="LogHang_JobHangingDetection", message="hang")
    # When polled now
    counts = poll(fake, ledger, FakeWorkflows(), AT)
    # Then it is counted and nothing is kept
    assert counts.get("operator_faults_future") == 1 and ledger.verdicts(CLUSTER) == []


@pytest.mark.parametrize("seconds", [-AHEAD, OLD])
def test_given_an_operator_fault_just_within_the_limits_then_it_is_kept(ledger, seconds: int) -> None:
    clock = [AT]
    fake = hpto_cluster(clock)
    fake.operator_reports_fault("HyperPodPyTorchJob", "team-a", "llama", reason="LogHang_JobHangingDetection", message="hang")
    counts = poll(fake, ledger, FakeWorkflows(), AT + timedelta(seconds=seconds))
    assert counts.get("hpto_hang_recorded") == 1


# --- secrets in what HyperPod's detectors said (issue 47: redacted before it is kept or told) ----------
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def test_given_a_hang_event_whose_evidence_carries_secrets_then_the_verdict_and_its_notice_hold_none(ledger) -> None:
    # Given HyperPod's event quoting the job's last log line: an AWS secret key and a token, past the evidence's bound
    evidence = "x" * 900 + f" aws_secret_access_key={SECRET_KEY} Authorization: Bearer {'T' * 40}"
    event = batch(json.dumps({"event": "HANG_DETECTED", "job_id": "1001", "action": "notify", "evidence": evidence}))
    notifier = FakeNotifier()
    # When imported
    import_hyperpod_hangs(event=event, ledger=ledger, teller=Teller(notifier), cluster=CLUSTER, mode="observe", limits=LIMITS, now=NOW)
    # Then neither the verdict kept nor its message holds a piece of either
    (kept,) = ledger.verdicts(CLUSTER)
    said = kept.model_dump_json() + json.dumps(notifier.published, default=str)
    assert SECRET_KEY[:16] not in said and "T" * 16 not in said
    assert kept.verdict.imported is not None and "[REDACTED:aws-secret-key]" in kept.verdict.imported.evidence


def test_given_an_operator_condition_whose_message_carries_a_secret_then_its_evidence_holds_none() -> None:
    condition = {
        "type": "Running",
        "reason": "LogHang_R",
        "message": f"last line: HF_TOKEN=hf_{'a' * 34}",
        "lastTransitionTime": "2026-11-27T09:00:00Z",
    }
    (fault,), _ = operator_faults({"status": {"conditions": [condition]}})
    assert "a" * 16 not in fault.evidence and fault.evidence == "last line: HF_TOKEN=[REDACTED:token]"
