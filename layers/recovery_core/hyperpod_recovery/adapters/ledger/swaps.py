"""Planned swaps: INCIDENT#<swap id>/SWAP, what a planned swap decided and did, with its numbers
(models/planned_swap.py SwapRecord). Its nested NodeRecovery keeps its own incident record."""

from __future__ import annotations

from hyperpod_recovery.adapters.ledger.table import INCIDENT_TTL, LedgerTable, epoch, incident_key
from hyperpod_recovery.models.planned_swap import SwapRecord


class SwapItems(LedgerTable):
    def save_swap(self, record: SwapRecord) -> None:
        """The swap's record, written whole (a rerun of Record Swap Outcome writes the same facts)."""
        self._put(
            {
                **incident_key(record.swap_id, "SWAP"),
                "swap": {"S": record.model_dump_json()},
                "expires_at": {"N": epoch(record.recorded_at + INCIDENT_TTL)},
            }
        )

    def swap_record(self, swap_id: str) -> SwapRecord | None:
        item = self._get(f"INCIDENT#{swap_id}", "SWAP")
        return SwapRecord.model_validate_json(item["swap"]["S"]) if item is not None else None
