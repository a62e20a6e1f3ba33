"""moto patched to behave as AWS does where a drill depends on it: every call counted and its errors
injected, Lambda invoked on the virtual clock, Retry and SDK backoffs waited on it with repeatable
jitter, EventBridge's TestEventPattern."""

from __future__ import annotations

import json
import random
import threading
import time
import types
import uuid
from contextlib import ExitStack
from typing import Any
from unittest import mock

import urllib3
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.core.botocore_stubber import BotocoreStubber, MockRawResponse
from moto.core.exceptions import JsonRESTError
from moto.events.models import EventPattern
from moto.events.responses import EventsHandler
from moto.events.utils import EventTemplateParser
from moto.kms import models as moto_kms_models
from moto.sns.models import Subscription as SnsSubscription
from moto.stepfunctions.parser.asl.component.common.retry import jitter_strategy_decl, retrier_decl
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.inline_iteration_component import InlineIterationComponent
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.component.state.wait.wait_function import wait_function
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.models import StepFunctionsParserBackend

from hyperpod_recovery.adapters import kubernetes as kubernetes_adapter
from hyperpod_recovery.adapters.kubernetes import KubernetesApi
from sandbox.aws.lambdas import SANDBOX_KUBE_READ_SECONDS, ApiCalls, FakeContext, _count_call
from sandbox.aws.names import RETRY_BACKOFF
from sandbox.aws.once import _kms_private_key, _parse_asl_once, _sns_signing_key, _validate_definition_once
from sandbox.aws.stepfunctions import _execution_name
from sandbox.clock import VirtualClock
from sandbox.dynamodb_wire import plain_values_written_through
from sandbox.hyperpod_serve import serve

_FULL_EVENT_TEMPLATE = (
    '{"version": "0", "id": "<id>", "detail-type": "<detail-type>", "source": "<source>", "account": "<account>", '
    '"time": <time>, "region": "<region>", "resources": <resources>, "detail": <detail>}'
)


class TimelineRandom:
    """``random.uniform``/``random.random`` for retry jitter, one generator per timeline seeded by
    its name: the same drill draws the same backoffs on every run, whichever thread runs first."""

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self._generators: dict[str, random.Random] = {}
        self._lock = threading.Lock()

    def _generator(self) -> random.Random:
        name = self._clock.current()
        with self._lock:
            return self._generators.setdefault(name, random.Random(name))  # noqa: S311 - jitter, not security

    def uniform(self, low: float, high: float) -> float:
        return self._generator().uniform(low, high)

    def random(self) -> float:
        return self._generator().random()


# TestEventPattern: "the following fields are mandatory: id, account, source, time, region,
# resources, detail-type" (EventBridge API reference).
_TEST_EVENT_FIELDS = ("id", "account", "source", "time", "region", "resources", "detail-type")


def _test_event_pattern(handler: EventsHandler) -> tuple[str, dict[str, Any]]:
    try:
        pattern = EventPattern.load(handler._get_param("EventPattern"))
        event = json.loads(handler._get_param("Event") or "")
    except (ValueError, TypeError) as exc:
        return handler.error("InvalidEventPatternException", str(exc))
    missing = [name for name in _TEST_EVENT_FIELDS if not isinstance(event, dict) or name not in event]
    if missing:
        return handler.error("ValidationException", f"Event is missing mandatory fields: {', '.join(missing)}")
    return handler._create_response({"Result": pattern.matches_event(event)})


class MotoPatches:
    """Mixed into SandboxAWS: the patches to moto and botocore every drill needs, kept for the life of the sandbox."""

    def _patch_moto(self, stack: ExitStack) -> None:
        self._patch_once_per_process(stack)
        self._patch_counted_calls(stack)
        self._patch_lambda_invoke(stack)
        self._patch_kubernetes_calls(stack)
        self._patch_nested_executions(stack)
        self._patch_history_timestamps(stack)
        self._patch_task_token_timeouts(stack)
        self._patch_lambda_service_errors(stack)
        self._patch_task_heartbeats(stack)
        self._patch_history_paging(stack)
        self._patch_task_failure_cause(stack)
        self._patch_stop_execution(stack)
        self._patch_execution_dates(stack)
        stack.enter_context(mock.patch.object(EventsHandler, "test_event_pattern", _test_event_pattern))
        self._patch_virtual_waits(stack)
        original_map_body = InlineIterationComponent._eval_body

        def map_one_at_a_time(component: Any, env: Any) -> None:
            env.stack[-1].max_concurrency = 1
            original_map_body(component, env)

        stack.enter_context(mock.patch.object(InlineIterationComponent, "_eval_body", map_one_at_a_time))
        # moto's default EventBridge->SQS template drops "account", which real EventBridge delivers
        # (and our event models require): restore the full envelope.
        stack.enter_context(mock.patch.object(EventTemplateParser, "DEFAULT_EVENT_INPUT_TEMPLATE", _FULL_EVENT_TEMPLATE))
        stack.enter_context(plain_values_written_through())  # (sandbox/dynamodb_wire.py: the same answer, faster)
        stack.enter_context(serve(self.double))

    def _patch_once_per_process(self, stack: ExitStack) -> None:
        """What moto would redo for every drill (once.py), and one Lambda client per sandbox."""
        # moto builds a new Lambda client for every Lambda task it runs; one per sandbox does the same
        # calls (moto's own settings: no retries, no validation) without a client build per state.
        lambda_clients: dict[tuple[str, str], Any] = {}
        moto_lambda_client = lambda_eval_utils.boto_client_for

        def lambda_client_once(region: str, service: str, state_credentials: Any = None) -> Any:
            # moto's boto_client_for ignores state_credentials (fixed keys "ak"/"sk"): so may the cache.
            with self._clients_lock:
                if (region, service) not in lambda_clients:
                    lambda_clients[region, service] = moto_lambda_client(region=region, service=service)
                return lambda_clients[region, service]

        stack.enter_context(mock.patch.object(lambda_eval_utils, "boto_client_for", lambda_client_once))
        stack.enter_context(mock.patch.object(SnsSubscription, "private_key", lambda subscription: _sns_signing_key()))
        stack.enter_context(mock.patch.object(moto_kms_models, "generate_private_key", _kms_private_key))
        stack.enter_context(mock.patch.object(AmazonStateLanguageParser, "parse", staticmethod(_parse_asl_once)))
        stack.enter_context(mock.patch.object(StepFunctionsParserBackend, "_validate_definition", staticmethod(_validate_definition_once)))

    def _patch_counted_calls(self, stack: ExitStack) -> None:
        """Every AWS call counted, and the injected errors and lost answers it meets."""
        sandbox = self
        original_stubber_call = BotocoreStubber.__call__

        def counted_send(stubber: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
            # Every HTTP attempt of every client passes here as "before-send.<service id>.<Operation>",
            # S3's included (moto's S3 does not dispatch through BaseResponse.call_action).
            _, service, operation = event_name.split(".", 2)
            _count_call()
            sandbox.api_calls.record_by_function(service, operation)
            if ApiCalls.active():
                sandbox.api_calls.record(service, operation)
                injected = sandbox.take_ledger_error(service, operation)
                if injected:
                    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{injected}", "message": f"injected {injected}"})
                    return AWSResponse(request.url, 400, {"x-amzn-requestid": str(uuid.uuid4())}, MockRawResponse(body))
                if sandbox.take_lost_answer(operation):
                    original_stubber_call(stubber, event_name, request, **kwargs)  # AWS acted...
                    raise ReadTimeoutError(endpoint_url=request.url)  # ...and its answer never came
            return original_stubber_call(stubber, event_name, request, **kwargs)

        stack.enter_context(mock.patch.object(BotocoreStubber, "__call__", counted_send))

    def _patch_lambda_invoke(self, stack: ExitStack) -> None:
        """Lambda's Invoke runs the real handler in-process, on the invoking execution's timeline."""
        sandbox = self

        def invoke(
            backend: LambdaSimpleBackend, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
        ) -> bytes:
            fn = backend.get_function(function_name, qualifier)
            event = json.loads(body) if body else {}
            timeline = event.get("execution_name") if isinstance(event, dict) else None
            task_token = event.get("task_token") if isinstance(event, dict) else None
            if sandbox.failed_before_running[fn.function_name] > 0:
                # Lambda failed the invoke before the function ran: nothing of its work happened.
                sandbox.failed_before_running[fn.function_name] -= 1
                raise JsonRESTError("ServiceException", f"injected: Lambda failed before {fn.function_name} ran")
            with sandbox.clock.on(timeline or sandbox.clock.current()):
                # (the timeline another thread serving this call works on: the EKS API server's, sandbox/eks.py)
                previous, sandbox.invoking = sandbox.invoking, sandbox.clock.current()
                try:
                    with sandbox.api_calls.inside(fn.function_name):
                        context = FakeContext(fn.function_name, fn.function_arn, sandbox.timeouts[fn.function_name])
                        result = sandbox.handlers[fn.function_name](event, context)
                except Exception as exc:  # what Lambda does with an unhandled exception
                    response_headers["x-amz-function-error"] = "Unhandled"
                    return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc), "stackTrace": []}).encode()
                finally:
                    sandbox.invoking = previous
                    sandbox.after_invoke(task_token if isinstance(task_token, str) else None)
            if sandbox.lost_responses[fn.function_name] > 0:
                # It ran (and did whatever it does), but its answer is lost on the way back...
                sandbox.lost_responses[fn.function_name] -= 1
                if sandbox.lost_response_errors[fn.function_name] == "Sandbox.Timedout":
                    # ...or Lambda stopped it at its Timeout, as it finished: an unhandled error, as Lambda reports one.
                    response_headers["x-amz-function-error"] = "Unhandled"
                    message = f"injected: {fn.function_name} timed out after {sandbox.timeouts[fn.function_name]:.2f} seconds"
                    return json.dumps({"errorType": "Sandbox.Timedout", "errorMessage": message}).encode()
                raise JsonRESTError("ServiceException", f"injected: the response of {fn.function_name} was lost")
            return json.dumps(result).encode()

        stack.enter_context(mock.patch.object(LambdaSimpleBackend, "invoke", invoke))

    def _patch_kubernetes_calls(self, stack: ExitStack) -> None:
        """A Kubernetes call costs the handler's time as an AWS call does; its reads wait longer."""
        original_kube_request = KubernetesApi._request

        def counted_kube_request(api: KubernetesApi, *args: Any, **kwargs: Any) -> dict[str, Any]:
            _count_call()  # (a Kubernetes call costs the handler's time as an AWS call does)
            return original_kube_request(api, *args, **kwargs)

        stack.enter_context(mock.patch.object(KubernetesApi, "_request", counted_kube_request))
        # The sandbox's API server answers in real time, on a machine the whole simulation shares (a
        # fleet run lists 2,048 nodes over TLS beside two other processes), while the drill's clock
        # stands still: a read that outlasts the adapter's 5 s is the machine's slowness, not the
        # cluster's. The sandbox waits longer; the adapter's own timeout is held by test_time_budgets.
        sandbox_timeout = urllib3.Timeout(connect=kubernetes_adapter.CONNECT_TIMEOUT_SECONDS, read=SANDBOX_KUBE_READ_SECONDS)
        stack.enter_context(mock.patch.object(kubernetes_adapter, "_TIMEOUT", sandbox_timeout))

    def _patch_virtual_waits(self, stack: ExitStack) -> None:
        """Wait states, Retry backoffs and botocore's retry sleeps on the virtual clock, with jitter
        drawn per timeline (the same drill waits the same on every run)."""
        sandbox = self

        def wait_interval(self: Any, env: Any, wait_seconds: float) -> None:
            sandbox.clock.sleep(wait_seconds, timeline=_execution_name(env))

        stack.enter_context(mock.patch.object(wait_function.WaitFunction, "_wait_interval", wait_interval))
        original_retrier_body = retrier_decl.RetrierDecl._eval_body

        def retrier_body(self: Any, env: Any) -> None:
            with sandbox.clock.on(_execution_name(env)):
                original_retrier_body(self, env)

        stack.enter_context(mock.patch.object(retrier_decl.RetrierDecl, "_eval_body", retrier_body))
        virtual_sleep = types.SimpleNamespace(sleep=lambda seconds: self.clock.sleep(seconds, reason=RETRY_BACKOFF))
        stack.enter_context(mock.patch.object(retrier_decl, "time", virtual_sleep))
        # botocore's own retries (standard mode) sleep in endpoint.py: virtual too.
        import botocore.endpoint
        import botocore.retries.standard

        stack.enter_context(mock.patch.object(botocore.endpoint, "time", types.SimpleNamespace(sleep=virtual_sleep.sleep, time=time.time)))
        jitter = TimelineRandom(self.clock)
        stack.enter_context(mock.patch.object(jitter_strategy_decl, "random", jitter))
        original_backoff_init = botocore.retries.standard.ExponentialBackoff.__init__

        def backoff_init(backoff: Any, *args: Any, **kwargs: Any) -> None:
            original_backoff_init(backoff, *args, **kwargs)
            backoff._random = jitter.random

        stack.enter_context(mock.patch.object(botocore.retries.standard.ExponentialBackoff, "__init__", backoff_init))
