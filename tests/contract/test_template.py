"""template.yaml, statemachines/, functions/ and errors.py must agree with each other."""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import pytest
from moto.events.models import EventPattern

from hyperpod_recovery import errors
from hyperpod_recovery.config import Settings
from hyperpod_recovery.domain.jobs.eks_grace import OLD_COPY_RETRY_ATTEMPTS, OLD_COPY_RETRY_INTERVAL_SECONDS, OLD_COPY_WAIT_SECONDS
from hyperpod_recovery.models.job_nodes_item import partition_key
from hyperpod_recovery_cli.drill import RECORD_STATES
from sandbox.template import Resolver, load_template
from tests.conftest import ROOT, load_event

TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES = TEMPLATE["Resources"]
ASL_FILES = sorted((ROOT / "statemachines").glob("*.asl.json"))
LAMBDA_TRANSIENT = {"Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException", "Lambda.TooManyRequestsException"}
ERROR_CLASSES = {name for name, obj in inspect.getmembers(errors, inspect.isclass) if issubclass(obj, Exception)}


def _states(definition: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, state in definition["States"].items():
        found.append((name, state))
        if "ItemProcessor" in state:
            found += _states(state["ItemProcessor"])
    return found


@pytest.fixture(params=ASL_FILES, ids=lambda p: p.name)
def asl(request: pytest.FixtureRequest) -> dict[str, Any]:
    return json.loads(request.param.read_text())


def test_every_custom_error_name_in_the_workflow_is_an_exception_class(asl: dict[str, Any]) -> None:
    for name, state in _states(asl):
        for clause in state.get("Retry", []) + state.get("Catch", []):
            for error in clause["ErrorEquals"]:
                if not error.startswith(("States.", "Lambda.", "StepFunctions.", "DynamoDB.", "Sandbox.")):
                    assert error in ERROR_CLASSES, f"{name}: {error} is not a class in errors.py"


POLLED_ERROR = "OldCopyStillStopping"


def test_retries_are_named_bounded_and_jittered(asl: dict[str, Any]) -> None:
    for name, state in _states(asl):
        if state["Type"] != "Task":
            continue
        retries = state.get("Retry", [])
        if "lambda" in state["Resource"] or state["Resource"].endswith("FunctionArn}"):
            assert any(set(r["ErrorEquals"]) == LAMBDA_TRANSIENT for r in retries), f"{name} must retry Lambda's transient errors"
        else:
            assert retries, f"{name} must retry its service's throttling"
        for retry in retries:
            assert "States.ALL" not in retry["ErrorEquals"] and "States.TaskFailed" not in retry["ErrorEquals"], name
            # (an EKS copy waiting for the old one's pods to go is a poll, not a transient error: a fixed
            # interval gives its wait a floor, which FULL jitter's draws from zero do not)
            jitter = "NONE" if retry["ErrorEquals"] == [POLLED_ERROR] else "FULL"
            assert retry["MaxAttempts"] <= 5 and retry["MaxDelaySeconds"] <= 60 and retry["JitterStrategy"] == jitter, name


def test_on_eks_a_resubmission_waits_for_the_old_copys_pods_at_least_twice_kubernetes_default_grace_period(asl: dict[str, Any]) -> None:
    # Given every state that resubmits a job (on EKS: only once nothing of the old copy runs)
    resubmitting = [(name, s) for name, s in _states(asl) if name in ("Resubmit Job Now", "Resubmit Job", "Grow Back Job")]
    assert resubmitting or "Resubmit" not in json.dumps(asl)
    for name, state in resubmitting:
        (poll,) = [r for r in state["Retry"] if POLLED_ERROR in r["ErrorEquals"]]
        delays = [min(poll["IntervalSeconds"] * poll["BackoffRate"] ** k, poll["MaxDelaySeconds"]) for k in range(poll["MaxAttempts"])]
        # Then its tries are spread over at least 60 s, whatever the draws (a pod's default grace period is 30 s)
        assert poll["JitterStrategy"] == "NONE" and sum(delays) >= 60, (name, delays)


def test_the_wait_find_newest_checkpoint_plans_by_is_the_one_every_resubmitting_state_retries_for(asl: dict[str, Any]) -> None:
    # Given the figures the planner compares a job's grace period with (domain/jobs/eks_grace.py: the one source)
    resubmitting = [(name, s) for name, s in _states(asl) if name in ("Resubmit Job Now", "Resubmit Job", "Grow Back Job")]
    for name, state in resubmitting:
        (poll,) = [r for r in state["Retry"] if POLLED_ERROR in r["ErrorEquals"]]
        # Then each state retries the old copy's stop at that fixed interval, that many times (no growth, no
        # cap below it): its tries come OLD_COPY_WAIT_SECONDS after its first, the wait the plan counts on
        assert (poll["IntervalSeconds"], poll["MaxAttempts"]) == (OLD_COPY_RETRY_INTERVAL_SECONDS, OLD_COPY_RETRY_ATTEMPTS), name
        assert poll["BackoffRate"] == 1 and poll["MaxDelaySeconds"] >= poll["IntervalSeconds"], name
        delays = [min(poll["IntervalSeconds"] * poll["BackoffRate"] ** k, poll["MaxDelaySeconds"]) for k in range(poll["MaxAttempts"])]
        assert sum(delays) == OLD_COPY_WAIT_SECONDS, (name, delays)


# A Lambda function stopped at its Timeout (or out of memory) reaches Step Functions as
# Sandbox.Timedout or Lambda.Unknown ("Unhandled errors in Lambda are reported as Lambda.Unknown...
# These include out-of-memory errors and function timeouts": Step Functions, Handle Lambda service
# exceptions; Lambda, Troubleshoot invocation: Sandbox.Timedout), killed anywhere in its step. Only a
# step whose rerun finds its own work is retried then (tests/contract/test_time_budgets.py says why
# one call alone never runs a function out of time):
LAMBDA_STOPPED = {"Sandbox.Timedout", "Lambda.Unknown"}
RERUN_FINDS_ITS_OWN_WORK = {
    # pure, or read-only
    "Validate Request": "parses its input",
    "Validate Job Request": "parses its input",
    "Assess Nodes": "reads the cluster",
    "Classify Failure": "reads the cluster",
    "Check Other Recovery": "reads the ledger",
    "Plan Job Restart": "reads the ledger",
    # conditional writes keyed by the incident
    "Lock Nodes": "a lock held by this incident is taken again (incident = me)",
    "Apply Safety Policy": "its host locks are this incident's; nodes it counts already are not counted again; no breaker opens twice",
    "Find Newest Checkpoint": "reads S3 and overwrites the incident's job list",
    "Wait For Rejoin": "registers its wait under the execution's name, replacing the earlier one",
    # commands keyed by a command id the agent journals (or, on EKS, Kubernetes writes that find their own)
    "Cordon Nodes": "the same command id: the agent answers from its journal; a cordon finds the node cordoned",
    "Read Boot Times": "read-only command",
    "Resume Nodes": "the same command id; a resume finds its own drains lifted",
    "Capture Job Spec": "read-only command",
    "Check Job Nodes": "read-only command",
    "Capture Hang Evidence": "read-only command",
    "Check Controller Agent": "read-only command",
    "Resubmit Job Now": "the ledger claim is this incident's; the same command id; a re-created job is found by its name",
    "Resubmit Job": "the ledger claim is this incident's; the same command id; a re-created job is found by its name",
    "Check Shrunk Jobs": "reads S3 and the ledger; its state is its input's, returned anew",
    "Start Planned Swap": "reads the cluster and the orchestrator's reading",
    "Check Swap Checkpoint": "reads S3, the cluster and the ledger; its watch is its input's, returned anew",
    "Grow Back Job": "the ledger claim on the shrunk copy is this incident's; the same command id",
}
# Not retried on a stop: the replacing steps mark a replacement in the ledger after HyperPod's answer
# (stopped in between, a rerun would replace again); the Record steps publish a notification each run.
# (PlannedSwap's Record steps send their notification once, by its effect, but are not rerun either)
SWAP_RECORD_STATES = {"Record Swap Outcome", "Escalate Swap", "Record Swap Rejection"}
NOT_RERUN_WHEN_STOPPED = {"Replace Nodes", "Replace Unhealthy Nodes", "Check Rejoin", *RECORD_STATES, *SWAP_RECORD_STATES}


def _lambda_tasks(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: state
        for name, state in _states(definition)
        if state["Type"] == "Task" and ("lambda" in state["Resource"] or state["Resource"].endswith("FunctionArn}"))
    }


def test_every_lambda_step_is_classed_as_rerun_or_not_when_its_function_is_stopped() -> None:
    tasks = {name for path in ASL_FILES for name in _lambda_tasks(json.loads(path.read_text()))}
    assert tasks == set(RERUN_FINDS_ITS_OWN_WORK) | NOT_RERUN_WHEN_STOPPED
    assert not set(RERUN_FINDS_ITS_OWN_WORK) & NOT_RERUN_WHEN_STOPPED


def test_a_stopped_function_is_retried_exactly_where_a_rerun_finds_its_own_work(asl: dict[str, Any]) -> None:
    for name, state in _lambda_tasks(asl).items():
        stopped = [r for r in state.get("Retry", []) if set(r["ErrorEquals"]) & LAMBDA_STOPPED]
        if name in RERUN_FINDS_ITS_OWN_WORK:
            # Then its Retry names both ways a stopped function reaches Step Functions, a bounded few times
            assert len(stopped) == 1 and set(stopped[0]["ErrorEquals"]) == LAMBDA_STOPPED, name
            assert 1 <= stopped[0]["MaxAttempts"] <= 2, name
        else:
            # And a step that would act twice is never rerun: its Catch escalates to a human
            assert stopped == [], name
            assert any("States.ALL" in c["ErrorEquals"] for c in state.get("Catch", [])) or name.startswith(("Record", "Escalate")), name


# The one Catch that is not a failure: a wait whose timeout is its fallback check (Wait For Rejoin).
TIMEOUT_IS_THE_FALLBACK = {("Wait For Rejoin", "Check Rejoin")}


# A grow-back that failed is that one shrunk job's end (as Note Resubmit Failure is a resubmission's):
# the next check folds the error into the job (it stays shrunk, or its copy is unknown) and goes on.
FAILURE_FOLDED_IN = {("Grow Back Job", "Check Shrunk Jobs")}


# And the Record steps' lost answers (they ran; Lambda's response did not arrive, past the
# retries): what they answered is read back from the ledger, else the execution fails named.
LOST_ANSWER_RECALLED = {
    ("Record Outcome", "Recall Outcome"),
    ("Escalate Incident", "Recall Outcome"),
    ("Record Job Outcome", "Recall Job Outcome"),
    ("Escalate Job Incident", "Recall Job Outcome"),
}


def test_every_failure_path_ends_in_a_named_fail_state(asl: dict[str, Any]) -> None:
    states = asl["States"]
    for name, state in states.items():
        for catch in state.get("Catch", []):
            if (name, catch["Next"]) in TIMEOUT_IS_THE_FALLBACK:
                assert catch["ErrorEquals"] == ["States.Timeout"] and catch["ResultPath"] is None, name
                continue
            if (name, catch["Next"]) in FAILURE_FOLDED_IN:
                assert catch["ErrorEquals"] == ["States.ALL"] and catch["ResultPath"] == "$.grow_back.failure", name
                continue
            if (name, catch["Next"]) in LOST_ANSWER_RECALLED:
                assert set(catch["ErrorEquals"]) == LAMBDA_TRANSIENT and catch["ResultPath"] == "$.lost_answer", name
                check = states[states[catch["Next"]]["Next"]]
                lost = states[check["Default"]]
                assert lost["Type"] == "Fail" and lost["ErrorPath"] == "$.lost_answer.Error", name
                continue
            target = states[catch["Next"]]
            assert target["Type"] == "Task" and catch["ResultPath"] == "$.errors", name
            assert states[target["Next"]]["Type"] == "Fail", f"{name} -> {catch['Next']} must end in a Fail state"


def test_state_names_read_like_a_runbook(asl: dict[str, Any]) -> None:
    for name, _ in _states(asl):
        assert re.fullmatch(r"[A-Z][a-z]+( [A-Z][a-z]+)+", name), f"{name!r} should be 'Verb Noun'"


def test_every_placeholder_is_substituted_and_every_substitution_used() -> None:
    for logical, resource in RESOURCES.items():
        if resource["Type"] != "AWS::Serverless::StateMachine":
            continue
        text = (ROOT / resource["Properties"]["DefinitionUri"]).read_text()
        placeholders = set(re.findall(r"\$\{([A-Za-z0-9]+)\}", text))
        assert placeholders == set(resource["Properties"]["DefinitionSubstitutions"]), logical


def test_every_function_has_a_handler_and_every_handler_a_function() -> None:
    code_uris = {r["Properties"]["CodeUri"].rstrip("/") for r in RESOURCES.values() if r["Type"] == "AWS::Serverless::Function"}
    folders = {f"functions/{p.parent.name}" for p in (ROOT / "functions").glob("*/app.py")}
    assert code_uris == folders
    for folder in folders:
        assert "def lambda_handler" in (ROOT / folder / "app.py").read_text()


def test_function_environment_is_exactly_what_settings_read() -> None:
    variables = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    variables |= {v for r in RESOURCES.values() for v in r.get("Properties", {}).get("Environment", {}).get("Variables", {})}
    powertools = {v for v in variables if v.startswith("POWERTOOLS_")}
    assert {v.lower() for v in variables - powertools} == set(Settings.model_fields)


def test_sandbox_powertools_defaults_match_the_template() -> None:
    variables = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    source = (ROOT / "sandbox" / "__init__.py").read_text()
    for name in ("POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"):
        assert f'"{name}", "{variables[name]}"' in source


def _statements() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for logical, resource in RESOURCES.items():
        for policy in resource.get("Properties", {}).get("Policies", []):
            if isinstance(policy, dict) and "Statement" in policy:
                found += [(logical, s) for s in policy["Statement"]]
        if resource["Type"] == "AWS::IAM::ManagedPolicy":
            found += [(logical, s) for s in resource["Properties"]["PolicyDocument"]["Statement"]]
    return found


def test_the_controller_agent_policy_is_exactly_what_the_agent_calls() -> None:
    # Given the managed policy operators attach to the controller group's role
    statements = [s for logical, s in _statements() if logical == "ControllerAgentPolicy"]
    granted = {a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}
    # Then it grants the calls agent/ makes, and nothing else
    calls = set()
    for source in (ROOT / "agent" / "hyperpod_recovery_agent").glob("*.py"):
        text = source.read_text()
        calls |= {f"sqs:{_camel(m)}" for m in re.findall(r"self\.sqs\.(\w+)\(", text)}
        calls |= {f"states:{_camel(m)}" for m in re.findall(r"self\.stepfunctions\.(\w+)\(", text)}
        calls |= {f"events:{_camel(m)}" for m in re.findall(r"self\.events\.(\w+)\(", text)}
        calls |= {f"dynamodb:{_camel(m)}" for m in re.findall(r"self\.dynamodb\.(\w+)\(", text)}
        calls |= {f"{svc}:{_camel(m)}" for svc, m in re.findall(r'_client\("(sqs|events)", config\)\.(\w+)\(', text)}
    assert granted == calls
    # And each statement names resources of this stack (the queue, the default bus), except the
    # answers to the workflow: SendTask* has no resource type, so "*" (test_aws_policies.py)
    for s in statements:
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        assert all(isinstance(r, dict) for r in resources) or (s["Sid"] == "AnswerTheWorkflow" and resources == ["*"]), s["Sid"]
    put_item = next(s for s in statements if s["Action"] == "dynamodb:PutItem")
    assert put_item["Resource"] == {"Fn::GetAtt": ["LedgerTable", "Arn"]}
    assert put_item["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [{"Fn::Sub": "JOBNODES#${ClusterName}"}]}}
    assert put_item["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"][0]["Fn::Sub"] == f"{partition_key('${ClusterName}')}"
    put_events = next(s for s in statements if s["Action"] == "events:PutEvents")
    assert put_events["Condition"] == {"StringEquals": {"events:source": "hyperpod-recovery.agent"}}
    assert "AgentPolicyArn" in TEMPLATE["Outputs"]


def _camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def test_no_iam_statement_uses_a_wildcard_action() -> None:
    for logical, statement in _statements():
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert all("*" not in a for a in actions), f"{logical}: {actions}"


def test_sagemaker_permissions_are_scoped_to_the_guarded_cluster() -> None:
    for logical, statement in _statements():
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if any(a.startswith("sagemaker:") for a in actions):
            assert statement["Resource"] == {"Ref": "ClusterArn"}, logical


def test_data_at_rest_is_encrypted() -> None:
    for logical, resource in RESOURCES.items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::SQS::Queue":
            assert props.get("SqsManagedSseEnabled") is True, logical
        if resource["Type"] == "AWS::DynamoDB::Table":
            assert props["SSESpecification"]["SSEEnabled"] is True, logical
        if resource["Type"] == "AWS::SNS::Topic":
            assert props.get("KmsMasterKeyId"), logical


def _pattern(rule: str) -> EventPattern:
    resolver = Resolver(
        TEMPLATE,
        {
            "ClusterName": "llm-train",
            "ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6",
            "CheckpointBucketPattern": "ckpt",
        },
        pseudo={"AWS::Region": "us-west-2", "AWS::AccountId": "111122223333", "AWS::Partition": "aws"},
    )
    return EventPattern.load(json.dumps(resolver.resolve(RESOURCES[rule]["Properties"]["EventPattern"])))


@pytest.mark.parametrize(
    ("rule", "sample", "matches"),
    [
        ("HealthEventRule", "hyperpod/node_health_unhealthy.json", True),
        ("HealthEventRule", "hyperpod/node_health_healthy.json", False),
        ("HealthEventRule", "hyperpod/node_health_foreign_cluster.json", False),
        ("HealthEventRule", "cloudwatch/alarm_state_change_alarm.json", False),
        ("AlarmRule", "cloudwatch/alarm_state_change_alarm.json", True),
        ("AlarmRule", "cloudwatch/alarm_state_change_ok.json", False),
        ("AlarmRule", "hyperpod/node_health_unhealthy.json", False),
        ("JobFailedRule", "agent/job-failed.json", True),
        ("JobFailedRule", "hyperpod/node_health_unhealthy.json", False),
        ("HealthEventRule", "agent/job-failed.json", False),
        ("ClusterEventRule", "hyperpod-cluster/instance_replacement_completed.json", True),
        ("ClusterEventRule", "hyperpod-cluster/lifecycle_script_started.json", True),  # an Instance event: Notice judges it
        ("ClusterEventRule", "hyperpod-cluster/instance_creation_failed.json", False),  # another cluster's
        ("ClusterEventRule", "hyperpod/node_health_unhealthy.json", False),
        ("HealthEventRule", "hyperpod-cluster/instance_replacement_completed.json", False),
    ],
)
def test_eventbridge_rules_forward_only_actionable_events_of_this_cluster(rule: str, sample: str, matches: bool) -> None:
    assert _pattern(rule).matches_event(load_event(sample)) is matches


def test_job_failed_rule_ignores_other_clusters_jobs_and_the_queue_accepts_it() -> None:
    event = load_event("agent/job-failed.json")
    event["detail"]["cluster_name"] = "other-cluster"
    assert not _pattern("JobFailedRule").matches_event(event)
    sources = RESOURCES["IntakeQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"][0]["Condition"]["ArnEquals"]["aws:SourceArn"]
    intake_rules = {
        logical for logical, r in RESOURCES.items() if r["Type"] == "AWS::Events::Rule" and r["Properties"]["Targets"][0]["Id"] == "intake"
    }
    assert {s["Fn::GetAtt"][0] for s in sources} == intake_rules == {"HealthEventRule", "AlarmRule", "JobFailedRule"}


def test_job_recovery_may_run_node_recovery_nested_and_nothing_else() -> None:
    statements = [s for logical, s in _statements() if logical == "JobRecoveryStateMachine"]
    start = next(s for s in statements if s["Action"] == "states:StartExecution")
    assert start["Resource"] == {"Ref": "NodeRecoveryStateMachine"}
    follow = next(s for s in statements if "states:DescribeExecution" in s["Action"])
    assert follow["Resource"]["Fn::Sub"].endswith(":execution:${ClusterName}-node-recovery:*")


def test_alarm_rule_ignores_alarms_not_named_for_this_cluster() -> None:
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    event["detail"]["alarmName"] = "hyperpod-recovery:other-cluster:xid-i-0391f86fa0fe0d465"
    assert not _pattern("AlarmRule").matches_event(event)


def test_every_skipped_security_check_is_explained() -> None:
    # Given the checks make security skips, and the table in docs/security.md
    skipped = set(re.findall(r"^\s+- (CKV_[A-Z0-9_]+)", (ROOT / ".checkov.yaml").read_text(), re.MULTILINE))
    explained = set(re.findall(r"^\| (CKV_[A-Z0-9_]+) \|", (ROOT / "docs" / "security.md").read_text(), re.MULTILINE))
    # Then each skip has its reason, and the page explains nothing that is not skipped
    assert skipped and skipped == explained


def test_only_the_functions_that_send_commands_may_put_one_on_the_command_queue() -> None:
    # Given the functions whose own policy lets them send to the command queue
    senders = {
        logical
        for logical, statement in _statements()
        if statement["Action"] == "sqs:SendMessage" and statement["Resource"] == {"Fn::GetAtt": ["CommandQueue", "Arn"]}
    }
    assert senders == {
        "CordonNodesFunction",
        "ResumeNodesFunction",
        "ReadBootTimesFunction",
        "ResubmitJobFunction",
        "CaptureJobSpecFunction",
        "CheckJobNodesFunction",
        "CaptureHangEvidenceFunction",  # a hang's read-only evidence
        "CheckControllerAgentFunction",  # the preflight's read-only check command
    }
    # Then the queue's policy denies sending to every principal but their roles
    (statement,) = RESOURCES["CommandQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert (statement["Effect"], statement["Principal"], statement["Action"]) == ("Deny", "*", "sqs:SendMessage")
    allowed = statement["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    assert {a["Fn::GetAtt"][0].removesuffix("Role") for a in allowed} == senders
    assert all(a["Fn::GetAtt"][1] == "Arn" for a in allowed)


def _s3_statements(logical: str) -> list[dict[str, Any]]:
    return [
        s
        for p in RESOURCES[logical]["Properties"]["Policies"]
        if isinstance(p, dict)
        for s in p.get("Statement", [])
        if str(s["Action"]).startswith("s3:")
    ]


def test_the_preflight_reads_checkpoints_with_exactly_the_pipelines_s3_permissions() -> None:
    # Given the function that finds checkpoints in a recovery, and the one the preflight reads them with
    recovery, preflight = _s3_statements("FindNewestCheckpointFunction"), _s3_statements("CheckDeploymentFunction")
    # Then they read the same buckets with the same actions: "readable" in the preflight is readable in a recovery
    assert recovery and preflight == recovery
    # And the preflight's function can do nothing else
    others = [s for p in RESOURCES["CheckDeploymentFunction"]["Properties"]["Policies"] for s in p["Statement"] if s not in preflight]
    assert others == []


def test_the_agent_check_workflow_is_watched_by_nothing_that_pages_or_reconciles() -> None:
    # A preflight against a stack whose agent is not installed yet fails its check on purpose:
    # that must neither page (executions-failed alarm) nor be reconciled as an incident.
    text = json.dumps({k: v for k, v in RESOURCES.items() if k not in ("AgentCheckStateMachine", "AgentCheckLogGroup")})
    assert "AgentCheckStateMachine" not in text and "agent-check" not in text


def test_every_function_fed_by_a_queue_reports_its_failed_records_and_uses_the_batch_loop() -> None:
    # A handler's batchItemFailures are ignored, and its failed records deleted, unless the event
    # source mapping asks for them (sqs_events.process_batch returns them).
    fed = {}
    for resource in TEMPLATE["Resources"].values():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        for event in resource["Properties"].get("Events", {}).values():
            if event["Type"] == "SQS":
                fed[resource["Properties"]["CodeUri"].rstrip("/").rsplit("/", 1)[-1]] = event["Properties"]
    assert sorted(fed) == ["intake", "notice_cluster_event", "reconcile_execution"]
    for function, source in fed.items():
        assert source.get("FunctionResponseTypes") == ["ReportBatchItemFailures"], function
        handler = (ROOT / "functions" / function / "app.py").read_text()
        assert "sqs_event_handler" in handler or "process_batch" in handler, function
