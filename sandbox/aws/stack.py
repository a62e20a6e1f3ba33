"""The sandbox's in-memory AWS: moto, built from template.yaml, with the real handlers in-process.

What is patched, and why (see ../shared/reference/local-testing-toolchain.md):
* moto's Step Functions interpreter runs the real statemachines/*.asl.json (execute_state_machine);
* Lambda invocations are dispatched to the real handlers in functions/*/app.py, in-process;
* Wait states, Retry backoffs and botocore's own retry sleeps move the execution's virtual
  timeline (sandbox/clock.py) instead of sleeping; their jitter is drawn from a generator seeded by
  the execution's name, so a drill waits the same on every run;
* a Map state runs its iterations one at a time, in item order: they wait on the one controller
  agent, which answers one command at a time anyway, and a fixed order keeps drills repeatable;
* a task waiting for its token (waitForTaskToken) that the simulated agent did not answer (agent
  down, or a command it would not run) runs out its TimeoutSeconds on virtual time (a step that
  answers its own token still completes);
* a nested execution (states:startExecution.sync:2) starts on its parent's timeline, and the
  parent moves on to the child's end when it finishes (moto polls the child every 0.5 s of real
  time; here every 20 ms, and those DescribeExecution polls are not counted: AWS follows a .sync
  child through events, not through calls of ours);
* an ASL definition is parsed once per process (the parse tree is kept; moto's program is built
  from it afresh for every execution), and botocore's data files are read once per process;
  moto's Lambda tasks share one client per sandbox, and the RSA keys moto makes for symmetric KMS
  keys and SNS signatures (never used by a drill) are made once per process;
* SageMaker's cluster-node calls are served by the HyperPod double (sandbox/hyperpod.py);
* SendTaskFailure keeps its cause (moto's handler drops it; Step Functions hands it to the Catch);
* EventBridge's TestEventPattern, which moto leaves empty, answers with the pattern matcher moto
  routes the sandbox's events with, after AWS's documented check of the event's mandatory fields;
* executions are dated on their virtual timelines (ListExecutions, DescribeExecution, StartExecution's
  answer), as their history is;
* an AWS answer may be lost after AWS acted (behaviour.lost_api_answers): botocore retries it;
* every AWS call the pipeline makes is counted (the report's api_calls);
* a DynamoDB item's plain values are written into moto's answers as they are, not member by
  member through the service model (sandbox/dynamodb_wire.py: the same bytes, 6x faster on a scan);
* the Kubernetes adapter waits up to 120 real seconds for the sandbox's API server, not 5 (the
  drill's clock stands still while it answers; a busy machine's slowness is not the cluster's).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import os
import random
import threading
import time
import types
import uuid
import warnings
import weakref
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
import urllib3
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, ReadTimeoutError
from cryptography.hazmat.primitives.asymmetric import rsa
from moto import mock_aws
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.core.botocore_stubber import BotocoreStubber, MockRawResponse
from moto.core.exceptions import JsonRESTError
from moto.core.responses import ActionResult
from moto.events.models import EventPattern
from moto.events.responses import EventsHandler
from moto.events.utils import EventTemplateParser
from moto.kms import models as moto_kms_models
from moto.sns.models import Subscription as SnsSubscription
from moto.stepfunctions.parser.api import ExecutionStatus, HistoryEventType, LambdaFunctionFailedEventDetails, TaskTimedOutEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
from moto.stepfunctions.parser.asl.component.common.retry import jitter_strategy_decl, retrier_decl
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.inline_iteration_component import InlineIterationComponent
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils, state_task, state_task_lambda
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_callback, state_task_service_sfn
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
from moto.stepfunctions.parser.asl.component.state.wait.wait_function import wait_function
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
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
from moto.stepfunctions.parser.models import StepFunctionsParserBackend
from moto.stepfunctions.responses import StepFunctionResponse, get_backend

from hyperpod_recovery.adapters import kubernetes as kubernetes_adapter
from hyperpod_recovery.adapters.kubernetes import KubernetesApi
from sandbox.clock import DRIVER, EPOCH, VirtualClock
from sandbox.dynamodb_wire import plain_values_written_through
from sandbox.hyperpod import ACCOUNT, HyperPodDouble, serve
from sandbox.template import Resolver, UnsupportedIntrinsic, load_template

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-west-2"
STACK = "sandbox"
SERVICE_NAMES = {"sfn": "stepfunctions", "eventbridge": "events"}  # botocore service ids -> client names
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
RETRY_BACKOFF = "retry backoff"  # the clock's name for Retry and SDK retry waits (the report's wait category)
_local = threading.local()
# Injected Throttling/AccessDenied are generic AWS errors that SageMaker's model does not list; moto
# warns on each one, but real AWS sends them all the same.
warnings.filterwarnings("ignore", message=".*does not match an error shape")
_FULL_EVENT_TEMPLATE = (
    '{"version": "0", "id": "<id>", "detail-type": "<detail-type>", "source": "<source>", "account": "<account>", '
    '"time": <time>, "region": "<region>", "resources": <resources>, "detail": <detail>}'
)


class ApiCalls:
    """Counts calls made by the pipeline: handlers, the state machine, the controller agent.

    The runner's own calls (creating resources, injecting events, reading results) happen on the
    main thread and are not counted unless wrapped in ``counting()``.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        # Lambda function logical id -> the (botocore service id, operation) pairs its handler called.
        self.by_function: dict[str, set[tuple[str, str]]] = {}

    @staticmethod
    def active() -> bool:
        default = threading.current_thread() is not threading.main_thread()
        return getattr(_local, "counting", default)

    @staticmethod
    @contextmanager
    def counting(enabled: bool = True) -> Iterator[None]:
        previous = getattr(_local, "counting", None)
        _local.counting = enabled
        try:
            yield
        finally:
            if previous is None:
                del _local.counting
            else:
                _local.counting = previous

    def record(self, service: str, action: str) -> None:
        with self._lock:
            self.counts[f"{SERVICE_NAMES.get(service, service)}.{action}"] += 1

    # --- which function made a call (the IAM contract test compares them with its policy) ---
    @contextmanager
    def inside(self, function: str) -> Iterator[None]:
        """Calls made in this block are ``function``'s (a Lambda handler running)."""
        previous = getattr(_local, "function", None)
        _local.function = function
        with self._lock:
            self.by_function.setdefault(function, set())  # it ran, with or without AWS calls
        try:
            yield
        finally:
            _local.function = previous

    def record_by_function(self, service: str, action: str) -> None:
        function = getattr(_local, "function", None)
        if function is not None:
            with self._lock:
                self.by_function.setdefault(function, set()).add((service, action))


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


# What each call a handler makes costs its function's time (ASSUMPTION: an in-region API call over a
# kept-alive connection, AWS's or the Kubernetes API's, about 30 ms): the remaining time a handler
# reads is its timeout less its calls so far. Nothing sleeps: the drill stays as fast and repeatable.
CALL_MILLIS = 30


def calls_made() -> int:
    """The calls this thread's handler made so far (every HTTP attempt, AWS's and the Kubernetes API's)."""
    return int(getattr(_local, "calls_made", 0))


SANDBOX_KUBE_READ_SECONDS = 120.0  # real seconds (see where it is patched in)


def _count_call() -> None:
    _local.calls_made = calls_made() + 1


class FakeContext:
    def __init__(self, function_name: str, function_arn: str, timeout_seconds: int = 30) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = function_arn
        self.memory_limit_in_mb = 256
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "sandbox"
        self._budget_ms = timeout_seconds * 1000
        self._calls_at_start = calls_made()

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._budget_ms - CALL_MILLIS * (calls_made() - self._calls_at_start))


def load_handler(code_uri: str) -> Callable[..., Any]:
    """Import functions/<name>/app.py under a unique module name (every function's file is app.py)."""
    path = ROOT / code_uri / "app.py"
    spec = importlib.util.spec_from_file_location(f"functions.{path.parent.name}.app", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lambda_handler  # type: ignore[no-any-return]


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


# Every sandbox in a process reads the same botocore data files (service models, endpoint rules,
# partitions: a megabyte of JSON per client otherwise), so the runner's sessions share one loader.
# Only the data is shared: each sandbox gets its own session, credentials and clients.
_SHARED_LOADER: Any = None
_SHARED_LOADER_LOCK = threading.Lock()


def _session() -> boto3.session.Session:
    global _SHARED_LOADER
    session = boto3.session.Session(region_name=REGION)
    with _SHARED_LOADER_LOCK:
        if _SHARED_LOADER is None:
            _SHARED_LOADER = session._session.get_component("data_loader")
        else:
            session._session.register_component("data_loader", _SHARED_LOADER)
    return session


# moto parses a state machine's ASL with its ANTLR grammar at CreateStateMachine and again at every
# StartExecution (a fifth of a second each: most of a drill's set-up). The parse tree of one
# definition never changes; the program built from it does (it holds the execution's state), so
# the tree is kept and the program is built afresh from it every time, as moto would.
_ASL_TREES: dict[str, Any] = {}
_moto_asl_parse = AmazonStateLanguageParser.parse


def _parse_asl_once(definition: str) -> tuple[Any, Any]:
    tree = _ASL_TREES.get(definition)
    if tree is None:
        _, tree = _moto_asl_parse(definition)  # a syntax error raises here, and is not kept
        if len(_ASL_TREES) >= 64:  # definitions differ by the stack's names: a few per process
            _ASL_TREES.clear()
        _ASL_TREES[definition] = tree
    return Preprocessor().visit(tree), tree


_moto_validate_definition = StepFunctionsParserBackend._validate_definition


@functools.lru_cache(maxsize=1)
def _sns_signing_key() -> Any:
    """moto signs each SNS delivery with a fresh 2048-bit RSA key per subscription (a tenth of a
    second per drill, for a signature no drill checks): one key per process signs them all."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


_moto_kms_private_key = moto_kms_models.generate_private_key


@functools.lru_cache(maxsize=1)
def _kms_unused_private_key() -> Any:
    return _moto_kms_private_key("SYMMETRIC_DEFAULT")


def _kms_private_key(key_spec: str) -> Any:
    """moto gives every KMS key an RSA private key, a symmetric one too, where it is never used
    (the stack's keys are all symmetric): those share one. Asymmetric keys get their own, as in moto."""
    if key_spec == "SYMMETRIC_DEFAULT":
        return _kms_unused_private_key()
    return _moto_kms_private_key(key_spec)


def _validate_definition_once(definition: str) -> None:
    """CreateStateMachine's check: a definition that parsed and built before is valid."""
    if definition not in _ASL_TREES:
        _moto_validate_definition(definition)


# Task states whose token the pipeline itself answers (Notice Cluster Event), not the agent.
ANSWERED_BY_THE_PIPELINE = frozenset({"Wait For Rejoin"})


def _state_name(env: Any) -> str:
    return str(env.states.context_object.context_object_data.get("State", {}).get("Name", ""))


def _execution_name(env: Any) -> str:
    return str(env.states.context_object.context_object_data["Execution"]["Name"])


class SandboxAWS:
    """Enter to get a moto world built from template.yaml; attributes give the physical names."""

    def __init__(
        self,
        clock: VirtualClock,
        double: HyperPodDouble,
        parameters: dict[str, str],
        after_invoke: Callable[[str | None], None],
        epoch: datetime = EPOCH,
    ) -> None:
        self.clock = clock
        self.epoch = epoch  # virtual second 0 as a date: execution history timestamps are virtual too
        self.double = double
        self.parameters = parameters
        self.after_invoke = after_invoke  # given the invocation's task token: the controller answers its command
        self.api_calls = ApiCalls()
        # The simulated controller answers a command inside the Lambda invocation that sent it, so a
        # task whose token is not answered by the time it waits never will be (the agent is down, or
        # would not run the command): it runs out its TimeoutSeconds on virtual time instead of
        # blocking in real time, where it would never park. A real agent process answers in real time.
        self.answers_in_process = True
        # Executions waiting for a task token, by name: Wait For Rejoin, which a Cluster Event may answer.
        self.token_waits: dict[str, Any] = {}
        # "dynamodb:<Operation>" -> [error code, remaining]: ledger errors the pipeline's calls receive.
        self.ledger_errors: dict[str, list[Any]] = {}
        self._ledger_errors_lock = threading.Lock()
        # Function logical id -> how many more of its answers are lost after it ran (lost_responses).
        self.lost_responses: Counter[str] = Counter()
        self.lost_response_errors: dict[str, str] = {}  # function logical id -> how its lost answers end
        # Function logical id -> how many more invokes Lambda fails before the function runs (ran: false).
        self.failed_before_running: Counter[str] = Counter()
        # AWS operation -> how many more of its answers are lost after AWS acted (lost_api_answers):
        # botocore sees no answer (a read timeout) and sends the request again.
        self.lost_api_answers: Counter[str] = Counter()
        self.timeouts: dict[str, int] = {}  # function logical id -> its Timeout (template.yaml)
        self.handlers: dict[str, Callable[..., Any]] = {}
        # The timeline of the function running now (drills run one execution at a time).
        self.invoking = DRIVER
        self.function_arns: dict[str, str] = {}
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()
        self._stack = ExitStack()

    # --- lifecycle ----------------------------------------------------------------------
    def __enter__(self) -> SandboxAWS:
        stack = self._stack
        stack.enter_context(mock.patch.dict(os.environ, FAKE_CREDENTIALS))
        try:
            stack.enter_context(mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}))
            # mock_aws empties boto3's default session, so the first boto3.client() of every drill
            # (the adapters', moto's own) would read every service model again: share the loader.
            # moto restores the default session when the sandbox closes.
            boto3.DEFAULT_SESSION = _session()
            self._patch_moto(stack)
            self._build_from_template()
        except BaseException:
            # A world half built must not outlive its failure: moto's state would make every later
            # sandbox in this process fail with "already exists".
            self.clock.close()
            stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.clock.close()
        self._stack.close()

    def enter(self, context: Any) -> Any:
        """Keep a patch (or any context) for the life of the sandbox."""
        return self._stack.enter_context(context)

    def take_ledger_error(self, service: str, operation: str) -> str | None:
        """The injected DynamoDB error for this call, if one is left (behaviour.api_errors)."""
        if service != "dynamodb":
            return None
        with self._ledger_errors_lock:
            entry = self.ledger_errors.get(f"dynamodb:{operation}")
            if not entry or entry[1] <= 0:
                return None
            entry[1] -= 1
            return str(entry[0])

    def take_lost_answer(self, operation: str) -> bool:
        """Whether this call's answer is lost (behaviour.lost_api_answers), counting it."""
        with self._ledger_errors_lock:
            if self.lost_api_answers[operation] <= 0:
                return False
            self.lost_api_answers[operation] -= 1
            return True

    def serve_http(self) -> str:
        """Serve this same moto state over HTTP (moto's server mode) for another process: the
        endpoint URL to give it as AWS_ENDPOINT_URL. Stopped when the sandbox closes."""
        from moto.server import ThreadedMotoServer  # needs moto[server]; only real-Slurm drills use it

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        self._stack.callback(server.stop)
        host, port = server.get_host_and_port()
        return f"http://{host}:{port}"

    def running_executions(self) -> set[str]:
        """The names of the executions still running, read from moto's backend: the runner asks
        every time a timeline parks, and a ListExecutions round trip through boto3 for each question
        was a quarter of a drill's CPU time. One with no status yet is being started: running."""
        backend = get_backend(ACCOUNT, REGION)
        return {
            execution.name
            for machine in list(backend.state_machines)
            for execution in list(machine.executions)
            if execution.exec_status in (None, ExecutionStatus.RUNNING)
        }

    def executions(self) -> list[Any]:
        """Every execution of the drill, nested ones included, in the order they were started
        (moto's backend objects: name, execution_arn, state_machine_arn, exec_status, ...)."""
        backend = get_backend(ACCOUNT, REGION)
        found = [execution for machine in list(backend.state_machines) for execution in list(machine.executions)]
        return sorted(found, key=lambda execution: execution.start_date)

    def client(self, service: str) -> Any:
        """One client per service for the runner (building one loads the service's model: slow)."""
        if service not in self._clients:  # boto3's default session is the sandbox's (shared models)
            self._clients[service] = boto3.client(service, region_name=REGION)
        return self._clients[service]

    # --- patches ------------------------------------------------------------------------
    def _patch_moto(self, stack: ExitStack) -> None:
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

        def wait_interval(self: Any, env: Any, wait_seconds: float) -> None:
            sandbox.clock.sleep(wait_seconds, timeline=_execution_name(env))

        original_retrier_body = retrier_decl.RetrierDecl._eval_body

        def retrier_body(self: Any, env: Any) -> None:
            with sandbox.clock.on(_execution_name(env)):
                original_retrier_body(self, env)

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
        stack.enter_context(mock.patch.object(BotocoreStubber, "__call__", counted_send))
        stack.enter_context(mock.patch.object(LambdaSimpleBackend, "invoke", invoke))
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
        stack.enter_context(mock.patch.object(wait_function.WaitFunction, "_wait_interval", wait_interval))
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

    # --- resources from template.yaml ---------------------------------------------------
    def _build_from_template(self) -> None:
        self.template = load_template(ROOT / "template.yaml")
        self.resolver = Resolver(
            self.template,
            self.parameters,
            pseudo={"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::StackName": STACK, "AWS::Partition": "aws"},
        )
        role = self.client("iam").create_role(RoleName="sandbox-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        self.queue_urls: dict[str, str] = {}
        self.tables: dict[str, str] = {}  # logical id -> table name
        self._create_queues()
        self._create_tables()
        self._create_keys()
        self._create_topics()
        self._create_pager()
        self._create_rules()
        self._create_functions(role)
        self._create_state_machines(role)
        self._register_stack()

    def _register_stack(self) -> None:
        """The stack as CloudFormation describes it (its parameters and outputs), so the operator
        tools that start from ``--stack`` (drill, preflight) find this deployment as they would a
        real one. moto's CloudFormation builds none of it: the resources are the ones made above."""
        outputs = {}
        for name, output in self.template.get("Outputs", {}).items():
            try:
                outputs[name] = {"Value": str(self.resolver.resolve(output["Value"]))}
            except (UnsupportedIntrinsic, KeyError):
                continue  # (the dashboard: not modelled in the sandbox)
        body = {
            "Parameters": {name: {"Type": "String"} for name in self.resolver.parameters},
            "Resources": {"Deployed": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
            "Outputs": outputs,
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # moto does not model the placeholder resource, which is the point
            self.client("cloudformation").create_stack(
                StackName=STACK,
                TemplateBody=json.dumps(body),
                Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in self.resolver.parameters.items()],
            )

    def _of_type(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """The resources of a type that this deployment's parameters create (their Condition holds)."""
        return [
            (logical, resource)
            for logical, resource in self.template["Resources"].items()
            if resource["Type"] == kind and ("Condition" not in resource or self.resolver.condition(resource["Condition"]))
        ]

    def _queue_arn(self, url: str) -> str:
        return str(self.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])

    def _create_queues(self) -> None:
        sqs = self.client("sqs")
        # Dead-letter queues first: the others' RedrivePolicy names them.
        for logical, resource in sorted(self._of_type("AWS::SQS::Queue"), key=lambda item: "DeadLetter" not in item[0]):
            props = self.resolver.resolve(resource.get("Properties", {}))
            attributes = {
                k: (json.dumps(v) if isinstance(v, dict) else str(v))
                for k, v in props.items()
                if k in ("VisibilityTimeout", "MessageRetentionPeriod", "RedrivePolicy")
            }
            url = sqs.create_queue(QueueName=f"{STACK}-{logical}", Attributes=attributes)["QueueUrl"]
            self.queue_urls[logical] = url
            self.resolver.refs[logical] = url
            self.resolver.attrs[(logical, "Arn")] = self._queue_arn(url)

    def _create_tables(self) -> None:
        dynamodb = self.client("dynamodb")
        for logical, resource in self._of_type("AWS::DynamoDB::Table"):
            props = self.resolver.resolve(resource["Properties"])
            name = f"{STACK}-{logical}"
            dynamodb.create_table(
                TableName=name,
                KeySchema=props["KeySchema"],
                AttributeDefinitions=props["AttributeDefinitions"],
                BillingMode=props["BillingMode"],
                **({"GlobalSecondaryIndexes": props["GlobalSecondaryIndexes"]} if props.get("GlobalSecondaryIndexes") else {}),
            )
            if props.get("TimeToLiveSpecification"):
                dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=props["TimeToLiveSpecification"])
            self.resolver.refs[logical] = name
            self.resolver.attrs[(logical, "Arn")] = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"
            self.tables[logical] = name
        self.ledger_table = self.tables["LedgerTable"]
        self.progress_table = self.tables.get("ProgressTable", "")

    def _create_keys(self) -> None:
        kms = self.client("kms")
        for logical, resource in self._of_type("AWS::KMS::Key"):
            props = self.resolver.resolve(resource["Properties"])
            key = kms.create_key(Description=props.get("Description", ""), Policy=json.dumps(props["KeyPolicy"]))["KeyMetadata"]
            self.resolver.refs[logical] = key["KeyId"]
            self.resolver.attrs[(logical, "Arn")] = key["Arn"]

    def _create_topics(self) -> None:
        sns = self.client("sns")
        for logical, resource in self._of_type("AWS::SNS::Topic"):
            props = self.resolver.resolve(resource["Properties"])
            attributes = {"KmsMasterKeyId": props["KmsMasterKeyId"]} if props.get("KmsMasterKeyId") else {}
            self.resolver.refs[logical] = sns.create_topic(Name=f"{STACK}-{logical}", Attributes=attributes)["TopicArn"]
        self.topic_arn = self.resolver.refs["NotificationTopic"]
        # A queue that receives every notification, so the report can show what a human would read.
        inbox = self.client("sqs").create_queue(QueueName=f"{STACK}-notifications")["QueueUrl"]
        self.queue_urls["__notifications__"] = inbox
        sns.subscribe(TopicArn=self.topic_arn, Protocol="sqs", Endpoint=self._queue_arn(inbox))

    def _create_pager(self) -> None:
        """PagerDuty (PagerDutyRoutingKeySecret set): the connection and API destination in moto,
        which never calls out; the alarms' ARNs the page rules name (the alarms are not modelled)
        and the roles their targets take."""
        events = self.client("events")
        for logical, resource in self._of_type("AWS::CloudWatch::Alarm"):
            name = self.resolver.resolve(resource["Properties"]["AlarmName"])
            self.resolver.attrs[(logical, "Arn")] = f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{name}"
        for logical, _ in self._of_type("AWS::IAM::Role"):
            self.resolver.attrs[(logical, "Arn")] = f"arn:aws:iam::{ACCOUNT}:role/{STACK}-{logical}"
        for logical, resource in self._of_type("AWS::Events::Connection"):
            props = self.resolver.resolve(resource["Properties"])
            arn = events.create_connection(
                Name=f"{STACK}-{logical}", AuthorizationType=props["AuthorizationType"], AuthParameters=props["AuthParameters"]
            )["ConnectionArn"]
            self.resolver.attrs[(logical, "Arn")] = arn
        for logical, resource in self._of_type("AWS::Events::ApiDestination"):
            props = self.resolver.resolve(resource["Properties"])
            arn = events.create_api_destination(
                Name=f"{STACK}-{logical}",
                ConnectionArn=props["ConnectionArn"],
                InvocationEndpoint=props["InvocationEndpoint"],
                HttpMethod=props["HttpMethod"],
            )["ApiDestinationArn"]
            self.resolver.attrs[(logical, "Arn")] = arn

    def _create_rules(self) -> None:
        events = self.client("events")
        for logical, resource in self._of_type("AWS::Events::Rule"):
            props = self.resolver.resolve(resource["Properties"])
            name = f"{STACK}-{logical}"
            arn = events.put_rule(Name=name, EventPattern=json.dumps(props["EventPattern"]))["RuleArn"]
            events.put_targets(Rule=name, Targets=[{"Id": t["Id"], "Arn": t["Arn"]} for t in props["Targets"]])
            self.resolver.refs[logical] = name
            self.resolver.attrs[(logical, "Arn")] = arn

    def _create_functions(self, role: str) -> None:
        resolver = self.resolver
        globals_env = resolver.resolve(self.template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}))
        own_env = {
            logical: resolver.resolve(resource["Properties"].get("Environment", {}).get("Variables", {}))
            for logical, resource in self._of_type("AWS::Serverless::Function")
        }
        # The in-process handlers share one process environment: the Globals, and every function's own
        # variables (the health check is Resume Nodes' alone on AWS; no other function reads it).
        os.environ.update({k: str(v) for k, v in globals_env.items()})
        os.environ.update({k: str(v) for variables in own_env.values() for k, v in variables.items()})
        lambda_client = self.client("lambda")
        package = io.BytesIO()
        with zipfile.ZipFile(package, "w") as archive:
            archive.writestr("app.py", "# served in-process by the sandbox\n")
        for logical, resource in self._of_type("AWS::Serverless::Function"):
            if "Condition" in resource and not resolver.condition(resource["Condition"]):
                continue  # (FindFailedJobsFunction on a Slurm stack: not deployed)
            props = resource["Properties"]
            timeout = int(props.get("Timeout") or self.template.get("Globals", {}).get("Function", {}).get("Timeout") or 3)
            arn = lambda_client.create_function(
                FunctionName=logical,
                Runtime="python3.13",
                Role=role,
                Handler=props["Handler"],
                Timeout=timeout,  # (what a handler's context counts its remaining time from)
                Code={"ZipFile": package.getvalue()},
                Environment={"Variables": {k: str(v) for k, v in {**globals_env, **own_env[logical]}.items()}},
            )["FunctionArn"]
            self.handlers[logical] = load_handler(props["CodeUri"])
            self.timeouts[logical] = int(props.get("Timeout", self.template["Globals"]["Function"]["Timeout"]))
            self.function_arns[logical] = arn
            resolver.refs[logical] = logical
            resolver.attrs[(logical, "Arn")] = arn

    def _create_state_machines(self, role: str) -> None:
        resolver = self.resolver
        sfn = self.client("stepfunctions")
        self.state_machines: dict[str, str] = {}
        for logical, resource in self._of_type("AWS::Serverless::StateMachine"):
            props = {
                k: resolver.resolve(v)
                for k, v in resource["Properties"].items()
                if k in ("Name", "Type", "DefinitionUri", "DefinitionSubstitutions")
            }
            definition = (ROOT / props["DefinitionUri"]).read_text()
            for name, value in props.get("DefinitionSubstitutions", {}).items():
                definition = definition.replace("${" + name + "}", str(value))
            arn = sfn.create_state_machine(name=props["Name"], definition=definition, roleArn=role, type=props.get("Type", "STANDARD"))[
                "stateMachineArn"
            ]
            self.state_machines[logical] = arn
            resolver.refs[logical] = arn
