"""Run one scenario end to end: build the world, inject the faults, let the pipeline work, report.

Faults reach the pipeline the way they do in AWS: HyperPod events, alarms and the controller
agent's "job failed" events are put on EventBridge, whose rules (from template.yaml) route them to
the intake queue; the intake Lambda is invoked with an SQS batch after the batching window, like
Lambda's event source mapping does. Drills are started with StartExecution, like an operator does.
A job_failed fault first changes Slurm (the job ends, its bad nodes go DOWN, maybe it wrote a
newer checkpoint first), then sends the event the agent's epilog would send.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import logging
import math
import re
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from hyperpod_recovery.clock import install_clock
from hyperpod_recovery.config import get_settings
from hyperpod_recovery.models.job_events import JOB_EVENT_SOURCE, JOB_FAILED_DETAIL_TYPE, JobFailedDetail
from hyperpod_recovery.models.progress import PROGRESS_TABLE_ENV
from hyperpod_recovery.observability import logger as pipeline_logger
from hyperpod_recovery.runtime import default_dependencies
from hyperpod_recovery.steps.sweep_ended_executions import GRACE as SWEEP_GRACE
from sandbox.aws import REGION, SandboxAWS
from sandbox.checkpoints import write_checkpoint_step, write_checkpoints
from sandbox.clock import DRIVER, EPOCH, VirtualClock
from sandbox.eks import SimulatedEks, point_eks_at
from sandbox.hyperpod import ACCOUNT, HyperPodDouble
from sandbox.planted import SECRET_STACK
from sandbox.progress import ProgressSimulator
from sandbox.real_slurm import RealController
from sandbox.report import build_report
from sandbox.scenario import FaultSpec, Scenario, ScenarioError, expand_range
from sandbox.slurm import DATA_LOADER_STACK, SimulatedController, SlurmJob
from sandbox.training import KubeTrainingSimulator, TrainingSimulator

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
# What Step Functions sends to EventBridge for every status change; the stack's rule keeps these.
UNRECORDED_END_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")
FINISH_TIMEOUT_SECONDS = 300.0  # real seconds; a drill normally takes one or two
POLL_PERIOD_SECONDS = 60.0  # template.yaml: Find Failed Jobs' schedule, rate(1 minute)
MAX_POLLS = 60  # (a drill's ticks of the job poller, at most)


@dataclass
class Delivery:
    """What the event source mapping hands the intake Lambda at ``at``."""

    at: float
    faults: list[FaultSpec]
    agent_back: bool = False  # the controller agent comes back and works through its backlog
    poll: bool = False  # EKS: a tick of the job poller (a failure's repeated poll, or the next tick after a deferring one)
    detect: bool = False  # a tick of Detect Hung Jobs (the progress the jobs report, judged)


class DrillRunner:
    def __init__(self, scenario: Scenario, log_path: Path, *, real_slurm: bool = False) -> None:
        self.scenario = scenario
        self.log_path = log_path
        # A real Slurm's agent works in real time, so its drills count real time; simulated ones do not.
        self.clock = VirtualClock(counts_real_time=real_slurm)
        # Virtual second 0. A real Slurm remembers earlier drills' jobs (their comments carry the
        # incident id, which carries the fault's time): real drills start at the present instead.
        self.epoch = datetime.now(UTC).replace(microsecond=0) if real_slurm else EPOCH
        self.slurm: SimulatedController | RealController
        if real_slurm:
            # The agent as its own process against the slurmctld SLURM_CONF names (sandbox/real_slurm.py).
            self.slurm = RealController(scenario, log_path.parent, self.clock, self.epoch)
            hostnames = self.slurm.hostnames
        else:
            behaviour = scenario.behaviour
            self.slurm = SimulatedController(
                self.clock,
                self.epoch,
                behaviour.agent_seconds,
                behaviour.agent_down,
                behaviour.agent_back_at,
                health_check_seconds=behaviour.health_check_seconds,
            )
            hostnames = {}
        self.double = HyperPodDouble(scenario.cluster, scenario.behaviour, REGION, self.epoch, now=self.clock.now, hostnames=hostnames)
        if isinstance(self.slurm, SimulatedController):
            # The simulated slurmctld hears from the double's hosts: their boot times, whether they answer.
            self.slurm.slurm.host_view = self.double.slurm_view
            self.slurm.slurm.host_up_since = self.double.slurm_up_since
            self.slurm.slurm.host_unhealthy = self.double.unhealthy_host
            self.double.on_new_host = self.slurm.slurm.register_node
        # An EKS cluster's Kubernetes side (sandbox/eks.py), made with the sandbox: its API server lives with it.
        self.eks: SimulatedEks | None = None
        self.polls: list[dict[str, Any]] = []  # each tick of the EKS job poller: what it answered
        self._poll_again = False
        self.intake_responses: list[dict[str, Any]] = []
        self.events_put = 0
        self.drill_count = 0
        self.ends_published: set[str] = set()  # executions whose status-change event went out
        self.ends_lost: list[str] = []  # ...or was lost on the way (behaviour.execution_end_events_lost)
        self.reconcile_responses: list[Any] = []
        self.sweep_responses: list[Any] = []  # (virtual second, the sweep's answer or error) of each scheduled sweep
        self._swept_to = 0.0  # the last scheduled sweep delivered (virtual seconds)
        self.cluster_event_responses: list[Any] = []
        self._until = math.inf  # the moment the runner is letting the executions reach
        self.aborted: dict[str, tuple[str, str]] = {}  # executions an abort fault stopped: (error, cause) given
        self.progress: ProgressSimulator | None = None  # the jobs' progress reporters (jobs.*.progress)
        self.training: TrainingSimulator | None = None  # the jobs that keep checkpointing (jobs.*.training)
        self.kube_training: KubeTrainingSimulator | None = None  # (the same, on an EKS cluster)
        self.hang_ticks: list[tuple[float, Any]] = []  # (virtual second, Detect Hung Jobs' answer) of each tick
        self.hang_imports: list[tuple[float, Any]] = []  # (virtual second, Import HyperPod Hangs' answer)

    # --- entry points -------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Deliver the scenario's faults, let every execution finish, and return the report."""
        started = time.perf_counter()
        with self.deployed():
            self.play()
            self.slurm.close()  # before the report: a real agent's journal is read when it stops
            self._log.flush()  # the report reads the handlers' EMF metrics back from this log
            return build_report(self, wall_seconds=time.perf_counter() - started)

    def play(self) -> None:
        """Inside ``deployed()``: deliver the scenario's faults and let every execution finish (what
        ``run`` does before its report; a test of the operator's commands then reads the stack)."""
        deliveries = self._deliveries()
        while deliveries:
            delivery = deliveries.pop(0)
            self._advance_to(delivery.at)
            self._deliver(delivery)
            if self._poll_again and len(self.polls) < MAX_POLLS:
                # (the poll left failures for its next tick: the schedule ticks again a minute later)
                deliveries = sorted([*deliveries, Delivery(delivery.at + POLL_PERIOD_SECONDS, [], poll=True)], key=lambda d: d.at)
            self._poll_again = False
        self._wait_for_executions()
        self._sweep_after_lost_ends()

    def virtual_now(self) -> datetime:
        """The furthest moment the drill has reached (its executions may have run past the driver):
        "now" for a client of the stack, such as the operator's commands after ``play``."""
        return self.epoch + timedelta(seconds=max(self.clock.now(DRIVER), self.clock.horizon))

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass for every running execution (a poller's sleep)."""
        self._advance_to(self.clock.now(DRIVER) + seconds)

    @contextmanager
    def deployed(self, overrides: Mapping[str, str] | None = None) -> Iterator[SandboxAWS]:
        """The stack in moto, with the scenario's cluster, Slurm, jobs and checkpoints, and no fault
        delivered yet: what a client of the deployed stack (``hyperpod-recovery drill``,
        ``preflight``) talks to. ``overrides``: template parameters deployed as given (a stack
        configured wrong, for the preflight to find)."""
        self._refuse_unsupported()
        settings = self.scenario.settings
        parameters = {
            "ClusterName": self.scenario.cluster.name,
            "ClusterArn": self.double.arn,
            "CheckpointBucketPattern": "*",
            "DryRun": "true" if settings.dry_run else "false",
            "ResumePolicy": settings.resume_policy,
            **({"ReplacementHealthCheck": settings.replacement_health_check} if settings.replacement_health_check is not None else {}),
            "RejoinPollSeconds": str(settings.poll_seconds),
            "RejoinMaxPollSeconds": str(settings.max_poll_seconds),
            "RejoinDeadlineSeconds": str(settings.rejoin_deadline_seconds),
            "RebootDeadlineSeconds": str(settings.reboot_deadline_seconds),
            "EpisodeWindowSeconds": str(settings.episode_window_seconds),
            "IntakeBatchWindowSeconds": str(settings.intake_batch_window_seconds),
            "ControllerGroups": ",".join(settings.controller_groups),
            "LoginGroups": ",".join(settings.login_groups),
            "JobRestartBudget": str(settings.job_restarts.budget),
            "JobRestartWindowSeconds": str(settings.job_restarts.window_seconds),
            "JobRestartBackoffSeconds": str(settings.job_restarts.backoff_seconds),
            "JobRestartMaxBackoffSeconds": str(settings.job_restarts.max_backoff_seconds),
            "CrashLoopRepeats": str(settings.job_restarts.crash_loop_repeats),
            "JobFailuresPer1000NodeDays": str(settings.job_restarts.job_failures_per_1000_node_days),
        }
        # Safety limits the scenario sets; the others keep template.yaml's defaults.
        safety = {
            "MaxNodesInRecoveryPercent": settings.caps.max_percent,
            "MaxNodesInRecovery": settings.caps.max_nodes,
            "BreakerMaxRecoveries": settings.breaker.max_recoveries,
            "BreakerMaxFailures": settings.breaker.max_failures,
            "BreakerWindowSeconds": settings.breaker.window_seconds,
            "RepeatOffenderMaxRecoveries": settings.repeat_offender.max_recoveries,
            "RepeatOffenderWindowSeconds": settings.repeat_offender.window_seconds,
        }
        safety |= {"MaxEventAgeSeconds": settings.max_event_age_seconds, "MaxClockSkewSeconds": settings.max_clock_skew_seconds}
        parameters.update({name: f"{value:g}" for name, value in safety.items() if value is not None})
        parameters.update(settings.hangs.parameters())
        parameters.update(settings.elastic.parameters())
        if settings.expected_replacement_seconds is not None:
            parameters["ExpectedReplacementSeconds"] = str(settings.expected_replacement_seconds)
        if any(f.kind == "hyperpod_hang" for f in self.scenario.faults) and self.scenario.cluster.orchestrator == "slurm":
            # (HyperPod's hang agent writes to the cluster's log group: the stack subscribes to it)
            parameters["HyperPodHangLogGroup"] = hyperpod_hang_log_group(self.scenario.cluster.name)
        if self.scenario.cluster.orchestrator == "eks":
            stack_eks = settings.eks_cluster_name or f"{self.scenario.cluster.name}-eks"
            parameters |= {"Orchestrator": "Eks", "EksClusterName": stack_eks}
        parameters.update(overrides or {})
        install_clock(lambda: self.epoch + timedelta(seconds=self.clock.now()))
        try:
            with (
                self.log_path.open("w") as self._log,
                _pipeline_output_to(self._log),
                SandboxAWS(self.clock, self.double, parameters, self.slurm.pump, epoch=self.epoch) as aws,
            ):
                self.aws = aws
                aws.answers_in_process = isinstance(self.slurm, SimulatedController)
                for error in self.scenario.behaviour.api_errors:
                    if error.operation.startswith("dynamodb:"):
                        aws.ledger_errors[error.operation] = [error.code, error.times]
                for lost in self.scenario.behaviour.lost_responses:
                    if lost.function not in aws.handlers:
                        raise ScenarioError(f"behaviour.lost_responses: no function {lost.function!r} in template.yaml")
                    if not lost.ran:
                        aws.failed_before_running[lost.function] += lost.times
                        continue
                    aws.lost_responses[lost.function] += lost.times
                    aws.lost_response_errors[lost.function] = lost.error
                for answer in self.scenario.behaviour.lost_api_answers:
                    aws.lost_api_answers[answer.operation] += answer.times
                # Settings and adapters are cached per "cold start": start cold for every drill.
                get_settings.cache_clear()
                default_dependencies.cache_clear()
                self._populate(aws)
                yield aws
        finally:
            install_clock(None)
            self.slurm.close()
            if self.eks is not None:
                self.eks.close()

    def _refuse_unsupported(self) -> None:
        if isinstance(self.slurm, RealController) and any(f.kind == "job_failed" for f in self.scenario.faults):
            raise ScenarioError(
                "faults: kind 'job_failed' runs on the simulated Slurm only; on a real slurmctld the agent's epilog "
                "reports real job failures (tests/slurm/test_job_failed_events.py)"
            )
        if isinstance(self.slurm, RealController) and self.scenario.behaviour.replacement_hostname == "new":
            raise ScenarioError(
                "behaviour.replacement_hostname 'new': with --slurm real there is no Slurm node for a new hostname "
                "(the simulated Slurm models it)"
            )
        if isinstance(self.slurm, RealController) and (self.scenario.behaviour.agent_down or self.scenario.behaviour.agent_back_at):
            raise ScenarioError(
                "behaviour.agent_down and agent_back_at: with --slurm real, stop the agent process instead (the simulated Slurm models it)"
            )

    # --- setup --------------------------------------------------------------------------
    def _populate(self, aws: SandboxAWS) -> None:
        self.slurm.connect(aws)
        if self.scenario.cluster.orchestrator == "eks":
            self._populate_eks(aws)
            return
        missing = set(self.scenario.behaviour.missing_in_slurm)
        self.slurm.slurm.sbatch_refuses = dict(self.scenario.behaviour.sbatch_refuses)
        for group in self.scenario.cluster.instance_groups:
            if group.type == "Compute":
                for index in range(group.count):
                    if f"{group.name}:{index}" not in missing:
                        self.slurm.slurm.add_node(self.double.slurm_name(f"{group.name}:{index}"))
        for job in self.scenario.jobs:
            names = [self.double.slurm_name(f"{g}:{i}") for g, i in expand_range(job.nodes) if f"{g}:{i}" not in missing]
            self.slurm.slurm.add_job(
                SlurmJob(
                    job_id=job.id,
                    name=job.name,
                    nodes=names,
                    state="RUNNING",
                    checkpoint_uri=job.checkpoint_uri,
                    auto_resume=job.auto_resume,
                    script_bytes=job.script_bytes,
                    batch=job.batch,
                    comment=job.comment,
                    node_range=job.node_range,
                    # (its owner opted in to progress monitoring: the progress table in its environment)
                    environment={PROGRESS_TABLE_ENV: aws.progress_table} if job.progress is not None and job.progress.opted_in else {},
                )
            )
            write_checkpoints(aws.client("s3"), job, self.epoch)
        if any(job.training is not None for job in self.scenario.jobs):
            self.training = TrainingSimulator(self.scenario.jobs, self.slurm.slurm, aws.client("s3"), self.epoch, self._first_hit)
        if any(job.progress is not None for job in self.scenario.jobs):
            self.progress = ProgressSimulator(
                self.scenario,
                nodes_of=lambda job: [self.double.slurm_name(f"{g}:{i}") for g, i in expand_range(job.nodes)],
                name_of=lambda ref: self.double.slurm_name(ref),
                epoch=self.epoch,
            )

    def _populate_eks(self, aws: SandboxAWS) -> None:
        """The EKS cluster HyperPod's DescribeCluster names, its API server, its nodes and jobs."""
        self.eks = SimulatedEks(self.scenario, self.double, self.epoch, self.log_path.parent, scope=lambda: self.clock.on(aws.invoking))
        point_eks_at(aws.client("eks"), self.eks)
        self.eks.populate(progress_table=aws.progress_table)
        for job in self.scenario.jobs:
            write_checkpoints(aws.client("s3"), job, self.epoch)
        if any(job.training is not None for job in self.scenario.jobs):
            s3 = aws.client("s3")
            self.kube_training = KubeTrainingSimulator(
                self.scenario.jobs,
                self.eks.kube,
                self.epoch,
                self._first_hit_on_object,
                lambda job, step, created, nodes: write_checkpoint_step(s3, job, step, created, nodes=nodes),
            )
        if any(job.progress is not None for job in self.scenario.jobs):

            def node_of(ref: str) -> str:  # (the Kubernetes node name: what the downward API gives a pod)
                assert self.eks is not None
                return self.eks.node_of(ref)

            self.progress = ProgressSimulator(
                self.scenario,
                nodes_of=lambda job: [node_of(f"{g}:{i}") for g, i in expand_range(job.nodes)],
                name_of=node_of,
                epoch=self.epoch,
                # (a pod reports its job as namespace/name: the downward API gives no job uid)
                key_of=lambda job: f"{job.kubernetes.namespace}/{job.name}",
            )

    def _deliveries(self) -> list[Delivery]:
        """Group event faults the way an SQS event source with a batching window does; drills
        are their own deliveries (an operator's StartExecution, not an event)."""
        window = self.scenario.settings.intake_batch_window_seconds
        deliveries: list[Delivery] = []
        pending: list[FaultSpec] = []
        for fault in sorted(self.scenario.faults, key=lambda f: f.at):
            if fault.kind in ("drill", "abort", "hyperpod_hang") or fault.of_progress:
                # (HyperPod's own hang verdicts: on EKS the next poll reads the operator's status)
                deliveries.append(Delivery(fault.at, [fault], poll=fault.kind == "hyperpod_hang" and self.eks is not None))
                continue
            if pending and fault.at > pending[0].at + window:
                deliveries.append(Delivery(pending[0].at + window, pending))
                pending = []
            pending.append(fault)
        if pending:
            deliveries.append(Delivery(pending[0].at + window, pending))
        if self.scenario.behaviour.agent_back_at is not None:
            deliveries.append(Delivery(self.scenario.behaviour.agent_back_at, [], agent_back=True))
        if any(job.progress is not None for job in self.scenario.jobs) and HANG_DETECTOR_FUNCTION in self.aws.template["Resources"]:
            # Detect Hung Jobs' schedule: every period from the drill's start, while the jobs' pauses,
            # slowdowns and hangs can still matter.
            period = self.schedule_period(HANG_DETECTOR_FUNCTION)
            until = ProgressSimulator.horizon_of(self.scenario)
            deliveries += [Delivery(k * period, [], detect=True) for k in range(1, int(until // period) + 1)]
        if self.scenario.cluster.orchestrator == "eks":
            # The poller's next ticks, a period apart, find the same failure again (EKS sends no event).
            period = self.schedule_period(POLLER_FUNCTION)
            deliveries += [
                Delivery(d.at + k * period, [], poll=True)
                for d in list(deliveries)
                for f in d.faults
                if f.kind == "job_failed"
                for k in range(1, f.repeat + 1)
            ]
        return sorted(deliveries, key=lambda d: d.at)

    # --- time ---------------------------------------------------------------------------
    def _running(self) -> set[str]:
        return self.aws.running_executions()

    def _advance_to(self, moment: float) -> None:
        """Let every running execution reach ``moment`` (in wake-up order), then put the driver there."""
        self._until = moment
        self.clock.run_until(moment, self._running, between=self._between)
        self.clock.set_driver_time(moment)

    def _wait_for_executions(self) -> None:
        deadline = time.monotonic() + FINISH_TIMEOUT_SECONDS
        self._until = math.inf
        while self._running():
            if time.monotonic() > deadline:
                raise RuntimeError(f"executions still running after {FINISH_TIMEOUT_SECONDS:.0f}s of real time: {sorted(self._running())}")
            self.clock.run_until(math.inf, self._running, between=self._between)
        self._publish_execution_ends()

    # --- what AWS delivers on its own -----------------------------------------------------
    def _between(self) -> None:
        """Every execution is parked: deliver what happened before the next one wakes."""
        self._write_progress(self.clock.horizon)
        if self.training is not None:
            self.training.advance(self.clock.horizon)
        if self.kube_training is not None:
            self.kube_training.advance(self.clock.horizon)
        self._publish_cluster_events()
        self._publish_execution_ends()
        self._run_scheduled_sweeps()

    def _publish_cluster_events(self) -> None:
        """HyperPod publishes a Cluster Event when a replacement ends (Continuous mode only): the
        stack's rule puts it on the cluster-event queue, whose mapping invokes Notice Cluster Event,
        which answers the waits it concerns. Delivered at the moment it happened, before the next
        execution wakes: the present moves there, and a wait it answered goes on from there."""
        if not isinstance(self.slurm, SimulatedController):
            return  # a real Slurm's drill counts real time: no moment to deliver it at
        bound = min(self.clock.next_wake(), self._until)
        for at, detail in self.double.cluster_events_until(bound):
            moment = max(at, self.clock.horizon)
            self.clock.advance_horizon(moment)
            present = self.clock.now(DRIVER)
            self.clock.set_driver_time(moment)
            try:
                self._put("aws.sagemaker", "SageMaker HyperPod Cluster Event", detail, [self.double.arn], moment, fault=False)
                self._run_mapping("ClusterEventQueue", "NoticeClusterEventFunction", CLUSTER_EVENT_BATCH_SIZE, self.cluster_event_responses)
            finally:
                self.clock.set_driver_time(present)
            for execution in self.aws.answered_waits():
                self.clock.wake(execution)  # its wait was answered: it goes on now

    def _publish_execution_ends(self) -> None:
        """Step Functions sends a status-change event to EventBridge for every execution that ends;
        the stack's rule forwards the failed, timed-out and aborted ones to the reconcile queue,
        whose event source mapping invokes Reconcile Execution. Run whenever every execution is
        parked, so an end is reconciled before anything later happens; at the virtual moment the
        execution ended (the driver's clock is put there while the reconcile runs)."""
        for execution in self.aws.executions():
            status = execution.exec_status.value if execution.exec_status is not None else "RUNNING"
            if status not in UNRECORDED_END_STATUSES or execution.name in self.ends_published:
                continue
            self.ends_published.add(execution.name)
            ended_at = self.clock.now(execution.name)
            started_at = self.clock.started_at(execution.name)
            detail = {
                "executionArn": execution.execution_arn,
                "stateMachineArn": execution.state_machine_arn,
                "name": execution.name,
                "status": status,
                "startDate": int((self.epoch + timedelta(seconds=started_at)).timestamp() * 1000),
                "stopDate": int((self.epoch + timedelta(seconds=ended_at)).timestamp() * 1000),
                "input": execution.execution_input,
                "inputDetails": {"included": True},
                "output": None,
                "outputDetails": None,
                # moto drops StopExecution's error and cause; Step Functions keeps them.
                "error": execution.error or self.aborted.get(execution.name, (None, None))[0],
                "cause": execution.cause or self.aborted.get(execution.name, (None, None))[1],
            }
            if self.scenario.behaviour.execution_end_events_lost:
                self.ends_lost.append(execution.name)  # (best-effort delivery: this one never arrives)
                continue
            present = self.clock.now(DRIVER)
            self.clock.set_driver_time(max(present, ended_at))
            try:
                self._put("aws.states", "Step Functions Execution Status Change", detail, [execution.execution_arn], ended_at, fault=False)
                self._run_reconcile_mapping()
            finally:
                self.clock.set_driver_time(present)

    def schedule_period(self, function: str) -> float:
        """Seconds between two runs of a scheduled function: its rate in template.yaml."""
        (event,) = self.aws.template["Resources"][function]["Properties"]["Events"].values()
        rate = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours)\)", event["Properties"]["Schedule"])
        assert rate is not None, event
        return float(rate[1]) * (60 if rate[2].startswith("minute") else 3600)

    @functools.cached_property
    def sweep_period(self) -> float:
        return self.schedule_period(SWEEP_FUNCTION)

    def _run_scheduled_sweeps(self) -> None:
        """The sweep of ended executions runs on its schedule (every 5 minutes of virtual time from
        the drill's start), on the driver's timeline, between the executions' wake-ups."""
        if not isinstance(self.slurm, SimulatedController):
            return  # a real Slurm's drill counts real time: its schedule has no virtual moments
        bound = min(self.clock.next_wake(), self._until)
        if math.isinf(bound):
            return  # (nothing is left to happen: the last sweep is _sweep_after_lost_ends's)
        while self._swept_to + self.sweep_period <= bound:
            self._sweep_at(self._swept_to + self.sweep_period)

    def _sweep_after_lost_ends(self) -> None:
        """Executions whose status-change event was lost ended unreconciled: the drill goes on to the
        next scheduled sweep after the last of them, which finds them (nothing else would)."""
        if not self.ends_lost or not isinstance(self.slurm, SimulatedController):
            return
        last_end = max(self.clock.now(name) for name in self.ends_lost)
        while self._swept_to < last_end + SWEEP_GRACE.total_seconds():  # (a younger end is left to the next sweep)
            self._sweep_at(self._swept_to + self.sweep_period)

    def _sweep_at(self, moment: float) -> None:
        self._swept_to = moment
        self.clock.advance_horizon(max(moment, self.clock.horizon))
        present = self.clock.now(DRIVER)
        self.clock.set_driver_time(moment)
        try:
            with self.aws.api_calls.counting():
                response = self.aws.client("lambda").invoke(FunctionName=SWEEP_FUNCTION, Payload=b"{}")
            self.sweep_responses.append((moment, json.loads(response["Payload"].read())))
        finally:
            self.clock.set_driver_time(present)

    def _run_reconcile_mapping(self) -> None:
        self._run_mapping("ReconcileQueue", "ReconcileExecutionFunction", RECONCILE_BATCH_SIZE, self.reconcile_responses)

    # --- faults -------------------------------------------------------------------------
    def _deliver(self, delivery: Delivery) -> None:
        if delivery.agent_back:
            assert isinstance(self.slurm, SimulatedController)
            for execution in self.slurm.catch_up():
                self.clock.wake(execution)  # its task had been waiting for this answer: it goes on now
        kubernetes_failures = [f for f in delivery.faults if f.kind == "job_failed" and self.eks is not None]
        for fault in kubernetes_failures:
            self._fail_kubernetes_job(fault)  # (every job that fails at this moment, before the next tick sees them)
        if delivery.detect:
            self._detect_hung_jobs(delivery.at)
        for fault in (f for f in delivery.faults if f.kind == "hyperpod_hang"):
            self._hyperpod_reports_hang(fault)  # (before the poll that reads it, on EKS)
        if delivery.poll or kubernetes_failures:
            # (EKS sends no event: the scheduled poller finds the failures; a failure's repeats are
            # later ticks, a period apart: deliveries of their own)
            self._poll_failed_jobs()
        for fault in delivery.faults:
            if fault.kind == "abort":
                self._abort(fault)
            elif fault.kind == "drill":
                self._start_drill(fault)
            elif fault.kind == "hang":
                self._hang(fault)
            elif fault.kind == "hyperpod_hang":
                continue  # (reported above)
            elif fault.of_progress:
                continue  # (a pause or a slowdown: only what the job reports changes, sandbox/progress.py)
            elif fault.kind == "job_failed" and self.eks is not None:
                continue
            elif fault.kind == "job_failed":
                event = self._fail_job(fault)
                for _ in range(fault.repeat + 1):
                    self._put(JOB_EVENT_SOURCE, JOB_FAILED_DETAIL_TYPE, event, [], fault.at)
            else:
                for _ in range(fault.repeat + 1):
                    for ref in fault.node_refs:
                        self._put_event(fault, ref)
        if any(f.kind not in ("drill", "abort") for f in delivery.faults):
            self._run_event_source_mapping()

    def _abort(self, fault: FaultSpec) -> None:
        """An operator's StopExecution of the drill's n-th execution. Step Functions ends it at
        once: its thread, parked in a wait, is let go without the jump and the interpreter stops."""
        assert fault.execution is not None
        started = self.aws.executions()
        if fault.execution > len(started):
            raise ScenarioError(f"abort at {fault.at:g}: execution {fault.execution} was never started ({len(started)} were)")
        execution = started[fault.execution - 1]
        if execution.exec_status is not None and execution.exec_status.value != "RUNNING":
            return  # it had already ended: StopExecution changes nothing (the report shows its own end)
        with self.aws.api_calls.counting(False):  # the operator's call, not the pipeline's
            self.aws.client("stepfunctions").stop_execution(
                executionArn=execution.execution_arn, error="Drill.Abort", cause=f"stopped by the scenario's abort fault at {fault.at:g} s"
            )
        # (the sandbox's StopExecution keeps the error and cause and lets the execution's thread go)
        self.aborted[execution.name] = ("Drill.Abort", f"stopped by the scenario's abort fault at {fault.at:g} s")

    def _put_event(self, fault: FaultSpec, ref: str) -> None:
        node = self.double.current(ref, t=fault.at)
        if self.eks is not None and fault.kind == "node_health" and not fault.foreign_cluster:
            self.eks.report_unhealthy(node.node_id, fault.at)  # HyperPod's health agent labels its node as it reports it
        when = self.epoch + timedelta(seconds=fault.at - fault.event_age_seconds)
        cluster, arn = self.scenario.cluster.name, self.double.arn
        if fault.foreign_cluster:
            cluster, arn = "other-cluster", arn[:-12] + "zzzzzzzzzzzz"
        if fault.kind == "node_health":
            detail: dict[str, Any] = {
                "ClusterName": cluster,
                "ClusterArn": arn,
                "InstanceId": node.node_id,
                "Tags": {},
                "HealthSummary": {
                    "HealthStatus": "Unhealthy",
                    "HealthStatusReason": fault.reason
                    or "HyperPod Health Monitoring Agent (HMA) has detected fault type NvidiaErrorTerminate on this node and is unhealthy.",
                    "RepairAction": "None",
                    # HMA recommends what the fault needs: a reboot for NvidiaErrorReboot-like faults.
                    "Recommendation": "Please Reboot the Faulty Node."
                    if "Reboot" in (fault.reason or "")
                    else "Please Replace the Faulty Node.",
                },
            }
            source, detail_type, resources = "aws.sagemaker", "SageMaker HyperPod Cluster Node Health Event", [arn]
        else:
            alarm = f"hyperpod-recovery:{cluster}:gpu-xid-{node.node_id}"
            detail = {
                "alarmName": alarm,
                "configuration": {
                    "metrics": [
                        {
                            "id": "m1",
                            "metricStat": {
                                "metric": {
                                    "namespace": "HyperPod/Slurm",
                                    "name": "gpu_xid_errors",
                                    "dimensions": {"ClusterName": cluster, "InstanceId": node.node_id},
                                },
                                "period": 60,
                                "stat": "Maximum",
                            },
                            "returnData": True,
                        }
                    ]
                },
                "state": {
                    "value": "ALARM",
                    "reason": fault.reason or "Threshold Crossed: 1 datapoint [3.0] was greater than the threshold (0.0).",
                    "timestamp": when.isoformat(),
                },
                "previousState": {"value": "OK", "reason": "", "timestamp": (when - timedelta(hours=1)).isoformat()},
            }
            source, detail_type, resources = (
                "aws.cloudwatch",
                "CloudWatch Alarm State Change",
                [f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:{alarm}"],
            )
        self._put(source, detail_type, detail, resources, fault.at - fault.event_age_seconds)

    def _put(self, source: str, detail_type: str, detail: dict[str, Any], resources: list[str], at: float, *, fault: bool = True) -> None:
        when = self.epoch + timedelta(seconds=at)
        self.aws.client("events").put_events(
            Entries=[{"Source": source, "DetailType": detail_type, "Detail": json.dumps(detail), "Resources": resources, "Time": when}]
        )
        self.events_put += fault

    def _fail_job(self, fault: FaultSpec) -> dict[str, Any]:
        """End the job's current incarnation in Slurm, and build the event the agent's epilog sends."""
        assert fault.job is not None and isinstance(self.slurm, SimulatedController)
        slurm = self.slurm.slurm
        job = slurm.current_incarnation(fault.job)
        spec = next(j for j in self.scenario.jobs if j.id == fault.job)
        when = self.epoch + timedelta(seconds=fault.at - fault.event_age_seconds)
        if fault.checkpoint_step is not None:
            write_checkpoint_step(self.aws.client("s3"), spec, fault.checkpoint_step, when - timedelta(minutes=1))
        down = [self.double.slurm_name(ref) for ref in fault.node_refs]
        nodes = list(job.nodes)
        slurm.fail_job(job.job_id, fault.job_state, down, fault.requeued_by_slurm)
        exit_code = fault.exit_code if fault.exit_code is not None else (1 if fault.job_state == "FAILED" else 0)
        cluster = "other-cluster" if fault.foreign_cluster else self.scenario.cluster.name
        detail = JobFailedDetail(
            cluster_name=cluster,
            job_id=job.job_id,
            name=job.name,
            user="trainer",
            partition="gpu",
            nodes=nodes,
            state=fault.job_state,
            reason=fault.reason or {"FAILED": "NonZeroExitCode", "NODE_FAIL": "NodeDown", "TIMEOUT": "TimeLimit"}[fault.job_state],
            exit_code=exit_code,
            restart_count=1 if fault.requeued_by_slurm else 0,
            ended_at=when,
            checkpoint_uri=job.checkpoint_uri,
            auto_resume=job.auto_resume,
            resubmission_of=job.resubmission_of,
            event_key=f"{cluster}:{job.job_id}:{int(when.timestamp())}",
        )
        return detail.model_dump(mode="json", exclude_none=True)

    def _fail_kubernetes_job(self, fault: FaultSpec) -> None:
        """EKS: the job's newest incarnation fails (its operator's Failed condition); the nodes the
        fault names went bad first (HyperPod's health agent labels them)."""
        assert fault.job is not None and self.eks is not None
        spec = next(j for j in self.scenario.jobs if j.id == fault.job)
        if fault.checkpoint_step is not None:
            when = self.epoch + timedelta(seconds=fault.at - fault.event_age_seconds)
            write_checkpoint_step(self.aws.client("s3"), spec, fault.checkpoint_step, when - timedelta(minutes=1))
        for ref in fault.node_refs:
            self.eks.report_unhealthy(self.double.current(ref, t=fault.at).node_id, fault.at)
        with self.clock.on(DRIVER):
            self.eks.sync()
            self.eks.job_fails(spec, reason=fault.reason, exit_code=fault.exit_code)

    def _hang(self, fault: FaultSpec) -> None:
        """The job hangs: Slurm still runs it; its processes wait in a collective, but on the node the
        fault names (the one that stopped first), where they are somewhere else."""
        assert fault.job is not None
        if self.eks is not None:
            self.eks.job_hangs(next(j for j in self.scenario.jobs if j.id == fault.job), fault)
            return
        stack = {"no_answer": None, "secret_in_log": SECRET_STACK}.get(fault.stacks, DATA_LOADER_STACK)
        odd = {self.double.slurm_name(fault.node): stack} if fault.node else {}
        self.slurm.slurm.hang_job(fault.job, odd_nodes=odd)

    def _hyperpod_reports_hang(self, fault: FaultSpec) -> None:
        """HyperPod's own detector finds the job hung. EKS: its training operator's fault on the
        HyperPodPyTorchJob's status (the operator restarts the job itself). Slurm: its hang agent's
        event, handed by the stack's subscription filter to Import HyperPod Hangs as CloudWatch Logs
        would (base64 of gzipped JSON). ASSUMPTION: both shapes (domain/hangs/imported.py)."""
        assert fault.job is not None
        job = next(j for j in self.scenario.jobs if j.id == fault.job)
        if self.eks is not None:
            self.eks.sync()  # (the API server's clock at the fault's moment: the condition is stamped then)
            prefix = "LogHang" if fault.operator_verdict == "hanging" else "LogSlow"
            said = "hanging (not receiving required logs)" if fault.operator_verdict == "hanging" else "slow"
            with self.eks.lock:
                self.eks.kube.operator_reports_fault(
                    job.kubernetes.kind,
                    job.kubernetes.namespace,
                    job.name,
                    reason=f"{prefix}_{fault.hyperpod_rule}",
                    message=f"The job is {said} on the following log monitoring rules: {fault.hyperpod_rule}",
                )
            return
        ref = fault.node or f"{expand_range(job.nodes)[0][0]}:{expand_range(job.nodes)[0][1]}"
        node = self.double.current(ref, t=fault.at)
        moment = self.epoch + timedelta(seconds=fault.at)
        message = json.dumps(
            {
                "event": "HANG_DETECTED",
                "job_id": job.id,
                "rule": fault.hyperpod_rule,
                "action": "notify",
                "evidence": f"no output from job {job.id} on {self.double.slurm_name(ref)} for 600 s",
            }
        )
        batch = {
            "messageType": "DATA_MESSAGE",
            "owner": ACCOUNT,
            "logGroup": hyperpod_hang_log_group(self.scenario.cluster.name),
            "logStream": f"SageMakerHangJobDetectionEvents/{node.group}/{node.node_id}",
            "subscriptionFilters": ["hyperpod-recovery-hangs"],
            "logEvents": [{"id": f"{int(moment.timestamp() * 1000)}", "timestamp": int(moment.timestamp() * 1000), "message": message}],
        }
        data = base64.b64encode(gzip.compress(json.dumps(batch).encode())).decode()
        with self.aws.api_calls.counting():
            response = self.aws.client("lambda").invoke(
                FunctionName=HANG_IMPORTER_FUNCTION, Payload=json.dumps({"awslogs": {"data": data}}).encode()
            )
        self.hang_imports.append((fault.at, json.loads(response["Payload"].read())))

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
                    fault.kind != "abort"
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
            if fault.kind != "abort" and any(self.eks.node_of(ref, fault.at) in nodes for ref in fault.node_refs)
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

    def _run_event_source_mapping(self) -> None:
        self._run_mapping("IntakeQueue", "IntakeFunction", ESM_BATCH_SIZE, self.intake_responses)

    def _run_mapping(self, queue: str, function: str, batch_size: int, responses: list[Any]) -> None:
        """What Lambda's SQS event source mapping does: invoke ``function`` with batches of up to
        ``batch_size`` messages, delete what it processed, leave the rest on the queue (for SQS
        to redeliver after its visibility timeout: not within this drill; the report shows them)."""
        sqs = self.aws.client("sqs")
        url = self.aws.queue_urls[queue]
        while True:
            messages: list[dict[str, Any]] = []
            while len(messages) < batch_size:
                wanted = min(10, batch_size - len(messages))
                page = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=wanted, AttributeNames=["All"]).get("Messages", [])
                if not page:
                    break
                messages += page
            if not messages:
                return
            event = {"Records": [_sqs_record(m, url) for m in messages]}
            try:
                with self.aws.api_calls.counting():
                    response = self.aws.client("lambda").invoke(FunctionName=function, Payload=json.dumps(event))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ServiceException":
                    raise
                # behaviour.lost_responses: the function ran, the mapping never heard back, so the
                # batch stays on the queue and SQS delivers it again once its visibility timeout ends
                # (here at once: nothing else happens on the queue meanwhile).
                for message in messages:
                    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
                continue
            result = json.loads(response["Payload"].read())
            responses.append(result)
            failed = _failed_items(response, result, messages)
            for message in messages:
                if message["MessageId"] not in failed:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            if failed:
                return

    def _start_drill(self, fault: FaultSpec) -> None:
        self.drill_count += 1
        if fault.job:
            self._start_job_drill(fault)
            return
        request: dict[str, Any] = {
            "cluster": self.scenario.cluster.name,
            "node_ids": [self.double.current(ref, t=fault.at).node_id for ref in fault.node_refs],
            "reason": fault.reason or f"recovery drill {self.scenario.name}",
        }
        if fault.dry_run is not None:
            request["dry_run"] = fault.dry_run
        if fault.foreign_cluster:
            request["cluster"] = "other-cluster"
        request.update(fault.request_overrides or {})
        sfn = self.aws.client("stepfunctions")
        sfn.start_execution(
            stateMachineArn=self.aws.state_machines["NodeRecoveryStateMachine"],
            name=f"drill-{self.scenario.name}-{self.drill_count}",
            input=json.dumps(request if fault.raw_input is None else fault.raw_input),
        )

    def _start_job_drill(self, fault: FaultSpec) -> None:
        """An operator asking JobRecovery to recover one job (its current incarnation)."""
        assert fault.job is not None and isinstance(self.slurm, SimulatedController)
        request: dict[str, Any] = {
            "cluster": "other-cluster" if fault.foreign_cluster else self.scenario.cluster.name,
            "job_id": self.slurm.slurm.current_incarnation(fault.job).job_id,
            "reason": fault.reason or f"job recovery drill {self.scenario.name}",
        }
        if fault.dry_run is not None:
            request["dry_run"] = fault.dry_run
        request.update(fault.request_overrides or {})
        self.aws.client("stepfunctions").start_execution(
            stateMachineArn=self.aws.state_machines["JobRecoveryStateMachine"],
            name=f"drill-{self.scenario.name}-{self.drill_count}",
            input=json.dumps(request),
        )


def _failed_items(response: dict[str, Any], result: Any, messages: list[dict[str, Any]]) -> set[str]:
    """The messages an SQS event source mapping leaves on the queue after an invocation: the
    partial-batch failures it reported, or every message of a batch whose invocation failed."""
    if response.get("FunctionError"):
        return {m["MessageId"] for m in messages}
    return {f["itemIdentifier"] for f in result.get("batchItemFailures", [])} if isinstance(result, dict) else set()


def _sqs_record(message: dict[str, Any], queue_url: str) -> dict[str, Any]:
    queue_name = queue_url.rsplit("/", 1)[-1]
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:{queue_name}",
        "awsRegion": REGION,
    }


class _pipeline_output_to:
    """Send the handlers' JSON logs, EMF metrics and moto's own log to the drill's log file."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._moto = logging.getLogger("moto")
        self._moto_handler = logging.StreamHandler(stream)

    def __enter__(self) -> None:
        self._stdout = sys.stdout
        handler = pipeline_logger.registered_handler
        self._handler_stream = handler.stream  # type: ignore[attr-defined]
        handler.setStream(self.stream)  # type: ignore[attr-defined]
        sys.stdout = self.stream
        self._moto_propagate = self._moto.propagate
        self._moto.addHandler(self._moto_handler)
        self._moto.propagate = False

    def __exit__(self, *exc: object) -> None:
        sys.stdout = self._stdout
        pipeline_logger.registered_handler.setStream(self._handler_stream)  # type: ignore[attr-defined]
        self._moto.removeHandler(self._moto_handler)
        self._moto.propagate = self._moto_propagate
