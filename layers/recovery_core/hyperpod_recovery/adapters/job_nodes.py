"""Which nodes the orchestrator says each running job runs on (the JobNodeSource port): whose
progress reports count for a job (docs/progress.md, "What is trusted").

Slurm: the controller agent's snapshot in the ledger (models/job_nodes_item.py), read consistently;
an item that does not read is None (logged, counted in ``unreadable``), never the detector's
failure. EKS: the live pods, each counted for the job object that controls it (by owner uid).
The caller decides whether a snapshot is recent enough (``JobNodes.fresh``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable
from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.models.job_nodes_item import SORT_KEY, JobNodesUnreadable, partition_key, read_item
from hyperpod_recovery.models.kubernetes import JOB_KINDS
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.ports import KubeApi


class SlurmJobNodes:
    dynamodb = LazyClient("dynamodb")

    def __init__(self, table_name: str, cluster: str, dynamodb: Any = None) -> None:
        self.table_name = table_name
        self.cluster = cluster
        self._dynamodb = dynamodb
        self.unreadable = 0  # snapshots that did not read, since this adapter was made

    def running_job_nodes(self) -> JobNodes | None:
        key = {"pk": {"S": partition_key(self.cluster)}, "sk": {"S": SORT_KEY}}
        try:
            found = self.dynamodb.get_item(TableName=self.table_name, Key=key, ConsistentRead=True).get("Item")
        except ClientError as exc:
            error = LedgerUnavailable if is_transient(exc) else LedgerError
            raise error(f"ledger {self.table_name}: job nodes snapshot: {error_code(exc)}") from exc
        except BotoCoreError as exc:
            raise LedgerUnavailable(f"ledger {self.table_name}: job nodes snapshot: {exc}") from exc
        if found is None:
            return None  # no agent has written one (not installed, or without ledger_table)
        try:
            return read_item(found, self.cluster)
        except JobNodesUnreadable as exc:
            self.unreadable += 1
            logger.warning("the controller agent's job nodes snapshot does not read", extra={"reason": str(exc)[:300]})
            return None


class EksJobNodes:
    """The live pods (one list per call), each counted for the training job that controls it."""

    def __init__(self, kube: KubeApi, now: Callable[[], datetime]) -> None:
        self.kube = kube
        self.now = now

    def running_job_nodes(self) -> JobNodes | None:
        taken_at = self.now()
        return job_nodes_of_pods(self.kube.list_live_pods(), taken_at)


def job_nodes_of_pods(pods: list[dict[str, Any]], taken_at: datetime) -> JobNodes:
    """``namespace/<job name>`` -> the nodes of the pods whose controller is that job. A pod not
    scheduled yet holds no node; a Terminating one still runs its job (it counts). Two job objects
    (two uids) under one namespace/name in one list -> the name is ambiguous: no node counts for it."""
    uids: dict[str, set[str]] = defaultdict(set)
    nodes: dict[str, set[str]] = defaultdict(set)
    for pod in pods:
        metadata = pod.get("metadata") or {}
        owner = next((o for o in metadata.get("ownerReferences") or [] if isinstance(o, dict) and o.get("controller") is True), None)
        if owner is None or owner.get("kind") not in JOB_KINDS or not owner.get("uid") or not owner.get("name"):
            continue
        if owner.get("apiVersion") != JOB_KINDS[str(owner["kind"])].api_version:
            continue  # a kind of the same name in another API group is not a training job
        key = f"{metadata.get('namespace')}/{owner['name']}"
        uids[key].add(str(owner["uid"]))
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            nodes[key].add(str(node))
    ambiguous = sorted(key for key, owners in uids.items() if len(owners) > 1)
    jobs = {key: sorted(nodes.get(key, ())) for key in uids if key not in ambiguous}
    return JobNodes(source="eks", taken_at=taken_at, jobs=jobs, ambiguous=ambiguous)
