"""What every handler shares: the dependency container and the ``workflow_step`` decorator.

A handler is then a few lines: the decorator applies the Powertools decorators, parses the input
model (a malformed input names the bad field), and dumps the result as plain JSON for the state
machine. Tests and the sandbox pass ``deps=`` to inject fakes; Lambda builds the real adapters
once per cold start, each when its step first asks for it (StackDependencies): a handler imports
only the adapters its step uses, and each adapter creates its boto3 client on first use.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Generic, Literal, TypedDict, TypeVar, cast, overload

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ValidationError

from hyperpod_recovery.clock import current_clock
from hyperpod_recovery.config import Settings, get_settings
from hyperpod_recovery.errors import InvalidStepInput
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.sdk_contract import check_sdk_version

# The adapters and the domain's value objects are imported where they are built: a step's cold
# start pays only for what it uses.
if TYPE_CHECKING:
    from hyperpod_recovery.adapters.kubernetes import KubernetesApi
    from hyperpod_recovery.adapters.stepfunctions import StepFunctions
    from hyperpod_recovery.domain.hangs.rules import HangRules
    from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
    from hyperpod_recovery.domain.intake.normalize import GuardedCluster
    from hyperpod_recovery.domain.jobs.job_failure import RestartPolicy
    from hyperpod_recovery.domain.messages.advice import Deployment
    from hyperpod_recovery.domain.policy.safety import SafetyPolicy
    from hyperpod_recovery.ports import (
        AtRiskLedger,
        CheckpointReader,
        Cluster,
        DeadLetterSink,
        ExecutionHistory,
        JobNodeSource,
        KubeApi,
        Ledger,
        Notifier,
        Orchestrator,
        PlannedSwaps,
        ProgressReader,
        TrainingJobs,
        Workflows,
    )
    from hyperpod_recovery.steps.at_risk_verdicts import AtRiskPorts


class RecordPorts(TypedDict):
    """What both workflows' Record steps are given besides their input (steps/record_outcome.py)."""

    ledger: Ledger
    notifier: Notifier
    cluster: str
    escalation_hold: timedelta
    now: datetime
    orchestrator: Literal["slurm", "eks"]
    deployment: Deployment
    stack_dry_run: bool


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
        from hyperpod_recovery.adapters.dry_run import DryRunCluster, DryRunLedger, DryRunOrchestrator

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
        from hyperpod_recovery.adapters.eks_training_jobs import EksTrainingJobs

        return EksTrainingJobs(self.kube) if self.kube is not None else None

    def count_done(self, name: str, value: float) -> None:
        """A count of what a step did to the cluster or the safety state (nodes replaced, the breaker
        opened): 0 in a dry run, which did none of it."""
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=0 if self.dry_run else value)

    @property
    def guarded(self) -> GuardedCluster:
        from hyperpod_recovery.domain.intake.normalize import GuardedCluster

        return GuardedCluster(name=self.settings.cluster_name, arn=self.settings.cluster_arn, orchestrator=self.settings.orchestrator)

    @property
    def lock_ttl(self) -> timedelta:
        return timedelta(seconds=self.settings.lock_ttl_seconds_in_effect)

    @property
    def escalation_hold(self) -> timedelta:
        return timedelta(seconds=self.settings.escalation_hold_seconds)

    @property
    def event_age_limits(self) -> EventAgeLimits:
        from hyperpod_recovery.domain.intake.freshness import EventAgeLimits

        return EventAgeLimits(max_age_seconds=self.settings.max_event_age_seconds, max_skew_seconds=self.settings.max_clock_skew_seconds)

    @property
    def safety_policy(self) -> SafetyPolicy:
        from hyperpod_recovery.domain.policy.safety import SafetyPolicy

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
        from hyperpod_recovery.domain.jobs.job_failure import RestartPolicy

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
        from hyperpod_recovery.domain.hangs.rules import HangRules

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
        from hyperpod_recovery.domain.messages.advice import Deployment

        return Deployment(stack=self.settings.stack_name, ledger_table=self.settings.ledger_table)

    def record_ports(self) -> RecordPorts:
        s = self.settings
        return RecordPorts(
            ledger=self.ledger,
            notifier=self.notifier,
            cluster=s.cluster_name,
            escalation_hold=self.escalation_hold,
            now=self.now(),
            orchestrator=s.orchestrator,
            deployment=self.deployment,
            stack_dry_run=s.dry_run,
        )

    def at_risk_ports(self, *, read_kube: bool = False) -> AtRiskPorts:
        """What At Risk and its tick are given for one run (steps/at_risk_verdicts.py). Built afresh each
        run: the ports hold the run's clock and counts; the adapters they name are built once."""
        from hyperpod_recovery.steps.at_risk_verdicts import AtRiskPorts

        s = self.settings
        return AtRiskPorts(
            ledger=cast("AtRiskLedger", self.ledger),  # (the stack's ledger holds every item family)
            cluster=self.cluster,
            swaps=cast("PlannedSwaps", self.workflows),  # (the Step Functions adapter)
            settings=s.signal_settings,
            cluster_name=s.cluster_name,
            orchestrator=s.orchestrator,
            limits=self.event_age_limits,
            now=self.now(),
            dry_run=s.dry_run,
            history_days=s.at_risk_history_days,
            kube=self.kube if read_kube else None,  # (the tick reads EKS nodes' warning-only conditions and events)
        )

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
    from hyperpod_recovery.adapters.eks import EksControlPlane, guarded_endpoint
    from hyperpod_recovery.adapters.eks_token import mint_token
    from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
    from hyperpod_recovery.adapters.kubernetes import KubernetesApi

    control_plane, hyperpod = EksControlPlane(), HyperPodCluster(settings.cluster_name)
    return KubernetesApi(
        endpoint=lambda: guarded_endpoint(control_plane, settings.eks_cluster_name, hyperpod),
        token=lambda cluster: mint_token(boto3.Session(), cluster, settings.region),
    )


def build_orchestrator(settings: Settings, stepfunctions: StepFunctions, kube: KubeApi | None = None) -> Orchestrator:
    """Slurm: the controller agent, through the command queue. EKS: the commands carried out here,
    against the cluster's Kubernetes API."""
    if settings.orchestrator == "slurm" or kube is None:
        from hyperpod_recovery.adapters.slurm_agent import SlurmAgentOrchestrator
        from hyperpod_recovery.adapters.sqs import SqsQueue

        return SlurmAgentOrchestrator(SqsQueue(settings.command_queue_url), stepfunctions)
    from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator

    return EksOrchestrator(kube, stepfunctions, current_clock())


def build_job_nodes(settings: Settings, kube: KubeApi | None) -> JobNodeSource | None:
    """Slurm: the controller agent's snapshot in the ledger; EKS: the live pods' owners. Only the
    functions that read progress need it."""
    if not settings.progress_table:
        return None
    from hyperpod_recovery.adapters.job_nodes import EksJobNodes, SlurmJobNodes

    if settings.orchestrator == "slurm" or kube is None:
        return SlurmJobNodes(settings.ledger_table, settings.cluster_name)
    return EksJobNodes(kube, lambda: current_clock()())


PortT = TypeVar("PortT")


class built_on_first_use(Generic[PortT]):  # (lower case: a decorator, like property)
    """A port of StackDependencies: built by the decorated method on first use, then kept (like
    functools.cached_property, but a port tests may still set)."""

    def __init__(self, build: Callable[[StackDependencies], PortT]) -> None:
        self.build = build
        self.name = build.__name__

    @overload
    def __get__(self, deps: None, owner: type[Any]) -> built_on_first_use[PortT]: ...
    @overload
    def __get__(self, deps: StackDependencies, owner: type[Any]) -> PortT: ...
    def __get__(self, deps: StackDependencies | None, owner: type[Any]) -> built_on_first_use[PortT] | PortT:
        if deps is None:
            return self
        if self.name not in deps.__dict__:
            ungated = deps.ungated
            deps.__dict__[self.name] = self.build(deps) if ungated is None else ungated.gated(self.name)
        value: PortT = deps.__dict__[self.name]
        return value

    def __set__(self, deps: StackDependencies, value: PortT) -> None:
        deps.__dict__[self.name] = value


class StackDependencies(Dependencies):
    """The stack's own adapters, each built when a step first asks for it and kept for the
    container's life: a handler's cold start imports only the adapters its step calls."""

    def __init__(self, settings: Settings, ungated: StackDependencies | None = None) -> None:
        # (no dataclass __init__: the ports are built on first use)
        self.settings = settings
        self.dry_run = ungated is not None
        self.ungated = ungated  # a dry run's: the stack's own ports, which this one gates

    def for_dry_run(self) -> Dependencies:
        return self if self.dry_run else StackDependencies(self.settings, ungated=self)

    def gated(self, port: str) -> Any:
        """A port as a dry run's step is given it: the one built for the stack, the cluster, the ledger
        and the orchestrator behind the dry-run gate (as Dependencies.for_dry_run does)."""
        from hyperpod_recovery.adapters.dry_run import DryRunCluster, DryRunLedger, DryRunOrchestrator

        gates: dict[str, Callable[[Any], Any]] = {"cluster": DryRunCluster, "ledger": DryRunLedger, "orchestrator": DryRunOrchestrator}
        return gates.get(port, lambda built: built)(getattr(self, port))

    @built_on_first_use
    def stepfunctions(self) -> StepFunctions:
        """One Step Functions adapter serves three ports: starting recoveries, answering tasks, histories."""
        from hyperpod_recovery.adapters.stepfunctions import StepFunctions

        s = self.settings
        return StepFunctions(
            {"node": s.state_machine_arn, "job": s.job_state_machine_arn, "planned_swap": s.planned_swap_state_machine_arn}
        )

    @built_on_first_use
    def cluster(self) -> Cluster:
        from hyperpod_recovery.adapters.hyperpod import HyperPodCluster

        return HyperPodCluster(self.settings.cluster_name)

    @built_on_first_use
    def ledger(self) -> Ledger:
        from hyperpod_recovery.adapters.ledger import DynamoLedger

        return DynamoLedger(self.settings.ledger_table)

    @built_on_first_use
    def kube(self) -> KubeApi | None:
        return build_kube(self.settings)

    @built_on_first_use
    def orchestrator(self) -> Orchestrator:
        return build_orchestrator(self.settings, self.stepfunctions, self.kube)

    @built_on_first_use
    def notifier(self) -> Notifier:
        from hyperpod_recovery.adapters.notifier import SnsNotifier

        s = self.settings
        # (a text cut to fit a channel names the CLI command that shows the whole record)
        return SnsNotifier(
            s.notification_topic_arn, chat_topic_arn=s.chat_topic_arn, pager_event_bus=s.pager_event_bus, deployment=self.deployment
        )

    @built_on_first_use
    def checkpoints(self) -> CheckpointReader:
        from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore

        return S3CheckpointStore()

    @built_on_first_use
    def workflows(self) -> Workflows:
        return self.stepfunctions

    @built_on_first_use
    def history(self) -> ExecutionHistory:
        return self.stepfunctions

    @built_on_first_use
    def dead_letters(self) -> DeadLetterSink:
        from hyperpod_recovery.adapters.sqs import DeadLetterQueue, SqsQueue

        return DeadLetterQueue(SqsQueue(self.settings.intake_dlq_url))

    @built_on_first_use
    def progress(self) -> ProgressReader | None:
        if not self.settings.progress_table:
            return None
        from hyperpod_recovery.adapters.progress import ProgressTable

        return ProgressTable(self.settings.progress_table)

    @built_on_first_use
    def job_nodes(self) -> JobNodeSource | None:
        return build_job_nodes(self.settings, self.kube)


def build_dependencies(settings: Settings) -> Dependencies:
    return StackDependencies(settings)


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
    if state is None:
        return False
    # (only the Record steps carry a state: the other steps need not import both workflows' models)
    from hyperpod_recovery.models.job_recovery import JobWorkflowState
    from hyperpod_recovery.models.node_recovery import WorkflowState

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


CountedFn = Callable[[Any, Any, Dependencies], dict[str, int]]


def counted_run(counts: Mapping[str, str], message: str) -> Callable[[CountedFn], Callable[..., Any]]:
    """Turn ``fn(event, context, deps) -> counts`` into the handler of a scheduled or subscribed
    function (no workflow input): each of ``counts`` (key -> metric name) is emitted every run, a
    zero too (an alarm sees a zero, not a gap), and the counts are logged as ``message``."""

    def decorate(fn: CountedFn) -> Callable[..., Any]:
        @logger.inject_lambda_context(clear_state=True)
        @metrics.log_metrics
        @functools.wraps(fn)
        def handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> dict[str, int]:
            deps = deps or default_dependencies()
            metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
            done = fn(event, context, deps)
            for key, metric in counts.items():
                metrics.add_metric(name=metric, unit=MetricUnit.Count, value=done.get(key, 0))
            logger.info(message, extra=done)
            return done

        return handler

    return decorate
