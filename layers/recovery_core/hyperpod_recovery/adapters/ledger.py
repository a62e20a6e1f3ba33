"""The ledger: our own state in one DynamoDB table (pk/sk strings, TTL attribute ``expires_at``).

Items:
    NODE#<cluster>#<node id>   / LOCK          which incident holds a node (conditional writes)
    INCIDENT#<incident id>     / RECORD        the incident record (outcome, timeline, phases, jobs)
    INCIDENT#<incident id>     / REPLACEMENTS  nodes whose replacement this incident already initiated
    INCIDENT#<incident id>     / HOLDINGS      what the incident holds (locks, cap places, claims) until it ends
    INCIDENT#<incident id>     / JOBS          the affected jobs as the agent described them (kept out of the workflow's state)
    JOB#<cluster>#<job id>     / RESUBMISSION  which incident resubmits a job, and the new job id
    JOB#<cluster>#<job id>     / LINEAGE       the first job of the lineage this resubmission belongs to
    LINEAGE#<cluster>#<job id> / RESTARTS      every restart of that lineage (restart budget, crash loops)
    CLUSTER#<cluster>          / IN_RECOVERY   nodes counted against the cluster cap: who holds each, until when
    CLUSTER#<cluster>          / BREAKER       the circuit breaker (open/closed, why, by whom, history)
    CLUSTER#<cluster>          / RECOVERIES    recent recoveries that acted (breaker and repeat-offender windows)
    INCIDENT#<incident id>     / NOTICE        the one notification of an end no Record step recorded: who may send it, when it was
    CLUSTER#<cluster>          / ENDS_SWEPT    until when the sweep of ended executions has recorded every end it found
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable
from hyperpod_recovery.models.commands import JobSpec
from hyperpod_recovery.models.job_recovery import RestartEntry
from hyperpod_recovery.models.records import (
    BreakerState,
    Holdings,
    IncidentRecord,
    LockOutcome,
    RecoveryLogEntry,
    RejoinWait,
    ResubmissionClaim,
)

JOB_CLAIM_TTL = timedelta(days=30)
# The waits of a cluster's recoveries: a wait lasts at most the reboot and rejoin deadlines (2 days at most).
REJOIN_WAITS_TTL = timedelta(days=3)
WAIT_PREFIX = "wait:"
INCIDENT_TTL = timedelta(days=400)
# Optimistic writes of the cluster's reservation item: a conflict means another incident wrote it
# between our read and our write; read again and decide again, a bounded number of times.
RESERVATION_ATTEMPTS = 8


def _epoch(moment: datetime) -> str:
    return str(int(moment.timestamp()))


class DynamoLedger:
    dynamodb = LazyClient("dynamodb")

    def __init__(self, table_name: str, dynamodb: Any = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb

    # --- node locks ---------------------------------------------------------------------
    def acquire_locks(self, incident_id: str, cluster: str, node_ids: list[str], now: datetime, ttl: timedelta) -> LockOutcome:
        """Lock each node for this incident unless another live incident holds it. Re-acquiring our
        own lock succeeds (a retried Lambda), and an expired lock is taken over."""
        acquired: list[str] = []
        held: dict[str, str] = {}
        for node_id in node_ids:
            try:
                self._call(
                    self.dynamodb.put_item,
                    TableName=self.table_name,
                    Item={
                        "pk": {"S": self._node_key(cluster, node_id)},
                        "sk": {"S": "LOCK"},
                        "incident": {"S": incident_id},
                        "acquired_at": {"S": now.isoformat()},
                        "expires_at": {"N": _epoch(now + ttl)},
                    },
                    ConditionExpression="attribute_not_exists(pk) OR incident = :me OR expires_at < :now",
                    ExpressionAttributeValues={":me": {"S": incident_id}, ":now": {"N": _epoch(now)}},
                )
                acquired.append(node_id)
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise self._unavailable(exc) from exc
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
        automation does not act on it again while a human looks)."""
        for node_id in node_ids:
            key = {"pk": {"S": self._node_key(cluster, node_id)}, "sk": {"S": "LOCK"}}
            mine: dict[str, Any] = {":me": {"S": incident_id}}
            try:
                if hold_until is None:
                    self._call(
                        self.dynamodb.delete_item,
                        TableName=self.table_name,
                        Key=key,
                        ConditionExpression="incident = :me",
                        ExpressionAttributeValues=mine,
                    )
                else:
                    self._call(
                        self.dynamodb.update_item,
                        TableName=self.table_name,
                        Key=key,
                        UpdateExpression="SET expires_at = :until",
                        ConditionExpression="incident = :me",
                        ExpressionAttributeValues={**mine, ":until": {"N": _epoch(hold_until)}},
                    )
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":  # not ours any more: leave it
                    raise self._unavailable(exc) from exc
        # A lock kept until hold_until is no longer an open holding: it expires on its own.
        self._hold(incident_id, cluster, "DELETE", locks=node_ids)

    # --- replacements -------------------------------------------------------------------
    def replacements_initiated(self, incident_id: str) -> set[str]:
        item = self._get(f"INCIDENT#{incident_id}", "REPLACEMENTS")
        return set(item.get("node_ids", {}).get("SS", [])) if item else set()

    def mark_replacements_initiated(self, incident_id: str, node_ids: list[str], now: datetime) -> None:
        if not node_ids:
            return
        self._call(
            self.dynamodb.update_item,
            TableName=self.table_name,
            Key={"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": "REPLACEMENTS"}},
            UpdateExpression="ADD node_ids :ids SET expires_at = :exp",
            ExpressionAttributeValues={":ids": {"SS": sorted(node_ids)}, ":exp": {"N": _epoch(now + INCIDENT_TTL)}},
        )

    # --- job resubmission claims --------------------------------------------------------
    def claim_resubmission(self, cluster: str, job_id: str, incident_id: str, now: datetime, ttl: timedelta) -> ResubmissionClaim:
        """Claim the job's resubmission for this incident. A claim that was never completed expires
        after ``ttl`` (its incident died without settling it), so it cannot block the job for good;
        a completed claim (the job was resubmitted) is kept for JOB_CLAIM_TTL."""
        key = {"pk": {"S": f"JOB#{cluster}#{job_id}"}, "sk": {"S": "RESUBMISSION"}}
        try:
            self._call(
                self.dynamodb.put_item,
                TableName=self.table_name,
                Item={
                    **key,
                    "incident": {"S": incident_id},
                    "claimed_at": {"S": now.isoformat()},
                    "claim_expires_at": {"N": _epoch(now + ttl)},
                    "expires_at": {"N": _epoch(now + JOB_CLAIM_TTL)},
                },
                ConditionExpression="attribute_not_exists(pk) OR incident = :me "
                "OR (attribute_not_exists(new_job_id) AND claim_expires_at < :now)",
                ExpressionAttributeValues={":me": {"S": incident_id}, ":now": {"N": _epoch(now)}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
        item = self._get(key["pk"]["S"], "RESUBMISSION") or {}
        holder = item.get("incident", {}).get("S", "unknown")
        claim = ResubmissionClaim(
            job_id=job_id,
            incident_id=holder,
            claimed=holder == incident_id,
            new_job_id=item.get("new_job_id", {}).get("S"),
        )
        if claim.claimed and not claim.new_job_id:
            self._hold(incident_id, cluster, "ADD", claims=[job_id])
        return claim

    def complete_resubmission(self, cluster: str, job_id: str, incident_id: str, new_job_id: str) -> None:
        try:
            self._call(
                self.dynamodb.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": f"JOB#{cluster}#{job_id}"}, "sk": {"S": "RESUBMISSION"}},
                UpdateExpression="SET new_job_id = :new REMOVE claim_expires_at",
                ConditionExpression="incident = :me",
                ExpressionAttributeValues={":new": {"S": new_job_id}, ":me": {"S": incident_id}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
        self._hold(incident_id, cluster, "DELETE", claims=[job_id])

    def keep_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None:
        """Leave a claim whose outcome is unknown (the resubmission was asked for, its answer not
        seen) in place until it expires, and stop holding it: no other incident restarts the job
        meanwhile, and the incident's end is settled."""
        self._hold(incident_id, cluster, "DELETE", claims=[job_id])

    def release_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None:
        """Give up a claim this incident took but did not complete (nothing was submitted, or Slurm
        requeued the job itself): a later failure of the same job id is a new episode."""
        try:
            self._call(
                self.dynamodb.delete_item,
                TableName=self.table_name,
                Key={"pk": {"S": f"JOB#{cluster}#{job_id}"}, "sk": {"S": "RESUBMISSION"}},
                ConditionExpression="incident = :me AND attribute_not_exists(new_job_id)",
                ExpressionAttributeValues={":me": {"S": incident_id}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":  # another incident's, or completed: keep it
                raise self._unavailable(exc) from exc
        self._hold(incident_id, cluster, "DELETE", claims=[job_id])

    def resubmission_claim(self, cluster: str, job_id: str) -> ResubmissionClaim | None:
        """Who, if anyone, has claimed a job's resubmission (read-only)."""
        item = self._get(f"JOB#{cluster}#{job_id}", "RESUBMISSION")
        if not item:
            return None
        return ResubmissionClaim(
            job_id=job_id, incident_id=item["incident"]["S"], claimed=False, new_job_id=item.get("new_job_id", {}).get("S")
        )

    # --- job lineages (restart budget, crash loops) ---------------------------------------
    def lineage_root(self, cluster: str, job_id: str) -> str | None:
        item = self._get(f"JOB#{cluster}#{job_id}", "LINEAGE")
        return str(item["root"]["S"]) if item else None

    def restart_history(self, cluster: str, root: str) -> list[RestartEntry]:
        item = self._get(f"LINEAGE#{cluster}#{root}", "RESTARTS")
        if not item:
            return []
        return [RestartEntry.model_validate_json(entry["S"]) for entry in item.get("restarts", {}).get("L", [])]

    def record_restart(self, cluster: str, root: str, entry: RestartEntry) -> None:
        """Append a restart to the lineage and point the new job at its root. Idempotent: a retried
        Record Job Outcome finds its entry (same new job id) already there."""
        if any(e.new_job_id == entry.new_job_id for e in self.restart_history(cluster, root)):
            return
        expires = {":exp": {"N": _epoch(entry.restarted_at + JOB_CLAIM_TTL)}}
        self._call(
            self.dynamodb.update_item,
            TableName=self.table_name,
            Key={"pk": {"S": f"LINEAGE#{cluster}#{root}"}, "sk": {"S": "RESTARTS"}},
            UpdateExpression="SET restarts = list_append(if_not_exists(restarts, :empty), :entry), expires_at = :exp",
            ExpressionAttributeValues={":empty": {"L": []}, ":entry": {"L": [{"S": entry.model_dump_json()}]}, **expires},
        )
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={
                "pk": {"S": f"JOB#{cluster}#{entry.new_job_id}"},
                "sk": {"S": "LINEAGE"},
                "root": {"S": root},
                "expires_at": expires[":exp"],
            },
        )

    # --- the safety policy's state ---------------------------------------------------------
    def nodes_in_recovery(self, cluster: str, now: datetime) -> set[str]:
        """Nodes counted against the cap now: reservations that have not expired."""
        return set(self._reservations(cluster, now)[0])

    def reserve_capacity(
        self, cluster: str, incident_id: str, node_ids: list[str], limit: int, now: datetime, ttl: timedelta, hostnames: Sequence[str] = ()
    ) -> bool:
        """Count ``node_ids`` against the cap for this incident until ``now + ttl``, atomically:
        False if that would pass ``limit``. Nodes already counted (a retried step) are not counted
        twice; expired reservations (an incident that died unreconciled) no longer count."""
        for _ in range(RESERVATION_ATTEMPTS):
            live, version = self._reservations(cluster, now)
            new = sorted(set(node_ids) - set(live))
            if not new:
                return True
            if len(live) + len(new) > limit:
                return False
            live.update({n: (incident_id, int((now + ttl).timestamp())) for n in new})
            if self._write_reservations(cluster, live, version):
                self._hold(incident_id, cluster, "ADD", reserved=new, hostnames=list(hostnames))
                return True
        raise LedgerUnavailable(
            f"ledger {self.table_name!r}: the cluster cap of {cluster} changed {RESERVATION_ATTEMPTS} times while reserving"
        )

    def release_capacity(self, cluster: str, incident_id: str, node_ids: list[str], now: datetime) -> None:
        """Give back this incident's places under the cap (another incident's are left alone)."""
        wanted = set(node_ids)
        for _ in range(RESERVATION_ATTEMPTS):
            live, version = self._reservations(cluster, now)
            kept = {n: entry for n, entry in live.items() if not (n in wanted and entry[0] == incident_id)}
            if len(kept) == len(live) or self._write_reservations(cluster, kept, version):
                self._hold(incident_id, cluster, "DELETE", reserved=node_ids)
                return
        raise LedgerUnavailable(
            f"ledger {self.table_name!r}: the cluster cap of {cluster} changed {RESERVATION_ATTEMPTS} times while releasing"
        )

    def hold_capacity_until(self, cluster: str, incident_id: str, node_ids: list[str], until: datetime, now: datetime) -> None:
        """Keep this incident's places for ``node_ids`` only until ``until`` (never longer than they
        already had), and stop counting them among what the incident holds: nobody will give them
        back, they expire. For nodes an ended incident left out of service (a replacement in flight)."""
        wanted, deadline = set(node_ids), int(until.timestamp())
        for _ in range(RESERVATION_ATTEMPTS):
            live, version = self._reservations(cluster, now)
            kept = {
                n: (entry[0], min(entry[1], deadline)) if n in wanted and entry[0] == incident_id else entry for n, entry in live.items()
            }
            if kept == live or self._write_reservations(cluster, kept, version):
                self._hold(incident_id, cluster, "DELETE", reserved=node_ids)
                return
        raise LedgerUnavailable(
            f"ledger {self.table_name!r}: the cluster cap of {cluster} changed {RESERVATION_ATTEMPTS} times while holding"
        )

    def _reservations(self, cluster: str, now: datetime) -> tuple[dict[str, tuple[str, int]], int]:
        """Live reservations {node id: (incident, expires epoch)} and the item's version."""
        item = self._get(f"CLUSTER#{cluster}", "IN_RECOVERY")
        if not item:
            return {}, 0
        entries = json.loads(item.get("reservations", {}).get("S", "{}"))
        live = {n: (str(e[0]), int(e[1])) for n, e in entries.items() if int(e[1]) >= int(now.timestamp())}
        return live, int(item.get("version", {}).get("N", "0"))

    def _write_reservations(self, cluster: str, entries: dict[str, tuple[str, int]], version: int) -> bool:
        try:
            self._call(
                self.dynamodb.put_item,
                TableName=self.table_name,
                Item={
                    "pk": {"S": f"CLUSTER#{cluster}"},
                    "sk": {"S": "IN_RECOVERY"},
                    "reservations": {"S": json.dumps({n: list(e) for n, e in sorted(entries.items())})},
                    "version": {"N": str(version + 1)},
                },
                ConditionExpression="attribute_not_exists(pk) OR version = :v",
                ExpressionAttributeValues={":v": {"N": str(version)}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
            return False
        return True

    # --- the affected jobs of an incident ------------------------------------------------------
    def save_jobs(self, incident_id: str, jobs: list[JobSpec], now: datetime) -> None:
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={
                "pk": {"S": f"INCIDENT#{incident_id}"},
                "sk": {"S": "JOBS"},
                "jobs": {"S": json.dumps([j.model_dump(mode="json") for j in jobs], separators=(",", ":"))},
                "expires_at": {"N": _epoch(now + INCIDENT_TTL)},
            },
        )

    def jobs_of(self, incident_id: str) -> list[JobSpec] | None:
        item = self._get(f"INCIDENT#{incident_id}", "JOBS")
        return None if item is None else [JobSpec.model_validate(j) for j in json.loads(item["jobs"]["S"])]

    # --- what an incident holds ---------------------------------------------------------------
    def holdings(self, incident_id: str) -> Holdings | None:
        item = self._get(f"INCIDENT#{incident_id}", "HOLDINGS")
        if not item:
            return None
        return Holdings(
            incident=incident_id,
            cluster=item["cluster"]["S"],
            **{name: set(item.get(name, {}).get("SS", [])) for name in ("locks", "reserved", "claims", "hostnames")},
        )

    def _hold(self, incident_id: str, cluster: str, action: str, **sets: Sequence[str]) -> None:
        """ADD to or DELETE from the incident's holdings (string sets; DynamoDB refuses empty ones)."""
        present = {name: sorted(set(values)) for name, values in sets.items() if values}
        if not present:
            return
        names = {f"#{name}": name for name in present}
        values: dict[str, Any] = {f":{name}": {"SS": ids} for name, ids in present.items()}
        clause = f"{action} " + ", ".join(f"#{name} :{name}" for name in present)
        update = f"SET #cluster = :cluster, expires_at = if_not_exists(expires_at, :exp) {clause}" if action == "ADD" else clause
        if action == "ADD":
            names["#cluster"] = "cluster"
            values |= {":cluster": {"S": cluster}, ":exp": {"N": _epoch(datetime.now().astimezone() + INCIDENT_TTL)}}
        condition = {} if action == "ADD" else {"ConditionExpression": "attribute_exists(pk)"}  # never create an empty one
        try:
            self._call(
                self.dynamodb.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": "HOLDINGS"}},
                UpdateExpression=update,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                **condition,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc

    def breaker(self, cluster: str) -> BreakerState:
        item = self._get(f"CLUSTER#{cluster}", "BREAKER")
        return BreakerState.model_validate_json(item["state"]["S"]) if item else BreakerState()

    def save_breaker(self, cluster: str, breaker: BreakerState) -> None:
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={"pk": {"S": f"CLUSTER#{cluster}"}, "sk": {"S": "BREAKER"}, "state": {"S": breaker.model_dump_json()}},
        )

    def recovery_log(self, cluster: str) -> list[RecoveryLogEntry]:
        item = self._get(f"CLUSTER#{cluster}", "RECOVERIES")
        return [RecoveryLogEntry.model_validate_json(e["S"]) for e in item.get("entries", {}).get("L", [])] if item else []

    def log_recovery(self, cluster: str, entry: RecoveryLogEntry, keep_seconds: int) -> None:
        """Append a recovery, dropping entries older than ``keep_seconds``. Idempotent per incident."""
        entries = [
            e for e in self.recovery_log(cluster) if e.incident != entry.incident and e.at >= entry.at - timedelta(seconds=keep_seconds)
        ]
        entries.append(entry)
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={
                "pk": {"S": f"CLUSTER#{cluster}"},
                "sk": {"S": "RECOVERIES"},
                "entries": {"L": [{"S": e.model_dump_json()} for e in sorted(entries, key=lambda e: e.at)]},
            },
        )

    # --- incidents ----------------------------------------------------------------------
    def save_incident(self, record: IncidentRecord) -> None:
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={
                "pk": {"S": f"INCIDENT#{record.incident_id}"},
                "sk": {"S": "RECORD"},
                "cluster": {"S": record.cluster},
                "outcome": {"S": record.outcome},
                "recorded_at": {"S": record.recorded_at.isoformat()},
                "record": {"S": record.model_dump_json()},
                "expires_at": {"N": _epoch(record.recorded_at + INCIDENT_TTL)},
            },
        )

    def get_incident(self, incident_id: str) -> IncidentRecord | None:
        item = self._get(f"INCIDENT#{incident_id}", "RECORD")
        return IncidentRecord.model_validate_json(item["record"]["S"]) if item else None

    # --- recoveries waiting for their replaced nodes (Wait For Rejoin, Notice Cluster Event) ---
    # One item per cluster, one attribute per waiting execution ("wait:<execution>", the wait as
    # JSON): a Cluster Event reads every wait of its cluster with one GetItem.
    def await_rejoin(self, cluster: str, wait: RejoinWait, now: datetime) -> None:
        self._call(
            self.dynamodb.update_item,
            TableName=self.table_name,
            Key={"pk": {"S": f"REJOIN#{cluster}"}, "sk": {"S": "WAITS"}},
            UpdateExpression="SET #wait = :wait, expires_at = :exp",
            ExpressionAttributeNames={"#wait": f"{WAIT_PREFIX}{wait.execution}"},
            ExpressionAttributeValues={":wait": {"S": wait.model_dump_json()}, ":exp": {"N": _epoch(now + REJOIN_WAITS_TTL)}},
        )

    def rejoin_waits(self, cluster: str) -> list[RejoinWait]:
        item = self._get(f"REJOIN#{cluster}", "WAITS") or {}
        return [RejoinWait.model_validate_json(value["S"]) for name, value in sorted(item.items()) if name.startswith(WAIT_PREFIX)]

    def end_rejoin_wait(self, cluster: str, execution: str, task_token: str) -> None:
        """Remove the wait, unless the execution registered a newer one (another token) since."""
        try:
            self._call(
                self.dynamodb.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": f"REJOIN#{cluster}"}, "sk": {"S": "WAITS"}},
                UpdateExpression="REMOVE #wait",
                ConditionExpression="contains(#wait, :token)",
                ExpressionAttributeNames={"#wait": f"{WAIT_PREFIX}{execution}"},
                ExpressionAttributeValues={":token": {"S": json.dumps(task_token)}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc

    # --- every end notified once; the sweep's mark ---------------------------------------------
    def claim_notification(self, incident_id: str, now: datetime, lease: timedelta) -> bool:
        """The right to send an end's one notification, for ``lease``: False when it was sent, or
        while another delivery holds the right (it may send it; after the lease, anyone may)."""
        try:
            self._call(
                self.dynamodb.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": "NOTICE"}},
                UpdateExpression="SET lease_until = :until, expires_at = :exp",
                ConditionExpression="attribute_not_exists(sent_at) AND (attribute_not_exists(lease_until) OR lease_until < :now)",
                ExpressionAttributeValues={
                    ":until": {"N": _epoch(now + lease)},
                    ":now": {"N": _epoch(now)},
                    ":exp": {"N": _epoch(now + INCIDENT_TTL)},
                },
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
            return False
        return True

    def notification_sent(self, incident_id: str, now: datetime) -> None:
        self._call(
            self.dynamodb.update_item,
            TableName=self.table_name,
            Key={"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": "NOTICE"}},
            UpdateExpression="SET sent_at = :at, expires_at = :exp",
            ExpressionAttributeValues={":at": {"S": now.isoformat()}, ":exp": {"N": _epoch(now + INCIDENT_TTL)}},
        )

    def notified_at(self, incident_id: str) -> datetime | None:
        item = self._get(f"INCIDENT#{incident_id}", "NOTICE")
        sent = (item or {}).get("sent_at", {}).get("S")
        return datetime.fromisoformat(sent) if sent else None

    def ends_swept_until(self, cluster: str) -> datetime | None:
        item = self._get(f"CLUSTER#{cluster}", "ENDS_SWEPT")
        return datetime.fromisoformat(item["until"]["S"]) if item else None

    def save_ends_swept_until(self, cluster: str, moment: datetime) -> None:
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={"pk": {"S": f"CLUSTER#{cluster}"}, "sk": {"S": "ENDS_SWEPT"}, "until": {"S": moment.isoformat()}},
        )

    # --- helpers ------------------------------------------------------------------------
    @staticmethod
    def _node_key(cluster: str, node_id: str) -> str:
        return f"NODE#{cluster}#{node_id}"

    def _lock_holder(self, cluster: str, node_id: str, now: datetime) -> str | None:
        item = self._get(self._node_key(cluster, node_id), "LOCK")
        if not item or int(item["expires_at"]["N"]) < int(now.timestamp()):
            return None
        return str(item["incident"]["S"])

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        response = self._call(
            self.dynamodb.get_item, TableName=self.table_name, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
        )
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _call(self, method: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return method(**kwargs)  # type: ignore[no-any-return]
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise
            raise self._unavailable(exc) from exc
        except BotoCoreError as exc:
            raise LedgerUnavailable(f"ledger {self.table_name!r}: {exc}") from exc

    def _unavailable(self, exc: ClientError) -> Exception:
        kind = LedgerUnavailable if is_transient(exc) else LedgerError
        return kind(f"ledger {self.table_name!r}: {error_code(exc)}: {exc}")
