"""The ledger: our own state in one DynamoDB table (pk/sk strings, TTL attribute ``expires_at``).

Items:
    NODE#<cluster>#<node id>   / LOCK          which incident holds a node (conditional writes)
    INCIDENT#<incident id>     / RECORD        the incident record (outcome, timeline, phases, jobs)
    INCIDENT#<incident id>     / REPLACEMENTS  nodes whose replacement this incident already initiated
    INCIDENT#<incident id>     / HOLDINGS      what the incident holds (locks, cap places, claims) until it ends
    INCIDENT#<incident id>     / JOBS          the affected jobs as the agent described them (kept out of the workflow's state)
    INCIDENT#<incident id>     / EVIDENCE      a hang's evidence (scontrol show job, each node's stack dump)
    JOB#<cluster>#<job id>     / RESUBMISSION  which incident resubmits a job, and the new job id
    JOB#<cluster>#<job id>     / LINEAGE       the first job of the lineage this resubmission belongs to
    LINEAGE#<cluster>#<job id> / RESTARTS      every restart of that lineage (restart budget, crash loops)
    CLUSTER#<cluster>          / IN_RECOVERY   nodes counted against the cluster cap: who holds each, until when
    CLUSTER#<cluster>          / BREAKER       the circuit breaker (open/closed, why, by whom, history), versioned
    CLUSTER#<cluster>          / RECOVERY#<epoch>#<incident>   one recovery that acted (breaker and repeat-offender windows)
    LINEAGE#<cluster>#<job id> / RESTART#<new job id>          one restart of that lineage (restart budget, crash loops)
    REJOIN#<cluster>           / WAIT#<execution>              a recovery waiting for its replaced nodes (Cluster Events)
    INCIDENT#<incident id>     / EFFECT#<name>                 an outside effect made once per incident (its notification,
                                                               with the lease of a delivery that may send it)
    CLUSTER#<cluster>          / ENDS_SWEPT                    until when the sweep of ended executions recorded every end
    NODE#<cluster>#<node>      / HOLD                          a human's opt-out for a node (instance id or hostname)
    CLUSTER#<cluster>          / AUDIT#<epoch>#<n>             one change a human made through the CLI: who, why, what
    CLUSTER#<cluster>          / VERDICT#<epoch>#<rule>#<job>  a hang or slowdown verdict (once per episode), what was
                                                               done about it, and an operator's review of it

The RECORD items alone carry both ``cluster`` and ``recorded_at``: the sparse index
IncidentsByCluster (cluster, recorded_at) lists a cluster's incidents newest first for the
operator's ``hyperpod-recovery incidents``; no workflow step reads it.

No item grows with the cluster's history: what accumulates (recoveries, restarts, waits) is an item
per entry, read with one Query, and every item stays far below DynamoDB's 400 KB at the largest
parameters the template accepts (tests/contract/test_ledger_item_sizes.py). Every read-modify-write
is conditioned on what was read (a version, or the value itself), so two writers never erase each
other. Items of the previous layout (CLUSTER#/RECOVERIES, LINEAGE#/RESTARTS, REJOIN#/WAITS: one
item each) are still read, so a deploy loses nothing that was written before it; they are never
written again.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.adapters.backoff import BATCH_GET_BACKOFF, Backoff
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable
from hyperpod_recovery.models.commands import HangEvidenceResult, JobSpec
from hyperpod_recovery.models.hangs import HangVerdict, RecordedVerdict
from hyperpod_recovery.models.job_recovery import RestartEntry
from hyperpod_recovery.models.records import (
    AuditEntry,
    BreakerState,
    Effect,
    Holdings,
    IncidentRecord,
    LockOutcome,
    NodeHold,
    NodeLock,
    RecoveryLogEntry,
    RejoinWait,
    ResubmissionClaim,
)
from hyperpod_recovery.observability import logger

JOB_CLAIM_TTL = timedelta(days=30)
# The waits of a cluster's recoveries: a wait lasts at most the reboot and rejoin deadlines (2 days at most).
REJOIN_WAITS_TTL = timedelta(days=3)
WAIT_PREFIX = "wait:"
INCIDENT_TTL = timedelta(days=400)
# Optimistic writes of the cluster's reservation item: a conflict means another incident wrote it
# between our read and our write; read again and decide again, a bounded number of times.
RESERVATION_ATTEMPTS = 8
# What an updated verdict's action puts between what was done last and what was said before it.
VERDICT_BEFORE = " | before "
RECOVERY_PREFIX = "RECOVERY#"
RESTART_PREFIX = "RESTART#"
WAIT_ITEM_PREFIX = "WAIT#"
EFFECT_PREFIX = "EFFECT#"
AUDIT_PREFIX = "AUDIT#"
HOLD = "HOLD"
INCIDENTS_INDEX = "IncidentsByCluster"
AUDIT_TTL = INCIDENT_TTL
VERDICT_PREFIX = "VERDICT#"
# A verdict is kept as long as an incident record: a rule's precision is counted over them.
VERDICT_TTL = INCIDENT_TTL
BATCH_GET_KEYS = 100  # BatchGetItem: at most 100 items a call
# A log entry outlives its window by this much before DynamoDB's TTL may drop it (TTL deletes
# within days of the time, never before it; reads filter by time anyway).
LOG_TTL_MARGIN = timedelta(days=1)
# Step Functions lets an execution take the name of a closed one after 90 days (StartExecution:
# "unique for your account, Region, and state machine for 90 days"): an effect begun longer ago
# than that under an incident id belongs to an earlier life of the name, not to this one.
NAME_REUSE_AFTER = timedelta(days=90)
# Sorts after anything that follows a prefix in a sort key (DynamoDB orders strings by their UTF-8
# bytes; this is the highest code point).
_HIGHEST = "\U0010ffff"


def _claim(job_id: str, item: dict[str, Any], *, claimed: bool) -> ResubmissionClaim:
    """A RESUBMISSION item as read: its holder, its copy (once completed), when it was taken and
    until when an open one holds."""
    claimed_at = item.get("claimed_at", {}).get("S")
    open_until = item.get("claim_expires_at", {}).get("N")
    return ResubmissionClaim(
        job_id=job_id,
        incident_id=item.get("incident", {}).get("S", "unknown"),
        claimed=claimed,
        new_job_id=item.get("new_job_id", {}).get("S"),
        claimed_at=datetime.fromisoformat(claimed_at) if claimed_at else None,
        open_until=datetime.fromtimestamp(int(open_until), tz=UTC) if open_until else None,
    )


def _epoch(moment: datetime) -> str:
    return str(int(moment.timestamp()))


def _sortable_epoch(moment: datetime) -> str:
    """Seconds since 1970, zero-padded so that sort keys order as times do (until the year 33658)."""
    return f"{max(0, int(moment.timestamp())):012d}"


class DynamoLedger:
    dynamodb = LazyClient("dynamodb")

    def __init__(
        self,
        table_name: str,
        dynamodb: Any = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        draw: Callable[[], float] = random.random,
        batch_backoff: Backoff = BATCH_GET_BACKOFF,
    ) -> None:
        """``sleep`` and ``draw`` (a uniform draw in [0, 1]) pace the retries of BatchGetItem's
        unprocessed keys: a test gives its own, and never waits on real time."""
        self.table_name = table_name
        self._dynamodb = dynamodb
        self._sleep, self._draw, self._batch_backoff = sleep, draw, batch_backoff

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
                # Our own claim is taken again only while open: a completed one (the job was
                # resubmitted) is never overwritten back to open; it is read and answered as done.
                ConditionExpression="attribute_not_exists(pk) "
                "OR (attribute_not_exists(new_job_id) AND (incident = :me OR claim_expires_at < :now))",
                ExpressionAttributeValues={":me": {"S": incident_id}, ":now": {"N": _epoch(now)}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
        item = self._get(key["pk"]["S"], "RESUBMISSION") or {}
        holder = item.get("incident", {}).get("S", "unknown")
        claim = _claim(job_id, item, claimed=holder == incident_id)
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
        return _claim(job_id, item, claimed=False)

    def recreation_token(self, cluster: str, job_id: str, now: datetime) -> str:
        """EKS: the token of the job's re-creation, recorded here before the object is made (one per
        job, the first writer's: every incident and retry that re-creates the job uses the same one).
        The re-created object carries it; nobody else can know it before we make that object, so an
        object carrying it is ours, whatever its name, and one without it never is."""
        key = {"pk": {"S": f"JOB#{cluster}#{job_id}"}, "sk": {"S": "RECREATION"}}
        try:
            self._call(
                self.dynamodb.put_item,
                TableName=self.table_name,
                Item={**key, "token": {"S": uuid.uuid4().hex}, "expires_at": {"N": _epoch(now + JOB_CLAIM_TTL)}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":  # (recorded before: that one stands)
                raise self._unavailable(exc) from exc
        item = self._get(key["pk"]["S"], "RECREATION") or {}
        return str(item["token"]["S"])

    # --- job restarts in the breaker's window (Plan Job Restart: the job side of the breaker) ----
    def job_restarts(self, cluster: str, now: datetime) -> list[str]:
        """The incidents holding a place for a job restart in the breaker's window (not expired)."""
        return sorted(incident for incident, _ in self._job_restart_places(cluster, now).values())

    def reserve_job_restart(self, cluster: str, incident_id: str, limit: int, now: datetime, ttl: timedelta) -> bool:
        """A place for this incident's job restart among at most ``limit`` in the window (each place
        expires ``ttl`` after it was taken; never given back: it counts a restart that happened).
        False: the window is full. One small item per place (slot ``0..limit-1``, taken with a
        condition that it is free or expired): no item grows with the limit, and two incidents
        taking the last place at once get it once. Idempotent per incident (a retried step)."""
        digest = int(hashlib.sha256(incident_id.encode()).hexdigest(), 16)
        for _ in range(RESERVATION_ATTEMPTS):
            places = self._job_restart_places(cluster, now)
            if any(incident == incident_id for incident, _ in places.values()):
                return True
            if len(places) >= limit:
                return False
            free = [slot for slot in range(limit) if slot not in places]
            slot = free[digest % len(free)]  # (spread: a storm's incidents do not all race for slot 0)
            try:
                self._call(
                    self.dynamodb.put_item,
                    TableName=self.table_name,
                    Item={
                        "pk": {"S": f"JOB_RESTARTS#{cluster}"},
                        "sk": {"S": f"{slot:05d}"},
                        "incident": {"S": incident_id},
                        "expires_at": {"N": _epoch(now + ttl)},
                    },
                    ConditionExpression="attribute_not_exists(pk) OR expires_at < :now",
                    ExpressionAttributeValues={":now": {"N": _epoch(now)}},
                )
                return True
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise self._unavailable(exc) from exc
        raise LedgerUnavailable(
            f"ledger {self.table_name!r}: the job restarts of {cluster} changed {RESERVATION_ATTEMPTS} times while reserving"
        )

    def _job_restart_places(self, cluster: str, now: datetime) -> dict[int, tuple[str, int]]:
        """Live places {slot: (incident, expires epoch)}."""
        places: dict[int, tuple[str, int]] = {}
        start: dict[str, Any] | None = None
        while True:
            page = self._call(
                self.dynamodb.query,
                TableName=self.table_name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": f"JOB_RESTARTS#{cluster}"}},
                ConsistentRead=True,
                **({"ExclusiveStartKey": start} if start else {}),
            )
            for item in page.get("Items", []):
                expires = int(item["expires_at"]["N"])
                if expires >= int(now.timestamp()):
                    places[int(item["sk"]["S"])] = (item["incident"]["S"], expires)
            start = page.get("LastEvaluatedKey")
            if not start:
                return places

    # --- the EKS job poller's memory (Find Failed Jobs) -------------------------------------
    def failures_started(self, cluster: str, now: datetime) -> set[str]:
        """The job failures whose JobRecovery a poll started (their event keys, ``<uid>:<epoch>``),
        not yet expired: the poll skips them without asking Kubernetes or Step Functions again.
        One item per failure (written once, never rewritten), one Query per poll."""
        keys: set[str] = set()
        start: dict[str, Any] | None = None
        while True:
            page = self._call(
                self.dynamodb.query,
                TableName=self.table_name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": f"POLLED#{cluster}"}},
                ProjectionExpression="sk, expires_at",
                ConsistentRead=True,
                **({"ExclusiveStartKey": start} if start else {}),
            )
            # (DynamoDB's TTL deletes expired items within days: an expired one is not remembered)
            keys |= {i["sk"]["S"] for i in page.get("Items", []) if int(i["expires_at"]["N"]) >= int(now.timestamp())}
            start = page.get("LastEvaluatedKey")
            if not start:
                return keys

    def note_failure_started(self, cluster: str, event_key: str, until: datetime) -> None:
        """Remember that a poll started this failure's JobRecovery until ``until`` (when it would be
        too old to start anyway). Written after the start: a lost write only costs the next poll
        one idempotent StartExecution (the execution's name is the failure)."""
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={"pk": {"S": f"POLLED#{cluster}"}, "sk": {"S": event_key}, "expires_at": {"N": _epoch(until)}},
        )

    # --- job lineages (restart budget, crash loops) ---------------------------------------
    def lineage_root(self, cluster: str, job_id: str) -> str | None:
        item = self._get(f"JOB#{cluster}#{job_id}", "LINEAGE")
        return str(item["root"]["S"]) if item else None

    def restart_history(self, cluster: str, root: str) -> list[RestartEntry]:
        """Every restart of the lineage, oldest first: an item each (and those of the previous
        layout's one RESTARTS item, which sorts before them in the same partition)."""
        entries: dict[str, RestartEntry] = {}
        for item in self._query(f"LINEAGE#{cluster}#{root}", "RESTART", "RESTART" + _HIGHEST):
            if item["sk"]["S"] == "RESTARTS":
                listed = [RestartEntry.model_validate_json(e["S"]) for e in item.get("restarts", {}).get("L", [])]
            elif item["sk"]["S"].startswith(RESTART_PREFIX):
                listed = [RestartEntry.model_validate_json(item["entry"]["S"])]
            else:
                continue
            for entry in listed:
                entries.setdefault(entry.new_job_id, entry)
        return sorted(entries.values(), key=lambda e: e.restarted_at)

    def record_restart(self, cluster: str, root: str, entry: RestartEntry) -> None:
        """Add a restart to the lineage (an item of its own, keyed by the new job: a retried Record
        Job Outcome writes the same item again) and point the new job at its root. A lineage's
        restarts are bounded by its restart budget in any window; each expires on its own."""
        expires = {"N": _epoch(entry.restarted_at + JOB_CLAIM_TTL)}
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={
                "pk": {"S": f"LINEAGE#{cluster}#{root}"},
                "sk": {"S": f"{RESTART_PREFIX}{entry.new_job_id}"},
                "entry": {"S": entry.model_dump_json()},
                "expires_at": expires,
            },
        )
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={
                "pk": {"S": f"JOB#{cluster}#{entry.new_job_id}"},
                "sk": {"S": "LINEAGE"},
                "root": {"S": root},
                "expires_at": expires,
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
                    # (compact: the item holds up to MaxNodesInRecovery places, tests/contract/test_ledger_item_sizes.py)
                    "reservations": {"S": json.dumps({n: list(e) for n, e in sorted(entries.items())}, separators=(",", ":"))},
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

    def save_evidence(self, incident_id: str, evidence: HangEvidenceResult, now: datetime) -> None:
        """A hang's evidence, kept with its incident (at most 16 dumps of 2 KB: far below 400 KB)."""
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={
                "pk": {"S": f"INCIDENT#{incident_id}"},
                "sk": {"S": "EVIDENCE"},
                "evidence": {"S": evidence.model_dump_json()},
                "expires_at": {"N": _epoch(now + INCIDENT_TTL)},
            },
        )

    def evidence_of(self, incident_id: str) -> HangEvidenceResult | None:
        item = self._get(f"INCIDENT#{incident_id}", "EVIDENCE")
        return None if item is None else HangEvidenceResult.model_validate_json(item["evidence"]["S"])

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

    # --- the circuit breaker ---------------------------------------------------------------
    def breaker(self, cluster: str) -> BreakerState:
        item = self._get(f"CLUSTER#{cluster}", "BREAKER")
        if not item:
            return BreakerState()
        state = BreakerState.model_validate_json(item["state"]["S"])
        return state.model_copy(update={"version": int(item.get("version", {}).get("N", "0"))})

    def save_breaker(self, cluster: str, breaker: BreakerState) -> None:
        """Write ``breaker`` over the state it was decided on (its ``version``), never over a change
        made since (another incident opened it, a human closed it): that raises LedgerUnavailable,
        and the step that decided is retried and decides again on what it reads then."""
        condition = "attribute_not_exists(#version)" if breaker.version == 0 else "#version = :read"
        values = {} if breaker.version == 0 else {":read": {"N": str(breaker.version)}}
        try:
            self._call(
                self.dynamodb.put_item,
                TableName=self.table_name,
                Item={
                    "pk": {"S": f"CLUSTER#{cluster}"},
                    "sk": {"S": "BREAKER"},
                    "state": {"S": breaker.model_dump_json()},
                    "version": {"N": str(breaker.version + 1)},
                },
                ConditionExpression=condition,
                ExpressionAttributeNames={"#version": "version"},
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
            raise LedgerUnavailable(
                f"ledger {self.table_name!r}: the circuit breaker of {cluster} changed since it was read; decide again"
            ) from exc

    # --- the recovery log (breaker and repeat-offender windows) ------------------------------
    def recovery_log(self, cluster: str, since: datetime | None = None) -> list[RecoveryLogEntry]:
        """The recoveries that acted since ``since`` (all kept, when None), oldest first, one per
        incident: an item each, read with one Query over the window, plus the previous layout's one
        RECOVERIES item while it exists."""
        low = RECOVERY_PREFIX + (_sortable_epoch(since) if since is not None else "")
        found: dict[str, RecoveryLogEntry] = {}
        for item in self._query(f"CLUSTER#{cluster}", low, RECOVERY_PREFIX + _HIGHEST):
            entry = RecoveryLogEntry.model_validate_json(item["entry"]["S"])
            found.setdefault(entry.incident, entry)  # a retried writer's second entry counts once
        for entry in self._legacy_recovery_log(cluster):
            if since is None or entry.at >= since:
                found.setdefault(entry.incident, entry)
        return sorted(found.values(), key=lambda e: (e.at, e.incident))

    def log_recovery(self, cluster: str, entry: RecoveryLogEntry, keep_seconds: int) -> None:
        """Add a recovery to the log: an item of its own (no read, nothing another writer could
        erase), kept ``keep_seconds`` (the longest window that reads it). Idempotent per incident:
        the same entry writes the same item; a later one of the same incident is read as one."""
        self._put_recovery(cluster, entry, keep_seconds)
        self._retire_legacy_recovery_log(cluster, entry.at - timedelta(seconds=keep_seconds), keep_seconds)

    def _put_recovery(self, cluster: str, entry: RecoveryLogEntry, keep_seconds: int) -> None:
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={
                "pk": {"S": f"CLUSTER#{cluster}"},
                "sk": {"S": f"{RECOVERY_PREFIX}{_sortable_epoch(entry.at)}#{entry.incident}"},
                "entry": {"S": entry.model_dump_json()},
                "expires_at": {"N": _epoch(entry.at + timedelta(seconds=keep_seconds) + LOG_TTL_MARGIN)},
            },
        )

    def _legacy_recovery_log(self, cluster: str) -> list[RecoveryLogEntry]:
        item = self._get(f"CLUSTER#{cluster}", "RECOVERIES")
        return [RecoveryLogEntry.model_validate_json(e["S"]) for e in item.get("entries", {}).get("L", [])] if item else []

    def _retire_legacy_recovery_log(self, cluster: str, since: datetime, keep_seconds: int) -> None:
        """Move the previous layout's entries still in the window to items of their own, then
        delete its item, only if it is still what was read (a writer of the previous version,
        during the deploy, may have rewritten it: then the next recovery logged moves it)."""
        item = self._get(f"CLUSTER#{cluster}", "RECOVERIES")
        if not item:
            return
        for raw in item.get("entries", {}).get("L", []):
            entry = RecoveryLogEntry.model_validate_json(raw["S"])
            if entry.at >= since:
                self._put_recovery(cluster, entry, keep_seconds)
        try:
            self._call(
                self.dynamodb.delete_item,
                TableName=self.table_name,
                Key={"pk": {"S": f"CLUSTER#{cluster}"}, "sk": {"S": "RECOVERIES"}},
                ConditionExpression="attribute_not_exists(entries) OR entries = :read",
                ExpressionAttributeValues={":read": item.get("entries", {"L": []})},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc

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
    # An item per waiting execution in the cluster's partition: a Cluster Event reads every wait of
    # its cluster with one Query (which also returns the previous layout's one WAITS item, an
    # attribute per wait, while it lives: at most REJOIN_WAITS_TTL after the deploy).
    def await_rejoin(self, cluster: str, wait: RejoinWait, now: datetime) -> None:
        # A wait lasts until its own timeout; the item outlives it by a margin (TTL deletes late,
        # and Notice Cluster Event removes a stale one it meets).
        self._call(
            self.dynamodb.update_item,
            TableName=self.table_name,
            Key={"pk": {"S": f"REJOIN#{cluster}"}, "sk": {"S": f"{WAIT_ITEM_PREFIX}{wait.execution}"}},
            UpdateExpression="SET #wait = :wait, task_token = :token, expires_at = :exp",
            ExpressionAttributeNames={"#wait": "wait"},
            ExpressionAttributeValues={
                ":wait": {"S": wait.model_dump_json()},
                ":token": {"S": wait.task_token},
                ":exp": {"N": _epoch(max(now, wait.until) + REJOIN_WAITS_TTL)},
            },
        )

    def rejoin_waits(self, cluster: str) -> list[RejoinWait]:
        waits: dict[str, RejoinWait] = {}
        for item in self._query(f"REJOIN#{cluster}", "WAIT", "WAIT" + _HIGHEST):
            if item["sk"]["S"].startswith(WAIT_ITEM_PREFIX):
                wait = RejoinWait.model_validate_json(item["wait"]["S"])
                waits[wait.execution] = wait
            elif item["sk"]["S"] == "WAITS":
                for name, value in item.items():
                    if name.startswith(WAIT_PREFIX):
                        legacy = RejoinWait.model_validate_json(value["S"])
                        waits.setdefault(legacy.execution, legacy)
        return [waits[name] for name in sorted(waits)]

    def end_rejoin_wait(self, cluster: str, execution: str, task_token: str) -> None:
        """Remove the wait, unless the execution registered a newer one (another token) since."""
        try:
            self._call(
                self.dynamodb.delete_item,
                TableName=self.table_name,
                Key={"pk": {"S": f"REJOIN#{cluster}"}, "sk": {"S": f"{WAIT_ITEM_PREFIX}{execution}"}},
                ConditionExpression="task_token = :token",
                ExpressionAttributeValues={":token": {"S": task_token}},
            )
            return
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
        # Not an item of its own with this token: a wait of the previous layout, if any.
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

    # --- outside effects made once per incident ------------------------------------------------
    def begin_effect(self, incident_id: str, name: str, now: datetime) -> Effect:
        """The effect ``name`` of the incident, begun now unless an earlier run of the step began it
        (then that one: when it began, whether it was done, what it answered). A conditional write:
        of two runs, one begins it."""
        key = {"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": f"{EFFECT_PREFIX}{name}"}}
        try:
            self._call(
                self.dynamodb.put_item,
                TableName=self.table_name,
                Item={
                    **key,
                    "started_at": {"S": now.isoformat()},
                    "started_epoch": {"N": _epoch(now)},
                    "expires_at": {"N": _epoch(now + INCIDENT_TTL)},
                },
                ConditionExpression="attribute_not_exists(pk) OR started_epoch < :reused",
                ExpressionAttributeValues={":reused": {"N": _epoch(now - NAME_REUSE_AFTER)}},
            )
            return Effect(incident=incident_id, name=name, started_at=now)
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
        found = self.effect_of(incident_id, name)
        if found is None:  # deleted between our write and our read: nothing else deletes it
            raise LedgerUnavailable(f"ledger {self.table_name!r}: effect {name} of {incident_id} vanished while read")
        return found

    def finish_effect(self, incident_id: str, name: str, now: datetime, result: str | None = None) -> None:
        # (an effect finished without having been begun is begun now: the item is whole either way)
        values: dict[str, Any] = {
            ":done": {"S": now.isoformat()},
            ":epoch": {"N": _epoch(now)},
            ":exp": {"N": _epoch(now + INCIDENT_TTL)},
        }
        update = (
            "SET done_at = :done, started_at = if_not_exists(started_at, :done), "
            "started_epoch = if_not_exists(started_epoch, :epoch), expires_at = if_not_exists(expires_at, :exp)"
        )
        if result is not None:
            values[":result"] = {"S": result}
            update += ", #result = :result"
        self._call(
            self.dynamodb.update_item,
            TableName=self.table_name,
            Key={"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": f"{EFFECT_PREFIX}{name}"}},
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
        try:
            self._call(
                self.dynamodb.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": f"{EFFECT_PREFIX}notification"}},
                UpdateExpression="SET lease_until = :until",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(done_at) "
                "AND (attribute_not_exists(lease_until) OR lease_until < :now)",
                ExpressionAttributeValues={":until": {"N": _epoch(now + lease)}, ":now": {"N": _epoch(now)}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
            return False
        return True

    def ends_swept_until(self, cluster: str) -> datetime | None:
        item = self._get(f"CLUSTER#{cluster}", "ENDS_SWEPT")
        return datetime.fromisoformat(item["until"]["S"]) if item else None

    def save_ends_swept_until(self, cluster: str, moment: datetime) -> None:
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={"pk": {"S": f"CLUSTER#{cluster}"}, "sk": {"S": "ENDS_SWEPT"}, "until": {"S": moment.isoformat()}},
        )

    # --- the operator's view and hand (hyperpod-recovery incidents, locks, hold, stop) ---------
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
            response = self._call(
                self.dynamodb.query,
                TableName=self.table_name,
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
            records += [IncidentRecord.model_validate_json(item["record"]["S"]) for item in response.get("Items", []) if "record" in item]
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        return records[:limit]

    def node_locks(self, cluster: str, now: datetime) -> list[NodeLock]:
        """Every live node lock of the cluster (instance ids and ``host:`` logical nodes). A Scan:
        the locks are one item per node, keyed by node; the table is small (records and logs of
        one cluster) and this is a human's command, never a workflow step."""
        found = []
        for item in self._scan_node_items(cluster, "LOCK"):
            if int(item["expires_at"]["N"]) < int(now.timestamp()):
                continue  # expired: the next incident takes it over (acquire_locks)
            found.append(
                NodeLock(
                    node=item["pk"]["S"].removeprefix(self._node_key(cluster, "")),
                    incident=item["incident"]["S"],
                    acquired_at=item["acquired_at"]["S"] if "acquired_at" in item else None,
                    expires_at=datetime.fromtimestamp(int(item["expires_at"]["N"]), tz=now.tzinfo),
                )
            )
        return sorted(found, key=lambda lock: lock.node)

    def release_lock(self, cluster: str, node: str, incident: str) -> bool:
        """Delete the lock of ``node`` if ``incident`` still holds it (a human's release); False
        when it is gone or another incident holds it now."""
        try:
            self._call(
                self.dynamodb.delete_item,
                TableName=self.table_name,
                Key={"pk": {"S": self._node_key(cluster, node)}, "sk": {"S": "LOCK"}},
                ConditionExpression="incident = :holder",
                ExpressionAttributeValues={":holder": {"S": incident}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
            return False
        return True

    def capacity_places(self, cluster: str, now: datetime) -> dict[str, tuple[str, datetime]]:
        """The live places under the cluster cap: {node id: (incident, until)}."""
        live, _ = self._reservations(cluster, now)
        return {node: (incident, datetime.fromtimestamp(until, tz=now.tzinfo)) for node, (incident, until) in live.items()}

    def node_holds(self, cluster: str, nodes: Sequence[str]) -> dict[str, NodeHold]:
        """The holds on any of ``nodes`` (instance ids and hostnames), by node: BatchGetItem, at most
        100 keys a call (its API reference); what it leaves unprocessed is asked again after a
        jittered, growing wait (adapters/backoff.py), and still unread at the end is LedgerUnavailable:
        a partial answer would miss a human's hold."""
        pending = [{"pk": {"S": self._node_key(cluster, node)}, "sk": {"S": HOLD}} for node in dict.fromkeys(nodes)]
        holds: dict[str, NodeHold] = {}
        delays = self._batch_backoff.delays(self._draw)
        retries, waited = 0, 0.0
        while pending:
            asked, pending = pending[:BATCH_GET_KEYS], pending[BATCH_GET_KEYS:]
            response = self._call(self.dynamodb.batch_get_item, RequestItems={self.table_name: {"Keys": asked, "ConsistentRead": True}})
            for item in response.get("Responses", {}).get(self.table_name, []):
                hold = NodeHold.model_validate_json(item["hold"]["S"])
                holds[hold.node] = hold
            unprocessed: list[dict[str, Any]] = response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
            if not unprocessed:
                continue
            delay = next(delays, None)
            if delay is None:
                raise LedgerUnavailable(
                    f"ledger {self.table_name!r}: BatchGetItem left {len(unprocessed) + len(pending)} hold(s) unread "
                    f"after {retries} retries and {waited:.2f} s of backoff"
                )
            self._sleep(delay)
            retries, waited = retries + 1, waited + delay
            pending = unprocessed + pending
        return holds

    def all_node_holds(self, cluster: str) -> list[NodeHold]:
        return sorted(
            (NodeHold.model_validate_json(item["hold"]["S"]) for item in self._scan_node_items(cluster, HOLD)), key=lambda h: h.node
        )

    def hold_node(self, cluster: str, hold: NodeHold) -> NodeHold | None:
        """Put the hold unless the node is held already: None when written, else the hold in place
        (a second hold does not overwrite who and why)."""
        try:
            self._call(
                self.dynamodb.put_item,
                TableName=self.table_name,
                Item={"pk": {"S": self._node_key(cluster, hold.node)}, "sk": {"S": HOLD}, "hold": {"S": hold.model_dump_json()}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
            return self.node_holds(cluster, [hold.node]).get(hold.node) or hold
        return None

    def unhold_node(self, cluster: str, node: str, read: NodeHold | None = None) -> NodeHold | None:
        """Remove the hold of ``node`` (only if it is still ``read``, when given: a hold placed again
        since is another human's); the hold removed, or None if there was none or it had changed."""
        condition: dict[str, Any] = {}
        if read is not None:
            condition = {"ConditionExpression": "#hold = :read", "ExpressionAttributeNames": {"#hold": "hold"},
                         "ExpressionAttributeValues": {":read": {"S": read.model_dump_json()}}}  # fmt: skip
        try:
            response = self._call(
                self.dynamodb.delete_item,
                TableName=self.table_name,
                Key={"pk": {"S": self._node_key(cluster, node)}, "sk": {"S": HOLD}},
                ReturnValues="ALL_OLD",
                **condition,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise self._unavailable(exc) from exc
            return None
        old = response.get("Attributes")
        return NodeHold.model_validate_json(old["hold"]["S"]) if old else None

    def audit(self, cluster: str, entry: AuditEntry) -> None:
        """Keep a human's change: an item of its own (nothing to overwrite), kept as long as records."""
        self._call(
            self.dynamodb.put_item,
            TableName=self.table_name,
            Item={
                "pk": {"S": f"CLUSTER#{cluster}"},
                "sk": {"S": f"{AUDIT_PREFIX}{_sortable_epoch(entry.at)}#{uuid.uuid4().hex[:12]}"},
                "entry": {"S": entry.model_dump_json()},
                "expires_at": {"N": _epoch(entry.at + AUDIT_TTL)},
            },
        )

    def audit_log(self, cluster: str, since: datetime | None = None) -> list[AuditEntry]:
        low = AUDIT_PREFIX + (_sortable_epoch(since) if since is not None else "")
        return [
            AuditEntry.model_validate_json(item["entry"]["S"]) for item in self._query(f"CLUSTER#{cluster}", low, AUDIT_PREFIX + _HIGHEST)
        ]

    # --- hang and slowdown verdicts ----------------------------------------------------------
    @staticmethod
    def _verdict_key(verdict: HangVerdict) -> str:
        # By episode: the same stall seen a minute later is the same item (recorded once).
        return f"{VERDICT_PREFIX}{_sortable_epoch(verdict.episode_at)}#{verdict.rule}#{verdict.job}"

    def _verdict_item(self, recorded: RecordedVerdict) -> dict[str, Any]:
        verdict = recorded.verdict
        return {
            "pk": {"S": f"CLUSTER#{verdict.cluster}"},
            "sk": {"S": self._verdict_key(verdict)},
            "verdict": {"S": recorded.model_dump_json()},
            "expires_at": {"N": _epoch(verdict.decided_at + VERDICT_TTL)},
        }

    def record_verdict(self, recorded: RecordedVerdict) -> bool:
        """Keep a verdict once per episode: False when this episode's verdict is already kept. One of
        Detect Hung Jobs' that started nothing (left to another incident, or its start refused) is
        updated when a later tick of the same episode does otherwise (starts the recovery, or leaves
        it for another reason), what it said before kept after it and its review kept: the record
        never says "not acted on" of a stall that was acted on, nor names a recovery that never ran."""
        try:
            self._call(
                self.dynamodb.put_item,
                TableName=self.table_name,
                Item=self._verdict_item(recorded),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError:  # (ConditionalCheckFailed: _call re-raises only that one)
            # (an imported one is told once, as first kept; an observed one says the same every tick)
            if recorded.verdict.imported is None and recorded.verdict.mode == "enforce":
                self._update_kept_verdict(recorded)
            return False
        return True

    def _update_kept_verdict(self, now: RecordedVerdict) -> None:
        verdict = now.verdict
        for _ in range(RESERVATION_ATTEMPTS):  # (an operator's review written meanwhile: read again)
            try:
                was = self.verdict(verdict.cluster, verdict.rule, verdict.job, verdict.episode_at)
            except ValidationError:  # (an item of a layout this code cannot read: left as it is)
                logger.warning("a kept verdict could not be read to update it", extra={"job": verdict.job, "action": now.action[:200]})
                return
            if was is None or was.execution is not None or was.action.split(VERDICT_BEFORE, 1)[0] == now.action:
                return  # (a started recovery is the episode's last word; the same words again change nothing)
            action = f"{now.action}{VERDICT_BEFORE}{verdict.decided_at:%Y-%m-%d %H:%M:%S} UTC: {was.action}"
            if self.review_verdict(was, was.model_copy(update={"execution": now.execution, "action": action[:512]})):
                return

    def verdicts(self, cluster: str, since: datetime | None = None) -> list[RecordedVerdict]:
        """The cluster's verdicts by episode, oldest first (every page)."""
        low = VERDICT_PREFIX + (_sortable_epoch(since) if since is not None else "")
        return [
            RecordedVerdict.model_validate_json(item["verdict"]["S"])
            for item in self._query(f"CLUSTER#{cluster}", low, VERDICT_PREFIX + _HIGHEST)
        ]

    def review_verdict(self, was: RecordedVerdict, review: RecordedVerdict) -> bool:
        """An operator's review, written only over the verdict exactly as the operator read it (``was``):
        False when it changed meanwhile (someone else reviewed it), and nothing is written."""
        try:
            self._call(
                self.dynamodb.put_item,
                TableName=self.table_name,
                Item=self._verdict_item(review),
                ConditionExpression="verdict = :was",
                ExpressionAttributeValues={":was": {"S": was.model_dump_json()}},
            )
        except ClientError:  # (ConditionalCheckFailed: _call re-raises only that one)
            return False
        return True

    def verdict(self, cluster: str, rule: str, job: str, episode_at: datetime) -> RecordedVerdict | None:
        """One verdict by its key (the operator's ``verdicts confirm|reject`` names it), read consistently."""
        item = self._get(f"CLUSTER#{cluster}", f"{VERDICT_PREFIX}{_sortable_epoch(episode_at)}#{rule}#{job}")
        return RecordedVerdict.model_validate_json(item["verdict"]["S"]) if item else None

    def _scan_node_items(self, cluster: str, sort_key: str) -> list[dict[str, Any]]:
        return self._every_page(
            self.dynamodb.scan,
            TableName=self.table_name,
            FilterExpression="sk = :sk AND begins_with(pk, :node)",
            ExpressionAttributeValues={":sk": {"S": sort_key}, ":node": {"S": self._node_key(cluster, "")}},
            ConsistentRead=True,
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

    def _query(self, pk: str, low: str, high: str) -> list[dict[str, Any]]:
        """Every item of partition ``pk`` whose sort key is between ``low`` and ``high``, every page."""
        return self._every_page(
            self.dynamodb.query,
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :low AND :high",
            ExpressionAttributeValues={":pk": {"S": pk}, ":low": {"S": low}, ":high": {"S": high}},
            ConsistentRead=True,
        )

    def _every_page(self, method: Any, **request: Any) -> list[dict[str, Any]]:
        """The items of every page of a Query or Scan (LastEvaluatedKey -> ExclusiveStartKey)."""
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            response = self._call(method, **request, **({"ExclusiveStartKey": start} if start else {}))
            items += response.get("Items", [])
            start = response.get("LastEvaluatedKey")
            if not start:
                return items

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
