"""Run one scenario end to end: build the world, inject the faults, let the pipeline work, report.

Faults reach the pipeline the way they do in AWS: HyperPod events, alarms and the controller
agent's "job failed" events are put on EventBridge, whose rules (from template.yaml) route them to
the intake queue; the intake Lambda is invoked with an SQS batch after the batching window, like
Lambda's event source mapping does. Drills are started with StartExecution, like an operator does.
A job_failed fault first changes Slurm (the job ends, its bad nodes go DOWN, maybe it wrote a
newer checkpoint first), then sends the event the agent's epilog would send.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hyperpod_recovery.clock import install_clock
from hyperpod_recovery.config import get_settings
from hyperpod_recovery.models.progress import PROGRESS_TABLE_ENV
from hyperpod_recovery.observability import logger as pipeline_logger
from hyperpod_recovery.runtime import default_dependencies
from sandbox.aws import REGION, SandboxAWS
from sandbox.checkpoints import begin_checkpoint_step, write_checkpoint_step, write_checkpoints
from sandbox.clock import DRIVER, EPOCH, VirtualClock
from sandbox.eks import SimulatedEks, point_eks_at
from sandbox.hyperpod import HyperPodDouble
from sandbox.progress import ProgressSimulator
from sandbox.real_slurm import RealController
from sandbox.report import build_report
from sandbox.runner.aws_delivers import AwsDelivers
from sandbox.runner.deploy import arm_behaviour, stack_parameters
from sandbox.runner.faults import Faults
from sandbox.runner.functions import (
    HANG_DETECTOR_FUNCTION,
    POLLER_FUNCTION,
    Delivery,
)
from sandbox.runner.jobs import Jobs
from sandbox.scenario import FaultSpec, Scenario, ScenarioError, expand_range
from sandbox.slurm import SimulatedController, SlurmJob
from sandbox.training import KubeTrainingSimulator, TrainingSimulator

FINISH_TIMEOUT_SECONDS = 300.0  # real seconds; a drill normally takes one or two
POLL_PERIOD_SECONDS = 60.0  # template.yaml: Find Failed Jobs' schedule, rate(1 minute)
MAX_POLLS = 60  # (a drill's ticks of the job poller, at most)


class DrillRunner(Faults, Jobs, AwsDelivers):
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
        self.at_risk_answers: list[tuple[float, Any]] = []  # (virtual second, At Risk's answer) of each delivery and tick

    # --- entry points -------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Deliver the scenario's faults, let every execution finish, and return the report."""
        started = time.perf_counter()
        with self.deployed():
            self.play()
            if self.eks is not None:
                self.eks.settle()  # (the pods bound at the last step start a moment later)
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
        if any(f.kind == "at_risk" for f in self.scenario.faults):
            self._at_risk_tick()  # (its schedule's next tick: the verdicts' outcomes as the ledger now knows them)

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
        parameters = {**stack_parameters(self.scenario, self.double.arn), **(overrides or {})}
        install_clock(lambda: self.epoch + timedelta(seconds=self.clock.now()))
        try:
            with (
                self.log_path.open("w") as self._log,
                _pipeline_output_to(self._log),
                SandboxAWS(self.clock, self.double, parameters, self.slurm.pump, epoch=self.epoch) as aws,
            ):
                self.aws = aws
                aws.answers_in_process = isinstance(self.slurm, SimulatedController)
                arm_behaviour(aws, self.scenario.behaviour)
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
                lambda job, step, at: begin_checkpoint_step(s3, job, step, at),
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
            if fault.kind in ("drill", "abort", "hyperpod_hang", "at_risk") or fault.of_progress:
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
    # --- faults -------------------------------------------------------------------------


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
