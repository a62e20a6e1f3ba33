"""The ledger's table: every DynamoDB call of the ledger, its error translation, and what the item
families share (keys, expiries, paging). The families (the modules beside this one) build items and
conditions; only this module talks to the SDK."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.adapters.backoff import BATCH_GET_BACKOFF, Backoff
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable

JOB_CLAIM_TTL = timedelta(days=30)
INCIDENT_TTL = timedelta(days=400)
# Optimistic writes of an item read first: a conflict means another writer wrote it between our
# read and our write; read again and decide again, a bounded number of times.
RESERVATION_ATTEMPTS = 8
BATCH_GET_KEYS = 100  # BatchGetItem: at most 100 items a call
# Sorts after anything that follows a prefix in a sort key (DynamoDB orders strings by their UTF-8
# bytes; this is the highest code point).
HIGHEST = "\U0010ffff"

Write = Literal["put", "update", "delete"]


def epoch(moment: datetime) -> str:
    return str(int(moment.timestamp()))


def sortable_epoch(moment: datetime) -> str:
    """Seconds since 1970, zero-padded so that sort keys order as times do (until the year 33658)."""
    return f"{max(0, int(moment.timestamp())):012d}"


def node_key(cluster: str, node_id: str) -> str:
    return f"NODE#{cluster}#{node_id}"


def incident_key(incident_id: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": sk}}


class LedgerTable:
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

    def _write(self, kind: Write, condition: str | None = None, /, **request: Any) -> dict[str, Any] | None:
        """One PutItem, UpdateItem or DeleteItem, under ``condition`` when given: its answer, or None
        when the condition did not hold (nothing was written). Any other failure raises."""
        method = {"put": self.dynamodb.put_item, "update": self.dynamodb.update_item, "delete": self.dynamodb.delete_item}[kind]
        try:
            return self._call(method, TableName=self.table_name, **request, **({"ConditionExpression": condition} if condition else {}))
        except ClientError:  # _call lets only ConditionalCheckFailed through
            return None

    def _put(self, item: dict[str, Any]) -> None:
        self._write("put", Item=item)

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        response = self._call(
            self.dynamodb.get_item, TableName=self.table_name, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
        )
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _query(self, pk: str, low: str | None = None, high: str | None = None, **request: Any) -> list[dict[str, Any]]:
        """Every item of partition ``pk`` (whose sort key is between ``low`` and ``high``, when
        given), every page, read consistently."""
        values: dict[str, Any] = {":pk": {"S": pk}}
        condition = "pk = :pk"
        if low is not None and high is not None:
            condition += " AND sk BETWEEN :low AND :high"
            values |= {":low": {"S": low}, ":high": {"S": high}}
        return self._every_page("query", KeyConditionExpression=condition, ExpressionAttributeValues=values, ConsistentRead=True, **request)

    def _scan(self, **request: Any) -> list[dict[str, Any]]:
        return self._every_page("scan", ConsistentRead=True, **request)

    def _every_page(self, kind: Literal["query", "scan"], **request: Any) -> list[dict[str, Any]]:
        """The items of every page of a Query or Scan (LastEvaluatedKey -> ExclusiveStartKey)."""
        method = self.dynamodb.query if kind == "query" else self.dynamodb.scan
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            response = self._call(method, TableName=self.table_name, **request, **({"ExclusiveStartKey": start} if start else {}))
            items += response.get("Items", [])
            start = response.get("LastEvaluatedKey")
            if not start:
                return items

    def _query_page(self, **request: Any) -> dict[str, Any]:
        """One page of a Query (a caller that stops paging as soon as it has enough)."""
        return self._call(self.dynamodb.query, TableName=self.table_name, **request)

    def _batch_get(self, keys: list[dict[str, Any]], what: str) -> list[dict[str, Any]]:
        """The items of ``keys``: BatchGetItem, at most 100 keys a call (its API reference); what it
        leaves unprocessed is asked again after a jittered, growing wait (adapters/backoff.py), and
        still unread at the end is LedgerUnavailable: a partial answer would miss an item."""
        pending, found = list(keys), []
        delays = self._batch_backoff.delays(self._draw)
        retries, waited = 0, 0.0
        while pending:
            asked, pending = pending[:BATCH_GET_KEYS], pending[BATCH_GET_KEYS:]
            response = self._call(self.dynamodb.batch_get_item, RequestItems={self.table_name: {"Keys": asked, "ConsistentRead": True}})
            found += response.get("Responses", {}).get(self.table_name, [])
            unprocessed: list[dict[str, Any]] = response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
            if not unprocessed:
                continue
            delay = next(delays, None)
            if delay is None:
                raise LedgerUnavailable(
                    f"ledger {self.table_name!r}: BatchGetItem left {len(unprocessed) + len(pending)} {what} unread "
                    f"after {retries} retries and {waited:.2f} s of backoff"
                )
            self._sleep(delay)
            retries, waited = retries + 1, waited + delay
            pending = unprocessed + pending
        return found

    def _changed_meanwhile(self, what: str, doing: str) -> LedgerUnavailable:
        return LedgerUnavailable(f"ledger {self.table_name!r}: {what} changed {RESERVATION_ATTEMPTS} times while {doing}")

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
