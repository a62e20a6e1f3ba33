"""``hyperpod-recovery preflight --stack NAME``: is this stack ready to be armed on this cluster?

Before ``DryRun=false``, it reads the account and the cluster the way the pipeline will meet them
and prints a pass/fail table with what to do for each failure (the verdicts: preflight_checks.py):

  sdk                the SDK the stack's functions run with knows every call and field the code uses
  cluster            the stack's ClusterArn is the cluster's, in the form IAM authorizes; Slurm; InService
  replacement-patch  the cluster's software postdates BatchReplaceClusterNodes (UpdateClusterSoftware)
  node-recovery      HyperPod's NodeRecovery mode, and what it means for the pipeline
  node-roles         controller, login and compute groups as the pipeline resolves them
  event-rule         a health event from this cluster (either ARN form) matches the stack's rule
  notifications      the SNS topic's key lets CloudWatch alarms publish
  agent              the controller agent answers a read-only check within a minute
  checkpoints        the running jobs' checkpoints are readable with the pipeline's permissions
  dry-run            DryRun, and whether arming now is wise

Read-only. It reads (DescribeStacks, DescribeCluster, ListClusterNodes, DescribeRule,
TestEventPattern, GetTopicAttributes, DescribeKey, GetKeyPolicy), invokes the stack's Check
Deployment function (it reads the functions' SDK models and the jobs' checkpoints), and starts one
execution of the stack's ``<cluster>-agent-check`` workflow, whose one command the agent answers
from ``sinfo``/``squeue`` and each running job's comment, batch script and submission environment
(its checkpoint prefix). Nothing in the cluster, the ledger or the stack changes.

Exit codes: 0 ready (passes and warnings), 1 a check failed or could not be made, 2 bad usage (not
a hyperpod-recovery stack, an SDK too old to check with, no region), 3 the stack could not be read.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, NoCredentialsError, NoRegionError, ReadTimeoutError
from pydantic import ValidationError

from hyperpod_recovery.adapters.aws import INVOKE_WAIT_SECONDS
from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.errors import RecoveryError, SdkTooOld
from hyperpod_recovery.models.cluster import ClusterInfo, ClusterNode
from hyperpod_recovery.models.commands import AgentCheckResult, CommandReply
from hyperpod_recovery.models.preflight import DeploymentReport
from hyperpod_recovery.sdk_contract import MINIMUM_BOTOCORE, check_sdk_version
from hyperpod_recovery_cli.preflight_checks import (
    AGENT_CHECK_TIMEOUT_SECONDS,
    NOT_READY,
    AgentAnswer,
    Finding,
    check_agent,
    check_checkpoints,
    check_cluster,
    check_dry_run,
    check_event_rule,
    check_node_recovery,
    check_node_roles,
    check_replacement_patch,
    check_sdk,
    check_topic,
    health_event,
    name_form,
)
from hyperpod_recovery_cli.stack import Stack, StackTooOld, read_stack

EXIT_READY, EXIT_NOT_READY, EXIT_USAGE = 0, 1, 2
# What the preflight's own credentials need, by check (said when a check could not be made).
PERMISSIONS = {
    "cluster": "sagemaker:DescribeCluster and sagemaker:ListClusterNodes on the cluster",
    "event-rule": "events:DescribeRule on the stack's rule and events:TestEventPattern",
    "notifications": "sns:GetTopicAttributes on the topic, kms:DescribeKey and kms:GetKeyPolicy on its key",
    "agent": "states:StartExecution on the stack's agent-check workflow and states:DescribeExecution on its executions",
    "sdk": "lambda:InvokeFunction on the stack's CheckDeploymentFunctionName",
}
CLUSTER_CHECKS = ("cluster", "replacement-patch", "node-recovery", "node-roles", "event-rule")
ORDER = ("sdk", *CLUSTER_CHECKS, "notifications", "agent", "checkpoints", "dry-run")


class PreflightUsageError(Exception):
    """The preflight cannot run with this machine's SDK (exit code 2)."""


def _could_not(check: str, exc: BaseException) -> Finding:
    if isinstance(exc, StackTooOld):
        return Finding(check, "error", str(exc), "redeploy with `make deploy`")
    if isinstance(exc, ReadTimeoutError | ConnectTimeoutError):
        # Slow or unreachable is not a permission problem: say which, and where to look.
        return Finding(
            check,
            "error",
            f"could not check: no answer from AWS in time ({exc})",
            "retry; if it persists, look at the function's or service's logs (Check Deployment: its CloudWatch log group, "
            f"/aws/lambda/<CheckDeploymentFunctionName>; preflight waits {INVOKE_WAIT_SECONDS} s for it)",
        )
    return Finding(check, "error", f"could not check: {exc}", f"your credentials need {PERMISSIONS.get(check, 'read access')}")


class _FunctionFailed(Exception):
    """The stack's Check Deployment function ended in an error."""


# ValidationError: an answer (DescribeCluster's, Check Deployment's) our models cannot read.
_CHECK_ERRORS = (ClientError, BotoCoreError, RecoveryError, StackTooOld, _FunctionFailed, ValidationError)


def _guarded(check: str, make: Callable[[], Finding]) -> Finding:
    """One check's finding; what stops it (the operator's permissions, mostly) is its finding too.
    No region or credentials stop the whole command instead (app.run says so)."""
    try:
        return make()
    except (NoRegionError, NoCredentialsError):
        raise
    except _CHECK_ERRORS as exc:
        return _could_not(check, exc)


# --- the agent ------------------------------------------------------------------------------
def start_agent_check(sfn: Any, stack: Stack, now: datetime) -> str:
    name = f"preflight-{now:%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"
    return str(sfn.start_execution(stateMachineArn=stack.output("AgentCheckStateMachineArn"), name=name, input="{}")["executionArn"])


def wait_for_agent(sfn: Any, execution_arn: str, sleep: Callable[[float], None], poll_seconds: float) -> AgentAnswer:
    """Until the agent-check execution ends (its own timeout ends it after a minute), then its answer."""
    name = execution_arn.rsplit(":", 1)[-1]
    waited = 0.0
    while True:
        description = sfn.describe_execution(executionArn=execution_arn)
        status = description["status"]
        if status == "SUCCEEDED":
            break
        if status != "RUNNING":
            return AgentAnswer(name, error=description.get("error") or status, cause=description.get("cause") or "")
        if waited >= AGENT_CHECK_TIMEOUT_SECONDS + 30:
            return AgentAnswer(name, error="Running")
        sleep(poll_seconds)
        waited += poll_seconds
    try:
        reply = CommandReply[AgentCheckResult].model_validate_json(description.get("output") or "")
    except ValidationError as exc:
        return AgentAnswer(name, error="UnreadableAnswer", cause=str(exc)[:300])
    seconds = (reply.completed_at - reply.requested_at).total_seconds()
    return AgentAnswer(name, result=reply.result, answered_in_seconds=max(0.0, seconds))


# --- the stack's functions ------------------------------------------------------------------------
def check_deployment(lambda_client: Any, stack: Stack, answer: AgentAnswer | None) -> DeploymentReport:
    jobs = [job.model_dump(mode="json") for job in answer.result.running_jobs] if answer and answer.result else []
    response = lambda_client.invoke(FunctionName=stack.output("CheckDeploymentFunctionName"), Payload=json.dumps({"jobs": jobs}).encode())
    payload = response["Payload"].read()
    if response.get("FunctionError"):
        raise _FunctionFailed(f"Check Deployment failed: {_function_error(payload)}")
    return DeploymentReport.model_validate_json(payload)


def _function_error(payload: bytes) -> str:
    """Lambda's ``{"errorType", "errorMessage"}``; a runtime crash (out of memory, a timeout) may
    answer with anything else, which is shown as it came."""
    try:
        error = json.loads(payload or b"{}")
    except ValueError:
        error = None
    if not isinstance(error, dict):
        return payload.decode("utf-8", "replace")[:300] or "no error payload"
    return f"{error.get('errorType', 'Error')}: {str(error.get('errorMessage', ''))[:300]}"


# --- the cluster and the rule -----------------------------------------------------------------
def _cluster_findings(stack: Stack, cluster: ClusterInfo, nodes: list[ClusterNode], events: Callable[[], Any]) -> list[Finding]:
    findings = [
        check_cluster(
            stack.parameters.get("ClusterArn", ""),
            cluster,
            stack.parameters.get("Orchestrator", "Slurm"),
            stack.parameters.get("EksClusterName", ""),
            stack=stack.name,
        ),
        check_replacement_patch(cluster.name, nodes),
        check_node_recovery(cluster),
        check_node_roles(cluster, nodes, stack.groups("ControllerGroups"), stack.groups("LoginGroups")),
    ]

    def event_rule() -> Finding:
        rule = stack.output("HealthEventRuleName")
        client = events()
        pattern = client.describe_rule(Name=rule)["EventPattern"]
        matches = {
            arn: bool(client.test_event_pattern(EventPattern=pattern, Event=json.dumps(health_event(arn)))["Result"])
            for arn in (cluster.arn, name_form(cluster.arn, cluster.name))
        }
        return check_event_rule(rule, cluster, matches, stack=stack.name)

    return [*findings, _guarded("event-rule", event_rule)]


def _topic_finding(stack: Stack, sns: Callable[[], Any], kms: Callable[[], Any]) -> Finding:
    topic = stack.output("NotificationTopicArn")
    key_id = sns().get_topic_attributes(TopicArn=topic)["Attributes"].get("KmsMasterKeyId")
    manager = state = policy = None
    if key_id and not key_id.startswith("alias/aws/"):
        metadata = kms().describe_key(KeyId=key_id)["KeyMetadata"]
        manager, state = metadata.get("KeyManager"), metadata.get("KeyState")
        if manager != "AWS":
            policy = kms().get_key_policy(KeyId=metadata["KeyId"], PolicyName="default")["Policy"]
    return check_topic(topic, key_id, manager, state, policy)


# --- the whole run --------------------------------------------------------------------------------
def preflight(
    stack: Stack, *, client: Callable[[str], Any], sleep: Callable[[float], None], now: datetime, poll_seconds: float = 2.0
) -> list[Finding]:
    findings: dict[str, Finding] = {}
    sfn = client("stepfunctions")
    # The agent works on its check while the rest is read.
    execution: str | None = None
    try:
        execution = start_agent_check(sfn, stack, now)
    except _CHECK_ERRORS as exc:
        findings["agent"] = _could_not("agent", exc)

    try:
        hyperpod = HyperPodCluster(stack.cluster, sagemaker=client("sagemaker"))
        cluster, nodes = hyperpod.describe(), hyperpod.list_nodes()
    except _CHECK_ERRORS as exc:
        findings["cluster"] = _could_not("cluster", exc)
        for check in CLUSTER_CHECKS[1:]:
            findings[check] = Finding(check, "skip", "needs the cluster's description (see cluster)")
    else:
        findings |= {f.check: f for f in _cluster_findings(stack, cluster, nodes, lambda: client("events"))}
    findings["notifications"] = _guarded("notifications", lambda: _topic_finding(stack, lambda: client("sns"), lambda: client("kms")))

    answer: AgentAnswer | None = None
    if execution is not None:
        try:
            answer = wait_for_agent(sfn, execution, sleep, poll_seconds)
        except _CHECK_ERRORS as exc:
            findings["agent"] = _could_not("agent", exc)
    running = answer.result if answer else None
    # No list when slurmctld did not answer the agent: "no running jobs" would be a false pass.
    jobs, omitted = (running.running_jobs, running.running_jobs_omitted) if running and running.slurm_reachable else (None, 0)
    pattern = stack.parameters.get("CheckpointBucketPattern", "")
    try:
        report = check_deployment(client("lambda"), stack, answer)
    except _CHECK_ERRORS as exc:
        findings["sdk"] = _could_not("sdk", exc)
        findings["checkpoints"] = check_checkpoints(pattern, jobs, omitted, None, probe_error=f"Check Deployment: {exc}")
        stack_version = None
    else:
        findings["sdk"] = check_sdk(report.sdk)
        findings["checkpoints"] = check_checkpoints(pattern, jobs, omitted, report.checkpoints)
        stack_version = report.sdk.package_version
    if answer is not None:
        findings["agent"] = check_agent(answer, stack_version)
    ordered = [findings[check] for check in ORDER if check in findings]
    return [*ordered, check_dry_run(stack.parameters.get("DryRun", "true") != "false", ordered, stack=stack.name)]


# --- the command ---------------------------------------------------------------------------------
def print_table(stack: Stack, region: str | None, findings: Sequence[Finding], out: TextIO) -> None:
    print(f"hyperpod-recovery preflight: stack {stack.name}, cluster {stack.cluster}" + (f", {region}" if region else ""), file=out)
    print("read-only: nothing in the cluster, the ledger or the stack is changed\n", file=out)
    width = max(len(f.check) for f in findings)
    for finding in findings:
        print(f"  {finding.status.upper():<5}  {finding.check:<{width}}  {finding.detail}", file=out)
    todo = [f for f in findings if f.fix and f.status not in ("pass",)]
    if todo:
        print("\nwhat to do:", file=out)
        for finding in todo:
            print(f"  {finding.check}: {finding.fix}", file=out)
    counts = {status: sum(1 for f in findings if f.status == status) for status in ("pass", "warn", "fail", "error", "skip")}
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    ready = not any(f.status in NOT_READY for f in findings)
    print(f"\n{summary}: " + ("ready to arm" if ready else "NOT ready to arm"), file=out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="the deployed stack's name")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--poll-seconds", type=_poll_seconds, default=2.0, help="how often to look for the agent's answer (default 2)")


def _poll_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0.5 <= seconds <= AGENT_CHECK_TIMEOUT_SECONDS:  # NaN fails too
        raise argparse.ArgumentTypeError(f"seconds between 0.5 and {AGENT_CHECK_TIMEOUT_SECONDS}, not {text!r}")
    return seconds


def run_preflight(
    args: argparse.Namespace,
    *,
    out: TextIO,
    client: Callable[[str], Any],
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """The ``preflight`` command. The stack must be readable (else the CLI's handler exits 3)."""
    try:
        check_sdk_version()  # this machine's SDK parses the cluster as the pipeline's would
    except SdkTooOld as exc:
        raise PreflightUsageError(
            f"{exc.args[0].split(':', 1)[0]}; the preflight reads the cluster with this machine's SDK: "
            f"`pip install --upgrade 'botocore>={MINIMUM_BOTOCORE}' boto3`"
        ) from exc
    cloudformation = client("cloudformation")
    stack = read_stack(cloudformation, args.stack)
    findings = preflight(stack, client=client, sleep=sleep, now=now(), poll_seconds=args.poll_seconds)
    if args.json:
        document = {
            "stack": stack.name,
            "cluster": stack.cluster,
            "ready": not any(f.status in NOT_READY for f in findings),
            "checks": [asdict(f) for f in findings],
        }
        print(json.dumps(document, indent=2), file=out)
    else:
        print_table(stack, getattr(getattr(cloudformation, "meta", None), "region_name", None), findings, out)
    return EXIT_NOT_READY if any(f.status in NOT_READY for f in findings) else EXIT_READY
