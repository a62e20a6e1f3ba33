"""An at-risk verdict: a node that has not failed yet, named by a precursor signal (a DCGM alert
through SNS, a CloudWatch alarm, an EKS node event or condition HyperPod does not repair, the
ledger's own history of the node), and what the pipeline does about it.

Each verdict is recorded in the ledger with its evidence; once its horizon has passed, whether the
node failed within it is written beside it, so each signal's precision and recall are measured from
the ledger (``hyperpod-recovery verdicts``). A signal in ``observe`` mode only records; in ``enforce``
mode the verdict starts a planned swap: the job leaves the node right after its next verified
checkpoint commit, and the node is replaced or rebooted (``PlannedSwapRequest``).
"""

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints

from hyperpod_recovery.models.common import Model, NodeId, SlurmNodeName, StrictFlag, Timestamp

# A signal's name: ours (docs/runbook.md lists them) or one a user's alert names by the convention.
SIGNAL_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,47}$"
AtRiskSignal = Annotated[str, StringConstraints(pattern=SIGNAL_NAME_PATTERN)]
SignalMode = Literal["enforce", "observe", "off"]
# Where the verdict came from: an Alertmanager alert (Amazon Managed Service for Prometheus, via
# SNS), a CloudWatch alarm (via SNS or EventBridge), a Kubernetes node event or condition that
# carries a fault without a repair (EKS), or the ledger's own node history.
AtRiskSource = Literal["alertmanager", "cloudwatch_alarm", "eks_node_event", "eks_node_condition", "ledger_history"]
# pending: the horizon has not passed; failed: the node failed within it (its incident named);
# not_failed: it did not; swapped: its planned swap's record says it took the node out first (moved,
# node_repaired; not a dry run), so whether it would have failed is unknown (such verdicts count in
# neither precision nor recall). A swap that left the node settles as failed / not_failed.
AtRiskOutcome = Literal["pending", "failed", "not_failed", "swapped"]
MAX_EVIDENCE_CHARS = 1024


class AtRiskVerdict(Model):
    """One signal's conclusion about one node, at one moment (our clock, not the sender's)."""

    model_config = ConfigDict(extra="forbid")
    verdict_id: str = Field(min_length=1, max_length=128)
    signal: AtRiskSignal
    source: AtRiskSource
    mode: SignalMode
    cluster: str = Field(min_length=1, max_length=256)
    instance_id: NodeId
    # The node's name where the orchestrator knows it (Slurm hostname, Kubernetes node name).
    node: SlurmNodeName | None = None
    observed_at: Timestamp
    # How long after observed_at a failure still counts as the signal's hit.
    horizon_seconds: int = Field(ge=60, le=90 * 86400)
    # The chance the node fails within the horizon, as the decision uses it: the signal's measured
    # precision from the ledger when it has enough outcomes, else its configured prior.
    failure_chance: float = Field(ge=0.0, le=1.0)
    failure_chance_from: str = Field(max_length=256)
    # What the sender said, redacted and cut: the alert's labels and annotations, the alarm's reason.
    evidence: str = Field(default="", max_length=MAX_EVIDENCE_CHARS)
    summary: str = Field(max_length=1024)


class PlannedSwapRequest(Model):
    """What an enforced verdict starts: the job on the node leaves it at its next checkpoint commit."""

    model_config = ConfigDict(extra="forbid")
    verdict: AtRiskVerdict
    dry_run: StrictFlag = False


class AtRiskRecord(Model):
    """A verdict as the ledger keeps it (once per signal, node and episode): what was done about it
    and, once known, whether the node failed within the horizon (``hyperpod-recovery verdicts``)."""

    model_config = ConfigDict(extra="forbid")
    verdict: AtRiskVerdict
    # When the sender says the episode began: the same episode repeated is the same record.
    episode_at: Timestamp
    # observe: what would have been done; enforce: the planned swap started (its execution name).
    action: str = Field(max_length=512)
    execution: str | None = Field(default=None, max_length=80)
    outcome: AtRiskOutcome = "pending"
    # failed: the node's incident within the horizon, and when it was detected.
    incident: str | None = Field(default=None, max_length=128)
    failed_at: Timestamp | None = None
    settled_at: Timestamp | None = None


class SignalScore(Model):
    """A signal's settled outcomes in the ledger (swapped and pending verdicts are not counted): its
    measured precision, once there are enough of them (domain/at_risk/judge.py MIN_OUTCOMES)."""

    failed: int = Field(default=0, ge=0)
    not_failed: int = Field(default=0, ge=0)

    @property
    def settled(self) -> int:
        return self.failed + self.not_failed

    @property
    def precision(self) -> float | None:
        return self.failed / self.settled if self.settled else None
