"""The progress table (DynamoDB): what the training scripts report, read by the hang detectors.

The training nodes write it (hyperpod_recovery.checkpointing.Progress); the pipeline only reads
it. An item that does not parse is somebody's bug or somebody's mischief: it is skipped and
counted, never the detector's failure.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable
from hyperpod_recovery.models.progress import REPORT_ATTRIBUTE, ProgressReport


class ProgressTable:
    dynamodb = LazyClient("dynamodb")

    def __init__(self, table_name: str, dynamodb: Any = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.unreadable = 0  # items skipped by the last read

    def running_jobs(self) -> dict[str, list[ProgressReport]]:
        """Every job's node reports (one Scan, every page): the table holds only the last day's."""
        return self._grouped(self._every_page(self.dynamodb.scan, TableName=self.table_name))

    def job(self, job: str) -> list[ProgressReport]:
        """One job's node reports, read consistently (is the job still stuck?)."""
        items = self._every_page(
            self.dynamodb.query,
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"JOB#{job}"}},
            ConsistentRead=True,
        )
        return self._grouped(items).get(job, [])

    def _grouped(self, items: list[dict[str, Any]]) -> dict[str, list[ProgressReport]]:
        self.unreadable = 0
        jobs: dict[str, list[ProgressReport]] = defaultdict(list)
        for item in items:
            try:
                report = ProgressReport.model_validate_json(item[REPORT_ATTRIBUTE]["S"])
            except (KeyError, TypeError, ValidationError):
                self.unreadable += 1
                continue
            # The key must say what the report says: an item filed under another job proves nothing.
            if item.get("pk", {}).get("S") != f"JOB#{report.job}" or item.get("sk", {}).get("S") != f"NODE#{report.node}":
                self.unreadable += 1
                continue
            jobs[report.job].append(report)
        return dict(jobs)

    def _every_page(self, method: Any, **request: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            try:
                response = method(**request, **({"ExclusiveStartKey": start} if start else {}))
            except ClientError as exc:
                error = LedgerUnavailable if is_transient(exc) else LedgerError
                raise error(f"progress table {self.table_name}: {error_code(exc)}") from exc
            except BotoCoreError as exc:
                raise LedgerUnavailable(f"progress table {self.table_name}: {exc}") from exc
            items += response.get("Items", [])
            start = response.get("LastEvaluatedKey")
            if not start:
                return items
