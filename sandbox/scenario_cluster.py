"""A scenario's cluster (sandbox/scenario.py ``cluster``) and how the doubles around it behave
(``behaviour``: the HyperPod double, the agent, the Kubernetes API, Lambda and AWS answers)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, StrictBool, model_validator

from sandbox.scenario_base import MAX_VIRTUAL_SECONDS, Strict


class InstanceGroupSpec(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9\-]{0,62}$")
    type: Literal["Controller", "Login", "Compute"]
    count: int = Field(ge=1, le=6758)
    instance_type: str = "ml.p5.48xlarge"


class KubernetesClusterSpec(Strict):
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


class ClusterSpec(Strict):
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


class KubernetesErrorSpec(Strict):
    """``call``: "<verb> <resource>" as the report counts it ("patch nodes"); ``status``: 503 (the
    API server unavailable), 429 (throttled), 409 (a conflict), 403 (access refused)."""

    call: str = Field(pattern=r"^(get|list|patch|create) (nodes|pods|pytorchjobs|hyperpodpytorchjobs)$")
    status: Literal[403, 409, 429, 503]
    times: int = Field(default=1, ge=1, le=100)


class BarePodSpec(Strict):
    """A pod made by hand with job ``job``'s labels and no owner, on ``node`` ("workers:3")."""

    job: str = Field(pattern=r"^[0-9]{1,10}$")
    node: str


class ApiErrorSpec(Strict):
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


class LostResponseSpec(Strict):
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


class LostApiAnswerSpec(Strict):
    """AWS acted on the pipeline's call, but its answer never came back (a read timeout): botocore
    sends the request again. A start must still be one execution, counted once."""

    operation: Literal["StartExecution"]
    times: int = Field(default=1, ge=1, le=10)


class BehaviourSpec(Strict):
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
