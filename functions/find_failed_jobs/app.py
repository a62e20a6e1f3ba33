"""Find Failed Jobs (EKS only, every minute): start a JobRecovery for each training job that failed
(EKS sends no event for it; on Slurm the controller agent's epilog does)."""

from hyperpod_recovery.errors import ConfigurationError
from hyperpod_recovery.metric_names import FAILED_JOBS_POLLED, VERDICT_NOTICES
from hyperpod_recovery.runtime import Dependencies, counted_run
from hyperpod_recovery.steps.find_failed_jobs import Teller, find_failed_jobs


@counted_run(FAILED_JOBS_POLLED | VERDICT_NOTICES, "failed jobs polled")
def lambda_handler(event: dict, context, deps: Dependencies):
    jobs = deps.training_jobs()
    if jobs is None:
        raise ConfigurationError("Find Failed Jobs runs on an EKS stack (ORCHESTRATOR=eks) only")
    return find_failed_jobs(
        jobs=jobs,
        workflows=deps.workflows,
        ledger=deps.ledger,
        guarded=deps.guarded,
        teller=Teller(deps.notifier, deps.deployment, deps.settings.dry_run),
        max_age_seconds=deps.settings.max_event_age_seconds,
        max_skew_seconds=deps.settings.max_clock_skew_seconds,
        now=deps.now(),
        remaining_ms=context.get_remaining_time_in_millis,  # (the sandbox's context counts its calls' time)
    )
