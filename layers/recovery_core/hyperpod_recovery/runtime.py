"""What every handler shares: the dependency container and the ``workflow_step`` decorator.

A handler is then a few lines: the decorator applies the Powertools decorators, parses the input
model (a malformed input names the bad field), and dumps the result as plain JSON for the state
machine. Tests and the sandbox pass ``deps=`` to inject fakes; Lambda builds the real adapters
once per cold start, and each adapter creates its boto3 client on first use.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, TypeVar

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ValidationError

from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore
from hyperpod_recovery.adapters.dry_run import DryRunCluster, DryRunLedger, DryRunOrchestrator
from hyperpod_recovery.adapters.eks import EksControlPlane, guarded_endpoint
from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.adapters.eks_token import mint_token
from hyperpod_recovery.adapters.eks_training_jobs import EksTrainingJobs
from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.adapters.job_nodes import EksJobNodes, SlurmJobNodes
from hyperpod_recovery.adapters.kubernetes import KubernetesApi
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.notifier import SnsNotifier
from hyperpod_recovery.adapters.progress import ProgressTable
from hyperpod_recovery.adapters.slurm_agent import SlurmAgentOrchestrator
from hyperpod_recovery.adapters.sqs import DeadLetterQueue, SqsQueue
from hyperpod_recovery.adapters.stepfunctions import StepFunctions
from hyperpod_recovery.clock import current_clock
from hyperpod_recovery.config import Settings, get_settings
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
from hyperpod_recovery.domain.intake.normalize import GuardedCluster
from hyperpod_recovery.domain.jobs.job_failure import RestartPolicy
from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.policy.safety import SafetyPolicy
from hyperpod_recovery.errors import InvalidStepInput
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.models.job_recovery import JobWorkflowState
from hyperpod_recovery.models.node_recovery import WorkflowState
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.ports import (
    CheckpointReader,
    Cluster,
    DeadLetterSink,
    ExecutionHistory,
    JobNodeSource,
    KubeApi,
    Ledger,
    Notifier,
    Orchestrator,
    ProgressReader,
    TrainingJobs,
    Workflows,
)
from hyperpod_recovery.sdk_contract import check_sdk_version


@dataclass
class Dependencies:
    settings: Settings
    cluster: Cluster
    ledger: Ledger
    orchestrator: Orchestrator
    notifier: Notifier
    checkpoints: CheckpointReader
    workflows: Workflows
    dead_letters: DeadLetterSink
    history: ExecutionHistory
    dry_run: bool = False  # the mutating ports are behind the dry-run gate (for_dry_run)
    kube: KubeApi | None = None  # EKS: the Kubernetes API (the orchestrator's; the job poller reads it too)
    progress: ProgressReader | None = None  # the training scripts' progress (the functions given PROGRESS_TABLE)
    job_nodes: JobNodeSource | None = None  # which nodes run each job now (whose progress counts)

    @staticmethod
    def now() -> datetime:
        return current_clock()()

    def for_dry_run(self) -> Dependencies:
        """The same dependencies with the cluster, the ledger and the orchestrator behind the one
        dry-run gate (adapters/dry_run.py): reads go through, changes are held back and answered."""
        if self.dry_run:
            return self
        return dataclasses.replace(
            self,
            cluster=DryRunCluster(self.cluster),
            ledger=DryRunLedger(self.ledger),
            orchestrator=DryRunOrchestrator(self.orchestrator),
            dry_run=True,
        )

    def training_jobs(self) -> TrainingJobs | None:
        """EKS: the cluster's training jobs, read afresh for one poll. None on Slurm."""
        return EksTrainingJobs(self.kube) if self.kube is not None else None

    def count_done(self, name: str, value: float) -> None:
        """A count of what a step did to the cluster or the safety state (nodes replaced, the breaker
        opened): 0 in a dry run, which did none of it."""
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=0 if self.dry_run else value)

    @property
    def guarded(self) -> GuardedCluster:
        return GuardedCluster(name=self.settings.cluster_name, arn=self.settings.cluster_arn, orchestrator=self.settings.orchestrator)

    @property
    def lock_ttl(self) -> timedelta:
        return timedelta(seconds=self.settings.lock_ttl_seconds_in_effect)

    @property
    def escalation_hold(self) -> timedelta:
        return timedelta(seconds=self.settings.escalation_hold_seconds)

    @property
    def event_age_limits(self) -> EventAgeLimits:
        return EventAgeLimits(max_age_seconds=self.settings.max_event_age_seconds, max_skew_seconds=self.settings.max_clock_skew_seconds)

    @property
    def safety_policy(self) -> SafetyPolicy:
        s = self.settings
        return SafetyPolicy(
            max_percent=s.max_nodes_in_recovery_percent,
            max_nodes=s.max_nodes_in_recovery,
            breaker_max_recoveries=s.breaker_max_recoveries,
            breaker_max_failures=s.breaker_max_failures,
            breaker_window_seconds=s.breaker_window_seconds,
            offender_max_recoveries=s.repeat_offender_max_recoveries,
            offender_window_seconds=s.repeat_offender_window_seconds,
        )

    @property
    def restart_policy(self) -> RestartPolicy:
        s = self.settings
        return RestartPolicy(
            budget=s.job_restart_budget,
            window_seconds=s.job_restart_window_seconds,
            backoff_seconds=s.job_restart_backoffs[0],
            max_backoff_seconds=s.job_restart_backoffs[1],
            crash_loop_repeats=s.crash_loop_repeats,
            job_failures_per_1000_node_days=s.job_failures_per_1000_node_days,
        )

    @property
    def hang_rules(self) -> HangRules:
        s = self.settings
        return HangRules(
            stall_mode=s.hang_stall_mode,
            stall_factor=s.hang_stall_factor,
            stall_floor_seconds=s.hang_stall_floor_seconds,
            startup_seconds=s.hang_startup_seconds,
            slow_mode=s.hang_slow_mode,
            slow_ratio=s.hang_slow_ratio,
        )

    @property
    def deployment(self) -> Deployment:
        """What a message's commands name besides the incident: the stack and its ledger."""
        return Deployment(stack=self.settings.stack_name, ledger_table=self.settings.ledger_table)

    def execution_url(self, execution_name: str, workflow: str = "node") -> str:
        machine = self.settings.state_machine_arn if workflow == "node" else self.settings.job_state_machine_arn
        execution_arn = machine.replace(":stateMachine:", ":execution:") + f":{execution_name}"
        region = self.settings.region
        return f"https://{region}.console.aws.amazon.com/states/home?region={region}#/v2/executions/details/{execution_arn}"


def build_kube(settings: Settings) -> KubernetesApi | None:
    """EKS: the cluster's Kubernetes API (endpoint and CA from EKS on first use, once EksClusterName is
    checked to be the HyperPod cluster's own; a token minted from the function's own credentials).
    None on Slurm."""
    if settings.orchestrator != "eks":
        return None
    control_plane, hyperpod = EksControlPlane(), HyperPodCluster(settings.cluster_name)
    return KubernetesApi(
        endpoint=lambda: guarded_endpoint(control_plane, settings.eks_cluster_name, hyperpod),
        token=lambda cluster: mint_token(boto3.Session(), cluster, settings.region),
    )


def build_orchestrator(settings: Settings, stepfunctions: StepFunctions, kube: KubeApi | None = None) -> Orchestrator:
    """Slurm: the controller agent, through the command queue. EKS: the commands carried out here,
    against the cluster's Kubernetes API."""
    if settings.orchestrator == "slurm" or kube is None:
        return SlurmAgentOrchestrator(SqsQueue(settings.command_queue_url), stepfunctions)
    return EksOrchestrator(kube, stepfunctions, current_clock())


def build_job_nodes(settings: Settings, kube: KubeApi | None) -> JobNodeSource | None:
    """Slurm: the controller agent's snapshot in the ledger; EKS: the live pods' owners. Only the
    functions that read progress need it."""
    if not settings.progress_table:
        return None
    if settings.orchestrator == "slurm" or kube is None:
        return SlurmJobNodes(settings.ledger_table, settings.cluster_name)
    return EksJobNodes(kube, lambda: current_clock()())


def build_dependencies(settings: Settings) -> Dependencies:
    # One Step Functions adapter serves three ports: starting recoveries, answering tasks, histories.
    stepfunctions = StepFunctions({"node": settings.state_machine_arn, "job": settings.job_state_machine_arn})
    kube = build_kube(settings)
    return Dependencies(
        settings=settings,
        cluster=HyperPodCluster(settings.cluster_name),
        ledger=DynamoLedger(settings.ledger_table),
        orchestrator=build_orchestrator(settings, stepfunctions, kube),
        notifier=SnsNotifier(
            settings.notification_topic_arn,
            chat_topic_arn=settings.chat_topic_arn,
            pager_event_bus=settings.pager_event_bus,
            # (a text cut to fit a channel names the CLI command that shows the whole record)
            deployment=Deployment(stack=settings.stack_name, ledger_table=settings.ledger_table),
        ),
        checkpoints=S3CheckpointStore(),
        workflows=stepfunctions,
        dead_letters=DeadLetterQueue(SqsQueue(settings.intake_dlq_url)),
        history=stepfunctions,
        kube=kube,
        progress=ProgressTable(settings.progress_table) if settings.progress_table else None,
        job_nodes=build_job_nodes(settings, kube),
    )


@lru_cache(maxsize=1)
def default_dependencies() -> Dependencies:
    """Once per cold start: refuse to run with an SDK older than the code needs (sdk_contract.py)."""
    check_sdk_version()
    return build_dependencies(get_settings())


ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_input(model: type[ModelT], event: Any) -> ModelT:
    try:
        return model.model_validate(event)
    except ValidationError as exc:
        raise InvalidStepInput(f"{model.__name__}: {format_validation_error(exc)}") from exc


def requests_dry_run(step: BaseModel) -> bool:
    """The step belongs to a dry run: its request says so (Validate Request folds the stack's
    DryRun into it, so every later step sees it there); for the Record steps, their state does
    (its request, or what its steps said they did when the request did not parse)."""
    request = getattr(step, "request", None)
    if isinstance(request, RecoveryRequest | JobRecoveryRequest):
        return bool(request.dry_run)
    state = getattr(step, "state", None)
    return isinstance(state, WorkflowState | JobWorkflowState) and state.dry_run


def workflow_step(model: type[ModelT]) -> Callable[[Callable[[ModelT, Dependencies], Any]], Callable[..., Any]]:
    """Turn ``fn(step_input, deps) -> model | dict`` into a Lambda handler for one Task state. A
    step of a dry run gets its dependencies behind the dry-run gate: the one place that decides."""

    def decorate(fn: Callable[[ModelT, Dependencies], Any]) -> Callable[..., Any]:
        @logger.inject_lambda_context(correlation_id_path="execution_name", clear_state=True)
        @metrics.log_metrics
        @functools.wraps(fn)
        def handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> Any:
            deps = deps or default_dependencies()
            metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
            step = parse_input(model, event)
            result = fn(step, deps.for_dry_run() if requests_dry_run(step) else deps)
            return result.model_dump(mode="json") if isinstance(result, BaseModel) else result

        return handler

    return decorate
