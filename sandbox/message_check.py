"""Does a message a human reads contradict the incident's record? The claims a message can make,
checked against the facts: used by the property test over generated records
(tests/unit/test_messages_match_record.py) and by every drill of the fault suite
(sandbox/fault_suite.py), on every notification and record summary it produced.

The claims checked:
- commands are the cluster's own orchestrator's (no `scontrol` on EKS, no `kubectl` on Slurm);
- no command carries a placeholder (`<node>`, `<cluster>`, ...): every name is filled in;
- a job with a live copy is named with that copy, and nothing asks to resubmit or re-create it;
- no sentence speaks of "the job(s)" being resubmitted or not without naming them (it could not be
  true of every job), and a job that has no copy is named with the reason;
- a copy "runs again" only if it was seen RUNNING;
- a node is given back (`state=resume`, `kubectl uncordon`) only if this incident holds it out of
  service, never one someone else drained, one in service, or one it never touched;
- "recovered" is said only of an incident that changed something; an escalation has an error and a cause.
"""

from __future__ import annotations

import re

from hyperpod_recovery.domain.fates import acted, copy_label, job_label
from hyperpod_recovery.models.records import IncidentRecord

SLURM_COMMANDS = re.compile(r"\b(scontrol|squeue|sinfo|sbatch|scancel|sacct)\b")
KUBERNETES_COMMANDS = re.compile(r"\bkubectl\b")
PLACEHOLDER = re.compile(r"`[^`]*<[a-z][a-z _-]*>[^`]*`")
# Sentences that speak of jobs without naming any: true of some jobs at best.
GENERIC_JOB_CLAIMS = re.compile(
    r"\b(jobs? (were|was) not resubmitted|resubmit (the|a|this) job\b|resubmit (it|them) (by hand|yourself)|resubmit the others|"
    r"restart (it|them) by hand|no job to resubmit|then resubmit (it|the job)|re-?create (the|this) job\b)",
    re.IGNORECASE,
)
RESTART_VERBS = re.compile(r"\b(resubmit|re-create|recreate|restart) it\b|\bresubmit(ting)? (job|the job)\b", re.IGNORECASE)
GIVE_BACK = re.compile(r"scontrol update nodename=(\S+) state=resume|kubectl uncordon (\S+?)[`;\s]")


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n", text) if s.strip()]


def contradictions(record: IncidentRecord, subject: str, body: str) -> list[str]:
    """Every claim of (subject, body) that the record contradicts; [] when the message is true to it."""
    found: list[str] = []
    text = f"{subject}\n{body}"
    # The commands a message gives are in backticks; an error's own text (sbatch's stderr) is a fact.
    commands = " ".join(re.findall(r"`([^`]*)`", text))
    if record.orchestrator == "eks" and (m := SLURM_COMMANDS.search(commands)):
        found.append(f"a Slurm command ({m.group(0)}) in a message about an EKS cluster")
    if record.orchestrator == "slurm" and KUBERNETES_COMMANDS.search(commands):
        found.append("a kubectl command in a message about a Slurm cluster")
    found += [f"an unfilled placeholder in {m.group(0)}" for m in PLACEHOLDER.finditer(text)]
    found += [f"says of jobs without naming them: {m.group(0)!r}" for m in GENERIC_JOB_CLAIMS.finditer(text)]
    sentences = _sentences(body)
    for fate in record.job_fates:
        label = job_label(fate)
        about = [s for s in sentences if label in s]
        named = copy_label(fate) in text or re.search(
            rf"\b{re.escape(fate.job)} -> {re.escape(fate.copy_name or fate.copy_id or '')}\b", text
        )
        if fate.fate in ("resubmitted", "resubmitted_before") and fate.copy_id and not named:
            found.append(f"{label}: its copy {copy_label(fate)} is not named")
        if fate.live_copy and any(RESTART_VERBS.search(s) and "not start another" not in s and "only if" not in s for s in about):
            found.append(f"{label} has a live copy and a sentence asks to start another")
        if fate.fate == "not_resubmitted" and record.outcome not in ("rejected",) and not about:
            found.append(f"{label} was not resubmitted and the message does not name it")
        if fate.copy_state != "RUNNING" and any("runs again" in s for s in about):
            found.append(f"{label}: said to run again, its copy was {fate.copy_state or 'never seen'}")
    ours = {n.node for n in record.node_fates if n.fate in ("out_of_service", "replacing")}
    for m in GIVE_BACK.finditer(commands + " "):
        for node in filter(None, (m.group(1), m.group(2))):
            for name in node.strip("`;").split(","):
                if name not in ours:
                    found.append(f"gives back {name}, which this incident does not hold out of service")
    said_recovered = record.outcome == "recovered" or "RECOVERED" in body.split("\n", 1)[0]
    if said_recovered and not acted(record.job_fates, record.node_fates) and (record.job_fates or record.node_fates):
        found.append("says recovered of an incident that changed nothing")
    if record.outcome in ("escalated", "capped") and not (record.error and (record.cause or "").strip()):
        found.append("an escalation without its error and cause")
    if "Cause: -" in body and record.outcome in ("escalated", "capped", "aborted", "failed"):
        found.append("an empty cause")
    for summary_claim in ("no job ran on these nodes",):
        if summary_claim in record.summary and record.job_fates:
            found.append(f"the summary says {summary_claim!r} and names jobs")
    return found
