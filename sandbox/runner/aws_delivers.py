"""What AWS delivers on its own while a drill runs: HyperPod's Cluster Events, Step Functions' status-
change events for executions that ended unrecorded, the scheduled sweep, and SQS event source
mappings invoking their functions."""

from __future__ import annotations

import functools
import json
import math
import re
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError

from hyperpod_recovery.steps.sweep_ended_executions import GRACE as SWEEP_GRACE
from sandbox.aws import REGION
from sandbox.aws.threads import release_ended_threads
from sandbox.clock import DRIVER
from sandbox.runner.functions import (
    CLUSTER_EVENT_BATCH_SIZE,
    ESM_BATCH_SIZE,
    RECONCILE_BATCH_SIZE,
    SWEEP_FUNCTION,
)
from sandbox.slurm import SimulatedController

# What Step Functions sends to EventBridge for every status change; the stack's rule keeps these.
UNRECORDED_END_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")


def _failed_items(response: dict[str, Any], result: Any, messages: list[dict[str, Any]]) -> set[str]:
    """The messages an SQS event source mapping leaves on the queue after an invocation: the
    partial-batch failures it reported, or every message of a batch whose invocation failed."""
    if response.get("FunctionError"):
        return {m["MessageId"] for m in messages}
    return {f["itemIdentifier"] for f in result.get("batchItemFailures", [])} if isinstance(result, dict) else set()


def _sqs_record(message: dict[str, Any], queue_url: str) -> dict[str, Any]:
    queue_name = queue_url.rsplit("/", 1)[-1]
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:{queue_name}",
        "awsRegion": REGION,
    }


class AwsDelivers:
    """Mixed into DrillRunner: what AWS delivers between the executions' wake-ups."""

    def _between(self) -> None:
        """Every execution is parked: deliver what happened before the next one wakes."""
        release_ended_threads()
        self._write_progress(self.clock.horizon)
        if self.training is not None:
            self.training.advance(self.clock.horizon)
        if self.kube_training is not None:
            self.kube_training.advance(self.clock.horizon)
        if isinstance(self.slurm, SimulatedController) and any(n.startswith("hps-") for n in self._running()):
            # The agent's job-nodes snapshot every 30 s, as on a controller, while a planned swap reads it
            # (elsewhere only the detector's ticks need it: their drills' ledgers stay as they were).
            self.slurm.report_job_nodes()
        self._publish_cluster_events()
        self._publish_execution_ends()
        self._run_scheduled_sweeps()

    def _publish_cluster_events(self) -> None:
        """HyperPod publishes a Cluster Event when a replacement ends (Continuous mode only): the
        stack's rule puts it on the cluster-event queue, whose mapping invokes Notice Cluster Event,
        which answers the waits it concerns. Delivered at the moment it happened, before the next
        execution wakes: the present moves there, and a wait it answered goes on from there."""
        if not isinstance(self.slurm, SimulatedController):
            return  # a real Slurm's drill counts real time: no moment to deliver it at
        bound = min(self.clock.next_wake(), self._until)
        for at, detail in self.double.cluster_events_until(bound):
            moment = max(at, self.clock.horizon)
            self.clock.advance_horizon(moment)
            present = self.clock.now(DRIVER)
            self.clock.set_driver_time(moment)
            try:
                self._put("aws.sagemaker", "SageMaker HyperPod Cluster Event", detail, [self.double.arn], moment, fault=False)
                self._run_mapping("ClusterEventQueue", "NoticeClusterEventFunction", CLUSTER_EVENT_BATCH_SIZE, self.cluster_event_responses)
            finally:
                self.clock.set_driver_time(present)
            for execution in self.aws.answered_waits():
                self.clock.wake(execution)  # its wait was answered: it goes on now

    def _publish_execution_ends(self) -> None:
        """Step Functions sends a status-change event to EventBridge for every execution that ends;
        the stack's rule forwards the failed, timed-out and aborted ones to the reconcile queue,
        whose event source mapping invokes Reconcile Execution. Run whenever every execution is
        parked, so an end is reconciled before anything later happens; at the virtual moment the
        execution ended (the driver's clock is put there while the reconcile runs)."""
        for execution in self.aws.executions():
            status = execution.exec_status.value if execution.exec_status is not None else "RUNNING"
            if status not in UNRECORDED_END_STATUSES or execution.name in self.ends_published:
                continue
            self.ends_published.add(execution.name)
            ended_at = self.clock.now(execution.name)
            started_at = self.clock.started_at(execution.name)
            detail = {
                "executionArn": execution.execution_arn,
                "stateMachineArn": execution.state_machine_arn,
                "name": execution.name,
                "status": status,
                "startDate": int((self.epoch + timedelta(seconds=started_at)).timestamp() * 1000),
                "stopDate": int((self.epoch + timedelta(seconds=ended_at)).timestamp() * 1000),
                "input": execution.execution_input,
                "inputDetails": {"included": True},
                "output": None,
                "outputDetails": None,
                # moto drops StopExecution's error and cause; Step Functions keeps them.
                "error": execution.error or self.aborted.get(execution.name, (None, None))[0],
                "cause": execution.cause or self.aborted.get(execution.name, (None, None))[1],
            }
            if self.scenario.behaviour.execution_end_events_lost:
                self.ends_lost.append(execution.name)  # (best-effort delivery: this one never arrives)
                continue
            present = self.clock.now(DRIVER)
            self.clock.set_driver_time(max(present, ended_at))
            try:
                self._put("aws.states", "Step Functions Execution Status Change", detail, [execution.execution_arn], ended_at, fault=False)
                self._run_reconcile_mapping()
            finally:
                self.clock.set_driver_time(present)

    def schedule_period(self, function: str) -> float:
        """Seconds between two runs of a scheduled function: its rate in template.yaml."""
        (event,) = self.aws.template["Resources"][function]["Properties"]["Events"].values()
        rate = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours)\)", event["Properties"]["Schedule"])
        assert rate is not None, event
        return float(rate[1]) * (60 if rate[2].startswith("minute") else 3600)

    @functools.cached_property
    def sweep_period(self) -> float:
        return self.schedule_period(SWEEP_FUNCTION)

    def _run_scheduled_sweeps(self) -> None:
        """The sweep of ended executions runs on its schedule (every 5 minutes of virtual time from
        the drill's start), on the driver's timeline, between the executions' wake-ups."""
        if not isinstance(self.slurm, SimulatedController):
            return  # a real Slurm's drill counts real time: its schedule has no virtual moments
        bound = min(self.clock.next_wake(), self._until)
        if math.isinf(bound):
            return  # (nothing is left to happen: the last sweep is _sweep_after_lost_ends's)
        while self._swept_to + self.sweep_period <= bound:
            self._sweep_at(self._swept_to + self.sweep_period)

    def _sweep_after_lost_ends(self) -> None:
        """Executions whose status-change event was lost ended unreconciled: the drill goes on to the
        next scheduled sweep after the last of them, which finds them (nothing else would)."""
        if not self.ends_lost or not isinstance(self.slurm, SimulatedController):
            return
        last_end = max(self.clock.now(name) for name in self.ends_lost)
        while self._swept_to < last_end + SWEEP_GRACE.total_seconds():  # (a younger end is left to the next sweep)
            self._sweep_at(self._swept_to + self.sweep_period)

    def _sweep_at(self, moment: float) -> None:
        self._swept_to = moment
        self.clock.advance_horizon(max(moment, self.clock.horizon))
        present = self.clock.now(DRIVER)
        self.clock.set_driver_time(moment)
        try:
            with self.aws.api_calls.counting():
                response = self.aws.client("lambda").invoke(FunctionName=SWEEP_FUNCTION, Payload=b"{}")
            self.sweep_responses.append((moment, json.loads(response["Payload"].read())))
        finally:
            self.clock.set_driver_time(present)

    def _run_reconcile_mapping(self) -> None:
        self._run_mapping("ReconcileQueue", "ReconcileExecutionFunction", RECONCILE_BATCH_SIZE, self.reconcile_responses)

    def _run_event_source_mapping(self) -> None:
        self._run_mapping("IntakeQueue", "IntakeFunction", ESM_BATCH_SIZE, self.intake_responses)

    def _run_mapping(self, queue: str, function: str, batch_size: int, responses: list[Any]) -> None:
        """What Lambda's SQS event source mapping does: invoke ``function`` with batches of up to
        ``batch_size`` messages, delete what it processed, leave the rest on the queue (for SQS
        to redeliver after its visibility timeout: not within this drill; the report shows them)."""
        sqs = self.aws.client("sqs")
        url = self.aws.queue_urls[queue]
        while True:
            messages: list[dict[str, Any]] = []
            while len(messages) < batch_size:
                wanted = min(10, batch_size - len(messages))
                page = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=wanted, AttributeNames=["All"]).get("Messages", [])
                if not page:
                    break
                messages += page
            if not messages:
                return
            event = {"Records": [_sqs_record(m, url) for m in messages]}
            try:
                with self.aws.api_calls.counting():
                    response = self.aws.client("lambda").invoke(FunctionName=function, Payload=json.dumps(event))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ServiceException":
                    raise
                # behaviour.lost_responses: the function ran, the mapping never heard back, so the
                # batch stays on the queue and SQS delivers it again once its visibility timeout ends
                # (here at once: nothing else happens on the queue meanwhile).
                for message in messages:
                    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
                continue
            result = json.loads(response["Payload"].read())
            responses.append(result)
            failed = _failed_items(response, result, messages)
            for message in messages:
                if message["MessageId"] not in failed:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            if failed:
                return
