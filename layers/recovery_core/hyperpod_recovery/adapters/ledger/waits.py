"""Waits and marks: REJOIN#<cluster>/WAIT#<execution> (a recovery waiting for its replaced nodes:
Wait For Rejoin writes it, Notice Cluster Event reads the cluster's with one Query),
CLUSTER#<cluster>/ENDS_SWEPT (until when the sweep of ended executions recorded every end) and
POLLED#<cluster>/<uid>:<epoch> (EKS: a failure whose JobRecovery the job poller started)."""

from __future__ import annotations

from datetime import datetime, timedelta

from hyperpod_recovery.adapters.ledger.table import HIGHEST, LedgerTable, epoch
from hyperpod_recovery.models.records import RejoinWait

# A wait lasts at most the reboot and rejoin deadlines (2 days at most).
REJOIN_WAITS_TTL = timedelta(days=3)
WAIT_ITEM_PREFIX = "WAIT#"


class WaitItems(LedgerTable):
    def await_rejoin(self, cluster: str, wait: RejoinWait, now: datetime) -> None:
        # A wait lasts until its own timeout; the item outlives it by a margin (TTL deletes late,
        # and Notice Cluster Event removes a stale one it meets).
        self._write(
            "update",
            Key={"pk": {"S": f"REJOIN#{cluster}"}, "sk": {"S": f"{WAIT_ITEM_PREFIX}{wait.execution}"}},
            UpdateExpression="SET #wait = :wait, task_token = :token, expires_at = :exp",
            ExpressionAttributeNames={"#wait": "wait"},
            ExpressionAttributeValues={
                ":wait": {"S": wait.model_dump_json()},
                ":token": {"S": wait.task_token},
                ":exp": {"N": epoch(max(now, wait.until) + REJOIN_WAITS_TTL)},
            },
        )

    def rejoin_waits(self, cluster: str) -> list[RejoinWait]:
        items = self._query(f"REJOIN#{cluster}", WAIT_ITEM_PREFIX, WAIT_ITEM_PREFIX + HIGHEST)
        return sorted((RejoinWait.model_validate_json(item["wait"]["S"]) for item in items), key=lambda w: w.execution)

    def end_rejoin_wait(self, cluster: str, execution: str, task_token: str) -> None:
        """Remove the wait, unless the execution registered a newer one (another token) since."""
        self._write(
            "delete",
            "task_token = :token",
            Key={"pk": {"S": f"REJOIN#{cluster}"}, "sk": {"S": f"{WAIT_ITEM_PREFIX}{execution}"}},
            ExpressionAttributeValues={":token": {"S": task_token}},
        )

    def ends_swept_until(self, cluster: str) -> datetime | None:
        item = self._get(f"CLUSTER#{cluster}", "ENDS_SWEPT")
        return datetime.fromisoformat(item["until"]["S"]) if item else None

    def save_ends_swept_until(self, cluster: str, moment: datetime) -> None:
        self._put({"pk": {"S": f"CLUSTER#{cluster}"}, "sk": {"S": "ENDS_SWEPT"}, "until": {"S": moment.isoformat()}})

    def failures_started(self, cluster: str, now: datetime) -> set[str]:
        """The job failures whose JobRecovery a poll started (their event keys, ``<uid>:<epoch>``),
        not yet expired: the poll skips them without asking Kubernetes or Step Functions again.
        One item per failure (written once, never rewritten), one Query per poll."""
        items = self._query(f"POLLED#{cluster}", ProjectionExpression="sk, expires_at")
        # (DynamoDB's TTL deletes expired items within days: an expired one is not remembered)
        return {i["sk"]["S"] for i in items if int(i["expires_at"]["N"]) >= int(now.timestamp())}

    def note_failure_started(self, cluster: str, event_key: str, until: datetime) -> None:
        """Remember that a poll started this failure's JobRecovery until ``until`` (when it would be
        too old to start anyway). Written after the start: a lost write only costs the next poll
        one idempotent StartExecution (the execution's name is the failure)."""
        self._put({"pk": {"S": f"POLLED#{cluster}"}, "sk": {"S": event_key}, "expires_at": {"N": epoch(until)}})
