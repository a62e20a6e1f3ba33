"""A scenario's jobs (sandbox/scenario.py ``jobs``): where they run, their checkpoints, progress
reports, training, and on EKS their Kubernetes objects."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, model_validator

from sandbox.scenario_base import NODE_RANGE, Strict


class CheckpointSpec(Strict):
    step: int = Field(ge=0)
    damage: Literal["missing_shard", "truncated_shard", "no_manifest", "bad_json"] | None = None
    shards: int = Field(default=4, ge=1, le=64)


class ElasticPolicySpec(Strict):
    """A PyTorchJob's elasticPolicy as Kubeflow's CRD spells it (minReplicas/maxReplicas: Worker pods)."""

    minReplicas: int | None = Field(default=None, ge=1, le=10_000)  # (the CRD's field names)
    maxReplicas: int | None = Field(default=None, ge=1, le=10_000)


class KubernetesJobSpec(Strict):
    """On an EKS cluster, the job's object: its kind, namespace, how its replicas restart, and
    whether it opted in to our recovery (annotation hyperpod-recovery.io/recover: "true")."""

    kind: Literal["PyTorchJob", "HyperPodPyTorchJob"] = "PyTorchJob"
    namespace: str = Field(default="kubeflow", max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    restart_policy: Literal["Never", "OnFailure", "Always", "ExitCode"] = "Never"
    recover: StrictBool = True
    # The Kueue LocalQueue it asks to be admitted from (label kueue.x-k8s.io/queue-name; needs cluster.kubernetes.kueue).
    queue: str | None = Field(default=None, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    # Kubeflow's spec.elasticPolicy (min/max Worker replicas): the job may shrink (models/elastic.py).
    elastic_policy: ElasticPolicySpec | None = None
    # Our annotation hyperpod-recovery.io/elastic ("min=12,multiple=4"), for a job without elasticPolicy.
    elastic: str | None = Field(default=None, max_length=64)
    # Its pod template's terminationGracePeriodSeconds (None: Kubernetes' default, 30): how long a
    # deleted pod of it still runs (Terminating) before it is gone.
    termination_grace_seconds: int | None = Field(default=None, ge=0, le=86_400)


class ProgressSpec(Strict):
    """The job's training script reports its progress (hyperpod_recovery.checkpointing.Progress):
    the sandbox writes what its nodes' reporters would, as of each moment the detector reads."""

    step_seconds: float = Field(default=10.0, gt=0, le=3600)  # the job's pace
    step: int = Field(default=1000, ge=0)  # the step it is at when the drill starts
    # Its submission opted in (its environment names the progress table): false, and a report under
    # its id is not trusted.
    opted_in: StrictBool = True
    # Its ranks time their waits in collectives (what names the slowest node of a slowdown).
    reports_waits: StrictBool = True
    # A hostile or misconfigured tenant: its reporters also write rows under this other
    # scenario job's key, from its own nodes, claiming fast steps, fresh progress and a day-long pause.
    forges: str | None = Field(default=None, pattern=r"^[0-9]{1,10}$")
    # Its reporter writes a newer step at most this long after it (the library's PROGRESS_WRITE_SECONDS,
    # 5; 30: a reporter of an earlier version, which wrote at its heartbeat only).
    write_seconds: float = Field(default=5.0, ge=1, le=30)
    # Where in its step the job is as the drill starts (its steps end at k x step_seconds less this).
    step_phase_seconds: float = Field(default=0.0, ge=0, le=3600)


class LayoutSpec(Strict):
    """How the job's checkpoints are written (manifest v1.1's layout, for each copy at its own size):
    ``gpus_per_node`` ranks on each node, ``tensor`` x ``pipeline`` ranks per data-parallel replica."""

    gpus_per_node: int = Field(default=8, ge=1, le=64)
    tensor: int = Field(default=8, ge=1, le=1024)
    pipeline: int = Field(default=1, ge=1, le=1024)
    reshardable: StrictBool = True


class TrainingSpec(Strict):
    """The job keeps training during the drill: every copy of it that runs checkpoints (with the real
    writer) every ``checkpoint_every_seconds`` at full size, ``steps_per_checkpoint`` steps further
    each time; a copy on fewer nodes goes proportionally slower (the global batch kept: sandbox/training.py)."""

    checkpoint_every_seconds: float = Field(default=300.0, ge=10, le=86_400)
    steps_per_checkpoint: int = Field(default=100, ge=1, le=1_000_000)
    # A resubmitted copy's start-up (scheduling, loading the checkpoint) before its first step: what
    # the pipeline measures a restart by (domain/elastic/estimates.py restart_seconds).
    restart_seconds: float = Field(default=0.0, ge=0, le=86_400)
    # A save's length: its shards are written from this long before each commit (a save in progress:
    # no manifest yet, the pointer not moved), the manifest at the commit (Slurm copies).
    save_seconds: float = Field(default=0.0, ge=0, le=3600)


class JobSpec(Strict):
    id: str = Field(pattern=r"^[0-9]{1,10}$")
    name: str = Field(min_length=1, max_length=128)
    nodes: str  # "workers:0-15"
    checkpoint_uri: str | None = Field(default=None, pattern=r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")
    checkpoints: list[CheckpointSpec] = Field(default_factory=list)
    auto_resume: StrictBool = False
    # The size of the job's batch script (the agent keeps it on the controller; it never travels in state).
    script_bytes: int = Field(default=0, ge=0, le=4 * 1024 * 1024)
    # False: an salloc/srun allocation without a batch script, which cannot be submitted again (unresumable).
    batch: StrictBool = True
    # The job's Slurm comment as its owner wrote it (e.g. "resume=after_rejoin": its own resume choice).
    comment: str = Field(default="", max_length=500)
    # Its batch script's own node range (#SBATCH --nodes=MIN-MAX): an elastic opt-in (models/elastic.py).
    node_range: str | None = Field(default=None, pattern=r"^[1-9][0-9]{0,4}-[1-9][0-9]{0,4}$")
    # EKS clusters: the job's Kubernetes object (its name is ``name``: a DNS-1123 name of at most 63).
    kubernetes: KubernetesJobSpec = Field(default_factory=KubernetesJobSpec)
    # The job reports its progress (hang and slowdown detection); None: it does not.
    progress: ProgressSpec | None = None
    # It keeps checkpointing during the drill (a shrunk copy's next checkpoint is what grows it back).
    training: TrainingSpec | None = None
    # What its checkpoints' manifests say: the framework (PyTorch DCP reshards; another does not say
    # it does) and, with ``layout``, manifest v1.1's world size and parallel layout.
    checkpoint_framework: str = Field(default="pytorch-dcp", min_length=1, max_length=64)
    checkpoint_layout: LayoutSpec | None = None

    @model_validator(mode="after")
    def _nodes_syntax(self) -> JobSpec:
        if not NODE_RANGE.fullmatch(self.nodes):
            raise ValueError(f"nodes {self.nodes!r} must look like 'workers:0-15' or 'workers:3'")
        if self.checkpoints and not self.checkpoint_uri:
            raise ValueError("checkpoints need a checkpoint_uri")
        return self
