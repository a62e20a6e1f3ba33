"""The jobs' side of a NodeRecovery: the plan Find Newest Checkpoint makes for each affected job
(which checkpoint, now or after the rejoin, at what size, or why not), and the grow-back of the
jobs it shrank. Importable from models.node_recovery as well (the workflow's state holds them)."""

from typing import Literal, Self

from pydantic import ConfigDict, Field, model_validator

from hyperpod_recovery.models.commands import (
    CheckpointRef,
    CommandReply,
    JobRef,
    ResubmitResult,
)
from hyperpod_recovery.models.common import (
    MAX_JOBS_PER_INCIDENT,
    JobId,
    JobNameText,
    Model,
    ShortText,
    StepResult,
    StrictFlag,
    Timestamp,
)
from hyperpod_recovery.models.kubernetes import MAX_GRACE_SECONDS_CARRIED


class UnresumableJob(Model):
    model_config = ConfigDict(extra="forbid")
    job_id: JobId
    name: JobNameText
    reason: ShortText


# Shrink-and-continue (domain/elastic/decide.py): an elastic job with no spare that fits it either
# shrinks now or waits for its replacement; with a spare, it runs again at full size at once.
ElasticAction = Literal["full_size", "shrink", "wait"]
EstimateSource = Literal["measured", "parameter"]
# Why (domain/elastic/decide.py elastic_reason renders it from the figures: no free text travels in
# the state, where up to MAX_ELASTIC_DECISIONS plans carry one).
ElasticWhy = Literal[
    "spare_fits",
    "shrink_wins",
    "wait_wins",
    "not_reshardable",
    "layout_refused",
    "below_minimum",
    "opt_in_unreadable",
    "too_many_shrunk",
    "grow_back",
]
# Elastic jobs decided per incident: a further elastic job is treated as rigid (it waits, as always).
MAX_ELASTIC_DECISIONS = 8
# Shrink-and-continue's grow-back (NodeRecovery's Check Shrunk Jobs loop, after the health gate):
# at most this many jobs of one incident run shrunk (a further elastic job waits for its replacement),
# and the loop checks at most this often: each check and each grow-back writes history events, and
# the execution's history is bounded (tests/contract/test_workflow_limits.py).
MAX_SHRUNK_JOBS_PER_INCIDENT = 4
MAX_GROW_BACK_CHECKS = 36


class ElasticDecision(Model):
    """What Find Newest Checkpoint decided for an elastic job, with the figures it decided on (the
    record and the notification say them)."""

    model_config = ConfigDict(extra="forbid")
    action: ElasticAction
    full_nodes: int = Field(ge=1)  # the size it ran at, and grows back to
    nodes: int = Field(ge=1)  # the size it is resubmitted at now (full_nodes unless it shrinks)
    data_parallel: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)  # at ``nodes``
    full_data_parallel: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)
    lost_nodes: int = Field(default=0, ge=0)
    spare_nodes: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    expected_wait_seconds: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    wait_source: EstimateSource | None = Field(default=None, exclude_if=lambda v: v is None)
    grow_back_seconds: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    grow_back_source: EstimateSource | None = Field(default=None, exclude_if=lambda v: v is None)
    min_nodes: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)
    multiple: int | None = Field(default=None, ge=2, exclude_if=lambda v: v is None)
    # The size its lineage ran at, when it runs shrunk already (a copy we made): what it grows back to.
    grow_to: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)
    why: ElasticWhy


class ResumePlan(Model):
    model_config = ConfigDict(extra="forbid")
    job: JobRef
    checkpoint: CheckpointRef
    # The newest checkpoint that did not verify, with why ("step 3000: shard rank3.distcp is missing").
    rejected: list[ShortText] = Field(default_factory=list, max_length=1, exclude_if=lambda v: not v)
    # An elastic job's size now (None: a rigid job, resubmitted at the size it ran at).
    elastic: ElasticDecision | None = Field(default=None, exclude_if=lambda v: v is None)
    # A grow-back (NodeRecovery's Grow Back Jobs): the shrunk copy is stopped only if this many nodes
    # can take the full-size one at once; ``job`` is then the shrunk copy.
    require_free_nodes: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)
    # EKS: its pods may take this long to stop (their terminationGracePeriodSeconds), not less than a
    # re-creation waits for them (domain/jobs/eks_grace.py): it is stopped at once and re-created after the rejoin.
    stop_grace_seconds: int | None = Field(default=None, ge=0, le=MAX_GRACE_SECONDS_CARRIED, exclude_if=lambda v: v is None)
    # Resubmit Jobs Now only stops the job (``stop_grace_seconds``): its plan in ``resumable`` re-creates it.
    stop_only: StrictFlag = Field(default=False, exclude_if=lambda v: not v)


class CheckpointPlan(StepResult):
    """Per affected job, what will happen to it. The jobs' descriptions themselves are kept in the
    ledger (INCIDENT#<id>/JOBS): the state carries only these decisions.

    A resumable job is in one of two lists: ``resume_now`` (NodeRecovery resubmits it before the
    wait for the replacement: Resubmit Jobs Now) or ``resumable`` (resubmitted at the workflow's
    usual point: after the nodes are back in NodeRecovery, after the node recovery in JobRecovery).
    An EKS job whose pods may take longer to stop than a re-creation waits is in ``resumable`` and
    also, as a stop only (``stop_only``), in ``resume_now``: stopped at once, its pods have until the
    rejoin to go. The stops count among the plan's entries (the Maps over both lists share them)."""

    jobs_found: int = Field(default=0, ge=0)
    jobs_omitted: int = Field(default=0, ge=0)  # more jobs ran on the nodes than one incident carries
    resume_now: list[ResumePlan] = Field(default_factory=list, max_length=MAX_JOBS_PER_INCIDENT)
    resumable: list[ResumePlan] = Field(default_factory=list, max_length=MAX_JOBS_PER_INCIDENT)
    unresumable: list[UnresumableJob] = Field(default_factory=list, max_length=MAX_JOBS_PER_INCIDENT)
    left_alone: list[UnresumableJob] = Field(default_factory=list, max_length=MAX_JOBS_PER_INCIDENT)
    # Jobs planned to run shrunk (NodeRecovery's Check Any Shrunk: only then is there a grow-back).
    shrinks: int = Field(default=0, ge=0, le=MAX_SHRUNK_JOBS_PER_INCIDENT, exclude_if=lambda v: v == 0)

    @model_validator(mode="after")
    def _each_job_once(self) -> Self:
        if len(self.resume_now) + len(self.resumable) + len(self.unresumable) + len(self.left_alone) > MAX_JOBS_PER_INCIDENT:
            raise ValueError(f"at most {MAX_JOBS_PER_INCIDENT} jobs are planned in one incident")
        if sum(p.elastic is not None for p in self.planned) > MAX_ELASTIC_DECISIONS:
            raise ValueError(f"at most {MAX_ELASTIC_DECISIONS} elastic decisions are carried in one incident")
        later = {p.job.job_id for p in self.resumable if p.stop_grace_seconds is not None and not p.stop_only}
        for stop in self.early_stops:
            if stop.job.kube is None or stop.job.job_id not in later or stop.elastic is not None:
                raise ValueError(f"a stop only ({stop.job.job_id}) is for an EKS job re-created after the rejoin, at its size")
        if any(p.stop_only for p in self.resumable):
            raise ValueError("a stop only is made at once (resume_now), never after the rejoin")
        return self

    @property
    def planned(self) -> list[ResumePlan]:
        """Every job that will be resubmitted, whenever (a stop only is no resubmission)."""
        return [*(p for p in self.resume_now if not p.stop_only), *self.resumable]

    @property
    def early_stops(self) -> list[ResumePlan]:
        """The jobs Resubmit Jobs Now only stops, each re-created after the rejoin (its plan in ``resumable``)."""
        return [p for p in self.resume_now if p.stop_only]


class StepError(Model):
    """What a Catch puts at $.errors: Step Functions' own {Error, Cause} (each at most 256 / 32,768
    characters in AWS; a resubmission's failure keeps the first 1,000 of its cause in the state)."""

    Error: str = Field(max_length=256)
    Cause: str | None = Field(default=None, max_length=32_768)


class ResubmitFailure(Model):
    """One job's resubmission failed (Resubmit Jobs' Note Resubmit Failure): the other jobs'
    results are kept, so the record says exactly which jobs were resubmitted and which were not."""

    model_config = ConfigDict(extra="forbid")
    job_id: JobId  # (a Slurm job id, or an EKS job object's 36-character uid)
    failure: StepError


# stays: it runs on shrunk; ended: it had ended without the grow-back (never started again); unknown:
# the grow-back failed after it may have stopped the copy.
GrowBackStatus = Literal["waiting", "growing", "grown", "stays", "ended", "unknown"]


class GrowBackJob(Model):
    """One shrunk job's grow-back: its shrunk copy, its first reading (``baseline_step`` at
    ``first_at``), and how it ended: grown (``reply``: the full-size copy), or stays shrunk (``reason``)."""

    model_config = ConfigDict(extra="forbid")
    old_job_id: JobId  # the job that failed
    copy_id: JobId  # its shrunk copy
    # The copy as a human finds it: "job 1002" on Slurm, "PyTorchJob kubeflow/llama-r1" on EKS.
    copy_label: str = Field(max_length=200)
    kind: str | None = Field(default=None, max_length=63, exclude_if=lambda v: v is None)  # EKS: its kind (PyTorchJob)
    name: JobNameText
    nodes: int = Field(ge=1)
    full_nodes: int = Field(ge=1)
    from_step: int = Field(ge=0)
    status: GrowBackStatus = "waiting"
    shrink: ElasticDecision  # the decision it was resubmitted shrunk by
    baseline_step: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    first_at: Timestamp | None = Field(default=None, exclude_if=lambda v: v is None)
    # Its restart, measured: when the shrunk copy was answered submitted, the commit time of its baseline
    # checkpoint (one it wrote itself, after from_step), and the restart's cost in seconds
    # (domain/elastic/estimates.py restart_seconds). None: not measurable (fewer than two checkpoints
    # of the copy, or no manifest time).
    restarted_at: Timestamp | None = Field(default=None, exclude_if=lambda v: v is None)
    baseline_at: Timestamp | None = Field(default=None, exclude_if=lambda v: v is None)
    restart_seconds: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    checkpoint: CheckpointRef | None = Field(default=None, exclude_if=lambda v: v is None)  # growing or grown: from where
    reply: CommandReply[ResubmitResult] | None = Field(default=None, exclude_if=lambda v: v is None)
    failure: str | None = Field(default=None, max_length=256, exclude_if=lambda v: v is None)  # Grow Back Job's error name
    reason: ShortText = ""


class GrowBackState(StepResult):
    """Check Shrunk Jobs' state of every shrunk job, kept at ``$.grow_back`` from one pass to the next.
    ``action``: grow ``next`` now, wait ``wait_seconds`` for a checkpoint, or done. Grow Back Job puts
    its answer at ``answer`` (or its error at ``failure``), which the next check (or the record) folds in."""

    jobs: list[GrowBackJob] = Field(default_factory=list, max_length=MAX_SHRUNK_JOBS_PER_INCIDENT)
    action: Literal["grow", "wait", "done"] = "done"
    next: ResumePlan | None = Field(default=None, exclude_if=lambda v: v is None)
    wait_seconds: int = Field(default=0, ge=0)
    checks: int = Field(default=0, ge=0)
    answer: CommandReply[ResubmitResult] | None = Field(default=None, exclude_if=lambda v: v is None)
    failure: StepError | None = Field(default=None, exclude_if=lambda v: v is None)

    def folded(self) -> Self:
        """The pending answer (or failure) of Grow Back Job applied to the job it grew."""
        if self.answer is None and self.failure is None:
            return self
        jobs = [_fold(job, self.answer, self.failure) if job.status == "growing" else job for job in self.jobs]
        return self.model_copy(update={"jobs": jobs, "answer": None, "failure": None})


def _fold(job: GrowBackJob, answer: CommandReply[ResubmitResult] | None, failure: StepError | None) -> GrowBackJob:
    if failure is not None:
        # The agent may have stopped the copy before the error (a stop that did not end, sbatch refusing):
        # never told as "runs on" without an answer saying nothing was touched.
        why = f"its grow-back failed: {failure.Error}: {failure.Cause or 'no message'}"[:300]
        return job.model_copy(update={"status": "unknown", "failure": failure.Error, "reason": why})
    assert answer is not None
    result = answer.result
    if result.declined:
        return job.model_copy(update={"status": "ended" if result.copy_ended else "stays", "reply": answer, "reason": result.declined})
    if result.already_submitted:
        who = result.submitted_by or "another incident"
        return job.model_copy(update={"status": "stays", "reply": answer, "reason": f"{who} resubmitted job {job.copy_id} meanwhile"})
    if answer.dry_run or not result.new_job_id:
        return job.model_copy(update={"status": "stays", "reply": answer, "reason": "the grow-back submitted no copy"})
    return job.model_copy(update={"status": "grown", "reply": answer})
