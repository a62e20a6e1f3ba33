"""The ledger's in-memory fake (ports.Ledger: every role), held to DynamoLedger's expectations by
tests/contract/test_ledger_contract.py. tests/fakes.py re-exports it."""

from __future__ import annotations

import copy
import uuid
from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.adapters.ledger.verdicts import VERDICT_BEFORE
from hyperpod_recovery.errors import LedgerUnavailable
from hyperpod_recovery.models.commands import JobSpec
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.models.job_recovery import RestartEntry
from hyperpod_recovery.models.planned_swap import SwapRecord
from hyperpod_recovery.models.records import (
    BreakerState,
    Effect,
    Holdings,
    IncidentRecord,
    LockOutcome,
    NodeHold,
    RecoveryLogEntry,
    RejoinWait,
    ResubmissionClaim,
)


class FakeLedger:
    def __init__(self) -> None:
        self.locks: dict[tuple[str, str], tuple[str, datetime]] = {}
        self.replacements: dict[str, set[str]] = {}
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.incidents: dict[str, IncidentRecord] = {}
        self.swaps: dict[str, SwapRecord] = {}
        self.lineages: dict[tuple[str, str], str] = {}
        self.restarts: dict[tuple[str, str], list[RestartEntry]] = {}
        self.reservations: dict[str, dict[str, tuple[str, datetime]]] = {}  # cluster -> node -> (incident, expires)
        self.held: dict[str, Holdings] = {}
        self.jobs: dict[str, list[JobSpec]] = {}
        self.breakers: dict[str, BreakerState] = {}
        self.recoveries: dict[str, list[RecoveryLogEntry]] = {}
        self.waits: dict[str, dict[str, RejoinWait]] = {}
        self.effects: dict[tuple[str, str], Effect] = {}
        self.tokens: dict[tuple[str, str], str] = {}
        self.polled: dict[tuple[str, str], datetime] = {}
        self.job_restart_places: dict[tuple[str, str], datetime] = {}
        self.notices: dict[str, datetime] = {}  # incident -> the lease on its page until
        self.swept: dict[str, datetime] = {}
        self.holds: dict[tuple[str, str], NodeHold] = {}  # (cluster, instance id or hostname) -> a human's hold
        self.evidence: dict[str, Any] = {}
        self.kept_verdicts: dict[tuple[str, int, str, str], RecordedVerdict] = {}  # (cluster, episode epoch, rule, job)

    def acquire_locks(self, incident_id: str, cluster: str, node_ids: list[str], now: datetime, ttl: timedelta) -> LockOutcome:
        acquired, held = [], {}
        for nid in node_ids:
            current = self.locks.get((cluster, nid))
            if current is None or current[0] == incident_id or current[1] < now:
                self.locks[(cluster, nid)] = (incident_id, now + ttl)
                acquired.append(nid)
            else:
                held[nid] = current[0]
        self._hold(incident_id, cluster, "locks", acquired)
        return LockOutcome(acquired=acquired, held_elsewhere=held)

    def lock_holders(self, cluster: str, node_ids: list[str], now: datetime) -> dict[str, str]:
        return {n: self.locks[(cluster, n)][0] for n in node_ids if (cluster, n) in self.locks and self.locks[(cluster, n)][1] >= now}

    def node_holds(self, cluster: str, nodes: Any) -> dict[str, NodeHold]:
        return {n: self.holds[(cluster, n)] for n in nodes if (cluster, n) in self.holds}

    def release_locks(self, incident_id: str, cluster: str, node_ids: list[str], hold_until: datetime | None) -> None:
        for nid in node_ids:
            current = self.locks.get((cluster, nid))
            if current is None or current[0] != incident_id:
                continue
            if hold_until is None:
                del self.locks[(cluster, nid)]
            else:
                self.locks[(cluster, nid)] = (incident_id, hold_until)
        self._unhold(incident_id, "locks", node_ids)

    def replacements_initiated(self, incident_id: str) -> set[str]:
        return set(self.replacements.get(incident_id, set()))

    def mark_replacements_initiated(self, incident_id: str, node_ids: list[str], now: datetime) -> None:
        if node_ids:
            self.replacements.setdefault(incident_id, set()).update(node_ids)

    def claim_resubmission(self, cluster: str, job_id: str, incident_id: str, now: datetime, ttl: timedelta) -> ResubmissionClaim:
        current = self.claims.get((cluster, job_id))
        if current is None or (current["new_job_id"] is None and current["expires"] < now):
            current = {"incident": incident_id, "new_job_id": None, "expires": now + ttl, "claimed_at": now}
            self.claims[(cluster, job_id)] = current
        claimed = current["incident"] == incident_id
        if claimed and current["new_job_id"] is None:
            self._hold(incident_id, cluster, "claims", [job_id])
        return self._claim_of(job_id, current, claimed)

    @staticmethod
    def _claim_of(job_id: str, claim: dict[str, Any], claimed: bool) -> ResubmissionClaim:
        return ResubmissionClaim(
            job_id=job_id,
            incident_id=claim["incident"],
            claimed=claimed,
            new_job_id=claim["new_job_id"],
            claimed_at=claim.get("claimed_at"),
            open_until=claim.get("expires") if claim["new_job_id"] is None else None,
        )

    def complete_resubmission(self, cluster: str, job_id: str, incident_id: str, new_job_id: str) -> None:
        claim = self.claims.get((cluster, job_id))
        if claim and claim["incident"] == incident_id:
            claim["new_job_id"] = new_job_id
        self._unhold(incident_id, "claims", [job_id])

    def release_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None:
        claim = self.claims.get((cluster, job_id))
        if claim and claim["incident"] == incident_id and claim["new_job_id"] is None:
            del self.claims[(cluster, job_id)]
        self._unhold(incident_id, "claims", [job_id])

    def resubmission_claim(self, cluster: str, job_id: str) -> ResubmissionClaim | None:
        claim = self.claims.get((cluster, job_id))
        if claim is None:
            return None
        return self._claim_of(job_id, claim, False)

    def job_restarts(self, cluster: str, now: datetime) -> list[str]:
        return sorted(incident for (c, incident), until in self.job_restart_places.items() if c == cluster and until >= now)

    def reserve_job_restart(self, cluster: str, incident_id: str, limit: int, now: datetime, ttl: timedelta) -> bool:
        taken = self.job_restarts(cluster, now)
        if incident_id in taken:
            return True
        if len(taken) >= limit:
            return False
        self.job_restart_places[(cluster, incident_id)] = now + ttl
        return True

    def failures_started(self, cluster: str, now: datetime) -> set[str]:
        return {key for (c, key), until in self.polled.items() if c == cluster and until >= now}

    def note_failure_started(self, cluster: str, event_key: str, until: datetime) -> None:
        self.polled[(cluster, event_key)] = until

    def recreation_token(self, cluster: str, job_id: str, now: datetime) -> str:
        return self.tokens.setdefault((cluster, job_id), uuid.uuid4().hex)

    def lineage_root(self, cluster: str, job_id: str) -> str | None:
        return self.lineages.get((cluster, job_id))

    def restart_history(self, cluster: str, root: str) -> list[RestartEntry]:
        return list(self.restarts.get((cluster, root), []))

    def record_restart(self, cluster: str, root: str, entry: RestartEntry) -> None:
        history = self.restarts.setdefault((cluster, root), [])
        if all(e.new_job_id != entry.new_job_id for e in history):
            history.append(entry)
        self.lineages[(cluster, entry.new_job_id)] = root

    def nodes_in_recovery(self, cluster: str, now: datetime) -> set[str]:
        return {n for n, (_, expires) in self.reservations.get(cluster, {}).items() if expires >= now}

    def reserve_capacity(
        self, cluster: str, incident_id: str, node_ids: list[str], limit: int, now: datetime, ttl: timedelta, hostnames: Any = ()
    ) -> bool:
        live = {n: e for n, e in self.reservations.get(cluster, {}).items() if e[1] >= now}
        new = sorted(set(node_ids) - set(live))
        if not new:
            return True
        if len(live) + len(new) > limit:
            return False
        self.reservations[cluster] = {**live, **dict.fromkeys(new, (incident_id, now + ttl))}
        self._hold(incident_id, cluster, "reserved", new)
        self._hold(incident_id, cluster, "hostnames", list(hostnames))
        return True

    def release_capacity(self, cluster: str, incident_id: str, node_ids: list[str], now: datetime) -> None:
        mine = self.reservations.get(cluster, {})
        for n in node_ids:
            if n in mine and mine[n][0] == incident_id:
                del mine[n]
        self._unhold(incident_id, "reserved", node_ids)

    def hold_capacity_until(self, cluster: str, incident_id: str, node_ids: list[str], until: datetime, now: datetime) -> None:
        mine = self.reservations.get(cluster, {})
        for n in node_ids:
            if n in mine and mine[n][0] == incident_id:
                mine[n] = (incident_id, min(mine[n][1], until))
        self._unhold(incident_id, "reserved", node_ids)

    def save_jobs(self, incident_id: str, jobs: list[JobSpec], now: datetime) -> None:
        self.jobs[incident_id] = [j.model_copy(deep=True) for j in jobs]

    def save_evidence(self, incident_id: str, evidence: Any, now: datetime) -> None:
        self.evidence[incident_id] = evidence

    def evidence_of(self, incident_id: str) -> Any:
        return self.evidence.get(incident_id)

    def jobs_of(self, incident_id: str) -> list[JobSpec] | None:
        return self.jobs.get(incident_id)

    def holdings(self, incident_id: str) -> Holdings | None:
        held = self.held.get(incident_id)
        return None if held is None else held.model_copy(deep=True)

    def _hold(self, incident_id: str, cluster: str, kind: str, ids: list[str]) -> None:
        if ids:
            held = self.held.setdefault(incident_id, Holdings(incident=incident_id, cluster=cluster))
            getattr(held, kind).update(ids)

    def _unhold(self, incident_id: str, kind: str, ids: list[str]) -> None:
        if incident_id in self.held:
            getattr(self.held[incident_id], kind).difference_update(ids)

    def breaker(self, cluster: str) -> BreakerState:
        return self.breakers.get(cluster, BreakerState()).model_copy(deep=True)

    def save_breaker(self, cluster: str, breaker: BreakerState) -> None:
        if breaker.version != self.breakers.get(cluster, BreakerState()).version:
            raise LedgerUnavailable(f"the circuit breaker of {cluster} changed since it was read; decide again")
        self.breakers[cluster] = breaker.model_copy(update={"version": breaker.version + 1}, deep=True)

    def recovery_log(self, cluster: str, since: datetime | None = None) -> list[RecoveryLogEntry]:
        return [e for e in self.recoveries.get(cluster, []) if since is None or e.at >= since]

    def log_recovery(self, cluster: str, entry: RecoveryLogEntry, keep_seconds: int) -> None:
        logged = self.recoveries.setdefault(cluster, [])
        if all(e.incident != entry.incident for e in logged):
            logged.append(entry)
            logged.sort(key=lambda e: (e.at, e.incident))

    def begin_effect(self, incident_id: str, name: str, now: datetime) -> Effect:
        begun = self.effects.get((incident_id, name))
        if begun is None or begun.started_at < now - timedelta(days=90):  # (an earlier life of the name: DynamoLedger)
            begun = self.effects[(incident_id, name)] = Effect(incident=incident_id, name=name, started_at=now)
        return begun.model_copy()

    def finish_effect(self, incident_id: str, name: str, now: datetime, result: str | None = None) -> None:
        begun = self.effects.get((incident_id, name)) or Effect(incident=incident_id, name=name, started_at=now)
        self.effects[(incident_id, name)] = begun.model_copy(update={"done_at": now, "result": result})

    def effect_of(self, incident_id: str, name: str) -> Effect | None:
        found = self.effects.get((incident_id, name))
        return None if found is None else found.model_copy()

    def save_incident(self, record: IncidentRecord) -> None:
        self.incidents[record.incident_id] = copy.deepcopy(record)

    def get_incident(self, incident_id: str) -> IncidentRecord | None:
        return self.incidents.get(incident_id)

    def save_swap(self, record: SwapRecord) -> None:
        self.swaps[record.swap_id] = copy.deepcopy(record)

    def swap_record(self, swap_id: str) -> SwapRecord | None:
        return self.swaps.get(swap_id)

    def await_rejoin(self, cluster: str, wait: RejoinWait, now: datetime) -> None:
        self.waits.setdefault(cluster, {})[wait.execution] = wait

    def rejoin_waits(self, cluster: str) -> list[RejoinWait]:
        return [self.waits[cluster][e] for e in sorted(self.waits.get(cluster, {}))]

    def keep_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None:
        self._unhold(incident_id, "claims", [job_id])

    def end_rejoin_wait(self, cluster: str, execution: str, task_token: str) -> None:
        waits = self.waits.get(cluster, {})
        if execution in waits and waits[execution].task_token == task_token:
            del waits[execution]

    def claim_notification(self, incident_id: str, now: datetime, lease: timedelta) -> bool:
        """(DynamoLedger: a lease on the incident's notification effect, begun and not done)"""
        page = self.effects.get((incident_id, "notification"))
        if page is None or page.done or self.notices.get(incident_id, now - timedelta(seconds=1)) >= now:
            return False
        self.notices[incident_id] = now + lease
        return True

    def ends_swept_until(self, cluster: str) -> datetime | None:
        return self.swept.get(cluster)

    def save_ends_swept_until(self, cluster: str, moment: datetime) -> None:
        self.swept[cluster] = moment

    def record_verdict(self, recorded: RecordedVerdict) -> bool:
        verdict = recorded.verdict
        key = (verdict.cluster, int(verdict.episode_at.timestamp()), verdict.rule, verdict.job)
        was = self.kept_verdicts.setdefault(key, recorded)
        if was is recorded:
            return True
        # Like DynamoLedger: an enforced verdict that started nothing says what a later tick did instead.
        enforced = verdict.imported is None and verdict.mode == "enforce"
        if enforced and was.execution is None and was.action.split(VERDICT_BEFORE, 1)[0] != recorded.action:
            action = f"{recorded.action}{VERDICT_BEFORE}{verdict.decided_at:%Y-%m-%d %H:%M:%S} UTC: {was.action}"
            self.kept_verdicts[key] = was.model_copy(update={"execution": recorded.execution, "action": action[:512]})
        return False

    def verdicts(self, cluster: str, since: datetime | None = None) -> list[RecordedVerdict]:
        low = int(since.timestamp()) if since is not None else 0
        return [kept for key, kept in sorted(self.kept_verdicts.items(), key=lambda kv: kv[0]) if key[0] == cluster and key[1] >= low]
