"""Step Functions execution history: which states an ended execution entered, and when.

Reconcile Execution reads it for an execution that ended before it recorded its own outcome, to
say where it stopped and how long each phase took. Reading is best effort: the record and the
release of what the execution held never wait on it (None when the history cannot be read).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient
from hyperpod_recovery.observability import logger

# GetExecutionHistory returns at most 1,000 events a page and a history holds up to 25,000; the
# newest events say where the execution stopped, so read newest first and stop after this many.
PAGE_SIZE = 1000
MAX_EVENTS_READ = 5000


class StepFunctionsHistory:
    stepfunctions = LazyClient("stepfunctions")

    def __init__(self, stepfunctions: Any = None) -> None:
        self._stepfunctions = stepfunctions

    def states_entered(self, execution_arn: str) -> list[tuple[str, datetime]] | None:
        """(state name, time entered), oldest first; the oldest are missing when the history is
        longer than MAX_EVENTS_READ events."""
        entered: list[tuple[int, str, datetime]] = []
        read = 0
        kwargs: dict[str, Any] = {
            "executionArn": execution_arn,
            "reverseOrder": True,
            "maxResults": PAGE_SIZE,
            "includeExecutionData": False,
        }
        try:
            while read < MAX_EVENTS_READ:
                page = self.stepfunctions.get_execution_history(**kwargs)
                for event in page.get("events", []):
                    details = event.get("stateEnteredEventDetails")
                    if str(event.get("type", "")).endswith("StateEntered") and details:
                        entered.append((int(event["id"]), str(details["name"]), event["timestamp"]))
                read += len(page.get("events", []))
                if not page.get("nextToken"):
                    break
                kwargs["nextToken"] = page["nextToken"]
        except (ClientError, BotoCoreError) as exc:
            logger.warning("could not read the execution's history", extra={"execution_arn": execution_arn, "reason": str(exc)})
            return None
        # Event ids grow through the history: oldest first, however the pages came.
        return [(name, at) for _, name, at in sorted(entered)]
