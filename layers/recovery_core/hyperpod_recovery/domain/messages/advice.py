"""WHAT HAPPENS NEXT, rendered from the incident's record: what the error means, then each job and
each node by what became of it, in the commands of the cluster's own orchestrator with the real
names filled in, ready to paste.

No sentence here speaks of "the job" or "the jobs" in general: a job is named with its fate. A job
with a live copy (resubmitted, requeued, restarted by its owner) is named with its copy and its
state, and the human is told not to start another; a job whose copy may exist (an answer that was
lost) is to be looked for first; only a job with no copy is one to restart, with the checkpoint to
restart it from. A node is given back only if this incident holds it out of service (its own drain
or cordon): never one someone else drained. The per-error text says what went wrong and where to
look; it never says what became of jobs or nodes (the facts below it do).

ERROR_MEANING is the "what happened" of docs/runbook.md's escalation table, said once here;
tests/contract/test_observability.py keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery import errors
from hyperpod_recovery.domain.jobs.eks_jobs import RESUBMITTED_FROM_ANNOTATION
from hyperpod_recovery.domain.messages.kept import CAP_LEFT_ALONE, KEPT_WHY, release_command, show_command
from hyperpod_recovery.domain.record.fate_words import job_step
from hyperpod_recovery.domain.record.locked import locked_nodes
from hyperpod_recovery.models.commands import AGENT_HEARTBEAT_TIMEOUT, owner_tag
from hyperpod_recovery.models.kubernetes import OUR_ANNOTATIONS, QUARANTINE_TAINT_EFFECT, QUARANTINE_TAINT_KEY, node_name_for_instance
from hyperpod_recovery.models.manifest import RESUME_FROM_ENV, RESUME_STEP_ENV
from hyperpod_recovery.vocabulary import error_name

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import IncidentRecord, JobFate, NodeFate

# Where the controller agent keeps what it captured of a job (its batch script, owner, options and
# submission environment), on the controller, root only: agent/hyperpod_recovery_agent/config.py.
CAPTURE_STORE = "/var/lib/hyperpod-recovery-agent/captures"
RESUBMISSION_COMMENT = "hyperpod-recovery:resubmission-of="  # the agent's mark on a copy (its comment's first word)


@dataclass(frozen=True)
class Deployment:
    """What a human's commands must name besides the incident's own facts: the stack and its ledger."""

    stack: str = ""
    ledger_table: str = ""

    def drill(self, instance: str) -> str:
        """A live recovery of one node started by hand (the CLI finds the stack's machines)."""
        return f"hyperpod-recovery drill --stack {self.stack} --node {instance} --live --yes" if self.stack else ""

    def recover_job(self, job_id: str) -> str:
        """A JobRecovery of one Slurm job started by hand: no failure event, so no launcher's verdict
        in it; the job is resubmitted from its newest verified checkpoint, claimed once as always."""
        return f"hyperpod-recovery drill --stack {self.stack} --job {job_id} --live --yes" if self.stack else ""

    def breaker_reset(self, cluster: str) -> str:
        if self.stack:
            return f"hyperpod-recovery breaker reset --stack {self.stack} --reason 'what you checked'"
        table = f" --table {self.ledger_table}" if self.ledger_table else ""
        return f"hyperpod-recovery breaker reset --cluster {cluster}{table} --reason 'what you checked'"

    def record(self, incident_id: str) -> str:
        """The incident's whole record, for what a message had no room for."""
        if self.stack:
            return f"`{self.show(incident_id)}`"
        if not self.ledger_table:
            return "the incident's record in the stack's ledger table"
        key = '{"pk":{"S":"INCIDENT#' + incident_id + '"},"sk":{"S":"RECORD"}}'
        return f"`aws dynamodb get-item --table-name {self.ledger_table} --key '{key}'`"

    # The on-call commands (cli/hyperpod_recovery_cli/oncall.py); empty without the stack's name.
    def show(self, incident_id: str) -> str:
        return show_command(self.stack, incident_id) if self.stack else ""

    def release(self, nodes: Sequence[str]) -> str:
        """Release what an ended incident still holds of its nodes (both identities of each)."""
        return release_command(self.stack, nodes) if self.stack else ""

    def hold(self, node: str) -> str:
        return f"hyperpod-recovery hold {node} --stack {self.stack} --reason 'why'" if self.stack else ""


# Where the runbook says, per error, what happened and what to do (docs/runbook.md's escalation
# table under this heading; tests/contract/test_observability.py keeps the anchor and the rows).
RUNBOOK_ESCALATIONS = "docs/runbook.md#escalations-the-error-says-what-happened"


# --- the orchestrator's own commands ---------------------------------------------------------
class Commands:
    """The commands a human runs on the cluster, per orchestrator: Slurm's on a Slurm cluster."""

    held = "drained"

    def show_job(self, job_id: str, fate: JobFate) -> str:
        return f"squeue -j {job_id}"

    def find_copy(self, fate: JobFate) -> str:
        """A copy our agent submitted carries our mark, naming the job it copies, first in its comment."""
        return f"squeue -h -o '%i %T %k' | grep '{RESUBMISSION_COMMENT}{fate.job} '"

    def show_nodes(self, names: Sequence[str]) -> str:
        return f"sinfo -R -n {','.join(names)}"

    def show_instances(self, cluster: str, instances: Sequence[str]) -> str:
        """Nodes known only by their instance (an event that was never assessed)."""
        return "; ".join(f"aws sagemaker describe-cluster-node --cluster-name {cluster} --node-id {i}" for i in instances)

    def give_back(self, names: Sequence[str]) -> str:
        return f"scontrol update nodename={','.join(names)} state=resume"

    def jobs_on(self, names: Sequence[str]) -> str:
        return f"squeue -w {','.join(names)}"

    def restart(self, fate: JobFate) -> str:
        """How a job with no copy is started again, from its checkpoint when it has one."""
        kept = (
            f"what the agent captured of it (batch script, owner, options) is on the controller, root only: {CAPTURE_STORE}/{fate.job}.json"
        )
        if fate.checkpoint_uri and fate.checkpoint_step is not None:
            return (
                f"resubmit it from step {fate.checkpoint_step} with {RESUME_FROM_ENV}={fate.checkpoint_uri} in its environment "
                f"(`hyperpod-recovery checkpoint verify {fate.checkpoint_uri}` checks that step again; {kept})"
            )
        return f"resubmit it ({kept})" + _steps_of(fate)


class KubernetesCommands(Commands):
    held = "cordoned"

    def show_job(self, job_id: str, fate: JobFate) -> str:
        kind = (fate.kind or "pytorchjob").lower()
        if job_id == fate.job and fate.name:
            return f"kubectl -n {fate.namespace or 'default'} get {kind} {fate.name}"
        if job_id == fate.copy_id and fate.copy_name and fate.namespace:
            return f"kubectl -n {fate.namespace} get {kind} {fate.copy_name}"
        # Known by its uid only: found by it in every namespace.
        return (
            f"kubectl get {kind}s -A -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid | grep {job_id}"
        )

    def find_copy(self, fate: JobFate) -> str:
        kind = (fate.kind or "pytorchjob").lower()
        annotation = RESUBMITTED_FROM_ANNOTATION.replace(".", "\\.")
        return (
            f"kubectl get {kind}s -A -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,FROM:.metadata.annotations."
            f"{annotation} | grep {fate.job}"
        )

    def show_nodes(self, names: Sequence[str]) -> str:
        return f"kubectl describe nodes {' '.join(names)}"

    def show_instances(self, cluster: str, instances: Sequence[str]) -> str:
        return self.show_nodes([node_name_for_instance(i) for i in instances])

    def give_back(self, names: Sequence[str]) -> str:
        # Our marks, as Resume Nodes removes them (domain/nodes/eks_nodes.py): the taint, the annotations,
        # then the cordon; each on its own (kubectl fails on a taint already gone).
        marks = " ".join(f"{a}-" for a in OUR_ANNOTATIONS)
        return "; ".join(
            f"kubectl taint nodes {n} {QUARANTINE_TAINT_KEY}:{QUARANTINE_TAINT_EFFECT}-; kubectl annotate node {n} {marks}; "
            f"kubectl uncordon {n}"
            for n in names
        )

    def jobs_on(self, names: Sequence[str]) -> str:
        return "; ".join(f"kubectl get pods -A --field-selector spec.nodeName={n}" for n in names)

    def restart(self, fate: JobFate) -> str:
        kind = (fate.kind or "pytorchjob").lower()
        where = (
            f"kubectl -n {fate.namespace} get {kind} {fate.name} -o yaml" if fate.name and fate.namespace else self.show_job(fate.job, fate)
        )
        if fate.checkpoint_uri and fate.checkpoint_step is not None:
            return (
                f"re-create it from step {fate.checkpoint_step} (`hyperpod-recovery checkpoint verify {fate.checkpoint_uri}` checks "
                f"that step again): its spec is `{where}`, with {RESUME_FROM_ENV}={fate.checkpoint_uri} and "
                f"{RESUME_STEP_ENV}={fate.checkpoint_step} in its containers' environment"
            )
        return f"re-create it (its spec: `{where}`)" + _steps_of(fate)


def _steps_of(fate: JobFate) -> str:
    """Where to see why no step of a job's checkpoints verified."""
    if not fate.checkpoint_prefix:
        return ""
    return f"; `hyperpod-recovery checkpoint latest {fate.checkpoint_prefix} --json` shows each of its checkpoint steps and what is wrong"


def commands_of(record: IncidentRecord) -> Commands:
    return KubernetesCommands() if record.orchestrator == "eks" else Commands()


# --- what each error means (orchestrator's words filled in) ----------------------------------
_MEANING: dict[type[errors.RecoveryError], str] = {
    errors.ProtectedNodeUnhealthy: (
        "A controller or login node is unhealthy; the pipeline never acts on those. Handle it yourself "
        "(HyperPod cannot replace a Slurm controller)."
    ),
    errors.ReplaceNotInitiated: (
        "HyperPod did not start a replacement (the cause gives its error code). Fix that (capacity, quota, instance state), "
        "then replace the node by hand (`aws sagemaker batch-replace-cluster-nodes --cluster-name {cluster} --node-ids {refused}`)"
        "{drill_or}."
    ),
    errors.ReplacementUnhealthy: (
        "A replacement came back but failed its health check, and was either replaced once more and that one failed too, or "
        "not replaced again (the cause says why, with the checks' output). Two sick replacements in a row point at the check "
        "or the capacity, not one instance: run the check on the node by hand, then replace it again "
        "(`aws sagemaker batch-replace-cluster-nodes --cluster-name {cluster} --node-ids {unhealthy}`), or give it back "
        "(below) if the check was wrong."
    ),
    errors.RejoinDeadlineExceeded: (
        "The replacement did not come back before the deadline, or could not be told apart from other new nodes (the cause "
        "lists the new nodes seen in its instance group). Check it: `aws sagemaker list-cluster-nodes --cluster-name {cluster}` "
        "and the cluster's events."
    ),
    errors.NoVerifiedCheckpoint: (
        "A job has no checkpoint that verifies complete (the cause says why each newest step was rejected), or cannot be "
        "resubmitted as it was; each job below says where to see its checkpoint steps."
    ),
    errors.CrashLoopDetected: (
        "The job failed again without its checkpoint moving forward: fix the job (code, data, or a poisoned checkpoint: "
        "the job below is named with the step it would restart from and the command that shows its checkpoints) before it runs again."
    ),
    errors.RestartBudgetExhausted: (
        "The job used its restart budget on application failures: read its logs; raise JobRestartBudget if the failures are expected."
    ),
    errors.NodeRecoveryEscalated: "The recovery of the job's nodes escalated; its own notification says why. Handle that first.",
    errors.NodeRecoveryNotFinished: "The incident holding the job's nodes did not finish in time: look at it.",
    errors.JobNotResubmitted: (
        "The job recovery ended without resubmitting the job and without finding it restarted by anyone; the timeline shows "
        "the last step it reached."
    ),
    errors.OldJobNotStopped: (
        "The job to resubmit was cancelled but still ran 120 s later (a process SIGKILL does not end, a node that does not "
        "answer): nothing was submitted, so no second copy runs. Look at its nodes; the job's own line below says how to "
        "bring it back once it has ended."
    ),
    errors.DoNotRequeue: (
        "The job's own launcher decided it must not be restarted (NVIDIA's resiliency extension exits 93 for that; the job's "
        "log says why), so the pipeline did not restart it and replaces no node for it (a node fault is repaired through "
        "that node's own health event). If you disagree with the launcher, the job's line below gives the orchestrator's "
        "commands to start it again{recover_job}."
    ),
    errors.OldCopyStillStopping: (
        "The job to re-create was stopped (suspended) but its pods still ran when the workflow's last try came (Terminating "
        "through a grace period longer than the time they had: a job whose pods may take longer to stop than a re-creation "
        "waits is stopped at the start of a node recovery and re-created after the rejoin; or on a node that is not Ready): "
        "nothing was created, so no second copy runs, and the old job stays suspended. Once its pods are gone, un-suspend it "
        "(or, under Kueue, make its Workload active)."
    ),
    errors.JobSpecUnavailable: "The orchestrator no longer knows the job: the pipeline has no spec of it to submit again.",
    # no command here: these two are both orchestrators'; the job's own line below gives its commands
    errors.JobNodesNotCarried: (
        "The job runs on more nodes than a workflow names, and what this incident holds of them could not tell whether one "
        "of its nodes is to blame, so nothing was done to it. Look at the job's nodes for down, drained or "
        "cordoned ones; the job's line below says how to see it and start it again. A hung job still runs: stop it first."
    ),
    errors.ControllerAgentError: (
        "The command could not be answered (on Slurm by the controller agent, on EKS by the function that reads Kubernetes): "
        "a bug, output it cannot read, or, for a job on more than 1,000 nodes, more unhealthy nodes than an answer carries "
        "(256) or none listed at all. Its message is the cause; docs/runbook.md (Escalations) says where to look."
    ),
    errors.RepeatOffender: (
        "This host was recovered too often this week and was not replaced again: replacing it would loop. Look at its hardware "
        "history (rack, cable, switch port); release its lock when handled."
    ),
    errors.ClusterCapReached: (
        "Too much of the cluster is in recovery at once. Wait for the running recoveries, or treat this as a wider outage "
        "(rack, network, AZ) and recover by hand."
    ),
    errors.CircuitBreakerOpen: (
        "Automation is paused for this cluster after too many recoveries or failures. Find out why, then `{breaker_reset}` re-enables it."
    ),
    errors.UnsupportedOrchestrator: (
        "This cluster is not orchestrated as the stack was deployed for (its Orchestrator, on EKS its EksClusterName): nothing "
        "was touched. Redeploy with the values the cause names; recover the node by hand meanwhile."
    ),
    errors.StaleEvent: (
        "The event was replayed, redriven or held in a backlog (or a clock is wrong). Check whether the node is still "
        "unhealthy (`{show_nodes}`){drill_then}."
    ),
    errors.ResubmitFailed: "A resubmission failed: each job below says what became of it, and why.",
    errors.TooManyJobs: (
        "More jobs ran on these nodes than one incident carries; those past the limit were counted, not resubmitted: "
        "`{jobs_on}` lists them."
    ),
    errors.NodeRoleUnknown: (
        "The pipeline cannot tell controller and login nodes from compute nodes on this cluster. Set the stack's "
        "ControllerGroups and LoginGroups parameters to match DescribeCluster, then start the recovery by hand{drill_with}."
    ),
    errors.ExecutionAborted: (
        "Someone stopped the recovery (StopExecution) before it finished; the summary says what it released and what it kept, "
        "and the jobs and nodes below where it stopped."
    ),
    errors.ExecutionFailed: (
        "The recovery died before it finished (an error past its retries, the execution's timeout, a state too large); the "
        "summary says what it released and what it kept, and the jobs and nodes below where it stopped. Report the error."
    ),
}
# Step Functions' own error names for a task's HeartbeatSeconds / TimeoutSeconds, per orchestrator:
# on Slurm the controller agent answers those tasks, on EKS the functions answer their own.
_AGENT_SILENT = (
    "The controller agent on the head node {how}: it is down, stuck, or cannot reach Step Functions. Check it: "
    "`systemctl status hyperpod-recovery-agent` and `hyperpod-recovery-agent check`; the CommandQueueBacklog alarm says "
    "whether commands are piling up."
)
_KUBERNETES_SILENT = (
    "A step that calls the Kubernetes API did not answer in time (a private endpoint unreachable, the API server "
    "overloaded): `kubectl get --raw /readyz` from where the functions run, and the function's log, say which."
)
_TIMEOUTS = {
    AGENT_HEARTBEAT_TIMEOUT: "sent no heartbeat for a minute",
    "States.Timeout": "did not answer in time",
}
ERROR_MEANING = {error_name(error): text for error, text in _MEANING.items()} | {
    name: _AGENT_SILENT.replace("{how}", how) for name, how in _TIMEOUTS.items()
}
GENERIC_MEANING = "Read the error and the timeline below; docs/runbook.md (Escalations) says what each error means."


def error_meaning(record: IncidentRecord, deployment: Deployment) -> str:
    """What the record's error means, with this incident's names filled in."""
    name = record.error or ""
    if record.outcome in ("aborted", "failed"):
        # The execution's own end (a stop, its timeout, a crash): its error is Step Functions', not a step's.
        name = error_name(errors.ExecutionAborted if record.outcome == "aborted" else errors.ExecutionFailed)
    elif name in _TIMEOUTS and record.orchestrator == "eks":
        return _KUBERNETES_SILENT
    text = ERROR_MEANING.get(name, GENERIC_MEANING)
    commands = commands_of(record)
    assessed = [n for n in record.node_fates if n.fate != "skipped"]
    nodes = [n.node for n in assessed] or record.hostnames
    instances = [n.instance for n in assessed if n.instance] or record.nodes
    refused = [n.instance for n in assessed if n.replace_refused and n.instance] or instances
    first = refused[0] if refused else ""
    drill = deployment.drill(first) if first else ""
    # a job is started by hand by its Slurm id only: on EKS the orchestrator's own command, below
    recover = deployment.recover_job(record.job_id) if record.job_id and record.orchestrator != "eks" else ""
    show = commands.show_nodes(nodes) if nodes else commands.show_instances(record.cluster, record.nodes)
    fills = {
        "{cluster}": record.cluster,
        "{refused}": " ".join(refused),
        "{unhealthy}": " ".join(
            n.replacement or n.instance or n.node for n in assessed if n.fate == "out_of_service" and not n.replace_refused
        )
        or " ".join(instances),
        "{breaker_reset}": deployment.breaker_reset(record.cluster),
        "{show_nodes}": show,
        "{jobs_on}": commands.jobs_on(nodes) if nodes else commands.show_instances(record.cluster, record.nodes),
        "{drill_or}": f" or start a recovery with `{drill}`" if drill else "",
        "{drill_then}": f"; if it is, start a recovery by hand with `{drill}`" if drill else "",
        "{drill_with}": f" (`{drill}`)" if drill else "",
        "{recover_job}": f"; or `{recover}` starts a job recovery of it by hand (no exit code in a request: it resubmits from the "
        "newest verified checkpoint)"
        if recover
        else "",
    }
    for key, value in fills.items():
        text = text.replace(key, value)
    if record.outcome in ("aborted", "failed") and record.error:
        text += f" (Step Functions' error: {record.error}.)"
    return text


# --- each job, each node -----------------------------------------------------------------------
def _names(nodes: Sequence[NodeFate]) -> str:
    return ", ".join(n.node for n in nodes)


def node_steps(record: IncidentRecord, commands: Commands) -> list[str]:
    """The nodes left out of service or still being repaired, those with one story told together."""
    steps: list[str] = []
    tag = owner_tag(record.incident_id)
    eks = record.orchestrator == "eks"
    watch = f"`aws sagemaker list-cluster-nodes --cluster-name {record.cluster}`"
    replacing = [n for n in record.node_fates if n.fate == "replacing"]
    for node in replacing:
        new = node.replacement_node or node.replacement
        coming = f"its repair {new} ({node.replacement_status or 'not seen yet'})" if new else "its repair"
        if eks:
            joins = f" It joins as {node.replacement_node}: `kubectl get node {node.replacement_node}`." if node.replacement_node else ""
            kept = f" stays {commands.held} ({tag})" if node.held else ""
            steps.append(f"{node.node}{kept} while {coming} comes up: {watch}.{joins}")
        elif node.held:
            steps.append(
                f"{node.node} stays {commands.held} under {tag} while {coming} comes up: {watch}; when HyperPod shows it "
                f"Running, give it back: `{commands.give_back([node.node])}`."
            )
        else:
            steps.append(f"{node.node}: {coming} comes up ({watch}); it was {commands.held} by someone else, and is left so.")
    held = [n for n in record.node_fates if n.fate == "out_of_service" and n.held]
    by_detail: dict[str, list[NodeFate]] = {}
    for node in held:
        by_detail.setdefault(node.detail, []).append(node)
    for detail, nodes in by_detail.items():
        names = [n.node for n in nodes]
        steps.append(
            f"{_names(nodes)} {'stays' if len(nodes) == 1 else 'stay'} {commands.held} ({detail}): `{commands.show_nodes(names)}`; "
            f"when fixed, give {'it' if len(nodes) == 1 else 'them'} back: `{commands.give_back(names)}`."
        )
    refused_theirs = [n for n in record.node_fates if n.fate == "out_of_service" and not n.held]
    if refused_theirs:
        steps.append(f"{_names(refused_theirs)}: {refused_theirs[0].detail}; {commands.held} by someone else, and left so.")
    unknown = [n for n in record.node_fates if n.fate == "unknown"]
    if unknown:
        names = [n.node for n in unknown]
        steps.append(
            f"{_names(unknown)} may be left {commands.held} under {tag} (the recovery stopped half-way): `{commands.show_nodes(names)}` "
            f"shows whose mark is on {'it' if len(unknown) == 1 else 'each'}; give back only a node carrying {tag}, once it is "
            "healthy (its repair may still be running)."
        )
    steps += left_to_others(record, commands)
    return steps


def left_to_others(record: IncidentRecord, commands: Commands) -> list[str]:
    """The nodes someone else had cordoned or drained, which the recovery left so: a copy that needs one
    waits until they give it back, which no outcome of ours can say is done."""
    eks = record.orchestrator == "eks"
    steps: list[str] = []
    theirs = [n for n in record.node_fates if n.fate == "not_ours"]
    if theirs:
        names = [n.node for n in theirs]
        one = len(theirs) == 1
        left = (
            f"{_names(theirs)} {'is' if one else 'are'} {commands.held} by someone else: left so. A job that needs "
            f"{'it' if one else 'them'} waits until whoever {commands.held} {'it gives it' if one else 'them gives them'} back "
            f"(`{commands.show_nodes(names)}` says why)."
        )
        if eks:  # our taint and marks go on a node cordoned before us too; they come off without its cordon
            marks = " ".join(f"{a}-" for a in OUR_ANNOTATIONS)
            left += (
                f" Our quarantine taint and marks may still be on {'it' if len(names) == 1 else 'them'} (`{commands.show_nodes(names)}`): "
                + "; ".join(
                    f"`kubectl taint nodes {n} {QUARANTINE_TAINT_KEY}:{QUARANTINE_TAINT_EFFECT}-; kubectl annotate node {n} {marks}`"
                    for n in names
                )
                + " remove them and leave the cordon."
            )
        steps.append(left)
    return steps


def needs_a_human(record: IncidentRecord) -> bool:
    """A job of the incident has no copy (or may not have one): whatever the outcome, a human decides."""
    return any(f.fate in ("not_resubmitted", "copy_unknown") for f in record.job_fates)


# SNS takes at most 256 KiB of message: WHAT HAPPENS NEXT keeps to this, the rest is in the record.
NEXT_STEPS_LIMIT = 160_000


def next_steps(record: IncidentRecord, deployment: Deployment, hold_until: datetime | None) -> list[str]:
    """WHAT HAPPENS NEXT, as lines: the verdict or the error's meaning, then each job, then the nodes."""
    commands = commands_of(record)
    jobs = [job_step(f, commands) for f in record.job_fates]
    if record.jobs_omitted:
        nodes = [n.node for n in record.node_fates if n.fate != "skipped"] or record.hostnames
        jobs.append(
            f"{record.jobs_omitted} more job(s) on these nodes were counted, not named or resubmitted: `{commands.jobs_on(nodes)}`."
        )
    if record.outcome == "dry_run":
        lines = ["Nothing to do: this was a drill. The steps above are what a real run would have done.", *jobs]
    elif record.outcome == "rejected":
        lines = ["Nothing to do unless this was unexpected: the cause says what was wrong with the event or request."]
    elif record.outcome in ("recovered", "duplicate") and needs_a_human(record):
        lines = ["Nothing to do for the nodes; a job below has no copy and needs a human.", *jobs]
    elif record.outcome == "recovered":
        checkpoint = (
            " Check that each copy passes its step at its next checkpoint."
            if any(f.fate == "resubmitted" for f in record.job_fates)
            else ""
        )
        theirs = left_to_others(record, commands)
        lead = "Nothing to do for this recovery; a node below is someone else's to give back." if theirs else "Nothing to do."
        lines = [lead + checkpoint, *jobs, *theirs]
    elif record.outcome == "duplicate":
        lines = ["Nothing to do: someone else handled this, or it needed nothing (see the summary).", *jobs]
    elif record.outcome == "recovered_by_itself":
        lines = ["Nothing to do: the job made progress again before anything was done to it.", *jobs]
    else:
        lines = [error_meaning(record, deployment), *jobs, *node_steps(record, commands)]
        if hold_until is not None:
            why = f": {KEPT_WHY}" if record.outcome in ("aborted", "failed") else " so the automation leaves them alone"
            lines.append(f"The nodes stay locked until {hold_until:%Y-%m-%d %H:%M} UTC{why}.")
        if record.outcome == "capped":
            lines += left_alone_steps(record, deployment)
        lines += on_call_steps(record, deployment, locked=hold_until is not None)
    return _bounded(lines, record, deployment)


def left_alone_steps(record: IncidentRecord, deployment: Deployment) -> list[str]:
    """What a node recovery the cap or the breaker stopped left alone, and how to recover its nodes
    once that limit allows (a repeat offender keeps its lock: its own meaning says so)."""
    limits = {error_name(errors.ClusterCapReached): "the cap has room", error_name(errors.CircuitBreakerOpen): "the breaker is reset"}
    if record.workflow != "node" or not record.nodes or record.error not in limits:
        return []
    names = record.hostnames or record.nodes
    one = len(names) == 1
    left = f"{', '.join(names)} {'was' if one else 'were'} left alone, " + CAP_LEFT_ALONE.replace("{them}", "it" if one else "them")
    drill = deployment.drill(record.nodes[0])
    if not drill:
        return [f"{left}."]
    places = f" (`hyperpod-recovery locks --stack {deployment.stack}` shows the places taken)" if "cap" in limits[record.error] else ""
    more = "" if one else f" (one node per command, so each stays under the cap: {', '.join(record.nodes)})"
    it, is_ = ("it", "is") if one else ("them", "are")
    return [f"{left}. If {it} {is_} still unhealthy, recover {it} by hand once {limits[record.error]}{places}: `{drill}`{more}."]


def on_call_steps(record: IncidentRecord, deployment: Deployment, *, locked: bool) -> list[str]:
    """The on-call commands for this incident, with its real names: its record, releasing the locks
    it keeps (only when it keeps them) or holding a node, and the runbook's row for its error."""
    lines = []
    if deployment.stack:
        lines.append(f"This incident's record, timeline and phases: `{deployment.show(record.incident_id)}`.")
        # the nodes this incident locked: not one skipped as another incident's or a human's hold
        theirs = {
            n.instance or n.node for n in record.node_fates if n.fate == "skipped" and n.detail.startswith(("locked_elsewhere", "held"))
        }
        instances, hosts = locked_nodes(record.nodes)  # (a record before 2026-11-29 may list a hostname's lock key)
        ours = [node for node in instances or hosts if node not in theirs]
        # A hostname no node fate pairs with its instance (an execution that ended unrecorded knows its
        # nodes' names, not which is which) is named too: its lock is released by its own name.
        unpaired = [f.node for f in record.node_fates if not f.instance and f.fate != "skipped"]
        ours += [h for h in dict.fromkeys([*hosts, *unpaired]) if h not in ours and ours]
        if locked and ours:
            lines.append(f"When you have handled the nodes, release them early: `{deployment.release(ours)}`.")
        # (a node whose replacement was never seen has no name yet: its line above says where to look)
        gone = {f.node for f in record.node_fates if f.fate == "replacing" and not f.replacement}
        names = [n for n in record.hostnames or record.nodes if n not in gone]
        if names and record.workflow == "node":  # a job's failure is not its nodes' to hold
            lines.append(
                f"To keep the automation away from a node until you say so: `{deployment.hold(names[0])}`"
                + (f" (one command per node: {', '.join(names)})." if len(names) > 1 else ".")
            )
    row = runbook_row(record)
    if row:
        lines.append(f"Runbook: {RUNBOOK_ESCALATIONS} (row {row}).")
    elif record.error:
        lines.append(f"Runbook: {RUNBOOK_ESCALATIONS}.")
    return lines


# Errors the runbook's escalation table names in a row of their own or shared (its last rows).
RUNBOOK_SHARED_ROWS = frozenset(
    {"NodeNotFound", "ControllerUnavailable", "InvalidCommand", "HyperPodApiError", "ClusterNotFound", "LedgerError", "ConfigurationError"}
)


def runbook_row(record: IncidentRecord) -> str | None:
    """The runbook row for the record's error: an aborted or failed execution's is Step Functions'
    own error (OperatorStopped, States.Runtime), whose row is ExecutionAborted / ExecutionFailed."""
    if record.outcome in ("aborted", "failed"):
        return error_name(errors.ExecutionAborted if record.outcome == "aborted" else errors.ExecutionFailed)
    name = record.error or ""
    return name if name in ERROR_MEANING or name in RUNBOOK_SHARED_ROWS else None


def _bounded(lines: list[str], record: IncidentRecord, deployment: Deployment) -> list[str]:
    """The lines that fit SNS's message limit, and where to read the rest."""
    kept: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        size += len(line.encode()) + 3
        if size > NEXT_STEPS_LIMIT:
            return [
                *kept,
                f"... and {len(lines) - index} more line(s) about jobs and nodes: read them in {deployment.record(record.incident_id)}.",
            ]
        kept.append(line)
    return kept
