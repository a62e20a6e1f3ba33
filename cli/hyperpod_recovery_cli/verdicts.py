"""The verdicts of the hang and slowdown rules, and an operator's review of each: how a rule earns
``enforce``.

    hyperpod-recovery verdicts list --stack NAME [--since 30d|ISO] [--rule RULE] [--open] [--json]
    hyperpod-recovery verdicts confirm VERDICT --stack NAME --reason TEXT [--by WHO] [--yes] [--force]
    hyperpod-recovery verdicts reject VERDICT --stack NAME --reason TEXT [--by WHO] [--yes] [--force]
    hyperpod-recovery verdicts at-risk --stack NAME [--since 30d|ISO] [--signal SIGNAL] [--json]   (verdicts_at_risk.py)

Detect Hung Jobs keeps one verdict per job and episode in the ledger (``VERDICT#<epoch>#<rule>#<job>``).
A verdict's id is ``<job>-<hung|slow>-<episode epoch>``: the name of the JobRecovery an enforced
verdict starts, without its ``hpj-`` (that name is accepted too), so an incident leads to its verdict.
HyperPod's own detectors, imported (steps/import_hyperpod_hangs.py: rules hyperpod_hang, hpto_hang,
hpto_slow), are named by their rule: ``<job>-<rule>-<episode epoch>``; they are observe-only, and
their row shows what the detector said and what HyperPod did, not a threshold of ours.
Each review is written over the verdict as it was read and kept in the audit log with who and why,
as every on-call change is (oncall.py). A rule's measured precision, confirmed / (confirmed +
rejected), is what docs/runbook.md asks of it before its mode goes from observe to enforce.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TextIO, get_args

from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN
from hyperpod_recovery.models.hangs import IMPORTED_RULES, HangRule, HangVerdict, RecordedVerdict
from hyperpod_recovery.models.records import AuditEntry
from hyperpod_recovery_cli.changes import confirm, who
from hyperpod_recovery_cli.inputs import InputRefused, one_line
from hyperpod_recovery_cli.oncall import (
    EXIT_NO,
    EXIT_OK,
    OnCallRefused,
    _age,
    _since,
    _table,
    change_options,
    deployed,
    reason_of,
    stack_option,
)

RULES: tuple[HangRule, ...] = get_args(HangRule)
# The id's word for each rule: ours, the execution name's (HangVerdict.reason, hang_execution_name);
# an imported rule's, its name (it starts no execution).
REASONS: dict[HangRule, str] = {"stall": "hung", "slow": "slow"}
REASONS.update({rule: str(rule) for rule in IMPORTED_RULES})
RULE_OF_REASON: dict[str, HangRule] = {word: rule for rule, word in REASONS.items()}
EXECUTION_PREFIX = "hpj-"
# The template parameter that sets each rule's mode, and its default there (template.yaml); the
# training operator's rules have none (always observe: the poller records them on EKS stacks).
MODE_PARAMETERS: dict[HangRule, tuple[str, str]] = {
    "stall": ("HangStallMode", "enforce"),
    "slow": ("HangSlowMode", "observe"),
    "hyperpod_hang": ("HyperPodHangMode", "observe"),
}
# HyperPod's Slurm hang events are imported only from the log group this names (empty: not imported).
HYPERPOD_HANG_LOG_GROUP = "HyperPodHangLogGroup"
# What HyperPod did, as a row says it (ImportedDetection.taken).
TAKEN_TEXT = {"cancel": "HyperPod cancelled it", "notify": "HyperPod reported it", "restarted": "the operator restarted it"}
DEFAULT_SINCE = "30d"
# Below this many reviewed verdicts a precision says little (one rejection of four is 75 %): n/a.
MIN_REVIEWED = 5
# docs/runbook.md's bar for switching a rule to enforce: 20 reviewed verdicts at >= 90 % precision.
ENFORCE_REVIEWED = 20
ENFORCE_PRECISION = 0.9
VERDICT_ID = re.compile(rf"^(?P<job>.+)-(?P<reason>{'|'.join(REASONS.values())})-(?P<epoch>[0-9]{{1,12}})$")
# The job a progress report names (models/progress.py ProgressJobKey): a Slurm id, or namespace/name.
JOB_KEY = re.compile(rf"{SLURM_JOB_ID_PATTERN}|^[a-z0-9]([-a-z0-9]{{0,61}}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?$")
ID_LIMIT = 400
MAX_EPOCH = int(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp())  # the last second a datetime holds


# --- the id ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VerdictRef:
    """What names one verdict in the ledger: its rule, job and episode (seconds since 1970)."""

    rule: HangRule
    job: str
    episode: int

    @property
    def episode_at(self) -> datetime:
        return datetime.fromtimestamp(self.episode, UTC)

    def __str__(self) -> str:
        return f"{self.job}-{REASONS[self.rule]}-{self.episode}"


def verdict_ref(verdict: HangVerdict) -> VerdictRef:
    return VerdictRef(verdict.rule, verdict.job, int(verdict.episode_at.timestamp()))


def verdict_id(verdict: HangVerdict) -> str:
    return str(verdict_ref(verdict))


def parse_verdict_id(text: str) -> VerdictRef:
    """The verdict an id names (``1001-hung-1764122400``), or the JobRecovery's name (``hpj-…``)."""
    said = f"verdict {one_line(text)[:80]!r}"
    if len(text) > ID_LIMIT:
        raise InputRefused(f"{said}…: at most {ID_LIMIT} characters")
    match = VERDICT_ID.fullmatch(text)
    job = match["job"] if match else ""
    # A Slurm job id never starts with hpj- and an EKS job always holds a '/': hpj-<Slurm id> is an
    # execution's name, hpj-ns/name an EKS job in a namespace called hpj-….
    if match and job.startswith(EXECUTION_PREFIX) and re.fullmatch(SLURM_JOB_ID_PATTERN, job[len(EXECUTION_PREFIX) :]):
        job = job[len(EXECUTION_PREFIX) :]
    if match is None or not JOB_KEY.fullmatch(job):
        raise InputRefused(
            f"{said}: not a verdict id (<job>-hung-<epoch>, <job>-slow-<epoch> or <job>-<imported rule>-<epoch>, "
            "as `hyperpod-recovery verdicts list` shows it)"
        )
    if int(match["epoch"]) > MAX_EPOCH:
        raise InputRefused(f"{said}: its epoch {match['epoch']} is past the year 9999 (at most {MAX_EPOCH} seconds since 1970)")
    rule = RULE_OF_REASON[match["reason"]]
    return VerdictRef(rule, job, int(match["epoch"]))


# --- precision -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RuleTally:
    """A rule's verdicts over a window, by review."""

    rule: HangRule
    verdicts: int
    confirmed: int
    rejected: int

    @property
    def open(self) -> int:
        return self.verdicts - self.confirmed - self.rejected

    @property
    def reviewed(self) -> int:
        return self.confirmed + self.rejected

    @property
    def precision(self) -> float | None:
        """confirmed / reviewed; None (n/a) below MIN_REVIEWED reviews."""
        return self.confirmed / self.reviewed if self.reviewed >= MIN_REVIEWED else None

    @property
    def meets_enforce_bar(self) -> bool:
        return self.reviewed >= ENFORCE_REVIEWED and self.precision is not None and self.precision >= ENFORCE_PRECISION


def tally(rule: HangRule, verdicts: Sequence[RecordedVerdict]) -> RuleTally:
    reviews = Counter(v.review for v in verdicts if v.verdict.rule == rule)
    return RuleTally(rule, sum(reviews.values()), reviews["confirmed"], reviews["rejected"])


def precision_text(counted: RuleTally) -> str:
    if counted.precision is None:
        return f"n/a ({counted.reviewed} reviewed, {MIN_REVIEWED} needed)"
    return f"{counted.precision * 100:.0f} % ({counted.confirmed}/{counted.reviewed})"


def tally_text(counted: RuleTally, mode: str) -> str:
    text = (
        f"{counted.rule} (mode {mode}): {counted.verdicts} verdicts, {counted.confirmed} confirmed, {counted.rejected} rejected, "
        f"{counted.open} open; precision {precision_text(counted)}"
    )
    if counted.rule in IMPORTED_RULES:
        # (its fields are undocumented: no enforce to earn; docs/decisions.md 2026-11-27)
        return text + "; enforce: not offered for an imported detector"
    if mode == "observe":
        bar = f"{ENFORCE_REVIEWED} reviewed at >= {ENFORCE_PRECISION * 100:.0f} %"
        text += f"; enforce bar ({bar}): {'met' if counted.meets_enforce_bar else 'not yet'}"
    return text


# --- one verdict, as a row -------------------------------------------------------------------------
def observed_text(verdict: HangVerdict) -> str:
    """What the rule saw against its threshold; for an imported detector, its rule and what HyperPod did."""
    if verdict.imported is not None:
        imported = verdict.imported
        taken = TAKEN_TEXT.get(imported.taken, "HyperPod did not say what it did")
        return f"{imported.detector_rule}: {taken}" if imported.detector_rule else taken
    if verdict.rule == "stall":
        return f"silent {verdict.observed_seconds:.0f}s > {verdict.threshold_seconds:.0f}s"
    baseline = f", baseline {verdict.baseline_step_seconds:.2f}s" if verdict.baseline_step_seconds is not None else ""
    return f"step {verdict.observed_seconds:.2f}s > {verdict.threshold_seconds:.2f}s{baseline}"


def action_text(recorded: RecordedVerdict) -> str:
    if recorded.execution:
        return f"started {recorded.execution}"
    return recorded.action.removeprefix("observed: ")


def review_text(recorded: RecordedVerdict) -> str:
    if recorded.review == "open":
        return "open"
    name = (recorded.reviewed_by or "?").split(" (", 1)[0]  # the login; the AWS identity is in --json
    return f"{recorded.review} by {name}"


def _row(recorded: RecordedVerdict, now: datetime) -> list[str]:
    verdict = recorded.verdict
    return [
        verdict_id(verdict),
        _age(verdict.decided_at, now),
        verdict.rule,
        verdict.mode,
        verdict.job,
        "-" if verdict.imported is not None else str(verdict.step),
        observed_text(verdict),
        ", ".join(verdict.suspects) or "-",
        review_text(recorded),
        action_text(recorded),
    ]


def _shown(place_parameters: dict[str, str], rule: HangRule, decided: Sequence[RecordedVerdict]) -> bool:
    """Ours always; an imported detector's where the stack imports it, or where it has verdicts."""
    if any(v.verdict.rule == rule for v in decided):
        return True
    if rule == "hyperpod_hang":
        return _mode(place_parameters, rule) != "off"
    if rule in IMPORTED_RULES:  # (the training operator's: recorded by the EKS poller)
        return place_parameters.get("Orchestrator") == "Eks"
    return True


def _mode(place_parameters: dict[str, str], rule: HangRule) -> str:
    if rule not in MODE_PARAMETERS:
        return "observe"
    if rule == "hyperpod_hang" and not place_parameters.get(HYPERPOD_HANG_LOG_GROUP):
        return "off"
    parameter, default = MODE_PARAMETERS[rule]
    return place_parameters.get(parameter) or default


# --- the commands ----------------------------------------------------------------------------------
def list_verdicts(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, now: datetime) -> int:
    since = _since(args.since or DEFAULT_SINCE, now)
    assert since is not None  # (a default is given)
    place = deployed(args, client)
    # By when each was decided: a slowdown's episode is its job's start, which may be older than the window.
    decided = [v for v in place.ledger.verdicts(place.cluster) if v.verdict.decided_at >= since]
    rules = [args.rule] if args.rule else [r for r in RULES if _shown(place.stack.parameters, r, decided)]
    window = [v for v in decided if v.verdict.rule in rules]
    window.sort(key=lambda v: v.verdict.decided_at, reverse=True)
    shown = [v for v in window if v.review == "open"] if args.open else window
    tallies = [tally(rule, window) for rule in rules]
    modes = {rule: _mode(place.stack.parameters, rule) for rule in rules}
    if args.json:
        document = {
            "since": since.isoformat(),
            "verdicts": [{"id": verdict_id(v.verdict)} | json.loads(v.model_dump_json()) for v in shown],
            "rules": {
                t.rule: {
                    "mode": modes[t.rule],
                    "verdicts": t.verdicts,
                    "confirmed": t.confirmed,
                    "rejected": t.rejected,
                    "open": t.open,
                    "precision": t.precision,
                    "meets_enforce_bar": t.meets_enforce_bar,
                }
                for t in tallies
            },
        }
        print(json.dumps(document, indent=2), file=out)
        return EXIT_OK
    said = ", ".join([f"since {since:%Y-%m-%d %H:%M} UTC"] + ([f"rule {args.rule}"] if args.rule else []) + (["open"] if args.open else []))
    print(f"{place.cluster} (stack {place.stack.name}): {len(shown)} verdict(s) ({said})", file=out)
    if shown:
        table = [["VERDICT", "AGE", "RULE", "MODE", "JOB", "STEP", "OBSERVED", "SUSPECTS", "REVIEW", "ACTION"]]
        _table(table + [_row(v, now) for v in shown], out)
    print("\nper rule (every verdict of the window, reviewed or not):", file=out)
    for counted in tallies:
        print(f"  {tally_text(counted, modes[counted.rule])}", file=out)
    if any(v.review == "open" for v in shown):
        print(
            f"\nhyperpod-recovery verdicts confirm|reject <VERDICT> --stack {place.stack.name} --reason TEXT: "
            "was it a real hang or slowdown? (docs/runbook.md)",
            file=out,
        )
    return EXIT_OK


def review_verdict(
    review: Literal["confirmed", "rejected"],
) -> Callable[[argparse.Namespace, Callable[[str], Any], TextIO, TextIO, datetime], int]:
    def command(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, stdin: TextIO, now: datetime) -> int:
        return _review(review, args, client, out, stdin, now)

    return command


def _review(
    review: Literal["confirmed", "rejected"],
    args: argparse.Namespace,
    client: Callable[[str], Any],
    out: TextIO,
    stdin: TextIO,
    now: datetime,
) -> int:
    reason = reason_of(args)
    ref = parse_verdict_id(args.verdict)
    place = deployed(args, client)
    recorded = place.ledger.verdict(place.cluster, ref.rule, ref.job, ref.episode_at)
    if recorded is None:
        raise OnCallRefused(
            f"no verdict {ref} in the ledger of stack {place.stack.name} "
            f"(hyperpod-recovery verdicts list --stack {place.stack.name} shows each verdict's id; --since 400d for the oldest)"
        )
    verdict = recorded.verdict
    if recorded.review != "open":
        earlier = f"{recorded.review} by {recorded.reviewed_by}" + (
            f" at {recorded.reviewed_at:%Y-%m-%d %H:%M} UTC" if recorded.reviewed_at else ""
        )
        if recorded.review == review and not args.force:
            print(f"{ref}: already {earlier}: {recorded.review_note}; nothing changed", file=out)
            return EXIT_OK
        if not args.force:
            # A review counts toward the rule's precision: changing one is a decision of its own.
            raise OnCallRefused(f"verdict {ref} was already {earlier}: {recorded.review_note}; add --force to review it again")
    verb = "Confirm" if review == "confirmed" else "Reject"
    seen = f"{verdict.rule} of job {verdict.job}, {observed_text(verdict)}"
    question = f"{verb} verdict {ref} ({seen}): counted in the {verdict.rule} rule's precision?"
    if not confirm(question, args, stdin, out):
        print("nothing changed", file=out)
        return EXIT_NO
    by = who(args, client)
    # The write is conditioned on the verdict as it was read before the question (which may have
    # waited minutes at a terminal): a review made meanwhile is never written over.
    updated = RecordedVerdict.model_validate(
        recorded.model_dump() | {"review": review, "reviewed_by": by[:512], "reviewed_at": now, "review_note": reason}
    )
    if not place.ledger.review_verdict(recorded, updated):
        raise OnCallRefused(f"verdict {ref} changed since it was read (reviewed meanwhile?): nothing written; list it again")
    was = recorded.review + (f" by {recorded.reviewed_by}" if recorded.reviewed_by else "")
    place.ledger.audit(
        place.cluster,
        AuditEntry(
            at=now,
            by=by,
            action="verdict confirm" if review == "confirmed" else "verdict reject",
            target=str(ref),
            reason=reason,
            detail=f"{verdict.rule} verdict ({verdict.mode}) of job {verdict.job}; was {was}",
        ),
    )
    print(f"{ref}: {review} by {by}: {reason}", file=out)
    since = _since(DEFAULT_SINCE, now) or now
    counted = tally(verdict.rule, [v for v in place.ledger.verdicts(place.cluster) if v.verdict.decided_at >= since])
    print(
        f"the {verdict.rule} rule over the last {DEFAULT_SINCE}: {tally_text(counted, _mode(place.stack.parameters, verdict.rule))}",
        file=out,
    )
    return EXIT_OK


# --- the parser ------------------------------------------------------------------------------------
REVIEWS: tuple[tuple[str, Literal["confirmed", "rejected"], str], ...] = (
    ("confirm", "confirmed", "the verdict was right: the job was hung or slow"),
    ("reject", "rejected", "the verdict was wrong: the job was fine (counts against the rule's precision)"),
)


def add_commands(groups: Any, region: argparse.ArgumentParser, wrap: Callable[[Callable[..., int], bool], Any]) -> None:
    """``verdicts list|confirm|reject`` on the CLI's subparsers (as oncall.add_commands)."""
    verdicts = groups.add_parser("verdicts", help="hang and slowdown verdicts: list them with each rule's precision, confirm or reject one")
    verdicts.set_defaults(usage=verdicts)  # (alone: its help, exit 2)
    actions = verdicts.add_subparsers(dest="verdicts_command", title="commands", metavar="COMMAND")
    listed = actions.add_parser("list", parents=[region], help="verdicts newest first, then each rule's counts and precision")
    stack_option(listed)
    listed.add_argument("--since", help=f"only those decided since: a duration (30m, 6h, 7d) or an ISO time (default {DEFAULT_SINCE})")
    listed.add_argument("--rule", choices=RULES, help="only this rule's")
    listed.add_argument("--open", action="store_true", help="only verdicts nobody reviewed yet (the counts stay the window's)")
    listed.add_argument("--json", action="store_true")
    listed.set_defaults(run=wrap(list_verdicts, False))
    from hyperpod_recovery_cli import verdicts_at_risk  # (the at-risk verdicts: their own module)

    verdicts_at_risk.add_command(actions, region, wrap)
    for name, review, text in REVIEWS:
        parser = actions.add_parser(name, parents=[region], help=text)
        parser.add_argument(
            "verdict",
            help="the verdict's id as `verdicts list` shows it (<job>-hung-<epoch>, <job>-hpto_hang-<epoch>, …), or its hpj-… incident",
        )
        stack_option(parser)
        change_options(parser)
        parser.add_argument("--force", action="store_true", help="review again a verdict already confirmed or rejected")
        parser.set_defaults(run=wrap(review_verdict(review), True))
