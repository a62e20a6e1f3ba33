"""The fleet drill's plan: the fleet (nodes, spares, job mix, checkpointing) and the scenario it
makes of a failure trace; and a failure as a job felt it (what the runner records, the report reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sandbox.fleet.trace import Failure, Precursor, Trace
from sandbox.scenario import Scenario

WORKERS = "workers"
CONTROLLER_GROUP = {"name": "controller", "type": "Controller", "count": 1, "instance_type": "ml.m5.2xlarge"}
CHECKPOINT_BUCKET = "fleet-checkpoints"


@dataclass(frozen=True)
class JobMix:
    count: int
    nodes_each: int

    @classmethod
    def parse(cls, text: str, nodes: int) -> JobMix:
        """ "8x256" (8 jobs of 256 nodes), or "1" (one job on every node)."""
        count, _, size = text.lower().partition("x")
        mix = cls(int(count), int(size) if size else nodes // int(count))
        if mix.count < 1 or mix.nodes_each < 1 or mix.count * mix.nodes_each > nodes:
            raise ValueError(f"job mix {text!r} does not fit {nodes} nodes")
        return mix


@dataclass(frozen=True)
class FleetPlan:
    nodes: int
    days: float
    mix: JobMix
    spares: int = 0
    checkpoint_interval_seconds: float = 1800.0
    checkpoint_cost_seconds: float = 30.0  # ASSUMPTION: a blocking save's stall (Meta: O(10 s) with async writes)
    restart_seconds: float = 300.0  # ASSUMPTION: a copy's start to its first step (NCCL init, checkpoint load; Meta's u0 5-20 min)
    steps_per_checkpoint: int = 100
    agent_seconds: float = 2.0
    cluster: str = "llm-train"
    orchestrator: Literal["slurm", "eks"] = "slurm"
    job_kind: str = "default"  # sandbox/fleet/settings.py JOB_KINDS: what sets the two figures above
    # Issue 50: each precursor of the trace is delivered as an at-risk signal in enforce mode (a planned
    # swap), or not at all; the jobs may shrink (their batch scripts' node range) by up to ``shrink_nodes``.
    planned_swaps: bool = False
    shrink_nodes: int = 0
    at_risk_signals: str = ""  # template.yaml AtRiskSignals for the run ("*=enforce:<chance>:<horizon>")

    @property
    def step_seconds(self) -> float:
        return self.checkpoint_interval_seconds / self.steps_per_checkpoint

    def job_ranges(self) -> list[tuple[str, int, int]]:
        return [(str(1001 + k), k * self.mix.nodes_each, (k + 1) * self.mix.nodes_each - 1) for k in range(self.mix.count)]

    def scenario(self, trace: Trace) -> Scenario:
        jobs = [
            {
                "id": job_id,
                "name": f"pretrain-{k}",
                "nodes": f"{WORKERS}:{first}-{last}",
                "checkpoint_uri": f"s3://{CHECKPOINT_BUCKET}/pretrain-{k}",
                "checkpoints": [{"step": self.steps_per_checkpoint, "shards": 1}],
                # (its submission opted in to progress monitoring: the hang detector may act on it)
                "progress": {"step_seconds": self.step_seconds, "step": self.steps_per_checkpoint, "reports_waits": True},
                # (on EKS: a PyTorchJob that opted in to our recovery, its replicas never restarted by Kubeflow)
                **({"kubernetes": {"kind": "PyTorchJob", "namespace": "training", "recover": True}} if self.orchestrator == "eks" else {}),
                **self._elastic(last - first + 1),
            }
            for k, (job_id, first, last) in enumerate(self.job_ranges())
        ]
        faults = [self.fault(failure) for failure in trace.failures]
        if self.planned_swaps:
            faults = sorted([*faults, *(self.signal(p) for p in trace.precursors)], key=lambda fault: fault["at"])
        return Scenario.model_validate(
            {
                "name": f"fleet-{self.nodes}n-{self.days:g}d".replace(".", "-"),
                "description": f"fleet drill: {self.nodes} nodes ({self.spares} spare), {self.days:g} days, "
                f"jobs {self.mix.count}x{self.mix.nodes_each}, {len(trace.failures)} failures (seed {trace.spec.seed})",
                "cluster": {
                    "name": self.cluster,
                    "orchestrator": self.orchestrator,
                    "instance_groups": [
                        # (an EKS cluster has no controller node: its control plane is EKS's)
                        *([] if self.orchestrator == "eks" else [CONTROLLER_GROUP]),
                        {"name": WORKERS, "type": "Compute", "count": self.nodes + self.spares},
                    ],
                },
                "jobs": jobs,
                # (a drill needs a fault: a trace without one gets another cluster's event, which the stack ignores)
                "faults": faults or [{"at": 1.0, "kind": "node_health", "node": f"{WORKERS}:0", "foreign_cluster": True}],
                "behaviour": {"agent_seconds": self.agent_seconds},
            }
        )

    def _elastic(self, size: int) -> dict[str, Any]:
        """A job that may shrink by up to ``shrink_nodes``: its batch script's node range (Slurm), its annotation (EKS)."""
        if self.shrink_nodes <= 0 or size <= 1:
            return {}
        low = max(1, size - self.shrink_nodes)
        if self.orchestrator == "eks":
            return {"kubernetes": {"kind": "PyTorchJob", "namespace": "training", "recover": True, "elastic": f"min={low}"}}
        return {"node_range": f"{low}-{size}"}

    def signal(self, precursor: Precursor) -> dict[str, Any]:
        """A precursor as the scenario's at-risk signal on its node (sandbox/at_risk.py delivers it by its real path)."""
        return {
            "at": precursor.at,
            "kind": "at_risk",
            "node": f"{WORKERS}:{precursor.node}",
            "signal": precursor.signal,
            "via": "alertmanager",
        }

    def job_of(self, node: int) -> str:
        """The job a job-only fault drawn on ``node`` hits: the one that runs there (a spare's: one in turn)."""
        ranges = self.job_ranges()
        for job_id, first, last in ranges:
            if first <= node <= last:
                return job_id
        return ranges[node % len(ranges)][0]

    def fault(self, failure: Failure) -> dict[str, Any]:
        at = failure.at + failure.detect_seconds
        if failure.remedy == "hang":
            # (its node is chosen when it happens: the job's nodes then, FleetRunner._hang_onset)
            return {"at": at, "kind": "hang", "job": self.job_of(failure.nodes[0])}
        if failure.remedy == "job":
            return {"at": at, "kind": "job_failed", "job": self.job_of(failure.nodes[0]), "job_state": "FAILED", "exit_code": 1}
        return {
            "at": at,
            "kind": "node_health",
            "nodes": [f"{WORKERS}:{n}" for n in failure.nodes],
            "reason": f"HyperPod Health Monitoring Agent (HMA) has detected fault type {failure.hmm_fault} on this node and is unhealthy.",
        }


@dataclass
class Hit:
    """A failure as a job felt it: when it stopped training, its last checkpoint before, which copy."""

    failure: Failure
    root: str
    copy: str
    at: float
    last_checkpoint_at: float
