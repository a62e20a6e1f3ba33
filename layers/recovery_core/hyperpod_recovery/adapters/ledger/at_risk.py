"""At-risk verdicts: CLUSTER#<cluster>/ATRISK#<episode epoch>#<signal>#<instance>, once per signal,
node and episode, with its outcome written beside it later; CLUSTER#<cluster>/ATRISK_SCORE#<signal>,
each signal's settled outcomes (what its measured precision is read from, one GetItem);
CLUSTER#<cluster>/ATRISK_TICKED, until when the scheduled tick read the incidents (node history)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_recovery.adapters.ledger.table import HIGHEST, INCIDENT_TTL, LedgerTable, epoch, sortable_epoch
from hyperpod_recovery.models.at_risk import AtRiskRecord, SignalScore

AT_RISK_PREFIX = "ATRISK#"
SCORE_PREFIX = "ATRISK_SCORE#"
TICKED = "ATRISK_TICKED"
# Kept as long as an incident record: a signal's precision and recall are counted over them.
AT_RISK_TTL = INCIDENT_TTL


def _sk(record: AtRiskRecord) -> str:
    verdict = record.verdict
    return f"{AT_RISK_PREFIX}{sortable_epoch(record.episode_at)}#{verdict.signal}#{verdict.instance_id}"


def _item(record: AtRiskRecord) -> dict[str, Any]:
    return {
        "pk": {"S": f"CLUSTER#{record.verdict.cluster}"},
        "sk": {"S": _sk(record)},
        "record": {"S": record.model_dump_json()},
        "expires_at": {"N": epoch(record.verdict.observed_at + AT_RISK_TTL)},
    }


class AtRiskItems(LedgerTable):
    def record_at_risk(self, record: AtRiskRecord) -> bool:
        """Keep a verdict once per episode: False when this episode's verdict is kept already (a
        repeat of the alert, SNS's second delivery), and nothing is written."""
        return self._write("put", "attribute_not_exists(pk)", Item=_item(record)) is not None

    def at_risk_records(self, cluster: str, since: datetime | None = None, until: datetime | None = None) -> list[AtRiskRecord]:
        """The cluster's at-risk verdicts by episode, oldest first (every page)."""
        low = AT_RISK_PREFIX + (sortable_epoch(since) if since is not None else "")
        high = AT_RISK_PREFIX + (sortable_epoch(until) + "#" + HIGHEST if until is not None else HIGHEST)
        return [AtRiskRecord.model_validate_json(item["record"]["S"]) for item in self._query(f"CLUSTER#{cluster}", low, high)]

    def settle_at_risk(self, was: AtRiskRecord, now: AtRiskRecord) -> bool:
        """Write a verdict's outcome over the record exactly as read (False: it changed meanwhile,
        nothing written); a settled failed or not_failed outcome is then added to its signal's score."""
        written = self._write("put", "#r = :was", Item=_item(now), ExpressionAttributeNames={"#r": "record"},
                              ExpressionAttributeValues={":was": {"S": was.model_dump_json()}})  # fmt: skip
        if written is None:
            return False
        if now.outcome in ("failed", "not_failed"):
            # (a crash between the two writes loses one count: the score is a guide, the records are the truth)
            self._write(
                "update",
                Key={"pk": {"S": f"CLUSTER#{now.verdict.cluster}"}, "sk": {"S": SCORE_PREFIX + now.verdict.signal}},
                UpdateExpression="ADD #o :one",
                ExpressionAttributeNames={"#o": now.outcome},
                ExpressionAttributeValues={":one": {"N": "1"}},
            )
        return True

    def at_risk_score(self, cluster: str, signal: str) -> SignalScore:
        item = self._get(f"CLUSTER#{cluster}", SCORE_PREFIX + signal) or {}
        return SignalScore(failed=int(item.get("failed", {}).get("N", "0")), not_failed=int(item.get("not_failed", {}).get("N", "0")))

    def at_risk_ticked_until(self, cluster: str) -> datetime | None:
        item = self._get(f"CLUSTER#{cluster}", TICKED)
        return datetime.fromisoformat(item["until"]["S"]) if item else None

    def save_at_risk_ticked_until(self, cluster: str, moment: datetime) -> None:
        self._put({"pk": {"S": f"CLUSTER#{cluster}"}, "sk": {"S": TICKED}, "until": {"S": moment.isoformat()}})
