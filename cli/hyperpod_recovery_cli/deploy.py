"""``hyperpod-recovery deploy`` and ``hyperpod-recovery arm``: a deploy that asks only what it must.

``deploy --cluster ARN|NAME`` reads before it asks or builds anything: who the credentials are
(STS GetCallerIdentity), the cluster (SageMaker DescribeCluster), and the stack if one exists
(CloudFormation DescribeStacks). From them it derives the region (the ARN's), the cluster's name and
ARN, the orchestrator and the EKS cluster's name (Orchestrator.Eks.ClusterArn); it asks only for what
no API knows: the checkpoint bucket(s) and where to notify. Then it runs ``sam deploy`` non-guided
with those parameter overrides. A parameter it is not given is not passed: SAM sends it to
CloudFormation as UsePreviousValue on an existing stack (DryRun included: a redeploy never arms or
disarms by itself), and a new stack takes the template's default (DryRun=true).

``arm --stack NAME`` runs the preflight and, only if it passes, updates the stack with DryRun=false,
the previous template and every other parameter's previous value (CloudFormation UpdateStack).
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from botocore.exceptions import ClientError

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.models.records import AuditEntry
from hyperpod_recovery_cli.changes import confirm, who
from hyperpod_recovery_cli.inputs import bounded, for_make, plain_text
from hyperpod_recovery_cli.oncall import REASON_LIMIT
from hyperpod_recovery_cli.preflight import EXIT_READY, run_preflight
from hyperpod_recovery_cli.stack import NotOurStack, read_stack

DEFAULT_SAM = "sam"
CAPABILITIES = ("CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND")  # the template is a SAM transform (a macro)
CLUSTER_ARN = re.compile(r"^arn:(aws[a-z\-]*):sagemaker:([a-z0-9\-]+):([0-9]{12}):cluster/([a-z0-9]{12})$")
CLUSTER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
BUCKET_PATTERN = re.compile(r"^[a-z0-9*][a-z0-9.*\-]{1,61}[a-z0-9*]$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
OVERRIDE = re.compile(r"^([A-Za-z0-9]+)=(.*)$", re.DOTALL)
# Derived from the cluster (or kept from the stack) and so never taken from PARAMS; DryRun only by `arm`.
DERIVED = ("ClusterName", "ClusterArn", "Orchestrator", "EksClusterName")
ARM_WAIT_SECONDS = 30 * 60
ARM_POLL_SECONDS = 10.0


class DeployRefused(Exception):
    """The deploy or arm cannot go on as asked (exit code 2: the operator's input)."""


class DeployFailed(Exception):
    """What AWS or sam answered made it fail (exit code 1)."""


@dataclass(frozen=True)
class ClusterFacts:
    """What DescribeCluster says about the cluster the stack guards."""

    name: str
    arn: str
    region: str
    account: str
    orchestrator: str  # the template's AllowedValues: Slurm, Eks
    eks_cluster_name: str  # "" with Slurm


@dataclass(frozen=True)
class DeployPlan:
    stack: str
    region: str
    overrides: dict[str, str]
    stack_exists: bool
    keeps: list[str] = field(default_factory=list)  # parameters left at the stack's current value
    cluster: str = ""
    ledger_table: str = ""  # an existing stack's LedgerTableName output: where the deploy is audited
    last_change: str = ""  # _last_change() before the deploy: what tells a deploy that changed the stack

    def sam_command(self, sam: str, *, confirm: bool, profile: str | None = None) -> list[str]:
        command = [
            sam,
            "deploy",
            "--stack-name",
            self.stack,
            "--region",
            self.region,
            *(("--profile", profile) if profile else ()),  # the one our own calls used: sam must deploy as the same identity
            "--capabilities",
            *CAPABILITIES,
            "--resolve-s3",
            "--no-fail-on-empty-changeset",
            "--confirm-changeset" if confirm else "--no-confirm-changeset",
            "--parameter-overrides",
            *(f"{key}={sam_value(value)}" for key, value in self.overrides.items()),
        ]
        return command


def sam_value(value: str) -> str:
    """A value as sam deploy's --parameter-overrides reads it back exactly: quoted (an empty value
    is refused unquoted), with its double quotes escaped (sam unescapes only those)."""
    return '"' + value.replace('"', '\\"') + '"'


def region_of(cluster: str) -> str | None:
    """The region named in a cluster ARN; None for a cluster name."""
    match = CLUSTER_ARN.match(cluster)
    return match.group(2) if match else None


def cluster_facts(description: dict[str, Any]) -> ClusterFacts:
    """The orchestrator from DescribeCluster: ``Eks`` in Orchestrator means EKS; anything else
    (a ``Slurm`` member, or no Orchestrator on older Slurm clusters) is Slurm."""
    arn = description["ClusterArn"]
    match = CLUSTER_ARN.match(arn)
    if match is None:
        raise DeployFailed(f"DescribeCluster answered an ARN this tool does not know the form of: {arn}")
    eks = (description.get("Orchestrator") or {}).get("Eks")
    eks_name = eks["ClusterArn"].rsplit("/", 1)[-1] if eks else ""
    return ClusterFacts(
        name=description["ClusterName"],
        arn=arn,
        region=match.group(2),
        account=match.group(3),
        orchestrator="Eks" if eks else "Slurm",
        eks_cluster_name=eks_name,
    )


def parse_overrides(params: Sequence[str]) -> dict[str, str]:
    """PARAMS=... pass-through: Key=Value pairs for the template's other parameters (Slack, Teams,
    PagerDuty, tuning); the derived ones and DryRun are refused."""
    overrides: dict[str, str] = {}
    for text in params:
        for pair in shlex.split(text):
            match = OVERRIDE.match(pair)
            if match is None:
                raise DeployRefused(f"a parameter is Key=Value, not {pair!r}")
            key, value = match.groups()
            if "\\" in value:
                raise DeployRefused(f"{key}: sam deploy cannot pass a value with a backslash (\\) through --parameter-overrides")
            if key in DERIVED:
                raise DeployRefused(f"{key} is read from the cluster (DescribeCluster), not given: drop it from the parameters")
            if key == "DryRun":
                raise DeployRefused(
                    "DryRun is not a deploy parameter: arm with `hyperpod-recovery arm --stack NAME` (make arm) "
                    "after a passing preflight, disarm with --disarm (make deploy DISARM=1)"
                )
            overrides[key] = value
    return overrides


def plan_deploy(
    args: argparse.Namespace,
    client: Callable[[str], Any],
    *,
    ask: Callable[[str], str] | None = None,
) -> DeployPlan:
    """Reads the account, the cluster and the stack; returns what sam deploy will be given. ``client``
    makes clients in the region the cluster's ARN names (the caller's factory)."""
    extra = parse_overrides(args.params or [])
    identity = client("sts").get_caller_identity()  # no credentials: NoCredentialsError, the CLI's exit 3, first
    try:
        described = client("sagemaker").describe_cluster(ClusterName=args.cluster)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("ResourceNotFound", "ValidationException"):
            raise DeployFailed(
                f"no HyperPod cluster {args.cluster!r} in {args.region_used} for account {identity['Account']} "
                "(give its ARN, from `aws sagemaker list-clusters --region REGION`)"
            ) from exc
        raise
    facts = cluster_facts(described)
    if facts.account != identity["Account"]:
        raise DeployRefused(f"cluster {facts.arn} is in account {facts.account}, your credentials are for account {identity['Account']}")
    stack_name = args.stack or f"hyperpod-recovery-{facts.name}"
    current, ledger_table, last_change = _current_stack(client("cloudformation"), stack_name)
    # One stack per cluster: another cluster's stack is refused; the same cluster under another ARN
    # (recreated, or deployed with the name form) is this stack's to correct.
    if current is not None and current.get("ClusterArn") != facts.arn and current.get("ClusterName") != facts.name:
        raise DeployRefused(
            f"stack {stack_name} guards {current.get('ClusterArn')}, not {facts.arn}: one stack per cluster (STACK=another-name)"
        )
    overrides = {
        "ClusterName": facts.name,
        "ClusterArn": facts.arn,
        "Orchestrator": facts.orchestrator,
        "EksClusterName": facts.eks_cluster_name,
    }
    buckets = args.checkpoint_buckets
    if buckets is None and current is None:
        buckets = _asked(ask, "S3 bucket (or pattern, e.g. ml-*-checkpoints) of the jobs' checkpoints: ", "--checkpoint-buckets")
    if buckets is not None:
        if not BUCKET_PATTERN.match(buckets):
            raise DeployRefused(f"--checkpoint-buckets {buckets!r} is not an S3 bucket name or pattern (a-z 0-9 . - *)")
        overrides["CheckpointBucketPattern"] = buckets
    email = args.email
    if email is None and current is None and ask is not None:
        email = ask("email for incident notifications (empty for none): ").strip()  # (empty is an answer here)
    if email:
        if not EMAIL.match(email):
            raise DeployRefused(f"--email {email!r} is not an email address")
        overrides["NotificationEmail"] = email
    overrides.update(extra)
    if args.disarm:
        overrides["DryRun"] = "true"
    keeps = [] if current is None else sorted(k for k in current if k not in overrides)
    return DeployPlan(stack_name, facts.region, overrides, current is not None, keeps, facts.name, ledger_table, last_change)


ASK_TRIES = 3  # an empty answer at the terminal is asked again this many times in all


def _asked(ask: Callable[[str], str] | None, question: str, option: str) -> str:
    """The answer to a question only the operator knows: asked at the terminal (again after an empty
    answer), refused naming the option when there is no terminal, no answer, or the input ended."""
    if ask is None:
        raise DeployRefused(f"a deploy needs {option} (no terminal to ask on)")
    for attempt in range(ASK_TRIES):
        answer = ask(question if attempt == 0 else f"a value is required (Ctrl-C to stop): {question}")
        if not answer:  # the input ended (Ctrl-D): nothing more to ask
            break
        if answer.strip():
            return answer.strip()
    raise DeployRefused(f"a deploy needs {option}: no value was given at the prompt")


def _current_stack(cloudformation: Any, name: str) -> tuple[dict[str, str] | None, str, str]:
    """The stack's parameters, its ledger table and when it last changed, or (None, "", "") when there is no such stack
    (CloudFormation says so with a ValidationError 'Stack with id NAME does not exist')."""
    try:
        (description,) = cloudformation.describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in error.get("Message", ""):
            return None, "", ""
        raise
    if description.get("StackStatus") == "REVIEW_IN_PROGRESS":
        return None, "", ""  # a change set never executed: sam creates the stack
    parameters = {p["ParameterKey"]: p.get("ParameterValue", "") for p in description.get("Parameters", [])}
    if "ClusterArn" not in parameters:
        raise NotOurStack(f"stack {name!r} is not a hyperpod-recovery stack (no ClusterArn parameter): STACK=another-name")
    outputs = {o["OutputKey"]: o.get("OutputValue", "") for o in description.get("Outputs", [])}
    return parameters, outputs.get("LedgerTableName", ""), _last_change(description)


def _last_change(description: dict[str, Any]) -> str:
    """What changes when a deploy changes the stack: LastUpdatedTime (DescribeStacks returns it once the
    stack was updated), its status and parameters (moto models no LastUpdatedTime)."""
    parameters = sorted((p["ParameterKey"], p.get("ParameterValue", "")) for p in description.get("Parameters", []))
    changed = description.get("LastUpdatedTime") or description.get("CreationTime") or ""
    return f"{changed} {description.get('StackStatus', '')} {parameters}"


def add_deploy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", help="the HyperPod cluster's ARN (its region is the stack's) or name (asked when missing)")
    parser.add_argument("--checkpoint-buckets", help="S3 bucket name or pattern of the checkpoints (asked on a first deploy)")
    parser.add_argument("--email", help="email subscribed to incident notifications (asked on a first deploy; empty for none)")
    parser.add_argument("--stack", help="stack name (default: $HYPERPOD_RECOVERY_STACK, else hyperpod-recovery-<cluster name>)")
    parser.add_argument("--param", dest="params", action="append", help="Key=Value for another template parameter (repeatable)")
    parser.add_argument("--disarm", action="store_true", help="set DryRun=true (arming is `arm`, after a passing preflight)")
    parser.add_argument("--sam", default=DEFAULT_SAM, help="the sam command (default: sam on PATH)")
    parser.add_argument("--build-with", help="a command that builds the stack (make build), run after the checks, before sam deploy")
    parser.add_argument("--check-only", action="store_true", help="read credentials, cluster and stack; print the plan; run nothing")
    parser.add_argument("--yes", action="store_true", help="deploy the change set without asking (sam --no-confirm-changeset)")
    parser.add_argument("--reason", help="why (kept in the ledger's audit log)")
    parser.add_argument("--by", default=None, help="who (default: the login name; the AWS identity is recorded with it)")


def add_arm_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="the deployed stack's name")
    parser.add_argument("--yes", action="store_true", help="arm without asking")
    parser.add_argument("--reason", help="why now (kept in the ledger's audit log)")
    parser.add_argument("--by", default=None, help="who (default: the login name; the AWS identity is recorded with it)")
    parser.add_argument("--poll-seconds", type=bounded(0.1, 60), default=2.0, help=argparse.SUPPRESS)  # the preflight's


def run_deploy(
    args: argparse.Namespace,
    *,
    out: TextIO,
    client_in: Callable[[str | None], Callable[[str], Any]],
    given_region: str | None,
    runner: Callable[[list[str]], int] = lambda command: subprocess.call(command),  # noqa: S603 (argv list, no shell: the sam path is the operator's)
    stdin: TextIO | None = None,
) -> int:
    """``client_in(region)`` makes a client factory for a region (the ARN's, else the one given)."""
    terminal = stdin if stdin is not None and stdin.isatty() else None
    ask = (lambda question: _ask(question, out, terminal)) if terminal is not None else None
    if not args.cluster:
        args.cluster = _asked(ask, "HyperPod cluster ARN (aws sagemaker list-clusters): ", "--cluster")
    arn_region = region_of(args.cluster)
    if arn_region is None and not CLUSTER_NAME.match(args.cluster):
        raise DeployRefused(f"--cluster {args.cluster!r} is neither a HyperPod cluster ARN nor a cluster name")
    if arn_region and given_region and given_region != arn_region:
        raise DeployRefused(f"--region {given_region} but the cluster's ARN is in {arn_region}: the stack goes where the cluster is")
    region = arn_region or given_region
    args.region_used = region or "your default region"
    if getattr(args, "reason", None) is not None:  # (checked before anything is read)
        plain_text("--reason", args.reason, limit=REASON_LIMIT, say="say why")
    plan = plan_deploy(args, client_in(region), ask=ask)
    command = plan.sam_command(args.sam, confirm=not args.yes, profile=getattr(args, "profile", None))
    print(f"stack {plan.stack} in {plan.region} ({'update' if plan.stack_exists else 'new: DryRun=true, nothing acts'})", file=out)
    if plan.keeps:
        print(f"kept as deployed: {', '.join(plan.keeps)}", file=out)
    print(shlex.join(command), file=out)
    if args.check_only:
        return 0
    if args.build_with:
        built = runner(shlex.split(args.build_with))
        if built != 0:
            raise DeployFailed(f"the build ({args.build_with}) exited {built}: nothing deployed")
    # (a new stack has no ledger before it: CloudFormation's events say who created it)
    clients = client_in(region) if plan.ledger_table else None
    audit = _auditor(plan.ledger_table, plan.cluster, plan.stack, clients, args, "deploy") if clients is not None else None
    code = runner(command)
    if code != 0:
        raise DeployFailed(f"sam deploy exited {code} (its output is above)")
    if audit is not None and clients is not None:
        # Read back: sam exits 0 on an empty change set, and on one declined at its prompt.
        (after,) = clients("cloudformation").describe_stacks(StackName=plan.stack)["Stacks"]
        if _last_change(after) == plan.last_change:
            print(f"stack {plan.stack} unchanged (an empty or declined change set): nothing to audit", file=out)
        else:
            audit("deploy", " ".join(f"{key}={value}" for key, value in plan.overrides.items()))
    print(f"next: make preflight STACK={plan.stack}    # read-only checks of the stack, cluster and agent", file=out)
    print(
        f"      hyperpod-recovery drill --stack {plan.stack} --node <compute-group>:0    # a dry-run recovery of one node (make install)",
        file=out,
    )
    print(f"      make arm STACK={plan.stack}          # after a dry-run period: the preflight, then DryRun=false", file=out)
    return 0


def _ask(question: str, out: TextIO, stdin: TextIO) -> str:
    print(question, end="", file=out, flush=True)
    return stdin.readline()


def run_arm(
    args: argparse.Namespace,
    *,
    out: TextIO,
    client: Callable[[str], Any],
    sleep: Callable[[float], None] = time.sleep,
    stdin: TextIO | None = None,
) -> int:
    """Preflight; then UpdateStack(UsePreviousTemplate, DryRun=false, every other parameter
    UsePreviousValue); then wait for the update to finish."""
    args.json = False
    if run_preflight(args, out=out, client=client, sleep=sleep) != EXIT_READY:
        print("not armed: the preflight did not pass (fix what it says, then make arm again)", file=out)
        return 1
    cloudformation = client("cloudformation")
    stack = read_stack(cloudformation, args.stack)
    if stack.parameters.get("DryRun") == "false":
        print(f"stack {stack.name} is already armed (DryRun=false)", file=out)
        return 0
    # (a stack from before the ledger had an output: nothing to keep it in)
    table = stack.outputs.get("LedgerTableName")
    audit = _auditor(table, stack.cluster, stack.name, client, args, "arm") if table else None
    question = f"Arm {stack.name}: the pipeline will reboot and replace nodes of {stack.cluster} and resubmit jobs?"
    if not confirm(question, args, stdin or sys.stdin, out):
        print("not armed", file=out)
        return 1
    parameters = [
        {"ParameterKey": key, "ParameterValue": "false"} if key == "DryRun" else {"ParameterKey": key, "UsePreviousValue": True}
        for key in stack.parameters
    ]
    cloudformation.update_stack(StackName=stack.name, UsePreviousTemplate=True, Parameters=parameters, Capabilities=list(CAPABILITIES))
    print(f"arming {stack.name}: UpdateStack DryRun=false started", file=out)
    status = _wait_for_update(cloudformation, stack.name, sleep)
    if status != "UPDATE_COMPLETE":
        raise DeployFailed(f"the update of {stack.name} ended {status}: still DryRun=true (see its events in the console)")
    if audit is not None:
        audit("arm", "DryRun=false after a passing preflight")
    print(f"armed: {stack.name} acts on {stack.cluster}'s faults (disarm: make deploy CLUSTER=... DISARM=1)", file=out)
    return 0


@dataclass(frozen=True)
class _Auditor:
    """Keeps a stack change in the stack's ledger's audit log, as every on-call change is (changes.py).
    Made before the change: the reason is checked and who asks is read from STS first, so a change
    that could not be audited is not made."""

    ledger: DynamoLedger
    cluster: str
    stack: str
    by: str
    reason: str

    def __call__(self, action: Literal["arm", "deploy"], detail: str) -> None:
        entry = AuditEntry(at=datetime.now(UTC), by=self.by, action=action, target=self.stack, reason=self.reason, detail=detail[:300])
        self.ledger.audit(self.cluster, entry)


def _auditor(table: str, cluster: str, stack: str, client: Callable[[str], Any], args: argparse.Namespace, action: str) -> _Auditor:
    given = getattr(args, "reason", None)
    reason = plain_text("--reason", given, limit=REASON_LIMIT, say="say why") if given is not None else action
    return _Auditor(DynamoLedger(table, dynamodb=client("dynamodb")), cluster, stack, who(args, client), reason)


def deploy_command(invocation: Any) -> int:
    """The CLI's ``deploy`` (an Invocation of app.py): clients in the region the cluster's ARN names."""
    clients: Callable[[str], Any] = invocation.client

    def client_in(region: str | None) -> Callable[[str], Any]:
        if region is not None and hasattr(clients, "region"):
            clients.region = region  # AwsClients makes its session on first use: nothing is made yet
        return clients

    given_region = getattr(invocation.args, "region", None)
    return _one_line_failures(
        invocation.err,
        lambda: run_deploy(invocation.args, out=invocation.out, client_in=client_in, given_region=given_region, stdin=invocation.stdin),
    )


def arm_command(invocation: Any) -> int:
    return _one_line_failures(
        invocation.err,
        lambda: run_arm(invocation.args, out=invocation.out, client=invocation.client, sleep=invocation.sleep, stdin=invocation.stdin),
    )


def _one_line_failures(err: TextIO, run: Callable[[], int]) -> int:
    try:
        return run()
    except DeployRefused as exc:
        print(f"hyperpod-recovery: {for_make(str(exc))}", file=err)
        return 2
    except DeployFailed as exc:
        print(f"hyperpod-recovery: {for_make(str(exc))}", file=err)
        return 1


def _wait_for_update(cloudformation: Any, name: str, sleep: Callable[[float], None]) -> str:
    waited = 0.0
    while True:
        (description,) = cloudformation.describe_stacks(StackName=name)["Stacks"]
        status: str = description["StackStatus"]
        if not status.endswith("_IN_PROGRESS"):
            return status
        if waited >= ARM_WAIT_SECONDS:
            raise DeployFailed(f"{name} is still {status} after {ARM_WAIT_SECONDS // 60} min")
        sleep(ARM_POLL_SECONDS)
        waited += ARM_POLL_SECONDS
