"""What became of each job and node (domain/record/fates.py): the facts every message is rendered from."""

from __future__ import annotations

from datetime import timedelta

from hyperpod_recovery.domain.record.fates import acted, with_claims
from hyperpod_recovery.domain.record.incident import conclude
from hyperpod_recovery.domain.record.job_incident import JOB_INCIDENT
from hyperpod_recovery.models.commands import CommandReply, JobSpec, ResubmitResult
from hyperpod_recovery.models.job_recovery import FailureClassification, JobWorkflowState, RecordJobOutcomeInput
from hyperpod_recovery.models.node_recovery import StepError
from hyperpod_recovery.models.records import JobFate, NodeFate, ResubmissionClaim
from hyperpod_recovery.models.requests import JobRecoveryRequest
from sandbox.slurm import SimulatedSlurm, SlurmJob
from tests.fakes import T0

NOT_RESUBMITTED = JobFate(job="1001", name="llama", fate="not_resubmitted", reason="the node recovery escalated")


def test_a_job_another_incident_resubmitted_is_named_with_its_copy() -> None:
    # Given a job this incident did not resubmit, whose claim another incident completed with job 1002
    claims = {"1001": ResubmissionClaim(job_id="1001", incident_id="hpr-other", claimed=False, new_job_id="1002")}
    # When the fates are read against the ledger's claims
    (fate,) = with_claims([NOT_RESUBMITTED], claims.get, "hpj-1001-1")
    # Then the job has a live copy, made by the other incident: nobody is told to start another
    assert (fate.fate, fate.copy_id, fate.by) == ("resubmitted_before", "1002", "hpr-other") and fate.live_copy


def test_a_copy_made_by_the_node_recovery_this_incident_started_is_this_incidents_own() -> None:
    claims = {"1001": ResubmissionClaim(job_id="1001", incident_id="hpj-1001-1-nodes", claimed=False, new_job_id="1002")}
    (fate,) = with_claims([NOT_RESUBMITTED], claims.get, "hpj-1001-1")
    assert (fate.fate, fate.copy_id, fate.by) == ("resubmitted", "1002", "hpj-1001-1-nodes")


def test_a_claim_held_without_a_copy_recorded_means_a_copy_may_exist() -> None:
    claims = {"1001": ResubmissionClaim(job_id="1001", incident_id="hpr-other", claimed=False)}
    (fate,) = with_claims([NOT_RESUBMITTED], claims.get, "hpj-1001-1")
    assert fate.fate == "copy_unknown" and "hpr-other" in fate.reason


def test_this_incidents_own_unfinished_claim_changes_nothing() -> None:
    claims = {"1001": ResubmissionClaim(job_id="1001", incident_id="hpj-1001-1", claimed=False)}
    assert with_claims([NOT_RESUBMITTED], claims.get, "hpj-1001-1") == [NOT_RESUBMITTED]


def test_an_incident_that_changed_nothing_has_not_acted() -> None:
    untouched = NodeFate(node="ip-10-1-0-1", fate="untouched")
    assert not acted([NOT_RESUBMITTED], [untouched])
    assert acted([NOT_RESUBMITTED.model_copy(update={"fate": "resubmitted", "copy_id": "1002"})], [untouched])
    assert not acted([], [untouched.model_copy(update={"fate": "not_ours"})])
    assert acted([], [untouched.model_copy(update={"fate": "replacing", "acted": True})])


def _job_state(**parts) -> JobWorkflowState:  # type: ignore[no-untyped-def]
    request = JobRecoveryRequest(
        cluster="llm-train",
        job_id="1001",
        source="job_failed",
        reason="NODE_FAIL",
        detected_at=T0,
        received_at=T0,
        incident_id="hpj-1001-1",
    )
    return JobWorkflowState(request=request, **parts)


def test_a_job_incident_escalated_after_its_node_recovery_resubmitted_the_job_names_the_copy() -> None:
    # Given a job recovery whose nested node recovery resubmitted the job at once, then escalated
    job = JobSpec(job_id="1001", name="llama", num_nodes=4, state="NODE_FAIL", checkpoint_uri="s3://ckpt/llama")
    state = _job_state(classification=FailureClassification(at=T0, kind="node_caused", reason="node down", job=job, jobs=[job]))
    error = StepError(Error="NodeRecoveryEscalated", Cause="rejoin deadline")
    step = RecordJobOutcomeInput(execution_name="hpj-1001-1", disposition="escalated", state=state, error=error)
    claims = {"1001": ResubmissionClaim(job_id="1001", incident_id="hpj-1001-1-nodes", claimed=False, new_job_id="1002")}
    # When it is recorded
    _, record, _ = conclude(JOB_INCIDENT, step, cluster="llm-train", now=T0 + timedelta(minutes=30), claim_of=claims.get)
    # Then the record and its summary name the copy, never leave the human to resubmit the job
    (fate,) = record.job_fates
    assert (fate.fate, fate.copy_id) == ("resubmitted", "1002")
    assert "resubmitted by node recovery hpj-1001-1-nodes as job 1002" in record.summary


def test_a_job_incident_whose_resubmission_another_incident_made_did_nothing_and_is_not_recovered() -> None:
    # Given a job recovery whose Plan Job Restart found another incident had resubmitted the job
    job = JobSpec(job_id="1001", name="llama", num_nodes=4, state="FAILED", checkpoint_uri="s3://ckpt/llama")
    reply = CommandReply[ResubmitResult](
        command_id="c",
        type="resubmit_job",
        requested_at=T0,
        completed_at=T0,
        result=ResubmitResult(old_job_id="1001", new_job_id="1002", already_submitted=True, submitted_by="hpr-other"),
    )
    state = _job_state(
        classification=FailureClassification(at=T0, kind="application", reason="exit 1", job=job, jobs=[job]), resubmission=reply
    )
    step = RecordJobOutcomeInput(execution_name="hpj-1001-1", disposition="completed", state=state)
    # When it is recorded
    result, record, _ = conclude(JOB_INCIDENT, step, cluster="llm-train", now=T0)
    # Then it is not "recovered": it changed nothing, and says whose copy runs
    assert result.outcome == "duplicate" and record.job_fates[0].fate == "resubmitted_before"
    assert record.summary == "Nothing was done by this incident: job 1001 (llama) already resubmitted by hpr-other as job 1002."


def test_two_live_copies_of_one_job_are_found_and_one_after_the_other_is_not() -> None:
    # Given a job and a resubmission of it
    slurm = SimulatedSlurm(now=lambda: T0)
    slurm.add_job(SlurmJob(job_id="1001", name="llama", nodes=[], state="RUNNING", checkpoint_uri=None))
    copy = SlurmJob(job_id="1002", name="llama", nodes=[], state="PENDING", checkpoint_uri=None, resubmission_of="1001", submitted_at=T0)
    slurm.add_job(copy)
    # When the old one is still live as the copy is submitted: a second copy
    assert [c["copies"] for c in slurm.second_copies()] == [["1001", "1002"]]
    # When it ended first (cancelled before the submission): none
    slurm.jobs["1001"].ended_at = T0 - timedelta(seconds=1)
    assert slurm.second_copies() == []
