"""The scenario file: the interface every drill, test and benchmark uses (architecture.md).

Nodes are named ``<instance group>:<index>`` ("workers:3"); a job's nodes ``<group>:<a>-<b>``
("workers:0-15"). Times are virtual seconds from the start of the drill.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from hyperpod_recovery_cli.scenario_schema import NODE_REF, SCENARIO_NAME, ExpectSpec, JsonFileError, read_json

_NODE_RANGE = re.compile(r"^(?P<group>[A-Za-z0-9][A-Za-z0-9\-]*):(?P<start>\d+)(?:-(?P<end>\d+))?$")


SLURM_JOB_FIELDS = ("batch", "script_bytes", "comment")
# What a refusal lists of a scenario's problems (pydantic may find hundreds in a mangled file).
MAX_PROBLEMS_SHOWN = 5


class ScenarioError(Exception):
    """The scenario file cannot be run; the message says which field and why."""


# The longest virtual time a scenario may name (a fault's time, an event's age, a replacement's
# length): beyond any drill's, a fleet drill's 54 days included (sandbox/fleet), and far inside what
# the runner's datetimes can add.
MAX_VIRTUAL_SECONDS = 400 * 86_400


class _Strict(BaseModel):
    # NaN and infinity are not times: JSON files written by Python may carry them (NaN, Infinity).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class InstanceGroupSpec(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9\-]{0,62}$")
    type: Literal["Controller", "Login", "Compute"]
    count: int = Field(ge=1, le=6758)
    instance_type: str = "ml.p5.48xlarge"


class KubernetesClusterSpec(_Strict):
    """``kueue``: HyperPod task governance runs (Kueue admits, suspends and un-suspends the jobs that
    name a queue); ``training_operator``: Kubeflow's, whose PyTorchJob CRD has runPolicy.suspend from
    1.7 on (an older one's API server prunes the field and answers 200)."""

    kueue: StrictBool = False
    # The versions Kueue serves its API at (discovery and the Workload API): v0.19.2, what task
    # governance v1.6 packages, serves both; an older Kueue v1beta1 only; one past v1beta1's removal v1beta2 only.
    kueue_versions: list[Literal["v1beta1", "v1beta2"]] = Field(default_factory=lambda: ["v1beta1", "v1beta2"], min_length=1, max_length=2)
    training_operator: Literal["1.6", "1.7"] = "1.7"
    # How HyperPod names the Kubernetes nodes: hyperpod-<instance id> (current clusters), or the
    # instance's private DNS name ip-10-...compute.internal (older ones); either way each node's
    # providerID is HyperPod's aws:///<zone>/sagemaker/cluster/hyperpod-<cluster id>-<instance id>.
    node_names: Literal["hyperpod", "ip"] = "hyperpod"
    # "running": kube-scheduler binds the pods the operator makes to the nodes that take them, and they
    # run a moment later (sandbox/kube/controllers.py _schedule); "stuck": a scheduler that binds nothing
    # (they stay Pending: the job is honestly not running again).
    scheduler: Literal["running", "stuck"] = "running"


class ClusterSpec(_Strict):
    name: str = Field(default="llm-train", pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
    orchestrator: Literal["slurm", "eks"] = "slurm"
    node_recovery: Literal["Automatic", "None"] = "None"
    # Older Slurm clusters do not report SlurmConfig.NodeType; the stack then needs ControllerGroups.
    reports_node_types: StrictBool = True
    # When the nodes were launched (default: a day before the drill starts) and when the cluster's
    # platform software was last updated (UpdateClusterSoftware; ListClusterNodes' LastSoftwareUpdateTime,
    # default: never). hyperpod-recovery preflight reads both to tell whether the cluster was patched
    # for BatchReplaceClusterNodes.
    launched_at: AwareDatetime | None = None
    software_updated_at: AwareDatetime | None = None
    # "Continuous": DescribeCluster says so, and the double publishes "SageMaker HyperPod Cluster
    # Event"s (a replacement's end); None: the default mode, which publishes none.
    node_provisioning_mode: Literal["Continuous"] | None = None
    instance_groups: list[InstanceGroupSpec] = Field(min_length=1)
    # EKS: what else acts on the cluster's training jobs (sandbox/kube/ models both).
    kubernetes: KubernetesClusterSpec = Field(default_factory=KubernetesClusterSpec)

    @model_validator(mode="after")
    def _unique_groups(self) -> ClusterSpec:
        names = [g.name for g in self.instance_groups]
        if len(names) != len(set(names)):
            raise ValueError(f"instance group names must be unique: {names}")
        return self


class CheckpointSpec(_Strict):
    step: int = Field(ge=0)
    damage: Literal["missing_shard", "truncated_shard", "no_manifest", "bad_json"] | None = None
    shards: int = Field(default=4, ge=1, le=64)


class KubernetesErrorSpec(_Strict):
    """``call``: "<verb> <resource>" as the report counts it ("patch nodes"); ``status``: 503 (the
    API server unavailable), 429 (throttled), 409 (a conflict), 403 (access refused)."""

    call: str = Field(pattern=r"^(get|list|patch|create) (nodes|pods|pytorchjobs|hyperpodpytorchjobs)$")
    status: Literal[403, 409, 429, 503]
    times: int = Field(default=1, ge=1, le=100)


class BarePodSpec(_Strict):
    """A pod made by hand with job ``job``'s labels and no owner, on ``node`` ("workers:3")."""

    job: str = Field(pattern=r"^[0-9]{1,10}$")
    node: str


class ElasticPolicySpec(_Strict):
    """A PyTorchJob's elasticPolicy as Kubeflow's CRD spells it (minReplicas/maxReplicas: Worker pods)."""

    minReplicas: int | None = Field(default=None, ge=1, le=10_000)  # (the CRD's field names)
    maxReplicas: int | None = Field(default=None, ge=1, le=10_000)


class KubernetesJobSpec(_Strict):
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


class ProgressSpec(_Strict):
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


class LayoutSpec(_Strict):
    """How the job's checkpoints are written (manifest v1.1's layout, for each copy at its own size):
    ``gpus_per_node`` ranks on each node, ``tensor`` x ``pipeline`` ranks per data-parallel replica."""

    gpus_per_node: int = Field(default=8, ge=1, le=64)
    tensor: int = Field(default=8, ge=1, le=1024)
    pipeline: int = Field(default=1, ge=1, le=1024)
    reshardable: StrictBool = True


class TrainingSpec(_Strict):
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


class JobSpec(_Strict):
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
        if not _NODE_RANGE.fullmatch(self.nodes):
            raise ValueError(f"nodes {self.nodes!r} must look like 'workers:0-15' or 'workers:3'")
        if self.checkpoints and not self.checkpoint_uri:
            raise ValueError("checkpoints need a checkpoint_uri")
        return self


class FaultSpec(_Strict):
    at: float = Field(ge=0, le=MAX_VIRTUAL_SECONDS)
    # hang / slow / pause: what a job that reports progress does (sandbox/progress.py); no event is
    # sent: the detector finds it in the progress its nodes report.
    # hyperpod_hang: HyperPod's own detector says the job hangs (Slurm: its hang agent's event in
    # CloudWatch Logs, through the stack's subscription; EKS: the training operator's HANGING or SLOW
    # fault on a HyperPodPyTorchJob's status). Imported as an observed verdict only.
    # at_risk: a precursor signal for ``node`` (``signal``), delivered ``via`` its real path
    # (sandbox/at_risk.py): an Alertmanager alert or a CloudWatch alarm through SNS to At Risk, or on
    # EKS a node event or condition the real poller reads. Nothing else changes.
    kind: Literal["node_health", "alarm", "job_failed", "drill", "abort", "hang", "slow", "pause", "hyperpod_hang", "at_risk"]
    node: str | None = None
    signal: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,47}$")
    via: Literal["alertmanager", "cloudwatch_alarm", "eks_node_event", "eks_node_condition"] = "alertmanager"
    nodes: list[str] | None = None
    repeat: int = Field(default=0, ge=0, le=1000)  # extra copies of the same event (HyperPod may send several)
    reason: str | None = None
    dry_run: StrictBool | None = None  # drills only: the request's dry_run field
    # Drills only: fields merged into the manual request as sent, to drill validation
    # (e.g. {"node_ids": ["node-7"]} must end as InvalidRecoveryRequest).
    request_overrides: dict[str, Any] | None = None
    # Drills only: the start input exactly as given, instead of a request built from ``node``
    # (a string, a list, a number: what a malformed start-execution sends).
    raw_input: Any = None
    foreign_cluster: StrictBool = False  # the event names another cluster (must be ignored)
    # job_failed (and job drills): the scenario job whose current incarnation fails (after a
    # resubmission, the resubmitted job). ``node``/``nodes`` are then the nodes that went DOWN.
    job: str | None = Field(default=None, pattern=r"^[0-9]{1,10}$")
    job_state: Literal["FAILED", "NODE_FAIL", "TIMEOUT"] = "FAILED"
    exit_code: int | None = Field(default=None, ge=0, le=255)  # default: 1 for FAILED, 0 otherwise
    requeued_by_slurm: StrictBool = False  # Slurm requeued the job itself (the event still arrives)
    # Progress before the failure: the job wrote this (complete) checkpoint first.
    checkpoint_step: int | None = Field(default=None, ge=0)
    # The event's own time stamp is this many seconds before it is delivered at ``at``: a replay,
    # a redrive or a backlog (negative: stamped in the future, a wrong clock). Events only.
    event_age_seconds: float = Field(default=0.0, ge=-MAX_VIRTUAL_SECONDS, le=MAX_VIRTUAL_SECONDS)
    # abort: an operator's StopExecution of the n-th execution the drill started (1 = the first,
    # in start order, nested ones included), wherever it is.
    execution: int | None = Field(default=None, ge=1)
    # hang: how long until it clears by itself (None: never); pause: how long the declared pause
    # lasts (a checkpoint save, by default).
    seconds: float | None = Field(default=None, gt=0, le=MAX_VIRTUAL_SECONDS)
    pause_kind: Literal["checkpoint", "evaluation", "data", "other"] = "checkpoint"
    pause_limit_seconds: int | None = Field(default=None, ge=1, le=86_400)  # what the script declares (default: the library's)
    # hang with a node: that node's rank stopped first; its stack dump is a data loader's (or, with
    # "no_answer", py-spy never answers there; with "secret_in_log", its stack's locals and its last
    # log line hold an AWS secret key and an API token: sandbox/planted.py). reporter_dies: its
    # reporter stops writing too.
    stacks: Literal["data_loader", "no_answer", "secret_in_log"] = "data_loader"
    reporter_dies: StrictBool = False
    factor: float | None = Field(default=None, gt=1, le=10)  # slow: the node's step time over its pace
    # hyperpod_hang: the detector's rule, and on EKS whether the operator found it hanging or slow
    # (HyperPod's Slurm agent only notifies here: a cancel it would make is not modelled).
    hyperpod_rule: str = Field(default="JobHangingDetection", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
    operator_verdict: Literal["hanging", "slow"] = "hanging"

    @property
    def of_progress(self) -> bool:
        return self.kind in ("hang", "slow", "pause")

    @model_validator(mode="after")
    def _has_nodes(self) -> FaultSpec:
        refs = self.node_refs
        if (self.kind == "abort") != (self.execution is not None):
            raise ValueError("'execution' (which execution to stop, 1 = the first started) goes with kind 'abort', and only there")
        if self.kind == "abort":
            if refs or self.job or self.repeat or self.event_age_seconds:
                raise ValueError("an abort names only 'execution'")
            return self
        if (self.kind == "at_risk") != (self.signal is not None):
            raise ValueError("'signal' goes with kind 'at_risk', and an at_risk fault names one")
        if self.kind == "at_risk":
            if not self.node or self.nodes or self.job:
                raise ValueError("an at_risk fault names one 'node' (and its 'signal', 'via')")
            if not NODE_REF.fullmatch(self.node):
                raise ValueError(f"node {self.node!r} must look like 'workers:3'")
            return self
        if self.kind == "hyperpod_hang":
            if not self.job or self.event_age_seconds or self.repeat:
                raise ValueError("a hyperpod_hang fault names 'job' (and 'node', the node whose agent reported it), no repeat or event age")
            return self
        if self.of_progress:
            if not self.job or self.repeat or self.event_age_seconds:
                raise ValueError(f"a {self.kind} fault names 'job' (one reporting progress), and no repeat or event age")
            if (self.kind == "slow") != (self.factor is not None) or (self.kind == "slow" and not self.node):
                raise ValueError("a slow fault names 'node' and 'factor' (and only a slow fault has a factor)")
            if self.kind == "pause" and (self.seconds is None or refs):
                raise ValueError("a pause fault names 'seconds' (how long it lasts) and no node")
            return self
        if self.kind == "job_failed" or (self.kind == "drill" and self.job):
            if not self.job:
                raise ValueError("a job_failed fault needs 'job' (a job id from 'jobs')")
        elif not refs and self.raw_input is None:
            raise ValueError("a fault needs 'node' or 'nodes'")
        elif self.job or self.requeued_by_slurm or self.checkpoint_step is not None or self.exit_code is not None:
            raise ValueError("job, exit_code, requeued_by_slurm and checkpoint_step apply to kind 'job_failed' only")
        for ref in refs:
            if not NODE_REF.fullmatch(ref):
                raise ValueError(f"node {ref!r} must look like 'workers:3'")
        if self.kind == "drill" and self.event_age_seconds:
            raise ValueError("event_age_seconds applies to events, not drills (a drill is stamped when it starts)")
        if self.kind != "drill" and (self.dry_run is not None or self.request_overrides is not None or self.raw_input is not None):
            raise ValueError("dry_run and request_overrides apply to kind 'drill' only (events follow settings.dry_run)")
        return self

    @property
    def node_refs(self) -> list[str]:
        return ([self.node] if self.node else []) + (self.nodes or [])


class ApiErrorSpec(_Strict):
    operation: Literal[
        "BatchReplaceClusterNodes",
        "BatchRebootClusterNodes",
        "ListClusterNodes",
        "DescribeCluster",
        # The ledger (DynamoDB): whole-call errors only, e.g. ProvisionedThroughputExceededException
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    ]
    code: str  # whole-call error (ThrottlingException, ...) or, with node, a per-node ErrorCode
    node: str | None = None
    times: int = Field(default=1, ge=1, le=1000)
    # The first this many matching calls (or calls naming the node) succeed: a later call fails.
    after: int = Field(default=0, ge=0, le=1000)

    @model_validator(mode="after")
    def _ledger_errors_are_whole_call(self) -> ApiErrorSpec:
        if self.operation.startswith("dynamodb:") and (self.node or self.after):
            raise ValueError("a dynamodb error applies to the whole call, from the first: no 'node', no 'after'")
        return self


class LostResponseSpec(_Strict):
    """The function ran, but Step Functions never got its answer (Lambda.ServiceException), or got
    its timeout instead (Sandbox.Timedout: stopped at its Timeout, its work done up to the last call):
    the state's Retry runs it again where a rerun finds its own work. Mutating steps must not act twice."""

    function: str = Field(pattern=r"^[A-Z][A-Za-z]+Function$")  # template.yaml logical id, e.g. ReplaceNodesFunction
    times: int = Field(default=1, ge=1, le=10)
    error: Literal["Lambda.ServiceException", "Sandbox.Timedout"] = "Lambda.ServiceException"
    # False: Lambda failed the invoke before the function ran (Lambda.ServiceException only): none of
    # its work happened, so nothing of it can be read back.
    ran: StrictBool = True

    @model_validator(mode="after")
    def _a_timeout_ran(self) -> LostResponseSpec:
        if not self.ran and self.error != "Lambda.ServiceException":
            raise ValueError("ran: false is a Lambda.ServiceException before the function ran (a timeout ran until it)")
        return self


class LostApiAnswerSpec(_Strict):
    """AWS acted on the pipeline's call, but its answer never came back (a read timeout): botocore
    sends the request again. A start must still be one execution, counted once."""

    operation: Literal["StartExecution"]
    times: int = Field(default=1, ge=1, le=10)


class BehaviourSpec(_Strict):
    replacement_seconds: float = Field(default=600, gt=0, le=MAX_VIRTUAL_SECONDS)
    shutdown_seconds: float = Field(default=45, ge=0, le=MAX_VIRTUAL_SECONDS)
    never_rejoin: list[str] = Field(default_factory=list)
    reboot_fails: list[str] = Field(default_factory=list)  # a reboot leaves these down (the ladder replaces them)
    # What HyperPod's ListClusterNodes shows during a reboot: Pending, or Running all through it
    # (either is possible: nothing documents it). Slurm sees the reboot either way.
    reboot_status: Literal["Pending", "Running"] = "Pending"
    # A replacement's hostname (= Slurm node name) and NodeLogicalId: the node's own (as documented
    # for the hostname; assumed for the logical id), or new ones.
    replacement_hostname: Literal["same", "new"] = "same"
    replacement_logical_id: Literal["kept", "new"] = "kept"
    api_errors: list[ApiErrorSpec] = Field(default_factory=list)
    agent_seconds: float = Field(default=2.0, ge=0, le=MAX_VIRTUAL_SECONDS)
    # Nodes missing from Slurm's configuration: the agent answers NodeNotFound for them.
    missing_in_slurm: list[str] = Field(default_factory=list)
    # sbatch refuses to submit these jobs again (an account closed, a partition gone): job id -> its stderr.
    sbatch_refuses: dict[Annotated[str, Field(pattern=r"^[0-9]{1,10}$")], str] = Field(default_factory=dict)
    agent_down: StrictBool = False
    # The agent is down until this virtual second, then comes back and works through what queued
    # up meanwhile (a command whose task already timed out must not be executed).
    agent_back_at: float | None = Field(default=None, gt=0, le=MAX_VIRTUAL_SECONDS)
    lost_responses: list[LostResponseSpec] = Field(default_factory=list)
    # A Continuous-mode cluster's Cluster Events never reach the stack (a rule disabled, an event
    # lost): the fallback check finds the replacement.
    cluster_events_lost: StrictBool = False
    # Replacements of these nodes come back sick: the health check fails on them.
    unhealthy_replacements: list[str] = Field(default_factory=list)
    # How many of such a node's replacements come back sick, the first ones (None: every one).
    unhealthy_replacement_count: int | None = Field(default=None, ge=1)
    # How long the gate's check runs: ASSUMPTION, an nvidia-smi query plus the step's launch (about 2 s).
    health_check_seconds: float = Field(default=2.0, ge=0, le=MAX_VIRTUAL_SECONDS)
    # EKS: nodes someone cordoned before the drill (kubectl cordon): never uncordoned by us.
    cordoned_before: list[str] = Field(default_factory=list)
    # EKS: errors the Kubernetes API server answers the pipeline's calls with, the next ``times`` calls.
    kubernetes_errors: list[KubernetesErrorSpec] = Field(default_factory=list)
    # EKS, what tenants do: jobs (by id) whose <name>-r1 a tenant made before the drill, annotated as
    # our re-creation of them; hand-made pods carrying a job's labels (no owner) on a node (kubectl
    # debug --copy-to --keep-labels); jobs whose Failed condition will carry a time without a zone.
    kubernetes_impostors: list[str] = Field(default_factory=list)
    kubernetes_bare_pods: list[BarePodSpec] = Field(default_factory=list)
    unreadable_failure_times: list[str] = Field(default_factory=list)
    # Step Functions' "Execution Status Change" events never reach the stack (EventBridge delivers them
    # best effort): every end that did not record itself is left to the sweep of ended executions.
    execution_end_events_lost: StrictBool = False
    lost_api_answers: list[LostApiAnswerSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _agent_down_or_back(self) -> BehaviourSpec:
        if self.agent_down and self.agent_back_at is not None:
            raise ValueError("agent_down (never answers) and agent_back_at (comes back) exclude each other")
        return self


class CapsSpec(_Strict):
    max_percent: float | None = Field(default=None, gt=0, le=100)
    max_nodes: int | None = Field(default=None, ge=1)


class BreakerSpec(_Strict):
    max_recoveries: int | None = Field(default=None, ge=1)
    window_seconds: int | None = Field(default=None, ge=60)
    max_failures: int | None = Field(default=None, ge=1)


class RepeatOffenderSpec(_Strict):
    max_recoveries: int | None = Field(default=None, ge=1)
    window_seconds: int | None = Field(default=None, ge=60)


class JobRestartSpec(_Strict):
    """template.yaml's JobRestart*, CrashLoopRepeats and JobFailuresPer1000NodeDays parameters."""

    budget: int = Field(default=3, ge=0, le=100)
    window_seconds: int = Field(default=86_400, ge=60)
    backoff_seconds: int = Field(default=60, ge=0)
    max_backoff_seconds: int = Field(default=900, ge=0)
    crash_loop_repeats: int = Field(default=2, ge=2, le=100)
    job_failures_per_1000_node_days: float = Field(default=0.57, ge=0, le=100)


class HangSettingsSpec(_Strict):
    """template.yaml's Hang* parameters (unset: the template's defaults)."""

    stall_mode: Literal["enforce", "observe", "off"] | None = None
    stall_factor: float | None = Field(default=None, ge=1.5, le=100)
    stall_floor_seconds: int | None = Field(default=None, ge=30)
    startup_seconds: int | None = Field(default=None, ge=60)
    slow_mode: Literal["enforce", "observe", "off"] | None = None
    slow_ratio: float | None = Field(default=None, ge=0.05, le=10)

    def parameters(self) -> dict[str, str]:
        named = {
            "HangStallMode": self.stall_mode,
            "HangStallFactor": self.stall_factor,
            "HangStallFloorSeconds": self.stall_floor_seconds,
            "HangStartupSeconds": self.startup_seconds,
            "HangSlowMode": self.slow_mode,
            "HangSlowRatio": self.slow_ratio,
        }
        return {name: value if isinstance(value, str) else f"{value:g}" for name, value in named.items() if value is not None}


class ElasticSettingsSpec(_Strict):
    """template.yaml's shrink-and-continue parameters (None: its defaults)."""

    grow_back_seconds: int | None = Field(default=None, ge=0, le=86_400)  # ElasticGrowBackSeconds
    grow_back_grace_seconds: int | None = Field(default=None, ge=0, le=86_400)  # ElasticGrowBackGraceSeconds

    def parameters(self) -> dict[str, str]:
        named = {"ElasticGrowBackSeconds": self.grow_back_seconds, "ElasticGrowBackGraceSeconds": self.grow_back_grace_seconds}
        return {name: str(value) for name, value in named.items() if value is not None}


class SettingsSpec(_Strict):
    dry_run: StrictBool = False
    resume_policy: Literal["immediate", "after_rejoin"] = "immediate"  # template.yaml: ResumePolicy
    replacement_health_check: str | None = None  # template.yaml: ReplacementHealthCheck (None: its default)
    caps: CapsSpec = Field(default_factory=CapsSpec)
    breaker: BreakerSpec = Field(default_factory=BreakerSpec)
    repeat_offender: RepeatOffenderSpec = Field(default_factory=RepeatOffenderSpec)  # unset fields: the template's defaults
    hangs: HangSettingsSpec = Field(default_factory=HangSettingsSpec)
    elastic: ElasticSettingsSpec = Field(default_factory=ElasticSettingsSpec)
    # template.yaml: ExpectedReplacementSeconds (None: its default): what shrink-or-wait expects of a
    # replacement until the cluster has measured ones.
    expected_replacement_seconds: int | None = Field(default=None, ge=60, le=86_400)
    # template.yaml: AtRiskSignals (None: its default, every signal observed), e.g. "row_remap_failure=enforce:0.9:1d".
    at_risk_signals: str | None = Field(default=None, max_length=800)
    poll_seconds: int = Field(default=30, ge=5)
    max_poll_seconds: int = Field(default=60, ge=5)
    rejoin_deadline_seconds: int = Field(default=2700, ge=60)
    reboot_deadline_seconds: int = Field(default=900, ge=60)
    episode_window_seconds: int = Field(default=600, ge=60)
    max_event_age_seconds: int | None = Field(default=None, ge=60)  # None: template.yaml's default
    max_clock_skew_seconds: int | None = Field(default=None, ge=0)
    intake_batch_window_seconds: int = Field(default=5, ge=1, le=300)  # template.yaml: IntakeBatchWindowSeconds
    controller_groups: list[str] = Field(default_factory=list)
    login_groups: list[str] = Field(default_factory=list)
    job_restarts: JobRestartSpec = Field(default_factory=JobRestartSpec)
    # template.yaml: EksClusterName (None: the EKS cluster HyperPod names). Another name is another EKS
    # cluster of the account, whose API answers too (what a stack pointed at the wrong cluster would reach).
    eks_cluster_name: str | None = Field(default=None, pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")


class Scenario(_Strict):
    name: str = Field(pattern=f"^{SCENARIO_NAME.pattern}$")
    description: str = ""
    cluster: ClusterSpec
    jobs: list[JobSpec] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(min_length=1)
    behaviour: BehaviourSpec = Field(default_factory=BehaviourSpec)
    settings: SettingsSpec = Field(default_factory=SettingsSpec)
    # What the drill must show (sandbox/expectations.py); without it, expectations.IMPLICIT.
    expect: ExpectSpec | None = None

    @model_validator(mode="after")
    def _references_exist(self) -> Scenario:
        groups = {g.name: g for g in self.cluster.instance_groups}

        def check(ref: str, where: str) -> None:
            match = _NODE_RANGE.fullmatch(ref)
            if not match:
                raise ValueError(f"{where}: {ref!r} is not a node reference")
            group = groups.get(match.group("group"))
            if group is None:
                raise ValueError(f"{where}: no instance group {match.group('group')!r} (have {sorted(groups)})")
            last = int(match.group("end") or match.group("start"))
            if int(match.group("start")) > last or last >= group.count:
                raise ValueError(f"{where}: {ref!r} is outside group {group.name!r} (count {group.count})")

        for i, job in enumerate(self.jobs):
            check(job.nodes, f"jobs.{i}.nodes")
        for i, fault in enumerate(self.faults):
            for ref in fault.node_refs:
                check(ref, f"faults.{i}")
            if fault.job and fault.job not in {j.id for j in self.jobs}:
                raise ValueError(f"faults.{i}.job: no job {fault.job!r} in jobs")
            if fault.of_progress and next(j for j in self.jobs if j.id == fault.job).progress is None:
                raise ValueError(f"faults.{i}: job {fault.job} does not report progress (jobs.*.progress)")
            if fault.kind == "hyperpod_hang" and self.cluster.orchestrator == "eks":
                if next(j for j in self.jobs if j.id == fault.job).kubernetes.kind != "HyperPodPyTorchJob":
                    raise ValueError(
                        f"faults.{i}: on EKS HyperPod's hang verdicts are its training operator's: job {fault.job} is no HyperPodPyTorchJob"
                    )
            elif fault.kind == "hyperpod_hang" and fault.operator_verdict != "hanging":
                raise ValueError(f"faults.{i}: HyperPod's Slurm hang agent reports hangs only (operator_verdict is EKS's)")
        for ref in self.behaviour.never_rejoin:
            check(ref, "behaviour.never_rejoin")
        for ref in self.behaviour.reboot_fails:
            check(ref, "behaviour.reboot_fails")
        for ref in self.behaviour.missing_in_slurm:
            check(ref, "behaviour.missing_in_slurm")
        for ref in self.behaviour.cordoned_before:
            check(ref, "behaviour.cordoned_before")
        if self.behaviour.cordoned_before and self.cluster.orchestrator != "eks":
            raise ValueError("behaviour.cordoned_before: EKS only (on Slurm, a drain reason says whose it is)")
        if self.behaviour.kubernetes_errors and self.cluster.orchestrator != "eks":
            raise ValueError("behaviour.kubernetes_errors: EKS only")
        if self.cluster.kubernetes != KubernetesClusterSpec() and self.cluster.orchestrator != "eks":
            raise ValueError("cluster.kubernetes: EKS only")
        if self.settings.eks_cluster_name and self.cluster.orchestrator != "eks":
            raise ValueError("settings.eks_cluster_name: EKS only")
        tenants = self.behaviour.kubernetes_impostors + [b.job for b in self.behaviour.kubernetes_bare_pods]
        tenants += self.behaviour.unreadable_failure_times
        if tenants and self.cluster.orchestrator != "eks":
            raise ValueError("behaviour.kubernetes_impostors, kubernetes_bare_pods, unreadable_failure_times: EKS only")
        for job_id in tenants:
            if job_id not in {j.id for j in self.jobs}:
                raise ValueError(f"behaviour: no job {job_id!r} in jobs")
        for i, bare in enumerate(self.behaviour.kubernetes_bare_pods):
            check(bare.node, f"behaviour.kubernetes_bare_pods.{i}.node")
        for i, err in enumerate(self.behaviour.api_errors):
            if err.node:
                check(err.node, f"behaviour.api_errors.{i}.node")
        ids = [j.id for j in self.jobs]
        if len(ids) != len(set(ids)):
            raise ValueError(f"job ids must be unique: {ids}")
        if self.cluster.orchestrator == "eks":
            self._eks_fits()
        else:
            # An EKS job's object in a Slurm scenario would be ignored: nothing on Slurm reads it.
            eks_only = [f"jobs.{i}.kubernetes" for i, job in enumerate(self.jobs) if "kubernetes" in job.model_fields_set]
            if eks_only:
                raise ValueError(f"{', '.join(eks_only)}: EKS only (cluster.orchestrator is {self.cluster.orchestrator!r})")
        return self

    def _eks_fits(self) -> None:
        """What an EKS drill models: worker groups only, jobs named as Kubernetes names them, no Slurm."""
        for group in self.cluster.instance_groups:
            if group.type != "Compute":
                raise ValueError(f"cluster.instance_groups: {group.name!r} is {group.type}; an EKS cluster has worker groups only")
        for i, job in enumerate(self.jobs):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", job.name) or len(job.name) > 55:
                raise ValueError(
                    f"jobs.{i}.name: {job.name!r} is no Kubernetes job name (lowercase DNS-1123, at most 55 to leave room for -r<n>)"
                )
        for i, job in enumerate(self.jobs):
            if job.kubernetes.queue and not self.cluster.kubernetes.kueue:
                raise ValueError(f"jobs.{i}.kubernetes.queue: needs cluster.kubernetes.kueue (Kueue admits from queues)")
        slurm_only = [
            f"faults.{i}" for i, f in enumerate(self.faults) if f.kind == "job_failed" and (f.requeued_by_slurm or f.job_state != "FAILED")
        ]
        slurm_only += ["behaviour.missing_in_slurm"] if self.behaviour.missing_in_slurm else []
        slurm_only += ["behaviour.sbatch_refuses"] if self.behaviour.sbatch_refuses else []
        # A batch script, its size and the job's Slurm comment: nothing on EKS reads them.
        slurm_only += [f"jobs.{i}.{name}" for i, job in enumerate(self.jobs) for name in SLURM_JOB_FIELDS if name in job.model_fields_set]
        if slurm_only:
            raise ValueError(f"{', '.join(slurm_only)}: Slurm only (a Kubernetes job fails as Failed, and nothing requeues it)")


def merge_changes(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, dictionaries key by key (lists are replaced whole)."""
    merged = dict(base)
    for key, value in changes.items():
        merged[key] = merge_changes(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged


def with_changes(base: Scenario, changes: dict[str, Any]) -> Scenario:
    """``base`` as its file says it (what it set, not every default: a Slurm job's default
    Kubernetes object is no Kubernetes object), with ``changes`` merged in: the fault suite's,
    the tests' and the benchmarks' variations of a drill."""
    return Scenario.model_validate(merge_changes(json.loads(base.model_dump_json(exclude_unset=True)), changes))


def expand_range(ref: str) -> list[tuple[str, int]]:
    match = _NODE_RANGE.fullmatch(ref)
    assert match, ref
    start = int(match.group("start"))
    end = int(match.group("end") or start)
    return [(match.group("group"), i) for i in range(start, end + 1)]


def parse_ref(ref: str) -> tuple[str, int]:
    return expand_range(ref)[0]


def load_scenario(path: Path) -> Scenario:
    """The scenario in ``path``; a file that cannot be run is a ScenarioError whose message is one
    printable line naming the file and each field at fault (what `make drill` prints)."""
    try:
        raw = read_json(
            path,
            missing="no such scenario file",
            directory="give a scenario file in it (e.g. events/drills/default.json)",
            unreadable="cannot be read: ",
        )
    except JsonFileError as exc:
        raise ScenarioError(str(exc)) from exc
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()]
        more = len(problems) - MAX_PROBLEMS_SHOWN
        shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        raise ScenarioError(printable_line(f"{path}: invalid scenario: {shown}")) from exc
    except RecursionError as exc:
        raise ScenarioError(f"{path}: nested too deeply to check") from exc


def printable_line(text: str) -> str:
    """Line breaks and other control characters a file's keys or values brought in, escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
