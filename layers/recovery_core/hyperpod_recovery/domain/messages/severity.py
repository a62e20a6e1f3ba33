"""How loudly an incident's notification is sent, and so where it goes (docs/runbook.md, Notifications).

page: a human must act now (the headline says ACTION NEEDED); it pages, and is posted to chat.
inform: nothing is asked of anyone (a recovery, a duplicate, a refused request); posted to chat.
quiet: a dry run; nothing was changed, so no chat and no page: the notification topic's own
subscribers (e-mail) still read it.

Every notification goes to the notification topic whatever its severity; the severity only adds
channels. A dry run is quiet whatever its outcome, and so is everything a dry-run stack (DryRun=true)
sends: an event it refused or found stale never parsed into a request that says "dry run", and its
record alone would page. During the dry-run period nobody is paged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from hyperpod_recovery.domain.messages.advice import needs_a_human

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import IncidentRecord
    from hyperpod_recovery.vocabulary import Outcome

Severity = Literal["page", "inform", "quiet"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
Channel = Literal["topic", "chat", "pager"]

# The outcomes whose headline is ACTION NEEDED (domain/messages/notification.py HEADLINES).
PAGING_OUTCOMES: frozenset[Outcome] = frozenset({"escalated", "capped", "stale", "aborted", "failed"})
INFORMING_OUTCOMES: frozenset[Outcome] = frozenset({"recovered", "duplicate", "rejected", "recovered_by_itself"})

CHANNELS: dict[Severity, frozenset[Channel]] = {
    "page": frozenset({"topic", "chat", "pager"}),
    "inform": frozenset({"topic", "chat"}),
    "quiet": frozenset({"topic"}),
}


def severity_of(record: IncidentRecord, *, stack_dry_run: bool) -> Severity:
    """A dry run, or anything on a dry-run stack, is quiet; an outcome that needs a human, or a job
    left without a copy, pages."""
    if stack_dry_run or record.dry_run or record.outcome == "dry_run":
        return "quiet"
    if record.outcome in PAGING_OUTCOMES or needs_a_human(record):
        return "page"
    return "inform"


def channels_of(severity: str) -> frozenset[Channel]:
    """Where a notification of this severity goes. An unknown severity (a message published by
    an older or newer version) pages: a lost page costs more than an extra one."""
    for known, channels in CHANNELS.items():
        if severity == known:
            return channels
    return CHANNELS["page"]
