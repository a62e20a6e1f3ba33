"""Every CloudWatch metric the pipeline emits (namespace HyperPodRecovery, dimensions cluster and
service), in one place: the handlers emit these names and template.yaml's dashboard and alarms
read them. tests/contract/test_template.py fails on a dashboard or alarm metric not listed here."""

from __future__ import annotations

# Counts, per workflow execution.
RECOVERIES_STARTED = "RecoveriesStarted"
JOB_RECOVERIES_STARTED = "JobRecoveriesStarted"
NODES_REPLACE_INITIATED = "NodesReplaceInitiated"
NODES_REPLACE_FAILED = "NodesReplaceFailed"
BREAKER_TRIPPED = "BreakerTripped"

# One per NodeRecovery outcome (Record Outcome) and per JobRecovery outcome (Record Job Outcome).
NODE_OUTCOMES = {
    "recovered": "Recovered",
    "escalated": "Escalated",
    "duplicate": "Duplicates",
    "rejected": "Rejected",
    "capped": "Capped",
    "dry_run": "DryRuns",
    "stale": "Stale",
}
JOB_OUTCOMES = {
    "recovered": "JobsRecovered",
    "escalated": "JobsEscalated",
    "duplicate": "JobsLeftAlone",
    "rejected": "JobRequestsRejected",
    "capped": "JobsCapped",
    "dry_run": "JobDryRuns",
    "stale": "JobsStale",
    "recovered_by_itself": "JobHangsCleared",
}
# Executions that ended without recording an outcome (stopped, timed out, crashed), recorded by
# Reconcile Execution: every one of them is an incident a human was told about.
# Notice Cluster Event: recoveries whose wait for their replaced nodes a Cluster Event cut short.
REJOIN_WAITS_WOKEN = "RejoinWaitsWoken"

RECONCILED = {
    "aborted": "ExecutionsAborted",
    "failed": "ExecutionsFailedUnrecorded",
}
# Sweep Ended Executions, each sweep: ends it recorded (their status-change event never came, or not
# yet) and whether it finished (1) or must go on next time (0). The sweep alarm counts completions.
ENDS_SWEPT = {
    "recorded": "EndsRecordedBySweep",
    "completed": "EndSweepsCompleted",
}

# Phase durations in seconds (domain/record/durations.py), emitted by the Record steps; never for dry runs.
DETECT_TO_CORDON = "DetectToCordonSeconds"
REPLACE_TO_REJOIN = "ReplaceToRejoinSeconds"
REJOIN_TO_RESUBMIT = "RejoinToResubmitSeconds"  # jobs resubmitted after the rejoin (ResumePolicy after_rejoin)
DETECT_TO_RESUBMIT = "DetectToResubmitSeconds"  # fault detected -> first job resubmitted (at once, or after the rejoin)
TIME_TO_RECOVER = "TimeToRecoverSeconds"  # MTTR: fault detected -> outcome recorded, recovered incidents
TIME_TO_ESCALATE = "TimeToEscalateSeconds"  # fault detected -> a human paged, escalated incidents
JOB_TIME_TO_RECOVER = "JobTimeToRecoverSeconds"
JOB_TIME_TO_ESCALATE = "JobTimeToEscalateSeconds"

# Intake (one set per SQS batch). Its "started" counts only what events started; RecoveriesStarted
# and JobRecoveriesStarted (from the workflows) also count drills and manual starts.
INTAKE_COUNTS = {
    "received": "IntakeEvents",
    "dead_lettered": "IntakeDeadLettered",
    "foreign": "IntakeForeignCluster",
    "ignored": "IntakeIgnored",
    "started": "ExecutionsStarted",
    "jobs_started": "JobExecutionsStarted",
    "duplicates": "IntakeDuplicates",
}

# Gauges from Report Safety State (every 5 minutes): the breaker alarm stays red while it is open.
BREAKER_OPEN = "BreakerOpen"
NODES_IN_RECOVERY = "NodesInRecovery"

DURATIONS = (
    DETECT_TO_CORDON,
    REPLACE_TO_REJOIN,
    REJOIN_TO_RESUBMIT,
    DETECT_TO_RESUBMIT,
    TIME_TO_RECOVER,
    TIME_TO_ESCALATE,
    JOB_TIME_TO_RECOVER,
    JOB_TIME_TO_ESCALATE,
)
# Detect Hung Jobs (every minute): what one tick saw and did, by the key of its counts.
HANG_DETECTION = {
    "jobs_reporting": "JobsReportingProgress",
    "stall_verdicts": "StallVerdicts",
    "slow_verdicts": "SlowVerdicts",
    "recoveries_started": "HangRecoveriesStarted",
    "observed": "HangVerdictsObserved",
    "start_failed": "HangRecoveriesStartFailed",
    "deferred": "HangJobsDeferred",
    # (a stall another incident already ends: it claimed the job's resubmission after its last progress)
    "left_to_another_incident": "HangVerdictsLeftToIncidents",
    # (stalls past the tick's bound on starts, left to the next tick; a snapshot of which
    # nodes each job runs on missing or stale, its rows judged unverified; stalls damped)
    "starts_deferred": "HangStartsDeferred",
    "job_nodes_unavailable": "HangJobNodesUnavailable",
    "damped": "HangStallsDamped",
}

# HyperPod's own hang detectors' verdicts (Import HyperPod Hangs, Find Failed Jobs): each kept verdict's
# one informational notice, sent, or not sent (no channel took it; the verdict is kept all the same).
VERDICT_NOTICES = {
    "verdict_noticed": "VerdictNoticesSent",
    "verdict_notice_failed": "VerdictNoticesFailed",
}

# A notification channel that failed (adapters/notifier.py): one count per notification it did not
# take, emitted only when it fails; the other channels were sent. UndeliveredNotificationsAlarm adds them up.
NOTIFICATION_FAILURES = {
    "topic": "TopicNotificationsFailed",
    "chat": "ChatNotificationsFailed",
    "pager": "PagesFailed",
}

# EKS: the job poller (Find Failed Jobs), each poll: failed jobs it started a JobRecovery for, those
# too old to start, those it could not read, starts that failed (tried again at the next poll), and
# failures it left for the next tick when its time ran low (a storm of failures).
FAILED_JOBS_POLLED = {
    "started": "FailedJobsStarted",
    "stale": "FailedJobsStale",
    "invalid": "FailedJobsUnreadable",
    "start_failed": "FailedJobsStartFailed",
    "deferred": "FailedJobsDeferred",
}

# At Risk (steps/at_risk.py): verdicts kept, messages refused, planned swaps started, outcomes settled.
AT_RISK = {
    "recorded": "AtRiskVerdictsRecorded",
    "refused": "AtRiskMessagesRefused",
    "swaps_started": "AtRiskSwapsStarted",
    "settled": "AtRiskOutcomesSettled",
}

ALL = frozenset(
    {
        RECOVERIES_STARTED,
        JOB_RECOVERIES_STARTED,
        NODES_REPLACE_INITIATED,
        NODES_REPLACE_FAILED,
        BREAKER_TRIPPED,
        BREAKER_OPEN,
        NODES_IN_RECOVERY,
        *NODE_OUTCOMES.values(),
        *JOB_OUTCOMES.values(),
        *RECONCILED.values(),
        *ENDS_SWEPT.values(),
        REJOIN_WAITS_WOKEN,
        *INTAKE_COUNTS.values(),
        *DURATIONS,
        *HANG_DETECTION.values(),
        *VERDICT_NOTICES.values(),
        *NOTIFICATION_FAILURES.values(),
        *FAILED_JOBS_POLLED.values(),
        *AT_RISK.values(),
    }
)
