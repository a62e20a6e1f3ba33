"""What only the operator's commands read and write (hyperpod-recovery incidents, locks, hold, stop):
the cluster's incidents through the sparse index IncidentsByCluster, every live lock and hold (a
Scan), a human's release of a lock, and CLUSTER#<cluster>/AUDIT#<epoch>#<n> (one change a human made
through the CLI: who, why, what). No workflow step calls these."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from hyperpod_recovery.adapters.ledger.locks import HOLD, LOCK
from hyperpod_recovery.adapters.ledger.table import HIGHEST, INCIDENT_TTL, LedgerTable, epoch, node_key, sortable_epoch
from hyperpod_recovery.models.records import AuditEntry, IncidentRecord, NodeHold, NodeLock

INCIDENTS_INDEX = "IncidentsByCluster"
AUDIT_PREFIX = "AUDIT#"
AUDIT_TTL = INCIDENT_TTL


class OncallItems(LedgerTable):
    def incidents(self, cluster: str, since: datetime | None = None, limit: int = 50, outcomes: Sequence[str] = ()) -> list[IncidentRecord]:
        """The cluster's recorded incidents, newest first, from the sparse index IncidentsByCluster
        (only RECORD items carry both of its keys). ``since``: recorded at or after it; ``outcomes``:
        only these (filtered by DynamoDB, paging on until ``limit`` match)."""
        condition = "#cluster = :cluster" + (" AND recorded_at >= :since" if since is not None else "")
        values: dict[str, Any] = {":cluster": {"S": cluster}}
        if since is not None:
            values[":since"] = {"S": since.isoformat()}
        only: dict[str, Any] = {}
        if outcomes:
            names = {f":outcome{n}": {"S": outcome} for n, outcome in enumerate(outcomes)}
            values |= names
            only = {"FilterExpression": f"outcome IN ({', '.join(names)})"}
        records: list[IncidentRecord] = []
        start: dict[str, Any] | None = None
        while len(records) < limit:
            response = self._query_page(
                IndexName=INCIDENTS_INDEX,
                KeyConditionExpression=condition,
                ExpressionAttributeNames={"#cluster": "cluster"},
                ExpressionAttributeValues=values,
                ScanIndexForward=False,
                # Limit counts the items read before the filter: with one, a filtered listing would read
                # one item per Query; filtered, it reads pages (1 MB) and the list is cut to the limit.
                **({} if only else {"Limit": limit - len(records)}),
                **only,
                **({"ExclusiveStartKey": start} if start else {}),
            )
            items = response.get("Items", [])
            records += [IncidentRecord.model_validate_json(item["record"]["S"]) for item in items if "record" in item]
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        return records[:limit]

    def node_locks(self, cluster: str, now: datetime) -> list[NodeLock]:
        """Every live node lock of the cluster (instance ids and ``host:`` logical nodes). A Scan:
        the locks are one item per node, keyed by node; the table is small (records and logs of
        one cluster) and this is a human's command, never a workflow step."""
        found = []
        for item in self._scan_node_items(cluster, LOCK):
            if int(item["expires_at"]["N"]) < int(now.timestamp()):
                continue  # expired: the next incident takes it over (acquire_locks)
            found.append(
                NodeLock(
                    node=item["pk"]["S"].removeprefix(node_key(cluster, "")),
                    incident=item["incident"]["S"],
                    acquired_at=item["acquired_at"]["S"] if "acquired_at" in item else None,
                    expires_at=datetime.fromtimestamp(int(item["expires_at"]["N"]), tz=now.tzinfo),
                )
            )
        return sorted(found, key=lambda lock: lock.node)

    def release_lock(self, cluster: str, node: str, incident: str) -> bool:
        """Delete the lock of ``node`` if ``incident`` still holds it (a human's release); False
        when it is gone or another incident holds it now."""
        released = self._write(
            "delete",
            "incident = :holder",
            Key={"pk": {"S": node_key(cluster, node)}, "sk": {"S": LOCK}},
            ExpressionAttributeValues={":holder": {"S": incident}},
        )
        return released is not None

    def all_node_holds(self, cluster: str) -> list[NodeHold]:
        holds = (NodeHold.model_validate_json(item["hold"]["S"]) for item in self._scan_node_items(cluster, HOLD))
        return sorted(holds, key=lambda h: h.node)

    def _scan_node_items(self, cluster: str, sort_key: str) -> list[dict[str, Any]]:
        return self._scan(
            FilterExpression="sk = :sk AND begins_with(pk, :node)",
            ExpressionAttributeValues={":sk": {"S": sort_key}, ":node": {"S": node_key(cluster, "")}},
        )

    def audit(self, cluster: str, entry: AuditEntry) -> None:
        """Keep a human's change: an item of its own (nothing to overwrite), kept as long as records."""
        self._put(
            {
                "pk": {"S": f"CLUSTER#{cluster}"},
                "sk": {"S": f"{AUDIT_PREFIX}{sortable_epoch(entry.at)}#{uuid.uuid4().hex[:12]}"},
                "entry": {"S": entry.model_dump_json()},
                "expires_at": {"N": epoch(entry.at + AUDIT_TTL)},
            }
        )

    def audit_log(self, cluster: str, since: datetime | None = None) -> list[AuditEntry]:
        low = AUDIT_PREFIX + (sortable_epoch(since) if since is not None else "")
        items = self._query(f"CLUSTER#{cluster}", low, AUDIT_PREFIX + HIGHEST)
        return [AuditEntry.model_validate_json(item["entry"]["S"]) for item in items]
