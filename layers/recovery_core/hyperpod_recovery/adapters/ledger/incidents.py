"""An incident's items (INCIDENT#<id>): RECORD (the incident record), JOBS (the affected jobs as the
agent described them, kept out of the workflow's state), EVIDENCE (a hang's), REPLACEMENTS (nodes
whose replacement it initiated) and EFFECT#<name> (an outside effect made once per incident: its
notification, with the lease of a delivery that may send it)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.adapters.ledger.table import INCIDENT_TTL, LedgerTable, epoch, incident_key
from hyperpod_recovery.errors import LedgerUnavailable
from hyperpod_recovery.models.commands import HangEvidenceResult, JobSpec
from hyperpod_recovery.models.records import Effect, IncidentRecord

EFFECT_PREFIX = "EFFECT#"
# Step Functions lets an execution take the name of a closed one after 90 days (StartExecution:
# "unique for your account, Region, and state machine for 90 days"): an effect begun longer ago
# than that under an incident id belongs to an earlier life of the name, not to this one.
NAME_REUSE_AFTER = timedelta(days=90)


class IncidentItems(LedgerTable):
    def save_incident(self, record: IncidentRecord) -> None:
        # Only RECORD items carry both ``cluster`` and ``recorded_at``: the keys of the sparse index
        # IncidentsByCluster (oncall.py).
        self._put(
            {
                **incident_key(record.incident_id, "RECORD"),
                "cluster": {"S": record.cluster},
                "outcome": {"S": record.outcome},
                "recorded_at": {"S": record.recorded_at.isoformat()},
                "record": {"S": record.model_dump_json()},
                "expires_at": {"N": epoch(record.recorded_at + INCIDENT_TTL)},
            }
        )

    def get_incident(self, incident_id: str) -> IncidentRecord | None:
        item = self._get(f"INCIDENT#{incident_id}", "RECORD")
        return IncidentRecord.model_validate_json(item["record"]["S"]) if item else None

    def save_jobs(self, incident_id: str, jobs: list[JobSpec], now: datetime) -> None:
        listed = json.dumps([j.model_dump(mode="json") for j in jobs], separators=(",", ":"))
        self._put({**incident_key(incident_id, "JOBS"), "jobs": {"S": listed}, "expires_at": {"N": epoch(now + INCIDENT_TTL)}})

    def jobs_of(self, incident_id: str) -> list[JobSpec] | None:
        item = self._get(f"INCIDENT#{incident_id}", "JOBS")
        return None if item is None else [JobSpec.model_validate(j) for j in json.loads(item["jobs"]["S"])]

    def save_evidence(self, incident_id: str, evidence: HangEvidenceResult, now: datetime) -> None:
        """A hang's evidence, kept with its incident (at most 16 dumps of 2 KB: far below 400 KB)."""
        kept = {"evidence": {"S": evidence.model_dump_json()}, "expires_at": {"N": epoch(now + INCIDENT_TTL)}}
        self._put({**incident_key(incident_id, "EVIDENCE"), **kept})

    def evidence_of(self, incident_id: str) -> HangEvidenceResult | None:
        item = self._get(f"INCIDENT#{incident_id}", "EVIDENCE")
        return None if item is None else HangEvidenceResult.model_validate_json(item["evidence"]["S"])

    def replacements_initiated(self, incident_id: str) -> set[str]:
        item = self._get(f"INCIDENT#{incident_id}", "REPLACEMENTS")
        return set(item.get("node_ids", {}).get("SS", [])) if item else set()

    def mark_replacements_initiated(self, incident_id: str, node_ids: list[str], now: datetime) -> None:
        if not node_ids:
            return
        self._write(
            "update",
            Key=incident_key(incident_id, "REPLACEMENTS"),
            UpdateExpression="ADD node_ids :ids SET expires_at = :exp",
            ExpressionAttributeValues={":ids": {"SS": sorted(node_ids)}, ":exp": {"N": epoch(now + INCIDENT_TTL)}},
        )

    def begin_effect(self, incident_id: str, name: str, now: datetime) -> Effect:
        """The effect ``name`` of the incident, begun now unless an earlier run of the step began it
        (then that one: when it began, whether it was done, what it answered). A conditional write:
        of two runs, one begins it."""
        begun = self._write(
            "put",
            "attribute_not_exists(pk) OR started_epoch < :reused",
            Item={
                **incident_key(incident_id, f"{EFFECT_PREFIX}{name}"),
                "started_at": {"S": now.isoformat()},
                "started_epoch": {"N": epoch(now)},
                "expires_at": {"N": epoch(now + INCIDENT_TTL)},
            },
            ExpressionAttributeValues={":reused": {"N": epoch(now - NAME_REUSE_AFTER)}},
        )
        if begun is not None:
            return Effect(incident=incident_id, name=name, started_at=now)
        found = self.effect_of(incident_id, name)
        if found is None:  # deleted between our write and our read: nothing else deletes it
            raise LedgerUnavailable(f"ledger {self.table_name!r}: effect {name} of {incident_id} vanished while read")
        return found

    def finish_effect(self, incident_id: str, name: str, now: datetime, result: str | None = None) -> None:
        # (an effect finished without having been begun is begun now: the item is whole either way)
        values: dict[str, Any] = {
            ":done": {"S": now.isoformat()},
            ":epoch": {"N": epoch(now)},
            ":exp": {"N": epoch(now + INCIDENT_TTL)},
        }
        update = (
            "SET done_at = :done, started_at = if_not_exists(started_at, :done), "
            "started_epoch = if_not_exists(started_epoch, :epoch), expires_at = if_not_exists(expires_at, :exp)"
        )
        if result is not None:
            values[":result"] = {"S": result}
            update += ", #result = :result"
        self._write(
            "update",
            Key=incident_key(incident_id, f"{EFFECT_PREFIX}{name}"),
            UpdateExpression=update,
            **({"ExpressionAttributeNames": {"#result": "result"}} if result is not None else {}),
            ExpressionAttributeValues=values,
        )

    def effect_of(self, incident_id: str, name: str) -> Effect | None:
        item = self._get(f"INCIDENT#{incident_id}", f"{EFFECT_PREFIX}{name}")
        if not item:
            return None
        return Effect(
            incident=incident_id,
            name=name,
            started_at=datetime.fromisoformat(item["started_at"]["S"]),
            done_at=datetime.fromisoformat(item["done_at"]["S"]) if "done_at" in item else None,
            result=item["result"]["S"] if "result" in item else None,
        )

    def claim_notification(self, incident_id: str, now: datetime, lease: timedelta) -> bool:
        """The right to send the incident's notification (its effect, begun), for ``lease``: False
        when it was sent, or while another delivery holds the right (it may send it; after the
        lease, anyone may). For the paths where two deliveries of one end may run at once."""
        leased = self._write(
            "update",
            "attribute_exists(pk) AND attribute_not_exists(done_at) AND (attribute_not_exists(lease_until) OR lease_until < :now)",
            Key=incident_key(incident_id, f"{EFFECT_PREFIX}notification"),
            UpdateExpression="SET lease_until = :until",
            ExpressionAttributeValues={":until": {"N": epoch(now + lease)}, ":now": {"N": epoch(now)}},
        )
        return leased is not None
