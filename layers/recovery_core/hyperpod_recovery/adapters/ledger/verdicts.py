"""Hang and slowdown verdicts: CLUSTER#<cluster>/VERDICT#<episode epoch>#<rule>#<job>, once per
episode, what was done about it, and an operator's review of it (written over the item as read)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from hyperpod_recovery.adapters.ledger.table import HIGHEST, INCIDENT_TTL, RESERVATION_ATTEMPTS, LedgerTable, epoch, sortable_epoch
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.observability import logger

VERDICT_PREFIX = "VERDICT#"
# A verdict is kept as long as an incident record: a rule's precision is counted over them.
VERDICT_TTL = INCIDENT_TTL
# What an updated verdict's action puts between what was done last and what was said before it.
VERDICT_BEFORE = " | before "


def _verdict_sk(rule: str, job: str, episode_at: datetime) -> str:
    # By episode: the same stall seen a minute later is the same item (recorded once).
    return f"{VERDICT_PREFIX}{sortable_epoch(episode_at)}#{rule}#{job}"


def _verdict_item(recorded: RecordedVerdict) -> dict[str, Any]:
    verdict = recorded.verdict
    return {
        "pk": {"S": f"CLUSTER#{verdict.cluster}"},
        "sk": {"S": _verdict_sk(verdict.rule, verdict.job, verdict.episode_at)},
        "verdict": {"S": recorded.model_dump_json()},
        "expires_at": {"N": epoch(verdict.decided_at + VERDICT_TTL)},
    }


class VerdictItems(LedgerTable):
    def record_verdict(self, recorded: RecordedVerdict) -> bool:
        """Keep a verdict once per episode: False when this episode's verdict is already kept. One of
        Detect Hung Jobs' that started nothing (left to another incident, or its start refused) is
        updated when a later tick of the same episode does otherwise (starts the recovery, or leaves
        it for another reason), what it said before kept after it and its review kept: the record
        never says "not acted on" of a stall that was acted on, nor names a recovery that never ran."""
        if self._write("put", "attribute_not_exists(pk)", Item=_verdict_item(recorded)) is not None:
            return True
        # (an imported one is told once, as first kept; an observed one says the same every tick)
        if recorded.verdict.imported is None and recorded.verdict.mode == "enforce":
            self._update_kept_verdict(recorded)
        return False

    def _update_kept_verdict(self, now: RecordedVerdict) -> None:
        verdict = now.verdict
        for _ in range(RESERVATION_ATTEMPTS):  # (an operator's review written meanwhile: read again)
            try:
                was = self.verdict(verdict.cluster, verdict.rule, verdict.job, verdict.episode_at)
            except ValidationError:  # (an item this code cannot read: left as it is)
                logger.warning("a kept verdict could not be read to update it", extra={"job": verdict.job, "action": now.action[:200]})
                return
            if was is None or was.execution is not None or was.action.split(VERDICT_BEFORE, 1)[0] == now.action:
                return  # (a started recovery is the episode's last word; the same words again change nothing)
            action = f"{now.action}{VERDICT_BEFORE}{verdict.decided_at:%Y-%m-%d %H:%M:%S} UTC: {was.action}"
            if self.review_verdict(was, was.model_copy(update={"execution": now.execution, "action": action[:512]})):
                return

    def verdicts(self, cluster: str, since: datetime | None = None) -> list[RecordedVerdict]:
        """The cluster's verdicts by episode, oldest first (every page)."""
        low = VERDICT_PREFIX + (sortable_epoch(since) if since is not None else "")
        items = self._query(f"CLUSTER#{cluster}", low, VERDICT_PREFIX + HIGHEST)
        return [RecordedVerdict.model_validate_json(item["verdict"]["S"]) for item in items]

    def review_verdict(self, was: RecordedVerdict, review: RecordedVerdict) -> bool:
        """An operator's review, written only over the verdict exactly as the operator read it (``was``):
        False when it changed meanwhile (someone else reviewed it), and nothing is written."""
        written = self._write(
            "put", "verdict = :was", Item=_verdict_item(review), ExpressionAttributeValues={":was": {"S": was.model_dump_json()}}
        )
        return written is not None

    def verdict(self, cluster: str, rule: str, job: str, episode_at: datetime) -> RecordedVerdict | None:
        """One verdict by its key (the operator's ``verdicts confirm|reject`` names it), read consistently."""
        item = self._get(f"CLUSTER#{cluster}", _verdict_sk(rule, job, episode_at))
        return RecordedVerdict.model_validate_json(item["verdict"]["S"]) if item else None
