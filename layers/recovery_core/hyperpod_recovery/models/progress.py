"""Training progress: what a training script reports (through ``hyperpod_recovery.checkpointing.Progress``)
and what the hang and fail-slow detectors read (``domain/hangs``).

One item per job and node in the stack's progress table (``ProgressTable``), overwritten at each
heartbeat: the node's newest step, when it was reached, the recent step interval, and the pause the
script declared (a checkpoint save, an evaluation, a data reshuffle), if any. The training nodes
write it and the pipeline only reads it: it is a *signal*, never proof of which job runs where. The
job recovery acts only on a job that slurmctld says is running and whose own submission opted in,
and counts only the nodes slurmctld allocated to it (docs/decisions.md, 2026-11-27).

Shared by the training library's wheel and the Lambda layer (a contract module).
"""

from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints

from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN, Model, SlurmNodeName, Timestamp

# Where a training script finds the table, and whether it reports at all (the job's opt-in).
PROGRESS_TABLE_ENV = "HYPERPOD_RECOVERY_PROGRESS_TABLE"
PROGRESS_REGION_ENV = "HYPERPOD_RECOVERY_PROGRESS_REGION"
# On EKS a pod knows neither its job's uid nor (by itself) its node: the job's pod template gives them
# through the downward API (docs/progress.md): its namespace (metadata.namespace), its training job's
# name (the label training.kubeflow.org/job-name that Kubeflow's operator puts on the job's pods) and
# its node (spec.nodeName). The job reports as ``namespace/name``; the detector asks the Kubernetes
# API which job object (its uid) that is.
KUBE_NAMESPACE_ENV = "HYPERPOD_RECOVERY_KUBE_NAMESPACE"
KUBE_JOB_ENV = "HYPERPOD_RECOVERY_KUBE_JOB"
NODE_NAME_ENV = "HYPERPOD_RECOVERY_NODE_NAME"
# How often the reporter writes, at most and at least (it writes even when nothing moved: the
# heartbeat proves the reporter itself is alive).
HEARTBEAT_SECONDS = 30
# While the job steps, a newer step is written at most this long after it (a hang then shows within
# seconds, not a heartbeat later: Detect Hung Jobs reads every few seconds, docs/progress.md).
PROGRESS_WRITE_SECONDS = 5
# With no newer step, it writes (the same step, a new heartbeat) when its last write is this old: a
# write whose heartbeat is past its step by more than PROGRESS_WRITE_SECONDS (its own clock) shows
# the job still; a write lost or late shows nothing (domain/hangs/observed.py).
PROGRESS_IDLE_WRITE_SECONDS = 10
# An item expires a day after its last heartbeat (DynamoDB TTL: the table never grows with history).
PROGRESS_TTL = timedelta(days=1)
# The longest a declared pause may last before it counts as a stall anyway (a checkpoint save that
# hangs on S3 is a hang too); the script may declare a shorter or longer bound, up to a day.
DEFAULT_PAUSE_LIMIT_SECONDS = 2 * 3600
MAX_PAUSE_LIMIT_SECONDS = 24 * 3600
# The step intervals the reporter keeps to summarize (median, baseline).
RECENT_INTERVALS = 20

PauseKind = Literal["checkpoint", "evaluation", "data", "other"]
# A Slurm job id, or an EKS job's namespace/name (its uid is not in the pod's environment).
KUBE_JOB_KEY_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
ProgressJobKey = Annotated[str, StringConstraints(pattern=rf"{SLURM_JOB_ID_PATTERN}|{KUBE_JOB_KEY_PATTERN}")]


def kube_job_key(key: str) -> tuple[str, str] | None:
    """An EKS job's report key as (namespace, name); None for a Slurm job id."""
    namespace, slash, name = key.partition("/")
    return (namespace, name) if slash else None


# The item: its keys, the report as one JSON string, and the TTL attribute.
REPORT_ATTRIBUTE = "report"


def progress_key(job: str, node: str) -> dict[str, str]:
    """The item's primary key: every node of a job under one partition key (one Query per job)."""
    return {"pk": f"JOB#{job}", "sk": f"NODE#{node}"}


def progress_item(report: "ProgressReport") -> dict[str, dict[str, str]]:
    """The DynamoDB item (low-level attribute values) a reporter writes for ``report``."""
    key = progress_key(report.job, report.node)
    expires = int((report.heartbeat_at + PROGRESS_TTL).timestamp())
    return {
        "pk": {"S": key["pk"]},
        "sk": {"S": key["sk"]},
        REPORT_ATTRIBUTE: {"S": report.model_dump_json(exclude_none=True)},
        "expires_at": {"N": str(expires)},
    }


class Pause(Model):
    """A pause the script declared: no step is expected until ``since + limit_seconds``."""

    model_config = ConfigDict(extra="forbid")
    kind: PauseKind
    since: Timestamp
    limit_seconds: int = Field(ge=1, le=MAX_PAUSE_LIMIT_SECONDS)

    def ends_by(self) -> datetime:
        return self.since + timedelta(seconds=self.limit_seconds)


class ProgressReport(Model):
    """One node's newest progress in one job (the item, less its keys and TTL)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    job: ProgressJobKey
    node: SlurmNodeName
    # Ranks on this node (one of them, local rank 0, reports for the node: a synchronous job's ranks step together).
    ranks: int = Field(default=1, ge=1, le=64)
    step: int = Field(ge=0)
    # When this node reached ``step`` (the reporting host's clock: EC2 keeps it within milliseconds
    # of UTC with the Amazon Time Sync Service).
    step_at: Timestamp
    heartbeat_at: Timestamp
    started_at: Timestamp
    # Steps between reports are not all sent: how many intervals the medians below summarize.
    intervals_seen: int = Field(default=0, ge=0)
    # Median seconds per step over the last RECENT_INTERVALS steps, and over the first window after
    # warm-up (the job's own baseline); None until there are enough steps.
    step_seconds: float | None = Field(default=None, ge=0, le=86_400)
    baseline_step_seconds: float | None = Field(default=None, ge=0, le=86_400)
    # Median seconds per step this node spent waiting on the others (in collectives), when the
    # script measures it: the slowest node waits least ("last to arrive").
    wait_seconds: float | None = Field(default=None, ge=0, le=86_400)
    pause: Pause | None = None
    # When this node last came back from a declared pause: the step clock restarts there (a
    # 20-minute checkpoint save is not 20 minutes without progress).
    pause_ended_at: Timestamp | None = None
    # The script ended cleanly (the reporter's last write): not a hang.
    ended: bool = False
