"""Detect Hung Jobs against the progress table and the ledger on moto: an enforced stall starts one
JobRecovery per episode however many ticks see it, an observed one only records what it would have
done, and an item someone wrote badly is skipped, never the tick's failure."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Literal

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.progress import ProgressTable
from hyperpod_recovery.adapters.progress_memory import ProgressMemoryTable
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.errors import HistoryUnavailable, KubeAccessDenied, KubeUnavailable, StartExecutionFailed
from hyperpod_recovery.models.progress import ProgressReport, progress_item
from hyperpod_recovery.models.progress_memory import JobMemory
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.ports import StartOutcome
from hyperpod_recovery.steps.detect_hung_jobs import detect_hung_jobs
from sandbox.kube import FakeKube
from tests.fakes import CLUSTER, T0, FakeJobNodes, FakeWorkflows, watched
from tests.unit.test_hang_detection import report

KEYS = {
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
    "BillingMode": "PAY_PER_REQUEST",
}


@pytest.fixture
def tables() -> Iterator[tuple[ProgressTable, DynamoLedger, object]]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(TableName="progress", **KEYS)
        dynamodb.create_table(TableName="ledger", **KEYS)
        yield ProgressTable("progress", dynamodb=dynamodb), DynamoLedger("ledger", dynamodb=dynamodb), dynamodb


def write(dynamodb: object, *reports: ProgressReport) -> None:
    for r in reports:
        dynamodb.put_item(TableName="progress", Item=progress_item(r))  # type: ignore[attr-defined]


class Watched:
    """The ledger's memory (the real adapter on moto), a job first recalled as if watched all along."""

    def __init__(self, progress: ProgressTable) -> None:
        self.progress = progress
        self.table = ProgressMemoryTable("ledger", dynamodb=progress._dynamodb)

    def recall(self, cluster: str, jobs: Sequence[str]) -> dict[str, JobMemory]:
        rows = self.progress.running_jobs()
        return {**{job: watched(job, rows[job]) for job in jobs if job in rows}, **self.table.recall(cluster, jobs)}

    def remember(self, cluster: str, memories: Sequence[JobMemory]) -> int:
        return self.table.remember(cluster, memories)


def all_running(progress: ProgressTable, now: datetime) -> FakeJobNodes:
    """The orchestrator running every job that reports, on the nodes it reports from."""
    return FakeJobNodes.of(now, **{job: [r.node for r in reports] for job, reports in progress.running_jobs().items()})


def tick(
    progress: ProgressTable,
    ledger: DynamoLedger,
    workflows: FakeWorkflows,
    rules: HangRules,
    at: timedelta = timedelta(),
    kube: FakeKube | None = None,
    remaining_ms: int = 40_000,
) -> dict[str, int]:
    return detect_hung_jobs(
        progress=progress,
        ledger=ledger,
        workflows=workflows,
        job_nodes=all_running(progress, T0 + at),
        memory=Watched(progress),
        cluster=CLUSTER,
        rules=rules,
        now=T0 + at,
        remaining_ms=lambda: remaining_ms,
        kube=kube,
    )


def test_given_a_hung_job_when_three_ticks_see_it_then_one_recovery_starts_and_one_verdict_is_kept(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given job 1001 silent for 90 s on 4 nodes, one behind the others
    write(dynamodb, *[report(f"ip-10-1-0-{i}", step=101, idle=90) for i in (1, 2, 3)], report("ip-10-1-0-4", step=100, idle=95))
    workflows = FakeWorkflows()
    # When three ticks, a minute apart, see it
    counts = [tick(progress, ledger, workflows, HangRules(), timedelta(minutes=m)) for m in range(3)]
    # Then one JobRecovery started, named by the job and the episode, carrying the verdict
    (name,) = workflows.started
    assert name == f"hpj-1001-hung-{int((T0 - timedelta(seconds=90)).timestamp())}" and workflows.workflow_of[name] == "job"
    request = JobRecoveryRequest.model_validate_json(workflows.started[name])
    assert request.source == "progress" and request.hang is not None and request.hang.suspects == ["ip-10-1-0-4"]
    assert [c.get("recoveries_started", 0) for c in counts] == [1, 0, 0]
    # And the ledger keeps one verdict for the episode, saying what was done
    (kept,) = ledger.verdicts(CLUSTER)
    assert kept.execution == name and kept.action == f"started job recovery {name}" and kept.review == "open"


def test_given_the_stall_rule_in_observe_then_nothing_starts_and_the_verdict_says_what_it_would_do(tables) -> None:
    progress, ledger, dynamodb = tables
    write(dynamodb, *[report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2)])
    workflows = FakeWorkflows()
    counts = tick(progress, ledger, workflows, HangRules(stall_mode="observe"))
    assert workflows.started == {} and counts["observed"] == 1
    (kept,) = ledger.verdicts(CLUSTER)
    assert kept.execution is None and kept.action.startswith("observed: would capture the hang's evidence, cancel job 1001")


def test_given_an_item_that_does_not_parse_or_lies_about_its_key_then_it_is_skipped(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given a garbage item, and an item filed under job 2002 whose report says job 1001
    dynamodb.put_item(TableName="progress", Item={"pk": {"S": "JOB#1"}, "sk": {"S": "NODE#x"}, "report": {"S": "{not json"}})
    forged = progress_item(report("ip-10-1-0-1", idle=900))
    forged["pk"] = {"S": "JOB#2002"}
    dynamodb.put_item(TableName="progress", Item=forged)
    workflows = FakeWorkflows()
    # When a tick reads them
    counts = tick(progress, ledger, workflows, HangRules())
    # Then neither counts as a job, and nothing starts
    assert counts["jobs_reporting"] == 0 and progress.unreadable == 2 and workflows.started == {}


def eks_tick(
    progress: ProgressTable, ledger: DynamoLedger, workflows: FakeWorkflows, kube: FakeKube | None, at: timedelta = timedelta()
) -> dict[str, int]:
    return tick(progress, ledger, workflows, HangRules(), at, kube)


def test_given_an_eks_job_that_hangs_then_one_recovery_starts_for_its_job_objects_uid(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given PyTorchJob team-a/llama on two nodes, whose reporters (namespace/name) stopped 300 s ago
    kube = FakeKube(now=lambda: T0)
    job = kube.add_job("PyTorchJob", "team-a", "llama", nodes=["hyperpod-i-0aaaaaaaaaaaaaaa1", "hyperpod-i-0aaaaaaaaaaaaaaa2"])
    uid = job["metadata"]["uid"]
    write(dynamodb, *[report(f"hyperpod-i-0aaaaaaaaaaaaaaa{i}", idle=300, job="team-a/llama") for i in (1, 2)])
    workflows = FakeWorkflows()
    # When two ticks see it
    counts = [eks_tick(progress, ledger, workflows, kube, timedelta(minutes=m)) for m in range(2)]
    # Then one JobRecovery starts, for the job object's uid (the workflow's EKS job id), the
    # verdict keeping the key its pods reported under
    (name,) = workflows.started
    request = JobRecoveryRequest.model_validate_json(workflows.started[name])
    assert name.startswith(f"hpj-{uid}-hung-") and request.job_id == uid and request.hang is not None
    assert request.hang.job == "team-a/llama" and [c.get("recoveries_started", 0) for c in counts] == [1, 0]
    assert ledger.verdicts(CLUSTER)[0].action == f"started job recovery {name}"


def test_given_an_eks_key_no_single_job_object_answers_to_then_the_stall_is_observed_and_says_why(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given reports under team-a/llama, where no job of that name exists (gone; or forged)
    kube = FakeKube(now=lambda: T0)
    write(dynamodb, *[report(f"hyperpod-i-0aaaaaaaaaaaaaaa{i}", idle=300, job="team-a/llama") for i in (1, 2)])
    workflows = FakeWorkflows()
    # When a tick sees the stall
    counts = eks_tick(progress, ledger, workflows, kube)
    # Then nothing starts, and the record says why
    assert workflows.started == {} and counts["observed_not_enforceable"] == 1
    assert "no training job team-a/llama is in the Kubernetes API" in ledger.verdicts(CLUSTER)[0].action
    # And a stack without the Kubernetes API (a Slurm stack) never acts on an EKS key either
    other = FakeWorkflows()
    assert eks_tick(progress, ledger, other, None, timedelta(minutes=1))["observed_not_enforceable"] == 1 and other.started == {}


def test_given_both_kinds_of_job_under_one_name_then_the_stall_is_observed_not_guessed(tables) -> None:
    progress, ledger, dynamodb = tables
    kube = FakeKube(now=lambda: T0)
    kube.add_job("PyTorchJob", "team-a", "llama", nodes=["hyperpod-i-0aaaaaaaaaaaaaaa1"])
    kube.add_job("HyperPodPyTorchJob", "team-a", "llama", nodes=["hyperpod-i-0aaaaaaaaaaaaaaa2"])
    write(dynamodb, *[report(f"hyperpod-i-0aaaaaaaaaaaaaaa{i}", idle=300, job="team-a/llama") for i in (1, 2)])
    workflows = FakeWorkflows()
    eks_tick(progress, ledger, workflows, kube)
    assert workflows.started == {}
    assert "both a PyTorchJob and a HyperPodPyTorchJob are named team-a/llama" in ledger.verdicts(CLUSTER)[0].action


def test_given_the_kubernetes_api_not_answering_then_nothing_is_recorded_and_the_next_tick_asks_again(tables) -> None:
    progress, ledger, dynamodb = tables
    kube = FakeKube(now=lambda: T0)
    kube.add_job("PyTorchJob", "team-a", "llama", nodes=["hyperpod-i-0aaaaaaaaaaaaaaa1", "hyperpod-i-0aaaaaaaaaaaaaaa2"])
    write(dynamodb, *[report(f"hyperpod-i-0aaaaaaaaaaaaaaa{i}", idle=300, job="team-a/llama") for i in (1, 2)])
    workflows = FakeWorkflows()
    # Given the API server answering 503 to the next job read
    kube.faults.setdefault(("get", "pytorchjobs"), []).append(KubeUnavailable("injected 503"))
    # When a tick sees the stall, then the next one
    first = eks_tick(progress, ledger, workflows, kube)
    assert first["start_failed"] == 1 and workflows.started == {} and ledger.verdicts(CLUSTER) == []
    eks_tick(progress, ledger, workflows, kube, timedelta(minutes=1))
    # Then the second starts it, the verdict recorded as acted on (never first as observed)
    (name,) = workflows.started
    assert ledger.verdicts(CLUSTER)[0].action == f"started job recovery {name}"


def test_given_a_tick_out_of_time_then_the_rest_is_deferred_to_the_next(tables) -> None:
    progress, ledger, dynamodb = tables
    write(dynamodb, report("ip-10-1-0-1", idle=300, job="1001"), report("ip-10-1-0-1", idle=300, job="1002"))
    workflows = FakeWorkflows()
    counts = tick(progress, ledger, workflows, HangRules(), remaining_ms=2_000)
    assert counts["deferred"] == 2 and workflows.started == {}


def test_given_the_slow_rule_in_enforce_then_one_slowdown_recovery_starts_and_in_observe_none(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given a job 30 % over its baseline
    write(dynamodb, *[report(f"ip-10-1-0-{i}", step_seconds=2.6, baseline=2.0) for i in (1, 2, 3)])
    # When the slow rule is in observe, Then nothing starts and the record says what enforcing would do
    observing = FakeWorkflows()
    tick(progress, ledger, observing, HangRules(slow_mode="observe"))
    assert observing.started == {} and ledger.verdicts(CLUSTER)[0].action.startswith("observed: would stop job 1001")
    # When it is in enforce (a later run of the stack), Then one JobRecovery starts per episode, named a slowdown's
    enforcing = FakeWorkflows()
    # (two reads 30 s apart: its rows, unchanged, are no stall yet under the 45 s a 30 s reporter is given)
    counts = [tick(progress, ledger, enforcing, HangRules(slow_mode="enforce"), timedelta(seconds=30 * m)) for m in range(2)]
    (name,) = enforcing.started
    assert name.startswith("hpj-1001-slow-") and [c.get("recoveries_started", 0) for c in counts] == [1, 0]
    request = JobRecoveryRequest.model_validate_json(enforcing.started[name])
    assert request.hang is not None and request.hang.rule == "slow"


def test_given_a_report_key_no_job_object_could_have_then_it_is_observed_and_the_tick_goes_on(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given a stalled row under a name longer than a job object's may be (anyone with the writer policy
    # can write one), and a Slurm job 1001 stalled too
    kube = FakeKube(now=lambda: T0)
    write(dynamodb, report("hyperpod-i-0aaaaaaaaaaaaaaa1", idle=300, job="a/" + "b" * 100))
    write(dynamodb, report("ip-10-1-0-1", idle=300, job="1001"))
    workflows = FakeWorkflows()
    # When a tick reads them
    counts = eks_tick(progress, ledger, workflows, kube)
    # Then the forged key is recorded as observed, saying why, and job 1001 is still acted on
    assert counts["observed_not_enforceable"] == 1 and len(workflows.started) == 1
    said = {v.verdict.job: v.action for v in ledger.verdicts(CLUSTER)}
    assert "names no Kubernetes job object" in said["a/" + "b" * 100] and said["1001"].startswith("started job recovery")


def test_given_the_kubernetes_api_refusing_the_detector_then_the_stall_is_recorded_with_why(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given the RBAC not applied: every job read answered 403
    kube = FakeKube(now=lambda: T0)
    kube.add_job("PyTorchJob", "team-a", "llama", nodes=["hyperpod-i-0aaaaaaaaaaaaaaa1", "hyperpod-i-0aaaaaaaaaaaaaaa2"])
    kube.faults.setdefault(("get", "pytorchjobs"), []).append(KubeAccessDenied("injected 403"))
    write(dynamodb, *[report(f"hyperpod-i-0aaaaaaaaaaaaaaa{i}", idle=300, job="team-a/llama") for i in (1, 2)])
    workflows = FakeWorkflows()
    eks_tick(progress, ledger, workflows, kube)
    # Then nothing starts, and `verdicts list` shows the stall and why it was not acted on
    assert workflows.started == {} and "the Kubernetes API refused to read PyTorchJob team-a/llama" in ledger.verdicts(CLUSTER)[0].action


# --- a stall another incident already ends (domain/hangs/handled.py) --------------------------------
def test_given_an_incident_that_claimed_the_job_after_its_last_progress_then_the_stall_is_left_to_it(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given job 1001 without progress for 300 s (a node's fault: its other ranks wait, heartbeating),
    # and node incident hpr-x, which claimed the job's resubmission 60 s ago
    write(dynamodb, *[report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2, 3)])
    ledger.claim_resubmission(CLUSTER, "1001", "hpr-x", T0 - timedelta(seconds=60), timedelta(hours=1))
    workflows = FakeWorkflows()
    # When a tick sees the stall
    counts = tick(progress, ledger, workflows, HangRules())
    # Then nothing starts, and the verdict says to whom it was left and why
    assert workflows.started == {} and counts["left_to_another_incident"] == 1 and "recoveries_started" not in counts
    (kept,) = ledger.verdicts(CLUSTER)
    assert kept.execution is None
    assert kept.action == (
        "not acted on: left to incident hpr-x, which claimed its resubmission at 2026-03-14 08:59:00 UTC, after the job's "
        "last progress, and has not resubmitted it yet (its claim holds until 2026-03-14 09:59:00 UTC)"
    )


def test_given_the_incident_gives_the_job_up_then_the_next_tick_starts_the_recovery_and_the_kept_verdict_says_so(tables) -> None:
    progress, ledger, dynamodb = tables
    write(dynamodb, *[report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2, 3)])
    ledger.claim_resubmission(CLUSTER, "1001", "hpr-x", T0 - timedelta(seconds=60), timedelta(hours=1))
    workflows = FakeWorkflows()
    tick(progress, ledger, workflows, HangRules())
    # Given an operator confirmed the verdict, and hpr-x then gave its claim back (Slurm requeued the job, say)
    (was,) = ledger.verdicts(CLUSTER)
    assert ledger.review_verdict(was, was.model_copy(update={"review": "confirmed", "reviewed_by": "alice"}))
    ledger.release_resubmission(CLUSTER, "1001", "hpr-x")
    # When the next tick sees the same stall (the same episode)
    counts = tick(progress, ledger, workflows, HangRules(), timedelta(minutes=1))
    # Then the recovery starts, and the one kept verdict now names it, keeping what it first said and its review
    (name,) = workflows.started
    assert counts["recoveries_started"] == 1
    (kept,) = ledger.verdicts(CLUSTER)
    assert kept.execution == name and kept.review == "confirmed" and kept.reviewed_by == "alice"
    first = "not acted on: left to incident hpr-x"
    assert kept.action.startswith(f"started job recovery {name} | before 2026-03-14 09:01:00 UTC: {first}")
    # And a third tick changes nothing more
    tick(progress, ledger, workflows, HangRules(), timedelta(minutes=2))
    assert ledger.verdicts(CLUSTER) == [kept] and list(workflows.started) == [name]


def test_given_a_claim_from_before_the_stall_expired_or_long_past_then_the_recovery_starts(tables) -> None:
    progress, ledger, dynamodb = tables
    write(dynamodb, *[report(f"ip-10-{j}-0-{i}", idle=1800, job=str(j)) for j in (1, 2, 3) for i in (1, 2)])
    # Given job 1: resubmitted two days ago by hpr-a (its id back since, as a requeued job's is);
    # job 2: claimed after its last progress by hpr-b, which died (its claim expired);
    # job 3: claimed after its last progress by hpr-c 20 minutes ago, and still stalled
    ledger.claim_resubmission(CLUSTER, "1", "hpr-a", T0 - timedelta(days=2), timedelta(hours=1))
    ledger.complete_resubmission(CLUSTER, "1", "hpr-a", "9")
    ledger.claim_resubmission(CLUSTER, "2", "hpr-b", T0 - timedelta(minutes=25), timedelta(minutes=10))
    ledger.claim_resubmission(CLUSTER, "3", "hpr-c", T0 - timedelta(minutes=20), timedelta(hours=1))
    workflows = FakeWorkflows()
    # When a tick sees the three stalls
    counts = tick(progress, ledger, workflows, HangRules())
    # Then each starts its recovery (whose Classify Failure reads the claim again and says what it finds)
    assert sorted(n.split("-hung-")[0] for n in workflows.started) == ["hpj-1", "hpj-2", "hpj-3"]
    assert counts["recoveries_started"] == 3 and "left_to_another_incident" not in counts


class _ListingRefused(FakeWorkflows):
    def running(self, workflow: Literal["node", "job"]) -> list[str]:
        raise HistoryUnavailable("ListExecutions: ThrottlingException")


def test_given_the_job_failed_and_its_recovery_runs_then_the_stall_of_its_ended_copy_is_left_to_it(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given job 1001 without progress for 300 s, whose end (60 s ago) started JobRecovery hpj-1001-<end>
    write(dynamodb, *[report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2, 3)])
    end = f"hpj-1001-{int(T0.timestamp()) - 60}"
    workflows = FakeWorkflows()
    workflows.start(end, "{}", workflow="job")
    # When a tick sees the ended copy's last rows, stalled
    counts = tick(progress, ledger, workflows, HangRules())
    # Then nothing more starts, and the verdict says the stall was left to that recovery
    assert list(workflows.started) == [end] and counts["left_to_another_incident"] == 1
    (kept,) = ledger.verdicts(CLUSTER)
    assert kept.execution is None and kept.action.startswith(f"not acted on: left to job recovery {end}, running for the job's end")
    # And when that recovery has ended and the stall is still seen, the next tick starts the hang's own
    workflows.ended.add(end)
    assert tick(progress, ledger, workflows, HangRules(), timedelta(minutes=1))["recoveries_started"] == 1


def test_given_the_running_recoveries_cannot_be_listed_then_the_stall_is_acted_on(tables) -> None:
    progress, ledger, dynamodb = tables
    write(dynamodb, *[report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2, 3)])
    workflows = _ListingRefused()
    counts = tick(progress, ledger, workflows, HangRules())
    assert counts["recoveries_started"] == 1 and "left_to_another_incident" not in counts


class _CountedListings(FakeWorkflows):
    listings: int = 0

    def running(self, workflow: Literal["node", "job"]) -> list[str]:
        self.listings += 1
        return super().running(workflow)


def test_given_a_rack_stalling_many_jobs_then_a_tick_lists_the_running_recoveries_once(tables) -> None:
    progress, ledger, dynamodb = tables
    # Given twelve jobs stalled at once (ListExecutions' bucket of 100 is shared with the sweep)
    write(dynamodb, *[report(f"ip-10-{j}-0-{i}", idle=300, job=str(1000 + j)) for j in range(12) for i in (1, 2)])
    workflows = _CountedListings()
    # When a tick sees them
    counts = tick(progress, ledger, workflows, HangRules())
    # Then it listed the running recoveries once, and started each job's
    assert workflows.listings == 1 and counts["recoveries_started"] == 12


class _StartRefused(FakeWorkflows):
    def start(self, name: str, payload: str, workflow: Literal["node", "job"] = "node") -> StartOutcome:
        raise StartExecutionFailed(f"StartExecution {name}: ThrottlingException (transient)")


def test_given_a_start_that_failed_then_a_deferral_the_kept_verdict_never_names_a_recovery_that_did_not_start(tables) -> None:
    progress, ledger, dynamodb = tables
    write(dynamodb, *[report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2, 3)])
    # Given a tick whose start of the hang's recovery failed
    assert tick(progress, ledger, _StartRefused(), HangRules())["start_failed"] == 1
    # When an incident claims the job before the next tick, which leaves the stall to it
    ledger.claim_resubmission(CLUSTER, "1001", "hpr-x", T0 + timedelta(seconds=30), timedelta(hours=1))
    assert tick(progress, ledger, FakeWorkflows(), HangRules(), timedelta(minutes=1))["left_to_another_incident"] == 1
    # Then the one kept verdict says so, after what it said before, and names no recovery
    (kept,) = ledger.verdicts(CLUSTER)
    assert kept.execution is None and kept.action.startswith("not acted on: left to incident hpr-x")
    assert " | before 2026-03-14 09:01:00 UTC: not acted on: job recovery hpj-1001-hung-" in kept.action
    # And another tick saying the same changes nothing more
    tick(progress, ledger, FakeWorkflows(), HangRules(), timedelta(minutes=2))
    assert ledger.verdicts(CLUSTER) == [kept]


def test_given_the_episodes_own_recovery_holds_the_claim_then_later_ticks_find_it_running_not_left_to_another(tables) -> None:
    progress, ledger, dynamodb = tables
    write(dynamodb, *[report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2, 3)])
    workflows = FakeWorkflows()
    tick(progress, ledger, workflows, HangRules())
    (name,) = workflows.started
    # Given the hang's own nested node recovery took the job's claim
    ledger.claim_resubmission(CLUSTER, "1001", f"{name}-nodes", T0 + timedelta(seconds=20), timedelta(hours=1))
    # When the next tick sees the same stall, then it counts its own recovery running
    counts = tick(progress, ledger, workflows, HangRules(), timedelta(minutes=1))
    assert counts["already_started"] == 1 and "left_to_another_incident" not in counts
    assert ledger.verdicts(CLUSTER)[0].execution == name


def test_given_starts_refused_then_the_verdict_is_kept_saying_so_and_a_later_start_updates_it(tables) -> None:
    progress, ledger, dynamodb = tables
    write(dynamodb, *[report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2, 3)])
    # Given two ticks whose start of the hang's recovery is refused
    for s in (0, 30):
        assert tick(progress, ledger, _StartRefused(), HangRules(), timedelta(seconds=s))["start_failed"] == 1
    # Then the episode's verdict is kept (verdicts list shows it), naming no execution and saying why
    (kept,) = ledger.verdicts(CLUSTER)
    assert kept.execution is None and "could not be started (StartExecution hpj-1001-hung-" in kept.action
    # And when a later tick's start succeeds, the kept verdict names it
    workflows = FakeWorkflows()
    tick(progress, ledger, workflows, HangRules(), timedelta(minutes=1))
    (name,) = workflows.started
    (kept,) = ledger.verdicts(CLUSTER)
    assert kept.execution == name and kept.action.startswith(f"started job recovery {name} | before 2026-03-14 09:01:00 UTC: not acted on")


def test_given_a_kept_verdict_that_cannot_be_read_then_a_start_still_goes_ahead(tables) -> None:
    progress, ledger, dynamodb = tables
    write(dynamodb, *[report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2, 3)])
    tick(progress, ledger, _StartRefused(), HangRules())
    # Given the kept verdict's item in a layout this code cannot read
    (item,) = dynamodb.scan(
        TableName="ledger", FilterExpression="begins_with(sk, :v)", ExpressionAttributeValues={":v": {"S": "VERDICT#"}}
    )["Items"]
    dynamodb.put_item(TableName="ledger", Item={**item, "verdict": {"S": '{"verdict": "of a layout to come"}'}})
    # When the next tick starts the recovery, then it starts, and the item is left as it was
    workflows = FakeWorkflows()
    assert tick(progress, ledger, workflows, HangRules(), timedelta(minutes=1))["recoveries_started"] == 1
    assert dynamodb.get_item(TableName="ledger", Key={"pk": item["pk"], "sk": item["sk"]})["Item"]["verdict"]["S"].endswith('to come"}')
