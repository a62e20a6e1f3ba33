"""The "job failed" event the controller agent puts on EventBridge when a Slurm job ends badly.

Sent by ``hyperpod-recovery-agent job-ended`` (run by slurmctld as EpilogSlurmctld), once per job
end, for jobs that end FAILED or NODE_FAIL, and TIMEOUT when the agent is configured to. The
JobRecovery workflow consumes it; events/agent/job-failed.json is a sample.
"""

from typing import Literal

from pydantic import ConfigDict, Field

from hyperpod_recovery.models.common import CLUSTER_NAME_PATTERN, JobId, Model, SlurmNodeName, StrictFlag, Timestamp
from hyperpod_recovery.models.kubernetes import KubeJobRef

JOB_EVENT_SOURCE = "hyperpod-recovery.agent"
JOB_FAILED_DETAIL_TYPE = "HyperPod Recovery Slurm Job Failed"
FAILED_STATES = ("FAILED", "NODE_FAIL", "TIMEOUT")
JobEndState = Literal["FAILED", "NODE_FAIL", "TIMEOUT"]
# NVIDIA's resiliency extension (nvidia-resiliency-ext): ft_launcher exits with
# --ft-no-restart-exit-code, 93 by default, when it decided the job must not be requeued
# ("exit code 93 means NVRx decided, do not requeue"; its fault tolerance usage guide,
# https://nvidia.github.io/nvidia-resiliency-ext/). A job that ends with it is never restarted by us.
DO_NOT_REQUEUE_EXIT_CODE = 93


# A job-failed event's detail is at most this many bytes of compact JSON (its node names left out
# when they would make it larger: ``fitted``). The JobRecovery it starts carries the failure in every
# state, which Step Functions bounds at 256 KiB (262,144 B), beside the rest of the state: at its
# largest, a large job's Check Job Nodes answer (256 unhealthy nodes) and a classification naming 256
# faulty nodes with its node request, 118 KB together, and the other fields (STATE_REST_BUDGET; both
# checked by tests/contract/test_large_job_event.py, the rest measured on a 1,100-node job by
# tests/sandbox/test_fleet_drill.py). EventBridge's 256 KB per entry holds it too (json.dumps adds a
# byte per name). HyperPod's Slurm node names (ip-10-1-2-3, at most 18 characters) fit for a job of
# about 5,700 nodes; an EKS job's pods' nodes (hyperpod-i-..., 28) for about 3,800.
FAILURE_DETAIL_BUDGET = 120_000
STATE_REST_BUDGET = 262_144 - FAILURE_DETAIL_BUDGET - 2_048  # (less the request's own fields)


class JobFailedDetail(Model):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    cluster_name: str = Field(pattern=CLUSTER_NAME_PATTERN)
    job_id: JobId  # a Slurm job id; on EKS the job object's uid (the poller's events)
    name: str = Field(max_length=256)
    user: str | None = Field(default=None, max_length=64)
    partition: str | None = Field(default=None, max_length=128)
    nodes: list[SlurmNodeName] = Field(max_length=10_000)
    state: JobEndState
    # Slurm's reason for the end (NonZeroExitCode, NodeDown, TimeLimit, RaisedSignal:9(Killed)...).
    reason: str = Field(default="", max_length=256)
    exit_code: int = Field(ge=0, le=255)
    signal: int = Field(default=0, ge=0, le=255)
    restart_count: int = Field(default=0, ge=0)
    ended_at: Timestamp
    checkpoint_uri: str | None = Field(default=None, pattern=r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")
    # `srun --auto-resume=1`: HyperPod restarts the job itself; the workflow must not restart it too.
    auto_resume: StrictFlag = False
    # Set when the job was itself our resubmission of an earlier job (crash-loop detection).
    resubmission_of: JobId | None = None
    # Unique per job end: the same job id ends again after a requeue, with a new end time.
    event_key: str = Field(min_length=1, max_length=160)
    # EKS (the job poller): the job object, so that Capture Job Spec reads it by name.
    kube: KubeJobRef | None = Field(default=None, exclude_if=lambda v: v is None)


def fitted(detail: JobFailedDetail) -> JobFailedDetail:
    """The detail, its node names left out when they would make it larger than FAILURE_DETAIL_BUDGET
    (what a JobRecovery's state and an EventBridge entry hold). A job whose names do not fit is still
    reported, never refused for ever; its recovery cannot tell whether one of its nodes failed and asks
    a human, saying so (JobNodesNotCarried). The caller says it did (``names_left_out``)."""
    return detail if len(detail.model_dump_json().encode()) <= FAILURE_DETAIL_BUDGET else detail.model_copy(update={"nodes": []})


def names_left_out(before: JobFailedDetail, after: JobFailedDetail) -> int:
    return len(before.nodes) - len(after.nodes)
