"""The safety policy's state, per cluster: CLUSTER#<cluster>/IN_RECOVERY (nodes counted against the
cluster cap: who holds each, until when; one item, written over the version read), /BREAKER (the
circuit breaker, versioned), /RECOVERY#<epoch>#<incident> (one recovery that acted: the breaker's and
repeat offenders' windows), and JOB_RESTARTS#<cluster>/<slot> (the job side of the breaker)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from hyperpod_recovery.adapters.ledger.holdings import HoldingsItems
from hyperpod_recovery.adapters.ledger.table import HIGHEST, RESERVATION_ATTEMPTS, epoch, sortable_epoch
from hyperpod_recovery.errors import LedgerUnavailable
from hyperpod_recovery.models.records import BreakerState, RecoveryLogEntry

RECOVERY_PREFIX = "RECOVERY#"
# A log entry outlives its window by this much before DynamoDB's TTL may drop it (TTL deletes
# within days of the time, never before it; reads filter by time anyway).
LOG_TTL_MARGIN = timedelta(days=1)

Places = dict[str, tuple[str, int]]  # node id -> (incident, expires epoch)


class SafetyItems(HoldingsItems):
    # --- the cluster cap ------------------------------------------------------------------
    def nodes_in_recovery(self, cluster: str, now: datetime) -> set[str]:
        """Nodes counted against the cap now: reservations that have not expired."""
        return set(self._reservations(cluster, now)[0])

    def capacity_places(self, cluster: str, now: datetime) -> dict[str, tuple[str, datetime]]:
        """The live places under the cluster cap: {node id: (incident, until)}."""
        live, _ = self._reservations(cluster, now)
        return {node: (incident, datetime.fromtimestamp(until, tz=now.tzinfo)) for node, (incident, until) in live.items()}

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
        raise self._changed_meanwhile(f"the cluster cap of {cluster}", "reserving")

    def release_capacity(self, cluster: str, incident_id: str, node_ids: list[str], now: datetime) -> None:
        """Give back this incident's places under the cap (another incident's are left alone)."""
        mine = set(node_ids)
        self._rewrite_places(
            cluster, now, "releasing", lambda live: {n: e for n, e in live.items() if not (n in mine and e[0] == incident_id)}
        )
        self._hold(incident_id, cluster, "DELETE", reserved=node_ids)

    def hold_capacity_until(self, cluster: str, incident_id: str, node_ids: list[str], until: datetime, now: datetime) -> None:
        """Keep this incident's places for ``node_ids`` only until ``until`` (never longer than they
        already had), and stop counting them among what the incident holds: nobody will give them
        back, they expire. For nodes an ended incident left out of service (a replacement in flight)."""
        wanted, deadline = set(node_ids), int(until.timestamp())
        self._rewrite_places(
            cluster,
            now,
            "holding",
            lambda live: {n: (e[0], min(e[1], deadline)) if n in wanted and e[0] == incident_id else e for n, e in live.items()},
        )
        self._hold(incident_id, cluster, "DELETE", reserved=node_ids)

    def _rewrite_places(self, cluster: str, now: datetime, doing: str, change: Callable[[Places], Places]) -> None:
        """Write ``change`` of the live places over the version read (nothing when it changes nothing)."""
        for _ in range(RESERVATION_ATTEMPTS):
            live, version = self._reservations(cluster, now)
            kept = change(dict(live))
            if kept == live or self._write_reservations(cluster, kept, version):
                return
        raise self._changed_meanwhile(f"the cluster cap of {cluster}", doing)

    def _reservations(self, cluster: str, now: datetime) -> tuple[Places, int]:
        """Live reservations {node id: (incident, expires epoch)} and the item's version."""
        item = self._get(f"CLUSTER#{cluster}", "IN_RECOVERY")
        if not item:
            return {}, 0
        entries = json.loads(item["reservations"]["S"])
        live = {n: (str(e[0]), int(e[1])) for n, e in entries.items() if int(e[1]) >= int(now.timestamp())}
        return live, int(item["version"]["N"])

    def _write_reservations(self, cluster: str, entries: Places, version: int) -> bool:
        # (compact: the item holds up to MaxNodesInRecovery places, tests/contract/test_ledger_item_sizes.py)
        places = json.dumps({n: list(e) for n, e in sorted(entries.items())}, separators=(",", ":"))
        written = self._write(
            "put",
            "attribute_not_exists(pk) OR version = :v",
            Item={
                "pk": {"S": f"CLUSTER#{cluster}"},
                "sk": {"S": "IN_RECOVERY"},
                "reservations": {"S": places},
                "version": {"N": str(version + 1)},
            },
            ExpressionAttributeValues={":v": {"N": str(version)}},
        )
        return written is not None

    # --- the circuit breaker ----------------------------------------------------------------
    def breaker(self, cluster: str) -> BreakerState:
        item = self._get(f"CLUSTER#{cluster}", "BREAKER")
        if not item:
            return BreakerState()
        state = BreakerState.model_validate_json(item["state"]["S"])
        return state.model_copy(update={"version": int(item["version"]["N"])})

    def save_breaker(self, cluster: str, breaker: BreakerState) -> None:
        """Write ``breaker`` over the state it was decided on (its ``version``), never over a change
        made since (another incident opened it, a human closed it): that raises LedgerUnavailable,
        and the step that decided is retried and decides again on what it reads then."""
        read = {"ExpressionAttributeValues": {":read": {"N": str(breaker.version)}}} if breaker.version else {}
        written = self._write(
            "put",
            "#version = :read" if breaker.version else "attribute_not_exists(pk)",
            Item={
                "pk": {"S": f"CLUSTER#{cluster}"},
                "sk": {"S": "BREAKER"},
                "state": {"S": breaker.model_dump_json()},
                "version": {"N": str(breaker.version + 1)},
            },
            **({"ExpressionAttributeNames": {"#version": "version"}} if breaker.version else {}),
            **read,
        )
        if written is None:
            raise LedgerUnavailable(f"ledger {self.table_name!r}: the circuit breaker of {cluster} changed since it was read; decide again")

    # --- the recovery log -----------------------------------------------------------------------
    def recovery_log(self, cluster: str, since: datetime | None = None) -> list[RecoveryLogEntry]:
        """The recoveries that acted since ``since`` (all kept, when None), oldest first, one per
        incident: an item each, read with one Query over the window."""
        low = RECOVERY_PREFIX + (sortable_epoch(since) if since is not None else "")
        found: dict[str, RecoveryLogEntry] = {}
        for item in self._query(f"CLUSTER#{cluster}", low, RECOVERY_PREFIX + HIGHEST):
            entry = RecoveryLogEntry.model_validate_json(item["entry"]["S"])
            found.setdefault(entry.incident, entry)  # a retried writer's second entry counts once
        return sorted(found.values(), key=lambda e: (e.at, e.incident))

    def log_recovery(self, cluster: str, entry: RecoveryLogEntry, keep_seconds: int) -> None:
        """Add a recovery to the log: an item of its own (no read, nothing another writer could
        erase), kept ``keep_seconds`` (the longest window that reads it). Idempotent per incident:
        the same entry writes the same item; a later one of the same incident is read as one."""
        self._put(
            {
                "pk": {"S": f"CLUSTER#{cluster}"},
                "sk": {"S": f"{RECOVERY_PREFIX}{sortable_epoch(entry.at)}#{entry.incident}"},
                "entry": {"S": entry.model_dump_json()},
                "expires_at": {"N": epoch(entry.at + timedelta(seconds=keep_seconds) + LOG_TTL_MARGIN)},
            }
        )

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
            item = {"pk": {"S": f"JOB_RESTARTS#{cluster}"}, "sk": {"S": f"{slot:05d}"}, "incident": {"S": incident_id}}
            taken = self._write(
                "put",
                "attribute_not_exists(pk) OR expires_at < :now",
                Item={**item, "expires_at": {"N": epoch(now + ttl)}},
                ExpressionAttributeValues={":now": {"N": epoch(now)}},
            )
            if taken is not None:
                return True
        raise self._changed_meanwhile(f"the job restarts of {cluster}", "reserving")

    def _job_restart_places(self, cluster: str, now: datetime) -> dict[int, tuple[str, int]]:
        """Live places {slot: (incident, expires epoch)}."""
        places: dict[int, tuple[str, int]] = {}
        for item in self._query(f"JOB_RESTARTS#{cluster}"):
            expires = int(item["expires_at"]["N"])
            if expires >= int(now.timestamp()):
                places[int(item["sk"]["S"])] = (item["incident"]["S"], expires)
        return places
