"""What Detect Hung Jobs remembers of each job between ticks (models/progress_memory.py), in the
ledger table: ``PROGRESS#<cluster>#<job>`` / ``SEEN``, the memory as one JSON string, expiring a day
after the tick that wrote it (a job gone that long is forgotten: its rows expire with it). The JSON
is compressed (zlib): a 2,048-node job's would otherwise come near DynamoDB's 400 KB.

One detector writes them, a tick a minute: a plain overwrite (no condition) is right, the newer
tick's reads are the newer truth. Reads and writes go in batches (BatchGetItem: 100 keys a call;
BatchWriteItem: 25 items), what DynamoDB leaves unprocessed is asked again after a jittered,
growing wait (adapters/backoff.py); what stays unread is LedgerUnavailable (a tick that cannot
recall its memory judges nothing: every row would look new), what stays unwritten is returned
(the next tick dates what it missed one tick later).
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.adapters.backoff import BATCH_GET_BACKOFF, Backoff
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable
from hyperpod_recovery.models.progress_memory import JobMemory

MEMORY_TTL = timedelta(days=1)
BATCH_GET_KEYS = 100
BATCH_WRITE_ITEMS = 25
SEEN = "SEEN"


def packed(memory: JobMemory) -> bytes:
    """The memory as its item holds it: JSON, compressed (a 2,048-node job's is 360 KB as text)."""
    return zlib.compress(memory.model_dump_json().encode(), level=6)


def memory_key(cluster: str, job: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"PROGRESS#{cluster}#{job}"}, "sk": {"S": SEEN}}


class ProgressMemoryTable:
    dynamodb = LazyClient("dynamodb")

    def __init__(
        self,
        table_name: str,
        dynamodb: Any = None,
        backoff: Backoff = BATCH_GET_BACKOFF,
        sleep: Callable[[float], None] = time.sleep,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self._backoff, self._sleep, self._draw = backoff, sleep, draw
        self.unreadable = 0

    def recall(self, cluster: str, jobs: Sequence[str]) -> dict[str, JobMemory]:
        """The memories of ``jobs`` (the ones remembered); an item that does not parse is forgotten."""
        pending = [memory_key(cluster, job) for job in dict.fromkeys(jobs)]
        found: dict[str, JobMemory] = {}
        delays = self._backoff.delays(self._draw)
        while pending:
            asked, pending = pending[:BATCH_GET_KEYS], pending[BATCH_GET_KEYS:]
            response = self._call(self.dynamodb.batch_get_item, RequestItems={self.table_name: {"Keys": asked}})
            answered = response.get("Responses", {}).get(self.table_name, [])
            for item in answered:
                try:
                    memory = JobMemory.model_validate_json(zlib.decompress(item["memory"]["B"]))
                except (KeyError, TypeError, ValidationError, zlib.error):
                    self.unreadable += 1
                    continue
                found[memory.job] = memory
            unprocessed: list[dict[str, Any]] = response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
            if unprocessed:
                # (an answer with items is cut at its 16 MB page, not throttled: asked again at once)
                if not answered:
                    self._wait(delays, f"BatchGetItem left {len(unprocessed)} job memories unread")
                pending = unprocessed + pending
        return found

    def remember(self, cluster: str, memories: Sequence[JobMemory]) -> int:
        """Write the memories; the number left unwritten (throttled past the backoff)."""
        pending = [
            {
                "PutRequest": {
                    "Item": {
                        **memory_key(cluster, m.job),
                        "memory": {"B": packed(m)},
                        "expires_at": {"N": str(int((m.seen_at + MEMORY_TTL).timestamp()))},
                    }
                }
            }
            for m in memories
        ]
        delays = self._backoff.delays(self._draw)
        while pending:
            batch, pending = pending[:BATCH_WRITE_ITEMS], pending[BATCH_WRITE_ITEMS:]
            response = self._call(self.dynamodb.batch_write_item, RequestItems={self.table_name: batch})
            unprocessed: list[dict[str, Any]] = response.get("UnprocessedItems", {}).get(self.table_name, [])
            if unprocessed:
                delay = next(delays, None)
                if delay is None:
                    return len(unprocessed) + len(pending)
                self._sleep(delay)
                pending = unprocessed + pending
        return 0

    def _wait(self, delays: Any, what: str) -> None:
        delay = next(delays, None)
        if delay is None:
            raise LedgerUnavailable(f"ledger {self.table_name!r}: {what} after its backoff")
        self._sleep(delay)

    def _call(self, method: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return method(**kwargs)  # type: ignore[no-any-return]
        except ClientError as exc:
            kind = LedgerUnavailable if is_transient(exc) else LedgerError
            raise kind(f"ledger {self.table_name!r}: {error_code(exc)}") from exc
        except BotoCoreError as exc:
            raise LedgerUnavailable(f"ledger {self.table_name!r}: {exc}") from exc
