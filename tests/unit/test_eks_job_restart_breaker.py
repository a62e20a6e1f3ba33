"""The job side of the breaker (steps/plan_job_restart.py): a storm of failed jobs (a shared file
system failing 500 opted-in jobs) is not 500 restarts. Each planned restart takes a place among
BreakerMaxRecoveries in BreakerWindowSeconds; the first past them opens the breaker, which then stops
every restart and every replacement until a human resets it. Plan Job Restart is shared: EKS and
Slurm jobs alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hyperpod_recovery.domain.jobs.job_failure import RestartPolicy
from hyperpod_recovery.domain.policy.safety import SafetyPolicy
from hyperpod_recovery.models.commands import CheckpointRef, JobRef, JobSpec
from hyperpod_recovery.models.job_recovery import FailureClassification, PlanJobRestartInput, RestartDecision
from hyperpod_recovery.models.node_recovery import CheckpointPlan, ResumePlan
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.steps.plan_job_restart import plan_job_restart
from tests.fakes import FakeLedger

T0 = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
CLUSTER = "llm-train"
RESTARTS = RestartPolicy(budget=3, window_seconds=86_400, backoff_seconds=0, max_backoff_seconds=0, crash_loop_repeats=2)
SAFETY = SafetyPolicy(
    max_percent=20,
    max_nodes=64,
    breaker_max_recoveries=20,
    breaker_max_failures=3,
    breaker_window_seconds=3600,
    offender_max_recoveries=3,
    offender_window_seconds=86_400,
)


def _job_id(orchestrator: str, n: int) -> str:
    return f"0b0e8b4a-1b0c-4d5e-8f00-{n:012d}" if orchestrator == "eks" else str(1000 + n)


def _plan(ledger: FakeLedger, orchestrator: str, n: int, at: datetime = T0, *, dry_run: bool = False) -> str:
    job_id = _job_id(orchestrator, n)
    job = JobSpec(job_id=job_id, name=f"job-{n}", num_nodes=1, state="Failed", checkpoint_uri="s3://ckpt/job/")
    step = PlanJobRestartInput(
        execution_name=f"hpj-{job_id}-1773478800",
        request=JobRecoveryRequest(cluster=CLUSTER, job_id=job_id, source="job_failed", reason="failed", detected_at=at, dry_run=dry_run),
        classification=FailureClassification(at=at, kind="application", reason="r", job=job, jobs=[job]),
        checkpoints=CheckpointPlan(
            at=at,
            resumable=[
                ResumePlan(
                    job=JobRef(job_id=job_id, name=f"job-{n}"), checkpoint=CheckpointRef(uri="s3://ckpt/job/step-000000010/", step=10)
                )
            ],
        ),
    )
    return plan_job_restart(step, ledger=ledger, policy=RESTARTS, safety=SAFETY, now=at).action


@pytest.mark.parametrize("orchestrator", ["eks", "slurm"])
def test_a_storm_of_failed_jobs_restarts_the_breakers_limit_and_then_opens_it(orchestrator: str) -> None:
    # Given 500 jobs failing at once (a shared file system), each one's JobRecovery planning its restart
    ledger = FakeLedger()
    actions = [_plan(ledger, orchestrator, n) for n in range(500)]
    # Then the first 20 (BreakerMaxRecoveries) restart, and the 21st opens the breaker: no more restarts
    assert actions[:20] == ["resubmit"] * 20 and set(actions[20:]) == {"capped"}
    breaker = ledger.breaker(CLUSTER)
    assert breaker.state == "open" and "20 job restarts in the last 3600 s" in breaker.reason
    # And, once a human resets the breaker, a retried Plan Job Restart of one that restarted keeps its place
    assert _plan(ledger, orchestrator, 7) == "capped"  # (while the breaker is open, nothing restarts)
    ledger.save_breaker(CLUSTER, breaker.changed_to("closed", reason="reset", by="operator", at=T0))
    assert _plan(ledger, orchestrator, 7) == "resubmit"
    # (a reset does not forget the window, as on the node path: the next restart past it opens the breaker again)
    assert _plan(ledger, orchestrator, 20) == "capped"


def test_the_window_lets_restarts_through_again_once_its_places_expire() -> None:
    ledger = FakeLedger()
    assert {_plan(ledger, "eks", n) for n in range(20)} == {"resubmit"}
    assert _plan(ledger, "eks", 20, T0 + timedelta(seconds=3601)) == "resubmit"


def test_a_dry_run_says_it_would_be_capped_and_opens_nothing() -> None:
    from hyperpod_recovery.adapters.dry_run import DryRunLedger

    ledger = FakeLedger()
    for n in range(20):
        _plan(ledger, "eks", n)
    gate = DryRunLedger(ledger)
    job_id = _job_id("eks", 99)
    job = JobSpec(job_id=job_id, name="job-99", num_nodes=1, state="Failed", checkpoint_uri="s3://ckpt/job/")
    step = PlanJobRestartInput(
        execution_name=f"hpj-{job_id}-1",
        request=JobRecoveryRequest(cluster=CLUSTER, job_id=job_id, source="job_failed", reason="f", detected_at=T0, dry_run=True),
        classification=FailureClassification(at=T0, kind="application", reason="r", job=job, jobs=[job]),
        checkpoints=CheckpointPlan(
            at=T0,
            resumable=[
                ResumePlan(job=JobRef(job_id=job_id, name="job-99"), checkpoint=CheckpointRef(uri="s3://ckpt/job/step-000000010/", step=10))
            ],
        ),
    )
    assert plan_job_restart(step, ledger=gate, policy=RESTARTS, safety=SAFETY, now=T0).action == "capped"  # type: ignore[arg-type]
    assert ledger.breaker(CLUSTER).state == "closed" and len(ledger.job_restarts(CLUSTER, T0)) == 20


# --- the copy another incident made, named as kubectl shows it ---------------------------------------
def _hung_on_eks(ledger: FakeLedger, *, node_record: bool) -> RestartDecision:
    """A hung PyTorchJob whose nested node recovery already re-created it as llama-r1 (``node_record``:
    that incident's record is in the ledger, naming its copy)."""
    from hyperpod_recovery.domain.intake.execution_names import node_execution_name
    from hyperpod_recovery.models.kubernetes import KubeJobRef
    from hyperpod_recovery.models.records import IncidentRecord, JobFate

    old, new = _job_id("eks", 1), _job_id("eks", 2)
    name = f"hpj-{old}-hung-1773479100"
    ledger.claim_resubmission(CLUSTER, old, node_execution_name(name), T0, timedelta(hours=1))
    ledger.complete_resubmission(CLUSTER, old, node_execution_name(name), new)
    if node_record:
        fate = JobFate(
            job=old, name="llama", kind="PyTorchJob", namespace="kubeflow", fate="resubmitted", copy_id=new, copy_name="llama-r1"
        )
        ledger.save_incident(
            IncidentRecord(
                incident_id=node_execution_name(name), cluster=CLUSTER, outcome="recovered", dry_run=False, trigger=["job_hung"],
                nodes=[], summary="s", recorded_at=T0, orchestrator="eks", job_fates=[fate],
            )
        )  # fmt: skip
    job = JobSpec(
        job_id=old, name="llama", num_nodes=8, state="Running", kube=KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
    )
    step = PlanJobRestartInput(
        execution_name=name,
        request=JobRecoveryRequest(cluster=CLUSTER, job_id=old, source="progress", reason="hung", detected_at=T0),
        classification=FailureClassification(
            at=T0, kind="hung", reason="r", job=job, jobs=[job], recover_nodes=True, node_execution_name=node_execution_name(name)
        ),
        checkpoints=CheckpointPlan(at=T0),
    )
    return plan_job_restart(step, ledger=ledger, policy=RESTARTS, safety=SAFETY, now=T0)


def test_a_copy_our_node_recovery_re_created_is_named_by_namespace_and_name_from_its_record() -> None:
    # Given the nested node recovery re-created the hung job as kubeflow/llama-r1, its record saying so
    decision = _hung_on_eks(FakeLedger(), node_record=True)
    # Then the restart says so by the name kubectl shows, never by the uid alone, and carries the name on
    assert decision.action == "resubmitted_by_node_recovery" and decision.resubmitted_name == "llama-r1"
    assert decision.reason.endswith("as PyTorchJob kubeflow/llama-r1") and "uid" not in decision.reason


def test_without_its_makers_record_the_copy_is_named_by_its_uid_as_before() -> None:
    # Given the claim completed, but no record of the incident that made the copy (expired, or not written yet)
    decision = _hung_on_eks(FakeLedger(), node_record=False)
    # Then the restart names the copy by the uid it has: nothing made up
    assert decision.resubmitted_name is None and decision.reason.endswith(f"as the job of uid {_job_id('eks', 2)}")
