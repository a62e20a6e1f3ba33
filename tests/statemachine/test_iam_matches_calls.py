"""Moto does not enforce IAM: a call a function's policy does not allow works in every drill and
fails on AWS with AccessDenied. Here every AWS call each Lambda made across drills that reach every
function is checked against the actions its template.yaml policy allows (IAM service authorization
reference names: Step Functions' API is ``states:``, S3's ListObjectsV2 is ``s3:ListBucket``)."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest

from hyperpod_recovery_cli.main import main
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from sandbox.template import load_template
from tests.conftest import ROOT

pytestmark = pytest.mark.sandbox

# Drills that, together, run every recovery function of the stack but the scheduled one.
DRILLS = (
    "default",
    "reboot-ladder",
    "replacement-new-identity",  # Check Rejoin's DescribeCluster (a match by instance group)
    "job-node-failure",
    "job-crash-loop",
    "abort-mid-rejoin",
    "stale-event",
    "invalid-start-input",
    "controller-node",
    "dry-run",
    "job-and-health-event",
    "rejoin-event",  # Notice Cluster Event: a Cluster Event wakes the wait
    "health-gate-replaced-again",  # Replace Unhealthy Nodes: a replacement failed the health gate
    "abort-event-lost",  # Sweep Ended Executions settles an end (every drill sweeps; here it describes and records one)
    "job-hang",  # Detect Hung Jobs on its schedule, Capture Hang Evidence, a hang's Classify Failure (progress, evidence)
    "job-hang-hyperpod-event",  # Import HyperPod Hangs: HyperPod's own hang event kept as a verdict, and its notice
    "no-spare-elastic",  # Find Newest Checkpoint reading the recovery log, Check Shrunk Jobs, Grow Back Job
    "elastic-second-fault",  # Find Newest Checkpoint proving a shrunk copy's lineage (claims, job records)
    "at-risk-observe-only",  # At Risk (SNS: an alert, an alarm) and its tick settling an outcome
)
NOT_RUN_BY_DRILLS = {"ReportSafetyStateFunction"}  # runs on a schedule; tests/unit cover it
EKS_ONLY = {"FindFailedJobsFunction"}  # deployed on EKS stacks only (its Condition): checked by the EKS drills below
IAM_PREFIX = {"sfn": "states", "eventbridge": "events"}  # botocore service id -> IAM service prefix
IAM_ACTION = {("s3", "ListObjectsV2"): "s3:ListBucket", ("s3", "HeadObject"): "s3:GetObject"}


def _iam_action(service: str, operation: str) -> str:
    return IAM_ACTION.get((service, operation), f"{IAM_PREFIX.get(service, service)}:{operation}")


# The template's conditions that hold on a stack deployed with Orchestrator=Eks (and an EksClusterName).
EKS_CONDITIONS = frozenset({"IsEks", "HasEksCluster"})


def _chosen(node: Any, eks: bool) -> Any:
    """A policy with its Fn::If resolved as the stack would on that orchestrator (None: AWS::NoValue)."""
    if isinstance(node, dict) and "Fn::If" in node:
        condition, when_true, when_false = node["Fn::If"]
        return _chosen(when_true if eks and condition in EKS_CONDITIONS else when_false, eks)
    return None if node == {"Ref": "AWS::NoValue"} else node


def _allowed(function: dict[str, Any], *, eks: bool = False) -> set[str]:
    allowed: set[str] = set()
    for policy in (_chosen(p, eks) for p in function["Properties"].get("Policies", [])):
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            if statement.get("Effect") == "Allow":
                actions = statement["Action"]
                allowed.update([actions] if isinstance(actions, str) else actions)
    return allowed


def _calls_of_drills(names: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[str, str]]]:
    """Every AWS call each function made, over these drills."""
    found: dict[str, set[tuple[str, str]]] = {}
    for name in names:
        runner = DrillRunner(
            load_scenario(ROOT / "events" / "drills" / f"{name}.json"), log_path=tmp_path_factory.mktemp(name) / "lambda.log"
        )
        runner.run()
        for function, calls in runner.aws.api_calls.by_function.items():
            found.setdefault(function, set()).update(calls)
    return found


@pytest.fixture(scope="module")
def calls_by_function(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[str, str]]]:
    found = _calls_of_drills(DRILLS, tmp_path_factory)
    # The preflight's functions (Check Controller Agent, Check Deployment) run in a preflight, not a drill.
    runner = DrillRunner(load_scenario(ROOT / "events" / "drills" / "default.json"), log_path=tmp_path_factory.mktemp("pf") / "lambda.log")
    with runner.deployed() as aws:
        code = main(["preflight", "--stack", "sandbox"], stdout=io.StringIO(), stderr=io.StringIO(), sleep=runner.advance)
        assert code == 0
        for function, calls in aws.api_calls.by_function.items():
            found.setdefault(function, set()).update(calls)
    return found


def test_every_function_of_the_stack_ran_in_these_drills(calls_by_function: dict[str, set[tuple[str, str]]]) -> None:
    functions = {k for k, v in load_template(ROOT / "template.yaml")["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}
    assert functions - NOT_RUN_BY_DRILLS - EKS_ONLY <= set(calls_by_function)


def test_every_call_a_function_makes_is_allowed_by_its_policy(calls_by_function: dict[str, set[tuple[str, str]]]) -> None:
    template = load_template(ROOT / "template.yaml")["Resources"]
    missing = {
        function: sorted(_iam_action(s, o) for s, o in calls if _iam_action(s, o) not in _allowed(template[function]))
        for function, calls in calls_by_function.items()
    }
    assert {f: m for f, m in missing.items() if m} == {}


def test_the_sweep_of_ended_executions_made_every_call_it_needs_in_these_drills(calls_by_function: dict[str, set[tuple[str, str]]]) -> None:
    # (so the policy check above covers the calls only an end left to the sweep makes)
    swept = calls_by_function["SweepEndedExecutionsFunction"]
    assert {("sfn", "ListExecutions"), ("sfn", "DescribeExecution"), ("sfn", "GetExecutionHistory"), ("sns", "Publish")} <= swept


def test_the_mapping_from_calls_to_iam_actions_follows_the_authorization_reference() -> None:
    assert _iam_action("sfn", "GetExecutionHistory") == "states:GetExecutionHistory"
    assert _iam_action("s3", "ListObjectsV2") == "s3:ListBucket" and _iam_action("dynamodb", "PutItem") == "dynamodb:PutItem"


# EKS: each Kubernetes-calling function carries its command out and answers its task itself.
# eks-job-hang-training-operator: Find Failed Jobs keeps the operator's HANGING fault as a verdict, and tells it.
EKS_DRILLS = (
    "eks-default",
    "eks-reboot-ladder",
    "eks-dry-run",
    "eks-training-operator",
    "eks-job-failed",
    "eks-job-hang",  # Detect Hung Jobs resolving namespace/name, Capture Hang Evidence reading pod logs
    "eks-job-hang-training-operator",  # Find Failed Jobs recording the training operator's HANGING fault
)


@pytest.fixture(scope="module")
def eks_calls_by_function(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[str, str]]]:
    found = _calls_of_drills(EKS_DRILLS, tmp_path_factory)
    # And the preflight's, on an EKS stack (Check Controller Agent answers through the Kubernetes API)
    runner = DrillRunner(load_scenario(ROOT / "events" / "drills" / "eks-default.json"), log_path=tmp_path_factory.mktemp("pf") / "l.log")
    with runner.deployed() as aws:
        main(["preflight", "--stack", "sandbox"], stdout=io.StringIO(), stderr=io.StringIO(), sleep=runner.advance)
        for function, calls in aws.api_calls.by_function.items():
            found.setdefault(function, set()).update(calls)
    return found


def test_on_eks_every_call_a_function_makes_is_allowed_by_its_policy(eks_calls_by_function: dict[str, set[tuple[str, str]]]) -> None:
    template = load_template(ROOT / "template.yaml")["Resources"]
    missing = {
        function: sorted(_iam_action(s, o) for s, o in calls if _iam_action(s, o) not in _allowed(template[function], eks=True))
        for function, calls in eks_calls_by_function.items()
    }
    assert {f: m for f, m in missing.items() if m} == {}
    # (and the EKS drills did reach the functions that answer their own tasks)
    assert {"CordonNodesFunction", "ReadBootTimesFunction", "ResumeNodesFunction", "ResubmitJobFunction"} <= set(eks_calls_by_function)
    assert {"FindFailedJobsFunction", "CaptureJobSpecFunction", "CheckJobNodesFunction"} <= set(eks_calls_by_function)


def test_the_eks_grants_are_given_on_eks_only() -> None:
    template = load_template(ROOT / "template.yaml")["Resources"]
    cordon = template["CordonNodesFunction"]
    assert "eks:DescribeCluster" in _allowed(cordon, eks=True) and "eks:DescribeCluster" not in _allowed(cordon)
    assert "states:SendTaskSuccess" in _allowed(cordon, eks=True) and "states:SendTaskSuccess" not in _allowed(cordon)


# --- a private EKS endpoint: what the functions in the VPC call, and the VPC endpoints that carries --
VPC_ENDPOINT = {
    "eks": "eks",
    "sfn": "states",
    "dynamodb": "dynamodb",
    "sqs": "sqs",
    "sns": "sns",
    "sagemaker": "sagemaker.api",
    "s3": "s3",
    "sts": "sts",
}


def _runbook_endpoints() -> dict[str, set[str]]:
    """The runbook's table (EKS: a private API endpoint): function logical id -> VPC endpoints."""
    section = (ROOT / "docs" / "runbook.md").read_text().split("### EKS: a private API endpoint", 1)[1].split("\n#", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ") and "(`" in line]
    return {re.search(r"\(`(\w+)`\)", row[1])[1]: {e.strip() for e in row[3].split(",")} for row in rows}  # type: ignore[index]


def test_the_runbook_lists_every_vpc_endpoint_each_function_in_the_vpc_calls(
    eks_calls_by_function: dict[str, set[tuple[str, str]]],
) -> None:
    template = load_template(ROOT / "template.yaml")["Resources"]
    in_vpc = {name for name, r in template.items() if r["Type"] == "AWS::Serverless::Function" and "VpcConfig" in r["Properties"]}
    kube_callers = {
        r["Properties"]["PrincipalArn"]["Fn::GetAtt"][0].removesuffix("Role")
        for r in template.values()
        if r["Type"] == "AWS::EKS::AccessEntry"
    }
    # Given what each function in the VPC calls on an EKS stack (every one resolves the API endpoint
    # with eks:DescribeCluster, and checks the cluster with sagemaker:DescribeCluster, on its cold
    # start: the sandbox's one process does both once, so those two are read from the grants the
    # template gives each Kubernetes caller on EKS)
    cold_start = {"eks:DescribeCluster": "eks", "sagemaker:DescribeCluster": "sagemaker.api"}

    def at_cold_start(function: str) -> set[str]:
        granted = _allowed(template[function], eks=True) if function in kube_callers else set()
        return {endpoint for action, endpoint in cold_start.items() if action in granted}

    calls = {f: eks_calls_by_function[f] for f in in_vpc}
    derived = {f: {VPC_ENDPOINT[s] for s, _ in calls[f]} | at_cold_start(f) for f in in_vpc}
    assert all(at_cold_start(f) == {"eks", "sagemaker.api"} for f in kube_callers)
    # Then the runbook names exactly those endpoints for exactly those functions
    assert _runbook_endpoints() == derived
    # And the template's parameter says the same, all together
    description = load_template(ROOT / "template.yaml")["Parameters"]["KubernetesSubnetIds"]["Description"]
    assert set(re.findall(r"com\.amazonaws\.<region>\.([a-z.]+?)(?=[ ,)]|$)", description)) == set().union(*derived.values())
