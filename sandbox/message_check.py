"""Does a message a human reads contradict the incident's record? The claims a message can make,
checked against the facts: used by the property tests (tests/unit/test_messages_match_record.py)
and by every drill of the golden test and the fault suite (sandbox/fault_suite.py), on every
notification and record summary it produced.

The claims checked:
- commands are the cluster's own orchestrator's (no `scontrol` on EKS, no `kubectl` on Slurm), and
  every node a command names is a node of the incident, by the orchestrator's own name for it;
- no command carries a placeholder (`<node>`, `{cluster}`, `s3://...`): every name is filled in;
- a job with a live copy is named with that copy, and no line asks to resubmit or re-create it;
  an instruction to restart names the job it is about, and that job has no copy; a dry run, or a
  message that says there is nothing to do, asks for no restart at all;
- no sentence speaks of "the job(s)" being resubmitted or not without naming them (it could not be
  true of every job), and a job that has no copy is named with the reason;
- a copy "runs again" only if it was seen RUNNING;
- a node is given back (`state=resume`, `kubectl uncordon`) only if this incident holds it out of
  service (its own drain or cordon), or with the check first where the record cannot say;
- "recovered" is said only of an incident that changed something; an escalation has an error and a cause.
An error's own words (the cause, a job's reason), quoted as facts, are not the message's claims.
A verdict notice (an imported hang verdict's message) is checked against its verdict instead
(``verdict_contradictions``).
"""

from __future__ import annotations

import re

from hyperpod_recovery.domain.messages.verdict_notice import OPERATOR_JOB_KIND, job_named, orchestrator_of, verdict_id
from hyperpod_recovery.domain.record.fates import acted, copy_label, job_label
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.models.kubernetes import node_name_for_instance
from hyperpod_recovery.models.records import IncidentRecord, JobFate

SLURM_COMMANDS = re.compile(r"\b(scontrol|squeue|sinfo|sbatch|scancel|sacct)\b")
KUBERNETES_COMMANDS = re.compile(r"\bkubectl\b")
PLACEHOLDERS = [re.compile(r"`[^`]*<[a-z][a-z _-]*>[^`]*`"), re.compile(r"\{[a-z_]+\}"), re.compile(r"`[^`]*\.\.\.[^`]*`")]
# Sentences that speak of jobs without naming any: true of some jobs at best.
GENERIC_JOB_CLAIMS = re.compile(
    r"\b(jobs? (were|was) not resubmitted|resubmit (the|a|this) job\b|resubmit (it|them) (by hand|yourself)|resubmit the others|"
    r"restart (it|them) by hand|then resubmit (it|the job)|re-?create (the|this) job\b)",
    re.IGNORECASE,
)
# (``job 1001``, ``job with uid …`` and an EKS job by its kind, ``re-create PyTorchJob kubeflow/llama``)
RESTART = re.compile(r"\b(resubmit|re-create|recreate|restart)\s+(it|them|the job|job \S+|(?-i:[A-Z]\w*Job) \S+)\b", re.IGNORECASE)
NEGATED = re.compile(r"\b(not|never|would|don't)\s+(be\s+)?$", re.IGNORECASE)
# Commands that name nodes, and where the names are.
NODE_ARGUMENTS = [
    re.compile(r"sinfo -R -n (\S+)"),
    re.compile(r"nodename=(\S+)", re.IGNORECASE),
    re.compile(r"squeue -w (\S+)"),
    re.compile(r"kubectl describe nodes ((?:[^\s`;&|]+[ \t]?)+)"),
    re.compile(r"kubectl (?:get|describe|uncordon|cordon|drain) node (\S+)"),
    re.compile(r"kubectl (?:taint|annotate|label) nodes? (\S+)"),
    re.compile(r"kubectl uncordon ((?:[^\s`;&|]+[ \t]?)+)"),
    re.compile(r"spec\.nodeName=(\S+)"),
]
GIVE_BACK = [re.compile(r"nodename=(\S+) state=resume", re.IGNORECASE), re.compile(r"kubectl uncordon ((?:[^\s`;&|]+[ \t]?)+)")]


def _mentions(text: str, label: str) -> bool:
    """``label`` is said in ``text`` as a name of its own: ``PyTorchJob ns/llama-1`` is not said in
    ``HyperPodPyTorchJob ns/llama-1`` nor in ``PyTorchJob ns/llama-10`` or its copy ``ns/llama-1-r1``,
    ``job 1001`` not in ``job 10010`` (a substring would hide a job the message never names)."""
    return re.search(rf"(?<![\w/.-]){re.escape(label)}(?![\w/-]|\.\w)", text) is not None


def _copy_said(fate: JobFate, text: str) -> bool:
    """The job's copy is named: by its label (``job 1002``, ``PyTorchJob kubeflow/llama-r1``), or in a
    storm's summary as ``1001 -> 1002`` (Slurm; fates.copy_made_text), or, in an older record,
    ``<uid> -> llama-r1``."""
    if _mentions(text, copy_label(fate)):
        return True
    copies = [c for c in (fate.copy_id, fate.copy_name) if c]
    return any(re.search(rf"(?<![\w/.-]){re.escape(fate.job)} -> {re.escape(c)}(?![\w/-]|\.\w)", text) for c in copies)


def _names(found: str) -> list[str]:
    return [n for n in re.split(r"[,\s]+", found.strip("`;&|, ")) if n and not n.startswith("-")]


def _without_quoted_facts(record: IncidentRecord, text: str) -> str:
    """The message's own words: an error's text (the cause, a job's reason) is a fact it quotes."""
    for quoted in [record.cause or "", *(f.reason for f in record.job_fates), *(n.detail for n in record.node_fates)]:
        if len(quoted) > 8:
            text = text.replace(quoted, " ")
    return text


def _known_nodes(record: IncidentRecord) -> set[str]:
    names = set(record.hostnames) | set(record.nodes)
    for n in record.node_fates:
        names |= {n.node, *(x for x in (n.replacement_node, n.instance, n.replacement) if x)}
    if record.orchestrator == "eks":
        names |= {node_name_for_instance(i) for i in list(names) if i.startswith("i-")}
    return names


def contradictions(record: IncidentRecord, subject: str, body: str) -> list[str]:
    """Every claim of (subject, body) that the record contradicts; [] when the message is true to it."""
    found: list[str] = []
    text = f"{subject}\n{body}"
    own = _without_quoted_facts(record, text)
    # The commands a message gives are in backticks; an error's own text (sbatch's stderr) is a fact.
    quoted = re.findall(r"`([^`]*)`", own)
    commands = "\n".join(quoted)
    if record.orchestrator == "eks" and (m := SLURM_COMMANDS.search(commands)):
        found.append(f"a Slurm command ({m.group(0)}) in a message about an EKS cluster")
    if record.orchestrator == "slurm" and KUBERNETES_COMMANDS.search(commands):
        found.append("a kubectl command in a message about a Slurm cluster")
    found += [f"an unfilled placeholder: {m.group(0)}" for pattern in PLACEHOLDERS for m in pattern.finditer(own)]
    found += [f"says of jobs without naming them: {m.group(0)!r}" for m in GENERIC_JOB_CLAIMS.finditer(own)]
    if record.job_fates and "no job ran on these nodes" in own:
        found.append("says no job ran and names jobs")
    known = _known_nodes(record)
    for pattern in NODE_ARGUMENTS:
        for m in pattern.finditer(commands):
            found += [f"a command names {name}, which is no node of this incident" for name in _names(m.group(1)) if name not in known]
    giveable = {n.node for n in record.node_fates if n.held or n.fate == "unknown"}
    for pattern in GIVE_BACK:
        for m in pattern.finditer(commands):
            found += [f"gives back {name}, which this incident does not hold" for name in _names(m.group(1)) if name not in giveable]
    found += _restart_claims(record, own)
    for fate in record.job_fates:
        label = job_label(fate)
        about = [line for line in own.splitlines() if _mentions(line, label)]
        if fate.fate in ("resubmitted", "resubmitted_before") and fate.copy_id and not _copy_said(fate, text):
            found.append(f"{label}: its copy {copy_label(fate)} is not named")
        if fate.fate in ("not_resubmitted", "would_not_resubmit") and record.outcome != "rejected" and not _mentions(text, label):
            found.append(f"{label} was not resubmitted and the message does not name it")
        if fate.copy_state != "RUNNING" and any("runs again" in line for line in about):
            found.append(f"{label}: said to run again, its copy was {fate.copy_state or 'never seen'}")
    said_recovered = record.outcome == "recovered" or body.startswith("RECOVERED") or record.summary.startswith("Recovered")
    if said_recovered and not acted(record.job_fates, record.node_fates) and (record.job_fates or record.node_fates):
        found.append("says recovered of an incident that changed nothing")
    if record.outcome in ("escalated", "capped") and not (record.error and (record.cause or "").strip()):
        found.append("an escalation without its error and cause")
    if "Cause: -" in body and record.outcome in ("escalated", "capped", "aborted", "failed"):
        found.append("an empty cause")
    return found


def _restart_claims(record: IncidentRecord, own: str) -> list[str]:
    """Every instruction to restart a job names one that has no copy; a drill or "nothing to do" gives none."""
    found: list[str] = []
    labels = {job_label(f): f for f in record.job_fates}
    quiet = record.outcome == "dry_run" or "Nothing to do." in own
    for line in own.splitlines():
        asks = [m for m in RESTART.finditer(line) if not NEGATED.search(line[: m.start()][-14:])]
        if not asks:
            continue
        if quiet:
            found.append(f"asks for a restart in a message that says there is nothing to do: {asks[0].group(0)!r}")
            continue
        named = [fate for label, fate in labels.items() if _mentions(line, label)]
        if not named:
            found.append(f"an instruction to restart that names no job: {asks[0].group(0)!r}")
        found += [f"asks to start another copy of {job_label(f)}, which has one" for f in named if f.live_copy and f.fate != "copy_unknown"]
    return found


# --- a verdict notice (domain/messages/verdict_notice.py): HyperPod's own detector spoke; we only observed ---
SLURM_JOB_ARGUMENTS = [re.compile(r"scontrol show job (\S+)"), re.compile(r"sacct -j (\S+)"), re.compile(r"squeue -j (\S+)")]
KUBECTL_JOB = re.compile(r"kubectl -n (\S+) (?:get|describe) (\S+) (\S+)")
VERDICT_IDS = re.compile(r"verdicts (?:confirm|reject) (\S+)")
# What a notice may say we did, when we started nothing: nothing.
CLAIMS_AN_ACTION = re.compile(
    r"\b(recovery started|started a (job )?recovery|resubmitted|re-created|cordoned|drained|replaced)\b", re.IGNORECASE
)


# Where verdict_notice renders a fact (the detector's words, the cluster's name): masked by position,
# never by searching the text for the fact, which a short fact ("l", "DRAINED") finds in the notice's own words.
_BODY_FACT_LINES = [
    re.compile(r"^(  rule: .*?; its own rule: )(.*)(\))$"),
    re.compile(r"^(  where: )(.*)()$"),
    re.compile(r"^(  evidence: )(.*)()$"),
    re.compile(r"^(Verdict: .*?, cluster )(.*)(\))$"),
]
# (greedy: a cluster named "a: observed b" is masked whole; the rule and the job follow the last one)
_SUBJECT_CLUSTER = re.compile(r"^(\[hyperpod-recovery\] )(.*)(: observed )")


def _mask_body_facts(body: str) -> str:
    lines = body.split("\n")
    if len(lines) > 1:
        lines[1] = " "  # the summary, under the headline
    for i, line in enumerate(lines):
        for pattern in _BODY_FACT_LINES:
            if m := pattern.match(line):
                lines[i] = f"{m.group(1)} {m.group(3)}"
                break
    return "\n".join(lines)


def _mask_subject_facts(subject: str) -> str:
    """The subject less its cluster's name; a cut subject ("...") less everything after its prefix
    (where its cluster's name ends cannot be told)."""
    prefix = "[hyperpod-recovery] "
    if subject.endswith("...") and subject.startswith(prefix):
        return prefix
    return _SUBJECT_CLUSTER.sub(r"\1 \3", subject, count=1)


def verdict_contradictions(recorded: RecordedVerdict, subject: str, body: str) -> list[str]:
    """Every claim of a verdict notice that its recorded verdict contradicts; [] when it is true to it.

    The claims checked: the verdict's id (its "Verdict:" line, and the review commands) is the
    verdict's; its commands are the job's orchestrator's (the training operator's are EKS's, HyperPod's
    hung job detection Slurm's) and name the verdict's job only, with no placeholder; the subject names
    the rule and the job; it asks for no restart (the job stays HyperPod's), and claims no action of
    ours when none was taken; what HyperPod did is what the verdict recorded (cancelled only after a
    cancel; the operator's restart only for the operator's fault)."""
    verdict = recorded.verdict
    found: list[str] = []
    text = f"{subject}\n{body}"
    ident = verdict_id(verdict)
    named = re.search(r"^Verdict: (\S+)", body, re.MULTILINE)
    if named is None or named.group(1) != ident:
        found.append(f"names verdict {named.group(1) if named else 'none'}, not {ident}")
    commands = "\n".join(re.findall(r"`([^`]*)`", text))
    orchestrator = orchestrator_of(verdict)
    if orchestrator == "eks" and (m := SLURM_COMMANDS.search(commands)):
        found.append(f"a Slurm command ({m.group(0)}) about an EKS job")
    if orchestrator == "slurm" and KUBERNETES_COMMANDS.search(commands):
        found.append("a kubectl command about a Slurm job")
    # (in its commands: the detector's own words are quoted outside them, and a log stream named '{_}' is a fact)
    found += [
        f"an unfilled placeholder: {m.group(0)}"
        for pattern in PLACEHOLDERS
        for m in pattern.finditer(text if "`" in pattern.pattern else commands)
    ]
    for pattern in SLURM_JOB_ARGUMENTS:
        found += [f"a command names job {m.group(1)}, not {verdict.job}" for m in pattern.finditer(commands) if m.group(1) != verdict.job]
    for m in KUBECTL_JOB.finditer(commands):
        if f"{m.group(1)}/{m.group(3)}" != verdict.job or m.group(2) != OPERATOR_JOB_KIND.lower():
            found.append(f"a command names {m.group(2)} {m.group(1)}/{m.group(3)}, not {OPERATOR_JOB_KIND} {verdict.job}")
    found += [f"reviews verdict {m.group(1)}, not {ident}" for m in VERDICT_IDS.finditer(commands) if m.group(1) != ident]
    if not subject.endswith("...") and (verdict.rule not in subject or not _mentions(subject, job_named(verdict))):
        found.append(f"the subject does not name rule {verdict.rule} and {job_named(verdict)}")
    # (the detector's own words, quoted as facts, are not the notice's claims)
    imported = verdict.imported
    own = f"{_mask_subject_facts(subject)}\n{_mask_body_facts(body)}"
    asks = [m.group(0) for m in RESTART.finditer(own) if not NEGATED.search(own[: m.start()][-14:])]
    found += [f"asks for a restart of a job HyperPod handles: {a!r}" for a in asks]
    if recorded.execution is None:
        if "nothing: observed only" not in own:
            found.append("does not say that nothing was done")
        found += [f"claims an action nobody took: {m.group(0)!r}" for m in CLAIMS_AN_ACTION.finditer(own)]
    taken = imported.taken if imported else ""
    if "cancelled" in own and taken != "cancel":
        found.append(f"says the job was cancelled; HyperPod's action was {taken or 'not said'}")
    if re.search(r"restarts (it|the job) itself", own) and taken != "restarted":
        found.append(f"says the operator restarts the job; HyperPod's action was {taken or 'not said'}")
    return found
