"""The error taxonomy. Class names ARE the error names Step Functions sees.

Lambda reports an unhandled exception as ``errorType = type(exc).__name__``; the state machine's
Retry and Catch clauses match on those names. tests/contract/test_template.py checks that
every custom name used in statemachines/ exists here, so renaming a class cannot silently break
a Retry or Catch.
"""


class RecoveryError(Exception):
    """Base class: anything the pipeline raises on purpose."""


# --- request and intake -------------------------------------------------------------------
class InvalidRecoveryRequest(RecoveryError):
    """A request or event failed validation; the message names the offending field."""


class StaleEvent(RecoveryError):
    """Every signal of a request is older than MaxEventAgeSeconds (a replay, a redrive, a backlog)
    or stamped further in the future than MaxClockSkewSeconds: not acted on without a human."""


class ForeignClusterEvent(RecoveryError):
    """An event or request names a cluster this stack does not guard."""


class StartExecutionFailed(RecoveryError):
    """StartExecution failed (not for a reused name); intake reports the records for SQS to redeliver,
    and the queue's maxReceiveCount bounds a refusal that retrying will not fix."""


class EveryRecordFailed(RecoveryError):
    """Every record of an SQS batch failed: the invocation fails (Lambda counts an error and
    redelivers the batch) rather than returning every record as a partial failure."""


class QueueUnavailable(RecoveryError):
    """SQS did not take a message (adapters/sqs.py); the caller decides what that means for its step."""


class TaskAnswerFailed(RecoveryError):
    """Step Functions did not take an answer to a waiting task (SendTaskSuccess)."""


class HistoryUnavailable(RecoveryError):
    """An ended execution's history could not be read for now (throttled, unreachable): Reconcile
    Execution's queue delivers the end again rather than settle it blind."""


class NotificationInProgress(RecoveryError):
    """Another delivery of the same end holds the right to send its one notification and has not
    sent it yet: this one is tried again later and sends it itself if the other never did."""


class EndsNotSwept(RecoveryError):
    """The sweep of ended executions could not finish every end it found (or list them all): it
    swept what it could, keeps its mark before the rest, and fails for the alarm to see."""


# --- configuration and contracts ----------------------------------------------------------
class ConfigurationError(RecoveryError):
    """The function's environment is missing or malformed (a deployment bug, never retried)."""


class SdkTooOld(RecoveryError):
    """The AWS SDK the function runs with lacks an operation or response field the code needs (an
    old runtime SDK instead of the layer's): nothing is called, and the incident escalates."""


class InvalidStepInput(RecoveryError):
    """A Lambda received input that does not match its model: a state machine/handler contract bug."""


# --- HyperPod -----------------------------------------------------------------------------
class HyperPodThrottled(RecoveryError):
    """SageMaker throttled a call; safe to retry with backoff."""


class HyperPodUnavailable(RecoveryError):
    """SageMaker returned a server-side error; safe to retry with backoff."""


class HyperPodApiError(RecoveryError):
    """SageMaker rejected a call for a reason retrying will not fix (access, validation)."""


class ClusterNotFound(RecoveryError):
    """The guarded cluster does not exist (deleted, or a wrong ClusterName parameter)."""


class NodeRoleUnknown(RecoveryError):
    """Which instance groups hold the Slurm controller and login nodes cannot be decided safely
    (no SlurmConfig.NodeType and no ControllerGroups, or the two disagree): nothing is touched."""


class UnsupportedOrchestrator(RecoveryError):
    """The cluster's orchestrator is not the one the stack was deployed for, or its EKS cluster is not
    the one the stack's EksClusterName names: nothing is touched, and the message names the redeploy."""


class ReplaceNotInitiated(RecoveryError):
    """BatchReplaceClusterNodes initiated no replacement for any target node."""


class RejoinDeadlineExceeded(RecoveryError):
    """Replacement nodes did not come back Running before the deadline."""


class ReplacementUnhealthy(RecoveryError):
    """A replacement came back but failed the health check (ReplacementHealthCheck) run on it
    before it took jobs: it stays drained, never resumed into the job."""


# --- Kubernetes (EKS-orchestrated clusters; adapters/kubernetes.py) ---------------------------
class KubeObjectGone(RecoveryError):
    """The Kubernetes API has no such object (404): a replaced node's Node object, a deleted job.

    ``named``: the object the 404's Status names in its details (the API server's NotFound for an
    object of a resource it serves: apimachinery errors.NewNotFound); ``resource`` its plural.group.
    None where it names none: the API server's not-found handler answers a group, version or
    resource it does not serve with a bare NotFound (apiserver util/notfoundhandler)."""

    def __init__(self, message: str = "", *, named: str | None = None, resource: str = "") -> None:
        super().__init__(message)
        self.named = named
        self.resource = resource


class KubeConflict(RecoveryError):
    """A conditional write lost a race (409, 422, or the 500 a failed JSON-Patch ``test`` gets on
    older API servers): the object changed since it was read. The caller re-reads and decides again."""


class KubeAlreadyExists(RecoveryError):
    """A create found the name taken (409 AlreadyExists): for a resubmission, it was made already."""


class KubeThrottled(RecoveryError):
    """The API server asked us to slow down (429, or an eviction a PodDisruptionBudget blocks)."""


class KubeUnavailable(RecoveryError):
    """The API server did not answer, or answered 5xx: safe to retry."""


class KubeAccessDenied(RecoveryError):
    """The API server refused who we are (401) or what we asked (403): the stack's access entry or
    the ClusterRole the operator applies (deploy/kubernetes-rbac.yaml) is missing. Never retried."""


class KubeRequestRejected(RecoveryError):
    """The API server rejected a request as malformed (400 and other 4xx): a bug of ours, never retried."""


# --- our own state ------------------------------------------------------------------------
class LedgerUnavailable(RecoveryError):
    """DynamoDB (the ledger) throttled or failed; safe to retry."""


class LedgerError(RecoveryError):
    """DynamoDB rejected a ledger call for a reason retrying will not fix (access, validation)."""


# --- the controller agent -----------------------------------------------------------------
class ControllerChannelError(RecoveryError):
    """A command could not be handed to the orchestrator (on Slurm: queued for the controller agent),
    or its waiting task could not be answered (adapters/slurm_agent.py)."""


class ControllerUnavailable(RecoveryError):
    """The controller agent reported slurmctld unreachable (sent by the agent via SendTaskFailure)."""


class NodeNotFound(RecoveryError):
    """The controller agent does not know a node name (sent by the agent via SendTaskFailure)."""


class InvalidCommand(RecoveryError):
    """The controller agent rejected a malformed command (sent by the agent via SendTaskFailure)."""


class ControllerAgentError(RecoveryError):
    """The controller agent hit something it did not expect (a bug, or Slurm output it cannot read);
    sent by the agent via SendTaskFailure so the workflow escalates instead of waiting."""


# --- notifications ------------------------------------------------------------------------
class NotifierUnavailable(RecoveryError):
    """No channel took a notification (SNS and EventBridge refused or failed every one it goes to);
    nothing went out and the record is already saved, so retrying is safe."""


class NotificationTooLarge(RecoveryError):
    """One channel's payload cannot keep to its limit even with its text cut to nothing (its fixed
    parts alone pass it): that channel is not sent; the others are (adapters/notifier.py)."""


# --- checkpoints --------------------------------------------------------------------------
class CheckpointStoreUnavailable(RecoveryError):
    """S3 throttled or failed while looking for checkpoints; safe to retry."""


class CheckpointUnreadable(RecoveryError):
    """S3 refused to show a job's checkpoints (no bucket, access denied); that job needs a human."""


class NoVerifiedCheckpoint(RecoveryError):
    """An affected job has no checkpoint that verifies complete; a human decides how to restart it."""


class CheckpointCommitRefused(RecoveryError):
    """The checkpoint writer refused to commit a step (nothing written there, or a different manifest
    already commits it); raised to the training script or `hyperpod-recovery checkpoint commit`."""


class CheckpointWriteConflict(RecoveryError):
    """A conditional write lost a race (S3 412 PreconditionFailed / 409 ConditionalRequestConflict):
    another writer changed the object first. The writer re-reads and decides again."""


# --- job recovery -------------------------------------------------------------------------
class JobSpecUnavailable(RecoveryError):
    """slurmctld no longer knows the failed job, so there is no batch script to resubmit it with; on
    EKS, the job object is gone or is another job now, or its re-creation's name is someone else's."""


class OldCopyStillStopping(RecoveryError):
    """On EKS: the old job was told to stop and something of it still runs (its controllers have not
    acted yet, or its pods are Terminating through their grace period): its copy is made only once
    nothing of it runs. The workflow tries Resubmit Job twice more, 45 s apart (its own Retry, no
    jitter: the wait has a floor); past that it escalates, the old job stopped and no copy made."""


class JobNodesNotCarried(RecoveryError):
    """The job runs on more nodes than a workflow carries the names of (1,000), and nothing in the
    incident named them (a hang, a manual request): whether one of its nodes is to blame cannot be
    told here, so nothing is done to it and a human decides."""


class DoNotRequeue(RecoveryError):
    """The job ended with its launcher's "do not requeue" exit code (NVIDIA's resiliency extension:
    93): it is never resubmitted, nor its nodes replaced for it; a human decides."""


class RestartBudgetExhausted(RecoveryError):
    """The job lineage used its restart budget (count within the window); a human looks before more."""


class CrashLoopDetected(RecoveryError):
    """The job failed again without its newest checkpoint moving forward: restarting would loop."""


class NodeRecoveryEscalated(RecoveryError):
    """The node recovery the failed job waited on (nested, or another incident's) escalated."""


class OldJobNotStopped(RecoveryError):
    """The job to resubmit still ran (hung, or on replaced nodes) and did not stop within the
    agent's bound after scancel (an unkillable process, a node that does not answer): nothing was
    submitted, so two copies never run (sent by the agent via SendTaskFailure)."""


class JobNotResubmitted(RecoveryError):
    """A JobRecovery run ended without resubmitting the job and without finding it restarted by
    anyone else (recorded by Record Job Outcome, never raised)."""


class NodeRecoveryNotFinished(RecoveryError):
    """Another incident holding the job's nodes did not finish before the wait deadline."""


# --- outcomes that need a human without any step having raised ----------------------------
class ProtectedNodeUnhealthy(RecoveryError):
    """A controller or login node is unhealthy: the pipeline never acts on those."""


class CircuitBreakerOpen(RecoveryError):
    """The cluster's circuit breaker is open (too many recoveries, or failed ones, in its window):
    nothing destructive happens until a human resets it (``hyperpod-recovery breaker reset``)."""


class ClusterCapReached(RecoveryError):
    """Recovering these nodes would put more of the cluster in recovery at once than the cap allows."""


class RepeatOffender(RecoveryError):
    """A node was recovered too often in its window; it goes to a human instead of being replaced again."""


class TooManyJobs(RecoveryError):
    """More jobs ran on the incident's nodes than one incident carries (MAX_JOBS_PER_INCIDENT): the
    ones past it were counted but not resubmitted."""


class ResubmitFailed(RecoveryError):
    """Some affected jobs could not be resubmitted (each job's error is in the cause); the others were."""


# --- ends recorded by Reconcile Execution (the execution itself never reached Record Outcome) --
class ExecutionAborted(RecoveryError):
    """Someone stopped the execution (StopExecution) before it recorded an outcome."""


class ExecutionFailed(RecoveryError):
    """The execution failed or timed out before it recorded an outcome (an error past its retries,
    States.Runtime, States.DataLimitExceeded, the execution timeout)."""


class NoActionableNodes(RecoveryError):
    """No requested node can be acted on (not in the cluster, or already replaced)."""
