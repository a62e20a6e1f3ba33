"""What an incident holds until it ends (INCIDENT#<id>/HOLDINGS): the locks, cap places and claims the
other families take and give back, kept beside them so every end of the incident can settle them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from hyperpod_recovery.adapters.ledger.table import INCIDENT_TTL, LedgerTable, epoch, incident_key
from hyperpod_recovery.models.records import Holdings


class HoldingsItems(LedgerTable):
    def holdings(self, incident_id: str) -> Holdings | None:
        item = self._get(f"INCIDENT#{incident_id}", "HOLDINGS")
        if not item:
            return None
        return Holdings(
            incident=incident_id,
            cluster=item["cluster"]["S"],
            **{name: set(item.get(name, {}).get("SS", [])) for name in ("locks", "reserved", "claims", "hostnames")},
        )

    def _hold(self, incident_id: str, cluster: str, action: Literal["ADD", "DELETE"], **sets: Sequence[str]) -> None:
        """ADD to or DELETE from the incident's holdings (string sets; DynamoDB refuses empty ones)."""
        present = {name: sorted(set(values)) for name, values in sets.items() if values}
        if not present:
            return
        names = {f"#{name}": name for name in present}
        values: dict[str, Any] = {f":{name}": {"SS": ids} for name, ids in present.items()}
        clause = f"{action} " + ", ".join(f"#{name} :{name}" for name in present)
        if action == "ADD":
            update = f"SET #cluster = :cluster, expires_at = if_not_exists(expires_at, :exp) {clause}"
            names["#cluster"] = "cluster"
            values |= {":cluster": {"S": cluster}, ":exp": {"N": epoch(datetime.now().astimezone() + INCIDENT_TTL)}}
        else:
            update = clause
        self._write(
            "update",
            None if action == "ADD" else "attribute_exists(pk)",  # a DELETE never creates an empty one
            Key=incident_key(incident_id, "HOLDINGS"),
            UpdateExpression=update,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
