"""A drill that asserts: a scenario's ``expect`` block held against what the drill did (its report).

Pure: ``evaluate(expect, report, cap)`` returns one ``Check`` per expectation, each saying what was
expected and what happened, so a failed drill is one line per broken expectation. A scenario without
``expect`` is held to ``IMPLICIT``: no incident needed a human, nothing past the cap, one copy of
every job, no message the record contradicts. So ``make drill`` in a platform team's CI fails on an
escalation unless the scenario says that is what it is for.

What each expectation reads from the report (sandbox/report/):
    outcomes                  incidents[].outcome, as a multiset (order is not asserted)
    resubmissions             copies made: Slurm submissions of an old job / EKS re-creations
    node_repairs              nodes HyperPod replaced or rebooted (replacements[], reboots[])
    checkpoint_step           every resubmission's step (incidents[].resubmissions[].checkpoint_step)
    max_job_downtime_seconds  jobs[].downtime_seconds (a job never running again fails it)
    within_cap                the most nodes out at once (ours) <= the cluster cap (fault_suite's rule)
    one_copy_per_job          second_copies is empty
    messages_match_record     message_contradictions is empty
    never_say / always_say    phrases (case-insensitive) in no / some notification's subject or message
    no_human_needed           no incident outcome in NEEDS_A_HUMAN
    verdicts                  hangs.verdicts, counted per rule (hang and slowdown verdicts kept)
    verdict_suspects          every verdict's suspects (the nodes it blamed)
    at_risk_verdicts          at_risk.verdicts, counted per signal (at-risk verdicts kept, once per episode)
    at_risk_outcomes          at_risk.verdicts' outcomes as the drill's last tick settled them, counted
    planned_swaps             planned_swaps[].outcome, counted (moved, left, dry_run, yielded, ...)
    swap_work_lost_within_seconds      each moved swap's work past the commit until the old copy stopped
    swap_running_again_within_seconds  each moved swap's new copy running at most this long after the commit
    hang_detected_within_seconds  each stall verdict decided at most this long after the job's last progress
    running_again_within_seconds  each hang's job has a copy running at most this long after the hang began
    shrunk_to                 some copy of each job a fault hit ran on this many nodes (jobs[].copies[].nodes)
    grown_back_to             each hit job's newest copy runs on this many nodes
    steps_monotone            no copy of a job resumed from an earlier step than the copy before it
    no_secret_kept            secrets.found_in is empty and every kept evidence item says what it redacted
                              (a hang fault's stacks: secret_in_log; sandbox/planted.py)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from hyperpod_recovery.vocabulary import Outcome
from hyperpod_recovery_cli.scenario_schema import ExpectSpec

# The outcomes whose page says ACTION NEEDED (domain/messages/notification.py's headlines).
NEEDS_A_HUMAN: tuple[Outcome, ...] = ("escalated", "capped", "stale", "aborted", "failed")


IMPLICIT = ExpectSpec(no_human_needed=True)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    expected: str
    got: str

    @property
    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: expected {self.expected}; got {self.got}"


def verdict_line(name: str, checks: list[Check]) -> str:
    """A drill's own pass/fail against its expectations: the last line it prints, the HTML report's first."""
    failed = sum(not c.ok for c in checks)
    if failed:
        return f"FAIL: drill {name}: {failed} of {len(checks)} expectations failed (the FAIL lines above)"
    return f"PASS: drill {name}: all {len(checks)} expectations met"


def _resubmissions(report: dict[str, Any]) -> int:
    if "kubernetes_jobs" in report:
        return sum(1 for job in report["kubernetes_jobs"] if "resubmitted_from" in job)
    return len(report["slurm"]["submissions"])


def _messages(report: dict[str, Any]) -> list[str]:
    return [f"{n.get('subject', '')}\n{n.get('message', '')}".lower() for n in report.get("notifications", [])]


def evaluate(expect: ExpectSpec, report: dict[str, Any], cap: int, most_out: int) -> list[Check]:
    """Each expectation of ``expect`` against the drill's ``report``; ``cap`` is the cluster cap the
    drill ran with and ``most_out`` the most nodes it had out of service at once."""
    checks: list[Check] = []
    outcomes = Counter(i["outcome"] for i in report["incidents"])
    shown = ", ".join(f"{o} x{n}" if n > 1 else o for o, n in sorted(outcomes.items())) or "no incident"
    if expect.outcomes is not None:
        wanted = Counter(expect.outcomes)
        said = ", ".join(f"{o} x{n}" if n > 1 else o for o, n in sorted(wanted.items())) or "no incident"
        checks.append(Check("outcomes", outcomes == wanted, said, shown))
    if expect.no_human_needed:
        human = sorted(o for o in outcomes if o in NEEDS_A_HUMAN)
        errors = sorted({f"{i['outcome']} ({i['error']})" for i in report["incidents"] if i["outcome"] in NEEDS_A_HUMAN and i.get("error")})
        checks.append(Check("no human needed", not human, "no incident that needs a human", ", ".join(errors or human) or shown))
    if expect.resubmissions is not None:
        made = _resubmissions(report)
        checks.append(Check("resubmissions", made == expect.resubmissions, str(expect.resubmissions), str(made)))
    if expect.checkpoint_step is not None:
        steps = sorted({r["checkpoint_step"] for i in report["incidents"] for r in i.get("resubmissions", [])})
        ok = bool(steps) and steps == [expect.checkpoint_step]
        checks.append(Check("checkpoint step", ok, f"every resubmission from step {expect.checkpoint_step}", str(steps or "none")))
    if expect.node_repairs is not None:
        repairs = len(report.get("replacements", [])) + len(report.get("reboots", []))
        checks.append(Check("node repairs", repairs == expect.node_repairs, str(expect.node_repairs), str(repairs)))
    if expect.max_job_downtime_seconds is not None:
        # (a job no fault hit has no downtime to bound: fault_at is null)
        worst = [(j.get("label") or j["job"], j.get("downtime_seconds")) for j in report.get("jobs", []) if j.get("fault_at") is not None]
        late = [f"{name}: {'never running again' if down is None else f'{down:g} s'}" for name, down in worst
                if down is None or down > expect.max_job_downtime_seconds]  # fmt: skip
        got = "; ".join(late) or (f"at most {max(d for _, d in worst if d is not None):g} s" if worst else "no job")
        checks.append(Check("job downtime", not late, f"each job down at most {expect.max_job_downtime_seconds:g} s", got))
    if expect.within_cap:
        checks.append(Check("within the cap", most_out <= cap, f"at most {cap} node(s) out at once", f"{most_out}"))
    if expect.one_copy_per_job:
        copies = report.get("second_copies", [])
        checks.append(Check("one copy per job", not copies, "no second live copy", f"{len(copies)} second cop(ies)"))
    if expect.messages_match_record:
        contradictions = report.get("message_contradictions", [])
        got = f"{len(contradictions)}" + (f": {contradictions[0]}" if contradictions else "")
        checks.append(Check("messages match the record", not contradictions, "no contradiction", got[:300]))
    checks += _size_checks(expect, [j for j in report.get("jobs", []) if j.get("fault_at") is not None])
    checks += _hang_checks(expect, report.get("hangs") or {"verdicts": [], "hangs": []})
    checks += _at_risk_checks(expect, (report.get("at_risk") or {}).get("verdicts") or [])
    checks += _swap_checks(expect, report.get("planned_swaps") or [])
    if expect.no_secret_kept:
        secrets = report.get("secrets") or {"found_in": ["(no secret was planted: a hang fault with stacks secret_in_log)"]}
        found, redacted = secrets["found_in"], secrets.get("evidence_redacted", 0)
        ok = not found and redacted > 0 and redacted == secrets.get("evidence_items")
        got = f"found in {', '.join(found[:5])}" if found else f"{redacted} of {secrets.get('evidence_items', 0)} evidence item(s) redacted"
        checks.append(Check("no secret kept", ok, "in no channel, record, ledger item or state; the evidence redacted", got[:300]))
    messages = _messages(report)
    for phrase in expect.never_say:
        found = sum(phrase.lower() in m for m in messages)
        checks.append(Check(f"never says {phrase!r}", not found, "in no message", f"in {found} message(s)"))
    for phrase in expect.always_say:
        found = sum(phrase.lower() in m for m in messages)
        checks.append(Check(f"says {phrase!r}", bool(found), "in some message", f"in {found} of {len(messages)} message(s)"))
    return checks


def _size_checks(expect: ExpectSpec, hit: list[dict[str, Any]]) -> list[Check]:
    """Shrink-and-continue: the sizes each hit job's copies ran at, and the steps they resumed from."""
    checks: list[Check] = []

    def sizes(job: dict[str, Any]) -> list[int]:
        return [c["nodes"] for c in job.get("copies", [])]

    shown = "; ".join(f"{j.get('label') or j['job']}: {sizes(j) or 'no copy'}" for j in hit) or "no job hit"
    if expect.shrunk_to is not None:
        ok = bool(hit) and all(expect.shrunk_to in sizes(j) for j in hit)
        checks.append(Check("shrunk", ok, f"a copy of each hit job on {expect.shrunk_to} node(s)", shown))
    if expect.grown_back_to is not None:
        ok = bool(hit) and all(sizes(j)[-1:] == [expect.grown_back_to] for j in hit)
        checks.append(Check("grown back", ok, f"each hit job's newest copy on {expect.grown_back_to} node(s)", shown))
    if expect.steps_monotone:
        backwards = [
            f"{j.get('label') or j['job']}: {steps}"
            for j in hit
            if (steps := [c["from_step"] for c in j.get("copies", []) if c.get("from_step") is not None]) != sorted(steps)
        ]
        said = "no copy resumed from an earlier step than the one before"
        checks.append(Check("steps monotone", not backwards, said, "; ".join(backwards) or "none"))
    return checks


def _at_risk_checks(expect: ExpectSpec, verdicts: list[dict[str, Any]]) -> list[Check]:
    checks: list[Check] = []
    asked = (("at-risk verdicts", expect.at_risk_verdicts, "signal"), ("at-risk outcomes", expect.at_risk_outcomes, "outcome"))
    for name, wanted, key in asked:
        if wanted is None:
            continue
        counted = Counter(v[key] for v in verdicts)
        said = ", ".join(f"{k} x{n}" for k, n in sorted(wanted.items())) or "none"
        shown = ", ".join(f"{k} x{n}" for k, n in sorted(counted.items())) or "none"
        checks.append(Check(name, counted == Counter({k: n for k, n in wanted.items() if n}), said, shown))
    return checks


def _swap_checks(expect: ExpectSpec, swaps: list[dict[str, Any]]) -> list[Check]:
    checks: list[Check] = []
    if expect.planned_swaps is not None:
        counted = Counter(s["outcome"] for s in swaps)
        said = ", ".join(f"{k} x{n}" for k, n in sorted(expect.planned_swaps.items())) or "none"
        shown = ", ".join(f"{k} x{n}" for k, n in sorted(counted.items())) or "none"
        checks.append(Check("planned swaps", counted == Counter({k: n for k, n in expect.planned_swaps.items() if n}), said, shown))
    moved = [s for s in swaps if s["outcome"] == "moved"]
    bounds = (
        ("work lost past the checkpoint", expect.swap_work_lost_within_seconds, "work_lost_past_checkpoint_seconds"),
        ("running again after the commit", expect.swap_running_again_within_seconds, "running_again_after_commit_seconds"),
    )
    for name, bound, key in bounds:
        if bound is None:
            continue
        figures = [s.get(key) for s in moved]
        ok = bool(figures) and all(f is not None and f <= bound for f in figures)
        got = ", ".join("not measured" if f is None else f"{f:g} s" for f in figures) or "no swap moved a job"
        checks.append(Check(name, ok, f"at most {bound:g} s", got))
    return checks


def _hang_checks(expect: ExpectSpec, hangs: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    verdicts = hangs["verdicts"]
    if expect.verdicts is not None:
        counted = Counter(v["rule"] for v in verdicts)
        said = ", ".join(f"{rule} x{n}" for rule, n in sorted(expect.verdicts.items())) or "no verdict"
        shown = ", ".join(f"{rule} x{n}" for rule, n in sorted(counted.items())) or "no verdict"
        checks.append(Check("verdicts", counted == Counter(expect.verdicts), said, shown))
    if expect.verdict_suspects is not None:
        blamed = sorted({n for v in verdicts for n in v["suspects"]})
        checks.append(
            Check("verdict suspects", blamed == sorted(expect.verdict_suspects), str(sorted(expect.verdict_suspects)), str(blamed))
        )
    if expect.hang_detected_within_seconds is not None:
        stalls = [v["detected_after_seconds"] for v in verdicts if v["rule"] == "stall"]
        bound = expect.hang_detected_within_seconds
        ok = bool(stalls) and max(stalls) <= bound
        got = f"{max(stalls):g} s after the last progress" if stalls else "no stall verdict"
        checks.append(Check("hang detected", ok, f"a stall verdict at most {bound:g} s after the last progress", got))
    if expect.running_again_within_seconds is not None:
        bound = expect.running_again_within_seconds
        after = [h["running_again_after_seconds"] for h in hangs["hangs"]]
        ok = bool(after) and all(a is not None and a <= bound for a in after)
        got = "; ".join("never" if a is None else f"{a:g} s" for a in after) or "no hang"
        checks.append(Check("running again after the hang", ok, f"a copy running at most {bound:g} s after each hang began", got))
    return checks


Verdict = Literal["pass", "fail"]


def verdict(checks: list[Check]) -> Verdict:
    return "pass" if all(c.ok for c in checks) else "fail"
