"""``hyperpod-recovery preflight`` end to end against the sandbox's deployed stack: the real template's
functions, workflows, rule, topic and key in moto, the HyperPod double, the simulated Slurm answered
by the real agent code. One healthy stack, then one test per check that fails (or warns), each made
wrong the way a real account would be."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from botocore.model import ServiceModel

from hyperpod_recovery_agent.slurm import SlurmUnreachable
from hyperpod_recovery_cli.main import main
from sandbox.aws import SandboxAWS
from sandbox.runner import DrillRunner
from sandbox.scenario import Scenario, load_scenario
from sandbox.slurm import SimulatedSlurm
from sandbox.template import load_template
from tests.conftest import EVENTS, ROOT

pytestmark = pytest.mark.sandbox
DEFAULT = EVENTS / "drills" / "default.json"


def _scenario(
    cluster: dict[str, Any] | None = None, behaviour: dict[str, Any] | None = None, settings: dict[str, Any] | None = None
) -> Scenario:
    scenario = load_scenario(DEFAULT)
    return scenario.model_copy(
        update={
            "cluster": scenario.cluster.model_copy(update=cluster or {}),
            "behaviour": scenario.behaviour.model_copy(update=behaviour or {}),
            "settings": scenario.settings.model_copy(update=settings or {}),
        }
    )


class Run:
    def __init__(self, code: int, out: str, err: str, runner: DrillRunner, waited: float) -> None:
        self.code, self.out, self.err, self.runner, self.waited = code, out, err, runner, waited

    def row(self, check: str) -> tuple[str, str]:
        """(STATUS, detail) of one check's row in the table."""
        for line in self.out.splitlines():
            parts = line.split(maxsplit=2)
            if len(parts) == 3 and parts[1] == check and parts[0] in ("PASS", "WARN", "FAIL", "ERROR", "SKIP", "INFO"):
                return parts[0], parts[2]
        raise AssertionError(f"no row for {check} in:\n{self.out}")

    def fix(self, check: str) -> str:
        todo = self.out.split("what to do:", 1)[1]
        return next(line.split(": ", 1)[1] for line in todo.splitlines() if line.strip().startswith(f"{check}:"))


def _preflight(
    tmp_path: Path,
    scenario: Scenario | None = None,
    overrides: dict[str, str] | None = None,
    before: Callable[[SandboxAWS], None] | None = None,
    args: tuple[str, ...] = (),
    clients: dict[str, Any] | None = None,
    after: Callable[[SandboxAWS], None] | None = None,
) -> Run:
    runner = DrillRunner(scenario or load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    waited = [0.0]

    def sleep(seconds: float) -> None:
        waited[0] += seconds
        runner.advance(seconds)

    with runner.deployed(overrides) as aws:
        if before is not None:
            before(aws)
        out, err = io.StringIO(), io.StringIO()
        code = main(["preflight", "--stack", "sandbox", *args], stdout=out, stderr=err, sleep=sleep, drill_clients=clients)
        if after is not None:
            after(aws)
    return Run(code, out.getvalue(), err.getvalue(), runner, waited[0])


def test_given_a_healthy_stack_then_every_check_passes_and_nothing_changes(tmp_path: Path) -> None:
    ledger: dict[str, Any] = {}

    def read_ledger(when: str) -> Callable[[SandboxAWS], None]:
        return lambda aws: ledger.__setitem__(when, aws.client("dynamodb").scan(TableName=aws.ledger_table)["Items"])

    # Given the default drill's cluster, agent and jobs, and the stack deployed for them
    run = _preflight(tmp_path, before=read_ledger("before"), after=read_ledger("after"))
    # Then every check passes and the stack is ready to arm
    assert run.code == 0, run.out
    for check in (
        "sdk",
        "cluster",
        "replacement-patch",
        "node-recovery",
        "node-roles",
        "event-rule",
        "notifications",
        "agent",
        "checkpoints",
    ):
        assert run.row(check)[0] == "PASS", run.out
    assert run.row("dry-run") == ("INFO", "DryRun=false: armed; recoveries change the cluster")
    assert "step 3000 verified" in run.row("checkpoints")[1]
    assert "answered in" in run.row("agent")[1] and "1 running job(s)" in run.row("agent")[1]
    assert run.out.rstrip().endswith("ready to arm") and "what to do" not in run.out
    # And it changed nothing: the agent ran only the read-only check, HyperPod was not asked to do anything
    assert [c["type"] for c in run.runner.slurm.commands] == ["check"]
    assert run.runner.double.replacements == [] and run.runner.double.reboots == []
    assert not run.runner.slurm.drained_nodes()
    assert ledger["before"] == ledger["after"]


def test_given_json_then_the_findings_are_a_document(tmp_path: Path) -> None:
    run = _preflight(tmp_path, args=("--json",))
    document = json.loads(run.out)
    assert document["ready"] is True and document["cluster"] == "llm-train"
    assert {c["check"] for c in document["checks"]} >= {"sdk", "agent", "checkpoints", "dry-run"}
    assert all(set(c) == {"check", "status", "detail", "fix"} for c in document["checks"])


def _functions_run_an_old_sagemaker_model(monkeypatch: pytest.MonkeyPatch, member: tuple[str, str] | None = None) -> None:
    """The SageMaker model the functions' botocore loads lacks BatchReplaceClusterNodes (and ``member``,
    a (shape, member) pair): what Check Deployment sees inside a function on an older SDK."""
    original = botocore.session.Session.get_service_model

    def old_models(session: botocore.session.Session, name: str, api_version: str | None = None) -> ServiceModel:
        model = original(session, name, api_version)
        if name != "sagemaker":
            return model
        raw = copy.deepcopy(model._service_description)
        del raw["operations"]["BatchReplaceClusterNodes"]
        if member is not None:
            del raw["shapes"][member[0]]["members"][member[1]]
        return ServiceModel(raw, service_name="sagemaker")

    monkeypatch.setattr(botocore.session.Session, "get_service_model", old_models)


# --- one failing check at a time ----------------------------------------------------------------
def test_given_functions_on_an_sdk_without_the_hyperpod_calls_then_sdk_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the functions run an SDK whose SageMaker model predates BatchReplaceClusterNodes and
    # PrivateDnsHostname (as the Lambda runtime's bundled botocore may)
    _functions_run_an_old_sagemaker_model(monkeypatch, member=("ClusterNodeSummary", "PrivateDnsHostname"))
    run = _preflight(tmp_path)
    status, detail = run.row("sdk")
    assert status == "FAIL" and "sagemaker:BatchReplaceClusterNodes" in detail and "PrivateDnsHostname" in detail
    assert "make deploy" in run.fix("sdk")
    assert run.code == 1 and run.out.rstrip().endswith("NOT ready to arm")


def test_given_the_name_form_arn_then_cluster_and_event_rule_fail(tmp_path: Path) -> None:
    # Given the stack deployed with the cluster's ARN in the name form (AWS's samples show it)
    name_form = "arn:aws:sagemaker:us-west-2:123456789012:cluster/llm-train"
    run = _preflight(tmp_path, overrides={"ClusterArn": name_form})
    # Then the cluster check says IAM would deny every call, and how to redeploy
    status, detail = run.row("cluster")
    assert status == "FAIL" and "name form" in detail and "denied" in detail
    id_form = run.runner.double.arn
    assert f"ClusterArn={id_form}" in run.fix("cluster")
    # And the rule misses HyperPod's events, which carry the id form
    status, detail = run.row("event-rule")
    assert status == "FAIL" and id_form in detail
    assert run.code == 1


def test_given_an_arn_of_another_cluster_then_cluster_fails(tmp_path: Path) -> None:
    run = _preflight(tmp_path, overrides={"ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/a1b2c3d4e5f6"})
    status, detail = run.row("cluster")
    assert status == "FAIL" and "another cluster, or this one recreated" in detail


def test_given_an_edited_rule_that_misses_this_cluster_then_event_rule_fails(tmp_path: Path) -> None:
    def narrow_the_rule(aws: SandboxAWS) -> None:
        events = aws.client("events")
        pattern = json.loads(events.describe_rule(Name="sandbox-HealthEventRule")["EventPattern"])
        pattern["detail"]["ClusterArn"] = ["arn:aws:sagemaker:us-west-2:123456789012:cluster/zzzzzzzzzzzz"]
        events.put_rule(Name="sandbox-HealthEventRule", EventPattern=json.dumps(pattern))

    run = _preflight(tmp_path, before=narrow_the_rule)
    assert run.row("event-rule")[0] == "FAIL" and run.row("cluster")[0] == "PASS"


@pytest.mark.parametrize(
    ("software", "status"),
    [
        ({"launched_at": datetime(2025, 6, 1, tzinfo=UTC)}, "FAIL"),  # launched before the API, never patched
        ({"launched_at": datetime(2025, 6, 1, tzinfo=UTC), "software_updated_at": datetime(2025, 12, 1, tzinfo=UTC)}, "PASS"),
        ({"launched_at": datetime(2025, 6, 1, tzinfo=UTC), "software_updated_at": datetime(2025, 11, 1, tzinfo=UTC)}, "FAIL"),
    ],
)
def test_given_a_cluster_older_than_the_replace_api_then_it_must_be_patched_first(
    tmp_path: Path, software: dict[str, datetime], status: str
) -> None:
    run = _preflight(tmp_path, scenario=_scenario(cluster=software))
    assert run.row("replacement-patch")[0] == status, run.out
    if status == "FAIL":
        assert "aws sagemaker update-cluster-software --cluster-name llm-train" in run.fix("replacement-patch")
        assert "18 of 18 node(s)" in run.row("replacement-patch")[1]


def test_given_automatic_node_recovery_then_a_warning_says_what_it_means(tmp_path: Path) -> None:
    run = _preflight(tmp_path, scenario=_scenario(cluster={"node_recovery": "Automatic"}))
    status, detail = run.row("node-recovery")
    assert status == "WARN" and "InstanceIdInUse" in detail
    assert "--node-recovery None" in run.fix("node-recovery")
    assert run.code == 0  # a warning does not stop arming


def test_given_groups_without_node_types_and_no_controller_groups_then_node_roles_fails(tmp_path: Path) -> None:
    run = _preflight(tmp_path, scenario=_scenario(cluster={"reports_node_types": False}))
    status, detail = run.row("node-roles")
    assert status == "FAIL" and "NodeRoleUnknown" in detail and "ControllerGroups" in run.fix("node-roles")
    # And with the groups named, the pipeline resolves them
    fixed = _preflight(
        tmp_path,
        scenario=_scenario(cluster={"reports_node_types": False}),
        overrides={"ControllerGroups": "controller", "LoginGroups": "login"},
    )
    assert fixed.row("node-roles")[0] == "PASS" and "stack parameters" in fixed.row("node-roles")[1]


def test_given_a_key_policy_without_cloudwatch_then_notifications_fail(tmp_path: Path) -> None:
    def drop_cloudwatch(aws: SandboxAWS) -> None:
        kms = aws.client("kms")
        key = aws.client("sns").get_topic_attributes(TopicArn=aws.topic_arn)["Attributes"]["KmsMasterKeyId"]
        policy = json.loads(kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"])
        policy["Statement"] = [s for s in policy["Statement"] if s.get("Principal", {}).get("Service") != "cloudwatch.amazonaws.com"]
        kms.put_key_policy(KeyId=key, PolicyName="default", Policy=json.dumps(policy))

    run = _preflight(tmp_path, before=drop_cloudwatch)
    status, detail = run.row("notifications")
    assert status == "FAIL" and "cloudwatch.amazonaws.com" in detail and "dropped" in detail


def test_given_the_aws_managed_sns_key_then_notifications_fail(tmp_path: Path) -> None:
    def managed_key(aws: SandboxAWS) -> None:
        aws.client("sns").set_topic_attributes(TopicArn=aws.topic_arn, AttributeName="KmsMasterKeyId", AttributeValue="alias/aws/sns")

    run = _preflight(tmp_path, before=managed_key)
    assert run.row("notifications")[0] == "FAIL" and "AWS-managed key alias/aws/sns" in run.row("notifications")[1]


def test_given_no_agent_then_the_check_fails_within_its_minute_and_checkpoints_are_skipped(tmp_path: Path) -> None:
    # Given a controller whose agent is not running (not installed yet, or dead)
    run = _preflight(tmp_path, scenario=_scenario(behaviour={"agent_down": True}))
    # Then the agent check fails on the workflow's own timeout, saying where to look
    status, detail = run.row("agent")
    assert status == "FAIL" and "no answer within 60 s" in detail
    assert "systemctl status hyperpod-recovery-agent" in run.fix("agent")
    assert 60 <= run.waited <= 90  # virtual seconds of polling
    # And nobody can say which jobs run, so their checkpoints are not judged
    assert run.row("checkpoints")[0] == "SKIP"
    assert run.code == 1


def test_given_an_agent_whose_slurmctld_does_not_answer_then_checkpoints_are_skipped_not_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an agent that answers while slurmctld does not
    def unreachable(self: SimulatedSlurm) -> int:
        raise SlurmUnreachable("sinfo: Unable to contact slurm controller")

    monkeypatch.setattr(SimulatedSlurm, "node_count", unreachable)
    run = _preflight(tmp_path)
    # Then the agent check fails on slurmctld, and "no running jobs" is not taken for an answer
    assert run.row("agent")[0] == "FAIL" and "slurmctld did not" in run.row("agent")[1]
    assert run.row("checkpoints") == ("SKIP", "needs the controller agent's list of running jobs (see agent)")


def test_given_a_bucket_outside_the_checkpoint_pattern_then_checkpoints_fail(tmp_path: Path) -> None:
    run = _preflight(tmp_path, overrides={"CheckpointBucketPattern": "other-*"})
    status, detail = run.row("checkpoints")
    assert status == "FAIL" and "llm-train-checkpoints is outside CheckpointBucketPattern other-*" in detail
    assert "CheckpointBucketPattern" in run.fix("checkpoints")


def test_given_a_checkpoint_bucket_that_cannot_be_read_then_checkpoints_fail(tmp_path: Path) -> None:
    def remove_bucket(aws: SandboxAWS) -> None:
        s3 = aws.client("s3")
        for item in s3.list_objects_v2(Bucket="llm-train-checkpoints").get("Contents", []):
            s3.delete_object(Bucket="llm-train-checkpoints", Key=item["Key"])
        s3.delete_bucket(Bucket="llm-train-checkpoints")

    run = _preflight(tmp_path, before=remove_bucket)
    status, detail = run.row("checkpoints")
    assert status == "FAIL" and "NoSuchBucket" in detail


def test_given_jobs_without_verified_checkpoints_then_a_warning(tmp_path: Path) -> None:
    scenario = _scenario()
    scenario = scenario.model_copy(update={"jobs": [scenario.jobs[0].model_copy(update={"checkpoints": []})]})
    run = _preflight(tmp_path, scenario=scenario)
    status, detail = run.row("checkpoints")
    assert status == "WARN" and "no checkpoint verifies yet" in detail and "docs/checkpoint-manifest.md" in run.fix("checkpoints")


def test_given_an_armed_stack_that_fails_checks_then_dry_run_warns_to_disarm(tmp_path: Path) -> None:
    run = _preflight(tmp_path, scenario=_scenario(behaviour={"agent_down": True}))
    status, detail = run.row("dry-run")
    assert status == "WARN" and "armed while agent" in detail and "DryRun=true" in run.fix("dry-run")


def test_given_a_dry_stack_then_dry_run_says_how_to_arm_it(tmp_path: Path) -> None:
    run = _preflight(tmp_path, overrides={"DryRun": "true"})
    assert run.row("dry-run")[0] == "INFO" and "DryRun=false" in run.fix("dry-run")


# --- what stops a check, and what stops the command --------------------------------------------------
class _DeniedSageMaker:
    def __getattr__(self, name: str) -> Any:
        def denied(**kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, name)

        return denied


def test_given_credentials_that_cannot_read_the_cluster_then_those_checks_error_and_the_rest_run(tmp_path: Path) -> None:
    run = _preflight(tmp_path, clients={"sagemaker": _DeniedSageMaker()})
    status, detail = run.row("cluster")
    assert status == "ERROR" and "AccessDenied" in detail and "sagemaker:DescribeCluster" in run.fix("cluster")
    assert {run.row(c)[0] for c in ("replacement-patch", "node-recovery", "node-roles", "event-rule")} == {"SKIP"}
    assert run.row("agent")[0] == "PASS" and run.row("sdk")[0] == "PASS"
    assert run.code == 1


def test_given_a_stack_that_is_not_ours_then_exit_2(tmp_path: Path) -> None:
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        aws.client("cloudformation").create_stack(StackName="other", TemplateBody=json.dumps({"Resources": {}}))
        out, err = io.StringIO(), io.StringIO()
        code = main(["preflight", "--stack", "other"], stdout=out, stderr=err, sleep=runner.advance)
    assert code == 2 and "not a hyperpod-recovery stack" in err.getvalue() and out.getvalue() == ""


def test_given_a_stack_that_does_not_exist_then_exit_3(tmp_path: Path) -> None:
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed():
        out, err = io.StringIO(), io.StringIO()
        code = main(["preflight", "--stack", "nope"], stdout=out, stderr=err, sleep=runner.advance)
    assert code == 3 and "nope" in err.getvalue() and "Traceback" not in err.getvalue()


def test_given_everything_wrong_at_once_then_each_check_reports_its_own_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an old SDK in the functions, the name-form ARN, an unpatched cluster with Automatic repair
    # and no node types, a key CloudWatch may not use, and no agent
    _functions_run_an_old_sagemaker_model(monkeypatch)
    cluster = {"launched_at": datetime(2025, 6, 1, tzinfo=UTC), "node_recovery": "Automatic", "reports_node_types": False}
    run = _preflight(
        tmp_path,
        scenario=_scenario(cluster=cluster, behaviour={"agent_down": True}),
        overrides={"ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/llm-train"},
        before=lambda aws: aws.client("sns").set_topic_attributes(
            TopicArn=aws.topic_arn, AttributeName="KmsMasterKeyId", AttributeValue="alias/aws/sns"
        ),
    )
    statuses = {
        check: run.row(check)[0] for check in ("sdk", "cluster", "replacement-patch", "node-roles", "event-rule", "notifications", "agent")
    }
    # Then every one of them fails, each with what to do; the rest say why they cannot judge
    assert set(statuses.values()) == {"FAIL"}, run.out
    assert (run.row("node-recovery")[0], run.row("checkpoints")[0], run.row("dry-run")[0]) == ("WARN", "SKIP", "WARN")
    assert all(run.fix(check) for check in statuses)
    assert run.code == 1 and "7 fail" in run.out


class _Lambda:
    """A Lambda client whose invoke of Check Deployment ends as ``answer`` says."""

    def __init__(self, answer: Callable[[], dict[str, Any]]) -> None:
        self.answer, self.invocations = answer, 0

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.invocations += 1
        return self.answer()


def _crashed(payload: bytes) -> Callable[[], dict[str, Any]]:
    return lambda: {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": io.BytesIO(payload)}


def _timed_out() -> dict[str, Any]:
    raise ReadTimeoutError(endpoint_url="https://lambda.us-east-1.amazonaws.com/2015-03-31/functions/x/invocations")


@pytest.mark.parametrize(
    ("answer", "says", "fix"),
    [
        (
            _crashed(b'{"errorType": "Runtime.ExitError", "errorMessage": "signal: killed"}'),
            "Runtime.ExitError: signal: killed",
            "lambda:InvokeFunction",
        ),
        (_crashed(b"Runtime exited without providing a reason"), "Runtime exited without providing a reason", "lambda:InvokeFunction"),
        (_crashed(b'["not", "an", "object"]'), '["not", "an", "object"]', "lambda:InvokeFunction"),
        (lambda: {"StatusCode": 200, "Payload": io.BytesIO(b'{"sdk": "?"}')}, "validation error", "lambda:InvokeFunction"),
        (_timed_out, "no answer from AWS in time", "/aws/lambda/"),
    ],
)
def test_given_check_deployment_ending_badly_then_sdk_is_an_error_that_says_how(
    tmp_path: Path, answer: Callable[[], dict[str, Any]], says: str, fix: str
) -> None:
    # Given Check Deployment crashing, answering what is not a report, or not answering in time
    functions = _Lambda(answer)
    run = _preflight(tmp_path, clients={"lambda": functions})
    # Then sdk (and the checkpoints it would have read) could not be checked: an error, no traceback
    status, detail = run.row("sdk")
    assert status == "ERROR" and says in detail and fix in run.fix("sdk"), run.out
    assert run.row("checkpoints")[0] == "ERROR"
    assert run.code == 1 and "Traceback" not in run.err
    # And the function was invoked once: a slow check is not run again
    assert functions.invocations == 1


def test_the_cli_waits_for_check_deployment_longer_than_it_may_run_and_never_invokes_it_twice() -> None:
    from hyperpod_recovery_cli.main import AwsClients

    template = load_template(ROOT / "template.yaml")
    timeout = template["Resources"]["CheckDeploymentFunction"]["Properties"]["Timeout"]
    made = AwsClients("us-east-1")("lambda")
    assert made.meta.config.read_timeout > timeout
    assert made.meta.config.retries["total_max_attempts"] == 1


class _UnreadableCluster:
    """DescribeCluster answers a status our models do not know."""

    def describe_cluster(self, **kwargs: Any) -> dict[str, Any]:
        return {"ClusterName": "llm-train", "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc", "ClusterStatus": 7}

    def list_cluster_nodes(self, **kwargs: Any) -> dict[str, Any]:
        return {"ClusterNodeSummaries": []}


def test_given_a_cluster_description_our_models_cannot_read_then_cluster_is_an_error(tmp_path: Path) -> None:
    run = _preflight(tmp_path, clients={"sagemaker": _UnreadableCluster()})
    assert run.row("cluster")[0] == "ERROR" and "validation error" in run.row("cluster")[1]
    assert run.code == 1 and "Traceback" not in run.err


@pytest.mark.parametrize("seconds", ["0", "-1", "0.1", "nan", "soon", "3600"])
def test_given_a_poll_interval_out_of_range_then_exit_2_with_a_message(capsys: pytest.CaptureFixture[str], seconds: str) -> None:
    with pytest.raises(SystemExit) as exited:  # argparse's own usage error, before anything is read
        main(["preflight", "--stack", "sandbox", "--poll-seconds", seconds])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "--poll-seconds: seconds between 0.5 and 60" in err and "Traceback" not in err


# --- EKS ---------------------------------------------------------------------------------------------
EKS_DEFAULT = EVENTS / "drills" / "eks-default.json"


def test_an_eks_stack_passes_its_cluster_and_worker_groups_and_the_orchestrator_answers_through_kubernetes(tmp_path: Path) -> None:
    # Given an EKS-orchestrated cluster and a stack deployed for it (Orchestrator=Eks, its EksClusterName)
    run = _preflight(tmp_path, scenario=load_scenario(EKS_DEFAULT))
    # Then the cluster and its worker groups pass, and Check Controller Agent answers through the Kubernetes API
    assert run.row("cluster")[0] == "PASS" and "EKS" in run.row("cluster")[1]
    assert run.row("node-roles")[0] == "PASS" and "EKS worker groups" in run.row("node-roles")[1]
    status, detail = run.row("agent")
    assert status == "PASS" and "the EKS orchestrator" in detail and "16 node(s)" in detail


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"Orchestrator": "Slurm", "EksClusterName": ""}, "Orchestrator=Eks"),
        ({"EksClusterName": "staging-eks"}, "EksClusterName=llm-train-eks"),
    ],
)
def test_an_eks_cluster_behind_a_stack_deployed_otherwise_fails_with_the_parameter_to_set(
    tmp_path: Path, overrides: dict[str, str], said: str
) -> None:
    run = _preflight(tmp_path, scenario=load_scenario(EKS_DEFAULT), overrides=overrides)
    status, _ = run.row("cluster")
    assert status == "FAIL" and said in run.out
