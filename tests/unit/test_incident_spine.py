"""One spine for both workflows' records (domain/record/incident.py): what every incident shares is decided
once, whatever the workflow, and each workflow's table only adds what is its own."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hyperpod_recovery.domain.record.durations import phase_durations
from hyperpod_recovery.domain.record.incident import IncidentTable, conclude, decide_outcome
from hyperpod_recovery.domain.record.job_incident import JOB_INCIDENT
from hyperpod_recovery.domain.record.node_incident import NODE_INCIDENT
from hyperpod_recovery.models.job_recovery import JobWorkflowState, RecordJobOutcomeInput
from hyperpod_recovery.models.node_recovery import RecordOutcomeInput, StepError, WorkflowState
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest, Trigger
from tests.fakes import CLUSTER, T0, node_id

RECEIVED = T0 + timedelta(seconds=30)
NOW = T0 + timedelta(minutes=5)


def _node_step(disposition: str, *, dry_run: bool = False, error: StepError | None = None) -> RecordOutcomeInput:
    request = RecoveryRequest(
        cluster=CLUSTER,
        node_ids=[node_id(1)],
        triggers=[Trigger(source="hyperpod_node_health", node_ids=[node_id(1)], reason="GPU fell off the bus", detected_at=T0)],
        dry_run=dry_run,
        detected_at=T0,
        incident_id="hpr-1",
        received_at=RECEIVED,
    )
    return RecordOutcomeInput(execution_name="hpr-1", disposition=disposition, state=WorkflowState(request=request), error=error)  # type: ignore[arg-type]


def _job_step(disposition: str, *, dry_run: bool = False, error: StepError | None = None) -> RecordJobOutcomeInput:
    request = JobRecoveryRequest(
        cluster=CLUSTER,
        job_id="8",
        source="job_failed",
        reason="job 8 failed",
        detected_at=T0,
        dry_run=dry_run,
        incident_id="hpj-8",
        received_at=RECEIVED,
    )
    return RecordJobOutcomeInput(execution_name="hpj-8", disposition=disposition, state=JobWorkflowState(request=request), error=error)  # type: ignore[arg-type]


WORKFLOWS: list[tuple[IncidentTable[Any], Any]] = [(NODE_INCIDENT, _node_step), (JOB_INCIDENT, _job_step)]
IDS = ["node", "job"]


@pytest.mark.parametrize(("table", "make_step"), WORKFLOWS, ids=IDS)
@pytest.mark.parametrize("disposition", ["rejected", "escalated", "stale"])
def test_given_a_failed_step_when_either_workflow_records_then_it_ends_the_same_way(table, make_step, disposition) -> None:  # type: ignore[no-untyped-def]
    # Given a step that failed with a Lambda error, and one the agent never answered
    lambda_error = StepError(Error="ClusterUnavailable", Cause='{"errorMessage": "SageMaker throttled", "errorType": "X"}')
    timeout = StepError(Error="States.Timeout", Cause="")
    # When the workflow records it
    # Then both workflows end with the disposition, the error name and a cause a human reads
    assert decide_outcome(table, make_step(disposition, error=lambda_error)) == (disposition, "ClusterUnavailable", "SageMaker throttled")
    outcome, error, cause = decide_outcome(table, make_step(disposition, error=timeout))
    assert (outcome, error) == (disposition, "States.Timeout") and cause == "no answer from the controller agent before the timeout."


@pytest.mark.parametrize(("table", "make_step"), WORKFLOWS, ids=IDS)
def test_given_a_dry_run_that_completed_then_either_workflow_records_a_dry_run(table, make_step) -> None:  # type: ignore[no-untyped-def]
    assert decide_outcome(table, make_step("completed", dry_run=True)) == ("dry_run", None, None)


def test_given_a_nested_node_recovery_failed_then_only_the_job_workflow_reads_its_own_error() -> None:
    # Given a States.TaskFailed whose cause is the nested execution's DescribeExecution
    nested = StepError(
        Error="States.TaskFailed", Cause='{"Error": "RejoinDeadlineExceeded", "ExecutionArn": "arn:x:hpj-8-nodes", "Cause": "c"}'
    )
    # Then JobRecovery names the nested recovery's end; NodeRecovery (which nests nothing) keeps the error as it came
    assert decide_outcome(JOB_INCIDENT, _job_step("escalated", error=nested))[:2] == ("escalated", "NodeRecoveryEscalated")
    assert decide_outcome(NODE_INCIDENT, _node_step("escalated", error=nested))[:2] == ("escalated", "States.TaskFailed")


@pytest.mark.parametrize(("table", "make_step"), WORKFLOWS, ids=IDS)
def test_given_any_end_then_the_record_the_outcome_and_the_durations_agree(table, make_step) -> None:  # type: ignore[no-untyped-def]
    # Given an incident that escalated after a step failed
    step = make_step("escalated", error=StepError(Error="ClusterUnavailable", Cause="x"))
    # When it is concluded
    result, record, facts = conclude(table, step, cluster=CLUSTER, now=NOW)
    # Then the record is the workflow's, says what the outcome says, ends its timeline with the outcome ...
    assert record.workflow == table.workflow and record.incident_id == result.incident_id == step.execution_name
    assert (
        (record.outcome, record.error, record.summary)
        == (result.outcome, result.error, result.summary)
        == ("escalated", "ClusterUnavailable", result.summary)
    )
    assert record.timeline[-1].event == "outcome: escalated" and record.timeline[-1].at == NOW
    assert [e.at for e in record.timeline] == sorted(e.at for e in record.timeline)
    # ... its phases start with the detection and end with the record, one after the other ...
    assert record.phases[0].name == "detect" and (record.phases[0].start, record.phases[0].end) == (T0, RECEIVED)
    assert record.phases[-1].name == "record" and record.phases[-1].end == NOW
    # ... and the durations the metrics publish are read from that record
    assert result.durations == phase_durations(record) and result.durations
    assert facts.dry_run is False and facts.resubmitted == {}


@pytest.mark.parametrize(("table", "make_step"), WORKFLOWS, ids=IDS)
def test_given_a_huge_cause_then_the_record_and_the_outcome_carry_the_same_bounded_text(table, make_step) -> None:  # type: ignore[no-untyped-def]
    # Given a step that failed with a 20,000-character message (an agent's Slurm error, say), unanswered too
    step = make_step("escalated", error=StepError(Error="States.Timeout", Cause="x" * 20_000))
    result, record, _ = conclude(table, step, cluster=CLUSTER, now=NOW)
    # Then the record (stored, notified) says exactly what the outcome says, within its bounds
    assert record.cause == result.cause and len(record.cause or "") <= 4000
    assert record.summary == result.summary == record.timeline[-1].detail and len(record.summary) <= 8000
