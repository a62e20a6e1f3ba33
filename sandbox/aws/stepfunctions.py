"""The Step Functions interpreter patched to run the stack's workflows as Step Functions does, on the
virtual clock: history and execution dates, history paging, a task's failure cause, StopExecution,
heartbeats, Lambda service errors, task token timeouts and nested executions."""

from __future__ import annotations

import time
import types
import weakref
from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from typing import Any
from unittest import mock

from botocore.exceptions import ClientError
from moto.core.responses import ActionResult
from moto.stepfunctions.parser.api import ExecutionStatus, HistoryEventType, LambdaFunctionFailedEventDetails, TaskTimedOutEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task, state_task_lambda
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_callback, state_task_service_sfn
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
from moto.stepfunctions.parser.asl.eval.callback.callback import (
    CallbackConsumerLeft,
    CallbackConsumerTimeout,
    CallbackNotifyConsumerError,
    CallbackOutcomeSuccess,
    CallbackOutcomeTimedOut,
    CallbackPoolManager,
    HeartbeatTimedOut,
    HeartbeatTimeoutError,
)
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.eval.event.event_manager import EventManager
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
from moto.stepfunctions.parser.models import StepFunctionsParserBackend
from moto.stepfunctions.responses import StepFunctionResponse, get_backend

from sandbox.aws.lambdas import ApiCalls
from sandbox.aws.names import REGION
from sandbox.hyperpod import ACCOUNT

# Task states whose token the pipeline itself answers (Notice Cluster Event), not the agent.
ANSWERED_BY_THE_PIPELINE = frozenset({"Wait For Rejoin"})


def _state_name(env: Any) -> str:
    return str(env.states.context_object.context_object_data.get("State", {}).get("Name", ""))


def _execution_name(env: Any) -> str:
    return str(env.states.context_object.context_object_data["Execution"]["Name"])


class StepFunctionsPatches:
    """Mixed into SandboxAWS: the Step Functions patches, each kept for the life of the sandbox."""

    def _patch_history_timestamps(self, stack: ExitStack) -> None:
        """Execution history events carry the execution's virtual time, as on AWS they carry real
        time: a timeline built from GetExecutionHistory (``hyperpod-recovery drill``) then shows the
        ten virtual minutes of a replacement, not the milliseconds the sandbox took."""
        sandbox = self
        timelines: weakref.WeakKeyDictionary[EventManager, str] = weakref.WeakKeyDictionary()
        original_environment = ExecutionWorker._get_evaluation_environment
        original_add_event = EventManager.add_event

        def evaluation_environment(worker: ExecutionWorker) -> Any:
            env = original_environment(worker)
            timelines[env.event_manager] = str(worker._evaluation_details.execution_details.name)
            return env

        def add_event(
            manager: EventManager, context: Any, event_type: Any, event_details: Any = None, timestamp: Any = None, **kwargs: Any
        ) -> int:
            name = timelines.get(manager)
            if event_type == HistoryEventType.ExecutionStarted and name is not None:
                # Every execution waits for its turn before its first state (sandbox/clock.py); here,
                # once its environment is set up: moto looks through every running one for a task token.
                sandbox.clock.hold(name)
            if timestamp is None and name is not None:
                timestamp = sandbox.epoch + timedelta(seconds=sandbox.clock.now(name))
            return original_add_event(manager, context, event_type, event_details, timestamp, **kwargs)

        stack.enter_context(mock.patch.object(ExecutionWorker, "_get_evaluation_environment", evaluation_environment))
        stack.enter_context(mock.patch.object(EventManager, "add_event", add_event))

    def _patch_execution_dates(self, stack: ExitStack) -> None:
        """Executions are dated on their virtual timeline, as their history events are: started when
        their timeline began, stopped where it ended (moto dates both in real time). ListExecutions
        then orders and dates them as Step Functions would, and StartExecution's answer for the same
        name and input while the execution runs carries its original start, which is how a real start
        is told from a repeat. ListExecutions also gives a timed-out execution its stopDate (moto
        leaves it out; Step Functions gives every closed one), and so does DescribeExecution."""
        sandbox = self
        original_start = StepFunctionsParserBackend.start_execution
        original_reflect = BaseExecutionWorkerCommunication._reflect_execution_status
        original_list = StepFunctionResponse.list_executions

        dated: set[str] = set()

        def start_execution(backend: Any, *args: Any, **kwargs: Any) -> Any:
            execution = original_start(backend, *args, **kwargs)
            if execution.exec_arn not in dated:  # (a repeat returns the running execution as it was)
                execution.start_date = sandbox.epoch + timedelta(seconds=sandbox.clock.started_at(execution.name))
                dated.add(execution.exec_arn)
            return execution

        def reflect(communication: Any) -> None:
            original_reflect(communication)
            execution = communication.execution
            execution.stop_date = sandbox.epoch + timedelta(seconds=sandbox.clock.now(execution.name))

        def with_stop_dates(original: Callable[[StepFunctionResponse], Any], items: Callable[[Any], list[dict[str, Any]]]) -> Any:
            def answer(response: StepFunctionResponse) -> Any:
                result = original(response)
                backend = get_backend(ACCOUNT, REGION)
                for item in items(result.result):
                    if item["status"] == ExecutionStatus.TIMED_OUT and "stopDate" not in item:
                        item["stopDate"] = backend.describe_execution(item["executionArn"]).stop_date
                return result

            return answer

        list_executions = with_stop_dates(original_list, lambda result: result["executions"])
        describe_execution = with_stop_dates(StepFunctionResponse.describe_execution, lambda result: [result])

        stack.enter_context(mock.patch.object(StepFunctionsParserBackend, "start_execution", start_execution))
        stack.enter_context(mock.patch.object(BaseExecutionWorkerCommunication, "_reflect_execution_status", reflect))
        stack.enter_context(mock.patch.object(StepFunctionResponse, "list_executions", list_executions))
        stack.enter_context(mock.patch.object(StepFunctionResponse, "describe_execution", describe_execution))

    @staticmethod
    def _patch_history_paging(stack: ExitStack) -> None:
        """GetExecutionHistory as Step Functions pages it: ``reverseOrder`` (newest first),
        ``maxResults`` (default 100, at most 1000) and ``nextToken``. moto returns every event,
        oldest first, whatever is asked, which would hide a reader that pages wrongly."""
        original = StepFunctionResponse.get_execution_history

        def get_execution_history(response: StepFunctionResponse) -> Any:
            events = list(original(response).result["events"])
            if response._get_param("reverseOrder"):
                events.reverse()
            size = min(int(response._get_param("maxResults") or 100), 1000)
            offset = int(response._get_param("nextToken") or 0)
            page: dict[str, Any] = {"events": events[offset : offset + size]}
            if offset + size < len(events):
                page["nextToken"] = str(offset + size)
            return ActionResult(page)

        stack.enter_context(mock.patch.object(StepFunctionResponse, "get_execution_history", get_execution_history))

    @staticmethod
    def _patch_task_failure_cause(stack: ExitStack) -> None:
        """SendTaskFailure with its ``cause``, as Step Functions keeps it (the Catch's Cause, the
        execution's). moto's handler passes the error only and the cause is lost: a drill would show
        an agent's refusal (sbatch's own message) as an empty cause where AWS shows the text."""

        def send_task_failure(response: StepFunctionResponse) -> Any:
            backend = response.stepfunction_backend
            backend.send_task_failure(
                response._get_param("taskToken"), error=response._get_param("error"), cause=response._get_param("cause")
            )
            return ActionResult({})

        stack.enter_context(mock.patch.object(StepFunctionResponse, "send_task_failure", send_task_failure))

    def _patch_stop_execution(self, stack: ExitStack) -> None:
        """StopExecution as Step Functions does it, whoever calls it (a scenario's abort fault, the
        operator's ``hyperpod-recovery stop``): the execution keeps the ``error`` and ``cause`` it was
        given (moto drops them; DescribeExecution and the ExecutionAborted event carry them), and its
        thread, parked on virtual time, is let go at once so the interpreter sees the stop and ends."""

        def stop_execution(response: StepFunctionResponse) -> Any:
            execution = response.stepfunction_backend.stop_execution(response._get_param("executionArn"))
            execution.error, execution.cause = response._get_param("error") or "", response._get_param("cause") or ""
            self.clock.stop(execution.name)
            return ActionResult({"stopDate": execution.stop_date})

        stack.enter_context(mock.patch.object(StepFunctionResponse, "stop_execution", stop_execution))

    @staticmethod
    def _patch_task_heartbeats(stack: ExitStack) -> None:
        """SendTaskHeartbeat as Step Functions answers it: accepted for any task still waiting for its
        token, whether or not its state sets HeartbeatSeconds; TaskTimedOut for one that timed out;
        TaskDoesNotExist for one already answered. moto answers InvalidToken for every task without
        HeartbeatSeconds, which would make the agent take a live task for a dead one."""
        original = CallbackPoolManager.heartbeat

        def heartbeat(manager: CallbackPoolManager, callback_id: str) -> bool:
            endpoint = manager.get(callback_id)
            if endpoint is None or endpoint.consumer_error is not None:
                return original(manager, callback_id)
            if endpoint._outcome is not None:  # answered already: the task is over
                raise CallbackNotifyConsumerError(callback_consumer_error=CallbackConsumerLeft())
            endpoint.notify_heartbeat()
            return True

        stack.enter_context(mock.patch.object(CallbackPoolManager, "heartbeat", heartbeat))

    @staticmethod
    def _patch_lambda_service_errors(stack: ExitStack) -> None:
        """A Lambda service error on a plain Lambda Task is ``Lambda.<code>`` in Step Functions
        (what the ASL's Retry names), as moto's lambda:invoke integration already reports it; moto's
        plain Lambda task calls every one of them "Exception"."""
        task_class = state_task_lambda.StateTaskLambda
        original = task_class._from_error

        def from_error(task: Any, env: Any, ex: Exception) -> Any:
            if not isinstance(ex, ClientError):
                return original(task, env, ex)
            name = f"Lambda.{ex.response['Error']['Code']}"
            details = LambdaFunctionFailedEventDetails(error=name, cause=ex.response["Error"].get("Message", ""))
            return FailureEvent(
                env=env,
                error_name=CustomErrorName(name),
                event_type=HistoryEventType.LambdaFunctionFailed,
                event_details=EventDetails(lambdaFunctionFailedEventDetails=details),
            )

        stack.enter_context(mock.patch.object(task_class, "_from_error", from_error))

    def answered_waits(self) -> list[str]:
        """Executions parked on a task token someone has answered meanwhile (a Cluster Event's
        wake-up): the runner wakes them, as Step Functions would go on at once."""
        return sorted(name for name, endpoint in list(self.token_waits.items()) if endpoint.get_outcome() is not None)

    def _patch_task_token_timeouts(self, stack: ExitStack) -> None:
        sandbox = self
        callback = state_task_service_callback.StateTaskServiceCallback
        original = callback._eval_wait_for_task_token

        def wait_for_token(task: Any, env: Any, timeout_seconds: int, callback_endpoint: Any, heartbeat_endpoint: Any) -> Any:
            # Not for a .sync task: moto listens for a token there too, on a thread of its own, alongside
            # the child execution it follows; a virtual timeout would move the parent's time on by hours.
            waits_for_token = task.resource.condition == ResourceCondition.WaitForTaskToken
            # Wait For Rejoin is answered by a Cluster Event or by its timeout, never by the agent:
            # on virtual time even when a real agent answers the other tasks in real time.
            answered_by_us = _state_name(env) in ANSWERED_BY_THE_PIPELINE
            if not (sandbox.answers_in_process or answered_by_us) or not waits_for_token:
                return original(task, env, timeout_seconds, callback_endpoint, heartbeat_endpoint)
            # The simulated agent answers a command as soon as it is sent, or (away, then back) all
            # at once when it returns: it never beats while a command waits. So a task with
            # HeartbeatSeconds that has no answer by then has had no heartbeat either.
            heartbeat = heartbeat_endpoint._heartbeat_seconds if heartbeat_endpoint is not None else None
            deadline = min(timeout_seconds, heartbeat) if heartbeat is not None else timeout_seconds
            outcome = callback_endpoint.wait(timeout=0)  # answered already (by the agent, or a dry-run step itself)
            if outcome is None:
                execution = _execution_name(env)
                sandbox.token_waits[execution] = callback_endpoint  # for an answer from outside: answered_waits()
                try:
                    sandbox.clock.sleep(deadline, timeline=execution)
                finally:
                    sandbox.token_waits.pop(execution, None)
                outcome = callback_endpoint.wait(timeout=0)
                if outcome is None and sandbox.clock.stopped(execution):
                    # StopExecution ended the execution while it waited: the task ends with it (as a
                    # Wait state does), not with a timeout the stopped execution would be failed by.
                    return CallbackOutcomeSuccess(callback_id=callback_endpoint.callback_id, output="{}")
            if outcome is not None:
                return outcome
            # The task timed out: from now on its token is dead (SendTaskHeartbeat/Success answer
            # TaskTimedOut), even while the rest of the execution runs on, as on AWS.
            callback_endpoint.report(CallbackConsumerTimeout())
            if heartbeat is not None and heartbeat < timeout_seconds:
                return HeartbeatTimedOut()
            return CallbackOutcomeTimedOut(callback_id=callback_endpoint.callback_id)

        stack.enter_context(mock.patch.object(callback, "_eval_wait_for_task_token", wait_for_token))

        # Step Functions names a missed heartbeat States.HeartbeatTimeout (the error a Catch sees and
        # the TaskTimedOut event carries); moto calls every timeout States.Timeout.
        original_from_error = state_task.StateTask._from_error

        def from_error(task: Any, env: Any, ex: Exception) -> Any:
            if not isinstance(ex, HeartbeatTimeoutError):
                return original_from_error(task, env, ex)
            name = StatesErrorNameType.StatesHeartbeatTimeout.to_name()
            return FailureEvent(
                env=env,
                error_name=StatesErrorName(typ=StatesErrorNameType.StatesHeartbeatTimeout),
                event_type=HistoryEventType.TaskTimedOut,
                event_details=EventDetails(taskTimedOutEventDetails=TaskTimedOutEventDetails(error=name)),
            )

        stack.enter_context(mock.patch.object(state_task.StateTask, "_from_error", from_error))

    def _patch_nested_executions(self, stack: ExitStack) -> None:
        sandbox = self
        service = state_task_service_sfn.StateTaskServiceSfn
        original_start = service._eval_service_task
        original_sync2 = service._build_sync2_resolver

        def start(task: Any, env: Any, **kwargs: Any) -> None:
            name = kwargs["normalised_parameters"].get("name")
            if name:
                sandbox.clock.start_timeline(str(name), parent=_execution_name(env))
            original_start(task, env=env, **kwargs)

        def build_sync2(task: Any, env: Any, **kwargs: Any) -> Callable[[], Any]:
            parent = _execution_name(env)
            child = str(env.stack[-1]["ExecutionArn"]).rsplit(":", 1)[-1]
            resolve = original_sync2(task, env=env, **kwargs)

            def resolver() -> Any:
                try:
                    with ApiCalls.counting(False):
                        result = resolve()
                except Exception:  # the child failed: the parent resumes at its end to handle it
                    sandbox.clock.child_finished(parent, child)
                    raise
                if result is None:
                    sandbox.clock.wait_on(parent, child)
                else:
                    sandbox.clock.child_finished(parent, child)
                return result

            return resolver

        # moto keeps LocalStack's Step Functions integration but not its parameter/response
        # normalisation (a no-op in moto): the state's PascalCase parameters must become boto3's
        # camelCase, and the response PascalCase again, as Step Functions returns it
        # (ExecutionArn, Output, StartDate in epoch milliseconds).
        original_parameters = service._normalise_parameters

        def normalise_parameters(task: Any, parameters: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            original_parameters(task, parameters, *args, **kwargs)
            for key in list(parameters):
                parameters[key[0].lower() + key[1:]] = parameters.pop(key)

        def normalise_response(task: Any, response: Any, *args: Any, **kwargs: Any) -> None:
            if isinstance(response, dict):
                for key in list(response):
                    value = response.pop(key)
                    response[key[0].upper() + key[1:]] = int(value.timestamp() * 1000) if hasattr(value, "timestamp") else value

        real_sleep = time.sleep
        stack.enter_context(mock.patch.object(service, "_normalise_parameters", normalise_parameters))
        stack.enter_context(mock.patch.object(service, "_normalise_response", normalise_response))
        stack.enter_context(mock.patch.object(service, "_eval_service_task", start))
        stack.enter_context(mock.patch.object(service, "_build_sync2_resolver", build_sync2))
        stack.enter_context(
            mock.patch.object(
                state_task_service_callback, "time", types.SimpleNamespace(sleep=lambda seconds: real_sleep(min(seconds, 0.02)))
            )
        )
