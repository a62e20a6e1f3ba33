"""A job as the controller command protocol describes it: what the workflow knows of a job (JobSpec),
how a plan names it (JobRef), the checkpoint it resumes from (CheckpointRef), and what its owner's
comment may say (a resume choice, our copy mark). The commands and their answers carry these
(models/commands.py, which also exports every name here)."""

import re
from typing import Literal

from pydantic import ConfigDict, Field

from hyperpod_recovery.models.common import JobId, JobNameText, Model, ShortText, SlurmNodeName, StrictFlag
from hyperpod_recovery.models.elastic import ElasticPolicy
from hyperpod_recovery.models.kubernetes import MAX_GRACE_SECONDS_CARRIED, KubeJobRef
from hyperpod_recovery.models.manifest import MAX_FRAMEWORK_CHARS, MAX_JOB_CHARS, CheckpointLayout, manifest_job

# The prefix of every mark we leave: a drain's reason (commands.owner_tag), a copy's comment (CopyMark).
OWNER_TAG_PREFIX = "hyperpod-recovery"

JOB_NAME_LIMIT = MAX_JOB_CHARS  # one rule with the checkpoint manifest


def job_display_name(name: str) -> str:
    """A Slurm job name as the workflow carries it: its first 256 characters (Slurm allows 1024
    bytes), the same rule the checkpoint manifest's ``job`` follows (``manifest_job``). The full name
    stays in the agent's capture and is what a resubmission is given."""
    return manifest_job(name)


MAX_JOB_NODES = 10_000
# The data-parallel degree a resubmitted copy may be told (ResubmitJob.data_parallel).
MAX_RESUME_DATA_PARALLEL = MAX_JOB_NODES * 8

# When a job on a failed node is resubmitted (the stack's ResumePolicy, a job's own choice):
# "immediate": as soon as its nodes are cordoned and its checkpoint is known, so the scheduler can
# start it on idle healthy nodes at once, or on the replacement when it is back (the cordon keeps
# it off the failed node); "after_rejoin": once the replacement is back and resumed.
ResumePolicy = Literal["immediate", "after_rejoin"]
RESUME_POLICIES: tuple[ResumePolicy, ...] = ("immediate", "after_rejoin")
RESUME_COMMENT_KEY = "resume="


def resume_choice_in_comment(comment: str) -> ResumePolicy | None:
    """A job's own resume choice, ``resume=immediate`` or ``resume=after_rejoin`` as one word of its
    comment (beside ``checkpoint=s3://...``); None when the comment makes none, or an unknown one
    (the stack's policy then applies: a typo must not hold a job back)."""
    for token in comment.split():
        if token.startswith(RESUME_COMMENT_KEY):
            value = token.removeprefix(RESUME_COMMENT_KEY)
            return next((policy for policy in RESUME_POLICIES if policy == value), None)
    return None


# Fields at their default are left out of what the agent answers and what the workflow carries:
# a storm's 64 jobs pass through the state three times (found, planned, resubmitted).
def is_none(value: object) -> bool:
    return value is None


def is_false(value: object) -> bool:
    return value is False


# A checkpoint prefix longer than this is not carried (the job is unresumable, and says why).
MAX_CHECKPOINT_URI = 256
CHECKPOINT_URI_PATTERN = r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$"


class CopyMark(Model):
    """``hyperpod-recovery:resubmission-of=<job_id> incident=<incident>``, as a copy's comment starts."""

    model_config = ConfigDict(extra="forbid")
    job_id: JobId
    incident: str = Field(min_length=1, max_length=80)


COPY_MARK_PATTERN = re.compile(rf"^{re.escape(OWNER_TAG_PREFIX)}:resubmission-of=(\S+) incident=(\S+)")


def copy_mark_in_comment(comment: str) -> CopyMark | None:
    """Our resubmission mark at the start of a Slurm comment, or None (none, or one that does not parse)."""
    found = COPY_MARK_PATTERN.match(comment)
    if found is None:
        return None
    try:
        return CopyMark(job_id=found[1], incident=found[2])
    except ValueError:
        return None


# The nodes a hang's verdict names (its suspects, then its nodes): what Capture Job Spec may ask about.
# models/hangs.py MAX_SUSPECTS + MAX_VERDICT_NODES (not imported: the agent loads only the contract
# modules; tests/unit/test_large_jobs.py holds them equal).
MAX_NODES_ASKED = 72


# Who restarts a job when we do not (JobSpec.restarted_by): never us on top of them.
RestartedBy = Literal["hyperpod_auto_resume", "hyperpod_training_operator", "kubeflow"]
RESTARTED_BY_TEXT: dict[str, str] = {
    "hyperpod_auto_resume": "HyperPod's job auto-resume restarts it",
    "hyperpod_training_operator": "the HyperPod training operator restarts it",
    "kubeflow": "the Kubeflow training operator restarts its pods (restartPolicy)",
}


class JobSpec(Model):
    """What the workflow knows about a job: who it is, where its checkpoints are, whether it can be
    resubmitted. Everything needed to resubmit it (script, owner, submission environment, sbatch
    options) is captured and kept on the controller by the agent, referenced by the job id: it never
    travels through the queue or the workflow's state."""

    model_config = ConfigDict(extra="forbid")

    job_id: JobId
    name: str = Field(max_length=JOB_NAME_LIMIT)  # job_display_name(): the first 256 characters
    user: str | None = Field(default=None, max_length=64, exclude_if=is_none)
    partition: str | None = Field(default=None, max_length=128, exclude_if=is_none)
    num_nodes: int = Field(ge=1, le=MAX_JOB_NODES)
    # The job's nodes, as the agent holds them (every one: a grow-back counts them). What travels is
    # bounded apart: a jobs-on-nodes answer leaves them out, and Capture Job Spec's answer carries at
    # most MAX_JOB_NODES_CARRIED (JobSpecResult), a larger job's none.
    nodes: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_JOB_NODES, exclude_if=lambda v: not v)
    # Of the nodes Capture Job Spec asked about (a hang's verdict's: CaptureJobSpec.asked), those the
    # job runs on, when ``nodes`` is not carried: what a large job's hang is judged on.
    asked_held: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_NODES_ASKED, exclude_if=lambda v: not v)
    state: str = Field(max_length=32)
    checkpoint_uri: str | None = Field(default=None, max_length=MAX_CHECKPOINT_URI, pattern=CHECKPOINT_URI_PATTERN, exclude_if=is_none)
    # Jobs someone else restarts (Slurm: launched with `srun --auto-resume=1`, HyperPod restarts
    # them; EKS: see ``restarted_by``): never resubmitted by us.
    auto_resume: StrictFlag = Field(default=False, exclude_if=is_false)
    # Who restarts it, when not us (EKS: the HyperPod training operator, HyperPod's job auto-resume,
    # Kubeflow's own restart policy); None on Slurm, where auto_resume says it.
    restarted_by: RestartedBy | None = Field(default=None, exclude_if=is_none)
    # EKS: the job object (``job_id`` is its uid; ``name`` the name its checkpoints are written under).
    kube: KubeJobRef | None = Field(default=None, exclude_if=is_none)
    # EKS: the longest terminationGracePeriodSeconds of its pod templates (Kubernetes' 30 where unset):
    # how long its pods may run on once it is stopped (domain/jobs/eks_grace.py). None on Slurm.
    stop_grace_seconds: int | None = Field(default=None, ge=0, le=MAX_GRACE_SECONDS_CARRIED, exclude_if=is_none)
    # The owner's own choice of when to resubmit it (its comment's resume=...); None: the stack's.
    resume: ResumePolicy | None = Field(default=None, exclude_if=is_none)
    # Why the agent could not capture the job faithfully (an array or heterogeneous job, an salloc
    # allocation, an unknown owner...): decided before anything is sent, never resubmitted.
    unresumable: ShortText | None = Field(default=None, exclude_if=is_none)
    # The owner's own submission opted in to progress monitoring (its environment names the progress
    # table, models/progress.py): what a hang verdict needs before anything is done to the job, since
    # anyone on the cluster can write a progress report under any job's id.
    reports_progress: StrictFlag = Field(default=False, exclude_if=is_false)
    # Shrink-and-continue (models/elastic.py): how far the job may shrink when no spare fits it; None:
    # rigid (it waits for its replacement). ``elastic_problem``: an opt-in that could not be read.
    elastic: ElasticPolicy | None = Field(default=None, exclude_if=is_none)
    elastic_problem: ShortText | None = Field(default=None, exclude_if=is_none)
    # Nodes that could take the job at once when it was captured (Slurm: idle, not drained, responding,
    # in its partition; after the cordon, so never the failed ones). None: not counted (an older agent).
    spare_nodes: int | None = Field(default=None, ge=0, le=MAX_JOB_NODES, exclude_if=is_none)
    # How many of the job's nodes the cordon took (the incident's nodes it ran on). None: not counted.
    lost_nodes: int | None = Field(default=None, ge=0, le=MAX_JOB_NODES, exclude_if=is_none)
    # What the job's comment says it is a copy of (our resubmission mark at its start): the owner could
    # have written it, so it is only a lead; the ledger's claim by that incident on that job is proof
    # (steps/find_newest_checkpoint.py lineage_nodes).
    copy_of: CopyMark | None = Field(default=None, exclude_if=is_none)


def left_alone_reason(job: JobSpec) -> str:
    """Why a job someone else restarts is left alone, naming who."""
    if job.restarted_by is not None:
        return RESTARTED_BY_TEXT[job.restarted_by]
    return "uses srun --auto-resume=1: HyperPod restarts it itself"


class JobRef(Model):
    """A job as a plan names it: the agent holds the rest, the ledger its description."""

    model_config = ConfigDict(extra="forbid")

    job_id: JobId
    name: JobNameText  # for people: the first 64 characters
    # EKS: the job object to re-create (Resubmit Job reads it from here; the agent keeps Slurm's).
    kube: KubeJobRef | None = Field(default=None, exclude_if=is_none)


class CheckpointRef(Model):
    model_config = ConfigDict(extra="forbid")

    uri: str = Field(max_length=MAX_CHECKPOINT_URI + 32)  # s3://bucket/prefix/step-000012000/
    step: int = Field(ge=0)
    # As long as a manifest may name it: a longer limit here made a valid checkpoint crash discovery.
    framework: str | None = Field(default=None, max_length=MAX_FRAMEWORK_CHARS, exclude_if=is_none)
    # Manifest v1.1: the world size and parallel layout it was written at, and whether it reshards
    # (loads at another data-parallel width). None: v1, or a checkpoint found without our manifest.
    layout: CheckpointLayout | None = Field(default=None, exclude_if=is_none)
