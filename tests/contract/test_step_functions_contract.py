"""The Step Functions adapter's contracts: an execution's history read newest first in pages and
returned oldest first (its resubmissions paired with their plans), a task that no longer waits, starts
and listings and their named errors (against moto or botocore's stubber)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber

from hyperpod_recovery.adapters.stepfunctions import StepFunctions
from hyperpod_recovery.errors import (
    HistoryUnavailable,
    StartExecutionFailed,
    TaskAnswerFailed,
)
from tests.contract import adapter_support
from tests.contract.adapter_support import REGION, modeled_errors
from tests.fakes import T0

# The shared fixtures, where pytest finds them: by name in this module.
aws = adapter_support.aws


def test_execution_history_reads_newest_first_in_pages_and_returns_oldest_first() -> None:
    # Given an execution history of 2,500 events, read through botocore's own model of
    # GetExecutionHistory (a Stubber checks every parameter against it)

    from hyperpod_recovery.adapters import stepfunctions

    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = f"arn:aws:states:{REGION}:111122223333:execution:stack-node-recovery:inc-1"
    events = [
        {"id": i, "timestamp": T0 + timedelta(seconds=i), "type": "TaskStateEntered", "stateEnteredEventDetails": {"name": f"S{i}"}}
        if i % 2
        else {"id": i, "timestamp": T0 + timedelta(seconds=i), "type": "TaskStateExited"}
        for i in range(1, 2501)
    ]
    newest_first = events[::-1]
    with Stubber(sfn) as stub:
        for page, start in enumerate(range(0, 2500, 1000)):
            params: dict[str, Any] = {"executionArn": arn, "reverseOrder": True, "maxResults": 1000, "includeExecutionData": False}
            if page:
                params["nextToken"] = f"t{page}"
            response: dict[str, Any] = {"events": newest_first[start : start + 1000]}
            if start + 1000 < 2500:
                response["nextToken"] = f"t{page + 1}"
            stub.add_response("get_execution_history", response, params)
        entered = StepFunctions(stepfunctions=sfn).states_entered(arn)
    # Then every state entered is there, oldest first
    assert entered is not None and [name for name, _ in entered] == [f"S{i}" for i in range(1, 2501, 2)]
    # And a history longer than the bound is read only that far, keeping the newest (where it stopped)
    with Stubber(sfn) as stub, pytest.MonkeyPatch.context() as patch:
        patch.setattr(stepfunctions, "MAX_EVENTS_READ", 1000)
        params = {"executionArn": arn, "reverseOrder": True, "maxResults": 1000, "includeExecutionData": False}
        stub.add_response("get_execution_history", {"events": newest_first[:1000], "nextToken": "t1"}, params)
        entered = StepFunctions(stepfunctions=sfn).states_entered(arn)
        stub.assert_no_pending_responses()
    assert entered is not None and entered[-1][0] == "S2499" and len(entered) == 500


def _history_event(n: int, kind: str, data: Any) -> dict[str, Any]:
    text = data if isinstance(data, str) else json.dumps(data)
    if kind == "TaskScheduled":
        details = {"taskScheduledEventDetails": {"resourceType": "lambda", "resource": "invoke.waitForTaskToken", "region": REGION,
                                                 "parameters": text}}  # fmt: skip
    elif kind == "TaskSucceeded":
        details = {"taskSucceededEventDetails": {"resourceType": "lambda", "resource": "invoke.waitForTaskToken", "output": text}}
    else:
        details = {"stateEnteredEventDetails": {"name": "Check Rejoin", "input": text}}
    return {"id": n, "timestamp": T0 + timedelta(seconds=n), "type": kind, **details}


def test_execution_history_resubmissions_pair_each_answer_with_its_plan_across_concurrent_iterations() -> None:
    # Given a history, read oldest first in pages of 100 with the events' data (botocore's model checks
    # every parameter), where two Map iterations interleave, one job's answer never came, one answer
    # is truncated, and another command's answer looks alike
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = f"arn:aws:states:{REGION}:111122223333:execution:stack-node-recovery:inc-1"

    def scheduled(n: int, job: str, step: int) -> dict[str, Any]:
        plan = {"job": {"job_id": job, "name": f"j{job}"}, "checkpoint": {"uri": f"s3://ckpt/j{job}/step-{step:09d}/", "step": step}}
        return _history_event(
            n, "TaskScheduled", {"FunctionName": "arn:...:ResubmitJobFunction", "Payload": {"task_token": "t", "plan": plan}}
        )

    def answered(n: int, job: str, new: str, kind: str = "resubmit_job") -> dict[str, Any]:
        at = T0.isoformat()
        reply = {"command_id": f"inc-1:resubmit:{job}", "type": kind, "requested_at": at, "completed_at": at, "dry_run": False}
        return _history_event(n, "TaskSucceeded", {**reply, "result": {"old_job_id": job, "new_job_id": new}})

    filler = [_history_event(n, "TaskStateEntered", {"rejoin": {}}) for n in range(1, 101)]
    events = [
        *filler,
        scheduled(101, "1", 100),
        scheduled(102, "2", 200),
        scheduled(103, "4", 400),  # asked for, never answered
        answered(104, "2", "12"),
        answered(105, "1", "11"),
        scheduled(106, "3", 300),
        _history_event(107, "TaskSucceeded", '{"type": "resubmit_job", "requested_at": "2026-03'),  # truncated
        answered(108, "9", "99", kind="jobs_on_nodes"),
    ]
    with Stubber(sfn) as stub:
        base = {"executionArn": arn, "reverseOrder": False, "maxResults": 100, "includeExecutionData": True}
        stub.add_response("get_execution_history", {"events": events[:100], "nextToken": "t1"}, base)
        stub.add_response("get_execution_history", {"events": events[100:]}, {**base, "nextToken": "t1"})
        read = StepFunctions(stepfunctions=sfn).resubmissions(arn)
        stub.assert_no_pending_responses()
    # Then each answer is paired with its own job's plan, in the order answered; every job asked for
    # is named; the truncated answer and the other command's are not taken for resubmissions
    assert read.complete and read.asked == {"1", "2", "3", "4"}
    assert [(s.reply.result.old_job_id, s.reply.result.new_job_id, s.plan.checkpoint.step if s.plan else None) for s in read.seen] == [
        ("2", "12", 200),
        ("1", "11", 100),
    ]
    # And a history longer than the bound is read only that far, and says it is not whole
    from hyperpod_recovery.adapters import stepfunctions

    with Stubber(sfn) as stub, pytest.MonkeyPatch.context() as patch:
        patch.setattr(stepfunctions, "MAX_EVENTS_READ", 100)
        stub.add_response("get_execution_history", {"events": events[:100], "nextToken": "t1"}, base)
        assert not StepFunctions(stepfunctions=sfn).resubmissions(arn).complete
    # And a history denied is read as incomplete; one throttled raises, for the end to come back later
    with Stubber(sfn) as stub:
        stub.add_client_error("get_execution_history", "AccessDeniedException", "not allowed")
        assert not StepFunctions(stepfunctions=sfn).resubmissions(arn).complete
    with Stubber(sfn) as stub:
        stub.add_client_error("get_execution_history", "ThrottlingException", "slow down")
        with pytest.raises(HistoryUnavailable):
            StepFunctions(stepfunctions=sfn).resubmissions(arn)


def test_execution_history_a_stop_only_is_neither_a_resubmission_asked_nor_one_answered() -> None:
    # Given an EKS job stopped at once (Resubmit Jobs Now, a stop only, answered), whose re-creation after
    # the rejoin was asked and never answered (the execution was stopped while it ran)
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = f"arn:aws:states:{REGION}:111122223333:execution:stack-node-recovery:inc-1"
    uid = "bea1bd05-1aff-56fd-aeef-72f72fd01614"
    kube = {"kind": "PyTorchJob", "namespace": "kubeflow", "name": "llama"}
    plan = {"job": {"job_id": uid, "name": "llama", "kube": kube}, "checkpoint": {"uri": "s3://ckpt/llama/step-000000100/", "step": 100}}
    plan |= {"stop_grace_seconds": 600}
    at = T0.isoformat()
    stopped = {"command_id": f"inc-1:stop:{uid}", "type": "resubmit_job", "requested_at": at, "completed_at": at, "dry_run": False}
    stopped |= {"result": {"old_job_id": uid, "cancelled_old": True, "stop_only": True}}
    payload = {"FunctionName": "arn:...:ResubmitJobFunction", "Payload": {"task_token": "t", "plan": {**plan, "stop_only": True}}}
    events = [
        _history_event(1, "TaskScheduled", payload),
        _history_event(2, "TaskSucceeded", stopped),
        _history_event(3, "TaskScheduled", {"FunctionName": "arn:...:ResubmitJobFunction", "Payload": {"task_token": "t", "plan": plan}}),
    ]
    with Stubber(sfn) as stub:
        base = {"executionArn": arn, "reverseOrder": False, "maxResults": 100, "includeExecutionData": True}
        stub.add_response("get_execution_history", {"events": events}, base)
        read = StepFunctions(stepfunctions=sfn).resubmissions(arn)
    # Then the stop's answer is no resubmission seen, and the re-creation is asked and unanswered: its claim is
    # kept (a copy may exist), never given back on the strength of the stop's answer
    assert read.complete and read.asked == {uid} and read.seen == []
    # And the job is known stopped (a record written from the history says it stays suspended)
    assert read.stopped == {uid}


def test_execution_history_that_cannot_be_read_is_none_not_an_error() -> None:

    sfn = boto3.client("stepfunctions", region_name=REGION)
    with Stubber(sfn) as stub:
        stub.add_client_error("get_execution_history", "AccessDeniedException", "not allowed")
        assert StepFunctions(stepfunctions=sfn).states_entered("arn:aws:states:us-west-2:1:execution:m:e") is None


def test_waking_a_task_that_no_longer_waits_is_false_not_an_error() -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    with Stubber(sfn) as stub:
        stub.add_response("send_task_success", {}, {"taskToken": "t1", "output": "{}"})
        stub.add_client_error("send_task_success", "TaskTimedOut", "timed out")
        stub.add_client_error("send_task_success", "ThrottlingException", "slow down")
        adapter = StepFunctions(stepfunctions=sfn)
        assert adapter.wake("t1", "{}") is True
        assert adapter.wake("t2", "{}") is False
        with pytest.raises(TaskAnswerFailed):
            adapter.wake("t3", "{}")


def _two_state_machines() -> tuple[Any, str, str]:
    """The node and job state machines on moto (which runs none of their executions to an end)."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    role = boto3.client("iam", region_name=REGION).create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    definition = json.dumps({"StartAt": "S", "States": {"S": {"Type": "Succeed"}}})
    node, job = (sfn.create_state_machine(name=n, definition=definition, roleArn=role)["stateMachineArn"] for n in ("node", "job"))
    return sfn, node, job


def test_step_functions_turns_a_reused_execution_name_into_already_exists(aws: None) -> None:
    sfn, node, job = _two_state_machines()
    workflows = StepFunctions({"node": node, "job": job}, stepfunctions=sfn)
    assert workflows.start("hpr-1", "{}") == "started"
    assert workflows.start("hpr-1", '{"again": true}') == "already_exists"
    # And a job recovery starts on the other state machine
    assert workflows.start("hpj-1", "{}", "job") == "started"
    assert [e["name"] for e in sfn.list_executions(stateMachineArn=job)["executions"]] == ["hpj-1"]


def test_step_functions_lists_only_the_running_executions_of_the_workflow_asked(aws: None) -> None:
    sfn, node, job = _two_state_machines()
    workflows = StepFunctions({"node": node, "job": job}, stepfunctions=sfn)
    # Given two job recoveries, one of them stopped since, and a node recovery (moto runs none to its end)
    for name, workflow in (("hpj-1-100", "job"), ("hpj-2-200", "job"), ("hpr-1", "node")):
        workflows.start(name, "{}", workflow)  # type: ignore[arg-type]
    sfn.stop_execution(executionArn=job.replace(":stateMachine:", ":execution:") + ":hpj-1-100")
    # Then the job workflow's running ones are the one still running
    assert workflows.running("job") == ["hpj-2-200"] and workflows.running("node") == ["hpr-1"]


def test_step_functions_lists_the_running_executions_of_every_page() -> None:
    sfn = botocore.session.get_session().create_client("stepfunctions", region_name=REGION)
    machine = "arn:aws:states:us-west-2:123456789012:stateMachine:job"
    item = {"stateMachineArn": machine, "status": "RUNNING", "startDate": T0}
    with Stubber(sfn) as stub:
        first = {"stateMachineArn": machine, "statusFilter": "RUNNING", "maxResults": 1000}
        stub.add_response(
            "list_executions", {"executions": [{**item, "executionArn": f"{machine}:a", "name": "a"}], "nextToken": "t"}, first
        )
        stub.add_response(
            "list_executions", {"executions": [{**item, "executionArn": f"{machine}:b", "name": "b"}]}, {**first, "nextToken": "t"}
        )
        assert StepFunctions({"job": machine}, stepfunctions=sfn).running("job") == ["a", "b"]


def test_step_functions_listing_refused_is_history_unavailable() -> None:
    sfn = botocore.session.get_session().create_client("stepfunctions", region_name=REGION)
    with Stubber(sfn) as stub:
        stub.add_client_error("list_executions", "ThrottlingException")
        with pytest.raises(HistoryUnavailable, match="ThrottlingException"):
            StepFunctions({"job": "arn:aws:states:us-west-2:1:stateMachine:job"}, stepfunctions=sfn).running("job")


# Every documented StartExecution error but the reused name (that one is "already_exists"), and the generic ones.
@pytest.mark.parametrize(
    "code",
    [c for c in modeled_errors("StartExecution") if c != "ExecutionAlreadyExists"] + ["ThrottlingException", "AccessDeniedException"],
)
def test_a_start_that_step_functions_refuses_is_start_execution_failed_whatever_the_code(code: str) -> None:
    # Given Step Functions refusing a start, transiently or for good
    sfn = boto3.client("stepfunctions", region_name=REGION)
    with Stubber(sfn) as stub:
        stub.add_client_error("start_execution", code, "no", http_status_code=400)
        # When intake starts a recovery, Then the error is ours, named with AWS's code (no botocore error escapes)
        with pytest.raises(StartExecutionFailed, match=code):
            StepFunctions({"node": "arn:aws:states:us-west-2:123456789012:stateMachine:n"}, stepfunctions=sfn).start("hpr-1", "{}")
