"""`hyperpod-recovery deploy` and `arm`: the deploy reads credentials, the cluster and the stack before
it asks or builds anything, and runs `sam deploy` with what it derived; `arm` sets DryRun=false only
after a passing preflight. AWS is botocore's Stubber (every request and response checked against the
service models); sam is an injected runner."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import NoCredentialsError
from botocore.stub import Stubber

from hyperpod_recovery_cli import deploy as deploy_module
from hyperpod_recovery_cli.app import _parser
from hyperpod_recovery_cli.deploy import CAPABILITIES, DeployFailed, DeployRefused, run_arm, run_deploy
from hyperpod_recovery_cli.main import EXIT_AWS, EXIT_USAGE, AwsClients, Invocation, main

ACCOUNT = "111122223333"
CLUSTER_ARN = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/a1b2c3d4e5f6"
EKS_ARN = f"arn:aws:eks:us-west-2:{ACCOUNT}:cluster/my-hyperpod-eks"
STACK = "hyperpod-recovery-llm-train"
NO_STACK = {"Code": "ValidationError", "Message": f"Stack with id {STACK} does not exist"}


def _described(orchestrator: dict[str, Any] | None) -> dict[str, Any]:
    described: dict[str, Any] = {
        "ClusterArn": CLUSTER_ARN,
        "ClusterName": "llm-train",
        "ClusterStatus": "InService",
        "InstanceGroups": [],
    }
    if orchestrator is not None:
        described["Orchestrator"] = orchestrator
    return described


class Aws:
    """Stubbed clients in the region they were asked for; records which region that was."""

    def __init__(self) -> None:
        credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        self.clients = {s: boto3.client(s, region_name="us-west-2", **credentials) for s in ("sts", "sagemaker", "cloudformation")}  # type: ignore[call-overload]
        self.stubs = {s: Stubber(c) for s, c in self.clients.items()}
        self.regions: list[str | None] = []

    def client_in(self, region: str | None) -> Callable[[str], Any]:
        self.regions.append(region)
        return self.clients.__getitem__

    def identity(self, account: str = ACCOUNT) -> None:
        self.stubs["sts"].add_response(
            "get_caller_identity", {"UserId": "AIDA", "Account": account, "Arn": f"arn:aws:iam::{account}:user/ops"}, {}
        )

    def cluster(self, orchestrator: dict[str, Any] | None, asked: str = CLUSTER_ARN) -> None:
        self.stubs["sagemaker"].add_response("describe_cluster", _described(orchestrator), {"ClusterName": asked})

    def stack(self, parameters: dict[str, str] | None, name: str = STACK) -> None:
        if parameters is None:
            self.stubs["cloudformation"].add_client_error(
                "describe_stacks", service_error_code="ValidationError", service_message=NO_STACK["Message"], http_status_code=400
            )
            return
        self.stubs["cloudformation"].add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": name,
                        "CreationTime": "2026-11-01T00:00:00Z",
                        "StackStatus": "UPDATE_COMPLETE",
                        "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
                        "Outputs": [{"OutputKey": "StateMachineArn", "OutputValue": "arn:aws:states:us-west-2:1:stateMachine:x"}],
                    }
                ]
            },
            {"StackName": name},
        )

    def __enter__(self) -> Aws:
        for stub in self.stubs.values():
            stub.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        for stub in self.stubs.values():
            stub.deactivate()

    def all_called(self) -> None:
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    deploy_module.add_deploy_arguments(parser)
    return parser.parse_args(list(argv))


def _deploy(aws: Aws, *argv: str, region: str | None = None) -> tuple[int, str, list[list[str]]]:
    ran: list[list[str]] = []
    out = io.StringIO()

    def runner(command: list[str]) -> int:
        ran.append(command)
        return 0

    code = run_deploy(_args(*argv), out=out, client_in=aws.client_in, given_region=region, runner=runner)
    return code, out.getvalue(), ran


@pytest.fixture
def aws() -> Iterator[Aws]:
    with Aws() as stubbed:
        yield stubbed
    stubbed.all_called()


def test_given_a_slurm_cluster_arn_when_deploying_then_sam_deploy_runs_in_the_arns_region_with_derived_parameters(aws: Aws) -> None:
    # Given credentials for the cluster's account, a Slurm cluster (no Orchestrator: older clusters), no stack yet
    aws.identity()
    aws.cluster(None)
    aws.stack(None)
    # When the operator gives only the ARN, the bucket pattern and an email
    code, out, ran = _deploy(
        aws,
        "--cluster",
        CLUSTER_ARN,
        "--checkpoint-buckets",
        "ml-*-checkpoints",
        "--email",
        "oncall@example.com",
        "--sam",
        ".venv-sam/bin/sam",
    )
    # Then the clients were made in the ARN's region and exactly this sam command ran
    assert code == 0 and aws.regions == ["us-west-2"]
    assert ran == [
        [
            ".venv-sam/bin/sam", "deploy",
            "--stack-name", STACK,
            "--region", "us-west-2",
            "--capabilities", *CAPABILITIES,
            "--resolve-s3",
            "--no-fail-on-empty-changeset",
            "--confirm-changeset",
            "--parameter-overrides",
            'ClusterName="llm-train"',
            f'ClusterArn="{CLUSTER_ARN}"',
            'Orchestrator="Slurm"',
            'EksClusterName=""',
            'CheckpointBucketPattern="ml-*-checkpoints"',
            'NotificationEmail="oncall@example.com"',
        ]
    ]  # fmt: skip
    # and a first deploy leaves DryRun to the template's default (true)
    assert not any(arg.startswith("DryRun=") for arg in ran[0])
    assert "DryRun=true, nothing acts" in out
    assert [line.split("#")[0].strip() for line in out.splitlines()[-3:]] == [
        f"next: make preflight STACK={STACK}",
        f"hyperpod-recovery drill --stack {STACK} --node <compute-group>:0",
        f"make arm STACK={STACK}",
    ]


def test_given_an_eks_cluster_when_deploying_then_orchestrator_and_eks_cluster_name_come_from_describe_cluster(aws: Aws) -> None:
    aws.identity()
    aws.cluster({"Eks": {"ClusterArn": EKS_ARN}})
    aws.stack(None)
    code, _, ran = _deploy(aws, "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt", "--yes")
    assert code == 0
    assert 'Orchestrator="Eks"' in ran[0] and 'EksClusterName="my-hyperpod-eks"' in ran[0]
    assert "--no-confirm-changeset" in ran[0] and "NotificationEmail=" not in " ".join(ran[0])


def test_given_a_slurm_member_in_orchestrator_then_it_is_slurm(aws: Aws) -> None:
    aws.identity()
    aws.cluster({"Slurm": {"SlurmConfigStrategy": "Managed"}})
    aws.stack(None)
    _, _, ran = _deploy(aws, "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt")
    assert 'Orchestrator="Slurm"' in ran[0] and 'EksClusterName=""' in ran[0]


def test_given_a_region_that_is_not_the_arns_when_deploying_then_refused_before_any_aws_call(aws: Aws) -> None:
    # Given the profile's region us-east-1 given on the command line while the cluster is in us-west-2
    with pytest.raises(DeployRefused, match="--region us-east-1 but the cluster's ARN is in us-west-2"):
        _deploy(aws, "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt", region="us-east-1")
    assert aws.regions == []


def test_given_a_cluster_name_when_deploying_then_the_configured_region_is_used(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None, asked="llm-train")
    aws.stack(None)
    code, _, ran = _deploy(aws, "--cluster", "llm-train", "--checkpoint-buckets", "ckpt", region="us-west-2")
    # the ARN DescribeCluster answered is the one deployed (the form IAM authorizes), and its region
    assert code == 0 and aws.regions == ["us-west-2"] and f'ClusterArn="{CLUSTER_ARN}"' in ran[0]


def test_given_a_cluster_that_does_not_exist_when_deploying_then_it_fails_naming_it_and_runs_nothing(aws: Aws) -> None:
    aws.identity()
    aws.stubs["sagemaker"].add_client_error(
        "describe_cluster", service_error_code="ResourceNotFound", service_message="Cluster not found", http_status_code=400
    )
    with pytest.raises(DeployFailed, match=f"no HyperPod cluster '{CLUSTER_ARN}' in us-west-2 for account {ACCOUNT}"):
        _deploy(aws, "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt")


def test_given_credentials_of_another_account_when_deploying_then_refused(aws: Aws) -> None:
    aws.identity(account="999988887777")
    aws.cluster(None)
    with pytest.raises(DeployRefused, match=f"in account {ACCOUNT}, your credentials are for account 999988887777"):
        _deploy(aws, "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt")


def test_given_a_deployed_stack_when_redeploying_then_dry_run_and_unnamed_parameters_are_kept_as_deployed(aws: Aws) -> None:
    # Given an armed stack for this cluster
    aws.identity()
    aws.cluster(None)
    aws.stack(
        {
            "ClusterName": "llm-train",
            "ClusterArn": CLUSTER_ARN,
            "CheckpointBucketPattern": "ckpt",
            "DryRun": "false",
            "NotificationEmail": "a@b.co",
        }
    )
    # When the operator redeploys with nothing but the cluster (no terminal: nothing asked)
    code, out, ran = _deploy(aws, "--cluster", CLUSTER_ARN)
    # Then DryRun, the bucket and the email are not passed: SAM sends them as UsePreviousValue
    assert code == 0
    joined = " ".join(ran[0])
    assert "DryRun=" not in joined and "CheckpointBucketPattern=" not in joined and "NotificationEmail=" not in joined
    assert "kept as deployed: CheckpointBucketPattern, DryRun, NotificationEmail" in out


def test_given_disarm_when_redeploying_then_dry_run_true_is_passed(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None)
    aws.stack({"ClusterName": "llm-train", "ClusterArn": CLUSTER_ARN, "DryRun": "false"})
    _, _, ran = _deploy(aws, "--cluster", CLUSTER_ARN, "--disarm")
    assert ran[0][-1] == 'DryRun="true"'


def test_given_a_stack_guarding_another_cluster_when_deploying_then_refused(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None)
    other = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/zzzzzzzzzzzz"
    aws.stack({"ClusterName": "other", "ClusterArn": other})
    with pytest.raises(DeployRefused, match=f"guards {other}, not {CLUSTER_ARN}"):
        _deploy(aws, "--cluster", CLUSTER_ARN)


def test_given_the_stack_of_this_cluster_under_its_name_form_arn_when_deploying_then_the_id_form_is_deployed(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None)
    aws.stack({"ClusterName": "llm-train", "ClusterArn": f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/llm-train"})
    _, _, ran = _deploy(aws, "--cluster", CLUSTER_ARN)
    assert f'ClusterArn="{CLUSTER_ARN}"' in ran[0]


def test_given_a_first_deploy_without_buckets_and_no_terminal_then_refused_naming_the_option(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None)
    aws.stack(None)
    with pytest.raises(DeployRefused, match="a deploy needs --checkpoint-buckets"):
        _deploy(aws, "--cluster", CLUSTER_ARN)


def test_given_pass_through_params_then_they_are_added_and_derived_or_dry_run_ones_refused(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None)
    aws.stack(None)
    _, _, ran = _deploy(
        aws, "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt", "--param", "SlackWorkspaceId=T0123 SlackChannelId=C0456"
    )
    assert ran[0][-2:] == ['SlackWorkspaceId="T0123"', 'SlackChannelId="C0456"']
    for refused in ("DryRun=false", "Orchestrator=Eks", "nonsense", "ReplacementHealthCheck='a\\b'"):
        with pytest.raises(DeployRefused):
            _deploy(aws, "--cluster", CLUSTER_ARN, "--param", refused)


def test_given_a_build_command_then_it_runs_after_the_checks_and_before_sam_deploy(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None)
    aws.stack(None)
    _, _, ran = _deploy(aws, "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt", "--build-with", "make --no-print-directory build")
    assert [command[:2] for command in ran] == [["make", "--no-print-directory"], ["sam", "deploy"]]


def test_given_no_cluster_and_no_terminal_then_refused_before_any_aws_call(aws: Aws) -> None:
    with pytest.raises(DeployRefused, match="a deploy needs --cluster"):
        _deploy(aws)
    assert aws.regions == []


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_given_a_terminal_when_a_first_deploy_lacks_the_bucket_and_email_then_it_asks_for_those_two_only(aws: Aws) -> None:
    aws.identity()
    aws.cluster({"Eks": {"ClusterArn": EKS_ARN}})
    aws.stack(None)
    out, ran = io.StringIO(), []
    code = run_deploy(
        _args("--cluster", CLUSTER_ARN),
        out=out,
        client_in=aws.client_in,
        given_region=None,
        runner=lambda command: ran.append(command) or 0,
        stdin=Terminal("ml-*-checkpoints\noncall@example.com\n"),
    )
    # Then two questions, nothing about region, orchestrator or EKS cluster, and the answers deployed
    questions = out.getvalue().split(f"stack {STACK} in us-west-2")[0]
    assert code == 0 and questions == (
        "S3 bucket (or pattern, e.g. ml-*-checkpoints) of the jobs' checkpoints: email for incident notifications (empty for none): "
    )
    assert 'CheckpointBucketPattern="ml-*-checkpoints"' in ran[0] and 'NotificationEmail="oncall@example.com"' in ran[0]


def test_given_a_terminal_when_the_cluster_answer_is_empty_then_it_is_asked_again_and_the_second_answer_deploys(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None)
    aws.stack({"ClusterArn": CLUSTER_ARN, "ClusterName": "llm-train"})
    out, ran = io.StringIO(), []
    # When the operator presses Enter at the cluster question, then answers
    code = run_deploy(
        _args("--checkpoint-buckets", "ckpt"),
        out=out,
        client_in=aws.client_in,
        given_region=None,
        runner=lambda command: ran.append(command) or 0,
        stdin=Terminal(f"\n{CLUSTER_ARN}\n"),
    )
    # Then the question comes again saying a value is required, never "no terminal to ask on"
    printed = out.getvalue()
    assert code == 0 and len(ran) == 1
    assert "a value is required (Ctrl-C to stop): HyperPod cluster ARN" in printed and "no terminal" not in printed


@pytest.mark.parametrize("answers", ["\n\n\n", "\n"], ids=["three-empty-answers", "input-ended"])
def test_given_a_terminal_when_no_cluster_is_ever_given_then_refused_naming_the_option_not_the_terminal(aws: Aws, answers: str) -> None:
    with pytest.raises(DeployRefused) as refused:
        run_deploy(_args(), out=io.StringIO(), client_in=aws.client_in, given_region=None, stdin=Terminal(answers))
    assert str(refused.value) == "a deploy needs --cluster: no value was given at the prompt"
    assert aws.regions == []


def test_given_make_when_the_cluster_is_not_given_then_the_refusal_names_the_make_variable(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYPERPOD_RECOVERY_VIA_MAKE", "1")
    err = io.StringIO()
    # When `make deploy` runs the CLI without CLUSTER=, from a script (no terminal)
    code = main(["deploy", "--checkpoint-buckets", "ckpt", "--yes"], stdout=io.StringIO(), stderr=err, stdin=io.StringIO())
    # Then the one line names make's variable, not the CLI's option
    assert code == EXIT_USAGE and err.getvalue() == "hyperpod-recovery: a deploy needs CLUSTER=... (no terminal to ask on)\n"


def test_given_check_only_then_the_plan_is_printed_and_sam_never_runs(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None)
    aws.stack(None)
    code, out, ran = _deploy(aws, "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt", "--check-only")
    assert code == 0 and ran == [] and "sam deploy --stack-name" in out


def test_given_sam_deploy_fails_then_the_deploy_fails(aws: Aws) -> None:
    aws.identity()
    aws.cluster(None)
    aws.stack(None)
    with pytest.raises(DeployFailed, match="sam deploy exited 1"):
        run_deploy(
            _args("--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt"),
            out=io.StringIO(),
            client_in=aws.client_in,
            given_region=None,
            runner=lambda _: 1,
        )


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A laptop with no region and no credentials anywhere."""
    empty = tmp_path / "aws-config"
    empty.write_text("")
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert "AWS_ACCESS_KEY_ID" not in os.environ


def test_given_no_credentials_when_deploying_an_arn_then_one_line_exit_3_not_a_region_question(no_credentials: None) -> None:
    # Given no region configured anywhere: the ARN's region is used, so the first thing said is credentials
    out, err = io.StringIO(), io.StringIO()
    code = main(["deploy", "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt", "--yes"], stdout=out, stderr=err)
    assert code == EXIT_AWS
    assert err.getvalue().startswith("hyperpod-recovery: no AWS credentials found:") and err.getvalue().count("\n") == 1
    assert out.getvalue() == ""


def test_given_a_malformed_cluster_when_deploying_then_exit_2_one_line(no_credentials: None) -> None:
    err = io.StringIO()
    code = main(["deploy", "--cluster", "arn:aws:sagemaker:oops", "--yes"], stdout=io.StringIO(), stderr=err)
    assert code == EXIT_USAGE and err.getvalue().count("\n") == 1 and "neither a HyperPod cluster ARN" in err.getvalue()


# arm -------------------------------------------------------------------------------------------


class ArmStack:
    """CloudFormation as `arm` meets it after the preflight: DescribeStacks, UpdateStack, then the
    update in progress and complete."""

    def __init__(self, dry_run: str = "true", final: str = "UPDATE_COMPLETE") -> None:
        self.client = boto3.client("cloudformation", region_name="us-west-2", aws_access_key_id="t", aws_secret_access_key="t")
        self.stub = Stubber(self.client)
        self.parameters = {"ClusterName": "llm-train", "ClusterArn": CLUSTER_ARN, "DryRun": dry_run, "LogLevel": "INFO"}
        self._describe("UPDATE_COMPLETE")
        if dry_run == "false":
            return
        self.stub.add_response(
            "update_stack",
            {"StackId": f"arn:aws:cloudformation:us-west-2:{ACCOUNT}:stack/{STACK}/1"},
            {
                "StackName": STACK,
                "UsePreviousTemplate": True,
                "Parameters": [
                    {"ParameterKey": "ClusterName", "UsePreviousValue": True},
                    {"ParameterKey": "ClusterArn", "UsePreviousValue": True},
                    {"ParameterKey": "DryRun", "ParameterValue": "false"},
                    {"ParameterKey": "LogLevel", "UsePreviousValue": True},
                ],
                "Capabilities": list(CAPABILITIES),
            },
        )
        self._describe("UPDATE_IN_PROGRESS")
        self._describe(final)

    def _describe(self, status: str) -> None:
        self.stub.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": STACK,
                        "CreationTime": "2026-11-01T00:00:00Z",
                        "StackStatus": status,
                        "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in self.parameters.items()],
                        "Outputs": [{"OutputKey": "StateMachineArn", "OutputValue": "arn:aws:states:us-west-2:1:stateMachine:x"}],
                    }
                ]
            },
            {"StackName": STACK},
        )


def _arm(
    monkeypatch: pytest.MonkeyPatch, stack: ArmStack, preflight_code: int, *, answer: str = "", yes: bool = True
) -> tuple[int, str, list[float]]:
    monkeypatch.setattr(deploy_module, "run_preflight", lambda args, **_: preflight_code)
    slept: list[float] = []
    out = io.StringIO()
    args = argparse.Namespace(stack=STACK, yes=yes, poll_seconds=2.0)
    with stack.stub:
        code = run_arm(args, out=out, client={"cloudformation": stack.client}.__getitem__, sleep=slept.append, stdin=Terminal(answer))
    return code, out.getvalue(), slept


def test_given_a_failing_preflight_when_arming_then_the_stack_is_not_touched(monkeypatch: pytest.MonkeyPatch) -> None:
    stack = ArmStack()
    code, out, _ = _arm(monkeypatch, stack, preflight_code=1)
    assert code == 1 and "not armed: the preflight did not pass" in out
    # none of CloudFormation's answers were asked for
    with pytest.raises(AssertionError):
        stack.stub.assert_no_pending_responses()


def test_given_a_passing_preflight_when_arming_then_only_dry_run_changes_on_the_previous_template(monkeypatch: pytest.MonkeyPatch) -> None:
    stack = ArmStack()
    code, out, slept = _arm(monkeypatch, stack, preflight_code=0)
    stack.stub.assert_no_pending_responses()  # UpdateStack's request matched exactly
    assert code == 0 and f"armed: {STACK}" in out and slept == [deploy_module.ARM_POLL_SECONDS]


def test_given_an_update_that_rolls_back_when_arming_then_it_fails_saying_still_dry_run(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DeployFailed, match="ended UPDATE_ROLLBACK_COMPLETE: still DryRun=true"):
        _arm(monkeypatch, ArmStack(final="UPDATE_ROLLBACK_COMPLETE"), preflight_code=0)


def test_given_no_confirmation_when_arming_then_not_armed(monkeypatch: pytest.MonkeyPatch) -> None:
    stack = ArmStack()
    code, out, _ = _arm(monkeypatch, stack, preflight_code=0, answer="n\n", yes=False)
    assert code == 1 and out.rstrip().endswith("not armed")


def test_given_an_armed_stack_when_arming_then_nothing_is_updated(monkeypatch: pytest.MonkeyPatch) -> None:
    stack = ArmStack(dry_run="false")
    code, out, _ = _arm(monkeypatch, stack, preflight_code=0)
    stack.stub.assert_no_pending_responses()
    assert code == 0 and "already armed" in out


# sam deploy reads --parameter-overrides with its own regular expressions (samcli.cli.types): the
# values we pass must come back exactly, the empty EksClusterName of a Slurm cluster included.
SAM_PYTHON = Path(os.environ.get("SAM_PYTHON", str(Path(__file__).resolve().parents[2] / ".venv-sam" / "bin" / "python")))
READ_BACK = """
import json, sys
from samcli.cli.types import CfnParameterOverridesType
print(json.dumps(CfnParameterOverridesType().convert(tuple(sys.argv[1:]), None, None)))
"""


@pytest.mark.skipif(not SAM_PYTHON.exists(), reason="no SAM CLI venv (make setup makes .venv-sam; or set SAM_PYTHON)")
def test_given_the_parameter_values_we_pass_then_sam_deploy_reads_each_back_exactly() -> None:
    values = {
        "EksClusterName": "",
        "CheckpointBucketPattern": "ml-*-checkpoints",
        "ControllerGroups": "controller,head",
        "ReplacementHealthCheck": 'sh -c "if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi; fi"',
        "TeamsChannelId": "19%3a0123%40thread.tacv2",
        "NotificationEmail": "o'neil@example.com",
    }
    plan = deploy_module.DeployPlan("s", "us-west-2", values, stack_exists=False)
    command = plan.sam_command("sam", confirm=True)
    passed = command[command.index("--parameter-overrides") + 1 :]
    done = subprocess.run([str(SAM_PYTHON), "-c", READ_BACK, *passed], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == values


def test_given_a_profile_region_other_than_the_arns_then_the_clients_are_made_in_the_arns_region(
    no_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a default region of us-east-1 (what `sam deploy --guided` offered) and a cluster in us-west-2
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients = AwsClients(None, err=io.StringIO())
    args = _parser().parse_args(["deploy", "--cluster", CLUSTER_ARN, "--checkpoint-buckets", "ckpt"])
    err = io.StringIO()
    # When the deploy runs (and stops at the missing credentials, before any request is sent)
    with pytest.raises(NoCredentialsError):
        deploy_module.deploy_command(Invocation(args, io.StringIO(), err, clients))
    # Then its first client was made in the cluster's region, not the profile's
    assert clients("sts").meta.region_name == "us-west-2"
