"""WHAT HAPPENS NEXT, rendered from the incident's record: what the error means, then each job and
each node by what became of it, in the commands of the cluster's own orchestrator with the real
names filled in, ready to paste.

No sentence here speaks of "the job" or "the jobs" in general: a job is named with its fate. A job
with a live copy (resubmitted, requeued, restarted by its owner, or possibly copied: an answer that
was lost) is named with its copy and its state, and the human is told not to start another; only a
job with no copy is one to restart, with the checkpoint to restart it from. The per-error text says
what went wrong and where to look; it never says what became of jobs or nodes (the facts below it do).

ERROR_MEANING is the "what happened" of docs/runbook.md's escalation table, said once here;
tests/contract/test_observability.py keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from hyperpod_recovery import errors
from hyperpod_recovery.domain.fates import copy_label, copy_state_text, job_label, made_again
from hyperpod_recovery.models.commands import AGENT_HEARTBEAT_TIMEOUT, owner_tag
from hyperpod_recovery.models.kubernetes import OUR_ANNOTATIONS, QUARANTINE_TAINT_EFFECT, QUARANTINE_TAINT_KEY
from hyperpod_recovery.models.manifest import RESUME_FROM_ENV, RESUME_STEP_ENV
from hyperpod_recovery.models.records import IncidentRecord, JobFate
from hyperpod_recovery.vocabulary import error_name


@dataclass(frozen=True)
class Deployment:
    """What a human's commands must name besides the incident's own facts: the stack and its ledger."""

    stack: str = ""
    ledger_table: str = ""

    def drill(self, instance: str) -> str:
        """A live recovery of one node started by hand (the CLI finds the stack's machines)."""
        return f"hyperpod-recovery drill --stack {self.stack} --node {instance} --live --yes" if self.stack else ""

    def breaker_reset(self, cluster: str) -> str:
        table = f" --table {self.ledger_table}" if self.ledger_table else ""
        return f"hyperpod-recovery breaker reset --cluster {cluster}{table} --reason 'what you checked'"


# --- the orchestrator's own commands ---------------------------------------------------------
class Commands:
    """The commands a human runs on the cluster, per orchestrator: Slurm's on a Slurm cluster."""

    held = "drained"

    def show_job(self, job_id: str, fate: JobFate) -> str:
        return f"squeue -j {job_id}"

    def show_nodes(self, names: Sequence[str]) -> str:
        return f"sinfo -R -n {','.join(names)}"

    def give_back(self, names: Sequence[str]) -> str:
        return f"scontrol update nodename={','.join(names)} state=resume"

    def jobs_on(self, names: Sequence[str]) -> str:
        return f"squeue -w {','.join(names)}"

    def restart(self, fate: JobFate) -> str:
        """How a job with no copy is started again, from its checkpoint when it has one."""
        if fate.checkpoint_uri and fate.checkpoint_step is not None:
            return (
                f"resubmit it from step {fate.checkpoint_step} (`hyperpod-recovery checkpoint verify {fate.checkpoint_uri}` checks "
                f"that step again; its script and options are in the incident record, and it resumes when {RESUME_FROM_ENV}="
                f"{fate.checkpoint_uri} is in its environment)"
            )
        return "resubmit it (its script and options are in the incident record)" + _steps_of(fate)


class KubernetesCommands(Commands):
    held = "cordoned"

    def show_job(self, job_id: str, fate: JobFate) -> str:
        kind = (fate.kind or "pytorchjob").lower()
        name = fate.copy_name if fate.copy_name and job_id == fate.copy_id else fate.name
        return f"kubectl -n {fate.namespace or 'default'} get {kind} {name}"

    def show_nodes(self, names: Sequence[str]) -> str:
        return f"kubectl describe nodes {' '.join(names)}"

    def give_back(self, names: Sequence[str]) -> str:
        # Our marks, exactly as Resume Nodes removes them (domain/eks_nodes.py): the taint, the
        # annotations, then the cordon. (Leave the cordon if someone else had cordoned the node.)
        marks = " ".join(f"{a}-" for a in OUR_ANNOTATIONS)
        return "; ".join(
            f"kubectl taint nodes {n} {QUARANTINE_TAINT_KEY}:{QUARANTINE_TAINT_EFFECT}- && kubectl annotate node {n} {marks} "
            f"&& kubectl uncordon {n}"
            for n in names
        )

    def jobs_on(self, names: Sequence[str]) -> str:
        return "; ".join(f"kubectl get pods -A --field-selector spec.nodeName={n}" for n in names)

    def restart(self, fate: JobFate) -> str:
        kind = (fate.kind or "pytorchjob").lower()
        where = f"kubectl -n {fate.namespace or 'default'} get {kind} {fate.name} -o yaml"
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
        "then replace the node by hand (`aws sagemaker batch-replace-cluster-nodes --cluster-name {cluster} --node-ids {instances}`)"
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
        "`hyperpod-recovery checkpoint verify`) before it runs again."
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
    errors.JobSpecUnavailable: "The orchestrator no longer knows the job, so there is no spec to resubmit it from.",
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
    errors.UnsupportedOrchestrator: "This cluster's orchestrator is not one this release recovers; recover the node by hand.",
    errors.StaleEvent: (
        "The event was replayed, redriven or held in a backlog (or a clock is wrong). Check whether the node is still "
        "unhealthy (`{show_nodes}`, the HyperPod console){drill_then}."
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
        "Someone stopped the recovery (StopExecution). What it held was released; the jobs and nodes below say where it stopped."
    ),
    errors.ExecutionFailed: (
        "The recovery died (an error past its retries, a timeout, a state too large). What it held was released; the jobs and "
        "nodes below say where it stopped. Report the error."
    ),
}
# Step Functions' own error names (a task's HeartbeatSeconds / TimeoutSeconds), per orchestrator:
# on Slurm the controller agent answers those tasks, on EKS the functions answer their own.
_AGENT_SILENT = (
    "The controller agent on the head node {how}: it is down, stuck, or cannot reach Step Functions. Check it: "
    "`systemctl status hyperpod-recovery-agent` and `hyperpod-recovery-agent check`; the CommandQueueBacklog alarm says "
    "whether commands are piling up."
)
_KUBERNETES_SILENT = (
    "The Kubernetes API did not answer the step in time (a private endpoint unreachable, the API server overloaded): "
    "`kubectl get --raw /readyz` from where the functions run, and the function's log, say which."
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
    if record.outcome in ("aborted", "failed") and name not in ERROR_MEANING:
        name = error_name(errors.ExecutionAborted if record.outcome == "aborted" else errors.ExecutionFailed)
    if name in _TIMEOUTS and record.orchestrator == "eks":
        return _KUBERNETES_SILENT
    text = ERROR_MEANING.get(name, GENERIC_MEANING)
    commands = commands_of(record)
    nodes = [n.node for n in record.node_fates if n.fate != "skipped"] or record.hostnames or record.nodes
    instances = [n.instance for n in record.node_fates if n.instance and n.fate != "skipped"] or record.nodes
    first = instances[0] if instances else ""
    drill = deployment.drill(first) if first else ""
    fills = {
        "{cluster}": record.cluster,
        "{instances}": " ".join(instances),
        "{unhealthy}": " ".join(n.replacement or n.instance or n.node for n in record.node_fates if n.fate == "out_of_service")
        or " ".join(instances),
        "{breaker_reset}": deployment.breaker_reset(record.cluster),
        "{show_nodes}": commands.show_nodes(nodes) if nodes else "the HyperPod console",
        "{jobs_on}": commands.jobs_on(nodes) if nodes else "the orchestrator",
        "{drill_or}": f" or start a recovery with `{drill}`" if drill else "",
        "{drill_then}": f"; if it is, start a recovery by hand with `{drill}`" if drill else "",
        "{drill_with}": f" (`{drill}`)" if drill else "",
    }
    for key, value in fills.items():
        text = text.replace(key, value)
    return text


# --- each job, each node -----------------------------------------------------------------------
def job_step(fate: JobFate, commands: Commands) -> str:
    """One job: its live copy and not to start another, or why there is none and how to restart it."""
    label = job_label(fate)
    if fate.fate == "resubmitted":
        by = f" by node recovery {fate.by}" if fate.by else ""
        where = f" from step {fate.checkpoint_step}" if fate.checkpoint_step is not None else ""
        see = f" See it: `{commands.show_job(fate.copy_id, fate)}`." if fate.copy_id else ""
        return f"{label} was {made_again(fate)}{by} as {copy_label(fate)}{where} ({copy_state_text(fate)}): do not start another copy.{see}"
    if fate.fate == "resubmitted_before":
        see = f" See it: `{commands.show_job(fate.copy_id, fate)}`." if fate.copy_id else ""
        copy = f" as {copy_label(fate)}" if fate.copy_id else " (its copy's id is not recorded yet)"
        return f"{label} was already {made_again(fate)} by {fate.by or 'another incident'}{copy}: do not start another copy.{see}"
    if fate.fate == "requeued_by_slurm":
        see = f"`{commands.show_job(fate.job, fate)}`"
        return f"{label} was requeued by Slurm and restarts by itself: do not start another copy. See it: {see}."
    if fate.fate == "restarted_by_owner":
        return f"{label} is left to what restarts it ({fate.reason}): do not start another copy."
    if fate.fate == "would_resubmit":
        where = f" from step {fate.checkpoint_step}" if fate.checkpoint_step is not None else ""
        return f"{label} would be {made_again(fate)}{where} (dry run)."
    if fate.fate == "copy_unknown":
        return (
            f"{label}: {fate.reason}. Before anything else, look for its copy (`{commands.show_job(fate.job, fate)}`, and the jobs "
            f"whose comment or annotation names {fate.job}); start one only if there is none."
        )
    return (
        f"{label} was NOT {made_again(fate)}: {fate.reason}. First check that it is not running (`{commands.show_job(fate.job, fate)}`); "
        f"if not, {commands.restart(fate)}."
    )


def node_steps(record: IncidentRecord, commands: Commands) -> list[str]:
    """The nodes left out of service (by us) or still being repaired, grouped by what a human does."""
    steps: list[str] = []
    tag = owner_tag(record.incident_id)
    replacing = [n for n in record.node_fates if n.fate == "replacing"]
    held = [n for n in record.node_fates if n.fate == "out_of_service"]
    theirs = [n for n in record.node_fates if n.fate == "not_ours"]
    for node in replacing:
        new = node.replacement_node or node.replacement
        coming = f"its repair {new} ({node.replacement_status or 'not seen yet'})" if new else "its repair"
        if record.orchestrator == "eks":
            joins = f" It joins as {node.replacement_node}: `kubectl get node {node.replacement_node}`." if node.replacement_node else ""
            steps.append(
                f"{node.node} stays {commands.held} ({tag}) while {coming} comes up: "
                f"`aws sagemaker list-cluster-nodes --cluster-name {record.cluster}`.{joins}"
            )
        else:
            steps.append(
                f"{node.node} stays {commands.held} under {tag} while {coming} comes up: "
                f"`aws sagemaker list-cluster-nodes --cluster-name {record.cluster}`; when HyperPod shows it Running, "
                f"give it back: `{commands.give_back([node.node])}`."
            )
    for node in held:
        steps.append(
            f"{node.node} stays {commands.held} ({node.detail}): `{commands.show_nodes([node.node])}`; "
            f"when it is fixed, give it back: `{commands.give_back([node.node])}`."
        )
    if theirs:
        names = [n.node for n in theirs]
        steps.append(f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} {commands.held} by someone else: left so.")
    return steps


def next_steps(record: IncidentRecord, deployment: Deployment, hold_until: datetime | None) -> list[str]:
    """WHAT HAPPENS NEXT, as lines: the verdict or the error's meaning, then each job, then the nodes."""
    commands = commands_of(record)
    jobs = [job_step(f, commands) for f in record.job_fates if f.fate != "would_resubmit" or record.outcome == "dry_run"]
    if record.jobs_omitted:
        nodes = [n.node for n in record.node_fates if n.fate != "skipped"] or record.hostnames
        jobs.append(
            f"{record.jobs_omitted} more job(s) on these nodes were counted, not named or resubmitted: `{commands.jobs_on(nodes)}`."
        )
    if record.outcome == "dry_run":
        return ["Nothing to do: this was a drill. The steps above are what a real run would have done.", *jobs]
    if record.outcome == "rejected":
        return ["Nothing to do unless this was unexpected: the cause says what was wrong with the event or request."]
    if record.outcome == "recovered":
        checkpoint = (
            [" Check that each copy passes its step at its next checkpoint."]
            if any(f.fate == "resubmitted" for f in record.job_fates)
            else []
        )
        return ["Nothing to do." + "".join(checkpoint), *jobs]
    if record.outcome == "duplicate":
        return ["Nothing to do: someone else handled this, or it needed nothing (see the summary).", *jobs]
    lines = [error_meaning(record, deployment), *jobs, *node_steps(record, commands)]
    if hold_until is not None:
        lines.append(f"The nodes stay locked until {hold_until:%Y-%m-%d %H:%M} UTC so the automation leaves them alone.")
    return lines
