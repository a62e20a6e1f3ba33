"""A hang or fail-slow verdict: what a detector concluded about a running job, from the progress
its nodes report (models/progress.py), and what the pipeline does about it.

Detect Hung Jobs (steps/detect_hung_jobs.py) decides verdicts every minute; each is recorded in the
ledger once per episode (``CLUSTER#<cluster>`` / ``VERDICT#…``). An ``enforce`` verdict also starts a
JobRecovery whose request carries it (``JobRecoveryRequest.hang``); an ``observe`` verdict only
says what it would have done, for an operator to confirm or reject.
"""

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from hyperpod_recovery.models.common import Model, SlurmNodeName, Timestamp
from hyperpod_recovery.models.progress import ProgressJobKey

# The rules a verdict comes from: ours (stall, slow) and each imported detector's (HyperPod's own,
# docs/progress.md "HyperPod's own detectors"): hyperpod_hang, HyperPod's Slurm hung job detection
# (its CloudWatch events); hpto_hang and hpto_slow, the HyperPod training operator's log monitoring
# rules on EKS (a job's HANGING or SLOW fault, which the operator restarts itself).
HangRule = Literal["stall", "slow", "hyperpod_hang", "hpto_hang", "hpto_slow"]
IMPORTED_RULES: tuple[HangRule, ...] = ("hyperpod_hang", "hpto_hang", "hpto_slow")
RuleMode = Literal["enforce", "observe", "off"]
ImportedSource = Literal["hyperpod_hang_detection", "hyperpod_training_operator"]
# Nodes a verdict describes (the job's nodes that report); a larger job is summarized.
MAX_VERDICT_NODES = 64
MAX_SUSPECTS = 8


class NodeProgress(Model):
    """One node's progress as the detector saw it."""

    model_config = ConfigDict(extra="forbid")
    node: SlurmNodeName
    step: int = Field(ge=0)
    # Its last progress: the later of its newest step and its return from a declared pause.
    active_at: Timestamp
    heartbeat_at: Timestamp
    step_seconds: float | None = None
    wait_seconds: float | None = None


class ImportedDetection(Model):
    """What one of HyperPod's own detectors said, as it said it. An imported verdict's step,
    last_progress_at, threshold_seconds and observed_seconds are not measured by us (0, and the
    detection's time): readers show this instead (cli verdicts.py observed_text)."""

    model_config = ConfigDict(extra="forbid")
    source: ImportedSource
    # The detector's own rule: the training operator's logMonitoringConfiguration rule name (from
    # its LogHang_<rule> / LogSlow_<rule> reason); for Slurm, the rule the event names, if any.
    detector_rule: str = Field(default="", max_length=256)
    # What HyperPod did: notify or cancel (Slurm, the documented actions), restarted (the operator).
    taken: str = Field(default="", max_length=64)
    # The detector's evidence, as it wrote it (cut), and where it was read (log stream, condition).
    evidence: str = Field(default="", max_length=1024)
    where: str = Field(default="", max_length=512)


class HangVerdict(Model):
    """A detector's conclusion about one job, at one moment."""

    model_config = ConfigDict(extra="forbid")
    rule: HangRule
    mode: RuleMode
    cluster: str = Field(min_length=1, max_length=256)
    job: ProgressJobKey
    decided_at: Timestamp
    # What identifies the episode: the job's last progress for a stall (the same stall seen again a
    # minute later is the same episode), the job's start for a slowdown (one per run).
    episode_at: Timestamp
    # The job's step and last progress, and the threshold it passed (a stall: seconds without
    # progress; a slowdown: the step time over its baseline).
    step: int = Field(ge=0)
    last_progress_at: Timestamp
    threshold_seconds: float = Field(ge=0)
    observed_seconds: float = Field(ge=0)
    # The job's pace: its recent median step time, and its baseline (a slowdown's ratio).
    step_seconds: float | None = None
    baseline_step_seconds: float | None = None
    # The nodes the detector blames, and why (empty: none named, the job restarts where it was).
    suspects: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_SUSPECTS)
    suspects_why: str = Field(default="", max_length=512)
    nodes: list[NodeProgress] = Field(default_factory=list, max_length=MAX_VERDICT_NODES)
    nodes_reporting: int = Field(default=0, ge=0)
    summary: str = Field(max_length=1024)
    # Set on an imported detector's verdict (rule in IMPORTED_RULES) only.
    imported: ImportedDetection | None = None

    @property
    def reason(self) -> Literal["hung", "slow"]:
        return "slow" if self.rule in ("slow", "hpto_slow") else "hung"


VerdictReview = Literal["open", "confirmed", "rejected"]


class RecordedVerdict(Model):
    """A verdict as the ledger keeps it: what was done about it, and an operator's review."""

    model_config = ConfigDict(extra="forbid")
    verdict: HangVerdict
    # enforce: the JobRecovery started (its execution name); observe: what it would have done.
    action: str = Field(max_length=512)
    execution: str | None = Field(default=None, max_length=80)
    review: VerdictReview = "open"
    reviewed_by: str | None = Field(default=None, max_length=512)
    reviewed_at: Timestamp | None = None
    review_note: Annotated[str, Field(max_length=512)] = ""
