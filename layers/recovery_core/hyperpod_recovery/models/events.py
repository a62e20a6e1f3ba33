"""Outside events, one model per source. Field names are the sources' own.

Each model's docstring holds a real-shaped example; events/ holds the same samples as files and
tests/contract/ parses every one of them.
"""

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from hyperpod_recovery.models.common import Model
from hyperpod_recovery.models.job_events import JobFailedDetail

HEALTH_EVENT_DETAIL_TYPE = "SageMaker HyperPod Cluster Node Health Event"
EXECUTION_STATUS_DETAIL_TYPE = "Step Functions Execution Status Change"
CLUSTER_EVENT_DETAIL_TYPE = "SageMaker HyperPod Cluster Event"
ALARM_EVENT_DETAIL_TYPE = "CloudWatch Alarm State Change"


class EventBridgeModel(Model):
    """An EventBridge event's envelope, as Powertools' parser models it (its EventBridgeModel, field
    for field): importing that one loads the parser's hundred other event models at every cold start."""

    model_config = ConfigDict(populate_by_name=True)

    version: str
    id: str
    source: str
    account: str
    time: datetime
    region: str
    resources: list[str]
    detail_type: str = Field(alias="detail-type")
    detail: Any
    replay_name: str | None = Field(None, alias="replay-name")

    @field_validator("detail", mode="before")
    @classmethod
    def validate_detail(cls, v: Any, info: ValidationInfo) -> Any:
        # (as Powertools': EventBridge Scheduler sends the detail '{}' as a string)
        return {} if info.data.get("source") == "aws.scheduler" and v == "{}" else v


class HealthSummary(Model):
    # AWS publishes no enum for HealthStatus/RepairAction beyond "Unhealthy"/"None": keep them
    # free strings so a new value is logged and ignored, never a parse failure.
    HealthStatus: str
    HealthStatusReason: str | None = None
    RepairAction: str | None = None
    Recommendation: str | None = None


class NodeHealthDetail(Model):
    ClusterName: str
    ClusterArn: str
    InstanceId: str
    Tags: dict[str, str] = Field(default_factory=dict)
    HealthSummary: HealthSummary


class HyperPodNodeHealthEvent(EventBridgeModel):
    """HyperPod "Cluster Node Health Event" (source aws.sagemaker). Example (AWS docs)::

        {"version": "0", "id": "0bd4a141-0a02-9d8a-f977-3924c3fb259c",
         "detail-type": "SageMaker HyperPod Cluster Node Health Event", "source": "aws.sagemaker",
         "account": "111122223333", "time": "2026-03-14T09:21:07Z", "region": "us-west-2",
         "resources": ["arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6"],
         "detail": {"ClusterName": "llm-train",
                    "ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6",
                    "InstanceId": "i-0391f86fa0fe0d465", "Tags": {},
                    "HealthSummary": {"HealthStatus": "Unhealthy",
                        "HealthStatusReason": "HyperPod Health Monitoring Agent (HMA) has detected
                            fault type NvidiaErrorTerminate on this node and is unhealthy.",
                        "RepairAction": "None", "Recommendation": "Please Replace the Faulty Node."}}}

    The detail carries no instance group: Assess Nodes looks it up with ListClusterNodes.
    """

    source: Literal["aws.sagemaker"]
    detail_type: Literal["SageMaker HyperPod Cluster Node Health Event"] = Field(alias="detail-type")
    detail: NodeHealthDetail


class AlarmMetric(Model):
    namespace: str | None = None
    name: str | None = None
    dimensions: dict[str, str] = Field(default_factory=dict)


class AlarmMetricStat(Model):
    metric: AlarmMetric
    period: int | None = None
    stat: str | None = None


class AlarmMetricQuery(Model):
    id: str
    metricStat: AlarmMetricStat | None = None
    expression: str | None = None
    returnData: bool | None = None


class AlarmConfiguration(Model):
    description: str | None = None
    metrics: list[AlarmMetricQuery] = Field(default_factory=list)


class AlarmState(Model):
    value: str
    reason: str = ""
    timestamp: datetime


class AlarmDetail(Model):
    model_config = ConfigDict(extra="allow")  # alarmTags etc. appear when tag propagation is on

    alarmName: str
    configuration: AlarmConfiguration = Field(default_factory=AlarmConfiguration)
    state: AlarmState
    previousState: AlarmState | None = None


class CloudWatchAlarmEvent(EventBridgeModel):
    """CloudWatch "Alarm State Change" (source aws.cloudwatch). Example::

        {"version": "0", "id": "c4c1c1c9-6542-e61b-6ef0-8c4d36933a92",
         "detail-type": "CloudWatch Alarm State Change", "source": "aws.cloudwatch",
         "account": "111122223333", "time": "2026-03-14T09:22:40Z", "region": "us-west-2",
         "resources": ["arn:aws:cloudwatch:us-west-2:111122223333:alarm:hyperpod-recovery:llm-train:xid-i-0391f86fa0fe0d465"],
         "detail": {"alarmName": "hyperpod-recovery:llm-train:xid-i-0391f86fa0fe0d465",
                    "configuration": {"metrics": [{"id": "m1", "metricStat": {"metric": {
                        "namespace": "HyperPod/Slurm", "name": "gpu_xid_errors",
                        "dimensions": {"ClusterName": "llm-train", "InstanceId": "i-0391f86fa0fe0d465"}},
                        "period": 60, "stat": "Maximum"}, "returnData": true}]},
                    "state": {"value": "ALARM", "reason": "Threshold Crossed: ...",
                              "timestamp": "2026-03-14T09:22:40.125+0000"}}}

    The stack's rule only forwards alarms named ``hyperpod-recovery:<ClusterName>:...``: the
    name prefix is the operator's explicit opt-in (see docs/decisions.md).
    """

    source: Literal["aws.cloudwatch"]
    detail_type: Literal["CloudWatch Alarm State Change"] = Field(alias="detail-type")
    detail: AlarmDetail


class JobFailedEvent(EventBridgeModel):
    """The controller agent's "job failed" event (source hyperpod-recovery.agent), put by its
    EpilogSlurmctld hook; the detail is ``models/job_events.py``. Sample: events/agent/job-failed.json."""

    source: Literal["hyperpod-recovery.agent"]
    detail_type: Literal["HyperPod Recovery Slurm Job Failed"] = Field(alias="detail-type")
    detail: JobFailedDetail


class ExecutionStatusDetail(Model):
    """The detail of Step Functions' own status-change event. Dates are epoch milliseconds; ``input``
    is the execution's input as a string (null when it was too large to include)."""

    model_config = ConfigDict(extra="ignore")  # Step Functions adds fields (redriveCount, ...) over time

    executionArn: str = Field(max_length=2048)
    stateMachineArn: str = Field(max_length=2048)
    name: str = Field(min_length=1, max_length=80)
    status: Literal["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "PENDING_REDRIVE"]
    startDate: int | None = None
    stopDate: int | None = None
    input: str | None = None
    error: str | None = Field(default=None, max_length=256)
    cause: str | None = None


class ExecutionStatusChangeEvent(EventBridgeModel):
    """ "Step Functions Execution Status Change" (source aws.states), sent for every status change of
    a Standard workflow execution. The stack's rule forwards FAILED, TIMED_OUT and ABORTED ends of its
    own two state machines to Reconcile Execution. Example (AWS docs)::

        {"version": "0", "id": "315c1398-40ff-a850-213b-158f73e60175",
         "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
         "account": "111122223333", "time": "2026-03-14T09:42:21Z", "region": "us-west-2",
         "resources": ["arn:aws:states:us-west-2:111122223333:execution:hpr-node-recovery:hpr-i-0391f86fa0fe0d465-20260314T0920"],
         "detail": {"executionArn": "arn:aws:states:...:execution:hpr-node-recovery:hpr-i-0391f86fa0fe0d465-20260314T0920",
                    "stateMachineArn": "arn:aws:states:us-west-2:111122223333:stateMachine:hpr-node-recovery",
                    "name": "hpr-i-0391f86fa0fe0d465-20260314T0920", "status": "ABORTED",
                    "startDate": 1773480000000, "stopDate": 1773481341881, "input": "{...}",
                    "inputDetails": {"included": true}, "output": null, "outputDetails": null,
                    "error": null, "cause": null}}
    """

    source: Literal["aws.states"]
    detail_type: Literal["Step Functions Execution Status Change"] = Field(alias="detail-type")
    detail: ExecutionStatusDetail


class ClusterEventInstance(Model):
    model_config = ConfigDict(extra="ignore")  # CustomerEni, CapacityReservation, LcsExecutionState, ...

    NodeLogicalId: str | None = Field(default=None, max_length=256)
    FailureMessage: str | None = None


class ClusterEventMetadata(Model):
    model_config = ConfigDict(extra="ignore")  # Cluster, InstanceGroup, InstanceGroupScaling, SlurmHealth, ...

    Instance: ClusterEventInstance | None = None


class ClusterEventInner(Model):
    model_config = ConfigDict(extra="ignore")

    EventMetadata: ClusterEventMetadata | None = None


class ClusterEventDetails(Model):
    model_config = ConfigDict(extra="ignore")

    EventId: str = Field(max_length=128)
    ClusterArn: str | None = Field(default=None, max_length=2048)
    ClusterName: str | None = Field(default=None, max_length=128)
    InstanceGroupName: str | None = Field(default=None, max_length=128)
    InstanceId: str | None = Field(default=None, max_length=64)
    ResourceType: str | None = Field(default=None, max_length=32)  # Cluster | InstanceGroup | Instance
    EventTime: int | None = None  # epoch milliseconds
    EventLevel: str | None = Field(default=None, max_length=16)  # Info | Warn | Error (absent in older samples)
    Description: str = Field(default="", max_length=4096)
    EventDetails: ClusterEventInner | None = None

    @property
    def node_logical_id(self) -> str | None:
        metadata = self.EventDetails.EventMetadata if self.EventDetails else None
        return metadata.Instance.NodeLogicalId if metadata and metadata.Instance else None


class ClusterEventDetail(Model):
    model_config = ConfigDict(extra="ignore")

    EventDetails: ClusterEventDetails


class HyperPodClusterEvent(EventBridgeModel):
    """ "SageMaker HyperPod Cluster Event" (source aws.sagemaker): operational events of clusters
    with NodeProvisioningMode Continuous (provisioning, scaling, replacement, patching). The stack's
    rule forwards the guarded cluster's Instance events; one that announces a watched node's
    replacement ended wakes the recovery waiting for it (Notice Cluster Event), which then checks
    ListClusterNodes itself. Example (AWS docs, cluster events reference; Description per its
    "Instance replacement" templates)::

        {"version": "0", "id": "5d2b7a10-8e4c-4f5e-9d77-0c1e9a3b6f20",
         "detail-type": "SageMaker HyperPod Cluster Event", "source": "aws.sagemaker",
         "account": "111122223333", "time": "2026-03-14T09:48:55Z", "region": "us-west-2",
         "resources": ["arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6"],
         "detail": {"EventDetails": {"EventId": "2f6c1d9e-7a4b-4c3d-8e21-9b0a5c7d3e14",
            "ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6",
            "ClusterName": "llm-train", "InstanceGroupName": "p5-workers", "InstanceId": "i-0a7e3c9d1b5f24680",
            "ResourceType": "Instance", "EventTime": 1773481735000, "EventLevel": "Info",
            "Description": "Instance i-0a7e3c9d1b5f24680 creation completed successfully as part of instance replacement ...",
            "EventDetails": {"EventMetadata": {"Instance": {"NodeLogicalId": "df268d19-f035-4f28-9b80-b956b92ae21e"}}}}}}
    """

    source: Literal["aws.sagemaker"]
    detail_type: Literal["SageMaker HyperPod Cluster Event"] = Field(alias="detail-type")
    detail: ClusterEventDetail
