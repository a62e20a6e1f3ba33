"""Each port's fake and real adapter meet the same expectations.

The real adapters run against moto (DynamoDB, S3, SQS, SNS, Step Functions) and, for HyperPod's
cluster-node calls that moto lacks, against the sandbox's HyperPod double.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from moto import mock_aws

from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore
from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.notifier import SnsNotifier
from hyperpod_recovery.adapters.slurm_agent import SlurmAgentOrchestrator
from hyperpod_recovery.adapters.sqs import DeadLetterQueue, SqsQueue
from hyperpod_recovery.adapters.stepfunctions import StepFunctions
from hyperpod_recovery.domain.checkpoints.discovery import list_all
from hyperpod_recovery.errors import (
    CheckpointUnreadable,
    CheckpointWriteConflict,
    ClusterNotFound,
    ControllerChannelError,
    HistoryUnavailable,
    HyperPodApiError,
    HyperPodThrottled,
    LedgerError,
    LedgerUnavailable,
    QueueUnavailable,
    StartExecutionFailed,
    TaskAnswerFailed,
)
from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply, DrainResult, JobsOnNodes
from hyperpod_recovery.models.records import AuditEntry, IncidentRecord, NodeHold
from sandbox.hyperpod import HyperPodDouble
from sandbox.hyperpod_serve import serve
from sandbox.scenario_cluster import ApiErrorSpec, BehaviourSpec, ClusterSpec, InstanceGroupSpec
from sandbox.template import load_template
from tests.conftest import ROOT
from tests.fakes import T0, FakeCheckpointStore, FakeCluster, FakeLedger, compute_node, node_id

REGION = "us-west-2"
TTL = timedelta(hours=6)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def _ledger_table() -> str:
    """The moto table is created from template.yaml's own key schema, so the two cannot drift."""
    props = load_template(ROOT / "template.yaml")["Resources"]["LedgerTable"]["Properties"]
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName="ledger",
        KeySchema=props["KeySchema"],
        AttributeDefinitions=props["AttributeDefinitions"],
        GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
        BillingMode="PAY_PER_REQUEST",
    )
    return "ledger"


@pytest.fixture(params=["fake", "dynamodb"])
def ledger(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "fake":
        yield FakeLedger()
        return
    with mock_aws():
        yield DynamoLedger(_ledger_table(), dynamodb=boto3.client("dynamodb", region_name=REGION))


def test_ledger_lock_belongs_to_one_incident_at_a_time(ledger: Any) -> None:
    assert ledger.acquire_locks("a", "c", ["n1", "n2"], T0, TTL).acquired == ["n1", "n2"]
    second = ledger.acquire_locks("b", "c", ["n2", "n3"], T0, TTL)
    assert second.acquired == ["n3"] and second.held_elsewhere == {"n2": "a"}
    assert ledger.acquire_locks("a", "c", ["n1"], T0, TTL).acquired == ["n1"]  # a retry by the holder


def test_ledger_lock_expires(ledger: Any) -> None:
    ledger.acquire_locks("a", "c", ["n1"], T0, TTL)
    assert ledger.lock_holders("c", ["n1"], T0) == {"n1": "a"}
    later = T0 + TTL + timedelta(seconds=1)
    assert ledger.lock_holders("c", ["n1"], later) == {}
    assert ledger.acquire_locks("b", "c", ["n1"], later, TTL).acquired == ["n1"]


def test_ledger_release_frees_and_hold_keeps(ledger: Any) -> None:
    ledger.acquire_locks("a", "c", ["n1", "n2"], T0, TTL)
    ledger.release_locks("a", "c", ["n1"], None)
    ledger.release_locks("a", "c", ["n2"], T0 + timedelta(days=1))
    ledger.release_locks("intruder", "c", ["n2"], None)  # not the holder: no effect
    assert ledger.lock_holders("c", ["n1", "n2"], T0 + TTL + timedelta(hours=1)) == {"n2": "a"}


def test_ledger_remembers_started_replacements(ledger: Any) -> None:
    ledger.mark_replacements_initiated("a", ["n1"], T0)
    ledger.mark_replacements_initiated("a", ["n2"], T0)
    ledger.mark_replacements_initiated("a", [], T0)
    assert ledger.replacements_initiated("a") == {"n1", "n2"}
    assert ledger.replacements_initiated("b") == set()


def test_ledger_job_is_claimed_once(ledger: Any) -> None:
    assert ledger.claim_resubmission("c", "1001", "a", T0, TTL).claimed
    other = ledger.claim_resubmission("c", "1001", "b", T0, TTL)
    assert not other.claimed and other.incident_id == "a" and other.new_job_id is None
    ledger.complete_resubmission("c", "1001", "b", "9999")  # not the claimant: ignored
    ledger.complete_resubmission("c", "1001", "a", "1002")
    assert ledger.claim_resubmission("c", "1001", "b", T0, TTL).new_job_id == "1002"
    # A completed claim does not expire with the claim's TTL: the job was resubmitted
    assert ledger.claim_resubmission("c", "1001", "b", T0 + TTL * 2, TTL).incident_id == "a"


def test_ledger_records_one_re_creation_token_per_job_whoever_asks_first(ledger: Any) -> None:
    # (EKS: recorded before the object is made; every incident and retry re-creating the job uses it)
    uid = "0b0e8b4a-1b0c-4d5e-8f00-000000000001"
    token = ledger.recreation_token("c", uid, T0)
    assert re.fullmatch(r"[0-9a-f]{32}", token)
    assert ledger.recreation_token("c", uid, T0 + timedelta(minutes=5)) == token
    assert ledger.recreation_token("c", "0b0e8b4a-1b0c-4d5e-8f00-000000000002", T0) != token


def test_ledger_counts_job_restarts_in_the_window_up_to_the_limit_once_each(ledger: Any) -> None:
    # Given a limit of 3 job restarts in a window of an hour
    window = timedelta(hours=1)
    assert [ledger.reserve_job_restart("c", f"hpj-{n}", 3, T0, window) for n in range(4)] == [True, True, True, False]
    # Then a retried step keeps its place, another cluster has its own, and the window frees them as they expire
    assert ledger.reserve_job_restart("c", "hpj-1", 3, T0, window) and ledger.job_restarts("c", T0) == ["hpj-0", "hpj-1", "hpj-2"]
    assert ledger.reserve_job_restart("other", "hpj-9", 3, T0, window)
    assert ledger.reserve_job_restart("c", "hpj-4", 3, T0 + window + timedelta(seconds=1), window)
    assert ledger.job_restarts("c", T0 + window + timedelta(seconds=1)) == ["hpj-4"]


def test_ledger_remembers_each_started_failure_until_it_expires(ledger: Any) -> None:
    # (the EKS poller's memory: one entry per failure, however many polls and clusters)
    keys = [f"0b0e8b4a-1b0c-4d5e-8f00-{n:012d}:1773478800" for n in range(150)]
    for key in keys:
        ledger.note_failure_started("c", key, T0 + TTL)
    ledger.note_failure_started("other", "x:1", T0 + TTL)
    assert ledger.failures_started("c", T0) == set(keys) and ledger.failures_started("c", T0 + TTL * 2) == set()


def test_ledger_claim_released_or_expired_frees_the_job(ledger: Any) -> None:
    # Given a claim that a released (nothing submitted) and one that b never settled (it died)
    ledger.claim_resubmission("c", "1", "a", T0, TTL)
    ledger.claim_resubmission("c", "2", "b", T0, TTL)
    ledger.release_resubmission("c", "1", "intruder")  # not the claimant: no effect
    assert ledger.resubmission_claim("c", "1").incident_id == "a"
    ledger.release_resubmission("c", "1", "a")
    # Then job 1 is free at once, job 2 only after its claim's TTL
    assert ledger.resubmission_claim("c", "1") is None and ledger.claim_resubmission("c", "1", "x", T0, TTL).claimed
    assert not ledger.claim_resubmission("c", "2", "x", T0 + TTL - timedelta(seconds=1), TTL).claimed
    assert ledger.claim_resubmission("c", "2", "x", T0 + TTL + timedelta(seconds=1), TTL).claimed
    # And a completed claim cannot be released
    ledger.complete_resubmission("c", "1", "x", "9")
    ledger.release_resubmission("c", "1", "x")
    assert ledger.resubmission_claim("c", "1").new_job_id == "9"


def test_ledger_claim_read_says_when_it_was_taken_and_holds_exactly_while_no_one_can_take_it_over(ledger: Any) -> None:
    # Given a's claim on job 1, taken at T0 for TTL
    ledger.claim_resubmission("c", "1", "a", T0, TTL)
    claim = ledger.resubmission_claim("c", "1")
    assert claim.claimed_at == T0 and claim.open_until == T0 + TTL and not claim.completed
    # Then it is in force exactly as long as another incident cannot take it over (Detect Hung Jobs,
    # Classify Failure and Plan Job Restart read it so: domain/hangs/handled.py, job_failure.py)
    for moment in (T0 + TTL - timedelta(seconds=1), T0 + TTL, T0 + TTL + timedelta(seconds=1), T0 + TTL + timedelta(seconds=2)):
        assert claim.in_force(moment) == (not ledger.claim_resubmission("c", "1", "x", moment, TTL).claimed)
        if not claim.in_force(moment):
            break
    # And once completed, it holds with its copy, no longer until a moment
    ledger.complete_resubmission("c", "1", "x", "9")
    done = ledger.resubmission_claim("c", "1")
    assert done.completed and done.open_until is None and done.in_force(T0 + TTL * 100) and done.claimed_at is not None


def test_ledger_holdings_follow_what_an_incident_takes_and_gives_back(ledger: Any) -> None:
    # Given an incident that locks two nodes, reserves them under the cap and claims a job
    assert ledger.holdings("a") is None
    ledger.acquire_locks("a", "c", ["n1", "n2"], T0, TTL)
    assert ledger.reserve_capacity("c", "a", ["n1", "n2"], 10, T0, TTL, ["ip-1", "ip-2"])
    ledger.claim_resubmission("c", "1001", "a", T0, TTL)
    held = ledger.holdings("a")
    assert (held.cluster, held.locks, held.reserved, held.claims, held.hostnames) == (
        "c",
        {"n1", "n2"},
        {"n1", "n2"},
        {"1001"},
        {"ip-1", "ip-2"},
    )
    # When it gives each back (a lock kept until a later time is no longer an open holding)
    ledger.release_locks("a", "c", ["n1"], None)
    ledger.release_locks("a", "c", ["n2"], T0 + timedelta(days=1))
    ledger.release_capacity("c", "a", ["n1", "n2"], T0)
    ledger.complete_resubmission("c", "1001", "a", "1002")
    # Then nothing is held any more
    assert ledger.holdings("a").empty
    # And giving back what was never taken creates nothing
    ledger.release_capacity("c", "ghost", ["n9"], T0)
    ledger.release_locks("ghost", "c", ["n9"], None)
    assert ledger.holdings("ghost") is None


def test_ledger_keeps_a_job_lineages_restarts(ledger: Any) -> None:
    from hyperpod_recovery.models.job_recovery import RestartEntry

    # Given no restart yet: no lineage, no history, no claim
    assert ledger.lineage_root("c", "9") is None and ledger.restart_history("c", "8") == []
    assert ledger.resubmission_claim("c", "8") is None
    # When job 8 is restarted as 9, then 9 as 10
    first = RestartEntry(failed_job_id="8", new_job_id="9", kind="application", checkpoint_step=2000, restarted_at=T0, incident="a")
    second = first.model_copy(
        update={"failed_job_id": "9", "new_job_id": "10", "checkpoint_step": 3000, "incident": "b", "restarted_at": T0 + timedelta(hours=1)}
    )
    ledger.record_restart("c", "8", first)
    ledger.record_restart("c", "8", second)
    ledger.record_restart("c", "8", second)  # a retried Record Job Outcome
    # Then both jobs point at the lineage, whose history has each restart once, in order
    assert ledger.lineage_root("c", "9") == "8" and ledger.lineage_root("c", "10") == "8"
    assert [(e.new_job_id, e.checkpoint_step) for e in ledger.restart_history("c", "8")] == [("9", 2000), ("10", 3000)]
    # And a claim can be looked at without taking it
    ledger.claim_resubmission("c", "8", "a", T0, TTL)
    ledger.complete_resubmission("c", "8", "a", "9")
    claim = ledger.resubmission_claim("c", "8")
    assert (claim.incident_id, claim.new_job_id, claim.claimed) == ("a", "9", False)


def test_ledger_counts_nodes_against_the_cap_atomically(ledger: Any) -> None:
    # Given a cap of 3 nodes in recovery
    assert ledger.reserve_capacity("c", "a", ["n1", "n2"], 3, T0, TTL) is True
    # Then a third fits, a fourth does not, and a retried reservation of counted nodes is fine
    assert ledger.reserve_capacity("c", "b", ["n3", "n4"], 3, T0, TTL) is False
    assert ledger.reserve_capacity("c", "b", ["n3"], 3, T0, TTL) is True
    assert ledger.reserve_capacity("c", "a", ["n1", "n2"], 3, T0, TTL) is True
    assert ledger.nodes_in_recovery("c", T0) == {"n1", "n2", "n3"}
    # And releasing frees the room, but only the releasing incident's own places
    ledger.release_capacity("c", "a", ["n1", "n3"], T0)
    assert ledger.nodes_in_recovery("c", T0) == {"n2", "n3"}
    ledger.release_capacity("c", "b", ["n3"], T0)
    assert ledger.nodes_in_recovery("c", T0) == {"n2"} and ledger.reserve_capacity("c", "d", ["n4", "n5"], 3, T0, TTL) is True


def test_ledger_reservations_expire_so_a_lost_end_heals_itself(ledger: Any) -> None:
    # Given an incident that reserved the whole cap and then died without settling
    assert ledger.reserve_capacity("c", "dead", ["n1", "n2"], 2, T0, TTL)
    assert ledger.reserve_capacity("c", "next", ["n3"], 2, T0 + TTL - timedelta(seconds=1), TTL) is False
    # Then once its reservations expire they no longer count, and the room is free again
    later = T0 + TTL + timedelta(seconds=1)
    assert ledger.nodes_in_recovery("c", later) == set()
    assert ledger.reserve_capacity("c", "next", ["n3", "n4"], 2, later, TTL) is True


def test_ledger_holds_an_in_flight_place_until_a_deadline_and_no_longer_counts_it_as_held(ledger: Any) -> None:
    # Given an incident holding two places, one node of which is still being replaced when it ends
    assert ledger.reserve_capacity("c", "ended", ["n1", "n2"], 2, T0, TTL)
    deadline = T0 + timedelta(minutes=45)
    # When the place of the node in flight is kept until a deadline (another incident's are untouched)
    ledger.hold_capacity_until("c", "ended", ["n1"], deadline, T0)
    ledger.hold_capacity_until("c", "other", ["n2"], deadline, T0)
    ledger.release_capacity("c", "ended", ["n2"], T0)
    # Then it still counts until the deadline, and not after; the incident holds nothing any more
    assert ledger.nodes_in_recovery("c", deadline) == {"n1"} and ledger.nodes_in_recovery("c", deadline + timedelta(seconds=1)) == set()
    assert ledger.holdings("ended").empty
    # And a deadline later than the reservation's own expiry never lengthens it
    assert ledger.reserve_capacity("c", "x", ["n3"], 2, T0, timedelta(minutes=5))
    ledger.hold_capacity_until("c", "x", ["n3"], T0 + timedelta(hours=1), T0)
    assert "n3" not in ledger.nodes_in_recovery("c", T0 + timedelta(minutes=6))


def test_execution_history_reads_newest_first_in_pages_and_returns_oldest_first() -> None:
    # Given an execution history of 2,500 events, read through botocore's own model of
    # GetExecutionHistory (a Stubber checks every parameter against it)

    from hyperpod_recovery.adapters import stepfunctions

    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = f"arn:aws:states:{REGION}:111122223333:execution:stack-node-recovery:inc-1"
    events = [
        {"id": i, "timestamp": T0 + timedelta(seconds=i), "type": "TaskStateEntered", "stateEnteredEventDetails": {"name": f"S{i}"}}
        if i % 2
        else {"id": i, "timestamp": T0 + timedelta(seconds=i), "type": "TaskStateExited"}
        for i in range(1, 2501)
    ]
    newest_first = events[::-1]
    with Stubber(sfn) as stub:
        for page, start in enumerate(range(0, 2500, 1000)):
            params: dict[str, Any] = {"executionArn": arn, "reverseOrder": True, "maxResults": 1000, "includeExecutionData": False}
            if page:
                params["nextToken"] = f"t{page}"
            response: dict[str, Any] = {"events": newest_first[start : start + 1000]}
            if start + 1000 < 2500:
                response["nextToken"] = f"t{page + 1}"
            stub.add_response("get_execution_history", response, params)
        entered = StepFunctions(stepfunctions=sfn).states_entered(arn)
    # Then every state entered is there, oldest first
    assert entered is not None and [name for name, _ in entered] == [f"S{i}" for i in range(1, 2501, 2)]
    # And a history longer than the bound is read only that far, keeping the newest (where it stopped)
    with Stubber(sfn) as stub, pytest.MonkeyPatch.context() as patch:
        patch.setattr(stepfunctions, "MAX_EVENTS_READ", 1000)
        params = {"executionArn": arn, "reverseOrder": True, "maxResults": 1000, "includeExecutionData": False}
        stub.add_response("get_execution_history", {"events": newest_first[:1000], "nextToken": "t1"}, params)
        entered = StepFunctions(stepfunctions=sfn).states_entered(arn)
        stub.assert_no_pending_responses()
    assert entered is not None and entered[-1][0] == "S2499" and len(entered) == 500


def _history_event(n: int, kind: str, data: Any) -> dict[str, Any]:
    text = data if isinstance(data, str) else json.dumps(data)
    if kind == "TaskScheduled":
        details = {"taskScheduledEventDetails": {"resourceType": "lambda", "resource": "invoke.waitForTaskToken", "region": REGION,
                                                 "parameters": text}}  # fmt: skip
    elif kind == "TaskSucceeded":
        details = {"taskSucceededEventDetails": {"resourceType": "lambda", "resource": "invoke.waitForTaskToken", "output": text}}
    else:
        details = {"stateEnteredEventDetails": {"name": "Check Rejoin", "input": text}}
    return {"id": n, "timestamp": T0 + timedelta(seconds=n), "type": kind, **details}


def test_execution_history_resubmissions_pair_each_answer_with_its_plan_across_concurrent_iterations() -> None:
    # Given a history, read oldest first in pages of 100 with the events' data (botocore's model checks
    # every parameter), where two Map iterations interleave, one job's answer never came, one answer
    # is truncated, and another command's answer looks alike
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = f"arn:aws:states:{REGION}:111122223333:execution:stack-node-recovery:inc-1"

    def scheduled(n: int, job: str, step: int) -> dict[str, Any]:
        plan = {"job": {"job_id": job, "name": f"j{job}"}, "checkpoint": {"uri": f"s3://ckpt/j{job}/step-{step:09d}/", "step": step}}
        return _history_event(
            n, "TaskScheduled", {"FunctionName": "arn:...:ResubmitJobFunction", "Payload": {"task_token": "t", "plan": plan}}
        )

    def answered(n: int, job: str, new: str, kind: str = "resubmit_job") -> dict[str, Any]:
        at = T0.isoformat()
        reply = {"command_id": f"inc-1:resubmit:{job}", "type": kind, "requested_at": at, "completed_at": at, "dry_run": False}
        return _history_event(n, "TaskSucceeded", {**reply, "result": {"old_job_id": job, "new_job_id": new}})

    filler = [_history_event(n, "TaskStateEntered", {"rejoin": {}}) for n in range(1, 101)]
    events = [
        *filler,
        scheduled(101, "1", 100),
        scheduled(102, "2", 200),
        scheduled(103, "4", 400),  # asked for, never answered
        answered(104, "2", "12"),
        answered(105, "1", "11"),
        scheduled(106, "3", 300),
        _history_event(107, "TaskSucceeded", '{"type": "resubmit_job", "requested_at": "2026-03'),  # truncated
        answered(108, "9", "99", kind="jobs_on_nodes"),
    ]
    with Stubber(sfn) as stub:
        base = {"executionArn": arn, "reverseOrder": False, "maxResults": 100, "includeExecutionData": True}
        stub.add_response("get_execution_history", {"events": events[:100], "nextToken": "t1"}, base)
        stub.add_response("get_execution_history", {"events": events[100:]}, {**base, "nextToken": "t1"})
        read = StepFunctions(stepfunctions=sfn).resubmissions(arn)
        stub.assert_no_pending_responses()
    # Then each answer is paired with its own job's plan, in the order answered; every job asked for
    # is named; the truncated answer and the other command's are not taken for resubmissions
    assert read.complete and read.asked == {"1", "2", "3", "4"}
    assert [(s.reply.result.old_job_id, s.reply.result.new_job_id, s.plan.checkpoint.step if s.plan else None) for s in read.seen] == [
        ("2", "12", 200),
        ("1", "11", 100),
    ]
    # And a history longer than the bound is read only that far, and says it is not whole
    from hyperpod_recovery.adapters import stepfunctions

    with Stubber(sfn) as stub, pytest.MonkeyPatch.context() as patch:
        patch.setattr(stepfunctions, "MAX_EVENTS_READ", 100)
        stub.add_response("get_execution_history", {"events": events[:100], "nextToken": "t1"}, base)
        assert not StepFunctions(stepfunctions=sfn).resubmissions(arn).complete
    # And a history denied is read as incomplete; one throttled raises, for the end to come back later
    with Stubber(sfn) as stub:
        stub.add_client_error("get_execution_history", "AccessDeniedException", "not allowed")
        assert not StepFunctions(stepfunctions=sfn).resubmissions(arn).complete
    with Stubber(sfn) as stub:
        stub.add_client_error("get_execution_history", "ThrottlingException", "slow down")
        with pytest.raises(HistoryUnavailable):
            StepFunctions(stepfunctions=sfn).resubmissions(arn)


def test_execution_history_a_stop_only_is_neither_a_resubmission_asked_nor_one_answered() -> None:
    # Given an EKS job stopped at once (Resubmit Jobs Now, a stop only, answered), whose re-creation after
    # the rejoin was asked and never answered (the execution was stopped while it ran)
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = f"arn:aws:states:{REGION}:111122223333:execution:stack-node-recovery:inc-1"
    uid = "bea1bd05-1aff-56fd-aeef-72f72fd01614"
    kube = {"kind": "PyTorchJob", "namespace": "kubeflow", "name": "llama"}
    plan = {"job": {"job_id": uid, "name": "llama", "kube": kube}, "checkpoint": {"uri": "s3://ckpt/llama/step-000000100/", "step": 100}}
    plan |= {"stop_grace_seconds": 600}
    at = T0.isoformat()
    stopped = {"command_id": f"inc-1:stop:{uid}", "type": "resubmit_job", "requested_at": at, "completed_at": at, "dry_run": False}
    stopped |= {"result": {"old_job_id": uid, "cancelled_old": True, "stop_only": True}}
    payload = {"FunctionName": "arn:...:ResubmitJobFunction", "Payload": {"task_token": "t", "plan": {**plan, "stop_only": True}}}
    events = [
        _history_event(1, "TaskScheduled", payload),
        _history_event(2, "TaskSucceeded", stopped),
        _history_event(3, "TaskScheduled", {"FunctionName": "arn:...:ResubmitJobFunction", "Payload": {"task_token": "t", "plan": plan}}),
    ]
    with Stubber(sfn) as stub:
        base = {"executionArn": arn, "reverseOrder": False, "maxResults": 100, "includeExecutionData": True}
        stub.add_response("get_execution_history", {"events": events}, base)
        read = StepFunctions(stepfunctions=sfn).resubmissions(arn)
    # Then the stop's answer is no resubmission seen, and the re-creation is asked and unanswered: its claim is
    # kept (a copy may exist), never given back on the strength of the stop's answer
    assert read.complete and read.asked == {uid} and read.seen == []
    # And the job is known stopped (a record written from the history says it stays suspended)
    assert read.stopped == {uid}


def test_execution_history_that_cannot_be_read_is_none_not_an_error() -> None:

    sfn = boto3.client("stepfunctions", region_name=REGION)
    with Stubber(sfn) as stub:
        stub.add_client_error("get_execution_history", "AccessDeniedException", "not allowed")
        assert StepFunctions(stepfunctions=sfn).states_entered("arn:aws:states:us-west-2:1:execution:m:e") is None


def test_ledger_keeps_each_executions_latest_wait_until_it_ends(ledger: Any) -> None:
    from hyperpod_recovery.models.records import RejoinWait

    # Given two recoveries of one cluster waiting for their nodes, and one of another cluster
    first = RejoinWait(execution="inc-1", task_token="tok-a", until=T0 + timedelta(minutes=10), logical_ids=["lid-1"], instance_ids=["i-1"])
    ledger.await_rejoin("c", first, T0)
    ledger.await_rejoin("c", RejoinWait(execution="inc-2", task_token="tok-b", until=T0 + timedelta(minutes=1)), T0)
    ledger.await_rejoin("other", RejoinWait(execution="inc-9", task_token="tok-z", until=T0), T0)
    # When inc-1 waits again (a new task token), and an old token's end arrives late
    ledger.await_rejoin("c", first.model_copy(update={"task_token": "tok-a2"}), T0)
    ledger.end_rejoin_wait("c", "inc-1", "tok-a")
    # Then each execution's latest wait is kept, whole, and only its own token ends it
    waits = {w.execution: w for w in ledger.rejoin_waits("c")}
    assert sorted(waits) == ["inc-1", "inc-2"] and waits["inc-1"].task_token == "tok-a2" and waits["inc-1"].logical_ids == ["lid-1"]
    ledger.end_rejoin_wait("c", "inc-1", "tok-a2")
    ledger.end_rejoin_wait("c", "inc-3", "tok-x")  # never waited: nothing happens
    assert [w.execution for w in ledger.rejoin_waits("c")] == ["inc-2"] and ledger.rejoin_waits("none") == []


def test_waking_a_task_that_no_longer_waits_is_false_not_an_error() -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    with Stubber(sfn) as stub:
        stub.add_response("send_task_success", {}, {"taskToken": "t1", "output": "{}"})
        stub.add_client_error("send_task_success", "TaskTimedOut", "timed out")
        stub.add_client_error("send_task_success", "ThrottlingException", "slow down")
        adapter = StepFunctions(stepfunctions=sfn)
        assert adapter.wake("t1", "{}") is True
        assert adapter.wake("t2", "{}") is False
        with pytest.raises(TaskAnswerFailed):
            adapter.wake("t3", "{}")


def test_ledger_keeps_the_breaker_and_the_recovery_log(ledger: Any) -> None:
    from hyperpod_recovery.models.records import BreakerState, RecoveryLogEntry

    assert ledger.breaker("c").state == "closed" and ledger.recovery_log("c") == []
    ledger.save_breaker("c", BreakerState(state="open", reason="r", changed_at=T0, changed_by="i", history=["x"]))
    assert (
        ledger.breaker("c").model_dump()
        == BreakerState(state="open", reason="r", changed_at=T0, changed_by="i", history=["x"]).model_dump()
    )
    old = RecoveryLogEntry(incident="a", at=T0, hostnames=["h1"], outcome="recovered")
    new = RecoveryLogEntry(incident="b", at=T0 + timedelta(days=2), hostnames=["h2"], outcome="escalated")
    ledger.log_recovery("c", old, 86_400)
    ledger.log_recovery("c", new, 86_400)
    ledger.log_recovery("c", new, 86_400)  # a retried Record Outcome
    ledger.log_recovery("c", new.model_copy(update={"at": new.at + timedelta(seconds=5)}), 86_400)  # retried later: still b once
    # A window's read has what happened in it, each incident once (a is older than the window)
    assert [e.incident for e in ledger.recovery_log("c", since=new.at - timedelta(days=1))] == ["b"]
    assert [e.incident for e in ledger.recovery_log("c", since=T0)] == ["a", "b"]


def test_ledger_writes_the_breaker_only_over_the_state_it_was_decided_on(ledger: Any) -> None:
    from hyperpod_recovery.models.records import BreakerState

    # Given two deciders that read the closed breaker
    first, second = ledger.breaker("c"), ledger.breaker("c")
    # When the first opens it, then the second writes what it decided on the old state
    ledger.save_breaker("c", first.changed_to("open", reason="storm", by="inc-1", at=T0))
    with pytest.raises(LedgerUnavailable, match="changed since it was read"):
        ledger.save_breaker("c", second.changed_to("open", reason="storm too", by="inc-2", at=T0))
    # Then the first's change stands, and a decision on what is read now is written
    current = ledger.breaker("c")
    assert (current.state, current.changed_by) == ("open", "inc-1")
    ledger.save_breaker("c", current.changed_to("closed", reason="rack fixed", by="alice", at=T0 + timedelta(hours=1)))
    assert ledger.breaker("c").state == "closed" and len(ledger.breaker("c").history) == 2
    assert BreakerState().version == 0


def test_ledger_begins_an_effect_once_and_keeps_what_was_answered(ledger: Any) -> None:
    # Given no effect yet
    assert ledger.effect_of("a", "notification") is None
    # When a step begins it, and a rerun begins it again later
    first = ledger.begin_effect("a", "notification", T0)
    again = ledger.begin_effect("a", "notification", T0 + timedelta(seconds=30))
    # Then the rerun gets the first run's: begun at its time, not done
    assert (first.started_at, again.started_at, again.done) == (T0, T0, False)
    # And once done, with its answer, every later begin says so
    ledger.finish_effect("a", "notification", T0 + timedelta(seconds=40), result='{"outcome": "recovered"}')
    done = ledger.begin_effect("a", "notification", T0 + timedelta(minutes=5))
    assert done.done and done.started_at == T0 and done.result == '{"outcome": "recovered"}'
    assert ledger.effect_of("a", "notification") == done and ledger.effect_of("b", "notification") is None
    # And an effect of the same name more than 90 days old is an earlier execution's (Step Functions
    # lets a closed execution's name be taken again after 90 days): begun anew
    reborn = ledger.begin_effect("a", "notification", T0 + timedelta(days=91))
    assert not reborn.done and reborn.started_at == T0 + timedelta(days=91)


def test_ledger_never_reopens_a_claim_its_incident_completed(ledger: Any) -> None:
    # Given incident a claimed job 8 and completed it (resubmitted as 9)
    ledger.claim_resubmission("c", "8", "a", T0, TTL)
    ledger.complete_resubmission("c", "8", "a", "9")
    # When a retried step of a claims it again
    again = ledger.claim_resubmission("c", "8", "a", T0 + timedelta(minutes=1), TTL)
    # Then it is answered as done (resubmitted as 9), never reopened for a second submission
    assert again.claimed and again.new_job_id == "9"
    assert ledger.resubmission_claim("c", "8").new_job_id == "9" and not ledger.holdings("a").claims


def test_ledger_keeps_incident_records(ledger: Any) -> None:
    record = IncidentRecord(
        incident_id="a", cluster="c", outcome="recovered", dry_run=False, trigger=["manual"], nodes=["n1"], summary="ok", recorded_at=T0
    )
    ledger.save_incident(record)
    assert ledger.get_incident("a") == record and ledger.get_incident("missing") is None


@pytest.fixture
def dynamo_ledger() -> Iterator[DynamoLedger]:
    with mock_aws():
        yield DynamoLedger(_ledger_table(), dynamodb=boto3.client("dynamodb", region_name=REGION))


def _record(incident: str, cluster: str, at: datetime, outcome: Any = "recovered") -> IncidentRecord:
    return IncidentRecord(
        incident_id=incident, cluster=cluster, outcome=outcome, dry_run=False, trigger=["manual"], nodes=["n1"], summary="s", recorded_at=at
    )


def test_given_records_of_two_clusters_then_incidents_lists_one_clusters_newest_first_from_the_sparse_index(
    dynamo_ledger: DynamoLedger,
) -> None:
    # Given three records of cluster c (one older), one of cluster d, and other items that carry `cluster` (HOLDINGS)
    for n in range(3):
        dynamo_ledger.save_incident(_record(f"c-{n}", "c", T0 + timedelta(minutes=n)))
    dynamo_ledger.save_incident(_record("d-0", "d", T0))
    dynamo_ledger.acquire_locks("c-9", "c", ["n1"], T0, TTL)  # writes a HOLDINGS item with cluster = c
    # Then c's records come newest first, the limit and the since bound hold, and nothing but RECORDs is listed
    assert [r.incident_id for r in dynamo_ledger.incidents("c")] == ["c-2", "c-1", "c-0"]
    assert [r.incident_id for r in dynamo_ledger.incidents("c", limit=2)] == ["c-2", "c-1"]
    assert [r.incident_id for r in dynamo_ledger.incidents("c", since=T0 + timedelta(minutes=1))] == ["c-2", "c-1"]
    assert [r.incident_id for r in dynamo_ledger.incidents("d")] == ["d-0"]
    # And an outcome filter pages on until the limit is met: the older escalation is found past newer recoveries
    dynamo_ledger.save_incident(_record("c-old", "c", T0 - timedelta(days=1), outcome="escalated"))
    assert [r.incident_id for r in dynamo_ledger.incidents("c", limit=1, outcomes=["escalated", "capped"])] == ["c-old"]


def test_given_locks_then_node_locks_lists_the_clusters_live_ones_and_release_deletes_only_the_holders(
    dynamo_ledger: DynamoLedger,
) -> None:
    dynamo_ledger.acquire_locks("a", "c", ["i-1", "host:ip-1"], T0, TTL)
    dynamo_ledger.acquire_locks("b", "c", ["i-2"], T0, timedelta(seconds=1))
    dynamo_ledger.acquire_locks("z", "other", ["i-3"], T0, TTL)
    later = T0 + timedelta(seconds=5)
    # Then only c's live locks are listed, with their holder and expiry
    locks = dynamo_ledger.node_locks("c", later)
    assert [(lock.node, lock.incident) for lock in locks] == [("host:ip-1", "a"), ("i-1", "a")]
    assert locks[0].expires_at == T0 + TTL
    # And a release names the holder it read: another incident's lock is not deleted
    assert dynamo_ledger.release_lock("c", "i-1", "b") is False
    assert dynamo_ledger.release_lock("c", "i-1", "a") is True
    assert dynamo_ledger.lock_holders("c", ["i-1", "host:ip-1"], later) == {"host:ip-1": "a"}


def test_given_a_hold_then_a_second_does_not_overwrite_it_and_unhold_returns_it(dynamo_ledger: DynamoLedger) -> None:
    first = NodeHold(node="ip-1", by="alice", reason="bad DIMM, vendor ticket 42", at=T0)
    assert dynamo_ledger.hold_node("c", first) is None
    assert dynamo_ledger.hold_node("c", first.model_copy(update={"by": "bob"})) == first
    assert dynamo_ledger.node_holds("c", ["i-9", "ip-1"]) == {"ip-1": first}
    assert dynamo_ledger.node_holds("other", ["ip-1"]) == {}
    assert dynamo_ledger.all_node_holds("c") == [first]
    assert dynamo_ledger.unhold_node("c", "ip-1") == first
    assert dynamo_ledger.unhold_node("c", "ip-1") is None and dynamo_ledger.node_holds("c", ["ip-1"]) == {}


def test_given_changes_by_humans_then_the_audit_log_keeps_each_in_order(dynamo_ledger: DynamoLedger) -> None:
    entries = [AuditEntry(at=T0 + timedelta(seconds=n), by="alice", action="hold", target=f"ip-{n}", reason="r") for n in range(3)]
    for entry in [*entries, entries[0]]:  # the same change twice is kept twice: two changes were made
        dynamo_ledger.audit("c", entry)
    log = dynamo_ledger.audit_log("c")
    assert [e.target for e in log] == ["ip-0", "ip-0", "ip-1", "ip-2"] and log[-1] == entries[2]
    assert [e.target for e in dynamo_ledger.audit_log("c", since=T0 + timedelta(seconds=1))] == ["ip-1", "ip-2"]
    # And the breaker's and the recovery log's readers are not confused by audit items in the same partition
    assert dynamo_ledger.recovery_log("c") == [] and dynamo_ledger.breaker("c").state == "closed"


def test_dynamodb_failure_becomes_a_ledger_error(aws: None) -> None:
    ledger = DynamoLedger("no-such-table", dynamodb=boto3.client("dynamodb", region_name=REGION))
    with pytest.raises(LedgerError, match="no-such-table"):
        ledger.acquire_locks("a", "c", ["n1"], T0, TTL)


# --- cluster ------------------------------------------------------------------------------
def _double(workers: int, errors: list[ApiErrorSpec] | None = None) -> HyperPodDouble:
    spec = ClusterSpec(
        name="llm-train",
        instance_groups=[
            InstanceGroupSpec(name="controller", type="Controller", count=1),
            InstanceGroupSpec(name="workers", type="Compute", count=workers),
        ],
    )
    return HyperPodDouble(spec, BehaviourSpec(api_errors=errors or []), REGION, T0, now=lambda: 0.0)


@pytest.fixture(params=["fake", "double"])
def cluster_with_workers(request: pytest.FixtureRequest) -> Iterator[Callable[[int], Any]]:
    """A factory: the number of workers -> a Cluster port (the fake, or the adapter on the double)."""
    if request.param == "fake":
        yield lambda workers: FakeCluster([compute_node(n) for n in range(1, workers + 1)])
        return
    with mock_aws(), ExitStack() as stack:

        def served(workers: int) -> HyperPodCluster:
            stack.enter_context(serve(_double(workers)))
            return HyperPodCluster("llm-train", sagemaker=boto3.client("sagemaker", region_name=REGION))

        yield served


def _worker_ids(cluster: Any) -> list[str]:
    return [n.node_id for n in cluster.list_nodes() if n.instance_group == "workers"]


def test_cluster_lists_every_node_with_its_hostname(cluster_with_workers: Any) -> None:
    cluster = cluster_with_workers(130)  # more than one ListClusterNodes page
    workers = [n for n in cluster.list_nodes() if n.instance_group == "workers"]
    assert len(workers) == 130
    assert all(n.node_id.startswith("i-") and n.private_dns_hostname.startswith("ip-") and n.status == "Running" for n in workers)
    assert cluster.describe().groups["workers"].node_type == "Compute"


def test_cluster_replace_reports_each_node_and_uses_at_most_25_per_call(cluster_with_workers: Any) -> None:
    cluster = cluster_with_workers(30)
    ids = [*_worker_ids(cluster)[:27], node_id(0xDEAD)]
    outcome = cluster.replace_nodes(ids)
    assert outcome.calls == 2
    assert sorted(outcome.successful) == sorted(ids[:27])
    assert [(f.node_id, f.error_code) for f in outcome.failed] == [(node_id(0xDEAD), "InstanceIdNotFound")]


def test_double_gives_a_replacement_a_new_id_under_the_same_hostname(aws: None) -> None:
    clock = {"t": 0.0}
    double = HyperPodDouble(
        _double(2).spec, BehaviourSpec(replacement_seconds=600, shutdown_seconds=45), REGION, T0, now=lambda: clock["t"]
    )
    with serve(double):
        cluster = HyperPodCluster("llm-train", sagemaker=boto3.client("sagemaker", region_name=REGION))
        old = next(n for n in cluster.list_nodes() if n.instance_group == "workers")
        assert cluster.replace_nodes([old.node_id]).successful == [old.node_id]
        again = cluster.replace_nodes([old.node_id])  # HyperPod is busy with it
        assert [(f.node_id, f.error_code) for f in again.failed] == [(old.node_id, "InstanceIdInUse")] and again.successful == []
        clock["t"] = 100.0
        pending = [n for n in cluster.list_nodes() if n.private_dns_hostname == old.private_dns_hostname]
        assert [(n.status, n.node_id != old.node_id) for n in pending] == [("Pending", True)]
        clock["t"] = 600.0
        running = [n for n in cluster.list_nodes() if n.private_dns_hostname == old.private_dns_hostname]
        assert [n.status for n in running] == ["Running"]


def test_double_refuses_more_than_25_ids_and_controller_replacement(aws: None) -> None:
    double = _double(30)
    with serve(double):
        sagemaker = boto3.client("sagemaker", region_name=REGION)
        nodes = sagemaker.list_cluster_nodes(ClusterName="llm-train")["ClusterNodeSummaries"]
        workers = [n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "workers"]
        controller = next(n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "controller")
        with pytest.raises(sagemaker.exceptions.ClientError, match="ValidationException"):
            sagemaker.batch_replace_cluster_nodes(ClusterName="llm-train", NodeIds=workers[:26])
        with pytest.raises(sagemaker.exceptions.ClientError, match="controller"):
            sagemaker.batch_replace_cluster_nodes(ClusterName="llm-train", NodeIds=[controller])
        response = sagemaker.batch_replace_cluster_nodes(ClusterName="llm-train", NodeIds=["i-0000000000000dead"])
        assert "Successful" not in response and response["Failed"][0]["ErrorCode"] == "InstanceIdNotFound"


def test_double_reboot_keeps_the_id_describe_details_a_node_and_delete_reports_code(aws: None) -> None:
    clock = {"t": 0.0}
    double = HyperPodDouble(_double(2).spec, BehaviourSpec(), REGION, T0, now=lambda: clock["t"])
    with serve(double):
        sagemaker = boto3.client("sagemaker", region_name=REGION)
        worker = next(
            n for n in sagemaker.list_cluster_nodes(ClusterName="llm-train")["ClusterNodeSummaries"] if n["InstanceGroupName"] == "workers"
        )
        node_id_ = worker["InstanceId"]
        assert sagemaker.batch_reboot_cluster_nodes(ClusterName="llm-train", NodeIds=[node_id_])["Successful"] == [node_id_]
        details = sagemaker.describe_cluster_node(ClusterName="llm-train", NodeId=node_id_)["NodeDetails"]
        assert details["InstanceStatus"]["Status"] == "Pending" and details["PrivateDnsHostname"] == worker["PrivateDnsHostname"]
        clock["t"] = 300.0
        assert (
            sagemaker.describe_cluster_node(ClusterName="llm-train", NodeId=node_id_)["NodeDetails"]["InstanceStatus"]["Status"]
            == "Running"
        )
        deleted = sagemaker.batch_delete_cluster_nodes(ClusterName="llm-train", NodeIds=[node_id_, "i-0000000000000dead"])
        assert deleted["Successful"] == [node_id_] and deleted["Failed"][0]["Code"] == "NodeIdNotFound"


def test_the_adapter_asks_for_logical_ids_and_carries_them_leaving_out_nodes_without_an_instance() -> None:
    # Given ListClusterNodes as the botocore model shapes it (a Stubber checks every parameter against it)

    sagemaker = boto3.client("sagemaker", region_name=REGION)
    summary = {
        "InstanceGroupName": "workers",
        "InstanceId": node_id(1),
        "NodeLogicalId": "df268d19-f035-4f28-9b80-b956b92ae21e",
        "InstanceType": "ml.p5.48xlarge",
        "LaunchTime": T0,
        "InstanceStatus": {"Status": "Running"},
        "PrivateDnsHostname": "ip-10-1-0-1.us-west-2.compute.internal",
    }
    provisioning = {
        **summary,
        "InstanceId": "",
        "NodeLogicalId": "0a1b2c3d-0000-4000-8000-000000000000",
        "InstanceStatus": {"Status": "Pending"},
    }
    with Stubber(sagemaker) as stub:
        stub.add_response(
            "list_cluster_nodes",
            {"ClusterNodeSummaries": [summary, provisioning]},
            {"ClusterName": "llm-train", "MaxResults": 100, "IncludeNodeLogicalIds": True},
        )
        # When the adapter lists the nodes
        nodes = HyperPodCluster("llm-train", sagemaker=sagemaker).list_nodes()
    # Then it asked for logical ids, carries each node's, and leaves out a node with no instance yet
    assert [(n.node_id, n.logical_id) for n in nodes] == [(node_id(1), "df268d19-f035-4f28-9b80-b956b92ae21e")]


@pytest.mark.parametrize("kept", [True, False], ids=["logical-id-kept", "logical-id-new"])
def test_double_lists_logical_ids_only_when_asked_and_gives_a_replacement_a_new_hostname_when_told(aws: None, kept: bool) -> None:
    clock = {"t": 0.0}
    behaviour = BehaviourSpec(replacement_hostname="new", replacement_logical_id="kept" if kept else "new")
    double = HyperPodDouble(_double(2).spec, behaviour, REGION, T0, now=lambda: clock["t"])
    with serve(double):
        sagemaker = boto3.client("sagemaker", region_name=REGION)
        assert all("NodeLogicalId" not in n for n in sagemaker.list_cluster_nodes(ClusterName="llm-train")["ClusterNodeSummaries"])
        cluster = HyperPodCluster("llm-train", sagemaker=sagemaker)
        old = next(n for n in cluster.list_nodes() if n.instance_group == "workers")
        assert old.logical_id and cluster.replace_nodes([old.node_id]).successful == [old.node_id]
        clock["t"] = 700.0
        (new,) = [n for n in cluster.list_nodes() if n.instance_group == "workers" and n.launch_time and n.launch_time > T0]
        assert new.status == "Running" and new.private_dns_hostname != old.private_dns_hostname
        assert (new.logical_id == old.logical_id) is kept
        by_logical_id = sagemaker.describe_cluster_node(ClusterName="llm-train", NodeLogicalId=new.logical_id)["NodeDetails"]
        assert by_logical_id["InstanceId"] == new.node_id


@pytest.mark.parametrize("reboot_status", ["Pending", "Running"])
def test_double_models_what_slurmctld_sees_of_a_reboot_whatever_hyperpod_shows(aws: None, reboot_status: str) -> None:
    clock = {"t": 0.0}
    double = HyperPodDouble(_double(2).spec, BehaviourSpec(reboot_status=reboot_status), REGION, T0, now=lambda: clock["t"])  # type: ignore[arg-type]
    with serve(double):
        cluster = HyperPodCluster("llm-train", sagemaker=boto3.client("sagemaker", region_name=REGION))
        node = next(n for n in cluster.list_nodes() if n.instance_group == "workers")
        name = node.private_dns_hostname.split(".", 1)[0]  # type: ignore[union-attr]
        booted_before, responding = double.slurm_view(name)
        assert booted_before is not None and booted_before < T0 and responding
        cluster.reboot_nodes([node.node_id])
        # While it reboots: HyperPod shows Pending, or Running all through; slurmd does not answer
        clock["t"] = 60.0
        assert [n.status for n in cluster.list_nodes() if n.node_id == node.node_id] == [reboot_status]
        assert double.slurm_view(name) == (booted_before, False)
        # Once back: a boot time after the request, from a responding slurmd
        clock["t"] = 200.0
        booted_after, responding = double.slurm_view(name)
        assert booted_after is not None and booted_after > T0 and responding
        assert [n.status for n in cluster.list_nodes() if n.node_id == node.node_id] == ["Running"]


def test_hyperpod_errors_are_translated(aws: None) -> None:
    double = _double(
        2,
        errors=[
            ApiErrorSpec(operation="ListClusterNodes", code="ThrottlingException", times=10),
            ApiErrorSpec(operation="DescribeCluster", code="AccessDeniedException"),
        ],
    )
    with serve(double):
        sagemaker = boto3.client("sagemaker", region_name=REGION, config=Config(retries={"max_attempts": 1}))
        with pytest.raises(HyperPodThrottled):
            HyperPodCluster("llm-train", sagemaker=sagemaker).list_nodes()
        with pytest.raises(HyperPodApiError, match="AccessDeniedException"):
            HyperPodCluster("llm-train", sagemaker=sagemaker).describe()
        with pytest.raises(ClusterNotFound):
            HyperPodCluster("no-such-cluster", sagemaker=sagemaker).describe()


# --- checkpoints --------------------------------------------------------------------------
@pytest.fixture(params=["fake", "s3"])
def store(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Callable[[str, bytes], None]]]:
    """(store, put(key, body)) for bucket 'ckpt-bucket'."""
    if request.param == "fake":
        fake = FakeCheckpointStore()
        yield fake, lambda key, body: fake.put_object("ckpt-bucket", key, body)
        return
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="ckpt-bucket", CreateBucketConfiguration={"LocationConstraint": REGION})
        yield S3CheckpointStore(s3=s3), lambda key, body: s3.put_object(Bucket="ckpt-bucket", Key=key, Body=body)


def test_checkpoint_store_reads_objects_and_sizes(store: tuple[Any, Any]) -> None:
    reader, put = store
    put("run/step-1/manifest.json", b"{}")
    put("run/empty", b"")
    assert reader.get("ckpt-bucket", "run/step-1/manifest.json", 1024) == b"{}"
    assert reader.get("ckpt-bucket", "run/step-1/manifest.json", 1) == b"{"
    assert reader.get("ckpt-bucket", "run/empty", 1024) == b""
    assert reader.get("ckpt-bucket", "run/step-9/manifest.json", 1024) is None
    assert (reader.size("ckpt-bucket", "run/step-1/manifest.json"), reader.size("ckpt-bucket", "run/nope")) == (2, None)


def test_checkpoint_store_lists_like_list_objects_v2(store: tuple[Any, Any]) -> None:
    reader, put = store
    for key in ("run/step-1/a.pt", "run/step-1/manifest.json", "run/step-2/a.pt", "run/notes.txt", "run/step-3/b"):
        put(key, b"12345")
    # A delimiter rolls keys up into folders; objects and folders each come in key order
    page = reader.list("ckpt-bucket", "run/", delimiter="/")
    assert (page.objects, page.folders, page.truncated) == ([("run/notes.txt", 5)], ["run/step-1/", "run/step-2/", "run/step-3/"], False)
    # StartAfter a folder's name (no slash) includes that folder; MaxKeys counts folders too
    page = reader.list("ckpt-bucket", "run/step-", delimiter="/", start_after="run/step-2", max_keys=1)
    assert (page.folders, page.truncated) == (["run/step-2/"], True)
    page = reader.list("ckpt-bucket", "run/step-", delimiter="/", token=page.next_token, max_keys=1)
    assert (page.folders, page.truncated) == (["run/step-3/"], False)
    # Without a delimiter: every key with its size, from StartAfter on
    page = reader.list("ckpt-bucket", "run/step-", start_after="run/step-1/a.pt")
    assert [key for key, _ in page.objects] == ["run/step-1/manifest.json", "run/step-2/a.pt", "run/step-3/b"]


def test_checkpoint_store_pages_through_many_folders(store: tuple[Any, Any]) -> None:
    reader, put = store
    for step in range(1050):
        put(f"run/step-{step:09d}/manifest.json", b"{}")
    pages = list(list_all(reader, "ckpt-bucket", "run/", delimiter="/"))
    folders = [f for page in pages for f in page.folders]
    assert (len(pages), len(folders), folders[-1]) == (2, 1050, "run/step-000001049/")


def test_checkpoint_store_conditional_puts(store: tuple[Any, Any]) -> None:
    writer, _ = store
    writer.put("ckpt-bucket", "run/latest", b"1", if_none_match=True)
    with pytest.raises(CheckpointWriteConflict):
        writer.put("ckpt-bucket", "run/latest", b"2", if_none_match=True)
    body, etag = writer.get_with_etag("ckpt-bucket", "run/latest", 100)
    writer.put("ckpt-bucket", "run/latest", b"3", if_match=etag)
    with pytest.raises(CheckpointWriteConflict):  # the ETag we read is no longer current
        writer.put("ckpt-bucket", "run/latest", b"4", if_match=etag)
    with pytest.raises(CheckpointWriteConflict):  # the object went away since we read it
        writer.put("ckpt-bucket", "run/missing", b"5", if_match=etag)
    assert (body, writer.get("ckpt-bucket", "run/latest", 100)) == (b"1", b"3")


def test_checkpoint_store_hashes_whole_objects(store: tuple[Any, Any]) -> None:
    writer, put = store
    put("run/a", b"abc")
    assert writer.sha256("ckpt-bucket", "run/a") == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert writer.sha256("ckpt-bucket", "run/none") is None


def test_checkpoint_store_translates_a_missing_bucket(aws: None) -> None:
    reader = S3CheckpointStore(s3=boto3.client("s3", region_name=REGION))
    with pytest.raises(CheckpointUnreadable, match="NoSuchBucket"):
        reader.list("no-such-bucket", "run/")
    with pytest.raises(CheckpointUnreadable, match="NoSuchBucket"):
        reader.get("no-such-bucket", "run/latest", 10)


# --- the other channels -------------------------------------------------------------------
def _envelope() -> CommandEnvelope:
    return CommandEnvelope(
        command_id="inc:jobs",
        incident_id="inc",
        execution_name="inc",
        task_token="tok",
        requested_at=datetime(2026, 3, 14, tzinfo=UTC),
        command=JobsOnNodes(nodes=["ip-10-1-0-7"]),
    )


def test_the_slurm_orchestrator_puts_a_typed_command_on_the_agents_queue(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="commands")["QueueUrl"]
    envelope = _envelope()
    SlurmAgentOrchestrator(SqsQueue(url, sqs=sqs), StepFunctions()).dispatch(envelope)
    message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"][0]
    assert CommandEnvelope.model_validate_json(message["Body"]) == envelope
    assert message["MessageAttributes"]["command"]["StringValue"] == "jobs_on_nodes"
    assert message["MessageAttributes"]["incident"]["StringValue"] == "inc"


def _modeled_errors(operation: str) -> list[str]:
    """The error codes botocore's Step Functions model lists for an operation (what AWS documents)."""
    model = botocore.session.get_session().get_service_model("stepfunctions")
    return sorted(shape.name for shape in model.operation_model(operation).error_shapes)


# Every documented SendTaskSuccess error, and the generic ones AWS sends any call (not in the model).
@pytest.mark.parametrize("answer_error", [*_modeled_errors("SendTaskSuccess"), "ThrottlingException", "AccessDeniedException"])
def test_the_slurm_orchestrator_names_its_failures_as_the_state_machines_retry_them(aws: None, answer_error: str) -> None:
    # Given a command queue that does not exist, and Step Functions refusing an answer (moto accepts
    # any token, so its refusals are stubbed with SendTaskSuccess's documented error codes)
    sqs = boto3.client("sqs", region_name=REGION)
    sfn = boto3.client("stepfunctions", region_name=REGION)
    orchestrator = SlurmAgentOrchestrator(
        SqsQueue(f"https://sqs.{REGION}.amazonaws.com/123456789012/gone", sqs=sqs), StepFunctions(stepfunctions=sfn)
    )
    # When a command is dispatched, or a task answered, Then each is ControllerChannelError (never a botocore error)
    with pytest.raises(ControllerChannelError, match="could not queue jobs_on_nodes for inc"):
        orchestrator.dispatch(_envelope())
    reply: CommandReply[Any] = CommandReply(
        command_id="inc:drain", type="drain_nodes", requested_at=T0, started_at=T0, completed_at=T0, result=DrainResult(drained=[])
    )
    with Stubber(sfn) as stub, pytest.raises(ControllerChannelError, match=f"could not answer task for inc:drain.*{answer_error}"):
        stub.add_client_error("send_task_success", answer_error, "no", http_status_code=400)
        orchestrator.answer("token", reply)


def test_notifier_publishes_with_an_outcome_attribute(aws: None) -> None:
    sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
    topic = sns.create_topic(Name="t")["TopicArn"]
    url = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"],
    )
    SnsNotifier(topic, sns=sns).publish("subject", "body", {"outcome": "escalated"})
    delivered = json.loads(sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"])
    assert delivered["Subject"] == "subject" and delivered["MessageAttributes"]["outcome"]["Value"] == "escalated"


def _two_state_machines() -> tuple[Any, str, str]:
    """The node and job state machines on moto (which runs none of their executions to an end)."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    role = boto3.client("iam", region_name=REGION).create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    definition = json.dumps({"StartAt": "S", "States": {"S": {"Type": "Succeed"}}})
    node, job = (sfn.create_state_machine(name=n, definition=definition, roleArn=role)["stateMachineArn"] for n in ("node", "job"))
    return sfn, node, job


def test_step_functions_turns_a_reused_execution_name_into_already_exists(aws: None) -> None:
    sfn, node, job = _two_state_machines()
    workflows = StepFunctions({"node": node, "job": job}, stepfunctions=sfn)
    assert workflows.start("hpr-1", "{}") == "started"
    assert workflows.start("hpr-1", '{"again": true}') == "already_exists"
    # And a job recovery starts on the other state machine
    assert workflows.start("hpj-1", "{}", "job") == "started"
    assert [e["name"] for e in sfn.list_executions(stateMachineArn=job)["executions"]] == ["hpj-1"]


def test_step_functions_lists_only_the_running_executions_of_the_workflow_asked(aws: None) -> None:
    sfn, node, job = _two_state_machines()
    workflows = StepFunctions({"node": node, "job": job}, stepfunctions=sfn)
    # Given two job recoveries, one of them stopped since, and a node recovery (moto runs none to its end)
    for name, workflow in (("hpj-1-100", "job"), ("hpj-2-200", "job"), ("hpr-1", "node")):
        workflows.start(name, "{}", workflow)  # type: ignore[arg-type]
    sfn.stop_execution(executionArn=job.replace(":stateMachine:", ":execution:") + ":hpj-1-100")
    # Then the job workflow's running ones are the one still running
    assert workflows.running("job") == ["hpj-2-200"] and workflows.running("node") == ["hpr-1"]


def test_step_functions_lists_the_running_executions_of_every_page() -> None:
    sfn = botocore.session.get_session().create_client("stepfunctions", region_name=REGION)
    machine = "arn:aws:states:us-west-2:123456789012:stateMachine:job"
    item = {"stateMachineArn": machine, "status": "RUNNING", "startDate": T0}
    with Stubber(sfn) as stub:
        first = {"stateMachineArn": machine, "statusFilter": "RUNNING", "maxResults": 1000}
        stub.add_response(
            "list_executions", {"executions": [{**item, "executionArn": f"{machine}:a", "name": "a"}], "nextToken": "t"}, first
        )
        stub.add_response(
            "list_executions", {"executions": [{**item, "executionArn": f"{machine}:b", "name": "b"}]}, {**first, "nextToken": "t"}
        )
        assert StepFunctions({"job": machine}, stepfunctions=sfn).running("job") == ["a", "b"]


def test_step_functions_listing_refused_is_history_unavailable() -> None:
    sfn = botocore.session.get_session().create_client("stepfunctions", region_name=REGION)
    with Stubber(sfn) as stub:
        stub.add_client_error("list_executions", "ThrottlingException")
        with pytest.raises(HistoryUnavailable, match="ThrottlingException"):
            StepFunctions({"job": "arn:aws:states:us-west-2:1:stateMachine:job"}, stepfunctions=sfn).running("job")


# Every documented StartExecution error but the reused name (that one is "already_exists"), and the generic ones.
@pytest.mark.parametrize(
    "code",
    [c for c in _modeled_errors("StartExecution") if c != "ExecutionAlreadyExists"] + ["ThrottlingException", "AccessDeniedException"],
)
def test_a_start_that_step_functions_refuses_is_start_execution_failed_whatever_the_code(code: str) -> None:
    # Given Step Functions refusing a start, transiently or for good
    sfn = boto3.client("stepfunctions", region_name=REGION)
    with Stubber(sfn) as stub:
        stub.add_client_error("start_execution", code, "no", http_status_code=400)
        # When intake starts a recovery, Then the error is ours, named with AWS's code (no botocore error escapes)
        with pytest.raises(StartExecutionFailed, match=code):
            StepFunctions({"node": "arn:aws:states:us-west-2:123456789012:stateMachine:n"}, stepfunctions=sfn).start("hpr-1", "{}")


def test_dead_letters_keep_the_body_and_the_reason(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    DeadLetterQueue(SqsQueue(url, sqs=sqs)).send("{bad", "body: not JSON", "m-1")
    message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"][0]
    assert message["Body"] == "{bad" and message["MessageAttributes"]["rejection_reason"]["StringValue"] == "body: not JSON"
    assert message["MessageAttributes"]["original_message_id"]["StringValue"] == "m-1"


def test_a_queue_that_does_not_take_the_message_is_queue_unavailable(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    with pytest.raises(QueueUnavailable, match="SendMessage"):
        DeadLetterQueue(SqsQueue(f"https://sqs.{REGION}.amazonaws.com/123456789012/gone", sqs=sqs)).send("{bad", "", "")


def test_checkpoint_store_reads_an_empty_object_that_s3_refuses_to_range() -> None:
    # S3 answers 416 InvalidRange to a ranged GET of a zero-byte object (moto does not); the store retries whole.
    from io import BytesIO

    from botocore.response import StreamingBody

    s3 = boto3.client("s3", region_name=REGION)
    stubber = Stubber(s3)
    stubber.add_client_error("get_object", service_error_code="InvalidRange", http_status_code=416)
    stubber.add_response("get_object", {"Body": StreamingBody(BytesIO(b""), 0), "ETag": '"e"'}, {"Bucket": "b", "Key": "k"})
    with stubber:
        assert S3CheckpointStore(s3=s3).get_with_etag("b", "k", 100) == (b"", '"e"')
