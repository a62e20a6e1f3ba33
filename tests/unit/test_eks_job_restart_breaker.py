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
from hyperpod_recovery.models.job_recovery import FailureClassification, PlanJobRestartInput
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
