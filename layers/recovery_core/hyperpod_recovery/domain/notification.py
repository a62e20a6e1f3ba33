"""The message a human reads at 2 a.m.: subject says cluster, outcome and nodes; the body says what
failed, what was done (with times), what happens next or what the human must do, and where the
execution is. Plain text: SNS e-mail, Slack and PagerDuty integrations all show it as-is.

NEXT_STEPS is the "what to do" of docs/runbook.md's escalation table, said once here;
tests/contract/test_observability.py keeps the two in step.
"""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery import errors
from hyperpod_recovery.domain.durations import offset_text
from hyperpod_recovery.models.commands import AGENT_HEARTBEAT_TIMEOUT
from hyperpod_recovery.models.records import IncidentRecord, TimelineEntry
from hyperpod_recovery.vocabulary import Outcome, error_name

SUBJECT_LIMIT = 100  # SNS: at most 100 printable ASCII characters
FAULT_EVENTS = ("fault detected", "job failed", "recovery requested")

HEADLINES: dict[Outcome, str] = {
    "recovered": "RECOVERED - no action needed.",
    "dry_run": "DRY RUN - nothing was changed.",
    "duplicate": "ALREADY HANDLED - no action needed.",
    "rejected": "REJECTED - nothing was changed.",
    "escalated": "ACTION NEEDED - the pipeline stopped and a human must decide.",
    "capped": "ACTION NEEDED - a safety limit stopped this recovery; nothing was changed.",
    "stale": "ACTION NEEDED - the signal was too old (or from the future) to act on; nothing was changed.",
    "aborted": "ACTION NEEDED - the recovery was stopped before it finished; what it held was released.",
    "failed": "ACTION NEEDED - the recovery died before it finished; what it held was released.",
}

# What the human does, per error name (the ASL error = our exception class name).
_NEXT_STEP_OF: dict[type[errors.RecoveryError], str] = {
    errors.ProtectedNodeUnhealthy: (
        "A controller or login node is unhealthy; the pipeline never replaces those. Handle it yourself "
        "(HyperPod cannot replace a Slurm controller). Worker nodes in the same incident were recovered."
    ),
    errors.ReplaceNotInitiated: (
        "HyperPod did not start a replacement (the cause gives its error code). Fix that (capacity, quota, instance "
        "state), then replace the node by hand or start a recovery with "
        "`hyperpod-recovery drill --stack <stack> --node <id> --live --yes`. The node stays drained."
    ),
    errors.ReplacementUnhealthy: (
        "A replacement came back but failed its health check and was replaced once more, and that one failed too; or it "
        "was not replaced again (the check could not run, every replacement failed it, the second could not start, or the "
        "breaker was open: the cause says which, with the checks' output). The node stays drained and no job uses it. "
        "Two sick replacements in a row point at the check or the capacity, not one instance: run the check on the "
        "node by hand (`scontrol show node <node>`, `sinfo -R`), then replace it again "
        "(`aws sagemaker batch-replace-cluster-nodes`) or, if the check was wrong, resume it "
        "(`scontrol update nodename=<node> state=resume`). Jobs resubmitted at once run on other nodes meanwhile."
    ),
    errors.RejoinDeadlineExceeded: (
        "The replacement did not come back before the deadline, or could not be told apart from other new nodes (the "
        "cause lists the new nodes seen in its instance group). Check the node in the HyperPod console "
        "(ListClusterNodes) and the cluster's events; jobs were not resubmitted. When the node is back, resume it "
        "(`scontrol update nodename=<node> state=resume`) and resubmit the job from `hyperpod-recovery checkpoint latest`."
    ),
    errors.NoVerifiedCheckpoint: (
        "The job has no checkpoint that verifies complete, so it was not resubmitted. Run "
        "`hyperpod-recovery checkpoint latest s3://... --json` to see why each step was rejected, then restart the job "
        "yourself (its spec is in the incident record)."
    ),
    errors.CrashLoopDetected: (
        "The job failed again without its checkpoint moving forward. Fix the job (code, data, or a poisoned checkpoint: "
        "`hyperpod-recovery checkpoint verify`), then resubmit it."
    ),
    errors.RestartBudgetExhausted: (
        "The job used its restart budget on application failures. Read its logs; resubmit it by hand, or raise "
        "JobRestartBudget if the failures are expected."
    ),
    errors.NodeRecoveryEscalated: (
        "The recovery of the job's nodes escalated; its own notification says why. Handle that first, then resubmit the job."
    ),
    errors.NodeRecoveryNotFinished: (
        "The incident holding the job's nodes did not finish in time. Look at it; resubmit the job when its nodes are back."
    ),
    errors.JobNotResubmitted: (
        "The job recovery ended without resubmitting the job, and nobody else restarted it. Read the incident's "
        "timeline for the last step it reached; resubmit the job by hand."
    ),
    errors.JobSpecUnavailable: "slurmctld no longer knows the job, so there is no batch script to resubmit. Resubmit it yourself.",
    errors.RepeatOffender: (
        "This host was recovered too often this week and was not replaced again: replacing it would loop. Look at its "
        "hardware history (rack, cable, switch port); release its lock when handled."
    ),
    errors.ClusterCapReached: (
        "Too much of the cluster is in recovery at once. Wait for the running recoveries, or treat this as a wider "
        "outage (rack, network, AZ) and recover by hand."
    ),
    errors.CircuitBreakerOpen: (
        "Automation is paused for this cluster after too many recoveries or failures. Find out why, then "
        "`hyperpod-recovery breaker reset --cluster <cluster> --table <ledger table> --reason '...'` re-enables it."
    ),
    errors.UnsupportedOrchestrator: "This release recovers Slurm-orchestrated clusters only; recover this node by hand.",
    errors.StaleEvent: (
        "The event was replayed, redriven or held in a backlog (or a clock is wrong). Check whether the node is "
        "still unhealthy (HyperPod console, `sinfo -R`); if it is, start a recovery by hand with "
        "`hyperpod-recovery drill --stack <stack> --node <id> --live --yes`."
    ),
    errors.ResubmitFailed: (
        "Some jobs were resubmitted and some were not: the summary names both. Do not restart the resubmitted ones again; "
        "resubmit the others by hand from `hyperpod-recovery checkpoint latest`."
    ),
    errors.TooManyJobs: (
        "More jobs ran on these nodes than one incident carries; the ones past the limit were not resubmitted. "
        "`squeue -w <node>` lists them; restart them by hand from `hyperpod-recovery checkpoint latest`."
    ),
    errors.NodeRoleUnknown: (
        "The pipeline cannot tell controller and login nodes from compute nodes on this cluster. Set the stack's "
        "ControllerGroups and LoginGroups parameters to match DescribeCluster, then start a recovery by hand."
    ),
    errors.ExecutionAborted: (
        "Someone stopped the recovery (StopExecution). Its cap places and job claims were released; check the node and "
        "the jobs in the timeline, and finish by hand what the recovery had started."
    ),
    errors.ExecutionFailed: (
        "The recovery died (an error past its retries, a timeout, a state too large). Its cap places and job claims were "
        "released; the timeline shows how far it got. Finish by hand, and report the error."
    ),
}
# Step Functions' own error names (a task's TimeoutSeconds), which no class of ours stands for.
_NEXT_STEP_OF_STATES_ERROR = {
    AGENT_HEARTBEAT_TIMEOUT: (
        "The controller agent on the head node sent no heartbeat for a minute: it is down, stuck, or cannot reach "
        "Step Functions. Check it: `systemctl status hyperpod-recovery-agent` and `hyperpod-recovery-agent check`; the "
        "CommandQueueBacklog alarm says whether commands are piling up."
    ),
    "States.Timeout": (
        "The controller agent on the head node did not answer in time. Check it: `systemctl status "
        "hyperpod-recovery-agent` and `hyperpod-recovery-agent check`; the CommandQueueBacklog alarm says whether "
        "commands are piling up."
    ),
}
NEXT_STEPS = {error_name(error): text for error, text in _NEXT_STEP_OF.items()} | _NEXT_STEP_OF_STATES_ERROR
GENERIC_NEXT_STEP = "Read the error and the timeline below; docs/runbook.md (Escalations) says what each error means."


def _clock(moment: datetime) -> str:
    return moment.strftime("%H:%M:%S")


def _since(start: datetime | None, moment: datetime) -> str:
    return "" if start is None else "+" + offset_text((moment - start).total_seconds())


def duration_text(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def subject(record: IncidentRecord) -> str:
    """``[hyperpod-recovery] <cluster>: <OUTCOME>[ error][ job N] <nodes>``, cut to 100 characters."""
    names = record.hostnames or record.nodes
    nodes = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
    outcome = record.outcome.upper() if record.outcome in ("escalated", "capped") else record.outcome
    error = f" {record.error}" if record.error and record.outcome in ("escalated", "capped") else ""
    job = f" job {record.job_id}" if record.job_id else ""
    text = f"[hyperpod-recovery] {record.cluster}: {outcome}{error}{job} {nodes}".rstrip()
    # SNS refuses a subject with characters outside printable ASCII.
    text = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)
    return text if len(text) <= SUBJECT_LIMIT else text[: SUBJECT_LIMIT - 3] + "..."


def next_step(record: IncidentRecord, hold_until: datetime | None) -> str:
    if record.outcome == "recovered":
        restarted = [
            f"job {r.job_name} ({r.job}) runs again as {r.new_job_name} ({r.new_job_id}) from step {r.checkpoint_step}"
            if r.new_job_name
            else f"job {r.job} runs again as job {r.new_job_id} from step {r.checkpoint_step}"
            for r in record.resubmissions
        ]
        if restarted:
            return f"Nothing to do: {'; '.join(restarted)}. Check that it passes that step at its next checkpoint."
        return "Nothing to do: the node(s) are back in service."
    if record.outcome == "dry_run":
        return "Nothing to do: this was a drill. The steps above are what a real run would have done."
    if record.outcome == "duplicate":
        return "Nothing to do: someone else is already handling this (see the summary)."
    if record.outcome == "rejected":
        return "Nothing to do unless this was unexpected: the cause says what was wrong with the event or request."
    if record.outcome in ("aborted", "failed") and (record.error or "") not in NEXT_STEPS:
        ended = errors.ExecutionAborted if record.outcome == "aborted" else errors.ExecutionFailed
        record = record.model_copy(update={"error": error_name(ended)})
    advice = NEXT_STEPS.get(record.error or "", GENERIC_NEXT_STEP).replace("<cluster>", record.cluster)
    if record.hostnames:  # a command the human can paste: Slurm takes a comma-separated node list
        advice = advice.replace("<node>", ",".join(record.hostnames))
    if hold_until is not None:
        advice += f" The nodes stay locked until {hold_until.strftime('%Y-%m-%d %H:%M')} UTC so the automation leaves them alone."
    return advice


def _line(entry: TimelineEntry, start: datetime | None) -> str:
    return f"  {_clock(entry.at)}  {_since(start, entry.at):>8}  {entry.event}: {entry.detail}"


def notification(record: IncidentRecord, execution_url: str, *, hold_until: datetime | None = None) -> tuple[str, str]:
    """(subject, plain-text body)."""
    start = record.detected_at
    failed = [e for e in record.timeline if e.event in FAULT_EVENTS]
    done = [e for e in record.timeline if e.event not in FAULT_EVENTS and not e.event.startswith("outcome:")]
    lines = [HEADLINES[record.outcome], record.summary, ""]
    lines.append("WHAT FAILED")
    lines += [f"  {_clock(e.at)}  {e.detail}" for e in failed] or [f"  {', '.join(record.hostnames or record.nodes) or 'nothing named'}"]
    lines += ["", "WHAT WAS DONE (UTC, time since the fault)"]
    lines += [_line(e, start) for e in done] or ["  nothing"]
    lines += ["", "WHAT HAPPENS NEXT", f"  {next_step(record, hold_until)}", ""]
    if record.error:
        lines += [f"Error: {record.error}", f"Cause: {record.cause or '-'}", ""]
    if start is not None:
        lines.append(f"Fault to this message: {duration_text((record.recorded_at - start).total_seconds())}.")
    lines += [f"Incident: {record.incident_id} ({record.workflow} recovery, cluster {record.cluster})", f"Execution: {execution_url}"]
    return subject(record), "\n".join(lines)
