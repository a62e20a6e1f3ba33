"""The drill's jobs as the stack's scheduled functions see them: their progress reports written, Detect
Hung Jobs' and Find Failed Jobs' ticks, and the first fault that hit each job."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from sandbox.clock import DRIVER, VirtualClock
from sandbox.runner.functions import (
    HANG_DETECTOR_FUNCTION,
    POLLER_FUNCTION,
)
from sandbox.slurm import SimulatedController, SlurmJob

PARK_TIMEOUT_SECONDS = 120.0  # real seconds: a read of the sandbox's tables takes well under one


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

        # One batch of 25 per call, not a call per row: the drivers' writes are not the pipeline's (uncounted),
        # and at 12 reads a minute a call per row was most of a hang drill's time. The last row of a key wins,
        # as one put per row would have it.
        latest = {(item["pk"]["S"], item["sk"]["S"]): item for item in self.progress.items(moment, running)}
        rows = [{"PutRequest": {"Item": item}} for item in latest.values()]
        for start in range(0, len(rows), 25):
            batch = {self.aws.progress_table: rows[start : start + 25]}
            while batch:
                batch = dynamodb.batch_write_item(RequestItems=batch).get("UnprocessedItems") or {}

    def _detect_hung_jobs(self, moment: float) -> None:
        """One tick of Detect Hung Jobs' schedule, as EventBridge invokes it. The invocation reads at
        once, then every HangReadEverySeconds within its minute (steps/detect_hung_jobs.py): between two of
        its reads it waits, parked, while the drill goes on (its executions, its faults), and each
        read sees the table as the reporters have written it by then."""
        assert self._detector is None, "an invocation of Detect Hung Jobs is still reading"
        self._before_read(moment)
        invoke = self.aws.client("lambda").invoke
        self._detector = PacedInvocation(lambda: invoke(FunctionName=HANG_DETECTOR_FUNCTION, Payload=b"{}"), self.clock, moment)
        self._detector_parked(moment)

    def _detector_reads_again(self, moment: float) -> None:
        assert self._detector is not None
        self._before_read(moment)
        self._detector.go_on()
        self._detector_parked(moment)

    def _before_read(self, moment: float) -> None:
        self.hang_reads.append(moment)
        self._write_progress(moment)
        if isinstance(self.slurm, SimulatedController):
            self.slurm.report_job_nodes()

    def _detector_parked(self, moment: float) -> None:
        """The invocation waits for its next read, or it has answered."""
        detector = self._detector
        assert detector is not None
        if detector.done:
            self.hang_ticks.append((detector.invoked_at, json.loads(detector.response["Payload"].read())))
            self._detector = None
        else:
            assert detector.wakes_at is not None and detector.wakes_at > moment
            self._detector_wakes_at = detector.wakes_at

    def _poll_failed_jobs(self) -> None:
        """One tick of the EKS job poller's schedule (Find Failed Jobs), as EventBridge Scheduler invokes it."""
        with self.aws.api_calls.counting():
            response = self.aws.client("lambda").invoke(FunctionName=POLLER_FUNCTION, Payload=b"{}")
        answer = json.loads(response["Payload"].read())  # (its counts, or Lambda's error answer)
        self.polls.append(answer)
        self._poll_again = self._poll_again or bool(isinstance(answer, dict) and answer.get("deferred"))


class PacedInvocation:
    """One invocation of Detect Hung Jobs on a thread of its own, run in turns with the drill: the
    handler's wait between reads (hyperpod_recovery.clock.current_sleep) parks it until the drill
    delivers its next read; only one of the two runs at a time, so the drill stays repeatable."""

    _local = threading.local()

    def __init__(self, invoke: Callable[[], Any], clock: VirtualClock, moment: float) -> None:
        self.invoked_at = moment
        self.wakes_at: float | None = None
        self.done = False
        self.response: Any = None
        self._clock = clock
        self._turn = threading.Event()  # the invocation may run
        self._parked = threading.Event()  # the invocation waits, or has answered
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(invoke,), name="detect-hung-jobs", daemon=True)
        self._thread.start()
        self._wait_parked()

    def _run(self, invoke: Callable[[], Any]) -> None:
        PacedInvocation._local.current = self
        try:
            self.response = invoke()  # (a worker thread's calls are counted as the pipeline's)
        except BaseException as exc:  # (handed to the drill's thread)
            self._error = exc
        finally:
            self.done = True
            self._parked.set()

    @staticmethod
    def sleep(seconds: float) -> None:
        """The handler's wait: park until the drill's clock reaches the moment (outside a paced
        invocation, nothing waits in real time: a drill never sleeps)."""
        invocation = getattr(PacedInvocation._local, "current", None)
        if invocation is None:
            return
        invocation.wakes_at = invocation._clock.now(DRIVER) + max(0.0, seconds)
        invocation._parked.set()
        invocation._turn.wait()
        invocation._turn.clear()

    def go_on(self) -> None:
        self._turn.set()
        self._wait_parked()

    def _wait_parked(self) -> None:
        if not self._parked.wait(timeout=PARK_TIMEOUT_SECONDS):
            raise RuntimeError(f"Detect Hung Jobs did not park within {PARK_TIMEOUT_SECONDS:.0f} s of real time")
        self._parked.clear()
        if self._error is not None:
            raise self._error
