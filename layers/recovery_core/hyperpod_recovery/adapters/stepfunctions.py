"""Step Functions: start a recovery, answer a waiting task, read an ended execution's history,
list the executions that ended, and those running.

SDK errors leave as ours: StartExecutionFailed (a reused name is not an error: "already_exists"),
TaskAnswerFailed; a history that cannot be read is None (best effort, see ``states_entered``); a
listing that cannot be read is HistoryUnavailable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.clock import current_clock
from hyperpod_recovery.domain.intake.execution_names import planned_swap_execution_name
from hyperpod_recovery.errors import ConfigurationError, HistoryUnavailable, StartExecutionFailed, TaskAnswerFailed
from hyperpod_recovery.models.commands import CommandReply, ResubmitResult
from hyperpod_recovery.models.events import ExecutionStatusDetail
from hyperpod_recovery.models.node_recovery import ResumePlan
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import ClosedExecution, ResubmissionSeen, ResubmissionsRead, StartOutcome, Workflow

if TYPE_CHECKING:
    from hyperpod_recovery.models.at_risk import PlannedSwapRequest

# GetExecutionHistory returns at most 1,000 events a page and a history holds up to 25,000; the
# newest events say where the execution stopped, so read newest first and stop after this many.
PAGE_SIZE = 1000
MAX_EVENTS_READ = 5000
# SendTaskSuccess's answers for a task that no longer waits.
TOKEN_GONE = frozenset({"TaskTimedOut", "TaskDoesNotExist", "InvalidToken"})
# Reading the resubmissions needs the events' data (each event's input or output, up to 256 KB):
# smaller pages keep one page's memory bounded.
DATA_PAGE_SIZE = 100
RESUBMIT_REPLY = "resubmit_job"  # the agent's reply type (models/commands.py ResubmitJob)
# The ends no Record step records: Reconcile Execution and the sweep look for these.
CLOSED_UNRECORDED = ("FAILED", "TIMED_OUT", "ABORTED")
LIST_PAGE_SIZE = 1000  # ListExecutions' largest page
# ListExecutions is throttled per account and region (a bucket of 100, refilled at 2 a second: Step
# Functions quotas, API action throttling), shared with every other caller: a sweep reads at most this
# many pages (six listings, two workflows by three statuses, are its usual all).
MAX_LIST_CALLS = 30
# ASSUMPTION: Step Functions' clock and the function's (both NTP-synchronised) differ by less than
# this. Only counts depend on it (an execution started, or one found running), never an action.
START_CLOCK_SKEW = timedelta(seconds=2)


RECONCILED_WORKFLOWS: tuple[Workflow, ...] = ("node", "job")


class StepFunctions:
    stepfunctions = LazyClient("stepfunctions")

    def __init__(self, state_machine_arns: Mapping[Workflow, str] | None = None, stepfunctions: Any = None) -> None:
        # (a workflow not deployed, the planned swap's before its ARN is set, is not listed nor swept)
        self.state_machine_arns = {workflow: arn for workflow, arn in (state_machine_arns or {}).items() if arn}
        self._stepfunctions = stepfunctions

    # --- Workflows ------------------------------------------------------------------------
    def start(self, name: str, payload: str, workflow: Workflow = "node") -> StartOutcome:
        """Start one NodeRecovery (or JobRecovery) execution named ``name``: "started" only when this
        call started it. Step Functions refuses a reused name with other input, or of an execution
        that ended ("already_exists"), which is how a duplicate event in the same fault episode is
        turned away; the same name and input while that execution runs succeed again, with "the same
        response as the original request" (StartExecution API reference): its startDate, older than
        this call ("running": a poll or a redelivery that found its own execution)."""
        asked_at = current_clock()()
        try:
            answer = self.stepfunctions.start_execution(stateMachineArn=self.state_machine_arns[workflow], name=name, input=payload)
        except ClientError as exc:
            if error_code(exc) == "ExecutionAlreadyExists":
                return "already_exists"
            kind = "transient" if is_transient(exc) else "refused"
            raise StartExecutionFailed(f"StartExecution {name}: {error_code(exc)} ({kind})") from exc
        except BotoCoreError as exc:
            raise StartExecutionFailed(f"StartExecution {name}: {exc}") from exc
        # A lost answer retried by botocore within this call finds the execution its first attempt
        # started, dated after ``asked_at``: started here, once.
        started_on = answer.get("startDate")
        if isinstance(started_on, datetime) and started_on < asked_at - START_CLOCK_SKEW:
            return "running"
        return "started"

    def start_planned_swap(self, request: PlannedSwapRequest) -> StartOutcome:
        """An enforced at-risk verdict's planned swap: the PlannedSwap state machine's execution
        ``hps-<verdict_id>`` (one per verdict: a repeat is turned away by its name), its input the
        request. ConfigurationError when the state machine's ARN is not set (PLANNED_SWAP_STATE_MACHINE_ARN):
        an enforced signal with nowhere to go fails closed, never silently observed."""
        if not self.state_machine_arns.get("planned_swap"):
            raise ConfigurationError(
                f"PLANNED_SWAP_STATE_MACHINE_ARN is not set: verdict {request.verdict.verdict_id} of enforced signal "
                f"{request.verdict.signal} cannot start its planned swap"
            )
        name = planned_swap_execution_name(request.verdict.verdict_id)
        return self.start(name, json.dumps(request.model_dump(mode="json")), "planned_swap")

    def running(self, workflow: Workflow) -> list[str]:
        """The names of the workflow's running executions (ListExecutions, status RUNNING, every page
        up to MAX_LIST_CALLS): a few at a time, held to the cluster's cap."""
        names: list[str] = []
        machine = self.state_machine_arns[workflow]
        request: dict[str, Any] = {"stateMachineArn": machine, "statusFilter": "RUNNING", "maxResults": LIST_PAGE_SIZE}
        for _ in range(MAX_LIST_CALLS):
            try:
                page = self.stepfunctions.list_executions(**request)
            except (ClientError, BotoCoreError) as exc:
                raise HistoryUnavailable(f"ListExecutions {workflow} RUNNING: {exc}") from exc
            names += [str(item["name"]) for item in page.get("executions", [])]
            if not page.get("nextToken"):
                return names
            request["nextToken"] = page["nextToken"]
        raise HistoryUnavailable(f"ListExecutions {workflow}: more than {MAX_LIST_CALLS} pages of running executions")

    # --- ended executions (the sweep) ---------------------------------------------------------
    def closed_since(self, since: datetime, started_after: datetime) -> list[ClosedExecution]:
        """Every execution of the two workflows that ended FAILED, TIMED_OUT or ABORTED at or after
        ``since`` (ListExecutions, by status, page by page).

        ListExecutions lists "sorted by time, with the most recent execution first": ASSUMPTION, by
        start date (the one date every item carries). A listing stops at the first page all of whose
        executions started before ``started_after``: none of them, or of those after, can have ended
        since ``since`` if no execution runs longer than ``since - started_after``."""
        found: list[ClosedExecution] = []
        calls = 0
        # (the recovery workflows only: a PlannedSwap holds nothing and records its own end; its
        # nested NodeRecovery is a node workflow's execution, swept as any)
        for _, machine in sorted((w, arn) for w, arn in self.state_machine_arns.items() if w in RECONCILED_WORKFLOWS):
            for status in CLOSED_UNRECORDED:
                request: dict[str, Any] = {"stateMachineArn": machine, "statusFilter": status, "maxResults": LIST_PAGE_SIZE}
                while True:
                    if calls == MAX_LIST_CALLS:
                        raise HistoryUnavailable(f"ListExecutions: more than {MAX_LIST_CALLS} pages of ended executions to read")
                    calls += 1
                    try:
                        page = self.stepfunctions.list_executions(**request)
                    except (ClientError, BotoCoreError) as exc:
                        raise HistoryUnavailable(f"ListExecutions {machine} {status}: {exc}") from exc
                    items = page.get("executions", [])
                    found += [_closed(item) for item in items if item.get("stopDate") is not None and item["stopDate"] >= since]
                    if not page.get("nextToken") or all(item["startDate"] < started_after for item in items):
                        break
                    request["nextToken"] = page["nextToken"]
        return found

    def describe_end(self, execution_arn: str) -> ExecutionStatusDetail | None:
        """An ended execution as its status-change event would have told it (its input, its error
        and cause); None when Step Functions no longer has it (90 days after its end)."""
        try:
            answer = self.stepfunctions.describe_execution(executionArn=execution_arn)
        except ClientError as exc:
            if error_code(exc) == "ExecutionDoesNotExist":
                return None
            raise HistoryUnavailable(f"DescribeExecution {execution_arn}: {error_code(exc)}") from exc
        except BotoCoreError as exc:
            raise HistoryUnavailable(f"DescribeExecution {execution_arn}: {exc}") from exc
        return ExecutionStatusDetail(
            executionArn=answer["executionArn"],
            stateMachineArn=answer["stateMachineArn"],
            name=answer["name"],
            status=answer["status"],
            startDate=_millis(answer.get("startDate")),
            stopDate=_millis(answer.get("stopDate")),
            input=answer.get("input"),
            error=answer.get("error"),
            cause=answer.get("cause"),
        )

    # --- task tokens ----------------------------------------------------------------------
    def wake(self, task_token: str, output: str) -> bool:
        """SendTaskSuccess on a task that waits on us; False when it waits no more."""
        try:
            self.stepfunctions.send_task_success(taskToken=task_token, output=output)
        except ClientError as exc:
            if error_code(exc) in TOKEN_GONE:
                return False
            raise TaskAnswerFailed(f"SendTaskSuccess: {exc}") from exc
        except BotoCoreError as exc:
            raise TaskAnswerFailed(f"SendTaskSuccess: {exc}") from exc
        return True

    def send_task_success(self, task_token: str, output: str) -> None:
        try:
            self.stepfunctions.send_task_success(taskToken=task_token, output=output)
        except (ClientError, BotoCoreError) as exc:
            raise TaskAnswerFailed(f"SendTaskSuccess: {exc}") from exc

    # --- ExecutionHistory -----------------------------------------------------------------
    def _history(self, execution_arn: str, *, newest_first: bool, with_data: bool, page_size: int) -> _HistoryPages:
        return _HistoryPages(self.stepfunctions, execution_arn, newest_first=newest_first, with_data=with_data, page_size=page_size)

    def states_entered(self, execution_arn: str) -> list[tuple[str, datetime]] | None:
        """(state name, time entered), oldest first; the oldest are missing when the history is
        longer than MAX_EVENTS_READ events.

        Reconcile Execution reads it for an execution that ended before it recorded its own outcome,
        to say where it stopped and how long each phase took. Reading is best effort: the record and
        the release of what the execution held never wait on it (None when it cannot be read).
        """
        entered: list[tuple[int, str, datetime]] = []
        try:
            for event in self._history(execution_arn, newest_first=True, with_data=False, page_size=PAGE_SIZE):
                details = event.get("stateEnteredEventDetails")
                if str(event.get("type", "")).endswith("StateEntered") and details:
                    entered.append((int(event["id"]), str(details["name"]), event["timestamp"]))
        except (ClientError, BotoCoreError) as exc:
            logger.warning("could not read the execution's history", extra={"execution_arn": execution_arn, "reason": str(exc)})
            return None
        # Event ids grow through the history: oldest first, however the pages came.
        return [(name, at) for _, name, at in sorted(entered)]

    def resubmissions(self, execution_arn: str) -> ResubmissionsRead:
        """What the execution did to its jobs, as its history shows it: every resubmission the agent
        answered (with the plan its step was given), and every job a resubmission was asked for
        (TaskScheduled with a plan), answered or not: an execution that ended before recording
        (stopped during the wait, after resubmitting at once) is settled from this.

        Read oldest first, with the events' data, up to MAX_EVENTS_READ events; ``complete`` says
        whether the whole history was read. A transient error raises (Reconcile Execution's queue
        delivers the end again); any other leaves the read incomplete."""
        plans: dict[str, ResumePlan] = {}
        seen: list[ResubmissionSeen] = []
        stopped: set[str] = set()
        history = self._history(execution_arn, newest_first=False, with_data=True, page_size=DATA_PAGE_SIZE)
        try:
            for event in history:
                _read_resubmit_event(event, plans, seen, stopped)
            return ResubmissionsRead(seen=seen, asked=set(plans), complete=history.whole, stopped=frozenset(stopped))
        except ClientError as exc:
            if is_transient(exc):
                raise HistoryUnavailable(f"GetExecutionHistory {execution_arn}: {error_code(exc)}") from exc
            logger.warning("could not read the execution's resubmissions", extra={"execution_arn": execution_arn, "reason": str(exc)})
        except BotoCoreError as exc:
            raise HistoryUnavailable(f"GetExecutionHistory {execution_arn}: {exc}") from exc
        return ResubmissionsRead(seen=seen, asked=set(plans), complete=False, stopped=frozenset(stopped))


def _closed(item: dict[str, Any]) -> ClosedExecution:
    return ClosedExecution(
        execution_arn=item["executionArn"],
        state_machine_arn=item["stateMachineArn"],
        name=item["name"],
        status=item["status"],
        started_at=item["startDate"],
        stopped_at=item["stopDate"],
    )


def _millis(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


class _HistoryPages:
    """GetExecutionHistory's events, page by page, up to MAX_EVENTS_READ of them; ``whole`` says,
    once iterated, whether the history ended before that bound."""

    def __init__(self, stepfunctions: Any, execution_arn: str, *, newest_first: bool, with_data: bool, page_size: int) -> None:
        self.stepfunctions = stepfunctions
        self.kwargs: dict[str, Any] = {
            "executionArn": execution_arn,
            "reverseOrder": newest_first,
            "maxResults": page_size,
            "includeExecutionData": with_data,
        }
        self.whole = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        read = 0
        while read < MAX_EVENTS_READ:
            page = self.stepfunctions.get_execution_history(**self.kwargs)
            events = page.get("events", [])
            yield from events
            read += len(events)
            if not page.get("nextToken"):
                self.whole = True
                return
            self.kwargs["nextToken"] = page["nextToken"]


def _read_resubmit_event(event: dict[str, Any], plans: dict[str, ResumePlan], seen: list[ResubmissionSeen], stopped: set[str]) -> None:
    """A resubmission's task is scheduled with its plan (TaskScheduled parameters: the Payload's
    ``plan``) and succeeds with the agent's answer (TaskSucceeded output, a ``resubmit_job``
    reply): both whatever the state's ResultSelector or ResultPath, in either workflow. Map
    iterations run concurrently, so an answer is matched to its plan by the job id. A stop only
    makes no copy: its job goes to ``stopped`` when it was stopped, never to ``plans`` or ``seen``."""
    scheduled, succeeded = event.get("taskScheduledEventDetails"), event.get("taskSucceededEventDetails")
    try:
        if scheduled is not None:
            payload = json.loads(scheduled.get("parameters") or "null")
            plan = (
                payload.get("Payload", {}).get("plan") if isinstance(payload, dict) and isinstance(payload.get("Payload"), dict) else None
            )
            if plan is not None:
                found = ResumePlan.model_validate(plan)
                if not found.stop_only:  # (a stop only makes no copy: its job's re-creation is asked after the rejoin)
                    plans[found.job.job_id] = found
        elif succeeded is not None:
            data = json.loads(succeeded.get("output") or "null")
            if isinstance(data, dict) and data.get("type") == RESUBMIT_REPLY:
                reply = CommandReply[ResubmitResult].model_validate(data)
                if not reply.result.stop_only:
                    seen.append(ResubmissionSeen(plan=plans.get(reply.result.old_job_id), reply=reply))
                elif reply.result.cancelled_old and not reply.dry_run:
                    stopped.add(reply.result.old_job_id)
    except (ValueError, ValidationError, RecursionError):
        return  # a truncated or foreign payload: not evidence of a resubmission
