"""The PlannedSwap workflow's payloads (statemachines/planned_swap.asl.json): an enforced at-risk
verdict (models/at_risk.py) moves the job off its node right after the job's next verified
checkpoint commit, then the node is replaced or rebooted.

The workflow only reads until the move: the move itself is a nested NodeRecovery for the node
(trigger ``at_risk``, the job named as the one it moves at once), which claims the node, applies the
caps and the breaker, drains it, stops the old copy before the new one starts, and records the
incident as every recovery does. What the swap decided, with its numbers, is its own record
(``SwapRecord``, in the ledger beside the incident).
"""

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from hyperpod_recovery.models.at_risk import PlannedSwapRequest
from hyperpod_recovery.models.commands import CommandReply, JobSpecResult
from hyperpod_recovery.models.common import JobId, Model, NodeId, SlurmNodeName, StepResult, Timestamp
from hyperpod_recovery.models.node_recovery import StepInput
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest

# What the swap does once the wait is over: move the job (the cost rule's action), replace the node
# of no job, leave the job where it is (the rule, or a dry run that only says), or give up the wait.
SwapAction = Literal["spare", "shrink", "wait_for_replacement", "leave"]
SwapEnding = Literal[
    "move",  # the nested NodeRecovery moves the job (or replaces a node that runs none)
    "leave",  # the expected costs say the job stays on the node
    "no_commit",  # no verified commit within the wait's bound: left to the reactive path
    "node_failed",  # the node failed, or another recovery holds it, before the commit: theirs
    "job_gone",  # the job ended, or left the node, while the swap waited
    "job_unknown",  # which job runs on the node could not be told (no fresh orchestrator reading): nothing done
    "cap_full",  # the cap stayed full through the wait's bound: the verdict waited, then gave up
]
NodeRepair = Literal["reboot", "replace"]


class StartPlannedSwapInput(StepInput):
    request: Any  # whatever start-execution was given: Start Planned Swap names what is wrong with it


class SwapTarget(StepResult):
    """Start Planned Swap's answer ($.swap): the verdict as this execution runs it, its node, and
    the job on it (None: no job runs there, the swap is only the node's repair)."""

    model_config = ConfigDict(extra="forbid")
    request: PlannedSwapRequest  # dry_run: the stack's DryRun folded in
    node_id: NodeId
    node: SlurmNodeName
    instance_group: str = Field(max_length=64)
    repair: NodeRepair
    repair_why: str = Field(max_length=256)
    job_id: JobId | None = None
    # False: which job runs on the node could not be told (no fresh reading): nothing is done.
    jobs_known: bool = True
    # The jobs on the node past the first (a shared node): moved by the same nested recovery, but
    # the wait is for the first one's commit.
    other_jobs: list[JobId] = Field(default_factory=list, max_length=16)
    # For Capture Job Spec (the job's checkpoint location, size, elastic opt-in), when a job runs there.
    job_request: JobRecoveryRequest | None = None
    job_nodes: int = Field(default=0, ge=0)
    wait_until: Timestamp  # the wait's bound (the verdict's horizon, at most MAX_WAIT_SECONDS)
    said: str = Field(max_length=1024)


class CostFigure(Model):
    """One figure the decision used, and where it came from (measured, the verdict, a setting)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=48)
    value: float
    source: str = Field(max_length=160)


class SwapCost(Model):
    """The cost rule's answer (domain/planned_swap/cost.py), as the record keeps it."""

    model_config = ConfigDict(extra="forbid")
    action: SwapAction
    keep_node_seconds: float = Field(ge=0)
    swap_node_seconds: float = Field(ge=0)
    sentence: str = Field(max_length=2048)
    figures: list[CostFigure] = Field(default_factory=list, max_length=24)


class SwapWatch(StepResult):
    """Check Swap Checkpoint's answer ($.watch): the wait for the job's next verified commit."""

    model_config = ConfigDict(extra="forbid")
    checks: int = Field(default=0, ge=0)
    # The newest verified step at the first reading: the commit waited for is a newer one.
    baseline_step: int | None = Field(default=None, ge=0)
    baseline_committed_at: Timestamp | None = None
    # The job's checkpoint period as its commits measure it (manifest times), when two were seen.
    interval_seconds: float | None = Field(default=None, ge=0)
    committed_step: int | None = Field(default=None, ge=0)
    committed_at: Timestamp | None = None  # the manifest's commit time
    seen_at: Timestamp | None = None  # when this workflow read the commit
    done: bool = False
    ending: SwapEnding | None = None
    next_wait_seconds: int = Field(default=0, ge=0)
    reason: str = Field(default="", max_length=2048)
    cost: SwapCost | None = None
    node_request: RecoveryRequest | None = None
    node_execution_name: str | None = Field(default=None, max_length=80)
    node_timeout_seconds: int | None = Field(default=None, ge=1, le=31_536_000)


class WatchedSwap(Model):
    """What Check Swap Checkpoint reads of the execution's state (the rest is left out)."""

    model_config = ConfigDict(extra="ignore")
    swap: SwapTarget
    inspection: CommandReply[JobSpecResult] | None = None
    watch: SwapWatch | None = None


class CheckSwapCheckpointInput(StepInput):
    state: WatchedSwap

    @property
    def swap(self) -> SwapTarget:
        return self.state.swap

    @property
    def inspection(self) -> CommandReply[JobSpecResult] | None:
        return self.state.inspection

    @property
    def watch(self) -> SwapWatch | None:
        return self.state.watch


class SwapState(Model):
    """The execution's state as Record Swap Outcome reads it (lenient: a crash leaves parts out)."""

    model_config = ConfigDict(extra="ignore")
    request: Any = None
    swap: SwapTarget | None = None
    inspection: CommandReply[JobSpecResult] | None = None
    watch: SwapWatch | None = None
    # The nested NodeRecovery's end ($.node_recovery: its outcome and lock), as JobRecovery keeps it.
    node_recovery: dict[Annotated[str, Field(max_length=64)], Any] | None = None
    errors: dict[Annotated[str, Field(max_length=64)], Any] | None = None


class RecordSwapOutcomeInput(StepInput):
    state: SwapState


SwapOutcome = Literal[
    "moved", "node_repaired", "left", "no_commit", "yielded", "job_gone", "job_unknown", "cap_full", "dry_run", "escalated", "rejected"
]


class SwapRecord(Model):
    """What a planned swap did and why, with its numbers: kept in the ledger and sent."""

    model_config = ConfigDict(extra="forbid")
    swap_id: str = Field(max_length=80)  # the execution's name, hps-<verdict id>
    cluster: str = Field(max_length=256)
    verdict_id: str | None = Field(default=None, max_length=128)
    signal: str | None = Field(default=None, max_length=48)
    node_id: NodeId | None = None
    node: SlurmNodeName | None = None
    job_id: JobId | None = None
    outcome: SwapOutcome
    dry_run: bool = False
    summary: str = Field(max_length=4096)
    checkpoint_step: int | None = None
    committed_at: Timestamp | None = None
    seen_at: Timestamp | None = None
    cost: SwapCost | None = None
    nested_incident: str | None = Field(default=None, max_length=80)
    nested_outcome: str | None = Field(default=None, max_length=32)
    observed_at: Timestamp | None = None
    recorded_at: Timestamp
