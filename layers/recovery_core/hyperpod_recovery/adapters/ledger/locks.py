"""A node's items (NODE#<cluster>#<node>): LOCK, which incident holds the node (conditional writes),
and HOLD, a human's opt-out for it (by instance id or hostname)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.adapters.ledger.holdings import HoldingsItems
from hyperpod_recovery.adapters.ledger.table import epoch, node_key
from hyperpod_recovery.models.records import LockOutcome, NodeHold

LOCK = "LOCK"
HOLD = "HOLD"


class NodeItems(HoldingsItems):
    def acquire_locks(self, incident_id: str, cluster: str, node_ids: list[str], now: datetime, ttl: timedelta) -> LockOutcome:
        """Lock each node for this incident unless another live incident holds it. Re-acquiring our
        own lock succeeds (a retried Lambda), and an expired lock is taken over."""
        acquired: list[str] = []
        held: dict[str, str] = {}
        for node_id in node_ids:
            written = self._write(
                "put",
                "attribute_not_exists(pk) OR incident = :me OR expires_at < :now",
                Item={
                    "pk": {"S": node_key(cluster, node_id)},
                    "sk": {"S": LOCK},
                    "incident": {"S": incident_id},
                    "acquired_at": {"S": now.isoformat()},
                    "expires_at": {"N": epoch(now + ttl)},
                },
                ExpressionAttributeValues={":me": {"S": incident_id}, ":now": {"N": epoch(now)}},
            )
            if written is not None:
                acquired.append(node_id)
            else:
                held[node_id] = self._lock_holder(cluster, node_id, now) or "unknown"
        self._hold(incident_id, cluster, "ADD", locks=acquired)
        return LockOutcome(acquired=acquired, held_elsewhere=held)

    def lock_holders(self, cluster: str, node_ids: list[str], now: datetime) -> dict[str, str]:
        """Live locks only (read-only, used by dry runs)."""
        holders = {}
        for node_id in node_ids:
            holder = self._lock_holder(cluster, node_id, now)
            if holder:
                holders[node_id] = holder
        return holders

    def release_locks(self, incident_id: str, cluster: str, node_ids: list[str], hold_until: datetime | None) -> None:
        """Drop our locks, or keep them until ``hold_until`` (an escalated node stays ours, so
        automation does not act on it again while a human looks). A lock no longer ours is left."""
        for node_id in node_ids:
            key = {"pk": {"S": node_key(cluster, node_id)}, "sk": {"S": LOCK}}
            mine: dict[str, Any] = {":me": {"S": incident_id}}
            if hold_until is None:
                self._write("delete", "incident = :me", Key=key, ExpressionAttributeValues=mine)
            else:
                until = {":until": {"N": epoch(hold_until)}}
                self._write(
                    "update", "incident = :me", Key=key, UpdateExpression="SET expires_at = :until", ExpressionAttributeValues=mine | until
                )
        # A lock kept until hold_until is no longer an open holding: it expires on its own.
        self._hold(incident_id, cluster, "DELETE", locks=node_ids)

    def _lock_holder(self, cluster: str, node_id: str, now: datetime) -> str | None:
        item = self._get(node_key(cluster, node_id), LOCK)
        if not item or int(item["expires_at"]["N"]) < int(now.timestamp()):
            return None
        return str(item["incident"]["S"])

    def node_holds(self, cluster: str, nodes: Sequence[str]) -> dict[str, NodeHold]:
        """The holds on any of ``nodes`` (instance ids and hostnames), by node, read at once (every
        key read, or LedgerUnavailable: a partial answer would miss a human's hold)."""
        keys = [{"pk": {"S": node_key(cluster, node)}, "sk": {"S": HOLD}} for node in dict.fromkeys(nodes)]
        holds = [NodeHold.model_validate_json(item["hold"]["S"]) for item in self._batch_get(keys, "hold(s)")]
        return {hold.node: hold for hold in holds}

    def hold_node(self, cluster: str, hold: NodeHold) -> NodeHold | None:
        """Put the hold unless the node is held already: None when written, else the hold in place
        (a second hold does not overwrite who and why)."""
        item = {"pk": {"S": node_key(cluster, hold.node)}, "sk": {"S": HOLD}, "hold": {"S": hold.model_dump_json()}}
        if self._write("put", "attribute_not_exists(pk)", Item=item) is not None:
            return None
        return self.node_holds(cluster, [hold.node]).get(hold.node) or hold

    def unhold_node(self, cluster: str, node: str, read: NodeHold | None = None) -> NodeHold | None:
        """Remove the hold of ``node`` (only if it is still ``read``, when given: a hold placed again
        since is another human's); the hold removed, or None if there was none or it had changed."""
        same: dict[str, Any] = {}
        if read is not None:
            same = {"ExpressionAttributeNames": {"#hold": "hold"}, "ExpressionAttributeValues": {":read": {"S": read.model_dump_json()}}}
        key = {"pk": {"S": node_key(cluster, node)}, "sk": {"S": HOLD}}
        response = self._write("delete", "#hold = :read" if read is not None else None, Key=key, ReturnValues="ALL_OLD", **same)
        old = response.get("Attributes") if response is not None else None
        return NodeHold.model_validate_json(old["hold"]["S"]) if old else None
