"""What an ended execution that never recorded itself left behind, as Reconcile Execution settles and
records it: the jobs it resubmitted, the claims kept, the nodes still out of service, and how long its
locks are held. (Whether anything is left to do at all: settled.py.)"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.nodes.replace import marked_nodes
from hyperpod_recovery.domain.record.incident import resubmission, submitted_here

if TYPE_CHECKING:
    from hyperpod_recovery.domain.record.reconcile import EndedExecution
    from hyperpod_recovery.models.commands import CommandReply, ResubmitResult
    from hyperpod_recovery.models.node_recovery import ResumePlan
    from hyperpod_recovery.models.records import Holdings, Resubmission


def unknown_state_hold(held: Holdings | None, recorded_at: datetime, escalation_hold: timedelta) -> datetime | None:
    """An unrecorded end's nodes are in an unknown state (half drained, half replaced): locked for a
    human, for a bounded time, like an escalation."""
    return recorded_at + escalation_hold if held is not None and held.locks else None


@dataclass(frozen=True)
class Resubmitted:
    """The jobs an execution resubmitted before it ended (at once, while its replacement
    provisioned): old id -> new id, and the record's entries with when each was answered."""

    jobs: dict[str, str]
    entries: list[tuple[Resubmission, datetime]]


def resubmitted(seen: Sequence[tuple[ResumePlan | None, CommandReply[ResubmitResult]]]) -> Resubmitted:
    """Of the resubmissions its history shows answered, those this execution submitted itself."""
    done = [(plan, reply) for plan, reply in seen if submitted_here(reply)]
    return Resubmitted(
        jobs={reply.result.old_job_id: reply.result.new_job_id for _, reply in done if reply.result.new_job_id},
        entries=[
            (entry, reply.completed_at) for plan, reply in done if plan is not None and (entry := resubmission(plan, reply)) is not None
        ],
    )


@dataclass(frozen=True)
class HistoryAnswers:
    """Which jobs the history shows a resubmission asked for and answered, and whether it was read whole."""

    asked: Collection[str]
    answered: Collection[str]
    complete: bool


def kept_claims(claims: Collection[str], answers: HistoryAnswers, resubmitted: Collection[str]) -> set[str]:
    """A claim whose resubmission was asked for and never seen answered may have been carried out
    (the agent ran sbatch, the answer was lost with the execution): kept until it expires, never
    given to a second restart. Without the whole history, every claim not known done is kept."""
    kept = set(claims) & (set(answers.asked) - set(answers.answered)) if answers.complete else set(claims)
    return kept - set(resubmitted)


@dataclass(frozen=True)
class NodesLeft:
    """The nodes an unrecorded end replaced and rebooted, and those of them still out of service:
    their places under the cap stay counted until ``in_flight_until``, then expire (nobody watches them)."""

    replaced: list[str]
    rebooted: list[str]
    in_flight: list[str]
    in_flight_until: datetime


def nodes_left(end: EndedExecution, held: Holdings | None, marks: set[str], rejoin_deadline: timedelta, now: datetime) -> NodesLeft:
    """Nodes it replaced or rebooted and never saw back are counted for the rejoin deadline from its end."""
    replaced, rebooted = marked_nodes(marks)
    out = [] if end.saw_nodes_back else sorted(n for n in {*replaced, *rebooted} if held is not None and n in held.reserved)
    return NodesLeft(replaced=replaced, rebooted=rebooted, in_flight=out, in_flight_until=(end.stopped_at or now) + rejoin_deadline)


def counted_by_safety(held: Holdings | None) -> bool:
    """It passed the safety policy and was acting: the breaker and repeat-offender windows count it."""
    return held is not None and bool(held.reserved)
