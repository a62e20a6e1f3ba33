"""The stack against AWS's own documented limits, not moto's: moto accepts what AWS refuses.

Each limit is quoted from AWS's documentation (see docs/decisions.md, 2026-11-23) and checked over
the whole space the template's parameters accept, not one example:

- CloudWatch: a metric-math alarm has at most 10 metrics; alarm names at most 255 characters,
  descriptions at most 1024.
- Step Functions: state machine names at most 80 characters; a Standard execution's history at
  most 25,000 events; JobRecovery's nested NodeRecovery must not time out before the child can end.
- SNS with KMS: every publisher to the encrypted topic may use its key (CloudWatch through the key
  policy, our functions through their roles); the AWS-managed alias/aws/sns cannot serve CloudWatch.
- IAM: an action with no resource type (states:SendTask*) is granted on "*" (anything else matches
  no request and denies it); every other action names its resources.
- EventBridge: the alarm opt-in prefix can never match one of the stack's own alarms, and the health
  rule matches the cluster's ARN in both the id and the name form.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto.events.models import EventPattern
from pydantic import ValidationError

from hyperpod_recovery.config import Settings
from hyperpod_recovery.domain.intake.normalize import GuardedCluster
from hyperpod_recovery.domain.nodes.cadence import next_wait_seconds
from hyperpod_recovery.domain.nodes.rejoin import MAX_BOOT_READINGS
from hyperpod_recovery.domain.planned_swap.wait import MAX_CHECKS
from hyperpod_recovery.domain.policy.limits import (
    EXECUTION_HISTORY_EVENTS,
    MAX_EVENT_WAKES,
    MAX_GATE_REPLACEMENTS,
    MAX_REJOIN_CHECKS,
    NODE_RECOVERY_OVERHEAD_SECONDS,
    STATE_MACHINE_NAME_LENGTH,
    execution_time_bound_seconds,
    node_recovery_time_bound_seconds,
    rejoin_wait_bounds,
    rejoin_window_seconds,
)
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT
from hyperpod_recovery.models.node_recovery import MAX_GROW_BACK_CHECKS, MAX_SHRUNK_JOBS_PER_INCIDENT, CheckpointPlan
from sandbox.template import Resolver, load_template
from tests.conftest import ROOT, load_event

TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES = TEMPLATE["Resources"]
PARAMETERS = TEMPLATE["Parameters"]
ASL = {path.name.removesuffix(".asl.json"): json.loads(path.read_text()) for path in (ROOT / "statemachines").glob("*.asl.json")}

# AWS quotas, as documented.
CLOUDWATCH_ALARM_METRICS = 10  # "You can include up to 10 metrics in a metric math alarm" (CloudWatch quotas)
ALARM_NAME_LENGTH = 255  # PutMetricAlarm AlarmName: Length Constraints 1-255
ALARM_DESCRIPTION_LENGTH = 1024  # PutMetricAlarm AlarmDescription: 0-1024
STACK_NAME_LENGTH = 128  # CreateStack StackName: at most 128 characters, [a-zA-Z][-a-zA-Z0-9]*
# Actions the IAM service authorization reference lists with no resource type: "*" is the only
# resource that can grant them.
ACTIONS_WITHOUT_RESOURCE_TYPES = {
    "states:SendTaskSuccess",
    "states:SendTaskFailure",
    "states:SendTaskHeartbeat",
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
}


# --- helpers: the template resolved with the longest values its parameters accept ---------------
def _longest(parameter: str) -> str:
    spec = PARAMETERS[parameter]
    if "AllowedValues" in spec:
        return max(spec["AllowedValues"], key=len)
    if parameter == "ClusterArn":
        return "arn:aws-iso-b:sagemaker:us-isob-east-1:111122223333:cluster/" + "a" * spec.get("MaxLength", 63)
    return "x" * spec.get("MaxLength", 255)


def _resolver(stack_name: str, values: dict[str, str] | None = None) -> Resolver:
    parameters = {name: _longest(name) for name in PARAMETERS}
    parameters.update(values or {})
    resolver = Resolver(
        TEMPLATE,
        parameters,
        pseudo={
            "AWS::Region": "us-isob-east-1",
            "AWS::AccountId": "111122223333",
            "AWS::StackName": stack_name,
            "AWS::Partition": "aws-iso-b",
        },
    )
    # Any resource's name or ARN: as long as CloudFormation makes one (255).
    resolver.refs = dict.fromkeys(RESOURCES, "r" * 255)
    resolver.attrs = _AsLongAsAllowed()  # type: ignore[assignment]
    return resolver


class _AsLongAsAllowed(dict):  # type: ignore[type-arg]
    def __missing__(self, key: object) -> str:
        return "r" * 255


def _of_type(kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(logical, r) for logical, r in RESOURCES.items() if r["Type"] == kind]


# --- CloudWatch ---------------------------------------------------------------------------------
def test_given_every_alarm_then_none_has_more_metrics_than_cloudwatch_allows() -> None:
    # Given every alarm of the stack
    alarms = _of_type("AWS::CloudWatch::Alarm")
    assert alarms
    for logical, alarm in alarms:
        # Then a metric-math alarm has at most 10 metrics (the deploy is rolled back otherwise)
        metrics = alarm["Properties"].get("Metrics", [])
        assert len([m for m in metrics if "MetricStat" in m]) <= CLOUDWATCH_ALARM_METRICS, logical
        assert len(metrics) <= CLOUDWATCH_ALARM_METRICS + 1, logical


def test_given_the_longest_stack_and_parameters_then_alarm_names_and_descriptions_fit() -> None:
    # Given the longest stack name and parameter values CloudFormation accepts
    resolver = _resolver("s" * STACK_NAME_LENGTH)
    for logical, alarm in _of_type("AWS::CloudWatch::Alarm"):
        props = resolver.resolve(alarm["Properties"])
        # Then every alarm's name and description stay within PutMetricAlarm's limits
        assert 1 <= len(props["AlarmName"]) <= ALARM_NAME_LENGTH, logical
        assert len(props.get("AlarmDescription", "")) <= ALARM_DESCRIPTION_LENGTH, (logical, len(props["AlarmDescription"]))


# --- Step Functions: names ---------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(
    cluster=st.from_regex(r"\A[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z").filter(lambda n: len(n) <= 63),
    stack=st.from_regex(r"\A[a-zA-Z][-a-zA-Z0-9]{0,127}\Z"),
)
def test_given_any_accepted_cluster_and_stack_name_then_the_state_machine_names_fit(cluster: str, stack: str) -> None:
    # Given any cluster name the parameter accepts and any stack name CloudFormation accepts
    resolver = _resolver(stack, {"ClusterName": cluster})
    for logical, machine in _of_type("AWS::Serverless::StateMachine"):
        name = resolver.resolve(machine["Properties"]["Name"])
        # Then the state machine name is within Step Functions' 80 characters
        assert len(name) <= STATE_MACHINE_NAME_LENGTH, (logical, name)
        assert re.fullmatch(r"[A-Za-z0-9_-]+", name), name


def test_given_the_cluster_name_parameter_then_its_length_is_bounded_by_hyperpods_own_limit() -> None:
    assert PARAMETERS["ClusterName"]["MaxLength"] == 63


def test_given_every_arn_the_stack_builds_for_its_workflows_then_it_names_the_machines_it_creates() -> None:
    # Given the names the state machines are created with
    resolver = _resolver("my-stack", {"ClusterName": "llm-train"})
    names = {resolver.resolve(m["Properties"]["Name"]) for _, m in _of_type("AWS::Serverless::StateMachine")}
    # When every state machine or execution ARN written elsewhere in the template is resolved
    text = json.dumps(resolver.resolve({k: v for k, v in TEMPLATE.items() if k in ("Globals", "Resources")}))
    referenced = set(re.findall(r":(?:stateMachine|execution):([A-Za-z0-9_-]+)", text))
    # Then each one names one of them (an ARN built from another name would match nothing)
    assert referenced <= names == {"llm-train-node-recovery", "llm-train-job-recovery", "llm-train-agent-check", "llm-train-planned-swap"}
    # And both recovery workflows are referenced (intake starts them, Reconcile watches them), and the
    # planned swap (the at-risk functions start it)
    assert referenced == {"llm-train-node-recovery", "llm-train-job-recovery", "llm-train-planned-swap"}


# --- Step Functions: history and time bounds ---------------------------------------------------
def _edges(state: dict[str, Any]) -> set[str]:
    targets = {state.get("Next"), state.get("Default")}
    targets |= {c.get("Next") for c in state.get("Choices", [])}
    targets |= {c.get("Next") for c in state.get("Catch", [])}
    return {t for t in targets if t}


def _loops(states: dict[str, Any]) -> list[set[str]]:
    """The state machine's cycles, as strongly connected components (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in _edges(states[name]):
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == name:
                    break
            if len(component) > 1 or name in _edges(states[name]):
                found.append(component)

    for name in states:
        if name not in index:
            visit(name)
    return found


def _retries(state: dict[str, Any]) -> int:
    return sum(r.get("MaxAttempts", 3) for r in state.get("Retry", []))


def _visit_events(state: dict[str, Any]) -> int:
    """The most history events one visit of a state writes, every retry included (event types of the
    Step Functions history reference: a Lambda task writes Entered, Scheduled, Started, Succeeded,
    Exited and Scheduled, Started, Failed per retry; a service integration adds Submitted)."""
    kind = state["Type"]
    if kind == "Task":
        integration = state["Resource"].startswith("arn:aws:states:::")
        per_attempt = 4 if integration else 3
        return 2 + per_attempt + per_attempt * _retries(state)
    if kind == "Map":
        return 4 + MAX_JOBS_PER_INCIDENT * _item_events(state)
    return 2


def _item_events(state: dict[str, Any]) -> int:
    return 2 + sum(_visit_events(s) for s in state["ItemProcessor"]["States"].values())


# Maps over the lists of one CheckpointPlan (Resubmit Jobs Now, Resubmit Jobs): each job is in one
# list, and the plan holds at most MAX_JOBS_PER_INCIDENT jobs in all, so they share that many items.
SHARED_ITEMS_PREFIX = "$.checkpoints."


def _sharing_maps(states: dict[str, Any]) -> set[str]:
    return {name for name, s in states.items() if s["Type"] == "Map" and s["ItemsPath"].startswith(SHARED_ITEMS_PREFIX)}


def test_given_the_maps_over_a_checkpoint_plan_then_the_plan_bounds_their_items_together() -> None:
    # Given the NodeRecovery Maps that share the item budget
    maps = _sharing_maps(ASL["node_recovery"]["States"])
    lists = {ASL["node_recovery"]["States"][name]["ItemsPath"].removeprefix(SHARED_ITEMS_PREFIX) for name in maps}
    assert maps == {"Resubmit Jobs Now", "Resubmit Jobs"} and lists == {"resume_now", "resumable"}
    # Then a plan with more jobs in those lists together than one incident carries does not validate
    plan = {"job": {"job_id": "1", "name": "j"}, "checkpoint": {"uri": "s3://bucket/p/step-000000001/", "step": 1}}
    half = MAX_JOBS_PER_INCIDENT // 2
    with pytest.raises(ValidationError):
        CheckpointPlan.model_validate({"at": "2026-01-01T00:00:00Z", "resume_now": [plan] * (half + 1), "resumable": [plan] * half})


# States of a loop that do not run on every pass but a bounded number of times per execution: Read
# Boot Times runs at most MAX_BOOT_READINGS times (observe_rejoin budgets them), and each reading is
# followed by one more pass through the loop's other states but its wait (Check Rejoin, Check Rejoined).
# Resume Nodes and its Check Health Gate run once per rejoin, and a failed health gate leads to at
# most MAX_GATE_REPLACEMENTS more (Replace Unhealthy Nodes, Check Unhealthy Replaced).
# Grow Back Job runs once per shrunk job (at most MAX_SHRUNK_JOBS_PER_INCIDENT), each followed by one
# more pass of Check Shrunk Jobs and its Choice.
BOUNDED_LOOP_STATES = {
    "Read Boot Times": MAX_BOOT_READINGS,
    "Resume Nodes": 1 + MAX_GATE_REPLACEMENTS,
    "Check Health Gate": 1 + MAX_GATE_REPLACEMENTS,
    "Replace Unhealthy Nodes": MAX_GATE_REPLACEMENTS,
    "Check Unhealthy Replaced": MAX_GATE_REPLACEMENTS,
    "Grow Back Job": MAX_SHRUNK_JOBS_PER_INCIDENT,
}
# How many passes each loop makes at most, by the wait that paces it: the wait for rejoin's checks
# (rejoin_wait_bounds), and the grow-back's checks (domain/elastic/grow_back.py stops at MAX_GROW_BACK_CHECKS).
LOOP_PASSES = {
    "Wait For Rejoin": MAX_REJOIN_CHECKS + 1,
    "Wait For Other Recovery": MAX_REJOIN_CHECKS + 1,
    "Wait For Next Checkpoint": MAX_GROW_BACK_CHECKS,
    "Wait For Checkpoint Commit": MAX_CHECKS,
}


def _is_wait(state: dict[str, Any]) -> bool:
    """A Wait state, or a task that waits for its token at most its TimeoutSecondsPath (Wait For
    Rejoin: a Cluster Event may complete it early, its timeout is the fallback)."""
    return state["Type"] == "Wait" or (
        state["Type"] == "Task" and "TimeoutSecondsPath" in state and state["Resource"].endswith(".waitForTaskToken")
    )


def _worst_case_events(definition: dict[str, Any]) -> int:
    """Every state visited once, each loop MAX_REJOIN_CHECKS + 1 times, plus MAX_EVENT_WAKES passes
    a Cluster Event cut short (its bounded states as often as their bound, with the extra pass each
    adds), plus the execution's own start and end: an upper bound of any execution's history."""
    states = definition["States"]
    total = 2
    in_loop: set[str] = set()
    for loop in _loops(states):
        bounded = loop & set(BOUNDED_LOOP_STATES)
        every_pass = loop - bounded
        woken = MAX_EVENT_WAKES if any(_is_wait(states[name]) and states[name]["Type"] == "Task" for name in loop) else 0
        passes = max(LOOP_PASSES[name] for name in loop if _is_wait(states[name]))
        total += (passes + woken) * sum(_visit_events(states[name]) for name in every_pass)
        extra_pass = sum(_visit_events(states[name]) for name in every_pass if not _is_wait(states[name]))
        total += sum(BOUNDED_LOOP_STATES[name] * (_visit_events(states[name]) + extra_pass) for name in bounded)
        in_loop |= loop
    sharing = _sharing_maps(states) - in_loop
    total += sum(4 for _ in sharing) + MAX_JOBS_PER_INCIDENT * max((_item_events(states[name]) for name in sharing), default=0)
    return total + sum(_visit_events(s) for name, s in states.items() if name not in in_loop | sharing)


@pytest.mark.parametrize("workflow", sorted(ASL))
def test_given_the_longest_possible_execution_then_its_history_stays_within_25000_events(workflow: str) -> None:
    # Given a workflow, its loops taken as often as the wait bounds allow, every retry taken
    events = _worst_case_events(ASL[workflow])
    # Then its history stays below Step Functions' 25,000 events (the execution fails past it)
    assert events <= EXECUTION_HISTORY_EVENTS, f"{workflow}: up to {events} events"


def test_given_the_workflows_then_their_only_loops_are_the_bounded_waits() -> None:
    # The bound above holds only for loops whose checks are counted by rejoin_wait_bounds.
    loops = {workflow: [sorted(loop) for loop in _loops(d["States"])] for workflow, d in ASL.items()}
    waits = {
        workflow: {name for loop in found for name in loop if _is_wait(ASL[workflow]["States"][name])} for workflow, found in loops.items()
    }
    expected = {
        "node_recovery": {"Wait For Rejoin", "Wait For Next Checkpoint"},
        "job_recovery": {"Wait For Other Recovery"},
        "agent_check": set(),
        "planned_swap": {"Wait For Checkpoint Commit"},
    }
    assert waits == expected, loops
    # And each loop has exactly one wait, whose passes LOOP_PASSES bounds
    for workflow, found in loops.items():
        for loop in found:
            assert len([n for n in loop if _is_wait(ASL[workflow]["States"][n])]) == 1, loop
    assert loops["agent_check"] == []


def _parameter_space() -> st.SearchStrategy[dict[str, int]]:
    numbers = {name: spec for name, spec in PARAMETERS.items() if spec["Type"] == "Number"}
    return st.fixed_dictionaries(
        {name: st.integers(int(spec.get("MinValue", 0)), int(spec.get("MaxValue", 10**6))) for name, spec in numbers.items()}
    )


def _settings(values: dict[str, Any]) -> Settings:
    resolver = _resolver("hpr", {"ClusterName": "llm-train", "ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6"})
    resolver.parameters.update({name: str(value) for name, value in values.items()})
    environment = resolver.resolve(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    return Settings.from_environ({k: str(v) for k, v in environment.items()})


@settings(max_examples=300, deadline=None)
@given(values=_parameter_space(), paced=st.booleans(), announced=st.booleans())
def test_given_any_accepted_parameters_then_every_function_starts_and_the_waits_stay_within_budget(
    values: dict[str, int], paced: bool, announced: bool
) -> None:
    # Given any combination of numbers the template's parameters accept
    configured = _settings(values)
    # When the rejoin checks run as often as the derived waits allow, over the longest window (all
    # its passes), paced by the replacements' typical duration or not, announced by events or not
    window = rejoin_window_seconds(configured.reboot_deadline_seconds, configured.rejoin_deadline_seconds)
    first, longest = configured.rejoin_waits
    expected = configured.expected_replacement_seconds if paced else None
    elapsed, checks = 0, 0
    while elapsed < window:
        expected_in = expected - elapsed if expected is not None else None
        elapsed += next_wait_seconds(checks, first, longest, window - elapsed, expected_in, announced=announced)
        checks += 1
    # Then the functions' settings are valid (no cold start refuses them) and the checks stay counted
    assert checks <= MAX_REJOIN_CHECKS + 1, (checks, first, longest, window)
    backoff, max_backoff = configured.job_restart_backoffs
    assert 0 <= backoff <= max_backoff
    # And no lock, cap place or claim can lapse under a NodeRecovery still running
    bound = node_recovery_time_bound_seconds(
        configured.reboot_deadline_seconds, configured.rejoin_deadline_seconds, configured.elastic_grow_back_grace_seconds
    )
    assert configured.lock_ttl_seconds_in_effect >= bound


@settings(max_examples=300, deadline=None)
@given(poll=st.integers(5, 3600), longest=st.integers(5, 3600), window=st.integers(60, 2 * 86_400))
def test_given_any_poll_and_window_then_the_derived_waits_cover_it_in_bounded_checks(poll: int, longest: int, window: int) -> None:
    first, maximum = rejoin_wait_bounds(poll, longest, window)
    assert first >= poll and maximum >= first >= math.ceil(window / MAX_REJOIN_CHECKS)
    # And the parameters are kept as they are when they are already within budget
    if poll >= math.ceil(window / MAX_REJOIN_CHECKS):
        assert first == poll and maximum == max(poll, longest)


def _worst_case_seconds(definition: dict[str, Any], loops: set[str]) -> int:
    """The longest the non-waiting part of a workflow can take: every Task at its timeout on every
    attempt, plus each retry's longest backoff; Map items in waves of MaxConcurrency."""

    def task_seconds(state: dict[str, Any], items: int = MAX_JOBS_PER_INCIDENT) -> int:
        if state["Type"] == "Map":
            inner = sum(task_seconds(s) for s in state["ItemProcessor"]["States"].values())
            return math.ceil(items / state.get("MaxConcurrency", 1)) * inner
        if state["Type"] != "Task":
            return 0
        # A Lambda step's attempt lasts at most its function's timeout. A callback step's retried
        # errors all come from its Lambda putting the command on the queue (ControllerChannelError,
        # Lambda.*), before the wait for the agent starts: it waits TimeoutSeconds once.
        if state["Resource"].startswith("arn:aws:states:::dynamodb:"):  # a service call of its own (Recall Outcome)
            attempt = state["TimeoutSeconds"]
        else:
            function = state.get("Parameters", {}).get("FunctionName", state["Resource"])
            logical = re.fullmatch(r"\$\{(\w+)Arn\}", function)
            assert logical, function
            attempt = int(RESOURCES[logical[1]]["Properties"].get("Timeout", TEMPLATE["Globals"]["Function"]["Timeout"]))
        waited = state.get("TimeoutSeconds", 0) if state["Resource"].endswith(".waitForTaskToken") else 0
        retries = state.get("Retry", [])
        backoff = sum(r.get("MaxAttempts", 3) * r.get("MaxDelaySeconds", 0) for r in retries)
        return waited + attempt * (1 + _retries(state)) + backoff

    states = definition["States"]
    sharing = _sharing_maps(states) - loops
    # Maps sharing the plan's jobs: all of them in the slowest, plus one more wave in each other
    # (a part-filled wave in each Map takes as long as a full one).
    shared = [(task_seconds(states[name]), task_seconds(states[name], items=1)) for name in sharing]
    slowest_shared = max((whole for whole, _ in shared), default=0) + sum(wave for _, wave in shared) if shared else 0
    return slowest_shared + sum(task_seconds(s) for name, s in states.items() if name not in loops | sharing)


def test_given_the_node_workflow_then_the_nested_timeout_covers_its_longest_run() -> None:
    # Given NodeRecovery: its steps outside the wait for rejoin at their slowest, plus one check past
    # the deadline
    node = ASL["node_recovery"]
    loop = set().union(*_loops(node["States"]))
    slowest = _worst_case_seconds(node, loop) + sum(_worst_case_seconds({"States": {n: node["States"][n]}}, set()) for n in loop)
    # And the grow-back's passes past the first (counted above): every check at its slowest, and every
    # shrunk job's grow-back (its waits are the grace, outside the overhead: node_recovery_time_bound_seconds)
    check = _worst_case_seconds({"States": {"Check Shrunk Jobs": node["States"]["Check Shrunk Jobs"]}}, set())
    grow = _worst_case_seconds({"States": {"Grow Back Job": node["States"]["Grow Back Job"]}}, set())
    slowest += (MAX_GROW_BACK_CHECKS - 1) * check + (MAX_SHRUNK_JOBS_PER_INCIDENT - 1) * grow
    # And the Resume Nodes of each failed health gate, outside every deadline (the replacement's
    # own deadline starts at Replace Unhealthy Nodes, counted above once per execution)
    slowest += MAX_GATE_REPLACEMENTS * _worst_case_seconds({"States": {"Resume Nodes": node["States"]["Resume Nodes"]}}, set())
    assert BOUNDED_LOOP_STATES["Replace Unhealthy Nodes"] == MAX_GATE_REPLACEMENTS == 1
    # Then the overhead JobRecovery allows on top of the deadlines covers it
    print(f"NodeRecovery outside its deadlines, at worst: {slowest} s")
    assert slowest <= NODE_RECOVERY_OVERHEAD_SECONDS, slowest
    # And Recover Nodes waits for the child as long as that, whatever the deadlines
    recover = ASL["job_recovery"]["States"]["Recover Nodes"]
    assert recover["TimeoutSecondsPath"] == "$.classification.node_timeout_seconds" and "TimeoutSeconds" not in recover
    for reboot, rejoin in ((60, 60), (900, 2700), (86_400, 86_400)):
        assert node_recovery_time_bound_seconds(reboot, rejoin) >= reboot + (1 + MAX_GATE_REPLACEMENTS) * rejoin + slowest


# --- SNS and KMS ----------------------------------------------------------------------------
def _actions(statement: dict[str, Any]) -> list[str]:
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def _role_statements(logical: str) -> list[dict[str, Any]]:
    return [s for p in RESOURCES[logical]["Properties"].get("Policies", []) if isinstance(p, dict) for s in p.get("Statement", [])]


def test_given_the_encrypted_topic_then_every_publisher_may_use_its_key() -> None:
    # Given the notification topic and the key it is encrypted with (the optional chat topic and its
    # conditional publishers: tests/contract/test_notifications.py)
    topic, props = "NotificationTopic", RESOURCES["NotificationTopic"]["Properties"]
    key_ref = props["KmsMasterKeyId"]
    # Then it is a key of this stack, never an AWS-managed alias/aws/* (CloudWatch cannot use those)
    assert isinstance(key_ref, dict) and key_ref.get("Ref") in RESOURCES, key_ref
    key = RESOURCES[key_ref["Ref"]]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
    key_policy = key["Properties"]["KeyPolicy"]["Statement"]

    def key_grants(service: str) -> bool:
        return any(
            s["Effect"] == "Allow"
            and s.get("Principal", {}).get("Service") == service
            and {"kms:Decrypt", "kms:GenerateDataKey"} <= set(_actions(s))
            for s in key_policy
        )

    # And every alarm that notifies it is let in by the key policy
    alarms = [logical for logical, r in _of_type("AWS::CloudWatch::Alarm") if {"Ref": topic} in r["Properties"].get("AlarmActions", [])]
    assert alarms and key_grants("cloudwatch.amazonaws.com")
    # And every EventBridge rule targeting it (none today) would be too
    rules = [logical for logical, r in _of_type("AWS::Events::Rule") if any(t["Arn"] == {"Ref": topic} for t in r["Properties"]["Targets"])]
    assert not rules or key_grants("events.amazonaws.com")
    # And every function that publishes to it may use the key through its role
    publishers = [
        logical
        for logical, r in _of_type("AWS::Serverless::Function")
        if any("sns:Publish" in _actions(s) and s["Resource"] == {"Ref": topic} for s in _role_statements(logical))
    ]
    assert publishers
    for logical in publishers:
        kms = [s for s in _role_statements(logical) if s["Resource"] == {"Fn::GetAtt": [key_ref["Ref"], "Arn"]}]
        assert kms and {"kms:Decrypt", "kms:GenerateDataKey"} <= {a for s in kms for a in _actions(s)}, logical


# --- IAM resource types ------------------------------------------------------------------------
def _all_statements() -> list[tuple[str, dict[str, Any]]]:
    found = [
        (logical, s)
        for logical, r in RESOURCES.items()
        if r["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::StateMachine")
        for s in _role_statements(logical)
    ]
    found += [(logical, s) for logical, r in _of_type("AWS::IAM::ManagedPolicy") for s in r["Properties"]["PolicyDocument"]["Statement"]]
    return found


def test_given_every_iam_statement_then_actions_without_a_resource_type_are_granted_on_star_and_no_other_is() -> None:
    for logical, statement in _all_statements():
        actions = set(_actions(statement))
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if actions & ACTIONS_WITHOUT_RESOURCE_TYPES:
            # Then an action IAM cannot scope is alone with its kind, on "*" (an ARN would deny it)
            assert actions <= ACTIONS_WITHOUT_RESOURCE_TYPES and resources == ["*"], (logical, actions, resources)
        else:
            assert "*" not in resources, (logical, actions)


# --- EventBridge ---------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    stack=st.from_regex(r"\A[a-zA-Z][-a-zA-Z0-9]{0,127}\Z"),
    cluster=st.from_regex(r"\A[a-zA-Z0-9](-*[a-zA-Z0-9]){0,20}\Z"),
)
def test_given_any_stack_name_then_none_of_the_stacks_own_alarms_opts_in_to_recovery(stack: str, cluster: str) -> None:
    # Given the stack under any name CloudFormation accepts (hyperpod-recovery-<cluster> included)
    resolver = _resolver(stack, {"ClusterName": cluster})
    prefix = resolver.resolve(RESOURCES["AlarmRule"]["Properties"]["EventPattern"]["detail"]["alarmName"][0]["prefix"])
    for logical, alarm in _of_type("AWS::CloudWatch::Alarm"):
        # Then none of its own alarms starts with the opt-in prefix (each would be dead-lettered)
        assert not resolver.resolve(alarm["Properties"]["AlarmName"]).startswith(prefix), (logical, prefix)
    assert prefix == GuardedCluster(name=cluster, arn="arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6").alarm_prefix


def test_the_stack_named_after_the_old_prefix_no_longer_feeds_its_own_alarms_to_intake() -> None:
    # The case that was found: stack hyperpod-recovery-<cluster>, alarm <stack>-circuit-breaker-open
    resolver = _resolver("hyperpod-recovery-llm-train", {"ClusterName": "llm-train"})
    pattern = EventPattern.load(json.dumps(resolver.resolve(RESOURCES["AlarmRule"]["Properties"]["EventPattern"])))
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    assert pattern.matches_event(event)
    for _, alarm in _of_type("AWS::CloudWatch::Alarm"):
        event["detail"]["alarmName"] = resolver.resolve(alarm["Properties"]["AlarmName"])
        assert not pattern.matches_event(event), event["detail"]["alarmName"]


@pytest.mark.parametrize(
    "configured",
    ["arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6", "arn:aws:sagemaker:us-west-2:111122223333:cluster/llm-train"],
)
@pytest.mark.parametrize(
    "in_event",
    ["arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6", "arn:aws:sagemaker:us-west-2:111122223333:cluster/llm-train"],
)
def test_given_either_arn_form_then_the_health_rule_and_intake_match_the_cluster(configured: str, in_event: str) -> None:
    # Given the stack configured with the cluster's ARN in one form, and an event carrying either
    resolver = Resolver(
        TEMPLATE,
        {"ClusterName": "llm-train", "ClusterArn": configured},
        pseudo={"AWS::Region": "us-west-2", "AWS::AccountId": "111122223333", "AWS::Partition": "aws"},
    )
    pattern = EventPattern.load(json.dumps(resolver.resolve(RESOURCES["HealthEventRule"]["Properties"]["EventPattern"])))
    event = load_event("hyperpod/node_health_unhealthy.json")
    event["detail"]["ClusterArn"] = in_event
    # Then the name form always matches, and the id form matches when the stack was given it
    matches = in_event.endswith("/llm-train") or in_event == configured
    assert pattern.matches_event(event) is matches
    # And intake owns it whenever the rule forwards it
    assert GuardedCluster(name="llm-train", arn=configured).owns(in_event) or not matches


def test_given_a_name_form_arn_then_the_parameter_pattern_and_settings_accept_it() -> None:
    pattern = PARAMETERS["ClusterArn"]["AllowedPattern"]
    for arn in (
        "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster",
        "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6",
    ):
        assert re.fullmatch(pattern, arn)
    assert not re.fullmatch(pattern, "arn:aws:sagemaker:us-west-2:111122223333:cluster/")
    assert not re.fullmatch(pattern, "arn:aws:sagemaker:us-west-2:111122223333:cluster/bad_name")


# --- Lambda: the environment -------------------------------------------------------------------
# "Function environment variables: 4 KB, for all environment variables associated with the function,
# in aggregate" (Lambda quotas; not adjustable). Lambda measures the variables as one JSON object:
# its refusal reads "...exceeded the 4KB limit. String measured: {"KEY":"value",...}", quotes and
# backslashes escaped. ASSUMPTION: the bytes of that compact JSON, escaped as Python's json.dumps
# escapes it (non-ASCII as \\uXXXX, the most it can cost), is what is compared with 4,096.
LAMBDA_ENVIRONMENT_BYTES = 4096
# The longest values AWS gives what the template refers to (service quotas): a region name, a
# partition's DNS suffix, and the names CloudFormation generates (never longer than the service allows).
LONGEST_REGION = "ap-southeast-7"
LONGEST_PARTITION = "aws-iso-b"
LONGEST_DNS_SUFFIX = "amazonaws.com.cn"
DYNAMODB_TABLE_NAME = 255  # CreateTable TableName: 3-255
SQS_QUEUE_NAME = 80  # CreateQueue QueueName: up to 80 characters
SNS_TOPIC_NAME = 256  # CreateTopic Name: up to 256 characters
# Characters whose JSON escape costs the most, one of each kind a pattern may let through.
_COSTLY_CHARACTERS = ('"', "\\", "\x01", "\u00e9", "\U0001f600", "a")


def _escaped_bytes(value: str) -> int:
    return len(json.dumps(value)) - 2


def _costliest_value(parameter: str) -> str:
    """The value of ``parameter`` whose JSON escape is longest: its MaxLength (or its largest number,
    its longest allowed value) of the costliest character its AllowedPattern lets through."""
    spec = PARAMETERS[parameter]
    if "AllowedValues" in spec:
        return max(spec["AllowedValues"], key=_escaped_bytes)
    if spec["Type"] == "Number":
        assert "MaxValue" in spec and "MinValue" in spec, f"{parameter}: a number the functions read needs MinValue and MaxValue"
        return max((str(spec["MinValue"]), str(spec["MaxValue"])), key=len)
    assert "MaxLength" in spec, f"{parameter}: a string the functions read needs a MaxLength"
    length, pattern = int(spec["MaxLength"]), spec.get("AllowedPattern", ".*")
    if parameter == "ClusterArn":  # a structure, not one character repeated: the region as long as MaxLength leaves
        region = "r" * (length - len("arn:aws:sagemaker::111122223333:cluster/") - 63)
        return f"arn:aws:sagemaker:{region}:111122223333:cluster/" + "a" * 63
    candidates = [c * length for c in _COSTLY_CHARACTERS] + [c * (length - length % 2) for c in _COSTLY_CHARACTERS]
    accepted = [v for v in candidates if re.fullmatch(pattern, v, re.DOTALL)]
    assert accepted, f"{parameter}: no value of {length} characters fits its pattern"
    return max(accepted, key=_escaped_bytes)


def _environment_at_its_longest(logical: str) -> dict[str, str]:
    variables = {**TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]}
    variables |= RESOURCES[logical]["Properties"].get("Environment", {}).get("Variables", {})
    read = set(re.findall(r"[A-Za-z0-9]+", json.dumps(variables))) & set(PARAMETERS)
    resolver = Resolver(
        TEMPLATE,
        {name: _costliest_value(name) for name in read},
        pseudo={
            "AWS::Region": LONGEST_REGION,
            "AWS::AccountId": "111122223333",
            "AWS::StackName": "s" * STACK_NAME_LENGTH,
            "AWS::Partition": LONGEST_PARTITION,
        },
    )
    queue_url = f"https://sqs.{LONGEST_REGION}.{LONGEST_DNS_SUFFIX}/111122223333/" + "q" * SQS_QUEUE_NAME
    resolver.refs = {
        **{name: queue_url for name, r in RESOURCES.items() if r["Type"] == "AWS::SQS::Queue"},
        **{name: "t" * DYNAMODB_TABLE_NAME for name, r in RESOURCES.items() if r["Type"] == "AWS::DynamoDB::Table"},
        **{
            name: f"arn:{LONGEST_PARTITION}:sns:{LONGEST_REGION}:111122223333:" + "n" * SNS_TOPIC_NAME
            for name, r in RESOURCES.items()
            if r["Type"] == "AWS::SNS::Topic"
        },
        # (a state machine's ARN: its name is the cluster's, at its longest, and a suffix)
        **{
            name: f"arn:{LONGEST_PARTITION}:states:{LONGEST_REGION}:111122223333:stateMachine:" + "m" * 80
            for name, r in RESOURCES.items()
            if r["Type"] == "AWS::Serverless::StateMachine"
        },
    }
    return {name: str(value) for name, value in resolver.resolve(variables).items()}


@pytest.mark.parametrize("logical", sorted(name for name, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function"))
def test_given_every_parameter_at_its_longest_then_each_functions_environment_fits_lambdas_4_kb(logical: str) -> None:
    # Given every parameter at its longest, costliest value, and every name AWS generates at its longest
    environment = _environment_at_its_longest(logical)
    # When Lambda measures the function's variables as it does, as one compact JSON object
    measured = len(json.dumps(environment, separators=(",", ":")).encode())
    # Then they fit its 4 KB: the deploy of any accepted configuration is never refused
    assert measured <= LAMBDA_ENVIRONMENT_BYTES, f"{logical}: {measured} bytes"


def test_given_the_health_check_parameter_then_the_functions_accept_exactly_its_length() -> None:
    # A check the template accepts and the settings refuse would stop Resume Nodes' every cold start
    (limit,) = [m.max_length for m in Settings.model_fields["replacement_health_check"].metadata if hasattr(m, "max_length")]
    assert limit == PARAMETERS["ReplacementHealthCheck"]["MaxLength"]
    # And only Resume Nodes carries it (in Globals it would weigh on every function's 4 KB)
    carriers = [
        logical
        for logical, r in _of_type("AWS::Serverless::Function")
        if "REPLACEMENT_HEALTH_CHECK" in r["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert "REPLACEMENT_HEALTH_CHECK" not in TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert carriers == ["ResumeNodesFunction"]


def _check_other_recovery_margin() -> int:
    """How long past the holder's rejoin window Check Other Recovery waits (its handler's MARGIN_SECONDS)."""
    found = re.search(r"^MARGIN_SECONDS = (\d+)$", (ROOT / "functions" / "check_other_recovery" / "app.py").read_text(), re.MULTILINE)
    assert found
    return int(found[1])


def test_given_the_job_workflow_then_the_sweeps_lookback_covers_its_longest_run() -> None:
    # Given JobRecovery: its own steps at their slowest (Recover Nodes and the waits aside)...
    job = ASL["job_recovery"]["States"]
    loop = set().union(*_loops(job))
    own = _worst_case_seconds({"States": {n: s for n, s in job.items() if n != "Recover Nodes"}}, loop)
    own += sum(_worst_case_seconds({"States": {n: job[n]}}, set()) for n in loop)
    print(f"JobRecovery's own steps, at worst: {own} s")
    for reboot, rejoin, backoff, grace in ((60, 60, 0, 0), (900, 2700, 900, 1800), (86_400, 86_400, 86_400, 86_400)):
        # ...plus its nested NodeRecovery, the wait for another incident holding its nodes (as long as
        # that incident's rejoin window and grow-back, and a margin), and its longest restart backoff
        node = node_recovery_time_bound_seconds(reboot, rejoin, grace)
        other = rejoin_window_seconds(reboot, rejoin) + 2 * grace + _check_other_recovery_margin()
        # Then the sweep of ended executions reads back far enough to list any execution that may have just ended
        assert own + node + other + backoff <= execution_time_bound_seconds(reboot, rejoin, backoff, grace)
        assert node <= execution_time_bound_seconds(reboot, rejoin, backoff, grace)
