"""The stack's functions a drill invokes as AWS would (their logical ids in template.yaml), and how
their event source mappings batch."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox.scenario import FaultSpec

ESM_BATCH_SIZE = 100  # template.yaml IntakeFunction BatchSize
SWEEP_FUNCTION = "SweepEndedExecutionsFunction"  # its schedule (template.yaml) is the sweep's period
POLLER_FUNCTION = "FindFailedJobsFunction"  # EKS: its schedule paces a failure's repeated polls
HANG_DETECTOR_FUNCTION = "DetectHungJobsFunction"  # its schedule paces the detector's ticks
HANG_IMPORTER_FUNCTION = "ImportHyperPodHangsFunction"  # HyperPod's Slurm hang events, by subscription


def hyperpod_hang_log_group(cluster: str) -> str:
    """The cluster's log group HyperPod's hang agent writes to (/aws/sagemaker/Clusters/<name>/<id>;
    the double's cluster id is fixed)."""
    return f"/aws/sagemaker/Clusters/{cluster}/a1b2c3d4e5f6"


RECONCILE_BATCH_SIZE = 10  # template.yaml ReconcileExecutionFunction BatchSize
CLUSTER_EVENT_BATCH_SIZE = 10  # template.yaml NoticeClusterEventFunction BatchSize


@dataclass
class Delivery:
    """What the event source mapping hands the intake Lambda at ``at``."""

    at: float
    faults: list[FaultSpec]
    agent_back: bool = False  # the controller agent comes back and works through its backlog
    poll: bool = False  # EKS: a tick of the job poller (a failure's repeated poll, or the next tick after a deferring one)
    detect: bool = False  # a tick of Detect Hung Jobs (the progress the jobs report, judged)
    detect_read: bool = False  # the running Detect Hung Jobs invocation's next read within its minute
