"""The drill's jobs as the stack's scheduled functions see them: their progress reports written, Detect
Hung Jobs' and Find Failed Jobs' ticks, and the first fault that hit each job."""

from __future__ import annotations

import json
from typing import Any

from sandbox.runner.functions import (
    HANG_DETECTOR_FUNCTION,
    POLLER_FUNCTION,
)
from sandbox.slurm import SimulatedController, SlurmJob


class Jobs:
    """Mixed into DrillRunner: the jobs' progress, the scheduled ticks that read it, the faults that hit them."""

    def _first_hit(self, job: SlurmJob) -> float | None:
        """The first fault (virtual seconds) on one of ``job``'s nodes, or on the job itself, after it started."""
        started = (job.started_at - self.epoch).total_seconds() if job.started_at is not None else 0.0
        hits = [
            fault.at
            for fault in self.scenario.faults
            if fault.at >= started
            and (
                fault.job == job.job_id
                or (
                    fault.kind not in ("abort", "at_risk")  # (a precursor stops nothing)
                    and any(self.double.current(ref, t=fault.at).hostname.split(".", 1)[0] in job.nodes for ref in fault.node_refs)
                )
            )
        ]
        return min(hits, default=None)

    def _first_hit_on_object(self, obj: dict[str, Any]) -> float | None:
        """EKS: the first fault (virtual seconds) on a node one of the job object's pods ran on."""
        assert self.eks is not None
        uid = obj["metadata"]["uid"]
        with self.eks.lock:
            nodes = {
                str(pod["spec"].get("nodeName"))
                for pod in self.eks.kube.pods.values()
                if any(o.get("uid") == uid for o in pod["metadata"].get("ownerReferences") or []) and pod["spec"].get("nodeName")
            }
        hits = [
            fault.at
            for fault in self.scenario.faults
            if fault.kind not in ("abort", "at_risk") and any(self.eks.node_of(ref, fault.at) in nodes for ref in fault.node_refs)
        ]
        return min(hits, default=None)

    def _write_progress(self, moment: float) -> None:
        """The jobs' reporters' items as of ``moment``, put in the progress table (as the training
        nodes do, every heartbeat)."""
        if self.progress is None or not self.aws.progress_table:
            return
        dynamodb = self.aws.client("dynamodb")
        slurm = self.slurm.slurm

        def running(job_id: str) -> bool:
            if self.eks is not None:
                return self.eks.job_running(next(j for j in self.scenario.jobs if j.id == job_id))
            job = slurm.jobs.get(job_id)
            return job is not None and job.state == "RUNNING"

        for item in self.progress.items(moment, running):
            dynamodb.put_item(TableName=self.aws.progress_table, Item=item)

    def _detect_hung_jobs(self, moment: float) -> None:
        """One tick of Detect Hung Jobs' schedule, as EventBridge invokes it."""
        self._write_progress(moment)
        if isinstance(self.slurm, SimulatedController):
            self.slurm.report_job_nodes()
        with self.aws.api_calls.counting():
            response = self.aws.client("lambda").invoke(FunctionName=HANG_DETECTOR_FUNCTION, Payload=b"{}")
        self.hang_ticks.append((moment, json.loads(response["Payload"].read())))

    def _poll_failed_jobs(self) -> None:
        """One tick of the EKS job poller's schedule (Find Failed Jobs), as EventBridge Scheduler invokes it."""
        with self.aws.api_calls.counting():
            response = self.aws.client("lambda").invoke(FunctionName=POLLER_FUNCTION, Payload=b"{}")
        answer = json.loads(response["Payload"].read())  # (its counts, or Lambda's error answer)
        self.polls.append(answer)
        self._poll_again = self._poll_again or bool(isinstance(answer, dict) and answer.get("deferred"))
