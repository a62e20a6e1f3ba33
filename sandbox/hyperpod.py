"""A HyperPod double for the sandbox: the cluster-node calls, with the real shapes and errors.

moto implements DescribeCluster/ListClusterNodes with fake node ids ("worker-0"), no
PrivateDnsHostname and a fixed Running status, and lacks BatchReplace/BatchReboot/BatchDelete
entirely (../shared/reference/local-testing-toolchain.md §1a). This double serves all of them
from one model of the cluster so the shapes are consistent:

* node ids are EC2 instance ids; hostnames are ``ip-10-x-y-z.<region>.compute.internal``; every
  node has a NodeLogicalId, listed when ListClusterNodes is asked ``IncludeNodeLogicalIds``;
* a replacement terminates the instance (ShuttingDown, then gone) and brings a *new instance id*
  up under the *same hostname* (Pending, then Running after ``replacement_seconds``), keeping the
  node's logical id (ASSUMED, undocumented); ``behaviour.replacement_hostname: new`` gives it a new
  hostname instead, ``behaviour.replacement_logical_id: new`` a new logical id;
* a reboot keeps the instance; HyperPod shows it Pending while it restarts (ASSUMED), or, with
  ``behaviour.reboot_status: Running``, keeps reporting Running all through it (ASSUMED possible);
* what slurmctld knows of each host (``slurm_view``): the boot time its slurmd last registered
  with, and whether it responds. A reboot or a termination stops slurmd at once; a rebooted host
  boots 30 s after the request and its slurmd registers when the reboot is done (ASSUMED
  durations); a replacement's registers when it is Running;
* Batch* calls take 1-25 ids, report per-node ``Failed`` entries (InstanceIdNotFound,
  InstanceIdInUse, ...), and omit ``Successful`` when nothing succeeded (the model's min 1);
* the Slurm controller cannot be replaced (ValidationException, as the API documents);
* every node's history is kept as timed transitions and each call is answered *as of the
  caller's virtual time*, so concurrent executions on different timelines see a consistent past.

Assumptions beyond the documentation are marked ASSUMED.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from moto.core.exceptions import ServiceException

from sandbox.hyperpod_nodes import RebootRecord, ReplacementRecord, SimNode
from sandbox.scenario import expand_range, parse_ref
from sandbox.scenario_cluster import BehaviourSpec, ClusterSpec

ACCOUNT = "123456789012"
MAX_BATCH = 25


class HyperPodApiError(ServiceException):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


REBOOT_SECONDS = 120.0  # ASSUMED: request to slurmd registered again (HyperPod Running again in Pending mode)
BOOT_AFTER_SECONDS = 30.0  # ASSUMED: the host's new boot, this long after the reboot request
REPLACEMENT_BOOT_SECONDS = 60.0  # ASSUMED: a replacement boots this long before its slurmd registers


@dataclass
class _InjectedError:
    operation: str
    code: str
    node: str | None
    remaining: int
    spared: int = 0  # matching calls still to let through before failing (ApiErrorSpec.after)

    def fires(self) -> bool:
        """This matching call fails (and is counted): the spared ones first pass."""
        if self.spared > 0:
            self.spared -= 1
            return False
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True


@dataclass
class HyperPodDouble:
    spec: ClusterSpec
    behaviour: BehaviourSpec
    region: str
    epoch: datetime
    now: Callable[[], float]  # the caller's virtual time, in seconds since the epoch
    # "workers:0" -> "ip-10-1-0-1": the real Slurm's node names, for drills against a real slurmctld.
    hostnames: dict[str, str] = field(default_factory=dict)
    # Told the short hostname of a replacement that came up under a new one (HyperPod would add it to Slurm).
    on_new_host: Callable[[str], None] | None = None
    nodes: list[SimNode] = field(default_factory=list)
    replacements: list[ReplacementRecord] = field(default_factory=list)
    reboots: list[RebootRecord] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _announced: set[tuple[str, float]] = field(default_factory=set)  # replacements whose Cluster Event was handed out
    # A fleet drill's per-repair figures (sandbox/fleet): how long this replacement of the node takes
    # (None: behaviour.replacement_seconds), whether this new instance is sick, whether this reboot fails.
    replacement_seconds_for: Callable[[SimNode, float], float | None] | None = None
    sick_replacement: Callable[[SimNode], bool] | None = None
    reboot_fails_for: Callable[[SimNode, float], bool] | None = None
    # Every instance of a node (group, index) and every holder of a short hostname, in creation
    # order: a lookup per call instead of a scan of the whole fleet's history (2,048 nodes and more).
    _by_ref: dict[tuple[str, int], list[SimNode]] = field(default_factory=dict)
    _by_host: dict[str, list[SimNode]] = field(default_factory=dict)
    _by_id: dict[str, SimNode] = field(default_factory=dict)

    def __post_init__(self) -> None:
        digest = hashlib.sha256(self.spec.name.encode()).hexdigest()
        self.cluster_id = "".join(c for c in digest if c.isalnum())[:12]
        self.arn = f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:cluster/{self.cluster_id}"
        self._groups = {g.name: (i + 1, g) for i, g in enumerate(self.spec.instance_groups)}
        for group_no, group in self._groups.values():
            for index in range(group.count):
                ip = f"10.{group_no}.{index // 250}.{index % 250 + 4}"
                short = self.hostnames.get(f"{group.name}:{index}", f"ip-{ip.replace('.', '-')}")
                self._add(
                    SimNode(
                        node_id=self._instance_id(group.name, index, 0),
                        group=group.name,
                        index=index,
                        ip=ip,
                        hostname=f"{short}.{self.region}.compute.internal",
                        instance_type=group.instance_type,
                        created_at=-86_400.0,
                        transitions=[(-86_400.0, "Running")],
                        logical_id=self._logical_id(group.name, index, 0),
                        slurmd=[(-86_400.0, True)],
                        boots=[(-86_400.0, -86_400.0)],
                    )
                )
        self._never_rejoin = {ref for r in self.behaviour.never_rejoin for ref in expand_range(r)}
        self._reboot_fails = {ref for r in self.behaviour.reboot_fails for ref in expand_range(r)}
        self._unhealthy = {f"{g}:{i}" for r in self.behaviour.unhealthy_replacements for g, i in expand_range(r)}
        self._errors = [_InjectedError(e.operation, e.code, e.node, e.times, e.after) for e in self.behaviour.api_errors]

    def _add(self, node: SimNode) -> None:
        self.nodes.append(node)
        self._by_ref.setdefault((node.group, node.index), []).append(node)
        self._by_host.setdefault(node.hostname.split(".", 1)[0], []).append(node)
        self._by_id.setdefault(node.node_id, node)

    def _instances(self, node_id: str) -> list[SimNode]:
        """The instance of that id (instance ids are never reused), or none."""
        node = self._by_id.get(node_id)
        return [] if node is None else [node]

    # --- helpers the runner uses ---------------------------------------------------------
    def _instance_id(self, group: str, index: int, generation: int) -> str:
        return "i-" + hashlib.sha256(f"{self.spec.name}/{group}/{index}/{generation}".encode()).hexdigest()[:17]

    def _logical_id(self, group: str, index: int, generation: int) -> str:
        """UUID-shaped, as the AWS events reference shows one."""
        digest = hashlib.sha256(f"logical/{self.spec.name}/{group}/{index}/{generation}".encode()).hexdigest()
        return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"

    def current(self, ref: str, t: float | None = None) -> SimNode:
        """The live instance behind ``group:index`` at time t (default: now)."""
        group, index = parse_ref(ref)
        moment = self.now() if t is None else t
        with self._lock:
            instances = self._by_ref.get((group, index), [])
            live = [n for n in instances if n.exists_at(moment)]
            return live[-1] if live else max(instances, key=lambda n: n.generation)

    def slurm_name(self, ref: str) -> str:
        return self.current(ref).hostname.split(".", 1)[0]

    def node_type(self, group: str) -> str:
        return self._groups[group][1].type

    def slurm_view(self, name: str) -> tuple[datetime | None, bool]:
        """What slurmctld knows of the host ``name`` (its short hostname, the Slurm node name) at the
        caller's time: the boot time its slurmd last registered with, and whether slurmd responds.
        slurmctld keeps a node's last boot time across instances: a replacement's replaces it only
        when the new slurmd registers."""
        t = self.now()
        with self._lock:
            holders = [n for n in self._by_host.get(name, []) if n.created_at <= t]
        if not holders:
            return None, False
        registered = [(at, boot) for n in holders for at, boot in n.boots if at <= t]
        boot = self.epoch + timedelta(seconds=max(registered)[1]) if registered else None
        newest = max(holders, key=lambda n: n.created_at)
        states = [up for at, up in sorted(newest.slurmd) if at <= t]
        return boot, bool(states) and states[-1]

    def unhealthy_host(self, name: str) -> bool:
        """The host ``name`` is a replacement of a node the scenario says comes back sick."""
        t = self.now()
        with self._lock:
            holders = [n for n in self._by_host.get(name, []) if n.created_at <= t]
        if not holders:
            return False
        newest = max(holders, key=lambda n: n.created_at)
        count = self.behaviour.unhealthy_replacement_count
        sick = newest.generation > 0 and f"{newest.group}:{newest.index}" in self._unhealthy
        if self.sick_replacement is not None and newest.generation > 0 and self.sick_replacement(newest):
            return True
        return sick and (count is None or newest.generation <= count)

    def slurm_up_since(self, name: str) -> datetime | None:
        """Since when slurmd on the host ``name`` has answered slurmctld without a break, at the
        caller's time (None: it does not answer now, or no host has that name)."""
        t = self.now()
        with self._lock:
            holders = [n for n in self._by_host.get(name, []) if n.created_at <= t]
        if not holders:
            return None
        states = [(at, up) for at, up in sorted(max(holders, key=lambda n: n.created_at).slurmd) if at <= t]
        if not states or not states[-1][1]:
            return None
        since = states[-1][0]
        for at, up in reversed(states):
            if not up:
                break
            since = at
        return self.epoch + timedelta(seconds=since)

    def cluster_events_until(self, moment: float) -> list[tuple[float, dict[str, Any]]]:
        """The "SageMaker HyperPod Cluster Event"s (their ``detail``) a Continuous-mode cluster
        publishes up to ``moment`` and not handed out yet, oldest first: each replacement's end, at
        the moment its new instance is Running. The Description follows AWS's documented template
        ("Instance replacement"); the events are the double's model of the reference's constructed
        example. ASSUMPTION: one event per replacement, at Running, with the node's NodeLogicalId;
        a reboot's end is announced by none (AWS documents only "Reboot ... in progress")."""
        if self.spec.node_provisioning_mode != "Continuous":
            return []
        due: list[tuple[float, dict[str, Any]]] = []
        with self._lock:
            for record in self.replacements:
                key = (record.new_node_id, record.running_at)
                if record.running_at is None or record.running_at > moment or key in self._announced:
                    continue
                self._announced.add(key)
                if self.behaviour.cluster_events_lost:
                    continue
                new = self._by_id[record.new_node_id]
                due.append((record.running_at, self._replacement_event(new, record.running_at)))
        return sorted(due, key=lambda e: e[0])

    def _replacement_event(self, node: SimNode, at: float) -> dict[str, Any]:
        return {
            "EventDetails": {
                "EventId": str(uuid.UUID(hashlib.sha256(f"{node.node_id}@{at}".encode()).hexdigest()[:32])),
                "ClusterArn": self.arn,
                "ClusterName": self.spec.name,
                "InstanceGroupName": node.group,
                "InstanceId": node.node_id,
                "ResourceType": "Instance",
                "EventTime": int((self.epoch + timedelta(seconds=at)).timestamp() * 1000),
                "EventLevel": "Info",
                "Description": f"Instance {node.node_id} creation completed successfully as part of instance replacement "
                f"in Cluster {self.spec.name} and IG {node.group}",
                "EventDetails": {"EventMetadata": {"Instance": {"NodeLogicalId": node.logical_id}}},
            }
        }

    def start_own_repair(self, node: SimNode, t: float) -> ReplacementRecord:
        """HyperPod's own NodeRecovery acting on a node (what InstanceIdInUse tells a caller)."""
        return self._replace(node, t, initiated_by="hyperpod")

    # --- API ----------------------------------------------------------------------------
    def describe_cluster(self, params: dict[str, Any]) -> dict[str, Any]:
        self._check_cluster(params)
        self._maybe_fail("DescribeCluster")
        t = self.now()
        groups = []
        for _, group in self._groups.values():
            live = [n for n in self.nodes if n.group == group.name and n.exists_at(t)]
            entry: dict[str, Any] = {
                "InstanceGroupName": group.name,
                "InstanceType": group.instance_type,
                "CurrentCount": sum(1 for n in live if n.status_at(t) == "Running"),
                "TargetCount": group.count,
                "LifeCycleConfig": {"SourceS3Uri": f"s3://sagemaker-{self.spec.name}-lifecycle/", "OnCreate": "on_create.sh"},
                "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/{self.spec.name}-execution",
                "ThreadsPerCore": 1,
                "Status": "InService",
            }
            if self.spec.reports_node_types:
                entry["SlurmConfig"] = {"NodeType": group.type}
            groups.append(entry)
        orchestrator = (
            {"Eks": {"ClusterArn": f"arn:aws:eks:{self.region}:{ACCOUNT}:cluster/{self.spec.name}-eks"}}
            if self.spec.orchestrator == "eks"
            else {"Slurm": {"SlurmConfigStrategy": "Managed"}}
        )
        return {
            "ClusterArn": self.arn,
            "ClusterName": self.spec.name,
            "ClusterStatus": "InService",
            "CreationTime": self.epoch - timedelta(days=30),
            "InstanceGroups": groups,
            "NodeRecovery": self.spec.node_recovery,
            **({"NodeProvisioningMode": self.spec.node_provisioning_mode} if self.spec.node_provisioning_mode else {}),
            "Orchestrator": orchestrator,
            "VpcConfig": {"SecurityGroupIds": ["sg-0a1b2c3d4e5f60718"], "Subnets": ["subnet-0a1b2c3d4e5f60718"]},
        }

    def list_cluster_nodes(self, params: dict[str, Any]) -> dict[str, Any]:
        self._check_cluster(params)
        self._maybe_fail("ListClusterNodes")
        t = self.now()
        max_results = int(params.get("MaxResults") or 100)
        if not 1 <= max_results <= 100:
            raise HyperPodApiError("ValidationException", "MaxResults must be between 1 and 100")
        start = int(params.get("NextToken") or 0)
        contains = params.get("InstanceGroupNameContains")
        # CreationTimeAfter/Before filter on the instance's creation time, the LaunchTime a summary shows
        # (the wire carries epoch seconds).
        after, before = (_epoch(params.get(key)) for key in ("CreationTimeAfter", "CreationTimeBefore"))
        with self._lock:
            live = [
                n
                for n in self.nodes
                if n.exists_at(t)
                and (not contains or contains in n.group)
                and (after is None or self._launch_time(n) > after)
                and (before is None or self._launch_time(n) < before)
            ]
        live.sort(key=lambda n: (n.created_at, n.node_id))
        if params.get("SortOrder") == "Descending":
            live.reverse()
        page = live[start : start + max_results]
        logical = bool(params.get("IncludeNodeLogicalIds"))
        response: dict[str, Any] = {"ClusterNodeSummaries": [self._summary(n, t, logical) for n in page]}
        if start + max_results < len(live):
            response["NextToken"] = str(start + max_results)
        return response

    def describe_cluster_node(self, params: dict[str, Any]) -> dict[str, Any]:
        self._check_cluster(params)
        self._maybe_fail("DescribeClusterNode")
        t = self.now()
        node_id, logical_id = params.get("NodeId"), params.get("NodeLogicalId")
        if bool(node_id) == bool(logical_id):
            raise HyperPodApiError("ValidationException", "Specify either NodeId or NodeLogicalId, but not both")
        with self._lock:
            live = [n for n in self.nodes if n.exists_at(t)]
            node = next((n for n in reversed(live) if (n.node_id == node_id if node_id else n.logical_id == logical_id)), None)
        if node is None:
            raise HyperPodApiError("ResourceNotFound", f"Node {node_id or logical_id} not found in cluster {self.spec.name}")
        details = self._summary(node, t, logical=True)
        details["PrivatePrimaryIp"] = node.ip
        details["Placement"] = {"AvailabilityZone": f"{self.region}a", "AvailabilityZoneId": "usw2-az1"}
        return {"NodeDetails": details}

    def batch_replace_cluster_nodes(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._batch(params, "BatchReplaceClusterNodes", self._replace)

    def batch_reboot_cluster_nodes(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._batch(params, "BatchRebootClusterNodes", self._reboot)

    def batch_delete_cluster_nodes(self, params: dict[str, Any]) -> dict[str, Any]:
        self._check_cluster(params)
        node_ids = params.get("NodeIds") or []
        if not 1 <= len(node_ids) <= 99:
            raise HyperPodApiError("ValidationException", "NodeIds must hold 1 to 99 ids")
        t = self.now()
        successful, failed = [], []
        with self._lock:
            for node_id in node_ids:
                node = next((n for n in self._instances(node_id) if n.exists_at(t)), None)
                if node is None:
                    # BatchDelete's error shape uses "Code", not "ErrorCode" (botocore model).
                    failed.append({"Code": "NodeIdNotFound", "Message": f"{node_id} not found", "NodeId": node_id})
                    continue
                node.transitions.append((t, "ShuttingDown"))
                node.removed_at = t + self.behaviour.shutdown_seconds
                successful.append(node_id)
        return self._batch_response(successful, failed)

    # --- internals ----------------------------------------------------------------------
    def _summary(self, node: SimNode, t: float, logical: bool = False) -> dict[str, Any]:
        status = node.status_at(t)
        summary: dict[str, Any] = {
            "InstanceGroupName": node.group,
            "InstanceId": node.node_id,
            "InstanceType": node.instance_type,
            "LaunchTime": self._launch_time(node),
            "InstanceStatus": {"Status": status, "Message": "" if status == "Running" else f"Instance is {status}"},
            "PrivateDnsHostname": node.hostname,
        }
        if node.generation == 0 and self.spec.software_updated_at is not None:
            summary["LastSoftwareUpdateTime"] = self.spec.software_updated_at  # a replacement starts on current software
        if logical:  # only when asked (IncludeNodeLogicalIds), as the API does
            summary["NodeLogicalId"] = node.logical_id
        return summary

    def _launch_time(self, node: SimNode) -> datetime:
        if node.generation == 0 and self.spec.launched_at is not None:
            return self.spec.launched_at
        return self.epoch + timedelta(seconds=max(node.created_at, -86_400.0))

    def _check_cluster(self, params: dict[str, Any]) -> None:
        name = params.get("ClusterName")
        if name not in (self.spec.name, self.arn):
            raise HyperPodApiError("ResourceNotFound", f"Cluster {name} not found")

    def _maybe_fail(self, operation: str) -> None:
        with self._lock:
            for error in self._errors:
                if error.operation == operation and error.node is None and error.fires():
                    raise HyperPodApiError(error.code, f"injected {error.code} for {operation}")

    def _node_error(self, operation: str, node: SimNode) -> str | None:
        for error in self._errors:
            if error.operation == operation and error.node:
                group, index = parse_ref(error.node)
                if (group, index) == (node.group, node.index) and error.fires():
                    return error.code
        return None

    def _batch(self, params: dict[str, Any], operation: str, action: Callable[[SimNode, float], Any]) -> dict[str, Any]:
        self._check_cluster(params)
        node_ids = params.get("NodeIds") or []
        if params.get("NodeLogicalIds"):
            raise HyperPodApiError("ValidationException", "NodeLogicalIds require NodeProvisioningMode=Continuous")
        if not 1 <= len(node_ids) <= MAX_BATCH:
            raise HyperPodApiError("ValidationException", f"NodeIds must hold 1 to {MAX_BATCH} ids, got {len(node_ids)}")
        self._maybe_fail(operation)
        t = self.now()
        successful: list[str] = []
        failed: list[dict[str, str]] = []
        with self._lock:
            targets = []
            for node_id in node_ids:
                node = next((n for n in self._instances(node_id) if n.exists_at(t)), None)
                if node is not None and self.node_type(node.group) == "Controller" and operation == "BatchReplaceClusterNodes":
                    # ASSUMED: the documented "cannot replace controller nodes" surfaces as a request error.
                    raise HyperPodApiError("ValidationException", f"{node_id} is a Slurm controller node and cannot be replaced")
                targets.append((node_id, node))
            for node_id, node in targets:
                if node is None:
                    failed.append(
                        {
                            "NodeId": node_id,
                            "ErrorCode": "InstanceIdNotFound",
                            "Message": "The instance does not exist in the specified cluster",
                        }
                    )
                    continue
                injected = self._node_error(operation, node)
                if injected == "InstanceIdInUse":
                    # What this code means in reality: HyperPod is already repairing the node.
                    self.start_own_repair(node, t)
                if injected:
                    failed.append({"NodeId": node_id, "ErrorCode": injected, "Message": f"injected {injected}"})
                    continue
                # ASSUMED: a node mid-operation (restarting, shutting down, updating) refuses another; a node
                # in Failure can be rebooted or replaced (that is what the Batch calls are for).
                if node.status_at(t) not in ("Running", "Failure"):
                    failed.append(
                        {
                            "NodeId": node_id,
                            "ErrorCode": "InstanceIdInUse",
                            "Message": "Another operation is already in progress for this node.",
                        }
                    )
                    continue
                action(node, t)
                successful.append(node_id)
        return self._batch_response(successful, failed)

    @staticmethod
    def _batch_response(successful: list[str], failed: list[dict[str, str]]) -> dict[str, Any]:
        response: dict[str, Any] = {}
        if successful:  # min 1 in the model: omitted, not empty, when nothing succeeded
            response["Successful"] = successful
        if failed:
            response["Failed"] = failed
        return response

    def _replace(self, node: SimNode, t: float, initiated_by: str = "api") -> ReplacementRecord:
        node.transitions.append((t, "ShuttingDown"))
        node.slurmd.append((t, False))
        node.removed_at = t + self.behaviour.shutdown_seconds
        generation = max(n.generation for n in self._by_ref[(node.group, node.index)]) + 1
        appears = node.removed_at
        seconds = self.replacement_seconds_for(node, t) if self.replacement_seconds_for is not None else None
        seconds = self.behaviour.replacement_seconds if seconds is None else seconds
        running_at = None if (node.group, node.index) in self._never_rejoin else t + max(seconds, self.behaviour.shutdown_seconds)
        transitions = [(appears, "Pending")]
        if running_at is not None:
            transitions.append((running_at, "Running"))
        ip, hostname = node.ip, node.hostname
        if self.behaviour.replacement_hostname == "new":
            group_no = self._groups[node.group][0]
            ip = f"10.{group_no}.{128 + generation % 120}.{node.index % 250 + 4}"
            hostname = f"ip-{ip.replace('.', '-')}.{self.region}.compute.internal"
        new = SimNode(
            node_id=self._instance_id(node.group, node.index, generation),
            group=node.group,
            index=node.index,
            ip=ip,
            hostname=hostname,
            instance_type=node.instance_type,
            created_at=appears,
            transitions=transitions,
            logical_id=node.logical_id
            if self.behaviour.replacement_logical_id == "kept"
            else self._logical_id(node.group, node.index, generation),
            generation=generation,
            slurmd=[(running_at, True)] if running_at is not None else [],
            boots=[(running_at, max(appears, running_at - REPLACEMENT_BOOT_SECONDS))] if running_at is not None else [],
        )
        self._add(new)
        if hostname != node.hostname and self.on_new_host is not None:
            self.on_new_host(hostname.split(".", 1)[0])
        record = ReplacementRecord(node.node_id, new.node_id, node.hostname, t, running_at, initiated_by, new_hostname=hostname)
        self.replacements.append(record)
        return record

    def _reboot(self, node: SimNode, t: float) -> None:
        # A reboot keeps the instance id. HyperPod shows the node Pending while it restarts, or
        # (reboot_status Running) keeps reporting Running all through it. A node in
        # behaviour.reboot_fails does not come back: Failure, or still "Running" in HyperPod's eyes
        # while slurmctld never hears from it again.
        fails = (node.group, node.index) in self._reboot_fails or (self.reboot_fails_for is not None and self.reboot_fails_for(node, t))
        back = t + REBOOT_SECONDS
        if self.behaviour.reboot_status == "Pending":
            node.transitions += [(t, "Pending"), (back, "Failure" if fails else "Running")]
        node.slurmd.append((t, False))
        if not fails:
            node.slurmd.append((back, True))
            node.boots.append((back, t + BOOT_AFTER_SECONDS))
        self.reboots.append(RebootRecord(node.node_id, node.hostname, t, None if fails else back))


def _epoch(value: object) -> datetime | None:
    """A request's timestamp (epoch seconds on the wire, botocore's JSON protocol; or ISO 8601)."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    moment = datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
