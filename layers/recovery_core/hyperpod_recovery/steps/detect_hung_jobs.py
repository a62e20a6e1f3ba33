"""Detect Hung Jobs (scheduled every minute): a job that hangs or slows down ends nothing and
announces nothing, so this reads the progress the training scripts report (the progress table)
and decides, per job, a stall or a slowdown verdict (domain/hangs).

Each verdict is kept in the ledger once per episode (the same stall seen a minute later is the
same episode: its last progress names it). A rule in ``enforce`` starts one JobRecovery per episode,
named by the job and the episode (``hpj-<job>-hung-<epoch>``), so a stall seen by many ticks starts
one execution; in ``observe`` the verdict says what would have been done, and nothing is touched.

What the table says is a signal, not proof: the recovery acts only on a job slurmctld says is
running and whose own submission opted in, on the nodes slurmctld allocated to it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime

from pydantic import ValidationError

from hyperpod_recovery.domain.execution_names import hang_execution_name
from hyperpod_recovery.domain.hangs.detect import job_verdicts
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable, StartExecutionFailed
from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN, matches
from hyperpod_recovery.models.hangs import HangVerdict, RecordedVerdict
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import Ledger, ProgressReader, Workflows

# A tick starts no more recoveries once this little of its function's time is left: the next tick,
# a minute later, goes on (the verdicts are the same, their names too).
STOP_WITH_MS = 10_000


def would_do(verdict: HangVerdict) -> str:
    """What enforcing the verdict does (an observed verdict's record says it would have)."""
    if verdict.rule == "slow":
        cordon = f"cordon {', '.join(verdict.suspects)}, check it, " if verdict.suspects else ""
        return f"stop job {verdict.job}, {cordon}resubmit it from its newest verified checkpoint"
    blamed = f"cordon and check {', '.join(verdict.suspects)}" if verdict.suspects else "blame no node"
    return f"capture the hang's evidence, cancel job {verdict.job}, {blamed}, resubmit it from its newest verified checkpoint"


def detect_hung_jobs(
    *,
    progress: ProgressReader,
    ledger: Ledger,
    workflows: Workflows,
    cluster: str,
    rules: HangRules,
    now: datetime,
    remaining_ms: Callable[[], int],
) -> dict[str, int]:
    """A stack in dry run still starts its recoveries: Validate Job Request makes them dry runs."""
    counts: Counter[str] = Counter()
    jobs = progress.running_jobs()
    counts["jobs_reporting"] = len(jobs)
    for job, reports in sorted(jobs.items()):
        if remaining_ms() < STOP_WITH_MS:
            counts["deferred"] += 1
            continue
        for verdict in job_verdicts(cluster, job, reports, rules, now):
            counts[f"{verdict.rule}_verdicts"] += 1
            _act(verdict, ledger, workflows, now, counts)
    return dict(counts)


def _act(verdict: HangVerdict, ledger: Ledger, workflows: Workflows, now: datetime, counts: Counter[str]) -> None:
    enforce = verdict.mode == "enforce"
    if enforce and (verdict.rule != "stall" or not matches(SLURM_JOB_ID_PATTERN, verdict.job)):
        # Not acted on yet, whatever the mode: a slowdown (its job still progresses: the recovery would
        # find it "recovered by itself"), and an EKS job, which reports as namespace/name (its recovery
        # needs its uid and pod-log evidence). Recorded as observed, and counted.
        enforce = False
        counts["observed_not_enforceable"] += 1
    name = hang_execution_name(verdict.job, verdict.reason, verdict.episode_at)
    recorded = RecordedVerdict(
        verdict=verdict,
        action=(f"started job recovery {name}" if enforce else f"observed: would {would_do(verdict)}")[:512],
        execution=name if enforce else None,
    )
    try:
        first = ledger.record_verdict(recorded)
    except (LedgerUnavailable, LedgerError):
        # (the recovery still starts once: its name is the episode's)
        logger.warning("could not record a verdict", extra={"job": verdict.job, "rule": verdict.rule})
        first = True
    if first:
        logger.info("hang verdict", extra={"verdict": verdict.summary, "mode": verdict.mode, "suspects": verdict.suspects})
    if not enforce:
        counts["observed"] += 1
        return
    try:
        request = JobRecoveryRequest(
            cluster=verdict.cluster,
            job_id=verdict.job,
            source="progress",
            # (the incident names the job itself: "job 1001: no progress for 120 s since ...")
            reason=verdict.summary.removeprefix(f"job {verdict.job}: "),
            event_id=name,
            detected_at=now,
            hang=verdict,
        )
    except ValidationError as exc:  # (a job id the workflow cannot carry: counted, never the tick's failure)
        logger.warning("verdict cannot start a recovery", extra={"job": verdict.job, "error": str(exc)[:300]})
        counts["invalid"] += 1
        return
    try:
        started = workflows.start(name, request.model_dump_json(exclude_none=True), workflow="job")
    except StartExecutionFailed as exc:
        logger.warning("could not start a hang recovery; the next tick tries again", extra={"execution": name, "error": str(exc)})
        counts["start_failed"] += 1
        return
    counts["recoveries_started" if started == "started" else "already_started"] += 1
