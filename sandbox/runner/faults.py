"""The scenario's faults delivered as they reach the pipeline in AWS: HyperPod events and alarms on
EventBridge, a job's failure in Slurm or Kubernetes and the agent's event, a hang, HyperPod's own
hang verdict, an operator's drill or StopExecution."""

from __future__ import annotations

import base64
import gzip
import json
import math
from datetime import timedelta
from typing import Any

from hyperpod_recovery.models.job_events import JOB_EVENT_SOURCE, JOB_FAILED_DETAIL_TYPE, JobFailedDetail
from sandbox.at_risk import at_risk_tick, deliver_at_risk_signal
from sandbox.aws import REGION
from sandbox.checkpoints import write_checkpoint_step
from sandbox.clock import DRIVER
from sandbox.hyperpod import ACCOUNT
from sandbox.planted import SECRET_STACK
from sandbox.runner.functions import (
    HANG_IMPORTER_FUNCTION,
    Delivery,
    hyperpod_hang_log_group,
)
from sandbox.scenario import FaultSpec, ScenarioError, expand_range
from sandbox.slurm import DATA_LOADER_STACK, SimulatedController


class Faults:
    """Mixed into DrillRunner: each delivery's faults, as they reach the pipeline."""

    def _deliver(self, delivery: Delivery) -> None:
        if delivery.agent_back:
            assert isinstance(self.slurm, SimulatedController)
            for execution in self.slurm.catch_up():
                self.clock.wake(execution)  # its task had been waiting for this answer: it goes on now
        kubernetes_failures = [f for f in delivery.faults if f.kind == "job_failed" and self.eks is not None]
        for fault in kubernetes_failures:
            self._fail_kubernetes_job(fault)  # (every job that fails at this moment, before the next tick sees them)
        if delivery.detect:
            self._detect_hung_jobs(delivery.at)
        for fault in (f for f in delivery.faults if f.kind == "hyperpod_hang"):
            self._hyperpod_reports_hang(fault)  # (before the poll that reads it, on EKS)
        if delivery.poll or kubernetes_failures:
            # (EKS sends no event: the scheduled poller finds the failures; a failure's repeats are
            # later ticks, a period apart: deliveries of their own)
            self._poll_failed_jobs()
        for fault in delivery.faults:
            if fault.kind == "abort":
                self._abort(fault)
            elif fault.kind == "drill":
                self._start_drill(fault)
            elif fault.kind == "hang":
                self._hang(fault)
            elif fault.kind == "hyperpod_hang":
                continue  # (reported above)
            elif fault.kind == "at_risk":
                self.send_at_risk(fault)
            elif fault.of_progress:
                continue  # (a pause or a slowdown: only what the job reports changes, sandbox/progress.py)
            elif fault.kind == "job_failed" and self.eks is not None:
                continue
            elif fault.kind == "job_failed":
                event = self._fail_job(fault)
                for _ in range(fault.repeat + 1):
                    self._put(JOB_EVENT_SOURCE, JOB_FAILED_DETAIL_TYPE, event, [], fault.at)
            else:
                for _ in range(fault.repeat + 1):
                    for ref in fault.node_refs:
                        self._put_event(fault, ref)
        if any(f.kind not in ("drill", "abort", "at_risk") for f in delivery.faults):
            self._run_event_source_mapping()

    def send_at_risk(self, fault: FaultSpec) -> None:
        """An at-risk signal for the fault's node, by its real path (sandbox/at_risk.py): SNS to At
        Risk, or on EKS the node's event or condition, which the job poller's next tick reads."""
        assert fault.node is not None and fault.signal is not None
        node = self.double.current(fault.node, t=fault.at)
        if fault.via in ("eks_node_event", "eks_node_condition"):
            if self.eks is None:
                raise ScenarioError(f"at_risk at {fault.at:g}: via {fault.via} needs an EKS cluster")
            self._eks_at_risk(fault, node.node_id)
            return
        hostname = None if self.eks is not None else self.double.slurm_name(fault.node)
        when = self.epoch + timedelta(seconds=fault.at - fault.event_age_seconds)
        for answer in deliver_at_risk_signal(
            self.aws, cluster=self.scenario.cluster.name, instance_id=node.node_id, hostname=hostname,
            signal=fault.signal, via=fault.via, at=when, repeat=fault.repeat,
        ):  # fmt: skip
            self.at_risk_answers.append((fault.at, answer))

    def _eks_at_risk(self, fault: FaultSpec, instance_id: str) -> None:
        raise ScenarioError(f"at_risk at {fault.at:g}: via {fault.via} is not delivered yet")

    def _at_risk_tick(self) -> None:
        moment = self.clock.now(DRIVER) if not math.isfinite(self.clock.horizon) else max(self.clock.now(DRIVER), self.clock.horizon)
        present = self.clock.now(DRIVER)
        self.clock.set_driver_time(moment)
        try:
            self.at_risk_answers.append((moment, at_risk_tick(self.aws, self.epoch + timedelta(seconds=moment))))
        finally:
            self.clock.set_driver_time(present)

    def _abort(self, fault: FaultSpec) -> None:
        """An operator's StopExecution of the drill's n-th execution. Step Functions ends it at
        once: its thread, parked in a wait, is let go without the jump and the interpreter stops."""
        assert fault.execution is not None
        started = self.aws.executions()
        if fault.execution > len(started):
            raise ScenarioError(f"abort at {fault.at:g}: execution {fault.execution} was never started ({len(started)} were)")
        execution = started[fault.execution - 1]
        if execution.exec_status is not None and execution.exec_status.value != "RUNNING":
            return  # it had already ended: StopExecution changes nothing (the report shows its own end)
        with self.aws.api_calls.counting(False):  # the operator's call, not the pipeline's
            self.aws.client("stepfunctions").stop_execution(
                executionArn=execution.execution_arn, error="Drill.Abort", cause=f"stopped by the scenario's abort fault at {fault.at:g} s"
            )
        # (the sandbox's StopExecution keeps the error and cause and lets the execution's thread go)
        self.aborted[execution.name] = ("Drill.Abort", f"stopped by the scenario's abort fault at {fault.at:g} s")

    def _put_event(self, fault: FaultSpec, ref: str) -> None:
        node = self.double.current(ref, t=fault.at)
        if self.eks is not None and fault.kind == "node_health" and not fault.foreign_cluster:
            self.eks.report_unhealthy(node.node_id, fault.at)  # HyperPod's health agent labels its node as it reports it
        when = self.epoch + timedelta(seconds=fault.at - fault.event_age_seconds)
        cluster, arn = self.scenario.cluster.name, self.double.arn
        if fault.foreign_cluster:
            cluster, arn = "other-cluster", arn[:-12] + "zzzzzzzzzzzz"
        if fault.kind == "node_health":
            detail: dict[str, Any] = {
                "ClusterName": cluster,
                "ClusterArn": arn,
                "InstanceId": node.node_id,
                "Tags": {},
                "HealthSummary": {
                    "HealthStatus": "Unhealthy",
                    "HealthStatusReason": fault.reason
                    or "HyperPod Health Monitoring Agent (HMA) has detected fault type NvidiaErrorTerminate on this node and is unhealthy.",
                    "RepairAction": "None",
                    # HMA recommends what the fault needs: a reboot for NvidiaErrorReboot-like faults.
                    "Recommendation": "Please Reboot the Faulty Node."
                    if "Reboot" in (fault.reason or "")
                    else "Please Replace the Faulty Node.",
                },
            }
            source, detail_type, resources = "aws.sagemaker", "SageMaker HyperPod Cluster Node Health Event", [arn]
        else:
            alarm = f"hyperpod-recovery:{cluster}:gpu-xid-{node.node_id}"
            detail = {
                "alarmName": alarm,
                "configuration": {
                    "metrics": [
                        {
                            "id": "m1",
                            "metricStat": {
                                "metric": {
                                    "namespace": "HyperPod/Slurm",
                                    "name": "gpu_xid_errors",
                                    "dimensions": {"ClusterName": cluster, "InstanceId": node.node_id},
                                },
                                "period": 60,
                                "stat": "Maximum",
                            },
                            "returnData": True,
                        }
                    ]
                },
                "state": {
                    "value": "ALARM",
                    "reason": fault.reason or "Threshold Crossed: 1 datapoint [3.0] was greater than the threshold (0.0).",
                    "timestamp": when.isoformat(),
                },
                "previousState": {"value": "OK", "reason": "", "timestamp": (when - timedelta(hours=1)).isoformat()},
            }
            source, detail_type, resources = (
                "aws.cloudwatch",
                "CloudWatch Alarm State Change",
                [f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:{alarm}"],
            )
        self._put(source, detail_type, detail, resources, fault.at - fault.event_age_seconds)

    def _put(self, source: str, detail_type: str, detail: dict[str, Any], resources: list[str], at: float, *, fault: bool = True) -> None:
        when = self.epoch + timedelta(seconds=at)
        self.aws.client("events").put_events(
            Entries=[{"Source": source, "DetailType": detail_type, "Detail": json.dumps(detail), "Resources": resources, "Time": when}]
        )
        self.events_put += fault

    def _fail_job(self, fault: FaultSpec) -> dict[str, Any]:
        """End the job's current incarnation in Slurm, and build the event the agent's epilog sends."""
        assert fault.job is not None and isinstance(self.slurm, SimulatedController)
        slurm = self.slurm.slurm
        job = slurm.current_incarnation(fault.job)
        spec = next(j for j in self.scenario.jobs if j.id == fault.job)
        when = self.epoch + timedelta(seconds=fault.at - fault.event_age_seconds)
        if fault.checkpoint_step is not None:
            write_checkpoint_step(self.aws.client("s3"), spec, fault.checkpoint_step, when - timedelta(minutes=1))
        down = [self.double.slurm_name(ref) for ref in fault.node_refs]
        nodes = list(job.nodes)
        slurm.fail_job(job.job_id, fault.job_state, down, fault.requeued_by_slurm)
        exit_code = fault.exit_code if fault.exit_code is not None else (1 if fault.job_state == "FAILED" else 0)
        cluster = "other-cluster" if fault.foreign_cluster else self.scenario.cluster.name
        detail = JobFailedDetail(
            cluster_name=cluster,
            job_id=job.job_id,
            name=job.name,
            user="trainer",
            partition="gpu",
            nodes=nodes,
            state=fault.job_state,
            reason=fault.reason or {"FAILED": "NonZeroExitCode", "NODE_FAIL": "NodeDown", "TIMEOUT": "TimeLimit"}[fault.job_state],
            exit_code=exit_code,
            restart_count=1 if fault.requeued_by_slurm else 0,
            ended_at=when,
            checkpoint_uri=job.checkpoint_uri,
            auto_resume=job.auto_resume,
            resubmission_of=job.resubmission_of,
            event_key=f"{cluster}:{job.job_id}:{int(when.timestamp())}",
        )
        return detail.model_dump(mode="json", exclude_none=True)

    def _fail_kubernetes_job(self, fault: FaultSpec) -> None:
        """EKS: the job's newest incarnation fails (its operator's Failed condition); the nodes the
        fault names went bad first (HyperPod's health agent labels them)."""
        assert fault.job is not None and self.eks is not None
        spec = next(j for j in self.scenario.jobs if j.id == fault.job)
        if fault.checkpoint_step is not None:
            when = self.epoch + timedelta(seconds=fault.at - fault.event_age_seconds)
            write_checkpoint_step(self.aws.client("s3"), spec, fault.checkpoint_step, when - timedelta(minutes=1))
        for ref in fault.node_refs:
            self.eks.report_unhealthy(self.double.current(ref, t=fault.at).node_id, fault.at)
        with self.clock.on(DRIVER):
            self.eks.sync()
            self.eks.job_fails(spec, reason=fault.reason, exit_code=fault.exit_code)

    def _hang(self, fault: FaultSpec) -> None:
        """The job hangs: Slurm still runs it; its processes wait in a collective, but on the node the
        fault names (the one that stopped first), where they are somewhere else."""
        assert fault.job is not None
        if self.eks is not None:
            self.eks.job_hangs(next(j for j in self.scenario.jobs if j.id == fault.job), fault)
            return
        stack = {"no_answer": None, "secret_in_log": SECRET_STACK}.get(fault.stacks, DATA_LOADER_STACK)
        odd = {self.double.slurm_name(fault.node): stack} if fault.node else {}
        self.slurm.slurm.hang_job(fault.job, odd_nodes=odd)

    def _hyperpod_reports_hang(self, fault: FaultSpec) -> None:
        """HyperPod's own detector finds the job hung. EKS: its training operator's fault on the
        HyperPodPyTorchJob's status (the operator restarts the job itself). Slurm: its hang agent's
        event, handed by the stack's subscription filter to Import HyperPod Hangs as CloudWatch Logs
        would (base64 of gzipped JSON). ASSUMPTION: both shapes (domain/hangs/imported.py)."""
        assert fault.job is not None
        job = next(j for j in self.scenario.jobs if j.id == fault.job)
        if self.eks is not None:
            self.eks.sync()  # (the API server's clock at the fault's moment: the condition is stamped then)
            prefix = "LogHang" if fault.operator_verdict == "hanging" else "LogSlow"
            said = "hanging (not receiving required logs)" if fault.operator_verdict == "hanging" else "slow"
            with self.eks.lock:
                self.eks.kube.operator_reports_fault(
                    job.kubernetes.kind,
                    job.kubernetes.namespace,
                    job.name,
                    reason=f"{prefix}_{fault.hyperpod_rule}",
                    message=f"The job is {said} on the following log monitoring rules: {fault.hyperpod_rule}",
                )
            return
        ref = fault.node or f"{expand_range(job.nodes)[0][0]}:{expand_range(job.nodes)[0][1]}"
        node = self.double.current(ref, t=fault.at)
        moment = self.epoch + timedelta(seconds=fault.at)
        message = json.dumps(
            {
                "event": "HANG_DETECTED",
                "job_id": job.id,
                "rule": fault.hyperpod_rule,
                "action": "notify",
                "evidence": f"no output from job {job.id} on {self.double.slurm_name(ref)} for 600 s",
            }
        )
        batch = {
            "messageType": "DATA_MESSAGE",
            "owner": ACCOUNT,
            "logGroup": hyperpod_hang_log_group(self.scenario.cluster.name),
            "logStream": f"SageMakerHangJobDetectionEvents/{node.group}/{node.node_id}",
            "subscriptionFilters": ["hyperpod-recovery-hangs"],
            "logEvents": [{"id": f"{int(moment.timestamp() * 1000)}", "timestamp": int(moment.timestamp() * 1000), "message": message}],
        }
        data = base64.b64encode(gzip.compress(json.dumps(batch).encode())).decode()
        with self.aws.api_calls.counting():
            response = self.aws.client("lambda").invoke(
                FunctionName=HANG_IMPORTER_FUNCTION, Payload=json.dumps({"awslogs": {"data": data}}).encode()
            )
        self.hang_imports.append((fault.at, json.loads(response["Payload"].read())))

    def _start_drill(self, fault: FaultSpec) -> None:
        self.drill_count += 1
        if fault.job:
            self._start_job_drill(fault)
            return
        request: dict[str, Any] = {
            "cluster": self.scenario.cluster.name,
            "node_ids": [self.double.current(ref, t=fault.at).node_id for ref in fault.node_refs],
            "reason": fault.reason or f"recovery drill {self.scenario.name}",
        }
        if fault.dry_run is not None:
            request["dry_run"] = fault.dry_run
        if fault.foreign_cluster:
            request["cluster"] = "other-cluster"
        request.update(fault.request_overrides or {})
        sfn = self.aws.client("stepfunctions")
        sfn.start_execution(
            stateMachineArn=self.aws.state_machines["NodeRecoveryStateMachine"],
            name=f"drill-{self.scenario.name}-{self.drill_count}",
            input=json.dumps(request if fault.raw_input is None else fault.raw_input),
        )

    def _start_job_drill(self, fault: FaultSpec) -> None:
        """An operator asking JobRecovery to recover one job (its current incarnation)."""
        assert fault.job is not None and isinstance(self.slurm, SimulatedController)
        request: dict[str, Any] = {
            "cluster": "other-cluster" if fault.foreign_cluster else self.scenario.cluster.name,
            "job_id": self.slurm.slurm.current_incarnation(fault.job).job_id,
            "reason": fault.reason or f"job recovery drill {self.scenario.name}",
        }
        if fault.dry_run is not None:
            request["dry_run"] = fault.dry_run
        request.update(fault.request_overrides or {})
        self.aws.client("stepfunctions").start_execution(
            stateMachineArn=self.aws.state_machines["JobRecoveryStateMachine"],
            name=f"drill-{self.scenario.name}-{self.drill_count}",
            input=json.dumps(request),
        )
