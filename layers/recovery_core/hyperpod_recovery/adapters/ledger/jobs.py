"""A job's items: JOB#<cluster>#<job id>/RESUBMISSION (which incident resubmits it, and the copy),
/RECREATION (EKS: the token of its re-creation), /LINEAGE (the first job of its lineage), and
LINEAGE#<cluster>#<first job id>/RESTART#<new job id> (one restart of the lineage: restart budget,
crash loops)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from hyperpod_recovery.adapters.ledger.holdings import HoldingsItems
from hyperpod_recovery.adapters.ledger.table import HIGHEST, JOB_CLAIM_TTL, epoch
from hyperpod_recovery.models.job_recovery import RestartEntry
from hyperpod_recovery.models.records import ResubmissionClaim

RESTART_PREFIX = "RESTART#"


def _job_key(cluster: str, job_id: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": f"JOB#{cluster}#{job_id}"}, "sk": {"S": sk}}


def _claim(job_id: str, item: dict[str, Any], *, claimed: bool) -> ResubmissionClaim:
    """A RESUBMISSION item as read: its holder, its copy (once completed), when it was taken and
    until when an open one holds (a completed one has no end)."""
    open_until = item.get("claim_expires_at", {}).get("N")
    return ResubmissionClaim(
        job_id=job_id,
        incident_id=item["incident"]["S"],
        claimed=claimed,
        new_job_id=item.get("new_job_id", {}).get("S"),
        claimed_at=datetime.fromisoformat(item["claimed_at"]["S"]),
        open_until=datetime.fromtimestamp(int(open_until), tz=UTC) if open_until else None,
    )


class JobItems(HoldingsItems):
    def claim_resubmission(self, cluster: str, job_id: str, incident_id: str, now: datetime, ttl: timedelta) -> ResubmissionClaim:
        """Claim the job's resubmission for this incident. A claim that was never completed expires
        after ``ttl`` (its incident died without settling it), so it cannot block the job for good;
        a completed claim (the job was resubmitted) is kept for JOB_CLAIM_TTL."""
        key = _job_key(cluster, job_id, "RESUBMISSION")
        self._write(
            "put",
            # Our own claim is taken again only while open: a completed one (the job was
            # resubmitted) is never overwritten back to open; it is read and answered as done.
            "attribute_not_exists(pk) OR (attribute_not_exists(new_job_id) AND (incident = :me OR claim_expires_at < :now))",
            Item={
                **key,
                "incident": {"S": incident_id},
                "claimed_at": {"S": now.isoformat()},
                "claim_expires_at": {"N": epoch(now + ttl)},
                "expires_at": {"N": epoch(now + JOB_CLAIM_TTL)},
            },
            ExpressionAttributeValues={":me": {"S": incident_id}, ":now": {"N": epoch(now)}},
        )
        item = self._get(key["pk"]["S"], "RESUBMISSION")
        if item is None:  # expired and deleted between our write and our read: nobody holds it now
            return ResubmissionClaim(job_id=job_id, incident_id="unknown", claimed=False)
        claim = _claim(job_id, item, claimed=item["incident"]["S"] == incident_id)
        if claim.claimed and not claim.new_job_id:
            self._hold(incident_id, cluster, "ADD", claims=[job_id])
        return claim

    def complete_resubmission(self, cluster: str, job_id: str, incident_id: str, new_job_id: str) -> None:
        self._write(
            "update",
            "incident = :me",
            Key=_job_key(cluster, job_id, "RESUBMISSION"),
            UpdateExpression="SET new_job_id = :new REMOVE claim_expires_at",
            ExpressionAttributeValues={":new": {"S": new_job_id}, ":me": {"S": incident_id}},
        )
        self._hold(incident_id, cluster, "DELETE", claims=[job_id])

    def keep_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None:
        """Leave a claim whose outcome is unknown (the resubmission was asked for, its answer not
        seen) in place until it expires, and stop holding it: no other incident restarts the job
        meanwhile, and the incident's end is settled."""
        self._hold(incident_id, cluster, "DELETE", claims=[job_id])

    def release_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None:
        """Give up a claim this incident took but did not complete (nothing was submitted, or Slurm
        requeued the job itself): a later failure of the same job id is a new episode. Another
        incident's claim, or a completed one, is kept."""
        self._write(
            "delete",
            "incident = :me AND attribute_not_exists(new_job_id)",
            Key=_job_key(cluster, job_id, "RESUBMISSION"),
            ExpressionAttributeValues={":me": {"S": incident_id}},
        )
        self._hold(incident_id, cluster, "DELETE", claims=[job_id])

    def resubmission_claim(self, cluster: str, job_id: str) -> ResubmissionClaim | None:
        """Who, if anyone, has claimed a job's resubmission (read-only)."""
        item = self._get(f"JOB#{cluster}#{job_id}", "RESUBMISSION")
        return _claim(job_id, item, claimed=False) if item else None

    def recreation_token(self, cluster: str, job_id: str, now: datetime) -> str:
        """EKS: the token of the job's re-creation, recorded here before the object is made (one per
        job, the first writer's: every incident and retry that re-creates the job uses the same one).
        The re-created object carries it; nobody else can know it before we make that object, so an
        object carrying it is ours, whatever its name, and one without it never is."""
        key = _job_key(cluster, job_id, "RECREATION")
        item = {**key, "token": {"S": uuid.uuid4().hex}, "expires_at": {"N": epoch(now + JOB_CLAIM_TTL)}}
        self._write("put", "attribute_not_exists(pk)", Item=item)  # (recorded before: that one stands)
        return str((self._get(key["pk"]["S"], "RECREATION") or {})["token"]["S"])

    def lineage_root(self, cluster: str, job_id: str) -> str | None:
        item = self._get(f"JOB#{cluster}#{job_id}", "LINEAGE")
        return str(item["root"]["S"]) if item else None

    def restart_history(self, cluster: str, root: str) -> list[RestartEntry]:
        """Every restart of the lineage, oldest first: an item each."""
        items = self._query(f"LINEAGE#{cluster}#{root}", RESTART_PREFIX, RESTART_PREFIX + HIGHEST)
        return sorted((RestartEntry.model_validate_json(item["entry"]["S"]) for item in items), key=lambda e: e.restarted_at)

    def record_restart(self, cluster: str, root: str, entry: RestartEntry) -> None:
        """Add a restart to the lineage (an item of its own, keyed by the new job: a retried Record
        Job Outcome writes the same item again) and point the new job at its root. A lineage's
        restarts are bounded by its restart budget in any window; each expires on its own."""
        expires = {"N": epoch(entry.restarted_at + JOB_CLAIM_TTL)}
        restart = {"pk": {"S": f"LINEAGE#{cluster}#{root}"}, "sk": {"S": f"{RESTART_PREFIX}{entry.new_job_id}"}}
        self._put({**restart, "entry": {"S": entry.model_dump_json()}, "expires_at": expires})
        self._put({**_job_key(cluster, entry.new_job_id, "LINEAGE"), "root": {"S": root}, "expires_at": expires})
