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

import io
import json
import os
import threading
import warnings
import zipfile
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime
from typing import Any
from unittest import mock

import boto3
from moto import mock_aws
from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.responses import get_backend

from sandbox.aws.lambdas import ApiCalls, load_handler
from sandbox.aws.names import FAKE_CREDENTIALS, REGION, ROOT, STACK
from sandbox.aws.once import _session
from sandbox.aws.patches import MotoPatches
from sandbox.aws.stepfunctions import StepFunctionsPatches
from sandbox.clock import DRIVER, EPOCH, VirtualClock
from sandbox.hyperpod import ACCOUNT, HyperPodDouble
from sandbox.template import Resolver, UnsupportedIntrinsic, load_template

# Injected Throttling/AccessDenied are generic AWS errors that SageMaker's model does not list; moto
# warns on each one, but real AWS sends them all the same.
warnings.filterwarnings("ignore", message=".*does not match an error shape")


class SandboxAWS(MotoPatches, StepFunctionsPatches):
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
