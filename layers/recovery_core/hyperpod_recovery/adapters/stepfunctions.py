"""Step Functions: start a recovery, answer a waiting task, read an ended execution's history.

SDK errors leave as ours: StartExecutionFailed (a reused name is not an error: "already_exists"),
TaskAnswerFailed; a history that cannot be read is None (best effort, see ``states_entered``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.errors import StartExecutionFailed, TaskAnswerFailed
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import Workflow

# GetExecutionHistory returns at most 1,000 events a page and a history holds up to 25,000; the
# newest events say where the execution stopped, so read newest first and stop after this many.
PAGE_SIZE = 1000
MAX_EVENTS_READ = 5000


class StepFunctions:
    stepfunctions = LazyClient("stepfunctions")

    def __init__(self, state_machine_arns: Mapping[Workflow, str] | None = None, stepfunctions: Any = None) -> None:
        self.state_machine_arns = dict(state_machine_arns or {})
        self._stepfunctions = stepfunctions

    # --- Workflows ------------------------------------------------------------------------
    def start(self, name: str, payload: str, workflow: Workflow = "node") -> Literal["started", "already_exists"]:
        """Start one NodeRecovery (or JobRecovery) execution named ``name``. Step Functions refuses
        a reused name, which is how a duplicate event in the same fault episode is turned away."""
        try:
            self.stepfunctions.start_execution(stateMachineArn=self.state_machine_arns[workflow], name=name, input=payload)
        except ClientError as exc:
            if error_code(exc) == "ExecutionAlreadyExists":
                return "already_exists"
            kind = "transient" if is_transient(exc) else "refused"
            raise StartExecutionFailed(f"StartExecution {name}: {error_code(exc)} ({kind})") from exc
        except BotoCoreError as exc:
            raise StartExecutionFailed(f"StartExecution {name}: {exc}") from exc
        return "started"

    # --- task tokens ----------------------------------------------------------------------
    def send_task_success(self, task_token: str, output: str) -> None:
        try:
            self.stepfunctions.send_task_success(taskToken=task_token, output=output)
        except (ClientError, BotoCoreError) as exc:
            raise TaskAnswerFailed(f"SendTaskSuccess: {exc}") from exc

    # --- ExecutionHistory -----------------------------------------------------------------
    def states_entered(self, execution_arn: str) -> list[tuple[str, datetime]] | None:
        """(state name, time entered), oldest first; the oldest are missing when the history is
        longer than MAX_EVENTS_READ events.

        Reconcile Execution reads it for an execution that ended before it recorded its own outcome,
        to say where it stopped and how long each phase took. Reading is best effort: the record and
        the release of what the execution held never wait on it (None when it cannot be read).
        """
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
