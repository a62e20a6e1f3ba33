"""HyperPod's own hang detectors' verdicts, told (issue 32): one informational notice per kept
verdict, rendered from the verdict alone, sent only by the run whose write kept it (never by a
redelivered batch or a later poll), routed to the topic and chat and never the pager; a publish
that fails is counted and the verdict stays kept. The sandbox's message check holds every notice to
its verdict (sandbox/message_check.py verdict_contradictions)."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from hyperpod_recovery.adapters.eks_training_jobs import EksTrainingJobs
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.notifier import SnsNotifier
from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
from hyperpod_recovery.domain.intake.normalize import GuardedCluster
from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.messages.notification import SUBJECT_LIMIT
from hyperpod_recovery.domain.messages.severity import channels_of
from hyperpod_recovery.domain.messages.verdict_notice import notice_attributes, verdict_id, verdict_notice
from hyperpod_recovery.domain.messages.wire import PAGER_EVENT_SOURCE
from hyperpod_recovery.errors import NotifierUnavailable
from hyperpod_recovery.metric_names import ALL, VERDICT_NOTICES
from hyperpod_recovery.models.hangs import HangVerdict, ImportedDetection, RecordedVerdict
from hyperpod_recovery.steps.find_failed_jobs import find_failed_jobs
from hyperpod_recovery.steps.import_hyperpod_hangs import OPERATOR_ACTION, Teller, import_hyperpod_hangs
from hyperpod_recovery_cli.verdicts import parse_verdict_id
from hyperpod_recovery_cli.verdicts import verdict_id as cli_verdict_id
from sandbox.kube import FakeKube
from sandbox.message_check import verdict_contradictions
from tests.fakes import FakeNotifier, FakeWorkflows

REGION = "us-west-2"
ACCOUNT = "123456789012"
CLUSTER = "llm-train"
STREAM = "SageMakerHangJobDetectionEvents/worker-group-1/i-0123456789abcdef0"
DETECTED = datetime(2026, 11, 27, 9, 40, tzinfo=UTC)
LIMITS = EventAgeLimits(max_age_seconds=3600, max_skew_seconds=300)  # (template.yaml's defaults)
KEYS = {
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
    "BillingMode": "PAY_PER_REQUEST",
}
STACK = Deployment(stack="hpr-llm-train")


def verdict(
    *,
    rule: str = "hyperpod_hang",
    job: str = "1001",
    taken: str = "notify",
    cluster: str = CLUSTER,
    summary: str = "job 1001: HyperPod's hung job detection reported a hang",
    evidence: str = "no step for 10 minutes",
    detector_rule: str = "default",
    where: str = STREAM,
) -> RecordedVerdict:
    operator = rule.startswith("hpto_")
    return RecordedVerdict(
        verdict=HangVerdict(
            rule=rule,  # type: ignore[arg-type]
            mode="observe",
            cluster=cluster,
            job=job,
            decided_at=DETECTED + timedelta(seconds=30),
            episode_at=DETECTED,
            step=0,
            last_progress_at=DETECTED,
            threshold_seconds=0,
            observed_seconds=0,
            summary=summary,
            imported=ImportedDetection(
                source="hyperpod_training_operator" if operator else "hyperpod_hang_detection",
                detector_rule=detector_rule,
                taken=taken,
                evidence=evidence,
                where=where,
            ),
        ),
        action=OPERATOR_ACTION if operator else "observed: nothing touched",
    )


# --- the renderer ----------------------------------------------------------------------------------
def test_given_a_slurm_verdict_then_the_notice_says_what_hyperpod_said_and_did_what_we_did_and_how_to_look_and_review() -> None:
    # Given HyperPod's hung job detection cancelled job 1001
    recorded = verdict(taken="cancel")
    # When its notice is rendered
    subject, body = verdict_notice(recorded, deployment=STACK)
    # Then the subject names the cluster, the rule and the job; the body each fact, and Slurm's own commands
    assert subject == "[hyperpod-recovery] llm-train: observed hyperpod_hang job 1001"
    assert "  HyperPod's hung job detection cancelled the job (action cancel)" in body.splitlines()
    assert "  evidence: no step for 10 minutes" in body
    assert "instance i-0123456789abcdef0 (instance group worker-group-1)" in body
    assert "nothing: observed only (rule hyperpod_hang is observe-only)" in body
    assert "`scontrol show job 1001`" in body and "`sacct -j 1001`" in body and "kubectl" not in body
    ident = "1001-hyperpod_hang-1795772400"
    assert f"`hyperpod-recovery verdicts confirm {ident} --stack hpr-llm-train --reason 'what you checked'`" in body
    assert body.splitlines()[-1].startswith(f"Verdict: {ident} ")
    assert verdict_contradictions(recorded, subject, body) == []


def test_given_a_training_operator_verdict_then_the_notice_names_the_job_as_kubectl_finds_it_and_leaves_it_to_the_operator() -> None:
    recorded = verdict(rule="hpto_hang", job="team-a/llama", taken="restarted", where="status.conditions[type=Running]")
    subject, body = verdict_notice(recorded, deployment=STACK)
    assert subject == "[hyperpod-recovery] llm-train: observed hpto_hang HyperPodPyTorchJob team-a/llama"
    assert "the HyperPod training operator restarts the job itself: the job stays the operator's" in body
    assert "`kubectl -n team-a get hyperpodpytorchjob llama`" in body
    assert "scontrol" not in body and "sacct" not in body
    assert "verdicts reject team-a/llama-hpto_hang-1795772400 --stack hpr-llm-train" in body
    assert verdict_contradictions(recorded, subject, body) == []


def test_given_no_stack_name_then_the_review_gives_no_command_with_a_placeholder() -> None:
    recorded = verdict()
    subject, body = verdict_notice(recorded)
    assert "--stack)" in body and "--stack hpr" not in body
    assert verdict_contradictions(recorded, subject, body) == []


@pytest.mark.parametrize(
    ("recorded", "kind"),
    [(verdict(), "hyperpod_hang"), (verdict(rule="hpto_slow", job="ns/j-1", taken="restarted"), "hpto_slow")],
)
def test_the_notices_id_is_the_one_the_verdicts_cli_takes(recorded: RecordedVerdict, kind: str) -> None:
    ident = verdict_id(recorded.verdict)
    assert ident == cli_verdict_id(recorded.verdict) and kind in ident
    parsed = parse_verdict_id(ident)
    assert (parsed.rule, parsed.job, parsed.episode_at) == (recorded.verdict.rule, recorded.verdict.job, recorded.verdict.episode_at)


ANY_TEXT = st.text(max_size=1024)
SLURM_JOBS = st.from_regex(r"[0-9]{1,10}(_[0-9]{1,10})?", fullmatch=True)
KUBE_JOBS = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,40}[a-z0-9])?", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.tuples(st.just("hyperpod_hang"), SLURM_JOBS, st.sampled_from(["cancel", "notify", ""])),
        st.tuples(st.sampled_from(["hpto_hang", "hpto_slow"]), KUBE_JOBS, st.just("restarted")),
    ),
    st.text(min_size=1, max_size=256),
    ANY_TEXT,
    ANY_TEXT,
    st.text(max_size=256),
    st.text(max_size=512),
    st.sampled_from([Deployment(), STACK]),
)
# (found by CI: a backtick in the cluster's name opened a code span in the subject)
@example(("hpto_hang", "00000000000/00000000000000", "restarted"), "00000000000000`", "", "", "", "", Deployment())
def test_given_any_verdict_text_then_its_notice_is_within_bounds_printable_and_true_to_the_verdict(
    which: tuple[str, str, str], cluster: str, summary: str, evidence: str, detector_rule: str, where: str, deployment: Deployment
) -> None:
    rule, job, taken = which
    recorded = verdict(
        rule=rule, job=job, taken=taken, cluster=cluster, summary=summary, evidence=evidence, detector_rule=detector_rule, where=where
    )
    subject, body = verdict_notice(recorded, deployment=deployment)
    # SNS: a subject of at most 100 printable ASCII characters
    assert 0 < len(subject) <= SUBJECT_LIMIT and all(32 <= ord(c) < 127 for c in subject)
    # The body: lines of printable characters only (no escape sequence of the detector's reaches a terminal), a few KB
    assert all(line.isprintable() for line in body.split("\n"))
    assert len(body.encode()) < 16_000
    # And the message check finds nothing the verdict contradicts
    assert verdict_contradictions(recorded, subject, body) == []


# --- the message check can fail ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda b: b.replace("scontrol show job 1001", "scontrol show job 1002"), "names job 1002"),
        (lambda b: b + "\n  `kubectl -n a get hyperpodpytorchjob b`", "kubectl command about a Slurm job"),
        (lambda b: b + "\n  then resubmit job 1001 from its checkpoint", "asks for a restart"),
        (lambda b: b.replace("only reported it (action notify)", "cancelled the job"), "says the job was cancelled"),
        (lambda b: b.replace("nothing: observed only", "a JobRecovery: recovery started"), "does not say that nothing was done"),
        (lambda b: b.replace("Verdict: 1001-", "Verdict: 1002-"), "names verdict 1002-"),
        (lambda b: b + "\n  `scontrol show job <job>`", "placeholder"),
    ],
)
def test_given_a_notice_that_says_what_its_verdict_does_not_then_the_message_check_names_it(edit: Any, problem: str) -> None:
    recorded = verdict()
    subject, body = verdict_notice(recorded, deployment=STACK)
    found = verdict_contradictions(recorded, subject, edit(body))
    assert any(problem in f for f in found), found


def test_given_a_training_operator_notice_that_gives_a_slurm_command_then_the_message_check_names_it() -> None:
    recorded = verdict(rule="hpto_hang", job="team-a/llama", taken="restarted")
    subject, body = verdict_notice(recorded, deployment=STACK)
    assert any("Slurm command" in f for f in verdict_contradictions(recorded, subject, body + "\n`sacct -j 7`"))
    wrong = body.replace("get hyperpodpytorchjob llama", "get pytorchjob llama")
    assert any("not HyperPodPyTorchJob team-a/llama" in f for f in verdict_contradictions(recorded, subject, wrong))


# --- its route: the topic and chat, never the pager ----------------------------------------------------
def test_a_notice_is_informational_never_a_page_and_quiet_on_a_dry_run_stack() -> None:
    recorded = verdict()
    attributes = notice_attributes(recorded, dry_run=False)
    assert attributes["severity"] == "inform" and "pager" not in channels_of(attributes["severity"])
    assert attributes == attributes | {"outcome": "observed", "cluster": CLUSTER, "rule": "hyperpod_hang", "workflow": "job"}
    assert attributes["verdict"] == verdict_id(recorded.verdict) and all(attributes.values())
    assert notice_attributes(recorded, dry_run=True)["severity"] == "quiet"
    assert set(VERDICT_NOTICES.values()) <= ALL


# --- once per episode, at the steps, on moto ----------------------------------------------------------
@pytest.fixture
def stack() -> Iterator[dict[str, Any]]:
    """moto's ledger, the notification and chat topics (each read through a queue), and the
    default event bus with a rule that takes what the notifier pages (the template's PageRule source)."""
    with mock_aws():
        dynamodb, sns, sqs, events = (boto3.client(s, region_name=REGION) for s in ("dynamodb", "sns", "sqs", "events"))
        dynamodb.create_table(TableName="ledger", **KEYS)

        def inbox(name: str) -> tuple[str, str]:
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

        queues: dict[str, str] = {}
        topics: dict[str, str] = {}
        for name in ("topic", "chat"):
            topics[name] = sns.create_topic(Name=name)["TopicArn"]
            queues[name], queue_arn = inbox(f"{name}-inbox")
            sns.subscribe(TopicArn=topics[name], Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
        queues["pager"], pager_arn = inbox("pager-inbox")
        events.put_rule(Name="page", EventPattern=json.dumps({"source": [PAGER_EVENT_SOURCE]}))
        events.put_targets(Rule="page", Targets=[{"Id": "pager", "Arn": pager_arn}])
        bus = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"
        notifier = SnsNotifier(topics["topic"], sns=sns, chat_topic_arn=topics["chat"], pager_event_bus=bus, events=events)
        yield {"ledger": DynamoLedger("ledger", dynamodb=dynamodb), "notifier": notifier, "sqs": sqs, "queues": queues, "sns": sns}


def received(stack: dict[str, Any]) -> dict[str, list[str]]:
    sqs = stack["sqs"]
    found: dict[str, list[str]] = {}
    for name, url in stack["queues"].items():
        found[name] = []
        while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            for message in messages:
                found[name].append(message["Body"])
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def subscription(*messages: str, at: datetime = DETECTED) -> dict[str, Any]:
    document = {
        "messageType": "DATA_MESSAGE",
        "owner": ACCOUNT,
        "logGroup": f"/aws/sagemaker/Clusters/{CLUSTER}/a1b2c3d4e5f6",
        "logStream": STREAM,
        "subscriptionFilters": ["hang"],
        "logEvents": [{"id": str(i), "timestamp": int(at.timestamp() * 1000) + i, "message": m} for i, m in enumerate(messages)],
    }
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()}}


def hang(job: str) -> str:
    return json.dumps({"event": "HANG_DETECTED", "job_id": job, "action": "notify", "evidence": "no step for 10 minutes"})


def test_given_a_batch_delivered_twice_then_each_kept_verdict_is_told_once_to_the_topic_and_chat_and_never_paged(
    stack: dict[str, Any],
) -> None:
    # Given a subscription batch naming jobs 1001 and 1002
    event = subscription(hang("1001"), hang("1002"))
    teller = Teller(stack["notifier"], STACK)
    # When CloudWatch Logs delivers it twice (a retry after the first delivery's answer was lost)
    first, second = (
        import_hyperpod_hangs(
            event=event, ledger=stack["ledger"], teller=teller, cluster=CLUSTER, mode="observe", limits=LIMITS, now=DETECTED
        )
        for _ in range(2)
    )
    # Then the first delivery tells both, the second neither
    assert (first.get("verdict_noticed"), second.get("verdict_noticed")) == (2, None)
    got = received(stack)
    assert sorted(body.splitlines()[-1].split()[1] for body in got["topic"]) == [
        verdict_id(v.verdict) for v in sorted(stack["ledger"].verdicts(CLUSTER), key=lambda v: v.verdict.job)
    ]
    assert len(got["chat"]) == 2 and got["pager"] == []
    # And each is true to its verdict
    for recorded in stack["ledger"].verdicts(CLUSTER):
        subject, body = verdict_notice(recorded, deployment=STACK)
        assert body in got["topic"] and verdict_contradictions(recorded, subject, body) == []
    # (the pager's route is live: a page through the same notifier reaches it)
    stack["notifier"].publish("s", "b", {"outcome": "escalated", "cluster": CLUSTER, "severity": "page", "incident": "i"})
    assert len(received(stack)["pager"]) == 1


def test_given_the_topic_refuses_the_publish_then_the_verdict_is_kept_the_failure_counted_and_nothing_raised(stack: dict[str, Any]) -> None:
    # Given a notifier whose topic SNS does not know (a publish SNS refuses: NotifierUnavailable)
    gone = SnsNotifier(f"arn:aws:sns:{REGION}:{ACCOUNT}:gone", sns=stack["sns"])
    teller = Teller(gone, STACK)
    event = subscription(hang("1001"))
    # When the batch is imported, then delivered again
    counts = import_hyperpod_hangs(
        event=event, ledger=stack["ledger"], teller=teller, cluster=CLUSTER, mode="observe", limits=LIMITS, now=DETECTED
    )
    again = import_hyperpod_hangs(
        event=event, ledger=stack["ledger"], teller=teller, cluster=CLUSTER, mode="observe", limits=LIMITS, now=DETECTED
    )
    # Then the verdict is kept once, the failed notice counted once, and the redelivery records nothing again
    assert counts == {"hyperpod_hang_recorded": 1, "verdict_notice_failed": 1}
    assert again == {"same_episode": 1}
    assert [v.verdict.job for v in stack["ledger"].verdicts(CLUSTER)] == ["1001"]


class RefusingNotifier:
    def __init__(self) -> None:
        self.tried = 0

    def publish(self, subject: str, body: str, attributes: dict[str, str]) -> None:
        self.tried += 1
        raise NotifierUnavailable("SNS publish: throttled")


AT = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
GUARDED = GuardedCluster(name=CLUSTER, arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/a1b2c3d4e5f6", orchestrator="eks")


def operator_cluster() -> FakeKube:
    fake = FakeKube(now=lambda: AT)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_job("HyperPodPyTorchJob", "team-a", "llama", nodes=["hyperpod-i-0123456789abcdef0"])
    fake.operator_reports_fault("HyperPodPyTorchJob", "team-a", "llama", reason="LogHang_JobHangingDetection", message="hang")
    return fake


def poll(fake: FakeKube, stack: dict[str, Any], notifier: Any, at: datetime) -> dict[str, int]:
    return find_failed_jobs(
        jobs=EksTrainingJobs(fake),
        workflows=FakeWorkflows(),
        ledger=stack["ledger"],
        guarded=GUARDED,
        teller=Teller(notifier, STACK),
        max_age_seconds=3600,
        max_skew_seconds=300,
        now=at,
        remaining_ms=lambda: 30_000,
    )


def test_given_polls_that_see_the_same_operator_fault_then_it_is_told_once(stack: dict[str, Any]) -> None:
    # Given the training operator's HANGING fault on team-a/llama, seen by three polls a minute apart
    fake = operator_cluster()
    counts = [poll(fake, stack, stack["notifier"], AT + timedelta(minutes=m)) for m in range(3)]
    # Then the first poll tells it; the later ones find it kept and tell nothing
    assert [c.get("verdict_noticed", 0) for c in counts] == [1, 0, 0]
    assert [c.get("already_recorded", 0) for c in counts] == [0, 1, 1]
    got = received(stack)
    assert len(got["topic"]) == 1 and len(got["chat"]) == 1 and got["pager"] == []
    assert "`kubectl -n team-a get hyperpodpytorchjob llama`" in got["topic"][0]


def test_given_a_poll_whose_notice_fails_then_the_verdict_is_kept_counted_and_the_poll_goes_on(stack: dict[str, Any]) -> None:
    refusing = RefusingNotifier()
    fake = operator_cluster()
    counts = poll(fake, stack, refusing, AT)
    later = poll(fake, stack, refusing, AT + timedelta(minutes=1))
    assert counts.get("verdict_notice_failed") == 1 and counts.get("hpto_hang_recorded") == 1
    assert later.get("already_recorded") == 1 and "verdict_notice_failed" not in later
    assert refusing.tried == 1 and len(stack["ledger"].verdicts(CLUSTER)) == 1


def test_given_a_verdict_another_run_kept_first_then_this_run_tells_nothing() -> None:
    # Given a ledger whose conditional put finds the verdict written by a concurrent run
    class KeptElsewhere:
        def verdicts(self, cluster: str, since: datetime | None = None) -> list[RecordedVerdict]:
            return []  # (read before the other run wrote)

        def record_verdict(self, recorded: RecordedVerdict) -> bool:
            return False

    notifier = FakeNotifier()
    counts = import_hyperpod_hangs(
        event=subscription(hang("1001")),
        ledger=KeptElsewhere(),
        teller=Teller(notifier),
        cluster=CLUSTER,
        mode="observe",
        limits=LIMITS,
        now=DETECTED,  # type: ignore[arg-type]
    )
    assert counts == {"already_recorded": 1} and notifier.published == []


def test_a_detectors_own_words_that_look_like_a_placeholder_are_quoted_facts_not_an_unfilled_placeholder() -> None:
    # (found by the property test above: a log stream named '{_}')
    recorded = verdict(where="{_}", summary="{job_id}", evidence="{x}")
    subject, body = verdict_notice(recorded, deployment=STACK)
    assert verdict_contradictions(recorded, subject, body) == []


@pytest.mark.parametrize("words", ["DRAINED", "l", "o", "cancelled", "restarted", "cordoned", "resubmit it", "(", "nothing"])
def test_given_a_detectors_short_words_that_are_also_claims_then_the_check_reads_them_as_facts_and_the_notice_as_its_own(
    words: str,
) -> None:
    # (found by the property test at seed 1: a log stream named 'DRAINED' read as "claims an action
    # nobody took"; a word search for a fact as short as 'l' also erased the notice's own words)
    # Given HyperPod's detector spoke in words that, outside its quotes, would be claims of ours
    recorded = verdict(where=words, summary=words, evidence=words, detector_rule=words, taken="notify")
    # When its notice is rendered and checked
    subject, body = verdict_notice(recorded, deployment=STACK)
    # Then the detector's words are facts, and the notice's own words are still read
    assert verdict_contradictions(recorded, subject, body) == []
    assert "claims an action nobody took: 'cordoned'" in verdict_contradictions(
        recorded, subject, body.replace("nothing: observed only", "we cordoned the node")
    )


@pytest.mark.parametrize("cluster", ["a-drained-" + "x" * 70, "a: observed drained", "cordoned"])
def test_given_a_cluster_named_with_a_claims_words_then_the_subject_is_not_read_as_a_claim(cluster: str) -> None:
    # (a review found them: a cut subject, and a cluster holding ": observed ", left its name unmasked)
    recorded = verdict(cluster=cluster)
    subject, body = verdict_notice(recorded, deployment=STACK)
    assert not any("claims an action" in found for found in verdict_contradictions(recorded, subject, body))
