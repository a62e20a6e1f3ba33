"""The preflight's verdicts: what was seen of the deployed stack and its cluster -> pass, warn or fail,
each with what to do. Pure: preflight.py reads the account and calls these.

Statuses: ``pass``; ``warn`` (works, but worth knowing before arming); ``fail`` (a recovery would go
wrong: fix it before arming); ``error`` (could not be checked: usually the operator's own permissions);
``skip`` (nothing to check yet, or a check it depends on could not run); ``info``.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from hyperpod_recovery.domain.nodes.assess import group_roles
from hyperpod_recovery.errors import NodeRoleUnknown
from hyperpod_recovery.models.cluster import ClusterInfo, ClusterNode
from hyperpod_recovery.models.commands import AgentCheckResult, RunningJob
from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN
from hyperpod_recovery.models.preflight import CheckpointProbe, SdkReport
from hyperpod_recovery.sdk_contract import version_tuple

Status = Literal["pass", "warn", "fail", "error", "skip", "info"]
NOT_READY: frozenset[str] = frozenset({"fail", "error"})
_SEVERITY = {"info": 0, "skip": 0, "pass": 1, "warn": 2, "error": 3, "fail": 4}

# BatchReplaceClusterNodes and BatchRebootClusterNodes first appear in botocore 1.41.1, published
# 2025-11-20: the day the APIs were released. A node whose platform software is older (launched
# before it and never updated since) cannot have the patch the API needs ("If you want to invoke
# this API on an existing cluster, you'll first need to patch the cluster by running the
# UpdateClusterSoftware API"). ASSUMPTION: software from that day on has it; AWS names no version.
REPLACEMENT_API_RELEASED = datetime(2025, 11, 20, tzinfo=UTC)
AGENT_CHECK_TIMEOUT_SECONDS = 60  # statemachines/agent_check.asl.json, Check Controller Agent's TimeoutSeconds
SLURM_JOB_ID = re.compile(SLURM_JOB_ID_PATTERN)
SHOWN = 8  # jobs or nodes named in one finding; the rest are counted
UPGRADE_AGENT = (
    "upgrade the agent with the stack (docs/runbook.md, Installing the controller agent, upgrading): "
    "the command protocol changes between releases"
)
# The command types the workflows send to the agent: an agent that does not list one in its check
# answer cannot serve the stack.
STACK_COMMANDS = frozenset(
    {"cordon_nodes", "resume_nodes", "resubmit_job", "boot_times", "capture_job_spec", "node_states", "capture_hang_evidence"}
)


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str = ""


def worst(statuses: Iterable[Status]) -> Status:
    return max(statuses, key=lambda s: _SEVERITY[s], default="pass")


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# --- the functions' SDK ---------------------------------------------------------------------
def check_sdk(report: SdkReport) -> Finding:
    runs = f"the functions run botocore {report.botocore} (boto3 {report.boto3}, Python {report.python})"
    too_old = version_tuple(report.botocore) < version_tuple(report.minimum_botocore)
    if report.missing or too_old:
        # Older than the minimum fails even when every modelled call is present: the cold-start
        # check (sdk_contract.check_sdk_version) refuses it before any model is looked at.
        lacks = f"which does not know {_names(report.missing)}" if report.missing else f"older than {report.minimum_botocore}"
        return Finding(
            "sdk",
            "fail",
            f"{runs}, {lacks}: every function refuses to start (SdkTooOld)",
            "redeploy with `make deploy`: the RecoveryCoreLayer ships the SDK the code needs (layers/recovery_core/requirements.txt); "
            "a layer built without it, or a function without the layer, runs the Lambda runtime's older SDK",
        )
    return Finding("sdk", "pass", f"{runs}: every call and field the code needs is known")


# --- the cluster ------------------------------------------------------------------------------
def _arn_tail(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def redeploy(cluster_arn: str, stack: str, sets: str) -> str:
    """The fix for a parameter DescribeCluster knows: make deploy reads it from the cluster again."""
    return f"redeploy with `make deploy CLUSTER={cluster_arn} STACK={stack}`: it sets {sets} from DescribeCluster"


def check_cluster(
    configured_arn: str, cluster: ClusterInfo, orchestrator: str = "Slurm", eks_cluster_name: str = "", *, stack: str = "<STACK>"
) -> Finding:
    """The stack guards the cluster DescribeCluster names, by the ARN IAM authorizes it with, for
    the orchestrator it runs (the stack's Orchestrator and EksClusterName parameters)."""
    seen = f"{cluster.name} ({cluster.status}, {'EKS' if cluster.orchestrator == 'eks' else 'Slurm'}) is {cluster.arn}"
    redeploy_arn = redeploy(cluster.arn, stack, f"ClusterArn={cluster.arn}")
    if configured_arn != cluster.arn:
        head = configured_arn.rsplit("/", 1)[0]
        if head == cluster.arn.rsplit("/", 1)[0] and _arn_tail(configured_arn) == cluster.name:
            return Finding(
                "cluster",
                "fail",
                f"{seen}, but the stack was given the name form {configured_arn}: IAM authorizes HyperPod calls on the "
                "cluster's id-form ARN, so every DescribeCluster, ListClusterNodes and BatchReplaceClusterNodes the "
                "pipeline makes would be denied",
                redeploy_arn,
            )
        elsewhere = f"{seen}, but the stack guards {configured_arn}: another cluster, or this one recreated"
        return Finding("cluster", "fail", elsewhere, redeploy_arn)
    if cluster.orchestrator != orchestrator.lower():
        return Finding(
            "cluster",
            "fail",
            f"{seen}, but the stack was deployed with Orchestrator={orchestrator}: every incident would escalate (UnsupportedOrchestrator)",
            redeploy(
                cluster.arn,
                stack,
                f"Orchestrator={cluster.orchestrator.capitalize()}"
                + (f" and EksClusterName={cluster.eks_cluster_name}" if cluster.eks_cluster_name else ""),
            ),
        )
    if cluster.orchestrator == "eks" and cluster.eks_cluster_name and cluster.eks_cluster_name != eks_cluster_name:
        return Finding(
            "cluster",
            "fail",
            f"{seen} in EKS cluster {cluster.eks_cluster_name}, but the stack's EksClusterName is {eks_cluster_name or '(empty)'}: "
            "its access entries are on another cluster, and every incident would escalate (UnsupportedOrchestrator)",
            redeploy(cluster.arn, stack, f"EksClusterName={cluster.eks_cluster_name}"),
        )
    if cluster.status != "InService":
        return Finding("cluster", "warn", f"{seen}: not InService", "run preflight again once the cluster is InService")
    return Finding("cluster", "pass", f"{seen}: the ARN the stack was given")


def check_replacement_patch(cluster: str, nodes: Sequence[ClusterNode]) -> Finding:
    """Whether the cluster's platform software can have the BatchReplaceClusterNodes patch."""
    # A node never updated runs the software it was launched with.
    as_of = {n.node_id: n.software_updated_at or n.launch_time for n in nodes}
    software = {node: _utc(at) for node, at in as_of.items() if at is not None}
    if not software:
        return Finding("replacement-patch", "skip", "ListClusterNodes reported no launch or software update times")
    old = sorted(node for node, at in software.items() if at < REPLACEMENT_API_RELEASED)
    oldest = min(software.values())
    if old:
        return Finding(
            "replacement-patch",
            "fail",
            f"{len(old)} of {len(software)} node(s) run platform software from before {REPLACEMENT_API_RELEASED:%Y-%m-%d}, when "
            f"BatchReplaceClusterNodes was released (oldest {oldest:%Y-%m-%d}; {_names(old)}): AWS requires an existing cluster "
            "to be patched before the API works on it",
            f"patch the cluster: `aws sagemaker update-cluster-software --cluster-name {cluster}` (a rolling update: "
            "docs/runbook.md, Before the first deploy: patch an existing cluster), then run preflight again",
        )
    return Finding(
        "replacement-patch",
        "pass",
        f"every node's platform software is from {oldest:%Y-%m-%d} or later (on or after the API's release, "
        f"{REPLACEMENT_API_RELEASED:%Y-%m-%d}; assumed patched: AWS names no version)",
    )


def check_node_recovery(cluster: ClusterInfo) -> Finding:
    mode = cluster.node_recovery
    if mode == "None":
        return Finding(
            "node-recovery",
            "pass",
            "NodeRecovery=None: HyperPod marks faulty nodes and leaves the repair to this pipeline (reboot first, caps, breaker)",
        )
    return Finding(
        "node-recovery",
        "warn",
        f"NodeRecovery={mode}: HyperPod reboots or replaces faulty nodes itself. The pipeline then watches a node HyperPod "
        "is repairing (InstanceIdInUse) instead of fighting it, and still cordons, waits and resubmits jobs; its caps, "
        "breaker and reboot-first ladder govern only the repairs it starts",
        f"to let the pipeline decide every repair: `aws sagemaker update-cluster --cluster-name {cluster.name} --node-recovery None`",
    )


def check_node_roles(cluster: ClusterInfo, nodes: Sequence[ClusterNode], controller_groups: list[str], login_groups: list[str]) -> Finding:
    """The roles the pipeline will give each instance group (domain.nodes.assess.group_roles, the same call)."""
    if cluster.orchestrator == "eks":  # (EKS runs the control plane: every instance group is a worker group)
        groups = ", ".join(f"{g} ({sum(1 for n in nodes if n.instance_group == g)} node(s))" for g in sorted(cluster.groups)) or "none"
        return Finding("node-roles", "pass", f"EKS worker groups: {groups}; the control plane is EKS's own, never a node here")
    try:
        roles = group_roles(cluster, controller_groups, login_groups)
    except NodeRoleUnknown as exc:
        return Finding(
            "node-roles",
            "fail",
            f"{exc} Until then every recovery on this cluster escalates (NodeRoleUnknown).",
            "redeploy with ControllerGroups=<the controller group> (and LoginGroups) as the lifecycle scripts' "
            "provisioning_parameters.json names them",
        )
    count = {g: sum(1 for n in nodes if n.instance_group == g) for g in roles}
    source = {g: "SlurmConfig.NodeType" if cluster.groups[g].node_type else "stack parameters" for g in roles}
    by_role = {
        role: [f"{g} ({count[g]} node(s), {source[g]})" for g in sorted(roles) if roles[g] == role]
        for role in ("Controller", "Login", "Compute")
    }
    seen = "; ".join(f"{role.lower()}: {', '.join(groups) or 'none'}" for role, groups in by_role.items())
    if not by_role["Compute"]:
        return Finding("node-roles", "warn", f"{seen}: no compute group, nothing the pipeline may replace")
    return Finding("node-roles", "pass", f"{seen}; controller and login nodes are never acted on")


# --- EventBridge --------------------------------------------------------------------------------
def health_event(cluster_arn: str, *, node_id: str = "i-0123456789abcdef0") -> dict[str, Any]:
    """An Unhealthy node health event as HyperPod sends it, for EventBridge's TestEventPattern."""
    region, account = (cluster_arn.split(":", 5) + [""] * 6)[3:5]
    return {
        "version": "0",
        "id": "00000000-0000-0000-0000-000000000000",
        "detail-type": "SageMaker HyperPod Cluster Node Health Event",
        "source": "aws.sagemaker",
        "account": account,
        "time": "2026-01-01T00:00:00Z",
        "region": region,
        "resources": [cluster_arn],
        "detail": {
            "ClusterArn": cluster_arn,
            "InstanceId": node_id,
            "HealthSummary": {"HealthStatus": "Unhealthy", "HealthStatusReason": "preflight"},
        },
    }


def name_form(cluster_arn: str, cluster_name: str) -> str:
    return f"{cluster_arn.rsplit('/', 1)[0]}/{cluster_name}"


def check_event_rule(rule: str, cluster: ClusterInfo, matches: dict[str, bool], *, stack: str = "<STACK>") -> Finding:
    """``matches``: ARN -> whether the rule's pattern matched a health event carrying it. The id form
    (what DescribeCluster and the service model give) must match; the name form (AWS's samples) should."""
    id_form, by_name = cluster.arn, name_form(cluster.arn, cluster.name)
    if not matches.get(id_form):
        return Finding(
            "event-rule",
            "fail",
            f"rule {rule} does not match a health event for {id_form}: HyperPod's events would never reach the pipeline",
            redeploy(id_form, stack, f"ClusterArn={id_form}"),
        )
    if not matches.get(by_name):
        return Finding(
            "event-rule",
            "warn",
            f"rule {rule} matches events naming {id_form}, not {by_name} (the form AWS's samples show)",
            "redeploy from this release's template.yaml: its rule lists both forms",
        )
    return Finding("event-rule", "pass", f"rule {rule} matches an Unhealthy event for this cluster in either ARN form")


# --- notifications -------------------------------------------------------------------------------
_DECRYPT = re.compile(r"^kms:(\*|Decrypt)$")
_DATA_KEY = re.compile(r"^kms:(\*|GenerateDataKey\*?)$")
CLOUDWATCH = "cloudwatch.amazonaws.com"


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _service_principals(statement: dict[str, Any]) -> list[str]:
    principal = statement.get("Principal")
    if principal == "*":
        return ["*"]
    return _listed(principal.get("Service")) + _listed(principal.get("AWS")) if isinstance(principal, dict) else []


Grant = Literal["yes", "no", "conditional"]
# Condition keys AWS recommends against the confused deputy: they hold for this account's alarms.
_SOURCE_ACCOUNT_KEYS = ("aws:sourceaccount", "aws:sourceowner")


def _condition_holds_for_own_alarms(condition: dict[str, Any], account: str) -> bool | None:
    """Whether an Allow's condition holds for this account's CloudWatch alarms: True or False when
    every key is a source guard (aws:SourceAccount/SourceOwner, aws:SourceArn), None when any other
    key or operator is in it (not evaluated here)."""
    holds = True
    for operator, tests in condition.items():
        if not isinstance(tests, dict):
            return None
        for key, values in tests.items():
            wanted = _listed(values)
            if key.lower() in _SOURCE_ACCOUNT_KEYS and operator in ("StringEquals", "StringLike"):
                holds &= any(fnmatch.fnmatchcase(account, v) for v in wanted)
            elif key.lower() == "aws:sourcearn" and operator in ("ArnLike", "ArnEquals", "StringLike", "StringEquals"):
                parts = [v.split(":", 5) for v in wanted]
                holds &= any(
                    len(p) == 6
                    and p[2] in ("cloudwatch", "*")
                    and fnmatch.fnmatchcase(account, p[4])
                    and fnmatch.fnmatchcase("alarm:x", p[5])
                    for p in parts
                )
            else:
                return None
    return holds


def key_lets_service_publish(policy_text: str, account: str, service: str = CLOUDWATCH) -> Grant:
    """Whether a key policy lets ``service`` encrypt messages for the topic (kms:Decrypt and
    kms:GenerateDataKey*, which SNS needs from every publisher) with no Deny against it.

    "conditional": it does only under conditions this check does not evaluate. The source guards
    AWS recommends (aws:SourceAccount, aws:SourceArn for this account's alarms) are evaluated."""
    statements = json.loads(policy_text).get("Statement", [])
    statements = [statements] if isinstance(statements, dict) else statements
    decrypt = data_key = False
    conditional: set[str] = set()
    for statement in statements:
        applies = service in _service_principals(statement) or "*" in _service_principals(statement)
        actions = _listed(statement.get("Action"))
        if not applies:
            continue
        condition = statement.get("Condition") or {}
        if statement.get("Effect") == "Deny" and any(_DECRYPT.match(a) or _DATA_KEY.match(a) for a in actions):
            if not condition:
                return "no"
            conditional.add("a Deny")
        if statement.get("Effect") == "Allow":
            holds = _condition_holds_for_own_alarms(condition, account) if condition else True
            if holds is None:
                conditional.add("an Allow")
            if not holds:
                continue
            decrypt |= any(_DECRYPT.match(a) for a in actions)
            data_key |= any(_DATA_KEY.match(a) for a in actions)
    if decrypt and data_key:
        return "conditional" if "a Deny" in conditional else "yes"
    return "conditional" if conditional else "no"


def _account_of(arn: str) -> str:
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 else ""


def check_topic(topic_arn: str, key_id: str | None, key_manager: str | None, key_state: str | None, key_policy: str | None) -> Finding:
    if not key_id:
        return Finding("notifications", "pass", f"topic {topic_arn} is not encrypted: CloudWatch alarms can publish to it")
    if key_id.startswith("alias/aws/") or key_manager == "AWS":
        return Finding(
            "notifications",
            "fail",
            f"topic {topic_arn} is encrypted with the AWS-managed key {key_id}, whose policy does not let CloudWatch use it: "
            "every alarm notification is dropped",
            "redeploy from this release's template.yaml (the topic uses the stack's own NotificationKey)",
        )
    if key_state not in (None, "Enabled"):
        return Finding(
            "notifications", "fail", f"topic {topic_arn}: its key {key_id} is {key_state}: nothing can publish", "enable the key"
        )
    grant = key_lets_service_publish(key_policy, _account_of(topic_arn)) if key_policy is not None else "no"
    if grant == "conditional":
        return Finding(
            "notifications",
            "warn",
            f"topic {topic_arn}: the policy of its key {key_id} lets {CLOUDWATCH} use it only under conditions preflight "
            "does not evaluate: alarm notifications are dropped unless CloudWatch's requests meet them",
            "trigger a test alarm (`aws cloudwatch set-alarm-state --state-value ALARM ...`) and see it arrive, "
            "or compare with template.yaml's NotificationKey",
        )
    if grant == "no":
        return Finding(
            "notifications",
            "fail",
            f"topic {topic_arn}: the policy of its key {key_id} does not let {CLOUDWATCH} use kms:Decrypt and "
            "kms:GenerateDataKey*: every alarm notification is dropped",
            "restore the key policy's CloudWatchAlarmsOfThisAccountPublish statement (template.yaml NotificationKey)",
        )
    return Finding("notifications", "pass", f"topic {topic_arn}: CloudWatch alarms may use its key {key_id}")


# --- the controller agent -----------------------------------------------------------------------
@dataclass(frozen=True)
class AgentAnswer:
    """How the agent-check execution ended: the agent's answer, or the execution's error."""

    execution: str
    result: AgentCheckResult | None = None
    answered_in_seconds: float | None = None
    error: str | None = None  # States.Timeout, InvalidCommand, ...; "Running" when it had not ended
    cause: str = ""


def _unknown_command(cause: str) -> bool:
    """The agent rejected ``check`` as a command type it does not know (pydantic's words for a
    discriminator outside the union), not for something it found while answering."""
    return "Input tag 'check'" in cause or "unknown type 'check'" in cause


def check_agent(answer: AgentAnswer, stack_version: str | None) -> Finding:
    install = (
        "is the agent installed and running on the controller (`systemctl status hyperpod-recovery-agent`), with the stack's "
        "AgentPolicyArn policy on the controller group's role and the stack's CommandQueueUrl in /etc/hyperpod-recovery/agent.toml? "
        "docs/runbook.md, Installing the controller agent; `hyperpod-recovery-agent check` on the controller says which part fails"
    )
    result = answer.result
    if result is None:
        if answer.error == "States.Timeout":
            silent = f"no answer within {AGENT_CHECK_TIMEOUT_SECONDS} s (execution {answer.execution}): Cordon Nodes would time out"
            return Finding("agent", "fail", silent, install)
        if answer.error == "InvalidCommand" and _unknown_command(answer.cause):
            return Finding(
                "agent",
                "fail",
                f"the agent answered but does not know the check command: it is older than the stack ({answer.cause[:200]})",
                UPGRADE_AGENT,
            )
        if answer.error == "Running":
            return Finding("agent", "fail", f"execution {answer.execution} had not ended when preflight stopped waiting", install)
        return Finding("agent", "fail", f"the check ended in {answer.error}: {answer.cause[:300]}", install)
    took = f" in {answer.answered_in_seconds:.0f} s" if answer.answered_in_seconds is not None else ""
    if result.agent_version.startswith("eks-"):
        return _check_eks_orchestrator(result, took)
    seen = f"agent {result.agent_version} answered{took}"
    unknown = sorted(STACK_COMMANDS - set(result.commands))
    if unknown:
        return Finding(
            "agent",
            "fail",
            f"{seen}, but it does not execute {', '.join(unknown)}, which the stack sends: it is older than the stack, and every "
            "recovery would escalate at that step (InvalidCommand)",
            UPGRADE_AGENT,
        )
    if not result.slurm_reachable:
        return Finding(
            "agent",
            "fail",
            f"{seen}, but slurmctld did not: {result.slurm_detail}",
            "check slurmctld on the controller (`scontrol ping`) and the agent's slurm_bin_dir",
        )
    if stack_version and result.agent_version != stack_version:
        return Finding(
            "agent",
            "warn",
            f"{seen} ({result.slurm_detail}), but the stack is {stack_version}",
            UPGRADE_AGENT,
        )
    return Finding("agent", "pass", f"{seen}; {result.slurm_detail}")


# The commands of a node recovery (EKS carries them out in the functions; a failed job's own
# recovery, JobRecovery, asks for capture_job_spec and node_states too).
NODE_RECOVERY_COMMANDS = frozenset({"cordon_nodes", "resume_nodes", "resubmit_job", "boot_times"})


def _check_eks_orchestrator(result: AgentCheckResult, took: str) -> Finding:
    """On EKS the check is answered by Check Controller Agent itself, through the Kubernetes API: it
    proves the access entry, the RBAC manifest's read rules and the network path to the API server."""
    seen = f"the EKS orchestrator ({result.agent_version}) answered{took}"
    if not result.slurm_reachable:
        return Finding(
            "agent",
            "fail",
            f"{seen}, but the Kubernetes API did not: {result.slurm_detail}",
            "check the stack's access entries, `kubectl apply -f deploy/kubernetes-rbac.yaml`, and (private endpoint) the "
            "KubernetesSubnetIds/KubernetesSecurityGroupIds (docs/runbook.md, EKS)",
        )
    missing = sorted(NODE_RECOVERY_COMMANDS - set(result.commands))
    if missing:
        return Finding("agent", "fail", f"{seen}, but it does not carry out {', '.join(missing)}", "redeploy the stack (`make deploy`)")
    job_only = sorted(STACK_COMMANDS - set(result.commands))
    if job_only == ["capture_hang_evidence"]:
        # (functions deployed before EKS hang evidence: a hung job's recovery escalates at its evidence)
        return Finding(
            "agent",
            "warn",
            f"{seen} ({result.slurm_detail}); node and job recoveries run, but capture_hang_evidence is not carried out "
            "there: a hung job's recovery escalates instead of acting",
            "redeploy the stack (`make deploy`)",
        )
    if job_only:
        return Finding(
            "agent",
            "warn",
            f"{seen} ({result.slurm_detail}); node recoveries run, but a job that fails on its own is not recovered on EKS yet "
            f"({', '.join(job_only)} are not carried out there): it is left to its operator",
            "docs/runbook.md, EKS: what is recovered",
        )
    return Finding("agent", "pass", f"{seen}; {result.slurm_detail}")


# --- checkpoints ---------------------------------------------------------------------------------
def bucket_matches(pattern: str, bucket: str) -> bool:
    """IAM's wildcards in ``arn:aws:s3:::<pattern>``: ``*`` any run of characters, ``?`` one."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, bucket) is not None


def _bucket(uri: str) -> str:
    return uri.removeprefix("s3://").split("/", 1)[0]


def check_checkpoints(
    bucket_pattern: str, jobs: Sequence[RunningJob] | None, omitted: int, probes: Sequence[CheckpointProbe] | None, probe_error: str = ""
) -> Finding:
    """The running jobs' checkpoints as the pipeline would read them. ``jobs`` None: the agent did
    not answer, so nobody knows which jobs run."""
    if jobs is None:
        return Finding("checkpoints", "skip", "needs the controller agent's list of running jobs (see agent)")
    if not jobs:
        return Finding("checkpoints", "skip", "no running jobs: run preflight again while a training job runs")
    by_job = {p.job_id: p for p in probes or []}
    rows: list[tuple[Status, str]] = []
    for job in jobs:
        # A Slurm job id reads as one; an EKS job is known by its name (its uid only tells copies apart).
        label = f"{job.job_id} ({job.name})" if SLURM_JOB_ID.match(job.job_id) else f"{job.name} (uid {job.job_id[:8]})"
        probe = by_job.get(job.job_id)
        if not job.checkpoint_uri:
            rows.append(("warn", f"{label}: no checkpoint location, so it cannot be resumed"))
        elif not bucket_matches(bucket_pattern, _bucket(job.checkpoint_uri)):
            rows.append(("fail", f"{label}: bucket {_bucket(job.checkpoint_uri)} is outside CheckpointBucketPattern {bucket_pattern}"))
        elif probe is None:
            rows.append(("error", f"{label}: not read ({probe_error or 'no answer from Check Deployment'})"))
        elif probe.store_unavailable:
            rows.append(("error", f"{label}: S3 did not answer ({probe.detail})"))
        elif not probe.readable:
            rows.append(("fail", f"{label}: {probe.detail}"))
        elif probe.step is None:
            rows.append(("warn", f"{label}: {job.checkpoint_uri} {probe.detail}"))
        else:
            rows.append(("pass", f"{label}: step {probe.step} verified"))
    status = worst(s for s, _ in rows)
    shown = [text for s, text in sorted(rows, key=lambda r: -_SEVERITY[r[0]])][:SHOWN]
    more = len(rows) - len(shown) + omitted
    detail = "; ".join(shown) + (f"; {more} more job(s) not shown" if more else "")
    fixes = {
        "fail": "give CheckpointBucketPattern a pattern that covers every job's bucket and let the stack's role read it "
        "(bucket policy, and kms:Decrypt where the bucket uses a KMS key)",
        "warn": "name each job's checkpoint prefix (`#SBATCH --comment=checkpoint=s3://...` or HYPERPOD_RECOVERY_CHECKPOINT_URI) "
        "and commit manifests (docs/checkpoint-manifest.md): a job without a verified checkpoint is not resubmitted",
        "error": "run preflight again (S3 may have been throttled); if Check Deployment could not be invoked, your credentials "
        "need lambda:InvokeFunction on the stack's CheckDeploymentFunctionName",
    }
    return Finding("checkpoints", status, detail, fixes.get(status, ""))


# --- arming --------------------------------------------------------------------------------------
def check_dry_run(dry_run: bool, findings: Sequence[Finding], *, stack: str = "<STACK>") -> Finding:
    failing = [f.check for f in findings if f.status in NOT_READY]
    if dry_run:
        next_step = "fix the failed checks first" if failing else f"after a dry-run period, arm it: `make arm STACK={stack}` (DryRun=false)"
        return Finding("dry-run", "info", "DryRun=true: the stack records what it would do and changes nothing", next_step)
    if failing:
        return Finding(
            "dry-run",
            "warn",
            f"DryRun=false: the stack is armed while {', '.join(failing)} fail(s)",
            f"disarm until they pass: `make deploy CLUSTER=<cluster ARN> STACK={stack} DISARM=1` (DryRun=true)",
        )
    return Finding("dry-run", "info", "DryRun=false: armed; recoveries change the cluster")
