"""The goodput planner's inputs and outputs (``hyperpod-recovery goodput``, docs/goodput.md).

Every input figure says where it came from: ``measured`` (the ledger of a deployed stack, a job's
checkpoint manifests, a fleet-drill report), ``given`` (the command line, a file) or ``default`` (a
stated assumption, with its source). Every output names the model it comes from and that model's
assumptions, as data, so the terminal table, the JSON and the HTML page print the same words.

``PlannerInputs`` is also the file format: a bare object, or any JSON object holding one under
``goodput_inputs`` (what a fleet-drill report embeds). A figure may be written as a bare number
(read as ``given``) or as ``{"value": ..., "provenance": ..., "source": ...}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

Provenance = Literal["measured", "given", "default"]
# The phases of one recovery as the job sees them, in the order they happen. The ledger's incident
# phases map onto them in the goodput readers (docs/goodput.md, "From a deployed stack").
RecoveryPhase = Literal["detect", "cordon", "replace", "rejoin", "health_gate", "restart"]
RECOVERY_PHASES: tuple[RecoveryPhase, ...] = get_args(RecoveryPhase)
# The phases a spare node stands in for: while they run, the failed node's place is empty.
REPAIR_PHASES: tuple[RecoveryPhase, ...] = ("replace", "rejoin", "health_gate")
INPUTS_KEY = "goodput_inputs"  # where a larger report (the fleet drill's) holds the planner's inputs
SOURCE_LIMIT = 300


def _bare_number(value: Any) -> Any:
    """``60`` reads as ``{"value": 60}`` (given); anything else is validated as it is."""
    return {"value": value} if isinstance(value, int | float) and not isinstance(value, bool) else value


# The longest figure taken, in seconds (ten years): beyond it a figure is a typo, and the curves' scales break.
LONGEST_SECONDS = 10 * 365 * 86_400


class Figure(BaseModel):
    """A number and where it came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float = Field(ge=0, le=LONGEST_SECONDS, allow_inf_nan=False)
    provenance: Provenance = "given"
    source: str = Field(default="", max_length=SOURCE_LIMIT)


class NodeCount(BaseModel):
    """A number of nodes and where it came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    value: int = Field(ge=0, le=1_000_000)
    provenance: Provenance = "given"
    source: str = Field(default="", max_length=SOURCE_LIMIT)


class Share(BaseModel):
    """A share between 0 and 1 (a recall, a false-positive rate) and where it came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float = Field(ge=0, le=1, allow_inf_nan=False)
    provenance: Provenance = "given"
    source: str = Field(default="", max_length=SOURCE_LIMIT)


Seconds = Annotated[Figure, BeforeValidator(_bare_number)]
Nodes = Annotated[NodeCount, BeforeValidator(_bare_number)]
Ratio = Annotated[Share, BeforeValidator(_bare_number)]
# A false-positive rate of 1 is a signal that never foresees a failure: verdicts without end for none saved.
MAX_FALSE_POSITIVE = 0.99


class FailureRate(BaseModel):
    """Node failures per 1,000 node-days, given as a rate or as a count over an exposure
    (``failures`` over ``node_days``, e.g. 419 over 2,048 nodes x 54 days)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    per_1000_node_days: float | None = Field(default=None, gt=0, le=1_000_000, allow_inf_nan=False)
    failures: int | None = Field(default=None, ge=1)
    node_days: float | None = Field(default=None, gt=0, le=1e12, allow_inf_nan=False)
    provenance: Provenance = "given"
    source: str = Field(default="", max_length=SOURCE_LIMIT)

    @model_validator(mode="after")
    def _one_way(self) -> FailureRate:
        counted = self.failures is not None or self.node_days is not None
        if counted and (self.failures is None or self.node_days is None):
            raise ValueError("a counted failure rate needs both failures and node_days")
        if counted == (self.per_1000_node_days is not None):
            raise ValueError("give per_1000_node_days, or failures and node_days, not both")
        return self

    @property
    def per_node_day(self) -> float:
        if self.per_1000_node_days is not None:
            return self.per_1000_node_days / 1000
        assert self.failures is not None and self.node_days is not None  # (_one_way)
        # (a count over a tiny exposure, 3 over 5e-324 node-days, is at most what a given rate may be)
        return min(self.failures / self.node_days, 1_000_000 / 1000)

    def described(self) -> str:
        counted = f" ({self.failures} over {self.node_days:,.0f} node-days)" if self.failures is not None else ""
        return f"{self.per_node_day * 1000:.3g} per 1,000 node-days{counted}"


class PlannerInputs(BaseModel):
    """What the planner needs. ``job_sizes``: the jobs (in nodes) to plan for, largest first when
    printed; none given: one job the size of the cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    nodes: Nodes
    failure_rate: FailureRate
    phases_seconds: dict[RecoveryPhase, Seconds]
    checkpoint_interval_seconds: Seconds
    checkpoint_cost_seconds: Seconds
    spare_nodes: Nodes | None = None
    repair_seconds: Seconds | None = None  # how long a failed node's place stays empty (default: its repair phases)
    job_sizes: list[Annotated[int, Field(ge=1, le=1_000_000)]] = Field(default_factory=list, max_length=20)
    gpus_per_node: int = Field(default=8, ge=1, le=64)
    # Planned swaps (docs/goodput.md, "Planned swaps"): the share of failures an enforced at-risk verdict
    # announces (None: none, every failure comes unannounced, as without at-risk signals), how long before
    # the failure, the share of verdicts whose node would not have failed (each costs a swap), the work a
    # swap loses past its checkpoint's commit, and a swap's restart (default: the restart phase).
    precursor_recall: Ratio | None = None
    precursor_lead_seconds: Seconds | None = None
    # The lead times' spread: σ of a lognormal whose median is precursor_lead_seconds (the fleet drill draws
    # them so); None or 0: every lead the same.
    precursor_lead_shape: float | None = Field(default=None, ge=0, le=5, allow_inf_nan=False)
    precursor_false_positive: Ratio | None = None
    swap_lost_seconds: Seconds | None = None
    swap_restart_seconds: Seconds | None = None

    @model_validator(mode="after")
    def _complete_and_sized(self) -> PlannerInputs:
        missing = [phase for phase in RECOVERY_PHASES if phase not in self.phases_seconds]
        if missing:
            raise ValueError(f"phases_seconds lacks {', '.join(missing)}")
        if self.checkpoint_interval_seconds.value <= 0:
            raise ValueError("checkpoint_interval_seconds must be more than 0")
        if self.nodes.value < 1:
            raise ValueError("nodes must be 1 or more")
        too_big = [size for size in self.job_sizes if size > self.nodes.value]
        if too_big:
            raise ValueError(f"job_sizes {too_big} larger than the cluster's {self.nodes.value} nodes")
        if self.precursor_false_positive is not None and self.precursor_false_positive.value > MAX_FALSE_POSITIVE:
            raise ValueError(f"precursor_false_positive must be at most {MAX_FALSE_POSITIVE} (at 1 no verdict foresees a failure)")
        return self

    @property
    def recovery_seconds(self) -> float:
        return sum(figure.value for figure in self.phases_seconds.values())

    @property
    def jobs(self) -> list[int]:
        return sorted(set(self.job_sizes), reverse=True) if self.job_sizes else [self.nodes.value]


# --- outputs ----------------------------------------------------------------------------------------
class Modelled(BaseModel):
    """An output with the model it comes from and what that model assumes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    assumptions: list[str]


class EttrEstimate(Modelled):
    """Effective training time ratio of one job: Daly's exact expectation, and the first-order
    decomposition of what is lost (fractions of wall-clock time)."""

    job_nodes: int
    mttf_hours: float
    failures_per_day: float
    interval_seconds: float
    cost_seconds: float
    recovery_seconds: float
    ettr: float
    first_order_ettr: float
    checkpoint_loss: float  # δ/(τ+δ)
    rework_loss: float  # (τ/2)/M, M of the failures no planned swap foresaw
    recovery_loss: float  # R/M, likewise
    swap_loss: float = 0.0  # planned swaps (foreseen failures and false alarms) x what one costs / M


class PhaseCost(Modelled):
    """One recovery phase: what it costs in ETTR points, and what one minute less of it buys."""

    phase: RecoveryPhase
    seconds: float
    provenance: Provenance
    source: str
    ettr_points: float  # first order: 100 x seconds / M
    minute_less_points: float  # Daly: ETTR with this phase one minute shorter (not below 0) minus ETTR now


class IntervalAdvice(Modelled):
    young_seconds: float
    daly_seconds: float
    best_seconds: float  # the numeric maximum of Daly's ETTR
    ettr_now: float
    ettr_at_best: float


class SparesAdvice(Modelled):
    repair_seconds: float
    repair_provenance: Provenance
    repair_source: str
    expected_in_repair: float  # N x r_f x T_repair
    p99_in_repair: int  # nodes in repair at once, 99th percentile over time
    p99_spares: int  # spares so that 99 % of failures find one free (the failing node needs one too)
    spares_given: int | None
    no_spare_probability: float | None  # with the spares given: the share of failures that find none
    ettr_with_spare: float  # Daly's ETTR when every failure finds a spare: the repair phases leave the recovery


class JobSizeAdvice(Modelled):
    job_nodes: int
    mttf_hours: float
    ettr: float
    wait_seconds: int  # T: a failed node's replacement (its repair phases)
    grow_back_seconds: int  # R: one restart at full size
    action: Literal["shrink", "wait"]
    why: str


SwapAction = Literal["spare", "shrink", "wait_for_replacement", "leave"]  # domain/planned_swap/cost.py's


class PlannedSwaps(Modelled):
    """Planned swaps as the plan counts them: the precursor figures used, the expected-cost rule's decision for
    one verdict (domain/planned_swap/cost.py), and what follows per failure."""

    recall: float
    recall_provenance: Provenance
    lead_seconds: float
    lead_shape: float  # σ of the leads' lognormal spread around lead_seconds (0: every lead the same)
    false_positive: float
    swap_lost_seconds: float
    swap_restart_seconds: float
    action: SwapAction
    decision: str  # the rule's sentence, with its numbers
    before_commit_share: float  # of the foreseen failures, those that come before the next commit
    saved_share: float  # of all failures: foreseen and swapped first (no rework, no detection)
    swaps_per_day: float  # planned swaps, foreseen failures and false alarms together
    false_alarms_per_day: float
    swap_seconds: float  # what one swap costs the job (its wall clock)
    assumed: list[str]  # the precursor figures that are defaults (no published value for GPUs)


class RecallEstimate(BaseModel):
    """ETTR at one recall, the other figures as given, and with the plan's recommended spares and interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    recall: float
    action: SwapAction  # the expected-cost rule's, for a verdict, with the spares and interval given
    ettr: float
    recommended_action: SwapAction
    recommended_ettr: float
    recommended_interval_seconds: float
    recommended_spares: int
    lead_seconds: float  # the other precursor figures, the same on every row (given, or the defaults)
    false_positive: float
    swap_lost_seconds: float


class Ceiling(Modelled):
    """The ETTR one assumption alone would allow (every other loss away): so an assumption is not read as a result."""

    assumption: str  # what is assumed, in words, with its figure
    ettr: float
    points: float  # 100 x (1 - ettr)


ChangeKind = Literal["checkpoint_interval", "spares", "shrink", "detection", "planned_swaps"]


class Change(Modelled):
    """One thing to change, alone, and the ETTR it would buy (Daly's, as the headline's)."""

    kind: ChangeKind
    now: str  # the setting now, in words ("every 30.0 min")
    to: str  # the setting changed to ("every 18.6 min")
    how: str  # where it is changed
    ettr: float
    gain_points: float  # 100 x (ettr - the headline's ETTR)


class CurvePoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    x: float
    ettr: float


class Curve(Modelled):
    x_label: str
    points: list[CurvePoint]
    marked_x: float  # the measured (or given) point
    marked_ettr: float
    best_x: float | None = None  # the interval curve's maximum
    best_ettr: float | None = None


class GoodputPlan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    inputs: PlannerInputs
    ettr: EttrEstimate
    phases: list[PhaseCost]
    interval: IntervalAdvice
    spares: SparesAdvice
    job_sizes: list[JobSizeAdvice]
    changes: list[Change]  # what to change, the most ETTR first
    planned_swaps: PlannedSwaps | None = None  # when the inputs give a recall
    recalls: list[RecallEstimate] = Field(default_factory=list)  # ETTR at several recalls (0 first)
    ceilings: list[Ceiling] = Field(default_factory=list)
    recovery_curve: Curve
    interval_curve: Curve
    warnings: list[str]
