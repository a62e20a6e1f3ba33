"""Which nodes the orchestrator says each running job runs on now: the membership that decides
whose progress reports count for a job (docs/progress.md, "What is trusted").

Slurm: the controller agent reads slurmctld's running jobs (squeue) and writes one snapshot to the
ledger, the only item its role may write there; EKS: Detect Hung Jobs lists the live pods and keeps
those a job object owns (by owner uid). A job key is the progress table's: a Slurm job id, or an EKS
job's ``namespace/name``.
"""

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from hyperpod_recovery.models.common import Model, Timestamp

# A snapshot older than this says nothing about now (the agent writes one every 30 s).
JOB_NODES_STALE_SECONDS = 180


class JobNodes(Model):
    """One reading of the orchestrator: every running job's nodes, and when they were read."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source: Literal["slurm", "eks"]
    # When the orchestrator was read (the agent's or this function's clock, both ours).
    taken_at: Timestamp
    # job key -> node names (Slurm node names; EKS Kubernetes node names), each list sorted.
    jobs: dict[str, list[str]] = Field(default_factory=dict)
    # Job keys the orchestrator could not tie to one job (an EKS name two job objects share): none
    # of their reports count.
    ambiguous: list[str] = Field(default_factory=list)

    def nodes_of(self, job: str) -> frozenset[str] | None:
        """The job's nodes now, or None when the orchestrator does not run (or cannot tell) it."""
        if job in self.ambiguous:
            return None
        nodes = self.jobs.get(job)
        return frozenset(nodes) if nodes is not None else None

    def fresh(self, now: datetime) -> bool:
        return 0 <= (now - self.taken_at).total_seconds() <= JOB_NODES_STALE_SECONDS
